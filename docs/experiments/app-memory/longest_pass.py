"""One process, no server, no cache: the resident memory after passes of growing length with quality (what a page's
trace runs), each followed by gc and malloc_trim. Optional argument: an M_MMAP_THRESHOLD in bytes (0: glibc's own).

    OMP_NUM_THREADS=1 python docs/experiments/app-memory/longest_pass.py 0
    OMP_NUM_THREADS=1 python docs/experiments/app-memory/longest_pass.py 131072
"""

import ctypes
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
LIBC = ctypes.CDLL("libc.so.6")
if len(sys.argv) > 1 and sys.argv[1] != "0":
    LIBC.mallopt(-3, int(sys.argv[1]))  # M_MMAP_THRESHOLD: allocations this large are mmapped, returned on free

from hero_core import load_hero  # noqa: E402
from hero_lens_tools import app_load  # noqa: E402


def rss() -> int:
    gc.collect()
    LIBC.malloc_trim(0)
    return round(app_load.rss_mib(os.getpid()))


def main() -> None:
    prompts = app_load.held_out_prompts(6, 200)
    hero = load_hero()
    hero.trace("warm up", quality=True)
    rows = [("after a short warm-up", rss())]
    start = time.perf_counter()
    for n in (50, 100, 200, 400):
        hero.trace(" ".join(prompts), max_tokens=n, quality=True)
        rows.append((f"after a {n}-token pass", rss()))
    for prompt in prompts:
        hero.trace(prompt, max_tokens=200, quality=True)
    rows.append(("after six more 200-token passes", rss()))
    for what, mib in rows:
        print(f"{what}: {mib} MiB")
    print(f"passes: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
