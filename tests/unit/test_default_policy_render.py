"""services.default_policy: what the SRXs do with a new session no policy permits.

deny-all (the default, every shipped lab) drops it; permit-all (the JVD test bed's
`security policies default-policy { permit-all; }`) accepts it, in the SRX's nftables ruleset and in
its rendered Junos-like configuration, and nothing else of the lab changes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab_orchestrator.api.topology import plan as plan_topology
from lab_orchestrator.cli_ssh import junosconf
from lab_orchestrator.model.schema import Services

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "labs").glob("*.yml"))
DENY_RULE = 'counter comment "default-policy deny-all"'
PERMIT_RULE = 'counter accept comment "default-policy permit-all"'


def _with_policy(tmp_path: Path, lab: str, policy: str) -> Path:
    text = (REPO / "labs" / f"{lab}.yml").read_text()
    assert "\nservices:\n" in text
    path = tmp_path / f"{lab}.yml"
    path.write_text(text.replace("\nservices:\n", f"\nservices:\n  default_policy: {policy}\n", 1))
    return path


def _forward_chain(ruleset: str) -> list[str]:
    """The rules of `chain forward` of srx.nft, in order (the type line excluded)."""
    body = re.search(r"chain forward \{\n(.*?)\n    \}", ruleset, re.S)
    assert body, ruleset
    lines = [line.strip() for line in body.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("type ")]


def test_the_default_is_deny_all() -> None:
    assert Services().default_policy == "deny-all"


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_labs_deny_what_no_policy_permits(path: Path) -> None:
    files = plan_topology(path).files
    for name, text in files.items():
        if name.endswith("/srx.nft"):
            assert _forward_chain(text)[-1] == DENY_RULE, name
            assert "permit-all" not in text
        if name.endswith("/juniper.conf") and "security {" in text:
            assert "default-policy {\n            deny-all;\n        }" in text, name


@pytest.mark.parametrize("lab", ["topology3", "topology1-cgnat"])
def test_permit_all_accepts_at_the_end_of_the_policy_chain_and_changes_nothing_else(tmp_path: Path, lab: str) -> None:
    # one path for both: the rendered files name their source
    deny = plan_topology(_with_policy(tmp_path, lab, "deny-all")).files
    permit = plan_topology(_with_policy(tmp_path, lab, "permit-all")).files
    assert set(permit) == set(deny)
    srx = sorted(name for name in permit if name.endswith("/srx.nft"))
    assert srx, f"{lab} has no SRX"
    for name in srx:
        rules = _forward_chain(permit[name])
        # the session table, the invalid-state drop and the TCP SYN check still come first: permit-all
        # accepts only a packet that would open a session, as Junos's default policy does
        assert rules[:3] == _forward_chain(deny[name])[:3]
        assert rules[-1] == PERMIT_RULE
        assert DENY_RULE not in permit[name]
        assert permit[name].replace(PERMIT_RULE, DENY_RULE) == deny[name]
    for name in permit:
        if name.endswith("/juniper.conf") and "default-policy {" in deny[name]:
            assert "default-policy {\n            permit-all;\n        }" in permit[name], name
            assert permit[name].replace("permit-all;", "deny-all;") == deny[name]
            # `show configuration | display set` on the node
            shown = junosconf.to_set(junosconf.parse(permit[name])).splitlines()
            assert "set security policies default-policy permit-all" in shown
        elif not name.endswith("/srx.nft"):
            assert permit[name] == deny[name], f"{name} depends on the default policy"
