"""The raw ctnetlink GETs of `flowlookup`, checked against pyroute2 as an independent implementation:
our requests decoded by its `nfct_msg`, its encoded answers read by our parser; then `FlowCounters`
against a fake kernel (chunks, errors, stale answers, a lost answer), all without root."""

from __future__ import annotations

import errno
import socket
import struct
from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
from pyroute2.netlink import NLA_F_NESTED, NLA_F_NET_BYTEORDER, nlmsgerr
from pyroute2.netlink.nfnetlink.nfctsocket import nfct_msg

from lab_orchestrator.events import flowlookup
from lab_orchestrator.events.flowlookup import Answer, FlowCounters, decode_answers, encode_request
from lab_orchestrator.model.diagnostics import LabError

CT_NEW = 1 << 8  # (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW, as the kernel answers a GET


def flow(src: str, sport: int, dst: str = "203.0.113.10", dport: int = 7000) -> SimpleNamespace:
    return SimpleNamespace(src=src, dst=dst, sport=sport, dport=dport)


def decoded(data: bytes) -> Any:
    message = nfct_msg(data)
    message.decode()
    return message


def requested_tuple(message: Any) -> tuple[int, str, str, int, int, int]:
    """(family, source, destination, protocol, source port, destination port) of a GET, read by pyroute2."""
    tuple_orig = message.get_attr("CTA_TUPLE_ORIG")
    ip, proto = tuple_orig.get_attr("CTA_TUPLE_IP"), tuple_orig.get_attr("CTA_TUPLE_PROTO")
    v = "6" if message["nfgen_family"] == socket.AF_INET6 else "4"
    return (message["nfgen_family"], ip.get_attr(f"CTA_IP_V{v}_SRC"), ip.get_attr(f"CTA_IP_V{v}_DST"),
            proto.get_attr("CTA_PROTO_NUM"), proto.get_attr("CTA_PROTO_SRC_PORT"), proto.get_attr("CTA_PROTO_DST_PORT"))


@pytest.mark.parametrize(("src", "dst", "family"), [("100.64.0.7", "203.0.113.10", socket.AF_INET),
                                                    ("2001:db8::7", "2001:db8:1::10", socket.AF_INET6)])
def test_a_request_is_a_get_of_the_flow_s_udp_tuple(src: str, dst: str, family: int) -> None:
    data = encode_request(flow(src, 40001, dst, 7000), 4242)  # type: ignore[arg-type]
    message = decoded(data)
    assert message["header"]["length"] == len(data) and len(data) % 4 == 0
    assert message["header"]["type"] == (1 << 8) | 1, "ctnetlink's IPCTNL_MSG_CT_GET"
    assert message["header"]["flags"] == 1, "NLM_F_REQUEST only: no acknowledgement besides the answer"
    assert message["header"]["sequence_number"] == 4242
    assert (message["version"], message["res_id"]) == (0, 0)
    assert requested_tuple(message) == (family, src, dst, 17, 40001, 7000)
    assert [name for name, *_ in message["attrs"]] == ["CTA_TUPLE_ORIG"]
    nests = [message["attrs"][0], *message.get_attr("CTA_TUPLE_ORIG")["attrs"]]
    assert [slot.get_flags() for slot in nests] == [NLA_F_NESTED] * 3


def session_answer(seq: int, orig: int | None, reply: int | None, *, old_counters: bool = False,
                   padded: bool = False) -> bytes:
    """A found session as the kernel answers it, encoded by pyroute2 (nests flagged NLA_F_NESTED, as
    the kernel's nla_nest_start does)."""
    packets = "CTA_COUNTERS32_PACKETS" if old_counters else "CTA_COUNTERS_PACKETS"
    ip = {"attrs": [["CTA_IP_V4_SRC", "100.64.0.7"], ["CTA_IP_V4_DST", "203.0.113.10"]]}
    proto = {"attrs": [["CTA_PROTO_NUM", 17], ["CTA_PROTO_SRC_PORT", 40001], ["CTA_PROTO_DST_PORT", 7000]]}
    attrs: list[Any] = [("CTA_TUPLE_ORIG", {"attrs": [("CTA_TUPLE_IP", ip, NLA_F_NESTED),
                                                      ("CTA_TUPLE_PROTO", proto, NLA_F_NESTED)]}, NLA_F_NESTED)]
    if padded:  # values of 2 and 5 bytes: the next attribute starts after zeros
        attrs += [["CTA_ZONE", 3], ["CTA_HELP", "tftp"]]
    for name, count in (("CTA_COUNTERS_ORIG", orig), ("CTA_COUNTERS_REPLY", reply)):
        if count is not None:
            attrs.append((name, {"attrs": [[packets, count], ["CTA_COUNTERS_BYTES" if not old_counters
                                                              else "CTA_COUNTERS32_BYTES", count * 100]]},
                          NLA_F_NESTED))  # pyroute2 takes flags from a tuple
    attrs.append(["CTA_ID", 99])
    message = nfct_msg()
    message["header"].update(type=CT_NEW, flags=0, sequence_number=seq)
    message["nfgen_family"] = socket.AF_INET
    message["attrs"] = attrs
    message.encode()
    return bytes(message.data)


def error_answer(seq: int, code: int) -> bytes:
    message = nlmsgerr()
    message["header"].update(type=2, sequence_number=seq)  # NLMSG_ERROR
    message["error"] = -code
    message.encode()
    return bytes(message.data)


def test_an_answer_s_packets_are_both_directions_of_its_session() -> None:
    assert list(decode_answers(session_answer(7, 5, 3))) == [Answer(7, 0, 8)]
    assert list(decode_answers(session_answer(8, 5, None))) == [Answer(8, 0, 5)], "one direction counted"
    assert list(decode_answers(session_answer(9, None, None))) == [Answer(9, 0, 0)], "accounting off"
    assert list(decode_answers(session_answer(10, 2 ** 40, 1))) == [Answer(10, 0, 2 ** 40 + 1)], "64 bits"
    assert list(decode_answers(session_answer(11, 6, 4, old_counters=True))) == [Answer(11, 0, 10)]


def test_attributes_after_padding_and_with_flags_are_read() -> None:
    data = session_answer(12, 21, 4, padded=True)
    assert b"\x06\x00\x12\x00\x00\x03\x00\x00" in data, "CTA_ZONE: 6 bytes, 2 of padding (pyroute2 pads)"
    assert list(decode_answers(data)) == [Answer(12, 0, 25)]
    nest = struct.pack("=HH", 28, 9 | NLA_F_NESTED)  # CTA_COUNTERS_ORIG: packets and bytes, 12 bytes each
    flagged = data.replace(nest, struct.pack("=HH", 28, 9 | NLA_F_NESTED | NLA_F_NET_BYTEORDER))
    assert flagged != data and list(decode_answers(flagged)) == [Answer(12, 0, 25)], "flags masked off"


def test_errors_carry_their_errno_and_an_acknowledgement_answers_nothing() -> None:
    assert list(decode_answers(error_answer(5, errno.ENOENT))) == [Answer(5, errno.ENOENT, 0)]
    assert list(decode_answers(error_answer(6, errno.EPERM))) == [Answer(6, errno.EPERM, 0)]
    assert list(decode_answers(error_answer(7, 0))) == []


def test_every_message_of_one_buffer_is_read() -> None:
    data = session_answer(1, 2, 3) + error_answer(2, errno.ENOENT) + session_answer(3, 9, None, padded=True)
    assert list(decode_answers(data)) == [Answer(1, 0, 5), Answer(2, errno.ENOENT, 0), Answer(3, 0, 9)]
    assert list(decode_answers(data[:-1])) == [Answer(1, 0, 5), Answer(2, errno.ENOENT, 0)], "truncated: dropped"


class FakeKernel:
    """A ctnetlink socket's other end: each GET (decoded by pyroute2) answered as the kernel does,
    every message of a send before the send returns, one datagram per answer."""

    def __init__(self, sessions: dict[tuple[str, int], int], failing: tuple[str, int] | None = None):
        self.sessions, self.failing = sessions, failing
        self.queue: deque[bytes] = deque()
        self.sends: list[int] = []  # requests per send
        self.asked: list[tuple[int, str, str, int, int, int]] = []
        self.queued_at_send: list[int] = []

    def send(self, data: bytes) -> int:
        self.queued_at_send.append(len(self.queue))
        requests = 0
        offset = 0
        while offset < len(data):
            length = struct.unpack_from("=I", data, offset)[0]
            self.answer(decoded(data[offset:offset + length]))
            offset += length
            requests += 1
        self.sends.append(requests)
        return len(data)

    def answer(self, message: Any) -> None:
        seq, wanted = message["header"]["sequence_number"], requested_tuple(message)
        self.asked.append(wanted)
        key = (wanted[1], wanted[4])
        if key == self.failing:
            self.queue.append(error_answer(seq, errno.EPERM))
        elif key in self.sessions:
            self.queue.append(session_answer(seq, self.sessions[key], 0))
        else:
            self.queue.append(error_answer(seq, errno.ENOENT))

    def recv_into(self, buffer: bytearray) -> int:
        if not self.queue:
            raise TimeoutError("timed out")
        data = self.queue.popleft()
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        pass


def counters_on(**kernels: FakeKernel) -> FlowCounters:
    counters = FlowCounters({})
    counters.sockets = kernels  # type: ignore[assignment]
    return counters


def test_each_flow_is_looked_up_by_its_tuple_in_its_family_on_every_srx() -> None:
    """One GET per flow and SRX, in the flow's family; a flow with no session on an SRX (ENOENT) is
    simply not there."""
    v4, v6 = flow("100.64.0.1", 1024), flow("2001:db8::5", 1025, "2001:db8:1::10")
    srx1 = FakeKernel({("100.64.0.1", 1024): 3, ("2001:db8::5", 1025): 4})
    srx2 = FakeKernel({("2001:db8::5", 1025): 6})
    got = counters_on(srx1=srx1, srx2=srx2).read([v4, v6])  # type: ignore[list-item]
    assert got == {("100.64.0.1", 1024): {"srx1": 3}, ("2001:db8::5", 1025): {"srx1": 4, "srx2": 6}}
    assert srx2.asked == [(socket.AF_INET, "100.64.0.1", "203.0.113.10", 17, 1024, 7000),
                          (socket.AF_INET6, "2001:db8::5", "2001:db8:1::10", 17, 1025, 7000)]
    assert srx1.sends == [2], "both in one send"


def test_requests_go_in_chunks_each_answered_before_the_next() -> None:
    flows = [flow("100.64.0.1", 2000 + i) for i in range(150)]
    kernel = FakeKernel({("100.64.0.1", 2000 + i): i for i in range(0, 150, 3)})
    got = counters_on(srx1=kernel).read(flows)  # type: ignore[arg-type]
    assert got == {("100.64.0.1", 2000 + i): {"srx1": i} for i in range(0, 150, 3)}
    assert kernel.sends == [64, 64, 22] and kernel.queued_at_send == [0, 0, 0]


def test_an_error_names_the_srx_and_its_late_answers_are_not_taken_for_the_next_reading() -> None:
    flows = [flow("100.64.0.1", 3000 + i) for i in range(10)]
    kernel = FakeKernel({("100.64.0.1", 3000 + i): 1 for i in range(10)}, failing=("100.64.0.1", 3002))
    counters = counters_on(srx1=kernel)
    with pytest.raises(LabError, match="conntrack lookup on srx1 failed: Operation not permitted"):
        counters.read(flows)  # type: ignore[arg-type]
    assert len(kernel.queue) == 7, "the answers after the error are still waiting"
    kernel.queue.append(session_answer(2 ** 30, 9, 9))  # and an answer to no request at all
    kernel.failing = None
    kernel.sessions = {("100.64.0.1", 3000 + i): 50 + i for i in range(10)}
    assert counters.read(flows) == {("100.64.0.1", 3000 + i): {"srx1": 50 + i} for i in range(10)}  # type: ignore[arg-type]


def test_a_lost_answer_is_an_error_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = FakeKernel({})
    monkeypatch.setattr(kernel, "answer", lambda message: None)  # nothing comes back
    with pytest.raises(LabError, match=f"srx1 failed: no answer within {flowlookup.ANSWER_TIMEOUT_S:g} s"):
        counters_on(srx1=kernel).read([flow("100.64.0.1", 1024)])  # type: ignore[list-item]


def test_a_flow_s_request_is_built_once() -> None:
    counters = counters_on(srx1=FakeKernel({}))
    counters.read([flow("100.64.0.1", 1024)])  # type: ignore[list-item]
    body = counters._bodies[("100.64.0.1", "203.0.113.10", 1024, 7000)]
    counters.read([flow("100.64.0.1", 1024)])  # type: ignore[list-item]
    assert counters._bodies[("100.64.0.1", "203.0.113.10", 1024, 7000)] is body
