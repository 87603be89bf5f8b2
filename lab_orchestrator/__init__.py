"""Real-packet network emulation lab: topology YAML -> plan -> Linux network namespaces."""

__version__ = "0.1.0"
