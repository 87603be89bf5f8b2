"""The Jinja2 environment of the device templates (package data): a device's configuration templates
in `templates/` (`bird.conf.j2`), a feature's beside its planner in `plan/features/FEATURE/`, named
`FEATURE/NAME` (`mnha/conntrackd.conf.j2`)."""

from __future__ import annotations

import os
from functools import cache
from importlib import resources
from ipaddress import IPv4Interface, IPv4Network

import jinja2


def _template_loader(override: str | None) -> jinja2.BaseLoader:
    """The package's templates (package data, read with importlib.resources); LAB_TEMPLATES=DIR overrides
    (the same names: DIR/bird.conf.j2, DIR/mnha/conntrackd.conf.j2)."""
    if override:
        return jinja2.FileSystemLoader(override)
    root = resources.files("lab_orchestrator") / "templates"
    features = resources.files("lab_orchestrator") / "plan" / "features"

    def load(name: str) -> str | None:
        feature, _, rest = name.rpartition("/")
        if feature and "/" in feature or ".." in (feature, rest):
            return None
        entry = features / feature / rest if feature else root / name
        return entry.read_text(encoding="utf-8") if entry.is_file() else None

    return jinja2.FunctionLoader(load)


def environment() -> jinja2.Environment:
    """The templates' environment (StrictUndefined, trimmed blocks), made once per template folder."""
    return _environment(os.environ.get("LAB_TEMPLATES"))


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs (compiling them is a third of a second of every `lab up`):
    Jinja2's own per-user folder under the temporary directory (private, checked by Jinja2), each
    entry keyed by the template's name and the checksum of its text; None when it cannot be used."""
    try:
        return jinja2.FileSystemBytecodeCache()
    except RuntimeError:  # the folder exists but is not this user's alone
        return None


@cache
def _environment(override: str | None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=_template_loader(override),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["netmask"] = lambda a: str(IPv4Interface(a).netmask)
    env.filters["network"] = lambda p: str(IPv4Network(p).network_address)
    env.filters["prefixmask"] = lambda p: str(IPv4Network(p).netmask)
    # `sessions | selectattr("protocol", "startingwith", "fw_")`: a role's sessions (BIRD names carry the role)
    env.tests["startingwith"] = lambda value, prefix: str(value).startswith(prefix)
    return env
