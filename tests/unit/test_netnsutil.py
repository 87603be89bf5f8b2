"""labkit.netnsutil without root: what can be checked from an ordinary process."""

from __future__ import annotations

import os

import pytest

from labkit import netnsutil


def test_a_process_already_in_its_parents_namespace_stays_there() -> None:
    before = os.stat("/proc/self/ns/net").st_ino
    if os.stat(f"/proc/{os.getppid()}/ns/net").st_ino != before:
        pytest.skip("this test process runs in another namespace than its parent")
    assert netnsutil.enter_parent_namespace() is True
    assert os.stat("/proc/self/ns/net").st_ino == before


def test_namespace_paths_are_under_run_netns() -> None:
    assert str(netnsutil.path("t3-srx1")) == "/run/netns/t3-srx1"
