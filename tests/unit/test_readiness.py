"""What `lab up` waits for on each MX selector (lab_orchestrator.runtime.readiness, pure)."""

from __future__ import annotations

from statusdata import mxlb_health, mxlb_member, mxlb_status

from lab_orchestrator.runtime import readiness
from labkit.status import MxlbStatus


def status(mode: str, members: list[dict[str, object]], settling: bool = False) -> MxlbStatus:
    return MxlbStatus.model_validate(mxlb_status(members, mode=mode, settling=settling))


def tlb(probes: int, up: bool = True, buckets: int = 100, via_settled: bool = True,
        result: str = "ok") -> MxlbStatus:
    profile = {"up": True, "last_result": "ok", "probes": probes}
    return status("tlb", [
        mxlb_member(name, buckets=buckets if up or name != "MNHA_SRX3" else 0,
                    via_settled=via_settled if name == "MNHA_SRX1" else True,
                    health=mxlb_health(up if name == "MNHA_SRX3" else True,
                                       result if name == "MNHA_SRX3" else "ok",
                                       profiles={"icmp-profile": profile, "tcp-profile": profile}))
        for name in ("MNHA_SRX1", "MNHA_SRX3")])


def test_probe_counts_per_member_and_profile() -> None:
    assert readiness.probe_counts(tlb(3)) == {"MNHA_SRX1/icmp-profile": 3, "MNHA_SRX1/tcp-profile": 3,
                                               "MNHA_SRX3/icmp-profile": 3, "MNHA_SRX3/tcp-profile": 3}
    assert readiness.probe_counts(status("chash", [mxlb_member("srx1")])) == {}


def test_no_status_yet_is_pending_whatever_the_mode() -> None:
    assert readiness.selector_pending("mx1", None, None) == ["mx1: the selector has not written its status yet"]


def ecmp(buckets: dict[str, int], routed: set[str], carrier: set[str] | None = None,
         settling: bool = False) -> MxlbStatus:
    names = ("srx1", "srx2", "srx3", "srx4")
    return status("chash", [
        mxlb_member(n, buckets=buckets.get(n, 0),
                    carrier={s: n in (carrier if carrier is not None else set(names)) for s in ("trust", "untrust")},
                    routed={s: n in routed for s in ("trust", "untrust")}) for n in names], settling)


ALL = {"srx1", "srx2", "srx3", "srx4"}


def test_an_ecmp_selector_is_ready_when_its_table_holds_every_srx_in_service() -> None:
    assert readiness.selector_pending("mx1", ecmp({n: 16 for n in ALL}, ALL), {}) == []
    assert readiness.selector_pending("mx1", status("chash", []), {}) == []


def test_an_ecmp_selector_whose_table_lags_the_routes_is_not_ready() -> None:
    """All four routed, the table still with one (the others' routes came after the gate opened and
    are held down): the first flows would all go to srx4."""
    pending = readiness.selector_pending("mx1", ecmp({"srx4": 64}, ALL, settling=True), {})
    assert pending == ["mx1: a selector table change is pending (BGP hold-down)",
                       "mx1: srx1 routed but not in the selector's table yet",
                       "mx1: srx2 routed but not in the selector's table yet",
                       "mx1: srx3 routed but not in the selector's table yet"]


def test_an_ecmp_selector_waits_for_an_srx_whose_routes_have_not_come() -> None:
    assert readiness.selector_pending("mx1", ecmp({n: 16 for n in ALL}, ALL - {"srx2"}), {}) == [
        "mx1: srx2: its BGP next hop not in the routes yet"]


def test_an_ecmp_selector_leaves_out_srxs_without_carrier_and_srg1_backups() -> None:
    spare = ecmp({n: 21 for n in ALL - {"srx4"}}, ALL - {"srx4"}, carrier=ALL - {"srx4"})
    assert readiness.selector_pending("mx1", spare, {}) == []
    peers = {"srx1": "srx2", "srx2": "srx1", "srx3": "srx4", "srx4": "srx3"}
    backups_out = ecmp({"srx1": 32, "srx3": 32}, {"srx1", "srx3"})
    assert readiness.selector_pending("mx1", backups_out, {}, peers) == []
    assert readiness.selector_pending("mx1", backups_out, {}) == [
        "mx1: srx2: its BGP next hop not in the routes yet", "mx1: srx4: its BGP next hop not in the routes yet"]
    gate_closed = ecmp({n: 16 for n in ALL}, {"srx1", "srx3"})
    assert readiness.selector_pending("mx1", gate_closed, {}, peers) == [
        "mx1: srx2 (SRG1 backup) still in the table until the route gate opens",
        "mx1: srx4 (SRG1 backup) still in the table until the route gate opens"]


def test_tlb_waits_for_probes_made_after_the_baseline() -> None:
    """Everything up in the status, but from probes that may predate a reachable lab: not yet."""
    baseline = readiness.probe_counts(tlb(3))
    assert readiness.selector_pending("mx1", tlb(3), None) != []
    assert "fresh health checks" in readiness.selector_pending("mx1", tlb(4), baseline)[0]
    assert readiness.selector_pending("mx1", tlb(5), baseline) == []


def test_tlb_baseline_taken_before_any_report_still_needs_fresh_probes() -> None:
    assert readiness.selector_pending("mx1", tlb(1), {}) != []
    assert readiness.selector_pending("mx1", tlb(2), {}) == []
    assert readiness.selector_pending("mx1", status("tlb", []), {}) != []


def test_tlb_names_a_real_service_down_out_of_the_table_or_not_yet_via_bgp() -> None:
    baseline = readiness.probe_counts(tlb(0))
    down = readiness.selector_pending("mx1", tlb(5, up=False, result="tcp/8088: Connection refused"), baseline)
    assert down == ["mx1: real-service MNHA_SRX3 health down (tcp/8088: Connection refused)"]
    assert readiness.selector_pending("mx1", tlb(5, buckets=0), baseline) == [
        "mx1: real-service MNHA_SRX1 not in the selector's table yet",
        "mx1: real-service MNHA_SRX3 not in the selector's table yet"]
    assert readiness.selector_pending("mx1", tlb(5, via_settled=False), baseline) == [
        "mx1: real-service MNHA_SRX1 not yet through the SRX BGP prefers"]
