"""The JVD's failure events ("Tested Failure Events"), by name, with their restore step.

Pure: which events exist, what each does and undoes, and which apply to a given lab. Carrying
them out on a running lab is `ops.py`'s job. An event whose feature is not built is listed as not
applicable with the reason, never faked.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EventKind:
    name: str
    title: str  # the seed's wording
    target: str  # srx | mx | mnha-pair
    action: str  # what happens
    restore: str  # how it is undone
    requires: tuple[str, ...] = ()  # lab features: srx, mnha, selector, srd
    built: bool = True
    why_not_built: str = ""


CATALOG: tuple[EventKind, ...] = (
    EventKind("srx-link-failure", "MX Series Router to SRX Series Firewall link failures", "srx",
              "both links between the SRX and its first MX (trust and untrust: the JVD's AE bundle) lose "
              "carrier at both ends", "the links come back up", ("srx",)),
    EventKind("srx-reboot", "SRX Series Firewall reboot", "srx",
              "power off, then after --down-time back with its configuration (rulesets, routes, daemons)",
              "(self-restoring)", ("srx",)),
    EventKind("srx-power-off", "SRX Series Firewall power off", "srx",
              "the SRX vanishes at once: every link loses carrier, its daemons die, its sessions are lost",
              "power on (as after a reboot)", ("srx",)),
    EventKind("mnha-pair-power-off", "Complete MNHA pair power off", "mnha-pair",
              "both SRX of an MNHA pair power off at once", "power both on", ("mnha",)),
    EventKind("mx-reboot", "Reboot MX Series Router", "mx",
              "power off the MX (all its routing instances), then back after --down-time", "(self-restoring)",
              ("mx",)),
    EventKind("restart-routing", "Restart routing process", "mx",
              "BIRD of every routing instance of the MX is killed and restarted in graceful-restart recovery "
              "(kernel routes kept meanwhile, peers keep stale routes)", "(self-restoring)", ("mx",)),
    EventKind("restart-tlb", "Restart TLB process in MX router (traffic-dird, sdk-process and netmon)", "mx",
              "the selector/TLB daemon (dataplane.mxlb) is killed and restarted; it adopts the programmed "
              "table", "(self-restoring)", ("selector",)),
    EventKind("gres", "GRES (Graceful Restart of routing daemon)", "mx",
              "every control-plane daemon of the MX (BIRD per instance, selector) is killed and restarted "
              "at once; the kernel's forwarding state is kept", "(self-restoring)", ("mx",)),
    EventKind("nexthop-delete", "ECMP/TLB next-hop deletion (deleting a scale-out SRX or MNHA pair)", "srx",
              "the SRX is taken out of service (links down, daemons stopped)", "nexthop-add", ("srx",)),
    EventKind("nexthop-add", "ECMP/TLB next-hop addition (adding a scale-out SRX or MNHA pair)", "srx",
              "an SRX out of service is put (back) into service", "nexthop-delete", ("srx",)),
    EventKind("srd-switchover", "SRD based CLI switchover between MX Series Router (ECMP)", "mx",
              "`request services redundancy-set id 1 switchover` on the master: mastership moves to the "
              "other MX, which advertises without prepend from then on", "(a second switchover)", ("srd",)),
)

BY_NAME = {event.name: event for event in CATALOG}


@dataclass(frozen=True)
class Applicability:
    event: EventKind
    applicable: bool
    reason: str  # why not, or the default target


def features(plan: dict[str, object]) -> set[str]:
    """What a lab has, from its plan.json: node kinds, MNHA, a selector daemon, SRD."""
    nodes = plan.get("nodes", [])
    assert isinstance(nodes, list)
    have = {str(n["kind"]) for n in nodes}
    processes = plan.get("processes", [])
    assert isinstance(processes, list)
    if any(p["name"] == "mxlb" for p in processes):
        have.add("selector")
    if plan.get("mnha"):
        have.add("mnha")
    if plan.get("srd"):
        have.add("srd")
    return have


def applicable(plan: dict[str, object]) -> list[Applicability]:
    have = features(plan)
    out = []
    for event in CATALOG:
        missing = [r for r in event.requires if r not in have]
        if not event.built:
            out.append(Applicability(event, False, event.why_not_built))
        elif missing:
            out.append(Applicability(event, False, f"this lab has no {', '.join(missing)}"))
        else:
            out.append(Applicability(event, True, ""))
    return out
