"""The lab's state file: what ``up`` made, written *before* each thing is made.

Namespaces are recorded before they are created and processes as soon as they are
spawned, each write atomic (temp file + rename), so a later ``down`` finds everything
even after ``up`` was SIGKILLed half-way.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from netqual.base.errors import LabError

STATE_FILE = "state.json"
VERSION = 1


def default_state_dir() -> Path:
    run = Path("/run")
    if os.geteuid() == 0 and run.is_dir():
        return run / "netqual-lab"
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return Path(base) / "netqual-lab"


@dataclass(frozen=True)
class Process:
    role: str  # "relay" or "agent:<host>"
    pid: int
    start: int | None  # /proc start time, guards against PID reuse


@dataclass(frozen=True)
class LabState:
    prefix: str
    topology: str
    namespaces: tuple[str, ...] = ()
    processes: tuple[Process, ...] = ()
    files: tuple[str, ...] = ()  # files ``up`` wrote (token, inventory, relay config, logs)
    complete: bool = False

    def with_process(self, proc: Process) -> LabState:
        return replace(self, processes=(*self.processes, proc))


def path(state_dir: Path) -> Path:
    return state_dir / STATE_FILE


def save(state_dir: Path, state: LabState) -> None:
    target = path(state_dir)
    tmp = target.with_suffix(".tmp")
    data = {"version": VERSION, **asdict(state)}
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, target)


def load(state_dir: Path) -> LabState | None:
    target = path(state_dir)
    try:
        raw = json.loads(target.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise LabError(
            f"{target}: unreadable lab state ({err}); remove it after checking "
            "`ip netns list` for namespaces starting with 'nql'"
        ) from err
    try:
        return LabState(
            prefix=str(raw["prefix"]),
            topology=str(raw["topology"]),
            namespaces=tuple(str(n) for n in raw["namespaces"]),
            processes=tuple(
                Process(str(p["role"]), int(p["pid"]), p["start"]) for p in raw["processes"]
            ),
            files=tuple(str(f) for f in raw["files"]),
            complete=bool(raw["complete"]),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise LabError(f"{target}: lab state is missing {err}") from err


def remove(state_dir: Path) -> None:
    path(state_dir).unlink(missing_ok=True)
