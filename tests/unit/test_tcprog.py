"""The eBPF assembler's encoding and the selector program, run by a small interpreter (rootless).

The interpreter below executes exactly the instruction forms the program uses (and fails on any
other), with the skb context, the packet, the stack and the two maps modelled; the same program is
checked in the kernel by tests/integration/test_ebpf_selector.py.
"""

from __future__ import annotations

import random
import socket
import struct
from ipaddress import IPv6Address, IPv6Network

import pytest

from dataplane.core import nfthash
from dataplane.core.chash import build_initial, remove_member
from dataplane.core.selector import map_updates, read_map
from dataplane.kernel import bpfasm, tcprog
from dataplane.kernel.bpfasm import R0, R1, R6, R10, Asm

M64 = (1 << 64) - 1
SEL_FD, CNT_FD = 7, 8


def test_encoding_of_known_instructions() -> None:
    asm = Asm()
    asm.alu_imm("mov", R0, 0, wide=True)  # mov r0, 0
    asm.mov_reg(R6, R1)  # mov r6, r1
    asm.load("w", R1, R6, 76)  # ldxw r1, [r6+76]
    asm.store("dw", R10, -8, R1)  # stxdw [r10-8], r1
    asm.load_map_fd(R1, 5)  # ld_imm64 r1, map fd 5 (two slots)
    asm.jmp_imm("jeq", R0, 0, "end")
    asm.jmp_imm("jeq", R0, 0xFFFFFFFF, "end", wide=False)
    asm.call(1)
    asm.label("end")
    asm.exit()
    code = asm.assemble()
    slots = [code[i:i + 8] for i in range(0, len(code), 8)]
    assert slots[0] == bytes.fromhex("b700000000000000")
    assert slots[1] == bytes.fromhex("bf16000000000000")
    assert slots[2] == bytes.fromhex("61614c0000000000")
    assert slots[3] == bytes.fromhex("7b1af8ff00000000")
    assert slots[4] == bytes.fromhex("1811000005000000") and slots[5] == bytes(8)
    assert slots[6] == bytes.fromhex("1500020000000000")  # to "end": skips the next two slots
    assert slots[7] == bytes.fromhex("16000100ffffffff")  # jmp32, imm -1, skips one
    assert slots[8] == bytes.fromhex("8500000001000000")
    assert slots[9] == bytes.fromhex("9500000000000000")


def test_assembler_refuses_what_it_cannot_encode() -> None:
    asm = Asm()
    asm.goto("nowhere")
    with pytest.raises(ValueError, match="undefined label"):
        asm.assemble()
    with pytest.raises(ValueError, match="32 bits"):
        Asm().alu_imm("add", R0, 1 << 32)
    with pytest.raises(ValueError, match="no register"):
        Asm().mov_reg(11, R0)
    asm = Asm()
    asm.label("x")
    with pytest.raises(ValueError, match="twice"):
        asm.label("x")


# ---------------------------------------------------------------- a small interpreter
class Machine:
    """Runs the selector program on one frame; maps: SEL_FD (u32 array), CNT_FD (one CPU's counters)."""

    def __init__(self, sel: list[int], cnt: dict[int, list[int]]):
        self.sel, self.cnt = sel, cnt
        self.steps = 0

    def run(self, code: bytes, packet: bytes, length: int | None = None) -> tuple[int, int]:
        insns = [struct.unpack_from("<BBhi", code, i) for i in range(0, len(code), 8)]
        regs = [0] * 11
        ctx = {tcprog.SKB_LEN: length or len(packet), tcprog.SKB_MARK: 0,
               tcprog.SKB_PROTOCOL: struct.unpack("<H", packet[12:14])[0] if len(packet) >= 14 else 0,
               tcprog.SKB_DATA: 0x1000, tcprog.SKB_DATA_END: 0x1000 + len(packet)}
        stack = bytearray(16)
        regs[1], regs[10] = ("ctx", 0), ("stack", 16)  # type: ignore[call-overload]
        pc = 0
        steps = 0
        while True:
            steps += 1
            assert steps < 10000, "runaway program"
            code_, regbyte, off, imm = insns[pc]
            dst, src = regbyte & 0xF, regbyte >> 4
            cls, op = code_ & 0x07, code_ & 0xF0
            pc += 1
            if cls in (bpfasm.ALU, bpfasm.ALU64):
                value = regs[src] if code_ & bpfasm.SRC_X else imm & M64
                if isinstance(value, tuple) or isinstance(regs[dst], tuple):  # pointer arithmetic
                    assert op in (0x00, 0xB0), "only add to / copy of a pointer"
                    regs[dst] = value if op == 0xB0 else (regs[dst][0], regs[dst][1] + (value if value < 1 << 63
                                                                                          else value - (1 << 64)))
                    continue
                width = M64 if cls == bpfasm.ALU64 else 0xFFFFFFFF
                a, b = regs[dst] & width, value & width
                result = {0x00: a + b, 0x10: a - b, 0x20: a * b, 0x40: a | b, 0x50: a & b, 0x60: a << (b & 63),
                          0x70: a >> (b & 63), 0xA0: a ^ b, 0xB0: b}[op]
                regs[dst] = result & width
            elif cls == bpfasm.LD:  # ld_imm64 of a map
                assert src == bpfasm.PSEUDO_MAP_FD
                regs[dst] = ("map", imm)  # type: ignore[call-overload]
                pc += 1
            elif cls == bpfasm.LDX:
                size = {0x00: 4, 0x18: 8}[code_ & 0x18]
                base = regs[src]
                if base == ("ctx", 0):
                    regs[dst] = ctx[off]
                elif isinstance(base, int):  # packet (the verifier made the program check its end)
                    at = base - 0x1000 + off
                    assert at >= 0 and at + size <= len(packet), "read outside the packet"
                    regs[dst] = int.from_bytes(packet[at:at + size], "little")
                else:
                    regs[dst] = self._read(base, off, size, stack)
            elif cls == bpfasm.STX:
                size = {0x00: 4, 0x18: 8}[code_ & 0x18]
                base, value = regs[dst], regs[src]
                if base == ("ctx", 0):
                    assert off == tcprog.SKB_MARK, "only the mark is written"
                    ctx[off] = value & 0xFFFFFFFF
                else:
                    self._write(base, off, size, value, stack)
            elif cls in (bpfasm.JMP, bpfasm.JMP32):
                if code_ == bpfasm.JMP | bpfasm.EXIT:
                    self.steps = steps  # instructions this packet ran
                    return regs[0], ctx[tcprog.SKB_MARK]
                if code_ == bpfasm.JMP | bpfasm.CALL:
                    assert imm == tcprog.HELPER_MAP_LOOKUP
                    key = int.from_bytes(self._read(regs[2], 0, 4, stack).to_bytes(4, "little"), "little")
                    fd = regs[1][1]
                    limit = len(self.sel) if fd == SEL_FD else tcprog.COUNTERS
                    regs[0] = (f"value{fd}", key) if key < limit else 0  # type: ignore[call-overload]
                    continue
                if op == 0x00:
                    pc += off
                    continue
                width = 0xFFFFFFFF if cls == bpfasm.JMP32 else M64
                left = regs[dst]
                right = regs[src] if code_ & bpfasm.SRC_X else imm & width
                if isinstance(left, tuple):  # a map value pointer compared with NULL
                    left = 1
                taken = {0x10: left == right, 0x50: left != right, 0x20: left > right}[op] if not (
                    isinstance(left, int) and isinstance(right, int)) else \
                    {0x10: left & width == right & width, 0x50: left & width != right & width,
                     0x20: left & width > right & width}[op]
                if taken:
                    pc += off
            else:
                raise AssertionError(f"unexpected instruction class {cls}")

    def _read(self, base: tuple[str, int], off: int, size: int, stack: bytearray) -> int:
        kind, at = base
        if kind == "stack":
            return int.from_bytes(stack[at + off:at + off + size], "little")
        if kind == f"value{SEL_FD}":
            assert size == 4 and off == 0
            return self.sel[at]
        assert kind == f"value{CNT_FD}"
        return self.cnt.setdefault(at, [0, 0])[off // 8]

    def _write(self, base: tuple[str, int], off: int, size: int, value: int, stack: bytearray) -> None:
        kind, at = base
        if kind == "stack":
            stack[at + off:at + off + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
            return
        assert kind == f"value{CNT_FD}" and size == 8
        self.cnt.setdefault(at, [0, 0])[off // 8] = value & M64


def frame(src: str, dst: str, ethertype: int = 0x0800) -> bytes:
    ip = bytes([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]) + socket.inet_aton(src) + socket.inet_aton(dst)
    return b"\x02" * 6 + b"\x04" * 6 + struct.pack(">H", ethertype) + ip + b"\0" * 8


MARKS = {"srx1": 0x101, "srx2": 0x102, "srx3": 0x103, "srx4": 0x104}


@pytest.mark.parametrize(("field", "buckets", "seed"), [("saddr", 64, 0x5EED), ("daddr", 6400, 0x5EED),
                                                        ("saddr", 7, 0xFFFFFFFF), ("daddr", 65536, 1)])
def test_program_picks_the_member_of_the_nfthash_bucket(field: str, buckets: int, seed: int) -> None:
    table = remove_member(build_initial(list(MARKS), buckets), "srx2", list(MARKS)) if buckets > 8 else \
        build_initial(["srx1", "srx3"], buckets)
    sel = [MARKS[name] for name in table.buckets]
    cnt: dict[int, list[int]] = {}
    code = tcprog.selector_program(field, buckets, seed, (), SEL_FD, CNT_FD)
    rng = random.Random(buckets)
    machine = Machine(sel, cnt)
    for _ in range(150):
        src, dst = (socket.inet_ntoa(struct.pack(">I", rng.getrandbits(32))) for _ in range(2))
        verdict, mark = machine.run(code, frame(src, dst))
        key = src if field == "saddr" else dst
        assert (verdict, mark) == (tcprog.TC_ACT_OK, MARKS[table.buckets[nfthash.bucket(key, buckets, seed)]])
    assert sum(c[0] for c in cnt.values()) == 150 and all(c[1] == 28 * c[0] for c in cnt.values())


def test_program_leaves_other_traffic_alone_and_keeps_the_steering_mark_for_an_empty_bucket() -> None:
    code = tcprog.selector_program("daddr", 16, 3, ("100.64.0.0/16",), SEL_FD, CNT_FD)
    sel = [0x101] * 16
    sel[nfthash.bucket("100.64.9.9", 16, 3)] = 0
    machine = Machine(sel, {})
    assert machine.run(code, frame("203.0.113.9", "100.64.9.9"))[1] == tcprog.TLB_BIT
    assert machine.run(code, frame("203.0.113.9", "100.65.9.9"))[1] == 0, "outside the prefixes"
    assert machine.run(code, frame("203.0.113.9", "100.64.9.9", ethertype=0x86DD))[1] == 0, "not IPv4"
    assert machine.run(code, frame("203.0.113.9", "100.64.9.9")[:33])[1] == 0, "header cut short"


def test_program_refuses_bad_parameters() -> None:
    with pytest.raises(ValueError, match="saddr or daddr"):
        tcprog.selector_program("sport", 64, 0, (), 1, 2)
    with pytest.raises(ValueError, match="buckets"):
        tcprog.selector_program("saddr", 0, 0, (), 1, 2)


def test_prefix_words_match_the_packet_s_byte_order() -> None:
    from ipaddress import IPv4Network

    address, mask = tcprog.le_word(IPv4Network("100.64.0.0/10"))
    word = int.from_bytes(socket.inet_aton("100.100.1.2"), "little")
    assert word & mask == address
    assert int.from_bytes(socket.inet_aton("100.128.1.2"), "little") & mask != address


def test_map_updates_and_read_map_round_trip_through_the_array() -> None:
    from dataplane.core.chash import SelectorTable

    names = {mark: name for name, mark in MARKS.items()}
    before = build_initial(list(MARKS), 64)
    after = remove_member(before, "srx4", list(MARKS))
    array = [0] * 64
    for bucket, mark in map_updates(SelectorTable(), before, MARKS, 64):
        array[bucket] = mark
    assert read_map([(b, m) for b, m in enumerate(array) if m], 64, names) == before
    moved = map_updates(before, after, MARKS, 64)
    assert len(moved) == before.share("srx4"), "only the buckets that change are written"
    for bucket, mark in moved:
        array[bucket] = mark
    assert read_map([(b, m) for b, m in enumerate(array) if m], 64, names) == after
    for bucket, mark in map_updates(after, SelectorTable(), MARKS, 64):
        array[bucket] = mark
    assert array == [0] * 64 and read_map([], 64, names) == SelectorTable()


def test_the_steering_mark_is_the_planner_s() -> None:
    from lab_orchestrator.plan.features import mxlb

    assert tcprog.TLB_BIT == mxlb.TLB_BIT


# ---------------------------------------------------------------- IPv6 (dual-stack labs)
def frame6(src: str, dst: str, payload: int = 8) -> bytes:
    ip = struct.pack(">IHBB", 6 << 28, payload, 17, 64) + IPv6Address(src).packed + IPv6Address(dst).packed
    return b"\x02" * 6 + b"\x04" * 6 + struct.pack(">H", 0x86DD) + ip + b"\0" * payload


def random6(rng: random.Random, within: str = "::/0") -> str:
    net = IPv6Network(within)
    return str(net.network_address + rng.getrandbits(128 - net.prefixlen))


# (address, buckets, seed, bucket): `jhash ip6 saddr mod BUCKETS seed SEED` as this kernel's nft rule gives it
# (tests/integration/test_nfthash6_kernel.py reads them from nft in a throwaway namespace)
GOLDEN6 = [
    ("2001:db8:172:80::1", 6400, 0x5EED, 194),
    ("2001:db8:172:80::2", 6400, 0x5EED, 5183),
    ("2001:db8:172:80::ffff:fffe", 6400, 0x5EED, 4949),
    ("2001:db8:8000::80", 6400, 0x5EED, 2158),
    ("2001:db8:203::9", 256, 0, 253),
    ("2001:db8:ffff:ffff:ffff:ffff:ffff:fffe", 7, 0xFFFFFFFF, 3),
    ("2001:db8:172:80:0:1:0:2a", 65536, 1, 2587),
    ("2001:db8::1:0:0:1", 64, 0x5EED, 42),
]


@pytest.mark.parametrize(("address", "buckets", "seed", "bucket"), GOLDEN6)
@pytest.mark.parametrize("field", ["saddr", "daddr"])
def test_ipv6_program_gives_the_kernel_s_bucket(field: str, address: str, buckets: int, seed: int,
                                                bucket: int) -> None:
    """Golden vectors: the model and the program agree with the values nft computed."""
    assert nfthash.bucket(address, buckets, seed) == bucket
    sel = [0x10000 + b for b in range(buckets)]  # each bucket's own mark: the mark names the bucket
    code = tcprog.selector_program(field, buckets, seed, (), SEL_FD, CNT_FD, ipv6=True)
    other = "2001:db8:ffff::77"
    packet = frame6(address, other) if field == "saddr" else frame6(other, address)
    assert Machine(sel, {}).run(code, packet) == (tcprog.TC_ACT_OK, 0x10000 + bucket)


@pytest.mark.parametrize(("field", "buckets", "seed"), [("saddr", 64, 0x5EED), ("daddr", 6400, 0x5EED),
                                                        ("saddr", 7, 0xFFFFFFFF), ("daddr", 65536, 1)])
def test_ipv6_program_picks_the_member_of_the_nfthash_bucket(field: str, buckets: int, seed: int) -> None:
    table = remove_member(build_initial(list(MARKS), buckets), "srx2", list(MARKS)) if buckets > 8 else \
        build_initial(["srx1", "srx3"], buckets)
    sel = [MARKS[name] for name in table.buckets]
    cnt: dict[int, list[int]] = {}
    code = tcprog.selector_program(field, buckets, seed, (), SEL_FD, CNT_FD, ipv6=True)
    rng = random.Random(buckets)
    machine = Machine(sel, cnt)
    for _ in range(150):
        src, dst = random6(rng), random6(rng, "2001:db8:172:80::/96")
        verdict, mark = machine.run(code, frame6(src, dst))
        key = src if field == "saddr" else dst
        assert (verdict, mark) == (tcprog.TC_ACT_OK, MARKS[table.buckets[nfthash.bucket(key, buckets, seed)]])
    # both families count into the same per-member slots: packets, and the IP length (header included)
    assert sum(c[0] for c in cnt.values()) == 150 and all(c[1] == 48 * c[0] for c in cnt.values())
    verdict, mark = machine.run(code, frame("100.64.1.2", "203.0.113.9"))
    key4 = "100.64.1.2" if field == "saddr" else "203.0.113.9"
    assert mark == MARKS[table.buckets[nfthash.bucket(key4, buckets, seed)]], "IPv4 into the same table"


def test_dual_stack_program_keeps_the_ipv4_path_instruction_for_instruction() -> None:
    """The IPv4-only program is unchanged (93 slots without prefixes); the dual-stack one starts with it,
    only the protocol test jumps to the IPv6 part instead of the exit, and an IPv4 packet runs as many
    instructions in either."""
    for prefixes4, prefixes6 in (((), ()), (("100.64.0.0/16", "10.0.0.0/8"), ("2001:db8:172:80::/96",))):
        v4 = tcprog.selector_program("saddr", 6400, 0x5EED, prefixes4, SEL_FD, CNT_FD)
        dual = tcprog.selector_program("saddr", 6400, 0x5EED, prefixes4 + prefixes6, SEL_FD, CNT_FD, ipv6=True)
        assert len(v4) == 8 * (93 + 3 * len(prefixes4) + (1 if prefixes4 else 0))
        slots = [v4[i:i + 8] for i in range(0, len(v4), 8)]
        dual_slots = [dual[i:i + 8] for i in range(0, len(v4), 8)]
        assert [i for i in range(len(slots)) if slots[i] != dual_slots[i]] == [2], "only the protocol test's target"
        assert slots[2][:2] == dual_slots[2][:2] and slots[2][4:] == dual_slots[2][4:]
        rng = random.Random(3)
        for _ in range(40):
            src = f"100.64.{rng.randrange(256)}.{rng.randrange(256)}"
            one, two = Machine([0x101] * 6400, {}), Machine([0x101] * 6400, {})
            assert one.run(v4, frame(src, "203.0.113.9")) == two.run(dual, frame(src, "203.0.113.9"))
            assert one.steps == two.steps
    assert Machine([0x101] * 64, {}).run(tcprog.selector_program("saddr", 64, 1, (), SEL_FD, CNT_FD),
                                         frame6("2001:db8::1", "2001:db8::2"))[1] == 0, "IPv4 lab: IPv6 untouched"


def test_tlb_prefixes_steer_each_family_by_its_own() -> None:
    prefixes = ("100.64.0.0/16", "2001:db8:172:80::/96", "2001:db8:1:0:8000::/65")
    code = tcprog.selector_program("daddr", 64, 7, prefixes, SEL_FD, CNT_FD, ipv6=True)
    sel = [0x100 | (b % 4 + 1) for b in range(64)]
    machine = Machine(sel, {})
    for dst in ("2001:db8:172:80::1", "2001:db8:172:80::ffff:ffff", "2001:db8:1:0:8000::9", "2001:db8:1:0:ffff::"):
        assert machine.run(code, frame6("2001:db8:203::9", dst))[1] == sel[nfthash.bucket(dst, 64, 7)], dst
    for dst in ("2001:db8:172:81::1", "2001:db8:172:80:1::1", "2001:db8:1:0:7fff::1", "2001:db9:172:80::1",
                "::ffff:100.64.0.1"):
        assert machine.run(code, frame6("2001:db8:172:80::1", dst))[1] == 0, f"{dst} is outside the prefixes"
    assert machine.run(code, frame("203.0.113.9", "100.64.3.3"))[1] == sel[nfthash.bucket("100.64.3.3", 64, 7)]
    assert machine.run(code, frame("203.0.113.9", "100.65.3.3"))[1] == 0
    assert machine.run(code, frame6("::1", "2001:db8:172:80::1")[:53])[1] == 0, "IPv6 header cut short"
    assert machine.run(code, frame6("::1", "2001:db8:172:80::1")[:54])[1] != 0, "the bare header is enough"


def test_a_family_without_tlb_prefixes_is_not_steered() -> None:
    """As the nft rules: with client prefixes of one family only, the other family has no rule."""
    sel = [0x101] * 16
    v6_only = tcprog.selector_program("saddr", 16, 1, ("2001:db8:172:80::/96",), SEL_FD, CNT_FD, ipv6=True)
    assert Machine(sel, {}).run(v6_only, frame("100.64.0.1", "203.0.113.9"))[1] == 0
    assert Machine(sel, {}).run(v6_only, frame6("2001:db8:172:80::5", "2001:db8:203::9"))[1] == 0x101
    v4_only = tcprog.selector_program("saddr", 16, 1, ("100.64.0.0/16",), SEL_FD, CNT_FD, ipv6=True)
    assert v4_only == tcprog.selector_program("saddr", 16, 1, ("100.64.0.0/16",), SEL_FD, CNT_FD)
    with pytest.raises(ValueError, match="ipv6=True"):
        tcprog.selector_program("saddr", 16, 1, ("2001:db8::/32",), SEL_FD, CNT_FD)


def test_ipv6_prefix_words_match_the_packet_s_byte_order() -> None:
    words = tcprog.le_words6(IPv6Network("2001:db8:172:80::/60"))
    address = IPv6Address("2001:db8:172:8f:1::").packed
    loads = [int.from_bytes(address[i:i + 4], "little") for i in range(0, 16, 4)]
    assert [w & m for w, (_, m) in zip(loads, words, strict=True)] == [a for a, _ in words]
    assert [m for _, m in words] == [0xFFFFFFFF, 0xF0FFFFFF, 0, 0]
