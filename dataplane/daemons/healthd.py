"""TLB health monitor of one MX (the JVD's Network-monitor): probes every real-service, publishes health.

A process of its own, so that it can fail and be restarted apart from the selector (dataplane.daemons.mxlb,
the lab's traffic-dird and sdk-process): the selector keeps the last published state while the
monitor is away, and the monitor never touches the forwarding state.

Each network-monitoring profile (ICMP, TCP, UDP, HTTP) probes every real-service's address from the
trust instance at its own interval (dataplane.core.health.Prober) and feeds one up/down state machine per
real-service and profile (dataplane.core.health.HealthState). After each round the whole state is
published: a JSON datagram to the selector's socket and an atomic status file (health-status.json).
Restarted after a crash (LAB_RESUME=1) it resumes from its status file, so a restart changes no
real-service's health. Carrier is the selector's business (it watches its links itself). On
SIGUSR1 (labkit.contracts.HEALTH_PROBE_NOW) every profile probes at once: `lab up` asks for it the
moment the lab became reachable, instead of waiting up to an interval for the next rounds.

    python -m dataplane.daemons.healthd /run/lab/LAB/nodes/MX/mxlb.json    (the selector's configuration)
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from typing import Any

from labkit.configs import SelectorConfig
from labkit.contracts import HEALTH_PROBE_NOW
from labkit.status import HealthMember, HealthProfileState, HealthStatus, write_status

from ..core.health import HealthState, Prober, ProfileHealth
from .daemonkit import exit_now, resumed


def state_json(state: HealthState) -> HealthProfileState:
    return HealthProfileState(up=state.up, last_result=state.last_result, probes=state.probes,
                              fail_streak=state.fail_streak, ok_streak=state.ok_streak,
                              last_change=state.last_change, last_sent=state.last_sent)


def restore_state(state: HealthState, data: HealthProfileState) -> None:
    state.up, state.last_result = data.up, data.last_result
    state.probes, state.last_change = data.probes, data.last_change
    state.fail_streak, state.ok_streak = data.fail_streak, data.ok_streak
    state.last_sent = data.last_sent


class Monitor:
    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.profiles: list[dict[str, Any]] = list(config["health"]["profiles"])
        self.targets: dict[str, str] = {}
        for selector in config["selectors"]:
            for m in selector["members"]:
                self.targets.setdefault(m["name"], m["loopback"])
        trust = next(s for s in config["selectors"] if s["side"] == "trust")
        self.trust_ns = trust["ns"]
        # A real-service's probes carry its selector mark: the trust instance's policy rules send them
        # through the table its traffic takes (the SRX the selector picked), not by the instance's
        # routes, which while BGP converges after a link failure can send a pair's probe to an SRX of
        # another pair (no answer: a healthy real-service taken out, the table reshuffled).
        self.marks: dict[str, int] = {m["name"]: int(m["mark"]) for m in trust["members"]}
        self.health = {name: ProfileHealth({p["name"]: HealthState(int(p["failures"]), int(p["recoveries"]))
                                            for p in self.profiles}) for name in self.targets}
        self.probers = {p["name"]: Prober(str(p["type"]), int(p["timeout_ms"]) / 1000, p.get("port"),
                                          str(p.get("http_path", "/"))) for p in self.profiles}
        self.seq = 0
        self.resumed = False
        self.out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.out.setblocking(False)
        self.resume(resumed(config["health_status_file"], HealthStatus))

    def resume(self, previous: HealthStatus | None) -> None:
        """Restarted after a crash: each real-service's health as the previous instance published it."""
        if previous is None:
            return
        for name, data in previous.members.items():
            for profile, values in data.profiles.items() if name in self.health else ():
                state = self.health[name].states.get(profile)
                if state is not None:
                    restore_state(state, values)
        self.seq = previous.seq
        self.resumed = True
        summary = ", ".join(f"{name} {'up' if h.up else 'down'}" for name, h in self.health.items())
        print(f"{time.strftime('%H:%M:%S')} resumed: {summary}", flush=True)

    def report(self) -> HealthStatus:
        return HealthStatus(node=self.config["node"], pid=os.getpid(), at=time.time(), seq=self.seq,
                            resumed=self.resumed,
                            members={name: HealthMember(up=h.up, last_result=h.last_result,
                                                        profiles={p: state_json(s) for p, s in h.states.items()})
                                     for name, h in self.health.items()})

    def publish(self) -> None:
        """To the selector (if it listens now) and to the status file: the whole state each time."""
        self.seq += 1
        status = self.report()
        with contextlib.suppress(OSError):  # the selector is restarting: it reads the status file at start
            self.out.sendto(status.to_json(None).encode(), self.config["health_socket"])
        write_status(self.config["health_status_file"], status)

    def probe_round(self, profile: str) -> None:
        # the selector compares it with the moment it last moved a real-service's path (a probe in
        # flight through the SRX it left says nothing about the one it goes through now)
        sent = time.time()
        for name, (ok, detail) in self.probers[profile].round(self.targets, self.marks).items():
            health = self.health[name]
            if health.record(profile, ok, detail, sent=sent):
                print(f"{time.strftime('%H:%M:%S')} {name} health {'up' if health.up else 'down'}: "
                      f"{profile}: {detail}", flush=True)
        self.publish()

    def run(self) -> None:
        from labkit import netnsutil

        # Blocked before the first status file says which process to signal: a `lab up` that signals
        # then never kills a daemon still starting; the signal waits here until `wait` takes it.
        # SIGTERM and SIGINT are taken the same way, so a stop ends the wait at once (a handler would
        # only run when the wait ends by itself: Python resumes an interrupted sigtimedwait).
        probe_now = getattr(signal, HEALTH_PROBE_NOW)
        stop = {signal.SIGTERM, signal.SIGINT}
        signal.pthread_sigmask(signal.SIG_BLOCK, {probe_now, *stop})
        with netnsutil.entered(self.trust_ns):
            for prober in self.probers.values():
                prober.open()  # probes leave from the trust instance (the RE side of the MX)
        self.publish()
        interval = {p["name"]: int(p["interval_ms"]) / 1000 for p in self.profiles}
        due = dict.fromkeys(interval, time.monotonic())
        while not stop & signal.sigpending():
            profile = min(due, key=lambda name: due[name])
            wait = due[profile] - time.monotonic()
            if wait > 0:
                got = signal.sigtimedwait({probe_now, *stop}, min(wait, 0.2))
                if got is not None and got.si_signo in stop:
                    return
                if got is not None:
                    due = dict.fromkeys(interval, time.monotonic())  # asked: every profile now
                continue
            started = time.monotonic()
            # Stream probes (TCP, HTTP, UDP) connect from the calling thread's namespace.
            with netnsutil.entered(self.trust_ns):
                self.probe_round(profile)
            due[profile] = started + interval[profile]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m dataplane.daemons.healthd MXLB-CONFIG.json", file=sys.stderr)
        return 2
    # the selector's typed configuration (labkit.configs.SelectorConfig), checked whole at start
    config = SelectorConfig.read(argv[1]).model_dump(mode="json")
    if config.get("mode") != "tlb":
        print(f"healthd {config['node']}: no TLB on this MX, nothing to monitor", file=sys.stderr)
        return 2
    monitor = Monitor(config)
    profiles = ", ".join(f"{p['name']} ({p['type']} every {p['interval_ms']} ms)" for p in monitor.profiles)
    print(f"healthd {config['node']}: {len(monitor.targets)} real-services, {profiles}", flush=True)
    monitor.run()
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv))
