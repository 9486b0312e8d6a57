# One command sets up and runs each job on a fresh machine (Python >= 3.10 with venv).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The versions the suite passes on, as pip constraints (requirements/lock.txt). `make test-latest`
# installs without them, in .venv-latest: the newest versions pyproject.toml allows.
LOCK        := requirements/lock.txt
CONSTRAINTS ?= -c $(LOCK)
EXTRAS      := test,torch,plot,llm,local,wandb,ray,marl,realism,bench

.PHONY: install llama browser wordlist node study reproduction demo demo-no-llm llm-demo test test-fast test-latest lock doctor \
	bench bench-llm cocoon moderation moderation-no-llm train clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch: the CPU build is pinned first, so the extra's "torch>=2.2" never pulls a CUDA build.
TORCH_CPU := torch==2.13.0

# llama.cpp (the embedded model) for any CPU of the machine's architecture, never for the build
# machine's own: a native build on a CPU with AMX uses AMX tiles, which fault in virtual machines
# whose host does not pass the tile state on (the server dies at its first request). x86-64: AVX2,
# FMA, F16C, BMI2 (x86-64-v3); elsewhere llama.cpp's non-native default. Exported, so that any
# build of llama-cpp-python that make starts gets the same flags; the wheel is built here, without
# pip's cache (which could hold a native build), and checked: no AMX instruction may be in it.
ARCH := $(shell uname -m)
LLAMA_CMAKE_x86_64 := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_CMAKE := $(or $(LLAMA_CMAKE_$(ARCH)),-DGGML_NATIVE=OFF)
export CMAKE_ARGS := $(LLAMA_CMAKE)
LLAMA_WHEELS := $(VENV)/llama-wheel

define build_llama
	rm -rf $(LLAMA_WHEELS)
	$(BIN)/python -m pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python $(CONSTRAINTS) \
		-w $(LLAMA_WHEELS) "llama-cpp-python>=0.3.7"
	$(BIN)/python -m pip install -q --no-deps --force-reinstall $(LLAMA_WHEELS)/llama_cpp_python-*.whl
endef

$(STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/python -m pip install -q $(CONSTRAINTS) $(TORCH_CPU)
	$(build_llama)
	$(BIN)/python -m pip install -q $(CONSTRAINTS) -e ".[$(EXTRAS)]"
	$(BIN)/python -m socialgym.llm.build
	touch $(STAMP)

## llama: rebuild the embedded model's llama.cpp portably in an installed .venv, and check it (no AMX)
llama: install
	$(build_llama)
	$(BIN)/python -m socialgym.llm.build

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

# node: the viewer's number formatting is checked against JavaScript's own (tests/test_viewer.py)
node:
	@command -v node >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		(apt-get install -y -qq nodejs >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq nodejs >/dev/null 2>&1)) || \
		echo "nodejs not installed: the viewer's JavaScript number test will be skipped"; }

# Debian's wamerican: the word list of the English-likeness check of agents' texts (docs/llm.md)
wordlist:
	@[ -f /usr/share/dict/american-english ] || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		(apt-get install -y -qq wamerican >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq wamerican >/dev/null 2>&1)) || \
		echo "wamerican not installed: the English-likeness checks will be skipped"; }

## llm-demo: 6 LLM agents x 4 rounds with the embedded model (SmolLM2-135M via llama.cpp), < 3 min
llm-demo: install
	$(BIN)/python -m socialgym.agents.demo

## test: the whole test suite (what CI runs): a time limit per test, the skip summary and the slowest tests;
## under CI=true a missing capability (Chromium, the word list, the embedded model) fails instead of skipping
test: install browser wordlist node
	$(BIN)/python -m pytest

## test-fast: the fast tier (tests not marked slow, on both cores), < 3 min on 2 cores: between edits
test-fast: install
	$(BIN)/python -m pytest -m "not slow" -n 2 --dist loadfile

## test-latest: the whole suite on the newest versions pyproject.toml allows (.venv-latest, no lock);
## writes the result and the versions that differ from the lock into docs/benchmarks.md
test-latest:
	$(MAKE) install browser wordlist node VENV=.venv-latest CONSTRAINTS=
	.venv-latest/bin/python benchmarks/test_latest.py --lock $(LOCK)

## lock: requirements/lock.txt from .venv-latest, once `make test-latest` passed there
lock:
	.venv-latest/bin/python benchmarks/test_latest.py --lock $(LOCK) --write-lock

## doctor: what this machine can and cannot do for the package, each with the command that fixes it
doctor: install
	$(BIN)/socialgym doctor

## bench: env seconds per round and peak memory at 1k, 10k, 100k agents
bench: install
	$(BIN)/python benchmarks/bench_env.py

## bench-llm: LLM overhead (fake server, 1 s latency, 128 agents), prompt tokens and prefix reuse (cl100k),
## the embedded model's cost and `socialgym demo`'s texts; rewrites the tables in docs/
bench-llm: install wordlist
	$(BIN)/python benchmarks/bench_prompts.py
	$(BIN)/python benchmarks/bench_estimate.py
	$(BIN)/python benchmarks/bench_llm.py
	$(BIN)/python benchmarks/bench_demo_text.py

## cocoon: the information-cocoon experiment (a run directory per run; plots and results.json in runs/cocoon)
cocoon: install
	$(BIN)/socialgym study cocoon --out runs/cocoon

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
	$(BIN)/python -m socialgym.training.ppo --task mixed --out runs/ppo
	$(BIN)/python -m socialgym.experiments.analysis.evaluate --model runs/ppo/model.pt --episodes 10

clean:
	rm -rf $(VENV) .venv-latest *.egg-info .pytest_cache .hypothesis
