"""Vendor interface names -> Linux names (15 characters, no '/' or ':'), and namespace names."""

from __future__ import annotations

import pytest

from lab_orchestrator.model import naming
from lab_orchestrator.model.naming import IFNAMSIZ_MAX, NameError_, linux_ifname


@pytest.mark.parametrize(("vendor", "linux"), [
    # Junos: physical ports, units, channelised ports, aggregates and the usual logical devices
    ("ge-0/0/0", "ge-0-0-0"),
    ("xe-1/2/3", "xe-1-2-3"),
    ("et-0/0/0", "et-0-0-0"),
    ("et-0/0/0:1", "et-0-0-0_1"),
    ("ge-0/0/0.100", "ge-0-0-0.100"),
    ("ae0", "ae0"),
    ("ae12.3", "ae12.3"),
    ("lo0.0", "lo0.0"),
    ("irb.100", "irb.100"),
    ("reth0", "reth0"),
    ("st0.1", "st0.1"),
    ("lt-0/0/0.1", "lt-0-0-0.1"),
    ("ge-0-0-0", "ge-0-0-0"),  # already Linux-shaped: kept (validation flags a clash with ge-0/0/0)
    # IOS: long names take the short form `show ip interface brief` accepts
    ("GigabitEthernet0/1", "Gi0-1"),
    ("GigabitEthernet0/0/0.100", "Gi0-0-0.100"),
    ("TenGigabitEthernet1/0/1", "Te1-0-1"),
    ("FastEthernet0/0", "Fa0-0"),
    ("Ethernet0/1", "Et0-1"),
    ("Loopback0", "Lo0"),
    ("Tunnel100", "Tu100"),
    ("Port-channel1", "Po1"),
    ("HundredGigE0/0/0/1", "Hu0-0-0-1"),
    ("FortyGigabitEthernet1/0/1", "Fo1-0-1"),
    ("TwentyFiveGigE1/0/1", "Twe1-0-1"),
    ("Serial0/0/0", "Se0-0-0"),
    ("Vlan100", "Vl100"),
    ("Gi0/1", "Gi0-1"),  # already short
    # Linux names pass through
    ("eth1", "eth1"),
    ("veth0", "veth0"),
])
def test_linux_ifname(vendor: str, linux: str) -> None:
    assert linux_ifname(vendor) == linux
    assert len(linux) <= IFNAMSIZ_MAX


@pytest.mark.parametrize("junk", [
    "", "/", "//", "///", ":", ".", "-", "0", "1/0",
    "ge-", "ge-0/0/", "ge-/0", "ge-0//0", "ge-0/0/0..1",
    "eth", "eth1/", "gi0/1", "Gi", "GigabitEthernet", "Ethernet0/1 ", " eth1", "eth 1", "eth1\n",
    "ge-0/0/0;rm", "ge-0/0/0\x00", "émoji0",
])
def test_rejects_junk(junk: str) -> None:
    with pytest.raises(NameError_) as info:
        linux_ifname(junk)
    assert "is not an interface name this lab understands" in str(info.value)
    assert info.value.hint  # says what a valid name looks like


def test_fifteen_characters_fit_sixteen_do_not() -> None:
    assert linux_ifname("ge-10/10/10.100") == "ge-10-10-10.100"  # exactly 15
    with pytest.raises(NameError_) as info:
        linux_ifname("ge-10/10/10.1000")
    assert str(info.value) == "'ge-10/10/10.1000' becomes 'ge-10-10-10.1000' (16 characters); Linux allows 15"
    assert info.value.hint == "shorten it or use another interface"


def test_long_ios_name_is_measured_after_abbreviation() -> None:
    # 28 characters as typed, 15 once abbreviated: fits
    assert linux_ifname("GigabitEthernet100/0/1.10000") == "Gi100-0-1.10000"
    with pytest.raises(NameError_):
        linux_ifname("GigabitEthernet100/0/1.100000")


def test_mapping_never_yields_forbidden_characters() -> None:
    for vendor in ("ge-0/0/0:1", "et-1/2/3:0.5", "GigabitEthernet1/0/1:2"):
        name = linux_ifname(vendor)
        assert "/" not in name and ":" not in name and " " not in name


def test_distinct_vendor_names_can_collide() -> None:
    """The reason validation checks collisions: the mapping is not injective."""
    assert linux_ifname("ge-0/0/0") == linux_ifname("ge-0-0-0")
    assert linux_ifname("GigabitEthernet0/1") == linux_ifname("Gi0/1")


def test_namespace_names() -> None:
    assert naming.namespace("t3", "mx1") == "t3-mx1"
    assert naming.namespace("t3", "mx1", "TRUST-VR") == "t3-mx1-trust-vr"
    assert naming.namespace("t3", "mx1", "UNTRUST-VR") == "t3-mx1-untrust-vr"
    assert naming.namespace("t3-nat", "gw-trust") == "t3-nat-gw-trust"
    assert naming.namespace("flexvpn", "lan0") == "flexvpn-lan0"


def test_root_namespace_names_fit() -> None:
    longest_lab = "abcdefghij"  # the model allows 10 characters
    assert naming.mgmt_bridge(longest_lab) == "abcdefghij-mg"
    assert len(naming.mgmt_bridge(longest_lab)) <= IFNAMSIZ_MAX
    assert naming.mgmt_host_port("t1", 1) == "t1-m1"
    ports = {naming.mgmt_host_port(longest_lab, i) for i in range(1, 100)}
    assert len(ports) == 99 and all(len(p) <= IFNAMSIZ_MAX for p in ports)
    assert naming.mgmt_bridge("t1") not in {naming.mgmt_host_port("t1", i) for i in range(1, 100)}


def test_nft_table_names() -> None:
    assert naming.root_nft_table("t1-nat") == "lab_t1_nat"
    assert naming.root_nft_table("flexvpn") == "lab_flexvpn"
