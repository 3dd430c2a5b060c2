"""The report's page script and ``units.format_us`` write a number the same way: the drill-down
shows what the terminal and the verdict reasons show (1250.5 us is "1,250 us" in both; Python
rounds an exact tie to the even digit, so the script must too). Sizes and durations too: the
script's ``size`` is ``units.format_size`` (8126464 bytes is "7.75MiB", never "7936KiB"),
its ``duration`` is ``units.format_duration_us`` (686,332 us is "686.3 ms").

The script's own functions are taken from templates/_report.js and run in node and in the
headless chromium the browser tests use (tests/support/browser.py).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from browser import chromium

from netqual.base.units import format_duration_us, format_size, format_us

SCRIPT = Path(__file__).resolve().parents[2] / "templates" / "_report.js"
NODE = shutil.which("node") or shutil.which("nodejs")


def _values() -> list[float]:
    rng = random.Random(19)
    ties = [k + 0.5 for k in range(1000, 1040)] + [k / 8 for k in range(0, 80)]
    ties += [k / 4 + 10 for k in range(0, 40)] + [1e7 + 0.5, 2_500_000.5]
    edges = [0.0, 0.005, 9.995, 9.999, 10.0, 48.25, 48.35, 999.95, 999.96, 1000.0, 1250.5]
    spread = [round(rng.uniform(lo, hi), rng.choice((1, 2, 3, 6))) for lo, hi in
              ((0, 10), (10, 1000), (1000, 1e7)) for _ in range(300)]  # fmt: skip
    return ties + edges + spread


def _sizes() -> list[int]:
    rng = random.Random(23)
    kib, mib, gib = 1 << 10, 1 << 20, 1 << 30
    round_ = [0, 1, 100, 1000, 1023, kib, 1536, 64 * kib, 7936 * kib, 1025 * kib, mib, 8 * mib]
    round_ += [1_024_000_000, 3 * gib // 2, 10 * gib, 7936 * kib + 1, 100_000, 123_456_789]
    return round_ + [rng.randrange(1, 1 << 36) for _ in range(300)]


FORMATTERS = ("fixed", "us", "size", "duration")


def _formatters() -> str:
    """The script's number functions, as written in the page."""
    text = SCRIPT.read_text(encoding="utf-8")
    found = [re.search(rf"^ *(function {name}\(.*)$", text, re.M) for name in FORMATTERS]
    assert all(found), f"templates/_report.js lost one of its formatters {FORMATTERS}"
    return "\n".join(m.group(1) for m in found if m)


def _run_js(engine: str, values: list[float], tmp_path: Path, fn: str = "us") -> list[str]:
    each = f"function (v) {{ return {fn}(v); }}"
    body = f"{_formatters()}\nvar out = {json.dumps(values)}.map({each});\n"
    if engine == "node":
        if NODE is None:
            pytest.skip("node is not installed")
        script = tmp_path / "fmt.js"
        script.write_text(body + "console.log(JSON.stringify(out));\n", encoding="utf-8")
        done = subprocess.run(
            [NODE, str(script)], check=False, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        got: list[str] = json.loads(done.stdout)
        return got
    page = tmp_path / "fmt.html"
    page.write_text(
        f"<pre id=out></pre><script>{body}"
        "document.getElementById('out').textContent = JSON.stringify(out);</script>",
        encoding="utf-8",
    )
    done = chromium(tmp_path, "--dump-dom", page.as_uri())
    m = re.search(r'<pre id="out">(.*?)</pre>', done.stdout, re.S)
    assert m is not None, done.stderr[-2000:]
    got = json.loads(m.group(1).replace("&quot;", '"'))
    return got


@pytest.mark.parametrize("engine", ["node", "chromium"])
def test_report_script_formats_microseconds_exactly_as_format_us(
    engine: str, tmp_path: Path
) -> None:
    values = _values()
    js = _run_js(engine, values, tmp_path)
    assert js[values.index(1250.5)] == "1,250 us" == format_us(1250.5, unit=True)
    wrong = [(v, a, format_us(v, unit=True)) for v, a in zip(values, js, strict=True)
             if a != format_us(v, unit=True)]  # fmt: skip
    assert wrong == []


@pytest.mark.parametrize("engine", ["node", "chromium"])
def test_report_script_formats_sizes_and_durations_as_the_terminal(
    engine: str, tmp_path: Path
) -> None:
    sizes = _sizes()
    js = _run_js(engine, [float(n) for n in sizes], tmp_path, "size")
    assert js[sizes.index(7936 << 10)] == "7.75MiB" == format_size(7936 << 10)
    assert [(n, a) for n, a in zip(sizes, js, strict=True) if a != format_size(n)] == []
    values = _values()
    js = _run_js(engine, values, tmp_path, "duration")
    assert js[values.index(2_500_000.5)] == "2.50 s" == format_duration_us(2_500_000.5)
    wrong = [(v, a, format_duration_us(v)) for v, a in zip(values, js, strict=True)
             if a != format_duration_us(v)]  # fmt: skip
    assert wrong == []
