"""File names shared by the planner (which writes the paths into each daemon's config), the daemons
(which write them) and the readers (`lab` commands, the SSH CLI, benchmarks): defined once, here.

Each daemon's status file lives in the lab's state folder under nodes/NODE/.
"""

from __future__ import annotations

MXLB_CONFIG = "mxlb.json"  # dataplane.daemons.mxlb's configuration (the MX selector)
MXLB_STATUS = "mxlb-status.json"  # dataplane.daemons.mxlb: members, buckets, changes
HEALTH_STATUS = "health-status.json"  # dataplane.daemons.healthd: TLB health checks
MNHA_PORT = 7790  # MNHA heartbeats between the mnhad of the two SRXs (UDP, over the ICL)
# dataplane.daemons.healthd probes every profile at once on this signal (`lab up`, once the lab is reachable);
# it holds the signal blocked from before its first status file, which carries its pid
HEALTH_PROBE_NOW = "SIGUSR1"
CONNTRACKD_SYNC_PORT = 3780  # MNHA session sync between the conntrackd of the two SRXs (UDP, over the ICL)
MNHA_CONFIG = "mnha.json"  # dataplane.daemons.mnhad's configuration (pair, SRG mode)
MNHA_STATUS = "mnha-status.json"  # dataplane.daemons.mnhad: SRG roles, ICL, heartbeats
SRD_STATUS = "srd-status.json"  # dataplane.daemons.srdd: mastership, signal route
HSRP_STATUS = "hsrp-status.json"  # dataplane.daemons.flexvpnd: HSRP groups
IKEV2_STATUS = "ikev2-status.json"  # dataplane.daemons.flexvpnd: CLB cluster and IKEv2 SAs
# dataplane.daemons.responder, next to its configuration: every listening socket is open (what `lab up` waits for)
RESPONDER_READY = "responder.ready"

STATUS_FILES = (MXLB_STATUS, MNHA_STATUS, SRD_STATUS, HSRP_STATUS, IKEV2_STATUS)
