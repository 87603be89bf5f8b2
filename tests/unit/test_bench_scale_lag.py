"""The session sync lag benchmark's pure parts (bench/scale_lag.py): how the sessions are shared
between generators, when a session was sent, how a looked-up session is counted, and its table."""

from __future__ import annotations

from benchmod import load

scale_lag = load("scale_lag")


def test_sessions_beyond_the_addresses_take_another_source_port_and_a_share_of_the_rate() -> None:
    one = scale_lag.shares(1000, 500.0, 1000)
    assert [(g.sport, g.count, g.rate) for g in one] == [(40000, 1000, 500.0)]
    three = scale_lag.shares(3_000_000, 50000.0, 2 ** 20 - 2)
    assert [g.sport for g in three] == [40000, 40001, 40002]
    assert sum(g.count for g in three) == 3_000_000 and all(g.count <= 2 ** 20 - 2 for g in three)
    assert round(sum(g.rate for g in three), 6) == 50000.0


def test_a_session_is_sent_at_its_generator_s_start_plus_its_place_over_the_rate() -> None:
    gen = scale_lag.shares(1000, 500.0, 1000)[0]
    assert scale_lag.sent_at(gen, 100.0, 0) == 100.0
    assert scale_lag.sent_at(gen, 100.0, 250) == 100.5


def test_a_session_counts_as_synced_only_on_both_nodes_of_one_pair() -> None:
    assert scale_lag.classify({"srx1", "srx2"}) == "synced"
    assert scale_lag.classify({"srx3"}) == "lagging"
    assert scale_lag.classify({"srx1", "srx3"}) == "lagging"  # two carriers, neither copy on its peer
    assert scale_lag.classify(set()) == "missing"


def test_the_table_shares_the_peer_s_copies_among_the_sessions_on_a_node() -> None:
    result = {"rate": 50000.0, "seconds": 60.0, "sessions": 3000000, "generators": 3, "udp_timeout": 660,
              "sample": 400, "during": {"looked_up": 4800, "old_enough": 4000, "synced": 3990, "lagging": 6,
                                        "missing": 4},
              "end": {"looked_up": 10000, "synced": 9999, "lagging": 1, "missing": 0},
              "senders": {0: {"sent": 1000000, "pps": 16600, "elapsed_s": 60.2, "max_lag_ms": 12.0}},
              "tables": {"srx1": 1500000}, "end_lookup_s": 30.1}
    text = scale_lag.markdown(result, "python3 bench/scale_lag.py", 180.0)
    assert "| while opening, ≥ 2 s old | 4000 | 3990 | 6 | 4 | 99.850 % | ≥ 99.99 % |" in text
    assert "| 2 s after the last | 10000 | 9999 | 1 | 0 | 99.990 % | ≥ 99.99 % |" in text


def test_a_benchmark_prints_its_table_and_keeps_it_unless_told_not_to(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import common  # bench/ is on the path once a benchmark is loaded

    doc = tmp_path / "benchmarks-x.md"
    assert common.publish("| a |", doc, keep=False) == 0
    assert not doc.exists() and "| a |" in capsys.readouterr().out
    assert common.publish("| a |", doc) == 0
    assert doc.read_text().startswith("| a |\n")
