"""Failure events on a running topology1 (real namespaces): each does what it says and is undone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from running import REPO, SRX, RunningLab, lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
]


@pytest.fixture(scope="module")
def ev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("ev1", REPO / "labs/topology1.yml", tmp_path_factory.mktemp("events")) as running:
        yield running


def status(running: RunningLab) -> dict[str, dict[str, object]]:
    data = json.loads(lab("status", running.name, "--json").stdout)[0]
    return {n["name"]: n for n in data["nodes"]}


def established(node: dict[str, object]) -> bool:
    sessions = node["bgp"]
    assert isinstance(sessions, list)
    return bool(sessions) and all(str(s["info"]).startswith("Established") for s in sessions)


def wait_until(check: object, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def test_power_off_and_on(ev: RunningLab) -> None:
    assert ev.probe(42000)["missing"] == []
    assert ev.carriers(42000), "srx2 carried some flows before"
    lab("fail", "--lab", ev.name, "srx2", "srx-power-off")
    node = status(ev)["srx2"]
    assert node["powered_off"]
    assert all(not d["running"] for d in node["daemons"])  # type: ignore[union-attr]
    links = ev.exec("srx2", "ip", "-o", "link", "show", "up")
    assert "ge-0-0" not in links and "fxp0" not in links, "every interface is down"
    ev.wait_members({"srx1", "srx3", "srx4"})
    assert ev.probe(42001)["missing"] == [], "flows moved to the other SRXs"
    assert "srx2" not in ev.carriers(42001).values()
    lab("restore", "--lab", ev.name, "srx2")
    # it booted empty: none of the sessions it held before the power-off came back with it
    assert "sport=42000 " not in ev.exec("srx2", "conntrack", "-L", "-p", "udp"), "its old sessions survived"
    wait_until(lambda: established(status(ev)["srx2"]))
    assert "table inet srx" in ev.exec("srx2", "nft", "list", "tables"), "its configuration came back"
    ev.wait_members(set(SRX))
    assert ev.probe(42002)["missing"] == []
    assert "srx2" in ev.carriers(42002).values()


def test_link_failure_and_restore(ev: RunningLab) -> None:
    lab("fail", "--lab", ev.name, "srx1", "srx-link-failure")
    ev.wait_members({"srx2", "srx3", "srx4"})
    assert "ge-0-0-0" not in ev.exec("srx1", "ip", "-o", "link", "show", "up")
    assert ev.probe(42010)["missing"] == []
    lab("restore", "--lab", ev.name, "srx1")
    ev.wait_members(set(SRX))
    assert ev.probe(42011)["missing"] == []


def _default_route_gaps(running: RunningLab, seconds: float) -> list[str]:
    """Sample the MX trust instance's default route while something happens; report any absence."""
    gaps: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out = subprocess.run(["ip", "netns", "exec", running.ns("mx1-trust-vr"), "ip", "route", "show",
                              "default"], capture_output=True, text=True).stdout
        if "nexthop" not in out and "via" not in out:
            gaps.append(f"{time.monotonic():.2f}")
        time.sleep(0.02)
    return gaps


@pytest.mark.parametrize("event", ["restart-routing", "gres"])
def test_control_plane_restart_keeps_forwarding(ev: RunningLab, event: str) -> None:
    before = status(ev)["mx1"]["daemons"]
    gaps: list[str] = []
    sampler = threading.Thread(target=lambda: gaps.extend(_default_route_gaps(ev, 4.0)))
    sampler.start()
    time.sleep(0.2)
    lab("fail", "--lab", ev.name, "mx1", event)
    sampler.join()
    assert gaps == [], "the kernel kept forwarding state while the control plane restarted"
    after = status(ev)["mx1"]
    assert {d["pid"] for d in after["daemons"]} != {d["pid"] for d in before}  # type: ignore[union-attr]
    wait_until(lambda: established(status(ev)["mx1"]))
    assert ev.probe(42020 + len(event))["missing"] == []


def test_reboot_comes_back_with_its_configuration(ev: RunningLab) -> None:
    lab("fail", "--lab", ev.name, "srx3", "srx-reboot", "--down-time", "0.5")
    node = status(ev)["srx3"]
    assert not node["powered_off"]
    wait_until(lambda: established(status(ev)["srx3"]))
    ev.wait_members(set(SRX))
    assert ev.probe(42030)["missing"] == []


def test_events_that_do_not_apply_are_refused(ev: RunningLab) -> None:
    result = lab("fail", "--lab", ev.name, "srx1", "mnha-pair-power-off", check=False)
    assert result.returncode != 0 and "no mnha" in result.stderr
    result = lab("fail", "--lab", ev.name, "mx1", "srd-switchover", check=False)
    assert result.returncode != 0 and "no srd" in result.stderr
