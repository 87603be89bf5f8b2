"""Drive the host's Chromium and tmux for the live-view tests (and the docs' screenshots), no extra package.

Chromium is driven through the DevTools protocol over `--remote-debugging-pipe` (JSON messages ended by a
NUL byte on file descriptors 3 and 4: Chromium reads commands from 3 and writes answers to 4), which needs
no websocket client and opens no port. tmux runs on a socket of its own, so the tests never touch a user's
tmux server.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import queue
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


@functools.cache
def chromium_path() -> str | None:
    """The first Chromium that runs. On Ubuntu 22.04+ the `chromium` package is a wrapper for the snap,
    which fails where snapd is absent (a chroot, a container): found on the PATH but not a browser."""
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p and _runs(p)), None)


def _runs(path: str) -> bool:
    try:
        done = subprocess.run([path, "--headless", "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and ("Chromium" in done.stdout or "Chrome" in done.stdout)


def chromium_problem() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if chromium_path() is None:
        found = [p for p in map(shutil.which, CHROMIUM_NAMES) if p]
        if found:
            return (f"{found[0]} does not run as a browser (Ubuntu's chromium package needs the snap and "
                    f"snapd): install the chromium snap or Google Chrome")
        return "needs Chromium for the headless browser check (Debian package chromium: make deps)"
    return None


def tmux_problem() -> str | None:
    if shutil.which("tmux") is None:
        return "needs tmux to drive `lab top` in a terminal (Debian package tmux: make deps)"
    return None


class BrowserError(RuntimeError):
    pass


class Chromium:
    """A headless Chromium with one page, spoken to over the DevTools pipe."""

    def __init__(self, width: int = 1400, height: int = 820):
        path = chromium_path()
        if path is None:
            raise BrowserError(chromium_problem() or "no Chromium")
        self.profile = tempfile.mkdtemp(prefix="lab-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds() -> None:  # in the child: its fd 3 reads our commands, its fd 4 writes its answers
            reads, writes = os.dup(to_browser_r), os.dup(from_browser_w)  # above 4: dup2 cannot be a no-op
            os.dup2(reads, 3)
            os.dup2(writes, 4)

        argv = [path, "--headless", "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
                "--no-sandbox",  # tests run as root, where Chromium's sandbox refuses to start
                "--disable-gpu", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
                f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=fds,
                                     close_fds=False)  # only fds 3 and 4 are inheritable (PEP 446)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next = 0
        self._lock = threading.Lock()
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = {}
        threading.Thread(target=self._reader, name="chromium-pipe", daemon=True).start()
        self.session = ""
        target = self.call("Target.createTarget", {"url": "about:blank"}, timeout=30)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _reader(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_browser, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                waiting = self._answers.get(message.get("id", -1))
                if waiting is not None:
                    waiting.put(message)
        for waiting in list(self._answers.values()):  # the browser went away: wake every caller
            waiting.put({"error": {"message": "Chromium closed its DevTools pipe"}})

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 20.0) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            ident = self._next
            answer: queue.Queue[dict[str, Any]] = queue.Queue()
            self._answers[ident] = answer
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        try:
            reply = answer.get(timeout=timeout)
        except queue.Empty:
            raise BrowserError(f"Chromium did not answer {method} within {timeout} s") from None
        finally:
            self._answers.pop(ident, None)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message')}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def open(self, url: str) -> None:
        answer = self.call("Page.navigate", {"url": url})
        if answer.get("errorText"):
            raise BrowserError(f"cannot load {url}: {answer['errorText']}")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able)."""
        answer = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression}: {answer['exceptionDetails'].get('text')}")
        return answer.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float, interval: float = 0.05) -> tuple[Any, float]:
        """Poll EXPRESSION until it is truthy: (its value, seconds it took); BrowserError after TIMEOUT."""
        started = time.monotonic()
        value: Any = None
        while True:
            value = self.evaluate(expression)
            if value:
                return value, time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise BrowserError(f"after {timeout} s still false: {expression} (last: {value!r})")
            time.sleep(interval)

    def screenshot(self, path: Path, selector: str | None = None) -> Path:
        """A PNG of the page (or of the element SELECTOR only) into PATH."""
        params: dict[str, Any] = {"format": "png"}
        if selector is not None:
            box = self.evaluate(f"(r => [r.x, r.y, r.width, r.height])(document.querySelector({selector!r})"
                                ".getBoundingClientRect())")
            params.update(clip={"x": box[0], "y": box[1], "width": box[2], "height": box[3], "scale": 1},
                          captureBeyondViewport=True)
        data = self.call("Page.captureScreenshot", params, timeout=30)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with contextlib.suppress(BrowserError):
            self.call("Browser.close", timeout=5)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Tmux:
    """One detached tmux session on a private server socket, running one command."""

    def __init__(self, command: list[str], width: int = 150, height: int = 40, cwd: Path | None = None,
                 env: dict[str, str] | None = None):
        self.socket = f"lab-test-{os.getpid()}-{time.monotonic_ns()}"
        self.name = "live"
        environment = [f"{k}={v}" for k, v in (env or {}).items()]
        args = ["new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height)]
        for item in environment:
            args += ["-e", item]
        # the pane's program must size itself from the pane: without a terminal of its own, the tmux client
        # passes COLUMNS=80 / LINES=24 into the new session's environment, which rich would believe
        self._tmux(*args, shlex.join(["env", "-u", "COLUMNS", "-u", "LINES", *command]), cwd=cwd)
        self._tmux("set-option", "-t", self.name, "remain-on-exit", "on")

    def _tmux(self, *args: str, cwd: Path | None = None) -> str:
        result = subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True,
                                text=True, timeout=15, cwd=cwd)
        if result.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def screen(self, colours: bool = False) -> str:
        """What the pane shows now (with colours: ANSI escapes kept)."""
        return self._tmux("capture-pane", "-p", *(["-e"] if colours else []), "-t", self.name)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.name, *keys)

    def dead(self) -> bool:
        return self._tmux("display-message", "-p", "-t", self.name, "#{pane_dead}").strip() == "1"

    def wait_for(self, predicate: Any, timeout: float, interval: float = 0.05) -> tuple[str, float]:
        """Poll the screen until PREDICATE(screen) holds: (the screen, seconds it took)."""
        started = time.monotonic()
        while True:
            text = self.screen()
            if predicate(text):
                return text, time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise AssertionError(f"after {timeout} s the terminal shows:\n{text}")
            time.sleep(interval)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=15)

    def __enter__(self) -> Tmux:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
