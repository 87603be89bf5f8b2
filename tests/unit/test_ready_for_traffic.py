"""What `lab up` waits for beyond BGP and the selectors: MNHA pairs in step and synced, the HSRP
election and the IKEv2 cluster (lab_orchestrator.runtime.readiness, pure)."""

from __future__ import annotations

from typing import Any

from lab_orchestrator.runtime import readiness
from labkit.status import MnhaHeartbeat, MnhaSrg0, MnhaSrg1, MnhaStatus, MnhaSync


def mnha(node: str, peer: str, alive: bool = True, role: str = "active", mode: str = "srg1",
         sync: dict[str, bool] | None = None, unrouted: tuple[str, ...] = ()) -> MnhaStatus:
    """The parts of an MNHA status readiness reads (the rest is not validated here)."""
    return MnhaStatus.model_construct(
        node=node, peer=peer, mode=mode, heartbeat=MnhaHeartbeat.model_construct(peer_alive=alive),
        srg0=MnhaSrg0.model_construct(links_unrouted=list(unrouted)),
        srg1=MnhaSrg1.model_construct(role=role), sync=MnhaSync.model_construct(**sync) if sync is not None else None)


SYNCED = {"daemon_answering": True, "awaiting_peer": False, "peer_awaiting": False, "sending": False}


def test_a_pair_in_step_and_synced_is_ready() -> None:
    statuses = {"srx1": mnha("srx1", "srx2", sync=SYNCED), "srx2": mnha("srx2", "srx1", role="backup", sync=SYNCED)}
    assert readiness.mnha_pending([["srx1", "srx2"]], statuses, set()) == []


def test_a_pair_whose_initial_sync_is_not_done_is_not_ready() -> None:
    statuses = {"srx1": mnha("srx1", "srx2", sync=SYNCED),
                "srx2": mnha("srx2", "srx1", role="backup",
                             sync={**SYNCED, "peer_awaiting": True})}
    assert readiness.mnha_pending([["srx1", "srx2"]], statuses, set()) == [
        "srx2: initial session sync with srx1 not done"]


def test_a_node_whose_links_are_not_routed_yet_keeps_the_pair_waiting() -> None:
    """Its BGP session over one link is not up yet: it announces its long paths still (mnhad)."""
    statuses = {"srx1": mnha("srx1", "srx2", sync=SYNCED, unrouted=("ge-0-0-1",)),
                "srx2": mnha("srx2", "srx1", role="backup", sync=SYNCED)}
    assert readiness.mnha_pending([["srx1", "srx2"]], statuses, set()) == [
        "srx1: no BGP route yet over ge-0-0-1 (links back)"]


def test_a_session_daemon_that_does_not_answer_keeps_the_pair_waiting() -> None:
    statuses = {"srx1": mnha("srx1", "srx2", mode="srg0", sync={**SYNCED, "daemon_answering": False}),
                "srx2": mnha("srx2", "srx1", mode="srg0", sync=SYNCED)}
    assert readiness.mnha_pending([["srx1", "srx2"]], statuses, set()) == [
        "srx1: session sync daemon not answering yet"]


def test_a_pair_not_hearing_its_peer_or_electing_is_not_ready() -> None:
    statuses: dict[str, MnhaStatus | None] = {"srx1": mnha("srx1", "srx2", alive=False, role="init"), "srx2": None}
    assert readiness.mnha_pending([["srx1", "srx2"]], statuses, set()) == [
        "srx1: does not hear its peer srx2", "srx1: SRG1 init", "srx2: no MNHA status yet"]
    both_active = {"srx1": mnha("srx1", "srx2"), "srx2": mnha("srx2", "srx1")}
    assert readiness.mnha_pending([["srx1", "srx2"]], both_active, set()) == [
        "srx1/srx2: SRG1 roles active and active (one active, one backup expected)"]
    assert readiness.mnha_pending([["srx1", "srx2"]], statuses, {"srx2"}) == []  # a pair out of service


def hsrp(state: str, group: int = 1, vip: str = "10.10.10.100") -> dict[str, Any]:
    return {"groups": [{"group": group, "vip": vip, "state": state}]}


def test_hsrp_is_elected_with_one_active_and_one_standby() -> None:
    assert readiness.hsrp_pending({"r1": hsrp("Active"), "r2": hsrp("Standby"), "r3": hsrp("Listen")}, set()) == []
    assert readiness.hsrp_pending({"r1": hsrp("Active")}, set()) == []  # alone: no Standby to elect


def test_hsrp_still_electing_is_pending_and_says_where_each_router_is() -> None:
    assert readiness.hsrp_pending({"r1": hsrp("Speak"), "r2": hsrp("Listen"), "r3": hsrp("Listen")}, set()) == [
        "HSRP group 1 (10.10.10.100): not elected yet (r1 Speak, r2 Listen, r3 Listen)"]
    assert readiness.hsrp_pending({"r1": hsrp("Active"), "r2": hsrp("Speak"), "r3": None}, set()) == [
        "r3: no HSRP status yet", "HSRP group 1 (10.10.10.100): not elected yet (r1 Active, r2 Speak)"]
    two_active = {"r1": hsrp("Active"), "r2": hsrp("Active"), "r3": hsrp("Standby")}
    assert readiness.hsrp_pending(two_active, set()) != []
    assert readiness.hsrp_pending(two_active, {"r2"}) == []


def cluster(role: str, address: str, members: tuple[str, ...] = (), shutdown: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {"cluster": {"role": role, "address": address, "standby_group": "group1",
                                        "shutdown": shutdown}}
    if role == "master":
        data["cluster"]["rows"] = [{"address": address, "role": "Master"}] + [
            {"address": a, "role": "Slave"} for a in members]
    return data


def test_the_cluster_is_formed_when_its_master_lists_every_member() -> None:
    ready = {"r1": cluster("master", "10.0.0.1", ("10.0.0.2", "10.0.0.3")), "r2": cluster("slave", "10.0.0.2"),
             "r3": cluster("slave", "10.0.0.3")}
    assert readiness.clb_pending(ready, set()) == []


def test_a_cluster_without_its_members_or_master_is_pending() -> None:
    joining = {"r1": cluster("master", "10.0.0.1", ("10.0.0.2",)), "r2": cluster("slave", "10.0.0.2"),
               "r3": cluster("slave", "10.0.0.3")}
    assert readiness.clb_pending(joining, set()) == [
        "IKEv2 cluster group1: master r1 does not list r3 as members yet"]
    assert readiness.clb_pending(joining, {"r3"}) == []
    no_master = {"r1": cluster("slave", "10.0.0.1"), "r2": cluster("slave", "10.0.0.2")}
    assert readiness.clb_pending(no_master, set()) == ["IKEv2 cluster group1: 0 masters (r1 slave, r2 slave)"]
    shut = {"r1": cluster("master", "10.0.0.1", ("10.0.0.2",)), "r2": cluster("slave", "10.0.0.2"),
            "r3": cluster("none", "10.0.0.3", shutdown=True)}
    assert readiness.clb_pending(shut, set()) == []  # a router whose cluster is shut down takes no part


def test_lab_up_is_ready_only_when_every_condition_holds_in_one_pass() -> None:
    """A condition that held is not looked at again while a later one is waited for, but before
    `lab up` returns every condition is looked at once more: one that no longer holds keeps it waiting."""
    from lab_orchestrator.runtime import upwait

    wait = upwait.ReadyWait.__new__(upwait.ReadyWait)
    wait._held, wait._established, wait._full = set(), set(), False
    answers = {"bgp": [[], ["peer_mx1 Active"], [], []], "mnha": [["srx1: does not hear its peer srx2"], [], [], []]}
    looked: list[str] = []

    def look(name: str) -> Any:
        def run() -> list[str]:
            looked.append(name)
            return answers[name].pop(0) if name in answers else []
        return run

    for name in ("bgp", "routes", "responder", "selectors", "mnha", "flexvpn"):
        setattr(wait, f"_{name}", look(name))
    wait._ssh = lambda: []
    assert wait.pending() == ["srx1: does not hear its peer srx2"]
    assert looked == ["bgp", "routes", "responder", "selectors", "mnha"]
    looked.clear()
    # mnha holds now; the final pass finds a BGP session down again: not ready
    assert wait.pending() == ["peer_mx1 Active"]
    assert looked == ["mnha", "flexvpn", "bgp"]
    looked.clear()
    assert wait.pending() == []
    assert looked == ["bgp", "routes", "responder", "selectors", "mnha", "flexvpn",
                      "bgp", "routes", "responder", "selectors", "mnha", "flexvpn"]
