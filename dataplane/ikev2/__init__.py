"""IKEv2 (RFC 7296) with the redirect mechanism (RFC 5685): codec, crypto, gateway, client.

    codec    messages and payloads <-> bytes (IkeError is the only parse error)
    crypto   transforms, Diffie-Hellman, key derivation, SK payload protection, AUTH (cryptography)
    gateway  the responder: IKE_SA_INIT, IKE_AUTH (PSK, RSA certificates), CP, one CHILD_SA, redirect
    client   the initiator: follows REDIRECT when the nonce matches, REDIRECTED_FROM, max-redirects
    service  the gateway on UDP 500/4500 inside dataplane.daemons.flexvpnd
    pki      the lab's CA and per-router certificates
"""
