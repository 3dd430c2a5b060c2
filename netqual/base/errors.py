"""One exception tree. Each exception carries its context and writes its own message.

Exit codes are attached here and mapped to the process exit status in exactly one place
(``netqual.cli.main``). A failing *path* is never an exception that escapes the
coordinator: it becomes an ``unsafe`` verdict with a reason.
"""

from __future__ import annotations

import enum
import errno
import socket

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_RUNTIME = 3


class ErrorCode(str, enum.Enum):
    """The ``code`` of an ``error`` message on the control channel: one per kind of failure.

    ``INTERNAL`` is a bug in the agent; no input may lead there (hostile peers get
    ``PROTOCOL``, ``BAD_REQUEST`` or ``LIMIT``).
    """

    AUTH = "auth"
    BAD_REQUEST = "bad-request"
    BUSY = "busy"
    INTERNAL = "internal"
    LIMIT = "limit"
    PEER_PROTOCOL = "peer-protocol"
    PEER_SILENT = "peer-silent"  # the responder never accepted a measurement request
    PEER_UNREACHABLE = "peer-unreachable"
    PROBE_FAILED = "probe-failed"
    PROTOCOL = "protocol"
    RDMA = "rdma"
    UNAVAILABLE = "unavailable"
    UNKNOWN = "unknown"  # a peer sent a code this version does not know

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: object) -> ErrorCode:
        try:
            return cls(text)
        except ValueError:
            return cls.UNKNOWN


class NetqualError(Exception):
    """Root of every error netqual raises on purpose. ``code`` is what a peer is told."""

    exit_code: int = EXIT_RUNTIME
    code: ErrorCode = ErrorCode.INTERNAL


class InputError(NetqualError):
    """Bad user input: a file or a field in it. Exit code 2."""

    exit_code = EXIT_USAGE
    code = ErrorCode.BAD_REQUEST  # when a peer's request carried it

    def __init__(self, source: str, problem: str, field: str | None = None) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {problem}")


class InventoryError(InputError):
    """The inventory file is unreadable or invalid."""


class PolicyError(InputError):
    """The policy file is unreadable or invalid."""


class ResultsFileError(InputError):
    """A results file is unreadable, truncated or does not match the schema."""


class ProfileError(InputError):
    """A gate profile is unreadable or invalid."""


class CampaignError(InputError):
    """A campaign directory, its campaign.toml or its history store is invalid, or a run
    does not belong to it."""


class IncomparableError(InputError):
    """Two runs that differ in how they measured (transport, ping-pong size, policy metric,
    chunk set) asked to be compared (netqual.analysis.comparable). Exit code 2."""

    def __init__(self, new_source: str, old_source: str, problem: str) -> None:
        super().__init__(new_source, problem)
        self.old_source = old_source
        Exception.__init__(self, f"{new_source} and {old_source} {problem}")


class UsageError(InputError):
    """A command-line value is invalid."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__("command line", problem, field=option)


class ListenError(NetqualError):
    """The agent cannot listen where it was told to (port in use, bad address, no permission)."""

    exit_code = EXIT_USAGE

    def __init__(self, host: str, port: int, err: OSError) -> None:
        self.host = host
        self.port = port
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        problem = err.strerror or str(err)
        hint = {
            errno.EADDRINUSE: "another process listens there; pick another port with --listen",
            errno.EACCES: "ports below 1024 need root; pick a port above 1023",
            errno.EADDRNOTAVAIL: "no interface of this node has that address",
        }.get(err.errno or 0)
        if isinstance(err, socket.gaierror):
            problem = f"cannot resolve {host!r} ({err.strerror})"
        super().__init__(f"cannot listen on {where}: {problem}" + (f" ({hint})" if hint else ""))


class ProtocolError(NetqualError):
    """A peer spoke something other than the netqual control protocol."""

    code = ErrorCode.PROTOCOL

    def __init__(self, peer: str, problem: str) -> None:
        self.peer = peer
        self.problem = problem
        super().__init__(f"{peer}: {problem}")


class AuthError(ProtocolError):
    """Authentication failed (either side): wrong token, or not the node that was dialled."""

    code = ErrorCode.AUTH


class IdentityError(AuthError):
    """The agent at the dialled address is another node (wrong address or port, a relay)."""

    def __init__(self, peer: str, expected: str, actual: str, problem: str) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(peer, problem)


class IntegrityError(ProtocolError):
    """A frame after the handshake failed its MAC: modified, replayed, reordered or injected."""


class FrameTooLargeError(ProtocolError):
    """A frame header announced more bytes than the receiver accepts (a limit, not noise)."""

    code = ErrorCode.LIMIT


class BadRequestError(ProtocolError):
    """A request (or reply) field is missing, of the wrong type or out of its range."""

    code = ErrorCode.BAD_REQUEST

    def __init__(self, peer: str, field: str, problem: str) -> None:
        self.field = field
        super().__init__(peer, f"{field}: {problem}")


class LimitError(ProtocolError):
    """A well-formed request asks for more than the agent's limits allow."""

    code = ErrorCode.LIMIT


class BusyError(NetqualError):
    """The agent cannot take this request now (sessions, buffers); try again later."""

    code = ErrorCode.BUSY

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


class PeerError(NetqualError):
    """The peer answered a request with an error message."""

    def __init__(self, peer: str, code: ErrorCode, message: str) -> None:
        self.peer = peer
        self.code = code
        self.message = message
        super().__init__(f"{peer}: {message} ({code})")


class PeerUnreachableError(NetqualError):
    """A TCP connection to an agent could not be made or broke."""

    code = ErrorCode.PEER_UNREACHABLE

    def __init__(self, peer: str, problem: str) -> None:
        self.peer = peer
        self.problem = problem
        super().__init__(f"{peer} unreachable: {problem}")


class TransportUnavailableError(NetqualError):
    """A transport cannot run on this node (e.g. no pyverbs, no RDMA device)."""

    code = ErrorCode.UNAVAILABLE

    def __init__(self, transport: str, problem: str, hint: str | None = None) -> None:
        self.transport = transport
        self.problem = problem
        self.hint = hint
        text = f"{transport} unavailable: {problem}"
        if hint:
            text += f" (hint: {hint})"
        super().__init__(text)


class ProbeError(NetqualError):
    """A measurement between two agents failed (timeout, completion error, short read)."""

    code = ErrorCode.PROBE_FAILED

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


class PeerSilentError(ProbeError):
    """The responder accepted the connection and the handshake but never answered a
    measurement request before the probe's deadline: it will do the same again."""

    code = ErrorCode.PEER_SILENT


class NotMeasuredError(NetqualError):
    """A probe was refused for a configuration reason (token, identity, device, limits):
    nothing was measured, so there is no verdict. Exit code 3."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"not measured (configuration): {reason}")


class NoAgentsError(NetqualError):
    """Not a single agent of the inventory can be measured (none answered, or every one
    failed the pre-flight check): nothing can be measured."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"no agent can be measured: {detail}")


class ClusterApiError(NetqualError):
    """A cluster manager's API (Kubernetes) could not be reached or refused a request."""


class LabError(NetqualError):
    """The emulated fabric could not be built or torn down."""


class GuestError(NetqualError):
    """The qemu guest (Soft-RoCE rehearsal) could not be prepared, booted or read back."""


class TopologyError(InputError):
    """A lab topology file is unreadable or invalid."""


class WorkloadError(InputError):
    """A workload file or the model config it names is unreadable or invalid."""


class OutputError(InputError):
    """An output cannot be written safely: a symlinked or another user's directory or file,
    no space left, no permission. Exit code 2; nothing half-written is left behind."""


class RunStopped(NetqualError):
    """A signal stopped a command that measures. Exit 130 (SIGINT) or 143 (SIGTERM)."""

    def __init__(self, message: str, exit_code: int) -> None:
        self.exit_code = exit_code
        super().__init__(message)
