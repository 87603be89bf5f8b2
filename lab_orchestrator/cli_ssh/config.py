"""The SSH server's configuration: users, nodes and where their state lives (JSON, from the planner).

Passwords are stored as PBKDF2-SHA256 hashes with a salt derived from the lab and user names, so the
plan stays deterministic (golden-tested) and no password is written in clear to the state dir.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..kinds import KINDS

PBKDF2_ITERATIONS = 20000
VENDORS = {k.name: k.ssh_vendor for k in KINDS.values() if k.ssh_vendor}  # kind -> CLI dialect


def hash_password(lab: str, user: str, password: str) -> str:
    salt = hashlib.sha256(f"lab-ssh:{lab}:{user}".encode()).hexdigest()[:32]
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), PBKDF2_ITERATIONS)
    return f"pbkdf2-sha256${PBKDF2_ITERATIONS}${salt}${digest.hex()}"


def check_password(stored: str, password: str) -> bool:
    try:
        scheme, rounds, salt, digest = stored.split("$")
    except ValueError:
        return False
    if scheme != "pbkdf2-sha256":
        return False
    computed = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), int(rounds))
    return hmac.compare_digest(computed.hex(), digest)


@dataclass(frozen=True)
class User:
    name: str
    password_hash: str  # "" : no password login
    keys: tuple[str, ...]  # "type base64" of each authorized key (comment dropped)
    klass: str  # super-user | operator | read-only

    def may_change_state(self) -> bool:
        return self.klass != "read-only"


@dataclass(frozen=True)
class Instance:
    name: str  # "" for the master instance, else the routing-instance name (TRUST-VR)
    ns: str
    table: str  # Junos table name of its main table: inet.0, TRUST-VR.inet.0
    tables: dict[str, str] = field(default_factory=dict)  # other kernel tables: number -> shown name


@dataclass(frozen=True)
class Bird:
    instance: str
    process: str  # the supervisor's process name: bird, bird-trust-vr
    socket: str


@dataclass(frozen=True)
class Peer:
    """A planned BGP session, with what the CLI shows beside BIRD's view of it."""

    protocol: str
    instance: str
    group: str
    peer_node: str
    peer_address: str
    peer_as: int
    local_address: str
    local_as: int


@dataclass(frozen=True)
class Port:
    name: str  # Linux name
    alias: str  # vendor name
    instance: str
    zone: str | None
    description: str


@dataclass(frozen=True)
class Node:
    name: str
    kind: str  # mx | srx | ios-router
    vendor: str  # junos | ios
    master_ns: str
    mgmt_if: str
    mgmt_address: str  # with prefix length
    instances: tuple[Instance, ...]
    birds: tuple[Bird, ...]
    peers: tuple[Peer, ...]
    ports: tuple[Port, ...]
    loopbacks: dict[str, str]
    config_file: str  # juniper.conf or running-config (absolute)
    status_dir: str  # nodes/NODE (absolute): status files of the daemons
    host_key: str  # absolute path of the node's ed25519 host key
    nat_pool: str | None = None
    features: dict[str, Any] = field(default_factory=dict)  # what the topology configures

    def instance(self, name: str) -> Instance | None:
        return next((i for i in self.instances if i.name == name), None)


@dataclass(frozen=True)
class ServerConfig:
    lab: str
    state_dir: str
    source: str
    port: int
    load_balancing: str
    use_case: str
    users: tuple[User, ...]
    lab_key: bool
    client_key: str  # the lab's client private key (public key next to it, .pub)
    known_hosts: str
    nodes: tuple[Node, ...]

    def node(self, name: str) -> Node | None:
        return next((n for n in self.nodes if n.name == name), None)

    def user(self, name: str) -> User | None:
        return next((u for u in self.users if u.name == name), None)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def _node(data: dict[str, Any]) -> Node:
    return Node(
        name=data["name"], kind=data["kind"], vendor=data["vendor"], master_ns=data["master_ns"],
        mgmt_if=data["mgmt_if"], mgmt_address=data["mgmt_address"],
        instances=tuple(Instance(**i) for i in data["instances"]),
        birds=tuple(Bird(**b) for b in data["birds"]),
        peers=tuple(Peer(**p) for p in data["peers"]),
        ports=tuple(Port(**p) for p in data["ports"]),
        loopbacks=dict(data["loopbacks"]), config_file=data["config_file"], status_dir=data["status_dir"],
        host_key=data["host_key"], nat_pool=data.get("nat_pool"), features=dict(data.get("features", {})),
    )


def from_json(text: str) -> ServerConfig:
    data = json.loads(text)
    return ServerConfig(
        lab=data["lab"], state_dir=data["state_dir"], source=data["source"], port=int(data["port"]),
        load_balancing=data["load_balancing"], use_case=data["use_case"],
        users=tuple(User(u["name"], u["password_hash"], tuple(u["keys"]), u["klass"]) for u in data["users"]),
        lab_key=bool(data["lab_key"]), client_key=data["client_key"], known_hosts=data["known_hosts"],
        nodes=tuple(_node(n) for n in data["nodes"]),
    )


def load(path: str | Path) -> ServerConfig:
    return from_json(Path(path).read_text())
