"""A lab's namespaces stay reachable by their path when someone else runs `ip netns add` meanwhile.

`ip netns add` binds /run/netns onto itself when it is not a mount point yet; namespaces mounted below
before that are hidden, and `lab down` used to fail on them (EBUSY) and leave them behind. The check
runs in a private mount namespace, with /run/netns not a mount point, as on a freshly booted host."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.root

SCRIPT = textwrap.dedent(
    """
    import os, subprocess
    from labkit import netnsutil
    netnsutil.create("lntm-lab")
    subprocess.run(["ip", "netns", "add", "lntm-other"], check=True)
    try:
        assert netnsutil.delete("lntm-lab") is True
        assert not netnsutil.path("lntm-lab").exists()
    finally:
        subprocess.run(["ip", "netns", "del", "lntm-other"], check=True)
    print("clean")
    """
)


def test_a_later_ip_netns_add_does_not_hide_the_labs_namespaces() -> None:
    command = f"umount -l /run/netns 2>/dev/null; exec {sys.executable} -c '{SCRIPT}'"
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", command],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "clean", done.stderr
