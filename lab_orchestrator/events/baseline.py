"""Load the machine can carry: the baseline before each event and the calibration of the defaults.

Before a failure event is injected, the runner sends the event's own traffic (same flows, rate and
sizes, both directions) through the lab for a short baseline period and judges it: every packet of
every flow delivered and both senders on schedule (`judge`). A lab that drops packets or a sender
that falls behind before anything failed would put the generator's or the path's limits into the
event's figures, so such a case is an error ("cannot carry"), never a failed event; when a late sender
was the only fault (`only_behind`) the case runs again first (`rerun.py`).

Without --flows/--rate the runner first calibrates: it measures the same baseline at rising rates
(`LADDER`), and `choose` takes 1/HEADROOM (a quarter) of the highest rate carried cleanly (the event's control plane
needs CPU too), with the flow count and resolution that rate allows. `judge` and `choose` are pure;
`measure` runs the traffic.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..model import ipfamily
from ..model.diagnostics import LabError
from ..plan.pipeline import LabPlan

BASELINE_S = 1.0  # seconds of traffic judged before each event
CALIBRATION_S = 1.0  # seconds per rung of the calibration ladder
SENT_SHARE = 0.99  # a sender on schedule sent at least this share of the packets due
# (aggregate packets/s per direction, flows): each rung twice the one before; the resolution of a
# rung is flows / rate (10 ms at 100 x 100 pps, 5 ms at 200 x 200 pps)
LADDER: tuple[tuple[float, int], ...] = ((2500.0, 50), (5000.0, 100), (10000.0, 100), (20000.0, 200),
                                         (40000.0, 200))
# the chosen rate is the highest clean rung's rate divided by this: a rung passes in a quiet second,
# an event's control plane (BGP, daemons restarting, the runner's own readings) then takes CPU from
# the forwarding, and the machine's other work may too
HEADROOM = 4.0
LATE_INTERVALS = 4  # a sender on schedule: no packet later than this many per-flow intervals


@dataclass
class Direction:
    """What one direction of a baseline showed: the sender's schedule and the receiver's counts."""

    sent: int  # packets sent
    due: int  # packets the schedule asked for
    lost: int  # packets sent but never received (every flow, tail included)
    flows_silent: int  # flows of which the receiver got nothing
    max_lag_ms: float  # the sender's worst lateness against its schedule
    lag_p99_ms: float = 0.0  # 99 % of the packets left at most this late
    flows: int = 0  # flows of this direction (a family's share with IPv4 and IPv6; 0: all of the baseline's)
    dropped: int = 0  # packets the receiver's socket dropped (it could not keep up): lost to the generator


@dataclass
class Carried:
    """One baseline: FLOWS flows at RATE packets/s per direction for SECONDS."""

    flows: int
    rate: float
    seconds: float
    directions: dict[str, Direction] = field(default_factory=dict)  # forward, reverse

    @property
    def resolution_ms(self) -> float:
        return round(1000.0 * self.flows / self.rate, 3)

    def to_json(self) -> dict[str, Any]:
        return {"flows": self.flows, "rate": self.rate, "seconds": self.seconds,
                "resolution_ms": self.resolution_ms,
                "directions": {name: asdict(d) for name, d in self.directions.items()}}


def judge(carried: Carried) -> list[str]:
    """Why CARRIED is not a clean baseline ([] when it is): a packet lost, a flow silent, or a sender
    behind its schedule: fewer than SENT_SHARE of the packets due sent, 1 % of the packets later than
    one per-flow interval (the figures' resolution), or any later than LATE_INTERVALS of them (a
    packet due during an outage and sent after it is not lost: a sender late by L shortens a flow's
    convergence by up to L)."""
    why = []
    for name, d in carried.directions.items():
        if d.lost:
            why.append(f"{name}: {d.lost} of {d.sent} packets lost")
        if d.flows_silent:
            why.append(f"{name}: {d.flows_silent} of {d.flows or carried.flows} flows received nothing")
        if d.dropped:
            why.append(f"{name}: the receiver's socket dropped {d.dropped} packets (the receiver could not keep up)")
        if d.sent < SENT_SHARE * d.due:
            why.append(f"{name}: the sender sent {d.sent} of {d.due} packets due")
        why += late(name, d.max_lag_ms, d.lag_p99_ms, carried.resolution_ms)
    if not carried.directions:
        why.append("no traffic measured")
    return why


def late(name: str, max_lag_ms: float, lag_p99_ms: float, resolution_ms: float) -> list[str]:
    """The sentence of sender NAME if it kept no schedule at RESOLUTION_MS: 1 % of its packets later
    than one per-flow interval, or one later than LATE_INTERVALS of them ([] when it kept it)."""
    if lag_p99_ms > resolution_ms or max_lag_ms > LATE_INTERVALS * resolution_ms:
        return [f"{name}: the sender was up to {max_lag_ms:.1f} ms behind its schedule (1 % of the "
                f"packets {lag_p99_ms:.1f} ms or more; resolution {resolution_ms:g} ms)"]
    return []


def behind(d: Direction, resolution_ms: float) -> bool:
    """Whether the generator of D fell behind (overloaded): its sender sent fewer than SENT_SHARE of
    the packets due or was `late`, or its receiver's socket dropped packets."""
    return d.sent < SENT_SHARE * d.due or bool(late("", d.max_lag_ms, d.lag_p99_ms, resolution_ms)) or d.dropped > 0


def only_behind(carried: Carried) -> bool:
    """Whether CARRIED was unclean only because a sender fell behind its schedule (`behind`), with no
    packet lost and no flow silent: the machine's doing (busy, or paused by its hypervisor), not the
    lab's, so the case may run again rather than be an error. Packets a receiver dropped are lost: a
    load its receivers cannot take is named as the load (`cannot_carry`)."""
    directions = carried.directions.values()
    return (any(behind(d, carried.resolution_ms) for d in directions)
            and not any(d.lost or d.flows_silent for d in directions))


def senders_late(senders: dict[str, dict[str, Any]], resolution_ms: float) -> list[str]:
    """`late` for each sender report of SENDERS (name -> the generator's sender report), with the
    steal time around the worst delay when the hypervisor took a CPU for at least half of it."""
    lines = []
    for name, sent in senders.items():
        worst = float(sent.get("max_lag_ms") or 0.0)
        for line in late(name, worst, float(sent.get("lag_p99_ms") or 0.0), resolution_ms):
            stolen = float(sent.get("max_lag_steal_ms") or 0.0)
            if stolen and stolen >= worst / 2:
                line += (f"; the hypervisor took {stolen:.0f} ms of a CPU during that delay (steal time): "
                         "the machine was paused")
            lines.append(line)
    return lines


def cannot_carry(carried: Carried, reasons: list[str]) -> str:
    """The sentence of a case whose baseline failed. Flows that delivered nothing while their sender
    kept its schedule were dropped inside the lab (a path or a selector sending them nowhere): a
    lower rate would not bring them back, so the sentence names them instead of the load. Silent
    flows of a sender that fell behind (`behind`) may never have been sent: the load is named. A sender
    that fell behind with nothing lost (`only_behind`) is named as such: the case runs again first."""
    silent = [f"{d.flows_silent} of {d.flows or carried.flows} {name} flows"
              for name, d in carried.directions.items()
              if d.flows_silent and not behind(d, carried.resolution_ms)]
    if silent:
        return (f"{' and '.join(silent)} delivered nothing in the baseline: dropped inside the lab, not a "
                f"slow sender ({'; '.join(reasons)})")
    if only_behind(carried):  # nothing lost: the machine was busy, the load may be right (`rerun.py`)
        return (f"the generator fell behind its schedule in the baseline, nothing lost ({'; '.join(reasons)}): "
                "the case runs again under --reruns; if it keeps falling behind, lower --rate/--flows")
    return (f"the generator or the path cannot carry {carried.flows} flows x 2 directions at "
            f"{carried.rate:.0f} pps here ({'; '.join(reasons)}): lower --rate/--flows")


@dataclass(frozen=True)
class Choice:
    """The traffic the calibration chose, and what it measured."""

    flows: int
    rate: float
    highest_clean: float | None  # the highest rung carried cleanly (None: not even the first)
    rungs: list[dict[str, Any]]  # per rung: rate, flows, clean, reasons

    @property
    def top(self) -> bool:
        """The lab carried every rung of the ladder."""
        return self.highest_clean == LADDER[-1][0]

    @property
    def resolution_ms(self) -> float:
        return round(1000.0 * self.flows / self.rate, 3)

    def line(self) -> str:
        """One line for the terminal and the reports."""
        head = f"traffic {self.flows} flows x {self.rate:.0f} pps per direction ({self.resolution_ms:g} ms resolution)"
        if self.highest_clean is None:
            return f"{head}: calibrated, but the lab did not carry even this rate loss-free and on schedule"
        return (f"{head}: calibrated, 1/{HEADROOM:g} of the highest rate the lab carried loss-free and on "
                f"schedule ({self.highest_clean:.0f} pps{', the top of the ladder' if self.top else ''})")

    def to_json(self) -> dict[str, Any]:
        return {"flows": self.flows, "rate": self.rate, "resolution_ms": self.resolution_ms,
                "highest_clean_rate": self.highest_clean, "headroom": HEADROOM, "rungs": self.rungs}


def flows_for(rate: float) -> int:
    """The flow count of the highest LADDER rung not above RATE (the first rung's below it)."""
    fitting = [flows for rung_rate, flows in LADDER if rung_rate <= rate]
    return fitting[-1] if fitting else LADDER[0][1]


def choose(results: list[tuple[float, int, list[str]]]) -> Choice:
    """The traffic to run from the calibration's RESULTS ((rate, flows, reasons) per rung, in
    ladder order; reasons empty: carried cleanly): the highest clean rung's rate over HEADROOM
    (never below the first rung's), with that rate's flow count. The climb stops at the first
    rung that failed: a rung above it that happened to pass does not count."""
    rungs = []
    best: float | None = None
    for rate, flows, reasons in results:
        rungs.append({"rate": rate, "flows": flows, "clean": not reasons, "reasons": reasons})
        if reasons:
            break
        best = rate
    if best is None:
        rate, flows = LADDER[0]
        return Choice(flows, rate, None, rungs)
    rate = max(LADDER[0][0], best / HEADROOM)
    return Choice(flows_for(rate), rate, best, rungs)


# --------------------------------------------------------------------------- measuring (a running lab)
# A traffic process's start: Python, its socket, its frames built (and a reverse sender of translated
# flows waits up to 3 s for the forward flows' bindings). Longer on a loaded machine; then there is
# no traffic to judge by, which is not a failed event.
TRAFFIC_START_S = 20.0


class NotStarted(LabError):
    """A traffic process did not say it was ready: nothing to judge by."""


def started(child: Any, family: int, name: str) -> None:
    """Wait until CHILD (a spawned traffic process, FAMILY's NAME) says it is ready, or raise NotStarted."""
    try:
        child.wait_ready(TRAFFIC_START_S)
    except (TimeoutError, RuntimeError) as exc:
        raise NotStarted(f"the {ipfamily.name(family)} {name} process did not start: {exc}") from None


def measure(plan: LabPlan, flows: int, rate: float, sizes: str, seconds: float = BASELINE_S,
            realtime: bool = True, cpu: int | None = None, reverse: bool = True,
            families: list[int] | None = None) -> Carried:
    """Send FLOWS flows at RATE pps per direction through the lab for SECONDS and count what arrived.
    FAMILIES (default IPv4): with IPv6 as well, the flows and the rate are shared between the families
    (`trafficsetup.by_family`) and each family's directions are judged apart ("forward IPv6", ...)."""
    from ..plan import trafficsetup

    fams = families or [4]
    scratch = tempfile.mkdtemp(prefix="lab-baseline-") if trafficsetup.needs_bindings(plan, fams, reverse) else None
    setups = trafficsetup.by_family(plan, fams, flows, rate, sizes, seconds, reverse=reverse, fifo_dir=scratch,
                                    realtime=realtime, cpu=cpu)
    children: dict[tuple[int, str], Any] = {}
    got: dict[tuple[int, str], dict[str, Any]] = {}
    try:
        for step in trafficsetup.start_steps(setups):
            for fam, name, _, job in step:
                children[(fam, name)] = job.spawn()
                started(children[(fam, name)], fam, name)
            if step[0][1] == "tx-forward":
                time.sleep(0.3)  # the forward packets open the sessions the reverse flows need
        for key, child in children.items():
            if key[1].startswith("tx-"):
                got[key] = child.wait(timeout=seconds * 3 + 10)
        time.sleep(0.2)  # the last packets in flight
        for (fam, name), child in children.items():
            if name.startswith("rx-"):
                got[(fam, name)] = child.stop(sent=got.get((fam, name.replace("rx-", "tx-"))))
    except BaseException:
        for child in children.values():
            child.kill()
        raise
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    out = Carried(flows, rate, seconds)
    for fam, setup in setups.items():
        for name, sender in (("forward", setup.tx_forward), ("reverse", setup.tx_reverse)):
            sent, report = got.get((fam, f"tx-{name}")), got.get((fam, f"rx-{name}"))
            if sender is not None and sent is not None and report is not None:
                out.directions[name + ("" if fam == 4 else f" {ipfamily.name(fam)}")] = _direction(
                    sent, report, sender.count, len(sender.flows))
    return out


def _direction(sent: dict[str, Any], report: dict[str, Any], due: int | None, flows: int = 0) -> Direction:
    rows = report.get("per_flow", [])
    return Direction(sent=int(sent.get("sent", 0)), due=int(due or 0), lost=sum(int(r.get("lost", 0)) for r in rows),
                     flows_silent=sum(1 for r in rows if not r.get("received")),
                     max_lag_ms=round(float(sent.get("max_lag_ms") or 0.0), 3),
                     lag_p99_ms=round(float(sent.get("lag_p99_ms") or 0.0), 3), flows=flows,
                     dropped=int(report.get("socket_drops") or 0))


PER_FLOW_PPS = 100.0  # --flows without --rate: each flow at this rate (a 10 ms resolution)


def given(flows: int | None, rate: float) -> tuple[int, float]:
    """The traffic of a run whose --rate was given (FLOWS None: the ladder's flow count for RATE)."""
    return (flows if flows is not None else flows_for(rate)), rate


def traffic(flows: int | None, rate: float | None, calibrated: Choice | None = None) -> dict[str, Any]:
    """What a run sends and why: {"flows", "rate", "line", "json"}; CALIBRATED: the calibration's
    choice when neither FLOWS nor RATE was given."""
    if calibrated is not None:
        return {"flows": calibrated.flows, "rate": calibrated.rate, "line": calibrated.line(),
                "json": {"chosen_by": "calibration", **calibrated.to_json()}}
    if rate is None:
        assert flows is not None
        rate = flows * PER_FLOW_PPS
        why = f"--flows, {PER_FLOW_PPS:.0f} pps per flow"
    else:
        why = "--rate" + (" and --flows" if flows is not None else "")
    flows, rate = given(flows, rate)
    resolution = round(1000.0 * flows / rate, 3)
    return {"flows": flows, "rate": rate,
            "line": f"traffic {flows} flows x {rate:.0f} pps per direction ({resolution:g} ms resolution): {why}",
            "json": {"chosen_by": "options", "flows": flows, "rate": rate, "resolution_ms": resolution}}


def calibrate(plan: LabPlan, sizes: str, realtime: bool = True, cpu: int | None = None,
              progress: Any = lambda _: None, families: list[int] | None = None) -> Choice:
    """Climb LADDER on the running lab until a rung is not carried cleanly; `choose` the traffic.
    FAMILIES (default IPv4): the families the run will send, sharing each rung as the run shares its
    traffic; a NAT64 flow costs more CPU than an IPv4 one (a user-space translator on its path), so a
    rate carried by IPv4 alone can be more than a dual-stack lab's mix leaves room for."""
    results: list[tuple[float, int, list[str]]] = []
    for rate, flows in LADDER:
        reasons = judge(measure(plan, flows, rate, sizes, CALIBRATION_S, realtime, cpu, families=families))
        progress(f"calibration: {flows} flows x {rate:.0f} pps per direction: "
                 + ("carried" if not reasons else "; ".join(reasons)))
        results.append((rate, flows, reasons))
        if reasons:
            break
    return choose(results)
