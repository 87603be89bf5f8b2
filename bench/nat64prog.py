"""A stateless NAT64 translator as two tc (cls_bpf, direct-action) programs (pure): the eBPF candidate
measured against tayga by bench/nat64_translators.py.

It does, in the kernel's receive path, what tayga does on its TUN device for one address mapping
(RFC 7915's header translation, UDP and TCP only):

- `six_to_four` (on the ingress of the interface toward the IPv6 clients): an IPv6 packet from
  CLIENTS6 (a /120) to PREFIX6 (a /96 NAT64 prefix, RFC 6052) whose next header is UDP or TCP becomes
  an IPv4 packet to the address in the prefix's last 32 bits, from POOL4 (a /24) plus the client
  address's last byte;
- `four_to_six` (on the ingress of the interface toward the IPv4 servers): an unfragmented IPv4
  packet without options, UDP or TCP, to an address of POOL4 becomes an IPv6 packet from PREFIX6 plus
  its source, to CLIENTS6 plus the pool address's last byte; a UDP datagram without a checksum is
  dropped (RFC 7915, 4.5: IPv6 requires one).

Each reads the header with `bpf_skb_load_bytes`, builds the other family's on the stack, changes the
packet's protocol with `bpf_skb_change_proto` (which removes or makes the 20 bytes of difference
behind the Ethernet header), writes the new header and EtherType with `bpf_skb_store_bytes`, and
mends the transport checksum with `bpf_l4_csum_replace` by the difference between the two
pseudo-headers' addresses (`bpf_csum_diff`; the lengths and protocol number weigh the same in both).
The IPv4 header checksum is computed whole. Hop limit and TTL are copied (forwarding decrements them
once). Anything else is left as it came (TC_ACT_OK): the kernel forwards the translated packet by its
routes, as it would tayga's.

Stack layout (offsets from the frame pointer, every field aligned to its size as the verifier wants):
the IPv6 header at -80 (40 bytes), the IPv4 header at -104 (20 bytes), the EtherType at -8.
"""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network

from dataplane.kernel.bpfasm import R0, R1, R2, R3, R4, R5, R6, R7, R8, R10, Asm

HELPER_SKB_STORE_BYTES = 9
HELPER_L4_CSUM_REPLACE = 11
HELPER_SKB_LOAD_BYTES = 26
HELPER_CSUM_DIFF = 28
HELPER_SKB_CHANGE_PROTO = 31
BPF_F_RECOMPUTE_CSUM = 0x01  # skb_store_bytes: keep skb->csum (CHECKSUM_COMPLETE) true to the new bytes
BPF_F_PSEUDO_HDR = 0x10
BPF_F_MARK_MANGLED_0 = 0x20
TC_ACT_OK, TC_ACT_SHOT = 0, 2
ETH_HLEN = 14
SKB_PROTOCOL = 16  # offsetof(struct __sk_buff, protocol)
ETH_P_IP_BE, ETH_P_IPV6_BE = 0x0008, 0xDD86  # htons() of each, as a little-endian load reads them
UDP, TCP = 17, 6
CSUM_OFFSET = {UDP: 6, TCP: 16}  # the checksum's offset in each transport header
V6, V4, ETYPE = -80, -104, -8  # stack offsets (see the module's text)


def _le32(data: bytes) -> int:
    return int.from_bytes(data, "little")


def _swap16(asm: Asm, reg: int, tmp: int) -> None:
    """REG (a 16-bit value in its low half) with its two bytes swapped (network <-> host order)."""
    asm.mov_reg(tmp, reg)
    asm.alu_imm("rsh", tmp, 8)
    asm.alu_imm("lsh", reg, 8)
    asm.alu_imm("and", reg, 0xFF00)
    asm.alu_reg("or", reg, tmp)
    asm.alu_imm("and", reg, 0xFFFF)


def _fold(asm: Asm, reg: int, tmp: int) -> None:
    """REG, a 32-bit one's-complement sum, folded to 16 bits and inverted: a header checksum."""
    for _ in range(2):
        asm.mov_reg(tmp, reg)
        asm.alu_imm("rsh", tmp, 16)
        asm.alu_imm("and", reg, 0xFFFF)
        asm.alu_reg("add", reg, tmp)
    asm.alu_imm("xor", reg, 0xFFFF)
    asm.alu_imm("and", reg, 0xFFFF)


def _store_imm32(asm: Asm, off: int, value: int) -> None:
    asm.mov32_imm(R1, value)
    asm.store("w", R10, off, R1)


def _call_csum_diff(asm: Asm, src: int, src_len: int, dst: int, dst_len: int) -> None:
    asm.mov_reg(R1, R10)
    asm.alu_imm("add", R1, src, wide=True)
    asm.mov32_imm(R2, src_len)
    asm.mov_reg(R3, R10)
    asm.alu_imm("add", R3, dst, wide=True)
    asm.mov32_imm(R4, dst_len)
    asm.mov32_imm(R5, 0)
    asm.call(HELPER_CSUM_DIFF)


def _finish(asm: Asm, ethertype: int, header: int, header_len: int) -> None:
    """Change the protocol, write the new header (HEADER, HEADER_LEN bytes of the stack) and the
    EtherType, mend the transport checksum by R8 (the pseudo-header difference); R7 is the protocol."""
    asm.mov_reg(R1, R6)
    asm.mov32_imm(R2, ethertype)
    asm.mov32_imm(R3, 0)
    asm.call(HELPER_SKB_CHANGE_PROTO)
    asm.jmp_imm("jne", R0, 0, "drop")
    for off, length in ((header, header_len), (ETYPE, 2)):
        asm.mov_reg(R1, R6)
        asm.mov32_imm(R2, ETH_HLEN if off == header else 12)
        asm.mov_reg(R3, R10)
        asm.alu_imm("add", R3, off, wide=True)
        asm.mov32_imm(R4, length)
        # the EtherType is outside what skb->csum covers at ingress; the L3 header is inside
        asm.mov32_imm(R5, BPF_F_RECOMPUTE_CSUM if off == header else 0)
        asm.call(HELPER_SKB_STORE_BYTES)
        asm.jmp_imm("jne", R0, 0, "drop")
    for proto, label in ((UDP, "udp"), (TCP, "tcp")):
        asm.label(label)
        if proto == UDP:
            asm.jmp_imm("jne", R7, UDP, "tcp")
        asm.mov_reg(R1, R6)
        asm.mov32_imm(R2, ETH_HLEN + header_len + CSUM_OFFSET[proto])
        asm.mov32_imm(R3, 0)
        asm.mov_reg(R4, R8)
        asm.mov32_imm(R5, BPF_F_PSEUDO_HDR | (BPF_F_MARK_MANGLED_0 if proto == UDP else 0))
        asm.call(HELPER_L4_CSUM_REPLACE)
        asm.jmp_imm("jne", R0, 0, "drop")
        asm.goto("pass")
    asm.label("drop")  # a packet half rewritten is not passed on
    asm.mov32_imm(R0, TC_ACT_SHOT)
    asm.exit()
    asm.label("pass")
    asm.mov32_imm(R0, TC_ACT_OK)
    asm.exit()


def _load_header(asm: Asm, to: int, length: int) -> None:
    asm.mov_reg(R1, R6)
    asm.mov32_imm(R2, ETH_HLEN)
    asm.mov_reg(R3, R10)
    asm.alu_imm("add", R3, to, wide=True)
    asm.mov32_imm(R4, length)
    asm.call(HELPER_SKB_LOAD_BYTES)
    asm.jmp_imm("jne", R0, 0, "pass")


def _udp_or_tcp(asm: Asm, off: int) -> None:
    """R7 = the byte at OFF (the protocol); on to "pass" unless UDP or TCP."""
    asm.load("b", R7, R10, off)
    asm.jmp_imm("jeq", R7, UDP, "translate")
    asm.jmp_imm("jne", R7, TCP, "pass")
    asm.label("translate")


def _begin(prefix6: str, pool4: str, clients6: str, ethertype: int, header: int,
           length: int) -> tuple[Asm, IPv6Network, IPv4Network, IPv6Network]:
    """The mapping checked, and a program's start: the skb kept in R6, a packet of another protocol
    passed, the header (LENGTH bytes) copied to the stack at HEADER."""
    prefix, pool, clients = IPv6Network(prefix6), IPv4Network(pool4), IPv6Network(clients6)
    if prefix.prefixlen != 96 or pool.prefixlen != 24 or clients.prefixlen != 120:
        raise ValueError("a /96 NAT64 prefix, a /24 pool and a /120 of clients")
    asm = Asm()
    asm.mov_reg(R6, R1)
    asm.load("w", R2, R6, SKB_PROTOCOL)
    asm.jmp_imm("jne", R2, ethertype, "pass")
    _load_header(asm, header, length)
    return asm, prefix, pool, clients


def six_to_four(prefix6: str, pool4: str, clients6: str) -> bytes:
    asm, prefix, pool, clients = _begin(prefix6, pool4, clients6, ETH_P_IPV6_BE, V6, 40)
    _udp_or_tcp(asm, V6 + 6)
    for i in range(3):  # the destination's first 96 bits are the prefix
        asm.load("w", R2, R10, V6 + 24 + 4 * i)
        asm.jmp_imm("jne", R2, _le32(prefix.network_address.packed[4 * i:4 * i + 4]), "pass", wide=False)
    for i in range(4):  # and the source is one of the mapped clients (its first 120 bits)
        asm.load("w", R2, R10, V6 + 8 + 4 * i)
        word = clients.network_address.packed[4 * i:4 * i + 4]
        if i == 3:
            asm.alu_imm("and", R2, 0x00FFFFFF)
            word = word[:3] + b"\0"
        asm.jmp_imm("jne", R2, _le32(word), "pass", wide=False)
    # version 4, IHL 5, total length = payload length + 20
    asm.load("h", R2, R10, V6 + 4)
    _swap16(asm, R2, R3)
    asm.alu_imm("add", R2, 20)
    _swap16(asm, R2, R3)
    asm.alu_imm("lsh", R2, 16)
    asm.alu_imm("or", R2, 0x45)
    asm.store("w", R10, V4, R2)
    _store_imm32(asm, V4 + 4, 0x00400000)  # identification 0, don't fragment
    asm.load("b", R2, R10, V6 + 7)  # TTL = hop limit, protocol, checksum 0 for now
    asm.mov_reg(R3, R7)
    asm.alu_imm("lsh", R3, 8)
    asm.alu_reg("or", R2, R3)
    asm.store("w", R10, V4 + 8, R2)
    asm.load("b", R2, R10, V6 + 23)  # source: the pool plus the client's last byte
    asm.alu_imm("lsh", R2, 24)
    asm.alu_imm("or", R2, _le32(pool.network_address.packed[:3] + b"\0"))
    asm.store("w", R10, V4 + 12, R2)
    asm.load("w", R2, R10, V6 + 36)  # destination: the prefix's last 32 bits
    asm.store("w", R10, V4 + 16, R2)
    _call_csum_diff(asm, V6 + 8, 32, V4 + 12, 8)
    asm.mov_reg(R8, R0)
    asm.mov32_imm(R1, 0)
    asm.mov32_imm(R2, 0)
    asm.mov_reg(R3, R10)
    asm.alu_imm("add", R3, V4, wide=True)
    asm.mov32_imm(R4, 20)
    asm.mov32_imm(R5, 0)
    asm.call(HELPER_CSUM_DIFF)
    _fold(asm, R0, R2)
    asm.store("h", R10, V4 + 10, R0)
    _store_imm32(asm, ETYPE, ETH_P_IP_BE)
    _finish(asm, ETH_P_IP_BE, V4, 20)
    return asm.assemble()


def four_to_six(prefix6: str, pool4: str, clients6: str) -> bytes:
    asm, prefix, pool, clients = _begin(prefix6, pool4, clients6, ETH_P_IP_BE, V4, 20)
    asm.load("b", R2, R10, V4)
    asm.jmp_imm("jne", R2, 0x45, "pass")  # IPv4 without options
    asm.load("h", R2, R10, V4 + 6)
    asm.alu_imm("and", R2, 0xFF3F)  # more fragments, fragment offset (as a little-endian load reads them)
    asm.jmp_imm("jne", R2, 0, "pass")
    _udp_or_tcp(asm, V4 + 9)
    # RFC 7915 4.5: an IPv4 UDP datagram without a checksum has none to mend, and IPv6 requires one
    asm.jmp_imm("jne", R7, UDP, "checked")
    asm.mov_reg(R1, R6)
    asm.mov32_imm(R2, ETH_HLEN + 20 + CSUM_OFFSET[UDP])
    asm.mov_reg(R3, R10)
    asm.alu_imm("add", R3, ETYPE, wide=True)
    asm.mov32_imm(R4, 2)
    asm.call(HELPER_SKB_LOAD_BYTES)
    asm.jmp_imm("jne", R0, 0, "pass")
    asm.load("h", R2, R10, ETYPE)
    asm.jmp_imm("jeq", R2, 0, "drop")
    asm.label("checked")
    asm.load("w", R2, R10, V4 + 16)
    asm.alu_imm("and", R2, 0x00FFFFFF)
    asm.jmp_imm("jne", R2, _le32(pool.network_address.packed[:3] + b"\0"), "pass", wide=False)
    _store_imm32(asm, V6, 0x00000060)  # version 6, traffic class and flow label 0
    asm.load("h", R2, R10, V4 + 2)  # payload length = total length - 20, next header, hop limit = TTL
    _swap16(asm, R2, R3)
    asm.alu_imm("sub", R2, 20)
    _swap16(asm, R2, R3)
    asm.mov_reg(R3, R7)
    asm.alu_imm("lsh", R3, 16)
    asm.alu_reg("or", R2, R3)
    asm.load("b", R3, R10, V4 + 8)
    asm.alu_imm("lsh", R3, 24)
    asm.alu_reg("or", R2, R3)
    asm.store("w", R10, V6 + 4, R2)
    for i in range(3):  # source: the prefix plus the server's IPv4 address
        _store_imm32(asm, V6 + 8 + 4 * i, _le32(prefix.network_address.packed[4 * i:4 * i + 4]))
    asm.load("w", R2, R10, V4 + 12)
    asm.store("w", R10, V6 + 20, R2)
    for i in range(3):  # destination: the clients' /120 plus the pool address's last byte
        _store_imm32(asm, V6 + 24 + 4 * i, _le32(clients.network_address.packed[4 * i:4 * i + 4]))
    asm.load("b", R2, R10, V4 + 19)
    asm.alu_imm("lsh", R2, 24)
    asm.alu_imm("or", R2, _le32(clients.network_address.packed[12:15] + b"\0"))
    asm.store("w", R10, V6 + 36, R2)
    _call_csum_diff(asm, V4 + 12, 8, V6 + 8, 32)
    asm.mov_reg(R8, R0)
    _store_imm32(asm, ETYPE, ETH_P_IPV6_BE)
    _finish(asm, ETH_P_IPV6_BE, V6, 40)
    return asm.assemble()
