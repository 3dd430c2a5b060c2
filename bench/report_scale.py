#!/usr/bin/env python3
"""Render the HTML report for synthetic 4-, 64- and 512-node full-mesh runs.

Prints, per size: paths, time to build the records, to write and load results.json
(schema validation included), to render the HTML, and the HTML size. The issue's bar:
512 nodes render in under 10 s into under 20 MB.

    bench/report_scale [--sizes 4,64,512] [--out DIR] [--no-load]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from factories import make_results  # noqa: E402

from netqual.report import write_html  # noqa: E402
from netqual.results import load, write_json  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="4,64,512", help="comma-separated node counts")
    ap.add_argument("--out", type=Path, default=None, help="keep results and reports here")
    ap.add_argument(
        "--no-load", action="store_true", help="skip writing and re-loading results.json"
    )
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="netqual-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"{'nodes':>6} {'paths':>8} {'build_s':>8} {'json_MB':>8} {'load_s':>7} "
        f"{'render_s':>9} {'html_MB':>8}"
    )
    for n in (int(x) for x in args.sizes.split(",")):
        t0 = time.perf_counter()
        results = make_results(
            n,
            slow_nodes=["gpu03"],
            slow_rack_pairs=[("r01", "r02")],
            marginal_fraction=0.002,
            error_paths=2,
        )
        build_s = time.perf_counter() - t0
        json_mb = load_s = float("nan")
        if not args.no_load:
            rfile = out / f"results-{n}.json"
            write_json(rfile, results)
            json_mb = rfile.stat().st_size / 1e6
            t0 = time.perf_counter()
            results = load(rfile)
            load_s = time.perf_counter() - t0
        html = out / f"report-{n}.html"
        t0 = time.perf_counter()
        write_html(results, html)
        render_s = time.perf_counter() - t0
        html_mb = html.stat().st_size / 1e6
        print(
            f"{n:>6} {len(results.paths):>8} {build_s:>8.2f} {json_mb:>8.1f} {load_s:>7.2f} "
            f"{render_s:>9.2f} {html_mb:>8.2f}"
        )
    print(f"files in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
