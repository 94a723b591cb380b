"""The answers suite: its data, its checks, the runner's columns and answer-token cost, answers_kept, the CLI."""

import copy
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from hero_core.eval.answers import prompts as answers_prompts
from hero_core.eval.answers import references
from hero_core.eval.answers import run as answers
from hero_core.eval.benchmarks import humaneval

CATEGORIES = ("facts", "arithmetic", "word_problems", "code", "instructions")


@pytest.fixture(scope="module")
def rows():
    return answers.load_rows()


def _row(check, **extra):
    return {"id": "x", "category": "facts", "prompt": "?", "check": check, "max_new_tokens": 8, **extra}


# -- the data --------------------------------------------------------------------------------------
def test_the_file_has_every_category_and_distinct_ids(rows):
    assert len(rows) >= 220
    counts = {c: sum(r["category"] == c for r in rows) for c in CATEGORIES}
    assert set(counts) == {r["category"] for r in rows} and min(counts.values()) >= 25, counts
    assert counts["facts"] >= 70 and counts["code"] == 30
    assert len({r["id"] for r in rows}) == len(rows)
    assert all(isinstance(r["max_new_tokens"], int) and r["max_new_tokens"] > 0 for r in rows)


def test_the_generator_rewrites_the_same_rows(rows):
    assert answers_prompts.build_rows() == rows


def test_no_answer_is_given_away_by_its_question(rows):
    for row in rows:
        check = row["check"]
        if check["type"] == "contains_any":
            assert not answers._contains_any(row["prompt"], check["answers"]), row["id"]
        if check["type"] == "integer":  # else repeating the question could pass the last-number rule
            assert str(check["value"]) not in re.findall(r"\d+", row["prompt"]), row["id"]


def test_code_rows_are_humaneval_tasks_in_the_chat_style(rows):
    problems = {p.task_id: p for p in humaneval.load_problems()}
    for row in (r for r in rows if r["category"] == "code"):
        problem = problems[row["check"]["task_id"]]
        assert row["prompt"] == humaneval.CHAT_INSTRUCTION.format(prompt=problem.prompt)
        assert row["assistant_prefix"] == "```python\n" and tuple(row["stop"]) == humaneval.CHAT_STOP_SEQUENCES


def test_no_prompt_is_training_data(rows):
    from hero_core.data.reasoning import reasoning_problems
    from hero_core.data.texts import chat_prompts, code_texts

    chat = chat_prompts("train") + chat_prompts("eval")
    for row in rows:
        assert not any(row["prompt"] in prompt for prompt in chat), row["id"]
    reasoning = [p.text for p in reasoning_problems(3000, "train")]
    for row in (r for r in rows if r["category"] in ("arithmetic", "word_problems")):
        assert not any(row["prompt"] in text for text in reasoning), row["id"]
    stdlib = "\n".join(code_texts("train"))  # the training code is the standard library
    for row in (r for r in rows if r["category"] == "code"):
        problem = next(p for p in humaneval.load_problems() if p.task_id == row["check"]["task_id"])
        assert problem.prompt.strip() not in stdlib, row["id"]


def test_select_rows_takes_each_category_in_turn(rows):
    picked = answers.select_rows(rows, 6)
    assert [r["category"] for r in picked].count("facts") == 2
    assert {r["category"] for r in picked} == set(CATEGORIES)
    assert answers.select_rows(rows, None) == rows
    with pytest.raises(ValueError, match="limit"):
        answers.select_rows(rows, 0)


# -- checking --------------------------------------------------------------------------------------
@pytest.mark.parametrize("check, text, expected", [
    ({"type": "contains_any", "answers": ["Paris"]}, "The capital of France is Paris.", True),
    ({"type": "contains_any", "answers": ["Paris"]}, "It is Lyon.", False),
    ({"type": "contains_any", "answers": ["red"]}, "The hill was covered in snow.", False),
    ({"type": "contains_any", "answers": ["8", "eight"]}, "A spider has Eight legs.", True),
    ({"type": "contains_any", "answers": ["8", "eight"]}, "It has 18 legs.", False),
    ({"type": "contains_any", "answers": ["blue whale"]}, "The Blue Whale is the largest.", True),
    ({"type": "integer", "value": 42}, "17 + 25 = 42.", True),
    ({"type": "integer", "value": 42}, "The answer is 42, since 17 + 25 makes it.", True),
    ({"type": "integer", "value": 42}, "I think it is 41.", False),
    ({"type": "integer", "value": 1000}, "That makes 1,000 in all.", True),
    ({"type": "integer", "value": 42}, "I do not know.", False),
    ({"type": "integer", "value": 52}, "2 + 50 = 52\n\nIt is a sum: 2 + 50 is made of 2 and 50.", True),
    ({"type": "integer", "value": 17}, "First 7 * 3 = 21. Then 21 - 4 = 17 beads, out of 21.", True),
    ({"type": "integer", "value": 52}, "2 + 50 = 15. So the answer is 52.", True),
    ({"type": "integer", "value": 52}, "2 + 50 = 25, which is about 52 in all.", False),
    ({"type": "one_word", "answers": ["red"]}, "Red.", True),
    ({"type": "one_word", "answers": ["red"]}, "**Red**", True),
    ({"type": "one_word", "answers": ["red"]}, "The colour is red.", False),
    ({"type": "one_word", "answers": ["red"]}, "Blue", False),
    ({"type": "one_word"}, "Anything", True),
    ({"type": "uppercase", "answers": ["yellow"]}, "YELLOW!", True),
    ({"type": "uppercase", "answers": ["yellow"]}, "Yellow", False),
    ({"type": "uppercase", "answers": ["yellow"]}, "GREEN", False),
    ({"type": "uppercase"}, "12345", False),
    ({"type": "lowercase", "answers": ["madrid"]}, "madrid", True),
    ({"type": "lowercase", "answers": ["madrid"]}, "Madrid", False),
    ({"type": "yes_no", "value": "yes"}, "Yes, the Sun is a star.", True),
    ({"type": "yes_no", "value": "yes"}, "No.", False),
    ({"type": "yes_no", "value": "no"}, "no", True),
    ({"type": "yes_no", "value": "yes"}, "Well, yes.", False),
    ({"type": "comma_list", "count": 3}, "apple, banana, cherry", True),
    ({"type": "comma_list", "count": 3, "answers": ["red", "orange", "yellow"]},
     "Here are three colours: red, orange, and yellow.", True),
    ({"type": "comma_list", "count": 3}, "apple, banana", False),
    ({"type": "comma_list", "count": 3}, "apple, apple, banana", False),
    ({"type": "comma_list", "count": 3, "answers": ["red", "orange", "yellow"]}, "red, orange, banana", False),
    ({"type": "comma_list", "count": 3},
     "I like apples, and bananas are nice too, and cherries are the best fruit of all", False),
    ({"type": "comma_list", "count": 3}, "", False),
])
def test_check_answer(check, text, expected):
    assert answers.check_answer(_row(check), text) is expected


def test_check_answer_runs_humaneval_tests():
    row = _row({"type": "humaneval", "task_id": "HumanEval/53"}, category="code")  # add(x, y)
    assert answers.check_answer(row, "def add(x: int, y: int):\n    return x + y\n```\nThis adds them.")
    assert not answers.check_answer(row, "def add(x: int, y: int):\n    return x - y\n```")
    assert not answers.check_answer(row, "I cannot write code.")
    with pytest.raises(ValueError, match="unknown HumanEval task"):
        answers.check_answer(_row({"type": "humaneval", "task_id": "HumanEval/9999"}), "pass")


def test_bad_checks_and_rows_say_what_is_wrong():
    with pytest.raises(ValueError, match="unknown check type 'regex'"):
        answers.check_answer(_row({"type": "regex"}), "text")
    with pytest.raises(ValueError, match="needs 'value'"):
        answers.check_answer(_row({"type": "integer"}), "3")
    with pytest.raises(ValueError, match="no answers rows"):
        answers.check_rows([])
    with pytest.raises(ValueError, match="lacks"):
        answers.check_rows([{"id": "a", "prompt": "?"}])
    with pytest.raises(ValueError, match="distinct ids"):
        answers.check_rows([_row({"type": "one_word"}), _row({"type": "one_word"})])


# -- running ---------------------------------------------------------------------------------------
def test_answer_cost_counts_only_the_answer_tokens(tiny):
    text, trace = tiny.generate("What is 2 + 2?", max_new_tokens=6, variant="hero", chat_template=True)
    n_prompt = trace.n_prompt_tokens
    assert n_prompt == len(tiny.tokenizer(tiny.format_prompt("What is 2 + 2?", True))["input_ids"])
    n_answer = trace.n_tokens - n_prompt
    assert n_answer > 0, "the tiny model stopped at once: pick another prompt"
    known = copy.deepcopy(trace)  # every prompt token runs every FFN, every answer token skips every FFN
    known.executed = np.ones_like(trace.executed)
    known.executed[:, n_prompt:] = False
    cost = answers.answer_cost(known)
    all_skipped = known.n_routed * known.profile.ffn_params / known.profile.total_params
    assert cost["n_prompt_tokens"] == n_prompt and cost["n_answer_tokens"] == n_answer
    assert cost["answer_param_skip"] == pytest.approx(all_skipped)
    assert cost["param_skip"] == pytest.approx(all_skipped * n_answer / known.n_tokens)
    assert cost["param_skip"] == pytest.approx(known.param_skip)
    prompt_only = copy.deepcopy(known)
    prompt_only.n_prompt_tokens = None  # a trace of a prompt alone has no answer tokens
    assert math.isnan(answers.answer_cost(prompt_only)["answer_param_skip"])


def test_run_answers_columns_and_costs(tiny, rows):
    picked = [next(r for r in rows if r["category"] == c) for c in ("facts", "arithmetic", "code")]
    frame = answers.run_answers(tiny, ["hero"], picked, max_new_tokens=5)
    assert list(frame.columns) == list(answers.COLUMNS)
    assert len(frame) == 6 and list(dict.fromkeys(frame["method"])) == ["dense", "hero"]
    assert frame["correct"].dtype == bool
    dense = frame[frame["method"] == "dense"]
    assert (dense["param_skip"] == 0).all() and (dense["answer_param_skip"].fillna(0) == 0).all()
    for row in picked:  # the frame's answer-token cost is that of the same greedy generation, prompt excluded
        got = frame[(frame["method"] == "hero") & (frame["id"] == row["id"])].iloc[0]
        text, trace = answers._generate(tiny, row, "hero", None, 5)
        assert got["text"] == text and got["correct"] == answers.check_answer(row, text)
        prompt = tiny.format_prompt(row["prompt"], True) + row.get("assistant_prefix", "")
        assert got["n_prompt_tokens"] == len(tiny.tokenizer(prompt)["input_ids"]) == trace.n_prompt_tokens
        expected = answers.answer_cost(trace)
        assert got["n_answer_tokens"] == expected["n_answer_tokens"] == trace.n_tokens - trace.n_prompt_tokens
        for key in ("answer_param_skip", "param_skip"):
            assert got[key] == pytest.approx(expected[key], nan_ok=True)


def test_run_answers_refuses_bad_input(tiny, rows):
    from hero_core.eval.methods import HeroMethod

    with pytest.raises(ValueError, match="no answers rows"):
        answers.run_answers(tiny, ["hero"], [])
    with pytest.raises(ValueError, match="unknown variant"):
        answers.run_answers(tiny, ["bogus"], rows[:1])
    with pytest.raises(ValueError, match="policy"):
        answers.run_answers(tiny, [HeroMethod(tiny, "hero", policy=lambda *a: None)], rows[:1])
    with pytest.raises(ValueError, match="distinct"):
        answers.run_answers(tiny, ["hero", "hero"], rows[:1])


# -- what a method keeps ---------------------------------------------------------------------------
def _frame(dense: list[bool], method: list[bool], categories: list[str]) -> pd.DataFrame:
    records = []
    for name, correct in (("dense", dense), ("hero", method)):
        for i, (ok, category) in enumerate(zip(correct, categories)):
            skip = 0.0 if name == "dense" else 0.1 * (i + 1)
            records.append({"id": f"q{i}", "category": category, "method": name, "correct": ok,
                            "n_answer_tokens": 10, "answer_param_skip": skip, "n_tokens": 40,
                            "param_skip": skip / 2})
    return pd.DataFrame(records)


def test_answers_kept_on_a_hand_built_frame():
    frame = _frame([True, True, True, True, False], [True, True, False, True, True],
                   ["facts", "facts", "code", "code", "code"])
    result = answers.answers_kept(frame, "hero")
    overall = result["overall"]
    assert overall["kept"] == 0.75 and overall["kept_low"] <= 0.75 <= overall["kept_high"]
    assert overall["dense_accuracy"] == overall["method_accuracy"] == 0.8
    assert overall["dense_correct"] == 4 and overall["gained"] == 1 and overall["n"] == 5
    assert overall["answer_param_skip"] == pytest.approx(0.3)
    assert result["categories"]["facts"]["kept"] == 1.0
    assert result["categories"]["code"]["kept"] == 0.5 and result["categories"]["code"]["dense_accuracy"] == 2 / 3


def test_answers_kept_without_dense_successes_and_bad_frames():
    frame = _frame([False, False], [True, False], ["facts", "facts"])
    overall = answers.answers_kept(frame, "hero")["overall"]
    assert overall["kept"] is None and overall["kept_low"] is None and overall["method_accuracy"] == 0.5
    with pytest.raises(ValueError, match="no rows for method 'local'"):
        answers.answers_kept(frame, "local")
    with pytest.raises(ValueError, match="same prompts"):
        answers.answers_kept(frame.drop(index=3), "hero")


def test_answers_report_is_strict_json():
    frame = _frame([True, False], [True, True], ["facts", "code"])
    frame["text"] = ["Paris", "x"] * 2
    frame.loc[0, "answer_param_skip"] = float("nan")
    report = answers.answers_report(frame, keep_texts=False)
    text = json.dumps(report, allow_nan=False)
    assert set(report["kept"]) == {"hero"} and '"text"' not in text and report["items"][0]["answer_param_skip"] is None


def test_cli_answers_on_the_tiny_model(tmp_path, monkeypatch):
    from hero_core.cli import main as cli

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    out = tmp_path / "answers.json"
    assert cli.main(["eval", "--answers", "--limit", "2", "--answers-tokens", "3", "--quiet", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert list(report["kept"]) == ["tiny-random"] and report["config"]["rows"] == 2
    assert {i["category"] for i in report["items"]} == {"facts", "arithmetic"} and len(report["items"]) == 4
    assert cli.main(["eval", "--answers", "--limit", "0", "--quiet"]) == 2
    # --random and --oracle add a reference at the checkpoint's own calibration skip, recorded in the config with
    # its skip probability or the oracle threshold that realises that skip
    for flag, name, setting, most in (("--random", "random@tiny-random", "skip_probability", 1.0),
                                      ("--oracle", "oracle@tiny-random", "threshold", 4.0)):
        assert cli.main(["eval", "--answers", flag, "--limit", "1", "--answers-tokens", "2", "--quiet",
                         "--out", str(out)]) == 0
        report = json.loads(out.read_text())
        reference = report["config"]["references"][name]
        assert list(report["kept"]) == ["tiny-random", name] and 0 < reference[setting] <= most
        assert reference["checkpoint"] == "tiny-random" and reference["param_skip"] >= 0


def test_a_stopped_run_resumes_from_its_stored_answers(tiny, rows, tmp_path, monkeypatch):
    picked = answers.select_rows(rows, 3)
    first = answers.run_answers(tiny, ["hero"], picked, max_new_tokens=4, resume_dir=tmp_path)
    assert len(list(tmp_path.glob("*.jsonl"))) == 2  # dense and hero, one file each
    # A torn last line (a run killed mid-write) is ignored, not fatal.
    with open(next(tmp_path.glob("dense*.jsonl")), "a", encoding="utf-8") as fh:
        fh.write('{"max_new_tokens": 4, "rec')
    calls = []
    monkeypatch.setattr(answers, "_generate", lambda *a: calls.append(a) or (_ for _ in ()).throw(AssertionError))
    again = answers.run_answers(tiny, ["hero"], picked, max_new_tokens=4, resume_dir=tmp_path)
    assert not calls
    assert again[["id", "method", "correct", "text"]].equals(first[["id", "method", "correct", "text"]])
    # Another token cap is another answer: generated again, not read back.
    with pytest.raises(AssertionError):
        answers.run_answers(tiny, ["hero"], picked, max_new_tokens=5, resume_dir=tmp_path)


def test_an_earlier_reports_answers_are_reused_not_generated_again(tiny, rows, tmp_path, monkeypatch):
    picked = answers.select_rows(rows, 3)
    first = answers.run_answers(tiny, ["hero"], picked, max_new_tokens=4)
    from hero_core.eval.methods import HeroMethod

    twin = HeroMethod(tiny, "no_history", 0.45, name="local@hero")  # a matched twin runs at its own tau
    extra = answers.run_answers(tiny, [twin], picked, max_new_tokens=4).query("method != 'dense'")
    first = pd.concat([first, extra], ignore_index=True)
    report = answers.answers_report(first)
    report["config"] = {"backbone": tiny.backbone.name, "checkpoints": ["hero"], "tau": None, "answers_tokens": 4,
                        "matched": {"hero": {"method": "local@hero", "tau": 0.45}}}
    assert answers.seed_from_report(report, tmp_path, picked, tiny.backbone.name) == 9  # 3 prompts x 3 runs
    assert answers.seed_from_report(report, tmp_path, picked, tiny.backbone.name) == 0  # already there
    calls = []
    monkeypatch.setattr(answers, "_generate", lambda *a: calls.append(a) or (_ for _ in ()).throw(AssertionError))
    again = answers.run_answers(tiny, ["hero", twin], picked, max_new_tokens=4, resume_dir=tmp_path)
    assert not calls
    assert again[["id", "method", "correct", "text"]].equals(first[["id", "method", "correct", "text"]])
    with pytest.raises(ValueError, match="not on"):
        answers.seed_from_report(report, tmp_path, picked, "another-backbone")


def test_the_random_reference_skips_at_its_rate_and_reads_back_the_same_answers(tiny, rows, tmp_path, monkeypatch):
    picked = answers.select_rows(rows, 3)
    everything = references.random_skip_at(tiny, 1.0, "random@all")  # every FFN skipped: adapters only
    frame = answers.run_answers(tiny, [everything], picked, max_new_tokens=4, resume_dir=tmp_path)
    from hero_core.measures.accounting import token_compute

    routed = frame[frame["method"] == "random@all"]
    no_ffn = token_compute(np.zeros((tiny.config.n_routed, 1), dtype=bool), tiny.profile)["param_skip"][0]
    assert len(routed) == 3 and no_ffn > 0 and np.allclose(routed["param_skip"], no_ffn)
    nothing = references.random_skip_at(tiny, 0.0, "random@none")  # no FFN skipped: dense's answers
    same = answers.run_answers(tiny, [nothing], picked, max_new_tokens=4).set_index(["method", "id"])["text"]
    assert same["random@none"].equals(same["dense"])
    # Seeded per prompt: one prompt answered alone draws what it drew among others, and a resumed run reads the
    # stored answers back (stored under a key holding the rate, so another rate is generated anew).
    half = references.random_skip_at(tiny, 0.5, "random@half")
    together = answers.run_answers(tiny, [half], picked, max_new_tokens=4, resume_dir=tmp_path)
    alone = answers.run_answers(tiny, [half], picked[2:], max_new_tokens=4)
    last = together[together["id"] == picked[2]["id"]]
    columns = ["text", "param_skip"]  # the same draws: the same skipped FFNs, not only the same words
    assert alone.query("method == 'random@half'")[columns].values.tolist() == \
        last.query("method == 'random@half'")[columns].values.tolist()
    assert len(list(tmp_path.glob("random@half_p0.5_*.jsonl"))) == 1
    calls = []
    monkeypatch.setattr(answers, "_generate", lambda *a: calls.append(a) or (_ for _ in ()).throw(AssertionError))
    again = answers.run_answers(tiny, [half], picked, max_new_tokens=4, resume_dir=tmp_path)
    assert not calls and again["text"].tolist() == together["text"].tolist()
    with pytest.raises(AssertionError):  # the same name at another rate is not the stored run
        answers.run_answers(tiny, [references.random_skip_at(tiny, 0.25, "random@half")], picked,
                            max_new_tokens=4, resume_dir=tmp_path)


def test_random_reference_rate_matches_the_param_skip(tiny):
    from hero_core.measures.accounting import ffns_for_param_skip

    reference = references.random_reference(tiny, 0.02, "random@tiny")
    assert reference.setting == pytest.approx(ffns_for_param_skip(0.02, tiny.profile) / tiny.config.n_routed)
    assert 0 < reference.setting < 1
    with pytest.raises(ValueError, match="out of reach"):  # the tiny model's FFNs hold ~3 % of its parameters
        references.random_reference(tiny, 0.2, "random@tiny")


def test_the_oracle_reference_skips_by_its_threshold_and_is_matched_to_a_skip(tiny, rows, tmp_path):
    from hero_core.eval.calibration import calibration_blocks
    from hero_core.measures.accounting import token_compute

    picked = answers.select_rows(rows, 2)
    keeps_all = references.oracle_at(tiny, 0.0, "oracle@none")  # no error is below 0: dense's answers
    skips_all = references.oracle_at(tiny, 1e9, "oracle@all")  # every error is below: adapters only
    frame = answers.run_answers(tiny, [keeps_all, skips_all], picked, max_new_tokens=4, resume_dir=tmp_path)
    texts = frame.set_index(["method", "id"])["text"]
    assert texts["oracle@none"].equals(texts["dense"])
    no_ffn = token_compute(np.zeros((tiny.config.n_routed, 1), dtype=bool), tiny.profile)["param_skip"][0]
    assert np.allclose(frame.query("method == 'oracle@all'")["param_skip"], no_ffn)
    assert len(list(tmp_path.glob("oracle@all_e1e_09_*.jsonl"))) == 1  # stored under its threshold
    blocks = calibration_blocks(tiny, n_blocks=2, seq_len=32)
    target = no_ffn / 2
    matched, realised = references.oracle_reference(tiny, target, "oracle@half", blocks)
    assert realised == pytest.approx(target, abs=0.1 * no_ffn) and matched.setting > 0
    with pytest.raises(ValueError, match="param skip"):
        references.oracle_reference(tiny, 0.0, "oracle@zero", blocks)
