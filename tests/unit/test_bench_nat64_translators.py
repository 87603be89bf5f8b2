"""The eBPF NAT64 candidate (bench/nat64prog.py) and its benchmark's table (bench/nat64_translators.py):
the programs assemble for a mapping and refuse others; as root, each translates a UDP and a TCP packet
both ways with both checksums right (BPF_PROG_TEST_RUN, no namespace), and the checker catches a wrong one."""

from __future__ import annotations

import os

import pytest
from benchmod import load

translators = load("nat64_translators")
nat64prog = load("nat64prog")


def test_the_programs_assemble_for_the_benchmark_s_mapping_and_refuse_other_lengths() -> None:
    assert len(nat64prog.six_to_four("2001:db8:64::/96", "192.0.2.0/24", "2001:db8:c::/120")) % 8 == 0
    assert len(nat64prog.four_to_six("2001:db8:64::/96", "192.0.2.0/24", "2001:db8:c::/120")) % 8 == 0
    with pytest.raises(ValueError, match="/96"):
        nat64prog.six_to_four("2001:db8:64::/64", "192.0.2.0/24", "2001:db8:c::/120")
    with pytest.raises(ValueError, match="/120"):
        nat64prog.four_to_six("2001:db8:64::/96", "192.0.2.0/24", "2001:db8:c::/112")


def test_the_checker_sees_a_wrong_checksum() -> None:
    frame = bytearray(translators.frame4("198.51.100.2", "192.0.2.2", 17, b"payload"))
    assert translators.check(bytes(frame))["l4_ok"] and translators.check(bytes(frame))["header_ok"]
    frame[-1] ^= 1
    assert not translators.check(bytes(frame))["l4_ok"]
    frame6 = bytearray(translators.frame6("2001:db8:c::2", "2001:db8:64::c633:6402", 6, b"data"))
    assert translators.check(bytes(frame6))["l4_ok"]
    frame6[30] ^= 1  # a source address byte: the pseudo-header no longer matches
    assert not translators.check(bytes(frame6))["l4_ok"]


@pytest.mark.skipif(os.geteuid() != 0, reason="loads eBPF programs (root)")
def test_each_program_translates_udp_and_tcp_both_ways() -> None:
    assert translators.self_check() == []
    # a packet the program is not for passes unchanged: IPv6 to another prefix
    other = translators.frame6("2001:db8:c::2", "2001:db8:203::9", 17, b"x")
    ret, out = translators.test_run(nat64prog.six_to_four("2001:db8:64::/96", "192.0.2.0/24", "2001:db8:c::/120"),
                                    other)
    assert ret == nat64prog.TC_ACT_OK and out == other


def test_the_table_gives_each_translator_against_ipv6_routing() -> None:
    run = {"pps": 0.0, "loss_pct": 0.0, "cpu_us_per_packet": 0.0}
    results = {64: {"IPv4": [{**run, "pps": 200000.0}], "IPv6": [{**run, "pps": 190000.0}],
                    "tayga": [{**run, "pps": 95000.0, "loss_pct": 50.0, "cpu_us_per_packet": 7.5}],
                    "eBPF": [{**run, "pps": 171000.0}]}}
    row = next(r for r in translators.markdown(results, 4.0, 1).splitlines() if r.startswith("| translators"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:6] == ["64", "200000", "190000", "95000", "171000"]
    assert cells[6:9] == ["0.50", "0.90", "1.80"] and cells[9:12] == ["50.0", "0.0", "7.50"]
