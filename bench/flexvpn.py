#!/usr/bin/env python3
"""FlexVPN load balancer benchmark: redirects, IKE SA setups vs strongSwan, HSRP failover,
CLB member-loss detection. Needs root; only touches labs named flexb* that it brings up (and takes
down again in a finally block).

  1. Redirects per second answered by the cluster master: a client namespace sends IKE_SA_INITs with
     REDIRECT_SUPPORTED to the VIP (a window of requests in flight, each a fresh SPI and nonce) and counts the
     REDIRECT answers; the master's CPU time per redirect from /proc.
  2. Full IKE SA setups per second of one gateway (router3, directly) and of a strongSwan 5.9 responder (charon, the
     lab's key, `wan` namespace), both driven by the same Python initiator and proposal (aes256-sha256-ecp256),
     alternately in one run: IKE SA only, and IKE SA + CHILD_SA + address. Goal: at least 0.5 of strongSwan.
  3. HSRP failover: power off the Active router (SIGKILL + links down), time until the Standby's daemon reports Active
     (its own state-change time) and the VIP's outage seen by a 10 ms ping, timers 3 s / 10 s (default) and 1 s / 3 s.
  4. CLB member loss: a member's LAN link goes down (silently: no FIN reaches the master), time until the master drops
     it, with holdtime 3000 msec (hello 1000) and 1000 msec (hello 300).

Writes the figures with the machine and date to docs/benchmarks-flexvpn.md (--write).

  sudo python3 bench/flexvpn.py --write
  sudo python3 bench/flexvpn.py --quick
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from labkit.contracts import HSRP_STATUS, IKEV2_STATUS  # noqa: E402
from labkit.files import read_secret  # noqa: E402

STATE_ROOT = Path(os.environ.get("LAB_STATE_ROOT", "/run/lab"))
DOC = ROOT / "docs" / "benchmarks-flexvpn.md"
NOTES_MARKER = "<!-- notes below this line are kept when the benchmark rewrites this file -->"
VIP = "10.10.10.100"


def log(message: str) -> None:
    print(f"[flexvpn-bench] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ labs
def lab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab_orchestrator.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def free_mgmt() -> str:
    used = []
    for argv in (["ip", "-j", "-4", "route", "show", "table", "all"], ["ip", "-j", "-4", "addr"]):
        for item in json.loads(subprocess.run(argv, capture_output=True, text=True).stdout or "[]"):
            dst = item.get("dst")
            if dst and dst != "default":
                used.append(IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
            for addr in item.get("addr_info", []):
                used.append(IPv4Network(f"{addr['local']}/{addr['prefixlen']}", strict=False))
    for subnet in IPv4Network("10.253.0.0/16").subnets(new_prefix=24):
        if subnet.network_address.packed[2] and not any(subnet.overlaps(n) for n in used):
            return str(subnet)
    raise RuntimeError("no free management subnet")


@contextmanager
def running(name: str, edit: Callable[[str], str], tmp: Path) -> Iterator[str]:
    text = edit((ROOT / "labs/flexvpn.yml").read_text())
    text = re.sub(r"(?m)^name:.*$", f"name: {name}", text, count=1) + f"\naddressing:\n  mgmt: {free_mgmt()}\n"
    path = tmp / f"{name}.yml"
    path.write_text(text)
    if (STATE_ROOT / name).exists():
        raise RuntimeError(f"lab {name} exists already; not touching it")
    result = lab("up", str(path))
    try:
        if result.returncode != 0:
            raise RuntimeError(f"lab up {name} failed: {result.stderr}")
        yield name
    finally:
        lab("down", "--lab", name)


def status(name: str, node: str, file: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((STATE_ROOT / name / "nodes" / node / file).read_text())
    return data


def hsrp_state(name: str, node: str) -> str:
    try:
        return str(status(name, node, HSRP_STATUS)["groups"][0]["state"])
    except (OSError, ValueError, KeyError):
        return "?"


def wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if check():
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timeout waiting for {what}")


def members(name: str, master: str) -> set[str]:
    cluster = status(name, master, IKEV2_STATUS)["cluster"]
    return {r["address"] for r in cluster.get("rows", []) if r["role"] == "Slave"}


def elected(name: str, timeout: float = 60) -> None:
    wait(lambda: [hsrp_state(name, n) for n in ("router1", "router2", "router3")] == ["Active", "Standby", "Listen"],
         timeout, "HSRP election")
    wait(lambda: len(members(name, "router1")) == 2, 15, "cluster members")


def netns(name: str, node: str, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", f"{name}-{node}", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid: int) -> tuple[float, float]:
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss"):
            values[key] = int(rest.split()[0]) / 1024
    return values.get("Rss", 0.0), values.get("Pss", 0.0)


# ------------------------------------------------------------------------------------------ 1. redirects
def redirect_load(target: str, bind: str, count: int, window: int) -> dict[str, Any]:
    """(Runs inside the client namespace.) Send COUNT IKE_SA_INITs, WINDOW in flight; count REDIRECTs."""
    import select

    from dataplane.ikev2 import codec, crypto, iana

    proposal = crypto.ike_proposal(crypto.Suite(iana.ENCR_AES_CBC, 256, iana.PRF_HMAC_SHA2_256,
                                                iana.AUTH_HMAC_SHA2_256_128, 19))
    messages = []
    for _ in range(count):
        header = codec.Header(os.urandom(8), bytes(8), iana.SA, iana.IKE_SA_INIT, iana.FLAG_INITIATOR, 0)
        messages.append(codec.encode(header, [codec.SaPayload((proposal,)), codec.KePayload(19, os.urandom(64)),
                                              codec.NoncePayload(os.urandom(32)),
                                              codec.NotifyPayload(iana.REDIRECT_SUPPORTED)]))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((bind, 0))
    sock.setblocking(False)
    sent = answered = redirects = 0
    start = time.perf_counter()
    for _ in range(min(window, count)):
        sock.sendto(messages[sent], (target, 500))
        sent += 1
    last = time.monotonic()
    while answered < sent and time.monotonic() - last < 1.0:
        ready, _, _ = select.select([sock], [], [], 0.2)
        if not ready:
            continue
        while True:
            try:
                data = sock.recv(2048)
            except BlockingIOError:
                break
            answered += 1
            last = time.monotonic()
            if b"\x40\x17" in data[28:]:  # a REDIRECT notify type in the answer
                redirects += 1
            if sent < count:
                sock.sendto(messages[sent], (target, 500))
                sent += 1
    elapsed = time.perf_counter() - start
    return {"sent": sent, "answered": answered, "redirects": redirects, "seconds": elapsed,
            "per_second": answered / elapsed if elapsed else 0}


def bench_redirects(tmp: Path, count: int) -> dict[str, Any]:
    """The master itself is made "the most loaded member" as the seed advises (router1: max-session 100,
    filled with 34 sessions = 102 SAs), so that every request is redirected to router2 or router3."""

    def edit(text: str) -> str:
        text = text.replace("name: group1}}", "name: group1, hello_ms: 1000, hold_ms: 3000}}")
        text = text.replace("max_session: 10}", "max_session: 100}", 1)
        return text.replace("max_session: 10}", "max_session: 100000}")

    with running("flexb", edit, tmp) as name:
        elected(name, 30)
        filled = netns(name, "client2", sys.executable, "-m", "dataplane.ikev2.client", "--psk-file", psk_file(name),
                       "--gateway", "10.10.10.1", "--bind", "10.10.20.7", "--count", "34", "--no-delete", "--summary")
        log(f"master filled: {filled.stdout.strip()}")
        wait(lambda: status(name, "router1", IKEV2_STATUS)["cluster"]["rows"][0]["code"] == "-", 10,
             "the master overloaded")
        pid = int(status(name, "router1", IKEV2_STATUS)["pid"])
        runs = []
        for _ in range(3):
            before = cpu_seconds(pid)
            out = netns(name, "client1", sys.executable, str(ROOT / "bench/flexvpn.py"), "_redirects", "--target",
                        VIP, "--bind", "10.10.20.6", "--count", str(count), "--window", "32")
            result = json.loads(out.stdout)
            result["master_cpu_ms_per_redirect"] = (cpu_seconds(pid) - before) * 1000 / max(1, result["redirects"])
            runs.append(result)
            log(f"redirects: {result['per_second']:.0f}/s ({result['redirects']}/{result['sent']})")
            time.sleep(11)  # the pending redirects (10 s) fade before the next run
        rss, pss = memory(pid)
        return {"runs": runs, "rss_mib": rss, "pss_mib": pss,
                "median_per_second": statistics.median(r["per_second"] for r in runs)}


# ------------------------------------------------------------------------------------------ 2. setups
def psk_file(name: str) -> str:  # the lab's pre-shared key (drawn at random by `lab up`)
    return str(STATE_ROOT / name / "nodes" / "router1" / "psk.secret.json")


def client_run(name: str, gateway: str, count: int, concurrency: int, child: bool) -> dict[str, Any]:
    extra = ["--psk-file", psk_file(name)] + ([] if child else ["--no-child", "--no-address"])
    out = netns(name, "client1", sys.executable, "-m", "dataplane.ikev2.client", "--gateway", gateway, "--bind",
                "10.10.20.6", "--port", "0", "--count", str(count), "--concurrency", str(concurrency), "--summary",
                "--no-redirect", "--timeout", "2", *extra)
    if not out.stdout.strip():
        raise RuntimeError(f"client failed: {out.stderr[-500:]}")
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def bench_setups(tmp: Path, count: int, rounds: int) -> dict[str, Any]:
    from dataplane.ikev2 import swan

    problem = swan.available()
    if problem:
        return {"skipped": problem}
    edit: Callable[[str], str] = lambda t: t.replace("max_session: 10}", "max_session: 100000}").replace(  # noqa: E731
        "name: group1}}", "name: group1, hello_ms: 1000, hold_ms: 3000}}").replace(
        "pool: 172.16.3.0/24", "pool: 172.18.0.0/16")
    results: dict[str, Any] = {}
    with running("flexb2", edit, tmp) as name:
        elected(name, 30)
        ours_pid = int(status(name, "router3", IKEV2_STATUS)["pid"])
        peer = swan.responder(f"{name}-wan", tmp / "swan-responder", "10.10.20.1", read_secret(psk_file(name), "psk"),
                              pool="172.31.0.0/16")
        peer.start()
        try:
            assert peer.process is not None
            swan_pid = peer.process.pid
            for child in (False, True):
                key = "ike_and_child" if child else "ike_only"
                rows: dict[str, list[dict[str, Any]]] = {"ours": [], "strongswan": []}
                for _ in range(rounds):
                    for who, gateway, pid in (("ours", "10.10.10.3", ours_pid), ("strongswan", "10.10.20.1", swan_pid)):
                        before = cpu_seconds(pid)
                        data = client_run(name, gateway, count, 32, child)
                        data["responder_cpu_ms_per_setup"] = (cpu_seconds(pid) - before) * 1000 / max(1, data["ok"])
                        rows[who].append(data)
                        log(f"setups {key} {who}: {data['per_second']}/s ok {data['ok']}/{data['count']} "
                            f"{data['errors']}")
                        time.sleep(1)
                ours = statistics.median(r["per_second"] for r in rows["ours"])
                theirs = statistics.median(r["per_second"] for r in rows["strongswan"])
                results[key] = {"ours_per_second": ours, "strongswan_per_second": theirs,
                                "ratio": ours / theirs if theirs else None, "runs": rows,
                                "ours_cpu_ms": statistics.median(r["responder_cpu_ms_per_setup"] for r in rows["ours"]),
                                "strongswan_cpu_ms": statistics.median(r["responder_cpu_ms_per_setup"]
                                                                       for r in rows["strongswan"])}
            results["ours_rss_mib"], results["ours_pss_mib"] = memory(ours_pid)
        finally:
            peer.stop()
    return results


# ------------------------------------------------------------------------------------------ 3. failover
def power(name: str, node: str, on: bool) -> None:
    from lab_orchestrator.runtime import ops
    from lab_orchestrator.runtime.state import running_labs

    state = next(s for s in running_labs() if s.name == name)
    (ops.power_on if on else ops.power_off)(state, ops.load_plan(state), node)


def states_are(name: str, wanted: dict[str, str]) -> Callable[[], bool]:
    return lambda: all(hsrp_state(name, node) == state for node, state in wanted.items())


def ping_gaps(output: str) -> float:
    stamps = [float(m.group(1)) for m in re.finditer(r"^\[(\d+\.\d+)\] \d+ bytes from", output, re.M)]
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return max(gaps) if gaps else float("nan")


def bench_failover(tmp: Path, fast: bool, iterations: int) -> dict[str, Any]:
    def edit(text: str) -> str:
        return text.replace("name: group1}}", "name: group1, hello_ms: 1000, hold_ms: 3000}}") if fast else text

    hold = 3.0 if fast else 10.0
    runs = []
    with running("flexb3" if fast else "flexb4", edit, tmp) as name:
        elected(name, 60)
        active, standby = "router1", "router2"
        for _ in range(iterations):
            wait(states_are(name, {active: "Active", standby: "Standby"}), 60, "settled")
            time.sleep(1.0)
            ping = subprocess.Popen(["ip", "netns", "exec", f"{name}-client1", "ping", "-D", "-i", "0.01", "-W", "1",
                                     "-w", str(int(hold + 6)), VIP], stdout=subprocess.PIPE, text=True)
            time.sleep(1.0)
            cut = time.time()
            power(name, active, False)
            wait(states_are(name, {standby: "Active"}), hold + 5, "takeover")
            took = float(status(name, standby, HSRP_STATUS)["groups"][0]["last_change_at"]) - cut
            out, _ = ping.communicate(timeout=hold + 15)
            runs.append({"takeover_s": took, "vip_outage_s": ping_gaps(out)})
            log(f"failover ({'1/3' if fast else '3/10'} s): Active after {took:.2f} s, VIP outage "
                f"{runs[-1]['vip_outage_s']:.2f} s")
            power(name, active, True)
            active, standby = standby, active
    takeover = [r["takeover_s"] for r in runs]
    outage = [r["vip_outage_s"] for r in runs]
    return {"hello_s": 1.0 if fast else 3.0, "hold_s": hold, "runs": runs,
            "takeover_min": min(takeover), "takeover_mean": statistics.mean(takeover), "takeover_max": max(takeover),
            "outage_mean": statistics.mean(outage), "outage_max": max(outage)}


# ------------------------------------------------------------------------------------------ 4. CLB loss
def bench_member_loss(tmp: Path, hello_ms: int, hold_ms: int, iterations: int) -> dict[str, Any]:
    def edit(text: str) -> str:
        text = text.replace("name: group1}}", "name: group1, hello_ms: 1000, hold_ms: 3000}}")
        return text.replace("max_session: 10}", f"max_session: 10, hello_ms: {hello_ms}, holdtime_ms: {hold_ms}}}")

    runs = []
    with running(f"flexb{5 if hold_ms == 3000 else 6}", edit, tmp) as name:
        elected(name, 30)
        for _ in range(iterations):
            wait(lambda: "10.10.10.3" in members(name, "router1"), 20, "router3 in the cluster")
            time.sleep(hello_ms / 1000 * 1.5)
            cut = time.time()
            netns(name, "router3", "ip", "link", "set", "Et0-1", "down")
            wait(lambda: "10.10.10.3" not in members(name, "router1"), hold_ms / 1000 + 5, "member dropped")
            dropped = status(name, "router1", IKEV2_STATUS)["cluster"]["dropped"][-1]
            runs.append(float(dropped["at"]) - cut)
            log(f"member loss (hello {hello_ms} / hold {hold_ms} msec): dropped after {runs[-1]:.3f} s "
                f"({dropped['why']})")
            netns(name, "router3", "ip", "link", "set", "Et0-1", "up")
    return {"hello_ms": hello_ms, "holdtime_ms": hold_ms, "runs": runs, "min": min(runs),
            "mean": statistics.mean(runs), "max": max(runs)}


# ------------------------------------------------------------------------------------------ report
def machine() -> dict[str, str]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    found = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "strongswan-charon"], capture_output=True,
                           text=True)
    swan_version = f"strongSwan {found.stdout.strip()}" if found.returncode == 0 else "strongSwan not installed"
    return {"date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"), "cpu": model, "cores": str(os.cpu_count()),
            "kernel": platform.release(), "python": platform.python_version(), "strongswan": swan_version}


def report(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = ["# FlexVPN load balancer benchmarks", "",
             f"Measured by `bench/flexvpn.py` on {m['date']}: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}, "
             f"Python {m['python']}, {m['strongswan']}. Noisy shared machine: compare figures of the same run.", ""]
    r = results.get("redirects")
    if r:
        lines += ["## Redirects answered by the cluster master", "",
                  "IKE_SA_INIT with REDIRECT_SUPPORTED to the VIP, 32 in flight, each a fresh SPI and nonce; the "
                  "master answers N(REDIRECT) to the least-loaded member without any Diffie-Hellman. The master is "
                  "made the most loaded gateway first (as the seed advises: max-session 100 filled with 34 "
                  "sessions), so every request is redirected.", "",
                  "| run | requests | REDIRECT answers | per second | master CPU per redirect |",
                  "|---|---|---|---|---|"]
        for i, run in enumerate(r["runs"], 1):
            lines.append(f"| {i} | {run['sent']} | {run['redirects']} | {run['per_second']:.0f} | "
                         f"{run['master_cpu_ms_per_redirect']:.3f} ms |")
        lines += ["", f"Median: **{r['median_per_second']:.0f} redirects/s**. Router daemon memory after the runs: "
                      f"RSS {r['rss_mib']:.1f} MiB, PSS {r['pss_mib']:.1f} MiB.", ""]
    s = results.get("setups")
    if s and "skipped" not in s:
        lines += ["## Full IKE SA setups per second: one gateway vs strongSwan", "",
                  "Same Python initiator (`dataplane.ikev2.client`, 32 in flight, aes256-sha256-ecp256, PSK, no "
                  "redirect), alternately against router3's daemon and a strongSwan charon responder (PSK, "
                  "`dos_protection = no`) in the `wan` namespace, in the same run; medians of the rounds. The "
                  "initiator shares the 2 cores with the responder.", "",
                  "| exchange | this gateway | strongSwan | ratio (goal >= 0.5) | CPU per setup (ours / strongSwan) |",
                  "|---|---|---|---|---|"]
        for key, label in (("ike_only", "IKE_SA_INIT + IKE_AUTH (IKE SA only)"),
                           ("ike_and_child", "+ CHILD_SA and an address (CP)")):
            row = s[key]
            lines.append(f"| {label} | {row['ours_per_second']:.0f}/s | {row['strongswan_per_second']:.0f}/s | "
                         f"**{row['ratio']:.2f}** | {row['ours_cpu_ms']:.2f} ms / {row['strongswan_cpu_ms']:.2f} ms |")
        lines += ["", f"Gateway daemon memory after the runs: RSS {s['ours_rss_mib']:.1f} MiB, PSS "
                      f"{s['ours_pss_mib']:.1f} MiB.", ""]
    elif s:
        lines += ["## Full IKE SA setups per second", "", f"Skipped: {s['skipped']}", ""]
    for key in ("failover_default", "failover_fast"):
        f = results.get(key)
        if not f:
            continue
        if key == "failover_default":
            lines += ["## HSRP failover (Active router powered off)", "",
                      "Power off = its daemon SIGKILLed and its links down (no Resign). Takeover: from the power-off "
                      "to the Standby's own state change to Active (its daemon's clock); VIP outage: the longest gap "
                      "between answers of a 10 ms ping from client1 to the VIP.", "",
                      "| timers (hello / hold) | runs | takeover min / mean / max | VIP outage mean / max |",
                      "|---|---|---|---|"]
        lines.append(f"| {f['hello_s']:g} s / {f['hold_s']:g} s | {len(f['runs'])} | {f['takeover_min']:.2f} / "
                     f"{f['takeover_mean']:.2f} / {f['takeover_max']:.2f} s | {f['outage_mean']:.2f} / "
                     f"{f['outage_max']:.2f} s |")
    if results.get("failover_default") or results.get("failover_fast"):
        lines += ["", "Takeover is the hold time counted from the last hello heard, so it falls between hold - hello "
                      "and hold.", ""]
    rows = [results[k] for k in ("loss_default", "loss_fast") if results.get(k)]
    if rows:
        lines += ["## CLB member-loss detection vs hold time", "",
                  "A member's LAN link goes down (no FIN reaches the master); time from the cut to the master "
                  "dropping it (the master's own clock).", "",
                  "| slave hello / holdtime | runs | detection min / mean / max | expected window |",
                  "|---|---|---|---|"]
        for row in rows:
            low = (row["holdtime_ms"] - row["hello_ms"]) / 1000
            high = row["holdtime_ms"] / 1000 + 0.1
            lines.append(f"| {row['hello_ms']} / {row['holdtime_ms']} msec | {len(row['runs'])} | {row['min']:.3f} / "
                         f"{row['mean']:.3f} / {row['max']:.3f} s | {low:.1f} .. {high:.1f} s |")
        lines += ["", "Expected window: the hold time runs from the member's last hello (sent up to one hello "
                      "interval before the cut); the master checks every 100 ms.", ""]
    return "\n".join(lines) + "\n"


def write_doc(text: str) -> None:
    notes = ""
    if DOC.exists() and NOTES_MARKER in DOC.read_text():
        notes = DOC.read_text().split(NOTES_MARKER, 1)[1]
    DOC.write_text(text + "\n" + NOTES_MARKER + notes)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "_redirects":
        sub = argparse.ArgumentParser()
        sub.add_argument("--target", required=True)
        sub.add_argument("--bind", required=True)
        sub.add_argument("--count", type=int, default=5000)
        sub.add_argument("--window", type=int, default=32)
        opts = sub.parse_args(args[1:])
        print(json.dumps(redirect_load(opts.target, opts.bind, opts.count, opts.window)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and runs")
    parser.add_argument("--only", choices=("redirects", "setups", "failover", "loss"), action="append")
    parser.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(ROOT)}")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args(args)
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    only = set(opts.only or ("redirects", "setups", "failover", "loss"))
    results: dict[str, Any] = {"machine": machine()}
    with tempfile.TemporaryDirectory(prefix="flexvpn-bench-") as folder:
        tmp = Path(folder)
        if "redirects" in only:
            results["redirects"] = bench_redirects(tmp, 3000 if opts.quick else 10000)
        if "setups" in only:
            results["setups"] = bench_setups(tmp, 500 if opts.quick else 2000, 1 if opts.quick else 3)
        if "failover" in only:
            results["failover_default"] = bench_failover(tmp, False, 2 if opts.quick else 3)
            results["failover_fast"] = bench_failover(tmp, True, 3 if opts.quick else 5)
        if "loss" in only:
            results["loss_default"] = bench_member_loss(tmp, 1000, 3000, 3 if opts.quick else 5)
            results["loss_fast"] = bench_member_loss(tmp, 300, 1000, 3 if opts.quick else 5)
    text = report(results)
    if opts.json:
        print(json.dumps(results, indent=1, default=str))
    else:
        print(text)
    if opts.write:
        write_doc(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
