"""Short-answer chat prompts for training (the ``qa`` domain): questions a user expects one fact, number, word or
list back from, in the shapes the answers suite checks (a capital, a count, a sum, one word, capitals only, yes or
no, a comma list), with their own subjects and their own wording.

Why a domain of its own: the built-in chat prompts ask for explanations and paragraphs, so nothing in training
shows the routers a reply whose value is one token. The replies are the dense model's own (self-distillation, as
for chat): right or wrong, they are what the routed model should keep.

Kept apart from the answers suite (:mod:`hero_core.eval.answers.prompts`, evaluation only) by construction: no question
the suite asks (France's capital, a spider's legs; its arithmetic uses smaller numbers) and none of its instruction
wordings ("Answer with one word:" here reads "Respond with a single word:"). ``tests/test_short_answers.py`` checks
both against the suite's rows. Every prompt is generated here, deterministically; a hash of its text picks its
split, as for every other domain.
"""

from __future__ import annotations

import random
import re

from hero_core.data.reasoning import reasoning_problems
from hero_core.data.splits import split_of

# (country, capital, main language, currency); none is a country the answers suite asks about
_COUNTRIES = [
    ("Finland", "Helsinki", "Finnish", "euro"), ("Denmark", "Copenhagen", "Danish", "krone"),
    ("Poland", "Warsaw", "Polish", "zloty"), ("Austria", "Vienna", "German", "euro"),
    ("Hungary", "Budapest", "Hungarian", "forint"), ("the Netherlands", "Amsterdam", "Dutch", "euro"),
    ("Belgium", "Brussels", "Dutch", "euro"), ("Switzerland", "Bern", "German", "franc"),
    ("Turkey", "Ankara", "Turkish", "lira"), ("Kenya", "Nairobi", "Swahili", "shilling"),
    ("Nigeria", "Abuja", "English", "naira"), ("Peru", "Lima", "Spanish", "sol"),
    ("Argentina", "Buenos Aires", "Spanish", "peso"), ("Chile", "Santiago", "Spanish", "peso"),
    ("Mexico", "Mexico City", "Spanish", "peso"), ("India", "New Delhi", "Hindi", "rupee"),
    ("Thailand", "Bangkok", "Thai", "baht"), ("Vietnam", "Hanoi", "Vietnamese", "dong"),
    ("South Korea", "Seoul", "Korean", "won"), ("Indonesia", "Jakarta", "Indonesian", "rupiah"),
    ("Iran", "Tehran", "Persian", "rial"), ("Saudi Arabia", "Riyadh", "Arabic", "riyal"),
    ("Morocco", "Rabat", "Arabic", "dirham"), ("Ghana", "Accra", "English", "cedi"),
    ("Cuba", "Havana", "Spanish", "peso"), ("Colombia", "Bogota", "Spanish", "peso"),
    ("New Zealand", "Wellington", "English", "dollar"), ("the Philippines", "Manila", "Filipino", "peso"),
    ("Ukraine", "Kyiv", "Ukrainian", "hryvnia"), ("Romania", "Bucharest", "Romanian", "leu"),
    ("Iceland", "Reykjavik", "Icelandic", "krona"), ("Ethiopia", "Addis Ababa", "Amharic", "birr"),
    ("Nepal", "Kathmandu", "Nepali", "rupee"), ("Bangladesh", "Dhaka", "Bengali", "taka"),
    ("Malaysia", "Kuala Lumpur", "Malay", "ringgit"), ("Czechia", "Prague", "Czech", "koruna"),
    ("Croatia", "Zagreb", "Croatian", "euro"), ("Pakistan", "Islamabad", "Urdu", "rupee"),
    ("Venezuela", "Caracas", "Spanish", "bolivar"), ("Jamaica", "Kingston", "English", "dollar"),
]
_LEGS = ["a dog", "a horse", "a chicken", "a duck", "an ant", "a beetle", "a crab", "a kangaroo", "a frog",
         "a goat", "a parrot", "a lizard"]
_SOUNDS = ["a dog", "a duck", "a sheep", "a pig", "a horse", "a lion", "an owl", "a frog", "a donkey", "a snake"]
_YOUNG = ["a cow", "a horse", "a sheep", "a goat", "a frog", "a kangaroo", "a bear", "a deer", "a duck", "a swan",
          "a goose", "a lion"]
_COLOURED = ["a carrot", "an orange", "a ripe cherry", "dark chocolate", "a polar bear", "a crow", "a flamingo",
             "an emerald", "a ruby", "table salt", "a pumpkin", "a plum", "a school bus in the United States",
             "a fire engine", "a lime", "a zebra's stripes"]
_COUNTS = ["seconds are in a minute", "days are in a fortnight", "weeks are in a year", "years are in a decade",
           "years are in a century", "millimetres are in a centimetre", "metres are in a kilometre",
           "sides does a square have", "sides does a pentagon have", "sides does an octagon have",
           "legs does a tripod have", "wheels does a bicycle have", "players are on a football (soccer) team",
           "strings does a standard guitar have", "keys does a standard piano have", "eggs are in a dozen",
           "hours are in two days", "minutes are in half an hour", "corners does a cube have", "faces does a cube have"]
_ELEMENTS = ["silver", "iron", "oxygen", "sodium", "helium", "carbon", "hydrogen", "copper", "lead", "nitrogen"]
_SCIENCE = ["Which organ do humans use to breathe?", "Which organ do we use to hear?", "Which organ controls the body?",
            "What do bees collect from flowers?", "What is the boiling point of water in degrees Fahrenheit?",
            "What is the closest star to Earth after the Sun called?", "What is the smallest planet in our solar "
            "system?", "Which planet is the hottest in our solar system?", "What is the largest desert in the world?",
            "What is the longest river in Africa?", "What is the largest country by area?", "What is the smallest "
            "continent?", "Which animal is the largest bird?", "What do pandas mostly eat?",
            "What is the main gas in the air we breathe out?", "Which vitamin does sunlight help the body make?",
            "What is the freezing point of water in degrees Fahrenheit?", "How many bones does an adult human have?",
            "What is the largest organ of the human body?", "Which metal is liquid at room temperature?"]
_PEOPLE = ["Who painted the Mona Lisa?", "Who developed the theory of relativity?", "Who discovered penicillin?",
           "Who wrote the novel Pride and Prejudice?", "Who was the first person to walk on the Moon?",
           "Who composed the Fifth Symphony that begins da-da-da-dum?", "Who invented the telephone?",
           "Who wrote the Harry Potter books?", "Who proposed the theory of evolution by natural selection?",
           "Who painted The Starry Night?"]
_YES_NO = ["Is Rome in Italy?", "Is a spider an insect?", "Is the Atlantic an ocean?", "Do birds have feathers?",
           "Is a tomato a vegetable in botany?", "Can penguins fly?", "Is gold a metal?", "Is ten bigger than nine?",
           "Is Mars closer to the Sun than Earth?", "Do snakes have legs?", "Is the Nile a river?",
           "Is three times three equal to nine?", "Is Tokyo in China?", "Do humans have two lungs?",
           "Is a dolphin a mammal?", "Is salt sweet?", "Is January the first month of the year?",
           "Is a square a kind of rectangle?", "Do trees make oxygen?", "Is lead lighter than air?",
           "Can a chicken swim underwater for an hour?", "Is Mount Everest in Asia?", "Is seven an even number?",
           "Does the Moon orbit the Earth?", "Is glass made mostly from sand?", "Is a bat a bird?",
           "Are there twelve months in a year?", "Is the Sahara a cold desert?", "Is copper a good conductor?",
           "Is a kilometre longer than a mile?"]
_LISTS = ["vegetables", "wild animals", "sports played with a ball", "countries in Europe", "kinds of birds",
          "kitchen tools", "shapes", "kinds of trees", "flowers", "school subjects", "vehicles", "oceans",
          "body parts", "kinds of weather", "drinks", "things found in a classroom", "jobs", "board games"]
_LIST_WORDING = ["Name three {x}, comma-separated.", "Give me three {x} as a comma-separated list.",
                 "Write three {x} on one line, with commas between them."]
# the answers suite's instruction wordings are "Answer with one word:", "Reply in uppercase/lowercase letters only:",
# "Answer only yes or no:"; these say the same with other words
_ONE_WORD = ["Respond with a single word: {q}", "One word only, please. {q}"]
_UPPER = ["Write your answer in capital letters: {q}", "USE CAPITAL LETTERS ONLY. {q}"]
_LOWER = ["Use only small letters in your reply: {q}", "no capital letters in your answer, please: {q}"]
_YES_NO_WORDING = ["Say just yes or no. {q}", "Yes or no only: {q}"]
_OPERATIONS = [("plus", "+"), ("minus", "-"), ("times", "x"), ("divided by", "/")]
_ARITHMETIC_WORDING = ["What is {a} {op} {b}?", "Calculate {a} {sym} {b}.", "How much is {a} {op} {b}?",
                       "Work out {a} {sym} {b} and give the result."]
ARITHMETIC_PROMPTS = 300
WORD_PROBLEMS = 150
WORD_PROBLEM_SEED = 7


def _facts() -> list[str]:
    questions = [f"What is the capital of {c}?" for c, *_ in _COUNTRIES]
    questions += [f"Which language do most people in {c} speak?" for c, *_ in _COUNTRIES[::2]]
    questions += [f"What is the name of the currency used in {c}?" for c, *_ in _COUNTRIES[1::3]]
    questions += [f"How many legs does {x} have?" for x in _LEGS]
    questions += [f"What sound does {x} make?" for x in _SOUNDS]
    questions += [f"What is a young {x.split(' ', 1)[1]} called?" for x in _YOUNG]
    questions += [f"What colour is {x}?" for x in _COLOURED]
    questions += [f"How many {x}?" for x in _COUNTS]
    questions += [f"What is the chemical symbol of {x}?" for x in _ELEMENTS]
    return questions + _SCIENCE + _PEOPLE


def _wrapped(facts: list[str], rng: random.Random) -> list[str]:
    """Every fourth fact again under an instruction on the answer's form, the wordings taken in turn."""
    out = []
    for i, question in enumerate(facts[::4]):
        wordings = (_ONE_WORD, _UPPER, _LOWER)[i % 3]
        out.append(rng.choice(wordings).format(q=question[0].lower() + question[1:]))
    return out


def _arithmetic(rng: random.Random, n: int) -> list[str]:
    """Sums and differences of three-digit numbers, products with a factor of 13 or more, quotients of 11 or more:
    the answers suite's operands are all below 100 and its factors and quotients at most 12, so no problem is one
    of its problems."""
    prompts, seen = [], set()
    while len(prompts) < n:
        op, sym = rng.choice(_OPERATIONS)
        if op == "divided by":  # whole answers only
            b = rng.randint(2, 12)
            a = b * rng.randint(11, 25)
        elif op == "times":
            a, b = rng.randint(13, 29), rng.randint(3, 12)
        else:
            a, b = sorted((rng.randint(101, 480), rng.randint(101, 480)), reverse=op == "minus")
        if (a, b, op) not in seen:
            seen.add((a, b, op))
            prompts.append(rng.choice(_ARITHMETIC_WORDING).format(a=a, b=b, op=op, sym=sym))
    return prompts


_OPERATION_WORDS = {"plus": "+", "+": "+", "minus": "-", "-": "-", "times": "x", "x": "x", "*": "x",
                    "divided by": "/", "/": "/"}
_PROBLEM = re.compile(r"(\d+)\s*(plus|minus|times|divided by|[-+x*/])\s*(\d+)")


def problem_key(prompt: str) -> tuple[int, str, int] | None:
    """(a, operation, b) of a two-operand arithmetic question however it is worded, or None: what the
    disjointness test compares against the answers suite."""
    match = _PROBLEM.search(prompt)
    if match is None:
        return None
    return int(match[1]), _OPERATION_WORDS[match[2]], int(match[3])


def prompt_sources() -> dict[str, list[str]]:
    """Every short-answer prompt by kind, both splits (the data card counts these same lists)."""
    rng = random.Random("short-answers")
    facts = _facts()
    instructions = _wrapped(facts, rng) + [rng.choice(_YES_NO_WORDING).format(q=q) for q in _YES_NO]
    instructions += [_LIST_WORDING[i % 3].format(x=x) for i, x in enumerate(_LISTS)]
    return {"facts": facts, "instructions": instructions, "arithmetic": _arithmetic(rng, ARITHMETIC_PROMPTS)}


def short_answer_prompts(split: str = "train") -> list[str]:
    """Every short-answer prompt of ``split`` (a hash of the prompt text picks it), in a fixed order."""
    prompts = [p for source in prompt_sources().values() for p in source if split_of(p) == split]
    # word problems: the reasoning generator's questions, as a user would ask them (new draws: another seed than
    # the reasoning domain's), already split by their own hash
    return prompts + [p.question for p in reasoning_problems(WORD_PROBLEMS, split, seed=WORD_PROBLEM_SEED)]
