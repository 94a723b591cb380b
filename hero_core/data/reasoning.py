"""Generated reasoning problems (the ``reasoning`` domain): multi-step arithmetic stories, expressions and
ordering logic, each with a worked solution and a verified answer, split by a hash of the question."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hero_core.data.splits import check_split, split_of


@dataclass(frozen=True)
class Problem:
    question: str
    solution: str  # worked steps ending in "The answer is X."
    answer: str
    kind: str

    @property
    def text(self) -> str:
        return f"Question: {self.question}\nAnswer: {self.solution}"


_NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo", "Kofi", "Lena", "Mia", "Noor"]
_ITEMS = ["apples", "books", "coins", "marbles", "stickers", "pencils", "cards", "shells", "stamps", "cookies"]


def _arithmetic_story(rng: random.Random) -> Problem:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    total = rng.randint(5, 60)
    steps, lines = [], []
    story = f"{name} has {total} {item}."
    for _ in range(rng.randint(2, 4)):
        op = rng.choice(["buy", "give", "double"] if total < 200 else ["give"])
        if op == "buy":
            n = rng.randint(2, 30)
            story += f" Then {name} gets {n} more."
            lines.append(f"{total} + {n} = {total + n}.")
            total += n
        elif op == "give" and total > 2:
            n = rng.randint(1, total - 1)
            story += f" Then {name} gives away {n}."
            lines.append(f"{total} - {n} = {total - n}.")
            total -= n
        else:
            story += f" Then the number of {item} doubles."
            lines.append(f"{total} * 2 = {total * 2}.")
            total *= 2
        steps.append(op)
    question = f"{story} How many {item} does {name} have now?"
    return Problem(question, " ".join(lines) + f" The answer is {total}.", str(total), "arithmetic_story")


def _expression(rng: random.Random) -> Problem:
    a, b, c, d = (rng.randint(2, 20) for _ in range(4))
    op1, op2 = rng.choice("+-*"), rng.choice("+-")
    inner = eval(f"{a} {op1} {b}")  # noqa: S307 - our own integers and operators
    value = eval(f"{inner} * {c} {op2} {d}")  # noqa: S307
    question = f"Compute ({a} {op1} {b}) * {c} {op2} {d}."
    solution = (f"First, {a} {op1} {b} = {inner}. Then {inner} * {c} = {inner * c}. "
                f"Finally, {inner * c} {op2} {d} = {value}. The answer is {value}.")
    return Problem(question, solution, str(value), "expression")


def _ordering(rng: random.Random) -> Problem:
    people = rng.sample(_NAMES, rng.randint(3, 5))  # tallest first
    adjective, opposite = rng.choice([("taller", "shortest"), ("older", "youngest"), ("faster", "slowest")])
    facts = [f"{people[i]} is {adjective} than {people[i + 1]}." for i in range(len(people) - 1)]
    shown = facts[:]
    rng.shuffle(shown)
    question = " ".join(shown) + f" Who is the {opposite}?"
    solution = " ".join(facts) + f" So the order is {', '.join(people)}, and {people[-1]} is the {opposite}. " \
                                 f"The answer is {people[-1]}."
    return Problem(question, solution, people[-1], "ordering")


_GENERATORS = (_arithmetic_story, _expression, _ordering)


def reasoning_problems(n: int, split: str = "train", seed: int = 0) -> list[Problem]:
    """``n`` distinct generated problems of one split, deterministic for a seed."""
    check_split(split)
    rng = random.Random(f"reasoning-{seed}")
    out: list[Problem] = []
    seen: set[str] = set()
    while len(out) < n:
        problem = rng.choice(_GENERATORS)(rng)
        if problem.question in seen or split_of(problem.question) != split:
            continue
        seen.add(problem.question)
        out.append(problem)
    return out
