"""The test report of a `lab report` run: one results document (JSON) in, HTML / JUnit / Markdown out.

Pure: no I/O, no root, no network; the same document always gives the same bytes. The HTML is one
self-contained file (inline CSS and SVG, no script, no external reference) that opens in a browser
without a network.

The document (what `lab report --json` writes; ``SCHEMA`` = 1)::

    {"schema": 1, "plan": {"name", "file", "description", "traffic": {flows, rate_per_flow, sizes, ...}},
     "command": "lab report ...", "started": ISO-8601, "finished": ISO-8601, "duration_s": float,
     "machine": {...}, "version": {"lab": "0.1.0", "git": "abc1234"},
     "labs": {NAME: {"topology": FILE, "use_case": "sfw", "load_balancing": "...", "graph_svg": "<svg ...>",
                     "mnha": bool}},
     "cases": [{"id": "t1/srx-power-off", "lab": "t1", "event": "srx-power-off", "target": "srx1",
                "status": "passed" | "failed" | "error", "error": str | null, "started": ISO-8601,
                "duration_s": float, "result": {... one event of `lab events run --json` ...},
                "capture": {... see capture.py ...} | null}]}
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Iterable
from typing import Any

from . import families as familiesmod
from .charts import cdf_svg, convergence_values, timeline_svg  # noqa: F401  (the report's API too)

SCHEMA = 1

Doc = dict[str, Any]
TCP_KEYS = ("connections", "completed", "reset", "failed", "timed_out", "stuck", "retried", "longest_gap_ms")
SESSION_KEYS = ("opened", "failed_over", "survived", "expected_lost", "judged", "lost")
Case = dict[str, Any]


# --------------------------------------------------------------------------- figures of one case
def figures(case: Case) -> dict[str, Any]:
    """The matrix figures of one case (what every output shows), tolerant of a case that errored."""
    r = case.get("result") or {}
    conv = r.get("convergence_ms") or {}
    return {
        "status": case.get("status", "error"),
        "convergence_max_ms": conv.get("max"),
        "convergence_median_ms": conv.get("median"),
        "resolution_ms": r.get("resolution_ms"),
        "unaffected_loss": r.get("packets_lost_by_unaffected_flows"),
        "flows_moved": r.get("flows_moved"),
        "flows_expected": r.get("flows_moved_ideal"),
        "affected": r.get("affected_flows"),
        "flows": r.get("flows"),
        "recovered": r.get("recovered"),
        "longest_gap_ms": r.get("longest_gap_ms"),
        "capture_flagged": (case.get("capture") or {}).get("flagged"),
        "sender_max_lag_ms": max((float(v.get("max_lag_ms") or 0) for v in (r.get("senders") or {}).values()),
                                 default=None),
        "sender_max_lag_from_event_s": _worst_lag_when(r),
        **({f"tcp_{k}": r["tcp"][k] for k in TCP_KEYS} if r.get("tcp") else {}),  # run with --tcp
        **familiesmod.flat(r),  # IPv4, IPv6, NAT64 side by side: each family's figures (ipv4_..., ipv6_..., nat64_...)
    }


def _worst_lag_when(r: dict[str, Any]) -> float | None:
    """Seconds from the event to the senders' worst lateness (negative: before the event)."""
    senders = [v for v in (r.get("senders") or {}).values() if v.get("max_lag_at_ns")]
    event = (r.get("marks") or {}).get("event")
    if not senders or event is None:
        return None
    worst = max(senders, key=lambda v: float(v.get("max_lag_ms") or 0))
    return round(float(worst["max_lag_at_ns"]) / 1e9 - float(event), 3)


def summary(doc: Doc) -> dict[str, int]:
    cases = doc.get("cases", [])
    count = {s: sum(1 for c in cases if c.get("status") == s) for s in ("passed", "failed", "error")}
    return {"cases": len(cases), "passed": count["passed"], "failed": count["failed"], "errors": count["error"],
            "capture_flagged": sum(1 for c in cases if (c.get("capture") or {}).get("flagged"))}


def _labs_in_order(doc: Doc) -> list[str]:
    return list(dict.fromkeys(c["lab"] for c in doc.get("cases", [])))


def _events_in_order(doc: Doc) -> list[str]:
    from ..events.catalog import CATALOG

    present = {c["event"] for c in doc.get("cases", [])}
    return [e.name for e in CATALOG if e.name in present] + sorted(present - {e.name for e in CATALOG})


def _num(value: Any, digits: int = 1) -> str:
    if value is None or isinstance(value, bool):
        return "–" if value is None else "yes" if value else "no"
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def _anchor(case: Case) -> str:
    return "case-" + "".join(ch if ch.isalnum() else "-" for ch in case["id"])


def movers(result: dict[str, Any]) -> dict[str, Any]:
    """Flows by (SRX before, SRX after) and the expected vs actual count of flows that moved."""
    table: dict[str, dict[str, int]] = {}
    for r in result.get("per_flow", []):
        before, after = r.get("srx_before") or "?", r.get("srx_after") or "?"
        table.setdefault(before, {}).setdefault(after, 0)
        table[before][after] += 1
    return {"table": table, "moved": result.get("flows_moved"), "expected": result.get("flows_moved_ideal"),
            "moved_on_restore": result.get("flows_moved_on_restore"),
            "moved_on_restore_ideal_max": result.get("flows_moved_on_restore_ideal_max")}


# --------------------------------------------------------------------------- HTML
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:1.5em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}h3{font-size:1.05em}
table{border-collapse:collapse;margin:8px 0;font-size:.88em}td,th{border:1px solid #ccc;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#f3f3f3}td.num{text-align:right}
td.pass{background:#e6f4e6}td.fail{background:#fbe3e3}td.error{background:#fff2cc}td.na{color:#999}
.cell{display:block;white-space:nowrap}.verdict{font-weight:bold}.small{font-size:.85em;color:#555}
svg .plot{fill:#fff;stroke:#999}svg .grid{stroke:#eee}svg .tick{font-size:10px;fill:#444}
svg .label{font-size:11px;fill:#222}svg .series{fill:none;stroke-width:1.5}svg .mark{stroke-dasharray:4 3;
stroke-width:1.5}.case{border-top:2px solid #ddd;margin-top:2em}.flag{color:#b00;font-weight:bold}
.graph svg{max-width:100%;height:auto}.charts{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
details{margin:6px 0}
#matrix{table-layout:fixed;width:100%;font-size:.8em}#matrix th:first-child{width:11em}
#matrix .cell{white-space:normal;overflow-wrap:anywhere}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _kv_table(rows: Iterable[tuple[str, Any]], cls: str = "kv") -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f'<table class="{cls}">{body}</table>'


def matrix_html(doc: Doc) -> str:
    labs, events = _labs_in_order(doc), _events_in_order(doc)
    by_key = {(c["lab"], c["event"]): c for c in doc.get("cases", [])}
    head = "".join(f"<th>{_e(lab)}<br><span class='small'>{_e(doc.get('labs', {}).get(lab, {}).get('use_case', ''))}"
                   f"</span></th>" for lab in labs)
    rows = []
    for event in events:
        cells = []
        for lab in labs:
            case = by_key.get((lab, event))
            if case is None:
                cells.append('<td class="na">n/a</td>')
                continue
            f = figures(case)
            status = f["status"]
            cls = {"passed": "pass", "failed": "fail"}.get(status, "error")
            lines = [f'<a href="#{_anchor(case)}" class="verdict">{_e(status.upper())}</a>']
            if case.get("result"):
                lines += [f"conv {_num(f['convergence_max_ms'])} / {_num(f['convergence_median_ms'])} ms",
                          f"unaffected loss {_num(f['unaffected_loss'])}",
                          f"moved {_num(f['flows_moved'])} / {_num(f['flows_expected'])}",
                          f"recovered {_num(f['recovered'])}", *familiesmod.cell_lines(case["result"], _num)]
                if f["capture_flagged"]:
                    lines.append(f"<span class='flag'>capture differs: {f['capture_flagged']} flow(s)</span>")
            else:
                lines.append(_e((case.get("error") or "")[:80]))
            cells.append(f'<td class="{cls}" data-case="{_e(case["id"])}">'
                         + "".join(f'<span class="cell">{line}</span>' for line in lines) + "</td>")
        rows.append(f"<tr><th>{_e(event)}</th>{''.join(cells)}</tr>")
    return (f'<table id="matrix"><thead><tr><th>event \\ lab</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _capture_html(case: Case, resolution_ms: float | None) -> str:
    cap = case.get("capture")
    if not cap:
        return ""
    if cap.get("error"):
        return f"<h3>Capture</h3><p class='flag'>capture failed: {_e(cap['error'])}</p>"
    rows = []
    shown = [r for r in cap.get("flows", []) if r.get("differs") or r.get("generator_lost") or r.get("capture_lost")]
    for row in shown:
        flag = ' class="flag"' if row.get("differs") else ""
        cells = [row["flow"], _e(row["direction"]), _num(row.get("generator_lost")), _num(row.get("capture_lost")),
                 _num(row.get("generator_gap_ms")), _num(row.get("capture_gap_ms"))]
        rows.append(f"<tr{flag}>" + "".join(f"<td class='num'>{c}</td>" for c in cells)
                    + f"<td>{'DIFFERS' if row.get('differs') else ''}</td></tr>")
    flagged = cap.get("flagged", 0)
    head = (f"<h3>Capture ({_e(cap.get('tool', 'dumpcap'))} on the receiving hosts, read by an independent "
            f"parser)</h3><p>{cap.get('packets', 0)} packets captured; flows where capture and generator differ by "
            f"more than one packet interval ({_num(resolution_ms)} ms, or one packet): "
            f"<span class='{'flag' if flagged else ''}'>{flagged}</span>. Loss in packets, gaps in ms.</p>")
    quiet = len(cap.get("flows", [])) - len(shown)
    head += (f"<p class='small'>{quiet} flow directions where both saw no loss and agree are not listed "
             f"(report.json has every one).</p>")
    return (head + "<details" + (" open" if flagged else "") + "><summary>flows with loss, or differing</summary>"
            "<table class='capture'><tr><th>flow</th><th>direction</th><th>lost (generator)</th>"
            "<th>lost (capture)</th><th>longest gap (generator)</th><th>longest gap (capture)</th><th></th></tr>"
            + "".join(rows) + "</table></details>")


def _case_html(doc: Doc, case: Case) -> str:
    r = case.get("result") or {}
    f = figures(case)
    lab = doc.get("labs", {}).get(case["lab"], {})
    parts = [f'<section class="case" id="{_anchor(case)}"><h2>{_e(case["event"])} on {_e(case["lab"])}'
             f' ({_e(case.get("target") or "-")}): {_e(case.get("status", "error").upper())}</h2>']
    if case.get("error"):
        parts.append(f"<p class='flag'>error: {_e(case['error'])}</p>")
    checks = case.get("checks") or r.get("checks") or []
    if checks:
        parts.append("<h3>Checked before (and after) the event</h3>" + _kv_table(
            (f"{c.get('name')} ({c.get('when', 'before')})",
             ("ok: " if c.get("ok") else "NOT MET: ") + str(c.get("detail", ""))) for c in checks))
    if r:
        parts.append(f"<p>{_e(r.get('title', ''))}. {_e(r.get('action', ''))}</p>")
        parts.append(_kv_table([
            ("convergence max / median (flows that lost packets)",
             f"{_num(f['convergence_max_ms'])} / {_num(f['convergence_median_ms'])} ms "
             f"(resolution {_num(f['resolution_ms'], 3)} ms)"),
            ("longest gap of any flow", f"{_num(f['longest_gap_ms'])} ms (send-time gaps)"),
            ("flows affected / total", f"{_num(f['affected'])} / {_num(f['flows'])}"),
            ("packets lost by unaffected flows", _num(f["unaffected_loss"])),
            ("flows moved / expected", f"{_num(f['flows_moved'])} / {_num(f['flows_expected'])}"),
            ("every flow recovered", _num(f["recovered"])),
            ("senders' worst lateness", f"{_num(f['sender_max_lag_ms'])} ms"
             + (f", {_num(f['sender_max_lag_from_event_s'], 2)} s from the event"
                if f["sender_max_lag_from_event_s"] is not None else "")
             + " (a packet due during an outage but sent late, after it, is not lost)"),
            ("case duration", f"{_num(case.get('duration_s'))} s"),
            *([("long-lived TCP connections", ", ".join(f"{k.replace('_', ' ')} {_num(f['tcp_' + k])}" for k in
                                                       TCP_KEYS))] if r.get("tcp") else []),
            *([("background sessions", ", ".join(f"{k.replace('_', ' ')} {_num(r['sessions'][k])}" for k in
                                                 SESSION_KEYS))] if r.get("sessions") else []),
        ]))
        parts.append(familiesmod.table_html(r, _num, _e))
        parts.append("<div class='charts'><div><h3>Delivered pps per SRX</h3>" + timeline_svg(r) + "</div>")
        conv = convergence_values(r)
        stats = (f"{len(conv)} flows lost packets; p50 {_num(statistics.median(conv))} ms, max {_num(max(conv))} ms"
                 if conv else "no flow lost a packet")
        parts.append(f"<div><h3>Per-flow convergence (CDF)</h3>{cdf_svg(r)}<p class='small'>{stats}; one step = "
                     f"{_num(f['resolution_ms'], 3)} ms</p></div></div>")
        mv = movers(r)
        srxs = sorted({a for row in mv["table"].values() for a in row})
        rows = "".join(f"<tr><th>{_e(b)}</th>" + "".join(f"<td class='num'>{row.get(a, '')}</td>" for a in srxs)
                       + "</tr>" for b, row in sorted(mv["table"].items()))
        restore = ""
        if mv["moved_on_restore"] is not None:
            restore = (f" Moved by the restore: {mv['moved_on_restore']} (at most "
                       f"{mv['moved_on_restore_ideal_max']} expected).")
        parts.append(f"<h3>Movers: expected {_num(mv['expected'])}, actual {_num(mv['moved'])}.{_e(restore)}</h3>"
                     f"<table class='movers'><tr><th>before \\ after</th>"
                     + "".join(f"<th>{_e(a)}</th>" for a in srxs) + f"</tr>{rows}</table>")
        parts.append(_capture_html(case, f["resolution_ms"]))
        fwd, rev = r.get("forward") or {}, r.get("reverse") or {}
        parts.append("<details><summary>generator figures per direction</summary>" + _kv_table(
            [(f"{name} {k}", v) for name, d in (("forward", fwd), ("reverse", rev)) for k, v in sorted(d.items())
             if not isinstance(v, (dict, list))]) + "</details>")
    parts.append(f"<p class='small'>Lab {_e(case['lab'])} ({_e(lab.get('topology', ''))}): "
                 f"<a href='#lab-{_e(case['lab'])}'>its graph</a>.</p></section>")
    return "".join(parts)


def _chosen_by(traffic: dict[str, Any]) -> str:
    calibration = traffic.get("calibration") or {}
    if traffic.get("chosen_by") != "calibration":
        return "the plan or the options"
    return (f"calibration on the first lab: 1/{_num(calibration.get('headroom'), 0)} of the highest rate it carried "
            f"loss-free and on schedule ({_num(calibration.get('highest_clean_rate'), 0)} pps)")


def to_html(doc: Doc) -> str:
    plan = doc.get("plan", {})
    traffic = plan.get("traffic", {})
    s = summary(doc)
    machine = doc.get("machine", {})
    version = doc.get("version", {})
    params = [("flows per direction", traffic.get("flows")),
              ("pps per flow per direction", traffic.get("rate_per_flow")),
              ("aggregate pps per direction", traffic.get("rate")), ("frame sizes", traffic.get("sizes")),
              ("two-way", traffic.get("reverse")),
              ("convergence resolution", f"{_num(traffic.get('resolution_ms'), 3)} ms (one per-flow interval)"),
              ("warm-up / hold / settle / down time (s)",
               " / ".join(str(traffic.get(k)) for k in ("warmup", "hold", "settle", "down_time"))),
              ("timeline sampling", "100 ms (MX per-SRX counters)"),
              ("flows and rate chosen by", _chosen_by(traffic))]
    title = f"lab report: {plan.get('name', 'plan')}"
    body = [f"<h1>{_e(title)}</h1>",
            f"<p>{_e(plan.get('description', ''))}</p>",
            f"<p><b>{s['passed']}</b> passed, <b>{s['failed']}</b> failed, <b>{s['errors']}</b> errors of "
            f"{s['cases']} cases; run {_e(doc.get('started', ''))} – {_e(doc.get('finished', ''))} "
            f"({_num(doc.get('duration_s'), 0)} s). Command: <code>{_e(doc.get('command', ''))}</code></p>",
            "<h2>Summary: event × lab</h2>",
            "<p class='small'>Per cell: verdict; convergence max / median over the flows that lost packets "
            "(lost packets ÷ per-flow rate, RFC 6412's packet-loss duration, in ms); packets lost by flows "
            "whose SRX the event did not touch; flows moved between SRXs / flows expected to move; whether "
            "every flow was passing again at the end; with IPv4, IPv6 or NAT64 flows side by side, the same per "
            "family, each judged on its own flows.</p>",
            matrix_html(doc),
            "<h2>Parameters</h2>", _kv_table(params),
            "<h2>Machine and version</h2>",
            _kv_table([*((k, v) for k, v in machine.items()), *((f"version {k}", v) for k, v in version.items())])]
    body.append("<h2>Labs</h2>")
    for name, lab in doc.get("labs", {}).items():
        body.append(f"<section class='lab' id='lab-{_e(name)}'><h3>{_e(name)}: {_e(lab.get('topology', ''))} "
                    f"({_e(lab.get('use_case', ''))}, {_e(lab.get('load_balancing', ''))})</h3>"
                    f"<div class='graph'>{lab.get('graph_svg') or '(no graph: Graphviz missing)'}</div></section>")
    body += [_case_html(doc, c) for c in doc.get("cases", [])]
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n")


# --------------------------------------------------------------------------- JUnit
def to_junit(doc: Doc) -> str:
    """One test case per lab x event; ``time`` is the case's duration; the figures are properties
    and system-out (never in ``time``)."""
    from xml.sax.saxutils import escape, quoteattr

    s = summary(doc)
    name = f"lab report {doc.get('plan', {}).get('name', 'plan')}"
    cases = []
    for case in doc.get("cases", []):
        f = figures(case)
        props = "".join(f"<property name={quoteattr(k)} value={quoteattr(_num(v, 3))}/>" for k, v in f.items()
                        if k != "status")
        body = f"<properties>{props}</properties>"
        if case.get("status") == "error":
            body += f"<error message={quoteattr(case.get('error') or 'error')}/>"
        elif case.get("status") == "failed":
            body += f"<failure message={quoteattr('; '.join(failure_reasons(case)) or 'failed')}/>"
        out = {k: v for k, v in f.items() if v is not None}
        body += f"<system-out>{escape(json.dumps(out, sort_keys=True))}</system-out>"
        cases.append(f"  <testcase classname={quoteattr('lab.report.' + case['lab'])} "
                     f"name={quoteattr(case['event'] + ' on ' + str(case.get('target') or '-'))} "
                     f'time="{float(case.get("duration_s") or 0):.3f}">{body}</testcase>')
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr(name)} tests="{s["cases"]}" '
            f'failures="{s["failed"]}" errors="{s["errors"]}" time="{float(doc.get("duration_s") or 0):.3f}" '
            f'timestamp={quoteattr(str(doc.get("started", "")))}>\n' + "\n".join(cases) + "\n</testsuite>\n")


def failure_reasons(case: Case) -> list[str]:
    r = case.get("result") or {}
    why = []
    if r and not r.get("recovered"):
        why.append("not every flow recovered after the event")
    if r.get("packets_lost_by_unaffected_flows"):
        why.append(f"unaffected flows lost {r['packets_lost_by_unaffected_flows']} packets")
    if (case.get("capture") or {}).get("flagged"):
        why.append(f"capture and generator differ on {case['capture']['flagged']} flow(s)")
    why += familiesmod.reasons(r)
    if r:
        from ..events.budgets import violations

        why += violations(r)  # budgets given to `lab report` (--max-convergence-ms, --budget...)
    return why


# --------------------------------------------------------------------------- Markdown
def to_markdown(doc: Doc, html_link: str | None = None) -> str:
    labs, events = _labs_in_order(doc), _events_in_order(doc)
    by_key = {(c["lab"], c["event"]): c for c in doc.get("cases", [])}
    traffic = doc.get("plan", {}).get("traffic", {})
    s = summary(doc)
    lines = [f"Run {doc.get('started', '')} ({_num(doc.get('duration_s'), 0)} s), `{doc.get('command', '')}`; "
             f"{s['passed']} passed, {s['failed']} failed, {s['errors']} errors of {s['cases']} cases.",
             "",
             f"Traffic: {traffic.get('flows')} flows × {_num(traffic.get('rate_per_flow'), 0)} pps per direction, "
             f"{traffic.get('sizes')}; convergence resolution {_num(traffic.get('resolution_ms'), 3)} ms.",
             ""]
    if html_link:
        lines += [f"Full report with the evidence per case: [{html_link}]({html_link}).", ""]
    lines.append("Cell: verdict, convergence max / median (ms), unaffected-flow loss (packets), flows moved / "
                 "expected, recovered; with IPv6 or NAT64 flows beside, each family's convergence max / median "
                 "and loss.")
    lines.append("")
    lines.append("| event | " + " | ".join(labs) + " |")
    lines.append("|---|" + "---|" * len(labs))
    for event in events:
        cells = []
        for lab in labs:
            case = by_key.get((lab, event))
            if case is None:
                cells.append("n/a")
                continue
            f = figures(case)
            if not case.get("result"):
                cells.append(f"**{case.get('status', 'error')}**")
                continue
            verdict = "pass" if f["status"] == "passed" else f"**{f['status']}**"
            cells.append(f"{verdict} {_num(f['convergence_max_ms'], 0)} / {_num(f['convergence_median_ms'], 0)}, "
                         f"{_num(f['unaffected_loss'])}, {_num(f['flows_moved'])}/{_num(f['flows_expected'])}, "
                         f"{'rec' if f['recovered'] else '**not rec**'}{familiesmod.markdown(case['result'], _num)}")
        lines.append(f"| {event} | " + " | ".join(cells) + " |")
    machine = doc.get("machine", {})
    if machine:
        lines += ["", "Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()) + "; version "
                  + ", ".join(f"{k} {v}" for k, v in doc.get("version", {}).items()) + "."]
    return "\n".join(lines) + "\n"
