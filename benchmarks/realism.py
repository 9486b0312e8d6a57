"""docs/realism.md: the realism scorecard of the default scripted population, of every registered
feed task and of the embedded-model demo, and the calibration's before / after.

    python benchmarks/realism.py --scripted        # population (3 seeds) + 12 feed tasks x 3 seeds
    python benchmarks/realism.py --demo            # the embedded-model demo (6 LLM agents x 4 rounds)
    python benchmarks/realism.py --calibrate       # socialgym calibrate on the population, <= 25 min
    python benchmarks/realism.py --docs            # rewrite docs/realism.md from results_realism.json

Runs go to runs/realism/; the numbers to benchmarks/results_realism.json (each stage replaces its
own part), from which --docs writes every table of docs/realism.md. The calibrated population is
also copied into the package as the bundled set ``realism-calibrated``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _docs import machine, write_section  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results_realism.json"
RUNS = ROOT / "runs" / "realism"
POPULATION = ROOT / "configs" / "realism" / "population.yaml"
TARGETS = ROOT / "configs" / "realism" / "targets.yaml"
BUNDLED = ROOT / "socialgym" / "populations" / "realism-calibrated.json"
SEEDS = (0, 1, 2)
TASK_POLICY = "greedy"
CALIBRATION_MINUTES = 25.0


def _score(dirs: list[Path]) -> dict:
    from socialgym.experiments.analysis.realism import as_json, scorecard
    return as_json(scorecard(dirs))


def _run(cfg_source, out: Path, seed: int, overrides=()) -> Path:
    from socialgym.experiments import load_config, run_experiment
    from socialgym.rundir import status

    if out.exists() and status(out) == "complete":
        return out
    shutil.rmtree(out, ignore_errors=True)
    cfg = load_config(cfg_source, [f"seed={seed}", *overrides])
    run_experiment(cfg, out, progress=False)
    return out


def scripted() -> dict:
    from socialgym.tasks import TASKS

    started = time.perf_counter()
    population = [_run(POPULATION, RUNS / "population" / f"seed_{s}", s) for s in SEEDS]
    out = {"population": _score(population), "tasks": {}}
    for task_id, task in TASKS.items():
        if not task_id.startswith("socialgym/feed-"):
            continue
        env = {k: list(v) if isinstance(v, tuple) else v for k, v in dict(task.config).items()}
        cfg = {"env": env, "policy": {"kind": TASK_POLICY},
               "logging": {"report": False, "network_every": int(env["max_rounds"])}, "run": {"snapshots": False}}
        name = task_id.split("/")[1]
        dirs = [_run(cfg, RUNS / "tasks" / name / f"seed_{s}", s) for s in SEEDS]
        out["tasks"][task_id] = _score(dirs)
        print(task_id, out["tasks"][task_id]["counts"], flush=True)
    out["platform"] = platform_tasks()
    print("platform tasks", out["platform"]["counts"], flush=True)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def export_feed_state(env, out: Path) -> Path:
    """A run directory from a finished FeedEnv's own state (the platform tasks run outside the
    runner): every item of its content store as an event, each like and dislike as a VOTE (voters
    are not stored, so they are left out), who posted what per round, and the final ties."""
    import csv

    import numpy as np
    import scipy.sparse as sp

    from socialgym.platform.actions import ACTION_TYPES
    from socialgym.rundir import layout

    c, ids = env.content, env.possible_agents
    n_items = len(c.column("kind"))
    kind, author, recipient = c.column("kind"), c.column("author"), c.column("recipient")
    target, topic, rnd, sent = c.column("target_id"), c.column("topic"), c.column("round"), c.column("sentiment")
    names = env.vocab.names if hasattr(env.vocab, "names") else list(env.vocab)
    out.mkdir(parents=True, exist_ok=True)
    with (out / layout.EVENTS).open("w") as f:
        for i in range(n_items):
            f.write(json.dumps({"round": int(rnd[i]), "kind": ACTION_TYPES[kind[i]], "sender": ids[author[i]],
                                "recipient": ids[recipient[i]] if recipient[i] >= 0 else None, "id": i,
                                "target_id": int(target[i]) if target[i] >= 0 else None,
                                "topic": names[topic[i]], "sentiment": float(sent[i])}) + "\n")
            for value, count in ((1, c.column("likes")[i]), (-1, c.column("dislikes")[i])):
                for _ in range(int(count)):
                    f.write(json.dumps({"round": int(rnd[i]), "kind": "VOTE", "id": i, "value": value}) + "\n")
    rounds = int(rnd.max()) if n_items else 0
    counts = np.zeros((rounds + 1, len(ids), len(ACTION_TYPES)), np.int64)
    np.add.at(counts, (rnd, author, kind), 1)
    with (out / layout.ROUNDS).open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "agent", *ACTION_TYPES])
        for r in range(1, rounds + 1):
            for a, agent in enumerate(ids):
                w.writerow([r, agent, *counts[r, a]])
    (out / layout.TIES).mkdir(exist_ok=True)
    sp.save_npz(layout.tie_path(out, max(rounds, 1)), sp.csr_matrix(env.tie_matrix()))
    return out


def platform_tasks() -> dict:
    """The platform tasks' users (StanceUsers) under the chronological ranker, 3 seeds. The five
    platform tasks share their dynamics and differ only in the reward, so one scorecard covers
    all five under a fixed ranker."""
    from socialgym.envs.platform.env import PlatformEnv

    dirs = []
    for s in SEEDS:
        env = PlatformEnv("engagement", ranker="chronological", seed=s)
        env.reset(seed=s)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
        dirs.append(export_feed_state(env.feed_env, RUNS / "platform" / f"seed_{s}"))
    return _score(dirs)


def demo() -> dict:
    from socialgym.cli import DEMO_CONFIG

    started = time.perf_counter()
    run = _run(DEMO_CONFIG, RUNS / "demo", 0)
    return {"demo": _score([run]), "seconds": round(time.perf_counter() - started, 1)}


def calibrate() -> dict:
    from socialgym.experiments.run.calibrate import calibrate as run_calibration

    started = time.perf_counter()
    result = run_calibration(POPULATION, TARGETS, RUNS / "calibration", trials=100_000, minutes=CALIBRATION_MINUTES,
                             seeds=2, eval_seeds=3, name="realism-calibrated")
    BUNDLED.parent.mkdir(exist_ok=True)
    shutil.copyfile(result["population"], BUNDLED)
    before = json.loads((RUNS / "calibration" / "before" / "realism.json").read_text())
    after = json.loads((RUNS / "calibration" / "after" / "realism.json").read_text())
    return {"calibration": {k: v for k, v in result.items() if k != "population"}, "before": before, "after": after,
            "seconds": round(time.perf_counter() - started, 1)}


# ---------------------------------------------------------------------------------- docs
def _fmt(x) -> str:
    if isinstance(x, str):
        return "∞" if x == "inf" else x
    return "–" if x is None else f"{x:.3g}"


def _card_table(card: dict) -> str:
    lines = ["| fact | mean [95 % CI] | band | verdict |", "|---|---|---|---|"]
    for f in card["facts"]:
        iv = f["interval"]
        value = "not measurable" if f["mean"] is None else (
            f"{_fmt(f['mean'])} [{_fmt(iv[0])}, {_fmt(iv[1])}]" if iv else _fmt(f["mean"]))
        value += " (no heavy tail)" if f["mean"] == "inf" else ""
        lo, hi = f["band"]
        lines.append(f"| {f['title']} | {value} | {lo} – {hi} | {f['verdict']} |")
    c = card["counts"]
    lines.append(f"\n{c['pass']} pass, {c['fail']} fail, {c['not measurable']} not measurable; "
                 f"{len(card['runs'])} run(s).")
    return "\n".join(lines)


def _facts_table() -> str:
    from socialgym.experiments.analysis.realism_facts import FACTS

    lines = ["| fact | how socialgym measures it | pass rule | published reference |", "|---|---|---|---|"]
    for f in FACTS:
        refs = "<br>".join(f"{r.value} — {r.platform}; {r.citation}, {r.where}" for r in f.references)
        lines.append(f"| **{f.title}** (`{f.key}`) | {f.measure} | {f.rule} | {refs} |")
    return "\n".join(lines)


def _tasks_table(tasks: dict) -> str:
    from socialgym.experiments.analysis.realism_facts import FACTS

    keys = [f.key for f in FACTS]
    lines = ["| task | " + " | ".join(keys) + " | pass |", "|---" * (len(keys) + 2) + "|"]
    for task_id, card in tasks.items():
        by_key = {f["key"]: f for f in card["facts"]}
        cells = [f"{_fmt(by_key[k]['mean'])} {'✓' if by_key[k]['verdict'] == 'pass' else '✗' if by_key[k]['verdict'] == 'fail' else '·'}"
                 for k in keys]
        lines.append(f"| `{task_id}` | " + " | ".join(cells) + f" | {card['counts']['pass']}/{len(keys)} |")
    lines.append("\n✓ pass, ✗ fail, · not measurable (mean over 3 seeds; intervals in results_realism.json).")
    return "\n".join(lines)


def write_docs(data: dict) -> None:
    write_section("realism.md", "facts", _facts_table())
    if "population" in data:
        write_section("realism.md", "population", _card_table(data["population"]))
        write_section("realism.md", "tasks", _tasks_table(data["tasks"]))
        write_section("realism.md", "platform", _card_table(data["platform"]))
    if "demo" in data:
        write_section("realism.md", "demo", _card_table(data["demo"]) + f"\n\nRun time {data['demo_seconds']:.0f} s "
                      f"on {data['machine']}.")
    if "calibration" in data:
        from socialgym.experiments.run.calibrate import calibration_markdown
        write_section("realism.md", "calibration", calibration_markdown(data["calibration"])
                      + f"\nMachine: {data['machine']}; the whole command took {data['calibration_seconds'] / 60:.1f} min "
                      "(search, then the before / after runs).\n\nCalibrated parameters (bundled as "
                      "`population: realism-calibrated`):\n\n```json\n"
                      + json.dumps(data["calibration"]["params"], indent=1, sort_keys=True) + "\n```")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scripted", action="store_true")
    parser.add_argument("--demo", action="store_true")
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--docs", action="store_true")
    args = parser.parse_args()
    data = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    data["machine"] = machine()
    if args.scripted:
        part = scripted()
        data.update(population=part["population"], tasks=part["tasks"], platform=part["platform"],
                    scripted_seconds=part["seconds"])
    if args.demo:
        part = demo()
        data.update(demo=part["demo"], demo_seconds=part["seconds"])
    if args.calibrate:
        part = calibrate()
        data.update(calibration=part["calibration"], calibration_before=part["before"],
                    calibration_after=part["after"], calibration_seconds=part["seconds"])
    if args.scripted or args.demo or args.calibrate:
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    if args.docs:
        write_docs(data)
        print("docs/realism.md written")


if __name__ == "__main__":
    main()
