"""The MNHA daemon's client of conntrackd (session sync): the cold sync and its acknowledgement,
the counters the status shows. Each call runs `conntrackd -C CONFIG ...` in the node's namespace."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

COLD_SYNC_LIMIT_S = 120.0  # a cold sync whose messages are not all sent by then failed
ACK_WAIT_S = 2.0  # a cold sync on the wire waits this long at most for its acknowledgement (FTFW: 1 s periods)
POLL_S = 0.1  # how often the queues are read while waiting (two client calls; FTFW acknowledges in 1 s periods)


def conntrackd(config: str, *command: str, timeout: float = 10.0) -> str | None:
    """conntrackd's output of COMMAND (a client call to the daemon of CONFIG); None on failure."""
    try:
        done = subprocess.run(["conntrackd", "-C", config, *command], capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"{time.strftime('%H:%M:%S')} conntrackd {' '.join(command)} failed: {exc}", flush=True)
        return None
    if done.returncode != 0:
        print(f"{time.strftime('%H:%M:%S')} conntrackd {' '.join(command)} exited {done.returncode}: "
              f"{(done.stderr or done.stdout).strip()[-300:]}", flush=True)
        return None
    return done.stdout


def cold_sync(config: str, limit_s: float = COLD_SYNC_LIMIT_S, whole: bool = False) -> tuple[bool, float, int | None]:
    """Send this node's sessions to the peer and wait for the acknowledgement: conntrackd sends its
    cache (-B: every session this node opened, or carried in the last refresh window) and the
    reliable protocol (FTFW) holds each message in its queues (transmit, resend) until the peer
    acknowledges it. The queues are seldom empty: the node keeps sending the sessions that open,
    change and end (the health checks' alone: several a second; one message per event of
    conntrackd's internal cache; and on a node with nothing to send, one keep-alive a second, which
    stays queued until the peer acknowledges a later session message), and a message lost while the
    ICL was cut may stay queued long after. So the sync is done once the queues hold no more than
    they held before -B plus what was queued since: as many messages were acknowledged as -B queued
    (FTFW acknowledges in sequence order: the older ones of -B go first). A peer that found a gap
    in the sequence (messages lost while the ICL was cut) asks for them again and acknowledges
    nothing until the next session message after that; on a node with no traffic that may be the
    next refresh window. So once every message of -B is on the wire (the transmit queue empty), the
    sync is done after ACK_WAIT_S at most, acknowledged or not (a message lost is sent again when
    the peer asks for it, as at any time). The queues are read before the counters (a message
    queued in between is counted in neither before -B, in the queues only after: the wait is
    longer, never shorter). WHOLE (the peer came back empty: it powered on): the kernel's table is
    read into the cache first (-R): the cache lacks the copies of the peer's sessions injected
    here, which this node may carry since (a failover's flows), and the peer needs them back. Not
    otherwise: a peer that holds a session re-creates it on a session sent as new, and a copy
    sent back to the node that carries it would cut its flow for that while. (ok, seconds, sessions)."""
    started = time.monotonic()
    if whole and conntrackd(config, "-R") is None:
        return False, time.monotonic() - started, None
    before = queued(parse_stats(conntrackd(config, "-s", "queue") or "")) or 0
    stats = parse_stats(conntrackd(config, "-s") or "")
    events0 = stats.get("cache_events", 0)
    if conntrackd(config, "-B") is None:
        return False, time.monotonic() - started, None
    on_the_wire: float | None = None  # when the transmit queue was first seen empty after -B
    while time.monotonic() - started < limit_s:
        events = parse_stats(conntrackd(config, "-s") or "").get("cache_events", events0)
        queues = parse_stats(conntrackd(config, "-s", "queue") or "")
        now, clock = queued(queues), time.monotonic()
        alive = int(clock - started) + 1  # keep-alives queued since -B, at most
        if on_the_wire is None and now is not None and queues.get("txqueue", 0) == 0:
            on_the_wire = clock
        acknowledged = now is not None and now <= before + events - events0 + alive
        if acknowledged or (on_the_wire is not None and clock - on_the_wire >= ACK_WAIT_S):
            seconds = clock - started
            print(f"{time.strftime('%H:%M:%S')} cold sync: {stats.get('cache_active', '?')} sessions sent to "
                  f"the peer{' and acknowledged' if acknowledged else ''} in {seconds:.2f} s", flush=True)
            return True, seconds, stats.get("cache_active")
        time.sleep(POLL_S)
    print(f"{time.strftime('%H:%M:%S')} cold sync: not acknowledged within {limit_s:.0f} s", flush=True)
    return False, time.monotonic() - started, None


def queued(stats: dict[str, int]) -> int | None:
    """Messages in FTFW's transmit and resend queues (None: not read)."""
    if "rsqueue" not in stats:
        return None
    return stats["rsqueue"] + stats.get("txqueue", 0)


def parse_stats(text: str) -> dict[str, int]:
    """The counters of `conntrackd -s` (and `-s queue`, `-s network`) the status shows: sessions in the
    cache, sent and received messages, injection of the peer's sessions, errors, and the peer's
    messages dropped for a sequence number before the last one accepted (`before`)."""
    out: dict[str, int] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith(":") and not any(c.isdigit() for c in line):
            section = line[:-1]
            continue
        numbers = [int(w) for w in line.replace(":", " ").split() if w.isdigit()]
        if section == "cache internal" and line.startswith("current active connections") and numbers:
            out["cache_active"] = numbers[0]
        elif section == "cache internal" and line.startswith("connections ") and numbers:
            out["cache_events"] = out.get("cache_events", 0) + numbers[0]  # created, updated, destroyed
        elif section == "external inject" and numbers and len(numbers) >= 2:
            key = line.split()[1].rstrip(":")  # created / updated / destroyed
            out[f"inject_{key}"], out[f"inject_{key}_failed"] = numbers[0], numbers[1]
        elif section.startswith("UDP traffic") and numbers and len(numbers) >= 2:
            if "Bytes sent" in line:
                out["bytes_sent"], out["bytes_received"] = numbers
            elif "Pckts sent" in line:
                out["packets_sent"], out["packets_received"] = numbers
            elif "Error send" in line:
                out["send_errors"], out["receive_errors"] = numbers
        elif section == "message tracking" and "Malformed" in line and len(numbers) >= 2:
            out["malformed"], out["lost"] = numbers
        elif line.startswith("Packets before") and numbers:  # `-s network`: sequence tracking, received
            out["before"] = numbers[0]
        elif section in ("queue rsqueue", "queue txqueue") and line.startswith("current elements") and numbers:
            out[section.split()[1]] = numbers[0]
    return out


def kernel_sessions() -> int | None:
    try:
        return int(Path("/proc/sys/net/netfilter/nf_conntrack_count").read_text())
    except (OSError, ValueError):
        return None
