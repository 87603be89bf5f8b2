"""Junos-like `show interfaces` (terse, descriptions, detail)."""

from __future__ import annotations

from ipaddress import IPv4Interface

from ..common import (
    junos_logical,
    junos_physical,
    junos_sort_key,
)
from ..gather import Snapshot
from ..pipes import Output
from ..state import Instance, Link
from .base import Args, error, updown

ETHERNET_HEADER = 14  # bytes that a Junos interface MTU counts and a Linux link MTU does not


# ---------------------------------------------------------------------- interfaces
def _interface_rows(snap: Snapshot) -> list[tuple[Link, list[tuple[str, Instance, list[str]]]]]:
    """Physical interfaces (one lo0 for all instances) with their logical units and addresses."""
    physical: dict[str, tuple[Link, list[tuple[str, Instance, list[str]]]]] = {}
    for inst in snap.instances:
        for link in inst.links:
            name = junos_physical(link)
            addresses = [f"{a.address}/{a.prefixlen}" if link.name != "lo" else a.address
                         for a in inst.addresses if a.ifname == link.name and not a.address.startswith("127.")]
            logical = junos_logical(snap, inst.name, link.name, inst)
            if name not in physical:
                physical[name] = (link, [])
            if addresses or link.name != "lo":
                physical[name][1].append((logical, inst, addresses))
    return [physical[name] for name in sorted(physical, key=junos_sort_key)]


def show_interfaces_terse(snap: Snapshot, args: Args) -> Output:
    wanted = args.get("interface")
    lines = ["Interface               Admin Link Proto    Local                 Remote"]
    data = []
    for link, units in _interface_rows(snap):
        name = junos_physical(link)
        if wanted and not (name == wanted or name.startswith(wanted) or any(u[0] == wanted for u in units)):
            continue
        lines.append(f"{name:<24}{updown(link.admin_up):<6}{updown(link.oper_up)}")
        logical_data = []
        for logical, _inst, addresses in units:
            if wanted and wanted != name and logical != wanted:
                continue
            admin, oper = updown(link.admin_up), updown(link.oper_up)
            if not addresses:
                lines.append(f"{logical:<24}{admin:<6}{oper}")
            for i, address in enumerate(addresses):
                remote = "--> 0/0" if link.name == "lo" else ""
                local = f"{address:<22}{remote}".rstrip() if remote else address
                if i == 0:
                    lines.append(f"{logical:<24}{admin:<6}{oper:<5}{'inet':<9}{local}")
                else:
                    lines.append(f"{'':<44}{local}")
            logical_data.append({"name": logical, "admin-status": admin, "oper-status": oper,
                                 "address-family": [{"address-family-name": "inet",
                                                     "interface-address": [{"ifa-local": a} for a in addresses]}]})
        data.append({"name": name, "admin-status": updown(link.admin_up), "oper-status": updown(link.oper_up),
                     "logical-interface": logical_data})
    if wanted and len(lines) == 1:
        return error(f"device {wanted} not found")
    return Output("".join(line + "\n" for line in lines), {"interface-information": {"physical-interface": data}})


def show_interfaces_descriptions(snap: Snapshot, args: Args) -> Output:
    ports = {p.name: p for p in snap.node.ports}
    lines = ["Interface       Admin Link Description"]
    data = []
    for link, _units in _interface_rows(snap):
        port = ports.get(link.name)
        if port is None:
            continue
        lines.append(f"{junos_physical(link):<16}{updown(link.admin_up):<6}{updown(link.oper_up):<5}"
                     f"{port.description}")
        data.append({"name": junos_physical(link), "admin-status": updown(link.admin_up),
                     "oper-status": updown(link.oper_up), "description": port.description})
    return Output("".join(line + "\n" for line in lines), {"interface-information": {"physical-interface": data}})


def show_interfaces(snap: Snapshot, args: Args) -> Output:
    if args.get("terse"):
        return show_interfaces_terse(snap, args)
    if args.get("descriptions"):
        return show_interfaces_descriptions(snap, args)
    wanted = args.get("interface")
    ports = {p.name: p for p in snap.node.ports}
    out: list[str] = []
    data = []
    for link, units in _interface_rows(snap):
        name = junos_physical(link)
        if wanted and not (name == wanted or any(u[0] == wanted for u in units)):
            continue
        enabled = "Enabled" if link.admin_up else "Administratively down"
        out.append(f"Physical interface: {name}, {enabled}, Physical link is {'Up' if link.oper_up else 'Down'}")
        out.append(f"  Interface index: {link.index}, SNMP ifIndex: {link.index}")
        port = ports.get(link.name)
        if port is not None:
            out.append(f"  Description: {port.description}")
        kind = "Unspecified" if link.name == "lo" else "Ethernet"
        # Junos's physical MTU counts the 14-byte Ethernet header (1514 for an IP MTU of 1500); lo0 has none
        physical_mtu: int | str = "Unlimited" if link.name == "lo" else link.mtu + ETHERNET_HEADER
        out.append(f"  Type: {kind}, Link-level type: {kind}, MTU: {physical_mtu}")
        if link.mac and link.name != "lo":
            out.append(f"  Current address: {link.mac}, Hardware address: {link.mac}")
        out.append(f"  Input packets : {link.rx_packets}")
        out.append(f"  Output packets: {link.tx_packets}")
        for logical, inst, addresses in units:
            out.append("")
            out.append(f"  Logical interface {logical} (Index {link.index})")
            out.append(f"    Flags: {'Up' if link.admin_up else 'Down'} SNMP-Traps Encapsulation: ENET2")
            if inst.name:
                out.append(f"    Routing instance: {inst.name}")
            out.append(f"    Input packets : {link.rx_packets}")
            out.append(f"    Output packets: {link.tx_packets}")
            out.append(f"    Protocol inet, MTU: {link.mtu}")
            for address in addresses:
                iface = IPv4Interface(address if "/" in address else f"{address}/32")
                out.append("      Addresses, Flags: Is-Preferred Is-Primary")
                out.append(f"        Destination: {iface.network}, Local: {iface.ip}")
        out.append("")
        data.append({"name": name, "admin-status": updown(link.admin_up), "oper-status": updown(link.oper_up),
                     "local-index": link.index, "mtu": physical_mtu, "current-physical-address": link.mac,
                     "description": port.description if port else None,
                     "traffic-statistics": {"input-packets": link.rx_packets, "output-packets": link.tx_packets,
                                            "input-bytes": link.rx_bytes, "output-bytes": link.tx_bytes},
                     "logical-interface": [{"name": u[0], "address": u[2]} for u in units]})
    if wanted and not data:
        return error(f"device {wanted} not found")
    return Output("".join(line + "\n" for line in out), {"interface-information": {"physical-interface": data}})
