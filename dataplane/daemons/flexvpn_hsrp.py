"""The HSRP side of the FlexVPN router daemon (dataplane.daemons.flexvpnd): one group's sockets, virtual IP
(macvlan with the virtual MAC) and timers around the pure state machine of dataplane.core.hsrp.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import time
from typing import Protocol

from labkit.configs import HsrpGroupConfig

from ..core import hsrp
from ..kernel.vip import Rtnl, Vip, link_index
from .evloop import Loop, Timer

IP_PKTINFO = 8
SOL_IP = 0


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


class Host(Protocol):
    """What a group needs from the daemon it runs in."""

    loop: Loop
    rtnl: Rtnl
    counters: dict[str, int]

    def hsrp_changed(self, group: HsrpGroup) -> None: ...


# ------------------------------------------------------------------------------------------ HSRP
class HsrpGroup:
    def __init__(self, daemon: Host, spec: HsrpGroupConfig):
        self.daemon = daemon
        self.spec = spec
        self.ifname = spec.interface
        self.alias = spec.alias
        self.address = spec.address
        config = hsrp.GroupConfig(
            group=spec.group, vip=spec.vip, priority=spec.priority,
            preempt=spec.preempt, preempt_delay=float(spec.preempt_delay),
            hello=spec.hello_ms / 1000, hold=spec.hold_ms / 1000,
            authentication=spec.authentication or hsrp.DEFAULT_AUTH, name=spec.name,
            version=spec.version or 1, timers_configured=spec.timers_configured,
        )
        self.machine = hsrp.HsrpMachine(config, self.address)
        self.vip = Vip(daemon.rtnl, spec.vip_ifname, self.ifname, config.mac, spec.vip)
        self.timer: Timer | None = None
        self.multicast = hsrp.GROUP_V2 if config.version == 2 else hsrp.GROUP_V1
        self.rx: socket.socket | None = None
        self.tx: socket.socket | None = None
        self.tx_vmac: socket.socket | None = None  # hellos of the Active router leave from the virtual MAC
        self.garp_timers: list[Timer] = []

    @property
    def state(self) -> hsrp.State:
        return self.machine.state

    def open(self) -> None:
        index = link_index(self.ifname) or 0
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, self.ifname.encode())
        rx.bind((self.multicast, hsrp.PORT))
        mreqn = socket.inet_aton(self.multicast) + socket.inet_aton(self.address) + struct.pack("=i", index)
        rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreqn)
        rx.setblocking(False)
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tx.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, self.ifname.encode())
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(self.address))
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
        tx.bind((self.address, hsrp.PORT))
        tx.setblocking(False)
        self.rx, self.tx = rx, tx
        self.daemon.loop.watch(rx, selectors.EVENT_READ, lambda _m: self.readable())

    def close(self) -> None:
        for sock in (self.rx, self.tx):
            if sock is not None:
                self.daemon.loop.unwatch(sock)
                sock.close()
        self.rx = self.tx = None
        self.close_vmac()

    def open_vmac(self) -> None:
        """A sender through the macvlan: the Active router's hellos carry the virtual MAC as source, so
        the switches keep the virtual MAC on its port (as IOS does); the source address stays ours."""
        self.close_vmac()
        index = link_index(self.vip.name)
        if index is None:
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, self.vip.name.encode())
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF,
                            bytes(4) + socket.inet_aton(self.address) + struct.pack("=i", index))
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
            sock.bind((self.address, hsrp.PORT))
        except OSError as exc:
            sock.close()
            log(f"hellos from the virtual MAC not possible ({exc}); using {self.ifname}")
            return
        self.tx_vmac = sock

    def close_vmac(self) -> None:
        if self.tx_vmac is not None:
            self.tx_vmac.close()
            self.tx_vmac = None

    def readable(self) -> None:
        assert self.rx is not None
        for _ in range(64):
            try:
                data, (source, _port) = self.rx.recvfrom(2048)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            try:
                packet = hsrp.decode(data)
            except hsrp.HsrpError:
                self.daemon.counters["hsrp_malformed"] += 1
                continue
            self.apply(self.machine.receive(packet, source, self.daemon.loop.time()))

    def send(self, packet: hsrp.HsrpPacket) -> None:
        sock = self.tx_vmac if packet.state is hsrp.State.ACTIVE and self.tx_vmac is not None else self.tx
        if sock is None:
            return
        try:
            sock.sendto(packet.encode(), (self.multicast, hsrp.PORT))
        except OSError:
            if sock is self.tx_vmac and self.tx is not None:  # the macvlan went away: the plain way
                with contextlib.suppress(OSError):
                    self.tx.sendto(packet.encode(), (self.multicast, hsrp.PORT))

    def apply(self, out: hsrp.Output) -> None:
        """Carry out what the state machine decided, then re-arm its timer."""
        was_active = any(old is hsrp.State.ACTIVE for old, _, _ in out.transitions[:1])
        if out.transitions and self.machine.state is hsrp.State.ACTIVE and not self.vip.owned:
            self.take_vip()  # before the first hello as Active, so that it leaves from the virtual MAC
        for packet in out.packets:
            self.send(packet)
        for old, new, reason in out.transitions:
            log(f"%HSRP-5-STATECHANGE: {self.alias} Grp {self.machine.config.group} state "
                f"{old.label} -> {new.label} ({reason})")
        if out.transitions:
            now_active = self.machine.state is hsrp.State.ACTIVE
            if now_active and not self.vip.owned:
                self.take_vip()
            elif not now_active and (self.vip.owned or was_active):
                self.release_vip()
            self.daemon.hsrp_changed(self)
        self.rearm()

    def take_vip(self) -> None:
        try:
            self.vip.take()
        except OSError as exc:
            log(f"cannot take the virtual IP {self.vip.address}: {exc}")
            return
        self.open_vmac()
        for delay in (0.5, 1.0):  # like IOS: a few gratuitous ARPs, so every switch and host learns it
            self.garp_timers.append(self.daemon.loop.call_later(delay, self.vip.announce))

    def release_vip(self) -> None:
        for timer in self.garp_timers:
            timer.cancel()
        self.garp_timers.clear()
        self.close_vmac()
        self.vip.release()

    def rearm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        deadline = self.machine.next_deadline()
        self.timer = None if deadline is None else self.daemon.loop.call_at(deadline, self.tick)

    def tick(self) -> None:
        self.timer = None
        self.apply(self.machine.tick(self.daemon.loop.time()))

    def link_event(self, up: bool) -> None:
        now = self.daemon.loop.time()
        if up and self.machine.state is hsrp.State.INIT:
            log(f"{self.alias}: interface up")
            self.apply(self.machine.enable(now))
        elif not up and self.machine.state is not hsrp.State.INIT:
            log(f"{self.alias}: interface down")
            self.apply(self.machine.disable(now))

    def status(self, wall: float) -> dict[str, object]:
        status = self.machine.status(self.daemon.loop.time(), wall)
        status["interface"] = self.alias
        status["linux_interface"] = self.ifname
        status["address"] = self.address
        status["vip_interface"] = self.vip.name
        status["vip_owned"] = self.vip.owned
        return status


