"""HSRP (RFC 2281): a pure state machine (the wire codec is dataplane.core.hsrp_packet, re-exported here).

Nothing here touches a socket or the kernel. `HsrpMachine` is driven by three calls, each given the
current time (seconds, monotonic) and each returning an `Output` (packets to send, state changes):

    enable(now) / disable(now)      interface (or group) up / down              events a, b
    receive(packet, source, now)    an HSRP message from another router          events f-l
    tick(now)                       timers: Active, Standby, Hello, preemption   events c, d, e

The daemon (dataplane.daemons.flexvpnd) sends the packets, moves the virtual IP when the state enters or
leaves Active, and calls `tick` at `next_deadline()`.

State machine (RFC 2281 section 5, with Cisco's behaviour where the RFC leaves a choice):

* Initial --enable--> Listen (virtual IP configured) or Learn (not configured: learnt from the
  Active router's Hello). Both timers start at the hold time.
* Listen: silent. Active timer expiry (no Active heard for a hold time) or Standby timer expiry
  (no Standby heard) -> Speak. A Hello from a Standby router ranked lower than us -> Speak.
* Speak: sends Hellos. A Hello from a Speak or Standby router ranked higher -> Listen. Standby
  timer expiry (a whole hold time spent speaking, nobody better) -> Standby. Active timer expiry with
  no Standby known -> Active.
* Standby: sends Hellos. Active timer expiry or a Resign from the Active router -> Active. A Hello
  from a higher-ranked Speak/Standby router -> Listen.
* Active: owns the virtual IP and MAC. A Hello from another Active ranked higher, or a Coup from a
  higher-ranked router -> Speak (a Resign is sent first on a Coup). A Hello from a lower-ranked
  Active -> Coup (it steps down).
* Preemption (off by default): a router in Listen/Speak/Standby that hears an Active router ranked
  lower sends a Coup and becomes Active, but not before `preempt_delay` seconds after it was enabled.
* Rank: priority, then the higher IP address (RFC 2281 5.1). Messages with another group, wrong
  authentication data or from our own address are ignored (and counted).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from ipaddress import IPv4Address

from labkit.flexstatus import HsrpGroupStatus

from .hsrp_packet import (
    DEFAULT_AUTH,
    GROUP_V1,
    GROUP_V2,
    PORT,
    HsrpError,
    HsrpPacket,
    Op,
    State,
    auth_bytes,
    cisco_mac,
    decode,
    virtual_mac,
)

__all__ = ["DEFAULT_AUTH", "GROUP_V1", "GROUP_V2", "PORT", "GroupConfig", "HsrpError", "HsrpMachine", "HsrpPacket",
           "Op", "Output", "State", "cisco_mac", "decode", "show_standby", "virtual_mac"]


# ------------------------------------------------------------------------------------------ config
@dataclass(frozen=True)
class GroupConfig:
    group: int
    vip: str | None
    priority: int = 100
    preempt: bool = False
    preempt_delay: float = 0.0
    hello: float = 3.0
    hold: float = 10.0
    authentication: str = DEFAULT_AUTH
    name: str | None = None
    version: int = 1
    timers_configured: bool = False  # learnt from the Active router when not configured

    @property
    def mac(self) -> str:
        return virtual_mac(self.group, self.version)


@dataclass
class Peer:
    address: str
    priority: int
    expires: float  # when its timer (Active or Standby) runs out


@dataclass
class Output:
    packets: list[HsrpPacket] = field(default_factory=list)
    transitions: list[tuple[State, State, str]] = field(default_factory=list)

    def extend(self, other: Output) -> None:
        self.packets += other.packets
        self.transitions += other.transitions


def _rank(priority: int, address: str) -> tuple[int, int]:
    return priority, int(IPv4Address(address))


class HsrpMachine:
    """One HSRP group on one interface of this router (see the module docstring)."""

    def __init__(self, config: GroupConfig, address: str):
        self.config = config
        self.address = address  # our own interface address
        self.state = State.INIT
        self.vip = config.vip
        self.hello = config.hello
        self.hold = config.hold
        self.active: Peer | None = None
        self.standby: Peer | None = None
        self.active_timer: float | None = None
        self.standby_timer: float | None = None
        self.hello_timer: float | None = None
        self.preempt_at: float | None = None
        self.enabled_at: float | None = None
        self.last_change: float | None = None
        self.changes = 0
        self.ignored: dict[str, int] = {"auth": 0, "group": 0, "own": 0}
        self.last_hello_sent: float | None = None
        self.deferred_to: str | None = None  # the higher Speak router we went back to Listen for

    # ---------------------------------------------------------------- helpers
    @property
    def rank(self) -> tuple[int, int]:
        return _rank(self.config.priority, self.address)

    def _packet(self, op: Op) -> HsrpPacket:
        return HsrpPacket(op, self.state, self.hello, self.hold, self.config.priority, self.config.group,
                          self.vip or "0.0.0.0", auth_bytes(self.config.authentication), self.config.version)

    def _goto(self, new: State, now: float, reason: str, out: Output) -> None:
        old = self.state
        if new is old:
            return
        self.state = new
        self.changes += 1
        self.last_change = now
        out.transitions.append((old, new, reason))
        if new in (State.SPEAK, State.STANDBY, State.ACTIVE):
            self._send_hello(now, out)  # the others learn the new state at once
        else:
            self.hello_timer = None
        if new is State.SPEAK:
            self.standby_timer = now + self.hold  # B: a whole hold time of speaking before Standby
            if self.active is None:
                self.active_timer = now + self.hold
        elif new is State.STANDBY:
            self.standby = None  # the Standby router is us
            self.standby_timer = None
            if self.active is None and self.active_timer is None:
                self.active_timer = now + self.hold
        elif new is State.ACTIVE:
            self.active = None  # the Active router is us
            self.active_timer = None
            self.preempt_at = None
        elif new is State.LISTEN:
            if self.standby_timer is None:
                self.standby_timer = now + self.hold
            if self.active_timer is None:
                self.active_timer = now + self.hold

    def _send_hello(self, now: float, out: Output) -> None:
        out.packets.append(self._packet(Op.HELLO))
        self.hello_timer = now + self.hello
        self.last_hello_sent = now

    # ---------------------------------------------------------------- events a, b
    def enable(self, now: float) -> Output:
        out = Output()
        if self.state is not State.INIT:
            return out
        self.enabled_at = now
        self.active_timer = now + self.hold
        self.standby_timer = now + self.hold
        self._goto(State.LISTEN if self.vip else State.LEARN, now, "interface up", out)
        return out

    def resume_active(self, now: float) -> Output:
        """Restarted after a crash while Active (the virtual IP still on this router): Active again
        at once, with a hello now, instead of listening a hold time while the Standby takes over."""
        out = Output()
        if self.state is not State.INIT:
            return out
        self.enabled_at = now
        self._goto(State.ACTIVE, now, "resumed after a restart", out)
        return out

    def disable(self, now: float) -> Output:
        out = Output()
        if self.state is State.INIT:
            return out
        if self.state is State.ACTIVE:
            out.packets.append(self._packet(Op.RESIGN))
        self.active = self.standby = None
        self.active_timer = self.standby_timer = self.hello_timer = self.preempt_at = None
        self._goto(State.INIT, now, "interface down", out)
        if self.config.vip is None:
            self.vip = None
        return out

    # ---------------------------------------------------------------- events f-l
    def receive(self, packet: HsrpPacket, source: str, now: float) -> Output:
        out = Output()
        if self.state is State.INIT:
            return out
        if source == self.address:
            self.ignored["own"] += 1
            return out
        if packet.group != self.config.group or packet.version != self.config.version:
            self.ignored["group"] += 1
            return out
        if packet.auth != auth_bytes(self.config.authentication):
            self.ignored["auth"] += 1
            return out
        theirs = _rank(packet.priority, source)
        better = theirs > self.rank
        if packet.op is Op.HELLO:
            if packet.state is State.ACTIVE:
                self._hello_from_active(packet, source, better, now, out)
            elif packet.state is State.STANDBY:
                self._hello_from_standby(packet, source, better, now, out)
            elif packet.state is State.SPEAK and better:
                if self.state in (State.SPEAK, State.STANDBY, State.LISTEN):
                    self.standby_timer = now + packet.holdtime  # B: it is about to become the Standby router
                    self.deferred_to = source
                if self.state in (State.SPEAK, State.STANDBY):
                    self._goto(State.LISTEN, now, f"higher priority Speak from {source}", out)
            if self.active is not None and self.active.address == source and packet.state is not State.ACTIVE:
                self.active = None  # it stepped down; its timer keeps running until someone takes over
        elif packet.op is Op.COUP:
            if self.state is State.ACTIVE:
                if better:
                    out.packets.append(self._packet(Op.RESIGN))
                    self.active = Peer(source, packet.priority, now + self.hold)
                    self.active_timer = now + self.hold
                    self._goto(State.SPEAK, now, f"Coup from {source}", out)
            else:
                self.active = Peer(source, packet.priority, now + self.hold)
                self.active_timer = now + self.hold
                if self.standby is not None and self.standby.address == source:
                    self.standby = None
        elif packet.op is Op.RESIGN and self.active is not None and self.active.address == source:
            self.active = None
            self.active_timer = now + self.hold
            if self.state is State.STANDBY:
                self._goto(State.ACTIVE, now, f"Resign from {source}", out)
        return out

    def _learn(self, packet: HsrpPacket) -> None:
        """E: the virtual IP (if not configured) and timers (if not configured), from the Active."""
        if self.config.vip is None and packet.vip != "0.0.0.0":
            self.vip = packet.vip
        if not self.config.timers_configured and packet.hellotime > 0 and packet.holdtime > packet.hellotime:
            self.hello, self.hold = packet.hellotime, packet.holdtime

    def _hello_from_active(self, packet: HsrpPacket, source: str, better: bool, now: float, out: Output) -> None:
        if self.state is State.ACTIVE:
            if better:  # two Active routers: the lower one steps down (g)
                self.active = Peer(source, packet.priority, now + packet.holdtime)
                self.active_timer = now + packet.holdtime
                self._goto(State.SPEAK, now, f"higher priority Active from {source}", out)
            else:  # (h) tell it to step down
                out.packets.append(self._packet(Op.COUP))
            return
        self._learn(packet)
        self.active = Peer(source, packet.priority, now + packet.holdtime)
        self.active_timer = now + packet.holdtime
        if self.standby is not None and self.standby.address == source:
            self.standby = None  # the Standby router took over; in Speak our own timer keeps running
            if self.state is State.LISTEN:
                self.standby_timer = now + self.hold
        if self.deferred_to == source and self.standby is None and self.state is State.LISTEN:
            self.standby_timer = now  # the speaker we deferred to became Active: the Standby role is free
        if self.deferred_to == source:
            self.deferred_to = None
        if self.state is State.LEARN and self.vip:
            self._goto(State.LISTEN, now, "virtual IP learnt", out)
        if not better and self.config.preempt and self.state in (State.LISTEN, State.SPEAK, State.STANDBY):
            start = (self.enabled_at or now) + self.config.preempt_delay
            if now >= start:
                self._preempt(now, out)
            elif self.preempt_at is None:
                self.preempt_at = start

    def _preempt(self, now: float, out: Output) -> None:
        previous = self.active
        mark = len(out.packets)
        self._goto(State.ACTIVE, now, f"preempting {previous.address if previous else 'the Active router'}", out)
        out.packets.insert(mark, self._packet(Op.COUP))  # the Coup (state Active) before the first Hello

    def _hello_from_standby(self, packet: HsrpPacket, source: str, better: bool, now: float, out: Output) -> None:
        if self.state is State.STANDBY:
            if better:
                self.standby = Peer(source, packet.priority, now + packet.holdtime)
                self.standby_timer = now + packet.holdtime
                self._goto(State.LISTEN, now, f"higher priority Standby from {source}", out)
            return
        if self.state is State.SPEAK and not better:
            return  # we are taking the Standby role from it
        self.standby = Peer(source, packet.priority, now + packet.holdtime)
        self.standby_timer = now + packet.holdtime
        if self.state is State.SPEAK and better:
            self._goto(State.LISTEN, now, f"higher priority Standby from {source}", out)
        elif self.state is State.LISTEN and not better:
            self._goto(State.SPEAK, now, f"lower priority Standby {source}", out)

    # ---------------------------------------------------------------- events c, d, e
    def next_deadline(self) -> float | None:
        times = [t for t in (self.active_timer, self.standby_timer, self.hello_timer, self.preempt_at)
                 if t is not None]
        return min(times) if times else None

    def tick(self, now: float) -> Output:
        out = Output()
        for _ in range(8):  # a transition can make another timer due at once; bounded
            before = (self.state, self.active_timer, self.standby_timer, self.hello_timer, self.preempt_at)
            self._tick_once(now, out)
            if before == (self.state, self.active_timer, self.standby_timer, self.hello_timer, self.preempt_at):
                break
        return out

    def _tick_once(self, now: float, out: Output) -> None:
        if self.state is State.INIT:
            return
        if self.active_timer is not None and now >= self.active_timer:
            self.active_timer = None
            lost = self.active.address if self.active else None
            self.active = None
            reason = f"Active router {lost} timed out" if lost else "no Active router"
            if self.state is State.STANDBY:
                self._goto(State.ACTIVE, now, reason, out)
            elif self.state is State.SPEAK:
                if self.standby is None:
                    self._goto(State.ACTIVE, now, reason, out)
                else:
                    self.active_timer = now + self.hold
            elif self.state is State.LISTEN:
                self.active_timer = now + self.hold
                self._goto(State.SPEAK, now, reason, out)
            elif self.state is State.LEARN:
                self.active_timer = now + self.hold
            return
        if self.standby_timer is not None and now >= self.standby_timer:
            self.standby_timer = None
            self.standby = None
            if self.state is State.SPEAK:
                self._goto(State.STANDBY, now, "no higher priority router", out)
            elif self.state is State.LISTEN:
                self._goto(State.SPEAK, now, "no Standby router", out)
            return
        if self.preempt_at is not None and now >= self.preempt_at:
            self.preempt_at = None
            if self.active is not None and _rank(self.active.priority, self.active.address) < self.rank \
                    and self.state in (State.LISTEN, State.SPEAK, State.STANDBY):
                self._preempt(now, out)
            return
        if self.hello_timer is not None and now >= self.hello_timer:
            self._send_hello(now, out)

    # ---------------------------------------------------------------- status
    def status(self, now: float, wall: float) -> dict[str, object]:
        """A JSON-able snapshot; expiries are wall-clock times so a reader can count down."""

        def peer(p: Peer | None, local: bool) -> dict[str, object] | None:
            if local:
                return {"address": "local", "priority": self.config.priority}
            if p is None:
                return None
            return {"address": p.address, "priority": p.priority, "expires_at": wall + (p.expires - now)}

        return {
            "group": self.config.group, "state": self.state.label, "vip": self.vip,
            "virtual_mac": cisco_mac(self.config.mac), "version": self.config.version,
            "active_mac": cisco_mac(self.config.mac) if (self.active or self.state is State.ACTIVE) else None,
            "hello_ms": round(self.hello * 1000), "hold_ms": round(self.hold * 1000),
            "preempt": self.config.preempt, "preempt_delay": self.config.preempt_delay,
            "active": peer(self.active, self.state is State.ACTIVE),
            "standby": peer(self.standby, self.state is State.STANDBY),
            "priority": self.config.priority, "name": self.config.name,
            "authentication": self.config.authentication,
            "changes": self.changes, "last_change_at": None if self.last_change is None
            else wall - (now - self.last_change),
            "ignored": dict(self.ignored),
        }


# ------------------------------------------------------------------------------------------ show
def _timer_text(ms: int) -> str:
    return f"{ms // 1000} sec" if ms % 1000 == 0 else f"{ms} msec"


def show_standby(groups: Iterable[HsrpGroupStatus], now_wall: float) -> str:
    """`show standby` in IOS layout, from the groups of the daemon's status file."""
    lines: list[str] = []
    for g in groups:
        lines.append(f"{g.interface} - Group {g.group}" + (" (version 2)" if g.version == 2 else ""))
        lines.append(f"  State is {g.state}")
        lines.append(f"  Virtual IP address is {g.vip or 'unknown'}")
        lines.append(f"  Active virtual MAC address is {g.active_mac or 'unknown'}")
        default = "v2 default" if g.version == 2 else "v1 default"
        lines.append(f"    Local virtual MAC address is {g.virtual_mac} ({default})")
        lines.append(f"  Hello time {_timer_text(g.hello_ms)}, hold time {_timer_text(g.hold_ms)}")
        if g.preempt:
            delay = g.preempt_delay
            lines.append("  Preemption enabled" + (f", delay min {delay:g} secs" if delay else ""))
        else:
            lines.append("  Preemption disabled")
        for role, peer in (("Active", g.active), ("Standby", g.standby)):
            if peer is None:
                lines.append(f"  {role} router is unknown")
            elif peer.address == "local" or peer.expires_at is None:
                lines.append(f"  {role} router is local")
            else:
                left = max(0.0, peer.expires_at - now_wall)
                lines.append(f"  {role} router is {peer.address}, priority {peer.priority} "
                             f"(expires in {left:.3f} sec)")
        lines.append(f"  Priority {g.priority} (default 100)")
        if g.name:
            lines.append(f"  Group name is \"{g.name}\" (cfgd)")
        else:
            lines.append(f"  Group name is \"hsrp-{g.interface}-{g.group}\" (default)")
    return "\n".join(lines) + "\n"

