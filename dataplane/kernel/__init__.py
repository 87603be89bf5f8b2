"""Kernel edges: nftables, eBPF (tc) programs and maps, virtual IPs."""
