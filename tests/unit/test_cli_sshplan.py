"""SSH planning: the server's configuration, users, ssh_config, the process; host keys and known_hosts."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml

from lab_orchestrator.cli_ssh import keys
from lab_orchestrator.model.schema import Topology
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan import sshconfig, sshplan
from lab_orchestrator.runtime import credentials

REPO = Path(__file__).resolve().parents[2]


def build(name: str = "topology1.yml", ssh: dict[str, object] | None = None, tmp: Path | None = None):  # type: ignore[no-untyped-def]
    path = REPO / "labs" / name
    if ssh is not None:
        assert tmp is not None
        data = yaml.safe_load(path.read_text())
        data["ssh"] = ssh
        path = tmp / name
        path.write_text(yaml.safe_dump(data))
    topo: Topology = load_topology(path).topology
    return planmod.build(topo, f"labs/{name}", "/run/lab")


def server_config(plan) -> sshconfig.ServerConfig:  # type: ignore[no-untyped-def]
    return sshconfig.from_json(plan.files[sshplan.CONFIG_FILE])


def test_every_router_answers_hosts_do_not() -> None:
    plan = build()
    config = server_config(plan)
    assert [n.name for n in config.nodes] == ["gw-trust", "mx1", "srx1", "srx2", "srx3", "srx4", "gw-untrust"]
    assert {n.name: n.vendor for n in config.nodes}["mx1"] == "junos"
    assert {n.name: n.vendor for n in config.nodes}["gw-trust"] == "ios"
    mgmt = {p.node: p for p in plan.mgmt.ports}
    for node in config.nodes:
        assert node.mgmt_address == mgmt[node.name].address and node.mgmt_if == mgmt[node.name].name
        assert node.host_key == f"/run/lab/t1/ssh/{node.name}_ed25519_key"


def test_one_lab_wide_process() -> None:
    plan = build()
    procs = [p for p in plan.processes if p.name == sshplan.PROCESS_NAME]
    assert len(procs) == 1
    proc = procs[0]
    assert proc.node == "_lab" and proc.argv[1:] == ("-m", "lab_orchestrator.cli_ssh", "/run/lab/t1/ssh/sshd.json")
    assert proc.control_socket is None  # started with the daemons, after the management ports exist


def test_mx_instances_birds_peers_and_selector_tables() -> None:
    mx = server_config(build()).node("mx1")
    assert mx is not None
    assert [(i.name, i.ns, i.table) for i in mx.instances] == [
        ("", "t1-mx1", "inet.0"), ("TRUST-VR", "t1-mx1-trust-vr", "TRUST-VR.inet.0"),
        ("UNTRUST-VR", "t1-mx1-untrust-vr", "UNTRUST-VR.inet.0")]
    assert [(b.instance, b.process) for b in mx.birds] == [("TRUST-VR", "bird-trust-vr"),
                                                           ("UNTRUST-VR", "bird-untrust-vr")]
    assert mx.instances[1].tables["101"] == "TRUST-VR.selector-srx1.inet.0"
    assert mx.instances[1].tables["199"] == "TRUST-VR.selector-none.inet.0"
    groups = {(p.instance, p.protocol): p.group for p in mx.peers}
    assert groups["TRUST-VR", "fw_srx1"] == "SRX-TRUST" and groups["UNTRUST-VR", "fw_srx1"] == "SRX-UNTRUST"
    assert groups["TRUST-VR", "core_gw_trust"] == "GW-TRUST"
    tlb = server_config(build("topology3.yml")).node("mx1")
    assert tlb is not None and tlb.instances[1].tables["199"] == "TRUST-VR.srx_mnha_group_tlb-fi.inet.0"
    assert tlb.features["load_balancing"] == "tlb"


def test_features_of_mnha_and_flexvpn() -> None:
    srx = server_config(build("topology3.yml")).node("srx1")
    assert srx is not None and srx.features["mnha"]["nodes"] == ["srx1", "srx2"]  # type: ignore[index]
    router = server_config(build("flexvpn.yml")).node("router1")
    assert router is not None
    assert router.features["hsrp"][0]["ip"] == "10.10.10.100"  # type: ignore[index]
    assert "ikev2_cluster" in router.features and "ikev2" in router.features


def test_default_user_has_no_fixed_password() -> None:
    plan = build()
    config = server_config(plan)
    assert [(u.name, u.klass, u.password) for u in config.users] == [("admin", "super-user", True)]
    assert config.lab_key
    assert "password" not in config.to_json().replace('"password": true', "")  # no password, no hash in the plan
    # the password file of the plan leaves it to `lab up`, which draws one at random per lab
    assert json.loads(plan.files[sshconfig.PASSWORDS_FILE]) == {"admin": None}
    first, second = (json.loads(credentials.materialize(plan.files)[sshconfig.PASSWORDS_FILE])["admin"]
                     for _ in range(2))
    assert first != second and len(first) >= 16 and first != "admin"


def test_password_hash_salt_and_rounds() -> None:
    fast = 1000  # the check's logic, not its cost: the server hashes with PBKDF2_ITERATIONS
    assert sshconfig.PBKDF2_ITERATIONS >= 600_000
    one, two = sshconfig.hash_password("admin", fast), sshconfig.hash_password("admin", fast)
    assert one != two  # a random salt each time
    scheme, rounds, salt, digest = one.split("$")
    assert (scheme, rounds, len(bytes.fromhex(salt))) == ("pbkdf2-sha256", "1000", 16) and "admin" not in one
    assert sshconfig.check_password(one, "admin") and sshconfig.check_password(two, "admin")
    assert not sshconfig.check_password(one, "Admin")
    assert not sshconfig.check_password("garbage", "admin")
    assert sshconfig.hash_password("x").split("$")[1] == str(sshconfig.PBKDF2_ITERATIONS)


def test_server_hashes_the_password_file(tmp_path: Path) -> None:
    plan = build(ssh={"users": [{"name": "ops", "password": "s3cret"}, {"name": "admin"}]}, tmp=tmp_path)
    config = sshconfig.ServerConfig(**{**server_config(plan).__dict__, "state_dir": str(tmp_path)})
    drawn = credentials.materialize(plan.files)[sshconfig.PASSWORDS_FILE]
    (tmp_path / "ssh").mkdir()
    Path(config.passwords).write_text(drawn)
    hashes = sshconfig.read_passwords(config, rounds=1000)
    assert sshconfig.check_password(hashes["ops"], "s3cret")
    assert sshconfig.check_password(hashes["admin"], json.loads(drawn)["admin"])
    assert not sshconfig.check_password(hashes["admin"], "admin")
    Path(config.passwords).unlink()
    assert sshconfig.read_passwords(config, rounds=1000) == {}  # no file: no password login at all


def test_users_from_the_topology(tmp_path: Path) -> None:
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFPmgdJ+RN1MewmYdVDYT1myznmtgtXdSGh9kBRw8PwD me@laptop"
    plan = build(ssh={"port": 2222, "lab_key": False, "users": [
        {"name": "ops", "password": "s3cret"}, {"name": "noc", "keys": [key], "class": "read-only"}]}, tmp=tmp_path)
    config = server_config(plan)
    assert config.port == 2222 and not config.lab_key
    ops, noc = config.users
    assert ops.password and ops.may_change_state()
    assert not noc.password and noc.keys == (" ".join(key.split()[:2]),) and not noc.may_change_state()
    assert json.loads(plan.files[sshconfig.PASSWORDS_FILE]) == {"ops": "s3cret"}  # noc: keys only
    assert "s3cret" not in config.to_json()
    text = plan.files[sshplan.SSH_CONFIG_FILE]
    assert "    Port 2222\n" in text and "    User ops\n" in text and "IdentityFile" not in text


def test_ssh_can_be_switched_off(tmp_path: Path) -> None:
    plan = build(ssh={"enabled": False}, tmp=tmp_path)
    assert sshplan.CONFIG_FILE not in plan.files and sshplan.SSH_CONFIG_FILE not in plan.files
    assert not any(p.name == sshplan.PROCESS_NAME for p in plan.processes)


def test_bad_keys_are_refused(tmp_path: Path) -> None:
    from lab_orchestrator.model.diagnostics import TopologyInvalid

    with pytest.raises(TopologyInvalid) as caught:
        build(ssh={"users": [{"name": "x", "keys": ["not a key"]}]}, tmp=tmp_path)
    assert "ssh.users[0].keys[0]" in caught.value.diagnostics[0].render()


def test_ssh_config_names_each_node() -> None:
    plan = build()
    text = plan.files[sshplan.SSH_CONFIG_FILE]
    assert text.endswith("\n")
    assert "Host t1-mx1\n    HostName " + plan.node("mx1").mgmt_address.split("/")[0] + "\n" in text
    assert "    UserKnownHostsFile /run/lab/t1/ssh/known_hosts\n    StrictHostKeyChecking yes\n" in text
    assert "    IdentityFile /run/lab/t1/ssh/id_ed25519-%r\n    IdentitiesOnly yes\n" in text
    assert "Host t1-*" not in text and "Host t1-client" not in text  # no wildcard, no hosts
    assert "Include /run/lab/*/ssh_config" in text


def test_config_round_trips_through_json() -> None:
    config = server_config(build("topology3.yml"))
    assert sshconfig.from_json(config.to_json()) == config
    json.loads(config.to_json())


def test_each_user_gets_a_key_of_its_own(tmp_path: Path) -> None:
    config = server_config(build(ssh={"users": [{"name": "admin"}, {"name": "viewer", "class": "read-only"}]},
                                 tmp=tmp_path))
    config = sshconfig.ServerConfig(**{**config.__dict__, "nodes": (), "client_key": str(tmp_path / "id"),
                                       "known_hosts": str(tmp_path / "known_hosts")})
    keys.prepare(config)
    own = keys.lab_client_keys(config)
    assert set(own) == {"admin", "viewer"} and own["admin"] != own["viewer"]


def test_host_keys_known_hosts_and_lab_key(tmp_path: Path) -> None:
    config = server_config(build())
    nodes = tuple(sshconfig.Node(**{**n.__dict__, "host_key": str(tmp_path / f"{n.name}_key")})
                  for n in config.nodes)
    config = sshconfig.ServerConfig(**{**config.__dict__, "nodes": nodes, "client_key": str(tmp_path / "id"),
                                       "known_hosts": str(tmp_path / "known_hosts")})
    public = keys.prepare(config)
    assert set(public) == {n.name for n in config.nodes}
    assert len(set(public.values())) == len(nodes)  # a key per node
    for node in nodes:
        assert stat.S_IMODE(os.stat(node.host_key).st_mode) == 0o600
        assert Path(node.host_key).read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    lines = (tmp_path / "known_hosts").read_text().splitlines()
    mx = config.node("mx1")
    assert mx is not None
    assert f"t1-mx1,{mx.mgmt_address.split('/')[0]} {public['mx1']}" in lines
    assert keys.lab_client_keys(config) == {"admin": " ".join((tmp_path / "id-admin.pub").read_text().split()[:2])}
    assert stat.S_IMODE(os.stat(tmp_path / "id-admin").st_mode) == 0o600
    before = {n.name: Path(n.host_key).read_bytes() for n in nodes}
    assert keys.prepare(config) == public  # kept for the lab's life: a restart makes no new keys
    assert before == {n.name: Path(n.host_key).read_bytes() for n in nodes}
