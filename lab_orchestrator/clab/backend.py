"""The containerlab backend: the same plan, deployed by containerlab as one container per node.

`lab up --backend containerlab` exports the plan (clab_export) into the lab's state folder, runs
`containerlab deploy -t FILE`, reads the lab back with `containerlab inspect -t FILE --format json`
and waits until every emulated node reports ready (its agent built the node, its BGP sessions are
Established and the expected routes are in: `docker exec CONTAINER python3 -m
lab_orchestrator.clab.agent status`). `lab down --backend containerlab` runs `containerlab destroy
-t FILE --cleanup`. Every external program is driven through subprocess; where one is missing the
error says so in one sentence. The record of a deployed lab lives in STATE_ROOT/containerlab/LAB/.

`containerlab inspect --format json` changed shape in v0.68: before, `{"containers": [...]}`; from
v0.68, the containers grouped by lab name, `{"LAB": [...]}`. parse_inspect reads both.

Operations on a running lab map onto the node agent (lab_orchestrator.clab.agent) through
`docker exec`: power off / on (links down, daemons killed, sessions and learned routes forgotten, as
in the netns backend — stopping the container would delete its veths for good), a link failure is
both ends' interfaces down, a daemon restart goes through the agent, and `exec` runs a command in a
node or in one of an MX's routing-instance namespaces.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from labkit.files import is_secret, write_json, write_secret

from ..model.diagnostics import BadInput, LabError, did_you_mean
from ..plan.pipeline import LabPlan
from ..runtime import credentials
from ..runtime.state import STATE_ROOT
from . import export as clab_export

Progress = Callable[[str, str], None]
Runner = Callable[..., "subprocess.CompletedProcess[str]"]
AGENT = ["python3", "-m", "lab_orchestrator.clab.agent"]
RECORD_FILE = "record.json"
EXPORT_DIR = "export"


def _quiet(step: str, detail: str) -> None:
    pass


def records_root() -> Path:
    """Where containerlab labs are recorded: a folder no lab name can take (names are <= 10 chars)."""
    return STATE_ROOT / "containerlab"


@dataclass(frozen=True)
class ContainerInfo:
    lab: str
    name: str  # container name, e.g. clab-t3-mx1
    node: str  # node name in the topology, e.g. mx1
    kind: str
    image: str
    state: str  # running | exited | ...
    ipv4: str
    container_id: str


def _node_of(entry: dict[str, Any], lab: str) -> str:
    for key in ("node_name", "node"):
        if isinstance(entry.get(key), str) and entry[key]:
            return str(entry[key])
    name = str(entry.get("name", ""))
    prefix = f"clab-{lab}-"
    return name[len(prefix):] if lab and name.startswith(prefix) else name


def parse_inspect(text: str) -> list[ContainerInfo]:
    """Containers from `containerlab inspect --format json`, in either of its shapes:
    before v0.68 `{"containers": [...]}`, from v0.68 `{"LAB": [...], ...}` (grouped by lab)."""
    text = text.strip()
    if not text:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        raise LabError(f"containerlab inspect did not print JSON: {text.splitlines()[0][:120]}") from None
    # Both shapes are a mapping to lists of container entries ("containers" is the pre-v0.68 key,
    # lab names the later ones): the entries are every list's items. A bare list is accepted too.
    if isinstance(data, list):
        entries: list[Any] = data
    elif isinstance(data, dict):
        entries = [e for group in data.values() if isinstance(group, list) for e in group]
    else:
        raise LabError("containerlab inspect printed JSON of an unknown shape")
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        lab = str(entry.get("lab_name", ""))
        out.append(ContainerInfo(
            lab=lab, name=str(entry.get("name", "")), node=_node_of(entry, lab), kind=str(entry.get("kind", "")),
            image=str(entry.get("image", "")), state=str(entry.get("state", "")),
            ipv4=str(entry.get("ipv4_address", "")), container_id=str(entry.get("container_id", "")),
        ))
    return out


@dataclass
class ClabRecord:
    """What `lab up --backend containerlab` deployed, for `lab down` and operations."""

    name: str
    source: str
    export_dir: str
    topology_file: str  # absolute path of the .clab.yml deployed
    containers: dict[str, str]  # node -> container name
    vendor: dict[str, str] = field(default_factory=dict)
    lans: list[str] = field(default_factory=list)
    status: str = "deploying"  # deploying | ready | destroying
    deployed_at: float = 0.0
    inspect: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def path_for(name: str) -> Path:
        return records_root() / name / RECORD_FILE

    def save(self) -> None:
        path = self.path_for(self.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, asdict(self), sort_keys=True)

    @classmethod
    def load(cls, name: str) -> ClabRecord | None:
        path = cls.path_for(name)
        if not path.is_file():
            return None
        return cls(**json.loads(path.read_text()))

    def remove(self) -> None:
        shutil.rmtree(self.path_for(self.name).parent, ignore_errors=True)


def deployed_labs() -> list[ClabRecord]:
    root = records_root()
    if not root.is_dir():
        return []
    out = []
    for entry in sorted(root.iterdir()):
        record = ClabRecord.load(entry.name)
        if record is not None:
            out.append(record)
    return out


def write_export(export: clab_export.ClabExport, out_dir: Path) -> None:
    """The export's files into OUT_DIR, its secret files drawn (credentials) and written 0600."""
    for rel, content in credentials.materialize(export.files).items():
        target = out_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if is_secret(rel):
            write_secret(target, content)
        else:
            target.write_text(content)


def record_for(topology_file: Path) -> ClabRecord:
    """The record of deploying TOPOLOGY_FILE, an export's .clab.yml with lab-export.json beside it."""
    sidecar_path = topology_file.parent / clab_export.SIDECAR_FILE
    try:
        data = json.loads(sidecar_path.read_text())
    except (OSError, ValueError):
        raise LabError(f"{topology_file} has no readable {clab_export.SIDECAR_FILE} beside it: deploy a "
                       f"folder written by `lab export --format containerlab`") from None
    return ClabRecord(name=data["lab"], source=data.get("source", ""), export_dir=str(topology_file.parent.resolve()),
                      topology_file=str(topology_file.resolve()),
                      containers={c["node"]: c["container"] for c in data["containers"]},
                      vendor=dict(data.get("vendor", {})), lans=list(data.get("lans", [])))


def refuse_if_deployed(name: str) -> None:
    if ClabRecord.load(name) is not None:
        raise LabError(f"lab {name} is already deployed with containerlab; "
                       f"`lab down --backend containerlab --lab {name}` first")


def is_clab_file(path: Path) -> bool:
    return path.name.endswith((".clab.yml", ".clab.yaml"))


def stage_export(export: clab_export.ClabExport) -> Path:
    """Write EXPORT to the lab's record folder (replacing an earlier one); return the topology file."""
    folder = records_root() / export.name / EXPORT_DIR
    shutil.rmtree(folder, ignore_errors=True)
    write_export(export, folder)
    return folder / export.topology_file


class ContainerlabBackend:
    def __init__(self, progress: Progress = _quiet, containerlab: str | None = None, docker: str | None = None,
                 runner: Runner = subprocess.run):
        self.progress = progress
        self.containerlab = containerlab or os.environ.get("LAB_CONTAINERLAB", "containerlab")
        self.docker = docker or os.environ.get("LAB_DOCKER", "docker")
        self.runner = runner

    # ------------------------------------------------------------ subprocess
    def require(self) -> None:
        if shutil.which(self.containerlab) is None:
            raise LabError(f"containerlab is not installed here (no `{self.containerlab}` on PATH), so the "
                           f"containerlab backend cannot deploy; `lab export FILE --format containerlab --out DIR` "
                           f"still writes the topology (see docs/containerlab.md)")

    def _run(self, argv: Sequence[str], timeout: float = 600.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            result = self.runner(list(argv), capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError:
            raise LabError(f"{argv[0]} is not installed (not found on PATH)") from None
        except subprocess.TimeoutExpired:
            raise LabError(f"`{' '.join(argv[:3])}` did not finish in {timeout:.0f} s") from None
        if check and result.returncode != 0:
            raise LabError(f"`{' '.join(argv[:3])} ...` failed (exit {result.returncode}): {_last_line(result)}")
        return result

    def deploy(self, topology_file: str) -> None:
        self._run([self.containerlab, "deploy", "-t", topology_file])

    def destroy(self, topology_file: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run([self.containerlab, "destroy", "-t", topology_file, "--cleanup"], check=check)

    def inspect(self, topology_file: str) -> list[ContainerInfo]:
        result = self._run([self.containerlab, "inspect", "-t", topology_file, "--format", "json"], check=False)
        if result.returncode != 0:
            if "no containers found" in (result.stdout + result.stderr).lower():
                return []
            raise LabError(f"`containerlab inspect` failed (exit {result.returncode}): {_last_line(result)}")
        return parse_inspect(result.stdout)

    def agent(self, container: str, args: Sequence[str], timeout: float = 30.0,
              check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the node agent inside CONTAINER (docker exec)."""
        return self._run([self.docker, "exec", container, *AGENT, *args], timeout=timeout, check=check)

    # ------------------------------------------------------------ up / down
    def up(self, record: ClabRecord, ready_timeout: float = 180.0) -> ClabRecord:
        """Deploy RECORD's topology file, check its containers, wait until the emulated nodes are ready.
        On failure the lab is destroyed again and the record removed: nothing half-deployed stays."""
        self.require()
        record.status = "deploying"
        record.save()  # the journal first: `lab down --backend containerlab` finds it after a crash
        try:
            self.progress("deploy", f"containerlab deploy -t {record.topology_file}")
            self.deploy(record.topology_file)
            record.inspect = [asdict(c) for c in self.check_running(record)]
            record.save()
            self.wait_ready(record, ready_timeout)
        except BaseException:
            self.progress("cleanup", "containerlab destroy (the deploy did not complete)")
            self.destroy(record.topology_file, check=False)
            record.remove()
            raise
        record.status = "ready"
        record.deployed_at = time.time()
        record.save()
        return record

    def check_running(self, record: ClabRecord) -> list[ContainerInfo]:
        found = {c.node: c for c in self.inspect(record.topology_file) if c.lab in ("", record.name)}
        missing = [n for n in record.containers if n not in found]
        if missing:
            raise LabError(f"containerlab inspect does not list {', '.join(missing)} of lab {record.name}")
        stopped = [f"{n} ({found[n].state})" for n in record.containers if found[n].state != "running"]
        if stopped:
            raise LabError(f"containers not running after deploy: {', '.join(stopped)}")
        self.progress("inspect", f"{len(found)} containers running")
        return [found[n] for n in record.containers]

    def emulated(self, record: ClabRecord) -> list[str]:
        return [n for n in record.containers if n not in record.vendor]

    def node_status(self, record: ClabRecord, node: str) -> dict[str, Any]:
        result = self.agent(record.containers[node], ["status"], check=False)
        if result.returncode != 0:
            return {"node": node, "ready": False, "pending": [f"{node}: {_last_line(result)}"]}
        try:
            data: dict[str, Any] = json.loads(result.stdout)
        except ValueError:
            return {"node": node, "ready": False, "pending": [f"{node}: agent status is not JSON"]}
        return data

    def wait_ready(self, record: ClabRecord, timeout: float, interval: float = 1.0) -> None:
        nodes = self.emulated(record)
        self.progress("bgp", f"waiting for {len(nodes)} emulated nodes (agent, BGP, routes)")
        deadline = time.monotonic() + timeout
        pending: list[str] = []
        while True:
            pending = []
            for node in nodes:
                status = self.node_status(record, node)
                if status.get("phase") == "failed":
                    raise LabError(f"node {node} could not be built in its container: {status.get('error')}")
                pending += [str(p) for p in status.get("pending", [])] if not status.get("ready") else []
            if not pending:
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(interval)
        raise LabError(f"lab {record.name} not ready after {timeout:.0f} s: " + "; ".join(pending[:6]))

    def down(self, record: ClabRecord) -> list[str]:
        """Destroy the lab; return what could not be removed (normally nothing)."""
        self.require()
        record.status = "destroying"
        record.save()
        problems = []
        if Path(record.topology_file).is_file():
            result = self.destroy(record.topology_file, check=False)
            if result.returncode != 0:
                problems.append(f"containerlab destroy failed: {_last_line(result)}")
        else:
            problems.append(f"the deployed topology {record.topology_file} is gone; remove the containers "
                            f"with `containerlab destroy --name {record.name}`")
        if not problems:
            record.remove()
        return problems

    # ------------------------------------------------------------ operations
    def status(self, record: ClabRecord) -> dict[str, Any]:
        containers = {c.node: c for c in self.inspect(record.topology_file)}
        nodes = []
        for node, name in record.containers.items():
            info = containers.get(node)
            entry: dict[str, Any] = {"node": node, "container": name, "state": info.state if info else "missing",
                                     "mgmt": info.ipv4 if info else "", "kind": info.kind if info else "",
                                     "vendor": record.vendor.get(node)}
            if info and info.state == "running" and node not in record.vendor:
                entry["agent"] = self.node_status(record, node)
            nodes.append(entry)
        return {"name": record.name, "backend": "containerlab", "source": record.source,
                "topology_file": record.topology_file, "status": record.status, "nodes": nodes}

    def exec_argv(self, record: ClabRecord, node: str, command: Sequence[str], instance: str | None = None,
                  interactive: bool = False) -> list[str]:
        """`docker exec` argv running COMMAND in NODE (in an MX routing instance's namespace with INSTANCE)."""
        if node not in record.containers:
            raise BadInput(f"lab {record.name} has no node {node}{did_you_mean(node, record.containers)} "
                           f"(nodes: {', '.join(record.containers)})")
        argv = [self.docker, "exec"] + (["-it"] if interactive else []) + [record.containers[node]]
        if instance:
            argv += ["ip", "netns", "exec", f"{record.name}-{node}-{instance.lower()}"]
        return argv + list(command)

    def power(self, record: ClabRecord, node: str, on: bool) -> str:
        self._emulated_node(record, node)
        result = self.agent(record.containers[node], ["power-on" if on else "power-off"], check=False)
        if result.returncode != 0:
            raise LabError(_last_line(result))
        return result.stdout.strip()

    def restart(self, record: ClabRecord, node: str, names: Sequence[str], recover: bool = False) -> str:
        self._emulated_node(record, node)
        args = ["restart", *names] + (["--recover"] if recover else [])
        result = self.agent(record.containers[node], args, check=False)
        if result.returncode != 0:
            raise LabError(_last_line(result))
        return result.stdout.strip()

    def link(self, record: ClabRecord, plan: LabPlan, node: str, peer: str, up: bool) -> list[str]:
        """Both ends of every link between NODE and PEER down (or up), each in its container."""
        done = []
        for veth in plan.veths:
            if {veth.a.node, veth.b.node} != {node, peer}:
                continue
            for end in (veth.a, veth.b):
                self._emulated_node(record, end.node)
                result = self.agent(record.containers[end.node], ["link", end.name, "up" if up else "down"],
                                    check=False)
                if result.returncode != 0:
                    raise LabError(_last_line(result))
                done.append(result.stdout.strip())
        if not done:
            raise LabError(f"no link between {node} and {peer}")
        return done

    def _emulated_node(self, record: ClabRecord, node: str) -> None:
        if node not in record.containers:
            raise BadInput(f"lab {record.name} has no node {node}{did_you_mean(node, record.containers)}")
        if node in record.vendor:
            raise LabError(f"{node} is a {record.vendor[node]} node: operate it with its own CLI "
                           f"(ssh admin@{record.containers[node]})")


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    text = (result.stderr or "").strip() or (result.stdout or "").strip()
    return text.splitlines()[-1] if text else "no output"
