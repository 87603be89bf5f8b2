#!/usr/bin/env python3
"""Can the MNHA peer lengthen the session copies it holds? What a timeout change on the peer does.

    sudo .venv/bin/python bench/copy_timeout_echo.py [--timeout 60] [--lengthened 3000]

The lab's session sync writes the copies straight into the peer's kernel (`DisableExternalCache On`)
with the timeout the session had on the sender. A peer that lengthened its copies itself would need
no refresh of live sessions; this measures whether that is possible. No lab: the two namespaces, veth
and conntrackd of bench/extcache_sync.py (the sender A and the peer B), with the lab's sync settings
(FTFW over unicast UDP, no external cache). One UDP session is written on the sender with TIMEOUT s;
once its copy is on the peer, another process sets the copy's timeout to LENGTHENED s (`conntrack -U
-t`), and the timeouts of both are read again. Prints what it saw (JSON); exit 0 when it measured.
Holds /tmp/lab-ns.lock while its namespaces exist. Needs root.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from extcache_sync import DPORT, IP_A, IP_B, NS_A, NS_B, SERVER, SPORT, Daemon, namespaces, ns_lock, sh

SUBSCRIBER = "100.64.0.1"
FLOW = ["-p", "udp", "-s", SUBSCRIBER, "-d", SERVER, "--sport", str(SPORT), "--dport", str(DPORT)]
REPLY = ["-r", SERVER, "-q", SUBSCRIBER, "--reply-port-src", str(DPORT), "--reply-port-dst", str(SPORT)]
MAX_HOLD_S = 120.0


def timeout_in(ns: str) -> int | None:
    """The session's remaining timeout in namespace NS's table (None: not there)."""
    fields = sh("ip", "netns", "exec", ns, "conntrack", "-G", *FLOW, check=False).split()
    return int(fields[2]) if len(fields) > 2 and fields[0] == "udp" else None


def wait_timeout(ns: str, wanted: range, seconds: float = 5.0) -> int | None:
    """NS's timeout of the session once it is in WANTED (or the last one read after SECONDS)."""
    ends = time.monotonic() + seconds
    value = timeout_in(ns)
    while (value is None or value not in wanted) and time.monotonic() < ends:
        time.sleep(0.05)
        value = timeout_in(ns)
    return value


def measure(timeout: int, lengthened: int, workdir: Path) -> dict[str, int | None]:
    daemons = [Daemon(name, ns, local, peer, workdir, 65536, None, external_cache=False)
               for name, ns, local, peer in (("sender", NS_A, IP_A, IP_B), ("peer", NS_B, IP_B, IP_A))]
    try:
        for daemon in daemons:
            daemon.start()
        sh("ip", "netns", "exec", NS_A, "conntrack", "-I", *FLOW, *REPLY, "-t", str(timeout),
           "-u", "SEEN_REPLY,ASSURED")
        copied = wait_timeout(NS_B, range(1, timeout + 1))
        seen: dict[str, int | None] = {"timeout": timeout, "lengthened": lengthened, "copy_on_the_peer": copied,
                                       "peer_after": None, "sender_after": None}
        if copied is None:  # no copy to lengthen: nothing measured
            return seen
        sh("ip", "netns", "exec", NS_B, "conntrack", "-U", *FLOW, "-t", str(lengthened))
        seen["peer_after"] = wait_timeout(NS_B, range(lengthened - 10, lengthened + 1))
        seen["sender_after"] = wait_timeout(NS_A, range(timeout + 1, lengthened + 1))
        return seen
    finally:
        for daemon in daemons:
            daemon.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=int, default=60, help="the session's timeout on the sender (s)")
    parser.add_argument("--lengthened", type=int, default=3000, help="the copy's timeout set on the peer (s)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    with ns_lock(MAX_HOLD_S), namespaces(), tempfile.TemporaryDirectory() as tmp:
        seen = measure(args.timeout, args.lengthened, Path(tmp))
    print(json.dumps(seen))
    return 0 if seen["copy_on_the_peer"] is not None and seen["peer_after"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
