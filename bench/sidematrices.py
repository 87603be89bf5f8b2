"""docs/results.md: the event x lab matrix, and the figures run beside the flows (TCP connections,
background sessions), one cell per case. Pure; bench/docfigures.py writes the page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def ms(value: Any) -> str:
    return "–" if value is None else f"{float(value):.0f}"


def matrix(cases: list[dict[str, Any]], labs: list[str], events: list[str],
            cell: Callable[[dict[str, Any]], str]) -> list[str]:
    """A table of events (rows) by labs (columns), one CELL per case, "n/a" where the event does not apply."""
    by_key = {(c["lab"], c["event"]): c for c in cases}
    rows = ["| event | " + " | ".join(labs) + " |", "|---|" + "---|" * len(labs)]
    for event in events:
        rows.append(f"| {event} | " + " | ".join(cell(by_key[(lab, event)]) if (lab, event) in by_key else "n/a"
                                                  for lab in labs) + " |")
    return rows


def tcp_cell(case: dict[str, Any]) -> str:
    tcp = (case.get("result") or {}).get("tcp")
    if not tcp or case.get("status") == "error":
        return "–"
    return (f"{tcp['completed']}/{tcp['connections']}, {tcp['stuck']}, {tcp['reset']}, {tcp['failed']}, "
            f"{ms(tcp['longest_gap_ms'])}")


def tcp_matrix(cases: list[dict[str, Any]], labs: list[str], events: list[str]) -> list[str]:
    """The long-lived TCP connections run beside the flows, per case (a plan with tcp_connections)."""
    with_tcp = [c for c in cases if (c.get("result") or {}).get("tcp")]
    if not with_tcp:
        return []
    count = with_tcp[0]["result"]["tcp"]["connections"]
    out = ["", "### TCP beside the flows", "",
           f"{count} long-lived TCP connections per case (a request every "
           f"{ms(with_tcp[0]['result']['tcp']['interval_ms'])} ms each; events.md, \"TCP beside the flows\"). "
           "Cell: completed (open to the end) / connections, of them stuck (no answer since some point, to "
           "the end of the run), reset, failed, longest gap between two answers of one connection (ms). The "
           "JVD's budget: under 1 % reset during failure events, none in basic MNHA failovers. A connection is "
           "stuck when its packets reach an SRX that has no session for it, which drops a segment that is "
           "not a SYN (the SRX's SYN check): its SRX failed with no MNHA peer to carry its session on (or "
           "its whole pair did), or the MX's table, rebuilt after a reboot, sent it to another SRX.", "",
           *matrix(cases, labs, events, tcp_cell)]
    return out


def sessions_cell(case: dict[str, Any]) -> str:
    held = (case.get("result") or {}).get("sessions")
    if not held or case.get("status") == "error":
        return "–"
    return (f"{held['survived']}/{held['failed_over']}, {held['lost']}/{held['judged']}"
            + (f", {held['expected_lost']} exp." if held["expected_lost"] else ""))


def sessions_matrix(cases: list[dict[str, Any]], labs: list[str], events: list[str]) -> list[str]:
    """The background sessions opened before each case's event and probed after it (a plan with sessions)."""
    held = [c for c in cases if (c.get("result") or {}).get("sessions")]
    if not held:
        return []
    return ["", "### Sessions in the tables", "",
            f"{held[0]['result']['sessions']['sessions']} idle UDP sessions per case, opened before the event and "
            "each sent one reverse datagram after it (events.md, \"Sessions in the tables\"); an SRX drops one "
            "that matches no session, so a datagram that passes proves its session survived. Cell: failed over "
            "and passed / sessions of the SRXs the event took out whose MNHA peer stayed, lost / judged (every "
            "session but the expected lost), and the expected lost (an SRX taken out with its peer, or without "
            "one). The default budget: at most 0.01 % of the judged lost for the events that take SRXs out.", "",
            *matrix(cases, labs, events, sessions_cell)]


def family_cell(figures: dict[str, Any] | None) -> str:
    """One family's figures of a case (`report.families.of`): verdict, convergence max / median (ms),
    unaffected loss, recovered."""
    if figures is None:
        return "–"
    verdict = "pass" if figures["passed"] else "**FAIL**"
    return (f"{verdict} {ms(figures['convergence_max_ms'])} / {ms(figures['convergence_median_ms'])}, "
            f"{figures['unaffected_loss'] if figures['unaffected_loss'] is not None else '–'}, "
            f"{'rec' if figures['recovered'] else '**not rec**'}")


def _family_cell(by_key: dict[tuple[str, str], dict[int, dict[str, Any]] | None], lab: str, event: str,
                 fam: int) -> str:
    if (lab, event) not in by_key:
        return "n/a"
    figures = by_key[(lab, event)]
    return "**error**" if figures is None else family_cell(figures.get(fam))


def families_matrix(cases: list[dict[str, Any]], labs: list[str], events: list[str]) -> list[str]:
    """The cases of a lab that ran IPv4, IPv6 and NAT64 flows side by side: a column per lab and family,
    each family judged on its own flows (the lab's column in the matrix above judges all of them)."""
    from lab_orchestrator.model import ipfamily
    from lab_orchestrator.report import families

    judged = [c for c in cases if c.get("status") != "error" and (c.get("result") or {}).get("families")]
    if not judged:
        return []
    columns = [(lab, fam) for lab in labs
               for fam in sorted({int(f) for c in judged if c["lab"] == lab for f in c["result"]["families"]})]
    by_key: dict[tuple[str, str], dict[int, dict[str, Any]] | None] = {
        (c["lab"], c["event"]): families.of(c["result"]) for c in judged}
    by_key.update({(c["lab"], c["event"]): None for c in cases  # not judged: "error", not "n/a"
                   if c.get("status") == "error" and any(c["lab"] == lab for lab, _ in columns)})
    rows = ["", "### Per family", "",
            "The labs that ran IPv4, IPv6 and NAT64 flows side by side (the flows shared between the families, "
            "each family's flows judged on their own by the rules of the whole event; events.md, \"IPv4, IPv6 and "
            "NAT64\"). Cell: verdict, convergence max / median (ms), unaffected-flow loss (packets), recovered.", "",
            "| event | " + " | ".join(f"{lab} {ipfamily.name(fam)}" for lab, fam in columns) + " |",
            "|---|" + "---|" * len(columns)]
    for event in events:
        if not any((lab, event) in by_key for lab, _ in columns):
            continue
        rows.append(f"| {event} | " + " | ".join(_family_cell(by_key, lab, event, fam) for lab, fam in columns) + " |")
    return rows


def dual_stack_labs() -> list[str]:
    """The shipped dual-stack labs whose events are kept (bench/events_results.py's list)."""
    from events_results import LABS

    return [lab for lab in LABS if lab.endswith("-dualstack")]


def dual_stack_tables(kept: dict[str, dict[str, Any]], missing: type[Exception]) -> str:
    """Each family's verdict per event of the dual-stack labs, from their kept `lab events run` (KEPT: lab ->
    its report; the run's date, commit and command in each lab's line); MISSING raised for a lab not kept."""
    from lab_orchestrator.model import ipfamily
    from lab_orchestrator.report import families

    out = []
    for lab in dual_stack_labs():
        if lab not in kept:
            raise missing(f"docs/events-results/{lab}.json is missing: python3 bench/events_results.py run {lab}")
        run = kept[lab]
        events = run.get("events") or []
        fams = sorted({int(f) for e in events for f in (e.get("families") or {})})
        command = run.get("command")
        when = str(run.get("started", "?"))[:16].replace("T", " ")
        out += [f"**{lab}** ({when} UTC, commit `{run.get('commit', '?')}`, "
                f"`{command if isinstance(command, str) else ' '.join(map(str, command or []))}`):", "",
                "| event | " + " | ".join(ipfamily.name(f) for f in fams) + " |", "|---|" + "---|" * len(fams)]
        for e in events:
            figures = families.of({"families": e.get("families") or {}})
            out.append(f"| {e['event']} on {e.get('target', '?')} | "
                       + " | ".join(family_cell(figures.get(f)) for f in fams) + " |")
        out.append("")
    return "\n".join(out)
