"""Test harness: an exported `.clab.yml` deployed with the real Docker engine, as containerlab deploys it.

This is not a backend: the product path is `containerlab deploy` (`lab up --backend containerlab`).
containerlab is not installed where these tests run, so this harness does, for the `linux` nodes of
an export, the steps containerlab's deploy takes:

1. the management network (`mgmt:`: a Docker bridge network with the export's subnet and gateway);
2. one container per node, `clab-LAB-NODE`, from the node's kind merged with the node (image, cmd,
   env, binds relative to the topology file, labels, `privileged`, `mgmt-ipv4`), started;
3. every `links:` entry as a veth pair between the two containers' network namespaces, each end
   named as the endpoint says, with the link's MTU;
4. each node's `exec:` commands in its container.

The node agent (the image's command) then builds the node. What a test reads back goes through the
product's own calls where they exist (`ContainerlabBackend.wait_ready` / `power`: `docker exec ...
clab.agent`). For the event runner, which observes a lab from the host (traffic senders and receivers
in the client's and server's namespaces, conntrack of each SRX, the MX's counters, status files and
BIRD sockets), `expose()` registers the containers' network namespaces (and an MX's routing-instance
namespaces) under their plan names in the host's /run/netns, and links each node's state folder
under the plan's state folder on the host, as the netns backend lays them out. Nothing is bound into
the containers beyond what the export binds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lab_orchestrator.clab.backend import ClabRecord, ContainerlabBackend
from lab_orchestrator.events import run as eventrun
from lab_orchestrator.plan.pipeline import LabPlan
from lab_orchestrator.runtime.state import LabState
from labkit import netnsutil

HARNESS_LABEL = "lab.test-harness=clab-engine"


class HarnessError(RuntimeError):
    pass


def docker(*argv: str, check: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise HarnessError(f"docker {' '.join(argv[:2])} failed: {(result.stderr or result.stdout).strip()}")
    return result


def image_present(image: str) -> bool:
    return docker("image", "inspect", image, check=False).returncode == 0


# capability numbers Docker 20.10 grants a privileged container (0 .. CAP_CHECKPOINT_RESTORE)
CAP_NAMES = ("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
             "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
             "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
             "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL",
             "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ",
             "PERFMON", "BPF", "CHECKPOINT_RESTORE")


def missing_capabilities() -> list[str]:
    """Capabilities outside this process's bounding set (a host that itself runs confined)."""
    bounding = next(int(line.split()[1], 16) for line in Path("/proc/self/status").read_text().splitlines()
                    if line.startswith("CapBnd:"))
    return [name for bit, name in enumerate(CAP_NAMES) if not bounding >> bit & 1]


def privileged_options() -> list[str]:
    """`privileged: true` as Docker gives it. Where the host's bounding set lacks a capability, runc
    cannot grant it and refuses --privileged: then every capability the host has, no seccomp or
    AppArmor confinement, no masked or read-only /proc paths, every device."""
    missing = missing_capabilities()
    if not missing:
        return ["--privileged"]
    return ["--cap-add", "ALL", *(f"--cap-drop={name}" for name in missing),
            "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
            "--security-opt", "systempaths=unconfined", "--device-cgroup-rule", "a *:* rwm"]


def firewall_state() -> dict[str, str]:
    """What of the host's namespace a Docker engine is known to change: the nftables ruleset (the
    iptables-nft tables are in it; without counters, which other traffic moves), the legacy iptables
    tables, and IPv4/IPv6 forwarding."""
    out: dict[str, str] = {"nft": subprocess.run(["nft", "-s", "list", "ruleset"], capture_output=True, text=True,
                                                 check=True).stdout}
    for tool in ("iptables-legacy-save", "ip6tables-legacy-save"):
        with contextlib.suppress(FileNotFoundError):
            text = subprocess.run([tool], capture_output=True, text=True).stdout
            out[tool] = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    for key in ("net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"):
        out[key] = Path("/proc/sys", key).read_text().strip()
    return out


@dataclass
class EngineLab:
    folder: Path  # the export folder
    topology_file: str
    data: dict[str, Any] = field(init=False)
    pids: dict[str, int] = field(default_factory=dict)
    exposed: list[str] = field(default_factory=list)
    state_links: Path | None = None

    def __post_init__(self) -> None:
        self.data = yaml.safe_load((self.folder / self.topology_file).read_text())

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def network(self) -> str:
        return str(self.data["mgmt"]["network"])

    def container(self, node: str) -> str:
        return f"clab-{self.name}-{node}"

    @property
    def nodes(self) -> dict[str, dict[str, Any]]:
        return dict(self.data["topology"]["nodes"])

    def node_spec(self, node: str) -> dict[str, Any]:
        """The node's entry over its kind's defaults (containerlab: node values win, env merges, binds add)."""
        entry = self.nodes[node]
        kind = entry.get("kind", "linux")
        if kind != "linux":
            raise HarnessError(f"node {node} is of kind {kind}: this harness deploys linux nodes only")
        defaults = dict(self.data["topology"].get("kinds", {}).get(kind, {}))
        spec = {**defaults, **entry}
        spec["env"] = {**defaults.get("env", {}), **entry.get("env", {})}
        spec["binds"] = [*defaults.get("binds", []), *entry.get("binds", [])]
        spec["exec"] = [*defaults.get("exec", []), *entry.get("exec", [])]
        return spec

    # ------------------------------------------------------------ deploy / destroy
    def deploy(self) -> None:
        self.destroy()  # what an earlier interrupted run left
        mgmt = self.data["mgmt"]
        docker("network", "create", "--driver", "bridge", "--subnet", mgmt["ipv4-subnet"],
               "--gateway", mgmt["ipv4-gw"], "--label", HARNESS_LABEL, self.network)
        for node in self.nodes:
            self._create(node)
        for node in self.nodes:
            docker("start", self.container(node))
            self.pids[node] = int(docker("inspect", "-f", "{{.State.Pid}}", self.container(node)).stdout)
        for link in self.data["topology"].get("links", []):
            self._link(link)
        for node in self.nodes:
            for command in self.node_spec(node)["exec"]:
                docker("exec", self.container(node), *shlex.split(command))

    def _create(self, node: str) -> None:
        spec = self.node_spec(node)
        argv = ["create", "--name", self.container(node), "--hostname", node, "--network", self.network,
                "--label", HARNESS_LABEL, "--label", f"clab-node-name={node}", "--label", f"containerlab={self.name}"]
        if spec.get("mgmt-ipv4"):
            argv += ["--ip", str(spec["mgmt-ipv4"])]
        if spec.get("privileged"):
            argv += privileged_options()
        for key, value in {**spec["env"], "CLAB_LABEL": f"clab-{self.name}", "CLAB_NODE_NAME": node}.items():
            argv += ["--env", f"{key}={value}"]
        for bind in spec["binds"]:
            host, _, rest = str(bind).partition(":")
            argv += ["--volume", f"{(self.folder / host).resolve()}:{rest}"]
        for key, value in (spec.get("labels") or {}).items():
            argv += ["--label", f"{key}={value}"]
        argv.append(str(spec["image"]))
        if spec.get("cmd"):
            argv += shlex.split(str(spec["cmd"]))
        docker(*argv)

    def _link(self, link: dict[str, Any]) -> None:
        if link.get("type", "veth") != "veth" or "endpoints" not in link:
            raise HarnessError(f"link {link}: this harness wires veth links only (no vxlan)")
        (na, ia), (nb, ib) = (str(e).split(":", 1) for e in link["endpoints"])
        mtu = str(link.get("mtu", 9500))
        subprocess.run(["ip", "link", "add", ia, "netns", str(self.pids[na]), "mtu", mtu, "type", "veth",
                        "peer", "name", ib, "netns", str(self.pids[nb]), "mtu", mtu], check=True)

    def destroy(self) -> None:
        self.unexpose()
        names = docker("ps", "-aq", "--filter", f"label={HARNESS_LABEL}", "--filter",
                       f"label=containerlab={self.name}", check=False).stdout.split()
        if names:
            docker("rm", "-f", *names, timeout=120)
        if docker("network", "inspect", self.network, check=False).returncode == 0:
            docker("network", "rm", self.network)
        self.pids = {}

    def logs(self) -> str:
        out = []
        for node in self.nodes:
            result = docker("logs", "--tail", "15", self.container(node), check=False)
            out.append(f"--- {node}\n{result.stdout}{result.stderr}")
        return "\n".join(out)

    # ------------------------------------------------------------ host view for the event runner
    def expose(self, plan: LabPlan) -> LabState:
        """The lab as the event runner sees a netns lab: namespaces by plan name in /run/netns, node
        state folders under plan.state_dir. Returns a LabState describing it (no supervisor)."""
        state_dir = Path(plan.state_dir)
        if state_dir.exists():
            raise HarnessError(f"{state_dir} exists: a lab named {plan.name} is up on the host")
        for ns in plan.namespaces:
            pid = self.pids[ns.node]
            source = f"/proc/{pid}/ns/net" if ns.instance is None else f"/proc/{pid}/root/run/netns/{ns.name}"
            if netnsutil.exists(ns.name):
                raise HarnessError(f"namespace {ns.name} exists on the host")
            netnsutil.path(ns.name).parent.mkdir(parents=True, exist_ok=True)
            netnsutil.path(ns.name).touch()
            self.exposed.append(ns.name)
            subprocess.run(["mount", "--bind", source, str(netnsutil.path(ns.name))], check=True)
        (state_dir / "nodes").mkdir(parents=True)
        self.state_links = state_dir
        for node, pid in self.pids.items():
            (state_dir / "nodes" / node).symlink_to(f"/proc/{pid}/root{plan.state_dir}/nodes/{node}")
        return LabState(name=plan.name, source=plan.source, state_dir=plan.state_dir, status="ready",
                        namespaces=[ns.name for ns in plan.namespaces], bridge="", host_ports=[], nft_table="",
                        mgmt_subnet=plan.mgmt.subnet)

    def unexpose(self) -> None:
        for name in self.exposed:
            netnsutil.delete(name)
        self.exposed = []
        if self.state_links is not None:
            for link in (self.state_links / "nodes").glob("*"):
                link.unlink()
            with contextlib.suppress(OSError):
                (self.state_links / "nodes").rmdir()
                self.state_links.rmdir()
            self.state_links = None


@dataclass
class AgentInjector:
    """Power events carried out through each container's node agent (ContainerlabBackend.power), for
    eventrun.run_event(injector=...)."""

    backend: ContainerlabBackend
    record: ClabRecord

    def inject(self, state: LabState, plan: LabPlan, event: str, target: str, down_time: float = 5.0,
               daemon: str | None = None) -> str:
        if event != "srx-power-off":
            raise HarnessError(f"event {event} is not carried out by this harness")
        summary = self.backend.power(self.record, target, on=False)
        state.down_nodes.append(target)
        return summary

    def restore(self, state: LabState, plan: LabPlan, target: str) -> list[str]:
        if target not in state.down_nodes:
            return []
        done = self.backend.power(self.record, target, on=True)
        state.down_nodes.remove(target)
        return [done]

    def injector(self) -> eventrun.Injector:
        return eventrun.Injector(inject=self.inject, restore=self.restore)


def agent_status(lab: EngineLab, node: str) -> dict[str, Any]:
    result = docker("exec", lab.container(node), "python3", "-m", "lab_orchestrator.clab.agent", "status")
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def engine(action: str) -> str:
    """images/node/engine start|stop: 'started' / 'running' on start."""
    script = Path(__file__).resolve().parents[2] / "images" / "node" / "engine"
    result = subprocess.run([str(script), action], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise HarnessError(result.stderr.strip() or result.stdout.strip())
    return result.stdout.strip()


def dockerd_installed() -> bool:
    return any(os.access(Path(d) / "dockerd", os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep))
