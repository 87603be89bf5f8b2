"""What `lab up` waits for after BGP, on each MX selector (pure: status files in, reasons out).

BGP Established and the gateways' routes are not enough with TLB: the health monitor starts probing
with the lab, before the routes to the real-services exist and before the health-check responder
listens, so its first probes fail (failure-retries 1 takes a real-service down at once) and the
selector empties its table for a round; a pair real-service may also still point at the SRX BGP
preferred a moment ago. A lab is ready when, on each TLB MX:

- every profile has probed every real-service at least FRESH_PROBES more times since the moment
  the rest of the lab was ready (BASELINE, counts as the selector last heard them): the state the
  selector holds then comes from probes made on a lab that could answer them;
- every real-service is up and holds buckets in the selector's table;
- each pair real-service goes, on every side, through the SRX BGP prefers (`via_settled`).

On each ECMP (CHASH or plain) MX, the table must hold every SRX in service before the first flow
is sent: BGP Established is not enough, since the selector follows the routes BGP installs (held
down ROUTE_HOLD_S) and an SRX whose routes came later than the others' may still be out of it. So:

- no table change is pending (`settling`: a hold-down or an MNHA takeover running);
- every SRX with carrier on every side (a spare, powered off, has none) whose next hop is in the
  watched routes on every side holds buckets;
- an SRX with carrier but not routed is waited for, unless it is an SRG1 backup (its peer is routed:
  its routes are prepended, out of the ECMP route by design); a backup still holding buckets (the
  route gate, see dataplane.core.selector, has not opened yet) is waited for too: it leaves the table
  when the gate opens, which would move flows.
"""

from __future__ import annotations

from typing import Any

from labkit.status import MnhaStatus, MxlbStatus

FRESH_PROBES = 2  # the first count after the baseline may be a round that started before it


def probe_counts(selector: MxlbStatus) -> dict[str, int]:
    """'member/profile' -> probes the selector has heard of, from its status (TLB; {} otherwise)."""
    counts: dict[str, int] = {}
    for member in selector.members:
        for profile, values in (member.health.profiles if member.health is not None else {}).items():
            counts[f"{member.name}/{profile}"] = values.probes
    return counts


def selector_pending(node: str, selector: MxlbStatus | None, baseline: dict[str, int] | None,
                     srg1_peers: dict[str, str] | None = None) -> list[str]:
    """Why NODE's selector does not forward yet as the lab means to ([] when it does). BASELINE:
    the probe counts when the rest of the lab was ready (None: not taken yet; TLB then waits).
    SRG1_PEERS: SRX -> its peer, for the SRXs of MNHA pairs with an SRG1 (ECMP: one of the two is backup)."""
    if selector is None:
        return [f"{node}: the selector has not written its status yet"]
    if selector.mode != "tlb":
        return ecmp_pending(node, selector, srg1_peers or {})
    if baseline is None:
        return [f"{node}: health checks not started on a reachable lab yet"]
    counts = probe_counts(selector)
    stale = sorted(key for key in {*baseline, *counts} if counts.get(key, 0) < baseline.get(key, 0) + FRESH_PROBES)
    if stale or not counts:
        return [f"{node}: waiting for fresh health checks ({', '.join(stale[:4]) or 'none reported'})"]
    pending = []
    for member in selector.members:
        health = member.health
        if health is None or not health.up:
            result = "?" if health is None else health.last_result
            pending.append(f"{node}: real-service {member.name} health down ({result})")
        elif not member.buckets:
            pending.append(f"{node}: real-service {member.name} not in the selector's table yet")
        elif not member.via_settled:
            pending.append(f"{node}: real-service {member.name} not yet through the SRX BGP prefers")
    return pending


def _everywhere(sides: dict[str, bool]) -> bool:
    return bool(sides) and all(sides.values())


def ecmp_pending(node: str, selector: MxlbStatus, srg1_peers: dict[str, str]) -> list[str]:
    """Why NODE's ECMP selector table does not hold every SRX in service yet (see the module)."""
    pending = []
    if selector.settling:
        pending.append(f"{node}: a selector table change is pending (BGP hold-down)")
    members = {m.name: m for m in selector.members}
    for name, member in members.items():
        if not _everywhere(member.carrier):
            continue  # not in service (a spare, powered off)
        if _everywhere(member.routed):
            if not member.buckets:
                pending.append(f"{node}: {name} routed but not in the selector's table yet")
            continue
        peer = members.get(srg1_peers.get(name, ""))
        if peer is None or not _everywhere(peer.routed):
            pending.append(f"{node}: {name}: its BGP next hop not in the routes yet")
        elif member.buckets:
            pending.append(f"{node}: {name} (SRG1 backup) still in the table until the route gate opens")
    return pending


# --------------------------------------------------------------------------- MNHA pairs
def mnha_pending(pairs: list[list[str]], statuses: dict[str, MnhaStatus | None], down: set[str]) -> list[str]:
    """Why the MNHA pairs with both nodes in service are not in step ([] when they are), from each
    node's MNHA status (None: not written yet): each node hears its peer, neither is still
    initialising, BGP routes over each of its links to the MXs, with SRG1 one is active and the other
    backup, and, in a pair that syncs sessions,
    each node's session daemon answers and no cold sync is running or awaited either way."""
    why: list[str] = []
    for pair in pairs:
        if set(pair) & down:
            continue
        roles = []
        for node in pair:
            data = statuses.get(node)
            if data is None:
                why.append(f"{node}: no MNHA status yet")
                continue
            if not data.heartbeat.peer_alive:
                why.append(f"{node}: does not hear its peer {data.peer}")
            if data.srg0.links_unrouted:
                why.append(f"{node}: no BGP route yet over {', '.join(data.srg0.links_unrouted)} (links back)")
            role = data.srg1.role
            if role in ("init", "ineligible"):
                why.append(f"{node}: SRG1 {role}")
            sync = data.sync
            if sync is not None:
                if not sync.daemon_answering:
                    why.append(f"{node}: session sync daemon not answering yet")
                elif sync.awaiting_peer or sync.peer_awaiting or sync.sending:
                    why.append(f"{node}: initial session sync with {data.peer} not done")
            roles.append((role, data.mode))
        if len(roles) == 2 and roles[0][1] != "srg0" and sorted(r for r, _ in roles) != ["active", "backup"]:
            why.append(f"{'/'.join(pair)}: SRG1 roles {roles[0][0]} and {roles[1][0]} "
                       "(one active, one backup expected)")
    return why


# --------------------------------------------------------------------------- FlexVPN: HSRP and the CLB
def hsrp_pending(statuses: dict[str, dict[str, Any] | None], down: set[str]) -> list[str]:
    """Why the HSRP groups of the routers in service are not elected ([] when they are), from each
    router's HSRP status (node -> status, None: not written yet): per group (number and virtual IP)
    one router Active and, with two routers or more, one Standby; the others Listen."""
    why: list[str] = []
    groups: dict[tuple[int, str], dict[str, str]] = {}
    for node, data in sorted(statuses.items()):
        if node in down:
            continue
        if data is None:
            why.append(f"{node}: no HSRP status yet")
            continue
        for group in data.get("groups") or []:
            key = (int(group.get("group", 0)), str(group.get("vip") or ""))
            groups.setdefault(key, {})[node] = str(group.get("state", "?"))
    for (number, vip), states in sorted(groups.items()):
        active = [n for n, s in states.items() if s == "Active"]
        standby = [n for n, s in states.items() if s == "Standby"]
        wanted_standby = 1 if len(states) > 1 else 0
        if len(active) != 1 or len(standby) != wanted_standby:
            seen = ", ".join(f"{n} {s}" for n, s in sorted(states.items()))
            why.append(f"HSRP group {number} ({vip or 'virtual IP not learnt'}): not elected yet ({seen})")
    return why


def clb_pending(statuses: dict[str, dict[str, Any] | None], down: set[str]) -> list[str]:
    """Why the IKEv2 cluster (CLB) of the routers in service has not formed ([] when it has), from each
    router's IKEv2 status (node -> status, None: not written yet; routers whose cluster is shut down
    take no part): one master, and its table holds every other router of the cluster as a member."""
    why: list[str] = []
    clusters: dict[str, dict[str, Any]] = {}
    for node, data in sorted(statuses.items()):
        if node in down:
            continue
        if data is None:
            why.append(f"{node}: no IKEv2 status yet")
            continue
        cluster = data.get("cluster")
        if isinstance(cluster, dict) and not cluster.get("shutdown"):
            clusters[node] = cluster
    by_group: dict[str, dict[str, dict[str, Any]]] = {}
    for node, cluster in clusters.items():
        by_group.setdefault(str(cluster.get("standby_group") or ""), {})[node] = cluster
    for group, members in sorted(by_group.items()):
        masters = [n for n, c in members.items() if c.get("role") == "master"]
        if len(masters) != 1:
            roles = ", ".join(f"{n} {c.get('role', '?')}" for n, c in sorted(members.items()))
            why.append(f"IKEv2 cluster {group}: {len(masters)} masters ({roles})")
            continue
        master = members[masters[0]]
        joined = {str(r.get("address")) for r in master.get("rows") or [] if r.get("role") == "Slave"}
        missing = sorted(n for n, c in members.items() if n != masters[0] and str(c.get("address")) not in joined)
        if missing:
            why.append(f"IKEv2 cluster {group}: master {masters[0]} does not list {', '.join(missing)} as members yet")
    return why
