"""bench/nat64_forwarding.py without namespaces: the table's medians and ratios, the translator's CPU per
packet, and the paths it measures (each client address belongs to the path's use case)."""

from __future__ import annotations

from ipaddress import ip_address, ip_network

from benchmod import load

nat64 = load("nat64_forwarding")


def _run(pps: float, cpu: float = 0.0) -> dict[str, float]:
    return {"pps": pps, "mbps": pps * 64 * 8 / 1e6, "loss_pct": 1.0, "tayga_cpu_s": cpu, "received": pps * 4}


def test_the_ratio_row_uses_the_medians_of_the_same_run() -> None:
    results = {64: {"SFW44": [_run(300), _run(100), _run(200)], "SFW66": [_run(150), _run(250), _run(200)],
                    "NAT64": [_run(40, 0.5), _run(50, 0.5), _run(60, 0.5)]}}
    row = nat64.markdown(results, 4.0, 3).splitlines()[-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:7] == ["NAT64 / kernel", "64", "50", "200", "200", "0.25", "0.25"]
    assert cells[9] == f"{1e6 * 1.5 / 600:.2f}"  # 1.5 s of tayga for 600 NAT64 packets received


def test_the_paths_are_the_dual_stack_labs_use_cases() -> None:
    paths = {p.name: p for p in nat64.PATHS}
    assert ip_address(paths["SFW44"].source) in ip_network("100.64.0.0/17")  # the SFW half, not NAPT44
    assert ip_address(paths["NAT64"].source) in ip_network("2001:db8:172:80::/112")  # services.nat64.source
    assert ip_address(paths["SFW66"].source) not in ip_network("2001:db8:172:80::/112")
    assert (paths["NAT64"].target, paths["NAT64"].server) == ("2001:db8:64::1", "203.0.113.64")
