"""labkit.status: the typed daemon status files (written by the daemon, read with the same model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from labkit.status import SrdStatus, parse_status, read_status, write_status

SRD = {"node": "mx1", "peer": "mx2", "pid": 77, "updated_at": 1700000000.5, "role": "master", "priority": 200,
       "preempt": True, "healthy": True, "signal_route": {"prefix": "198.18.255.1/32", "installed": True},
       "peer_role": "standby", "heartbeat": {"sent": 10, "received": 9, "errors": 1, "peer_alive": True},
       "resumed": None, "transitions": [{"at": 12.5, "role": "active", "why": "higher priority"}]}


def test_srd_status_round_trips_in_the_published_shape(tmp_path: Path) -> None:
    path = tmp_path / "srd-status.json"
    write_status(path, SrdStatus.model_validate(SRD))
    text = path.read_text()
    assert json.loads(text) == SRD
    assert list(json.loads(text)) == list(SRD), "keys in the order the daemon always wrote them"
    assert text.endswith("}\n") and "\n  \"node\": \"mx1\"," in text  # indented by 2, one final newline
    status = read_status(path, SrdStatus)
    assert status is not None and status.role == "master" and status.transitions[0].at == 12.5
    assert not list(tmp_path.glob("*.tmp")), "written through a temporary file, renamed"


def test_read_status_is_none_for_a_missing_partial_or_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "srd-status.json"
    assert read_status(path, SrdStatus) is None
    path.write_text(json.dumps(SRD)[:40])  # a reader racing a non-atomic writer
    assert read_status(path, SrdStatus) is None
    path.write_text(json.dumps({k: v for k, v in SRD.items() if k != "heartbeat"}))
    assert read_status(path, SrdStatus) is None
    assert parse_status({**SRD, "role": "chief"}, SrdStatus) is None
    assert parse_status(SRD, SrdStatus) == SrdStatus.model_validate(SRD)


def test_unknown_status_fields_are_errors() -> None:
    with pytest.raises(ValidationError, match="extra"):
        SrdStatus.model_validate({**SRD, "mastership": "master"})
    with pytest.raises(ValidationError, match="extra"):
        SrdStatus.model_validate({**SRD, "heartbeat": {**SRD["heartbeat"], "lost": 0}})
