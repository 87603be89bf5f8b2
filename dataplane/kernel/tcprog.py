"""The MX selector as a tc (cls_bpf, direct-action) program: the eBPF twin of the nftables rule (pure).

The nftables selector is, per side of the MX (`lab_orchestrator.plan.features.mxlb`):

    iifname { INGRESS } [ip FIELD { PREFIXES }] meta mark set 0x100
        meta mark set jhash ip FIELD mod BUCKETS seed SEED map @sel

This program does the same on the ingress of the same interfaces: an IPv4 packet (whose FIELD is in
one of PREFIXES, if any) gets mark 0x100, then the kernel's ``jhash`` of the 4 address bytes with
SEED (Bob Jenkins' lookup3, `dataplane.core.nfthash`), ``reciprocal_scale`` into a bucket, and the mark
the array map `sel` holds for that bucket; a bucket holding 0 (no member: what a missing nft map
element is) leaves 0x100, which the policy rules send to the blackhole table. It never drops or
redirects a packet: the return value is always TC_ACT_OK, routing (the fwmark rules) decides.
Each member's packets and bytes (IP length) are counted in the per-CPU array `cnt` at index
``mark & 0xff`` (the nft ruleset's per-SRX counters).

    program = selector_program("saddr", buckets=64, seed=0x5EED, prefixes=(), sel_fd=5, cnt_fd=6)
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Network

from ..core.nfthash import JHASH_INITVAL, M32
from .bpfasm import R0, R1, R2, R3, R4, R6, R7, R8, R9, R10, Asm

FIELDS = {"saddr": 26, "daddr": 30}  # offset in the Ethernet frame: 14 + 12 (source), 14 + 16 (destination)
TLB_BIT = 0x100  # the mark of a steered packet before the map lookup (lab_orchestrator.plan.features.mxlb.TLB_BIT)
COUNTERS = 256  # counter slots: index = mark & 0xff
COUNTER_SIZE = 16  # per member and CPU: packets, bytes (u64 each)
ETH_HLEN = 14
ETH_P_IP_BE = 0x0008  # htons(ETH_P_IP), as a little-endian 32-bit load of skb->protocol reads it
HELPER_MAP_LOOKUP = 1
TC_ACT_OK = 0

# struct __sk_buff offsets
SKB_LEN, SKB_MARK, SKB_PROTOCOL, SKB_DATA, SKB_DATA_END = 0, 8, 16, 76, 80

# __jhash_final's rounds: (x ^= y; x -= rol32(y, k)) over (a, b, c) as in include/linux/jhash.h
FINAL_ROUNDS = (("c", "b", 14), ("a", "c", 11), ("b", "a", 25), ("c", "b", 16), ("a", "c", 4), ("b", "a", 14),
                ("c", "b", 24))


def le_word(network: IPv4Network) -> tuple[int, int]:
    """A prefix's address and mask as a little-endian 32-bit load of the packet's bytes reads them."""
    return (int.from_bytes(network.network_address.packed, "little"),
            int.from_bytes(network.netmask.packed, "little"))


def _lookup(asm: Asm, key: int, slot: int, map_fd: int) -> None:
    """R0 = &map[KEY] (the 32-bit key put on the stack at SLOT), or on to "out" when it has none."""
    asm.store("w", R10, slot, key)
    asm.mov_reg(R2, R10)
    asm.alu_imm("add", R2, slot, wide=True)
    asm.load_map_fd(R1, map_fd)
    asm.call(HELPER_MAP_LOOKUP)
    asm.jmp_imm("jeq", R0, 0, "out")


def selector_program(field: str, buckets: int, seed: int, prefixes: Sequence[str], sel_fd: int, cnt_fd: int) -> bytes:
    """The instructions (8 bytes each) for one side; SEL_FD and CNT_FD are the maps' descriptors."""
    if field not in FIELDS:
        raise ValueError(f"hash field must be saddr or daddr, not {field}")
    if not 1 <= buckets <= 65536:
        raise ValueError("buckets must be 1..65536")
    asm = Asm()
    asm.mov_reg(R6, R1)  # the skb context, kept across helper calls
    # IPv4 only, and the address inside the packet's linear data (the verifier insists).
    asm.load("w", R2, R6, SKB_PROTOCOL)
    asm.jmp_imm("jne", R2, ETH_P_IP_BE, "out")
    asm.load("w", R2, R6, SKB_DATA)
    asm.load("w", R3, R6, SKB_DATA_END)
    asm.mov_reg(R4, R2)
    asm.alu_imm("add", R4, ETH_HLEN + 20, wide=True)
    asm.jmp_reg("jgt", R4, R3, "out")
    asm.load("w", R7, R2, FIELDS[field])  # the address bytes as jhash reads them
    if prefixes:
        for prefix in prefixes:
            address, mask = le_word(IPv4Network(prefix))
            asm.mov_reg(R2, R7)
            asm.alu_imm("and", R2, mask)
            asm.jmp_imm("jeq", R2, address, "steer", wide=False)
        asm.goto("out")
    asm.label("steer")
    asm.mov32_imm(R0, TLB_BIT)
    asm.store("w", R6, SKB_MARK, R0)
    # jhash(key, 4, seed): a = b = c = JHASH_INITVAL + 4 + seed; a += key; __jhash_final(a, b, c)
    init = (JHASH_INITVAL + 4 + seed) & M32
    regs = {"a": R7, "b": R8, "c": R9}
    asm.alu_imm("add", R7, init)
    asm.mov32_imm(R8, init)
    asm.mov32_imm(R9, init)
    for x, y, k in FINAL_ROUNDS:
        asm.alu_reg("xor", regs[x], regs[y])
        asm.alu_reg("mov", R2, regs[y])  # R2 = rol32(y, k) = (y << k) | (y >> (32 - k))
        asm.alu_imm("lsh", R2, k)
        asm.alu_reg("mov", R3, regs[y])
        asm.alu_imm("rsh", R3, 32 - k)
        asm.alu_reg("or", R2, R3)
        asm.alu_reg("sub", regs[x], R2)
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
    return asm.assemble()
