"""Build hook: compile the RDMA ping-pong's timed loop (netqual/transports/rdma/hotloop.c)
into a shared library that netqual loads with ctypes.

Optional by design: without a C compiler or libibverbs-dev's headers, or when the build
fails for any reason, the wheel is built without it (pure Python, as before) and netqual
runs its Python loop, saying so in ``netqual doctor`` and in each RDMA path's details.
NETQUAL_NO_HOTLOOP=1 skips the build. The library calls no Python API and links nothing
(ibv_post_send and ibv_poll_cq are inline calls through the provider's ops table), so a
wheel that carries it fits any CPython on the same platform: tag py3-none-<platform>.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("netqual/transports/rdma/hotloop.c")
TARGET = "netqual/transports/rdma/_hotloop.so"
CFLAGS = ["-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-std=gnu11"]


def compile_hotloop(root: Path, out: Path) -> str | None:
    """Compile into ``out``; None on success, else why not (one line)."""
    if os.environ.get("NETQUAL_NO_HOTLOOP") == "1":
        return "NETQUAL_NO_HOTLOOP=1"
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return "no C compiler (install gcc)"
    try:
        done = subprocess.run(
            [*cc.split(), *CFLAGS, "-o", str(out), str(root / SOURCE)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{cc} did not run: {err}"
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["(no output)"])[0]
        if "infiniband/verbs.h" in done.stderr:
            return "no libibverbs headers (install libibverbs-dev)"
        return f"{cc} failed: {first}"
    if not out.is_file():
        return f"{cc} wrote no {out.name}"
    return None


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        if version == "editable":
            # An editable install imports from the source tree: build the library there.
            why = compile_hotloop(root, root / TARGET)
        else:
            self._tmp = tempfile.mkdtemp(prefix="netqual-hotloop-")
            built = Path(self._tmp, "_hotloop.so")
            why = compile_hotloop(root, built)
            if why is None:
                build_data["force_include"][str(built)] = TARGET
                build_data["pure_python"] = False
                platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
                build_data["tag"] = f"py3-none-{platform}"
        if why is not None:
            print(f"netqual: building without the compiled RDMA loop: {why}", file=sys.stderr)

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
