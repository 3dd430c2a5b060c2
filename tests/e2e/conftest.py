"""tests/e2e/:

Real agent processes over loopback sockets, driven through the CLI or the coordinator:
runs, resume, retest, pre-flight, progress, stop signals.
"""
