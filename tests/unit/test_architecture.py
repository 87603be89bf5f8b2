"""The layering rules of docs/architecture.md, checked on the source (AST, nothing imported):

- every module lives in one of the layer packages of LAYERS (no loose module at the top of
  lab_orchestrator/ or dataplane/), and no package imports from a layer above it;
- no import cycle inside lab_orchestrator/, dataplane/ and labkit/ (function-level imports count too);
- dataplane and labkit never import lab_orchestrator, labkit never imports dataplane;
- no module reaches into another module's `_private` names;
- the cli package only parses and prints: it never imports a backend, ops or the supervisor;
- the plan is built by the phases listed in plan.PHASES, in that order;
- node-kind literals ("mx", "srx", "ios-router", "host") do not spread to more places (a ratchet);
- no module grows past 500 lines (a ratchet for the few still over it);
- daemons read their configuration through a labkit.configs model (a ratchet for the rest).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("lab_orchestrator", "dataplane", "labkit")
ALLOWED_PRIVATE = {
    ("os", "_exit"),  # the standard library's documented fork-child exit
    # paramiko has no public hook for "the reply to this channel request has been sent": the SSH server
    # wraps its request handler (cli_ssh/server.py LabTransport); test_ssh_reply_order fails if it changes
    ("paramiko.Channel", "_handle_request"), ("paramiko.Transport", "_channel_handler_table"),
}


def _name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _resolve(candidate: str) -> str | None:
    while candidate and candidate not in MODULES:
        candidate = candidate.rpartition(".")[0]
    return candidate or None


def imports_of(module: str, tree: ast.Module) -> set[str]:
    """Every module of ours that MODULE imports, at any level of the file."""
    is_package = MODULES[module].name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {m for a in node.names if (m := _resolve(a.name))}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                if alias.name.startswith("__"):  # a package's own metadata (__doc__, __version__)
                    continue
                target = _resolve(f"{origin}.{alias.name}")
                if target and target != module:
                    found.add(target)
    found.discard(module)
    return found


GRAPH = {name: imports_of(name, tree) for name, tree in TREES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_is_read() -> None:
    assert "lab_orchestrator.plan.plantypes" in GRAPH["lab_orchestrator.plan.render"]
    assert "labkit.netnsutil" in GRAPH["lab_orchestrator.runtime.netns"]
    assert "lab_orchestrator.api" in GRAPH["lab_orchestrator.cli.lifecycle"]


# The layers, bottom to top: a package imports only from its own layer and the ones below it. This
# list is the folder tree of docs/architecture.md; a module outside these packages fails the test.
LAYERS = (
    "labkit",
    "dataplane.core", "dataplane.kernel", "dataplane.esp", "dataplane.ikev2", "dataplane.traffic",
    "dataplane.daemons",
    "lab_orchestrator.kinds", "lab_orchestrator.model", "lab_orchestrator.importer", "lab_orchestrator.plan",
    "lab_orchestrator.runtime", "lab_orchestrator.clab", "lab_orchestrator.events", "lab_orchestrator.cli_ssh",
    "lab_orchestrator.api", "lab_orchestrator.report", "lab_orchestrator.live", "lab_orchestrator.cli",
)
TOP_PACKAGES = ("lab_orchestrator", "dataplane")  # their __init__ only (the version, a docstring)
# Upward imports still to remove (a ratchet: drop an entry once its import is gone): none left.
UPWARD_ALLOWED: set[tuple[str, str]] = set()


def layer_of(module: str) -> int | None:
    """Index in LAYERS of the package holding MODULE (None: a top package's own __init__)."""
    found = [i for i, layer in enumerate(LAYERS) if module == layer or module.startswith(layer + ".")]
    return found[0] if found else None


def _runtime_imports(module: str, tree: ast.Module) -> set[str]:
    """imports_of without the `if TYPE_CHECKING:` blocks (annotations only, no import at run time)."""
    pruned = ast.parse(ast.unparse(tree))
    for node in ast.walk(pruned):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            node.body = [ast.Pass()]
    return imports_of(module, pruned)


def test_every_module_lives_in_a_layer_package() -> None:
    loose = sorted(m for m in MODULES if layer_of(m) is None and m not in TOP_PACKAGES)
    assert loose == [], f"not in any package of LAYERS (move it into its layer, or add the layer): {loose}"
    on_disk = {str(p.parent.relative_to(REPO)).replace("/", ".") for top in TOP_PACKAGES
               for p in (REPO / top).glob("*/__init__.py")}
    assert on_disk <= set(LAYERS), f"packages missing from LAYERS: {sorted(on_disk - set(LAYERS))}"


def test_the_layer_check_sees_a_loose_module_and_an_upward_import() -> None:
    assert layer_of("lab_orchestrator.eventrun") is None
    assert layer_of("lab_orchestrator.events.run") == LAYERS.index("lab_orchestrator.events")
    assert layer_of("lab_orchestrator.cli.docgen") > layer_of("lab_orchestrator.api")  # type: ignore[operator]
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..api import Lab\n")
    assert _runtime_imports("lab_orchestrator.plan.render", tree) == set()


def test_no_package_imports_from_a_layer_above_it() -> None:
    upward = set()
    for module, tree in TREES.items():
        mine = layer_of(module)
        if mine is None:
            continue
        for target in _runtime_imports(module, tree):
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                upward.add((module, target))
    assert upward - UPWARD_ALLOWED == set(), "import from a lower layer only (LAYERS)"
    assert UPWARD_ALLOWED - upward == set(), "gone now: drop from UPWARD_ALLOWED"


def test_no_import_cycle() -> None:
    assert _cycles(GRAPH) == []


@pytest.mark.parametrize("package, forbidden", [
    ("dataplane", ("lab_orchestrator",)),
    ("labkit", ("lab_orchestrator", "dataplane")),
])
def test_lower_layers_do_not_import_upper_ones(package: str, forbidden: tuple[str, ...]) -> None:
    bad = {m: sorted(t for t in targets if t.split(".")[0] in forbidden)
           for m, targets in GRAPH.items() if m.split(".")[0] == package}
    assert {m: t for m, t in bad.items() if t} == {}


def test_the_cli_only_parses_and_prints() -> None:
    """Orchestration lives in lab_orchestrator.api: no cli module drives a backend or a daemon."""
    forbidden = {
        "lab_orchestrator.runtime.ops", "lab_orchestrator.runtime.supervisor",
        "lab_orchestrator.runtime.supervisord", "lab_orchestrator.events.run", "lab_orchestrator.events.watch",
        "lab_orchestrator.events.verdict", "lab_orchestrator.plan.trafficsetup",
        "lab_orchestrator.events.traffic", "lab_orchestrator.plan.pipeline", "lab_orchestrator.plan.render",
        "lab_orchestrator.runtime.readiness", "lab_orchestrator.runtime.bgpready",
        "lab_orchestrator.clab.agent", "lab_orchestrator.plan.features.mnha",
        "lab_orchestrator.plan.features.srd", "lab_orchestrator.plan.features.mxlb",
        "lab_orchestrator.plan.features.flexvpn", "lab_orchestrator.plan.sshplan",
        "lab_orchestrator.runtime.netns", "lab_orchestrator.clab.backend"} | {"labkit.netnsutil", "labkit.birdctl"}
    cli_modules = [m for m in GRAPH if m == "lab_orchestrator.cli" or m.startswith("lab_orchestrator.cli.")]
    assert len(cli_modules) == len(list((REPO / "lab_orchestrator" / "cli").glob("*.py"))), "every cli module"
    reached = {m: sorted(t for t in GRAPH[m] if t in forbidden) for m in cli_modules}
    assert {m: t for m, t in reached.items() if t} == {}


def _private_reach(module: str, tree: ast.Module) -> list[str]:
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [f"{module}:{node.lineno} imports {a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            if (ast.unparse(base), node.attr) in ALLOWED_PRIVATE:
                continue
            if node.attr in defined:  # this module's own private name (on an object it made)
                continue
            found.append(f"{module}:{node.lineno} uses {ast.unparse(node)}")
    return found


def test_private_reach_is_detected() -> None:
    tree = ast.parse("from x import _hidden\nimport y\ny._inner()\nself._mine = 1\n")
    assert _private_reach("m", tree) == ["m:1 imports _hidden", "m:3 uses y._inner"]


def test_no_module_reaches_into_another_modules_private_names() -> None:
    found = [line for name, tree in TREES.items() for line in _private_reach(name, tree)]
    assert found == []


def test_the_plan_is_built_by_its_listed_phases() -> None:
    from lab_orchestrator.plan import pipeline as plan

    names = [name for name, _ in plan.PHASES]
    assert names[:2] == ["nodes", "links"] and names[-1] == "plan.json"
    assert names.index("configs") < names.index("srd"), "srdd reads the BIRD processes of the configs phase"
    assert names.index("bgp") < names.index("configs") < names.index("selectors") < names.index("ssh")
    build = next(n for n in ast.walk(TREES["lab_orchestrator.plan.pipeline"])
                 if isinstance(n, ast.FunctionDef) and n.name == "build")
    assert not [n for n in ast.walk(build) if isinstance(n, ast.Import | ast.ImportFrom)], "no late import"


# Node-kind literals outside the places that define kinds: none. Code asks the kind registry
# (`kinds.get(kind).firewall`, `kinds.names(...)`, the event catalog's roles) instead of naming kinds.
KIND_LITERAL = re.compile(r"""["'](mx|srx|ios-router|host)["']""")
KIND_HOMES = ("lab_orchestrator/kinds/", "lab_orchestrator/templates/", "lab_orchestrator/model/schema.py")
# The same words where they do not name a node kind (each is what the user types or reads):
NOT_A_KIND = re.compile("|".join((
    r"""Param\("host", """,  # the SSH CLI's ping/traceroute destination: Junos and IOS call it "host"
    r"""args(\.get\(|\[)"host"[)\]]""",  # ... and its parsed value
    r"""Check\("root", "host", """,  # `lab doctor`'s check group for the machine itself
    r'tlb_real_service == "srx"',  # the model's `services.tlb_real_service: srx` (one per SRX)
)))
# 176 at first; 153 after plan and render; 45 after graph, sshplan, cli_ssh, mxlb, validate, eventrun,
# flexvpn; 0 once the event catalog named its targets by role
KIND_LITERAL_LIMIT = 0


def _kind_literals() -> Counter[str]:
    counts: Counter[str] = Counter()
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            if rel.startswith(KIND_HOMES):
                continue
            text = path.read_text()
            hits = len(KIND_LITERAL.findall(text)) - len(NOT_A_KIND.findall(text))
            if hits:
                counts[rel] = hits
    return counts


def test_words_that_are_no_kind_are_told_apart() -> None:
    text = 'Param("host", "Hostname")\nif kind == "srx":\nx = args["host"]\nargs.get("host")\n'
    assert len(KIND_LITERAL.findall(text)) - len(NOT_A_KIND.findall(text)) == 1


def test_kind_literals_do_not_spread() -> None:
    counts = _kind_literals()
    total = sum(counts.values())
    assert total <= KIND_LITERAL_LIMIT, (
        f"{total} node-kind literals outside lab_orchestrator/kinds/ and templates (limit {KIND_LITERAL_LIMIT}): "
        f"ask the kind registry instead. By file: {dict(counts.most_common())}")



# Module size: one job per module. A module over LINE_LIMIT lines is split along its seams; the ones
# still over it are listed with their size now, which they may not exceed (a ratchet: split, then drop
# the entry). bench/ counts too: benchmark scripts share their helpers through bench/common.py.
LINE_LIMIT = 500
SIZE_DIRS = ("lab_orchestrator", "dataplane", "labkit", "bench")
OVER_LIMIT: dict[str, int] = {}


def _sizes() -> dict[str, int]:
    return {str(p.relative_to(REPO)): len(p.read_text().splitlines())
            for d in SIZE_DIRS for p in sorted((REPO / d).rglob("*.py"))}


def test_no_module_grows_past_the_line_limit() -> None:
    sizes = _sizes()
    over = {path: n for path, n in sizes.items() if n > OVER_LIMIT.get(path, LINE_LIMIT)}
    assert over == {}, f"over {LINE_LIMIT} lines (or past their listed size): split by responsibility"


def test_the_size_ratchet_lists_only_modules_still_over_the_limit() -> None:
    sizes = _sizes()
    stale = {path: sizes.get(path) for path in OVER_LIMIT if sizes.get(path, 0) <= LINE_LIMIT}
    assert stale == {}, "these are within the limit now (or gone): drop them from OVER_LIMIT"


# Daemon configurations are typed on both ends (labkit.configs: the planner builds the model, the
# daemon reads it with the same type). No daemon reads its configuration as a raw mapping.
RAW_CONFIG = re.compile(r"json\.loads\(Path\(argv\[1\]\)\.read_text\(\)\)")
RAW_CONFIG_DAEMONS: set[str] = set()


def test_daemons_read_their_configuration_typed() -> None:
    raw = {str(p.relative_to(REPO)) for p in sorted((REPO / "dataplane").rglob("*.py"))
           if RAW_CONFIG.search(p.read_text())}
    assert raw <= RAW_CONFIG_DAEMONS, f"read the config with a labkit.configs model: {sorted(raw - RAW_CONFIG_DAEMONS)}"
    assert raw == RAW_CONFIG_DAEMONS, f"typed now, drop from RAW_CONFIG_DAEMONS: {sorted(RAW_CONFIG_DAEMONS - raw)}"


# Daemon status files are typed on both ends (labkit.status: the daemon builds the model and writes it,
# every reader parses it with the same model): no module of dataplane/ writes a raw dict as a status.
RAW_STATUS = re.compile(r"\bwrite_json\(")


def test_daemons_write_their_status_typed() -> None:
    raw = {str(p.relative_to(REPO)) for p in sorted((REPO / "dataplane").rglob("*.py"))
           if RAW_STATUS.search(p.read_text())}
    assert raw == set(), f"write the status with a labkit.status / labkit.flexstatus model: {sorted(raw)}"


def test_the_raw_status_check_sees_a_raw_write() -> None:
    assert RAW_STATUS.search('write_json(self.config.hsrp_status, {"groups": []})')
    assert not RAW_STATUS.search("write_status(self.config.hsrp_status, status)")


def test_the_traffic_by_hand_is_imported_by_the_api_alone() -> None:
    """bench/docfigures.py leaves `lab traffic`'s module out of the kept results' packet path because
    no kept run reaches it: only the API's traffic_* methods (which `lab traffic` calls) import it."""
    importers = sorted(name for name, imported in GRAPH.items() if "lab_orchestrator.events.traffic" in imported)
    assert importers and all(name.startswith("lab_orchestrator.api") for name in importers), importers
