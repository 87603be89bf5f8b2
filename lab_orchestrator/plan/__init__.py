"""The plan: the pipeline of planning phases, the plan's types, rendered files."""
