"""The bpf(2) system call through ctypes: maps, loading a program, test runs, objects by id.

Only the commands the MX's tc selector uses (include/uapi/linux/bpf.h, "union bpf_attr"); each
attribute block is packed here field by field. Errors raise `BpfError` with the kernel's errno and,
for a program the verifier refused, the verifier's log.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Sequence
from dataclasses import dataclass

SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(platform.machine(), 321)

MAP_CREATE, MAP_LOOKUP_ELEM, MAP_UPDATE_ELEM = 0, 1, 2
MAP_LOOKUP_BATCH, MAP_UPDATE_BATCH = 24, 26
PROG_LOAD, PROG_TEST_RUN = 5, 10
PROG_GET_FD_BY_ID, MAP_GET_FD_BY_ID, OBJ_GET_INFO_BY_FD = 13, 14, 15

MAP_TYPE_ARRAY, MAP_TYPE_PERCPU_ARRAY = 2, 6
PROG_TYPE_SCHED_CLS = 3
SKB_CTX_SIZE = 192  # sizeof(struct __sk_buff)
SKB_MARK = 8  # offsetof(struct __sk_buff, mark)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class BpfError(OSError):
    """A bpf(2) command failed (errno; the verifier's log for a refused program)."""

    def __init__(self, what: str, errno: int, log: str = ""):
        super().__init__(errno, f"bpf {what}: {os.strerror(errno)}" + (f"\n{log}" if log else ""))
        self.log = log


def _call(cmd: int, attr: ctypes.Array[ctypes.c_char], what: str) -> int:
    result = _libc.syscall(SYS_BPF, cmd, attr, len(attr))
    if result < 0:
        raise BpfError(what, ctypes.get_errno())
    return int(result)


def _attr(data: bytes, size: int = 128) -> ctypes.Array[ctypes.c_char]:
    return ctypes.create_string_buffer(data.ljust(size, b"\0"), size)


def _addr(buf: ctypes.Array[ctypes.c_char] | None) -> int:
    return 0 if buf is None else ctypes.addressof(buf)


def map_create(map_type: int, key_size: int, value_size: int, max_entries: int, name: str) -> int:
    data = struct.pack("<IIIIIII16s", map_type, key_size, value_size, max_entries, 0, 0, 0, name.encode()[:15])
    return _call(MAP_CREATE, _attr(data), f"map create {name}")


def _elem(cmd: int, fd: int, key: bytes, value: ctypes.Array[ctypes.c_char], what: str) -> None:
    keybuf = ctypes.create_string_buffer(key, len(key))
    _call(cmd, _attr(struct.pack("<IIQQQ", fd, 0, _addr(keybuf), _addr(value), 0)), what)


def map_update(fd: int, key: bytes, value: bytes) -> None:
    _elem(MAP_UPDATE_ELEM, fd, key, ctypes.create_string_buffer(value, len(value)), "map update")


def map_lookup(fd: int, key: bytes, value_size: int) -> bytes:
    value = ctypes.create_string_buffer(value_size)
    _elem(MAP_LOOKUP_ELEM, fd, key, value, "map lookup")
    return value.raw


def _batch(cmd: int, fd: int, keys: ctypes.Array[ctypes.c_char], values: ctypes.Array[ctypes.c_char],
           count: int, what: str, out_batch: ctypes.Array[ctypes.c_char] | None = None) -> int:
    attr = _attr(struct.pack("<QQQQIIQQ", 0, _addr(out_batch), _addr(keys), _addr(values), count, fd, 0, 0))
    result = _libc.syscall(SYS_BPF, cmd, attr, len(attr))
    done = struct.unpack_from("<I", attr.raw, 32)[0]
    if result < 0 and ctypes.get_errno() != errno.ENOENT:  # ENOENT: the whole map was read
        raise BpfError(what, ctypes.get_errno())
    return int(done)


def array_update(fd: int, values: Sequence[tuple[int, int]]) -> None:
    """Set u32 array slots (index, value) in one system call."""
    if not values:
        return
    keys = ctypes.create_string_buffer(struct.pack(f"<{len(values)}I", *(k for k, _ in values)))
    vals = ctypes.create_string_buffer(struct.pack(f"<{len(values)}I", *(v for _, v in values)))
    _batch(MAP_UPDATE_BATCH, fd, keys, vals, len(values), "map update batch")


def array_read(fd: int, entries: int) -> list[int]:
    """Every u32 slot of an array map, in one system call."""
    keys = ctypes.create_string_buffer(4 * entries)
    vals = ctypes.create_string_buffer(4 * entries)
    token = ctypes.create_string_buffer(4)
    done = _batch(MAP_LOOKUP_BATCH, fd, keys, vals, entries, "map lookup batch", token)
    if done != entries:
        raise BpfError(f"map lookup batch: {done} of {entries} slots", errno.EIO)
    return list(struct.unpack(f"<{entries}I", vals.raw))


def prog_load(insns: bytes, name: str, prog_type: int = PROG_TYPE_SCHED_CLS) -> int:
    """Load a program (license "GPL"); a refusal raises BpfError with the verifier's log."""
    code = ctypes.create_string_buffer(insns, len(insns))
    license_ = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(1 << 16)
    data = struct.pack("<IIQQIIQII16s", prog_type, len(insns) // 8, _addr(code), _addr(license_), 1, len(log),
                       _addr(log), 0, 0, name.encode()[:15])
    attr = _attr(data)
    result = _libc.syscall(SYS_BPF, PROG_LOAD, attr, len(attr))
    if result < 0:
        raise BpfError(f"program load {name}", ctypes.get_errno(), log.value.decode(errors="replace"))
    return int(result)


def test_run(prog_fd: int, packet: bytes) -> tuple[int, int]:
    """Run a SCHED_CLS program once on PACKET (an Ethernet frame): (return value, skb mark after)."""
    data = ctypes.create_string_buffer(packet, len(packet))
    ctx_in = ctypes.create_string_buffer(SKB_CTX_SIZE)
    ctx_out = ctypes.create_string_buffer(SKB_CTX_SIZE)
    attr = _attr(struct.pack("<IIIIQQIIIIQQ", prog_fd, 0, len(packet), 0, _addr(data), 0, 1, 0,
                             SKB_CTX_SIZE, SKB_CTX_SIZE, _addr(ctx_in), _addr(ctx_out)))
    _call(PROG_TEST_RUN, attr, "program test run")
    retval = struct.unpack_from("<I", attr.raw, 4)[0]
    return retval, struct.unpack_from("<I", ctx_out.raw, SKB_MARK)[0]


def prog_fd_by_id(prog_id: int) -> int:
    return _call(PROG_GET_FD_BY_ID, _attr(struct.pack("<I", prog_id)), f"program {prog_id}")


def map_fd_by_id(map_id: int) -> int:
    return _call(MAP_GET_FD_BY_ID, _attr(struct.pack("<I", map_id)), f"map {map_id}")


def _info(fd: int, size: int, extra: bytes = b"") -> bytes:
    info = ctypes.create_string_buffer(extra.ljust(size, b"\0"), size)
    _call(OBJ_GET_INFO_BY_FD, _attr(struct.pack("<IIQ", fd, size, _addr(info))), "object info")
    return info.raw


@dataclass(frozen=True)
class MapInfo:
    id: int
    map_type: int
    key_size: int
    value_size: int
    max_entries: int
    name: str


def map_info(fd: int) -> MapInfo:
    raw = _info(fd, 88)
    map_type, map_id, key_size, value_size, max_entries, _flags, name = struct.unpack_from("<IIIIII16s", raw)
    return MapInfo(map_id, map_type, key_size, value_size, max_entries, name.rstrip(b"\0").decode())


def prog_map_ids(fd: int) -> list[int]:
    """The ids of the maps a loaded program uses (struct bpf_prog_info: nr_map_ids at 52, map_ids at 56)."""
    count = struct.unpack_from("<I", _info(fd, 96), 52)[0]
    ids = ctypes.create_string_buffer(4 * max(count, 1))
    extra = bytearray(56 + 8)
    struct.pack_into("<IQ", extra, 52, count, _addr(ids))
    _info(fd, 96, bytes(extra))
    return list(struct.unpack_from(f"<{count}I", ids.raw))


def possible_cpus() -> int:
    """How many values a per-CPU map holds per key (the kernel's possible CPUs, e.g. "0-1")."""
    text = open("/sys/devices/system/cpu/possible").read().strip()  # noqa: SIM115 - one short read
    count = 0
    for part in text.split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count
