"""CLB (dataplane.core.clb): the load formula against the seed's figures, the wire protocol (and fuzzing
of it), the master's table, hold time, least-loaded choice, overload, and the show output."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statusdata import clb_status

from dataplane.core import clb
from dataplane.core.clb import ClbError, Hello, Load, Master, Weights
from labkit.flexstatus import ClbStatus

# ------------------------------------------------------------------------------------------ formula
# The seed's members: 13.2 % with no SA, 28.2 % with 1 IKE + 2 IPsec SAs (max-session 10). The system
# part that gives 13.2 % is (cpu + memory) / 2 = 26.4, e.g. cpu 40.0 and memory 12.8.
SEED_CPU, SEED_MEM = 40.0, 12.8


def test_seed_idle_member_is_13_2_percent() -> None:
    assert clb.load_percent(SEED_CPU, SEED_MEM, 0, 0, 10, 100) == pytest.approx(13.2)


def test_seed_one_session_adds_15_points() -> None:
    assert clb.load_percent(SEED_CPU, SEED_MEM, 1, 2, 10, 100) == pytest.approx(28.2)


def test_priority_100_to_50_raises_13_2_to_19_8() -> None:
    assert clb.load_percent(SEED_CPU, SEED_MEM, 0, 0, 10, 50) == pytest.approx(19.8)


@pytest.mark.parametrize("low,high", [(1, 2), (50, 51), (99, 100), (1, 100)])
def test_higher_priority_means_lower_load(low: int, high: int) -> None:
    assert clb.load_percent(30, 30, 2, 4, 10, high) < clb.load_percent(30, 30, 2, 4, 10, low)


def test_lower_weights_lower_the_load() -> None:
    full = clb.load_percent(50, 50, 3, 6, 10, 100)
    assert clb.load_percent(50, 50, 3, 6, 10, 100, Weights(system=50)) < full
    assert clb.load_percent(50, 50, 3, 6, 10, 100, Weights(crypto=50)) < full
    assert clb.load_percent(50, 50, 3, 6, 10, 100, Weights(0, 0)) == 0


def test_load_is_clamped_to_100() -> None:
    assert clb.load_percent(100, 100, 1000, 1000, 10, 1) == 100
    assert clb.load_percent(-5, 200, 0, 0, 10, 100) == pytest.approx(25)  # cpu 0, memory 100


@settings(max_examples=500, deadline=None)
@given(st.floats(0, 100), st.floats(0, 100), st.integers(0, 10**6), st.integers(0, 10**6),
       st.integers(1, 100000), st.integers(1, 100))
def test_load_always_in_range(cpu: float, mem: float, ike: int, ipsec: int, max_session: int, prio: int) -> None:
    assert 0 <= clb.load_percent(cpu, mem, ike, ipsec, max_session, prio) <= 100


# ------------------------------------------------------------------------------------------ codec
MESSAGES: list[clb.Message] = [
    Hello("10.10.10.2", 7, 1000, 3000),
    clb.HelloAck("10.10.10.1", 7),
    Load("10.10.10.3", 9, 50, 12.3, 45.6, 10, 1, 2, 1, 17),
    clb.Bye("10.10.10.2"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip(message: clb.Message) -> None:
    data = clb.encode(message)
    assert data[:3] == b"CLB" and data[3] == 1
    assert int.from_bytes(data[6:8], "big") == len(data)
    assert clb.decode(data) == message


def test_reader_reassembles_a_stream_cut_anywhere() -> None:
    stream = b"".join(clb.encode(m) for m in MESSAGES * 3)
    for cut in range(1, 50):
        reader = clb.Reader()
        got: list[clb.Message] = []
        for i in range(0, len(stream), cut):
            got += reader.feed(stream[i:i + cut])
        assert got == MESSAGES * 3


@pytest.mark.parametrize("data", [
    b"", b"CLB", b"XYZ\x01\x01\x00\x00\x18" + bytes(16), b"CLB\x02\x01\x00\x00\x18" + bytes(16),
    b"CLB\x01\x09\x00\x00\x08",  # unknown type
    b"CLB\x01\x01\x00\x00\x10" + bytes(8),  # hello too short
    clb.encode(Hello("10.10.10.2", 1, 50, 3000)),  # hello time out of range
    clb.encode(Load("10.10.10.3", 1, 100, 0, 0, 10, 0, 0))[:-1],
])
def test_malformed_raises_defined_error(data: bytes) -> None:
    with pytest.raises(ClbError):
        clb.decode(data)


def test_load_with_priority_zero_is_rejected() -> None:
    data = bytearray(clb.encode(Load("10.10.10.3", 1, 100, 0, 0, 10, 0, 0)))
    data[16] = 0  # priority byte
    with pytest.raises(ClbError):
        clb.decode(bytes(data))


@settings(max_examples=3000, deadline=None)
@given(st.binary(max_size=64))
def test_fuzz_decode(data: bytes) -> None:
    with contextlib.suppress(ClbError):
        clb.decode(data)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.binary(max_size=48), max_size=6))
def test_fuzz_reader(chunks: list[bytes]) -> None:
    reader = clb.Reader()
    try:
        for chunk in chunks:
            reader.feed(chunk)
    except ClbError:
        pass


@settings(max_examples=1000, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 100), st.floats(0, 100), st.floats(0, 100),
       st.integers(1, 100000), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_fuzz_load_round_trip(seq: int, prio: int, cpu: float, mem: float, max_session: int, ike: int,
                              ipsec: int) -> None:
    message = Load("192.0.2.1", seq, prio, cpu, mem, max_session, ike, ipsec)
    decoded = clb.decode(clb.encode(message))
    assert isinstance(decoded, Load)
    assert (decoded.ike, decoded.ipsec, decoded.priority) == (ike, ipsec, prio)
    assert decoded.cpu == pytest.approx(cpu, abs=0.0501) and decoded.memory == pytest.approx(mem, abs=0.0501)


# ------------------------------------------------------------------------------------------ master
def make_master(members: int = 2, max_session: int = 100) -> Master:
    master = Master("10.10.10.1", holdtime=3.0, overload_limit=90)
    master.local.max_session = max_session
    for i in range(members):
        address = f"10.10.10.{i + 2}"
        master.hello(Hello(address, 1, 1000, 3000), 0.0)
        master.update(Load(address, 2, 100, 0, 0, max_session, 0, 0), 0.0)
    return master


def test_hello_is_acknowledged_with_the_same_sequence() -> None:
    master = Master("10.10.10.1", 3.0, 90)
    ack = master.hello(Hello("10.10.10.2", 42, 1000, 3000), 1.0)
    assert ack == clb.HelloAck("10.10.10.1", 42)


def test_member_missing_hold_time_is_dropped() -> None:
    master = make_master()
    master.hello(Hello("10.10.10.2", 2, 1000, 3000), 2.5)
    assert master.expire(3.0) == []
    assert master.expire(3.01) == ["10.10.10.3"]  # last heard at 0.0
    assert set(master.members) == {"10.10.10.2"}
    assert master.expire(5.6) == ["10.10.10.2"]
    assert master.dropped[-1][1:] == ("10.10.10.2", "hold time expired")


def test_least_loaded_and_ties_prefer_members() -> None:
    master = make_master()
    assert master.choose(0.0) == "10.10.10.2"  # equal loads: a member (lower address) before the master
    assert master.choose(0.0) == "10.10.10.3"  # the pending redirect counts on .2 now
    assert master.choose(0.0) == "10.10.10.1"  # the master serves the next one itself
    assert master.redirects == 2


def test_burst_of_clients_spreads_evenly_before_any_update() -> None:
    master = make_master()
    choices = []
    for _ in range(30):
        choices.append(master.choose(0.0))  # served locally or redirected: counted as on its way
    assert {c: choices.count(c) for c in set(choices)} == {"10.10.10.1": 10, "10.10.10.2": 10, "10.10.10.3": 10}


def test_half_open_sas_are_not_load() -> None:
    master = make_master()
    master.update(Load("10.10.10.2", 3, 100, 0, 0, 100, 0, 0, half_open=5000), 0.0)
    assert master.members["10.10.10.2"].sas(0.0) == 0
    assert master.choose(0.0) == "10.10.10.2"  # a flood of half-open SAs does not push clients away


def test_master_own_clients_count_until_their_ike_auth_is_over() -> None:
    master = make_master(members=0)
    assert master.choose(0.0) == master.address
    assert master.local.sas(0.0) == clb.SAS_PER_SESSION
    master.local.ike, master.local.ipsec = 1, 2
    master.settle_local(1)
    assert master.local.sas(0.0) == 3 and not master.local.pending
    master.settle_local(1)  # no new settlement: nothing more popped
    assert master.choose(0.0) == master.address and len(master.local.pending) == 1


def test_pending_redirect_clears_when_the_member_reports_the_arrival() -> None:
    master = make_master()
    assert master.choose(0.0) == "10.10.10.2"
    member = master.members["10.10.10.2"]
    assert len(member.pending) == 1
    master.update(Load("10.10.10.2", 3, 100, 0, 0, 100, 1, 2, half_open=0, arrivals=1), 0.1)
    assert len(member.pending) == 0
    assert member.sas(0.1) == 3  # the established IKE SA and its 2 IPsec SAs


def test_pending_expires_if_the_client_never_arrives() -> None:
    master = make_master()
    master.choose(0.0)
    assert master.members["10.10.10.2"].sas(clb.PENDING_TTL + 1) == 0


def test_new_member_takes_new_sessions_until_its_load_matches() -> None:
    master = make_master(members=2)
    master.local.ike, master.local.ipsec = 10, 20
    for address in ("10.10.10.2", "10.10.10.3"):
        master.update(Load(address, 3, 100, 0, 0, 100, 10, 20), 1.0)
    master.hello(Hello("10.10.10.4", 1, 1000, 3000), 1.0)
    master.update(Load("10.10.10.4", 1, 100, 0, 0, 100, 0, 0), 1.0)
    choices = [master.choose(1.0) for _ in range(10)]
    assert choices == ["10.10.10.4"] * 10


def test_overloaded_member_is_skipped_and_marked() -> None:
    master = make_master(max_session=10)
    master.update(Load("10.10.10.2", 3, 100, 100, 100, 10, 0, 0), 1.0)  # system load 100 % -> 50 %
    master.update(Load("10.10.10.3", 3, 100, 0, 0, 10, 4, 8), 1.0)  # 12 SAs >= max-session
    rows = {r["address"]: r for r in master.status(1.0, 100.0)}
    assert rows["10.10.10.3"]["code"] == "-"
    master.overload_limit = 50
    rows = {r["address"]: r for r in master.status(1.0, 100.0)}
    assert rows["10.10.10.2"]["code"] == "-" and rows["10.10.10.1"]["code"] == "*"
    assert master.choose(1.0) == "10.10.10.1"


def test_everyone_overloaded_means_no_choice() -> None:
    master = make_master(max_session=1)
    master.local.ike = 1
    for address in ("10.10.10.2", "10.10.10.3"):
        master.update(Load(address, 3, 100, 0, 0, 1, 1, 0), 1.0)
    assert master.choose(1.0) is None


def test_removed_member_gets_no_more_redirects() -> None:
    master = make_master()
    master.remove("10.10.10.2", 1.0, "closed by peer")
    assert all(master.choose(1.0) != "10.10.10.2" for _ in range(5))


# ------------------------------------------------------------------------------------------ show
def cluster(**changes: Any) -> ClbStatus:
    return ClbStatus.model_validate(clb_status(**changes))


def test_show_master_layout() -> None:
    master = make_master()
    master.local.cpu, master.local.memory = SEED_CPU, SEED_MEM
    master.update(Load("10.10.10.2", 3, 100, SEED_CPU, SEED_MEM, 10, 1, 2), 10.0)
    master.update(Load("10.10.10.3", 3, 100, SEED_CPU, SEED_MEM, 10, 0, 0), 10.0)
    master.members["10.10.10.2"].max_session = 10
    master.local.max_session = 10
    status = cluster(role="master", overload_limit=90, status="Up", rows=master.status(10.728, 1000.728))
    text = clb.show_cluster(status, 1000.728)
    lines = text.splitlines()
    assert lines[:8] == ["Role : CLB Master", "Status : Up", "CLB Slaves : 2", "Cluster IP : 10.10.10.100",
                         "Hold time : 3000 msec", "Overload limit : 90%",
                         "Codes : '*' Least loaded, '-' Overloaded", "Load statistics:"]
    assert lines[8].split() == ["Gateway", "Role", "Last-seen", "Prio", "Load", "IKE", "Ipsec"]
    rows = [line.split() for line in lines[10:]]
    assert rows[0] == ["10.10.10.1", "Master", "--", "100", "13.2%", "0", "0"]
    assert rows[1] == ["10.10.10.2", "Slave", "00:00.728", "100", "28.2%", "1", "2"]
    assert rows[2] == ["*10.10.10.3", "Slave", "00:00.728", "100", "13.2%", "0", "0"]


def test_show_slave_layout_and_shutdown() -> None:
    status = cluster(role="slave", status="Up", update_ms=3000,
                     own={"address": "10.10.10.3", "priority": 50, "load": 19.8, "ike": 0, "ipsec": 0,
                          "overloaded": False, "last_ack_at": 99.135})
    lines = clb.show_cluster(status, 100.0).splitlines()
    assert lines[:7] == ["Role : CLB Slave", "Status : Up", "Cluster IP : 10.10.10.100", "Hold time : 3000 msec",
                         "Hello-interval : 1000 msec", "Update-interval: 3000 msec", "Load statistics:"]
    assert lines[9].split() == ["10.10.10.3", "00:00.865", "50", "19.8%", "0", "0"]
    assert clb.show_cluster(cluster(role="none", shutdown=True), 0) == "Cluster is shutdown\n"
    assert clb.show_cluster(None, 0) == "Cluster is shutdown\n"


def test_the_master_rows_are_what_the_status_file_model_reads() -> None:
    from labkit.flexstatus import ClbRow

    master = make_master()
    master.update(Load("10.10.10.2", 3, 100, SEED_CPU, SEED_MEM, 10, 1, 2), 10.0)
    rows = [ClbRow.model_validate(row) for row in master.status(10.0, 1000.0)]
    assert [r.role for r in rows] == ["Master", "Slave", "Slave"] and rows[0].last_seen_at is None
