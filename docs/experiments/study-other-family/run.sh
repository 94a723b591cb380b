set -e
cd "$(git rev-parse --show-toplevel)"
rm -rf /tmp/fam && mkdir -p /tmp/fam
.venv/bin/python - <<'PY'
import json, random
from pathlib import Path
from hero_core.method.tiny import tiny_model_dir
root = Path("/tmp/fam")
print("backbone:", tiny_model_dir("gpt2", root / "tiny-gpt2", chat_template=False))
words = "the a memory router layer token skip gate block model text value sum code data chat".split()
rng = random.Random(0)
(root / "text.jsonl").write_text("".join(json.dumps({"text": " ".join(rng.choice(words) for _ in range(60)) + f" item {i}."}) + "\n" for i in range(150)))
items = [{"question": f"Which word is number {i}?", "choices": ["one", "two", "three"], "answer": i % 3} for i in range(8)]
(root / "tasks.jsonl").write_text("".join(json.dumps(x) + "\n" for x in items))
PY
ARGS="study --backbone /tmp/fam/tiny-gpt2 --data /tmp/fam/text.jsonl --tasks /tmp/fam/tasks.jsonl --arms hero,no_history --seeds 2 --steps 6 --skip 0.01 --limit 6 --max-tokens 32 --lanes 2 --out /tmp/fam/study"
.venv/bin/python -m hero_core $ARGS --plan
.venv/bin/python -m hero_core $ARGS
