"""Typed daemon configurations (labkit.configs): what the planner writes is what the daemon reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from lab_orchestrator.api.topology import plan as plan_topology
from labkit.configs import MnhaConfig, ResponderConfig, SelectorConfig, SrdConfig

REPO = Path(__file__).resolve().parents[2]


def _files(lab: str) -> dict[str, str]:
    return plan_topology(REPO / "labs" / f"{lab}.yml").files


@pytest.mark.parametrize("lab, suffix, model", [("topology2", "srd.json", SrdConfig),
                                                ("topology3", "mnha.json", MnhaConfig),
                                                ("topology1", "mxlb.json", SelectorConfig),
                                                ("topology3", "mxlb.json", SelectorConfig),
                                                ("topology4-cgnat", "mxlb.json", SelectorConfig),
                                                ("topology3", "responder.json", ResponderConfig)])
def test_the_planned_config_reads_back_with_the_daemons_type(lab: str, suffix: str, model: type) -> None:
    written = {name: text for name, text in _files(lab).items() if name.endswith(suffix)}
    assert written, f"{lab} plans no {suffix}"
    for text in written.values():
        config = model.model_validate_json(text)
        assert config.to_json() == text, "reading and writing again gives the same bytes"


def test_a_config_with_an_unknown_or_missing_key_is_refused(tmp_path: Path) -> None:
    text = next(t for n, t in _files("topology2").items() if n.endswith("srd.json"))
    data = json.loads(text)
    path = tmp_path / "srd.json"
    path.write_text(json.dumps({**data, "priorty": 1}))
    with pytest.raises(ValidationError, match="priorty"):
        SrdConfig.read(path)
    del data["priority"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValidationError, match="priority"):
        SrdConfig.read(path)


def test_an_mnha_mode_outside_the_model_is_refused() -> None:
    text = next(t for n, t in _files("topology3").items() if n.endswith("mnha.json"))
    with pytest.raises(ValidationError, match="mode"):
        MnhaConfig.model_validate({**json.loads(text), "mode": "srg3"})


def test_a_selector_member_needs_a_hop_and_tlb_profiles_are_typed() -> None:
    text = next(t for n, t in _files("topology3").items() if n.endswith("mxlb.json"))
    data = json.loads(text)
    config = SelectorConfig.model_validate(data)
    assert config.mode == "tlb" and [p.name for p in config.profiles] == ["icmp-profile", "tcp-profile"]
    data["selectors"][0]["members"][0]["hops"] = []
    with pytest.raises(ValidationError, match="hops"):
        SelectorConfig.model_validate(data)
    plain = next(t for n, t in _files("topology1").items() if n.endswith("mxlb.json"))
    ecmp = SelectorConfig.model_validate_json(plain)
    assert ecmp.health == {} and ecmp.profiles == ()
