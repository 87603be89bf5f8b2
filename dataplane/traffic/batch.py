"""Batched datagram I/O: many frames per system call (sendmmsg(2) / recvmmsg(2) through ctypes).

Python's socket module has no sendmmsg/recvmmsg, and one `send` per packet costs the sender more
than the packet's trip through a few namespaces. A batch is one staging buffer of SLOTS fixed-size
slots, each described once by an iovec and an mmsghdr pointing into it: the sender copies a
pre-built frame into slot j, writes its sequence number and send time there and the frame's length
into iovec j; one call then hands slots 0..n-1 to the kernel, which copies them out (the staging
buffer is free again when the call returns, unlike a PACKET_MMAP TX ring whose pages travel with
the packet through every hop). The receiving side is the mirror image: one call fills up to SLOTS
slots and their lengths.

Semantics are those of one call per packet: messages leave in order, and a message the kernel
refuses (interface down, no buffer) is reported with its errno and skipped, the rest of the batch
still goes. Without a C library offering sendmmsg/recvmmsg (`available()` False) `LoopBatch` does
the same with one `send`/`recv_into` per slot.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as errno_mod
import socket
import struct
from typing import Protocol

MSG_DONTWAIT = 0x40
SLOTS = 64  # messages per call at most


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.c_void_p),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", _Msghdr), ("len", ctypes.c_uint)]


IOVEC_SIZE = ctypes.sizeof(_Iovec)
IOVEC_LEN_OFFSET = _Iovec.len.offset
MMSG_SIZE = ctypes.sizeof(_Mmsghdr)
MMSG_LEN_OFFSET = _Mmsghdr.len.offset
_SIZE_T = struct.Struct("N")
_UINT = struct.Struct("I")


def _libc() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    for name in ("sendmmsg", "recvmmsg"):
        if not hasattr(lib, name):
            return None
    lib.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    lib.sendmmsg.restype = ctypes.c_int
    lib.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
    lib.recvmmsg.restype = ctypes.c_int
    return lib


_LIBC = _libc()


def available() -> bool:
    """True when this C library has sendmmsg and recvmmsg."""
    return _LIBC is not None


def slot_size(largest: int) -> int:
    """A slot fits the largest frame, rounded up to 64 bytes."""
    return max(64, (largest + 63) // 64 * 64)


class Batch(Protocol):
    """What the sender and receiver loops use: a staging buffer of `slots` slots of `slot` bytes."""

    stage: bytearray
    slot: int
    slots: int

    def set_length(self, index: int, length: int) -> None: ...

    def send(self, count: int) -> list[int]:
        """Send slots 0..COUNT-1 (lengths as set), in order; the errno of each refused one."""
        ...

    def receive(self) -> int:
        """Fill up to `slots` slots from the socket without blocking; how many (0: none queued)."""
        ...

    def length(self, index: int) -> int:
        """Bytes received in slot INDEX by the last `receive`."""
        ...


class MmsgBatch:
    """sendmmsg/recvmmsg on SOCK's descriptor over SLOTS slots of SLOT bytes."""

    def __init__(self, sock: socket.socket, slot: int, slots: int = SLOTS):
        if _LIBC is None:
            raise OSError(errno_mod.ENOSYS, "no sendmmsg/recvmmsg in this C library")
        self.sock = sock
        self.fd = sock.fileno()
        self.slot, self.slots = slot, slots
        self.stage = bytearray(slot * slots)
        # the iovecs live in a bytearray, so a length is one struct.pack_into per message
        self.iov_raw = bytearray(IOVEC_SIZE * slots)
        self.mmsg_raw = bytearray(MMSG_SIZE * slots)
        self._stage_c = (ctypes.c_char * len(self.stage)).from_buffer(self.stage)  # pins the buffer
        self._iov_c = (_Iovec * slots).from_buffer(self.iov_raw)
        self._mmsg_c = (_Mmsghdr * slots).from_buffer(self.mmsg_raw)
        base = ctypes.addressof(self._stage_c)
        for j in range(slots):
            self._iov_c[j].base = base + j * slot
            self._iov_c[j].len = slot
            self._mmsg_c[j].hdr.iov = ctypes.addressof(self._iov_c[j])
            self._mmsg_c[j].hdr.iovlen = 1
        self._mmsg_addr = ctypes.addressof(self._mmsg_c)
        self._pack_len = _SIZE_T.pack_into
        self._unpack_len = _UINT.unpack_from

    def set_length(self, index: int, length: int) -> None:
        self._pack_len(self.iov_raw, index * IOVEC_SIZE + IOVEC_LEN_OFFSET, length)

    def send(self, count: int) -> list[int]:
        assert _LIBC is not None
        failed: list[int] = []
        done = 0
        while done < count:
            sent = _LIBC.sendmmsg(self.fd, self._mmsg_addr + done * MMSG_SIZE, count - done, 0)
            if sent < 0:
                code = ctypes.get_errno()
                if code == errno_mod.EINTR:
                    continue
                failed.append(code)  # the first message of this call was refused
                done += 1
            else:
                done += sent
                if done < count:
                    # the kernel kept the next message's error on the socket: read (and clear) it
                    code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if code:
                        failed.append(code)
                        done += 1
        return failed

    def receive(self) -> int:
        assert _LIBC is not None
        for j in range(self.slots):  # recvmmsg writes back each iovec's room only in msg_len
            self._iov_c[j].len = self.slot
        got = _LIBC.recvmmsg(self.fd, self._mmsg_addr, self.slots, MSG_DONTWAIT, None)
        if got < 0:
            code = ctypes.get_errno()
            if code in (errno_mod.EAGAIN, errno_mod.EINTR):
                return 0
            raise OSError(code, errno_mod.errorcode.get(code, str(code)))
        return int(got)

    def length(self, index: int) -> int:
        value: int = self._unpack_len(self.mmsg_raw, index * MMSG_SIZE + MMSG_LEN_OFFSET)[0]
        return value


class LoopBatch:
    """The same over SOCK with one send/recv_into per slot (no sendmmsg, or a test double)."""

    def __init__(self, sock: socket.socket, slot: int, slots: int = SLOTS):
        self.sock = sock
        self.slot, self.slots = slot, slots
        self.stage = bytearray(slot * slots)
        self.view = memoryview(self.stage)
        self.lengths = [0] * slots

    def set_length(self, index: int, length: int) -> None:
        self.lengths[index] = length

    def send(self, count: int) -> list[int]:
        failed: list[int] = []
        send, view, slot, lengths = self.sock.send, self.view, self.slot, self.lengths
        for j in range(count):
            start = j * slot
            try:
                send(view[start:start + lengths[j]])
            except OSError as exc:
                failed.append(exc.errno or 0)
        return failed

    def receive(self) -> int:
        view, slot = self.view, self.slot
        for j in range(self.slots):
            try:
                self.lengths[j] = self.sock.recv_into(view[j * slot:(j + 1) * slot], 0, MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return j
        return self.slots

    def length(self, index: int) -> int:
        return self.lengths[index]


def open_batch(sock: socket.socket, slot: int, slots: int = SLOTS) -> MmsgBatch | LoopBatch:
    """The fastest batch this system offers for SOCK."""
    return MmsgBatch(sock, slot, slots) if available() else LoopBatch(sock, slot, slots)
