"""CHILD_SA rekeying on the responder (RFC 7296 section 1.3.3), without PFS (pure).

A CREATE_CHILD_SA request that carries N(REKEY_SA) naming our CHILD_SA (by the SPI the initiator
receives with, our outbound SPI), an SA payload, a nonce and no KE gets a new CHILD_SA: our new SPI,
the first acceptable proposal and KEYMAT = prf+(SK_d, Ni | Nr) with the new nonces. Anything else is
refused: a second CHILD_SA or an IKE SA rekey with NO_ADDITIONAL_SAS, PFS (a KE) with
NO_PROPOSAL_CHOSEN. The gateway keeps the old SA until the initiator deletes it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import codec, crypto

NONCE_MIN, NONCE_MAX = 16, 256  # RFC 7296 section 3.9


@dataclass(frozen=True)
class Rekeyed:
    proposal: codec.Proposal  # our answer (with our new SPI)
    spi: bytes  # ours: the initiator sends with it
    peer_spi: bytes
    suite: crypto.Suite
    keys: crypto.ChildKeys
    nonce_r: bytes


def respond(inner: list[codec.Payload], old_spi_out: bytes | None, prf: int, sk_d: bytes) -> Rekeyed | int:
    """The new CHILD_SA for a rekey request's payloads, or the notify type that refuses it."""
    rekey = next((p for p in inner if isinstance(p, codec.NotifyPayload) and p.type == codec.REKEY_SA), None)
    proposals = next((p for p in inner if isinstance(p, codec.SaPayload)), None)
    nonce = next((p for p in inner if isinstance(p, codec.NoncePayload)), None)
    if rekey is None or old_spi_out is None or rekey.protocol != codec.PROTO_ESP or rekey.spi != old_spi_out \
            or proposals is None or nonce is None or not NONCE_MIN <= len(nonce.data) <= NONCE_MAX:
        return codec.NO_ADDITIONAL_SAS
    spi = os.urandom(4)
    chosen = crypto.select_esp(proposals.proposals, spi)
    if chosen is None or any(isinstance(p, codec.KePayload) for p in inner):
        return codec.NO_PROPOSAL_CHOSEN
    proposal, suite, peer_spi = chosen
    nonce_r = os.urandom(32)
    return Rekeyed(proposal, spi, peer_spi, suite, crypto.derive_child_keys(prf, sk_d, suite, nonce.data, nonce_r),
                   nonce_r)
