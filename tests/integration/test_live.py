"""`lab web` in headless Chromium and `lab top` in tmux, against a running copy of topology3.

The web page is loaded by the host's Chromium (driven over the DevTools pipe, see headless.py): every node
of the lab is drawn, a screenshot is taken, and after `lab fail srx2 srx-power-off` the page shows srx2
failed within 2 s, with no reload (server-sent events). `lab top` runs in a tmux pane: it lists every SRX
and shows the power-off within 2 s. The 2 s are counted from the moment `lab fail` returns (when the
power-off is done and recorded); the views pick up the record's change within about 0.1 s plus one read.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headless import Chromium, Tmux, chromium_problem, tmux_problem
from labtools import (
    REPO,
    PlanFacts,
    explain,
    lab_argv,
    run_lab,
    running_copy,
    start_lab,
)

pytestmark = pytest.mark.root

NAME = "lv3"
SRXS = ("srx1", "srx2", "srx3", "srx4")
LAB_WIDE = "_lab"  # `lab status`'s pseudo-node of the lab-wide daemons (listed, not drawn)
SHOWN_WITHIN_S = 2.0  # the live views' promise: a failure shows within 2 s


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlanFacts]:
    yield from running_copy(tmp_path_factory, "topology3.yml", NAME)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - loopback only
        body: bytes = answer.read()
        return body


@pytest.fixture(scope="module")
def web(lab: PlanFacts) -> Iterator[str]:
    """`lab web` on a free loopback port; its base URL."""
    port = free_port()
    server = start_lab("web", NAME, "--port", str(port))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                get(base + "/state.json")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    out, err = server.communicate(timeout=5) if server.poll() is not None else ("", "")
                    pytest.fail(f"lab web did not answer on {base}: exit {server.returncode}\n{out}\n{err}")
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)


def power_off_srx2() -> float:
    """`lab fail srx2 srx-power-off`; the monotonic time at which it returned."""
    result = run_lab("fail", "--lab", NAME, "srx2", "srx-power-off", timeout=60)
    assert result.returncode == 0, explain(result)
    return time.monotonic()


def restore_srx2() -> None:
    result = run_lab("restore", "--lab", NAME, "srx2", timeout=60)
    assert result.returncode == 0, explain(result)


def node_states(state: dict[str, Any]) -> dict[str, str]:
    return {n["name"]: n["state"] for n in state["nodes"]}


def wait_lab_settled(base: str, timeout: float = 30.0) -> dict[str, Any]:
    """The JSON endpoint once every SRX is up and the selector has published its members."""
    deadline = time.monotonic() + timeout
    while True:
        state: dict[str, Any] = json.loads(get(base + "/state.json"))
        settled = all(node_states(state).get(s) == "up" for s in SRXS) and len(state["members"]) == 2
        if settled or time.monotonic() > deadline:
            return state
        time.sleep(0.2)


STATE_OF = "(n => {{ const g = document.querySelector('g.node[data-node=\"' + n + '\"]'); " \
           "return g ? (g.dataset.state || '') : null; }})({node!r})"


def test_web_page_draws_the_lab_and_shows_a_power_off_live(lab: PlanFacts, web: str, tmp_path: Path) -> None:
    reason = chromium_problem()
    if reason:
        pytest.skip(reason)
    # the JSON endpoint parses and names every node and link of the lab
    state = wait_lab_settled(web)
    nodes = [n for n in node_states(state) if n != LAB_WIDE]
    assert sorted(nodes) == sorted(lab.nodes)
    assert all(node_states(state)[s] == "up" for s in SRXS), state["nodes"]
    sessions = {n["name"]: n["sessions"] for n in state["nodes"] if n["name"] in SRXS}
    assert all(isinstance(count, int) and count >= 0 for count in sessions.values()), sessions
    assert {(link["a"], link["b"]) for link in state["links"]} >= {("mx1", s) for s in SRXS}
    assert {m["name"] for m in state["members"]} == {"MNHA_SRX1", "MNHA_SRX3"}  # topology3: TLB per pair
    assert json.loads(get(web + "/layout.json"))["nodes"]
    with Chromium() as browser:
        browser.open(web + "/")
        drawn, _ = browser.wait_for("Array.from(document.querySelectorAll('g.node[data-state]'))"
                                    ".map(g => g.dataset.node)", timeout=30)
        assert sorted(set(drawn)) == sorted(lab.nodes)
        assert browser.evaluate(STATE_OF.format(node="srx2")) == "up"
        assert browser.evaluate("document.querySelectorAll('#nodes tbody tr').length") == len(state["nodes"])
        shot = browser.screenshot(tmp_path / "live-web.png")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
        page_loads = browser.evaluate("performance.getEntriesByType('navigation').length")
        try:
            returned = power_off_srx2()
            _, _ = browser.wait_for(STATE_OF.format(node="srx2") + " === 'failed'",
                                    timeout=max(0.0, SHOWN_WITHIN_S - (time.monotonic() - returned)))
            assert browser.evaluate(STATE_OF.format(node="srx1")) == "up"
            # the page was updated in place (server-sent events), not reloaded
            assert browser.evaluate("performance.getEntriesByType('navigation').length") == page_loads
            links_down = browser.evaluate("document.querySelectorAll('line.link.down').length")
            assert links_down >= 3, "srx2's trust, untrust and ICL links are drawn down"
            browser.screenshot(tmp_path / "live-web-srx2-failed.png")
        finally:
            restore_srx2()
        browser.wait_for(STATE_OF.format(node="srx2") + " !== 'failed'", timeout=15)
    assert node_states(json.loads(get(web + "/state.json")))["srx2"] != "failed"


def top_rows(screen: str) -> dict[str, str]:
    """node -> its state column, from the node table of `lab top` on the screen (rich's box lines; the
    selector member table has four columns, the events table five, the node table seven)."""
    rows = {}
    for line in screen.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)][1:-1]
        if len(cells) == 7 and cells[0] in SRXS + ("mx1",):
            rows[cells[0]] = cells[2]
    return rows


def power_offs(screen: str) -> int:
    """Rows of the recent events table naming srx2's power-off."""
    return sum(1 for line in screen.splitlines() if "srx-power-off" in line and "srx2" in line)


def test_top_in_tmux_shows_every_srx_and_a_power_off_live(lab: PlanFacts) -> None:
    reason = tmux_problem()
    if reason:
        pytest.skip(reason)
    with Tmux(lab_argv("top", NAME), width=150, height=60, cwd=REPO) as pane:
        before, _ = pane.wait_for(lambda s: all(top_rows(s).get(x) == "up" for x in SRXS), timeout=30)
        try:
            returned = power_off_srx2()
            screen, _ = pane.wait_for(lambda s: top_rows(s).get("srx2") == "failed",
                                      timeout=max(0.0, SHOWN_WITHIN_S - (time.monotonic() - returned)))
            assert top_rows(screen)["srx1"] == "up"
            pane.wait_for(lambda s: power_offs(s) == power_offs(before) + 1, timeout=5)  # in the recent events
            # restore through the keys: asked for the node, then for a confirmation; "n" does nothing
            pane.keys("r")
            pane.keys("-l", "srx2")
            pane.keys("Enter")
            pane.wait_for(lambda s: "restore srx2? y/N" in s, timeout=5)
            pane.keys("n")
            pane.wait_for(lambda s: "cancelled" in s, timeout=5)
            time.sleep(1.0)  # (nothing may happen: give it the time to go wrong)
            assert top_rows(pane.screen()).get("srx2") == "failed"
            pane.keys("r")
            pane.keys("-l", "srx2")
            pane.keys("Enter")
            pane.wait_for(lambda s: "restore srx2? y/N" in s, timeout=5)
            pane.keys("y")
            pane.wait_for(lambda s: top_rows(s).get("srx2") not in (None, "failed"), timeout=30)
            pane.wait_for(lambda s: "srx2 powered on" in s, timeout=30)
        finally:
            restore_srx2()  # (nothing left to do when the keys did it)
        pane.keys("q")
        deadline = time.monotonic() + 10
        while not pane.dead() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pane.dead(), "q did not quit lab top:\n" + pane.screen()
