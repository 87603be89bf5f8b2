"""CREATE_CHILD_SA on the responder (RFC 7296 sections 1.3.1 and 1.3.3), without PFS (pure).

One CHILD_SA per IKE SA, renewed two ways:

* a rekey: N(REKEY_SA) naming our CHILD_SA (by the SPI the initiator receives with, our outbound
  SPI): a new SA with the same traffic selectors; the gateway keeps the old one until the
  initiator deletes it;
* a new CHILD_SA while the IKE SA has none (the initiator deleted or let expire the previous one,
  as strongSwan with kernel-libipsec does when its lifetime runs out): traffic selectors as in
  IKE_AUTH, the initiator's narrowed to the address the IKE SA was given.

Keys: KEYMAT = prf+(SK_d, Ni | Nr) with the new nonces. Refused: a second CHILD_SA beside the current
one or an IKE SA rekey (NO_ADDITIONAL_SAS), PFS (a KE: NO_PROPOSAL_CHOSEN), no traffic selectors
(TS_UNACCEPTABLE).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import codec, crypto, iana

NONCE_MIN, NONCE_MAX = 16, 256  # RFC 7296 section 3.9
Selectors = tuple[codec.TrafficSelector, ...]


@dataclass(frozen=True)
class Child:
    proposal: codec.Proposal  # our answer (with our new SPI)
    spi: bytes  # ours: the initiator sends with it
    peer_spi: bytes
    suite: crypto.Suite
    keys: crypto.ChildKeys
    nonce_r: bytes
    ts_i: Selectors
    ts_r: Selectors
    rekey: bool  # replaces the current CHILD_SA (else: the IKE SA had none)


def respond(inner: list[codec.Payload], current: tuple[bytes, Selectors, Selectors] | None, address: str | None,
            prf: int, sk_d: bytes) -> Child | int:
    """The new CHILD_SA for a request's payloads, or the notify type that refuses it. CURRENT: the
    IKE SA's CHILD_SA as (our outbound SPI, TSi, TSr), None when it has none."""
    rekey = next((p for p in inner if isinstance(p, codec.NotifyPayload) and p.type == iana.REKEY_SA), None)
    proposals = next((p for p in inner if isinstance(p, codec.SaPayload)), None)
    nonce = next((p for p in inner if isinstance(p, codec.NoncePayload)), None)
    ts_i = next((p for p in inner if isinstance(p, codec.TsPayload) and p.initiator), None)
    ts_r = next((p for p in inner if isinstance(p, codec.TsPayload) and not p.initiator), None)
    if (rekey is None) != (current is None) or proposals is None or nonce is None \
            or not NONCE_MIN <= len(nonce.data) <= NONCE_MAX:
        return iana.NO_ADDITIONAL_SAS
    if rekey is not None and (current is None or rekey.protocol != iana.PROTO_ESP or rekey.spi != current[0]):
        return iana.NO_ADDITIONAL_SAS
    if current is not None:
        selectors_i, selectors_r = current[1], current[2]
    elif ts_i is None or ts_r is None or not ts_i.selectors or not ts_r.selectors:
        return iana.TS_UNACCEPTABLE
    else:
        first = ts_i.selectors[0]
        selectors_i = ((codec.TrafficSelector(address, address, first.protocol, first.start_port, first.end_port),)
                       if address is not None else ts_i.selectors)
        selectors_r = ts_r.selectors
    spi = os.urandom(4)
    chosen = crypto.select_esp(proposals.proposals, spi)
    if chosen is None or any(isinstance(p, codec.KePayload) for p in inner):
        return iana.NO_PROPOSAL_CHOSEN
    proposal, suite, peer_spi = chosen
    nonce_r = os.urandom(32)
    keys = crypto.derive_child_keys(prf, sk_d, suite, nonce.data, nonce_r)
    return Child(proposal, spi, peer_spi, suite, keys, nonce_r, selectors_i, selectors_r, rekey is not None)
