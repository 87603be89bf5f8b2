"""The Lab API: one facade over loading a topology, planning, the backends and a running lab.

The CLI (printing and argument parsing only), bench/ and the tests drive labs through it. It prints
nothing: long steps report through a `progress(step, detail)` callback. Heavy modules (the model,
templates, pyroute2) load only when a function needs them, so `lab --help` stays fast.

    lab = api.up(Path("labs/topology3.yml"), progress=print_step)   # netns backend, BGP ready
    lab.fail("srx-power-off", "srx1"); lab.restore("srx1")
    lab.exec_namespace("srx1")                                      # -> "t3-srx1"
    lab.down()
"""
from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labkit import netnsutil
from labkit.contracts import MNHA_STATUS, MXLB_CONFIG, MXLB_STATUS, SRD_STATUS

from ..model.diagnostics import LabError, did_you_mean
from ..runtime import hostcheck
from ..runtime.state import STATE_ROOT, LabState, running_labs, state_dir
from .interrupts import UpInterrupts
from .running import Lab, Restarted, labs, pick, remove_state
from .topology import (
    event_verdicts,
    export,
    file_event_verdicts,
    file_events_to_run,
    import_configs,
    load,
    peek_name,
    plan,
    render,
)

if TYPE_CHECKING:  # the model (pydantic) and templates load only for calls that read a topology
    from ..clab.backend import ClabRecord, ContainerlabBackend
    from ..events.result import EventError, EventResult
    from ..events.run import TrafficSpec
    from ..model.validate import LoadedTopology
    from ..plan.pipeline import LabPlan

__all__ = [
    "CLAB_UP_TIMEOUT", "MNHA_STATUS", "MXLB_CONFIG", "MXLB_STATUS", "SRD_STATUS", "UP_TIMEOUT", "Lab", "Progress",
    "Restarted", "containerlab", "containerlab_targets", "down_containerlab", "down_targets", "event_verdicts",
    "file_events_to_run", "import_configs", "events_junit", "events_plot", "export",
    "file_event_verdicts", "labs", "load", "peek_name",
    "pick", "plan", "render", "require_root", "running", "traffic_spec", "up", "up_containerlab",
]

Progress = Callable[[str, str], None]


def _quiet(step: str, detail: str) -> None:
    del step, detail

require_root = hostcheck.require_root

UP_TIMEOUT = 30.0
CLAB_UP_TIMEOUT = 180.0


# ---------------------------------------------------------------- netns backend: up / down


def _preflight_up(loaded: LoadedTopology) -> LabPlan:
    from ..plan import pipeline as planmod

    hostcheck.require_root()
    hostcheck.require_kernel()
    hostcheck.require_tools()
    topo = loaded.topology
    hostcheck.require_selector(topo)
    hostcheck.require_nat64(topo)
    mgmt = None
    if topo.addressing.mgmt is None and not any(n.mgmt_ip for n in topo.nodes.values()):
        try:
            mgmt = planmod.free_mgmt_subnet(topo.name, hostcheck.root_routes())
        except ValueError as exc:
            raise LabError(str(exc)) from None
    built = planmod.build(topo, str(loaded.path), str(STATE_ROOT), python=sys.executable, mgmt_subnet=mgmt)
    existing = state_dir(built.name)
    if (existing / "state.json").exists():
        state = LabState.load(existing)
        if any(netnsutil.exists(ns) for ns in state.namespaces):
            raise LabError(f"lab {built.name} is already up ({state.status}, from {state.source}); "
                           f"`lab down --lab {built.name}` first")
    taken = [ns.name for ns in built.namespaces if netnsutil.exists(ns.name)]
    if taken:
        raise LabError(f"namespaces {', '.join(taken[:5])} exist but belong to no running lab record; "
                       f"`lab down {loaded.path}` removes them")
    return built


def up(path: Path, timeout: float = UP_TIMEOUT, progress: Progress = _quiet) -> Lab:
    """Bring a lab up with the netns backend; returns once every BGP session and expected route is
    there. On any failure, Ctrl-C or SIGTERM everything this attempt created is removed (LabError)."""
    from ..runtime.netns import NetnsBackend

    loaded = load(path)
    built = _preflight_up(loaded)
    interrupts = UpInterrupts()
    backend = NetnsBackend(interrupts.guard(progress))  # a progress line cut in the middle silences every later one
    previous_hook = sys.unraisablehook
    sys.unraisablehook = interrupts.unraisable_hook(previous_hook)
    signal.signal(signal.SIGTERM, interrupts.handler)
    # also when started with SIGINT ignored (a background job of a non-interactive shell, some CI
    # runners): a Ctrl-C or `kill -INT` still removes what this attempt created
    signal.signal(signal.SIGINT, interrupts.handler)
    try:
        state = backend.up(built, ready_timeout=timeout)
        interrupts.raise_if_seen()
    except BaseException as exc:
        sys.unraisablehook = previous_hook
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not stop the cleanup
            signal.signal(signum, signal.SIG_IGN)
        progress("cleanup", "removing everything this attempt created")
        state = LabState.load(state_dir(built.name))
        NetnsBackend().down(state)
        remove_state(built.name)
        if isinstance(exc, KeyboardInterrupt):
            raise LabError("interrupted; the lab was removed") from None
        if isinstance(exc, LabError):
            raise LabError(f"{exc} — the lab was removed") from None
        raise
    sys.unraisablehook = previous_hook
    if built.spares:  # built but not in service: out before any traffic, so no flow was ever on them
        from ..runtime import ops

        for name in built.spares:
            ops.power_off(state, built, name)
        progress("spares", f"not in service: {', '.join(built.spares)} (`lab fail NODE nexthop-add` adds one)")
    lab = Lab(state)
    lab._plan = built
    return lab


def _state_from_plan(path: Path) -> LabState:
    """No record (lab up killed before writing it): clean what the plan would have created."""
    built = plan(path)
    return LabState(built.name, built.source, built.state_dir, "unknown", [ns.name for ns in built.namespaces],
                    built.mgmt.bridge, [p.host_port for p in built.mgmt.ports], built.mgmt.nft_table,
                    built.mgmt.subnet)


def down_targets(path: Path | None = None, name: str | None = None, all_labs: bool = False) -> list[Lab]:
    """The labs `lab down` removes: every running lab, the one named, or the one of a topology file
    (without a record: what its plan would have created)."""
    hostcheck.require_root()
    running = running_labs()
    if all_labs:
        return [Lab(s) for s in running]
    if path is not None and name is None and not path.exists() and any(s.name == str(path) for s in running):
        name, path = str(path), None  # `lab down t3`: a running lab's name
    lab = name or (peek_name(path) if path else None)
    if lab is None and path is None and len(running) <= 1:
        return [Lab(s) for s in running]  # the only running lab, or none: nothing to do
    if lab is None:
        several = f" ({len(running)} run: {', '.join(s.name for s in running)})" if running else ""
        raise LabError(f"say which lab{several}: a topology file, --lab NAME or --all")
    if (state_dir(lab) / "state.json").exists():
        return [Lab(LabState.load(state_dir(lab)))]
    if path is not None:
        return [Lab(_state_from_plan(path))]
    raise LabError(f"no running lab named {lab}{did_you_mean(lab, [s.name for s in running])} (see `lab status`)")


# ---------------------------------------------------------------- containerlab backend


def containerlab(progress: Progress = _quiet) -> ContainerlabBackend:
    """The containerlab backend, after checking containerlab and Docker are there."""
    from ..clab import backend as clab

    backend = clab.ContainerlabBackend(progress)
    backend.require()
    return backend


def up_containerlab(path: Path, timeout: float = CLAB_UP_TIMEOUT, progress: Progress = _quiet) -> ClabRecord:
    """Deploy a topology (or a .clab.yml written by `lab export`) with containerlab and wait for it."""
    from ..clab import backend as clab

    backend = containerlab(progress)
    if clab.is_clab_file(path):
        record = clab.record_for(path)
        clab.refuse_if_deployed(record.name)
    else:
        from ..clab import export as clab_export

        built = plan(path, state_root=None)
        clab.refuse_if_deployed(built.name)
        record = clab.record_for(clab.stage_export(clab_export.export(built)))
    return backend.up(record, ready_timeout=timeout)


def containerlab_targets(path: Path | None = None, name: str | None = None,
                         all_labs: bool = False) -> list[ClabRecord]:
    from ..clab import backend as clab

    if all_labs:
        return clab.deployed_labs()
    lab: str | None
    if path is not None and clab.is_clab_file(path):
        lab = clab.record_for(path).name
    else:
        lab = name or (peek_name(path) if path else None)
    if lab is None:
        raise LabError("say which lab: a topology file, --lab NAME or --all")
    record = clab.ClabRecord.load(lab)
    if record is None and path is not None and clab.is_clab_file(path):
        record = clab.record_for(path)  # deployed by hand: destroy what the file names
    if record is None:
        raise LabError(f"no lab named {lab} was deployed with containerlab from here "
                       f"(`containerlab destroy --name {lab}` removes one deployed by hand)")
    return [record]


def down_containerlab(backend: ContainerlabBackend, record: ClabRecord) -> float:
    """Destroy one containerlab lab; returns the seconds it took (LabError on problems)."""
    started = time.monotonic()
    problems = backend.down(record)
    if problems:
        raise LabError(f"lab {record.name}: " + "; ".join(problems))
    return time.monotonic() - started

def events_junit(results: list[EventResult | EventError], lab: str) -> str:
    """JUnit XML of an events run: one test case per event."""
    from ..events import verdict as eventverdict

    return eventverdict.junit(results, lab)


def events_plot(results: list[EventResult], path: Path) -> None:
    """A PNG timeline of packets/s per SRX around each event."""
    from ..events import verdict as eventverdict

    eventverdict.plot(results, path)


def traffic_spec(**kwargs: Any) -> TrafficSpec:
    from ..events.run import TrafficSpec

    return TrafficSpec(**kwargs)


@contextmanager
def running(path: Path | None, name: str | None, timeout: float = UP_TIMEOUT,
            progress: Progress = _quiet, on_up: Callable[[Lab], None] | None = None,
            on_down: Callable[[str, float], None] | None = None) -> Iterator[Lab]:
    """A running lab for the duration of a block: the one named, or the lab of a topology file —
    brought up first (and down after) if it does not run yet."""
    hostcheck.require_root()
    brought_up: Lab | None = None
    if path is not None and name is None:
        name = peek_name(path)
        if name is None or not (state_dir(name) / "state.json").exists():
            brought_up = up(path, timeout=timeout, progress=progress)
            if on_up is not None:
                on_up(brought_up)
    lab = pick(name)
    try:
        yield lab
    finally:
        if brought_up is not None:
            seconds = brought_up.refresh().down()
            if on_down is not None:
                on_down(brought_up.name, seconds)
