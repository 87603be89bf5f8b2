"""The screenshots of docs/live-view.md, from a real run: topology3 up, traffic, srx2 powered off.

`lab web` is loaded in headless Chromium and photographed; `lab top` runs in a tmux pane whose screen
(with its colours) is turned into SVG by rich and photographed by the same Chromium. Needs root, Chromium
and tmux (make deps). Writes docs/img/live-web.png and docs/img/live-top.png.

    python3 bench/live_screenshots.py [--lab topology3] [--out docs/img]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from headless import Chromium, Tmux, chromium_problem, tmux_problem  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.text import Text  # noqa: E402

from bench.common import logger  # noqa: E402

LAB = [sys.executable, "-m", "lab_orchestrator.cli"]
log = logger("live-screenshots")


def lab(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*LAB, *args], cwd=ROOT, capture_output=True, text=True, timeout=180)
    if check and result.returncode != 0:
        raise SystemExit(f"lab {' '.join(args)} failed (exit {result.returncode}):\n{result.stderr}")
    return result


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def terminal_png(screen: str, width: int, browser: Chromium, out: Path, title: str) -> None:
    """A terminal screen (ANSI colours) drawn as rich's SVG terminal, photographed by Chromium."""
    console = Console(record=True, width=width, file=open("/dev/null", "w"), force_terminal=True,  # noqa: SIM115
                      color_system="truecolor")
    console.print(Text.from_ansi(screen.rstrip("\n")), soft_wrap=True)
    svg = console.export_svg(title=title)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "top.html"
        page.write_text(f"<!doctype html><html><body style='margin:0;background:#fff'>{svg}</body></html>")
        browser.open(page.as_uri())
        browser.wait_for("document.querySelector('svg') !== null", timeout=10)
        browser.screenshot(out, selector="svg")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab", default="topology3", help="shipped lab or topology file")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    for problem in (chromium_problem(), tmux_problem()):
        if problem:
            raise SystemExit(problem)
    args.out.mkdir(parents=True, exist_ok=True)
    log(f"lab up {args.lab}")
    up = lab("up", args.lab, "--json")
    name = str(json.loads(up.stdout)["name"])
    web: subprocess.Popen[str] | None = None
    failed = False
    try:
        lab("traffic", "start", "--lab", name, "--flows", "200", "--rate", "2000", "--duration", "60")
        port = free_port()
        web = subprocess.Popen([*LAB, "web", name, "--port", str(port)], cwd=ROOT, text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "state.json", timeout=5).read()  # noqa: S310 - loopback
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("lab web did not answer") from None
                time.sleep(0.2)
        with Chromium(width=1360, height=700) as browser, Tmux([*LAB, "top", name], width=118, height=42,
                                                             cwd=ROOT) as pane:
            browser.open(base)
            browser.wait_for("document.querySelectorAll('g.node[data-state]').length > 0", timeout=30)
            log("traffic for 12 s (the sparklines fill)")
            time.sleep(12)
            log(f"lab fail {name} srx2 srx-power-off")
            lab("fail", "--lab", name, "srx2", "srx-power-off")
            failed = True
            browser.wait_for("document.querySelector('g.node[data-node=\"srx2\"]').dataset.state === 'failed'",
                             timeout=10)
            pane.wait_for(lambda s: "failed" in s, timeout=10)
            time.sleep(4)  # a few seconds of the moved traffic in the sparklines
            browser.screenshot(args.out / "live-web.png")
            log(f"wrote {args.out / 'live-web.png'}")
            terminal_png(pane.screen(colours=True), 118, browser, args.out / "live-top.png", f"lab top {name}")
            log(f"wrote {args.out / 'live-top.png'}")
    finally:
        if failed:
            lab("restore", "--lab", name, "srx2", check=False)
        lab("traffic", "stop", "--lab", name, check=False)
        if web is not None:
            web.terminate()
            web.wait(10)
        lab("down", "--lab", name, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
