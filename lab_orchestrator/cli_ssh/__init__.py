"""SSH into the emulated nodes: a Junos-like and an IOS-like CLI built from live state.

One lab-wide server process (`python -m lab_orchestrator.cli_ssh STATE_DIR/ssh/sshd.json`, started
by the lab's supervisor) listens on port 22 at each node's management address, inside that node's
namespace. A command is parsed against a data-driven command table (`commands`), the state it needs
is read at that moment (`gather`: netlink, BIRD's control socket, conntrack, the daemons' status
files), and a pure function (`junos`, `ios`) turns that state into the vendor's text or JSON; pipes
(`pipes`) filter the text. docs/ssh-cli.md describes it for users.

Modules:
    keys     host keys, the lab's client key and known_hosts (generated on the lab's first start)
    state    dataclasses of the gathered state (what the renderers take)
    gather   reads that state from the kernel, BIRD, conntrack and status files
    birdparse, junosconf   pure parsers (BIRD replies; Junos configuration text)
    parser   command words, abbreviations, arguments, pipes, `?` help and tab completion
    junos, ios   the renderers, pure functions of the gathered state
    commands the command table of each vendor
    actions  commands that change state (restart routing, reboot and other events)
    shell    line editing of the interactive session
    listeners  one listening socket per node, inside its namespace; closed while the node is down
    server   the paramiko server: authentication, channels (a channel's work starts after the reply
             to its exec or shell request)
    session  runs one command line for one user (errors and `?` help as the vendor writes them)
    pipes    `| match`, `| count`, `| display json`, IOS `| include` ...
    rib, netlink   readers of the kernel's routes (explained by BIRD) and links
    probe    ping and traceroute from a node or one of its routing instances
    common, ios6, flexshow   helpers shared by the renderers; IOS IPv6 and FlexVPN output
The server's configuration and password hashes are lab_orchestrator.plan.sshconfig (written by
lab_orchestrator.plan.sshplan).
"""
