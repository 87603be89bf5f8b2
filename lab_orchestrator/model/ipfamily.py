"""The traffic families a lab can carry, by number: IPv4 (4), IPv6 (6) and NAT64 (64: IPv6 clients
reaching an IPv4 server through the SRXs' translator), and the `--family` choices that name them."""

from __future__ import annotations

from .diagnostics import BadInput

NAT64 = 64
SPECS = ("4", "6", "64", "both", "all")  # "both": IPv4 and IPv6; "all": every family of the lab


def name(family: int) -> str:
    """"IPv4", "IPv6" or "NAT64"."""
    return "NAT64" if family == NAT64 else f"IPv{family}"


def check_spec(spec: str | None) -> None:
    """A `--family` value (None: the default, every family of the lab); BadInput otherwise."""
    if spec is not None and spec not in SPECS:
        raise BadInput(f"--family {spec}: give {', '.join(SPECS[:-1])} or {SPECS[-1]}")
