"""Whether the machine kept up with a case: the checks after it that make a case not judged (an error
that runs again) rather than failed. The senders kept their schedule, ran until the runner stopped
them, the receivers took every packet in, the lab's daemons had a CPU, and the background sessions'
sample went out within 2 s of the event: otherwise the figures say what the generator or the machine
did, not what the lab did."""

from __future__ import annotations

from typing import Any

from . import baseline, cpuwait
from .result import Check, EventResult

ON_SCHEDULE = "senders on schedule"
COVERED = "traffic covered the case"  # every sender still sending when the runner stopped it
RECEIVED = "receivers kept up"  # no receiver's socket dropped a packet (it would count as lost)
# a task at the lab daemons' priority never waited longer than CPU_WAIT_MAX_S for a CPU while the traffic
# ran (`cpuwait`): a third of the BGP hold time (3 s), in which BIRD sends its keepalives (1 s apart)
CPU_LEFT = "lab daemons had a CPU"
CPU_WAIT_MAX_S = 1.0
# the background sessions' sample (`--sessions`) went out within the JVD's 2 s of the event
SAMPLE_IN_TIME = "sessions' sample sent in time"


def after(result: EventResult) -> list[Check]:
    """The generator's checks on RESULT: covered, on schedule, received (the CPU one is made while
    the case runs, `cpu_left`)."""
    short = ran_out(result.senders, result.marks)
    late = baseline.senders_late(result.senders, result.resolution_ms)
    dropped = receivers_dropped(result.forward, result.reverse)
    return [
        Check(name=RECEIVED, ok=not dropped, when="after", detail="; ".join(dropped) if dropped else
              "no receiver's socket dropped a packet"),
        Check(name=COVERED, ok=not short, when="after", detail="; ".join(short) if short else
              "every sender sent from before the event until the runner stopped it"),
        Check(name=ON_SCHEDULE, ok=not late, when="after",
              detail="; ".join(late) if late else "both senders kept their schedule during the event")]


def not_judged(checks: list[Check]) -> str | None:
    """Why a case with these CHECKS has no verdict (None: it has one), the first reason in this order:
    the traffic did not cover it, a sender fell behind, a receiver dropped packets, the daemons waited."""
    failed = {c.name: c.detail for c in checks if not c.ok}
    if COVERED in failed:  # the flows stopped before the case ended: a loss after their end cannot be seen
        return (f"the traffic did not cover the case ({failed[COVERED]}): nothing after its end was measured, "
                "so there is no verdict")
    if ON_SCHEDULE in failed:  # a packet due during the outage and sent after it was not lost: figures short
        late = failed[ON_SCHEDULE]
        return (f"the generator fell behind during the event ({late}): its figures cannot be trusted; "
                + ("run it again" if "paused" in late else "lower --rate/--flows"))
    if RECEIVED in failed:  # a packet the receiver dropped counts as lost: the loss figures are the generator's
        return (f"the generator's receivers could not keep up ({failed[RECEIVED]}): a packet of a measured flow "
                "they dropped counts as lost, so the figures cannot be trusted; lower --rate/--flows")
    if CPU_LEFT in failed:  # BGP, MNHA and the selectors may have missed their timers: not the event's doing
        return f"the machine was overloaded: {failed[CPU_LEFT]}; lower --rate/--flows"
    if SAMPLE_IN_TIME in failed:  # a sample sent late says nothing of the first 2 s after the event
        return f"the machine was too busy to ask the sessions in time: {failed[SAMPLE_IN_TIME]}; run it again"
    return None


def sample_in_time(sent_by_s: float, limit_s: float) -> Check:
    """Whether the sessions' sample was sent within LIMIT_S of the event (SENT_BY_S: its last datagram)."""
    ok = sent_by_s <= limit_s
    return Check(name=SAMPLE_IN_TIME, ok=ok, when="after",
                 detail=f"its last reverse datagram went {sent_by_s:g} s after the event"
                 + ("" if ok else f", later than {limit_s:g} s"))


def ran_out(senders: dict[str, dict[str, Any]], marks: dict[str, float]) -> list[str]:
    """Why the traffic of a case did not cover it ([] when it did), from SENDERS (name -> the
    generator's sender report) and the case's MARKS (CLOCK_MONOTONIC seconds): a sender that reached
    the end of its bound before the runner stopped it, or one that had ended before the event. Such
    a case measured nothing after the sender's end: a flow that never recovered would look whole."""
    event = marks.get("event")
    why = []
    for name, sent in senders.items():
        end = sent.get("end_ns")
        ended_at = f" at {end / 1e9 - event:+.1f} s from the event" if end and event is not None else ""
        if not sent.get("stopped"):
            ready = marks.get("readings")
            took = (f"; the readings before the event took {ready - marks['traffic']:.1f} s"
                    if ready is not None and "traffic" in marks else "")
            why.append(f"the {name} sender ran out of its time{ended_at}, before the runner stopped it{took}")
        elif end and event is not None and end / 1e9 < event:
            why.append(f"the {name} sender had ended {event - end / 1e9:.1f} s before the event")
    return why



def receivers_dropped(forward: dict[str, Any] | None, reverse: dict[str, Any] | None) -> list[str]:
    """What the receivers' sockets dropped (the kernel's count: PACKET_STATISTICS or the UDP socket's
    drops), per direction; [] when they kept up."""
    out = []
    for name, report in (("forward", forward), ("reverse", reverse)):
        drops = int((report or {}).get("socket_drops") or 0)
        if drops:
            out.append(f"the {name} receivers' sockets dropped {drops} packets")
    return out


def cpu_left(waits: list[list[float]] | None, marks: dict[str, float]) -> Check:
    """The `cpuwait` probe's verdict on the case (from its traffic's start until it stopped)."""
    start, end = marks.get("traffic"), marks.get("stopped")
    if waits is None or start is None or end is None:
        return Check(name=CPU_LEFT, ok=True, when="after", detail="not measured")
    ms, at = cpuwait.worst(waits, start, end)
    event = marks.get("event")
    when = f" ({at + start - event:+.1f} s from the event)" if at is not None and event is not None else ""
    if ms > CPU_WAIT_MAX_S * 1000:
        return Check(name=CPU_LEFT, ok=False, when="after",
                     detail=f"a task at the lab daemons' priority waited {ms / 1000:.1f} s for a CPU{when} "
                            f"(more than {CPU_WAIT_MAX_S:g} s: the realtime senders and the forwarding left "
                            "BIRD, the MNHA daemons and the selectors none)")
    return Check(name=CPU_LEFT, ok=True, when="after",
                 detail=f"the longest wait for a CPU at the lab daemons' priority was {ms:.0f} ms{when}")
