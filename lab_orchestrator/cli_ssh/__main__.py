"""`python -m lab_orchestrator.cli_ssh STATE_DIR/ssh/sshd.json`: the lab-wide SSH server.

Start-up order matters for `lab up` followed at once by `ssh`: leave the node namespace, bind every
listener (cheap imports only: a client connecting now waits in the listen backlog), then load
paramiko, make the host keys and serve.
"""

from __future__ import annotations

import logging
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m lab_orchestrator.cli_ssh STATE_DIR/ssh/sshd.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from .listeners import Listeners, leave_node_namespace

    leave_node_namespace()  # first, before any thread exists: threads inherit the namespace
    from ..plan.sshconfig import load

    config = load(argv[1])
    from pathlib import Path

    (Path(config.state_dir) / "ssh" / "ready").unlink(missing_ok=True)  # a restarted server: not ready yet
    listeners = Listeners(config)
    listeners.open_all()
    # paramiko logs a traceback for every client that leaves early (port probes, resets); the server
    # logs one line per connection that ends with an error instead.
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    from .server import serve

    return serve(config, listeners)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
