"""`lab report` on a dual-stack lab: the events' `families` (IPv4 and IPv6 flows side by side, each
judged on its own) shown in the report's matrix, case tables, Markdown, JUnit and progress lines;
an IPv4-only case's outputs unchanged. Pure, no root."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from test_reportgen import _case, _result, document

from lab_orchestrator.report import document as reportgen
from lab_orchestrator.report import families, run


def _family(fam: int, conv_max: float, conv_median: float, loss: int = 0, recovered: bool = True) -> dict[str, Any]:
    return {"family": fam, "flows": 4, "affected_flows": 2, "unaffected_flows": 2,
            "convergence_ms": {"max": conv_max, "median": conv_median}, "longest_gap_ms": conv_max + 5,
            "packets_lost_by_unaffected_flows": loss, "flows_moved": 2, "recovered": recovered,
            "passed": recovered and not loss, "received": 100, "lost": 10}


def dual_document(ipv6_loss: int = 0) -> dict[str, Any]:
    doc = document()
    result = _result("srx-power-off", "srx1", {0: 8, 2: 9, 4: 7, 6: 8}, moved=4, ideal=4)
    result["families"] = {"4": _family(4, 40.0, 35.0), "6": _family(6, 45.0, 42.5, loss=ipv6_loss)}
    result["passed"] = not ipv6_loss
    doc["labs"]["t3d"] = {"topology": "labs/topology3-dualstack.yml", "use_case": "sfw", "graph_svg": ""}
    doc["cases"].append(_case("t3d", "srx-power-off", result, "failed" if ipv6_loss else "passed"))
    return doc


def test_figures_carry_each_family_flat_and_an_ipv4_case_none() -> None:
    doc = dual_document()
    f = reportgen.figures(doc["cases"][-1])
    assert f["ipv4_convergence_max_ms"] == 40.0 and f["ipv6_convergence_median_ms"] == 42.5
    assert f["ipv6_unaffected_loss"] == 0 and f["ipv6_flows"] == 4 and f["ipv6_passed"] is True
    assert not any(k.startswith("ipv") for k in reportgen.figures(doc["cases"][0]))


def test_html_matrix_cell_and_case_table_show_each_family() -> None:
    text = reportgen.to_html(dual_document(ipv6_loss=3))
    cell = re.search(r'<td class="fail" data-case="t3d/srx-power-off">(.*?)</td>', text)
    assert cell is not None
    assert "IPv4 40.0 / 35.0 ms, loss 0" in cell.group(1) and "IPv6 45.0 / 42.5 ms, loss 3" in cell.group(1)
    table = re.search(r"<h3>Per IP family \(each judged on its own flows\)</h3><table class='families'>(.*?)</table>",
                      text)
    assert table is not None
    rows = re.findall(r"<tr( class='flag')?>(.*?)</tr>", table.group(1))
    cells = [re.findall(r"<t[hd]>(.*?)</t[hd]>", row) for _, row in rows]
    assert cells[0] == list(families.COLUMNS)
    assert cells[1] == ["IPv4", "4", "2", "40.0 / 35.0 ms", "45.0 ms", "0", "2", "yes", "pass"]
    assert cells[2] == ["IPv6", "4", "2", "45.0 / 42.5 ms", "50.0 ms", "3", "2", "yes", "FAIL"]
    assert rows[2][0] == " class='flag'" and rows[1][0] == ""
    # an IPv4-only lab's cases have no such table and no family line
    assert text.count("Per IP family") == 1 and "IPv4 " not in reportgen.matrix_html(document())


def test_markdown_junit_and_reasons_name_the_family() -> None:
    doc = dual_document(ipv6_loss=3)
    md = reportgen.to_markdown(doc)
    row = next(line for line in md.splitlines() if line.startswith("| srx-power-off |"))
    assert row.endswith("**failed** 45 / 40, 0, 4/4, rec; IPv4 40 / 35, 0; IPv6 45 / 42, 3 |")
    junit = ET.fromstring(reportgen.to_junit(doc))
    case = next(c for c in junit.iter("testcase") if c.get("classname") == "lab.report.t3d")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["ipv6_unaffected_loss"] == "3" and props["ipv4_convergence_max_ms"] == "40.000"
    failure = case.find("failure")
    assert failure is not None and "IPv6: 3 packets lost by unaffected flows" in (failure.get("message") or "")
    assert reportgen.failure_reasons(doc["cases"][0]) == []


def test_progress_line_has_each_family() -> None:
    record = dual_document()["cases"][-1]
    line = run.describe(record)
    assert "recovered; IPv4 40/35 ms, loss 0; IPv6 45/42 ms, loss 0 (10 s)" in line, line
    assert "IPv4" not in run.describe(document()["cases"][0])
