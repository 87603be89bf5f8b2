"""UDP encapsulation of ESP (RFC 3948): what a datagram on UDP 4500 carries.

- one byte 0xFF: a NAT-keepalive;
- four zero bytes first (the non-ESP marker): an IKE message follows;
- otherwise an ESP packet whose first four bytes are its (non-zero) SPI.
"""

from __future__ import annotations

NON_ESP_MARKER = bytes(4)
KEEPALIVE = b"\xff"
ESP_MIN = 8 + 8 + 16  # SPI, sequence number, the smallest IV and ICV


def classify(datagram: bytes) -> str:
    """'ike', 'esp', 'keepalive' or 'junk'."""
    if datagram == KEEPALIVE:
        return "keepalive"
    if datagram[:4] == NON_ESP_MARKER:
        return "ike" if len(datagram) > 4 else "junk"
    return "esp" if len(datagram) >= ESP_MIN else "junk"
