"""`lab top` and `lab web`: a running lab, live, in the terminal and in a browser."""

from __future__ import annotations

import typer

from .. import api
from ..model.diagnostics import LabError
from .common import LabArg, LabOption, app, guarded, one_lab, out


@app.command()
def top(
    name: str | None = LabArg("Lab name, the same as --lab (default: the first running lab; `l` goes to "
                              "the next)."),
    lab: str | None = LabOption,
) -> None:
    """A live terminal view (twice a second, and at once when a node fails): node states, BGP, SRG/SRD/HSRP
    roles, restarts, each selector member's share and packets/s, recent events. Keys: `f` / `r` fail (power off) /
    restore a node (asks its name, then a confirmation), `l` next running lab, `q` quits. Without a terminal:
    one line per second."""
    from ..live import top as livetop

    def run() -> None:
        running = api.labs(one_lab(name, lab))
        if not running:
            raise LabError("no lab is running (`lab up labs/topology3.yml`)")
        try:
            livetop.run(sorted(running, key=lambda r: r.name)[0], out, labs=api.labs)
        except KeyboardInterrupt:
            return

    guarded(run)


@app.command()
def web(
    name: str | None = LabArg("Lab name, the same as --lab (default: the only running lab)."),
    lab: str | None = LabOption,
    port: int = typer.Option(8040, "--port", "-p", help="TCP port."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (default: this machine only; beyond it "
                                           "every request needs the printed URL's token)."),
    allow_actions: bool = typer.Option(False, "--allow-actions",
                                       help="Show fail/restore (and SRD switchover) buttons, each with a "
                                            "confirmation (otherwise the page is read-only); they act only "
                                            "from the page opened with the printed URL's token."),
) -> None:
    """A live web page of the lab: the topology coloured by state, selector shares and packets/s with
    sparklines, updated by server-sent events; /state.json for scripts. Nothing is fetched from the network.
    The printed URL carries this run's secret token (docs/security.md)."""
    from ..live import web as liveweb

    def run() -> None:
        running = api.pick(one_lab(name, lab))
        token = liveweb.new_token()
        out.print(f"lab {running.name} live at {liveweb.page_url(host, port, token)} "
                  f"(state: /state.json; Ctrl-C stops)", soft_wrap=True)
        try:
            liveweb.serve(running, host, port, allow_actions, token=token)
        except KeyboardInterrupt:
            return

    guarded(run)
