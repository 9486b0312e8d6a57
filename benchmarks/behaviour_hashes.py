"""Behaviour unchanged by a refactor: the sha256 of the files a run writes, before and after.

Three runs, each through the ``socialgym`` command as a user would start it:

- ``socialgym demo --no-llm`` (30 scripted agents, 15 rounds);
- ``socialgym study soc-strategy`` (its control and fork runs, scripted);
- one run of LLM agents (split generation, coach, LLM tie scorer) against the loopback fake
  server, whose replies depend only on the request.

For each run: ``rounds.csv``, ``network.csv`` and ``events.jsonl``.

    python benchmarks/behaviour_hashes.py --record   # writes benchmarks/results_behaviour_hashes.json
    python benchmarks/behaviour_hashes.py            # recomputes; exit 1 naming every file that differs

The recorded file was written before issue 27's restructuring moved any code; the LLM run's
three hashes were recorded again in issue 30, whose prompts (texts that answer, a seed per
request) change that run on purpose; the network.csv of the two runs with policy groups again in
issue 45, which adds a ``mean_topic_entropy:<group>`` column per group (with the old column set
the same code reproduces all 66 recorded hashes). ``tests/test_behaviour_unchanged.py`` runs the check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results_behaviour_hashes.json"
FILES = ("rounds.csv", "network.csv", "events.jsonl")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _hashes(run: Path, label: str) -> dict[str, str]:
    return {f"{label}/{name}": _sha256(run / name) for name in FILES}


def _cli(*argv: str) -> None:
    from socialgym.cli import main

    status = main(list(argv))
    if status != 0:
        raise SystemExit(f"socialgym {' '.join(argv)} exited with {status}")


def _responder(body: dict, n: int):
    """A reply that depends only on the request: the same run gives the same replies."""
    from socialgym.llm.testing import sample_schema, schema_of

    schema = schema_of(body)
    digest = hashlib.sha256(json.dumps([body.get("messages"), schema], sort_keys=True).encode()).digest()
    if schema:
        return json.dumps(sample_schema(schema, random.Random(digest)))
    words = ("we", "should", "talk", "about", "this", "more", "energy", "policy", "matters", "today")
    rng = random.Random(digest)
    return " ".join(rng.choice(words) for _ in range(8)).capitalize() + "."


def _llm_run(out: Path) -> None:
    import yaml

    from socialgym.llm.testing import FakeServer

    with FakeServer(_responder) as server:
        config = {"seed": 3,
                  "env": {"n_agents": 5, "max_rounds": 3, "recommender": "random", "n_actions": 2},
                  "policy": {"groups": [{"name": "llm", "kind": "llm", "agents": 3, "coach": True,
                                         "params": {"generation": "split"}},
                                        {"name": "greedy", "kind": "greedy"}]},
                  "llm": {"base_url": server.base_url, "model": "fake", "api_key": "sk-fake",
                          "max_concurrency": 1, "tie_scorer": True},
                  "logging": {"report": False, "progress": False, "transcripts": True}}
        path = out.parent / "llm.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        _cli("run", str(path), "--out", str(out), "--quiet")


def compute(work: Path) -> dict[str, str]:
    hashes: dict[str, str] = {}
    demo = work / "demo-no-llm"
    _cli("demo", "--no-llm", "--out", str(demo))
    hashes.update(_hashes(demo, "demo-no-llm"))
    study = work / "soc-strategy"
    _cli("study", "soc-strategy", "--out", str(study), "--quiet")
    for run in sorted(p.parent for p in study.rglob("rounds.csv")):
        hashes.update(_hashes(run, "soc-strategy/" + run.relative_to(study).as_posix()))
    llm = work / "llm-fake"
    _llm_run(llm)
    hashes.update(_hashes(llm, "llm-fake"))
    return hashes


def check(hashes: dict[str, str], recorded: dict[str, str]) -> list[str]:
    """The files whose hashes differ from (or are missing in) the recorded ones."""
    return [f"{name}: {'missing' if name not in hashes else 'differs'}" for name in sorted(recorded)
            if hashes.get(name) != recorded[name]] + \
           [f"{name}: not recorded" for name in sorted(set(hashes) - set(recorded))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record", action="store_true", help=f"write {RESULTS.name} instead of checking")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="socialgym-hashes-") as tmp:
        hashes = compute(Path(tmp))
    if args.record:
        RESULTS.write_text(json.dumps({"files": hashes}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"{len(hashes)} hashes written to {RESULTS}")
        return 0
    differ = check(hashes, json.loads(RESULTS.read_text(encoding="utf-8"))["files"])
    for line in differ:
        print(line, file=sys.stderr)
    print(f"{len(hashes) - len(differ)} of {len(hashes)} files byte-identical to the recorded run")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
