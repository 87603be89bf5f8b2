"""`lab traffic start|stop|stats`: traffic by hand on a running lab, under the lab's supervisor.

The same generator and receiver as `lab events run` (dataplane.traffic), started as daemons of a
pseudo node `_traffic`, so they outlive the command, show in the lab's record and die with the lab.
Each prints its JSON report into its log when it stops (at the end of --duration, or on `stop`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from . import supervisor
from .diagnostics import LabError
from .eventrun import REVERSE_ID_OFFSET, Sampler, endpoints
from .ops import load_plan
from .state import LabState

NODE = "_traffic"


def _argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "dataplane.traffic", *args]


def start(state: LabState, flows: int, rate: float, sizes: str, duration: float, reverse: bool) -> list[str]:
    if any(r.node == NODE and supervisor.alive(r) for r in state.processes):
        raise LabError("traffic is already running in this lab (`lab traffic stop` first)")
    plan = load_plan(state)
    ends = endpoints(plan)
    per_flow = rate / flows
    server_ip = ends.server_address
    jobs = [
        ("rx-forward", ends.server_ns, _argv("receive", "--netns", ends.server_ns, "--iface", ends.server_iface,
                                             "--duration", str(duration + 3), "--rate-per-flow", str(per_flow))),
        ("tx-forward", ends.client_ns, _argv("send", "--netns", ends.client_ns, "--iface", ends.client_iface,
                                             "--flows", str(flows), "--sources", ends.client_prefix, "--dst",
                                             server_ip, "--rate", str(rate), "--sizes", sizes,
                                             "--duration", str(duration))),
    ]
    if reverse:
        jobs += [
            ("rx-reverse", ends.client_ns, _argv("receive", "--netns", ends.client_ns, "--iface", ends.client_iface,
                                                 "--duration", str(duration + 3), "--rate-per-flow", str(per_flow))),
            ("tx-reverse", ends.server_ns, _argv("send", "--netns", ends.server_ns, "--iface", ends.server_iface,
                                                 "--flows", str(flows), "--sources", ends.client_prefix, "--dst",
                                                 server_ip, "--reverse", "--first-id", str(REVERSE_ID_OFFSET),
                                                 "--rate", str(rate), "--sizes", sizes, "--duration", str(duration))),
        ]
    client = supervisor.Supervisor(state.state_dir)
    state.processes = [r for r in state.processes if r.node != NODE]
    started = []
    for name, ns, argv in jobs:
        log = Path(state.state_dir) / "logs" / f"traffic-{name}.log"
        log.write_text("")
        state.processes.append(client.spawn(NODE, name, ns, argv, str(log)))
        started.append(name)
        time.sleep(0.3 if name == "tx-forward" else 0.05)  # forward packets open the sessions first
    state.save()
    return started


def stop(state: LabState) -> dict[str, Any]:
    records = [r for r in state.processes if r.node == NODE]
    if not records:
        raise LabError("no traffic was started in this lab")
    client = supervisor.Supervisor(state.state_dir)
    senders = [r.pid for r in records if r.name.startswith("tx") and supervisor.alive(r)]
    client.stop(senders, timeout=5)
    time.sleep(1.0)  # the receivers count what is still in flight
    client.stop([r.pid for r in records if supervisor.alive(r)], timeout=5)
    return reports(state)


def reports(state: LabState) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for record in (r for r in state.processes if r.node == NODE):
        text = Path(record.log).read_text().strip().splitlines()
        last = text[-1] if text else ""
        try:
            data = json.loads(last)
        except ValueError:
            data = {"running": supervisor.alive(record)}
        data.pop("per_flow", None)
        out[record.name] = data
    return out


def stats(state: LabState, seconds: float = 1.0) -> dict[str, Any]:
    """Delivered packets/s per SRX right now (the MX's per-SRX counters) and the traffic daemons."""
    plan = load_plan(state)
    mx_ns = [ns for n in plan.nodes if n.kind == "mx" for ns in n.namespaces if ns.endswith("-trust-vr")]
    sampler = Sampler(mx_ns, interval=seconds).start()
    time.sleep(seconds * 1.6)
    sampler.stop()
    rates = sampler.rates()
    return {
        "pps_per_srx": {k: round(v) for k, v in (rates[-1][1] if rates else {}).items()},
        "daemons": {r.name: supervisor.alive(r) for r in state.processes if r.node == NODE},
    }
