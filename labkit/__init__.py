"""Helpers shared by the orchestrator (`lab_orchestrator`) and the per-node daemons (`dataplane`).

Both packages import this one; it imports neither (the daemons never load the orchestrator).
- `netnsutil`: network namespaces without a process (create, enter, delete, who is inside)
- `birdctl`: BIRD's control socket without birdc
- `files`: atomic JSON writes (status files read by other processes)
- `links`: facts about links (the other end of a veth)
- `jsonlines`: one JSON object per line over a stream socket
- `contracts`: the typed config and status of each daemon, and their file names
"""
