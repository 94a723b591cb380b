"""Many visitors on one served app at once: what each waits for, whether each is shown its own numbers, and what the
server spends (``scripts/app_load.py``).

The app is served as ``make run`` serves it (app/serve.py, the embedded model, the default checkpoint). Its visitors
are clients of Streamlit's own protocol (:mod:`hero_lens_tools.app_client`), cheap enough that sixteen of them run
on the two cores the server is measured on. Each visitor opens Route explorer, routes a prompt of its own (a fresh
held-out text), switches to Memory view and to Compare runs (the default pair, matched compute, on its prompt);
visitor 0 also moves τ one step after its prompt is drawn.

One run measures, each on a fresh server after one opener has visited Route explorer, Compare and Learn (so the
start-up load and the warm-up are behind it):

* **alone**: the visitors one after another, each the server's only visitor. Their times are the lone visitor's
  baseline, their numbers the reference each visitor's numbers are checked against later;
* **N at once**, N = 4, 8, 16: the first N visitors together (started on one barrier).

Per N: median and p95 seconds from each action to its result (a new prompt: to its skip map; Compare: to its table;
Memory: to its metrics) and to the page's end, errors shown, whether each visitor was shown exactly what its prompt
showed alone (or another visitor's), the server's resident memory before, at its peak and after the visitors left,
and its CPU.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hero_core.reports.served_app import embedded_env, served_process
from hero_lens_tools.app_client import Run, Visitor

COMPARE_COLUMNS = ("run", "τ", "param skip %", "ΔNLL vs dense", "KL vs dense", "top-1 agreement %")
QUIET_CORES = 0.1  # the server counts as settled below this many cores used over a second


def held_out_prompts(n: int, tokens: int) -> list[str]:
    """``n`` distinct held-out texts (code and reasoning), each cut to ``tokens`` tokens. (The chat domain's
    texts are the dense model's own replies, generated on demand: too slow to make for a benchmark's prompts.)"""
    from transformers import AutoTokenizer

    from hero_core.backbones.loading import embedded_model_dir
    from hero_core.data.texts import domain_texts

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    by_domain = []
    for domain in ("code", "reasoning"):
        ids = (tokenizer(text, add_special_tokens=False)["input_ids"] for text in domain_texts(domain, "eval", 8 * n))
        by_domain.append([tokenizer.decode(i[:tokens]) for i in ids if len(i) >= tokens])
    # in turn where both domains have texts this long (reasoning texts are ~60-110 tokens: code alone at 200)
    prompts = [p for group in itertools.zip_longest(*by_domain) for p in group if p is not None][:n]
    if len(prompts) < n:
        raise SystemExit(f"fewer than {n} held-out texts have {tokens} tokens")
    return prompts


# -- the server process, read off /proc ---------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def settle(pid: int, timeout: float = 120.0) -> float:
    """Wait until the server uses under :data:`QUIET_CORES` over a second (its background work done or starved),
    at most ``timeout`` s; returns the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        before = cpu_seconds(pid)
        time.sleep(1.0)
        if cpu_seconds(pid) - before < QUIET_CORES:
            break
    return round(time.monotonic() - started, 1)


class PeakMemory:
    """The server's resident memory sampled every quarter second on a thread of its own; ``peak`` in MiB."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, rss_mib(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            try:
                self.peak = max(self.peak, rss_mib(self.pid))
            except (OSError, RuntimeError):
                return

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return round(self.peak, 1)


# -- one visitor -----------------------------------------------------------------------------------------------------
def action(name: str, run: Run, result_s: float | None) -> dict:
    return {"action": name, "result_s": None if result_s is None else round(result_s, 3),
            "done_s": None if run.finished_s is None else round(run.finished_s, 3), "errors": run.errors}


def explorer_numbers(run: Run) -> dict:
    return {"metrics": run.metrics(), "selected": run.markdown("**Selected:**")}


def compare_numbers(run: Run) -> dict | None:
    tables = run.tables()
    if not tables:
        return None
    return {c: tables[0][c] for c in COMPARE_COLUMNS if c in tables[0]}


def visit(base: str, prompt: str, *, moves_tau: bool, start: threading.Barrier | None = None) -> dict:
    """One visitor's whole sequence; returns its actions (timed), what it was shown, and any failure."""
    out: dict = {"actions": [], "shown": {}, "failure": None}
    visitor = None
    try:
        visitor = Visitor(base)
        opened = visitor.open("")
        out["actions"].append(action("open", opened, opened.first("plotly_chart", "explorer_map")))
        if start is not None:
            start.wait()
        routed = visitor.rerun(widgets={"explorer_prompt": prompt, "explorer_route": True})
        out["actions"].append(action("new prompt", routed, routed.first("plotly_chart", "explorer_map")))
        out["shown"]["explorer"] = explorer_numbers(routed)
        if moves_tau:
            tau = round(visitor.value("sb_tau") + 0.01, 2)
            stepped = visitor.rerun(widgets={"sb_tau": tau})
            out["actions"].append(action("τ step", stepped, stepped.first("plotly_chart", "explorer_map")))
            out["shown"]["τ step"] = explorer_numbers(stepped)
        memory = visitor.switch("memory")
        out["actions"].append(action("switch to Memory", memory, memory.first("metric")))
        out["shown"]["memory"] = memory.metrics()
        compare = visitor.switch("compare")
        out["actions"].append(action("switch to Compare", compare, compare.first("dataframe")))
        out["shown"]["compare"] = compare_numbers(compare)
    except Exception as err:  # noqa: BLE001 - a visitor's failure is a result to report, not a crash
        out["failure"] = f"{type(err).__name__}: {err}"[:400]
    finally:
        if visitor is not None:
            visitor.close()
    return out


# -- one server, one load --------------------------------------------------------------------------------------------
def opener(base: str) -> list[dict]:
    """The first visitor: Route explorer, Compare and Learn at their defaults (the model load and the warm-up's
    work behind the server before anyone is measured)."""
    visitor = Visitor(base)
    try:
        rows = []
        for page in ("", "compare", "learn"):
            run = visitor.open(page) if page == "" else visitor.switch(page)
            rows.append(action(f"open {page or 'explorer'}", run, None))
        return rows
    finally:
        visitor.close()


def served(serve: Path | None, env: dict | None = None):
    options = {"serve": serve} if serve is not None else {}
    return served_process(embedded_env() if env is None else env, start_timeout=300, **options)


def load(prompts: list[str], *, together: bool, serve: Path | None = None,
         say: Callable[[str], None] = print) -> dict:
    """``prompts`` visitors on a fresh server, all at once (``together``) or one after another."""
    with served(serve) as (base, proc):
        opened = opener(base)
        settled = settle(proc.pid)
        load_average = round(os.getloadavg()[0], 1)  # the machine's other work, beside this phase
        before = rss_mib(proc.pid)
        peak = PeakMemory(proc.pid)
        cpu, client, wall = cpu_seconds(proc.pid), time.process_time(), time.perf_counter()
        if together:
            barrier = threading.Barrier(len(prompts))
            results: list[dict] = [{}] * len(prompts)

            def one(i: int) -> None:
                results[i] = visit(base, prompts[i], moves_tau=i == 0, start=barrier)

            threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(prompts))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        else:
            results = [visit(base, p, moves_tau=i == 0) for i, p in enumerate(prompts)]
        wall, cpu = time.perf_counter() - wall, cpu_seconds(proc.pid) - cpu
        client = time.process_time() - client
        peak_mib = peak.stop()
        left = settle(proc.pid)
        after = rss_mib(proc.pid)
        say(f"  {len(prompts)} visitor(s) {'at once' if together else 'one after another'}: {wall:.1f} s, server "
            f"CPU {cpu:.1f} s, RSS {before:.0f} -> peak {peak_mib:.0f} -> {after:.0f} MiB after they left")
        return {"visitors": len(prompts), "together": together, "opener": opened, "settled_s": settled,
                "load_average": load_average,
                "results": results, "server": {"rss_before_mib": round(before, 1), "rss_peak_mib": peak_mib,
                                                "rss_after_mib": round(after, 1), "settled_after_s": left,
                                                "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                                                "cores_used": round(cpu / wall, 2)},
                "client_cpu_s": round(client, 2)}


def summarise(runs: dict) -> tuple[list[dict], list[dict]]:
    """The rows and the targets of a load's raw runs (``{"1": alone, "4": ...}``, as :func:`load` returns each):
    recomputed from what was measured, so a change to the summaries redraws the same measurement."""
    alone = runs["1"]
    phases = [summary(runs[key], alone) for key in sorted(runs, key=int)]
    return phases, targets(phases)


# -- summaries -------------------------------------------------------------------------------------------------------
def p95(values: list[float]) -> float:
    """The nearest-rank 95th percentile (the largest value at 20 samples or fewer)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def action_stats(results: list[dict]) -> dict:
    by: dict[str, dict[str, list[float]]] = {}
    for result in results:
        for row in result["actions"]:
            if row["action"] == "open":
                continue
            slot = by.setdefault(row["action"], {"result_s": [], "done_s": []})
            for key in ("result_s", "done_s"):
                if row[key] is not None:
                    slot[key].append(row[key])
    return {name: {"n": len(v["done_s"]), **{f"{key}_{what}": round(fn(v[key]), 3)
                                              for key in ("result_s", "done_s") if v[key]
                                              for what, fn in (("median", statistics.median), ("p95", p95))}}
            for name, v in by.items()}


def ownership(results: list[dict], alone: list[dict]) -> dict:
    """Whether each visitor was shown what its prompt showed alone; where not, whether it was another's."""
    own, others, differs = 0, [], []
    for i, result in enumerate(results):
        shown, reference = result["shown"], alone[i]["shown"]
        if shown == reference:
            own += 1
            continue
        whose = [j for j, other in enumerate(alone)
                 if j != i and shown.get("explorer") == other["shown"].get("explorer")]
        if whose:
            others.append({"visitor": i, "shown_visitor": whose[0]})
        differs.append({"visitor": i, "parts": sorted(k for k in set(shown) | set(reference)
                                                       if shown.get(k) != reference.get(k))})
    return {"own": own, "of": len(results), "another_visitors": others, "differs": differs}


def summary(phase: dict, alone: dict) -> dict:
    results = phase["results"]
    errors = [e for r in results for row in r["actions"] for e in row["errors"]]
    errors += [r["failure"] for r in results if r["failure"]]
    return {"visitors": phase["visitors"], "together": phase["together"], "load_average": phase.get("load_average"),
            "actions": action_stats(results), "errors": errors,
            "ownership": ownership(results, alone["results"]), "server": phase["server"],
            "client_cpu_s": phase["client_cpu_s"]}


def targets(rows: list[dict]) -> list[dict]:
    """The issue's targets per N: no error, every visitor its own numbers, p95 to a new prompt's map within N times
    the lone visitor's median plus 2 s, server RSS at most 2 GiB, RSS back within 10 % after the visitors left.
    The first row is the visitors one after another: N = 1 there, however many came in turn."""
    lone = rows[0]["actions"]["new prompt"]["result_s_median"]
    out = []
    for row in rows:
        n, server = (row["visitors"] if row["together"] else 1), row["server"]
        bound = n * lone + 2.0
        worst = row["actions"].get("new prompt", {}).get("result_s_p95", math.inf)
        growth = server["rss_after_mib"] / server["rss_before_mib"] - 1
        out.append({"visitors": n, "no_error": not row["errors"],
                    "own_numbers": row["ownership"]["own"] == row["ownership"]["of"],
                    "map_p95_s": worst, "map_bound_s": round(bound, 2), "map_met": worst <= bound,
                    "rss_peak_mib": server["rss_peak_mib"], "rss_met": server["rss_peak_mib"] <= 2048,
                    "rss_growth": round(growth, 3), "rss_back_met": growth <= 0.10})
    return out
