"""`lab events run` on the shipped labs of topologies 1-4 (SFW, CGNAT, SRG1, mixed): docs/events-results.md.

    python3 bench/events_results.py run LAB [LAB ...]     # per lab: up, every applicable event, down
    python3 bench/events_results.py record LAB REPORT.json --started ISO --ended ISO --commit C [--rc N]
    python3 bench/events_results.py write [--check]       # the document from the kept reports

`run` runs this checkout's `lab events run labs/LAB.yml` with the options below and keeps its report,
trimmed (each event's figures and verdict, the flows that lost packets, the marks; no pps timeline
and no per-flow rows of loss-free flows), in docs/events-results/LAB.json with the date, the commit,
the command, the exit code and the machine; `record` keeps a report made by hand with the same
options. `write` makes the document from those files only, so it shows one run per lab, the latest;
the notes below its marker (what the runs showed) are kept. A unit test fails when the document is
not what `write` makes of the kept reports.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "events-results.md"
KEPT = ROOT / "docs" / "events-results"
NOTES_MARKER = "<!-- notes below this line are kept when bench/events_results.py rewrites this file -->"

# Topologies 1-4 as shipped (SFW, the JVD's SRG0 files), their CGNAT files, the SRG1 variants, topology 3
# with SFW and NAPT44 side by side, and topologies 1-4 dual stack (IPv4, IPv6 and, but on topology 2, NAT64 flows,
# each family judged).
LABS = ("topology1", "topology2", "topology3", "topology4", "topology1-cgnat", "topology2-cgnat",
        "topology3-cgnat", "topology4-cgnat", "topology2-srg1", "topology3-srg1", "topology4-srg1",
        "topology3-mixed", "topology1-dualstack", "topology2-dualstack", "topology3-dualstack", "topology4-dualstack")
OPTIONS = ("--flows", "60", "--rate", "3000", "--warmup", "1.5", "--hold", "1.5", "--duration", "3",
           "--down-time", "1", "--sessions", "2000")
EVENT_KEYS = ("event", "target", "passed", "recovered", "flows", "affected_flows", "unaffected_flows",
              "convergence_ms", "longest_gap_ms", "packets_lost_by_unaffected_flows", "flows_moved",
              "flows_moved_ideal", "flows_rebound", "phases", "verdict_from", "tables_missed",
              "daemon_crash", "resolution_ms", "sessions", "families")
FLOW_KEYS = ("flow", "src", "carrier_before", "carrier_during", "carrier_after", "lost_forward",
             "lost_reverse", "gap_at_s", "expected_mover", "moved", "rebound", "bindings")
TRANSLATED = ("cgnat", "mixed", "dualstack")  # labs whose flows may re-bind (a NAT pool in the path)


def failure_reasons(event: dict[str, Any]) -> list[str]:
    """Why an event failed, from its figures (the runner's own reasons when it gave them)."""
    if event.get("passed") and event.get("status", "passed") == "passed":
        return []
    why = list(event.get("failure_reasons") or [])
    if why:
        return why
    if event.get("status") == "error":  # not judged: the runner's own sentence says why
        return [str(event.get("error") or "not judged")]
    why += [f"budget {row['metric']} <= {row['limit']:g}: measured {row['measured']:g}"
            for row in event.get("budgets") or [] if not row.get("ok")]
    if not event.get("recovered", True):
        why.append("not every flow recovered after the event")
    if event.get("packets_lost_by_unaffected_flows"):
        why.append(f"unaffected flows lost {event['packets_lost_by_unaffected_flows']} packets")
    crash = event.get("daemon_crash") or {}
    if crash and not crash.get("returned"):
        why.append(f"{crash.get('daemon')} was not running again in time")
    return why or ["the event's verdict failed"]


def trim(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of a `lab events run --json` report, as kept: figures, verdict, lossy flows."""
    out = []
    for event in report.get("events", []):
        kept = {key: event[key] for key in EVENT_KEYS if key in event}
        if event.get("status") == "error":
            kept["error"] = event.get("error")
        if "passed" in kept:  # a broken budget (the sessions' by default) fails the event as the runner says
            kept["passed"] = bool(kept["passed"]) and event.get("status", "passed") == "passed"
        start = (event.get("marks") or {}).get("event")
        kept["marks_s"] = {name: round(at - start, 3) for name, at in (event.get("marks") or {}).items()} \
            if start is not None else {}
        kept["lossy_flows"] = [{key: row[key] for key in FLOW_KEYS if _kept(row.get(key))}
                               for row in event.get("per_flow", []) if row.get("lost")]
        kept["failure_reasons"] = failure_reasons(event)
        out.append(kept)
    return out


def _kept(value: Any) -> bool:
    """A lossy flow's field worth keeping: not absent, False or empty (flow number 0 is kept: 0 == False)."""
    return value is not None and value is not False and value != {}


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _ms(value: float) -> str:
    return f"{value:.0f}"


def _families(event: dict[str, Any]) -> str:
    """Each family's verdict and worst convergence: "IPv4 pass 80, IPv6 pass 90, NAT64 **FAIL** 120"."""
    from lab_orchestrator.model import ipfamily

    return ", ".join(f"{ipfamily.name(int(name))} {'pass' if fam['passed'] else '**FAIL**'} "
                     f"{_ms(fam['convergence_ms']['max'])}"
                     for name, fam in sorted((event.get("families") or {}).items(), key=lambda kv: int(kv[0])))


def event_row(event: dict[str, Any], cgnat: bool, families: bool = False) -> str:
    phases = event.get("phases") or {}
    first = next(iter(phases.values()), None)
    movers = f"{first['expected_movers']} / {first['movers']} / {first['unexpected_movers']}" if first else "-"
    cross = str(first.get("cross_mx_movers", 0)) if first else "-"
    if "passed" not in event:  # not judged: a precondition failed (the reasons are listed below the table)
        return "| " + " | ".join([event["event"], event["target"], "error (not judged)"] + ["-"] * 7
                                 + (["-"] if cgnat else []) + (["-"] if families else [])) + " |"
    verdict = "pass" if event["passed"] else "**FAIL**"
    cells = [event["event"], event["target"], verdict, f"{event['affected_flows']} / {event['flows']}",
             _ms(event["convergence_ms"]["max"]), str(event["packets_lost_by_unaffected_flows"]),
             f"{event['flows_moved']} ({event['flows_moved_ideal']})", movers, cross, _sessions(event.get("sessions"))]
    if cgnat:
        cells.append(str(event.get("flows_rebound", 0)))
    if families:
        cells.append(_families(event) or "-")
    return "| " + " | ".join(cells) + " |"


def _sessions(held: dict[str, Any] | None) -> str:
    """Background sessions: failed over and passed / failed over, lost / judged (expected lost)."""
    if not held:
        return "-"
    return (f"{held['survived']}/{held['failed_over']}, {held['lost']}/{held['judged']}"
            + (f" ({held['expected_lost']} exp.)" if held["expected_lost"] else ""))


def lab_section(lab: str, kept: dict[str, Any]) -> list[str]:
    events = kept["events"]
    passed = sum(1 for e in events if e.get("passed"))
    cgnat = any(word in lab for word in TRANSLATED)
    families = any(e.get("families") for e in events)
    lines = [f"## {lab}: {passed} / {len(events)} passed", "",
             f"{kept.get('description', '')}. Run {kept['started']} to {kept['ended']} UTC, commit "
             f"`{kept['commit']}`, exit code {kept['rc']}." + (f" {kept['error']}" if kept.get("error") else ""),
             ""]
    if not events:
        return lines
    header = ["event", "target", "verdict", "affected / flows", "convergence max ms", "unaffected loss",
              "moved (ideal)", "movers expected / observed / unexpected", "cross-MX", "sessions"]
    if cgnat:
        header.append("re-bound")
    if families:
        header.append("per family: verdict, convergence max ms")
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += [event_row(e, cgnat, families) for e in events]
    failed = [e for e in events if not e.get("passed")]
    if failed:
        lines.append("")
        for e in failed:
            how = "failed" if "passed" in e else "not judged"
            lines.append(f"- `{e['event']}` {how}: {'; '.join(e['failure_reasons'])}.")
            for row in e["lossy_flows"]:
                if not any((row.get("expected_mover") or {}).values()):
                    lines.append(f"  flow {row.get('flow', 0)} ({row.get('src')}, {_cell(row.get('carrier_before'))} → "
                                 f"{_cell(row.get('carrier_after'))}): lost {row.get('lost_forward', 0)} forward, "
                                 f"{row.get('lost_reverse', 0)} reverse, longest gaps at {row.get('gap_at_s')} s")
    return lines + [""]


INTRO = """# `lab events run` on the shipped labs: results

<!-- Generated by bench/events_results.py from docs/events-results/*.json: do not edit above the notes marker. -->

Every applicable failure event on each shipped lab of topologies 1-4: the JVD's SFW files (SRG0,
active/active MNHA), their CGNAT files, the SRG1 (active/backup) variants and topology 3 with SFW and
NAPT44 side by side (`topology3-mixed`); one lab per run, brought up for it and down after:

```sh
python3 bench/events_results.py run LAB    # lab events run labs/LAB.yml {options} --json-out ...
```

60 flows x 50 pps in each direction: a per-flow interval (the resolution of a convergence figure)
is 20 ms. The kept reports (docs/events-results/LAB.json) hold each event's figures and the flows
that lost packets (their carriers, which phase expected them to move, where their longest gaps
started, in seconds from the event).

How to read a row: **affected** are the flows the event may touch (the target's flows and the
expected movers of the selector tables, see [events.md](events.md)); **unaffected loss** must be 0;
**moved (ideal)** compares the flows whose carrier changed during the event with the target's own
flows; **movers expected / observed / unexpected** are the first phase's figures (expected from the
MX tables, observed on the SRXs' session counters); **cross-MX** counts the expected movers that come
from the two MXs' tables disagreeing (SRD labs); **sessions**: 2,000 idle UDP sessions opened
before the event, each sent one reverse datagram after it (events.md, "Sessions in the tables"):
failed over and passed / sessions of the SRXs taken out whose MNHA peer stayed, lost / judged, and
the expected lost (an SRX taken out with its peer, or without one); **re-bound** (CGNAT) the flows
whose NAT binding changed.
"""


def render(kept: dict[str, dict[str, Any]]) -> str:
    lines = [INTRO.format(options=" ".join(OPTIONS)).rstrip(), ""]
    # one line per distinct machine as printed (the kept records carry more fields than the line shows)
    machines = {f"Machine: {m.get('cpus')} CPUs ({m.get('cpu', '?')}), {m.get('memory_gib', '?')} GiB, kernel "
                f"{m.get('kernel')}, Python {m.get('python')}, {m.get('bird', 'BIRD ?')}, "
                f"{m.get('nftables', 'nftables ?')}; shared with other work (load average at each "
                "lab's start in its section)."
                for m in (k["machine"] for k in kept.values() if k.get("machine"))}
    for line in sorted(machines):
        lines += [line, ""]
    lines += ["## Summary", "", "| lab | passed / run | failed (why) | run (UTC) | commit |", "|---|---|---|---|---|"]
    for lab in [name for name in LABS if name in kept] + sorted(set(kept) - set(LABS)):
        k = kept[lab]
        events = k["events"]
        failed = "; ".join(f"{e['event']}: {', '.join(e.get('failure_reasons') or ['not judged'])}"
                           for e in events if not e.get("passed"))
        if k.get("error"):
            failed = "; ".join(x for x in (failed, k["error"]) if x)
        lines.append(f"| [{lab}](#{lab}-{sum(1 for e in events if e.get('passed'))}--{len(events)}-passed) | "
                     f"{sum(1 for e in events if e.get('passed'))} / {len(events)} | {failed or '-'} | "
                     f"{k['started']} | `{k['commit']}` |")
    missing = [lab for lab in LABS if lab not in kept]
    if missing:
        lines += ["", "Not run yet: " + ", ".join(missing) + "."]
    lines.append("")
    for lab in [name for name in LABS if name in kept] + sorted(set(kept) - set(LABS)):
        section = lab_section(lab, kept[lab])
        load = (kept[lab].get("machine") or {}).get("load_average_at_start")
        if load:
            section[2] = section[2] + f" Load average at start: {load}."
        lines += section
    return "\n".join(lines).rstrip() + "\n"


def load_kept(folder: Path = KEPT) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def document(kept: dict[str, dict[str, Any]], old: str | None) -> str:
    """The whole file: the generated part, then the notes of the previous file (from the marker)."""
    notes = old[old.index(NOTES_MARKER):] if old and NOTES_MARKER in old else NOTES_MARKER + "\n"
    return render(kept) + "\n" + notes


def description(lab: str) -> str:
    with contextlib.suppress(OSError, ValueError):
        import yaml

        data = yaml.safe_load((ROOT / "labs" / f"{lab}.yml").read_text())
        return str(data.get("description") or lab).rstrip(".")
    return lab


def commit() -> str:
    """The commit the run's code is, with "-dirty" when the product's files differ from it (the kept
    reports and this document do not count)."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        if done.returncode == 0:
            dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "lab_orchestrator",
                                    "dataplane", "labkit", "labs"], capture_output=True, text=True, timeout=5)
            return done.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    return "?"


def record(lab: str, report: dict[str, Any] | None, started: str, ended: str, commit_id: str, rc: int,
           machine: dict[str, Any] | None, error: str = "") -> dict[str, Any]:
    kept = {"lab": lab, "description": description(lab), "started": started, "ended": ended, "commit": commit_id,
            "rc": rc, "command": f"lab events run labs/{lab}.yml {' '.join(OPTIONS)} --json-out REPORT",
            "machine": machine, "events": trim(report or {})}
    if error:
        kept["error"] = error
    KEPT.mkdir(parents=True, exist_ok=True)
    events = kept.pop("events")
    head = json.dumps(kept, indent=1)[:-2]  # one event per line: small, and diffs read per event
    body = ",\n".join(json.dumps(e, separators=(",", ":")) for e in events)
    (KEPT / f"{lab}.json").write_text(f'{head},\n "events": [\n{body}\n]}}\n')
    kept["events"] = events
    return kept


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M")


def run(lab: str) -> int:
    from lab_orchestrator.report.run import machine

    facts = machine()
    started = _now()
    commit_id = commit()
    with tempfile.TemporaryDirectory(prefix="events-results-") as tmp:
        out = Path(tmp) / "report.json"
        argv = [sys.executable, "-m", "lab_orchestrator.cli", "events", "run", str(ROOT / "labs" / f"{lab}.yml"),
                *OPTIONS, "--json-out", str(out)]
        print(f"[events-results] {time.strftime('%H:%M:%S')} {lab}: {' '.join(argv[3:])}", file=sys.stderr, flush=True)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        done = subprocess.run(argv, cwd=ROOT, env=env, check=False)
        report = json.loads(out.read_text()) if out.exists() else None
    error = "" if report else f"no report (exit code {done.returncode})"
    record(lab, report, started, _now(), commit_id, done.returncode, facts, error)
    return done.returncode


def write(check: bool = False) -> int:
    old = DOC.read_text() if DOC.exists() else None
    new = document(load_kept(), old)
    if check:
        if new != old:
            print(f"{DOC} is stale: run python3 bench/events_results.py write", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_run = sub.add_parser("run", help="run the events on labs and keep the reports")
    p_run.add_argument("labs", nargs="+", choices=LABS)
    p_rec = sub.add_parser("record", help="keep a report made with the same options")
    p_rec.add_argument("lab", choices=LABS)
    p_rec.add_argument("report", type=Path)
    p_rec.add_argument("--started", required=True)
    p_rec.add_argument("--ended", required=True)
    p_rec.add_argument("--commit", required=True)
    p_rec.add_argument("--rc", type=int, default=0)
    p_write = sub.add_parser("write", help="write docs/events-results.md from the kept reports")
    p_write.add_argument("--check", action="store_true", help="exit 1 when the document is stale")
    args = parser.parse_args(argv)
    if args.cmd == "run":
        worst = 0
        for lab in args.labs:
            worst = max(worst, run(lab))
            write()
        return worst
    if args.cmd == "record":
        from lab_orchestrator.report.run import machine

        facts = machine()
        facts.pop("load_average_at_start", None)  # not measured when that run started
        record(args.lab, json.loads(args.report.read_text()), args.started, args.ended, args.commit, args.rc, facts)
        return write()
    return write(args.check)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
