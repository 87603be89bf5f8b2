"""The report generator: results document -> HTML (parsed back), JUnit, Markdown. Pure, no root."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any

from lab_orchestrator.report import document as reportgen


def _result(event: str, target: str, lost: dict[int, int], moved: int, ideal: int, recovered: bool = True,
            unaffected_loss: int = 0, lasting: bool = True) -> dict[str, Any]:
    rate = 200.0
    rows = []
    for flow in range(8):
        srx_before = f"srx{flow % 2 + 1}"
        srx_after = "srx2" if srx_before == target else srx_before
        n = lost.get(flow, 0)
        rows.append({"flow": flow, "src": f"100.64.0.{flow + 1}", "srx_before": srx_before, "srx_after": srx_after,
                     "lost_forward": n, "lost_reverse": 0, "convergence_ms": n / rate * 1000,
                     "max_gap_ms": 5.0 + n * 5.0, "recovered": recovered, "moved": srx_before != srx_after,
                     "moved_on_restore": False, "lost": n})
    conv = [r["convergence_ms"] for r in rows if r["lost"]]
    t0 = 1000.0
    timeline = [[t0 - 1 + i * 0.1, {"srx1": 800.0 if i < 10 or not lasting or i > 30 else 0.0, "srx2": 800.0}]
                for i in range(50)]
    marks = {"event": t0, "settled": t0 + 4}
    if lasting:
        marks["restore"] = t0 + 2
    return {"event": event, "title": event.replace("-", " "), "target": target, "action": "did it",
            "flows": 8, "rate_per_flow_pps": rate, "resolution_ms": 5.0, "affected_flows": len(conv),
            "unaffected_flows": 8 - len(conv),
            "convergence_ms": {"max": max(conv), "median": sorted(conv)[len(conv) // 2]} if conv
            else {"max": 0, "median": 0},
            "longest_gap_ms": max(r["max_gap_ms"] for r in rows), "packets_lost_by_unaffected_flows": unaffected_loss,
            "flows_moved": moved, "flows_moved_ideal": ideal, "recovered": recovered,
            "passed": recovered and not unaffected_loss, "forward": {"lost": sum(lost.values()), "received": 999},
            "reverse": {"lost": 0}, "marks": marks, "timeline": timeline, "per_flow": rows}


def _case(lab: str, event: str, result: dict[str, Any] | None, status: str, error: str | None = None,
          capture: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": f"{lab}/{event}", "lab": lab, "event": event, "target": result["target"] if result else None,
            "status": status, "error": error, "started": "2026-12-01T10:00:00Z", "duration_s": 9.5,
            "result": result, "capture": capture}


def document() -> dict[str, Any]:
    power = _result("srx-power-off", "srx1", {0: 8, 2: 9, 4: 7, 6: 8}, moved=4, ideal=4)
    tlb = _result("restart-tlb", "mx1", {}, moved=0, ideal=0, lasting=False)
    bad = _result("srx-power-off", "srx1", {0: 8, 1: 3, 2: 9}, moved=4, ideal=4, unaffected_loss=3)
    capture = {"tool": "Dumpcap 4.0", "packets": 1234, "capture_drops": 0, "flagged": 1,
               "flows": [{"flow": 1, "direction": "forward", "generator_lost": 3, "capture_lost": 0,
                          "generator_gap_ms": 20.0, "capture_gap_ms": 5.0, "differs": True}]}
    return {
        "schema": reportgen.SCHEMA, "command": "lab report -t 1", "started": "2026-12-01T10:00:00Z",
        "finished": "2026-12-01T10:01:00Z", "duration_s": 60.0,
        "plan": {"name": "fixture", "description": "two labs & <two> events",
                 "traffic": {"flows": 8, "rate_per_flow": 200.0, "rate": 1600.0, "sizes": "imix", "reverse": True,
                             "resolution_ms": 5.0, "warmup": 1, "hold": 2, "settle": 2, "down_time": 2}},
        "machine": {"cpus": 2, "kernel": "6.18"}, "version": {"lab": "0.1.0", "git": "abc1234"},
        "labs": {"t1": {"topology": "labs/topology1.yml", "use_case": "sfw", "graph_svg": "<svg id='g1'></svg>"},
                 "t1-nat": {"topology": "labs/topology1-cgnat.yml", "use_case": "cgnat", "graph_svg": ""}},
        "cases": [_case("t1", "srx-power-off", power, "passed"), _case("t1", "restart-tlb", tlb, "passed"),
                  _case("t1-nat", "srx-power-off", bad, "failed", capture=capture),
                  _case("t1-nat", "restart-tlb", None, "error", "RuntimeError: traffic receive child failed")],
    }


class Parsed(HTMLParser):
    """Tables by id (rows of cell texts), every svg's class, every external reference."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.svgs: list[tuple[str, str | None]] = []  # (class, enclosing case section id)
        self.refs: list[str] = []
        self.cells: dict[str, str] = {}  # data-case -> text
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._cell_case: str | None = None
        self._section: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("href", "src"):
            if a.get(key) and not str(a[key]).startswith("#"):
                self.refs.append(str(a[key]))
        if tag == "section":
            self._section = a.get("id")
        elif tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
            self._cell_case = a.get("data-case")
        elif tag == "svg":
            self.svgs.append((a.get("class") or "", self._section))
        elif tag in ("script", "link", "img", "iframe"):
            self.refs.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            text = " ".join(" ".join(self._cell).split())
            self._row.append(text)
            if self._cell_case:
                self.cells[self._cell_case] = text
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag == "section":
            self._section = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def test_html_holds_the_matrix_and_one_timeline_per_case() -> None:
    doc = document()
    page = reportgen.to_html(doc)
    parsed = Parsed()
    parsed.feed(page)
    matrix = parsed.tables["matrix"]
    assert matrix[0] == ["event \\ lab", "t1 sfw", "t1-nat cgnat"]
    assert [row[0] for row in matrix[1:]] == ["srx-power-off", "restart-tlb"]  # the catalog's order
    assert parsed.cells["t1/srx-power-off"].startswith("PASSED conv 45.0 / 40.0 ms unaffected loss 0 moved 4 / 4")
    assert "FAILED" in parsed.cells["t1-nat/srx-power-off"] and "unaffected loss 3" in parsed.cells[
        "t1-nat/srx-power-off"] and "capture differs: 1 flow(s)" in parsed.cells["t1-nat/srx-power-off"]
    assert parsed.cells["t1-nat/restart-tlb"].startswith("ERROR RuntimeError")
    timelines = [section for cls, section in parsed.svgs if cls == "timeline"]
    assert timelines == ["case-t1-srx-power-off", "case-t1-restart-tlb", "case-t1-nat-srx-power-off"]
    assert [s for cls, s in parsed.svgs if cls == "cdf"] == timelines
    assert ("", "lab-t1") in parsed.svgs, "the lab's graph is inline, once per lab"
    assert parsed.refs == [], "self-contained: no script, no external link"
    assert "two labs &amp; &lt;two&gt; events" in page


def test_timeline_marks_the_event_and_restore_and_one_line_per_srx() -> None:
    result = document()["cases"][0]["result"]
    svg = reportgen.timeline_svg(result)
    assert svg.count("<polyline") == 2 and 'data-srx="srx1"' in svg and 'data-srx="srx2"' in svg
    assert "mark-event" in svg and "mark-restore" in svg and "mark-settled" in svg
    tlb = document()["cases"][1]["result"]
    assert "mark-restore" not in reportgen.timeline_svg(tlb)
    ET.fromstring(svg)  # well-formed XML


def test_cdf_steps_through_every_flow_that_lost_packets() -> None:
    result = document()["cases"][0]["result"]
    assert reportgen.convergence_values(result) == [35.0, 40.0, 40.0, 45.0]
    svg = reportgen.cdf_svg(result)
    points = svg.split('points="')[1].split('"')[0].split()
    assert len(points) == 1 + 2 * 4
    ET.fromstring(svg)
    assert "no flow lost" in reportgen.cdf_svg(document()["cases"][1]["result"])


def test_movers_table_counts_before_and_after() -> None:
    mv = reportgen.movers(document()["cases"][0]["result"])
    assert mv["table"] == {"srx1": {"srx2": 4}, "srx2": {"srx2": 4}}
    assert (mv["moved"], mv["expected"]) == (4, 4)


def test_junit_one_case_per_lab_and_event_time_is_the_duration() -> None:
    suite = ET.fromstring(reportgen.to_junit(document()))
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "1")
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("lab.report.t1", "srx-power-off on srx1"), ("lab.report.t1", "restart-tlb on mx1"),
        ("lab.report.t1-nat", "srx-power-off on srx1"), ("lab.report.t1-nat", "restart-tlb on -")]
    assert all(c.get("time") == "9.500" for c in cases), "time is the case's duration, not the convergence"
    props = {p.get("name"): p.get("value") for p in cases[0].iter("property")}
    assert props["convergence_max_ms"] == "45.000" and props["resolution_ms"] == "5.000"
    out = json.loads(cases[0].findtext("system-out") or "{}")
    assert out["convergence_median_ms"] == 40.0
    failure = cases[2].find("failure")
    assert failure is not None and "unaffected flows lost 3 packets" in (failure.get("message") or "")
    assert "capture and generator differ on 1 flow(s)" in (failure.get("message") or "")
    assert cases[3].find("error") is not None


def test_markdown_matrix() -> None:
    md = reportgen.to_markdown(document(), html_link="report.html")
    lines = md.splitlines()
    assert "| event | t1 | t1-nat |" in lines
    assert "| srx-power-off | pass 45 / 40, 0, 4/4, rec | **failed** 45 / 40, 3, 4/4, rec |" in lines
    assert "| restart-tlb | pass 0 / 0, 0, 0/0, rec | **error** |" in lines
    assert "[report.html](report.html)" in md


def test_capture_section_flags_the_differing_flow() -> None:
    page = reportgen.to_html(document())
    parsed = Parsed()
    parsed.feed(page)
    assert "DIFFERS" in page and "capture and generator differ" not in page.split("<h2>")[0]
    assert reportgen.summary(document()) == {"cases": 4, "passed": 2, "failed": 1, "errors": 1,
                                             "capture_flagged": 1}


def test_same_document_same_bytes() -> None:
    assert reportgen.to_html(document()) == reportgen.to_html(document())
    assert reportgen.to_junit(document()) == reportgen.to_junit(document())
