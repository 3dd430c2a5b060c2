"""Real RDMA verbs in CI: two Soft-RoCE devices (rdma_rxe) in a qemu guest (netqual.vm).

The guest boots ONCE for this module and runs tests/support/rxe_guest_cases.py, which drives
netqual's command line (doctor, agents, probes) and bench/rdma_vs_perftest on rxe0/rxe1
and writes one JSON record per case; each test below judges one case. Numbers under TCG
emulation are functional only: no timing bound here except the ones that catch hangs.

Skips (with the reason) only where qemu or the Debian kernel package cannot be had.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from paths import REPO

from netqual.base.errors import GuestError
from netqual.model.plan import ProbePlan
from netqual.planning.options import override
from netqual.transports.rdma import hotloop
from netqual.vm import GuestRun, cached_kernel, fetch_kernel, qemu_unavailable, run_in_guest

CASES = REPO / "tests" / "support" / "rxe_guest_cases.py"
# The guest's whole life: boot, one import of netqual at 20-60 s under TCG (every case
# forks from it, the bench's responder agents too; the engine's workers are fresh
# interpreters), the probes. About 5 minutes and 2.5 of CPU (qemu's) on this shared 2-core
# host at load 12; the spinning ping-pongs make both grow with the host's load (a guest whose
# ping-pong fell into a millisecond regime took 6 minutes for the default plan alone). The
# bound only stops a hung guest.
GUEST_TIMEOUT_S = 1800.0
# The module's first test boots the guest in its set-up: pytest-timeout's default (900 s)
# would kill a guest that a loaded host makes slower than that, inside the guest's own bound.
pytestmark = [pytest.mark.rxe, pytest.mark.slow, pytest.mark.timeout(GUEST_TIMEOUT_S + 120)]
KILLED_PROBE_TIMEOUT_S = 300.0  # the --timeout the killed-responder probe runs with


@dataclass(frozen=True)
class GuestResults:
    run: GuestRun
    out: Path

    def case(self, name: str) -> dict[str, Any]:
        path = self.out / f"{name}.json"
        if not path.is_file():
            pytest.fail(
                f"the guest wrote no {path.name} (exit {self.run.exit_code}, "
                f"timed out {self.run.timed_out}); console:\n{self.run.console_tail(12)}"
            )
        record: dict[str, Any] = json.loads(path.read_text())
        return record

    def agent_logs(self, *names: str, lines: int = 40) -> str:
        """The last ``lines`` of each agent's log (the guest runs them ``--verbose``)."""
        out = []
        for name in names:
            path = self.out / f"agent-{name}.stderr"
            text = path.read_text(errors="replace") if path.is_file() else "(no log)"
            out.append(f"agent {name}:\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(out)

    def path(self, name: str) -> dict[str, Any]:
        """The results path object a ``probe --json`` case printed."""
        record = self.case(name)
        try:
            doc: dict[str, Any] = json.loads(record["stdout"])
        except json.JSONDecodeError:
            pytest.fail(f"{name}: no JSON on stdout:\n{_shown(record)}")
        return doc


def _plan(record: dict[str, Any]) -> ProbePlan:
    """The plan a probe case ran: its --chunk and --bulk-bytes on the default plan."""
    argv: list[str] = record["argv"]
    given = [argv[i + 1] for i, a in enumerate(argv) if a == "--bulk-bytes"]
    chunks = [argv[i + 1] for i, a in enumerate(argv) if a == "--chunk"]
    return override(ProbePlan(), chunks=chunks, bulk_bytes=given[-1] if given else None)


def _loop_kind() -> str:
    """The loop the guest must run: the guest sees this host's files, so the compiled one
    wherever this install built it (setup.sh installs gcc and libibverbs-dev for that)."""
    return "python" if isinstance(hotloop.library(), str) else "compiled"


def _shown(record: dict[str, Any]) -> str:
    return (
        f"argv {' '.join(record['argv'])}\nrc {record['rc']} after {record['elapsed_s']} s\n"
        f"stdout:\n{record['stdout'][-3000:]}\nstderr:\n{record['stderr'][-3000:]}"
    )


def _pyverbs_for(python: str) -> str | None:
    """Why this interpreter cannot use Debian's python3-pyverbs in the guest, or None."""
    built = sorted(Path("/usr/lib/python3/dist-packages/pyverbs").glob("device.cpython-*.so"))
    if not built:
        return "Debian's python3-pyverbs is not installed (setup.sh installs it)"
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    if not any(tag in p.name for p in built):
        return f"python3-pyverbs is built for {built[0].name}, the venv's Python is {tag}"
    return None


@pytest.fixture(scope="module")
def guest(tmp_path_factory: pytest.TempPathFactory) -> GuestResults:
    if reason := qemu_unavailable():
        pytest.skip(f"qemu cannot run here: {reason}")
    if shutil.which("apt-get") is None:
        pytest.skip("no apt-get: the guest kernel comes from Debian's linux-image-amd64")
    if reason := _pyverbs_for(sys.executable):
        pytest.skip(f"the guest runs this venv's Python: {reason}")
    try:
        cached_kernel() or fetch_kernel()
    except GuestError as err:
        pytest.fail(f"guest kernel: {err}")
    out = tmp_path_factory.mktemp("rxe-guest")
    script = f"{sys.executable} {CASES} {out}\n"
    run = run_in_guest(script, out, GUEST_TIMEOUT_S)
    return GuestResults(run, out)


def test_guest_ran_every_case(guest: GuestResults) -> None:
    total = guest.case("total")
    agents = guest.case("agents")
    print(f"guest: {guest.run.elapsed_s:.0f} s wall; in the guest {total}; agents {agents}")
    assert not guest.run.timed_out, guest.run.console_tail()
    assert guest.run.exit_code == 0, guest.run.console_tail()
    # the guest's clock was measured against its RTC before the cases ran, and was right
    # (or the guest was booted again: netqual.vm.qemu.boot)
    assert guest.run.clock_rate is not None, guest.run.console_tail()
    print(f"guest clock: {guest.run.clock_rate:.3f} s per s, {guest.run.boots} boot(s)")
    assert sorted(agents["ready_s"]) == sorted(agents["wanted"])


def test_fanin_sweep_over_real_verbs(guest: GuestResults) -> None:
    """The fan-in sweep (netqual.run.fanin, as run --fanin drives it) with --transport
    rdma, one chunk completion per chunk per rank (functional: no timing bound under TCG):
    ``plain``'s whole-chunk READs and ``mooncake``'s 64 KiB slices over 2 QPs per
    endpoint, 8 ranks; then one rank of ``mooncake`` and of ``nixl`` (8 KiB slices) as
    probes: what ran on the rxe devices (``details.fetch``)."""
    record = guest.case("fanin_rdma")
    print(f"fan-in over rxe, seconds per step: {record.get('steps_s')}")
    assert "error" not in record, record
    for name, ranks, chunks in (("plain", 1, 20), ("mooncake", 8, 4)):
        (st,) = record[name]
        (level,) = st["levels"]
        assert st["storage"] == "rxeB" and st["profile"] == name, st
        assert level["nodes"] == ["rxeA"], st
        assert not level["errors"], (level["errors"], guest.agent_logs("rxeA", "rxeB"))
        assert level["chunk_us"]["samples"] == ranks * chunks, st
        assert 0 < level["chunk_us"]["p50"] <= level["chunk_us"]["p99"], st
        assert st["verdict"].startswith("not judged")  # one level: nothing to compare with
    # The storage counters of both ends' rxe ports were read around the level. Whether the
    # reader retried is the host's doing, not the code's: with the run's QP timeout 18
    # (rxe_guest_cases.fanin_case says why) a quiet host read no retry, and a CI host at
    # load 4-6 read 10 (completer_retry_err; 18 duplicate requests served). Every chunk of
    # every rank completed without error (above): that is what the timeout buys. A retry
    # the reader counted is a request the responder saw again: no packet is lost between
    # the two rxe ports of one guest.
    (mooncake,) = record["mooncake"]
    rdma = mooncake["levels"][0]["storage_counters"]["rdma"]
    for port in ("rxe0/1", "rxe1/1"):
        assert rdma[port]["sent_pkts"] > 0 and rdma[port]["rcvd_pkts"] > 0, rdma
    if rdma["rxe0/1"].get("completer_retry_err", 0):
        assert rdma["rxe1/1"].get("duplicate_request", 0) > 0, rdma
    print(f"mooncake over rxe, retries: {rdma['rxe0/1'].get('completer_retry_err', 0)}")
    # per rank: the chunk's slices over the profile's QPs, READs outstanding per QP the
    # profile's 64 capped by the QPs' negotiated max_rd_atomic (rxe: 128)
    for name, chunk, slices, qps in (("mooncake", 256 << 10, 4, 2), ("nixl", 64 << 10, 8, 1)):
        probe = record[f"probe_{name}"]
        fetch = probe["fetch"]
        assert fetch["profile"] == name and fetch["slices_per_chunk"] == [slices], probe
        assert fetch["connections_used"] == [qps], probe
        assert fetch["reads_in_flight_per_qp"] == min(64, probe["rd_atomic"]), probe
        assert probe["cells"] == [[chunk, 10, None]], probe
        assert probe["qp_timeout"] == [18, 18], probe  # the run's, on both ends' QPs


def test_mooncake_moves_the_chunk_over_soft_roce(guest: GuestResults) -> None:
    """The Mooncake wheel loads in the guest and its Transfer Engine installs RDMA over the
    rxe devices: `probe --engine mooncake --engine-require rdma` gives both cells, no
    fallback (docs/engines.md, "Soft-RoCE")."""
    record = guest.case("engine_mooncake")
    if record["rc"] == 3 and "is not installed" in record["stderr"]:
        pytest.skip(record["stderr"].strip()[-200:])
    path = guest.path("engine_mooncake")
    assert record["rc"] == 0 and path["error"] is None, _shown(record)
    cells = path["engine"]
    assert [(c["op"], c["depth"]) for c in cells] == [("read", 1), ("write", 1)]
    # as many 64 KiB operations as the probe's cell reads (rxe_guest_cases.ONE_CELL: the
    # fewest a cell takes, 32): each one checked, over the installed RDMA transport
    ops = _plan(record).reads_for(64 << 10)
    assert [c["ops"] for c in cells] == [ops, ops] and ops >= 32, cells
    for c in cells:
        assert c["error"] is None and c["fallback"] is None, c
        assert c["transport"] == "rdma"
        assert "installed transport: rdma" in c["evidence"]["claimed"]
        assert c["completion_us"]["p50"] > 0 and c["vs_probe"] is not None
        assert c["evidence"]["data_ok"] is True
        assert any("device filter rxe0" in s for s in c["evidence"]["settings"])


def test_doctor_says_ready(guest: GuestResults) -> None:
    record = guest.case("doctor")
    assert record["rc"] == 0, _shown(record)
    assert "ready for RDMA probes" in record["stdout"], _shown(record)
    for device in ("rxe0", "rxe1"):
        assert device in record["stdout"]
    assert "198.18.0.1" in record["stdout"] and "198.18.0.2" in record["stdout"]
    assert f"ping-pong   {_loop_kind()} loop" in record["stdout"], _shown(record)
    # the configuration snapshot (docs/evidence.md) from the guest's real sysfs: rxe lists
    # 1,024 GID slots, sysfs has no active MTU (pyverbs gives it), the probes' GID is v2
    assert re.search(r"roce_gid_type\s+RoCE v2\n", record["stdout"]), _shown(record)
    assert re.search(r"roce_mtu\s+1024\n", record["stdout"]), _shown(record)
    for device in ("rxe0/1", "rxe1/1"):
        assert f"{device} ACTIVE mtu 1024 width 1X gid 1 RoCE v2" in record["stdout"]


def test_two_devices_per_node_give_per_rail_rdma_paths(guest: GuestResults) -> None:
    """docs/rails.md: two rxe devices on two links per node, `run --rails same --no-bulk`:
    one RDMA path per rail, each between the NICs its inventory names, on their devices."""
    record = guest.case("rails")
    assert record["rc"] == 0, _shown(record)
    results = json.loads((guest.out / "rails-run" / "results.json").read_text())
    paths = sorted(results["paths"], key=lambda p: p["rail"])
    got = [(p["src"], p["dst"], p["src_nic"], p["dst_nic"], p["rail"]) for p in paths]
    assert got == [
        ("railA/nqa", "railB/nqb", "nqa", "nqb", 0),
        ("railA/nqc", "railB/nqd", "nqc", "nqd", 1),
    ], _shown(record)
    for p, (mine, peer) in zip(paths, (("rxe0", "rxe1"), ("rxe2", "rxe3")), strict=True):
        assert p["transport"] == "rdma" and p["error"] is None, p
        assert p["rtt_us"]["samples"] == 200  # rxe_guest_cases: small (what ran, not how fast)
        assert p["details"]["device"] == mine and p["details"]["peer"]["device"] == peer, p
    assert "by rail" in record["stdout"]


def test_default_plan_over_real_verbs(guest: GuestResults) -> None:
    record = guest.case("probe_default")
    path = guest.path("probe_default")
    assert record["rc"] == 0 and path["error"] is None, _shown(record)
    assert path["transport"] == "rdma"
    assert path["rtt_us"]["samples"] == 10_000
    assert 0 < path["rtt_us"]["min"] <= path["rtt_us"]["p50"] <= path["rtt_us"]["max"]
    cells = {(c["chunk_bytes"], c["depth"]) for c in path["bulk"]}
    assert cells == {(c, d) for c in (64 << 10, 1 << 20) for d in (1, 8)}  # DEFAULT_PLAN
    plan = _plan(record)  # every cell read what the plan asks (>= 32 chunks), 80 MiB in all
    for cell in path["bulk"]:
        assert cell["reads"] == plan.reads_for(cell["chunk_bytes"]), cell
        assert cell["goodput_gbps"] > 0, cell
    details = path["details"]
    assert details["device"] == "rxe0" and details["peer"]["device"] == "rxe1"
    assert details["gid_type"] == "RoCEv2" and details["link_layer"] == "Ethernet"
    assert details["path_mtu_bytes"] == 1024  # veth MTU 1500 on both ends
    assert details["responder_rounds"] == 11_000  # 1,000 warm-up + 10,000 kept
    # The compiled loop took the real pyverbs QP (its handle passed the check) on both ends.
    for loop in (details["pingpong_loop"], details["peer"]["pingpong_loop"]):
        assert loop.startswith(_loop_kind()), loop
    assert details["pingpong_user_cpu_ns_per_round"] > 0


def test_rxe_counters_moved_by_the_probes_bytes_on_the_devices_it_used(guest: GuestResults) -> None:
    """docs/evidence.md "Counters": rxe counts packets (no bytes), so its hw counters must
    hold at least the probe's bytes at the path MTU, and rxe0's netdev (nqa) the bytes."""
    path = guest.path("probe_default")
    details = path["details"]
    moved = details["counters"]
    need = moved["probe_bytes"]
    # 11,000 ping-pongs of 64 B both ways, and 2 depths x (64 KiB + 1 MiB chunks) of reads,
    # as many as the plan asks (rxe_guest_cases.BULK): 80 MiB, 1,300x the ping-pongs' bytes
    plan = _plan(guest.case("probe_default"))
    reads = sum(plan.reads_for(c) * c for c in plan.chunks_bytes) * len(plan.depths)
    assert need >= reads + 2 * 11_000 * 64 and reads >= 64 << 20, (moved, reads)
    assert details["carried_by"] == {"src": "rxe0/1", "dst": "rxe1/1", "problem": None}
    mtu = details["path_mtu_bytes"]
    for end, device in (("src", "rxe0/1"), ("dst", "rxe1/1")):
        c = moved[end]["rdma"][device]
        assert (c["sent_pkts"] + c.get("rcvd_pkts", 0)) * mtu >= need, (end, c, need)
        assert moved[end]["tcp_retrans"] is None  # not a TCP probe
        assert moved[end]["rdma_ports_read"] >= 2
        # No other RDMA device of the guest moved (meaningful once it has a third one).
        assert set(moved[end]["rdma"]) <= {"rxe0/1", "rxe1/1"}, moved[end]["rdma"]
    nqa = moved["src"]["interfaces"]["nqa"]  # rxe0's netdev: RoCE v2 is UDP on it
    assert nqa["tx_bytes"] + nqa["rx_bytes"] >= need, nqa
    # Both devices sit in one guest kernel and each end uses one of them, so each side's
    # window sees both move: "not on the other device" is the subset check above.


def test_responder_killed_mid_probe(guest: GuestResults) -> None:
    record = guest.case("responder_killed")
    assert record["pingpong_running"], f"the ping-pong never got going:\n{_shown(record)}"
    path = guest.path("responder_killed")
    assert record["rc"] == 3, _shown(record)
    assert path["verdict"] == "unsafe"
    error = path["error"] or ""
    # The channel closing ends the spin at once; a confirming write names the QP's fate.
    assert "the responder closed the control channel" in error, error
    assert "IBV_WC_RETRY_EXC_ERR (retry exceeded: peer unreachable or QP gone)" in error, error
    after_kill_s = record["elapsed_s"] - record["killed_at_s"]
    print(f"killed responder: probe ended {after_kill_s:.1f} s after the kill: {error}")
    assert after_kill_s < KILLED_PROBE_TIMEOUT_S  # the failure, not the deadline, ended it


def test_wrong_gid_index_is_a_clear_error(guest: GuestResults) -> None:
    record = guest.case("gid_index")
    assert record["rc"] == 3, _shown(record)
    text = record["stdout"] + record["stderr"]
    assert "unsafe" in text
    assert re.search(r"GID index 7|gid.index.*7", text, re.IGNORECASE), _shown(record)


def test_forged_and_replayed_echoes_fail_the_key_check_on_real_verbs(
    guest: GuestResults,
) -> None:
    """tests/support/rxe_forged_echo.py: rxe0 -> rxe1 against an honest responder, one whose tags
    come from another key (forged), one that writes every ping back as it came
    (replayed) and one whose READs return memory without the keyed bytes (blank-bulk),
    with the compiled loop and with the Python loop."""
    record = guest.case("forged_echo")
    assert record["rc"] == 0, _shown(record)
    got = json.loads(record["stdout"])
    loops = ["python"] if isinstance(hotloop.library(), str) else ["compiled", "python"]
    for loop in loops:
        honest = got[f"honest/{loop}"]
        assert honest["ok"] and honest["samples"] == 100, honest
        assert honest["bulk_errors"] == [None], honest  # the keyed bulk bytes arrived
        assert str(honest["loop"]).startswith(loop), honest
        blank = got[f"blank-bulk/{loop}"]
        assert blank["ok"] and blank["samples"] == 100, blank  # its ping-pong is honest
        [cell] = blank["bulk_errors"]
        assert str(cell).startswith("measurement integrity check failed: 2 of 2 bulk reads"), blank
        assert "did not carry rxeF's session-key tag" in str(cell), blank
        for mode in ("forged", "replayed"):
            failed = got[f"{mode}/{loop}"]
            assert not failed["ok"], (mode, loop, failed)
            assert str(failed["error"]).startswith(
                "IntegrityFailure: measurement integrity check failed: "
            ), (mode, loop, failed)
            assert "ping-pong replies did not carry rxeF's session-key tag" in str(
                failed["error"]
            ), (mode, loop, failed)


def test_path_mtu_is_the_lower_end(guest: GuestResults) -> None:
    record = guest.case("mtu")
    path = guest.path("mtu")
    mtus = record["active_mtu_bytes"]
    assert mtus == {"rxe0": 1024, "rxe1": 512}, mtus  # nqb lowered to 1000 bytes
    assert record["rc"] == 0 and path["error"] is None, _shown(record)
    details = path["details"]
    assert details["active_mtu_bytes"] == 1024 and details["peer"]["active_mtu_bytes"] == 512
    assert details["path_mtu_bytes"] == 512  # read back from the QP after RTS
    # 64 KiB reads of 128 packets each, as many as the plan asks (rxe_guest_cases.ONE_CELL)
    assert [c["reads"] for c in path["bulk"]] == [_plan(record).reads_for(64 << 10)]


def test_agent_without_rdma_is_unavailable(guest: GuestResults) -> None:
    record = guest.case("no_rdma")
    assert record["rc"] == 3, _shown(record)
    text = " ".join((record["stdout"] + record["stderr"]).split())
    assert "rdma unavailable on plain" in text, _shown(record)
    assert "no RDMA device" in text


def _p50(table: str, tool: str) -> float:
    for line in table.splitlines():
        if line.startswith(tool + " "):
            return float(line.split()[-3])  # "RTT p50" column
    pytest.fail(f"no {tool} row in:\n{table}")


def test_bench_next_to_perftest(guest: GuestResults, artefact: Callable[[str], None]) -> None:
    record = guest.case("bench")
    assert record["rc"] == 0, _shown(record)
    table = record["stdout"]
    tools = ("ib_write_lat", "ib_read_lat", "netqual", "netqual-python")
    rows = {tool: _p50(table, tool) for tool in tools}
    line = "rxe guest, RTT p50 us (TCG, functional only): " + ", ".join(
        f"{tool} {value:.1f}" for tool, value in rows.items()
    )
    line += f"; netqual ({_loop_kind()}) / 2 x ib_write_lat p50 "
    line += f"{rows['netqual'] / rows['ib_write_lat']:.2f}"
    artefact(line)
    print(table)
    assert all(math.isfinite(v) and v > 0 for v in rows.values()), table
    assert f"full RTT (write ping-pong, {_loop_kind()})" in table, table
    assert "full RTT (write ping-pong, python)" in table, table
