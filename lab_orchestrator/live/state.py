"""The live state of a running lab, for `lab top` and `lab web`: one read, one JSON-able picture.

`collect(lab)` reads what the lab already publishes, through the Lab API (`lab status`: nodes, daemons,
BGP, readiness; the selector, MNHA, SRD, HSRP and CLB status files that the daemons write; the recent
events with their verdicts, eventlog); it starts
no daemon and asks none. `picture(raw, previous)` is pure: it turns that read into what the views draw
(per node a state and a colour class, per SRX its buckets and packets per second from the MX counters,
per link up or down) and is unit-tested without a lab.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from labkit.contracts import HSRP_STATUS, IKEV2_STATUS, MXLB_STATUS
from labkit.flexstatus import HsrpStatus, read_ikev2
from labkit.status import MxlbStatus, StatusModel, read_status

from ..events import log as eventlog
from ..kinds.host import KIND as _HOST
from ..kinds.ios_router import KIND as _IOS
from ..kinds.mx import KIND as _MX
from ..kinds.srx import KIND as _SRX
from ..plan.sshplan import PROCESS_NODE

MX, SRX, IOS, HOST = _MX.name, _SRX.name, _IOS.name, _HOST.name

if TYPE_CHECKING:
    from ..api import Lab


RECENT_EVENTS = 6  # the views show the last few events (newest first)


def _read(lab: Lab, node: str, name: str, model: type[StatusModel]) -> dict[str, Any] | None:
    """A daemon's status file read as its labkit model (None: missing, being rewritten, or another shape)."""
    status = read_status(lab.node_file(node, name), model)
    return None if status is None else status.to_dict()


def _read_ikev2(lab: Lab, node: str) -> dict[str, Any] | None:
    status = read_ikev2(lab.node_file(node, IKEV2_STATUS))
    return None if status is None else status.to_dict()


def _session_count(ns: str) -> int | None:
    """Sessions (conntrack entries, synchronised copies included) in namespace NS; None if unreadable."""
    from labkit import netnsutil

    try:
        # /proc/sys/net answers for the namespace of the thread that opens it
        with netnsutil.entered(ns), open("/proc/sys/net/netfilter/nf_conntrack_count") as count:
            return int(count.read())
    except (OSError, ValueError):
        return None


def collect(lab: Lab) -> dict[str, Any]:
    """Everything the live views show, read once from the running lab."""
    lab.refresh()
    plan = lab.plan()
    raw: dict[str, Any] = {"at": time.time(), "lab": lab.name, "status": asdict(lab.status()),
                           "down_nodes": list(lab.state.down_nodes),
                           "down_links": [list(p) for p in lab.state.down_links],
                           "links": [[v.a.node, v.b.node, v.a.zone or v.b.zone or ""] for v in plan.veths
                                     if v.a.node != v.b.node],
                           "redundancy": lab.redundancy(), "selectors": {}, "hsrp": {}, "clb": {},
                           "events": eventlog.read(lab.state_dir), "sessions": {}}
    for node in plan.nodes:
        if node.kind == SRX and node.name not in lab.state.down_nodes:
            raw["sessions"][node.name] = _session_count(lab.ns(node.name))
        if node.kind == MX:
            raw["selectors"][node.name] = _read(lab, node.name, MXLB_STATUS, MxlbStatus)
        if node.kind == IOS:
            raw["hsrp"][node.name] = _read(lab, node.name, HSRP_STATUS, HsrpStatus)
            raw["clb"][node.name] = _read_ikev2(lab, node.name)
    return raw


def _member_packets(selectors: dict[str, Any]) -> dict[str, int]:
    """Packets each selector member (an SRX or a TLB real-service) was sent by every MX, both sides."""
    totals: dict[str, int] = {}
    for sel in selectors.values():
        for member in (sel or {}).get("members", []):
            for side in (member.get("counters") or {}).values():
                totals[member["name"]] = totals.get(member["name"], 0) + int(side.get("packets", 0))
    return totals


def roles(node: dict[str, Any]) -> str:
    """A node's roles in one line: SRG0 (an SRG0-only pair) or SRG1/SRG2, SRD, HSRP, CLB, selector mode."""
    srg0 = f"SRG0 {node['srg0']}" if node.get("srg0") and node.get("mnha_mode") == "srg0" else ""
    parts = [srg0, f"SRG1 {node['srg1']}" if node.get("srg1") else "",
             f"SRG2 {node['srg2']}" if node.get("srg2") else "",
             f"SRD {node['srd']}" if node.get("srd") else "", f"HSRP {node['hsrp']}" if node.get("hsrp") else "",
             f"CLB {node['clb']}" if node.get("clb") else "", str(node.get("mode") or "")]
    sync = node.get("sync")
    if sync:
        state = "ok" if sync["ok"] else "BROKEN (" + "; ".join(sync.get("problems") or []) + ")"
        parts.append(f"sync {state} {sync['sessions']} sessions "
                     f"({sync['synced']} to peer, {sync['received']} from it, "
                     f"{sync.get('msgs_per_s', 0.0):g} msg/s, ICL {sync.get('icl_bytes_per_s', 0.0) / 1000:g} kB/s)")
    return ", ".join(p for p in parts if p)


HOLD_RATE_S = 3.0  # a member's last rate stays shown this long while its counters do not move


def _counted_at(raw: dict[str, Any]) -> float:
    """When the selectors' counters were read (their status time; this read's time if they say none)."""
    times = [float(sel["updated_at"]) for sel in raw["selectors"].values() if sel and sel.get("updated_at")]
    return max(times) if times else float(raw["at"])


def _rates(packets: dict[str, int], counted_at: float, now: float,
           before: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Packets per second per member between the last two different counter readings. The selector reads
    its counters about once a second and the views twice a second: a rate over each view tick would swing
    between 0 and twice the truth, so a reading that has not moved keeps the last rate (HOLD_RATE_S)."""
    out: dict[str, dict[str, float]] = {}
    for name, count in packets.items():
        last = before.get(name)
        if last is None or count < last["packets"]:  # first sight, or counters reset (a restarted daemon)
            out[name] = {"at": counted_at, "packets": count, "pps": 0.0}
        elif count != last["packets"] and counted_at > last["at"]:
            out[name] = {"at": counted_at, "packets": count,
                         "pps": round((count - last["packets"]) / (counted_at - last["at"]), 1)}
        else:
            out[name] = {**last, "pps": last["pps"] if now - last["at"] <= HOLD_RATE_S else 0.0}
    return out


def _sync_row(name: str, sync: dict[str, Any], counted_at: float, now: float,
              before: dict[str, dict[str, dict[str, float]]],
              rates: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """One SRX's session sync: sessions here, synced to the peer, received from it, sync messages and
    ICL bytes per second (sent and received together, between the last two readings of its MNHA status), and what is
    wrong with it, judged as `lab status` judges it (RATES gets this reading for the next picture)."""
    from ..runtime.status import sync_problems

    def total(*keys: str) -> int:
        return sum(int(sync.get(k) or 0) for k in keys)

    rates[name] = _rates({"msgs": total("sent_packets", "received_packets"),
                          "bytes": total("sent_bytes", "received_bytes")}, counted_at, now, before.get(name, {}))
    problems = sync_problems(sync, max(0.0, now - counted_at))  # a status not rewritten for long is a problem
    return {"sessions": sync.get("sessions"), "synced": sync.get("cache"), "received": sync.get("injected"),
            "unacked": sync.get("resend_queue"), "msgs_per_s": rates[name]["msgs"]["pps"],
            "icl_bytes_per_s": rates[name]["bytes"]["pps"], "problems": problems, "ok": not problems}


def actions(node: dict[str, Any]) -> list[str]:
    """What a view may do to a node: fail / restore (nodes with a power-off or reboot event), switchover (the
    SRD master)."""
    out = ["fail", "restore"] if fail_event(node["kind"]) else []
    return out + (["switchover"] if node.get("srd") == "master" else [])


def picture(raw: dict[str, Any], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the views draw, from one `collect` (and the previous picture, for packets per second)."""
    status = raw["status"]
    down = set(raw["down_nodes"])
    packets = _member_packets(raw["selectors"])
    rates = _rates(packets, _counted_at(raw), raw["at"], (previous or {}).get("rates", {}))
    members: dict[str, dict[str, Any]] = {}
    total = 0
    for sel in raw["selectors"].values():
        if not sel:
            continue
        total += int(sel.get("buckets", 0))
        for m in sel.get("members", []):
            row = members.setdefault(m["name"], {"name": m["name"], "alive": True, "buckets": 0})
            row["alive"] = row["alive"] and bool(m.get("alive"))
            row["buckets"] += int(m.get("buckets", 0))
    for row in members.values():
        row["share"] = round(row["buckets"] / total, 4) if total else 0.0
        name = row["name"]
        row["pps"] = rates.get(name, {}).get("pps", 0.0)
    mnha = raw["redundancy"].get("mnha", {})
    srd = raw["redundancy"].get("srd", {})
    sync_rates: dict[str, dict[str, dict[str, float]]] = {}
    nodes = []
    for node in status["nodes"]:
        name, kind = node["name"], node["kind"]
        if name == PROCESS_NODE:  # the lab-wide processes (the SSH server): not a node of the topology
            continue
        daemons = node["daemons"]
        row = {
            "name": name, "kind": kind, "bgp_sessions": len(node["bgp"]),
            "bgp_established": sum(1 for s in node["bgp"] if str(s["info"]).startswith("Established")),
            "daemons_down": [d["name"] for d in daemons if not d["running"] and d["state"] != "stopped"],
            "restarts": sum(int(d.get("restarts", 0)) for d in daemons),
            "sessions": raw.get("sessions", {}).get(name),
        }
        state = "failed" if name in down else "degraded" if row["daemons_down"] else "up"
        if kind == SRX:
            role = mnha.get(name) or {}
            row["mnha_mode"] = role.get("mode")
            row["srg0"] = (role.get("srg0") or {}).get("role")
            # in an SRG0-only pair both nodes are active and the SRG1 role is a placeholder: not shown
            row["srg1"] = (role.get("srg1") or {}).get("role") if role.get("mode") != "srg0" else None
            row["srg2"] = (role.get("srg2") or {}).get("role")
            sync = role.get("sync") or {}
            row["sync"] = _sync_row(name, sync, float(role.get("updated_at") or raw["at"]), raw["at"],
                                    (previous or {}).get("sync_rates", {}), sync_rates) if sync else None
            mine = members.get(name)
            if mine is not None:
                row.update(buckets=mine["buckets"], share=mine["share"], pps=mine["pps"])
                if state == "up" and not mine["alive"] and not mine["buckets"]:
                    state = "drained"  # running, but the selectors send it nothing
        if kind == MX:
            row["mode"] = (raw["selectors"].get(name) or {}).get("mode")
            row["srd"] = (srd.get(name) or {}).get("role")
        if kind == IOS:
            groups = (raw["hsrp"].get(name) or {}).get("groups") or []
            row["hsrp"] = groups[0].get("state") if groups else None
            row["clb"] = ((raw["clb"].get(name) or {}).get("cluster") or {}).get("role")
        if state == "failed":  # a powered-off box holds no role (its daemons' last status files remain)
            for key in ("srg0", "srg1", "srg2", "srd", "hsrp", "clb"):
                if row.get(key) is not None:
                    row[key] = None
        row["state"] = state
        row["roles"] = roles(row)
        row["actions"] = actions(row)
        nodes.append(row)
    links = []
    for a, b, zone in raw["links"]:
        failed = a in down or b in down or [a, b] in raw["down_links"] or [b, a] in raw["down_links"]
        links.append({"a": a, "b": b, "zone": zone, "up": not failed})
    events = [{k: e.get(k) for k in ("event", "target", "started", "finished", "verdict", "detail")}
              for e in raw.get("events", [])[-RECENT_EVENTS:]][::-1]
    return {"at": raw["at"], "lab": raw["lab"], "status": status["status"], "ready": status["ready"],
            "problems": status["problems"], "nodes": nodes, "links": links,
            "members": sorted(members.values(), key=lambda m: m["name"]), "packets": packets, "rates": rates,
            "sync_rates": sync_rates, "events": events}


def inspect(lab: Lab) -> dict[str, Any]:
    """`lab inspect`: per node its kind, state, roles, addresses, interfaces (vendor and kernel names), BGP
    sessions established and selector share, from one `collect`."""
    plan = lab.plan()
    now = picture(collect(lab))
    rows = {row["name"]: row for row in now["nodes"]}
    nodes = []
    for n in plan.nodes:
        row = rows.get(n.name, {})
        nodes.append({
            "name": n.name, "kind": n.kind, "state": row.get("state"), "roles": row.get("roles", ""),
            "mgmt": n.mgmt_address, "loopbacks": {k or "master": v for k, v in n.loopbacks.items()},
            "interfaces": [{"vendor": p.vendor, "kernel": p.kernel, "address": p.address, "peer": p.peer,
                            "peer_interface": p.peer_interface, "zone": p.zone}
                           for p in lab.interfaces(n.name) if p.zone != "management"],
            "bgp": {"established": row.get("bgp_established", 0), "sessions": row.get("bgp_sessions", 0)},
            "share": row.get("share"), "pps": row.get("pps"),
        })
    return {"lab": lab.name, "source": lab.state.source, "status": now["status"],
            "ready": now["ready"], "load_balancing": plan.load_balancing, "use_case": plan.use_case,
            "nodes": nodes, "members": now["members"]}


def fail_event(kind: str) -> str | None:
    """The event the views' "fail" runs on a node of KIND: its power-off, else its reboot (None: none)."""
    from ..events.catalog import CATALOG

    for suffix in ("-power-off", "-reboot"):
        for event in CATALOG:
            if event.built and kind in event.node_kinds and event.name.endswith(suffix):
                return event.name
    return None


def act(lab: Lab, action: str, node: str) -> str:
    """A view's action on the running lab: fail NODE (its power-off), restore NODE, or an SRD switchover."""
    lab.refresh()
    if action == "switchover":
        return f"switchover requested on {lab.switchover()}"
    kinds = {n.name: n.kind for n in lab.plan().nodes}
    if node not in kinds:
        raise ValueError(f"lab {lab.name} has no node {node!r}")
    if action == "fail":
        event = fail_event(kinds[node])
        if event is None:
            raise ValueError(f"{node} is a {kinds[node]}: only SRX and MX nodes can be failed from here")
        return lab.fail(event, node)
    if action == "restore":
        return "; ".join(lab.restore(node, wait=False)) or f"nothing to restore on {node}"
    raise ValueError(f"unknown action {action!r} (fail, restore, switchover)")


# what a failure event, the supervisor or an event run rewrites on a change
RECORDS = ("state.json", "processes.json", eventlog.LOG_NAME)
POLL_S = 0.1  # how often the views look at RECORDS between two full reads


def stamp(lab: Lab) -> tuple[int, ...]:
    """A cheap fingerprint (modification times) of the lab's record and process table: the views read the
    whole state again as soon as it changes (a power-off, a daemon crash), not only on their next tick."""
    stamps = []
    for name in RECORDS:
        try:
            stamps.append((lab.state_dir / name).stat().st_mtime_ns)
        except OSError:
            stamps.append(0)
    return tuple(stamps)


class Ticker:
    """When to read again: every PERIOD seconds, and at once when `stamp` changes (checked every POLL_S)."""

    def __init__(self, lab: Lab, period: float):
        self.lab, self.period = lab, period
        self.last = stamp(lab)

    def wait(self, stop: Callable[[float], bool]) -> bool:
        """Wait for the next read; STOP(seconds) waits up to that long and says whether to stop instead."""
        deadline = time.monotonic() + self.period
        while True:
            left = deadline - time.monotonic()
            if stop(max(0.0, min(POLL_S, left))):
                return False
            now = stamp(self.lab)
            if now != self.last or time.monotonic() >= deadline:
                self.last = now
                return True


def read(lab: Lab, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """collect + picture: the live state now."""
    return picture(collect(lab), previous)
