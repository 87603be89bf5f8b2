#!/usr/bin/env python3
"""Can the MNHA peer lengthen the session copies it holds? What a timeout change on the peer does.

    sudo .venv/bin/python bench/copy_timeout_echo.py [--timeout 60] [--lengthened 3000]

The lab's session sync writes the copies straight into the peer's kernel (`DisableExternalCache On`)
with the timeout the session had on the sender. A peer that lengthened its copies itself would need
no refresh of live sessions; this measures whether that is possible. No lab: two network namespaces
(the sender and the peer) joined by a veth, one conntrackd each with the lab's sync settings (FTFW
over unicast UDP, no external cache). One UDP session is written on the sender with TIMEOUT s; once its copy
is on the peer, another process sets the copy's timeout to LENGTHENED s (`conntrack -U -t`), and the
timeouts of both are read again. Prints what it saw (JSON); exit 0 when it measured. Holds
/tmp/lab-ns.lock while its namespaces exist. Needs root.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NS = {"sender": "xecho-s", "peer": "xecho-p"}
ADDR = {"sender": "192.0.2.1", "peer": "192.0.2.2"}
DEV, PORT = "xecho0", 3790
LOCK = Path("/tmp/lab-ns.lock")
# the session: a subscriber's UDP flow to a server, both directions seen (a copy of a live flow)
FLOW = ["-p", "udp", "-s", "100.64.0.1", "-d", "203.0.113.9", "--sport", "40000", "--dport", "7000"]
REPLY = ["-r", "203.0.113.9", "-q", "100.64.0.1", "--reply-port-src", "7000", "--reply-port-dst", "40000"]

CONF = """Sync {{
	Mode FTFW {{
		DisableExternalCache On
	}}
	UDP {{
		IPv4_address {local}
		IPv4_Destination_Address {peer}
		Port {port}
		Interface {dev}
		Checksum on
	}}
}}
General {{
	HashSize 8192
	HashLimit 65536
	Syslog off
	LogFile {dir}/{name}.log
	LockFile {dir}/{name}.lock
	UNIX {{
		Path {dir}/{name}.ctl
	}}
	Filter From Kernelspace {{
		Protocol Accept {{
			UDP
		}}
		Address Ignore {{
			IPv4_address {local}
			IPv4_address {peer}
		}}
	}}
}}
"""


def sh(*cmd: str, check: bool = True) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()[-300:]}")
    return done.stdout


def timeout_in(node: str) -> int | None:
    """The session's remaining timeout in NODE's table (None: not there)."""
    out = sh("ip", "netns", "exec", NS[node], "conntrack", "-G", *FLOW, check=False)
    fields = out.split()
    return int(fields[2]) if len(fields) > 2 and fields[0] == "udp" else None


def wait_timeout(node: str, wanted: range, seconds: float = 5.0) -> int | None:
    """NODE's timeout of the session once it is in WANTED (or the last one read after SECONDS)."""
    ends = time.monotonic() + seconds
    value = timeout_in(node)
    while (value is None or value not in wanted) and time.monotonic() < ends:
        time.sleep(0.05)
        value = timeout_in(node)
    return value


def measure(timeout: int, lengthened: int, state: Path) -> dict[str, int | None]:
    daemons: list[subprocess.Popen[bytes]] = []
    try:
        sh("ip", "link", "add", DEV, "netns", NS["sender"], "type", "veth", "peer", "name", DEV,
           "netns", NS["peer"])
        for node, other in (("sender", "peer"), ("peer", "sender")):
            sh("ip", "-n", NS[node], "addr", "add", f"{ADDR[node]}/24", "dev", DEV)
            sh("ip", "-n", NS[node], "link", "set", DEV, "up")
            sh("ip", "-n", NS[node], "link", "set", "lo", "up")
            conf = state / f"{node}.conf"
            conf.write_text(CONF.format(local=ADDR[node], peer=ADDR[other], port=PORT, dev=DEV, dir=state,
                                        name=node))
            daemons.append(subprocess.Popen(["ip", "netns", "exec", NS[node], "conntrackd", "-C", str(conf)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)  # both daemons listening
        sh("ip", "netns", "exec", NS["sender"], "conntrack", "-I", *FLOW, *REPLY, "-t", str(timeout),
           "-u", "SEEN_REPLY,ASSURED")
        copied = wait_timeout("peer", range(1, timeout + 1))
        seen: dict[str, int | None] = {"timeout": timeout, "lengthened": lengthened, "copy_on_the_peer": copied,
                                       "peer_after": None, "sender_after": None}
        if copied is None:  # no copy to lengthen: nothing measured
            return seen
        sh("ip", "netns", "exec", NS["peer"], "conntrack", "-U", *FLOW, "-t", str(lengthened))
        seen["peer_after"] = wait_timeout("peer", range(lengthened - 10, lengthened + 1))
        seen["sender_after"] = wait_timeout("sender", range(timeout + 1, lengthened + 1))
        return seen
    finally:
        for daemon in daemons:
            daemon.terminate()
        for daemon in daemons:
            try:
                daemon.wait(10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=int, default=60, help="the session's timeout on the sender (s)")
    parser.add_argument("--lengthened", type=int, default=3000, help="the copy's timeout set on the peer (s)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    with LOCK.open("a") as lock, tempfile.TemporaryDirectory() as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for ns in NS.values():
                sh("ip", "netns", "del", ns, check=False)  # left by a run that was killed
                sh("ip", "netns", "add", ns)
            seen = measure(args.timeout, args.lengthened, Path(tmp))
        finally:
            for ns in NS.values():
                sh("ip", "netns", "del", ns, check=False)
    print(json.dumps(seen))
    return 0 if seen["copy_on_the_peer"] is not None and seen["peer_after"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
