"""Every pyverbs call the transport makes exists, with those arguments, in the installed module.

Three checks against the real pyverbs (Debian's python3-pyverbs in CI):
1. ``verbs.REQUIRED_API`` (what ``verbs.load`` insists on) is all there;
2. the builders in ``verbs.py`` (the only place that passes keyword arguments to pyverbs)
   construct real objects, and the values land where the transport expects them;
3. a scan of the transport's source: every attribute used on a variable that holds a
   pyverbs object (``ctx``, ``qp``, ``attr``, ``wc``, ...) exists on the real class, and no
   keyword arguments reach pyverbs outside the builders.
Objects that need a device (Context, PD, MR, CQ, QP) are built as far as the kernel allows.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

from netqual.base.errors import TransportUnavailableError
from netqual.transports.rdma import verbs

RDMA_DIR = Path(verbs.__file__).parent
SOURCES = [*sorted(RDMA_DIR.glob("*.py")), RDMA_DIR.parents[1] / "agent" / "doctor.py"]

# Variable (or attribute) names that hold pyverbs objects in the transport's source.
RECEIVERS = {
    "ctx": "device.Context",
    "dev_attr": "device.DeviceAttr",
    "port_attr": "device.PortAttr",
    "pd": "pd.PD",
    "mr": "mr.MR",
    "cq": "cq.CQ",
    "wc": "cq.WC",
    "qp": "qp.QP",
    "init": "qp.QPInitAttr",
    "attr": "qp.QPAttr",
    "wr": "wr.SendWR",
    "plain": "wr.SendWR",
    "signalled": "wr.SendWR",
    "sg": "wr.SGE",
}
KEYWORD_CALLS_OUTSIDE_BUILDERS = {("device", "Context", ("name",))}


@pytest.fixture(scope="module")
def pv() -> verbs.Pyverbs:
    try:
        return verbs.load()
    except TransportUnavailableError as err:
        pytest.skip(f"pyverbs not importable here: {err}")


def _cls(pv: verbs.Pyverbs, dotted: str) -> Any:
    module, name = dotted.split(".")
    return getattr(getattr(pv, module), name)


def test_required_api_is_present(pv: verbs.Pyverbs) -> None:
    assert verbs.missing_api(pv) == []


def _receiver(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _uses() -> list[tuple[str, str, str, int]]:
    """(receiver, attribute, file, line) for every attribute read/write on a pyverbs object."""
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                recv = _receiver(node.value)
                if isinstance(node.value, ast.Attribute) and _receiver(node.value.value) == "pv":
                    continue  # pv.qp.QP: a module of the import, not a QP object
                if recv in RECEIVERS:
                    found.append((recv, node.attr, path.name, node.lineno))
    return found


def test_every_attribute_used_exists_on_the_real_class(pv: verbs.Pyverbs) -> None:
    uses = _uses()
    assert len(uses) >= 40, "the scan found too little: did the naming convention change?"
    missing = [
        f"{file}:{line}: {recv}.{attr} ({RECEIVERS[recv]})"
        for recv, attr, file, line in uses
        if not hasattr(_cls(pv, RECEIVERS[recv]), attr)
    ]
    assert missing == []


def _pyverbs_calls() -> list[tuple[str, str, tuple[str, ...], str]]:
    """(module, class, keyword names, file) for every ``pv.<module>.<Class>(...)`` call."""
    calls = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            owner = node.func.value
            if isinstance(owner, ast.Attribute) and _receiver(owner.value) == "pv":
                kws = tuple(k.arg or "**" for k in node.keywords)
                calls.append((owner.attr, node.func.attr, kws, path.name))
    return calls


def test_constructors_exist_and_keywords_only_in_builders(pv: verbs.Pyverbs) -> None:
    calls = _pyverbs_calls()
    assert len(calls) >= 12
    for module, name, kws, file in calls:
        assert hasattr(getattr(pv, module), name), f"{file}: pv.{module}.{name}"
        if kws and file != "verbs.py":
            assert (module, name, kws) in KEYWORD_CALLS_OUTSIDE_BUILDERS, (file, module, name, kws)


def test_positional_constructors_match_the_documented_order(pv: verbs.Pyverbs) -> None:
    """PD(ctx), MR(pd, length, access), CQ(ctx, cqe, cq_context, channel, comp_vector)."""

    def params(doc: str | None) -> list[str]:
        return [
            line.split(":param ")[1].split(":")[0]
            for line in (doc or "").splitlines()
            if ":param " in line
        ]

    assert params(pv.mr.MR.__init__.__doc__)[:3] == ["creator", "length", "access"]
    assert params(pv.cq.CQ.__init__.__doc__)[:5] == [
        "context",
        "cqe",
        "cq_context",
        "channel",
        "comp_vector",
    ]
    assert params(pv.pd.PD.__init__.__doc__)[:1] == ["creator"]
    assert "init_attr" in (pv.qp.QP.__init__.__doc__ or "")


def test_builders_make_real_objects(pv: verbs.Pyverbs) -> None:
    cap = verbs.qp_cap(pv, 64, 64)
    assert (cap.max_send_wr, cap.max_inline_data) == (64, 64)
    init = verbs.qp_init_attr(pv, None, cap)
    assert (init.qp_type, init.sq_sig_all, init.max_send_wr, init.max_inline_data) == (2, 0, 64, 64)
    gid = "0000:0000:0000:0000:0000:ffff:0a00:010b"
    roce = verbs.ah_attr(pv, 1, dlid=0, dgid=gid, sgid_index=3, traffic_class=0)
    assert (roce.is_global, roce.hop_limit, roce.sgid_index, roce.dgid) == (1, 255, 3, gid)
    ib = verbs.ah_attr(pv, 1, dlid=7, dgid=None, sgid_index=0, traffic_class=0)
    assert (ib.is_global, ib.dlid) == (0, 7)
    attr = verbs.qp_attr(pv, 1, 5)
    attr.ah_attr = roce
    attr.max_rd_atomic = 16
    assert (attr.port_num, attr.path_mtu, attr.ah_attr.hop_limit, attr.max_rd_atomic) == (
        1,
        5,
        255,
        16,
    )
    sge = verbs.sge(pv, 0x1000, 64, 0x42)
    wr = verbs.send_wr(pv, 7, verbs.WR_RDMA_WRITE, sge, verbs.SEND_INLINE)
    wr.set_wr_rdma(0xDEAD, 0x2000)
    assert (wr.wr_id, wr.opcode, wr.send_flags, wr.num_sge) == (7, 0, 8, 1)
    read = verbs.send_wr(pv, 1, verbs.WR_RDMA_READ, sge, verbs.SEND_SIGNALED)
    assert read.opcode == 4


def test_unknown_keyword_would_be_caught(pv: verbs.Pyverbs) -> None:
    """The builders' check above is meaningful: pyverbs refuses a misspelt keyword."""
    with pytest.raises(TypeError):
        pv.qp.QPCap(max_inline=64)


def test_device_objects_as_far_as_the_kernel_allows(pv: verbs.Pyverbs) -> None:
    if verbs.rdma_sysfs_devices():
        pytest.skip("this machine has RDMA devices; test_rdma_hw.py covers them")
    with pytest.raises(pv.error):
        pv.device.get_device_list()
    # The keyword is accepted; the failure is the missing device, not the call.
    with pytest.raises(pv.error) as info:
        pv.device.Context(name="mlx5_0")
    assert not isinstance(info.value, TypeError)
    assert inspect.isclass(pv.qp.QP) and inspect.isclass(pv.mr.MR)
