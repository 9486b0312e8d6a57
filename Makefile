# One command sets up and runs each job on a fresh machine (Python >= 3.10 with venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install browser wordlist study reproduction demo demo-no-llm llm-demo test bench bench-llm cocoon moderation moderation-no-llm train clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch: the CPU build is pinned first, so the extra's "torch>=2.2" never pulls a CUDA build.
TORCH_CPU := torch==2.13.0

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q $(TORCH_CPU)
	$(BIN)/python -m pip install -q -e ".[test,torch,plot,llm,local,wandb,ray,marl,realism]"
	touch $(STAMP)

install: $(STAMP)

## demo: `socialgym demo` — 6 LLM agents x 4 rounds on the embedded model; writes runs/demo-N/ with report.html
demo: install wordlist
	$(BIN)/socialgym demo

## demo-no-llm: the same with scripted agents (30 greedy + random agents, 15 rounds, seconds)
demo-no-llm: install
	$(BIN)/socialgym demo --no-llm

# Debian's chromium and chromium-driver for the report-rendering and viewer tests (Selenium drives
# /usr/bin/chromedriver: nothing is downloaded at test time); skipped with a reason when they cannot be installed
browser:
	@{ command -v chromium >/dev/null 2>&1 && [ -x /usr/bin/chromedriver ]; } || \
	{ command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		(apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1)) || \
		echo "chromium/chromium-driver not installed: the report-rendering and viewer browser tests will be skipped"; }

# Debian's wamerican: the word list of the English-likeness check of agents' texts (docs/llm.md)
wordlist:
	@[ -f /usr/share/dict/american-english ] || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		(apt-get install -y -qq wamerican >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq wamerican >/dev/null 2>&1)) || \
		echo "wamerican not installed: the English-likeness checks will be skipped"; }

## llm-demo: 6 LLM agents x 4 rounds with the embedded model (SmolLM2-135M via llama.cpp), < 3 min
llm-demo: install
	$(BIN)/python -m socialgym.agents.demo

## test: the whole test suite
test: install browser wordlist
	$(BIN)/python -m pytest

## bench: env seconds per round and peak memory at 1k, 10k, 100k agents
bench: install
	$(BIN)/python benchmarks/bench_env.py

## bench-llm: LLM overhead (fake server, 1 s latency, 128 agents), prompt tokens and prefix reuse (cl100k),
## the embedded model's cost and `socialgym demo`'s texts; rewrites the tables in docs/
bench-llm: install wordlist
	$(BIN)/python -m pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/bench_prompts.py
	$(BIN)/python benchmarks/bench_estimate.py
	$(BIN)/python benchmarks/bench_llm.py
	$(BIN)/python benchmarks/bench_demo_text.py

## cocoon: the information-cocoon experiment (plots and results.json in runs/cocoon)
cocoon: install
	$(BIN)/python -m socialgym.experiments.studies.cocoon --out runs/cocoon

## moderation: the six LLM moderation strategies in synthetic discussions (embedded model; runs/moderation)
moderation: install
	$(BIN)/socialgym moderation --out runs/moderation --discussions 2 --turns 6 --users 4 --annotators 3
	$(BIN)/socialgym moderation --out runs/moderation-no-trolls --discussions 2 --turns 6 --users 4 --annotators 3 \
		--trolls 0 --strategies no_moderator

## moderation-no-llm: the same pipeline with scripted users/moderator and lexicon annotators (seconds)
moderation-no-llm: install
	$(BIN)/socialgym moderation --no-llm --out runs/moderation-no-llm --discussions 10

## study: the core paper's 2x2 study on the embedded model (small scale, about 30 min; runs/study-small)
study: install
	$(BIN)/socialgym study ties-coach --scale small --out runs/study-small

## reproduction: rerun the scripted studies (recagent, agentsociety2, Soc-Strategy; < 30 min on 2 cores), rewrite
## their summaries in benchmarks/reproduction/ and rebuild docs/reproduction.md from all the committed summaries
reproduction: install
	$(BIN)/python benchmarks/reproduction.py --rerun

## train: PPO with parameter sharing on the mixed task (runs/ppo), then random/greedy/PPO evaluation
train: install
	$(BIN)/python -m socialgym.baselines.ppo --task mixed --out runs/ppo
	$(BIN)/python -m socialgym.experiments.analysis.evaluate --model runs/ppo/model.pt --episodes 10

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
