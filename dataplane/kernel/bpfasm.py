"""A small eBPF assembler (pure): instructions as bytes the kernel's bpf(2) BPF_PROG_LOAD takes.

Only what the MX's tc selector program (`dataplane.kernel.tcprog`) needs: 32- and 64-bit ALU with an
immediate or a register, loads and stores, conditional jumps to named labels (64- and 32-bit
compares), helper calls, `exit`, and the two-slot `ld_imm64` that carries a map file descriptor.
Encoding (include/uapi/linux/bpf.h, "struct bpf_insn"): one 8-byte slot per instruction, little
endian: opcode, destination register in the low nibble and source register in the high nibble of the
second byte, a signed 16-bit offset, a signed 32-bit immediate. A jump's offset counts slots from the
one after the jump.

    asm = Asm()
    asm.mov32_imm(R0, 0)
    asm.jmp_imm("jeq", R1, 0, "out")
    asm.label("out")
    asm.exit()
    program = asm.assemble()     # bytes, 8 per slot
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# Registers: R0 return value, R1-R5 helper arguments (clobbered by calls), R6-R9 kept across calls,
# R10 the read-only frame pointer.
R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 = range(11)

# Instruction classes.
LD, LDX, ST, STX, ALU, JMP, JMP32, ALU64 = range(8)
# Sizes (loads and stores) and modes.
SIZES = {"w": 0x00, "h": 0x08, "b": 0x10, "dw": 0x18}
MODE_IMM, MODE_MEM = 0x00, 0x60
SRC_K, SRC_X = 0x00, 0x08
ALU_OPS = {"add": 0x00, "sub": 0x10, "mul": 0x20, "div": 0x30, "or": 0x40, "and": 0x50, "lsh": 0x60,
           "rsh": 0x70, "mod": 0x90, "xor": 0xA0, "mov": 0xB0, "arsh": 0xC0}
JMP_OPS = {"ja": 0x00, "jeq": 0x10, "jgt": 0x20, "jge": 0x30, "jset": 0x40, "jne": 0x50, "jsgt": 0x60,
           "jsge": 0x70, "jlt": 0xA0, "jle": 0xB0, "jslt": 0xC0, "jsle": 0xD0}
CALL, EXIT = 0x80, 0x90
PSEUDO_MAP_FD = 1  # ld_imm64 source register: the immediate is a map file descriptor


@dataclass(frozen=True)
class Insn:
    code: int
    dst: int = 0
    src: int = 0
    off: int = 0
    imm: int = 0
    target: str | None = None  # a jump's label, resolved by Asm.assemble

    def encode(self, off: int | None = None) -> bytes:
        return struct.pack("<BBhi", self.code, (self.src << 4) | self.dst, self.off if off is None else off, self.imm)


def _imm32(value: int) -> int:
    """An immediate as the signed 32-bit field holds it (0xFFFFFFFF is -1)."""
    if not -(1 << 31) <= value < (1 << 32):
        raise ValueError(f"immediate {value:#x} does not fit 32 bits")
    return value - (1 << 32) if value >= (1 << 31) else value


def _reg(value: int) -> int:
    if not R0 <= value <= R10:
        raise ValueError(f"no register r{value}")
    return value


class Asm:
    """Instructions appended in order; `assemble` resolves the labels."""

    def __init__(self) -> None:
        self.insns: list[Insn] = []
        self.labels: dict[str, int] = {}

    def _add(self, insn: Insn) -> None:
        self.insns.append(insn)

    def label(self, name: str) -> None:
        if name in self.labels:
            raise ValueError(f"label {name} defined twice")
        self.labels[name] = len(self.insns)

    # ALU: 32-bit operations zero the upper half of the destination.
    def alu_imm(self, op: str, dst: int, imm: int, wide: bool = False) -> None:
        self._add(Insn((ALU64 if wide else ALU) | ALU_OPS[op] | SRC_K, _reg(dst), imm=_imm32(imm)))

    def alu_reg(self, op: str, dst: int, src: int, wide: bool = False) -> None:
        self._add(Insn((ALU64 if wide else ALU) | ALU_OPS[op] | SRC_X, _reg(dst), _reg(src)))

    def mov32_imm(self, dst: int, imm: int) -> None:
        self.alu_imm("mov", dst, imm)

    def mov_reg(self, dst: int, src: int) -> None:
        self.alu_reg("mov", dst, src, wide=True)

    # Memory.
    def load(self, size: str, dst: int, src: int, off: int) -> None:
        self._add(Insn(LDX | MODE_MEM | SIZES[size], _reg(dst), _reg(src), off))

    def store(self, size: str, dst: int, off: int, src: int) -> None:
        self._add(Insn(STX | MODE_MEM | SIZES[size], _reg(dst), _reg(src), off))

    def load_map_fd(self, dst: int, fd: int) -> None:
        """`ld_imm64 dst, map` (two slots): the verifier turns the descriptor into the map's address."""
        self._add(Insn(LD | MODE_IMM | SIZES["dw"], _reg(dst), PSEUDO_MAP_FD, imm=_imm32(fd)))
        self._add(Insn(0))

    # Control flow.
    def jmp_imm(self, op: str, dst: int, imm: int, target: str, wide: bool = True) -> None:
        self._add(Insn((JMP if wide else JMP32) | JMP_OPS[op] | SRC_K, _reg(dst), imm=_imm32(imm), target=target))

    def jmp_reg(self, op: str, dst: int, src: int, target: str, wide: bool = True) -> None:
        self._add(Insn((JMP if wide else JMP32) | JMP_OPS[op] | SRC_X, _reg(dst), _reg(src), target=target))

    def goto(self, target: str) -> None:
        self._add(Insn(JMP | JMP_OPS["ja"], target=target))

    def call(self, helper: int) -> None:
        self._add(Insn(JMP | CALL, imm=helper))

    def exit(self) -> None:
        self._add(Insn(JMP | EXIT))

    def assemble(self) -> bytes:
        out = []
        for index, insn in enumerate(self.insns):
            off = None
            if insn.target is not None:
                if insn.target not in self.labels:
                    raise ValueError(f"jump to undefined label {insn.target}")
                off = self.labels[insn.target] - (index + 1)
                if not -(1 << 15) <= off < (1 << 15):
                    raise ValueError(f"jump to {insn.target} too far")
            out.append(insn.encode(off))
        return b"".join(out)
