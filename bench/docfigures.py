"""The figures of the docs, from the kept results: one generator, one check.

A figure the docs quote from a run lives in a generated block, between ``<!-- figures:NAME -->`` and
``<!-- /figures -->`` in a markdown file (``# figures:NAME`` and ``# /figures`` in a YAML file); this
script fills every block from the result it comes from and nothing else:

==================  =========================================  ==========================================
block               filled from                                in
==================  =========================================  ==========================================
results             docs/results/jvd-report.json               docs/results.md
                    (`lab report`: the JVD test plan)
events-cgnat        docs/events-results/topology*-cgnat.json   docs/events.md
                    (`bench/events_results.py run`)
ci-budgets          docs/results/jvd-report.json               .github/workflows/convergence.yml
chash-moves         bench/chash_moves.py (computed: no lab,    docs/benchmarks-chash.md
                    a fixed seed)
==================  =========================================  ==========================================

The benchmark pages are the other generated figures: each docs/benchmarks-*.md is written by its
script under bench/, and docs/benchmarks.md is copied from them by bench/summary.py.

    python3 bench/docfigures.py           # rewrite every block from its result
    python3 bench/docfigures.py --check   # exit 1, naming each block that differs from its result
    python3 bench/docfigures.py --age     # exit 1, naming each result older than the code it describes
    python3 bench/docfigures.py --keep DIR  # keep a `lab report -o DIR` run in docs/results/, then rewrite

A result's age: every kept run result records the commit it ran on (`git describe --always --dirty`).
It is older than the code it describes when a file of the product's packet path -- dataplane/, labs/,
templates/ and lab_orchestrator/ except its front ends (cli/, cli_ssh/, live/, importer/, clab/, the
package's __init__.py and `lab traffic`'s module) and the templates of the device configurations a node
shows (junos-*.conf.j2, ios.conf.j2) -- changed between that commit and the checkout's HEAD (a shipped
lab's file only for the results that ran that lab), when the commit
is not in the checkout's history, or when the run was made from a checkout with uncommitted
changes. `make test` checks both (tests/unit/test_doc_figures.py); `make results` reruns the plan
and `make events-results` the events of every shipped lab, and both rewrite the blocks.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (str(ROOT), str(ROOT / "bench")):  # the product's packages; this folder's sidematrices
    if _path not in sys.path:
        sys.path.insert(0, _path)

REPORT = ROOT / "docs" / "results" / "jvd-report.json"
EVENTS_KEPT = ROOT / "docs" / "events-results"
WORKFLOW = ROOT / ".github" / "workflows" / "convergence.yml"

HAND_TRAFFIC = "lab_orchestrator/events/traffic.py"
DEVICE_CONFIG_TEMPLATES = ("junos-mx.conf.j2", "junos-srx.conf.j2", "ios.conf.j2")
# The paths a run's figures depend on (see the module's docstring), as git pathspecs.
PACKET_PATH = ("dataplane", "labs", "templates", "lab_orchestrator",
               ":(exclude)lab_orchestrator/cli", ":(exclude)lab_orchestrator/cli_ssh",
               # not the API: `lab events run` and `lab report` run their cases through it
               ":(exclude)lab_orchestrator/live",
               ":(exclude)lab_orchestrator/importer", ":(exclude)lab_orchestrator/clab",
               ":(exclude)lab_orchestrator/__init__.py",
               # `lab traffic start|stop|stats` (traffic by hand, reached only through the API's
               # traffic_* methods): no kept run starts it (`lab events run` and `lab report` start their
               # own senders; tests/unit/test_architecture.py checks that nothing else imports it)
               f":(exclude){HAND_TRAFFIC}",
               # the Junos-like and IOS-like configurations a node shows (nodes/NODE/juniper.conf,
               # running-config): only the SSH CLI and the containerlab export read them. A vendor node
               # of a containerlab export boots from that file, but kept results are namespace runs
               # (clab/ is left out above for the same reason)
               *(f":(exclude)lab_orchestrator/templates/{name}" for name in DEVICE_CONFIG_TEMPLATES))

# The labs the CI workflow gates on, and their name in the JVD test plan.
CI_LABS = {"topology1": "t1", "topology3": "t3"}

MARKDOWN_BLOCK = re.compile(r"(<!-- figures:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /figures -->)", re.S)
YAML_BLOCK = re.compile(r"(^(?P<indent>[ \t]*)# figures:(?P<name>[a-z0-9-]+)\n)(?P<body>.*?)(^[ \t]*# /figures$)",
                        re.S | re.M)


class FigureError(Exception):
    """A result that a block needs is missing or cannot be read."""


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise FigureError(f"{path.relative_to(ROOT)}: cannot read ({exc.strerror}); "
                          "make results writes it") from None
    except json.JSONDecodeError as exc:
        raise FigureError(f"{path.relative_to(ROOT)}:{exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise FigureError(f"{path.relative_to(ROOT)}: not a JSON object")
    return data


def _ms(value: Any) -> str:
    return "–" if value is None else f"{float(value):.0f}"


def _commit(git: str) -> str:
    return git.removesuffix("-dirty").rsplit("-g", 1)[-1]


# --------------------------------------------------------------------------- results (the JVD plan)
def _case_cell(case: dict[str, Any]) -> str:
    from lab_orchestrator.report import document

    if not case.get("result") or case.get("status") == "error":
        return f"**{case.get('status', 'error')}**"  # an error's figures are not a verdict's
    f = document.figures(case)
    verdict = "pass" if f["status"] == "passed" else f"**{f['status']}**"
    return (f"{verdict} {_ms(f['convergence_max_ms'])} / {_ms(f['convergence_median_ms'])}, "
            f"{f['unaffected_loss'] if f['unaffected_loss'] is not None else '–'}, "
            f"{f['flows_moved'] if f['flows_moved'] is not None else '–'}/"
            f"{f['flows_expected'] if f['flows_expected'] is not None else '–'}, "
            f"{'rec' if f['recovered'] else '**not rec**'}")


def _event_order(cases: list[dict[str, Any]]) -> list[str]:
    from lab_orchestrator.events.catalog import CATALOG

    present = {c["event"] for c in cases}
    return [e.name for e in CATALOG if e.name in present] + sorted(present - {e.name for e in CATALOG})


def render_results(doc: dict[str, Any]) -> str:
    """docs/results.md's figures from a `lab report` document."""
    import sidematrices

    from lab_orchestrator.events.catalog import CATALOG
    from lab_orchestrator.report import document

    cases = doc.get("cases") or []
    if not cases:
        raise FigureError("docs/results/jvd-report.json: the report has no case")
    s = document.summary(doc)
    labs = list(dict.fromkeys(c["lab"] for c in cases))
    events = _event_order(cases)
    version = doc.get("version") or {}
    machine = doc.get("machine") or {}
    traffic = (doc.get("plan") or {}).get("traffic") or {}
    minutes = float(doc.get("duration_s") or 0) / 60
    out = [f"Run {doc.get('started', '?')} to {doc.get('finished') or '?'} (UTC): **{minutes:.1f} min** for "
           f"{s['cases']} cases on {len(labs)} labs (each brought up and down), {s['passed']} passed, "
           f"{s['failed']} failed, {s['errors']} error(s).", "",
           f"Command: `{doc.get('command', '')}` (version {version.get('lab', '?')}, commit "
           f"`{version.get('git', '?')}`).", ""]
    described = [f"{machine['cpus']} CPUs" if machine.get("cpus") else "",
                 machine.get("cpu", ""), f"{machine['memory_gib']} GiB" if machine.get("memory_gib") else "",
                 f"kernel {machine['kernel']}" if machine.get("kernel") else "", machine.get("os", ""),
                 f"Python {machine['python']}" if machine.get("python") else "",
                 machine.get("bird", ""), machine.get("nftables", "")]
    load = machine.get("load_average_at_start")
    out += ["Machine: " + ", ".join(d for d in described if d)
            + (f"; load average at the start {load}" if load else "") + ".", ""]
    if traffic:
        rate = traffic.get("rate_per_flow")
        out += [f"Traffic per case: {traffic.get('flows')} flows × {_ms(rate)} pps in each direction "
                f"({traffic.get('sizes')}); a convergence figure is packets lost ÷ the per-flow rate, in steps "
                f"of {traffic.get('resolution_ms') or (1000 / float(rate) if rate else '?')} ms.", ""]
    if doc.get("capture"):
        flagged = s.get("capture_flagged", 0)
        out += [f"Captures on the receiving hosts checked the generator's per-flow figures: {flagged} case(s) "
                "flagged.", ""]
    titles = {e.name: e.title for e in CATALOG}
    out += ["### Next to the JVD", "",
            "The JVD's test report brief lists the failure events it ran and states that traffic recovery is "
            "validated after each; it publishes no convergence figure per event. The lab's columns: over the "
            "labs where the event applies, the cases that passed and the range of the worst per-flow "
            "convergence.", "",
            "| event | JVD (test report brief) | lab: passed / run | lab: worst convergence per lab (min – max) |",
            "|---|---|---|---|"]
    for event in events:
        mine = [c for c in cases if c["event"] == event]
        passed = sum(1 for c in mine if c.get("status") == "passed")
        worst = [document.figures(c)["convergence_max_ms"] for c in mine
                 if c.get("result") and c.get("status") in ("passed", "failed")]
        worst = [w for w in worst if w is not None]
        span = f"{_ms(min(worst))} – {_ms(max(worst))} ms" if worst else "–"
        title = titles.get(event, event)
        out.append(f"| {event} | recovery validated ({title}) | {passed} / {len(mine)} "
                   f"| {span} |")
    out += ["", "### Matrix", "",
            "Cell: verdict, convergence max / median (ms), unaffected-flow loss (packets), flows moved / "
            "expected, recovered.", "", *sidematrices.matrix(cases, labs, events, _case_cell)]
    out += sidematrices.families_matrix(cases, labs, events)
    out += sidematrices.tcp_matrix(cases, labs, events)
    out += sidematrices.sessions_matrix(cases, labs, events)
    bad = [c for c in cases if c.get("status") != "passed"]
    out += ["", "### Cases that did not pass", ""]
    if not bad:
        out.append("None.")
    for case in bad:
        why = document.failure_reasons(case) or [case.get("error") or case.get("status", "error")]
        out.append(f"- `{case['id']}` on {case.get('target', '?')}: {case.get('status')} — " + "; ".join(why))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- CI budgets
def budget_ms(measured: float) -> int:
    """A CI convergence budget from a measured worst convergence: 0 stays 0 (the event must lose nothing);
    anything else is doubled, 100 ms added, and rounded up to the next 100 ms (a runner is not the
    machine of the results, and its calibrated traffic may have a coarser resolution)."""
    if measured <= 0:
        return 0
    return int(math.ceil((2 * measured + 100) / 100.0) * 100)


def ci_budgets(doc: dict[str, Any]) -> dict[str, dict[str, int]]:
    """{lab: {event: budget ms}} for the CI labs, from the passed cases of the report."""
    from lab_orchestrator.report import document

    out: dict[str, dict[str, int]] = {}
    for lab, plan_lab in CI_LABS.items():
        mine = [c for c in doc.get("cases") or [] if c["lab"] == plan_lab and c.get("status") == "passed"]
        if not mine:
            raise FigureError(f"docs/results/jvd-report.json has no passed case of {plan_lab} ({lab}): "
                              "the CI budgets of that lab cannot be derived; make results runs the plan")
        out[lab] = {c["event"]: budget_ms(float(document.figures(c)["convergence_max_ms"] or 0)) for c in mine}
    return out


def ci_timing(doc: dict[str, Any]) -> str:
    """The `lab events run` options that give the CI run the timing of the plan run its budgets come from
    (a reboot event's convergence includes the node's down time)."""
    traffic = (doc.get("plan") or {}).get("traffic") or {}
    missing = [key for key in ("warmup", "hold", "down_time") if traffic.get(key) is None]
    if missing:
        raise FigureError(f"docs/results/jvd-report.json: the plan's traffic has no {', '.join(missing)}")
    return f"--warmup {traffic['warmup']:g} --hold {traffic['hold']:g} --down-time {traffic['down_time']:g}"


def render_ci_budgets(doc: dict[str, Any], indent: str = "") -> str:
    git = (doc.get("version") or {}).get("git", "?")
    lines = [f"# generated by bench/docfigures.py from docs/results/jvd-report.json (commit {git}):",
             "# per event, twice the worst convergence measured there + 100 ms, rounded up to 100 ms (0 stays 0);",
             "# an event with no passed case there has no budget (its verdict still gates); the timing is the",
             "# plan's (warm-up, hold before a restore, a rebooted node's down time), as the budgets were measured"]
    timing = ci_timing(doc)
    for lab, budgets in ci_budgets(doc).items():
        flags = " ".join(f"--budget {event}:convergence_ms={limit}" for event, limit in budgets.items())
        lines += [f"- lab: {lab}", f"  timing: {timing}", "  budgets: >-", f"    {flags}"]
    return "".join(f"{indent}{line}\n" for line in lines)


# --------------------------------------------------------------------------- events.md CGNAT table
CGNAT_LABS = {"topology1-cgnat": "ECMP CHASH", "topology2-cgnat": "dual MX, SRD, MNHA pairs, CHASH",
              "topology3-cgnat": "TLB, MNHA pairs", "topology4-cgnat": "dual MX without SRD, TLB, MNHA pairs"}


def render_events_cgnat(kept: dict[str, dict[str, Any]]) -> str:
    lines = ["| lab | run (UTC), commit | passed / run | failed | worst convergence | re-bound |",
             "|---|---|---|---|---|---|"]
    for lab, what in CGNAT_LABS.items():
        if lab not in kept:
            raise FigureError(f"docs/events-results/{lab}.json is missing: python3 bench/events_results.py run {lab}")
        run = kept[lab]
        events = run.get("events") or []
        passed = sum(1 for e in events if e.get("passed"))
        failed = ", ".join(e["event"] for e in events if not e.get("passed")) or "-"
        timed = [e for e in events if (e.get("convergence_ms") or {}).get("max") is not None]
        worst = max(timed, key=lambda e: float(e["convergence_ms"]["max"]), default=None)
        worst_text = (f"{_ms(worst['convergence_ms']['max'])} ms ({worst['event']} on {worst.get('target', '?')})"
                      if worst else "–")
        rebound = sum(int(e.get("flows_rebound") or 0) for e in events)
        when = str(run.get("started", "?"))[:16].replace("T", " ")
        lines.append(f"| {lab} ({what}) | {when}, `{_commit(str(run.get('commit', '?')))}` | {passed} / "
                     f"{len(events)} | {failed} | {worst_text} | {rebound} |")
    return "\n".join(lines) + "\n"


def _kept_events() -> dict[str, dict[str, Any]]:
    return {p.stem: _load(p) for p in sorted(EVENTS_KEPT.glob("*.json"))}


# --------------------------------------------------------------------------- CHASH moves (computed)
def render_chash_moves() -> str:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_chash_moves", ROOT / "bench" / "chash_moves.py")
    assert spec is not None and spec.loader is not None
    moves = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = moves  # its dataclasses look their module up
    spec.loader.exec_module(moves)
    return moves.markdown(moves.run(10_000, 1), 10_000) + "\n" + moves.balance_markdown() + "\n"


# --------------------------------------------------------------------------- the blocks
@dataclass(frozen=True)
class Block:
    name: str
    file: Path
    sources: Callable[[], list[Path]]
    render: Callable[[str], str]  # the block's text, given the indent of its opening marker


def _report_sources() -> list[Path]:
    return [REPORT]


BLOCKS = (
    Block("results", ROOT / "docs" / "results.md", _report_sources, lambda indent: render_results(_load(REPORT))),
    Block("events-cgnat", ROOT / "docs" / "events.md",
          lambda: [EVENTS_KEPT / f"{lab}.json" for lab in CGNAT_LABS],
          lambda indent: render_events_cgnat(_kept_events())),
    Block("families", ROOT / "docs" / "results.md",
          lambda: [EVENTS_KEPT / f"{lab}.json" for lab in importlib.import_module("sidematrices").dual_stack_labs()],
          lambda indent: importlib.import_module("sidematrices").dual_stack_tables(_kept_events(), FigureError)),
    Block("ci-budgets", WORKFLOW, _report_sources, lambda indent: render_ci_budgets(_load(REPORT), indent)),
    Block("chash-moves", ROOT / "docs" / "benchmarks-chash.md", lambda: [ROOT / "bench" / "chash_moves.py"],
          lambda indent: render_chash_moves()),
)


def _pattern(path: Path) -> re.Pattern[str]:
    return YAML_BLOCK if path.suffix in (".yml", ".yaml") else MARKDOWN_BLOCK


def fill(text: str, path: Path, only: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """The text with every block of this file filled; and the names of the blocks found."""
    found: list[str] = []
    known = {b.name: b for b in BLOCKS if b.file == path}

    def one(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in known:
            raise FigureError(f"{path.relative_to(ROOT)}: block '{name}' has no generator here "
                              f"(known: {', '.join(sorted(known)) or 'none'})")
        found.append(name)
        body = only[name] if only and name in only else known[name].render(m.groupdict().get("indent") or "")
        return m.group(1) + body + m.group(m.lastindex or 0)

    return _pattern(path).sub(one, text), found


def documents() -> list[Path]:
    """Every file that may hold a block."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), WORKFLOW]


def differences() -> list[str]:
    """What --check reports: each block that differs from its result, each block that is missing."""
    problems = []
    seen: set[str] = set()
    for path in documents():
        text = path.read_text()
        try:
            new, found = fill(text, path)
        except FigureError as exc:
            problems.append(str(exc))
            continue
        seen.update(found)
        if new != text:
            for name in found:
                pat = _pattern(path)
                old_body = next(m.group("body") for m in pat.finditer(text) if m.group("name") == name)
                new_body = next(m.group("body") for m in pat.finditer(new) if m.group("name") == name)
                if old_body != new_body:
                    problems.append(f"{path.relative_to(ROOT)}: block '{name}' differs from its result: "
                                    "python3 bench/docfigures.py")
    for block in BLOCKS:
        if block.name not in seen:
            problems.append(f"{block.file.relative_to(ROOT)}: block '{block.name}' is missing")
    return problems


def write() -> list[Path]:
    changed = []
    for path in documents():
        text = path.read_text()
        new, _ = fill(text, path)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


# --------------------------------------------------------------------------- age
def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30)


def result_commits() -> dict[str, str]:
    """{result file: the commit it records} for every kept run result."""
    out = {}
    report = _load(REPORT)
    out[str(REPORT.relative_to(ROOT))] = str((report.get("version") or {}).get("git", ""))
    for path in sorted(EVENTS_KEPT.glob("*.json")):
        out[str(path.relative_to(ROOT))] = str(_load(path).get("commit", ""))
    return out


def result_labs() -> dict[str, set[str] | None]:
    """{result file: the shipped labs it ran (file stems)}: the plan report's labs, an events result's own
    (its `lab`); None where a result does not say (then every lab file counts)."""
    out: dict[str, set[str] | None] = {}
    report = _load(REPORT)
    stems = {Path(str(lab.get("topology", ""))).stem for lab in (report.get("labs") or {}).values()}
    out[str(REPORT.relative_to(ROOT))] = stems if stems and "" not in stems else None
    for path in sorted(EVENTS_KEPT.glob("*.json")):
        lab = _load(path).get("lab")
        out[str(path.relative_to(ROOT))] = {str(lab)} if lab else None
    return out


LAB_FOLDERS = ("labs/", "lab_orchestrator/labs/")


def _about(changed: str, labs: set[str] | None) -> bool:
    """Whether CHANGED (a file of the packet path) can change a result that ran LABS (None: any file):
    a shipped lab's file (a .yml right in the labs folder) only for a result that ran that lab."""
    path = Path(changed)
    is_lab = changed.startswith(LAB_FOLDERS) and path.suffix == ".yml" and str(path.parent) in ("labs",
                                                                                              "lab_orchestrator/labs")
    if labs is None or not is_lab:
        return True
    return path.stem in labs


def older_than_code(recorded: str, head: str = "HEAD", labs: set[str] | None = None) -> str | None:
    """Why a result recorded on `recorded` (git describe output) is older than the code at `head`, or None.
    LABS: the shipped labs the result ran (a change to another lab's file leaves it as it was)."""
    if not recorded:
        return "it records no commit"
    if recorded.endswith("-dirty"):
        return f"it ran on {recorded}, a checkout with uncommitted changes"
    commit = _commit(recorded)
    if _git("merge-base", "--is-ancestor", commit, head).returncode != 0:
        return f"its commit {commit} is not in this checkout's history"
    # --no-renames: a renamed file is its old path and its new one (a renamed lab is one a result ran)
    changed = [f for f in _git("diff", "--name-only", "--no-renames", commit, head, "--", *PACKET_PATH).stdout.split()
               if _about(f, labs)]
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        return f"{len(changed)} file(s) of the packet path changed since its commit {commit}: {shown}"
    return None


def stale_results() -> list[str]:
    if _git("rev-parse", "--git-dir").returncode != 0:
        return ["not a git checkout: a result's age cannot be told"]
    out = []
    labs = result_labs()
    for path, recorded in result_commits().items():
        why = older_than_code(recorded, labs=labs.get(path))
        if why:
            out.append(f"{path} is older than the code it describes: {why}")
    return out


def keep(folder: Path) -> None:
    """Keep a `lab report` run (its report.json, report.html, report.xml) as docs/results/jvd-report.*."""
    doc = _load(folder / "report.json")
    if not doc.get("finished"):
        raise FigureError(f"{folder}/report.json: the run did not finish (interrupted?): not kept")
    for suffix in ("json", "html", "xml"):
        src = folder / f"report.{suffix}"
        if not src.is_file():
            raise FigureError(f"{src}: missing (lab report writes it)")
    for suffix in ("html", "xml"):
        (REPORT.parent / f"jvd-report.{suffix}").write_bytes((folder / f"report.{suffix}").read_bytes())
    # the same document without indentation (a third of the size); `lab report --render` reads it again
    REPORT.write_text(json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n")
    print(f"kept {folder}/report.{{json,html,xml}} as docs/results/jvd-report.{{json,html,xml}}")


def main(argv: list[str]) -> int:
    try:
        if "--keep" in argv:
            i = argv.index("--keep")
            if i + 1 >= len(argv):
                raise FigureError("--keep needs the folder of a lab report run (lab report -o FOLDER)")
            keep(Path(argv[i + 1]))
            argv = argv[:i] + argv[i + 2:]
        if "--check" in argv:
            problems = differences()
        elif "--age" in argv:
            problems = stale_results()
        else:
            for path in write():
                print(f"wrote {path.relative_to(ROOT)}")
            problems = [p for p in differences() if "is missing" in p]
    except FigureError as exc:
        problems = [str(exc)]
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
