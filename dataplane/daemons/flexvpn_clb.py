"""The CLB side of the FlexVPN router daemon (dataplane.daemons.flexvpnd): the master's listener and the
members' connections (JSON messages over TCP, dataplane.core.clb), loads and the choice of the
least-loaded gateway.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import time
from collections import deque
from typing import Any, Protocol

from labkit.configs import ClusterConfig

from ..core import clb, hsrp
from .evloop import Loop, Timer
from .flexvpn_hsrp import HsrpGroup, log


class Host(Protocol):
    """What the cluster needs from the daemon it runs in."""

    loop: Loop
    counters: dict[str, int]

    def cpu_percent(self) -> float: ...
    def memory_percent(self, spec: ClusterConfig | None) -> float: ...
    def crypto_counts(self) -> dict[str, int]: ...
    def status_dirty(self) -> None: ...


# ------------------------------------------------------------------------------------------ CLB
class Connection:
    """One CLB TCP connection (either side), non-blocking with an output buffer."""

    def __init__(self, daemon: Host, sock: socket.socket, peer: str, on_message: Any, on_close: Any):
        self.daemon, self.sock, self.peer = daemon, sock, peer
        self.reader = clb.Reader()
        self.out = b""
        self.on_message, self.on_close = on_message, on_close
        self.closed = False
        self.connected = True
        sock.setblocking(False)
        daemon.loop.watch(sock, selectors.EVENT_READ, self.ready)

    def ready(self, mask: int) -> None:
        if mask & selectors.EVENT_WRITE:
            if not self.connected:
                error = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if error:
                    self.close(os.strerror(error))
                    return
                self.connected = True
            self.flush()
        if self.closed or not mask & selectors.EVENT_READ:
            return
        try:
            data = self.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(str(exc))
            return
        if not data:
            self.close("closed by peer")
            return
        try:
            messages = self.reader.feed(data)
        except clb.ClbError as exc:
            self.daemon.counters["clb_malformed"] += 1
            self.close(f"malformed CLB input: {exc}")
            return
        for message in messages:
            if self.closed:
                return
            self.on_message(self, message)

    def send(self, message: clb.Message) -> None:
        if self.closed:
            return
        self.out += clb.encode(message)
        if len(self.out) > 65536:
            self.close("peer does not read")
            return
        if self.connected:
            self.flush()

    def flush(self) -> None:
        if self.out and self.connected:
            try:
                sent = self.sock.send(self.out)
                self.out = self.out[sent:]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as exc:
                self.close(str(exc))
                return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.out or not self.connected else 0)
        self.daemon.loop.watch(self.sock, events, self.ready)

    def close(self, why: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.daemon.loop.unwatch(self.sock)
        with contextlib.suppress(OSError):
            self.sock.close()
        self.on_close(self, why)


class Cluster:
    """`crypto ikev2 cluster`: master or member depending on the standby group's HSRP state."""

    def __init__(self, daemon: Host, spec: ClusterConfig, group: HsrpGroup | None):
        self.daemon, self.spec, self.group = daemon, spec, group
        self.port = spec.port
        self.hello = spec.hello_ms / 1000
        self.update = spec.update_ms / 1000
        self.holdtime = spec.holdtime_ms / 1000
        self.priority = spec.priority
        self.max_session = spec.max_session
        self.weights = clb.Weights(spec.weight_system_load, spec.weight_crypto_load)
        self.overload = float(spec.overload_limit)
        self.shutdown = spec.shutdown
        self.strict = spec.strict_overload
        self.address = group.address if group else ""
        self.cluster_ip = group.vip.address if group else ""
        self.role = "none"
        # master side
        self.master: clb.Master | None = None
        self.listener: socket.socket | None = None
        self.members: dict[Connection, str] = {}
        self.expire_timer: Timer | None = None
        # member side
        self.conn: Connection | None = None
        self.seq = 0
        self.last_ack: float | None = None
        self.up_since: float | None = None
        self.member_timers: list[Timer] = []
        self.reconnect_timer: Timer | None = None
        self.last_sent_load: tuple[int, ...] | None = None
        self.update_soon: Timer | None = None
        self.events: deque[str] = deque(maxlen=30)

    # ---------------------------------------------------------------- role
    def desired_role(self) -> str:
        if self.shutdown or self.group is None:
            return "none"
        state = self.group.state
        if state is hsrp.State.ACTIVE:
            return "master"
        if state in (hsrp.State.LISTEN, hsrp.State.SPEAK, hsrp.State.STANDBY):
            return "slave"
        return "none"

    def refresh_role(self) -> None:
        role = self.desired_role()
        if role == self.role:
            return
        log(f"IKEv2 cluster: role {self.role} -> {role}")
        self.events.append(f"{time.strftime('%H:%M:%S')} role {self.role} -> {role}")
        self.stop_master()
        self.stop_member()
        self.role = role
        if role == "master":
            self.start_master()
        elif role == "slave":
            self.start_member()

    # ---------------------------------------------------------------- master
    def start_master(self) -> None:
        self.master = clb.Master(self.address, self.holdtime, self.overload, self.weights)
        self.refresh_local()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", self.port))
        listener.listen(64)
        listener.setblocking(False)
        self.listener = listener
        self.daemon.loop.watch(listener, selectors.EVENT_READ, lambda _m: self.accept())
        self.expire_timer = self.daemon.loop.call_later(min(0.1, self.holdtime / 10), self.expire)

    def stop_master(self) -> None:
        if self.listener is not None:
            self.daemon.loop.unwatch(self.listener)
            self.listener.close()
            self.listener = None
        for conn in list(self.members):
            conn.close("no longer master")
        self.members.clear()
        if self.expire_timer is not None:
            self.expire_timer.cancel()
            self.expire_timer = None
        self.master = None

    def accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                sock, (address, _port) = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self.daemon, sock, address, self.master_message, self.master_closed)
            self.members[conn] = address

    def master_message(self, conn: Connection, message: clb.Message) -> None:
        if self.master is None:
            return
        now = self.daemon.loop.time()
        if isinstance(message, clb.Hello):
            if message.address != conn.peer:
                conn.close(f"hello claims {message.address} from {conn.peer}")
                return
            if message.address not in self.master.members:
                log(f"IKEv2 cluster: member {message.address} joined")
                self.events.append(f"{time.strftime('%H:%M:%S')} member {message.address} joined")
            conn.send(self.master.hello(message, now))
        elif isinstance(message, clb.Load):
            if message.address != conn.peer:
                conn.close(f"load update claims {message.address} from {conn.peer}")
                return
            self.master.update(message, now)
        elif isinstance(message, clb.Bye):
            conn.close("member said bye")
        self.daemon.status_dirty()

    def master_closed(self, conn: Connection, why: str) -> None:
        address = self.members.pop(conn, None)
        if self.master is not None and address and address in self.master.members \
                and address not in self.members.values():
            self.master.remove(address, self.daemon.loop.time(), why)
            log(f"IKEv2 cluster: member {address} dropped ({why})")
            self.events.append(f"{time.strftime('%H:%M:%S')} member {address} dropped ({why})")
        self.daemon.status_dirty()

    def expire(self) -> None:
        if self.master is None:
            return
        now = self.daemon.loop.time()
        for address in self.master.expire(now):
            log(f"IKEv2 cluster: member {address} dropped (hold time {self.holdtime * 1000:.0f} msec expired)")
            self.events.append(f"{time.strftime('%H:%M:%S')} member {address} dropped (hold time)")
            for conn, peer in list(self.members.items()):
                if peer == address:
                    conn.close("hold time expired")
            self.daemon.status_dirty()
        self.expire_timer = self.daemon.loop.call_later(min(0.1, self.holdtime / 10), self.expire)

    def refresh_local(self) -> None:
        if self.master is None:
            return
        counts = self.daemon.crypto_counts()
        local = self.master.local
        local.priority, local.max_session = self.priority, self.max_session
        local.cpu, local.memory = self.daemon.cpu_percent(), self.daemon.memory_percent(self.spec)
        local.ike, local.ipsec, local.half_open = counts["ike"], counts["ipsec"], counts["half_open"]
        local.arrivals = counts["arrivals"]
        self.master.settle_local(counts.get("settled", 0))

    def choose(self) -> str | None:
        """The master's choice for a new client (an address; ours means: serve it here)."""
        if self.master is None:
            return None
        self.refresh_local()
        choice = self.master.choose(self.daemon.loop.time())
        self.daemon.status_dirty()
        return choice

    # ---------------------------------------------------------------- member
    def start_member(self) -> None:
        self.connect()

    def stop_member(self) -> None:
        for timer in self.member_timers:
            timer.cancel()
        self.member_timers.clear()
        if self.reconnect_timer is not None:
            self.reconnect_timer.cancel()
            self.reconnect_timer = None
        if self.update_soon is not None:
            self.update_soon.cancel()
            self.update_soon = None
        if self.conn is not None:
            conn, self.conn = self.conn, None
            conn.send(clb.Bye(self.address))
            conn.close("role change")
        self.last_ack = None
        self.up_since = None

    def connect(self) -> None:
        self.reconnect_timer = None
        if self.role != "slave":
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with contextlib.suppress(OSError):
            sock.bind((self.address, 0))
        sock.setblocking(False)
        try:
            sock.connect((self.cluster_ip, self.port))
            connected = True
        except BlockingIOError:
            connected = False
        except OSError as exc:
            sock.close()
            self.retry(str(exc))
            return
        conn = Connection(self.daemon, sock, self.cluster_ip, self.member_message, self.member_closed)
        conn.connected = connected
        self.conn = conn
        self.last_ack = None
        self.connected_at = self.daemon.loop.time()
        self.last_sent_load = None
        conn.flush()
        self.send_hello()
        self.send_load()

    def retry(self, why: str) -> None:
        if self.role == "slave" and self.reconnect_timer is None:
            self.reconnect_timer = self.daemon.loop.call_later(min(1.0, self.hello), self.connect)

    def member_message(self, conn: Connection, message: clb.Message) -> None:
        if isinstance(message, clb.HelloAck):
            now = self.daemon.loop.time()
            if self.last_ack is None:
                log(f"IKEv2 cluster: connected to master {message.address} (cluster IP {self.cluster_ip})")
                self.up_since = now
            self.last_ack = now
            self.daemon.status_dirty()
        elif isinstance(message, clb.Bye):
            conn.close("master said bye")

    def member_closed(self, conn: Connection, why: str) -> None:
        if conn is not self.conn:
            return
        self.conn = None
        if self.last_ack is not None:
            log(f"IKEv2 cluster: lost the master ({why})")
        for timer in self.member_timers:
            timer.cancel()
        self.member_timers.clear()
        self.last_ack = None
        self.up_since = None
        self.daemon.status_dirty()
        self.retry(why)

    def send_hello(self) -> None:
        if self.conn is None or self.role != "slave":
            return
        now = self.daemon.loop.time()
        reference = self.last_ack if self.last_ack is not None else self.connected_at
        if now - reference > self.holdtime:
            self.conn.close(f"no hello acknowledgement for {self.holdtime * 1000:.0f} msec")
            return
        self.seq += 1
        self.conn.send(clb.Hello(self.address, self.seq, round(self.hello * 1000), round(self.holdtime * 1000)))
        self.member_timers = [t for t in self.member_timers if not t.cancelled]
        self.member_timers.append(self.daemon.loop.call_later(self.hello, self.send_hello))

    def overloaded_self(self) -> bool:
        """This gateway's own load at or above the overload limit, or its SAs at max-session (the
        master's test for a row, on our own figures)."""
        counts = self.daemon.crypto_counts()
        own = clb.Gateway(self.address, "Master" if self.role == "master" else "Slave", self.priority,
                          self.daemon.cpu_percent(), self.daemon.memory_percent(self.spec), self.max_session,
                          counts["ike"], counts["ipsec"])
        return own.overloaded(self.daemon.loop.time(), self.weights, self.overload)

    def own_load(self) -> clb.Load:
        counts = self.daemon.crypto_counts()
        self.seq += 1
        return clb.Load(self.address, self.seq, self.priority, self.daemon.cpu_percent(),
                        self.daemon.memory_percent(self.spec), self.max_session, counts["ike"], counts["ipsec"],
                        counts["half_open"], counts["arrivals"])

    def send_load(self) -> None:
        if self.conn is None or self.role != "slave":
            return
        load = self.own_load()
        self.conn.send(load)
        self.last_sent_load = (load.ike, load.ipsec, load.half_open, load.arrivals)
        self.member_timers.append(self.daemon.loop.call_later(self.update, self.send_load))

    def crypto_changed(self) -> None:
        """SA counts moved: members tell the master soon (coalesced), not only every update interval."""
        if self.role == "master":
            self.refresh_local()
            return
        if self.conn is None or self.update_soon is not None:
            return

        def push() -> None:
            self.update_soon = None
            if self.conn is None:
                return
            counts = self.daemon.crypto_counts()
            if self.last_sent_load != (counts["ike"], counts["ipsec"], counts["half_open"], counts["arrivals"]):
                load = self.own_load()
                self.conn.send(load)
                self.last_sent_load = (load.ike, load.ipsec, load.half_open, load.arrivals)

        self.update_soon = self.daemon.loop.call_later(0.02, push)

    # ---------------------------------------------------------------- status
    def status(self, wall: float) -> dict[str, object]:
        now = self.daemon.loop.time()
        base: dict[str, object] = {
            "role": self.role, "shutdown": self.shutdown, "cluster_ip": self.cluster_ip,
            "address": self.address, "holdtime_ms": round(self.holdtime * 1000),
            "hello_ms": round(self.hello * 1000), "update_ms": round(self.update * 1000),
            "overload_limit": int(self.overload), "port": self.port, "events": list(self.events),
            "strict_overload": self.strict,
            "standby_group": self.spec.standby_group,
        }
        if self.role == "master" and self.master is not None:
            self.refresh_local()
            base["status"] = "Up"
            base["rows"] = self.master.status(now, wall)
            base["redirects"] = self.master.redirects
            base["dropped"] = [{"at": wall - (now - t), "address": a, "why": w} for t, a, w in self.master.dropped]
        elif self.role == "slave":
            counts = self.daemon.crypto_counts()
            load = clb.load_percent(self.daemon.cpu_percent(), self.daemon.memory_percent(self.spec),
                                    counts["ike"], counts["ipsec"], self.max_session, self.priority, self.weights)
            base["status"] = "Up" if self.last_ack is not None else "Down"
            base["own"] = {
                "address": self.address, "priority": self.priority, "load": round(load, 1),
                "ike": counts["ike"], "ipsec": counts["ipsec"], "overloaded": self.overloaded_self(),
                "last_ack_at": None if self.last_ack is None else wall - (now - self.last_ack),
            }
        return base


