"""UDP traffic generator and receiver that measure per-flow loss and convergence like IxNetwork.

Frames are built once per flow and frame size before sending: scapy builds one Ether/IP/UDP frame
per size, and each flow's frame is that one with the flow's addresses, ports, flow id and IPv4
header checksum written in (byte-identical to a scapy build of that flow, unit-tested; ~100 times
faster, so thousands of flows start at once; memory: flows x the sum of the distinct sizes). Per
packet the pre-built frame is copied into a slot of a staging buffer and only its sequence number
and send timestamp are written there (one ``struct.pack_into``); the packets due leave an AF_PACKET
socket together, up to 64 in one ``sendmmsg`` call (``batch``: Python has no sendmmsg, ctypes calls
the C library's; a refused packet is counted and skipped, as with one ``send`` per packet). No IP
field changes per packet, so no IP checksum work; the UDP checksum is 0 (allowed for IPv4). The
receiver reads up to 64 packets per ``recvmmsg`` call the same way.

Frame sizes
    A size is the Ethernet frame size as IxNetwork and RFC 2544 count it: destination MAC through
    the 4-byte FCS. A veth carries no FCS, so a size-S frame is S - 4 bytes in memory and on the
    veth: 64 -> 60 bytes (IP total length 46, 18 bytes of UDP payload), 1518 -> 1514 bytes (IP
    total length 1500, the MTU). Reported byte counts and averages are in these sizes (with FCS);
    the smallest size is 64.

IPv6
    Flows whose addresses are IPv6 (``make_flows(200, "2001:db8:172:80::/96", "2001:db8:203::a")``)
    are sent as Ether/IPv6/UDP frames: a 40-byte IPv6 header (hop limit 64, flow label 0, no
    extension header), the same payload header after UDP at offset 62. Frame sizes are kept and the
    payload carries 20 fewer bytes (a 1518 frame is still a 1500-byte IP packet, the MTU, with
    1452 bytes of UDP payload), as a tester does for IPv6; 64 cannot hold Ethernet + IPv6 + UDP +
    the 18-byte header (66 bytes before any payload), so an IPv6 flow's 64 becomes 84, the
    smallest size that does (``family_sizes``; IMIX then averages 713.43 bytes with FCS instead of
    711.83). IPv6 forbids a zero UDP checksum (RFC 8200), so each pre-built frame carries the checksum of sequence 0 and
    time 0, and per packet the sender adds the words of the two fields to it (RFC 1624's
    incremental update, ``patch_udp_checksum``; unit-tested against scapy builds). A sender sends one
    family; the receiver is told its family (``Receiver(family=6)``: an IPv6 UDP socket, or
    AF_PACKET for IPv6 frames). The next hop's MAC comes from the IPv6 routes and the neighbour
    table, or the kernel's neighbour discovery. NAT bindings (below) are IPv4 only.

IMIX
    ``IMIX`` holds the JVD seed's weights 64:8, 127:36, 255:11, 511:4, 1024:2, 1518:39 (sum 100,
    average 711.83 bytes with FCS, 707.83 without). ``size_cycle`` expands weights into a
    deterministic cycle (each size repeated by its weight, shuffled with a fixed seed). Every flow
    walks the same cycle from its own offset, so each flow alone and the aggregate both follow the
    weights exactly over any whole cycle.

Payload header (18 bytes, network byte order, right after the UDP header)
    ======  ====  ==========================================================================
    offset  type  field
    ======  ====  ==========================================================================
    0       u16   magic 0x5447 ("TG")
    2       u32   flow id
    6       u64   sequence number (per flow, from 0)
    14      u32   send timestamp: CLOCK_MONOTONIC in ns, low 32 bits
    ======  ====  ==========================================================================

    The rest of the payload is zero padding. A 64-byte frame leaves exactly 18 bytes of payload,
    so the timestamp carries only the low 32 bits; sender and receiver share the host's monotonic
    clock, so the receiver restores the full 64-bit send time from its receive time (exact while
    the one-way delay stays under 2**32 ns = 4.29 s).

Rate and flows
    The sender sends flows round-robin at a constant aggregate rate R (packets/s), so each of F
    flows gets R/F pps and a loss-derived convergence figure has a resolution of one per-flow
    interval, F/R seconds. Pacing uses absolute due times (no drift): the sender sleeps until about
    ``quantum_ms`` (0.25 ms) worth of packets are due, never before the first of them, and sends
    them in one call, so packets leave in bursts of that length at most. A send
    that fails (interface down, no buffer) still consumes its sequence number: the receiver counts
    it as lost, as a tester would. A sender that falls behind (CPU contention) sends what it owes
    late, in a burst: packets due during an outage but sent after it are not lost, so a convergence
    figure is only as good as the schedule. The report's ``max_lag_ms``, ``lag_p50_ms`` /
    ``lag_p99_ms`` (upper bounds, from a 50 us histogram) and ``late_1ms`` say how late it was;
    ``realtime=True`` (SCHED_FIFO, paced rates only) keeps it on time on a busy machine.

Receiver accounting, per flow
    received (unique), lost (sequence numbers never seen, up to the highest one seen, plus the
    tail when the sender's count is known), duplicates, reordered (arrived after a higher
    sequence number), longest gap between consecutive in-order arrivals measured on their send
    timestamps and the send time of the packet before it (the gap's start), first/last receive
    time, one-way latency (min/avg/max), and the loss-derived convergence time
    ``lost / per-flow rate`` (RFC 6412's packet-loss duration, what IxNetwork reports from
    frame loss). All times are CLOCK_MONOTONIC ns, the clock ``time.monotonic_ns()`` reads in
    every namespace of the host, so an events runner can line up its own timestamps.

Reverse direction
    A stateful firewall drops server-initiated flows: ``reverse_flows`` gives the same 5-tuples
    swapped (server address:port -> client address:port), to be sent only after the forward
    packets opened the sessions.

Library::

    flows = make_flows(200, "100.64.0.0/16", "203.0.113.10")
    rx = Receiver(ns="tg1-server", port=7000, rate_per_flow=100).start()   # thread; rx.ready waited
    report = Sender(ns="tg1-client", iface="eth1", flows=flows, rate=20000, sizes="imix",
                    duration=3).run()
    result = rx.stop(sent=report)                       # JSON-ready dict, tail loss included

``Sender.spawn()`` / ``Receiver.spawn()`` run the same in a child process (``python -m
dataplane.traffic ... --config -``), which avoids sharing the GIL between sender and receiver
(and with the caller); a child stops when its parent closes its stdin or dies::

    rx = Receiver(ns="tg1-server", port=7000).spawn().wait_ready()
    tx = Sender(ns="tg1-client", iface="eth1", flows=flows, rate=20000, duration=3, realtime=True).spawn()
    result = rx.stop(sent=tx.wait())

The receiver binds a UDP socket (PORT; any local address, so the whole AnyIP prefix) or, with
IFACE and no port, reads an AF_PACKET socket and takes any UDP frame carrying the magic (IPv4 frames,
or IPv6 frames with ``family=6``).

CLI (JSON on stdout)::

    python -m dataplane.traffic send --netns tg1-client --iface eth1 --flows 200 \\
        --sources 100.64.0.0/16 --dst 203.0.113.10 --rate 20000 --sizes imix --duration 3
    python -m dataplane.traffic receive --netns tg1-server --port 7000 --rate-per-flow 100 --idle 1
    python -m dataplane.traffic send --netns tg1-client --iface eth1 --flows 200 \\
        --sources 2001:db8:172:80::/96 --dst 2001:db8:203::a --rate 20000 --duration 3
    python -m dataplane.traffic receive --netns tg1-server --port 7000 --family 6 --idle 1

Modules
    ``frames`` (flows, sizes, pre-built frames, the header), ``netio`` (namespaces, next hop, ARP,
    socket helpers), ``batch`` (sendmmsg/recvmmsg staging buffers), ``send`` (Sender), ``stats``
    (FlowStats, Accounting: pure), ``receive`` (Receiver), ``spawn`` (child processes), ``cli`` (the
    command line). Everything is re-exported
    here, so ``from dataplane.traffic import Sender`` is the way to use it.
"""

from __future__ import annotations

from .cli import main
from .frames import (
    CYCLE_SEED,
    ETH_LEN,
    FCS_LEN,
    HEADER,
    HEADER_LEN,
    IMIX,
    IP6_LEN,
    IP_LEN,
    MAGIC,
    MASK32,
    MIN_SIZE,
    MIN_SIZE6,
    PATCH,
    PATCH_OFFSET,
    PAYLOAD_OFFSET,
    PAYLOAD_OFFSET6,
    UDP_LEN,
    Flow,
    FrameSet,
    average_size,
    build_frame,
    derive_frame,
    family_sizes,
    flow_packet_sizes,
    flows_family,
    ipv4_checksum,
    make_flows,
    parse_sizes,
    patch,
    patch_udp_checksum,
    reverse_flows,
    size_cycle,
    udp6_checksum,
)
from .netio import arp_resolve, in_netns, interface_address, neighbour_mac, next_hop, resolve_dst_mac
from .receive import Receiver
from .send import Sender
from .spawn import Spawned
from .stats import Accounting, FlowStats, restore_timestamp

__all__ = [
    "CYCLE_SEED", "ETH_LEN", "FCS_LEN", "HEADER", "HEADER_LEN", "IMIX", "IP6_LEN", "IP_LEN", "MAGIC", "MASK32",
    "MIN_SIZE", "MIN_SIZE6", "PATCH", "PATCH_OFFSET", "PAYLOAD_OFFSET", "PAYLOAD_OFFSET6", "UDP_LEN", "Accounting",
    "Flow", "FlowStats", "FrameSet", "Receiver", "Sender", "Spawned", "arp_resolve", "average_size", "build_frame",
    "derive_frame", "family_sizes", "flow_packet_sizes", "flows_family", "in_netns", "interface_address",
    "ipv4_checksum", "main", "make_flows", "neighbour_mac", "next_hop", "parse_sizes", "patch", "patch_udp_checksum",
    "resolve_dst_mac", "restore_timestamp", "reverse_flows", "size_cycle", "udp6_checksum",
]
