"""`lab traffic start|stop|stats`: traffic by hand on a running lab, under the lab's supervisor.

The same flows, senders and receivers as `lab events run`, set up by the same builder
(`trafficsetup.by_family`: on a dual-stack lab IPv4 and IPv6 flows side by side, the IPv6 processes
named `...-ipv6`, and NAT64 ones `...-nat64`; behind source NAT (CGNAT, NAT64) the reverse sender
answers the NAT bindings the forward receiver sees, through a FIFO per family in the lab's
`traffic/` folder), started as daemons of a pseudo node
`_traffic` (`python -m dataplane.traffic ROLE --config FILE`), so they outlive the command, show in
the lab's record and die with the lab. Each prints its JSON report into its log when it stops (at
the end of --duration, or on `stop`); `stop` counts each receiver against its sender's counts.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from dataplane.traffic import Accounting, Receiver, Sender

from .. import kinds
from ..model.diagnostics import LabError
from ..plan import trafficsetup
from ..runtime import supervisor
from ..runtime.ops import load_plan
from ..runtime.state import LabState
from .watch import Sampler, selector_configs

NODE = "_traffic"


def folder(state: LabState) -> Path:
    """Where the traffic daemons' configurations (and a CGNAT lab's bindings FIFO) are."""
    return Path(state.state_dir) / "traffic"


def start(state: LabState, flows: int, rate: float, sizes: str, duration: float, reverse: bool,
          family: str | None = None) -> dict[str, Any]:
    """Start the traffic daemons; FAMILY "4", "6", "64", "both" or "all" (None: every family of the lab),
    the flows and the rate shared between the families as `lab events run` shares them. Returns
    {"started": process names, "families", "processes": one entry per process with its family}."""
    if any(r.node == NODE and supervisor.alive(r) for r in state.processes):
        raise LabError("traffic is already running in this lab (`lab traffic stop` first)")
    plan = load_plan(state)
    fams = trafficsetup.families(plan, family)
    where = folder(state)
    where.mkdir(exist_ok=True)
    setups = trafficsetup.by_family(plan, fams, flows, rate, sizes, duration, reverse=reverse, fifo_dir=where,
                                    receive_duration=duration + 3 + START_MARGIN_S, reverse_delay=FORWARD_LEAD_S)
    client = supervisor.Supervisor(state.state_dir)
    state.processes = [r for r in state.processes if r.node != NODE]
    started: list[dict[str, Any]] = []
    tried: list[str] = []
    began = time.monotonic()
    try:
        steps = trafficsetup.start_steps(setups)
        for number, step in enumerate(steps):
            gone = [r.name for r in state.processes if r.node == NODE and not supervisor.alive(r)]
            if gone:  # stopped meanwhile (`lab traffic stop`) or ended: the rest would run without them
                raise LabError(f"traffic process {gone[0]} ended while the traffic was starting")
            spawned = []
            for fam, step_name, role, job in step:
                name = trafficsetup.process_name(fam, step_name)
                config = where / f"{name}.json"
                config.write_text(json.dumps(job.config()) + "\n")
                log = Path(state.state_dir) / "logs" / f"traffic-{name}.log"
                log.write_text("")
                argv = [sys.executable, "-m", "dataplane.traffic", role, "--config", str(config)]
                tried.append(name)
                spawned.append(client.spawn(NODE, name, job.ns or "", argv, str(log)))
                state.processes.append(spawned[-1])
                state.save()  # `lab traffic stop` finds what runs, even while the start goes on
                started.append(describe(name, fam, role, job, setups[fam]))
            # a step starts when the one before it is under way (a process is ready once it has said
            # so in its log), not when it was only forked: a busy machine takes longer than any fixed
            # pause to start Python, and a reverse sender ahead of its forward flows would meet no session
            wait_ready(spawned)
            if step[0][1] == "tx-forward" and number < len(steps) - 1:
                # the forward packets open the sessions the reverse flows need: a sender says it is
                # ready as its first packets leave, and they cross the lab before the answers start
                time.sleep(FORWARD_LEAD_S)
        spent = time.monotonic() - began
        if spent > START_MARGIN_S:
            raise LabError(f"the traffic took {spent:.1f} s to start (the machine is too busy): its receivers, "
                           f"bound to --duration + {3 + START_MARGIN_S:.0f} s, would stop before the senders' last "
                           "packets and count them lost; what it started is stopped")
    except BaseException:  # nothing half-started stays behind, whatever the supervisor answers
        with contextlib.suppress(OSError, LabError):
            client.stop(procs=[(NODE, name) for name in tried], timeout=5)
        state.processes = [r for r in state.processes if r.node != NODE or supervisor.alive(r)]
        raise
    finally:
        state.save()
    return {"started": [p["name"] for p in started], "families": fams, "processes": started}


READY_S = 20.0  # a traffic process's start (Python and its imports) on a loaded two-CPU machine
FORWARD_LEAD_S = 1.0  # from the forward senders' ready to the reverse senders' start
START_MARGIN_S = 10.0  # the receivers' bound beyond --duration + 3 s: the time the steps may take to start


def wait_ready(records: list[supervisor.ProcessRecord], timeout: float = READY_S) -> None:
    """Until each of RECORDS has printed {"ready": true} into its log; LabError (with the log's last
    line) when one dies first or is not ready within TIMEOUT seconds."""
    left = {r.name: r for r in records}
    deadline = time.monotonic() + timeout
    while left:
        for name, record in list(left.items()):
            living = supervisor.alive(record)  # asked before the log is read: a process that said it was
            text = _read(record.log)           # ready and then ended is not taken for one that never was
            if any(_is_ready(line) for line in text.splitlines()):
                del left[name]
            elif not living:
                last = text.strip().splitlines()[-1:] or ["(its log is empty)"]
                raise LabError(f"traffic process {name} ended before it was ready: {last[0]}")
        if left and time.monotonic() > deadline:
            raise LabError(f"traffic processes not ready after {timeout:.0f} s: {', '.join(sorted(left))}")
        if left:
            time.sleep(0.02)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _is_ready(line: str) -> bool:
    try:
        data = json.loads(line)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("ready") is True


def describe(name: str, family: int, role: str, job: Receiver | Sender, setup: trafficsetup.TwoWay) -> dict[str, Any]:
    """What one traffic process (JOB, of SETUP: the two-way traffic of FAMILY) does, for `start`'s answer."""
    direction = "reverse" if "reverse" in name else "forward"
    sender = setup.tx_reverse if direction == "reverse" else setup.tx_forward
    assert sender is not None
    ids = [f.flow_id for f in sender.flows]
    return {"name": name, "family": family, "role": role, "direction": direction, "flows": len(ids),
            "rate_pps": sender.rate, "flow_ids": [min(ids), max(ids)], "namespace": job.ns}


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


def _last_report(path: str) -> dict[str, Any] | None:
    """The report a traffic daemon printed last into its log (None: none yet)."""
    for line in reversed(Path(path).read_text().strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and ("role" in data or "received" in data):
            return data
    return None


def reports(state: LabState) -> dict[str, Any]:
    """Each traffic daemon's report; a receiver's counts its sender's tail too (as `lab events run`)."""
    records = [r for r in state.processes if r.node == NODE]
    found = {r.name: _last_report(r.log) for r in records}
    out: dict[str, Any] = {}
    for record in records:
        data = found[record.name]
        if data is None:
            out[record.name] = {"family": trafficsetup.family_of(record.name), "running": supervisor.alive(record)}
            continue
        # the traffic family (a NAT64 sender's own report says the IP version it sends: 6 or 4)
        data = {**data, "family": trafficsetup.family_of(record.name)}
        saved = data.pop("state", None)
        sent = found.get(record.name.replace("rx-", "tx-")) if record.name.startswith("rx-") else None
        if saved is not None:
            data.update(Accounting.from_state(saved).report(data.get("rate_per_flow_pps"), sent))
        data.pop("per_flow", None)
        out[record.name] = data
    for data in out.values():
        data.pop("per_flow_sent", None)
    return out


def stats(state: LabState, seconds: float = 1.0) -> dict[str, Any]:
    """Delivered packets/s per SRX right now (the MX's per-SRX counters) and the traffic daemons."""
    plan = load_plan(state)
    mx_ns = [ns for n in plan.nodes if kinds.get(n.kind).load_balancer
             for ns in n.namespaces if ns.endswith("-trust-vr")]
    sampler = Sampler(mx_ns, selector_configs(plan), interval=seconds).start()
    time.sleep(seconds * 1.6)
    sampler.stop()
    rates = sampler.rates()
    return {
        "pps_per_srx": {k: round(v) for k, v in (rates[-1][1] if rates else {}).items()},
        "daemons": {r.name: supervisor.alive(r) for r in state.processes if r.node == NODE},
    }
