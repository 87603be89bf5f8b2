"""SRG monitoring (the JVD's SRG0 monitor-object with BFD liveliness, weights and thresholds)."""

from __future__ import annotations

from dataplane.core.mnha import Destination, MonitorObject, SrgMonitor


def jvd(dests: int = 1, weight: int = 300) -> SrgMonitor:
    obj = MonitorObject("trust", tuple(Destination(f"10.0.0.{i}", weight, f"ge-0/0/{i}") for i in range(dests)),
                        threshold=300, object_threshold=300)
    return SrgMonitor((obj,), srg_threshold=300, multiplier=3)


def test_a_destination_fails_after_multiplier_misses_and_the_srg_with_it() -> None:
    mon = jvd()
    assert mon.update({"10.0.0.0": False}, 0.3) is False
    assert mon.update({"10.0.0.0": False}, 0.6) is False
    assert mon.update({"10.0.0.0": False}, 0.9) is True
    assert mon.srg_weight() == 300
    assert [what for _, what in mon.events] == ["trust: bfd-liveliness 10.0.0.0 down via ge-0/0/0",
                                                "SRG failed: activeness lost (monitoring)"]


def test_one_good_check_recovers() -> None:
    mon = jvd()
    for t in range(3):
        mon.update({"10.0.0.0": False}, t)
    assert mon.update({"10.0.0.0": True}, 4) is False
    assert mon.events[-1][1] == "SRG monitoring recovered: activeness regained"


def test_a_miss_streak_interrupted_by_success_does_not_fail() -> None:
    mon = jvd()
    for ok in (False, False, True, False, False):
        assert mon.update({"10.0.0.0": ok}) is False


def test_weights_below_threshold_keep_the_srg() -> None:
    mon = jvd(dests=2, weight=150)  # two MX: one of them down is 150 < 300
    for _ in range(3):
        assert mon.update({"10.0.0.0": False, "10.0.0.1": True}) is False
    assert mon.object_weight(mon.objects[0]) == 150
    for _ in range(3):
        failed = mon.update({"10.0.0.0": False, "10.0.0.1": False})
    assert failed is True


def test_jvd_weights_one_of_two_destinations_fails_the_srg() -> None:
    mon = jvd(dests=2)
    for _ in range(3):
        failed = mon.update({"10.0.0.0": True, "10.0.0.1": False})
    assert failed is True


def test_srg_threshold_above_one_object_needs_two_objects() -> None:
    objs = tuple(MonitorObject(n, (Destination(ip, 300),), 300, 300) for n, ip in (("a", "1.1.1.1"), ("b", "2.2.2.2")))
    mon = SrgMonitor(objs, srg_threshold=600, multiplier=1)
    assert mon.update({"1.1.1.1": False, "2.2.2.2": True}) is False
    assert mon.update({"1.1.1.1": False, "2.2.2.2": False}) is True


def test_no_objects_never_fails() -> None:
    assert SrgMonitor((), 300).update({}) is False


# ---------------------------------------------------------------- a monitored link's return


def test_a_link_that_never_lost_carrier_is_live_without_asking_for_routes() -> None:
    from dataplane.core.mnha import PathReturn

    asked: list[int] = []

    def routed() -> set[str]:
        asked.append(1)
        return set()

    assert PathReturn().update({"ge-0-0-0": True, "ge-0-0-1": True}, routed) == {"ge-0-0-0": True, "ge-0-0-1": True}
    assert not asked, "routes are read only while a link waits for them"


def test_a_returning_link_is_live_only_once_bgp_routes_over_it() -> None:
    """The trust session comes up before the untrust one: the node stays out until both are routed."""
    from dataplane.core.mnha import PathReturn

    ret = PathReturn()
    links = ("ge-0-0-0", "ge-0-0-1")
    assert ret.update(dict.fromkeys(links, False), set) == dict.fromkeys(links, False)
    assert ret.update(dict.fromkeys(links, True), set) == dict.fromkeys(links, False), "carrier alone"
    assert ret.update(dict.fromkeys(links, True), lambda: {"ge-0-0-0"}) == {"ge-0-0-0": True, "ge-0-0-1": False}
    assert ret.update(dict.fromkeys(links, True), set) == {"ge-0-0-0": True, "ge-0-0-1": False}, "stays live"
    assert ret.update(dict.fromkeys(links, True), lambda: set(links)) == dict.fromkeys(links, True)
    # routed once: a later route withdrawal alone does not take the link out (BFD is up)
    assert ret.update(dict.fromkeys(links, True), set) == dict.fromkeys(links, True)


def test_routes_of_a_link_without_carrier_do_not_count() -> None:
    from dataplane.core.mnha import PathReturn

    ret = PathReturn()
    ret.update({"ge-0-0-0": False}, set)
    assert ret.update({"ge-0-0-0": False}, lambda: {"ge-0-0-0"}) == {"ge-0-0-0": False}
    assert ret.update({"ge-0-0-0": True}, set) == {"ge-0-0-0": False}, "stale routes before the carrier: not enough"

