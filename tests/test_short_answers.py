"""The short-answer training prompts (the ``qa`` domain) stay apart from the answers suite they resemble."""

import re

import pytest

from hero_core.data import short_answers
from hero_core.data.splits import split_of
from hero_core.eval.answers import run as answers

SUITE_INSTRUCTIONS = ("answer with one word", "reply in uppercase letters only", "reply in lowercase letters only",
                      "answer only yes or no", "separated by commas")


@pytest.fixture(scope="module")
def suite():
    return [row for row in answers.load_rows() if row["category"] != "code"]


@pytest.fixture(scope="module")
def prompts():
    return short_answers.short_answer_prompts("train") + short_answers.short_answer_prompts("eval")


def _question(prompt: str) -> str:
    """The question under any instruction on the answer's form, in lower-case words."""
    head, _, rest = prompt.partition(":")
    question = rest if rest and len(head) < 45 else prompt
    return " ".join(re.findall(r"[a-z0-9]+", question.lower()))


def test_no_question_of_the_answers_suite_is_asked_in_training(suite, prompts):
    asked = {_question(p) for p in prompts}
    for row in suite:
        assert _question(row["prompt"]) not in asked, row["id"]
        assert not any(row["prompt"] in p for p in prompts), row["id"]


def test_no_arithmetic_problem_of_the_suite_in_training_whatever_the_wording(suite):
    training = {short_answers.problem_key(p) for p in short_answers.prompt_sources()["arithmetic"]}
    assert None not in training and len(training) == short_answers.ARITHMETIC_PROMPTS
    for row in (r for r in suite if r["category"] == "arithmetic"):
        key = short_answers.problem_key(row["prompt"])
        assert key is not None and key not in training, row["id"]


def test_training_words_its_instructions_differently_from_the_suite(suite, prompts):
    assert all(any(i in row["prompt"].lower() for i in SUITE_INSTRUCTIONS)
               for row in suite if row["category"] == "instructions")  # the list above is the suite's own
    for prompt in prompts:
        assert not any(i in prompt.lower() for i in SUITE_INSTRUCTIONS), prompt


def test_prompts_are_distinct_deterministic_and_split_by_their_hash():
    train, held_out = short_answers.short_answer_prompts("train"), short_answers.short_answer_prompts("eval")
    assert len(set(train)) == len(train) > 500 and not set(train) & set(held_out)
    assert short_answers.short_answer_prompts("train") == train
    generated = {p for source in short_answers.prompt_sources().values() for p in source}
    assert all(split_of(p) == "train" for p in train if p in generated)
    sources = short_answers.prompt_sources()
    assert len(sources["arithmetic"]) == short_answers.ARITHMETIC_PROMPTS and sources["facts"]
