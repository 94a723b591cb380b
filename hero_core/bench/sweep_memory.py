"""Peak resident memory of a data-set sweep as the data set grows: ``python -m hero_core sweep bundled:reasoning:N``
for N = 100 and N = 1,000, each in a fresh process, on the tiny random model (the sweep's own memory, not a
backbone's, is what grows with N). Each finished item goes to the rank's shard as it comes
(hero_core.eval.sweep.shards), so what a rank holds while it runs does not grow with N; the merge at the end holds
the final tables (a few rows per item).

``python -m hero_core.bench.sweep_memory [--sizes 100 1000] [--out docs/sweep_memory.json]`` prints each peak and
their ratio (``make bench`` runs it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hero_core.bench.fresh_process import bench_main, child_result

MARKER = "HERO_SWEEP_MEMORY"
SIZES = (100, 1000)


def child(n: int) -> dict:
    """In this (fresh) process: run the sweep command on ``n`` bundled reasoning items of the tiny model as its one
    child process, and report that child's peak resident memory (the kernel keeps it for a waited-for child)."""
    import resource

    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "hero_core", "sweep", f"bundled:reasoning:{n}", "--variant",
                               "hero", "--max-tokens", "64", "--no-match-compute", "--device", "cpu", "--format",
                               "parquet", "--out", out], capture_output=True, text=True,
                              env={**os.environ, "HERO_LENS_TINY": "1"})
        seconds = time.perf_counter() - start
        shards = len(list((Path(out) / "shards").glob("rank*.jsonl")))
    if done.returncode:
        raise SystemExit(f"the sweep of {n} items failed: {done.stderr[-2000:]}")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    return {"items": n, "peak_rss_bytes": int(peak_kib) * 1024, "seconds": round(seconds, 1), "shard_files": shards}


def run_all(sizes=SIZES) -> dict:
    rows = [child_result(__spec__.name, ["--child", str(n)], MARKER, env={**os.environ, "OMP_NUM_THREADS": "1"})
            for n in sizes]
    return {"sizes": rows, "ratio_largest_to_smallest": round(rows[-1]["peak_rss_bytes"] / rows[0]["peak_rss_bytes"],
                                                               3)}


def summary(report: dict) -> list[str]:
    """One line per size and the ratio of the largest's peak to the smallest's."""
    rows = report["sizes"]
    return [*(f"{row['items']:>6} items: peak RSS {row['peak_rss_bytes'] / 2**20:.0f} MiB in {row['seconds']} s "
              f"({row['shard_files']} shard files)" for row in rows),
            f"peak RSS at {rows[-1]['items']} items / at {rows[0]['items']}: "
            f"x{report['ratio_largest_to_smallest']:.3f}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="data-set sizes to sweep")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    return bench_main(parser, MARKER, summary=summary, child=lambda args: child(args.child) if args.child else None,
                      run=lambda args: run_all(tuple(args.sizes)))


if __name__ == "__main__":
    sys.exit(main())
