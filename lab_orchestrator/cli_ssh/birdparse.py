"""Parse BIRD 2 replies (as `labkit.birdctl.command` returns them, codes stripped)."""

from __future__ import annotations

import re

from .state import BgpProtocol, BirdRoute, NextHop

_ROUTE = re.compile(
    r"^(?P<prefix>\d+\.\d+\.\d+\.\d+/\d+|[0-9a-fA-F:]*:[0-9a-fA-F:.]*/\d+)?\s+(?P<type>unicast|blackhole|unreachable|prohibit)\s+"
    r"\[(?P<proto>\S+) (?P<since>[^\]]+?)(?: from [^\]]+)?\]\s*(?P<primary>\*)?\s*\((?P<pref>\d+)(?:/\d+)?\)"
)
_VIA = re.compile(r"^\s*via (?P<gw>\S+) on (?P<dev>\S+)(?: weight (?P<weight>\d+))?")
_DEV = re.compile(r"^\s*dev (?P<dev>\S+)")
_PROTOCOL = re.compile(
    r"^(?P<name>\S+)\s+(?P<proto>\S+)\s+(?P<table>\S+)\s+(?P<state>\S+)\s+"
    r"(?P<since>\d{4}-\d\d-\d\d(?: [\d:.]+)?|[\d:.]+)\s*(?P<info>.*)$"
)
_COUNT = re.compile(r"(\d+) (imported|filtered|exported|preferred)")
_STATS = re.compile(r"^\s*(Import|Export) updates:\s+(.*)$")
_FIELD = re.compile(r"^\s+(?P<key>[A-Za-z][A-Za-z0-9 .-]*?):\s+(?P<value>\S.*)$")
_SOURCES = {"BGP": "BGP", "static": "static", "device": "device", "inherit": "inherit", "RIP": "RIP",
            "OSPF": "OSPF", "OSPF-E2": "OSPF", "OSPF-IA": "OSPF"}


def parse_routes(lines: list[str]) -> list[BirdRoute]:
    """`show route all`: every route of the tables (IPv4 `master4` and IPv6 `master6` alike), the
    primary one of each prefix marked."""
    routes: list[BirdRoute] = []
    current: dict[str, object] | None = None
    prefix = ""

    def flush() -> None:
        if current is not None:
            routes.append(BirdRoute(**current))  # type: ignore[arg-type]

    for line in lines:
        if line.startswith("Table "):  # a new table: a line without a prefix cannot continue the last one
            flush()
            current, prefix = None, ""
            continue
        match = _ROUTE.match(line)
        if match:
            flush()
            prefix = match["prefix"] or prefix
            if not prefix:  # no prefix yet in this table: nothing to continue
                current = None
                continue
            current = {
                "prefix": prefix, "protocol": match["proto"], "source": "", "primary": bool(match["primary"]),
                "since": match["since"], "preference": int(match["pref"]), "nexthops": (),
                "blackhole": match["type"] != "unicast",
            }
            continue
        if current is None:
            continue
        via, dev = _VIA.match(line), _DEV.match(line)
        stripped = line.strip()
        if via:
            hop = NextHop(via["gw"], via["dev"], int(via["weight"] or 1))
            current["nexthops"] = (*current["nexthops"], hop)  # type: ignore[misc]
        elif dev:
            current["nexthops"] = (*current["nexthops"], NextHop(None, dev["dev"]))  # type: ignore[misc]
        elif stripped.startswith("Type: "):
            kind = stripped.split()[1]
            current["source"] = _SOURCES.get(kind, kind)
        elif stripped.startswith("BGP.as_path:"):
            path = stripped.split(":", 1)[1].split()
            current["as_path"] = tuple(int(a) for a in path if a.isdigit())
        elif stripped.startswith("BGP.origin:"):
            current["origin"] = stripped.split(":", 1)[1].strip()
        elif stripped.startswith("BGP.local_pref:"):
            current["local_pref"] = int(stripped.split(":", 1)[1])
        elif stripped.startswith("BGP.med:"):
            current["med"] = int(stripped.split(":", 1)[1])
        elif stripped.startswith("BGP.next_hop:"):
            current["bgp_next_hop"] = stripped.split(":", 1)[1].split()[0]
    flush()
    return routes


def parse_protocols(lines: list[str]) -> list[BgpProtocol]:
    """`show protocols all`: the BGP protocols with their details (other protocols are skipped)."""
    out: list[BgpProtocol] = []
    current: dict[str, object] | None = None

    def flush() -> None:
        if current is not None and current.pop("_proto") == "BGP":
            out.append(BgpProtocol(**current))  # type: ignore[arg-type]

    for line in lines:
        if line.startswith("Name ") and "Proto" in line:
            continue
        if line and not line[0].isspace():
            match = _PROTOCOL.match(line)
            if match:
                flush()
                current = {"_proto": match["proto"], "name": match["name"], "state": match["state"],
                           "since": match["since"], "info": match["info"].strip(), "fields": {}}
            continue
        if current is None:
            continue
        stats = _STATS.match(line)
        if stats:
            values = stats[2].split()
            if stats[1] == "Import" and len(values) >= 5 and "Import updates" not in current["fields"]:  # type: ignore[operator]
                current["import_received"] = _int(values[0])
                current["import_accepted"] = _int(values[4])
                current["fields"]["Import updates"] = stats[2]  # type: ignore[index]
            elif stats[1] == "Export" and len(values) >= 5:
                current["export_accepted"] = _int(values[4])
            continue
        field = _FIELD.match(line)
        if field:
            key, value = field["key"], field["value"].strip()
            if key == "Routes":
                for number, what in _COUNT.findall(value):
                    current[what] = int(number)
            fields = current["fields"]
            assert isinstance(fields, dict)
            fields.setdefault(key, value)
    flush()
    return out


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0
