"""ESP (RFC 4303) in user space, for kernels without XFRM ESP: SAs, anti-replay, UDP encapsulation, TUN."""
