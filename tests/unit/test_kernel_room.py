"""The kernel-wide limits `lab up` raises: the conntrack hash sized for every SRX's table."""

from __future__ import annotations

from pathlib import Path

from lab_orchestrator import api
from lab_orchestrator.runtime import kernel_room

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


def test_lab_up_raises_both_knobs_never_lowers_them(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "nf_conntrack_max").write_text("262144\n")
    (tmp_path / "nf_conntrack_buckets").write_text("9999999\n")
    plan = api.plan(REPO / "labs" / "topology3.yml", state_root=None)
    plan.max_sessions = 1_000_000
    real = Path

    def fake(path: str) -> Path:
        return tmp_path if path == "/proc/sys/net/netfilter" else real(path)

    monkeypatch.setattr(kernel_room, "Path", fake)
    said: list[str] = []
    kernel_room.sessions(plan, lambda _step, text: said.append(text))
    assert (tmp_path / "nf_conntrack_max").read_text() == "1000000"
    assert (tmp_path / "nf_conntrack_buckets").read_text() == "9999999\n"
    assert said == ["net.netfilter.nf_conntrack_max raised to 1000000"]
