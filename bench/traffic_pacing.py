#!/usr/bin/env python3
"""The generator on topology1 (root): does it keep a 2 ms schedule both ways, and how fast does it go?

Brings up a renamed copy of labs/topology1.yml (lab `tpace`: client -> gw-trust -> MX -> SRX (CHASH,
stateful SFW) -> MX -> gw-untrust -> server) and, in every round (alternating, so load changes on
this shared machine hit all alike):

1. paced two-way IMIX, 200 flows x 500 pps in each direction (a 2 ms per-flow interval: the
   resolution a convergence figure needs), forward from the client, reverse from the server (the
   same 5-tuples, through the sessions the forward packets opened), receivers in packet mode as
   `lab events run` uses them; once with SCHED_FIFO senders (as `lab events run` and `lab report`
   start them by default), once at ordinary priority; and the same at 200 flows x 200 pps (5 ms,
   the top rung of the calibration `lab events run` makes without --flows/--rate). Per sender: its
   lateness against the schedule (max and p99 of its packets, measured when the call that sent them
   returned), sent / target, and the loss the receivers counted;
2. full speed, one direction, 200 flows (sender pinned to CPU 0, UDP-socket receiver on CPU 1),
   against iperf3 `-u -b 0` with the same pinning, at equal frame size (ours 746-byte frames =
   iperf3 `-l 700`; and ours IMIX, average 712 bytes, against the same): received pps, ratio
   ours / iperf3 per round.

Writes docs/benchmarks-generator.md (notes below the marker line are kept); `bench/summary.py`
copies its goal rows into docs/benchmarks.md.

    python3 bench/traffic_pacing.py [--rounds 3] [--seconds 5] [--full-seconds 2] [--json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import traffic_gen as tg  # noqa: E402
from common import BenchLab, interruptible, logger, topology_text, write_doc  # noqa: E402

from dataplane.traffic import Receiver, Sender, make_flows, reverse_flows  # noqa: E402
from lab_orchestrator.plan.trafficsetup import REVERSE_ID_OFFSET, Endpoints, endpoints  # noqa: E402

NAME = "tpace"
FLOWS, PER_FLOW = 200, 500
GOAL_RATIO = 1.5
OUT = REPO / "docs" / "benchmarks-generator.md"
log = logger("pacing")


def two_way(ends: Endpoints, seconds: float, realtime: bool, per_flow: int = PER_FLOW) -> dict[str, Any]:
    """200 flows x PER_FLOW pps IMIX each way; each sender's lateness and the receivers' loss."""
    flows = make_flows(FLOWS, ends.client_prefix, ends.server_address)
    back = reverse_flows(flows, REVERSE_ID_OFFSET)
    rate = FLOWS * per_flow
    children = []
    try:
        rx_f = Receiver(iface=ends.server_iface, ns=ends.server_ns, rate_per_flow=per_flow).spawn()
        children.append(rx_f)
        rx_r = Receiver(iface=ends.client_iface, ns=ends.client_ns, rate_per_flow=per_flow).spawn()
        children.append(rx_r)
        rx_f.wait_ready()
        rx_r.wait_ready()
        tx_f = Sender(iface=ends.client_iface, ns=ends.client_ns, flows=flows, rate=rate, duration=seconds,
                      realtime=realtime).spawn()
        children.append(tx_f)
        tx_f.wait_ready()
        time.sleep(0.3)  # the forward packets open the sessions the reverse flows go through
        tx_r = Sender(iface=ends.server_iface, ns=ends.server_ns, flows=back, rate=rate, duration=seconds - 0.3,
                      realtime=realtime).spawn()
        children.append(tx_r)
        sent_f = tx_f.wait(timeout=seconds * 3 + 30)
        sent_r = tx_r.wait(timeout=seconds * 3 + 30)
        time.sleep(0.3)
        got_f = rx_f.stop(sent=sent_f)
        got_r = rx_r.stop(sent=sent_r)
    finally:
        for child in children:
            child.kill()
    out: dict[str, Any] = {}
    for side, sent, got in (("forward", sent_f, got_f), ("reverse", sent_r, got_r)):
        planned = rate * (seconds if side == "forward" else seconds - 0.3)
        out[side] = {"max_lag_ms": round(sent["max_lag_ms"], 3), "lag_p99_ms": sent["lag_p99_ms"],
                     "lag_p50_ms": sent["lag_p50_ms"], "late_1ms": sent["late_1ms"], "sent": sent["sent"],
                     "sent_ratio": round(sent["sent"] / planned, 4), "pps": round(sent["pps"]),
                     "send_calls": sent["send_calls"], "cpu_s": round(sent["cpu_s"], 3),
                     "received": got["received"], "lost": got["lost"], "max_gap_ms": got["max_gap_ms"],
                     "socket_drops": got.get("socket_drops")}
    out["max_lag_ms"] = max(out[s]["max_lag_ms"] for s in ("forward", "reverse"))
    out["lag_p99_ms"] = max(out[s]["lag_p99_ms"] for s in ("forward", "reverse"))
    out["sent_ratio"] = min(out[s]["sent_ratio"] for s in ("forward", "reverse"))
    out["lost"] = out["forward"]["lost"] + out["reverse"]["lost"]
    return out


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine())
    iperf = subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout.splitlines()
    return (f"{os.cpu_count()} CPUs ({cpu}), kernel {platform.release()}, Python {platform.python_version()}, "
            f"{iperf[0].strip() if iperf else 'iperf3 ?'}")


def run(rounds: int, seconds: float, full_seconds: float) -> dict[str, Any]:
    samples: dict[str, list[Any]] = {k: [] for k in ("paced_rt", "paced_default", "paced_rt_200",
                                                     "paced_default_200", "ours 746", "ours imix", "iperf3 -l 700")}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp, interruptible():
        topo = Path(tmp) / f"{NAME}.yml"
        topo.write_text(topology_text(REPO / "labs" / "topology1.yml", NAME))
        with BenchLab(NAME, topo, log=log) as bench:
            ends = endpoints(bench.lab.plan())
            path = tg.NetPath(f"topology1 (lab {NAME})", ends.client_ns, ends.client_iface, ends.server_ns,
                              ends.server_ns, ends.server_iface, dst=ends.server_address)
            for r in range(rounds):
                log(f"round {r + 1}/{rounds}")
                samples["paced_rt"].append(two_way(ends, seconds, realtime=True))
                samples["ours 746"].append(tg.ours(path, "746", full_seconds))
                samples["iperf3 -l 700"].append(tg.iperf(path, 700, full_seconds))
                samples["ours imix"].append(tg.ours(path, "imix", full_seconds))
                samples["paced_default"].append(two_way(ends, seconds, realtime=False))
                samples["paced_rt_200"].append(two_way(ends, seconds, realtime=True, per_flow=200))
                samples["paced_default_200"].append(two_way(ends, seconds, realtime=False, per_flow=200))
                log(f"  paced (FIFO) max lag {samples['paced_rt'][-1]['max_lag_ms']} ms, p99 "
                    f"{samples['paced_rt'][-1]['lag_p99_ms']} ms; default max "
                    f"{samples['paced_default'][-1]['max_lag_ms']} ms; ours 746 "
                    f"{samples['ours 746'][-1]['received_pps']:.0f} pps, iperf3 "
                    f"{samples['iperf3 -l 700'][-1]['received_pps']:.0f} pps")
    load.append(os.getloadavg()[0])
    ratios = {
        "746": [o["received_pps"] / i["received_pps"]
                for o, i in zip(samples["ours 746"], samples["iperf3 -l 700"], strict=True)],
        "imix": [o["received_pps"] / i["received_pps"]
                 for o, i in zip(samples["ours imix"], samples["iperf3 -l 700"], strict=True)],
    }
    return {"at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
            "rounds": rounds, "seconds": seconds, "full_seconds": full_seconds, "load": load,
            "samples": samples, "ratios": ratios,
            "command": f"bench/traffic_pacing.py --rounds {rounds} --seconds {seconds:g} "
                       f"--full-seconds {full_seconds:g}"}


def verdict(ok: bool) -> str:
    return "pass" if ok else "**fail**"


def render(res: dict[str, Any]) -> str:
    s = res["samples"]
    rows = []
    for key, label, per_flow in (
            ("paced_rt", "SCHED_FIFO senders", PER_FLOW),
            ("paced_default", "senders at normal priority", PER_FLOW),
            ("paced_rt_200", "SCHED_FIFO senders (the calibration's top rung)", 200),
            ("paced_default_200", "senders at normal priority", 200)):
        goal_ms = 1000 / per_flow  # one per-flow interval
        if not s.get(key):
            continue
        worst_max = max(x["max_lag_ms"] for x in s[key])
        worst_p99 = max(x["lag_p99_ms"] for x in s[key])
        per_max = ", ".join(f"{x['max_lag_ms']:.2f}" for x in s[key])
        per_p99 = ", ".join(f"{x['lag_p99_ms']:.2f}" for x in s[key])
        goal = f"<= {goal_ms:g} ms"
        rows.append(f"| sender lag, 200 flows x {per_flow} pps each way, IMIX, {label}: max (worst round) "
                    f"| {worst_max:.2f} ms (per round {per_max}) | {goal} | {verdict(worst_max <= goal_ms)} |")
        rows.append(f"| same, p99 of the packets (worst round; bucket upper edge) "
                    f"| {worst_p99:.2f} ms (per round {per_p99}) | {goal} | {verdict(worst_p99 <= goal_ms)} |")
        sent = min(x["sent_ratio"] for x in s[key])
        lost = [x["lost"] for x in s[key]]
        rows.append(f"| same, sent / scheduled (worst sender and round); packets lost per round | {sent:.4f}; "
                    f"{', '.join(str(v) for v in lost)} | - | |")
    for key, label in (("746", "ours 746-byte frames"), ("imix", "ours IMIX")):
        values = res["ratios"][key]
        med = statistics.median(values)
        per_round = ", ".join(f"{v:.2f}" for v in values)
        rows.append(f"| full speed, received pps: {label} / iperf3 -l 700 (median of rounds; "
                    f"set by the path and iperf3's receiver, not by the generators: see the notes) | {med:.2f} "
                    f"(per round {per_round}) | >= {GOAL_RATIO:g} | {verdict(med >= GOAL_RATIO)} |")
    full = []
    for key in ("ours 746", "ours imix", "iperf3 -l 700"):
        pps = [x["received_pps"] for x in s[key]]
        cpu = [x.get("pps_per_cpu_s") or 0 for x in s[key]]
        full.append(f"| {key} | {statistics.median(pps):,.0f} | {', '.join(f'{v:,.0f}' for v in pps)} | "
                    f"{statistics.median(cpu):,.0f} |")
    detail = []
    for key in ("paced_rt", "paced_default", "paced_rt_200", "paced_default_200"):
        for n, x in enumerate(s.get(key, []), 1):
            for side in ("forward", "reverse"):
                d = x[side]
                prio = ("FIFO" if key.startswith("paced_rt") else "normal") + (", 200 pps" if key.endswith("200")
                                                                               else ", 500 pps")
                detail.append(f"| {prio} | {n} | {side} | {d['max_lag_ms']:.2f} | {d['lag_p99_ms']:.2f} | "
                              f"{d['lag_p50_ms']:.2f} | {d['late_1ms']} | {d['sent_ratio']:.4f} | {d['send_calls']} | "
                              f"{d['cpu_s']:.2f} | {d['received']} | {d['lost']} | {d['max_gap_ms']} |")
    return "\n".join([
        "# Generator pacing and throughput (topology1)",
        "",
        f"Measured {res['at']} by `{res['command']}` ({res['rounds']} alternating rounds, paced runs "
        f"{res['seconds']:g} s, full-speed runs {res['full_seconds']:g} s). Machine: {res['machine']}.",
        "",
        f"Load average {res['load'][0]:.2f} at start, {res['load'][1]:.2f} at end (the machine is shared with "
        "other labs: compare the ratios of one run, not runs).",
        "",
        "| metric | value | goal | pass/fail |",
        "|---|---|---|---|",
        *rows,
        "",
        "## Full speed, one direction (received pps)",
        "",
        "| measurement | received pps (median) | per round | sent per sender CPU-second |",
        "|---|---|---|---|",
        *full,
        "",
        "## Paced two-way runs, per sender",
        "",
        "| priority, per-flow rate | round | direction | max lag ms | p99 lag ms | p50 lag ms | packets > 1 ms late "
        "| sent / scheduled | send calls | sender CPU s | received | lost | longest gap ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *detail,
        "",
        "Reading the figures: a sender's lateness is taken for each batch of packets when the call that "
        "sent it returned (so it includes the forwarding the kernel did in that call, in the sender's "
        "context) against the due time of the batch's first packet; every packet of the batch is counted "
        "at that worst value, so the p99 is an upper bound. Paced senders send what is due every "
        "0.25 ms (`quantum_ms`), so 0.25-0.4 ms is the floor of the max. The full-speed ratio is "
        "the receiving application's pps: iperf3's client sends far more than its server reads at "
        "`-b 0`, ours sends only what the path and receiver take.",
    ])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each paced two-way run")
    ap.add_argument("--full-seconds", type=float, default=2.0, help="length of each full-speed run")
    ap.add_argument("--json", action="store_true", help="print the raw results too")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--render", type=Path, help="only write the document from a --json output of an earlier run")
    args = ap.parse_args()
    if args.render:
        write_doc(render(json.loads(args.render.read_text())), args.out)
        return 0
    if os.geteuid() != 0:
        print("needs root (namespaces, AF_PACKET)", file=sys.stderr)
        return 2
    res = run(args.rounds, args.seconds, args.full_seconds)
    write_doc(render(res), args.out)
    log(f"wrote {args.out}")
    if args.json:
        print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
