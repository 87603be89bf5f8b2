"""Failure events with the JVD's session scale in the tables: docs/benchmarks-scale-events.md.

    python3 bench/scale_events.py [--sessions 1000000] [--events srx-power-off,mnha-pair-power-off,srx-reboot]
                                  [--attempts 2]

Runs `lab events run --sessions N` (docs/events.md, "Sessions in the tables") on topology3 with a
client prefix large enough for N distinct sources (100.64.0.0/12: its second quarter holds 262,142
addresses, four source ports each for a million sessions), the kernel's session limit raised for N
sessions and their copies (`services.max_sessions`), and a UDP timeout long enough that sessions
opened first are still there when the last are probed (`services.udp_timeout`; the sessions are
idle between the two). The flows keep the events' usual figures beside them. Root; about three
minutes an event at a million sessions. Each event runs on a lab of its own, and again on a fresh one
(`--attempts`) while its case is not judged.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, lab_cmd, logger, publish, topology_text

LAB = "se3"
DOC = ROOT / "docs" / "benchmarks-scale-events.md"
OPEN_RATE = 20000.0  # events/background.py's opening rate (twice at most)
PROBE_RATE = 5000.0  # and its probing rate (twice at most)
log = logger("scale-events")


def topology(tmp: Path, sessions: int, udp_timeout: int) -> Path:
    text = topology_text(ROOT / "labs" / "topology3.yml", LAB)
    text = text.replace("prefixes: [100.64.0.0/16]", "prefixes: [100.64.0.0/12]", 1)
    limit = max(262144, 2 * sessions + 200000)  # the carrier's sessions, the peer's copies, the flows
    text = text.replace("\nservices:\n", f"\nservices:\n  max_sessions: {limit}\n  udp_timeout: {udp_timeout}\n", 1)
    path = tmp / f"{LAB}.yml"
    path.write_text(text)
    return path


def run_one(sessions: int, event: str, tmp: Path) -> tuple[dict[str, Any], str]:
    """EVENT on a lab of its own (`lab events run` on a file brings it up and takes it down), so that
    each event meets exactly SESSIONS background sessions: one after another on the same lab, the
    sessions of the first (alive for the UDP timeout) would still be in the tables of the next."""
    # the sessions idle from their opening to their probe: opening, reading the tables, the event, the probe
    busy = 2 * sessions / OPEN_RATE + 2 * sessions / PROBE_RATE + sessions / OPEN_RATE
    udp_timeout = int(max(60, 120 + 2 * busy))
    topo = topology(tmp, sessions, udp_timeout)
    report = tmp / f"{event}.json"
    # the flows run until the probe (twice at most) is over: their settle time covers it
    duration = round(4 + 2 * sessions / PROBE_RATE + 10, 1)
    args = [str(topo), "-e", event, "--sessions", str(sessions), "--flows", "100",
            "--rate", "10000", "--duration", str(duration), "--json-out", str(report),
            # no second attempt on the same lab: the first one's sessions are still in the tables (their
            # UDP timeout outlasts the run), so it would judge twice the load asked for
            "--reruns", "0"]
    log(f"lab events run {' '.join(args)}")
    report.unlink(missing_ok=True)
    shown = " ".join(args[1:-2]).replace(str(report), "EVENT.json")
    command = "lab events run labs/topology3.yml (see above) " + shown
    try:
        done = subprocess.run([*lab_cmd(), "events", "run", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=600 + 120 + 4 * busy)
    except subprocess.TimeoutExpired:
        subprocess.run([*lab_cmd(), "down", "--lab", LAB], cwd=ROOT, capture_output=True, timeout=300)
        return _error(event, udp_timeout, "timed out (its lab taken down)"), command
    log(done.stdout[-3000:])
    if not report.exists():
        return _error(event, udp_timeout, f"no report (exit {done.returncode}): {done.stderr[-300:]}"), command
    doc: dict[str, Any] = json.loads(report.read_text())
    doc["exit_code"] = done.returncode
    doc["udp_timeout"] = udp_timeout
    return doc, command


def _error(event: str, udp_timeout: int, why: str) -> dict[str, Any]:
    """A row for EVENT that gave no result, so that the events measured before and after it stay (WHY
    on one line: a table cell)."""
    why = " ".join(why.replace("|", "/").split())
    return {"events": [{"event": event, "target": "-", "status": "error", "error": why}], "exit_code": 2,
            "udp_timeout": udp_timeout}


def exit_code(codes: list[int]) -> int:
    """One exit code for the runs: 1 if an event failed, else the first other that is not 0."""
    return 1 if 1 in codes else next((c for c in codes if c != 0), 0)


def not_judged(doc: dict[str, Any]) -> str | None:
    """Why DOC's case was not judged because of the machine (`lab events run` exit 3, the case marked
    `again`: the generator fell behind, the machine was paused), or None: a verdict, a precondition that
    would fail again (BGP not settled, say), a run that gave no report."""
    if doc["exit_code"] != 3 or not doc["events"] or \
            any(e.get("status") != "error" or not e.get("again") for e in doc["events"]):
        return None
    return "; ".join(str(e.get("error", "")) for e in doc["events"])


def run(sessions: int, events: list[str], tmp: Path, attempts: int = 1) -> tuple[dict[str, Any], str, float]:
    """Each of EVENTS on its own lab (`run_one`); one document of them all. A case that was not judged
    runs again on a fresh lab, ATTEMPTS in all at most (what `lab events run --reruns` does on one lab,
    which the sessions left in its tables rule out here); the earlier attempts' reasons are kept."""
    started = time.monotonic()
    merged: dict[str, Any] = {"events": [], "udp_timeout": 0}
    commands, codes = [], []
    for event in events:
        earlier: list[str] = []
        doc, command = run_one(sessions, event, tmp)
        while (why := not_judged(doc)) is not None and len(earlier) + 1 < attempts:
            earlier.append(why)
            log(f"{event}: not judged ({why}); again on a fresh lab")
            doc, command = run_one(sessions, event, tmp)
        for case in doc["events"]:
            case["earlier_attempts"] = earlier
        merged["events"] += doc["events"]
        codes.append(doc["exit_code"])
        merged["udp_timeout"] = doc["udp_timeout"]
        commands.append(command)
    merged["exit_code"] = exit_code(codes)
    return merged, "`, `".join(commands), time.monotonic() - started


def _sample(early: dict[str, Any] | None) -> str:
    """The three sample columns: when its datagrams went, failed over / passed, lost / judged."""
    if not early:
        return "- | - | -"
    return (f"{early['at_s']}-{early['sent_by_s']} ({early['sampled']} sampled, 1 in {early['step']}) | "
            f"{early['failed_over']} / {early['survived']} | {early['lost']} / {early['judged']}")


def markdown(doc: dict[str, Any], command: str, seconds: float, sessions: int) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        "# Failure events with sessions at scale",
        "",
        f"Measured {when} by `python3 bench/scale_events.py {' '.join(sys.argv[1:])}` ({seconds / 60:.1f} min), "
        f"which ran, each event on a lab of its own, `{command}`. "
        f"Machine: {os.cpu_count()} CPUs, kernel {platform.release()}.",
        "",
        f"{sessions} idle UDP sessions opened before each event on topology3 (client prefix 100.64.0.0/12, "
        f"`services.max_sessions` {2 * sessions + 200000}, `services.udp_timeout` {doc['udp_timeout']} s so that "
        "no session ages out between its opening and its probe), each sent one reverse datagram after the event "
        "(a lasting event: before its restore), and a sample of them (every STEP-th session, events/background.py) "
        "two reverse datagrams right after the event, on a thread of its own beside it; 100 flows x 100 pps each "
        f"way beside them. Exit code {doc['exit_code']}.",
        "",
        "| event | target | verdict | sessions opened | carried by the target | of them synced to its peer | "
        "failed over / passed | lost / judged | expected lost | probe at (s from the event) | sample: sent "
        "(s from the event) | sample: failed over / passed | sample: lost / judged | flows: convergence "
        "max (ms) | flows of the SRXs the event left alone: packets lost | goal |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for event in doc["events"]:
        # a case not judged (its flows' sender fell behind, say) may still have probed its sessions
        judged = event if event.get("status") != "error" else (event.get("result") or {})
        s = judged.get("sessions")
        if not s:
            lines.append(f"| {event['event']} | {event['target']} | error: {event['error']} |" + " - |" * 13)
            continue
        target = event["target"]
        verdict = event["status"] if event.get("status") != "error" else f"flows not judged: {event['error']}"
        lines.append(
            f"| {event['event']} | {target} | {verdict} | {s['opened']} | "
            f"{s['carried_before'].get(target, 0)} | {s['synced_before'].get(target, 0)} | "
            f"{s['failed_over']} / {s['survived']} | {s['lost']} / {s['judged']} | {s['expected_lost']} | "
            f"{s['probe_at_s']} | {_sample(s.get('early'))} | {judged['convergence_ms']['max']:.0f} | "
            f"{judged.get('packets_lost_by_unaffected_flows', '-')} | lost ≤ 0.01 % of judged; the sample's too, "
            "all sent within 2 s |")
    again = [f"- {e['event']}: attempt {len(e['earlier_attempts']) + 1}; not judged before: "
             + "; ".join(e["earlier_attempts"]) for e in doc["events"] if e.get("earlier_attempts")]
    if again:
        lines += ["", "Cases run again on a fresh lab because an earlier attempt was not judged:", *again]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--events", default="srx-power-off,mnha-pair-power-off,srx-reboot")
    parser.add_argument("--attempts", type=int, default=2,
                        help="runs of an event at most, each on a fresh lab, while it is not judged (default 2)")
    parser.add_argument("--no-doc", action="store_true", help="print the table only")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:  # `lab down` gives the raised conntrack hash back
        doc, command, seconds = run(args.sessions, args.events.split(","), Path(tmp), args.attempts)
    text = markdown(doc, command, seconds, args.sessions)
    return publish(text, DOC, keep=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
