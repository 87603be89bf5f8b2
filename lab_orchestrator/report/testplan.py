"""Test plans for `lab report`: which labs, which failure events, which traffic.

A plan is a small YAML file (the JVD's own plan ships as ``lab_orchestrator/plans/jvd.yml``)::

    name: my-plan
    traffic:                    # optional: every key has a default (below)
      flows: 100                # flows per direction (distinct subscriber addresses)
      rate_per_flow: 200        # packets/s of each flow in each direction: resolution 1/200 s = 5 ms
      sizes: imix
    labs:
      - topology: topology1                  # a shipped lab, or a file relative to the plan file
        events: all                          # every JVD event that applies to the lab (the default)
      - topology: ../labs/my-topology.yml
        events: [srx-power-off, restart-tlb]
        targets: {srx-power-off: srx2}       # default: the first node of the right kind

Loading is pure (no root): every problem is reported at once as ``file:line: yaml.path: message
(hint)``, like a topology file, and `expand` turns a plan into its ordered list of cases (one per
lab x event) using each topology's own applicability.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..events import catalog as eventsmod
from ..model.diagnostics import Diagnostic, LabError, TopologyInvalid, YamlPath, did_you_mean
from ..model.yamlsrc import SourceMap, load

REPO = Path(__file__).resolve().parents[2]
DEFAULT_PLAN = Path(__file__).resolve().parents[1] / "plans" / "jvd.yml"
# `events: all` is the JVD's list: events the catalog has beyond it run only when named
NOT_IN_JVD = frozenset({"daemon-crash"})


class FilterError(LabError):
    """A --lab/--event filter that matches nothing the plan has."""

    exit_code = 2


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TrafficParams(_Strict):
    """Traffic of every case (the same for every case so that figures compare across the matrix)."""

    flows: int = Field(default=100, ge=1, le=60000)
    rate_per_flow: float = Field(default=200.0, gt=0, le=10000)
    sizes: str | int = "imix"  # imix, a frame size (with FCS) or SIZE:WEIGHT,...
    reverse: bool = True
    warmup: float = Field(default=1.0, ge=0.5, le=60)
    hold: float = Field(default=1.5, ge=0.5, le=120)
    settle: float = Field(default=1.0, ge=0.5, le=120)
    down_time: float = Field(default=1.5, ge=0.5, le=120)
    # packet: the generator counts frames reaching the receiving host's interface (AF_PACKET);
    # socket: what reaches a UDP socket, after the host's own netfilter (see `lab report --help`)
    receiver: Literal["packet", "socket"] = "packet"
    # seconds of each case's traffic that must arrive whole and on schedule before its event (0: not
    # checked); a case whose baseline fails is an error (docs/events.md, "Before each event")
    baseline: float = Field(default=1.0, ge=0, le=60)
    # Senders SCHED_FIFO, not pinned (as `lab events run`): pinned to one CPU of a busy 2-CPU machine
    # they fell 120-160 ms behind their schedule even at 10000 pps (docs/report.md); SENDER_CPU pins them.
    realtime: bool = True
    sender_cpu: int | None = Field(default=None, ge=0, le=1023)
    # long-lived TCP connections beside the flows of every case (0: none; docs/events.md, `--tcp`)
    tcp_connections: int = Field(default=0, ge=0, le=60000)
    # idle UDP sessions opened before each case's event and probed after it (0: none; docs/events.md,
    # `--sessions`)
    sessions: int = Field(default=0, ge=0, le=2000000)
    # runs again of a case whose generator fell behind its schedule (not judged: the machine, not the
    # lab); docs/events.md, `--reruns`
    reruns: int = Field(default=1, ge=0, le=5)

    @property
    def rate(self) -> float:
        """Aggregate packets/s in each direction."""
        return self.flows * self.rate_per_flow

    @property
    def resolution_ms(self) -> float:
        return 1000.0 / self.rate_per_flow


class LabEntry(_Strict):
    topology: str
    events: Literal["all"] | list[str] = "all"
    targets: dict[str, str] = {}


class TestPlan(_Strict):
    name: str = Field(default="plan", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    traffic: TrafficParams = TrafficParams()
    labs: list[LabEntry] = Field(min_length=1)


@dataclass(frozen=True)
class Case:
    """One lab x one event."""

    index: int
    topology: Path  # the topology file
    lab: str  # its lab name
    use_case: str  # sfw | cgnat
    load_balancing: str
    event: str
    target: str | None  # None: the runner picks the first node of the right kind

    @property
    def id(self) -> str:
        return f"{self.lab}/{self.event}"


@dataclass(frozen=True)
class LoadedPlan:
    plan: TestPlan
    file: Path
    source: SourceMap

    def topology_path(self, entry: LabEntry) -> Path:
        """A path relative to the plan file, or the name of a shipped lab (`topology3`)."""
        from ..model.shipped import shipped_path

        path = Path(entry.topology)
        local = path if path.is_absolute() else (self.file.parent / path)
        if local.exists() or path.parent != Path("."):
            return local
        return shipped_path(entry.topology) or local


def load_plan(path: str | Path) -> LoadedPlan:
    """Parse and check a plan file; raise TopologyInvalid (exit 2) with every problem located."""
    from ..model.validate import pydantic_diagnostics

    file = Path(path)
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise TopologyInvalid([Diagnostic(str(file), 0, (), f"cannot read plan: {reason}")]) from None
    data, source = load(text, str(file))
    if not isinstance(data, dict):
        raise TopologyInvalid([source.diag((), "a plan must be a mapping with 'labs'",
                                           "see plans/jvd.yml for an example")])
    try:
        plan = TestPlan.model_validate(data)
    except ValidationError as exc:
        raise TopologyInvalid(pydantic_diagnostics(exc, source)) from None
    loaded = LoadedPlan(plan, file, source)
    problems = list(_check(loaded))
    if problems:
        raise TopologyInvalid(problems)
    return loaded


def _check(loaded: LoadedPlan) -> list[Diagnostic]:
    from dataplane.traffic import parse_sizes

    src, plan = loaded.source, loaded.plan
    out: list[Diagnostic] = []
    try:
        parse_sizes(str(plan.traffic.sizes))
    except ValueError as exc:
        out.append(src.diag(("traffic", "sizes"), str(exc), "imix, a frame size (64-1518) or SIZE:WEIGHT,..."))
    seen: dict[Path, int] = {}
    for i, entry in enumerate(plan.labs):
        path: YamlPath = ("labs", i)
        topo = loaded.topology_path(entry)
        if not topo.is_file():
            out.append(src.diag(path + ("topology",), f"no such topology file: {topo}",
                                "a path relative to the plan file"))
        elif topo.resolve() in seen:
            out.append(src.diag(path + ("topology",), f"this topology is already in labs[{seen[topo.resolve()]}]",
                                "list each lab once, with every event it should run"))
        else:
            seen[topo.resolve()] = i
        names = entry.events if isinstance(entry.events, list) else []
        for j, name in enumerate(names):
            if name not in eventsmod.BY_NAME:
                out.append(src.diag(path + ("events", j), f"unknown event '{name}'",
                                    _event_hint(name)))
            elif name in names[:j]:
                out.append(src.diag(path + ("events", j), f"event '{name}' is listed twice"))
        for name in entry.targets:
            if name not in eventsmod.BY_NAME:
                out.append(src.diag(path + ("targets", name), f"unknown event '{name}'",
                                    _event_hint(name)))
    return out


def _event_hint(name: str) -> str:
    close = did_you_mean(name, eventsmod.BY_NAME).strip(" ()")
    return close or "known: " + ", ".join(eventsmod.BY_NAME)


def expand(loaded: LoadedPlan, labs: list[str] | None = None, topologies: list[str] | None = None,
           events: list[str] | None = None) -> list[Case]:
    """The plan's cases in run order, filtered by lab names, topologies (1-4, a file name or path) and
    event names. Events a lab cannot run (no MNHA, no SRD) are left out when the plan says `all`;
    listed by name, they are an error (located)."""
    import json

    from ..model.validate import load_topology
    from ..plan import pipeline as planmod

    for name in events or []:
        if name not in eventsmod.BY_NAME:
            raise FilterError(f"--event {name}: unknown event{did_you_mean(name, eventsmod.BY_NAME)}; "
                              f"known: {', '.join(eventsmod.BY_NAME)}")
    cases: list[Case] = []
    problems: list[Diagnostic] = []
    matched_lab: set[str] = set()
    for i, entry in enumerate(loaded.plan.labs):
        file = loaded.topology_path(entry)
        topo = load_topology(file).topology
        if labs and topo.name not in labs:
            continue
        if topologies and not any(_topology_matches(t, file) for t in topologies):
            continue
        matched_lab.add(topo.name)
        verdicts = {a.event.name: a for a in eventsmod.applicable(json.loads(planmod.build(topo).to_json()))}
        if entry.events == "all":
            names = [n for n, a in verdicts.items() if a.applicable and n not in NOT_IN_JVD]
        else:
            names = list(entry.events)
            for j, name in enumerate(names):
                if not verdicts[name].applicable:
                    problems.append(loaded.source.diag(("labs", i, "events", j),
                                                       f"{name} does not apply to lab {topo.name}: "
                                                       f"{verdicts[name].reason}"))
        for name in names:
            if events and name not in events:
                continue
            target = entry.targets.get(name)
            if target is not None and target not in topo.nodes:
                problems.append(loaded.source.diag(("labs", i, "targets", name),
                                                   f"lab {topo.name} has no node '{target}'",
                                                   "nodes: " + ", ".join(topo.nodes)))
            cases.append(Case(len(cases), file, topo.name, topo.services.use_case, topo.services.load_balancing,
                              name, target))
    if problems:
        raise TopologyInvalid(problems)
    for name in labs or []:
        if name not in matched_lab:
            raise FilterError(f"--lab {name}: the plan has no lab named '{name}' and no such lab runs; "
                              f"the plan's labs: {', '.join(_lab_names(loaded))}")
    return cases


def _topology_matches(wanted: str, file: Path) -> bool:
    """'3' matches topology3.yml and topology3-cgnat.yml; a name or path matches that file."""
    if wanted.isdigit():
        stem = file.stem
        return stem == f"topology{wanted}" or stem.startswith(f"topology{wanted}-")
    return file.name == wanted or file.stem == wanted or file.resolve() == Path(wanted).resolve()


def _lab_names(loaded: LoadedPlan) -> list[str]:
    from ..model.validate import load_topology

    return [load_topology(loaded.topology_path(e)).topology.name for e in loaded.plan.labs]
