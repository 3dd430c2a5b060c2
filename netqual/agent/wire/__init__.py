"""The control channel: framing, handshake, checked message fields, hop probes."""
