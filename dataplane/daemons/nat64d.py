"""NAT64 translator of one SRX: prepare its TUN device and routes, then become `tayga`.

    python -m dataplane.daemons.nat64d TAYGA.CONF --route PREFIX [--route PREFIX ...]

The device is made persistent (`tayga --mktun`) and the routes into it (the NAT64 address, the
mapped clients, the translator's own IPv4 address) are added before tayga runs, and both outlive
it: a translator that the supervisor restarts finds them in place, and the SRX's sessions, NAT
bindings and routes are untouched by the restart (only packets in flight through the translator
during it are lost). This process then replaces itself with tayga, which the supervisor watches.

tayga runs SCHED_FIFO (TRANSLATOR_PRIORITY, above the traffic generator's senders): it is part of the
SRX's forwarding path, which for every other packet is the kernel's softirq work that no thread can
delay. At normal priority a busy moment of the machine (a BGP reconvergence, a returning node's sync,
the generator's realtime threads) kept it off the CPU for up to a second, and the NAT64 flows of SRXs
that no event touched lost their packets in its full TUN queue. It blocks in read() between packets,
so the priority costs the others nothing while it has nothing to translate.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

DEVICE_LINE = "tun-device "
TRANSLATOR_PRIORITY = 20  # SCHED_FIFO; the generator's senders and receivers run at 10


def device_of(conf: str) -> str:
    for line in conf.splitlines():
        if line.startswith(DEVICE_LINE):
            return line[len(DEVICE_LINE):].strip()
    raise ValueError("no tun-device line")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _has_device(device: str) -> bool:
    """Whether DEVICE exists in this process's network namespace (`ip` asks netlink here; /sys may
    still show the namespace it was mounted in)."""
    return subprocess.run(["ip", "link", "show", "dev", device], capture_output=True).returncode == 0


def prepare(conf_path: str, routes: list[str]) -> str:
    """The persistent device, up, and the routes into it (replaced: a restart finds them present)."""
    with open(conf_path, encoding="utf-8") as f:
        device = device_of(f.read())
    if not _has_device(device):
        subprocess.run(["tayga", "-c", conf_path, "--mktun"], check=True, capture_output=True, text=True)
    _ip("link", "set", device, "up")
    for prefix in routes:
        _ip("-6" if ":" in prefix else "-4", "route", "replace", prefix, "dev", device)
    return device


def realtime(priority: int) -> bool:
    """SCHED_FIFO at PRIORITY for this process and what it execs; False (said in the log) when the
    system refuses it: tayga then runs at normal priority."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except OSError as exc:
        print(f"nat64d: tayga at normal priority (SCHED_FIFO refused: {exc.strerror or exc})", flush=True)
        return False
    return True


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="nat64d", description=__doc__.split("\n\n")[0])
    parser.add_argument("conf")
    parser.add_argument("--route", action="append", default=[], help="a prefix routed into the translator")
    args = parser.parse_args(argv[1:])
    tayga = shutil.which("tayga")
    if tayga is None:
        print("nat64d: tayga is not installed (apt-get install -y tayga; `make deps`)", file=sys.stderr)
        return 1
    try:
        device = prepare(args.conf, args.route)
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        # tayga --mktun says why on stdout, ip on stderr
        detail = " ".join(str(getattr(exc, name, "") or "").strip() for name in ("stdout", "stderr")).strip() or exc
        print(f"nat64d: cannot prepare the translator's device: {detail}", file=sys.stderr)
        return 1
    print(f"nat64d: {device} up, {len(args.route)} routes; starting tayga", flush=True)
    # -d: in the foreground, its messages (fatal ones included) on stdout, i.e. in the node's log, where
    # without it they would go to a syslog the lab does not read; line-buffered (stdbuf), so that a
    # message is in the log when it is said, not when a buffer fills or never (a killed translator)
    realtime(TRANSLATOR_PRIORITY)
    stdbuf = shutil.which("stdbuf")
    argv = [tayga, "-c", args.conf, "-d"]
    if stdbuf is not None:
        os.execv(stdbuf, [stdbuf, "-oL", *argv])
    os.execv(tayga, argv)
    return 1  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))
