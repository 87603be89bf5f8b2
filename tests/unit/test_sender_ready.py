"""A sender says it is ready only once its frames are built, just before its first packet: whoever
starts the answers after it (`lab events run`, `lab traffic start`) relies on the forward packets
being on their way. Pure: the socket, the next hop and the hot loop are fakes."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

import pytest

from dataplane.traffic import Flow, Sender
from dataplane.traffic import cli as clifile
from dataplane.traffic import send as sendmod

FLOW = Flow(flow_id=0, src="100.64.0.1", dst="203.0.113.10", sport=40000, dport=7000)


class FakeSocket:
    def setsockopt(self, *args: Any) -> None: ...

    def getsockname(self) -> tuple[Any, ...]:
        return ("eth1", 0, 0, 1, b"\x02\x00\x00\x00\x00\x01")

    def close(self) -> None: ...


class Order(list[str]):
    """What happened, in order; OUT: the command line's output, looked at when the frames are built and
    when the first packet leaves."""

    out: io.StringIO | None = None


@pytest.fixture
def order(monkeypatch: pytest.MonkeyPatch) -> Order:
    seen = Order()
    real_frames = sendmod.FrameSet

    def printed() -> None:
        if seen.out is not None:
            seen.append("ready printed" if '"ready": true' in seen.out.getvalue() else "nothing printed")

    def frames(*args: Any, **kw: Any) -> Any:
        printed()
        seen.append("frames built")
        return real_frames(*args, **kw)

    def loop(self: Sender, sock: Any, frames: Any, batch: Any = None) -> tuple[list[int], int, dict[str, Any]]:
        printed()
        seen.append("first packet")
        return [0], 0, {"start_ns": 1, "end_ns": 2, "error_kinds": {}, "max_lag_ns": 0, "late": 0, "lags": {},
                        "calls": 0, "max_lag_steal_ms": 0.0, "steal_ms": 0.0}

    monkeypatch.setattr(sendmod, "socket", SimpleNamespace(socket=lambda *a: FakeSocket(), AF_PACKET=17, SOCK_RAW=3))
    monkeypatch.setattr(sendmod, "bind_socket", lambda *a: None)
    monkeypatch.setattr(sendmod, "FrameSet", frames)
    monkeypatch.setattr(Sender, "_loop", loop)
    monkeypatch.setattr(clifile.signal, "signal", lambda *a: None)  # the test process keeps its own handlers
    monkeypatch.setattr(sendmod.gc, "freeze", lambda: None)  # and its collector
    return seen


def test_ready_comes_after_the_frames_and_before_the_first_packet(order: Order) -> None:
    sender = Sender(iface="eth1", flows=[FLOW], rate=100.0, duration=1.0, dst_mac="02:00:00:00:00:02",
                    on_ready=lambda: order.append("ready"))
    sender.run()
    assert order == ["frames built", "ready", "first packet"]


def test_the_command_line_prints_ready_when_the_sender_is(order: Order) -> None:
    order.out = io.StringIO()
    config = Sender(iface="eth1", flows=[FLOW], rate=100.0, duration=1.0, dst_mac="02:00:00:00:00:02").config()
    clifile._cli_send(SimpleNamespace(config="x"), config, order.out)
    lines = [json.loads(line) for line in order.out.getvalue().splitlines()]
    assert order == ["nothing printed", "frames built", "ready printed", "first packet"]
    assert lines[0] == {"ready": True} and lines[1]["role"] == "send"
