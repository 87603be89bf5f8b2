"""Each member's packet and byte counters of the MX selectors, from whichever backend programs them.

The nftables selector counts in named counters of its `mxlb` table (`ip`, or `inet` in a dual-stack
lab; one per member, in the forward hook); the eBPF selector in its per-CPU counter map
(`dataplane.kernel.tcsel`, at ingress, indexed by the member's mark). Readers (the selector's
status, the events runner's per-SRX rates) ask here.

    counters = SelectorCounters([SelectorConfig.read(path)])
    counters.read()      # {namespace: {member: {"packets": n, "bytes": n}}}
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from labkit.configs import Selector, SelectorConfig

from .nft import Nft, NftError
from .tcsel import TcSelector


class SelectorCounters:
    def __init__(self, configs: Sequence[SelectorConfig], namespaces: Collection[str] | None = None,
                 sides: Mapping[str, TcSelector] | None = None):
        """SIDES: eBPF sides already opened (namespace -> TcSelector; the selector daemon's own)."""
        self.parts: list[tuple[SelectorConfig, Selector]] = [
            (config, sel) for config in configs for sel in config.selectors
            if namespaces is None or sel.ns in namespaces]
        self._nft: Nft | None = None
        self._own = sides is None
        self._tc: dict[str, TcSelector] = dict(sides or {})

    def _tc_side(self, config: SelectorConfig, sel: Selector) -> TcSelector | None:
        side = self._tc.get(sel.ns)
        if side is None:
            side = TcSelector(sel.ns, sel.ingress, sel.hash_field, config.buckets, config.seed, sel.match_prefixes,
                              ipv6=sel.dual_stack)
            if not side.find():
                return None
            self._tc[sel.ns] = side
        return side

    def read(self) -> dict[str, dict[str, dict[str, int]]]:
        """namespace -> member -> {"packets", "bytes"} (a side whose selector is not there is left out)."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        for config, sel in self.parts:
            if config.backend == "ebpf":
                side = self._tc_side(config, sel)
                if side is None:
                    continue
                values = side.counters([m.mark for m in sel.members])
                out[sel.ns] = {m.name: {"packets": values[m.mark][0], "bytes": values[m.mark][1]} for m in sel.members}
                continue
            if self._nft is None:
                self._nft = Nft()
            try:
                data = self._nft.json(f"list counters table {sel.nft_family} mxlb", ns=sel.ns)
            except NftError:
                continue
            out[sel.ns] = {item["counter"]["name"]: {"packets": item["counter"]["packets"],
                                                     "bytes": item["counter"]["bytes"]}
                           for item in data.get("nftables", []) if "counter" in item}
        return out

    def close(self) -> None:
        if self._own:
            for side in self._tc.values():
                side.close()
        self._tc.clear()
        if self._nft is not None:
            self._nft.close()
            self._nft = None
