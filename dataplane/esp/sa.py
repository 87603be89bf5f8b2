"""One ESP security association in tunnel mode (RFC 4303), sealed and opened in user space.

Transforms: AES-GCM with a 16-byte ICV (RFC 4106: 4-byte salt from KEYMAT, 8-byte explicit IV, AAD =
SPI | sequence number) and AES-CBC with HMAC-SHA1-96 / HMAC-SHA2 (RFC 3602, RFC 4868: ICV over SPI,
sequence number, IV and ciphertext). 32-bit sequence numbers (no ESN: the gateway refuses ESN).

An outbound SA numbers its packets from 1 and refuses to wrap (RFC 4303 3.3.3: rekey before 2^32).
An inbound SA checks the replay window before and after the ICV and counts every drop by its cause.
"""

from __future__ import annotations

import hmac
import os
import struct
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .replay import ReplayWindow

ESP_HEADER = struct.Struct("!4sI")  # SPI, sequence number
NEXT_IPV4 = 4
SEQ_MAX = 0xFFFFFFFF
_HMAC = {  # integrity transform id (IANA IKEv2) -> (hash, ICV length)
    2: ("sha1", 12), 12: ("sha256", 16), 13: ("sha384", 24), 14: ("sha512", 32),
}
ENCR_AES_CBC, ENCR_AES_GCM_16 = 12, 20


class EspDrop(Exception):
    """A packet that is not delivered; `cause` names the counter it goes to."""

    def __init__(self, cause: str):
        super().__init__(cause)
        self.cause = cause


@dataclass
class Counters:
    packets: int = 0
    bytes: int = 0  # inner (cleartext) bytes
    auth_failures: int = 0
    replay_drops: int = 0
    malformed: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class EspSa:
    spi: bytes  # 4 bytes: chosen by the receiver of this direction
    encr: int  # ENCR_AES_GCM_16 or ENCR_AES_CBC
    encr_key: bytes  # for GCM the key followed by the 4-byte salt
    integ: int | None = None  # an HMAC transform id with CBC, None with GCM
    integ_key: bytes = b""
    replay_window: int = 1024
    seq: int = 0  # outbound: the last number sent
    counters: Counters = field(default_factory=Counters)

    def __post_init__(self) -> None:
        if len(self.spi) != 4 or self.spi == bytes(4):
            raise ValueError("an ESP SPI is four bytes and not zero")
        self.window = ReplayWindow(self.replay_window)
        if self.encr == ENCR_AES_GCM_16:
            self._gcm = AESGCM(self.encr_key[:-4])
            self._salt = self.encr_key[-4:]
            self.icv_len = 16
            self.block = 4
        elif self.encr == ENCR_AES_CBC:
            if self.integ not in _HMAC:
                raise ValueError("AES-CBC needs an HMAC integrity transform")
            self._hash, self.icv_len = _HMAC[self.integ]
            self._aes = algorithms.AES(self.encr_key)
            self.block = 16
        else:
            raise ValueError(f"ESP transform {self.encr} is not supported")

    # ------------------------------------------------------------------ outbound
    def seal(self, inner: bytes, next_header: int = NEXT_IPV4) -> bytes:
        """SPI | seq | IV | ciphertext (payload, padding, pad length, next header) | ICV."""
        if self.seq >= SEQ_MAX:
            raise EspDrop("sequence_exhausted")
        self.seq += 1
        head = ESP_HEADER.pack(self.spi, self.seq)
        pad_len = (-(len(inner) + 2)) % self.block
        plain = inner + bytes(range(1, pad_len + 1)) + bytes((pad_len, next_header))
        self.counters.packets += 1
        self.counters.bytes += len(inner)
        if self.encr == ENCR_AES_GCM_16:
            iv = os.urandom(8)
            return head + iv + self._gcm.encrypt(self._salt + iv, plain, head)
        iv = os.urandom(16)
        enc = Cipher(self._aes, modes.CBC(iv)).encryptor()
        body = head + iv + enc.update(plain) + enc.finalize()
        return body + hmac.new(self.integ_key, body, self._hash).digest()[:self.icv_len]

    # ------------------------------------------------------------------ inbound
    def open(self, packet: bytes) -> tuple[int, bytes]:
        """(next header, inner packet) of a packet received with this SA's SPI, or EspDrop."""
        iv_len = 8 if self.encr == ENCR_AES_GCM_16 else 16
        if len(packet) < ESP_HEADER.size + iv_len + self.block + self.icv_len:
            self.counters.malformed += 1
            raise EspDrop("malformed")
        spi, seq = ESP_HEADER.unpack_from(packet)
        if spi != self.spi:
            self.counters.malformed += 1
            raise EspDrop("malformed")
        if not self.window.check(seq):
            self.counters.replay_drops += 1
            raise EspDrop("replay")
        head, iv = packet[:8], packet[8:8 + iv_len]
        if self.encr == ENCR_AES_GCM_16:
            try:
                plain = self._gcm.decrypt(self._salt + iv, packet[8 + iv_len:], head)
            except InvalidTag:
                self.counters.auth_failures += 1
                raise EspDrop("auth") from None
        else:
            body, icv = packet[:-self.icv_len], packet[-self.icv_len:]
            want = hmac.new(self.integ_key, body, self._hash).digest()[:self.icv_len]
            if not hmac.compare_digest(want, icv):
                self.counters.auth_failures += 1
                raise EspDrop("auth")
            cipher = body[8 + iv_len:]
            if len(cipher) % 16:
                self.counters.malformed += 1
                raise EspDrop("malformed")
            dec = Cipher(self._aes, modes.CBC(iv)).decryptor()
            plain = dec.update(cipher) + dec.finalize()
        pad_len, next_header = plain[-2], plain[-1]
        if pad_len + 2 > len(plain):
            self.counters.malformed += 1
            raise EspDrop("malformed")
        self.window.accept(seq)  # only now: a verified packet moves the window
        inner = plain[:len(plain) - 2 - pad_len]
        self.counters.packets += 1
        self.counters.bytes += len(inner)
        return next_header, inner
