"""Connections per second with a well-kept HTTP tool: Debian's wrk against Debian's nginx, each in a
namespace, one TCP connection per request (nginx answers a 1-byte body and closes: keepalive_timeout 0;
wrk sends `Connection: close`), checked from the connections the server's kernel accepted."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

from common import ROOT, BenchError, logger, wait_for
from cpu_window import per_cpu, window

log = logger("tcp")
SOURCES = IPv4Network("100.64.0.0/20")
HTTP_PORT = 8080


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def passive_opens(ns_cmd: list[str]) -> int:
    """The TCP connections a namespace's kernel accepted so far (TcpPassiveOpens of /proc/net/snmp)."""
    text = subprocess.run([*ns_cmd, "cat", "/proc/net/snmp"], capture_output=True, text=True, check=True).stdout
    names, values = (line.split()[1:] for line in text.splitlines() if line.startswith("Tcp:"))
    return int(values[names.index("PassiveOpens")])


def nginx_config(work: Path, bind: str, workers: int) -> str:
    """nginx answering every request with a 1-byte body and closing the connection after it
    (keepalive_timeout 0: `Connection: close`); no log, every path in WORK."""
    temp = "\n".join(f"  {kind}_temp_path {work / kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                         "uwsgi", "scgi"))
    return f"""daemon off;
worker_processes {workers};
pid {work / 'nginx.pid'};
error_log {work / 'error.log'} warn;
events {{ worker_connections 16384; }}
http {{
  access_log off;
{temp}
  keepalive_timeout 0;
  server {{
    listen {bind}:{HTTP_PORT} backlog=4096;
    location / {{ default_type text/plain; return 200 "x"; }}
  }}
}}
"""


# wrk prints its own summary, then (this script) one JSON line with the counts
WRK_REPORT = """done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests": %d, "duration_us": %d, "connect": %d, "read": %d, "write": %d, '
    .. '"status": %d, "timeout": %d}\\n', summary.requests, summary.duration, e.connect, e.read, e.write,
    e.status, e.timeout))
end
"""


def spread_rules(daddr: str) -> str:
    """Source NAT of the client's connections to DADDR's HTTP port over SOURCES, one address after the
    other (numgen), as the lab's generator binds one source address per connection."""
    hosts = [str(a) for a in SOURCES.hosts()]
    pairs = ", ".join(f"{i} : {a}" for i, a in enumerate(hosts))
    return ("table ip tcpbench {\n  chain spread {\n    type nat hook postrouting priority srcnat; policy accept;\n"
            f"    ip daddr {daddr} tcp dport {HTTP_PORT} snat to numgen inc mod {len(hosts)} map {{ {pairs} }}\n"
            "  }\n}\n")


def wrk_result(out: str, accepted: int) -> dict[str, Any]:
    """wrk's counts (the JSON line of WRK_REPORT) as the figures of a row: completed (answered, status
    2xx/3xx), reset (read and write errors: a reset connection), failed (connect errors), timed out."""
    line = next((x for x in reversed(out.splitlines()) if x.startswith("{")), None)
    if line is None:
        raise BenchError(f"wrk printed no counts: {out.strip()[-400:]}")
    counts = json.loads(line)
    completed = counts["requests"] - counts["status"]
    seconds = counts["duration_us"] / 1e6
    if counts["requests"] and accepted < counts["requests"]:
        raise BenchError(f"the server accepted {accepted} connections for {counts['requests']} requests: "
                         "wrk reused connections, not one per request")
    return {"cps": completed / seconds if seconds else 0.0, "completed": completed,
            "reset": counts["read"] + counts["write"], "failed": counts["connect"], "timed_out": counts["timeout"],
            "retried": "-", "status_errors": counts["status"], "seconds": round(seconds, 3), "accepted": accepted}


def wrk_cps(server_cmd: list[str], client_cmd: list[str], bind: str, seconds: float, threads: int,
            connections: int, workers: int, profile: Path | None = None, spread: bool = True) -> dict[str, Any]:
    """nginx in the server namespace, wrk in the client's (with the source spread while it runs, unless
    not SPREAD: then every connection comes from the client's own address)."""
    with tempfile.TemporaryDirectory(prefix="tcpb-http-") as tmp:
        work = Path(tmp)
        (work / "nginx.conf").write_text(nginx_config(work, bind, workers))
        (work / "report.lua").write_text(WRK_REPORT)
        (work / "spread.nft").write_text(spread_rules(bind))
        nginx = subprocess.Popen([*server_cmd, "nginx", "-c", str(work / "nginx.conf"), "-e", str(work / "error.log")],
                                 cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for("nginx to listen", lambda: (work / "nginx.pid").exists() or nginx.poll() is not None, 20)
            if nginx.poll() is not None:
                error = (work / "error.log").read_text() if (work / "error.log").exists() else ""
                raise BenchError(f"nginx exited {nginx.returncode}: {(nginx.communicate()[1] + error).strip()[-400:]}")
            if spread:
                sh(*client_cmd, "nft", "-f", str(work / "spread.nft"))
            before = passive_opens(server_cmd)
            cpu = window(seconds, profile)
            run = subprocess.run([*client_cmd, "wrk", "-t", str(threads), "-c", str(connections),
                                  "-d", f"{seconds:g}s", "--timeout", "3s", "-H", "Connection: close",
                                  "-s", str(work / "report.lua"), f"http://{bind}:{HTTP_PORT}/"],
                                 cwd=ROOT, capture_output=True, text=True)
            figures = cpu.figures()
            accepted = passive_opens(server_cmd) - before
            if run.returncode != 0:
                raise BenchError(f"wrk exited {run.returncode}: {(run.stderr or run.stdout).strip()[-400:]}")
        finally:
            subprocess.run([*client_cmd, "nft", "delete", "table", "ip", "tcpbench"], capture_output=True)
            if nginx.poll() is None:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int((work / "nginx.pid").read_text()), signal.SIGTERM)
                try:
                    nginx.wait(10)
                except subprocess.TimeoutExpired:
                    nginx.kill()
                    nginx.wait(5)
    result = wrk_result(run.stdout, accepted)
    result.update(figures)
    per_cpu(result)
    log(f"wrk {result}")
    return result
