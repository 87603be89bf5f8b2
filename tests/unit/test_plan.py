"""The plan of every shipped lab: it builds, it is deterministic, it matches its goldens, and it
keeps the invariants the backend relies on (checked by code here, not only by the goldens).

Goldens: tests/golden/labs/<lab file stem>/ holds plan.json and every rendered file, exactly as
`plan.files` has them. UPDATE_GOLDEN=1 rewrites them (and removes files the plan no longer makes).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from pathlib import Path

import pytest

from lab_orchestrator.model import naming
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan.pipeline import LabPlan
from lab_orchestrator.plan.plantypes import BgpSession

REPO = Path(__file__).resolve().parents[2]
LAB_FILES = sorted((REPO / "labs").glob("*.yml"))
LAB_IDS = [p.stem for p in LAB_FILES]
GOLDEN_LABS = REPO / "tests" / "golden" / "labs"
STATE_ROOT = "/run/lab"


def _build(lab: Path) -> LabPlan:
    # A relative source: it is printed in the rendered files, so the goldens stay machine-independent.
    source = lab.relative_to(REPO).as_posix()
    return planmod.build(load_topology(lab).topology, source, STATE_ROOT)


@pytest.fixture(scope="module")
def plans() -> dict[str, LabPlan]:
    return {lab.stem: _build(lab) for lab in LAB_FILES}


def test_labs_are_shipped() -> None:
    assert len(LAB_FILES) >= 9


# --- determinism and goldens ------------------------------------------------------------------


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_plan_is_deterministic(lab: Path, plans: dict[str, LabPlan]) -> None:
    again = _build(lab)
    first = plans[lab.stem]
    assert again.to_json() == first.to_json()
    assert again.files == first.files
    assert list(again.files) == list(first.files)  # same order too: backends write in this order


def _digest_all() -> str:
    digest = hashlib.sha256()
    for lab in LAB_FILES:
        plan = _build(lab)
        for name in sorted(plan.files):
            digest.update(f"{lab.stem}/{name}\0{plan.files[name]}\0".encode())
    return digest.hexdigest()


def test_plan_does_not_depend_on_hash_seed() -> None:
    """Set or dict iteration that leaked into the output would differ under another PYTHONHASHSEED."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
            "import test_plan; print(test_plan._digest_all())")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(REPO), str(Path(__file__).parent)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"})
             for seed in ("1", "4242")]  # in parallel: each builds every lab
    digests = set()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        digests.add(out.strip())
    assert digests == {_digest_all()}


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_plan_matches_goldens(lab: Path, plans: dict[str, LabPlan], golden, update_golden: bool) -> None:
    plan = plans[lab.stem]
    folder = GOLDEN_LABS / lab.stem
    assert "plan.json" in plan.files
    # plan.json is written last and lists every file, itself included
    written = json.loads(plan.files["plan.json"])
    assert written == json.loads(plan.to_json())
    assert "plan.json" in written["file_names"]
    for name, content in plan.files.items():
        golden(folder / name, content)
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    stale = sorted(on_disk - set(plan.files))
    if stale and update_golden:
        for name in stale:
            (folder / name).unlink()
        stale = []
    assert not stale, f"golden files the plan no longer makes: {stale} (UPDATE_GOLDEN=1 removes them)"


def test_no_golden_folder_without_a_lab() -> None:
    folders = {p.name for p in GOLDEN_LABS.iterdir() if p.is_dir()} if GOLDEN_LABS.exists() else set()
    assert folders <= set(LAB_IDS), f"golden folders of labs that no longer exist: {sorted(folders - set(LAB_IDS))}"


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_state_root_is_used(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    assert plan.state_dir == f"{STATE_ROOT}/{plan.name}"
    for proc in plan.processes:
        for arg in proc.argv:
            if arg.startswith("/") and arg != sys.executable:
                assert arg.startswith(plan.state_dir + "/"), arg


# --- invariants -------------------------------------------------------------------------------


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_veth_ends_have_distinct_ifindexes(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    assert plan.veths
    for veth in plan.veths:
        assert veth.a.ifindex != veth.b.ifindex, veth
    indexes = [i.ifindex for i in plan.all_interfaces()] + [p.ifindex for p in plan.mgmt.ports]
    duplicates = [i for i, n in Counter(indexes).items() if n > 1]
    assert not duplicates, f"ifindexes used twice: {duplicates}"


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_linux_names_fit_and_are_unique_per_namespace(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    names: list[tuple[str, str]] = [(i.ns, i.name) for i in plan.all_interfaces()]
    names += [(p.ns, p.name) for p in plan.mgmt.ports]
    names += [(b.ns, b.name) for b in plan.bridges]
    root = [plan.mgmt.bridge] + [p.host_port for p in plan.mgmt.ports]
    names += [("", name) for name in root]
    for ns, name in names:
        assert 0 < len(name) <= naming.IFNAMSIZ_MAX, (ns, name)
        assert "/" not in name and ":" not in name and " " not in name, (ns, name)
        assert name != "lo", (ns, name)
    duplicates = [key for key, n in Counter(names).items() if n > 1]
    assert not duplicates, f"interface names used twice in one namespace: {duplicates}"


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_interfaces_live_in_planned_namespaces(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    namespaces = {ns.name for ns in plan.namespaces}
    for iface in plan.all_interfaces():
        assert iface.ns in namespaces, iface
    for veth in plan.veths:
        assert veth.a.ns != veth.b.ns, veth  # a veth joins two namespaces
    for item in list(plan.processes) + list(plan.rulesets) + list(plan.routes) + list(plan.sessions):
        assert item.ns in namespaces, item
    for port in plan.mgmt.ports:
        assert port.ns in namespaces


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_no_address_is_used_twice(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    owners: list[tuple[IPv4Address, str]] = []
    for iface in plan.all_interfaces():
        if iface.address:
            owners.append((IPv4Interface(iface.address).ip, f"{iface.ns}/{iface.name}"))
    for node in plan.nodes:
        for instance, address in node.loopbacks.items():
            owners.append((IPv4Address(address), f"{node.name} loopback {instance or 'master'}"))
        owners.append((IPv4Interface(node.mgmt_address).ip, f"{node.name} mgmt"))
    owners.append((IPv4Interface(plan.mgmt.host_address).ip, "mgmt bridge"))
    count = Counter(ip for ip, _ in owners)
    duplicates = {str(ip): [who for i, who in owners if i == ip] for ip, n in count.items() if n > 1}
    assert not duplicates


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_point_to_point_ends_share_a_subnet(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    for veth in plan.veths:
        if veth.a.lan is None and veth.a.address and veth.b.address:
            assert IPv4Interface(veth.a.address).network == IPv4Interface(veth.b.address).network, veth
    # every LAN's node ends share the LAN's subnet
    lans: dict[str, set[IPv4Network]] = {}
    for iface in plan.interfaces():
        if iface.lan and iface.address:
            lans.setdefault(iface.lan, set()).add(IPv4Interface(iface.address).network)
    for lan, subnets in lans.items():
        assert len(subnets) == 1, (lan, subnets)


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_every_bgp_session_has_its_reverse(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    keys = Counter((s.local_address, s.local_as, s.peer_address, s.peer_as) for s in plan.sessions)
    assert all(n == 1 for n in keys.values()), "a session is planned twice"
    for s in plan.sessions:
        assert (s.peer_address, s.peer_as, s.local_address, s.local_as) in keys, s
        reverse = next(r for r in plan.sessions if r.local_address == s.peer_address)
        assert reverse.node == s.peer_node and reverse.peer_node == s.node
    protocols = Counter((s.ns, s.protocol) for s in plan.sessions)
    assert all(n == 1 for n in protocols.values()), "BIRD protocol names must be unique per instance"


def _connect_delay_rendered(plan: LabPlan, session: BgpSession) -> int:
    """The connect delay SESSION's end has in its rendered BIRD configuration."""
    conf = next(text for path, text in plan.files.items() if path.startswith(f"nodes/{session.node}/bird")
                and f"protocol bgp {session.protocol} from peer {{" in text
                and f"source address {session.local_address};" in text)
    block = conf.split(f"protocol bgp {session.protocol} from peer {{", 1)[1].split("\n}", 1)[0]
    [seconds] = re.findall(r"^  connect delay time (\d+);$", block, re.MULTILINE)
    return int(seconds)


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_one_end_of_every_session_connects_first(lab: Path, plans: dict[str, LabPlan]) -> None:
    """The two ends of a session do not open their connections together when both start waiting at
    once (BIRD would take the second for a restart of its peer): in what is rendered, one waits 1 s,
    the other 3 s."""
    plan = plans[lab.stem]
    for s in plan.sessions:
        reverse = next(r for r in plan.sessions if r.local_address == s.peer_address
                       and r.peer_address == s.local_address)
        assert {_connect_delay_rendered(plan, s), _connect_delay_rendered(plan, reverse)} == {1, 3}, s


def test_sessions_exist_where_expected(plans: dict[str, LabPlan]) -> None:
    assert plans["flexvpn"].sessions == []  # no BGP in the FlexVPN example
    for stem in LAB_IDS:
        if stem.startswith("topology"):
            assert plans[stem].sessions, stem


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_cgnat_pools_per_pair_where_one_node_translates_else_per_srx(lab: Path, plans: dict[str, LabPlan]) -> None:
    """TLB SRG0 pairs with A/B prepends share one pool (the JVD's srx_nat_pool1 on both nodes); every
    other SRX (standalone, CHASH, SRG1) has its own; pools of different owners never overlap."""
    plan = plans[lab.stem]
    srxs = [n for n in plan.nodes if n.kind == "srx"]
    if plan.use_case not in ("cgnat", "mixed"):
        assert all(n.nat_pool is None for n in plan.nodes)
        return
    assert srxs
    assert all(n.nat_pool for n in srxs), f"every srx of a {plan.use_case} lab has a NAT pool"
    pair_of = {name: tuple(pair) for pair in plan.mnha for name in pair}
    shared = plan.load_balancing == "tlb" and lab.stem in ("topology3-cgnat", "topology4-cgnat", "topology3-mixed",
                                                           "topology3-dualstack", "topology4-dualstack")
    for pair in plan.mnha:
        a, b = (plan.node(n).nat_pool for n in pair)
        assert (a == b) == shared, (pair, a, b)
    owners = {(pair_of.get(n.name) if shared else None) or n.name: IPv4Network(n.nat_pool) for n in srxs}
    pools = list(owners.values())
    # NAT64 pools (services.nat64): one per pair, apart from every NAPT44 pool
    pools += list({IPv4Network(n.nat64_pool) for n in srxs if n.nat64_pool})
    for i, pool in enumerate(pools):
        for other in pools[:i]:
            assert not pool.overlaps(other), (pool, other)


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_mgmt_addresses_unique_and_inside_subnet(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    subnet = IPv4Network(plan.mgmt.subnet)
    host = IPv4Interface(plan.mgmt.host_address)
    assert host.network == subnet
    addresses = [IPv4Interface(p.address) for p in plan.mgmt.ports]
    assert len(addresses) == len(plan.nodes)
    assert len({a.ip for a in addresses} | {host.ip}) == len(addresses) + 1
    for address in addresses:
        assert address.network == subnet, address
        assert address.ip not in (subnet.network_address, subnet.broadcast_address)
    assert [p.address for p in plan.mgmt.ports] == [n.mgmt_address for n in plan.nodes]


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_namespace_names_unique(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    names = [ns.name for ns in plan.namespaces]
    assert len(names) == len(set(names))
    for ns in plan.namespaces:
        assert ns.name.startswith(plan.name + "-")


def test_namespace_names_unique_across_labs(plans: dict[str, LabPlan]) -> None:
    """Shipped labs can run side by side: no namespace, root-side interface or nft table shared."""
    seen: dict[str, str] = {}
    for stem, plan in plans.items():
        owned = [ns.name for ns in plan.namespaces] + [plan.mgmt.bridge, plan.mgmt.nft_table]
        owned += [p.host_port for p in plan.mgmt.ports]
        for name in owned:
            assert name not in seen, f"{name} of {stem} is also {seen.get(name)}'s"
            seen[name] = stem


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_host_default_routes_point_at_a_neighbour(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    hosts = {n.name for n in plan.nodes if n.kind == "host"}
    assert hosts
    for host in hosts:
        ns = naming.namespace(plan.name, host)
        defaults = [r for r in plan.routes if r.ns == ns and r.dst == "0.0.0.0/0" and r.table is None]
        assert len(defaults) == 1, (host, defaults)
        via = IPv4Address(defaults[0].via)
        own = [i for i in plan.interfaces() if i.node == host]
        assert any(via in IPv4Interface(i.address).network for i in own if i.address), (host, via)
        assert via not in {IPv4Interface(i.address).ip for i in own if i.address}
        neighbours = {i.node for i in plan.interfaces() if i.node != host and (
            i.peer_node == host or (i.lan is not None and i.lan in {o.lan for o in own}))}
        owner = [i for i in plan.interfaces() if i.address and IPv4Interface(i.address).ip == via]
        assert len(owner) == 1 and owner[0].node in neighbours, (host, via, owner)


@pytest.mark.parametrize("lab", LAB_FILES, ids=LAB_IDS)
def test_files_listed_per_node_exist(lab: Path, plans: dict[str, LabPlan]) -> None:
    plan = plans[lab.stem]
    for node in plan.nodes:
        for name in node.files:
            assert name in plan.files, name
            assert name.startswith(f"nodes/{node.name}/")
    for ruleset in plan.rulesets:
        assert ruleset.file in plan.files
    for name, content in plan.files.items():
        assert content.endswith("\n"), name
        assert not name.startswith("/") and ".." not in name.split("/")


def test_golden_plans_name_no_machine_path() -> None:
    """The goldens are machine-independent: no absolute path of this checkout leaks into them."""
    if not GOLDEN_LABS.exists():
        pytest.skip("no goldens yet")
    for path in GOLDEN_LABS.rglob("*"):
        if path.is_file():
            assert str(REPO) not in path.read_text(), path


def test_session_sync_filters_tcp_states_in_the_kernel(plans: dict[str, LabPlan]) -> None:
    # An SRX syncs a TCP session as a whole: conntrackd gets (from the kernel's filter) the
    # established, TIME_WAIT and closed states of a TCP session, not each handshake step.
    configs = {f"{lab}:{name}": text for lab, plan in plans.items()
               for name, text in plan.files.items() if name.endswith("/conntrackd.conf")}
    assert configs
    for where, text in configs.items():
        assert "Filter From Kernelspace {" in text, where
        assert "ESTABLISHED TIME_WAIT CLOSED for TCP" in text, where
        assert "SYN_SENT" not in text and "SYN_RECV" not in text, where



def test_session_sync_has_room_for_the_events_of_a_whole_table(plans: dict[str, LabPlan]) -> None:
    """A cold sync writes the peer's whole table at once, and the kernel reports each write to
    conntrackd's event socket: the buffer holds every session's event (the kernel doubles the size
    asked), so the socket does not overflow and conntrackd does not take the copies for its own."""
    from lab_orchestrator.plan.features.mnha import (
        NETLINK_BUFFER_MAX,
        NETLINK_EVENT_BYTES,
        SYNC_SOCKET_BUFFER,
        netlink_buffer,
    )

    assert netlink_buffer(1024) == 8 << 20
    assert 2 * netlink_buffer(262144) >= 262144 * NETLINK_EVENT_BYTES
    assert 2 * netlink_buffer(1_400_000) >= 1_400_000 * NETLINK_EVENT_BYTES
    assert netlink_buffer(16_777_216) == NETLINK_BUFFER_MAX < 2**31 // 2
    configs = [text for plan in plans.values() for name, text in plan.files.items()
               if name.endswith("/conntrackd.conf")]
    assert configs and all(f"NetlinkBufferSize {netlink_buffer(262144)}\n" in text for text in configs)
    # and the ICL's sockets room for a cold sync's burst of messages
    assert all(f"SndSocketBuffer {SYNC_SOCKET_BUFFER}\n" in text and f"RcvSocketBuffer {SYNC_SOCKET_BUFFER}\n" in text
               for text in configs)

# --- the device configurations a node shows -------------------------------------------------------

_POLICY_USE = re.compile(r"^\s*(?:export|import|vrf-export|vrf-import)\s+(\[[^\]]*\]|\S+);", re.M)
_POLICY_DEF = re.compile(r"^\s*policy-statement\s+(\S+)\s*\{", re.M)
JUNOS_LABS = [p for p in LAB_FILES if p.stem.startswith("topology")]  # MXs and SRXs; the FlexVPN labs are IOS-like


@pytest.mark.parametrize("lab", JUNOS_LABS, ids=[p.stem for p in JUNOS_LABS])
def test_every_policy_a_junos_config_uses_is_defined(lab: Path, plans: dict[str, LabPlan]) -> None:
    """Junos refuses to commit a configuration that exports or imports a policy it does not define."""
    checked = 0
    for path, text in plans[lab.stem].files.items():
        if not path.endswith("juniper.conf"):
            continue
        defined = set(_POLICY_DEF.findall(text))
        used = {name for ref in _POLICY_USE.findall(text) for name in ref.strip("[] ").split()}
        assert used <= defined, f"{lab.stem} {path}: policies used, never defined: {sorted(used - defined)}"
        checked += 1
    assert checked, f"{lab.stem}: no Junos configuration rendered"


@pytest.mark.parametrize("lab", JUNOS_LABS, ids=[p.stem for p in JUNOS_LABS])
def test_an_srx_config_exports_every_loopback_bird_announces(lab: Path, plans: dict[str, LabPlan]) -> None:
    """BIRD's direct protocol on lo announces lo0.0 and the TLB real-service units (lo0.1, lo0.2); the
    export policies' loopback term must name each, or the configuration says they are rejected."""
    plan = plans[lab.stem]
    for node in plan.nodes:
        if node.kind != "srx":
            continue
        text = plan.files[f"nodes/{node.name}/juniper.conf"]
        terms = re.findall(r"term loopback \{(.*?)then accept;", text, re.S)
        assert terms, f"{lab.stem} {node.name}: no loopback term"
        addresses = {f"{node.loopbacks['']}/32", *(f"{a}/32" for a in node.lo_units.values())}
        for term in terms:
            named = set(re.findall(r"route-filter (\S+) exact;", term))
            assert addresses <= named, f"{lab.stem} {node.name}: loopback term misses {sorted(addresses - named)}"
