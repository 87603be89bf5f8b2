#!/usr/bin/env python3
"""IKEv2 gateway under an IKE_SA_INIT flood: what legitimate clients still get (RFC 7296 section 2.6).

Needs root; brings up its own FlexVPN lab (named flexfl, a copy of labs/flexvpn.yml) and takes it down
in a finally block. All traffic stays between the lab's namespaces, bounded in count and time.

For each measured path, legitimate clients in `client1` run first alone, then while `client2` floods
the same gateway with IKE_SA_INITs (fresh SPIs, one replayed KE value, from 64 source ports, no
REDIRECT_SUPPORTED, never answering cookies: what a spoofing attacker can do), at a fixed rate:

  * redirects: IKE_SA_INIT with REDIRECT_SUPPORTED to the VIP, 32 in flight; a REDIRECT answer counts
    (after the cookie round trip when the master asks for one);
  * setups: full IKE SA setups (IKE_SA_INIT + IKE_AUTH, PSK, no CHILD_SA) straight to router3
    (`dataplane.ikev2.client`, 32 in flight).

Reports per second with and without the flood, their ratio, the half-open SAs held and the cookies
sent by the flooded gateway, and its CPU time. Writes a section of docs/benchmarks-flexvpn.md (--write;
the rest of that file is left as it is).

  sudo python3 bench/ikev2_flood.py --write
  sudo python3 bench/ikev2_flood.py --quick
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import flexvpn as fv  # noqa: E402  (bench/flexvpn.py: lab helpers)

from labkit.contracts import IKEV2_STATUS  # noqa: E402

DOC = ROOT / "docs" / "benchmarks-flexvpn.md"
BEGIN = "<!-- ikev2-flood: written by bench/ikev2_flood.py -->"
END = "<!-- ikev2-flood end -->"
VIP, MEMBER = "10.10.10.100", "10.10.10.3"
CLIENT1, CLIENT2 = "10.10.20.6", "10.10.20.7"
MAX_FLOOD_SECONDS = 60.0


def log(message: str) -> None:
    print(f"[ikev2-flood] {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ in namespaces
def flood(target: str, bind: str, rate: int, seconds: float) -> dict[str, Any]:
    """(Runs in the flooding namespace.) IKE_SA_INITs at RATE per second for SECONDS at most (or until
    killed): a fresh SPI each, one KE value replayed, 64 source ports; answers are read and dropped."""
    from dataplane.ikev2 import codec, crypto, iana

    seconds = min(seconds, MAX_FLOOD_SECONDS)
    proposal = crypto.ike_proposal(crypto.Suite(iana.ENCR_AES_CBC, 256, iana.PRF_HMAC_SHA2_256,
                                                iana.AUTH_HMAC_SHA2_256_128, 19))
    ke = crypto.Dh(19).public
    header = codec.Header(bytes(8), bytes(8), iana.SA, iana.IKE_SA_INIT, iana.FLAG_INITIATOR, 0)
    template = bytearray(codec.encode(header, [codec.SaPayload((proposal,)), codec.KePayload(19, ke),
                                               codec.NoncePayload(os.urandom(32))]))
    sockets = []
    for _ in range(64):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((bind, 0))
        sock.setblocking(False)
        sockets.append(sock)
    sent = answers = cookies = 0
    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(True))
    start = time.monotonic()
    while not stop:
        now = time.monotonic()
        if now - start >= seconds:
            break
        due = int((now - start) * rate)
        while sent < due:
            template[0:8] = sent.to_bytes(8, "big")
            with contextlib.suppress(OSError):  # a full send buffer: that packet is simply not sent
                sockets[sent % 64].sendto(template, (target, 500))
            sent += 1
        ready, _, _ = select.select(sockets, [], [], 0.002)
        for sock in ready:
            while True:
                try:
                    data = sock.recv(2048)
                except (BlockingIOError, OSError):
                    break
                answers += 1
                if b"\x40\x06" in data[28:]:  # a COOKIE notify type in the answer
                    cookies += 1
    return {"sent": sent, "answers": answers, "cookies": cookies, "seconds": time.monotonic() - start}


def legit_redirects(target: str, bind: str, count: int, window: int) -> dict[str, Any]:
    """(Runs in the client namespace.) COUNT clients with REDIRECT_SUPPORTED, WINDOW in flight, each
    answering a cookie request like a real initiator; counts the REDIRECT answers."""
    from dataplane.ikev2 import codec, iana
    from dataplane.ikev2.client import ClientConfig, Initiator

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind((bind, 0))
    sock.setblocking(False)
    local = sock.getsockname()
    pending: dict[bytes, tuple[Initiator, bytes, float]] = {}
    started = redirects = cookies = retransmits = lost = served = 0
    begin = time.perf_counter()
    deadline = time.monotonic() + 60

    def launch() -> None:
        nonlocal started
        ini = Initiator(ClientConfig(target, psk=None), target, local, None)  # IKE_SA_INIT only: no key used
        data = ini.start()
        pending[ini.spi_i] = (ini, data, time.monotonic())
        sock.sendto(data, (target, 500))
        started += 1

    while (started < count or pending) and time.monotonic() < deadline:
        while started < count and len(pending) < window:
            launch()
        ready, _, _ = select.select([sock], [], [], 0.05)
        if ready:
            while True:
                try:
                    data = sock.recv(4096)
                except BlockingIOError:
                    break
                entry = pending.get(data[:8])
                if entry is None:
                    continue
                ini = entry[0]
                kind, value = ini.receive(data)
                if kind == "ignore":
                    continue
                if kind == "send" and codec.decode(data).notify(iana.COOKIE) is not None:
                    cookies += 1
                    pending[ini.spi_i] = (ini, value, time.monotonic())
                    sock.sendto(value, (target, 500))
                    continue
                redirects += kind == "redirect"
                served += kind == "send"  # an IKE SA offered by the master itself: not followed up
                del pending[ini.spi_i]
        now = time.monotonic()
        for spi, (ini, data, sent_at) in list(pending.items()):
            if now - sent_at > 1.0:  # lost (a full socket buffer under the flood): send it again, twice at most
                if ini.ignored >= 2:
                    del pending[spi]
                    lost += 1
                    continue
                ini.ignored += 1
                retransmits += 1
                pending[spi] = (ini, data, now)
                sock.sendto(data, (target, 500))
    elapsed = time.perf_counter() - begin
    return {"count": count, "redirects": redirects, "served_by_master": served, "cookies": cookies,
            "retransmits": retransmits, "lost": lost,
            "seconds": elapsed, "per_second": redirects / elapsed if elapsed else 0.0}


# ------------------------------------------------------------------------------------------ driver
def gateway_status(name: str, node: str) -> dict[str, Any]:
    return fv.status(name, node, IKEV2_STATUS)


def start_flood(name: str, target: str, rate: int) -> subprocess.Popen[str]:
    return subprocess.Popen(["ip", "netns", "exec", f"{name}-client2", sys.executable, str(Path(__file__).resolve()),
                             "_flood", "--target", target, "--bind", CLIENT2, "--rate", str(rate), "--seconds",
                             str(MAX_FLOOD_SECONDS)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def stop_flood(process: subprocess.Popen[str]) -> dict[str, Any]:
    process.terminate()
    try:
        out, _ = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    return json.loads(out) if out.strip() else {}


def measure(name: str, what: str, count: int) -> dict[str, Any]:
    if what == "redirects":
        out = fv.netns(name, "client1", sys.executable, str(Path(__file__).resolve()), "_redirects", "--target", VIP,
                       "--bind", CLIENT1, "--count", str(count), "--window", "32", timeout=120)
        if not out.stdout.strip():
            raise RuntimeError(f"redirect client failed: {out.stderr[-500:]}")
        data: dict[str, Any] = json.loads(out.stdout)
        return data
    out = fv.netns(name, "client1", sys.executable, "-m", "dataplane.ikev2.client", "--gateway", MEMBER,
                   "--psk-file", fv.psk_file(name), "--bind",
                   CLIENT1, "--port", "0", "--count", str(count), "--concurrency", "32", "--summary", "--no-redirect",
                   "--timeout", "2", "--no-child", "--no-address", timeout=180)
    if not out.stdout.strip():
        raise RuntimeError(f"setup client failed: {out.stderr[-500:]}")
    data = json.loads(out.stdout)
    return data


def run_case(name: str, what: str, count: int, rate: int, rounds: int) -> dict[str, Any]:
    node = "router1" if what == "redirects" else "router3"
    target = VIP if what == "redirects" else MEMBER
    pid = int(gateway_status(name, node)["pid"])
    rows: dict[str, list[dict[str, Any]]] = {"quiet": [], "flood": []}
    for _ in range(rounds):
        for phase in ("quiet", "flood"):
            time.sleep(2)
            if phase == "quiet":  # the last flood's half-open SAs expire (30 s): no cookies left over
                fv.wait(lambda: gateway_status(name, node)["ike"]["half_open"] == 0, 40, "half-open SAs drained")
            before_cpu = fv.cpu_seconds(pid)
            before = dict(gateway_status(name, node)["gateway_counters"])
            flooder = start_flood(name, target, rate) if phase == "flood" else None
            try:
                if flooder is not None:
                    time.sleep(1.5)  # the flood is on: half-open SAs at their bound, cookies demanded
                data = measure(name, what, count)
                status = gateway_status(name, node)
            finally:
                flood_result = stop_flood(flooder) if flooder is not None else {}
            after = status["gateway_counters"]
            data.update({
                "gateway_cpu_s": fv.cpu_seconds(pid) - before_cpu, "half_open_held": status["ike"]["half_open"],
                "cookies_sent": after["cookies_sent"] - before["cookies_sent"],
                "half_open_full": after["half_open_full"] - before["half_open_full"]
                + after["half_open_source_full"] - before["half_open_source_full"],
                "flood": flood_result,
            })
            if what == "redirects":
                rows_by_address = {r["address"]: r for r in status.get("cluster", {}).get("rows", [])}
                data["master_sees_ike"] = {a: r.get("ike") for a, r in rows_by_address.items()}
            rows[phase].append(data)
            log(f"{what} {phase}: {data['per_second']:.0f}/s, half-open held {data['half_open_held']}, cookies "
                f"sent {data['cookies_sent']}, flood sent {flood_result.get('sent', 0)}")
    quiet = statistics.median(r["per_second"] for r in rows["quiet"])
    flooded = statistics.median(r["per_second"] for r in rows["flood"])
    achieved = statistics.median(r["flood"].get("sent", 0) / max(r["flood"].get("seconds", 1), 1e-9)
                                 for r in rows["flood"])
    return {"quiet_per_second": quiet, "flood_per_second": flooded, "ratio": flooded / quiet if quiet else None,
            "rate": rate, "achieved_rate": achieved, "runs": rows}


def report(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [BEGIN, "## Legitimate clients under an IKE_SA_INIT flood", "",
             f"Measured by `bench/ikev2_flood.py` on {m['date']}: {m['cpu']}, {m['cores']} cores, kernel "
             f"{m['kernel']}, Python {m['python']}. Legitimate clients (client1, 32 in flight) alone, then while "
             f"client2 sends {results['rate']} IKE_SA_INITs per second to the same gateway (fresh SPIs, one "
             "replayed KE value, 64 source ports, cookies never returned); medians of the rounds.", "",
             "| legitimate traffic | alone | under the flood | ratio | flood sent | half-open held (flood) | "
             "cookies sent (flood) | gateway CPU (flood) |", "|---|---|---|---|---|---|---|---|"]
    for what, label in (("redirects", "redirects by the master (VIP)"), ("setups", "IKE SA setups (router3)")):
        case = results.get(what)
        if not case:
            continue
        flood_runs = case["runs"]["flood"]
        lines.append(f"| {label} | {case['quiet_per_second']:.0f}/s | {case['flood_per_second']:.0f}/s | "
                     f"**{case['ratio']:.2f}** | {case['achieved_rate']:.0f}/s | "
                     f"{max(r['half_open_held'] for r in flood_runs)} | "
                     f"{max(r['cookies_sent'] for r in flood_runs)} | "
                     f"{statistics.median(r['gateway_cpu_s'] for r in flood_runs):.1f} s |")
    lines += ["", "Half-open SAs stop at the cookie threshold (50) once the flood starts: every further "
                  "IKE_SA_INIT without a valid cookie is answered with N(COOKIE) and nothing is kept. A legitimate "
                  "client pays one more round trip; the flooder, which cannot return cookies, gets no state, no "
                  "Diffie-Hellman and no redirect. Each \"alone\" phase starts once the previous flood's half-open "
                  "SAs have expired; redirect clients alone still meet cookies, since more than 1,000 IKE_SA_INITs "
                  "per second is itself the pressure signal.", END]
    return "\n".join(lines) + "\n"


def write_doc(text: str) -> None:
    doc = DOC.read_text() if DOC.exists() else "# FlexVPN load balancer benchmarks\n\n" + fv.NOTES_MARKER + "\n"
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + text.rstrip("\n") + rest.split(END, 1)[1]
    else:  # below the notes marker: bench/flexvpn.py keeps that part when it rewrites the file
        doc = doc.rstrip("\n") + "\n\n" + text
    DOC.write_text(doc)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("_flood", "_redirects"):
        sub = argparse.ArgumentParser()
        sub.add_argument("--target", required=True)
        sub.add_argument("--bind", required=True)
        sub.add_argument("--rate", type=int, default=2000)
        sub.add_argument("--seconds", type=float, default=10.0)
        sub.add_argument("--count", type=int, default=2000)
        sub.add_argument("--window", type=int, default=32)
        opts = sub.parse_args(args[1:])
        if args[0] == "_flood":
            print(json.dumps(flood(opts.target, opts.bind, opts.rate, opts.seconds)))
        else:
            print(json.dumps(legit_redirects(opts.target, opts.bind, opts.count, opts.window)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer clients and one round")
    parser.add_argument("--rate", type=int, default=2000, help="flood: IKE_SA_INITs per second (default 2000)")
    parser.add_argument("--write", action="store_true", help=f"write a section of {DOC.relative_to(ROOT)}")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args(args)
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2

    def edit(text: str) -> str:  # as bench/flexvpn.py: the master (max-session 100, filled) redirects everyone
        text = text.replace("name: group1}}", "name: group1, hello_ms: 1000, hold_ms: 3000}}")
        text = text.replace("max_session: 10}", "max_session: 100}", 1)
        return text.replace("max_session: 10}", "max_session: 100000}")

    results: dict[str, Any] = {"machine": fv.machine(), "rate": opts.rate}
    rounds = 1 if opts.quick else 3
    with tempfile.TemporaryDirectory(prefix="ikev2-flood-") as folder, \
            fv.running("flexfl", edit, Path(folder)) as name:
        fv.elected(name, 60)
        filled = fv.netns(name, "client2", sys.executable, "-m", "dataplane.ikev2.client", "--gateway", "10.10.10.1",
                          "--psk-file", fv.psk_file(name),
                          "--bind", CLIENT2, "--count", "34", "--no-delete", "--summary")
        log(f"master filled: {filled.stdout.strip()}")
        fv.wait(lambda: gateway_status(name, "router1")["cluster"]["rows"][0]["code"] == "-", 10,
                "the master overloaded")
        results["redirects"] = run_case(name, "redirects", 1000 if opts.quick else 3000, opts.rate, rounds)
        results["setups"] = run_case(name, "setups", 200 if opts.quick else 500, opts.rate, rounds)
    text = report(results)
    print(json.dumps(results, indent=1, default=str) if opts.json else text)
    if opts.write:
        write_doc(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
