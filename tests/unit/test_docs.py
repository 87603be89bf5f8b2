"""The docs follow the code: every model field and every command and option is in the generated
references, which are what `make docs` (python -m lab_orchestrator.cli.docgen) makes from the code now
(a reworded help text needs `make docs` too), and no user document names internal material or paths
outside the repository."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from lab_orchestrator.cli import docgen
from lab_orchestrator.model.schema import Topology

REPO = Path(__file__).resolve().parents[2]
USER_DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
FORBIDDEN = [
    (r"\bthe seeds?\b(?! and bucket)(?! value)", "the seed(s)"), (r"\bseed's\b", "seed's"),
    (r"\bseeds/", "the seeds folder"), (r"\bissue \d+", "an issue number"), (r"\bchapter \d+", "a seed chapter"),
    (r"platform[- ]notes", "platform notes"), (r"\.\./shared", "a path outside the repository"),
    (r"/work/", "a path of the development machine"), (r"farm-(bench|studio)", "a forbidden name"),
]


def _models() -> list[type[BaseModel]]:
    return [cls for _, cls in docgen._models(Topology)]


@pytest.mark.parametrize("cls", _models(), ids=lambda c: c.__name__)
def test_every_model_field_is_in_the_topology_reference(cls: type[BaseModel]) -> None:
    text = docgen.TOPOLOGY_REFERENCE.read_text()
    section = text.split(f"\n## {cls.__name__}\n", 1)
    assert len(section) == 2, f"no section for {cls.__name__} in docs/topology-reference.md (make docs)"
    body = section[1].split("\n## ", 1)[0]
    for name, info in cls.model_fields.items():
        assert f"| `{info.alias or name}` |" in body, f"{cls.__name__}.{name} missing (make docs)"


def test_the_schema_knows_every_key() -> None:
    schema = json.loads(docgen.SCHEMA.read_text())
    assert set(schema["properties"]) == {f.alias or n for n, f in Topology.model_fields.items()}
    node = schema["$defs"]["Node"]["properties"]
    assert "loopback" in node and "mgmt_ip" in node and schema["additionalProperties"] is False
    link_forms = schema["properties"]["links"]["items"]["anyOf"]
    assert {"type": "array", "items": {"type": "string"}, "minItems": 2,
            "description": "short form: [node:interface, node:interface]"} in link_forms


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    text = docgen.CLI_REFERENCE.read_text()
    commands = docgen._commands()
    assert {"lab up", "lab doctor", "lab events run", "lab graph"} <= {path for path, _ in commands}
    for path, cmd in commands:
        section = text.split(f"\n## {path}\n", 1)
        assert len(section) == 2, f"{path} missing from docs/cli.md (make docs)"
        body = section[1].split("\n## ", 1)[0]
        for option in docgen.cli_options(cmd):
            assert f"`{option}`" in body, f"{path} {option} missing from docs/cli.md (make docs)"


def test_the_generated_references_are_current() -> None:
    """docs/cli.md (every command's --help), the topology reference and the JSON Schema are what the code
    makes now: a changed option or help text needs `make docs`."""
    stale = [str(path.relative_to(REPO)) for path, text in docgen.generated().items() if path.read_text() != text]
    assert not stale, f"stale: {', '.join(stale)} (make docs)"


def test_budget_options_and_ssh_usage_are_documented() -> None:
    text = docgen.CLI_REFERENCE.read_text()
    assert "`--max-convergence-ms`" in text and "`--budget`" in text
    assert re.search(r"lab ssh \[OPTIONS\] \{?NODE \[-- COMMAND\.\.\.\]", text)
    assert re.search(r"lab exec \[OPTIONS\] \{?NODE -- COMMAND\.\.\.", text)


def test_hand_written_part_of_the_cli_reference_is_kept() -> None:
    kept = docgen.cli_reference("old\n" + docgen.HAND_WRITTEN + "\n## Exit codes\n\n| 0 | ok |\n")
    assert kept.endswith("## Exit codes\n\n| 0 | ok |\n")
    adopted = docgen.cli_reference("# CLI\n\n## Exit codes\n\n| 2 | bad input |\n")
    assert "## Exit codes\n\n| 2 | bad input |" in adopted


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_user_docs_name_no_internal_material(doc: Path) -> None:
    text = doc.read_text()
    found = [(what, m.group(0)) for pattern, what in FORBIDDEN for m in re.finditer(pattern, text, re.I)]
    assert not found, f"{doc.name} names {found}: name the public documents instead"


def test_forbidden_patterns_catch_what_they_should() -> None:
    samples = {"as the seed says": True, "the seed's weights": True, "issue 8": True, "platform notes": True,
               "../shared/x": True, "same seed and bucket count": False, "hash_seed: 0x5eed": False}
    for sample, bad in samples.items():
        assert any(re.search(p, sample, re.I) for p, _ in FORBIDDEN) == bad, sample


def test_down_time_defaults_agree() -> None:
    options = {path: cmd for path, cmd in docgen._commands()}
    defaults = {path: next(p.default for p in options[path].params if "--down-time" in getattr(p, "opts", ()))
                for path in ("lab fail", "lab events run")}
    assert len(set(defaults.values())) == 1, defaults


def test_figures_exist_for_the_shipped_designs() -> None:
    for name in docgen.FIGURES:
        figure = REPO / "docs" / "img" / f"{name}.svg"
        assert figure.exists() and b"<svg" in figure.read_bytes()[:2000], figure


def test_the_topology_reference_resolves_every_model_a_field_names() -> None:
    """A field naming a model defined later in schema.py (Node.routes: StaticRoute) is shown as that
    model, with its own section, whatever was validated before the reference was made."""
    text = next(t for p, t in docgen.generated().items() if p.name == "topology-reference.md")
    assert "ForwardRef" not in text
    assert "## StaticRoute" in text and "list of [StaticRoute](#staticroute)" in text
