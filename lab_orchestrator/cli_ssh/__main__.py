"""`python -m lab_orchestrator.cli_ssh STATE_DIR/ssh/sshd.json`: the lab-wide SSH server.

Start-up order matters for `lab up` followed at once by `ssh`: leave the node namespace, bind every
listener (cheap imports only: a client connecting now waits in the listen backlog), make the host
keys, known_hosts and the users' keys, say so (ssh/ready, what `lab up` waits for), then load
paramiko and serve.
"""

from __future__ import annotations

import contextlib
import logging
import os
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

    ready = Path(config.state_dir) / "ssh" / "ready"
    ready.unlink(missing_ok=True)  # a restarted server: not ready yet
    listeners = Listeners(config)
    listeners.open_all()
    # Host keys, known_hosts and the users' keys before paramiko loads: from here on a client finds
    # the keys it checks and its connection waits in the backlog until the server serves it.
    from . import keys

    keys.prepare(config)
    ready.write_text(f"{os.getpid()}\n")
    # paramiko logs a traceback for every client that leaves early (port probes, resets); the server
    # logs one line per connection that ends with an error instead.
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    from .server import serve

    return serve(config, listeners)


if __name__ == "__main__":
    code = main(sys.argv)
    # no interpreter teardown (it freed every module's objects for ~0.1 s of CPU while `lab down` waited)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(code)
