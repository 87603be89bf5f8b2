"""The first pass of topology validation: pydantic on the (normalised) YAML data, each of its errors
as a located Diagnostic with a hint (the nearest known key, the expected shape), and the values that
failed pruned so the second pass (lab_orchestrator.model.validate's cross-reference checks) still runs on
the rest.
"""

from __future__ import annotations

import copy
import difflib
import re
import types
import typing
from ipaddress import IPv4Interface, IPv6Interface, ip_interface
from typing import Any

from pydantic import BaseModel, ValidationError

from .diagnostics import Diagnostic, YamlPath
from .schema import Topology
from .yamlsrc import SourceMap


def normalise(data: Any, source: SourceMap) -> Any:
    """Accept the short link form `[a:if, b:if]` by rewriting it (and its line numbers)."""
    if not isinstance(data, dict) or not isinstance(data.get("links"), list):
        return data
    for index, link in enumerate(data["links"]):
        if isinstance(link, list):
            data["links"][index] = {"endpoints": link}
            for j in range(len(link)):
                line = source.lines.get(("links", index, j))
                if line:
                    source.lines[("links", index, "endpoints", j)] = line
            source.lines[("links", index, "endpoints")] = source.lines.get(("links", index), 1)
    return data


def _model_at(path: YamlPath) -> type[BaseModel] | None:
    """The model class that validates the mapping at PATH (for 'did you mean' hints), if any."""
    current: Any = Topology
    for part in path:
        while True:  # unwrap X | None, list[X] (by index) and dict[str, X] (by key)
            origin, args = typing.get_origin(current), typing.get_args(current)
            if origin in (typing.Union, types.UnionType):
                rest = [a for a in args if a is not type(None)]
                if len(rest) != 1:
                    return None
                current = rest[0]
            else:
                break
        if isinstance(current, type) and issubclass(current, BaseModel) and isinstance(part, str):
            hints = typing.get_type_hints(current)
            name = next((n for n, f in current.model_fields.items() if (f.alias or n) == part), None)
            if name is None:
                return None
            current = hints[name]
        elif typing.get_origin(current) is list and isinstance(part, int):
            current = typing.get_args(current)[0]
        elif typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
        else:
            return None
    while typing.get_origin(current) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(current) if a is not type(None)]
        if len(rest) != 1:
            return None
        current = rest[0]
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unknown_key_hint(loc: YamlPath) -> str:
    model = _model_at(loc[:-1])
    if model is None:
        return "check the spelling"
    known = sorted(f.alias or n for n, f in model.model_fields.items())
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    return f"did you mean '{close[0]}'?" if close else f"known keys here: {', '.join(known)}"


def _shown(value: Any) -> str:
    """A value as the user wrote it in YAML, for 'got ...'."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


_MSG_PREFIXES = (
    ("Input should be", "must be"),
    ("String should", "must"),
    ("List should", "must"),
    ("Dictionary should", "must"),
    ("Value error, ", ""),
)


def _pydantic_message(err: Any, loc: YamlPath) -> tuple[str, str]:
    kind, raw, value = err["type"], err["msg"], err.get("input")
    if kind == "extra_forbidden":
        return f"unknown key '{loc[-1]}'", _unknown_key_hint(loc)
    if kind == "missing":
        return f"missing required key '{loc[-1]}'", ""
    if kind in ("model_type", "dict_type"):
        return f"must be a mapping (key: value), got {_shown(value)}", ""
    if kind == "string_pattern_mismatch" and loc == ("name",):
        return (f"lab name {_shown(value)} must start with a lower-case letter and hold only lower-case "
                "letters, digits and '-'", "it prefixes every namespace name")
    if kind == "string_too_long" and loc == ("name",):
        return (f"lab name {_shown(value)} is {len(str(value))} characters; at most "
                f"{err['ctx']['max_length']} are allowed", "it prefixes every namespace name")
    if kind == "literal_error" and _closest_choice(err):
        message = raw.replace("Input should be", "must be")
        return f"{message}, got {_shown(value)}", f"did you mean '{_closest_choice(err)}'?"
    if kind == "ip_v4_interface":
        return f"{_shown(value)} is not an IPv4 address with a prefix length", \
            _address_hint(kind, value) or "e.g. 198.18.0.0/31"
    if raw.startswith("Input is not"):
        return f"{_shown(value)} is not{raw[len('Input is not'):]}", _address_hint(kind, value)
    message = raw.replace(" after validation", "")
    if kind.endswith("_parsing"):  # "..., unable to parse string as an integer": the 'got' says it
        message = message.split(",")[0]
    for prefix, replacement in _MSG_PREFIXES:
        if message.startswith(prefix):
            message = replacement + message[len(prefix):]
            break
    else:
        message = message[0].lower() + message[1:]
    if kind not in ("too_short", "too_long") and (value is None or isinstance(value, (str, int, float))):
        message += f", got {_shown(value)}"
    return message.strip(), ""


def _address_hint(kind: str, value: Any) -> str:
    if kind == "ip_v4_network" and isinstance(value, str):
        try:
            return f"host bits are set: the network is {IPv4Interface(value).network}"
        except ValueError:
            pass
    if kind == "ip_v6_network" and isinstance(value, str):
        try:
            return f"host bits are set: the network is {IPv6Interface(value).network}"
        except ValueError:
            pass
    family = _family(value)
    if kind.startswith("ip_v4") and family == 6:
        return "an IPv6 value goes in the field ending in 6: addresses6, prefixes6, loopback6, announce6"
    if kind.startswith("ip_v6") and family == 4:
        return "an IPv4 value goes in the field without the 6: addresses, prefixes, loopback, announce"
    return ""


def _family(value: Any) -> int | None:
    """4 or 6 when VALUE reads as an IP address, interface or network of that family."""
    try:
        return ip_interface(str(value)).version
    except ValueError:
        return None


def pydantic_diagnostics(exc: ValidationError, source: SourceMap) -> list[Diagnostic]:
    out = []
    for err in exc.errors():
        loc: YamlPath = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        if loc and loc[-1] == "[key]":  # a mapping key of the wrong type, e.g. a node named `yes` (a bool)
            out.append(source.diag(loc[:-1], f"key {_shown(loc[-2])} must be text", "quote it"))
            continue
        msg, hint = _pydantic_message(err, loc)
        out.append(source.diag(loc, msg, hint))
    return out


# Mappings whose keys the user names (nodes, interfaces): dropping one of their entries would
# invent errors elsewhere (a link to a node that "is not defined"), so they are never pruned.
_USER_KEYED = (("nodes",), ("nodes", "*", "interfaces"))


def _prunable(loc: YamlPath) -> YamlPath | None:
    """The model field to drop so the rest of the file can still be checked (None: cannot)."""
    cut = loc
    while cut and not isinstance(cut[-1], str):
        cut = cut[:-1]
    if not cut or cut[-1] == "[key]":
        return None
    parent = cut[:-1]
    for pattern in _USER_KEYED:
        if len(parent) == len(pattern) and all(p in ("*", q) for p, q in zip(pattern, parent, strict=True)):
            return None
    return cut


def _drop(data: Any, path: YamlPath) -> bool:
    for part in path[:-1]:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(data, dict) and path[-1] in data:
        del data[path[-1]]
        return True
    return False


def model_pass(data: dict[str, Any], source: SourceMap
               ) -> tuple[Topology | None, list[Diagnostic], list[YamlPath], set[str]]:
    """Pydantic's field-by-field pass. On errors, drop the offending optional fields and validate
    again, so the cross-reference pass can still run on the rest of the file: a misspelt kind stands in
    as the kind it is closest to, and a node whose required fields are wrong otherwise is left out
    (its name still counts as defined). Returns the model (None when the rest cannot be checked), the
    diagnostics, the dropped value paths and the nodes left out."""
    try:
        return Topology.model_validate(data), [], [], set()
    except ValidationError as exc:
        diagnostics = pydantic_diagnostics(exc, source)
        errors = exc.errors()
    trimmed = copy.deepcopy(data)
    dropped: list[YamlPath] = []
    unchecked: set[str] = set()
    for attempt in range(2):
        for err in errors:
            loc: YamlPath = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            node = _node_of(loc)
            if node is not None and node in unchecked:
                continue
            if node is not None and loc[2:] == ("kind",) and _stand_in_kind(trimmed, node, err):
                continue
            cut = _prunable(loc) if err["type"] != "missing" and attempt == 0 else None
            if cut is None:
                if node is not None and _drop(trimmed, ("nodes", node)):
                    unchecked.add(node)
                    continue
                return None, diagnostics, [], unchecked
            if _drop(trimmed, cut) and err["type"] != "extra_forbidden":
                dropped.append(cut)
        try:
            return Topology.model_validate(trimmed), diagnostics, dropped, unchecked
        except ValidationError as exc:  # a required field was wrong: its default cannot stand in
            errors = exc.errors()
    return None, diagnostics, [], unchecked


def _node_of(loc: YamlPath) -> str | None:
    """The node a problem is inside of (nodes.NAME.something), if any."""
    return str(loc[1]) if len(loc) >= 3 and loc[0] == "nodes" else None


def _stand_in_kind(data: dict[str, Any], node: str, err: Any) -> bool:
    """Replace a misspelt kind by the one it is closest to (as the hint says), for the checks after."""
    close = _closest_choice(err)
    if not close or not isinstance(data.get("nodes"), dict) or not isinstance(data["nodes"].get(node), dict):
        return False
    data["nodes"][node]["kind"] = close
    return True


def _closest_choice(err: Any) -> str | None:
    """For a value outside a fixed set (pydantic's literal_error), the allowed value closest to it."""
    if err.get("type") != "literal_error" or not isinstance(err.get("input"), str):
        return None
    choices = re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", "")))
    close = difflib.get_close_matches(err["input"], choices, n=1, cutoff=0.6)
    return close[0] if close else None


def caused_by_drop(diag: Diagnostic, dropped: list[YamlPath]) -> bool:
    """A cross-reference problem at a dropped value, or at the mapping it was dropped from, is
    an echo of the field error already reported (AS 0 -> 'an srx needs bgp.as')."""
    return any(diag.path == cut[:-1] or diag.path[:len(cut)] == cut for cut in dropped)
