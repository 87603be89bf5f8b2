"""Junos-like `show version`, `show system uptime`, `show configuration`, `show arp`."""

from __future__ import annotations

import os

from .. import junosconf, rib
from ..common import (
    bird_started,
    bird_version,
    clock,
    junos_age,
    junos_logical,
)
from ..gather import Snapshot
from ..pipes import Output
from .base import Args, error


# ---------------------------------------------------------------------- show version / system
def show_version(snap: Snapshot, args: Args) -> Output:
    node = snap.node
    versions = sorted({bird_version(i) for i in snap.instances if bird_version(i)})
    model = f"{node.kind}-emulated"
    namespaces = ", ".join(i.ns for i in node.instances)
    lines = [
        f"Hostname: {node.name}",
        f"Model: {model}",
        "Junos: 24.2R1 (emulated)",
        f"JUNOS Kernel: Linux {os.uname().release}, network namespaces {namespaces}",
        f"JUNOS Routing Software Suite: {', '.join(versions) if versions else 'not running'}",
        f"Lab: {snap.lab} (lab_orchestrator), {snap.load_balancing}, {snap.use_case}",
    ]
    data = {"software-information": {"host-name": node.name, "product-model": model,
                                     "junos-version": "24.2R1 (emulated)", "kernel": os.uname().release,
                                     "routing-software": versions, "lab": snap.lab}}
    return Output("".join(line + "\n" for line in lines), data)


def show_system_uptime(snap: Snapshot, args: Args) -> Output:
    up = snap.now - snap.lab_created if snap.lab_created else None
    started = next((bird_started(i) for i in snap.instances if bird_started(i)), "")
    lines = [f"Current time: {clock(snap.now)}"]
    if snap.lab_created:
        lines.append(f"System booted: {clock(snap.lab_created)} ({junos_age(up)} ago)")
    if started:
        lines.append(f"Protocols started: {started}")
    lines.append(f"Last configured: {clock(snap.lab_created) if snap.lab_created else '-'} by lab")
    load = os.getloadavg()
    lines.append(f"up {junos_age(up)}, load averages: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
    data = {"system-uptime-information": {"current-time": clock(snap.now),
                                          "system-booted-time": clock(snap.lab_created) if snap.lab_created else None,
                                          "protocols-started-time": started or None}}
    return Output("".join(line + "\n" for line in lines), data)


# ---------------------------------------------------------------------- configuration
def show_configuration(snap: Snapshot, args: Args) -> Output:
    if snap.config_text is None:
        return error("configuration database is not available")
    try:
        statements = junosconf.parse(snap.config_text)
    except junosconf.ConfigError as exc:
        return error(f"configuration cannot be parsed: {exc}")
    path = str(args.get("rest", "")).split()
    if not path:
        return Output(snap.config_text, config=statements)
    found = junosconf.locate(statements, path)
    if found is None:
        return Output("", config=[])
    sub, above = found
    nested: list[junosconf.Statement] = sub  # for `| display set` and json: the blocks above the subtree
    for words in reversed(above):
        nested = [junosconf.Statement(words, nested)]
    return Output(junosconf.render(sub), config=nested)


# ---------------------------------------------------------------------- ARP
def show_arp(snap: Snapshot, args: Args) -> Output:
    wanted = args.get("interface")
    lines = ["MAC Address       Address         Name                      Interface               Flags"]
    data = []
    for inst in snap.instances:
        for entry in sorted(inst.neighbors or [], key=lambda n: rib.sort_key(n.address + "/32")):
            shown = junos_logical(snap, inst.name, entry.ifname, inst)
            if wanted and shown != wanted and not shown.startswith(f"{wanted}."):
                continue
            flags = "permanent" if "PERMANENT" in entry.state else "none"
            name = entry.address
            lines.append(f"{entry.mac:<18}{entry.address:<16}{name:<26}{shown:<24}{flags}")
            data.append({"mac-address": entry.mac, "ip-address": entry.address, "hostname": name,
                         "interface-name": shown, "arp-table-entry-flags": flags,
                         "routing-instance": inst.name or "default"})
    lines.append(f"Total entries: {len(data)}")
    return Output("".join(line + "\n" for line in lines), {"arp-table-information": {"arp-table-entry": data}})
