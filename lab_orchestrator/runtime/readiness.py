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

from labkit.status import MxlbStatus

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
