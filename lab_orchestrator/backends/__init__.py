"""Backends apply a plan: `netns` (this host's kernel); containerlab comes later."""
