"""The lab's PKI for IKEv2 RSA-signature authentication: one CA per lab, a certificate per router.

Files under `STATE_DIR/pki/` (tmpfs, gone with the lab): `ca.crt` / `ca.key`, and `NAME.crt` /
`NAME.key` per router or client. The first daemon that needs the CA creates it (an exclusive lock
file keeps the three routers of a lab from making three CAs). Certificates carry the names a peer
may expect as identity: subject CN and subjectAltName IP addresses / DNS names.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import os
from collections.abc import Iterator
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from . import codec, iana

KEY_BITS = 2048


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_key(path: Path, key: Any) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "lab"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


def ensure_ca(directory: str | Path) -> tuple[x509.Certificate, Any]:
    root = Path(directory)
    with _locked(root):
        if not (root / "ca.crt").exists():
            key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
            now = datetime.datetime.now(datetime.UTC)
            cert = (x509.CertificateBuilder().subject_name(_name("lab FlexVPN CA")).issuer_name(_name("lab FlexVPN CA"))
                    .public_key(key.public_key()).serial_number(x509.random_serial_number())
                    .not_valid_before(now - datetime.timedelta(days=1))
                    .not_valid_after(now + datetime.timedelta(days=3650))
                    .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                    .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                   critical=True)
                    .sign(key, hashes.SHA256()))
            _write_key(root / "ca.key", key)
            (root / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return load_ca(root), serialization.load_pem_private_key((root / "ca.key").read_bytes(), None)


def load_ca(directory: str | Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate((Path(directory) / "ca.crt").read_bytes())


def issue(directory: str | Path, name: str, addresses: list[str] = (), dns: list[str] = ()  # type: ignore[assignment]
          ) -> tuple[x509.Certificate, Any]:
    """NAME's certificate and key (made once, then read back)."""
    root = Path(directory)
    ca, ca_key = ensure_ca(root)
    with _locked(root):
        cert_path, key_path = root / f"{name}.crt", root / f"{name}.key"
        if not cert_path.exists():
            key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
            now = datetime.datetime.now(datetime.UTC)
            alt: list[x509.GeneralName] = [x509.IPAddress(IPv4Address(a)) for a in addresses]
            alt += [x509.DNSName(d) for d in dns]
            builder = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca.subject)
                       .public_key(key.public_key()).serial_number(x509.random_serial_number())
                       .not_valid_before(now - datetime.timedelta(days=1))
                       .not_valid_after(now + datetime.timedelta(days=365)))
            if alt:
                builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
            cert = builder.sign(ca_key, hashes.SHA256())
            _write_key(key_path, key)
            cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        loaded = x509.load_pem_x509_certificate(cert_path.read_bytes())
        private: Any = serialization.load_pem_private_key(key_path.read_bytes(), None)
    return loaded, private


def der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def certreq_hash(ca: x509.Certificate) -> bytes:
    """CERTREQ data for X.509 signatures: SHA-1 of the CA's SubjectPublicKeyInfo (RFC 7296 3.7)."""
    spki = ca.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha1(spki).digest()


class PkiError(ValueError):
    pass


def verify(data: bytes, ca: x509.Certificate) -> x509.Certificate:
    """Parse a DER certificate and check it was issued by CA and is valid now; raise PkiError if not."""
    try:
        cert = x509.load_der_x509_certificate(data)
    except ValueError as exc:
        raise PkiError(f"unreadable certificate: {exc}") from None
    try:
        cert.verify_directly_issued_by(ca)
    except Exception as exc:  # noqa: BLE001 - any failure means: not issued by our CA
        raise PkiError(f"certificate not issued by the lab CA: {exc}") from None
    now = datetime.datetime.now(datetime.UTC)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise PkiError("certificate outside its validity period")
    return cert


def identities(cert: x509.Certificate) -> set[str]:
    """What a certificate vouches for: subject CN, SAN IP addresses and DNS names."""
    names = {a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME) if isinstance(a.value, str)}
    with contextlib.suppress(x509.ExtensionNotFound):
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names |= {str(ip) for ip in alt.get_values_for_type(x509.IPAddress)}
        names |= set(alt.get_values_for_type(x509.DNSName))
    return names


def subject_der(cert: x509.Certificate) -> bytes:
    return cert.subject.public_bytes()


def identity_matches(id_payload: codec.IdPayload, cert: x509.Certificate) -> bool:
    """Does the identity an initiator claims (IDi) name this certificate: its subject, or a name it carries?"""
    if id_payload.id_type == iana.ID_DER_ASN1_DN:
        return id_payload.data == subject_der(cert)
    if id_payload.id_type in (iana.ID_IPV4_ADDR, iana.ID_FQDN, iana.ID_RFC822_ADDR):
        return id_payload.text() in identities(cert)
    return False
