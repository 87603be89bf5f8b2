"""bench/tcp_cps.py (with tcp_wrk.py and cpu_window.py) without namespaces: nginx's configuration, the
client's source spread, wrk's counts read back (one connection per request, or an error), the profile's
split and the table's ratios per tool."""

from __future__ import annotations

import argparse
import http.server
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from benchmod import load

tcp_cps = load("tcp_cps")
import cpu_window  # noqa: E402 (bench/, on the path above)
import tcp_wrk  # noqa: E402

WRK_OUT = """Running 5s test @ http://203.0.113.9:8080/
  2 threads and 256 connections
Requests/sec:  10000.00
{"requests": 50000, "duration_us": 5000000, "connect": 1, "read": 2, "write": 3, "status": 4, "timeout": 5}
"""


def test_nginx_answers_one_byte_and_closes(tmp_path: Path) -> None:
    conf = tcp_wrk.nginx_config(tmp_path, "203.0.113.9", 2)
    assert "keepalive_timeout 0;" in conf
    assert 'return 200 "x";' in conf
    assert "listen 203.0.113.9:8080 " in conf
    assert "worker_processes 2;" in conf
    assert f"pid {tmp_path / 'nginx.pid'};" in conf
    assert "access_log off;" in conf
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        assert f"{kind}_temp_path {tmp_path / kind};" in conf


def test_the_spread_gives_every_host_address_of_the_sources_in_turn() -> None:
    rules = tcp_wrk.spread_rules("203.0.113.9")
    assert "ip daddr 203.0.113.9 tcp dport 8080 snat to numgen inc mod 4094 map {" in rules
    assert "0 : 100.64.0.1," in rules and "4093 : 100.64.15.254 }" in rules


def test_wrk_counts_become_a_row() -> None:
    row = tcp_wrk.wrk_result(WRK_OUT, accepted=50100)
    assert row["completed"] == 49996
    assert row["cps"] == pytest.approx(9999.2)
    assert (row["reset"], row["failed"], row["timed_out"], row["status_errors"]) == (5, 1, 5, 4)


def test_fewer_connections_than_requests_is_not_a_cps_run() -> None:
    with pytest.raises(tcp_wrk.BenchError, match="reused connections"):
        tcp_wrk.wrk_result(WRK_OUT, accepted=1000)


def test_wrk_without_counts_is_an_error() -> None:
    with pytest.raises(tcp_wrk.BenchError, match="no counts"):
        tcp_wrk.wrk_result("unable to connect to 203.0.113.9:8080 Connection refused\n", accepted=0)


def test_the_report_compares_each_tool_with_its_own_plain_routing() -> None:
    def row(cps: float) -> dict[str, object]:
        return {"cps": cps, "completed": int(cps * 5), "reset": 0, "failed": 0, "timed_out": 0, "retried": 0,
                "accepted": int(cps * 5), "busy_cpus": 2.0, "cps_per_cpu": cps / 2}

    rows = [("plain routing (client, router, server)", "tcpload", row(10000.0)),
            ("plain routing (client, router, server)", "wrk", row(20000.0)),
            ("plain routing, 5 routers in a row", "tcpload", row(8000.0)),
            ("topology3 (MX, SRX)", "tcpload", row(5000.0)),
            ("topology3 (MX, SRX)", "wrk", row(5000.0))]
    args = argparse.Namespace(labs=["topology3"], tools=["tcpload", "wrk"], seconds=5, rate=20000.0,
                              wrk_threads=2, wrk_connections=256, nginx_workers=2, long=0, long_interval=1.0,
                              long_open_rate=1000.0, long_seconds=30.0, hops=5,
                              profile=False)
    lines = tcp_cps.report(rows, None, args).splitlines()
    # against its own plain routing, and (tcpload) against routing through as many routers as the lab's path
    assert any(x.startswith("| topology3 (MX, SRX) | tcpload | 5000 | 0.50 | ≥ 0.8 | 0.62 | 2.00 | 2500 |")
               for x in lines)
    assert any(x.startswith("| topology3 (MX, SRX) | wrk | 5000 | 0.25 | ≥ 0.8 | - | 2.00 | 2500 |") for x in lines)
    assert any(x.startswith("| plain routing, 5 routers in a row | tcpload | 8000 | 0.80 | - | - |") for x in lines)


class _OneByte(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (the handler's own name)
        self.send_response(200)
        self.send_header("Content-Length", "1")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"x")
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


def test_wrk_runs_the_report_script_and_its_counts_are_read(tmp_path: Path) -> None:
    wrk = shutil.which("wrk")
    if wrk is None:
        pytest.skip("wrk is not installed (Debian package wrk)")
    script = tmp_path / "report.lua"
    script.write_text(tcp_wrk.WRK_REPORT)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OneByte)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = subprocess.run([wrk, "-t", "1", "-c", "2", "-d", "1s", "-H", "Connection: close", "-s", str(script),
                              f"http://127.0.0.1:{server.server_address[1]}/"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    finally:
        server.shutdown()
        server.server_close()
    row = tcp_wrk.wrk_result(out, accepted=10**9)
    assert row["completed"] > 0 and row["failed"] == 0


def test_a_profile_is_split_by_process_and_by_kernel_area(monkeypatch: pytest.MonkeyPatch) -> None:
    reports = {"comm": [(40.0, "wrk"), (20.0, "ksoftirqd/0"), (10.0, "ksoftirqd/1"), (30.0, "swapper")],
               "sym": [(30.0, "[k] pv_native_safe_halt"), (25.0, "[k] nf_conntrack_in"),
                       (5.0, "[k] ctnetlink_fill_info"), (20.0, "[.] 0x0000000000001234"),
                       (10.0, "[k] nft_do_chain"), (6.0, "[k] tcp_v4_rcv"),
                       (4.0, "[k] something_else")]}
    monkeypatch.setattr(cpu_window, "perf_report", lambda path, sort: reports[sort])
    found = cpu_window.read_profile(Path("perf.data"))
    assert found["comm"][:2] == [("wrk", 40.0), ("ksoftirqd", 30.0)]
    assert dict(found["areas"]) == {"idle": 30.0, "conntrack, NAT": 25.0, "user space": 20.0, "nftables rules": 10.0,
                                    "TCP, sockets, syscalls": 6.0, "conntrack events, netlink (session sync)": 5.0,
                                    "other kernel": 4.0}
    assert found["top"][0] == (25.0, "nf_conntrack_in")  # idle is no kernel function of the load
    lines = cpu_window.profile_tables([("topology3 (MX, SRX) | wrk", found)])
    assert "| topology3 (MX, SRX) | wrk | 20 % | 5 % | 25 % | 10 % | 6 % | 0 % | 4 % | 30 % |" in lines
