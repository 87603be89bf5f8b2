"""FlexVPN router daemon: HSRP + IKEv2 cluster (CLB) + IKEv2 gateway in one process per router.

A control plane only; the kernel forwards. One single-threaded event loop (dataplane.evloop):

* HSRP (dataplane.hsrp) per configured group: hellos over UDP 1985 to 224.0.0.2 from the
  interface address, TTL 1; the virtual IP (dataplane.vip) is added to a macvlan with the virtual
  MAC on becoming Active (then gratuitous ARP) and removed on leaving Active; interface carrier
  is watched over netlink (down: the group goes to Init).
* CLB (dataplane.clb): the Active router of the cluster's standby group is the master; it
  listens on TCP `port` and keeps the members' loads; the others connect to the VIP, send hellos
  and load updates; a member silent for the hold time is dropped; a member that loses its master
  reconnects.
* IKEv2 (dataplane.ikev2.gateway) on UDP 500 and 4500: the master redirects new clients that
  support it to the least-loaded gateway; everyone serves the clients that reach it.

Status: `hsrp-status.json` and `ikev2-status.json` in the node's folder, rewritten on every change
and at least once a second.

    python -m dataplane.flexvpnd /run/lab/LAB/nodes/NODE/flexvpn.json
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from labkit.files import write_json

from . import clb, hsrp
from .daemonkit import resumed_status
from .evloop import Loop, Timer
from .vip import IFF_RUNNING, IFF_UP, LinkMonitor, Rtnl, Vip, link_flags, link_index

IP_PKTINFO = 8
SOL_IP = 0


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


# ------------------------------------------------------------------------------------------ HSRP
class HsrpGroup:
    def __init__(self, daemon: Daemon, spec: dict[str, Any]):
        self.daemon = daemon
        self.spec = spec
        self.ifname: str = spec["interface"]
        self.alias: str = spec["alias"]
        self.address: str = spec["address"]
        config = hsrp.GroupConfig(
            group=int(spec["group"]), vip=spec["vip"], priority=int(spec["priority"]),
            preempt=bool(spec["preempt"]), preempt_delay=float(spec.get("preempt_delay") or 0),
            hello=spec["hello_ms"] / 1000, hold=spec["hold_ms"] / 1000,
            authentication=spec.get("authentication") or hsrp.DEFAULT_AUTH, name=spec.get("name"),
            version=int(spec.get("version") or 1), timers_configured=bool(spec.get("timers_configured")),
        )
        self.machine = hsrp.HsrpMachine(config, self.address)
        self.vip = Vip(daemon.rtnl, spec["vip_ifname"], self.ifname, config.mac, spec["vip"])
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


# ------------------------------------------------------------------------------------------ CLB
class Connection:
    """One CLB TCP connection (either side), non-blocking with an output buffer."""

    def __init__(self, daemon: Daemon, sock: socket.socket, peer: str, on_message: Any, on_close: Any):
        self.daemon, self.sock, self.peer = daemon, sock, peer
        self.reader = clb.Reader()
        self.out = b""
        self.on_message, self.on_close = on_message, on_close
        self.closed = False
        self.connected = True
        sock.setblocking(False)
        daemon.loop.watch(sock, selectors.EVENT_READ, self.ready)

    def ready(self, mask: int) -> None:
        if mask & selectors.EVENT_WRITE:
            if not self.connected:
                error = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if error:
                    self.close(os.strerror(error))
                    return
                self.connected = True
            self.flush()
        if self.closed or not mask & selectors.EVENT_READ:
            return
        try:
            data = self.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(str(exc))
            return
        if not data:
            self.close("closed by peer")
            return
        try:
            messages = self.reader.feed(data)
        except clb.ClbError as exc:
            self.daemon.counters["clb_malformed"] += 1
            self.close(f"malformed CLB input: {exc}")
            return
        for message in messages:
            if self.closed:
                return
            self.on_message(self, message)

    def send(self, message: clb.Message) -> None:
        if self.closed:
            return
        self.out += clb.encode(message)
        if len(self.out) > 65536:
            self.close("peer does not read")
            return
        if self.connected:
            self.flush()

    def flush(self) -> None:
        if self.out and self.connected:
            try:
                sent = self.sock.send(self.out)
                self.out = self.out[sent:]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as exc:
                self.close(str(exc))
                return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.out or not self.connected else 0)
        self.daemon.loop.watch(self.sock, events, self.ready)

    def close(self, why: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.daemon.loop.unwatch(self.sock)
        with contextlib.suppress(OSError):
            self.sock.close()
        self.on_close(self, why)


class Cluster:
    """`crypto ikev2 cluster`: master or member depending on the standby group's HSRP state."""

    def __init__(self, daemon: Daemon, spec: dict[str, Any], group: HsrpGroup | None):
        self.daemon, self.spec, self.group = daemon, spec, group
        self.port = int(spec["port"])
        self.hello = spec["hello_ms"] / 1000
        self.update = spec["update_ms"] / 1000
        self.holdtime = spec["holdtime_ms"] / 1000
        self.priority = int(spec["priority"])
        self.max_session = int(spec["max_session"])
        self.weights = clb.Weights(int(spec["weight_system_load"]), int(spec["weight_crypto_load"]))
        self.overload = float(spec["overload_limit"])
        self.shutdown = bool(spec["shutdown"])
        self.strict = bool(spec.get("strict_overload"))
        self.address = group.address if group else ""
        self.cluster_ip = group.vip.address if group else ""
        self.role = "none"
        # master side
        self.master: clb.Master | None = None
        self.listener: socket.socket | None = None
        self.members: dict[Connection, str] = {}
        self.expire_timer: Timer | None = None
        # member side
        self.conn: Connection | None = None
        self.seq = 0
        self.last_ack: float | None = None
        self.up_since: float | None = None
        self.member_timers: list[Timer] = []
        self.reconnect_timer: Timer | None = None
        self.last_sent_load: tuple[int, ...] | None = None
        self.update_soon: Timer | None = None
        self.events: deque[str] = deque(maxlen=30)

    # ---------------------------------------------------------------- role
    def desired_role(self) -> str:
        if self.shutdown or self.group is None:
            return "none"
        state = self.group.state
        if state is hsrp.State.ACTIVE:
            return "master"
        if state in (hsrp.State.LISTEN, hsrp.State.SPEAK, hsrp.State.STANDBY):
            return "slave"
        return "none"

    def refresh_role(self) -> None:
        role = self.desired_role()
        if role == self.role:
            return
        log(f"IKEv2 cluster: role {self.role} -> {role}")
        self.events.append(f"{time.strftime('%H:%M:%S')} role {self.role} -> {role}")
        self.stop_master()
        self.stop_member()
        self.role = role
        if role == "master":
            self.start_master()
        elif role == "slave":
            self.start_member()

    # ---------------------------------------------------------------- master
    def start_master(self) -> None:
        self.master = clb.Master(self.address, self.holdtime, self.overload, self.weights)
        self.refresh_local()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", self.port))
        listener.listen(64)
        listener.setblocking(False)
        self.listener = listener
        self.daemon.loop.watch(listener, selectors.EVENT_READ, lambda _m: self.accept())
        self.expire_timer = self.daemon.loop.call_later(min(0.1, self.holdtime / 10), self.expire)

    def stop_master(self) -> None:
        if self.listener is not None:
            self.daemon.loop.unwatch(self.listener)
            self.listener.close()
            self.listener = None
        for conn in list(self.members):
            conn.close("no longer master")
        self.members.clear()
        if self.expire_timer is not None:
            self.expire_timer.cancel()
            self.expire_timer = None
        self.master = None

    def accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                sock, (address, _port) = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self.daemon, sock, address, self.master_message, self.master_closed)
            self.members[conn] = address

    def master_message(self, conn: Connection, message: clb.Message) -> None:
        if self.master is None:
            return
        now = self.daemon.loop.time()
        if isinstance(message, clb.Hello):
            if message.address != conn.peer:
                conn.close(f"hello claims {message.address} from {conn.peer}")
                return
            if message.address not in self.master.members:
                log(f"IKEv2 cluster: member {message.address} joined")
                self.events.append(f"{time.strftime('%H:%M:%S')} member {message.address} joined")
            conn.send(self.master.hello(message, now))
        elif isinstance(message, clb.Load):
            if message.address != conn.peer:
                conn.close(f"load update claims {message.address} from {conn.peer}")
                return
            self.master.update(message, now)
        elif isinstance(message, clb.Bye):
            conn.close("member said bye")
        self.daemon.status_dirty()

    def master_closed(self, conn: Connection, why: str) -> None:
        address = self.members.pop(conn, None)
        if self.master is not None and address and address in self.master.members \
                and address not in self.members.values():
            self.master.remove(address, self.daemon.loop.time(), why)
            log(f"IKEv2 cluster: member {address} dropped ({why})")
            self.events.append(f"{time.strftime('%H:%M:%S')} member {address} dropped ({why})")
        self.daemon.status_dirty()

    def expire(self) -> None:
        if self.master is None:
            return
        now = self.daemon.loop.time()
        for address in self.master.expire(now):
            log(f"IKEv2 cluster: member {address} dropped (hold time {self.holdtime * 1000:.0f} msec expired)")
            self.events.append(f"{time.strftime('%H:%M:%S')} member {address} dropped (hold time)")
            for conn, peer in list(self.members.items()):
                if peer == address:
                    conn.close("hold time expired")
            self.daemon.status_dirty()
        self.expire_timer = self.daemon.loop.call_later(min(0.1, self.holdtime / 10), self.expire)

    def refresh_local(self) -> None:
        if self.master is None:
            return
        counts = self.daemon.crypto_counts()
        local = self.master.local
        local.priority, local.max_session = self.priority, self.max_session
        local.cpu, local.memory = self.daemon.cpu_percent(), self.daemon.memory_percent(self.spec)
        local.ike, local.ipsec, local.half_open = counts["ike"], counts["ipsec"], counts["half_open"]
        local.arrivals = counts["arrivals"]
        self.master.settle_local(counts.get("settled", 0))

    def choose(self) -> str | None:
        """The master's choice for a new client (an address; ours means: serve it here)."""
        if self.master is None:
            return None
        self.refresh_local()
        choice = self.master.choose(self.daemon.loop.time())
        self.daemon.status_dirty()
        return choice

    # ---------------------------------------------------------------- member
    def start_member(self) -> None:
        self.connect()

    def stop_member(self) -> None:
        for timer in self.member_timers:
            timer.cancel()
        self.member_timers.clear()
        if self.reconnect_timer is not None:
            self.reconnect_timer.cancel()
            self.reconnect_timer = None
        if self.update_soon is not None:
            self.update_soon.cancel()
            self.update_soon = None
        if self.conn is not None:
            conn, self.conn = self.conn, None
            conn.send(clb.Bye(self.address))
            conn.close("role change")
        self.last_ack = None
        self.up_since = None

    def connect(self) -> None:
        self.reconnect_timer = None
        if self.role != "slave":
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with contextlib.suppress(OSError):
            sock.bind((self.address, 0))
        sock.setblocking(False)
        try:
            sock.connect((self.cluster_ip, self.port))
            connected = True
        except BlockingIOError:
            connected = False
        except OSError as exc:
            sock.close()
            self.retry(str(exc))
            return
        conn = Connection(self.daemon, sock, self.cluster_ip, self.member_message, self.member_closed)
        conn.connected = connected
        self.conn = conn
        self.last_ack = None
        self.connected_at = self.daemon.loop.time()
        self.last_sent_load = None
        conn.flush()
        self.send_hello()
        self.send_load()

    def retry(self, why: str) -> None:
        if self.role == "slave" and self.reconnect_timer is None:
            self.reconnect_timer = self.daemon.loop.call_later(min(1.0, self.hello), self.connect)

    def member_message(self, conn: Connection, message: clb.Message) -> None:
        if isinstance(message, clb.HelloAck):
            now = self.daemon.loop.time()
            if self.last_ack is None:
                log(f"IKEv2 cluster: connected to master {message.address} (cluster IP {self.cluster_ip})")
                self.up_since = now
            self.last_ack = now
            self.daemon.status_dirty()
        elif isinstance(message, clb.Bye):
            conn.close("master said bye")

    def member_closed(self, conn: Connection, why: str) -> None:
        if conn is not self.conn:
            return
        self.conn = None
        if self.last_ack is not None:
            log(f"IKEv2 cluster: lost the master ({why})")
        for timer in self.member_timers:
            timer.cancel()
        self.member_timers.clear()
        self.last_ack = None
        self.up_since = None
        self.daemon.status_dirty()
        self.retry(why)

    def send_hello(self) -> None:
        if self.conn is None or self.role != "slave":
            return
        now = self.daemon.loop.time()
        reference = self.last_ack if self.last_ack is not None else self.connected_at
        if now - reference > self.holdtime:
            self.conn.close(f"no hello acknowledgement for {self.holdtime * 1000:.0f} msec")
            return
        self.seq += 1
        self.conn.send(clb.Hello(self.address, self.seq, round(self.hello * 1000), round(self.holdtime * 1000)))
        self.member_timers = [t for t in self.member_timers if not t.cancelled]
        self.member_timers.append(self.daemon.loop.call_later(self.hello, self.send_hello))

    def overloaded_self(self) -> bool:
        """This gateway's own load at or above the overload limit, or its SAs at max-session (the
        master's test for a row, on our own figures)."""
        counts = self.daemon.crypto_counts()
        own = clb.Gateway(self.address, "Master" if self.role == "master" else "Slave", self.priority,
                          self.daemon.cpu_percent(), self.daemon.memory_percent(self.spec), self.max_session,
                          counts["ike"], counts["ipsec"])
        return own.overloaded(self.daemon.loop.time(), self.weights, self.overload)

    def own_load(self) -> clb.Load:
        counts = self.daemon.crypto_counts()
        self.seq += 1
        return clb.Load(self.address, self.seq, self.priority, self.daemon.cpu_percent(),
                        self.daemon.memory_percent(self.spec), self.max_session, counts["ike"], counts["ipsec"],
                        counts["half_open"], counts["arrivals"])

    def send_load(self) -> None:
        if self.conn is None or self.role != "slave":
            return
        load = self.own_load()
        self.conn.send(load)
        self.last_sent_load = (load.ike, load.ipsec, load.half_open, load.arrivals)
        self.member_timers.append(self.daemon.loop.call_later(self.update, self.send_load))

    def crypto_changed(self) -> None:
        """SA counts moved: members tell the master soon (coalesced), not only every update interval."""
        if self.role == "master":
            self.refresh_local()
            return
        if self.conn is None or self.update_soon is not None:
            return

        def push() -> None:
            self.update_soon = None
            if self.conn is None:
                return
            counts = self.daemon.crypto_counts()
            if self.last_sent_load != (counts["ike"], counts["ipsec"], counts["half_open"], counts["arrivals"]):
                load = self.own_load()
                self.conn.send(load)
                self.last_sent_load = (load.ike, load.ipsec, load.half_open, load.arrivals)

        self.update_soon = self.daemon.loop.call_later(0.02, push)

    # ---------------------------------------------------------------- status
    def status(self, wall: float) -> dict[str, object]:
        now = self.daemon.loop.time()
        base: dict[str, object] = {
            "role": self.role, "shutdown": self.shutdown, "cluster_ip": self.cluster_ip,
            "address": self.address, "holdtime_ms": round(self.holdtime * 1000),
            "hello_ms": round(self.hello * 1000), "update_ms": round(self.update * 1000),
            "overload_limit": int(self.overload), "port": self.port, "events": list(self.events),
            "strict_overload": self.strict,
            "standby_group": self.spec["standby_group"],
        }
        if self.role == "master" and self.master is not None:
            self.refresh_local()
            base["status"] = "Up"
            base["rows"] = self.master.status(now, wall)
            base["redirects"] = self.master.redirects
            base["dropped"] = [{"at": wall - (now - t), "address": a, "why": w} for t, a, w in self.master.dropped]
        elif self.role == "slave":
            counts = self.daemon.crypto_counts()
            load = clb.load_percent(self.daemon.cpu_percent(), self.daemon.memory_percent(self.spec),
                                    counts["ike"], counts["ipsec"], self.max_session, self.priority, self.weights)
            base["status"] = "Up" if self.last_ack is not None else "Down"
            base["own"] = {
                "address": self.address, "priority": self.priority, "load": round(load, 1),
                "ike": counts["ike"], "ipsec": counts["ipsec"], "overloaded": self.overloaded_self(),
                "last_ack_at": None if self.last_ack is None else wall - (now - self.last_ack),
            }
        return base


# ------------------------------------------------------------------------------------------ daemon
class Daemon:
    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.loop = Loop()
        self.rtnl = Rtnl()
        self.counters: dict[str, int] = {"hsrp_malformed": 0, "clb_malformed": 0, "ike_malformed": 0}
        self.groups = [HsrpGroup(self, spec) for spec in config.get("groups", [])]
        cluster_spec = config.get("cluster")
        self.cluster: Cluster | None = None
        if cluster_spec:
            group = next((g for g in self.groups if g.spec.get("name") == cluster_spec["standby_group"]), None)
            self.cluster = Cluster(self, cluster_spec, group)
        self.ike: Any = None
        if config.get("ikev2"):
            from .ikev2.service import IkeService

            self.ike = IkeService(self, config["ikev2"])
        self.monitor: LinkMonitor | None = None
        self.cpu_samples: deque[tuple[float, float]] = deque(maxlen=8)
        self.resident = 0
        self._dirty = True
        self.started = time.time()

    # ---------------------------------------------------------------- load inputs
    def sample_cpu(self) -> None:
        """Once a second: CPU time used (for the 5 s average) and resident memory (for the load)."""
        times = os.times()
        self.cpu_samples.append((self.loop.time(), times.user + times.system))
        try:
            self.resident = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            self.resident = 0
        self.loop.call_later(1.0, self.sample_cpu)

    def cpu_percent(self) -> float:
        """CPU of this router (its daemon) over about the last 5 s, % of one core."""
        if len(self.cpu_samples) < 2:
            return 0.0
        now, used = self.cpu_samples[-1]
        old = next((s for s in self.cpu_samples if now - s[0] <= 5.5), self.cpu_samples[0])
        span = now - old[0]
        return 0.0 if span <= 0 else min(100.0, 100.0 * (used - old[1]) / span)

    def memory_percent(self, spec: dict[str, Any]) -> float:
        """Resident memory of this router (its daemon) in % of the router's memory (`memory_mib`)."""
        return min(100.0, 100.0 * self.resident / (int(spec.get("memory_mib") or 512) * 1024 * 1024))

    def crypto_counts(self) -> dict[str, int]:
        if self.ike is None:
            return {"ike": 0, "ipsec": 0, "half_open": 0, "arrivals": 0}
        counts: dict[str, int] = self.ike.counts()
        return counts

    # ---------------------------------------------------------------- events between parts
    def hsrp_changed(self, group: HsrpGroup) -> None:
        if self.cluster is not None and self.cluster.group is group:
            self.cluster.refresh_role()
        self.status_dirty()

    def crypto_changed(self) -> None:
        if self.cluster is not None:
            self.cluster.crypto_changed()
        self.status_dirty()

    def admits(self) -> bool:
        """May this gateway take a new IKE SA? Not while overloaded with the cluster's strict_overload."""
        return self.cluster is None or not self.cluster.strict or not self.cluster.overloaded_self()

    def redirect_target(self, local_address: str) -> str | None:
        """Where the cluster master sends a client that reached LOCAL_ADDRESS (None: serve here)."""
        if self.cluster is None or self.cluster.role != "master" or local_address != self.cluster.cluster_ip:
            return None
        choice = self.cluster.choose()
        if choice is None or choice == self.cluster.address:
            return None
        return choice

    # ---------------------------------------------------------------- status
    def status_dirty(self) -> None:
        self._dirty = True

    def write_status(self) -> None:
        self._dirty = False
        wall = time.time()
        base = {"node": self.config["node"], "pid": os.getpid(), "updated_at": wall, "started_at": self.started}
        if self.config.get("hsrp_status") and self.groups:
            write_json(self.config["hsrp_status"], {**base, "groups": [g.status(wall) for g in self.groups],
                                                     "counters": dict(self.counters)}, indent=1)
        if self.config.get("ikev2_status") and (self.cluster is not None or self.ike is not None):
            data: dict[str, Any] = {**base, "cluster": self.cluster.status(wall) if self.cluster else None,
                                    "warnings": self.config.get("warnings", []), "counters": dict(self.counters),
                                    "cpu": round(self.cpu_percent(), 2),
                                    "memory": round(self.memory_percent(self.config.get("cluster") or {}), 2)}
            if self.ike is not None:
                data.update(self.ike.status(wall))
            write_json(self.config["ikev2_status"], data, indent=1)

    def status_tick(self) -> None:
        self.write_status()
        self.loop.call_later(1.0, self.status_tick)

    def flush_status(self) -> None:
        if self._dirty:
            self.write_status()
        self.loop.call_later(0.05, self.flush_status)

    # ---------------------------------------------------------------- links
    def links(self) -> None:
        assert self.monitor is not None
        events = self.monitor.read()
        for group in self.groups:
            index = link_index(group.ifname)
            if any(i == -1 or i == index for i, _ in events):
                flags = link_flags(group.ifname)
                group.link_event(bool(flags & IFF_UP) and bool(flags & IFF_RUNNING))

    # ---------------------------------------------------------------- run
    def start(self) -> None:
        for warning in self.config.get("warnings", []):
            log(warning.replace("\n", " "))
        self.monitor = LinkMonitor()
        self.loop.watch(self.monitor, selectors.EVENT_READ, lambda _m: self.links())
        previous = resumed_status(self.config["hsrp_status"]) if self.config.get("hsrp_status") else None
        was_active = {(g.get("interface"), g.get("group")) for g in (previous or {}).get("groups", [])
                      if isinstance(g, dict) and g.get("state") == "Active" and g.get("vip_owned")}
        for group in self.groups:
            flags = link_flags(group.ifname)
            carrier = bool(flags & IFF_UP and flags & IFF_RUNNING)
            resume = carrier and (group.alias, group.machine.config.group) in was_active \
                and link_index(group.vip.name) is not None
            if resume:  # restarted after a crash while Active: the macvlan still holds the VIP
                group.vip.owned = True
            else:
                try:
                    group.vip.prepare()
                except OSError as exc:
                    log(f"cannot prepare {group.vip.name} on {group.ifname}: {exc}")
            group.open()
            if resume:
                log(f"{group.alias} group {group.machine.config.group}: resumed as Active after a restart")
                group.open_vmac()
                group.apply(group.machine.resume_active(self.loop.time()))
            elif carrier:
                group.apply(group.machine.enable(self.loop.time()))
            else:
                log(f"{group.alias}: interface down, group {group.machine.config.group} stays in Init")
        if self.ike is not None:
            self.ike.open()
        if self.cluster is not None:
            self.cluster.refresh_role()
        self.sample_cpu()
        self.status_tick()
        self.flush_status()

    def stop(self) -> None:
        """Graceful stop: Resign, give the VIP back, say bye to the cluster."""
        now = self.loop.time()
        for group in self.groups:
            if group.machine.state is not hsrp.State.INIT:
                group.apply(group.machine.disable(now))
            group.release_vip()
            group.vip.remove()
            group.close()
        if self.cluster is not None:
            self.cluster.stop_member()
            self.cluster.stop_master()
        if self.ike is not None:
            self.ike.close()
        self.write_status()

    def run(self) -> None:
        def on_term(signum: int, frame: object) -> None:
            self.loop.stop()

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        self.start()
        try:
            self.loop.run()
        finally:
            self.stop()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m dataplane.flexvpnd CONFIG.json", file=sys.stderr)
        return 2
    config = json.loads(Path(argv[1]).read_text())
    daemon = Daemon(config)
    groups = ", ".join(f"{g.alias} group {g.machine.config.group} VIP {g.vip.address} priority "
                       f"{g.machine.config.priority}" for g in daemon.groups)
    log(f"flexvpnd {config['node']}: HSRP [{groups or 'none'}], cluster "
        f"{'on' if daemon.cluster else 'off'}, IKEv2 {'on' if daemon.ike else 'off'}")
    try:
        daemon.run()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            log(f"address in use: {exc}")
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
