"""The MX selector's eBPF backend on one side: the tc program and its maps in a namespace.

`TcSelector.attach` finds the program already on the side's ingress interfaces (a restarted daemon:
nothing is reloaded, forwarding never paused) or loads `dataplane.kernel.tcprog`'s program with a bucket map
filled with the initial table and puts it on the ingress hook (clsact) of each ingress interface. The
tc filters hold the program and the program holds its maps, so they live as long as the interfaces
(the namespace): no pinning, nothing to clean up. `write` changes buckets, `read` returns the
programmed map as (bucket, mark) pairs as nft would list them (a bucket holding 0 is no element),
`counters` each member's packets and bytes.

    side = TcSelector(ns, ("ge-0-0-0",), "saddr", 6400, 0x5EED, (), ipv6=True)   # dual stack
    side.attach(initial)          # [(bucket, mark), ...]
    side.write([(7, 0x102)])
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import subprocess
from collections.abc import Sequence

from labkit import netnsutil

from . import bpfsys, tcprog

PROGRAM_NAME = "lab_selector"  # also the tc filter's name: what attach looks for
CLSACT_INGRESS = 0xFFFFFFF2  # TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)


class SelectorUnavailable(RuntimeError):
    """This kernel cannot run the eBPF selector (no bpf(2), cls_bpf or clsact): say which."""


def probe() -> str | None:
    """Why the eBPF selector cannot run here (None: it can): load the real program once (the dual-stack
    one, whose IPv4 path is the IPv4-only program's)."""
    sel = cnt = prog = -1
    try:
        sel = bpfsys.map_create(bpfsys.MAP_TYPE_ARRAY, 4, 4, 2, "sel")
        cnt = bpfsys.map_create(bpfsys.MAP_TYPE_PERCPU_ARRAY, 4, tcprog.COUNTER_SIZE, tcprog.COUNTERS, "cnt")
        prog = bpfsys.prog_load(tcprog.selector_program("saddr", 2, 0, (), sel, cnt, ipv6=True), PROGRAM_NAME)
    except bpfsys.BpfError as exc:
        return f"this kernel refuses the eBPF selector program ({str(exc).splitlines()[0]})"
    finally:
        for fd in (prog, cnt, sel):
            if fd >= 0:
                os.close(fd)
    return None


class TcSelector:
    def __init__(self, ns: str, ingress: Sequence[str], field: str, buckets: int, seed: int,
                 prefixes: Sequence[str], ipv6: bool = False):
        """PREFIXES: both families' (TLB); IPV6: a dual-stack lab's side, whose program steers IPv6 too."""
        self.ns, self.ingress, self.field = ns, tuple(ingress), field
        self.buckets, self.seed, self.prefixes, self.ipv6 = buckets, seed, tuple(prefixes), ipv6
        self.sel_fd = self.cnt_fd = -1
        self.cpus = bpfsys.possible_cpus()

    # ------------------------------------------------------------ program
    def _filter_ids(self) -> dict[str, int | None]:
        """Ingress interface -> id of our program on its ingress hook (None: not there)."""
        found: dict[str, int | None] = {}
        with netnsutil.entered(self.ns):
            for dev in self.ingress:
                out = subprocess.run(["tc", "-j", "filter", "show", "dev", dev, "ingress"], capture_output=True,
                                     text=True, timeout=10)
                found[dev] = None
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    for item in json.loads(out.stdout or "[]"):
                        options = item.get("options") or {}
                        if options.get("bpf_name") == PROGRAM_NAME and "prog" in options:
                            found[dev] = int(options["prog"]["id"])
        return found

    def _adopt(self, prog_id: int) -> bool:
        """Take the maps of an already attached program if they fit this side's configuration."""
        try:
            prog = bpfsys.prog_fd_by_id(prog_id)
        except bpfsys.BpfError:
            return False
        try:
            fds = {}
            for map_id in bpfsys.prog_map_ids(prog):
                fd = bpfsys.map_fd_by_id(map_id)
                fds[bpfsys.map_info(fd).name] = (fd, bpfsys.map_info(fd))
        finally:
            os.close(prog)
        if "sel" not in fds or "cnt" not in fds or fds["sel"][1].max_entries != self.buckets:
            for fd, _ in fds.values():
                os.close(fd)
            return False
        self.sel_fd, self.cnt_fd = fds["sel"][0], fds["cnt"][0]
        return True

    def find(self) -> bool:
        """Open the maps of the program already on this side (False: there is none that fits)."""
        present = next((i for i in self._filter_ids().values() if i is not None), None)
        return present is not None and self._adopt(present)

    def attach(self, initial: Sequence[tuple[int, int]]) -> bool:
        """Make sure the program runs on every ingress interface; True if it was there already (its
        map is kept as programmed), False if it was loaded now with INITIAL in its map."""
        from pyroute2 import IPRoute

        ids = self._filter_ids()
        present = next((i for i in ids.values() if i is not None), None)
        adopted = present is not None and self._adopt(present)
        prog = -1
        if adopted:
            assert present is not None
            prog = bpfsys.prog_fd_by_id(present)
        else:
            self.sel_fd = bpfsys.map_create(bpfsys.MAP_TYPE_ARRAY, 4, 4, self.buckets, "sel")
            self.cnt_fd = bpfsys.map_create(bpfsys.MAP_TYPE_PERCPU_ARRAY, 4, tcprog.COUNTER_SIZE,
                                            tcprog.COUNTERS, "cnt")
            bpfsys.array_update(self.sel_fd, initial)
            prog = bpfsys.prog_load(tcprog.selector_program(self.field, self.buckets, self.seed, self.prefixes,
                                                            self.sel_fd, self.cnt_fd, ipv6=self.ipv6),
                                    PROGRAM_NAME)
        try:
            with netnsutil.entered(self.ns):
                ipr = IPRoute()
            try:
                for dev in self.ingress:
                    if adopted and ids[dev] == present:
                        continue
                    index = ipr.link_lookup(ifname=dev)[0]
                    with contextlib.suppress(Exception):  # the clsact qdisc exists already
                        ipr.tc("add", "clsact", index)
                    ipr.tc("replace-filter", "bpf", index, 1, fd=prog, name=PROGRAM_NAME, parent=CLSACT_INGRESS,
                           classid=1, direct_action=True, prio=1)
            finally:
                ipr.close()
        finally:
            os.close(prog)
        return adopted

    # ------------------------------------------------------------ map
    def read(self) -> list[tuple[int, int]]:
        """The programmed map: (bucket, mark) of every bucket that holds a member."""
        return [(b, mark) for b, mark in enumerate(bpfsys.array_read(self.sel_fd, self.buckets)) if mark]

    def write(self, updates: Sequence[tuple[int, int]]) -> None:
        bpfsys.array_update(self.sel_fd, updates)

    def counters(self, marks: Sequence[int]) -> dict[int, tuple[int, int]]:
        """mark -> (packets, bytes) steered to that member on this side, summed over the CPUs."""
        out = {}
        for mark in marks:
            raw = bpfsys.map_lookup(self.cnt_fd, struct.pack("<I", mark & (tcprog.COUNTERS - 1)),
                                    tcprog.COUNTER_SIZE * self.cpus)
            values = struct.unpack(f"<{2 * self.cpus}Q", raw)
            out[mark] = (sum(values[0::2]), sum(values[1::2]))
        return out

    def close(self) -> None:
        for fd in (self.sel_fd, self.cnt_fd):
            if fd >= 0:
                os.close(fd)
        self.sel_fd = self.cnt_fd = -1
