"""Host keys, the users' client keys and known_hosts: made on the lab's first start, kept for its life.

Keys are ed25519 in OpenSSH's own format (the OpenSSH client and paramiko both read it), private
files 0600. An existing key is never replaced: restarting the server (or `lab restart _lab sshd`)
keeps every fingerprint, so known_hosts stays valid until `lab down` removes the state dir.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..plan.sshconfig import ServerConfig


def ensure_key(path: str | Path, comment: str = "") -> str:
    """Create an ed25519 key at PATH (and PATH.pub) unless one is there; return the public key line."""
    target = Path(path)
    public = target.with_name(target.name + ".pub")
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = Ed25519PrivateKey.generate()
        private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                    serialization.NoEncryption())
        tmp = target.with_name(f".{target.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(private)
        try:
            os.link(tmp, target)  # never replaces a key another process wrote meanwhile
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    if not public.exists():
        loaded = serialization.load_ssh_private_key(target.read_bytes(), password=None)
        line = loaded.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                serialization.PublicFormat.OpenSSH).decode()
        _write_atomic(public, f"{line} {comment}".rstrip() + "\n", 0o644)
    return " ".join(public.read_text().split()[:2])


def _write_atomic(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def known_hosts_lines(config: ServerConfig, public_keys: dict[str, str]) -> list[str]:
    """One line per node: its LAB-NODE alias and its management address (with [..]:port off 22)."""
    lines = []
    for node in config.nodes:
        alias = f"{config.lab}-{node.name}"
        address = node.mgmt_address.split("/")[0]
        names = [alias, address] if config.port == 22 else [alias, f"[{alias}]:{config.port}",
                                                            f"[{address}]:{config.port}"]
        lines.append(f"{','.join(names)} {public_keys[node.name]}")
    return lines


def prepare(config: ServerConfig) -> dict[str, str]:
    """Every node's host key and each user's client key exist; known_hosts lists the host keys. Returns
    the public key of each node."""
    public = {node.name: ensure_key(node.host_key, f"{config.lab}-{node.name}") for node in config.nodes}
    if config.lab_key:
        for user in config.users:
            ensure_key(config.client_key_of(user.name), f"lab {config.lab} client key of {user.name}")
    text = "".join(line + "\n" for line in known_hosts_lines(config, public))
    target = Path(config.known_hosts)
    with contextlib.suppress(OSError):
        if target.read_text() == text:
            return public
    _write_atomic(target, text, 0o644)
    return public


def lab_client_keys(config: ServerConfig) -> dict[str, str]:
    """The client public key ("ssh-ed25519 AAAA...") the lab made for each user: authorised for that user
    alone. Empty without `ssh.lab_key`."""
    if not config.lab_key:
        return {}
    keys = {}
    for user in config.users:
        with contextlib.suppress(OSError):
            keys[user.name] = " ".join(Path(config.client_key_of(user.name) + ".pub").read_text().split()[:2])
    return keys
