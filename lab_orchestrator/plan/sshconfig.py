"""The SSH server's configuration: users, nodes and where their state lives (JSON, from the planner).

No password is in it: the users' passwords are in the lab's secret file `ssh/passwords.secret.json`
(0600; drawn at random by `lab up` unless the topology sets one). The server hashes each once when it
starts (PBKDF2-HMAC-SHA256, a random 16-byte salt, PBKDF2_ITERATIONS rounds: OWASP's recommendation),
keeps only the hash, and checks a login against it in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..kinds import KINDS

PBKDF2_ITERATIONS = 600_000  # OWASP's Password Storage Cheat Sheet for PBKDF2-HMAC-SHA256
VENDORS = {k.name: k.ssh_vendor for k in KINDS.values() if k.ssh_vendor}  # kind -> CLI dialect
PASSWORDS_FILE = "ssh/passwords.secret.json"  # {user: password}: the users who may log in with one


def hash_password(password: str, rounds: int = PBKDF2_ITERATIONS, salt: bytes | None = None) -> str:
    """pbkdf2-sha256$ROUNDS$SALT$DIGEST (hex), with a fresh random salt unless one is given."""
    salt = os.urandom(16) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, rounds)
    return f"pbkdf2-sha256${rounds}${salt.hex()}${digest.hex()}"


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
    password: bool  # may log in with a password (its own, in PASSWORDS_FILE)
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
    client_key: str  # prefix of the lab's client keys: user U's private key is CLIENT_KEY-U (.pub next to it)
    known_hosts: str
    nodes: tuple[Node, ...]

    def client_key_of(self, user: str) -> str:
        """The private key the lab made for USER (each user has a key of its own)."""
        return f"{self.client_key}-{user}"

    @property
    def passwords(self) -> str:
        """The secret file of the users' passwords."""
        return f"{self.state_dir}/{PASSWORDS_FILE}"

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
        users=tuple(User(u["name"], bool(u["password"]), tuple(u["keys"]), u["klass"]) for u in data["users"]),
        lab_key=bool(data["lab_key"]), client_key=data["client_key"], known_hosts=data["known_hosts"],
        nodes=tuple(_node(n) for n in data["nodes"]),
    )


def read_passwords(config: ServerConfig, rounds: int = PBKDF2_ITERATIONS) -> dict[str, str]:
    """The hash of each password user's password (PASSWORDS_FILE, written by `lab up`); a user missing
    from it (or an unreadable file) has no password login."""
    try:
        data = json.loads(Path(config.passwords).read_text())
    except (OSError, ValueError):
        return {}
    return {u.name: hash_password(data[u.name], rounds) for u in config.users
            if u.password and isinstance(data.get(u.name), str) and data[u.name]}


def load(path: str | Path) -> ServerConfig:
    return from_json(Path(path).read_text())
