"""IOS `show` output of a running FlexVPN router straight from its daemon's status files, without the
SSH server: `show standby`, `show crypto ikev2 cluster`, `show crypto ikev2 sa`, `show crypto session`.

    python -m lab_orchestrator.cli_ssh.flexshow LAB NODE standby | crypto ikev2 cluster | crypto ikev2 sa
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from labkit.contracts import HSRP_STATUS, IKEV2_STATUS
from labkit.flexstatus import GatewayStatus, HsrpStatus, Ikev2Status, read_ikev2
from labkit.status import read_status

from ..runtime.state import state_dir


def hsrp_status(state: str | Path, node: str) -> HsrpStatus | None:
    """NODE's HSRP groups (None: no status written yet, or not a router with HSRP)."""
    return read_status(Path(state) / "nodes" / node / HSRP_STATUS, HsrpStatus)


def ikev2_status(state: str | Path, node: str) -> Ikev2Status | None:
    """NODE's IKEv2 status: a gateway's (cluster, SAs) or a FlexVPN client's."""
    return read_ikev2(Path(state) / "nodes" / node / IKEV2_STATUS)


def show(state: str | Path, node: str, command: str, now: float | None = None) -> str:
    """IOS `show` output of NODE of the lab whose state folder is STATE."""
    from dataplane.core import clb, flexclient, hsrp
    from dataplane.ikev2.showsa import show_sa

    now = time.time() if now is None else now
    words = command.split()
    if words[:2] == ["show", "standby"] or words == ["standby"]:
        groups = hsrp_status(state, node)
        return "" if groups is None or not groups.groups else hsrp.show_standby(groups.groups, now)
    if words[-3:] == ["crypto", "ikev2", "cluster"] or words[-2:] == ["ikev2", "cluster"]:
        status = ikev2_status(state, node)
        return clb.show_cluster(status.cluster if isinstance(status, GatewayStatus) else None, now)
    if words[-3:] == ["crypto", "ikev2", "sa"] or words[-2:] == ["ikev2", "sa"]:
        status = ikev2_status(state, node)
        return show_sa([] if status is None else status.sas)
    if words[-2:] == ["crypto", "session"]:
        status = ikev2_status(state, node)
        return flexclient.show_session(status)
    raise ValueError(f"unknown command '{command}' (show standby | show crypto ikev2 cluster | "
                     f"show crypto ikev2 sa | show crypto session)")


def main(argv: list[str]) -> int:
    """`python -m lab_orchestrator.cli_ssh.flexshow LAB NODE standby|crypto ikev2 cluster|crypto ikev2 sa`."""
    if len(argv) < 4:
        print(main.__doc__, file=sys.stderr)
        return 2
    try:
        print(show(state_dir(argv[1]), argv[2], "show " + " ".join(argv[3:])), end="")
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
