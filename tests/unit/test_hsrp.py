"""HSRP codec and state machine (dataplane.core.hsrp): wire format, elections, failover, preemption,
authentication, learning, `show standby`, and fuzzing of the decoder."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.core import hsrp
from dataplane.core.hsrp import GroupConfig, HsrpError, HsrpMachine, HsrpPacket, Op, State
from labkit.flexstatus import HsrpGroupStatus

VIP = "10.10.10.100"


# ------------------------------------------------------------------------------------------ codec
def test_v1_hello_bytes_are_rfc2281_layout() -> None:
    packet = HsrpPacket(Op.HELLO, State.ACTIVE, 3, 10, 255, 1, VIP)
    data = packet.encode()
    assert len(data) == 20
    assert data.hex() == "00" "00" "10" "03" "0a" "ff" "01" "00" + b"cisco\0\0\0".hex() + "0a0a0a64"
    assert hsrp.decode(data) == packet


@pytest.mark.parametrize("op", list(Op))
@pytest.mark.parametrize("state", list(State))
def test_v1_round_trip(op: Op, state: State) -> None:
    packet = HsrpPacket(op, state, 1, 3, 7, 200, "192.0.2.1", b"secret\0\0")
    assert hsrp.decode(packet.encode()) == packet


def test_v1_sub_second_timers_round_up() -> None:
    data = HsrpPacket(Op.HELLO, State.SPEAK, 0.3, 1.0, 100, 1, VIP).encode()
    assert data[3] == 1 and data[4] == 1


def test_v2_round_trip() -> None:
    packet = HsrpPacket(Op.HELLO, State.STANDBY, 0.25, 0.75, 150, 300, VIP, b"cisco\0\0\0", 2, "02:00:00:00:00:01")
    decoded = hsrp.decode(packet.encode())
    assert decoded == packet


def test_virtual_macs() -> None:
    assert hsrp.virtual_mac(1) == "00:00:0c:07:ac:01"
    assert hsrp.cisco_mac(hsrp.virtual_mac(1)) == "0000.0c07.ac01"
    assert hsrp.virtual_mac(255) == "00:00:0c:07:ac:ff"
    assert hsrp.virtual_mac(300, 2) == "00:00:0c:9f:f1:2c"


@pytest.mark.parametrize("data", [
    b"", b"\0" * 19, b"\x05" + b"\0" * 19,  # short, short, bad version
    bytes([0, 7, 16, 3, 10, 100, 1, 0]) + b"\0" * 12,  # bad op
    bytes([0, 0, 3, 3, 10, 100, 1, 0]) + b"\0" * 12,  # bad state
    bytes([1, 40]) + b"\0" * 10,  # v2 TLV cut short
    bytes([1, 40, 2, 0, 9]) + b"\0" * 37,  # v2 bad state
])
def test_malformed_raises_defined_error(data: bytes) -> None:
    with pytest.raises(HsrpError):
        hsrp.decode(data)


@settings(max_examples=3000, deadline=None)
@given(st.binary(max_size=80))
def test_fuzz_decoder_only_raises_hsrp_error(data: bytes) -> None:
    try:
        packet = hsrp.decode(data)
    except HsrpError:
        return
    assert isinstance(packet, HsrpPacket)
    hsrp.decode(packet.encode())  # whatever decodes, re-encodes to something decodable


@settings(max_examples=1500, deadline=None)
@given(st.binary(min_size=20, max_size=20), st.sampled_from(["10.10.10.2", "10.10.10.9"]))
def test_fuzz_machine_never_raises(data: bytes, source: str) -> None:
    machine = HsrpMachine(GroupConfig(1, VIP, priority=150), "10.10.10.5")
    machine.enable(0.0)
    try:
        packet = hsrp.decode(data)
    except HsrpError:
        return
    machine.receive(packet, source, 1.0)
    machine.tick(50.0)


def state_of(machine: HsrpMachine) -> State:
    """The state now (a call, so that a type checker does not keep an earlier assert's narrowing)."""
    return machine.state


# ------------------------------------------------------------------------------------------ simulation
class Lan:
    """Routers on one segment with a virtual clock; packets are delivered to all others at once."""

    def __init__(self) -> None:
        self.routers: dict[str, HsrpMachine] = {}
        self.down: set[str] = set()
        self.now = 0.0
        self.log: list[tuple[float, str, State, State, str]] = []
        self.sent: list[tuple[float, str, HsrpPacket]] = []

    def add(self, address: str, **config: object) -> HsrpMachine:
        cfg = GroupConfig(**{"group": 1, "vip": VIP, **config})  # type: ignore[arg-type]
        machine = HsrpMachine(cfg, address)
        self.routers[address] = machine
        return machine

    def enable(self, address: str) -> None:
        self.down.discard(address)
        self._deliver(address, self.routers[address].enable(self.now))

    def power_off(self, address: str) -> None:
        """Silent death: no Resign, nothing more from it."""
        self.down.add(address)

    def shutdown(self, address: str) -> None:
        """Graceful: the group is disabled (a Resign if it was Active)."""
        out = self.routers[address].disable(self.now)
        self._deliver(address, out)
        self.down.add(address)

    def _deliver(self, source: str, out: hsrp.Output) -> None:
        for old, new, reason in out.transitions:
            self.log.append((self.now, source, old, new, reason))
        queue = [(source, p) for p in out.packets]
        while queue:
            src, packet = queue.pop(0)
            self.sent.append((self.now, src, packet))
            wire = packet.encode()
            for address, machine in self.routers.items():
                if address == src or address in self.down:
                    continue
                result = machine.receive(hsrp.decode(wire), src, self.now)
                for old, new, reason in result.transitions:
                    self.log.append((self.now, address, old, new, reason))
                queue += [(address, p) for p in result.packets]

    def run(self, until: float) -> None:
        while True:
            deadlines = [(m.next_deadline(), a) for a, m in self.routers.items() if a not in self.down]
            due = [(d, a) for d, a in deadlines if d is not None]
            if not due:
                self.now = until
                return
            when, address = min(due)
            if when > until:
                self.now = until
                return
            self.now = max(self.now, when)
            self._deliver(address, self.routers[address].tick(self.now))

    def states(self) -> dict[str, State]:
        return {a: m.state for a, m in self.routers.items()}

    def became(self, address: str, state: State, after: float = 0.0) -> float:
        return next(t for t, a, _, new, _ in self.log if a == address and new is state and t >= after)

    def actives(self) -> list[str]:
        return [a for a, m in self.routers.items() if m.state is State.ACTIVE and a not in self.down]


def seed_lan(**extra: object) -> Lan:
    lan = Lan()
    lan.add("10.10.10.1", priority=255, name="group1", **extra)
    lan.add("10.10.10.2", priority=200, name="group1", **extra)
    lan.add("10.10.10.3", name="group1", **extra)
    for address in list(lan.routers):
        lan.enable(address)
    return lan


def test_seed_election_router1_active_router2_standby() -> None:
    lan = seed_lan()
    lan.run(60)
    assert lan.states() == {"10.10.10.1": State.ACTIVE, "10.10.10.2": State.STANDBY, "10.10.10.3": State.LISTEN}
    # Listen -> Speak after one hold time (10 s), Speak -> Active after another.
    assert lan.became("10.10.10.1", State.SPEAK) == pytest.approx(10)
    assert lan.became("10.10.10.1", State.ACTIVE) == pytest.approx(20)
    assert lan.routers["10.10.10.3"].active is not None
    assert lan.routers["10.10.10.3"].active.address == "10.10.10.1"
    assert lan.routers["10.10.10.3"].standby.address == "10.10.10.2"  # type: ignore[union-attr]


def test_no_flapping_once_elected() -> None:
    lan = seed_lan()
    lan.run(40)
    settled = lan.now
    lan.run(300)
    assert [entry for entry in lan.log if entry[0] > settled] == []
    # The Listen router heard the Speak and Standby routers and never stood up to speak again after the
    # Standby role was taken.
    standby_at = lan.became("10.10.10.2", State.STANDBY)
    assert not [e for e in lan.log if e[1] == "10.10.10.3" and e[0] > standby_at]


def test_only_speak_standby_active_send_hellos_at_hello_time() -> None:
    lan = seed_lan()
    lan.run(60)
    start = len(lan.sent)
    lan.run(90)
    senders = [(src, p.state) for _, src, p in lan.sent[start:]]
    assert {s for s, _ in senders} == {"10.10.10.1", "10.10.10.2"}
    assert sum(1 for s, _ in senders if s == "10.10.10.1") == 10  # 30 s / 3 s
    assert all(p.op is Op.HELLO for _, _, p in lan.sent[start:])


def test_equal_priorities_higher_ip_wins() -> None:
    lan = Lan()
    for address in ("10.10.10.7", "10.10.10.30", "10.10.10.4"):
        lan.add(address)
    for address in lan.routers:
        lan.enable(address)
    lan.run(60)
    assert lan.states()["10.10.10.30"] is State.ACTIVE
    assert lan.states()["10.10.10.7"] is State.STANDBY
    assert lan.states()["10.10.10.4"] is State.LISTEN


def test_failover_after_hold_time_of_the_last_hello() -> None:
    lan = seed_lan()
    lan.run(60)
    last_hello = max(t for t, src, _ in lan.sent if src == "10.10.10.1")
    lan.power_off("10.10.10.1")
    lan.run(120)
    took_over = lan.became("10.10.10.2", State.ACTIVE)
    assert took_over == pytest.approx(last_hello + 10)
    assert lan.actives() == ["10.10.10.2"]
    assert lan.states()["10.10.10.3"] is State.STANDBY


def test_failover_when_a_listener_times_out_before_the_standby() -> None:
    """The Listen router's Active timer fires first (it goes Speak), then the Standby takes over:
    the speaker must still become Standby a hold time later."""
    lan = Lan()
    lan.add("10.10.10.1", priority=255)
    lan.add("10.10.10.9", priority=200)
    lan.add("10.10.10.3")
    for address in list(lan.routers):
        lan.enable(address)
    lan.run(60)
    assert lan.states() == {"10.10.10.1": State.ACTIVE, "10.10.10.9": State.STANDBY, "10.10.10.3": State.LISTEN}
    lan.power_off("10.10.10.1")
    lan.run(100)
    assert lan.states()["10.10.10.9"] is State.ACTIVE
    assert lan.states()["10.10.10.3"] is State.STANDBY


def test_fast_timers_failover_within_hold() -> None:
    lan = seed_lan(hello=1.0, hold=3.0, timers_configured=True)
    lan.run(30)
    lan.power_off("10.10.10.1")
    off = lan.now
    lan.run(60)
    assert 0 < lan.became("10.10.10.2", State.ACTIVE, off) - off <= 3.0


def test_graceful_shutdown_resigns_and_standby_takes_over_at_once() -> None:
    lan = seed_lan()
    lan.run(60)
    lan.shutdown("10.10.10.1")
    assert lan.states()["10.10.10.2"] is State.ACTIVE
    assert lan.became("10.10.10.2", State.ACTIVE, 60) == pytest.approx(60)


def test_no_preemption_by_default() -> None:
    lan = seed_lan()
    lan.run(60)
    lan.power_off("10.10.10.1")
    lan.run(120)
    lan.routers["10.10.10.1"].disable(lan.now)  # powered on again: fresh start
    lan.enable("10.10.10.1")
    lan.run(200)
    assert lan.actives() == ["10.10.10.2"]
    assert lan.states()["10.10.10.1"] is State.STANDBY  # it still takes the Standby role (higher than .3)
    assert lan.states()["10.10.10.3"] is State.LISTEN


def test_preemption_coup() -> None:
    lan = seed_lan(preempt=True)
    lan.run(60)
    lan.power_off("10.10.10.1")
    lan.run(120)
    lan.routers["10.10.10.1"].disable(lan.now)
    back = lan.now
    lan.enable("10.10.10.1")
    lan.run(200)
    assert lan.actives() == ["10.10.10.1"]
    # It preempts on the first Hello it hears from the Active router (within one hello time).
    assert lan.became("10.10.10.1", State.ACTIVE, back) - back <= 3.0 + 1e-9
    coups = [p for _, src, p in lan.sent if src == "10.10.10.1" and p.op is Op.COUP]
    assert coups and coups[0].state is State.ACTIVE
    assert any(p.op is Op.RESIGN for _, src, p in lan.sent if src == "10.10.10.2")
    lan.run(260)
    assert lan.states()["10.10.10.2"] is State.STANDBY


def test_preemption_delay() -> None:
    lan = seed_lan(preempt=True, preempt_delay=30.0)
    lan.run(60)
    lan.power_off("10.10.10.1")
    lan.run(120)
    lan.routers["10.10.10.1"].disable(lan.now)
    back = lan.now
    lan.enable("10.10.10.1")
    lan.run(250)
    assert lan.actives() == ["10.10.10.1"]
    assert lan.became("10.10.10.1", State.ACTIVE, back) - back == pytest.approx(30.0)


def test_wrong_authentication_is_ignored() -> None:
    lan = Lan()
    lan.add("10.10.10.1", priority=255)
    lan.add("10.10.10.2", priority=200, authentication="other")
    for address in lan.routers:
        lan.enable(address)
    lan.run(60)
    assert sorted(lan.actives()) == ["10.10.10.1", "10.10.10.2"]  # they do not hear each other
    assert lan.routers["10.10.10.2"].ignored["auth"] > 0


def test_other_group_is_ignored() -> None:
    machine = HsrpMachine(GroupConfig(1, VIP), "10.10.10.5")
    machine.enable(0)
    machine.receive(HsrpPacket(Op.HELLO, State.ACTIVE, 3, 10, 255, 2, VIP), "10.10.10.1", 1)
    assert machine.active is None and machine.ignored["group"] == 1


def test_learn_virtual_ip_and_timers_from_active() -> None:
    machine = HsrpMachine(GroupConfig(1, None), "10.10.10.5")
    machine.enable(0)
    assert machine.state is State.LEARN
    machine.receive(HsrpPacket(Op.HELLO, State.ACTIVE, 1, 4, 255, 1, VIP), "10.10.10.1", 1)
    assert state_of(machine) is State.LISTEN and machine.vip == VIP
    assert (machine.hello, machine.hold) == (1, 4)


def test_configured_timers_are_not_learnt() -> None:
    machine = HsrpMachine(GroupConfig(1, VIP, hello=2, hold=7, timers_configured=True), "10.10.10.5")
    machine.enable(0)
    machine.receive(HsrpPacket(Op.HELLO, State.ACTIVE, 1, 4, 255, 1, VIP), "10.10.10.1", 1)
    assert (machine.hello, machine.hold) == (2, 7)


def test_two_actives_after_partition_heal_lower_steps_down() -> None:
    high = HsrpMachine(GroupConfig(1, VIP, priority=200), "10.10.10.1")
    low = HsrpMachine(GroupConfig(1, VIP, priority=100), "10.10.10.2")
    for m in (high, low):
        m.enable(0)
        m.tick(10)
        m.tick(20)
        assert m.state is State.ACTIVE
    out = high.receive(HsrpPacket(Op.HELLO, State.ACTIVE, 3, 10, 100, 1, VIP), "10.10.10.2", 21)
    assert [p.op for p in out.packets] == [Op.COUP] and high.state is State.ACTIVE
    out = low.receive(out.packets[0], "10.10.10.1", 21)
    assert low.state is State.SPEAK and Op.RESIGN in [p.op for p in out.packets]


def test_interface_down_goes_init_and_resigns() -> None:
    machine = HsrpMachine(GroupConfig(1, VIP), "10.10.10.1")
    machine.enable(0)
    machine.tick(10)
    machine.tick(20)
    assert machine.state is State.ACTIVE
    out = machine.disable(21)
    assert state_of(machine) is State.INIT and [p.op for p in out.packets] == [Op.RESIGN]
    assert machine.next_deadline() is None


def test_own_packets_ignored() -> None:
    machine = HsrpMachine(GroupConfig(1, VIP), "10.10.10.1")
    machine.enable(0)
    machine.receive(HsrpPacket(Op.HELLO, State.ACTIVE, 3, 10, 255, 1, VIP), "10.10.10.1", 1)
    assert machine.active is None and machine.ignored["own"] == 1


# ------------------------------------------------------------------------------------------ show
def group_status(machine: dict[str, object], interface: str = "Ethernet0/0") -> HsrpGroupStatus:
    """A machine's status as flexvpnd publishes it, with the interface the daemon adds."""
    return HsrpGroupStatus.model_validate({**machine, "interface": interface, "linux_interface": "Et0-0",
                                           "address": "10.10.10.1", "vip_interface": "hsrp1", "vip_owned": False})


def test_show_standby_seed_layout() -> None:
    lan = Lan()
    lan.add("10.10.10.1", priority=100, name="group1")
    lan.add("10.10.10.2", priority=255, name="group1")
    lan.add("10.10.10.3", priority=150, name="group1")
    for address in lan.routers:
        lan.enable(address)
    lan.run(60)
    listen = lan.routers["10.10.10.1"]
    text = hsrp.show_standby([group_status(listen.status(lan.now, 1000.0))], 1000.0)
    lines = text.splitlines()
    assert lines[0] == "Ethernet0/0 - Group 1"
    assert lines[1] == "  State is Listen"
    assert lines[2] == "  Virtual IP address is 10.10.10.100"
    assert lines[3] == "  Active virtual MAC address is 0000.0c07.ac01"
    assert lines[4] == "    Local virtual MAC address is 0000.0c07.ac01 (v1 default)"
    assert lines[5] == "  Hello time 3 sec, hold time 10 sec"
    assert lines[6] == "  Preemption disabled"
    assert lines[7].startswith("  Active router is 10.10.10.2, priority 255 (expires in ")
    assert lines[7].endswith(" sec)")
    assert lines[8].startswith("  Standby router is 10.10.10.3, priority 150 (expires in ")
    assert lines[9] == "  Priority 100 (default 100)"
    assert lines[10] == '  Group name is "group1" (cfgd)'
    active = group_status(lan.routers["10.10.10.2"].status(lan.now, 1000.0))
    text = hsrp.show_standby([active], 1000.0)
    assert "  State is Active" in text and "  Active router is local" in text


def test_show_standby_msec_and_preempt_delay() -> None:
    machine = HsrpMachine(GroupConfig(1, VIP, hello=0.3, hold=1.0, preempt=True, preempt_delay=30), "10.10.10.1")
    text = hsrp.show_standby([group_status(machine.status(0, 0), "Ethernet0/1")], 0)
    assert "  Hello time 300 msec, hold time 1 sec" in text
    assert "  Preemption enabled, delay min 30 secs" in text
    assert "  State is Init" in text and "  Active router is unknown" in text


def test_auth_field_is_padded_text() -> None:
    packet = HsrpMachine(GroupConfig(1, VIP, authentication="abc"), "10.10.10.1")._packet(Op.HELLO)
    assert packet.encode()[8:16] == b"abc\0\0\0\0\0"
    assert struct.unpack("!4s", packet.encode()[16:20])[0] == bytes([10, 10, 10, 100])


def test_a_group_status_is_what_the_status_file_model_reads() -> None:
    """flexvpnd writes each machine's status (plus its interface) as a labkit.flexstatus.HsrpGroupStatus."""
    lan = Lan()
    lan.add("10.10.10.1", priority=100, name="group1")
    lan.add("10.10.10.2", priority=255, name="group1")
    lan.add("10.10.10.3", priority=150, name="group1")
    for address in lan.routers:
        lan.enable(address)
    lan.run(60)
    interface = {"interface": "Ethernet0/0", "linux_interface": "Et0-0", "address": "10.10.10.1",
                 "vip_interface": "hsrp1", "vip_owned": False}
    for machine in lan.routers.values():
        group = HsrpGroupStatus.model_validate({**machine.status(lan.now, 1000.0), **interface})
        assert group.state in ("Active", "Standby", "Listen")
    assert HsrpGroupStatus.model_validate({**HsrpMachine(GroupConfig(1, None), "10.10.10.1").status(0, 0),
                                           **interface}).vip is None
