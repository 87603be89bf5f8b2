"""dataplane.daemons.nat64d without root: the device named by the configuration, the device and
routes prepared (commands recorded, not run), and the errors it reports instead of starting tayga."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from dataplane.daemons import nat64d

CONF = "tun-device nat64\nipv4-addr 192.0.0.1\nmap 203.0.113.64 2001:db8:64::1\n"


def test_the_device_is_the_configurations() -> None:
    assert nat64d.device_of("# x\n" + CONF) == "nat64"
    with pytest.raises(ValueError):
        nat64d.device_of("ipv4-addr 192.0.0.1\n")


def _record(monkeypatch: pytest.MonkeyPatch, present: bool) -> list[list[str]]:
    ran: list[list[str]] = []

    def run(argv: list[str], **_kw: Any) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        code = 0 if (argv[:3] != ["ip", "link", "show"] or present) else 1
        return subprocess.CompletedProcess(argv, code, "", "")

    monkeypatch.setattr(nat64d.subprocess, "run", run)
    return ran


@pytest.mark.parametrize("present", [False, True])
def test_prepare_makes_the_device_once_and_replaces_the_routes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               present: bool) -> None:
    conf = tmp_path / "tayga.conf"
    conf.write_text(CONF)
    ran = _record(monkeypatch, present)
    assert nat64d.prepare(str(conf), ["2001:db8:64::1/128", "10.255.0.0/16"]) == "nat64"
    made = [a for a in ran if a[0] == "tayga"]
    assert made == ([] if present else [["tayga", "-c", str(conf), "--mktun"]])
    assert ["ip", "link", "set", "nat64", "up"] in ran
    assert ["ip", "-6", "route", "replace", "2001:db8:64::1/128", "dev", "nat64"] in ran
    assert ["ip", "-4", "route", "replace", "10.255.0.0/16", "dev", "nat64"] in ran


def test_a_failure_is_reported_with_the_tools_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "tayga.conf"
    conf.write_text(CONF)
    monkeypatch.setattr(nat64d.shutil, "which", lambda _name: "/usr/sbin/tayga")

    def run(argv: list[str], **_kw: Any) -> subprocess.CompletedProcess[str]:
        if argv[0] == "tayga":
            raise subprocess.CalledProcessError(1, argv, output="Unable to open /dev/net/tun\n", stderr="")
        return subprocess.CompletedProcess(argv, 1 if argv[:3] == ["ip", "link", "show"] else 0, "", "")

    monkeypatch.setattr(nat64d.subprocess, "run", run)
    assert nat64d.main(["nat64d", str(conf), "--route", "10.255.0.0/16"]) == 1
    assert "Unable to open /dev/net/tun" in capsys.readouterr().err


def test_without_tayga_it_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(nat64d.shutil, "which", lambda _name: None)
    assert nat64d.main(["nat64d", "/nonexistent"]) == 1
    assert "apt-get install -y tayga" in capsys.readouterr().err


def test_tayga_is_started_realtime_above_the_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The translator is on the SRX's forwarding path: it asks SCHED_FIFO above the generator's threads
    before it becomes tayga (inherited through exec); refused, tayga still starts, and the log says so."""
    from dataplane.traffic import netio

    conf = tmp_path / "tayga.conf"
    conf.write_text(CONF)
    asked: list[tuple[int, int]] = []
    execs: list[list[str]] = []
    monkeypatch.setattr(nat64d, "prepare", lambda *_a: "nat64")
    monkeypatch.setattr(nat64d.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(nat64d.os, "sched_setscheduler", lambda pid, policy, param: asked.append((policy,
                                                                                            param.sched_priority)))
    monkeypatch.setattr(nat64d.os, "execv", lambda path, argv: execs.append(argv))
    nat64d.main(["nat64d", str(conf)])
    assert asked == [(nat64d.os.SCHED_FIFO, nat64d.TRANSLATOR_PRIORITY)]
    assert nat64d.TRANSLATOR_PRIORITY > netio.REALTIME_PRIORITY  # the senders' and receivers' priority
    assert execs[0][-4:] == ["/usr/bin/tayga", "-c", str(conf), "-d"]

    def refuse(*_a: Any) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(nat64d.os, "sched_setscheduler", refuse)
    assert nat64d.realtime(20) is False
