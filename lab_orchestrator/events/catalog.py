"""The JVD's failure events ("Tested Failure Events"), by name, with their restore step.

Pure: which events exist, what each does and undoes, and which apply to a given lab. Carrying
them out on a running lab is `ops.py`'s job. An event whose feature is not built is listed as not
applicable with the reason, never faked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import kinds

# What an event is aimed at: a node whose kind declares a role (the firewall: an SRX; the load
# balancer: an MX), a whole MNHA pair, a FlexVPN cluster member, or any node that runs a daemon.
FIREWALL = "firewall"
LOAD_BALANCER = "load-balancer"
MNHA_PAIR = "mnha-pair"
FLEXVPN_MEMBER = "flexvpn-member"
ANY_NODE = "node"
ROLES: dict[str, Callable[[kinds.Kind], bool]] = {
    FIREWALL: lambda kind: kind.firewall,
    LOAD_BALANCER: lambda kind: kind.load_balancer,
}


def role_kinds(role: str) -> frozenset[str]:
    """The names of the node kinds that declare ROLE (FIREWALL, LOAD_BALANCER)."""
    return kinds.names(ROLES[role])


def shown(word: str) -> str:
    """A target or requirement as the user reads it: a role by its kinds' names (`srx`), else itself."""
    return "/".join(sorted(role_kinds(word))) if word in ROLES else word


@dataclass(frozen=True)
class EventKind:
    name: str
    title: str  # the seed's wording
    target: str  # FIREWALL | LOAD_BALANCER | MNHA_PAIR | FLEXVPN_MEMBER | ANY_NODE
    action: str  # what happens
    restore: str  # how it is undone
    requires: tuple[str, ...] = ()  # lab features: roles (FIREWALL, LOAD_BALANCER), mnha, selector, tlb, srd, flexvpn
    built: bool = True
    why_not_built: str = ""

    @property
    def target_name(self) -> str:
        """The target as `lab events list` shows it (`srx`, `mx`, `mnha-pair`, ...)."""
        return shown(self.target)

    @property
    def node_kinds(self) -> frozenset[str]:
        """The kinds of the nodes the event is aimed at when it targets a role; empty otherwise."""
        return role_kinds(self.target) if self.target in ROLES else frozenset()


CATALOG: tuple[EventKind, ...] = (
    EventKind("srx-link-failure", "MX Series Router to SRX Series Firewall link failures", FIREWALL,
              "every link between the SRX and its first MX (trust, untrust and the ICL: the JVD's AE bundle) loses "
              "carrier at both ends", "the links come back up", (FIREWALL,)),
    EventKind("srx-link-blackhole", "MX to SRX path blackholed, carrier up (not in the JVD's list: what BFD detects)",
              FIREWALL,
              "every packet on the links between the SRX and its first MX is dropped inside the SRX (nftables); "
              "the links keep their carrier, so only BFD (300 ms x 3) notices and takes the BGP sessions down",
              "the drop is removed", (FIREWALL, "bfd")),
    EventKind("srx-reboot", "SRX Series Firewall reboot", FIREWALL,
              "power off, then after --down-time back with its configuration (rulesets, routes, daemons)",
              "(self-restoring)", (FIREWALL,)),
    EventKind("srx-power-off", "SRX Series Firewall power off", FIREWALL,
              "the SRX vanishes at once: every link loses carrier, its daemons die, its sessions are lost",
              "power on (as after a reboot)", (FIREWALL,)),
    EventKind("mnha-pair-power-off", "Complete MNHA pair power off", MNHA_PAIR,
              "both SRX of an MNHA pair power off at once", "power both on", ("mnha",)),
    EventKind("mx-reboot", "Reboot MX Series Router", LOAD_BALANCER,
              "power off the MX (all its routing instances), then back after --down-time", "(self-restoring)",
              (LOAD_BALANCER,)),
    EventKind("restart-routing", "Restart routing process", LOAD_BALANCER,
              "BIRD of every routing instance of the MX is killed and restarted in graceful-restart recovery "
              "(kernel routes kept meanwhile, peers keep stale routes)", "(self-restoring)", (LOAD_BALANCER,)),
    EventKind("restart-tlb", "Restart TLB process in MX router (traffic-dird, sdk-process and netmon)", LOAD_BALANCER,
              "every load-balancing daemon of the MX (the selector dataplane.daemons.mxlb and, with TLB, the health "
              "monitor dataplane.daemons.healthd) is killed and restarted; the selector adopts the programmed table, "
              "the monitor resumes from its published health state", "(self-restoring)", ("selector",)),
    EventKind("restart-tlb-selector", "Restart traffic-dird daemon / restart sdk-process (TLB selector)", LOAD_BALANCER,
              "only the TLB selector (dataplane.daemons.mxlb: decides the table and programs it, the lab's "
              "traffic-dird and sdk-process in one) is killed and restarted; "
              "it adopts the programmed table and the health "
              "monitor's state, the kernel forwards with the last table meanwhile", "(self-restoring)",
              ("tlb",)),
    EventKind("restart-tlb-monitor", "Restart Network-monitor daemon (TLB health checks)", LOAD_BALANCER,
              "only the TLB health monitor (dataplane.daemons.healthd, the lab's Network-monitor) is killed and "
              "restarted; it resumes from its published health state, the selector keeps the last state "
              "meanwhile", "(self-restoring)", ("tlb",)),
    EventKind("gres", "GRES (Graceful Restart of routing daemon)", LOAD_BALANCER,
              "there is no second routing engine: every control-plane daemon of the MX (BIRD of each routing "
              "instance in graceful restart, selector, health monitor, SRD daemon) is killed and restarted at "
              "once, resuming from its state; the kernel's forwarding state (routes, selector map) is kept",
              "(self-restoring)", (LOAD_BALANCER,)),
    EventKind("daemon-crash", "Daemon crash (kill -9 of one daemon; not in the JVD's list)", ANY_NODE,
              "kill -9 of the chosen daemon (--daemon NAME) on the chosen node; the lab supervisor restarts "
              "it (BIRD in graceful restart, the others resuming from their state); passes when it is back "
              "within a few seconds and flows the node does not carry lose nothing", "(self-restoring)"),
    EventKind("nexthop-delete", "ECMP/TLB next-hop deletion (deleting a scale-out SRX or MNHA pair)", FIREWALL,
              "the SRX is taken out of service (links down, daemons stopped); in an MNHA lab its whole pair",
              "nexthop-add", (FIREWALL,)),
    EventKind("nexthop-add", "ECMP/TLB next-hop addition (adding a scale-out SRX or MNHA pair)", FIREWALL,
              "an SRX out of service (in an MNHA lab: both nodes of its pair) is put (back) into service; "
              "`lab events run` takes one in service out first", "nexthop-delete", (FIREWALL,)),
    EventKind("srd-switchover", "SRD based CLI switchover between MX Series Router (ECMP)", LOAD_BALANCER,
              "`request services redundancy-set id 1 switchover` on the master: mastership moves to the "
              "other MX, which advertises without prepend from then on", "(a second switchover)", ("srd",)),
    EventKind("srd-link-failure", "Inter-MX (SRD) link failure (not in the JVD's list)", LOAD_BALANCER,
              "the link between the two MXs of the SRD pair loses carrier at both ends: they stop hearing "
              "each other and, as Juniper documents no split-brain protection for SRD and the lab invents "
              "none, both become master and advertise without prepend", "the link comes back up (the "
              "preferred master keeps mastership, the other returns to standby)", ("srd",)),
    EventKind("flexvpn-member-power-off", "FlexVPN cluster member power off (Cisco FlexVPN load balancer)",
              FLEXVPN_MEMBER,
              "a cluster member (not the master) powers off: its clients' tunnels break; the master drops it "
              "after the CLB hold time, the clients find their peer dead (DPD), connect to the VIP again and "
              "are redirected to a live member", "power on (it rejoins the cluster as a member, empty)",
              ("flexvpn",)),
)

BY_NAME = {event.name: event for event in CATALOG}


@dataclass(frozen=True)
class Applicability:
    event: EventKind
    applicable: bool
    reason: str  # why not, or the default target


def features(plan: dict[str, object]) -> set[str]:
    """What a lab has, from its plan.json: roles of its node kinds, MNHA, a selector daemon, a TLB health
    monitor, SRD, FlexVPN."""
    nodes = plan.get("nodes", [])
    assert isinstance(nodes, list)
    present = {str(n["kind"]) for n in nodes}
    have = {role for role in ROLES if role_kinds(role) & present}
    processes = plan.get("processes", [])
    assert isinstance(processes, list)
    if any(p["name"] == "mxlb" for p in processes):
        have.add("selector")
    if any(p["name"] == "healthd" for p in processes):
        have.add("tlb")
    if plan.get("mnha"):
        have.add("mnha")
    if plan.get("srd"):
        have.add("srd")
    if plan.get("bfd"):
        have.add("bfd")
    if any(p["name"] == "flexvpn" for p in processes):
        have.add("flexvpn")
    return have


def applicable(plan: dict[str, object]) -> list[Applicability]:
    have = features(plan)
    out = []
    for event in CATALOG:
        missing = [r for r in event.requires if r not in have]
        if not event.built:
            out.append(Applicability(event, False, event.why_not_built))
        elif missing:
            out.append(Applicability(event, False, f"this lab has no {', '.join(shown(m) for m in missing)}"))
        else:
            out.append(Applicability(event, True, ""))
    return out
