"""IKEv2 cryptography: transforms, Diffie-Hellman, key derivation, SK payload protection, AUTH.

Through the `cryptography` package (OpenSSL) and the standard library's hmac/hashlib. What is
supported (both as responder and initiator):

    ENCR   AES-CBC (128/192/256), AES-GCM with a 16-octet ICV (128/256)
    PRF    HMAC-SHA1, HMAC-SHA2-256/384/512
    INTEG  HMAC-SHA1-96, HMAC-SHA2-256-128/384-192/512-256
    DH     14 (MODP 2048), 19 (ECP 256), 20 (ECP 384), 31 (Curve25519)
    AUTH   shared key (2), RSA PKCS#1 v1.5 SHA-1 (1), digital signature (14) with RSA PKCS#1 v1.5
           SHA2-256/384/512
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from dataclasses import dataclass
from typing import Any

from . import codec, iana
from .codec import IkeError

_HASHES = {
    iana.PRF_HMAC_SHA1: "sha1", iana.PRF_HMAC_SHA2_256: "sha256",
    iana.PRF_HMAC_SHA2_384: "sha384", iana.PRF_HMAC_SHA2_512: "sha512",
}
_INTEG = {  # id -> (hash, key length, ICV length)
    iana.AUTH_HMAC_SHA1_96: ("sha1", 20, 12), iana.AUTH_HMAC_SHA2_256_128: ("sha256", 32, 16),
    iana.AUTH_HMAC_SHA2_384_192: ("sha384", 48, 24), iana.AUTH_HMAC_SHA2_512_256: ("sha512", 64, 32),
}
_ENCR_KEYS = {iana.ENCR_AES_CBC: (128, 192, 256), iana.ENCR_AES_GCM_16: (128, 256)}
DH_GROUPS = (19, 14, 20, 31)  # preference order when we choose
MODP_2048_P = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
    "15728E5A8AACAA68FFFFFFFFFFFFFFFF", 16)
KEY_PAD = b"Key Pad for IKEv2"


# ------------------------------------------------------------------------------------------ suites
@dataclass(frozen=True)
class Suite:
    """A negotiated IKE or ESP transform set."""

    encr: int
    key_bits: int
    prf: int | None  # IKE only
    integ: int | None  # None with AEAD (GCM)
    dh: int | None  # IKE only

    @property
    def aead(self) -> bool:
        return self.encr == iana.ENCR_AES_GCM_16

    @property
    def encr_key_len(self) -> int:
        return self.key_bits // 8 + (4 if self.aead else 0)

    @property
    def integ_key_len(self) -> int:
        return 0 if self.integ is None else _INTEG[self.integ][1]

    @property
    def icv_len(self) -> int:
        return 16 if self.aead else (_INTEG[self.integ][2] if self.integ else 0)

    @property
    def prf_len(self) -> int:
        return hashlib.new(_HASHES[self.prf or iana.PRF_HMAC_SHA2_256]).digest_size

    def transforms(self) -> tuple[codec.Transform, ...]:
        out = [codec.Transform(iana.T_ENCR, self.encr, self.key_bits)]
        if self.prf is not None:
            out.append(codec.Transform(iana.T_PRF, self.prf))
        if self.integ is not None:
            out.append(codec.Transform(iana.T_INTEG, self.integ))
        if self.dh is not None:
            out.append(codec.Transform(iana.T_DH, self.dh))
        else:
            out.append(codec.Transform(iana.T_ESN, 0))
        return tuple(out)

    def name(self) -> str:
        encr = f"AES-{'GCM' if self.aead else 'CBC'}-{self.key_bits}"
        parts = [encr]
        if self.prf is not None:
            parts.append(f"PRF-HMAC-{_HASHES[self.prf].upper()}")
        if self.integ is not None:
            parts.append(f"HMAC-{_INTEG[self.integ][0].upper()}")
        if self.dh is not None:
            parts.append(f"DH-{self.dh}")
        return "/".join(parts)


def _supported(t: codec.Transform) -> bool:
    if t.type == iana.T_ENCR:
        return t.id in _ENCR_KEYS and t.key_length in _ENCR_KEYS[t.id]
    if t.type == iana.T_PRF:
        return t.id in _HASHES
    if t.type == iana.T_INTEG:
        return t.id in _INTEG
    if t.type == iana.T_DH:
        return t.id in DH_GROUPS
    if t.type == iana.T_ESN:
        return t.id == 0
    return False


def select_ike(proposals: tuple[codec.Proposal, ...], ke_group: int | None,
               allowed_groups: tuple[int, ...] = DH_GROUPS) -> tuple[codec.Proposal, Suite] | tuple[None, int | None]:
    """The first acceptable IKE proposal. Returns (proposal, suite), or (None, group) when a proposal
    is acceptable only with another DH group than KE_GROUP (INVALID_KE_PAYLOAD), or (None, None)."""
    other_group = None
    for prop in proposals:
        if prop.protocol != iana.PROTO_IKE:
            continue
        encr = [t for t in prop.of_type(iana.T_ENCR) if _supported(t)]
        prf = [t for t in prop.of_type(iana.T_PRF) if _supported(t)]
        integ = [t for t in prop.of_type(iana.T_INTEG) if _supported(t)]
        dh = [t for t in prop.of_type(iana.T_DH) if t.id in allowed_groups]
        if not encr or not prf or not dh:
            continue
        chosen_encr = encr[0]
        aead = chosen_encr.id == iana.ENCR_AES_GCM_16
        if not aead and not integ:
            continue
        if ke_group is None or ke_group not in {t.id for t in dh}:
            if other_group is None:
                other_group = dh[0].id
            continue
        suite = Suite(chosen_encr.id, chosen_encr.key_length or 128, prf[0].id,
                      None if aead else integ[0].id, ke_group)
        return codec.Proposal(prop.number, iana.PROTO_IKE, b"", suite.transforms()), suite
    return None, other_group


def select_esp(proposals: tuple[codec.Proposal, ...], spi: bytes) -> tuple[codec.Proposal, Suite, bytes] | None:
    """The first acceptable ESP proposal (no PFS): (our answer with SPI, suite, the peer's SPI)."""
    for prop in proposals:
        if prop.protocol != iana.PROTO_ESP or len(prop.spi) != 4:
            continue
        encr = [t for t in prop.of_type(iana.T_ENCR) if _supported(t)]
        integ = [t for t in prop.of_type(iana.T_INTEG) if _supported(t)]
        esn = [t for t in prop.of_type(iana.T_ESN) if t.id == 0]
        if prop.of_type(iana.T_DH) and not any(t.id == 0 for t in prop.of_type(iana.T_DH)):
            continue  # PFS asked for: not in IKE_AUTH
        if not encr or (prop.of_type(iana.T_ESN) and not esn):
            continue
        aead = encr[0].id == iana.ENCR_AES_GCM_16
        if not aead and not integ:
            continue
        suite = Suite(encr[0].id, encr[0].key_length or 128, None, None if aead else integ[0].id, None)
        return codec.Proposal(prop.number, iana.PROTO_ESP, spi, suite.transforms()), suite, prop.spi
    return None


def ike_proposal(suite: Suite, number: int = 1, spi: bytes = b"") -> codec.Proposal:
    return codec.Proposal(number, iana.PROTO_IKE, spi, suite.transforms())


def esp_proposal(suite: Suite, spi: bytes, number: int = 1) -> codec.Proposal:
    return codec.Proposal(number, iana.PROTO_ESP, spi, suite.transforms())


# ------------------------------------------------------------------------------------------ DH
_MODP: Any = None


def _modp_parameters() -> Any:
    global _MODP
    if _MODP is None:
        from cryptography.hazmat.primitives.asymmetric import dh

        _MODP = dh.DHParameterNumbers(MODP_2048_P, 2).parameters()
    return _MODP


class Dh:
    """One side of a key exchange in GROUP: `public` to send, `shared(peer)` when the peer's arrives."""

    def __init__(self, group: int):
        self.group = group
        self._key: Any = None
        if group == 14:
            self._key = _modp_parameters().generate_private_key()
            self.public = self._key.public_key().public_numbers().y.to_bytes(256, "big")
        elif group in (19, 20):
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

            curve = ec.SECP256R1() if group == 19 else ec.SECP384R1()
            self._key = ec.generate_private_key(curve)
            point = self._key.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
            self.public = point[1:]  # RFC 5903: x | y, no point format octet
        elif group == 31:
            from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
            from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

            self._key = X25519PrivateKey.generate()
            self.public = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        else:
            raise IkeError(f"DH group {group} not supported")

    def shared(self, peer: bytes) -> bytes:
        """g^ir; raises IkeError for an invalid public value."""
        if self.group == 14:
            if len(peer) != 256:
                raise IkeError("MODP 2048 public value of the wrong length")
            y = int.from_bytes(peer, "big")
            if not 1 < y < MODP_2048_P - 1:
                raise IkeError("MODP 2048 public value out of range")
            from cryptography.hazmat.primitives.asymmetric import dh

            try:
                peer_key = dh.DHPublicNumbers(y, _modp_parameters().parameter_numbers()).public_key()
                return bytes(self._key.exchange(peer_key)).rjust(256, b"\0")
            except ValueError as exc:
                raise IkeError(f"invalid DH public value: {exc}") from None
        try:
            if self.group in (19, 20):
                from cryptography.hazmat.primitives.asymmetric import ec

                size = 32 if self.group == 19 else 48
                if len(peer) != 2 * size:
                    raise IkeError("ECP public value of the wrong length")
                curve = ec.SECP256R1() if self.group == 19 else ec.SECP384R1()
                public = ec.EllipticCurvePublicKey.from_encoded_point(curve, b"\x04" + peer)
                return bytes(self._key.exchange(ec.ECDH(), public))
            from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

            if len(peer) != 32:
                raise IkeError("Curve25519 public value of the wrong length")
            return bytes(self._key.exchange(X25519PublicKey.from_public_bytes(peer)))
        except ValueError as exc:
            raise IkeError(f"invalid DH public value: {exc}") from None


class MalformedInner(IkeError):
    """The SK payload passed its integrity check but its inner payloads do not parse."""


# ------------------------------------------------------------------------------------------ PRF
def prf(alg: int, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, _HASHES[alg]).digest()


def prf_plus(alg: int, key: bytes, seed: bytes, length: int) -> bytes:
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = prf(alg, key, block + seed + bytes([counter]))
        out += block
        counter += 1
        if counter > 255:
            raise IkeError("prf+ asked for too much keying material")
    return out[:length]


@dataclass(frozen=True)
class IkeKeys:
    sk_d: bytes
    sk_ai: bytes
    sk_ar: bytes
    sk_ei: bytes
    sk_er: bytes
    sk_pi: bytes
    sk_pr: bytes


def derive_ike_keys(suite: Suite, shared: bytes, nonce_i: bytes, nonce_r: bytes, spi_i: bytes,
                    spi_r: bytes) -> IkeKeys:
    assert suite.prf is not None
    skeyseed = prf(suite.prf, nonce_i + nonce_r, shared)
    p, a, e = suite.prf_len, suite.integ_key_len, suite.encr_key_len
    material = prf_plus(suite.prf, skeyseed, nonce_i + nonce_r + spi_i + spi_r, 3 * p + 2 * a + 2 * e)
    cuts, pos = [], 0
    for size in (p, a, a, e, e, p, p):
        cuts.append(material[pos:pos + size])
        pos += size
    return IkeKeys(*cuts)


@dataclass(frozen=True)
class ChildKeys:
    encr_i: bytes
    integ_i: bytes
    encr_r: bytes
    integ_r: bytes


def derive_child_keys(ike_prf: int, sk_d: bytes, suite: Suite, nonce_i: bytes, nonce_r: bytes) -> ChildKeys:
    """KEYMAT = prf+(SK_d, Ni | Nr): initiator-to-responder keys first (RFC 7296 2.17)."""
    e, a = suite.encr_key_len, suite.integ_key_len
    material = prf_plus(ike_prf, sk_d, nonce_i + nonce_r, 2 * (e + a))
    return ChildKeys(material[:e], material[e:e + a], material[e + a:2 * e + a], material[2 * e + a:])


# ------------------------------------------------------------------------------------------ SK
def _cbc(key: bytes, iv: bytes, data: bytes, encrypt: bool) -> bytes:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    cipher = Cipher(algorithms.AES(key), modes.CBC(iv))
    ctx = cipher.encryptor() if encrypt else cipher.decryptor()
    return bytes(ctx.update(data) + ctx.finalize())


def seal(header: codec.Header, inner: list[codec.Payload], suite: Suite, keys: IkeKeys, from_initiator: bool
         ) -> bytes:
    """The whole protected message: HEADER then SK{INNER} (IV, ciphertext, ICV)."""
    first, body = codec.encode_payloads(inner)
    enc_key = keys.sk_ei if from_initiator else keys.sk_er
    if suite.aead:
        iv = os.urandom(8)
        plaintext = body + b"\0"
        sk_len = codec.GENERIC.size + 8 + len(plaintext) + 16
        head = codec.HEADER.pack(header.spi_i, header.spi_r, iana.SK, header.version, header.exchange,
                                 header.flags, header.message_id, codec.HEADER.size + sk_len)
        aad = head + codec.GENERIC.pack(first, 0, sk_len)
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        return aad + iv + AESGCM(enc_key[:-4]).encrypt(enc_key[-4:] + iv, plaintext, aad)
    integ_key = keys.sk_ai if from_initiator else keys.sk_ar
    pad = (-(len(body) + 1)) % 16
    plaintext = body + b"\0" * pad + bytes([pad])
    iv = os.urandom(16)
    ciphertext = _cbc(enc_key, iv, plaintext, True)
    sk_len = codec.GENERIC.size + 16 + len(ciphertext) + suite.icv_len
    head = codec.HEADER.pack(header.spi_i, header.spi_r, iana.SK, header.version, header.exchange, header.flags,
                             header.message_id, codec.HEADER.size + sk_len)
    data = head + codec.GENERIC.pack(first, 0, sk_len) + iv + ciphertext
    assert suite.integ is not None
    return data + hmac.new(integ_key, data, _INTEG[suite.integ][0]).digest()[:suite.icv_len]


def open_sk(raw: bytes, message: codec.Message, suite: Suite, keys: IkeKeys, from_initiator: bool
            ) -> list[codec.Payload]:
    """Check and decrypt the SK payload of MESSAGE (RAW: the bytes as received); the inner payloads."""
    sk = message.payloads[-1] if message.payloads else None
    if not isinstance(sk, codec.SkPayload):
        raise IkeError("no encrypted payload")
    start = len(raw) - len(sk.data)
    enc_key = keys.sk_ei if from_initiator else keys.sk_er
    if suite.aead:
        if len(sk.data) < 8 + 16 + 1:
            raise IkeError("encrypted payload too short")
        iv, sealed = sk.data[:8], sk.data[8:]
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            plaintext = AESGCM(enc_key[:-4]).decrypt(enc_key[-4:] + iv, sealed, raw[:start])
        except InvalidTag:
            raise IkeError("integrity check failed (GCM tag)") from None
    else:
        icv_len = suite.icv_len
        if len(sk.data) < 16 + 16 + icv_len:
            raise IkeError("encrypted payload too short")
        integ_key = keys.sk_ai if from_initiator else keys.sk_ar
        assert suite.integ is not None
        expected = hmac.new(integ_key, raw[:-icv_len], _INTEG[suite.integ][0]).digest()[:icv_len]
        if not hmac.compare_digest(expected, raw[-icv_len:]):
            raise IkeError("integrity check failed")
        iv, ciphertext = sk.data[:16], sk.data[16:-icv_len]
        if len(ciphertext) % 16:
            raise IkeError("ciphertext is not a whole number of blocks")
        plaintext = _cbc(enc_key, iv, ciphertext, False)
    pad = plaintext[-1]
    if pad + 1 > len(plaintext):
        raise IkeError("bad padding length")
    try:
        return codec.decode_payloads(sk.first, plaintext[:-(pad + 1)])
    except IkeError as exc:
        raise MalformedInner(f"protected payloads: {exc}") from None


# ------------------------------------------------------------------------------------------ AUTH
def signed_octets(real_message: bytes, peer_nonce: bytes, suite: Suite, sk_p: bytes, id_body: bytes) -> bytes:
    """<SignedOctets> = RealMessage | NonceData(of the peer) | prf(SK_p, RestOfIDPayload)."""
    assert suite.prf is not None
    return real_message + peer_nonce + prf(suite.prf, sk_p, id_body)


def psk_auth(suite: Suite, psk: bytes, octets: bytes) -> bytes:
    assert suite.prf is not None
    return prf(suite.prf, prf(suite.prf, psk, KEY_PAD), octets)


class SignedPrefix:
    """The peer's first message absorbed into running hashes: enough to check its AUTH later
    (<SignedOctets> starts with that message) without keeping the message itself. The PSK check
    keeps one keyed PRF state; with certificates, one hash state per RSA signature hash."""

    def __init__(self, suite: Suite, psk: bytes, message: bytes, signatures: bool):
        assert suite.prf is not None
        self._psk = hmac.new(prf(suite.prf, psk, KEY_PAD), message, _HASHES[suite.prf])
        self._hashes = {name: hashlib.new(name, message) for name in ("sha1", *SIG_ALGS)} if signatures else {}

    def psk_auth(self, tail: bytes) -> bytes:
        """prf(prf(PSK, "Key Pad for IKEv2"), message | TAIL)."""
        state = self._psk.copy()
        state.update(tail)
        return state.digest()

    def rsa_verify(self, public_key: Any, method: int, data: bytes, tail: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils

        parsed = _signature(method, data)
        if parsed is None or not isinstance(public_key, rsa.RSAPublicKey) or parsed[0] not in self._hashes:
            return False
        hash_name, signature = parsed
        state = self._hashes[hash_name].copy()
        state.update(tail)
        try:
            public_key.verify(signature, state.digest(), padding.PKCS1v15(), utils.Prehashed(_hash(hash_name)))
        except InvalidSignature:
            return False
        return True


def signed_tail(peer_nonce: bytes, suite: Suite, sk_p: bytes, id_body: bytes) -> bytes:
    """What follows RealMessage in <SignedOctets>."""
    assert suite.prf is not None
    return peer_nonce + prf(suite.prf, sk_p, id_body)


# DER AlgorithmIdentifiers for RFC 7427 digital signatures (RSA PKCS#1 v1.5)
SIG_ALGS = {
    "sha256": bytes.fromhex("300d06092a864886f70d01010b0500"),
    "sha384": bytes.fromhex("300d06092a864886f70d01010c0500"),
    "sha512": bytes.fromhex("300d06092a864886f70d01010d0500"),
}
HASH_IDS = {"sha256": 2, "sha384": 3, "sha512": 4}  # SIGNATURE_HASH_ALGORITHMS values (RFC 7427)


def _hash(name: str) -> Any:
    from cryptography.hazmat.primitives import hashes

    return {"sha1": hashes.SHA1(), "sha256": hashes.SHA256(), "sha384": hashes.SHA384(),
            "sha512": hashes.SHA512()}[name]


def rsa_sign(private_key: Any, octets: bytes, method: int, hash_name: str = "sha256") -> bytes:
    from cryptography.hazmat.primitives.asymmetric import padding

    if method == iana.AUTH_RSA_SIG:
        return bytes(private_key.sign(octets, padding.PKCS1v15(), _hash("sha1")))
    signature = private_key.sign(octets, padding.PKCS1v15(), _hash(hash_name))
    alg = SIG_ALGS[hash_name]
    return bytes([len(alg)]) + alg + bytes(signature)


def rsa_verify(public_key: Any, octets: bytes, method: int, data: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    parsed = _signature(method, data)
    if parsed is None or not isinstance(public_key, rsa.RSAPublicKey):
        return False
    hash_name, signature = parsed
    try:
        public_key.verify(signature, octets, padding.PKCS1v15(), _hash(hash_name))
    except InvalidSignature:
        return False
    return True


def hash_algorithms_notify() -> codec.NotifyPayload:
    return codec.NotifyPayload(iana.SIGNATURE_HASH_ALGORITHMS, b"".join(struct.pack("!H", v)
                                                                        for v in HASH_IDS.values()))


def parse_hash_algorithms(data: bytes) -> set[int]:
    return {struct.unpack_from("!H", data, i)[0] for i in range(0, len(data) - 1, 2)}


def nat_hash(spi_i: bytes, spi_r: bytes, address: str, port: int) -> bytes:
    from ipaddress import IPv4Address

    return hashlib.sha1(spi_i + spi_r + IPv4Address(address).packed + struct.pack("!H", port)).digest()


def _signature(method: int, data: bytes) -> tuple[str, bytes] | None:
    """(hash name, raw signature) of an AUTH payload's data, None when not understood."""
    if method == iana.AUTH_RSA_SIG:
        return "sha1", data
    if method == iana.AUTH_DIGITAL_SIGNATURE and data:
        alg, signature = data[1:1 + data[0]], data[1 + data[0]:]
        names = [name for name, der in SIG_ALGS.items() if der == alg]
        if names:
            return names[0], signature
    return None
