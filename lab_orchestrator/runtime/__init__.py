"""A running lab on this kernel: the netns backend, the supervisor, operations, state, checks."""
