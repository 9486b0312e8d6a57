"""PPO's speed: rollout and whole-training decisions per second, by num_envs and device.

    python benchmarks/bench_train.py                         # CPU rows (threads 1 and 2)
    python benchmarks/bench_train.py --baseline 24d0106      # also the rollout of that commit
    python benchmarks/bench_train.py --device cuda --no-docs # a GPU row (merged into the results)
    python benchmarks/bench_train.py --docs-only             # rewrite the docs from the results

A *decision* is one agent's action at one step (two per round: act, then vote). **Rollout**
rate: episodes of every platform with a fresh network (environment step and policy forward
pass, no update), ``socialgym.training.ppo.rollout``. **Training** rate: ``ppo.train`` with
the default ``Args`` except ``num_envs``/``minibatch``/``threads``/``device`` and no in-training
evaluation, decisions over seconds from the end of iteration 1 to the last (start-up excluded).

``--baseline COMMIT`` measures the rollout of an older commit at the same settings, in a git
worktree of that commit (its own ``rollout``: before ``socialgym.vector``, one environment
after another). Each measurement runs in its own subprocess. Results go to
``benchmarks/results_train.json`` (rows merged by their key, so CPU and GPU rows from different
machines live together) and the ``bench_train`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results_train.json"

# Runs inside a subprocess (this checkout or a baseline worktree): prints one JSON line.
PROBE = r"""
import json, sys, time
import numpy as np, torch
from socialgym.training import ppo
from socialgym.training.torch_policy import Actor, ActorCritic, Heads, RunningNorm, feature_size
kind, task, num_envs, threads, device, amount = sys.argv[1:7]
num_envs, threads, amount = int(num_envs), int(threads), int(amount)
if threads:
    torch.set_num_threads(threads)
args = ppo.Args(task=task, num_envs=num_envs, threads=threads, device=device, eval_every=0,
                minibatch=int(sys.argv[7]), iterations=amount, out=sys.argv[8])
if kind == "rollout":
    if hasattr(ppo, "make_vec_env"):
        envs = ppo.make_vec_env(args, num_envs)
        layout, topics = envs.layout, len(envs.config.topics)
    else:                                   # before socialgym.vector: a list of environments
        envs = [ppo.make_env(args) for _ in range(num_envs)]
        layout, topics = envs[0].unwrapped.layout, len(envs[0].unwrapped.config.topics)
    heads = Heads.for_layout(layout, topics)
    n_features = feature_size(layout.feed_size, layout.dm_inbox_size, layout.vote_feed_size)
    net = ActorCritic(n_features, heads.K, heads.M, args.hidden).to(device)
    actor = Actor(net, heads, RunningNorm(n_features), device, 0)
    ppo.rollout(envs, list(range(num_envs)), actor, team_spirit=0.8)            # warm-up
    decisions, start = 0, time.perf_counter()
    for i in range(amount):
        ep = ppo.rollout(envs, list(range(1000 + i * num_envs, 1000 + (i + 1) * num_envs)), actor, team_spirit=0.8)
        decisions += int(np.prod(ep["reward"].shape))
    seconds = time.perf_counter() - start
else:
    if amount < 2:
        raise SystemExit("--iterations must be at least 2 (the first iteration is not timed)")
    log = ppo.train(args, progress=False)["log"]
    decisions = sum(r["decisions"] for r in log[1:])
    seconds = log[-1]["seconds"] - log[0]["seconds"]
name = torch.cuda.get_device_name(0) if device == "cuda" else None
print(json.dumps({"decisions": decisions, "seconds": seconds, "gpu": name, "torch": torch.__version__}))
"""


def probe(kind: str, task: str, num_envs: int, threads: int, device: str, amount: int, minibatch: int,
          root: Path = ROOT) -> dict:
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, "-c", PROBE, kind, task, str(num_envs), str(threads), device,
                               str(amount), str(minibatch), out], cwd=root, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{kind} probe failed:\n{done.stderr[-3000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    return {**row, "rate": row["decisions"] / row["seconds"]}


def baseline_root(commit: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"socialgym-baseline-{commit}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit], check=True,
                       capture_output=True)
    return path


def run(args) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from socialgym.training.ppo import Args

    default_minibatch = Args().minibatch
    rows = []
    machine = {"device": args.device, "cpus": os.cpu_count(), "machine": platform.machine(),
               "date": datetime.date.today().isoformat()}
    for threads in args.threads:
        for num_envs in args.num_envs:
            minibatch = args.minibatch or default_minibatch
            code = [("this", ROOT)] + ([(args.baseline, baseline_root(args.baseline))] if args.baseline else [])
            for label, root in code:
                r = probe("rollout", args.task, num_envs, threads, args.device, args.rollouts, minibatch, root)
                rows.append({**machine, "kind": "rollout", "code": label, "task": args.task, "num_envs": num_envs,
                             "threads": threads, "gpu": r["gpu"], "torch": r["torch"], "decisions": r["decisions"],
                             "seconds": round(r["seconds"], 3), "rate": round(r["rate"])})
                print(rows[-1], flush=True)
            if args.iterations:
                r = probe("train", args.task, num_envs, threads, args.device, args.iterations, minibatch)
                rows.append({**machine, "kind": "train", "code": "this", "task": args.task, "num_envs": num_envs,
                             "threads": threads, "minibatch": minibatch, "gpu": r["gpu"], "torch": r["torch"],
                             "decisions": r["decisions"], "seconds": round(r["seconds"], 3), "rate": round(r["rate"])})
                print(rows[-1], flush=True)
    return rows


def key(row: dict) -> tuple:
    return (row["kind"], row["code"], row["device"], row.get("gpu"), row["cpus"], row["task"], row["num_envs"],
            row["threads"], row.get("minibatch"))


def update_results(name: str, value) -> dict:
    """Set one entry of the results file, read afresh (another run may have written it meanwhile)."""
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"rows": []}
    data[name] = value
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    return data


def merge(rows: list[dict]) -> list[dict]:
    stored = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    merged = {key(r): r for r in stored.get("rows", [])}
    merged.update({key(r): r for r in rows})
    data = sorted(merged.values(), key=lambda r: (r["device"], r["kind"], r["code"] != "this", r["threads"],
                                                  r["num_envs"]))
    RESULTS.write_text(json.dumps({**stored, "rows": data}, indent=1) + "\n")
    return data


def table(rows: list[dict]) -> str:
    lines = ["| what | code | device | torch threads | num_envs | decisions per second | decisions timed | date |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        device = r["gpu"] or f"CPU ({r['cpus']} cores, {r['machine']})"
        code = "this commit" if r["code"] == "this" else f"commit {r['code']} (before)"
        what = "rollout" if r["kind"] == "rollout" else f"training (minibatch {r.get('minibatch')})"
        threads = r["threads"] or "all"
        lines.append(f"| {what} | {code} | {device} | {threads} | {r['num_envs']} | {r['rate']:,} | "
                     f"{r['decisions']:,} | {r['date']} |")
    speedups = []
    for r in rows:
        if r["kind"] == "rollout" and r["code"] != "this":
            same = [s for s in rows if s["kind"] == "rollout" and s["code"] == "this" and key(s)[2:] == key(r)[2:]]
            if same:
                speedups.append(f"{same[0]['rate'] / r['rate']:.1f}x at {r['num_envs']} environments and "
                                f"{r['threads'] or 'all'} thread(s)")
    notes = ("\n\nTask `" + rows[0]["task"] + "` (20 agents x 10 rounds per platform). Rollout: environment "
             "steps and policy forward passes of whole episodes with a fresh network; training: `ppo.train` with the "
             "default arguments otherwise, start-up and first iteration excluded. Written by "
             "`benchmarks/bench_train.py` from `benchmarks/results_train.json`.") if rows else ""
    if speedups:
        notes += " Rollout speed-up of this commit over the baseline at the same settings: " + "; ".join(speedups) + "."
    return "\n".join(lines) + notes


def tasks_results_at(commit: str) -> dict:
    """benchmarks/results_tasks.json as it was at ``commit``."""
    return json.loads(subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:benchmarks/results_tasks.json"],
                                     capture_output=True, text=True, check=True).stdout)


def time_to_score(objectives: list[str], baseline: str) -> list[dict]:
    """``python -m socialgym.training.ppo --task O`` with its default arguments, alone on the
    machine, then its network on the 10 held-out episodes of docs/tasks.md; the target is the
    PPO score of the task table at commit ``baseline`` (before issue 31)."""
    sys.path.insert(0, str(ROOT))
    from tasks import measure
    from socialgym.tasks import task_id

    target = {r["task"]: r for r in tasks_results_at(baseline)["results"] if r["policy"] == "ppo"}
    rows = []
    for objective in objectives:
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "socialgym.training.ppo", "--task", objective, "--out", out],
                           check=True, capture_output=True)
            wall = time.perf_counter() - started
            logged = float(list(csv.DictReader(open(Path(out) / "train_log.csv")))[-1]["seconds"])
            score = measure(task_id(objective), "ppo", 10, 10_000, Path(out) / "model.pt")
        t = target[task_id(objective)]
        rows.append({"task": task_id(objective), "wall_s": round(wall, 1), "train_s": round(logged, 1),
                     "score": score["return_mean"], "ci95": score["return_ci95"], "target": t["return_mean"],
                     "target_ci95": t["return_ci95"], "baseline": baseline, "date": datetime.date.today().isoformat(),
                     "cpus": os.cpu_count()})
        print(rows[-1], flush=True)
    return rows


def score_table(rows: list[dict]) -> str:
    budgets = tasks_results_at(rows[0]["baseline"]).get("training", {}) if rows else {}
    lines = ["| task | wall-clock, start-up included (training loop) | held-out return | PPO table score before issue 31 "
             "| its training then | reached |", "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        reached = "yes" if r["score"] >= r["target"] else (
            "within the intervals" if r["score"] + r["ci95"] >= r["target"] - r["target_ci95"] else "no")
        then = budgets.get(r["task"].split("-")[1], {})
        spent = f"{then['iterations']} iterations, {then['seconds'] / 60:.1f} min" if "seconds" in then else "—"
        lines.append(f"| `{r['task']}` | {r['wall_s']:.0f} s ({r['train_s']:.0f} s) | {r['score']:.3f} ± "
                     f"{r['ci95']:.3f} | {r['target']:.3f} ± {r['target_ci95']:.3f} | {spent} | {reached} |")
    return "\n".join(lines) + (
        f"\n\n`python -m socialgym.training.ppo --task OBJECTIVE` with its default arguments (training seed 0), "
        f"one run at a time on {rows[0]['cpus']} CPU cores, {rows[0]['date']}; its network played on the 10 held-out "
        "episodes of docs/tasks.md (seeds 10000–10009, mean ± 95 % t-interval); the target is the PPO cell of the "
        f"task table at commit {rows[0]['baseline']}, and \"its training then\" that network's budget. \"Within the "
        "intervals\": below the target, but the two 95 % intervals overlap. Written by "
        "`benchmarks/bench_train.py --time-to-score`.") if rows else ""


CURVE_ARGS = ["--task", "mixed", "--iterations", "100", "--eval-every", "10", "--learning-rate", "0.001",
              "--epochs", "4", "--threads", "1"]
"""The learning-curve comparison: the Args defaults before issue 31, so that only the rollout differs."""


def curves(baseline: str, seeds: tuple[int, ...] = (0, 1, 2)) -> dict:
    """In-training evaluation returns per episode of this commit's and the baseline's PPO at the
    same arguments (``CURVE_ARGS``), one run per training seed."""
    import concurrent.futures

    def one(label: str, root: Path, seed: int) -> dict:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
            subprocess.run([sys.executable, "-m", "socialgym.training.ppo", *CURVE_ARGS, "--seed", str(seed),
                            "--out", tmp], cwd=root, check=True, capture_output=True, env={**os.environ, "PYTHONPATH": path})
            log = list(csv.DictReader(open(Path(tmp) / "train_log.csv")))
        run = {int(r["episodes"]): float(r["eval_return"]) for r in log if r["eval_return"] != "nan"}
        print(label, seed, run, flush=True)
        return run

    jobs = [(label, root, seed) for label, root in (("this", ROOT), (baseline, baseline_root(baseline)))
            for seed in seeds]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(len(jobs), (os.cpu_count() or 2) // 2))) as pool:
        runs = list(pool.map(lambda job: one(*job), jobs))
    out: dict = {"machine": {"cpus": os.cpu_count(), "machine": platform.machine(),
                             "date": datetime.date.today().isoformat()}, "runs": {}}
    for (label, _, _), run in zip(jobs, runs):
        out["runs"].setdefault(label, []).append(run)
    return out


def curve_table(data: dict) -> str:
    import numpy as np

    machine, runs = data["machine"], data["runs"]
    labels = list(runs)
    episodes = sorted(set.intersection(*(set(map(int, run)) for rs in runs.values() for run in rs)))
    lines = ["| episodes | " + " | ".join("this commit" if k == "this" else f"commit {k} (before)" for k in labels)
             + " |", "|---:|" + "---:|" * len(labels)]
    stats = []
    for e in episodes:
        row = [[run[str(e)] if str(e) in run else run[e] for run in runs[k]] for k in labels]
        stats.append([(float(np.mean(v)), float(np.std(v, ddof=1))) for v in row])
        lines.append(f"| {e:,} | " + " | ".join(f"{m:.3f} ± {sd:.3f}" for m, sd in stats[-1]) + " |")
    within = sum(abs(a[0] - b[0]) <= a[1] + b[1] for a, b in stats)
    worst = max(range(len(stats)), key=lambda i: abs(stats[i][0][0] - stats[i][1][0]))
    return "\n".join(lines) + (
        "\n\nValidation return (in-training evaluation on the seeds 20000…, mean ± standard deviation over the "
        f"training seeds 0, 1, 2) of `python -m socialgym.training.ppo {' '.join(CURVE_ARGS)}` — the arguments "
        f"before issue 31 — in this commit and in the baseline's worktree, on {machine['cpus']} CPU cores "
        f"({machine['machine']}, {machine['date']}). At {within} of {len(stats)} points the two means differ by "
        "less than the sum of their standard deviations; the largest difference is "
        f"{stats[worst][0][0] - stats[worst][1][0]:+.3f} at {episodes[worst]:,} episodes. Written by "
        "`benchmarks/bench_train.py --curves`.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="mixed")
    p.add_argument("--num-envs", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--device", default="cpu")
    p.add_argument("--rollouts", type=int, default=5, help="timed rollouts per row")
    p.add_argument("--iterations", type=int, default=8, help="training iterations per row (0: no training rows)")
    p.add_argument("--minibatch", type=int, default=0, help="0: the default Args' minibatch")
    p.add_argument("--baseline", help="a commit whose rollout is measured at the same settings")
    p.add_argument("--time-to-score", nargs="*", metavar="OBJECTIVE",
                   help="train each small task with the default arguments and compare its score to the table "
                        "before --baseline (default objectives: all)")
    p.add_argument("--curves", action="store_true",
                   help="learning curves of this commit and --baseline at the same arguments, 3 training seeds")
    p.add_argument("--no-docs", action="store_true")
    p.add_argument("--docs-only", action="store_true")
    args = p.parse_args(argv)
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"rows": []}
    if args.time_to_score is not None:
        from socialgym.tasks import OBJECTIVES
        data = update_results("time_to_score", time_to_score(args.time_to_score or list(OBJECTIVES),
                                                             args.baseline or "24d0106"))
    elif args.curves:
        data = update_results("curves", curves(args.baseline or "24d0106"))
    elif not args.docs_only:
        data["rows"] = merge(run(args))
    print(f"{len(data['rows'])} rows in {RESULTS}")
    if not args.no_docs:
        write_section("benchmarks.md", "bench_train", table(data["rows"]))
        if data.get("curves"):
            write_section("benchmarks.md", "bench_train_curves", curve_table(data["curves"]))
        if data.get("time_to_score"):
            write_section("benchmarks.md", "bench_train_score", score_table(data["time_to_score"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
