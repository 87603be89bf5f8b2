"""`lab report`: run a test plan's cases on real labs and write the report (HTML, JSON, JUnit, Markdown).

The thin, impure part: it brings each lab of the plan up (or reuses one already running under
that name), runs its cases one after the other on the same running lab (every event restores
what it broke), brings it down, and hands the collected results to `reportgen` (pure). A case
that raises is recorded as an error, and after it or after a case that left flows unrecovered the
lab is rebuilt before the next case, so one broken case does not spoil the rest. The JSON is
rewritten after every case: an interrupted run keeps what it measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import __version__
from ..events.result import CaseError
from ..model.diagnostics import LabError
from . import document as reportgen
from . import families
from .testplan import REPO, Case, LoadedPlan, TrafficParams

# Seconds a case takes beyond its traffic phases (spawning, carrier reads, selector quiet time),
# and a lab's up + down: the ETA's first guess, replaced by measured means as cases finish.
CASE_OVERHEAD_S = 5.0
LAB_CYCLE_S = 6.0


@dataclass
class Outputs:
    folder: Path
    markdown: bool = False

    @property
    def html(self) -> Path:
        return self.folder / "report.html"

    @property
    def json(self) -> Path:
        return self.folder / "report.json"

    @property
    def junit(self) -> Path:
        return self.folder / "report.xml"

    @property
    def md(self) -> Path:
        return self.folder / "report.md"


def expected_case_seconds(event: str, traffic: TrafficParams) -> float:
    from ..events.run import LASTING

    phases = traffic.warmup + traffic.settle
    if event in LASTING:
        phases += traffic.hold
    if event.endswith("reboot"):
        phases += traffic.down_time
    if event == "nexthop-add":
        phases += 1.0
    return phases + CASE_OVERHEAD_S


def estimate(cases: list[Case], traffic: TrafficParams) -> float:
    labs = len({c.lab for c in cases})
    return sum(expected_case_seconds(c.event, traffic) for c in cases) + labs * LAB_CYCLE_S


# --------------------------------------------------------------------------- machine and version
def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"cpus": os.cpu_count(), "kernel": platform.release(),
                            "python": platform.python_version()}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        info["memory_gib"] = round(kb / 2**20, 1)
    with contextlib.suppress(OSError):
        info["os"] = next(line.split("=", 1)[1].strip('"') for line in Path("/etc/os-release").read_text().splitlines()
                          if line.startswith("PRETTY_NAME="))
    for tool, argv in (("bird", ["bird", "--version"]), ("nftables", ["nft", "--version"])):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=5)
            text = (done.stdout + done.stderr).strip().splitlines()
            if text:
                info[tool] = text[0]
    with contextlib.suppress(OSError):
        info["load_average_at_start"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return info


def version() -> dict[str, str]:
    out = {"lab": __version__}
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        done = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True,
                              text=True, timeout=5)
        if done.returncode == 0:
            out["git"] = done.stdout.strip()
    return out


def graph_svg(topology_file: Path) -> str:
    """The lab's graph as inline SVG (Graphviz), or '' when dot is missing."""
    from ..model.validate import load_topology
    from . import graph

    try:
        svg = graph.render_image(load_topology(topology_file).topology, "svg").decode()
    except LabError:
        return ""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else ""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- labs (the Lab API)
def lab_running(name: str) -> bool:
    from ..runtime.state import state_dir

    return (state_dir(name) / "state.json").exists()


def lab_up(topology: Path) -> None:
    from .. import api

    api.up(topology)


def lab_down(name: str) -> None:
    from .. import api

    api.pick(name).down()


# --------------------------------------------------------------------------- one case
def run_case(case: Case, traffic: TrafficParams, capture: bool, workdir: Path,
             progress: Callable[[str], None], realtime: bool | None = None,
             cpu: int | None = None) -> dict[str, Any]:
    """Run CASE on its running lab; the case record of the report document."""
    from .. import api
    from ..events import capture as capmod
    from ..plan import trafficsetup

    record: dict[str, Any] = {"id": case.id, "lab": case.lab, "event": case.event, "target": case.target,
                              "use_case": case.use_case, "load_balancing": case.load_balancing,
                              "started": _now(), "status": "error", "error": None, "result": None,
                              "capture": None}
    started = time.monotonic()
    caps: list[capmod.Dumpcap] = []
    try:
        lab = api.pick(case.lab)
        target = lab.event_target(case.event, case.target)
        record["target"] = target
        spec = api.traffic_spec(flows=traffic.flows, rate=traffic.rate, sizes=str(traffic.sizes),
                                    reverse=traffic.reverse, warmup=traffic.warmup, hold=traffic.hold,
                                    settle=traffic.settle, down_time=traffic.down_time, receiver=traffic.receiver,
                                    baseline=traffic.baseline,
                                    realtime=traffic.realtime if realtime is None else realtime,
                                    sender_cpu=traffic.sender_cpu if cpu is None else cpu,
                                    tcp=traffic.tcp_connections, sessions=traffic.sessions,
                                    reruns=traffic.reruns)
        def start_captures() -> None:  # after the baseline: its packets are not the event's
            for stale in caps:  # the case runs again (`TrafficSpec.reruns`): the earlier run's captures go
                stale.kill()
            caps.clear()
            ends = trafficsetup.endpoints(lab.plan())
            caps.append(capmod.Dumpcap(ends.server_ns, ends.server_iface, workdir / f"{case.index}-fwd.pcap").start())
            if traffic.reverse:
                caps.append(capmod.Dumpcap(ends.client_ns, ends.client_iface,
                                           workdir / f"{case.index}-rev.pcap").start())

        result = lab.run_event(case.event, target, spec, progress=progress,
                               before_traffic=start_captures if capture else None)
        record["result"] = result.to_json()
        if capture:
            record["capture"] = _captured(caps, record["result"], traffic)
            caps = []
        record["status"] = "passed" if result.status == "passed" and not (record["capture"] or {}).get("flagged") \
            else "failed"
    except (KeyboardInterrupt, SystemExit):
        raise
    except CaseError as exc:  # a precondition failed: no verdict, the reason and what was checked
        record["error"] = exc.error.error
        record["checks"] = [c.model_dump(mode="json") for c in exc.error.checks]
        if exc.error.result is not None:  # the event ran, its figures are kept (and not trusted)
            record["result"] = exc.error.result.to_json()
    except Exception as exc:  # a case that breaks is recorded, the plan goes on
        record["error"] = f"{type(exc).__name__}: {exc}" if not isinstance(exc, LabError) else str(exc)
        if not isinstance(exc, LabError):
            record["traceback"] = traceback.format_exc(limit=-6)
    finally:
        for cap in caps:
            cap.kill()
            with contextlib.suppress(OSError):
                cap.path.unlink()
        record["duration_s"] = round(time.monotonic() - started, 3)
    return record


def _captured(caps: list[Any], result: dict[str, Any], traffic: TrafficParams) -> dict[str, Any]:
    from ..events import capture as capmod

    for cap in caps:
        cap.stop()
    try:
        forward, frames = caps[0].read(lambda fid: fid < capmod.REVERSE_ID_OFFSET)
        reverse = None
        if len(caps) > 1:
            reverse, more = caps[1].read(lambda fid: fid >= capmod.REVERSE_ID_OFFSET)
            frames += more
        rows = capmod.compare(result, forward, reverse, traffic.rate_per_flow)
        drops = [c.drops for c in caps if c.drops is not None]
        return capmod.summarise(rows, capmod.tool_version(), frames, sum(drops) if drops else None)
    except capmod.CaptureError as exc:
        return {"error": str(exc), "flagged": 0, "flows": []}
    finally:
        for cap in caps:
            with contextlib.suppress(OSError):
                cap.path.unlink()


# --------------------------------------------------------------------------- the plan
def run_plan(loaded: LoadedPlan, cases: list[Case], traffic: TrafficParams, outputs: Outputs, command: str,
             capture: bool = False, on_case: Callable[[int, int, Case, str], None] = lambda *_: None,
             on_done: Callable[[dict[str, Any]], None] = lambda _: None,
             on_step: Callable[[str], None] = lambda _: None, calibrate: bool = False) -> dict[str, Any]:
    """Run every case (grouped by lab, in plan order) and write the outputs; the document. CALIBRATE:
    the flows and rate are measured on the first lab (`baseline.calibrate`) and used for every case."""
    from ..events import capture as capmod

    if capture:
        why = capmod.available()
        if why:
            raise LabError(f"--capture: {why}")
    outputs.folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    doc: dict[str, Any] = {
        "schema": reportgen.SCHEMA, "command": command, "started": _now(), "finished": None, "duration_s": None,
        "plan": {"name": loaded.plan.name, "file": _shown_path(loaded.file), "description": loaded.plan.description,
                 "traffic": {**traffic.model_dump(), "rate": traffic.rate, "resolution_ms": traffic.resolution_ms}},
        "capture": capture, "machine": machine(), "version": version(), "labs": {}, "cases": [],
        "estimate_s": round(estimate(cases, traffic), 1),
    }
    groups: dict[str, list[Case]] = {}
    for case in cases:
        groups.setdefault(case.lab, []).append(case)
    done = 0
    try:
        with tempfile.TemporaryDirectory(prefix="lab-report-") as tmp:
            for lab, lab_cases in groups.items():
                file = lab_cases[0].topology
                doc["labs"][lab] = {"topology": _shown_path(file), "use_case": lab_cases[0].use_case,
                                    "load_balancing": lab_cases[0].load_balancing, "graph_svg": graph_svg(file)}
                with _lab(lab, file, doc["labs"][lab], on_step) as rebuild:
                    doc["labs"][lab]["mnha"] = _has_mnha(lab)
                    if calibrate:
                        traffic = _calibrated(lab, traffic, doc, on_step)
                        calibrate = False
                    for case in lab_cases:
                        on_case(done, len(cases), case, "running")
                        record = run_case(case, traffic, capture, Path(tmp), on_step)
                        doc["cases"].append(record)
                        done += 1
                        on_done(record)
                        _write(doc, outputs, started, final=False)
                        # a case that broke, or left flows unrecovered, may have left the lab broken:
                        # the next case starts on a fresh one (its verdict is then its own)
                        if case is not lab_cases[-1] and (record["status"] == "error" or not (
                                record["result"] or {}).get("recovered", True)):
                            rebuild()
                            record["lab_rebuilt_after"] = True
    finally:
        _write(doc, outputs, started, final=True)
    return doc


def _calibrated(lab: str, traffic: TrafficParams, doc: dict[str, Any],
                step: Callable[[str], None]) -> TrafficParams:
    """TRAFFIC with the flows and rate the calibration chose on the running LAB (recorded in DOC)."""
    from .. import api
    from ..events import baseline

    running = api.pick(lab)
    choice = baseline.calibrate(running.plan(), str(traffic.sizes), traffic.realtime, traffic.sender_cpu,
                                progress=step, families=running.traffic_families())
    step(choice.line())
    chosen = traffic.model_copy(update={"flows": choice.flows, "rate_per_flow": choice.rate / choice.flows})
    doc["plan"]["traffic"] = {**chosen.model_dump(), "rate": chosen.rate, "resolution_ms": chosen.resolution_ms,
                              "chosen_by": "calibration", "calibration": choice.to_json()}
    return chosen


def _has_mnha(lab: str) -> bool:
    from .. import api

    return api.pick(lab).has_mnha()


@contextlib.contextmanager
def _lab(name: str, file: Path, info: dict[str, Any], step: Callable[[str], None]) -> Iterator[Callable[[], None]]:
    """LAB running for the body: reused when it already runs (and left running), else brought up
    and down. The yielded function rebuilds it (after a case that left it broken)."""
    reused = lab_running(name)
    info["reused_running_lab"] = reused
    if not reused:
        step(f"lab up {name}")
        t = time.monotonic()
        lab_up(file)
        info["up_s"] = round(time.monotonic() - t, 2)

    def rebuild() -> None:
        step(f"rebuilding lab {name} (the last case broke or left flows unrecovered)")
        with contextlib.suppress(LabError):
            lab_down(name)
        lab_up(file)

    try:
        yield rebuild
    finally:
        if not reused:
            step(f"lab down {name}")
            lab_down(name)


def _write(doc: dict[str, Any], outputs: Outputs, started: float, final: bool) -> None:
    doc["duration_s"] = round(time.monotonic() - started, 1)
    doc["finished"] = _now() if final else None
    doc["summary"] = reportgen.summary(doc)
    _atomic(outputs.json, json.dumps(doc, indent=1) + "\n")
    if final:
        _atomic(outputs.html, reportgen.to_html(doc))
        _atomic(outputs.junit, reportgen.to_junit(doc))
        if outputs.markdown:
            _atomic(outputs.md, reportgen.to_markdown(doc, html_link=outputs.html.name))


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _shown_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return path.name


def render_again(json_file: Path, outputs: Outputs) -> dict[str, Any]:
    """HTML/JUnit/Markdown from a report JSON written earlier (no lab, no root)."""
    try:
        doc: dict[str, Any] = json.loads(json_file.read_text())
    except (OSError, ValueError) as exc:
        raise LabError(f"cannot read report {json_file}: {exc}") from None
    if doc.get("schema") != reportgen.SCHEMA:
        raise LabError(f"{json_file} is not a `lab report` JSON (schema {doc.get('schema')!r})")
    outputs.folder.mkdir(parents=True, exist_ok=True)
    _atomic(outputs.html, reportgen.to_html(doc))
    _atomic(outputs.junit, reportgen.to_junit(doc))
    if outputs.markdown:
        _atomic(outputs.md, reportgen.to_markdown(doc, html_link=outputs.html.name))
    return doc


def with_running_labs(loaded: Any, labs: list[str]) -> Any:
    """--lab NAME of a running lab the plan does not list: add it (every event, unless --event)."""
    from ..model.validate import load_topology
    from ..runtime.state import LabState, state_dir
    from . import testplan

    known = {load_topology(loaded.topology_path(e)).topology.name for e in loaded.plan.labs}
    extra = []
    for name in labs:
        if name in known:
            continue
        if not (state_dir(name) / "state.json").exists():
            continue  # expand() says the plan has no such lab
        source = Path(LabState.load(state_dir(name)).source)
        extra.append(testplan.LabEntry(topology=str(source.resolve())))
    if not extra:
        return loaded
    plan = loaded.plan.model_copy(update={"labs": [*loaded.plan.labs, *extra]})
    return testplan.LoadedPlan(plan, loaded.file, loaded.source)


def judge_budgets(doc: dict[str, Any], budgets: list[Any], outputs: Outputs) -> tuple[dict[str, Any], list[str]]:
    """Mark the cases that broke a budget as failed (saying which), write the outputs again; the
    document as rendered and one line per broken budget."""
    from ..events import budgets as budgetsmod

    broken = budgetsmod.apply_to_report(doc, budgets)
    doc["budgets"] = [{"metric": b.metric, "limit": b.limit, "event": b.event} for b in budgets]
    doc["summary"] = reportgen.summary(doc)
    outputs.folder.mkdir(parents=True, exist_ok=True)
    outputs.json.write_text(json.dumps(doc, indent=1) + "\n")
    return render_again(outputs.json, outputs), list(broken)


def describe(record: dict[str, Any]) -> str:
    f = reportgen.figures(record)
    if record.get("result") is None:
        return f"{record['id']}: ERROR {record.get('error')}"
    cap = ""
    if record.get("capture") is not None:
        cap = f", capture differs on {f['capture_flagged']} flow(s)" if f["capture_flagged"] else ", capture agrees"
    why = f" ({record['error']})" if record.get("error") else ""
    return (f"{record['id']} on {record['target']}: {record['status'].upper()}{why} convergence "
            f"{f['convergence_max_ms']:.0f}/{f['convergence_median_ms']:.0f} ms, unaffected loss "
            f"{f['unaffected_loss']}, moved {f['flows_moved']}/{f['flows_expected']}, "
            f"{'recovered' if f['recovered'] else 'NOT recovered'}{families.text(record['result'])}{cap} "
            f"({record['duration_s']:.0f} s)")
