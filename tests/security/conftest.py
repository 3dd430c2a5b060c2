"""tests/security/:

Hostile and broken peers and files: forged or replayed measurements, hostile text,
fuzzed protocol and inputs, unsafe output paths. Real processes where the attack
crosses a socket.
"""
