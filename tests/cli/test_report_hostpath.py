"""The report's "Host path" section and the terminal's host path line, from results whose
``hosts`` come from sysfs trees of the documented layouts (tests/support/sysfs_trees.py):
findings first, the affinity matrix per node, names escaped."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from cli_helpers import netqual
from factories import make_results, write_results
from sysfs_trees import far_nic, hgx8

from netqual.agent import pcisysfs
from netqual.model.hostpath import HostAudit, HostDevice


def _write(tmp_path: Path, extra: tuple[HostAudit, ...] = ()) -> None:
    trees = {
        "gpu01": hgx8(tmp_path / "a", x8_nic="mlx5_3").root,
        "gpu02": far_nic(tmp_path / "b").root,
    }
    hosts = tuple(pcisysfs.audit(root, node) for node, root in trees.items()) + extra
    write_results(
        tmp_path / "r.json", dataclasses.replace(make_results(4, all_safe=True), hosts=hosts)
    )


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_report_lists_findings_first_then_each_nodes_matrix(tmp_path: Path) -> None:
    _write(tmp_path)
    r = netqual("report", "r.json", "--html", "out.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "out.html").read_text()
    section = html[html.index('<h2 id="host-path">') :]
    findings = _text(section[section.index('id="host-findings"') : section.index("</table>")])
    assert findings.index("gpu01 mlx5_3 pcie_link_full") < findings.index(
        "gpu02 GPU0 nic_affinity no NIC below a PCIe switch it shares (best mlx5_0 SYS)"
    )
    assert "32 GT/s x8 of 32 GT/s x16" in findings
    # the 8x8 matrix of gpu01, row GPU2: as nvidia-smi topo -m prints it
    assert "GPU2 PHB PHB PIX PXB SYS SYS SYS SYS" in _text(section)
    assert "GPU0 0000:03:00.0 0 32 GT/s x16 of 32 GT/s x16 mlx5_0 PIX -" in _text(section)
    alert = _text(html[html.index('id="hosts-alert"') : html.index('id="hosts-alert"') + 400])
    assert "Host path: gpu01 mlx5_3:" in alert and "(+2 more: see Host path)" in alert


def test_terminal_line_names_the_first_findings(tmp_path: Path) -> None:
    _write(tmp_path)
    r = netqual("report", "r.json", cwd=tmp_path)
    flat = " ".join(r.stdout.split())
    assert (
        "host path: 3 findings: gpu01 mlx5_3: 0000:19:00.0: trained below its maximum: 32 GT/s x8 "
        "of 32 GT/s x16 (pcie_link_full); gpu02 GPU0: no NIC below a PCIe switch it shares "
        "(best mlx5_0 SYS) (nic_affinity) (+1 more: netqual report --html). "
        "SYS: GPU to NIC across CPU sockets" in flat  # the class said in words where first used
    )


def test_first_screen_alert_says_what_a_pcie_class_means(tmp_path: Path) -> None:
    # issue: PIX/PXB/SYS on the first screen before any explanation
    from netqual.analysis.hostpath import explain_classes

    assert explain_classes("its rail NIC mlx5_4 is SYS (best mlx5_0 PIX)") == (
        "SYS: GPU to NIC across CPU sockets; PIX: GPU and NIC below one PCIe switch"
    )
    assert explain_classes("trained below its maximum") == ""
    hosts = (pcisysfs.audit(far_nic(tmp_path / "b").root, "gpu02"),)
    write_results(
        tmp_path / "r.json", dataclasses.replace(make_results(4, all_safe=True), hosts=hosts)
    )
    r = netqual("report", "r.json", "--html", "out.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "out.html").read_text()
    alert = html[html.index('id="hosts-alert"') :].split(">", 1)[1].split("</div>")[0]
    assert "(best mlx5_0 SYS) (nic_affinity)" in alert
    assert alert.endswith("SYS: GPU to NIC across CPU sockets"), alert


def test_clean_hosts_say_so(tmp_path: Path) -> None:
    hosts = tuple(pcisysfs.audit(hgx8(tmp_path / n).root, n) for n in ("gpu01", "gpu02"))
    write_results(
        tmp_path / "r.json", dataclasses.replace(make_results(4, all_safe=True), hosts=hosts)
    )
    r = netqual("report", "r.json", "--html", "out.html", cwd=tmp_path)
    assert "host path: 16 GPUs, 16 NICs on 2 nodes, no findings" in r.stdout
    html = (tmp_path / "out.html").read_text()
    assert 'id="hosts-alert"' not in html
    assert (
        "No findings: every GPU (16) has a PIX or PXB NIC on its rail; every PCIe link read"
        " (32) runs at its maximum." in html
    )


def test_virtual_nics_without_pcie_links_are_not_claimed_at_their_maximum(
    tmp_path: Path,
) -> None:
    """Issue 36: virtio NICs (no PCIe link in sysfs) showed `unknown xunknown of unknown
    xunknown` under "every PCIe link runs at its maximum"."""
    hosts = tuple(
        HostAudit(n, nics=(HostDevice("eth0", "0000:00:03.0", netdevs=("eth0",)),))
        for n in ("gpu01", "gpu02", "gpu03")
    )
    write_results(
        tmp_path / "r.json", dataclasses.replace(make_results(4, all_safe=True), hosts=hosts)
    )
    r = netqual("report", "r.json", "--html", "out.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = _text((tmp_path / "out.html").read_text())
    assert "xunknown" not in text and "runs at its maximum" not in text
    assert (
        "No findings: no GPU found, so no GPU-NIC affinity to judge; 3 device(s) report no"
        " PCIe link (a virtual NIC, e.g. virtio): link speed not judged." in text
    )
    assert "eth0 0000:00:03.0 unknown unknown eth0" in text


def test_a_nodes_error_text_is_escaped(tmp_path: Path) -> None:
    bad = HostAudit("gpu03", error="gpu03: hostpath.gpus[0].name: <b>x</b>\x1b[31m")
    base = make_results(4, all_safe=True)
    write_results(tmp_path / "r.json", dataclasses.replace(base, hosts=(bad,)))
    r = netqual("report", "r.json", "--html", "out.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "out.html").read_text()
    assert (
        "<b>x</b>" not in html
        and "No host path audit: gpu03: hostpath.gpus[0].name: &lt;b&gt;x&lt;/b&gt;" in html
    )
    assert "\x1b" not in r.stdout
    assert (
        "host path: 1 finding: gpu03 host: no audit: gpu03: hostpath.gpus[0].name: <b>x</b>"
        in r.stdout
    )
