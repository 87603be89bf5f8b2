"""Rendered BGP policy of the JVD's test-bed configurations: MNHA A/B prepends and BFD (pure)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod

REPO = Path(__file__).resolve().parents[2]


def _files(tmp_path: Path, lab: str, edit: tuple[str, str] | None = None) -> dict[str, str]:
    text = (REPO / "labs" / f"{lab}.yml").read_text()
    if edit:
        assert edit[0] in text
        text = text.replace(*edit)
    path = tmp_path / f"{lab}.yml"
    path.write_text(text)
    return dict(planmod.build(load_topology(path).topology, f"labs/{lab}.yml", "/run/lab").files)


def _export(conf: str, protocol: str) -> str:
    block = conf[conf.index(f"protocol bgp {protocol} "):]
    return re.search(r"export (.*);\n", block).group(1)  # type: ignore[union-attr]


def _count(text: str, asn: int) -> int:
    return text.count(f"bgp_path.prepend({asn});")


def test_a_node_prepends_once_b_node_twice_on_the_pair_address(tmp_path: Path) -> None:
    files = _files(tmp_path, "topology3")
    a, b = _export(files["nodes/srx1/bird.conf"], "trust_mx1"), _export(files["nodes/srx2/bird.conf"], "trust_mx1")
    assert "net ~" not in a and _count(a, 65001) == 4  # 3x on signal, 1x normally, on every route
    pair = re.search(r"net ~ \[ ([^]]+) \]", b).group(1)  # type: ignore[union-attr]
    assert pair == "198.18.128.10/32"  # lo0.1, the pair's real-service
    on_pair = b[b.index("net ~"):b.index("} else { if SRG0")]
    assert _count(on_pair, 65002) == 6  # 4x on signal, 2x normally
    assert 'as-path-prepend "65002 65002 65002 65002";' in files["nodes/srx2/juniper.conf"]
    assert 'as-path-prepend "65002 65002";' in files["nodes/srx2/juniper.conf"]


def _pool_prepends(export: str, pool: str, asn: int) -> tuple[int, int]:
    """(normal, signal) prepends of POOL in an MNHA node's export filter."""
    if "net ~ [ " in export and pool in export[:export.index("] then")]:
        on = export[export.index("net ~"):export.index("} else { if SRG0")]
    else:
        on = export
    signal = on[on.index("then {"):on.index("} else {")]
    normal = on[on.index("} else {") + len("} else {"):]
    normal = normal[:normal.index("}")]
    return _count(normal, asn), _count(signal, asn)


def test_cgnat_tlb_pair_shares_one_pool_a_preferred_b_after_a_failure(tmp_path: Path) -> None:
    """TLB, SRG0, A/B prepends (the JVD): both nodes translate into the pair's one pool and announce it,
    A 1x (3x with the signal route), B 2x (4x): the MX routes the pool to A while A is healthy, to B (which
    holds the synchronised sessions) once A has lost activeness; no peer's pool is announced."""
    files = _files(tmp_path, "topology3-cgnat")
    nft = [re.search(r"snat to (\S+)", files[f"nodes/{n}/srx.nft"]).group(1)  # type: ignore[union-attr]
           for n in ("srx1", "srx2", "srx3", "srx4")]
    assert nft[0] == nft[1] == "198.51.100.0-198.51.100.15" and nft[2] == nft[3] == "198.51.100.16-198.51.100.31"
    a = _export(files["nodes/srx1/bird.conf"], "untrust_mx1")
    b = _export(files["nodes/srx2/bird.conf"], "untrust_mx1")
    for name in ("srx1", "srx2"):
        assert "peer_pool" not in files[f"nodes/{name}/bird.conf"], name
        assert "route 198.51.100.0/28 blackhole;" in files[f"nodes/{name}/bird.conf"], name
        assert "term peer-pool" not in files[f"nodes/{name}/juniper.conf"], name
    assert "net ~" not in a and _pool_prepends(a, "198.51.100.0/28", 65001) == (1, 3)
    assert "198.51.100.0/28" in b[:b.index("] then")]
    assert _pool_prepends(b, "198.51.100.0/28", 65002) == (2, 4)
    a_pool, b_pool = (1, 3), (2, 4)
    assert a_pool[0] < b_pool[0] < a_pool[1]  # the pool: A while healthy, B once A lost it
    # the untrust gateway waits for each pair's pool once
    plan = planmod.build(load_topology(tmp_path / "topology3-cgnat.yml").topology, "x", "/run/lab")
    wanted = [r.prefix for r in plan.expected_routes if r.ns.endswith("-gw-untrust")]
    assert sorted(wanted) == ["198.51.100.0/28", "198.51.100.16/28"]


def test_cgnat_pools_owner_preferred_healthy_peer_after_a_failure(tmp_path: Path) -> None:
    """A pool per SRX (nat_pool_scope srx): path lengths of each pool on both nodes (normal, signal): the
    owner's normal path is the shortest, its path with the signal route longer than the peer's normal one."""
    files = _files(tmp_path, "topology3-cgnat", ("  use_case: cgnat\n", "  use_case: cgnat\n  nat_pool_scope: srx\n"))
    assert "snat to 198.51.100.16-198.51.100.31" in files["nodes/srx2/srx.nft"]
    a = _export(files["nodes/srx1/bird.conf"], "untrust_mx1")
    b = _export(files["nodes/srx2/bird.conf"], "untrust_mx1")
    assert 'if proto = "peer_pool" then { bgp_path.prepend(65001); bgp_path.prepend(65001); accept; }' in a
    assert 'if proto = "peer_pool" then { accept; }' in b
    # A: 1/3 own pool, peer pool +2 -> 3/5; B: 2/4 on both pools
    a_own, a_peer, b_own, b_peer = (1, 3), (3, 5), (2, 4), (2, 4)
    assert a_own[0] < b_peer[0] and a_own[1] > b_peer[0]  # A's pool: A while healthy, B once A lost it
    assert b_own[0] < a_peer[0] and b_own[1] > a_peer[0]  # B's pool: B while healthy, A once B lost it


def test_per_srx_option_keeps_equal_prepends(tmp_path: Path) -> None:
    files = _files(tmp_path, "topology3", ("{nodes: [srx1, srx2]}", "{nodes: [srx1, srx2], prepend: per-srx}"))
    b = _export(files["nodes/srx2/bird.conf"], "trust_mx1")
    assert "net ~" not in b and _count(b, 65002) == 4


def test_bfd_on_every_session_when_asked(tmp_path: Path) -> None:
    files = _files(tmp_path, "topology3", ("  use_case: sfw\n", "  use_case: sfw\n  bfd: {}\n"))
    birds = {name: text for name, text in files.items() if re.search(r"/bird(-[a-z-]+)?\.conf$", name)}
    assert birds
    for name, text in birds.items():
        assert "protocol bfd {" in text and "min rx interval 300 ms;" in text and "multiplier 3;" in text, name
        assert "  bfd on;\n" in text, name
    assert "bfd-liveness-detection {" in files["nodes/mx1/juniper.conf"]
    assert "fall-over bfd" in files["nodes/gw-trust/running-config"]
    plain = _files(tmp_path, "topology3")
    assert not any("bfd" in text for name, text in plain.items() if name.endswith("bird.conf"))


@pytest.mark.skipif(shutil.which("bird") is None, reason="needs bird2")
def test_bfd_configs_parse(tmp_path: Path) -> None:
    files = _files(tmp_path, "topology1", ("  use_case: sfw\n", "  use_case: sfw\n  bfd: {}\n"))
    for name, text in files.items():
        if name.endswith("bird.conf"):
            conf = tmp_path / name.replace("/", "_")
            conf.write_text(text)
            result = subprocess.run(["bird", "-p", "-c", str(conf)], capture_output=True, text=True)
            assert result.returncode == 0, (name, result.stderr)


def test_blackhole_event_applies_only_with_bfd(tmp_path: Path) -> None:
    import json

    from lab_orchestrator.events import catalog as events

    def applicable(bfd: bool) -> events.Applicability:
        lab = tmp_path / ("on.yml" if bfd else "off.yml")
        text = (REPO / "labs" / "topology1.yml").read_text()
        lab.write_text(text.replace("  use_case: sfw\n", "  use_case: sfw\n  bfd: {}\n") if bfd else text)
        plan = json.loads(planmod.build(load_topology(lab).topology, "x", "/run/lab").to_json())
        return next(a for a in events.applicable(plan) if a.event.name == "srx-link-blackhole")

    assert not applicable(False).applicable and "bfd" in applicable(False).reason
    assert applicable(True).applicable


@pytest.mark.skipif(shutil.which("nft") is None, reason="needs nft")
def test_blackhole_ruleset_is_valid_nftables() -> None:
    from lab_orchestrator.runtime.ops import blackhole_ruleset

    text = blackhole_ruleset(["ge-0-0-0", "ge-0-0-1"])
    assert 'iifname { "ge-0-0-0", "ge-0-0-1" } drop' in text
    result = subprocess.run(["nft", "-c", "-f", "-"], input=text, capture_output=True, text=True)
    if result.returncode != 0 and "Operation not permitted" in result.stderr:
        pytest.skip("nft -c needs CAP_NET_ADMIN")
    assert result.returncode == 0, result.stderr
