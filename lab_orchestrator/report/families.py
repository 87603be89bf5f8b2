"""The per-family figures of a report case run with IPv4, IPv6 and NAT64 flows side by side (a
dual-stack lab): the event's `families` ("4", "6", "64": each family judged on its own flows by the
rules of the whole event) as the report's outputs show them, beside the figures of all flows. Pure.

An IPv4-only case has no `families`: every function here then gives nothing, and the outputs are
those of an IPv4 lab.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.ipfamily import name

Num = Callable[..., str]  # document._num: a figure as the report prints it
COLUMNS = ("family", "flows", "affected", "convergence max / median", "longest gap", "unaffected loss",
           "moved", "recovered", "verdict")


def of(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Each family's figures by family number (4, 6, 64), in the names `document.figures` uses."""
    out = {}
    for number, fam in sorted((result.get("families") or {}).items(), key=lambda kv: int(kv[0])):
        conv = fam.get("convergence_ms") or {}
        out[int(number)] = {"flows": fam.get("flows"), "affected": fam.get("affected_flows"),
                          "convergence_max_ms": conv.get("max"), "convergence_median_ms": conv.get("median"),
                          "longest_gap_ms": fam.get("longest_gap_ms"),
                          "unaffected_loss": fam.get("packets_lost_by_unaffected_flows"),
                          "flows_moved": fam.get("flows_moved"), "recovered": fam.get("recovered"),
                          "passed": fam.get("passed")}
    return out


def flat(result: dict[str, Any]) -> dict[str, Any]:
    """`of` as flat keys ("ipv6_convergence_max_ms", "nat64_...", ...): one value each, as JUnit
    properties are."""
    return {f"{name(fam).lower()}_{key}": value
            for fam, figures in of(result).items() for key, value in figures.items()}


def cell_lines(result: dict[str, Any], num: Num) -> list[str]:
    """The matrix cell's line per family: convergence max / median, unaffected loss, recovered."""
    return [f"{name(fam)} {num(f['convergence_max_ms'])} / {num(f['convergence_median_ms'])} ms, "
            f"loss {num(f['unaffected_loss'])}{'' if f['recovered'] else ', NOT recovered'}"
            for fam, f in of(result).items()]


def table_html(result: dict[str, Any], num: Num, escape: Callable[[Any], str]) -> str:
    """A case's table of each family's figures (none for an IPv4-only case)."""
    rows = []
    for fam, f in of(result).items():
        cells = [name(fam), num(f["flows"]), num(f["affected"]),
                 f"{num(f['convergence_max_ms'])} / {num(f['convergence_median_ms'])} ms",
                 f"{num(f['longest_gap_ms'])} ms", num(f["unaffected_loss"]), num(f["flows_moved"]),
                 num(f["recovered"]), "pass" if f["passed"] else "FAIL"]
        cls = "" if f["passed"] else " class='flag'"
        rows.append(f"<tr{cls}>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
    if not rows:
        return ""
    return ("<h3>Per IP family (each judged on its own flows)</h3><table class='families'><tr>"
            + "".join(f"<th>{escape(c)}</th>" for c in COLUMNS) + "</tr>" + "".join(rows) + "</table>")


def markdown(result: dict[str, Any], num: Num) -> str:
    """The Markdown cell's part per family: "; IPv4 12 / 8, 0; IPv6 14 / 9, 0" (convergence max /
    median, unaffected loss; "not rec" when a family's flows did not all recover)."""
    return "".join(f"; {name(fam)} {num(f['convergence_max_ms'], 0)} / {num(f['convergence_median_ms'], 0)}, "
                   f"{num(f['unaffected_loss'])}{'' if f['recovered'] else ', **not rec**'}"
                   for fam, f in of(result).items())


def text(result: dict[str, Any]) -> str:
    """One line's part per family, for the progress lines of `lab report`."""
    return "".join(f"; {name(fam)} {f['convergence_max_ms'] or 0:.0f}/{f['convergence_median_ms'] or 0:.0f} ms, "
                   f"loss {f['unaffected_loss']}" for fam, f in of(result).items())


def reasons(result: dict[str, Any]) -> list[str]:
    """Why a family failed on its own flows."""
    return [f"{name(fam)}: " + (f"{f['unaffected_loss']} packets lost by unaffected flows" if f["unaffected_loss"]
                             else "not every flow recovered" if not f["recovered"] else "failed")
            for fam, f in of(result).items() if not f["passed"]]
