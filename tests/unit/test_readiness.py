"""What `lab up` waits for on each MX selector (lab_orchestrator.readiness, pure)."""

from __future__ import annotations

from typing import Any

from lab_orchestrator import readiness


def tlb(probes: int, up: bool = True, buckets: int = 100, via_settled: bool = True,
        result: str = "ok") -> dict[str, Any]:
    return {"mode": "tlb", "members": [
        {"name": name, "buckets": buckets if up or name != "MNHA_SRX3" else 0,
         "via_settled": via_settled if name == "MNHA_SRX1" else True,
         "health": {"up": up if name == "MNHA_SRX3" else True,
                    "last_result": result if name == "MNHA_SRX3" else "ok",
                    "profiles": {"icmp-profile": {"probes": probes}, "tcp-profile": {"probes": probes}}}}
        for name in ("MNHA_SRX1", "MNHA_SRX3")]}


def test_probe_counts_per_member_and_profile() -> None:
    assert readiness.probe_counts(tlb(3)) == {"MNHA_SRX1/icmp-profile": 3, "MNHA_SRX1/tcp-profile": 3,
                                               "MNHA_SRX3/icmp-profile": 3, "MNHA_SRX3/tcp-profile": 3}
    assert readiness.probe_counts({"mode": "chash", "members": [{"name": "srx1", "health": None}]}) == {}


def test_no_status_yet_is_pending_whatever_the_mode() -> None:
    assert readiness.selector_pending("mx1", None, None) == ["mx1: the selector has not written its status yet"]


def test_an_ecmp_selector_is_ready_once_it_reports() -> None:
    assert readiness.selector_pending("mx1", {"mode": "chash", "members": []}, {}) == []


def test_tlb_waits_for_probes_made_after_the_baseline() -> None:
    """Everything up in the status, but from probes that may predate a reachable lab: not yet."""
    baseline = readiness.probe_counts(tlb(3))
    assert readiness.selector_pending("mx1", tlb(3), None) != []
    assert "fresh health checks" in readiness.selector_pending("mx1", tlb(4), baseline)[0]
    assert readiness.selector_pending("mx1", tlb(5), baseline) == []


def test_tlb_baseline_taken_before_any_report_still_needs_fresh_probes() -> None:
    assert readiness.selector_pending("mx1", tlb(1), {}) != []
    assert readiness.selector_pending("mx1", tlb(2), {}) == []
    assert readiness.selector_pending("mx1", {"mode": "tlb", "members": []}, {}) != []


def test_tlb_names_a_real_service_down_out_of_the_table_or_not_yet_via_bgp() -> None:
    baseline = readiness.probe_counts(tlb(0))
    down = readiness.selector_pending("mx1", tlb(5, up=False, result="tcp/8088: Connection refused"), baseline)
    assert down == ["mx1: real-service MNHA_SRX3 health down (tcp/8088: Connection refused)"]
    assert readiness.selector_pending("mx1", tlb(5, buckets=0), baseline) == [
        "mx1: real-service MNHA_SRX1 not in the selector's table yet",
        "mx1: real-service MNHA_SRX3 not in the selector's table yet"]
    assert readiness.selector_pending("mx1", tlb(5, via_settled=False), baseline) == [
        "mx1: real-service MNHA_SRX1 not yet through the SRX BGP prefers"]
