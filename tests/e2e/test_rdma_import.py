"""Without pyverbs netqual still imports, and choosing rdma says how to install it.

Also the end-to-end 'Done means' of the RDMA issue on a machine without RDMA: a run over
real agents finishes, every path ``unsafe`` with "rdma unavailable on <node>: ...".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from netqual.transports.rdma import verbs

ENV = {**os.environ, "NETQUAL_WIDTH": "100"}
POISON = "import sys; sys.modules['pyverbs'] = None\n"
CHECK = """
import sys
import netqual, netqual.cli, netqual.transports.rdma
assert 'pyverbs.device' not in sys.modules, 'importing netqual imported pyverbs'
from netqual.base.errors import TransportUnavailableError
from netqual.transports import get_transport
try:
    get_transport('rdma').check_available()
except TransportUnavailableError as err:
    print(err)
"""


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_import_netqual_never_imports_pyverbs() -> None:
    run = _python(
        "import sys, netqual.cli, netqual.transports.rdma\nprint('pyverbs' in sys.modules)", ENV
    )
    assert run.stdout.strip() == "False", run.stderr


@pytest.mark.parametrize("how", ["poisoned import", "NETQUAL_PYVERBS_PATH to an empty directory"])
def test_rdma_without_pyverbs_gives_an_actionable_message(how: str, tmp_path: Path) -> None:
    if how == "poisoned import":
        run = _python(POISON + CHECK, ENV)
    else:
        run = _python(CHECK, {**ENV, "NETQUAL_PYVERBS_PATH": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("rdma unavailable: pyverbs is not importable (")
    assert "apt install python3-pyverbs" in run.stdout
    assert "docs/rdma.md" in run.stdout


def test_debian_fallback_appends_dist_packages_at_the_end() -> None:
    if not Path(verbs.DEBIAN_DIST_PACKAGES, "pyverbs").is_dir():
        pytest.skip("python3-pyverbs is not installed here")
    code = (
        "import sys; from netqual.transports.rdma import verbs\n"
        "pv = verbs.load(); print(pv.route); print(sys.path[-1]); print(pv.location)\n"
    )
    env = {k: v for k, v in ENV.items() if k != "NETQUAL_PYVERBS_PATH"}
    run = _python(code, env)
    route, last, location = run.stdout.splitlines()
    if route == "sys.path":
        pytest.skip("pyverbs is importable without the fallback here")
    assert (route, last) == ("debian dist-packages", verbs.DEBIAN_DIST_PACKAGES)
    assert location == f"{verbs.DEBIAN_DIST_PACKAGES}/pyverbs"


def _run_rdma(tmp_path: Path, agent_env: dict[str, str]) -> tuple[int, str, str]:
    """`netqual run --transport rdma --keep-going` over two real local agents: rc, stdout,
    stderr."""
    from netqual.run.localagents import local_agents

    saved = dict(os.environ)
    os.environ.update(agent_env)  # the agents inherit it
    try:
        with local_agents(2) as (nodes, token_file):
            inventory = tmp_path / "inventory.toml"
            inventory.write_text(
                "".join(
                    f'[[node]]\nname = "{n.name}"\naddress = "{n.address}"\nport = {n.port}\n\n'
                    for n in nodes
                )
            )
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "netqual",
                    "run",
                    str(inventory),
                    "--transport",
                    "rdma",
                    "--token-file",
                    str(token_file),
                    "--out",
                    str(tmp_path / "out"),
                    "--iterations",
                    "100",
                    "--warmup",
                    "10",
                    # Past the pre-flight check (which stops on it): the paths say why.
                    "--keep-going",
                    "--allow-short-plan",
                ],
                capture_output=True,
                text=True,
                env={**ENV, **agent_env},
                timeout=120,
                check=False,
            )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return run.returncode, run.stdout, run.stderr


def test_run_without_pyverbs_is_a_configuration_failure_not_a_verdict(tmp_path: Path) -> None:
    """No pyverbs on any node: nothing can be measured, and that is said as configuration
    (exit 3, the reason and the fix), never as unsafe network paths."""
    rc, stdout, stderr = _run_rdma(tmp_path, {"NETQUAL_PYVERBS_PATH": str(tmp_path)})
    assert rc == 3 and "Traceback" not in stderr
    assert "no agent can be measured" in stderr
    assert "pyverbs is not importable" in stderr and "apt install python3-pyverbs" in stderr
    assert "unsafe" not in stdout + stderr
    assert not (tmp_path / "out" / "results.json").exists()


def test_run_with_pyverbs_but_no_device_is_a_configuration_failure(tmp_path: Path) -> None:
    if verbs.rdma_sysfs_devices():
        pytest.skip("this machine has RDMA devices")
    try:
        verbs.load()
    except Exception as err:
        pytest.skip(f"pyverbs not importable here: {err}")
    rc, stdout, stderr = _run_rdma(tmp_path, {})
    assert rc == 3 and "Traceback" not in stderr
    assert "no agent can be measured" in stderr
    assert "no RDMA device (no /sys/class/infiniband)" in stderr
    assert "unsafe" not in stdout + stderr


def test_loading_pyverbs_leaves_logging_alone() -> None:
    code = (
        "import logging\nfrom netqual.transports.rdma import verbs\n"
        "try:\n    verbs.load()\nexcept Exception as err:\n    print('skip', err)\n"
        "root = logging.getLogger()\nprint(len(root.handlers), root.level)\n"
    )
    run = _python(code, ENV)
    if run.stdout.startswith("skip"):
        pytest.skip(run.stdout)
    assert run.stdout.split() == ["0", "30"]  # pyverbs' basicConfig(INFO) undone
