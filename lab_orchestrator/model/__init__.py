"""What the user says: the topology model, its YAML reader and its checks, names, errors."""
