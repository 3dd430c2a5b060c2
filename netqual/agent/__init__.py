"""The agent side: every module a peer's bytes reach (the attack surface).

``wire`` is the control channel both sides speak; the rest runs in the agent.
"""
