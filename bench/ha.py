#!/usr/bin/env python3
"""HA benchmark: MNHA SRG1 failover, MNHA session sync lag, SRD switchover convergence.

Measured on real namespaces, with real packets, in one run (this machine is shared and noisy, so
every traffic measurement has a no-event baseline window measured alongside, in the same lab):

  1. MNHA SRG1 failover (lab bh1: `bench/gen_topology.py --srx 4 --mnha`, both pairs `mode: srg1`,
     ECMP CHASH, one MX). Two-way UDP flows (client -> server and the same 5-tuples back) at a known
     per-flow rate; the SRG1 active carrying the flows is powered off (`lab fail ... srx-power-off`)
     and its backup takes the flows with the synced sessions. Per run: the loss-derived outage
     (lost / per-flow rate, RFC 6412) and the longest gap of every flow the failed SRX carried, plus
     a server-push flow (`dataplane.traffic.udpprobe push/pull`, only the server sends) through the same SRX.
     Then `lab restore` under traffic: the failback (preemption) outage, and the wait for it.
  2. MNHA session sync lag (lab bh3: labs/topology3.yml, SRG0 pairs, TLB). 1000 new UDP sessions in
     1 s (1000 distinct subscriber addresses, one datagram each, paced 1 ms apart). With the conntrack
     timestamp extension on in the SRX namespaces, the kernel stamps each entry when it is created:
     lag = creation of the synced copy on the peer (conntrackd inserting it) - creation on the SRX
     that carried the packet, both read back over ctnetlink. (`conntrack -E -o timestamp` stamps an
     event when the listener prints it: two listeners in one namespace disagreed by up to ~57 ms on
     this machine, far more than the lag itself.) Baseline: send time -> entry created on the carrier.
     Then 3 one-second bursts at 5000/s and at 10000/s: lag, sessions gone from the carrier or never
     copied to the peer 1.5 s later, and conntrackd's netlink overruns (counted in its log).
  3. SRD switchover (lab bh2: labs/topology2.yml, dual MX, ECMP CHASH): CLI (`lab switchover`, each run
     from the current master), and a monitored-link failure (the master MX's gateway-facing link
     `ge-0-0-0` of TRUST-VR down; then up, and `lab switchover` back to mx1 outside the measurement).
     Per run: every flow's loss-derived convergence, both directions.

Resolution of a loss-derived figure: 1 / per-flow rate (10 ms at the default 100 flows x 100 pps).
Prints a markdown table with the machine and date and writes it to docs/benchmarks-ha.md (notes
below the marker line there are kept). Needs root. Only touches labs named bh1, bh2, bh3, brought
down in finally blocks (also on errors and Ctrl-C).

  sudo python3 bench/ha.py --quick           # 5 runs of each measurement
  sudo python3 bench/ha.py                   # 20 runs
  sudo python3 bench/ha.py --runs 3 --only srd --json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import (  # noqa: E402
    BenchError,
    interruptible,
    lab,
    summary,
    topology_text,
    wait_for,
    write_doc,
)
from ha_observe import (  # noqa: E402
    PEER,
    PUSH_RATE,
    CarrierWatch,
    Lab,
    PushFlow,
    by_source,
    conntrack_starts,
    conntrackd_overruns,
    flow_stats,
    link_set,
    log,
    selector_change_after,
    selector_members,
    srd_roles,
    srd_settled,
    srd_transitions,
    srg1_settled,
    srg1_text,
    transition_after,
    window,
)
from ha_report import DOC, PARTS, machine, markdown  # noqa: E402

from dataplane.traffic import Receiver, Sender, make_flows  # noqa: E402
from lab_orchestrator.plan import trafficsetup  # noqa: E402
from lab_orchestrator.runtime import ops  # noqa: E402


def measure_failover(out: dict[str, Any], workdir: Path, runs: int, flows_n: int, rate: float, sizes: str) -> None:
    out.update({"lab": "bh1", "runs": [], "baseline": [], "flows": flows_n, "rate": rate,
                "resolution_ms": round(1000 * flows_n / rate, 3)})
    wall_offset = time.time() - time.monotonic()
    with Lab("bh1", srg1_text("bh1"), workdir) as bh1:
        wait_for("SRG1 roles active/backup and selector on srx1+srx3", lambda: srg1_settled(bh1), 30)
        plan = bh1.plan()
        flows = make_flows(flows_n, "100.64.32.0/20", trafficsetup.endpoints(plan).server_address)
        hb = json.loads((bh1.state_dir / "nodes/srx1/mnha.json").read_text())
        out["heartbeat"] = {"interval_ms": hb["heartbeat_ms"], "threshold": hb["heartbeat_threshold"]}
        where: dict[str, str] = {}
        for run in range(runs):
            # baseline: the same flows, no event (noise floor of the loss / gap measurement)
            push = PushFlow(bh1, flows[0].src, 7200 + run % 50, seconds=8.0)
            try:
                time.sleep(0.5)
                base, _, _, carried = window(plan, flows, rate, sizes, 2.0, dict, 3.0)
                pushed = push.result()
            except BaseException:
                push.kill()
                raise
            where = by_source(carried) or where
            out["baseline"].append(flow_stats(base) | {"sender_max_lag_ms": base["sender_max_lag_ms"],
                                                       "push_gap_ms": round(pushed["longest_gap_s"] * 1000, 1),
                                                       "push_lost": pushed["lost"]})
            target = "srx1" if run % 2 == 0 else "srx3"
            peer = PEER[target]
            mine = {src for src, srx in where.items() if srx == target}
            if not mine:
                raise BenchError(f"no flow is carried by {target}: {sorted(set(where.values()))}")
            push_src = sorted(mine)[0]
            push = PushFlow(bh1, push_src, 7100 + run % 50, seconds=8.0)
            facts: dict[str, Any] = {}

            mx_ns = bh1.ns("mx1", "TRUST-VR")
            watch = CarrierWatch(mx_ns, {name for ns, name in ops.link_peers(plan, target, "mx1") if ns == mx_ns})

            def fail(target: str = target, facts: dict[str, Any] = facts) -> dict[str, Any]:
                facts["cli_start"] = time.monotonic()
                lab("fail", "--lab", bh1.name, target, "srx-power-off")
                facts["cli_end"] = time.monotonic()
                return facts

            try:
                time.sleep(0.5)
                result, _, before, after = window(plan, flows, rate, sizes, 2.0, fail, 3.0)
                pushed = push.result()
            except BaseException:
                push.kill()
                raise
            finally:
                watch.close()
            off = watch.first()  # the MX saw the SRX's link lose carrier: the power-off, to a few ms
            affected = {src for (src, port), srx in before.items() if srx == target and port == flows[0].sport}
            moved_to_peer = sum(1 for (src, port), srx in after.items()
                                if src in affected and port == flows[0].sport and srx == peer)
            stats = flow_stats(result, affected)
            peer_status = bh1.status(peer, "mnha")
            active_at = transition_after(peer_status.get("srg1", {}).get("transitions", []), "active",
                                         facts["cli_start"])
            moved_at = selector_change_after(bh1, facts["cli_start"] + wall_offset, without=target)
            sample = {
                "target": target, "peer": peer, **{k: v for k, v in stats.items() if k != "per_flow_ms"},
                "per_flow_ms": stats["per_flow_ms"], "moved_to_peer": moved_to_peer,
                "unaffected_loss": sum(r["lost_forward"] + r["lost_reverse"] for src, r in result["rows"].items()
                                       if src not in affected),
                "push": pushed, "push_gap_ms": round(pushed["longest_gap_s"] * 1000, 1),
                "push_loss_ms": round(pushed["lost"] / PUSH_RATE * 1000, 1),
                "cli_ms": round((facts["cli_end"] - facts["cli_start"]) * 1000, 1),
                # from the carrier loss (seen by a listener in the MX) to the selector moving the
                # buckets to the peer (mxlb's history) and to the peer's SRG1 transition (mnhad)
                "power_off_after_cli_start_ms": round((off - facts["cli_start"]) * 1000, 1) if off else None,
                "peer_active_after_ms": round((active_at - off) * 1000, 1) if off and active_at else None,
                "selector_moved_after_ms": (round((moved_at - wall_offset - off) * 1000, 1)
                                            if off and moved_at else None),
                "sender_max_lag_ms": result["sender_max_lag_ms"],
                "selector_history": [
                    {"at_ms": round((e["at"] - wall_offset - (off or facts["cli_start"])) * 1000, 1),
                     "reason": e.get("reason"), "members": e.get("members")}
                    for e in bh1.status("mx1", "mxlb").get("history", [])
                    if e["at"] - wall_offset >= facts["cli_start"] - 5],
            }
            # failback: restore under traffic, wait for the preemption, then a little longer
            back: dict[str, Any] = {}

            def restore(target: str = target, back: dict[str, Any] = back) -> dict[str, Any]:
                back["cli_start"] = time.monotonic()
                lab("restore", "--lab", bh1.name, target)
                back["cli_end"] = time.monotonic()
                back["settled"] = wait_for("preemption back", lambda: srg1_settled(bh1), 40)
                return back

            result_b, _, _, _ = window(plan, flows, rate, sizes, 1.5, restore, 2.5)
            stats_b = flow_stats(result_b, affected)
            sample["failback_worst_ms"] = stats_b["worst_ms"]
            sample["failback_flows_with_loss"] = stats_b["flows_with_loss"]
            sample["failback_all_loss_ms"] = flow_stats(result_b)["worst_ms"]
            sample["preempted_after_s"] = round(back["settled"] - back["cli_end"], 2)
            out["runs"].append(sample)
            log(f"failover run {run + 1}/{runs}: {target} off -> {peer}: worst {stats['worst_ms']:.0f} ms "
                f"({stats['flows_with_loss']}/{stats['flows']} flows lost packets), push gap "
                f"{sample['push_gap_ms']:.0f} ms, unaffected loss {sample['unaffected_loss']}, `lab fail` "
                f"{sample['cli_ms']:.0f} ms (power-off +{sample['power_off_after_cli_start_ms']} ms), "
                f"peer active +{sample['peer_active_after_ms']} ms, selector "
                f"+{sample['selector_moved_after_ms']} ms; failback worst {stats_b['worst_ms']:.0f} ms after "
                f"{sample['preempted_after_s']} s; baseline worst {out['baseline'][-1]['worst_ms']:.0f} ms")


def sync_run(lab_: Lab, sport: int, sessions: int, per_second: float, dport: int
             ) -> tuple[dict[str, Any], list[float], list[float]]:
    """SESSIONS new sessions (one datagram from each of as many addresses, source port SPORT) at
    PER_SECOND; (sample, sync lags ms, send -> carrier ms)."""
    ends = trafficsetup.endpoints(lab_.plan())
    flows = make_flows(sessions, "100.64.64.0/18", ends.server_address, sport=sport, dport=dport)
    wall_offset = time.time() - time.monotonic()
    # one packet per flow, flows in order, 1 / PER_SECOND apart
    report = Sender(iface=ends.client_iface, ns=ends.client_ns, flows=flows, rate=per_second,
                    sizes=128, duration=sessions / per_second, realtime=True).spawn().wait(timeout=60)
    time.sleep(1.5)  # let the last ones sync
    tables = {srx: conntrack_starts(lab_.ns(srx), dport, sport) for srx in PEER}
    lags, carrier_lags, missing_peer, missing = [], [], 0, 0
    pairs: dict[str, int] = {}
    for k, flow in enumerate(flows):
        # the carrier: the SRX whose entry counted the packet (a synced copy counts none)
        carrier = next((srx for srx, t in tables.items() if t.get(flow.src, (0, 0))[1] > 0), None)
        if carrier is None:
            missing += 1
            continue
        pairs[carrier] = pairs.get(carrier, 0) + 1
        created = tables[carrier][flow.src][0]
        sent_ns = report["start_ns"] + k * 1e9 / per_second + wall_offset * 1e9
        carrier_lags.append(round((created - sent_ns) / 1e6, 4))
        copy = tables[PEER[carrier]].get(flow.src)
        if copy is None:
            missing_peer += 1
        else:
            lags.append(round((copy[0] - created) / 1e6, 4))
    sample = {"sport": sport, "sessions": sessions, "rate_per_s": per_second, "seen_on_carrier": sessions - missing,
              "missing_on_peer": missing_peer, "by_carrier": dict(sorted(pairs.items())),
              "lag_ms": summary(lags, 3), "send_to_carrier_ms": summary(carrier_lags, 3),
              "sender_max_lag_ms": round(report["max_lag_ms"], 1),
              "send_s": round((report["end_ns"] - report["start_ns"]) / 1e9, 3)}
    return sample, lags, carrier_lags


def measure_sync(out: dict[str, Any], workdir: Path, runs: int, sessions: int = 1000,
                 per_second: float = 1000.0, stress: tuple[float, ...] = (5000.0, 10000.0)) -> None:
    """New sessions at PER_SECOND from distinct addresses; per session, the kernel's creation time
    of the entry on the SRX that carried it (conntrack timestamp extension: set when the first
    packet's entry is confirmed) and of the synced copy on its peer (set when conntrackd inserts it
    over ctnetlink). Kernel clocks on both sides: no listener scheduling in the figure. Then a few
    runs of one second at each STRESS rate (where does the sync start to lag?)."""
    out.update({"lab": "bh3", "runs": [], "sessions_per_run": sessions, "rate_per_s": per_second, "stress": []})
    dport = 7000
    with Lab("bh3", topology_text(ROOT / "labs/topology3.yml", "bh3"), workdir) as bh3:
        # TLB per MNHA pair: the selector's members are the pairs' real-services (each carried by one node)
        wait_for("TLB selector with both pairs", lambda: selector_members(bh3) == {"MNHA_SRX1", "MNHA_SRX3"}, 30)
        for srx in PEER:  # per-namespace sysctl, in our own lab: entries created from now on carry it
            lab("exec", "--lab", bh3.name, srx, "--", "sysctl", "-qw", "net.netfilter.nf_conntrack_timestamp=1")
        ends = trafficsetup.endpoints(bh3.plan())
        sink = Receiver(port=dport, ns=ends.server_ns).spawn()  # a listener: no ICMP port unreachable back
        try:
            sink.wait_ready()
            lags: list[float] = out.setdefault("all_lags_ms", [])
            carrier_lags: list[float] = out.setdefault("all_send_to_carrier_ms", [])
            sport = 20000  # fresh 5-tuples every run
            for run in range(runs):
                sample, run_lags, run_carrier = sync_run(bh3, sport, sessions, per_second, dport)
                sport += 1
                lags += run_lags
                carrier_lags += run_carrier
                out["lag_ms"], out["send_to_carrier_ms"] = summary(lags, 3), summary(carrier_lags, 3)
                out["runs"].append(sample)
                log(f"sync run {run + 1}/{runs}: {sample['seen_on_carrier']}/{sessions} sessions on a carrier "
                    f"(sent in {sample['send_s']} s), {sample['missing_on_peer']} not on the peer; lag median "
                    f"{sample['lag_ms'].get('median')} ms p99 {sample['lag_ms'].get('p99')} ms max "
                    f"{sample['lag_ms'].get('max')} ms")
            out["conntrackd_overruns"] = conntrackd_overruns(bh3)
            for rate in stress:
                step: dict[str, Any] = {"rate_per_s": rate, "runs": [], "lags_ms": []}
                out["stress"].append(step)
                for _ in range(min(3, runs)):
                    sample, run_lags, _ = sync_run(bh3, sport, int(rate), rate, dport)
                    sport += 1
                    step["runs"].append(sample)
                    step["lags_ms"] += run_lags
                    log(f"sync stress {rate:.0f}/s: {sample['seen_on_carrier']}/{int(rate)} on a carrier (sent in "
                        f"{sample['send_s']} s, late by up to {sample['sender_max_lag_ms']} ms), "
                        f"{sample['missing_on_peer']} not on the peer; lag {sample['lag_ms']}")
                    time.sleep(1.0)
                step["lag_ms"] = summary(step["lags_ms"], 3)
                step["conntrackd_overruns_so_far"] = conntrackd_overruns(bh3)
        finally:
            with contextlib.suppress(Exception):
                sink.kill()


def measure_srd(out: dict[str, Any], workdir: Path, runs: int, flows_n: int, rate: float, sizes: str) -> None:
    out.update({"lab": "bh2", "cli": [], "link": [], "baseline": [], "flows": flows_n, "rate": rate,
                "resolution_ms": round(1000 * flows_n / rate, 3)})
    with Lab("bh2", topology_text(ROOT / "labs/topology2.yml", "bh2"), workdir) as bh2:
        wait_for("mx1 master, gateways on mx1", lambda: srd_settled(bh2, "mx1"), 30)
        wait_for("selector on all four SRX", lambda: selector_members(bh2) == set(PEER), 30)
        plan = bh2.plan()
        flows = make_flows(flows_n, "100.64.32.0/20", trafficsetup.endpoints(plan).server_address)
        cfg = json.loads((bh2.state_dir / "nodes/mx1/srd.json").read_text())
        out["heartbeat"] = {"interval_ms": cfg["heartbeat_ms"], "threshold": cfg["heartbeat_threshold"]}
        for run in range(runs):
            base, _, _, _ = window(plan, flows, rate, sizes, 2.0, dict, 3.0)
            out["baseline"].append(flow_stats(base) | {"sender_max_lag_ms": base["sender_max_lag_ms"]})
            del out["baseline"][-1]["per_flow_ms"]

            # CLI switchover from the current master, and back: both directions measured
            for _ in range(2):
                master = next((mx for mx, role in srd_roles(bh2).items() if role == "master"), "mx1")
                new = "mx2" if master == "mx1" else "mx1"
                facts: dict[str, Any] = {}

                def cli(new: str = new, facts: dict[str, Any] = facts) -> dict[str, Any]:
                    facts["cli_start"] = time.monotonic()
                    lab("switchover", "--lab", bh2.name)
                    facts["cli_end"] = time.monotonic()
                    facts["settled"] = wait_for(f"{new} master, gateways on {new}", lambda: srd_settled(bh2, new),
                                                15)
                    return facts

                result, _, before, after = window(plan, flows, rate, sizes, 2.0, cli, 2.5)
                out["cli"].append(srd_sample(bh2, result, facts, before, after, f"{master}->{new}", new))
                time.sleep(0.5)

            # monitored link failure on mx1 (made master first: outside any measurement)
            if srd_roles(bh2).get("mx1") != "master":
                lab("switchover", "--lab", bh2.name)
                wait_for("mx1 master again", lambda: srd_settled(bh2, "mx1"), 15)
                time.sleep(1.0)
            facts_l: dict[str, Any] = {}

            def link_down(facts: dict[str, Any] = facts_l) -> dict[str, Any]:
                facts["cli_start"] = time.monotonic()
                # what `lab exec --lab bh2 mx1 --instance TRUST-VR -- ip link set ge-0-0-0 down` runs,
                # without the CLI's Python start-up (seconds on a loaded machine): a precise event time
                link_set(bh2, "down")
                facts["cli_end"] = time.monotonic()
                facts["settled"] = wait_for("mx2 master after the link failure", lambda: srd_settled(bh2, "mx2"), 15)
                return facts

            try:
                result, _, before, after = window(plan, flows, rate, sizes, 2.0, link_down, 2.5)
            finally:
                link_set(bh2, "up")
            out["link"].append(srd_sample(bh2, result, facts_l, before, after, "mx1->mx2 (ge-0/0/0 down)", "mx2"))
            time.sleep(2.0)  # link back, BGP on it again; then mx1 back to master (not measured)
            lab("switchover", "--lab", bh2.name)
            wait_for("mx1 master again", lambda: srd_settled(bh2, "mx1"), 20)
            time.sleep(1.0)
            c, lk, b = out["cli"][-2:], out["link"][-1], out["baseline"][-1]
            cli_text = ", ".join(
                f"{x['direction']} worst {x['worst_ms']:.0f} ms (median flow {x['median_ms']:.0f} ms, "
                f"{x['flows_with_loss']} flows lost packets; CLI {x['cli_ms']:.0f} ms, "
                f"no master {x['no_master_ms']} ms, gateways +{x['gateways_after_master_ms']} ms)" for x in c)
            log(f"srd run {run + 1}/{runs}: CLI {cli_text}; link worst {lk['worst_ms']:.0f} ms (median "
                f"{lk['median_ms']:.0f} ms, master +{lk['new_master_after_ms']} ms (none for {lk['no_master_ms']} ms), "
                f"gateways +{lk['gateways_after_master_ms']} ms); baseline worst {b['worst_ms']:.0f} ms")


def srd_sample(lab_: Lab, result: dict[str, Any], facts: dict[str, Any], before: dict[tuple[str, int], str],
               after: dict[tuple[str, int], str], direction: str, new: str) -> dict[str, Any]:
    stats = flow_stats(result)
    became = transition_after(srd_transitions(lab_, new), "active", facts["cli_start"])
    old = "mx1" if new == "mx2" else "mx2"
    released = min((t for t in (transition_after(srd_transitions(lab_, old), role, facts["cli_start"])
                                for role in ("backup", "ineligible")) if t is not None), default=None)
    b, a = by_source(before), by_source(after)
    return {"direction": direction, **stats,
            "srx_changed": sum(1 for src in b if src in a and a[src] not in (b[src], PEER[b[src]])),
            "cli_ms": round((facts["cli_end"] - facts["cli_start"]) * 1000, 1),
            # from the end of the command (`lab switchover` / `ip link set`) to the new master's
            # transition (srdd's CLOCK_MONOTONIC), then to both gateways routing via it
            "new_master_after_ms": round((became - facts["cli_end"]) * 1000, 1) if became else None,
            "gateways_after_master_ms": round((facts["settled"] - became) * 1000, 1) if became else None,
            "settled_after_ms": round((facts["settled"] - facts["cli_end"]) * 1000, 1),
            # the old master gave up (CLI release / monitored link down) -> the new one took over:
            # neither is master meanwhile (no signal route, both prepend)
            "no_master_ms": round((became - released) * 1000, 1) if became and released else None,
            "sender_max_lag_ms": result["sender_max_lag_ms"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="runs of each measurement (default 20)")
    parser.add_argument("--quick", action="store_true", help="5 runs instead of --runs")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of markdown")
    parser.add_argument("--only", action="append", choices=PARTS, help="run only this part (repeatable)")
    parser.add_argument("--flows", type=int, default=50, help="two-way flows for SRD (default 50)")
    parser.add_argument("--failover-flows", type=int, default=20,
                        help="two-way flows for the MNHA failover (default 20: about half cross the failed SRX)")
    parser.add_argument("--rate", type=float, default=10000.0, help="aggregate pps per direction (default 10000)")
    parser.add_argument("--sizes", default="imix", help="frame sizes (dataplane.traffic syntax, default imix)")
    parser.add_argument("--out", type=Path, default=DOC, help=f"markdown file to write (default {DOC})")
    parser.add_argument("--no-write", action="store_true", help="do not write the markdown file")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/ha.py creates labs (network namespaces): run it as root", file=sys.stderr)
        return 1
    runs = 5 if args.quick else max(1, args.runs)
    parts = args.only or list(PARTS)
    results: dict[str, Any] = {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "args": " ".join(shlex.quote(a) for a in sys.argv[1:]), "runs": runs, "machine": machine(),
        "sizes": args.sizes, "errors": []}
    status = 0
    with interruptible(), tempfile.TemporaryDirectory(prefix="bench-ha-") as tmp:
        workdir = Path(tmp)
        steps: dict[str, Callable[[dict[str, Any]], None]] = {
            "failover": lambda out: measure_failover(out, workdir, runs, args.failover_flows, args.rate,
                                                         args.sizes),
            "sync": lambda out: measure_sync(out, workdir, runs),
            "srd": lambda out: measure_srd(out, workdir, runs, args.flows, args.rate, args.sizes),
        }
        for part in PARTS:
            if part not in parts:
                continue
            started = time.monotonic()
            out: dict[str, Any] = {"errors": []}
            results[part] = out  # filled as the runs go: an error keeps the runs done
            try:
                steps[part](out)
            except KeyboardInterrupt:
                out["errors"].append("interrupted")
                status = 130
                break
            except (BenchError, subprocess.SubprocessError, OSError, RuntimeError, ValueError) as exc:
                log(f"{part} failed: {exc}")
                out["errors"].append(str(exc))
                status = 1
            finally:
                log(f"{part} took {time.monotonic() - started:.0f} s")
    results["loadavg_end"] = round(os.getloadavg()[0], 2)
    text = markdown(results)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(text)
    if not args.no_write:
        write_doc(text, args.out)
        log(f"wrote {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
