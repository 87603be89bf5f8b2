"""On real namespaces: services.default_policy decides the fate of a session no policy permits.

A UDP flow opened from the untrust side (the server's prefix toward a client address) matches no
policy of the SRX (its one policy permits trust to untrust): deny-all drops it, permit-all passes
it as a new session, and the `default-policy` rule counts it either way. One SRX keeps it short.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from running import LAB, REPO, RunningLab

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
]

PROBES = 20


def _one_srx(tmp: Path) -> Path:
    """labs/topology1.yml with srx1 alone behind mx1."""
    kept = [line for line in (REPO / "labs/topology1.yml").read_text().splitlines(keepends=True)
            if not any(f"srx{n}" in line for n in (2, 3, 4))]
    path = tmp / "topology1.yml"
    path.write_text("".join(kept))
    return path


def _default_policy_counter(running: RunningLab) -> tuple[str, int]:
    text = running.exec("srx1", "nft", "list", "chain", "inet", "srx", "forward")
    line = next(line for line in text.splitlines() if "default-policy" in line)
    return line.split('comment "')[1].rstrip('"'), int(line.split("packets")[1].split()[0])


@pytest.mark.parametrize("policy, answered", [("deny-all", 0), ("permit-all", PROBES)])
def test_an_untrust_initiated_flow_meets_the_default_policy(tmp_path: Path, policy: str, answered: int) -> None:
    with RunningLab(f"dp{policy[0]}", _one_srx(tmp_path), tmp_path, default_policy=policy) as running:
        client = subprocess.Popen(
            [*LAB, "exec", "--lab", running.name, "client", "--", sys.executable, "-m", "dataplane.traffic.udpprobe",
             "serve", "--bind", "100.64.30.1", "--port", "7001", "--seconds", "10"], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert client.stdout is not None and "serving" in client.stdout.readline()
            out = running.exec("server", sys.executable, "-m", "dataplane.traffic.udpprobe", "probe", "--sources",
                               "203.0.113.0/24", "--count", str(PROBES), "--to", "100.64.30.1:7001",
                               "--timeout", "1")
        finally:
            client.terminate()
            client.wait(5)
        time.sleep(0.2)
        assert len(json.loads(out)["answered"]) == answered, f"{policy}: {out}"
        name, packets = _default_policy_counter(running)
        assert name == f"default-policy {policy}"
        # each flow's first packet meets the default policy; under permit-all its answer is then
        # an existing session
        assert packets >= PROBES, f"{policy}: the default-policy rule counted {packets}"
