"""SRX session tables, read from conntrack in the SRX's namespace (`show security flow session`)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from ..model.diagnostics import LabError

_FIELD = re.compile(r"(\w+)=(\S+)")


@dataclass(frozen=True)
class Session:
    protocol: str
    state: str
    source: str
    destination: str
    source_port: int
    destination_port: int
    reply_source: str  # for CGNAT: the server; reply_destination is the translated address
    reply_destination: str
    packets: int  # both directions (needs net.netfilter.nf_conntrack_acct=1)
    bytes: int
    timeout: int

    @property
    def translated(self) -> bool:
        return self.reply_destination != self.source

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "translated": self.translated}


def parse_conntrack(text: str) -> list[Session]:
    """Parse `conntrack -L` output (original tuple first, reply tuple second)."""
    sessions = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or not parts[2].isdigit():
            continue
        protocol, timeout = parts[0], int(parts[2])
        state = parts[3] if "=" not in parts[3] else ""
        pairs = _FIELD.findall(line)
        src = [v for k, v in pairs if k == "src"]
        dst = [v for k, v in pairs if k == "dst"]
        sport = [v for k, v in pairs if k == "sport"]
        dport = [v for k, v in pairs if k == "dport"]
        packets = sum(int(v) for k, v in pairs if k == "packets")
        size = sum(int(v) for k, v in pairs if k == "bytes")
        if len(src) < 2 or len(dst) < 2:
            continue
        sessions.append(Session(
            protocol, state, src[0], dst[0], int(sport[0]) if sport else 0, int(dport[0]) if dport else 0,
            src[1], dst[1], packets, size, timeout,
        ))
    return sessions


def carrier(before: dict[str, int], now: dict[str, int]) -> str | None:
    """The SRX whose session of a flow counted the most packets between two reads (SRX -> packets),
    None when none did. A counter lower than before belongs to a session opened anew between the
    reads (its MNHA peer's table push re-creates it, or it expired and the next packet re-opened
    it): its packets since are all it has now."""
    growth = {srx: packets - before.get(srx, 0) if packets >= before.get(srx, 0) else packets
              for srx, packets in now.items()}
    best = max(growth, key=lambda srx: growth[srx], default=None)
    return best if best is not None and growth[best] > 0 else None


def read(ns: str, attempts: int = 4) -> list[Session]:
    """The session table of namespace NS. A dump the kernel interrupts (the table changed under it:
    conntrackd writing the MNHA peer's sessions) is read again; one that keeps failing is an error,
    never a table with holes."""
    from ..runtime.netns import run_in_namespace

    error = ""
    for _ in range(attempts):
        result = run_in_namespace(ns, ["conntrack", "-L"])
        if result.returncode == 0:
            return parse_conntrack(result.stdout)
        error = result.stderr.strip()[-300:]
    raise LabError(f"conntrack -L in {ns} failed {attempts} times: {error}")


class ReadError(LabError):
    """A session table that could not be read whole."""


# A dump of the table takes longer the more it holds (measured: about 500,000 entries did not come
# out of `conntrack -L` within 10 s on a 2-CPU machine): the time allowed follows the table's size.
READ_BASE_S = 10.0
READ_S_PER_ENTRY = 1e-4


def read_timeout(entries: int) -> float:
    """Seconds allowed for one dump of a table of ENTRIES sessions: 10 s and 1 s per 10,000."""
    return READ_BASE_S + max(0, entries) * READ_S_PER_ENTRY


def read_table(ns: str, attempts: int = 4) -> list[Session]:
    """The whole conntrack table of namespace NS (nsenter: safe to call from threads). A dump
    the kernel interrupts because the table changed under it (conntrackd writing the MNHA peer's
    sessions) fails with part of the table: it is read again; one that keeps failing raises
    `ReadError`, never a table with holes. Each dump is given the time its table's size needs."""
    from labkit import netnsutil

    from ..runtime.netns import session_count

    error = ""
    timeout = read_timeout(session_count(ns))  # counted once: a retry's table is about as large
    command = ["nsenter", f"--net={netnsutil.path(ns)}", "conntrack", "-L"]
    for _ in range(attempts):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            error = f"conntrack -L did not finish within {timeout:.0f} s"
            continue
        except OSError as exc:
            error = str(exc)
            continue
        if done.returncode == 0:
            return parse_conntrack(done.stdout)
        error = done.stderr.strip()[-300:] or f"exit status {done.returncode}"
    raise ReadError(f"the session table of {ns} could not be read whole ({attempts} tries): {error}")


def udp_counts(tables: dict[str, list[Session]]) -> dict[tuple[str, int], dict[str, int]]:
    """(source address, source port) -> {node: packets} of the UDP sessions of each node's TABLE."""
    counts: dict[tuple[str, int], dict[str, int]] = {}
    for node, table in tables.items():
        for s in table:
            if s.protocol == "udp":
                counts.setdefault((s.source, s.source_port), {})[node] = s.packets
    return counts


def tcp_counts(tables: dict[str, list[Session]], port: int) -> dict[tuple[str, int], dict[str, int]]:
    """(source address, source port) -> {node: packets} of the TCP sessions to PORT of each node's TABLE."""
    counts: dict[tuple[str, int], dict[str, int]] = {}
    for node, table in tables.items():
        for s in table:
            if s.protocol == "tcp" and s.destination_port == port:
                counts.setdefault((s.source, s.source_port), {})[node] = s.packets
    return counts


def growth_carriers(first: dict[tuple[str, int], dict[str, int]],
                    second: dict[tuple[str, int], dict[str, int]]) -> dict[tuple[str, int], str]:
    """Per flow, its `carrier` between two readings (`udp_counts`); a flow whose counters grew
    nowhere has none."""
    out = {}
    for key, now in second.items():
        best = carrier(first.get(key, {}), now)
        if best is not None:
            out[key] = best
    return out
