"""The FlexVPN gateway's IKE SAs as it publishes them, and as IOS's `show crypto ikev2 sa` prints them."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from labkit.flexstatus import FlexClientSa, GatewaySa

from . import iana
from .sa import IkeSa


def auth_name(method: int) -> str:
    return {iana.AUTH_PSK: "PSK", iana.AUTH_RSA_SIG: "RSA", iana.AUTH_DIGITAL_SIGNATURE: "RSA"}.get(method, "-")


def status(sas: Iterable[IkeSa], now: float, wall: float, limit: int = 200) -> list[dict[str, object]]:
    """The SAs as the gateway publishes them (its status file), at most LIMIT; NOW is the clock the SAs
    were created by, WALL the wall-clock time now."""
    out = []
    for index, sa in enumerate(itertools.islice(sas, limit), 1):
        child = sa.child
        out.append({
            "id": index, "local": f"{sa.local[0]}/{sa.local[1]}", "remote": f"{sa.peer[0]}/{sa.peer[1]}",
            "state": {"established": "READY", "half-open": "IN-NEG", "redirected": "REDIRECTED"}.get(
                sa.state, sa.state.upper()),
            "spi_i": sa.spi_i.hex(), "spi_r": sa.spi_r.hex(), "suite": sa.suite.name(),
            "encr": f"AES-{'GCM' if sa.suite.aead else 'CBC'}", "keysize": sa.suite.key_bits,
            "dh": sa.suite.dh, "peer_id": sa.peer_id, "auth_verify": auth_name(sa.auth_method),
            "auth_sign": auth_name(sa.local_auth), "address": sa.address,
            "redirected_from": sa.redirected_from, "redirected_to": sa.redirected_to,
            "active_s": round(now - sa.created, 1), "created_at": wall - (now - sa.created),
            "child": None if child is None else {
                "spi_in": child.spi_in.hex(), "spi_out": child.spi_out.hex(), "suite": child.suite.name(),
                "ts_i": [f"{t.start}-{t.end}" for t in child.ts_i],
                "ts_r": [f"{t.start}-{t.end}" for t in child.ts_r], "installed": child.installed,
            },
        })
    return out


def show_sa(sas: Sequence[GatewaySa | FlexClientSa]) -> str:
    """`show crypto ikev2 sa` in IOS layout (a gateway's SAs, or a FlexVPN client's)."""
    lines = [" IPv4 Crypto IKEv2  SA ", "",
             f"{'Tunnel-id':<10}{'Local':<22}{'Remote':<22}{'fvrf/ivrf':<21}Status "]
    for sa in sas:
        lines.append(f"{sa.id:<10}{sa.local:<22}{sa.remote:<22}{'none/none':<21}{sa.state} ")
        lines.append(f"      Encr: {sa.encr}, keysize: {sa.keysize}, DH Grp:{sa.dh}, "
                     f"Auth sign: {sa.auth_sign}, Auth verify: {sa.auth_verify}")
        lines.append(f"      Life/Active Time: 86400/{int(sa.active_s)} sec")
        if sa.address:
            lines.append(f"      Assigned host addr: {sa.address}")
        if sa.redirected_from:
            lines.append(f"      Redirected from: {sa.redirected_from}")
        if sa.redirected_to:
            lines.append(f"      Redirected to: {sa.redirected_to}")
        lines.append("")
    return "\n".join(lines) + "\n"
