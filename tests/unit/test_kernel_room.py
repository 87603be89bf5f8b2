"""The kernel-wide limits `lab up` raises (the conntrack hash sized for every SRX's table) and `lab down`
gives back to what the labs still running need."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab_orchestrator import api
from lab_orchestrator.runtime import kernel_room, netns
from lab_orchestrator.runtime.state import LabState

REPO = Path(__file__).resolve().parents[2]


def test_the_hash_has_room_for_every_session_table() -> None:
    assert kernel_room.conntrack_room(262144) == {"nf_conntrack_max": 262144, "nf_conntrack_buckets": 65536}
    room = kernel_room.conntrack_room(2_200_000, 4)
    assert room["nf_conntrack_max"] == 2_200_000, "the limit counts one namespace's entries"
    assert room["nf_conntrack_buckets"] == 2_200_000, "four tables, a bucket per four entries"
    assert kernel_room.conntrack_room(16_777_216, 8)["nf_conntrack_buckets"] == kernel_room.MAX_BUCKETS


def test_the_session_tables_are_the_srxs() -> None:
    assert kernel_room.session_tables(api.plan(REPO / "labs" / "topology3.yml", state_root=None)) == 4
    assert kernel_room.session_tables(api.plan(REPO / "labs" / "flexvpn.yml", state_root=None)) == 0


KNOBS = {"net/netfilter/nf_conntrack_max": 262144, "net/netfilter/nf_conntrack_buckets": 262144,
         "net/ipv4/neigh/default/gc_thresh2": 512, "net/ipv4/neigh/default/gc_thresh3": 1024}


class RoundingRoom(kernel_room.KernelRoom):
    """The kernel rounds the hash up to whole pages of buckets (512 on x86_64)."""

    def write(self, knob: str, value: int) -> int:
        if knob.endswith("nf_conntrack_buckets"):
            value = -(-value // 512) * 512
        return super().write(knob, value)


def machine(tmp_path: Path, values: dict[str, int] | None = None) -> kernel_room.KernelRoom:
    """A /proc/sys of files under TMP_PATH/sys holding VALUES (this kernel's defaults otherwise)."""
    for knob, value in (values or KNOBS).items():
        (tmp_path / "sys" / knob).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "sys" / knob).write_text(f"{value}\n")
    return RoundingRoom(tmp_path / "kernel-room.json", tmp_path / "sys")


def lab(tmp_path: Path, name: str) -> str:
    """A lab's state folder (with its record: a lab that is up)."""
    (tmp_path / name).mkdir(exist_ok=True)
    (tmp_path / name / "state.json").write_text("{}")
    return str(tmp_path / name)


def value(room: kernel_room.KernelRoom, knob: str) -> int:
    return int((room.root / knob).read_text())


def knobs_now(room: kernel_room.KernelRoom) -> dict[str, int]:
    """Every knob of the fake machine as it holds it now."""
    return {knob: value(room, knob) for knob in KNOBS}


def wants(max_sessions: int = 1_000_000) -> dict[str, int]:
    plan = api.plan(REPO / "labs" / "topology3.yml", state_root=None)
    plan.max_sessions = max_sessions
    return kernel_room.wanted(plan)


def quiet(_step: str, _text: str) -> None:
    pass


def test_a_lab_wants_the_conntrack_room_of_its_tables_and_neighbours_for_its_ends() -> None:
    plan = api.plan(REPO / "labs" / "topology3.yml", state_root=None)
    room = kernel_room.wanted(plan)
    assert room["net/netfilter/nf_conntrack_max"] == plan.max_sessions
    assert room["net/netfilter/nf_conntrack_buckets"] == plan.max_sessions * 4 // 4
    ends = 2 * (len(plan.veths) + len(plan.mgmt.ports))
    assert room["net/ipv4/neigh/default/gc_thresh3"] == 4 * ends


def test_lab_up_raises_what_is_too_low_and_never_lowers(tmp_path: Path) -> None:
    room = machine(tmp_path, {**KNOBS, "net/netfilter/nf_conntrack_buckets": 9_999_999})
    said: list[str] = []
    room.raise_to(lab(tmp_path, "big"), wants(), lambda _step, text: said.append(text))
    assert value(room, "net/netfilter/nf_conntrack_max") == 1_000_000
    assert value(room, "net/netfilter/nf_conntrack_buckets") == 9_999_999
    assert "net.netfilter.nf_conntrack_max raised to 1000000" in said
    assert not any("nf_conntrack_buckets" in line for line in said)


def test_lab_down_puts_back_what_labs_raised_once_no_lab_needs_it(tmp_path: Path) -> None:
    room = machine(tmp_path)
    big = lab(tmp_path, "big")
    room.raise_to(big, wants(1_000_100), quiet)
    assert value(room, "net/netfilter/nf_conntrack_buckets") == 1_000_448, "rounded up to whole pages"
    assert room.record.stat().st_mode & 0o777 == 0o600
    said: list[str] = []
    room.give_back(big, lambda _step, text: said.append(text))
    assert knobs_now(room) == KNOBS
    assert "net.netfilter.nf_conntrack_buckets put back to 262144" in said
    assert not room.record.exists()


def test_a_lab_still_up_keeps_what_it_needs(tmp_path: Path) -> None:
    room = machine(tmp_path)
    small, big = lab(tmp_path, "small"), lab(tmp_path, "big")
    room.raise_to(small, wants(400_100), quiet)
    room.raise_to(big, wants(1_000_000), quiet)
    room.give_back(big, quiet)  # the big lab went, the small one is up
    assert value(room, "net/netfilter/nf_conntrack_max") == 400_100
    assert value(room, "net/netfilter/nf_conntrack_buckets") == 400_384
    room.give_back(small, quiet)  # and then the small one
    assert knobs_now(room) == KNOBS
    assert not room.record.exists()


def test_a_lab_gone_without_lab_down_wants_nothing_any_more(tmp_path: Path) -> None:
    room = machine(tmp_path)
    crashed, other = lab(tmp_path, "crashed"), lab(tmp_path, "other")
    room.raise_to(crashed, wants(1_000_000), quiet)
    room.raise_to(other, wants(262_144), quiet)
    (Path(crashed) / "state.json").unlink()  # its record gone (a reboot, a removed folder)
    room.give_back(other, quiet)
    assert knobs_now(room) == KNOBS


def test_a_knob_someone_else_set_meanwhile_is_left_alone(tmp_path: Path) -> None:
    room = machine(tmp_path)
    big = lab(tmp_path, "big")
    room.raise_to(big, wants(), quiet)
    (room.root / "net/netfilter/nf_conntrack_buckets").write_text("4194304\n")  # an operator's own value
    room.give_back(big, quiet)
    assert value(room, "net/netfilter/nf_conntrack_buckets") == 4_194_304
    assert value(room, "net/netfilter/nf_conntrack_max") == 262_144
    assert not room.record.exists()


def test_an_operator_s_value_between_two_labs_is_the_one_given_back(tmp_path: Path) -> None:
    room = machine(tmp_path)
    first, second = lab(tmp_path, "first"), lab(tmp_path, "second")
    room.raise_to(first, wants(400_000), quiet)
    (room.root / "net/netfilter/nf_conntrack_max").write_text("500000\n")
    room.raise_to(second, wants(1_000_000), quiet)
    room.give_back(second, quiet)
    room.give_back(first, quiet)
    assert value(room, "net/netfilter/nf_conntrack_max") == 500_000


def test_the_value_before_any_lab_survives_a_second_raise(tmp_path: Path) -> None:
    room = machine(tmp_path)
    first, second = lab(tmp_path, "first"), lab(tmp_path, "second")
    room.raise_to(first, wants(400_000), quiet)
    room.raise_to(second, wants(1_000_000), quiet)
    room.give_back(first, quiet)
    assert value(room, "net/netfilter/nf_conntrack_max") == 1_000_000, "the second lab still needs it"
    room.give_back(second, quiet)
    assert value(room, "net/netfilter/nf_conntrack_max") == 262_144


def test_with_a_lab_of_unknown_needs_up_nothing_is_lowered(tmp_path: Path) -> None:
    room = machine(tmp_path)
    big = lab(tmp_path, "big")
    room.raise_to(big, wants(), quiet)
    room.give_back(big, quiet, lower=False)
    assert value(room, "net/netfilter/nf_conntrack_max") == 1_000_000


def _state(name: str, room: dict[str, int], root: Path) -> LabState:
    return LabState(name, "t.yml", str(root / name), "ready", [], "", [], "", "", kernel_room=room)


def test_lab_down_lowers_nothing_while_a_lab_of_unknown_needs_is_up(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, bool]] = []

    class Recorder:
        def give_back(self, lab: str, _progress: object, lower: bool = True) -> None:
            calls.append((lab, lower))

    monkeypatch.setattr(kernel_room, "KernelRoom", Recorder)
    gone = _state("big", wants(), tmp_path)
    monkeypatch.setattr(netns, "running_labs", lambda: [gone, _state("old", {}, tmp_path)])
    netns.NetnsBackend()._give_back_kernel_room(gone)
    monkeypatch.setattr(netns, "running_labs", lambda: [gone, _state("small", wants(400_000), tmp_path)])
    netns.NetnsBackend()._give_back_kernel_room(gone)  # its own record is not one of the others
    assert calls == [(gone.state_dir, False), (gone.state_dir, True)]


class InterruptedRoom(RoundingRoom):
    """Ctrl-C lands once the knob is written, before the kernel's value is read back."""

    def write(self, knob: str, value: int) -> int:
        super().write(knob, value)
        raise KeyboardInterrupt


def test_an_interrupt_after_a_write_still_leaves_it_recorded(tmp_path: Path) -> None:
    machine(tmp_path)
    room = InterruptedRoom(tmp_path / "kernel-room.json", tmp_path / "sys")
    big = lab(tmp_path, "big")
    with pytest.raises(KeyboardInterrupt):
        room.raise_to(big, wants(1_000_100), quiet)
    back = RoundingRoom(room.record, room.root)
    back.give_back(big, quiet)  # the cleanup of the interrupted `lab up`
    assert value(back, "net/netfilter/nf_conntrack_max") == 262_144


def test_an_interrupt_while_a_line_is_said_still_leaves_the_record(tmp_path: Path) -> None:
    room = machine(tmp_path)
    big = lab(tmp_path, "big")

    def interrupted(_step: str, _text: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        room.raise_to(big, wants(), interrupted)
    room.give_back(big, quiet)
    assert knobs_now(room) == KNOBS


def test_a_knob_that_cannot_be_written_keeps_the_earlier_lab_s_record(tmp_path: Path) -> None:
    room = machine(tmp_path)
    first, second = lab(tmp_path, "first"), lab(tmp_path, "second")
    room.raise_to(first, wants(400_000), quiet)

    class Refusing(RoundingRoom):
        def write(self, knob: str, value: int) -> int:
            raise OSError(12, "Cannot allocate memory")

    said: list[str] = []
    Refusing(room.record, room.root).raise_to(second, wants(16_000_000), lambda _s, text: said.append(text))
    assert "net.netfilter.nf_conntrack_max could not be raised to 16000000: `lab doctor` shows the limit" in said
    room.give_back(first, quiet)
    room.give_back(second, quiet)
    assert value(room, "net/netfilter/nf_conntrack_max") == 262_144


def test_a_damaged_record_counts_as_empty(tmp_path: Path) -> None:
    room = machine(tmp_path)
    for text in ("[]", "null", '{"knobs": [1], "labs": {"x": 3}}', '{"knobs": {"a": {"before": "x"}}}', "{"):
        room.record.write_text(text)
        room.raise_to(lab(tmp_path, "big"), wants(), quiet)
        room.give_back(str(tmp_path / "big"), quiet)
        assert knobs_now(room) == KNOBS, text
        assert not room.record.exists()


def test_lab_up_goes_on_when_the_record_cannot_be_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def raise_to(self, *_: object) -> None:
            raise OSError(30, "Read-only file system")

    monkeypatch.setattr(kernel_room, "KernelRoom", Broken)
    said: list[str] = []
    plan = api.plan(REPO / "labs" / "topology1.yml", state_root=None)
    netns.NetnsBackend(lambda _step, text: said.append(text))._raise_kernel_room(plan, _state("t1", {}, tmp_path))
    assert said == ["kernel limits not raised (OSError: [Errno 30] Read-only file system): `lab doctor` shows them"]


def test_a_lab_key_is_its_absolute_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    room = machine(tmp_path)
    lab(tmp_path, "big")
    monkeypatch.chdir(tmp_path)
    room.raise_to("big", wants(), quiet)
    monkeypatch.chdir("/")
    room.give_back(str(tmp_path / "other"), quiet)  # another lab goes: "big" (relative when written) is still up
    assert value(room, "net/netfilter/nf_conntrack_max") == 1_000_000
