"""The MX selector as a tc (cls_bpf, direct-action) program: the eBPF twin of the nftables rules (pure).

The nftables selector is, per side of the MX (`lab_orchestrator.plan.features.mxlb`):

    iifname { INGRESS } [ip FIELD { PREFIXES }] meta mark set 0x100
        meta mark set jhash ip FIELD mod BUCKETS seed SEED map @sel

and in a dual-stack lab (an `inet` table) also the same rule with `ip6` (the IPv6 client prefixes, or
`meta nfproto ipv6` when nothing is filtered) into the same map. This program does the same on the
ingress of the same interfaces: an IPv4 packet (whose FIELD is in one of the IPv4 PREFIXES, if any)
gets mark 0x100, then the kernel's ``jhash`` of the 4 address bytes with SEED (Bob Jenkins' lookup3,
`dataplane.core.nfthash`), ``reciprocal_scale`` into a bucket, and the mark the array map `sel` holds
for that bucket; with ``ipv6`` an IPv6 packet (FIELD in one of the IPv6 PREFIXES, if any) the same
with ``jhash`` over its 16 address bytes (one mixed 12-byte block and a 4-byte tail), into the same
buckets. A bucket holding 0 (no member: what a missing nft map element is) leaves 0x100, which the
policy rules send to the blackhole table. It never drops or redirects a packet: the return value is
always TC_ACT_OK, routing (the fwmark rules) decides. Each member's packets and bytes (IP length,
both families) are counted in the per-CPU array `cnt` at index ``mark & 0xff`` (the nft ruleset's
per-SRX counters).

With TLB, PREFIXES hold both families' client prefixes (the planner's `match_prefixes`); as with the
nft rules, a family none of whose prefixes is there is not steered. Without ``ipv6`` the program is
the IPv4-only one, instruction for instruction; with it the IPv4 path runs the same instructions (the
IPv6 part sits after the exit, reached from the protocol test that would otherwise leave).

    program = selector_program("saddr", buckets=64, seed=0x5EED, prefixes=(), sel_fd=5, cnt_fd=6)
    dual = selector_program("daddr", 6400, 0x5EED, ("100.64.0.0/16", "2001:db8::/96"), 5, 6, ipv6=True)
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Network, IPv6Network, ip_network

from ..core.nfthash import JHASH_INITVAL, M32
from .bpfasm import R0, R1, R2, R3, R4, R6, R7, R8, R9, R10, Asm

FIELDS = {"saddr": 26, "daddr": 30}  # offset in the Ethernet frame: 14 + 12 (source), 14 + 16 (destination)
FIELDS6 = {"saddr": 22, "daddr": 38}  # IPv6, 16 bytes each: 14 + 8 (source), 14 + 24 (destination)
TLB_BIT = 0x100  # the mark of a steered packet before the map lookup (lab_orchestrator.plan.features.mxlb.TLB_BIT)
COUNTERS = 256  # counter slots: index = mark & 0xff
COUNTER_SIZE = 16  # per member and CPU: packets, bytes (u64 each)
ETH_HLEN = 14
IPV4_HLEN, IPV6_HLEN = 20, 40
ETH_P_IP_BE = 0x0008  # htons(ETH_P_IP), as a little-endian 32-bit load of skb->protocol reads it
ETH_P_IPV6_BE = 0xDD86  # htons(ETH_P_IPV6), read the same way
HELPER_MAP_LOOKUP = 1
TC_ACT_OK = 0

# struct __sk_buff offsets
SKB_LEN, SKB_MARK, SKB_PROTOCOL, SKB_DATA, SKB_DATA_END = 0, 8, 16, 76, 80

# __jhash_final's rounds: (x ^= y; x -= rol32(y, k)) over (a, b, c) as in include/linux/jhash.h
FINAL_ROUNDS = (("c", "b", 14), ("a", "c", 11), ("b", "a", 25), ("c", "b", 16), ("a", "c", 4), ("b", "a", 14),
                ("c", "b", 24))
# __jhash_mix's rounds: (x -= y; x ^= rol32(y, k); y += z), what an IPv6 address's first 12 bytes go through
MIX_ROUNDS = (("a", "c", 4, "b"), ("b", "a", 6, "c"), ("c", "b", 8, "a"), ("a", "c", 16, "b"), ("b", "a", 19, "c"),
              ("c", "b", 4, "a"))
REGS = {"a": R7, "b": R8, "c": R9}  # jhash's state, in registers the helper calls keep


def le_word(network: IPv4Network) -> tuple[int, int]:
    """A prefix's address and mask as a little-endian 32-bit load of the packet's bytes reads them."""
    return (int.from_bytes(network.network_address.packed, "little"),
            int.from_bytes(network.netmask.packed, "little"))


def le_words6(network: IPv6Network) -> list[tuple[int, int]]:
    """An IPv6 prefix's address and mask as four little-endian 32-bit loads of the 16 bytes read them."""
    address, mask = network.network_address.packed, network.netmask.packed
    return [(int.from_bytes(address[i:i + 4], "little"), int.from_bytes(mask[i:i + 4], "little"))
            for i in range(0, 16, 4)]


def _lookup(asm: Asm, key: int, slot: int, map_fd: int) -> None:
    """R0 = &map[KEY] (the 32-bit key put on the stack at SLOT), or on to "out" when it has none."""
    asm.store("w", R10, slot, key)
    asm.mov_reg(R2, R10)
    asm.alu_imm("add", R2, slot, wide=True)
    asm.load_map_fd(R1, map_fd)
    asm.call(HELPER_MAP_LOOKUP)
    asm.jmp_imm("jeq", R0, 0, "out")


def _rol32(asm: Asm, src: int, k: int) -> None:
    """R2 = rol32(SRC, k) = (SRC << k) | (SRC >> (32 - k)); R3 is used too."""
    asm.alu_reg("mov", R2, src)
    asm.alu_imm("lsh", R2, k)
    asm.alu_reg("mov", R3, src)
    asm.alu_imm("rsh", R3, 32 - k)
    asm.alu_reg("or", R2, R3)


def _family_prefixes(prefixes: Sequence[str]) -> tuple[list[IPv4Network], list[IPv6Network]]:
    v4: list[IPv4Network] = []
    v6: list[IPv6Network] = []
    for prefix in prefixes:
        network = ip_network(prefix)
        if isinstance(network, IPv4Network):
            v4.append(network)
        else:
            v6.append(network)
    return v4, v6


def _ipv6_hash(asm: Asm, field: str, seed: int, prefixes: list[IPv6Network]) -> None:
    """From an IPv6 packet (R2 holds skb->protocol) to R7, R8, R9 = jhash's a, b, c with the whole
    16-byte address added, ready for __jhash_final; on to "out" when the packet is not steered."""
    asm.jmp_imm("jne", R2, ETH_P_IPV6_BE, "out")
    asm.load("w", R1, R6, SKB_DATA)
    asm.load("w", R3, R6, SKB_DATA_END)
    asm.mov_reg(R4, R1)
    asm.alu_imm("add", R4, ETH_HLEN + IPV6_HLEN, wide=True)
    asm.jmp_reg("jgt", R4, R3, "out")
    at = FIELDS6[field]
    if prefixes and not any(p.prefixlen == 0 for p in prefixes):  # ::/0 lets everything through unfiltered
        for n, prefix in enumerate(prefixes):
            for i, (address, mask) in enumerate(le_words6(prefix)):
                if not mask:
                    continue  # past the prefix length: not compared
                asm.load("w", R2, R1, at + 4 * i)
                if mask != M32:
                    asm.alu_imm("and", R2, mask)
                asm.jmp_imm("jne", R2, address, f"v6_next{n}", wide=False)
            asm.goto("steer6")
            asm.label(f"v6_next{n}")
        asm.goto("out")
        asm.label("steer6")
    asm.mov32_imm(R0, TLB_BIT)
    asm.store("w", R6, SKB_MARK, R0)
    # jhash(key, 16, seed): a = b = c = JHASH_INITVAL + 16 + seed; the first 12 bytes added to a, b, c
    # and __jhash_mix; the last 4 added to a (then __jhash_final, shared with IPv4)
    init = (JHASH_INITVAL + 16 + seed) & M32
    for i, reg in enumerate((R7, R8, R9)):
        asm.load("w", reg, R1, at + 4 * i)
        asm.alu_imm("add", reg, init)
    for x, y, k, z in MIX_ROUNDS:
        asm.alu_reg("sub", REGS[x], REGS[y])
        _rol32(asm, REGS[y], k)
        asm.alu_reg("xor", REGS[x], R2)
        asm.alu_reg("add", REGS[y], REGS[z])
    asm.load("w", R2, R1, at + 12)
    asm.alu_reg("add", R7, R2)


def selector_program(field: str, buckets: int, seed: int, prefixes: Sequence[str], sel_fd: int, cnt_fd: int,
                     ipv6: bool = False) -> bytes:
    """The instructions (8 bytes each) for one side; SEL_FD and CNT_FD are the maps' descriptors; IPV6:
    a dual-stack lab's program, which steers IPv6 packets too."""
    if field not in FIELDS:
        raise ValueError(f"hash field must be saddr or daddr, not {field}")
    if not 1 <= buckets <= 65536:
        raise ValueError("buckets must be 1..65536")
    prefixes4, prefixes6 = _family_prefixes(prefixes)
    if prefixes6 and not ipv6:
        raise ValueError("IPv6 prefixes need the dual-stack program (ipv6=True)")
    # As the nft rules: a family is steered unless prefixes are given and none is of that family.
    steer4 = not prefixes or bool(prefixes4)
    steer6 = ipv6 and (not prefixes or bool(prefixes6))
    asm = Asm()
    asm.mov_reg(R6, R1)  # the skb context, kept across helper calls
    asm.load("w", R2, R6, SKB_PROTOCOL)
    if steer4:
        # IPv4 (else IPv6, or nothing), and the address inside the packet's linear data (the verifier insists).
        asm.jmp_imm("jne", R2, ETH_P_IP_BE, "ipv6" if steer6 else "out")
        asm.load("w", R2, R6, SKB_DATA)
        asm.load("w", R3, R6, SKB_DATA_END)
        asm.mov_reg(R4, R2)
        asm.alu_imm("add", R4, ETH_HLEN + IPV4_HLEN, wide=True)
        asm.jmp_reg("jgt", R4, R3, "out")
        asm.load("w", R7, R2, FIELDS[field])  # the address bytes as jhash reads them
        if prefixes4:
            for prefix in prefixes4:
                address, mask = le_word(prefix)
                asm.mov_reg(R2, R7)
                asm.alu_imm("and", R2, mask)
                asm.jmp_imm("jeq", R2, address, "steer", wide=False)
            asm.goto("out")
        asm.label("steer")
        asm.mov32_imm(R0, TLB_BIT)
        asm.store("w", R6, SKB_MARK, R0)
        # jhash(key, 4, seed): a = b = c = JHASH_INITVAL + 4 + seed; a += key; __jhash_final(a, b, c)
        init = (JHASH_INITVAL + 4 + seed) & M32
        asm.alu_imm("add", R7, init)
        asm.mov32_imm(R8, init)
        asm.mov32_imm(R9, init)
    else:  # TLB with IPv6 client prefixes only: IPv6 alone is steered, inline
        _ipv6_hash(asm, field, seed, prefixes6)
    asm.label("final")
    for x, y, k in FINAL_ROUNDS:
        asm.alu_reg("xor", REGS[x], REGS[y])
        _rol32(asm, REGS[y], k)
        asm.alu_reg("sub", REGS[x], R2)
    # reciprocal_scale: bucket = (c * buckets) >> 32 (c is zero-extended by the 32-bit operations)
    asm.alu_imm("mul", R9, buckets, wide=True)
    asm.alu_imm("rsh", R9, 32, wide=True)
    _lookup(asm, R9, -4, sel_fd)
    asm.load("w", R7, R0, 0)
    asm.jmp_imm("jeq", R7, 0, "out")  # no member in this bucket: 0x100 stays (the blackhole table)
    asm.store("w", R6, SKB_MARK, R7)
    # count: cnt[mark & 0xff] += (1 packet, IP length bytes)
    asm.alu_imm("and", R7, COUNTERS - 1)
    _lookup(asm, R7, -8, cnt_fd)
    asm.load("dw", R1, R0, 0)
    asm.alu_imm("add", R1, 1, wide=True)
    asm.store("dw", R0, 0, R1)
    asm.load("w", R2, R6, SKB_LEN)
    asm.alu_imm("sub", R2, ETH_HLEN, wide=True)
    asm.load("dw", R1, R0, 8)
    asm.alu_reg("add", R1, R2, wide=True)
    asm.store("dw", R0, 8, R1)
    asm.label("out")
    asm.mov32_imm(R0, TC_ACT_OK)
    asm.exit()
    if steer4 and steer6:
        # Reached only from the IPv4 test above, so the IPv4 path is as long as in the IPv4-only program;
        # the jumps back to "final" and "out" join code already explored (no loop).
        asm.label("ipv6")
        _ipv6_hash(asm, field, seed, prefixes6)
        asm.goto("final")
    return asm.assemble()
