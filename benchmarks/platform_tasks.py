"""docs/platform.md's tables and figure, and the Milli et al. row of docs/reproduction.md.

    python benchmarks/platform_tasks.py --train      # the study, then the other two objectives (about 25 min on 2 cores)
    python benchmarks/platform_tasks.py --evaluate   # re-evaluate runs/platform's trained models
    python benchmarks/platform_tasks.py              # rewrite the docs from benchmarks/results_platform.json

``--train`` runs ``socialgym study platform-objectives`` (PPO for engagement, welfare and bridging,
``TRAIN_SEEDS`` training seeds each, and every hand-written ranker, on the held-out episodes) into
``runs/platform`` and times it; then the same study over all five platform objectives, reusing the
trained models, for the baselines table. Results: ``benchmarks/results_platform.json``, the summary
behind the reproduction row: ``benchmarks/reproduction/platform.json``, the figure:
``docs/images/platform_pareto.png``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _docs import DOCS, machine, write_section  # noqa: E402

from socialgym.experiments.studies import platform_objectives as study  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results_platform.json"
SUMMARY = ROOT / "benchmarks" / "reproduction" / "platform.json"
FIGURE = DOCS / "images" / "platform_pareto.png"


def objective_value(metrics: dict, objective: str) -> float:
    """A platform task's objective per round from the evaluated metrics."""
    return -metrics["negativity_share"] if objective == "negativity" else metrics[objective]


def table_markdown(results: dict) -> str:
    objectives = [o for o in study.ALL_OBJECTIVES if o in results["ppo"]]
    lines = ["| ranker | " + " | ".join(f"`platform-{o}-v0`" for o in objectives) + " |",
             "|---|" + "---:|" * len(objectives)]
    best = {o: max(objective_value(r, o) for r in results["hand"].values()) for o in objectives}
    for name, r in results["hand"].items():
        lines.append(f"| {name} | " + " | ".join(f"{objective_value(r, o):.4f}" for o in objectives) + " |")
    ppo_cells, gains = [], []
    for o in objectives:
        runs = [objective_value(r, o) for r in results["ppo"][o]]
        ppo_cells.append(f"**{np.mean(runs):.4f}** ± {np.std(runs):.4f}")
        gains.append(f"{100 * (np.mean(runs) / best[o] - 1):+.1f} %" if best[o] > 0 else
                     f"{np.mean(runs) - best[o]:+.4f} (abs.)")
    n = len(results["ppo"][objectives[0]])
    lines.append(f"| PPO trained on the task ({n} seeds) | " + " | ".join(ppo_cells) + " |")
    lines.append("| PPO against the best hand-written | " + " | ".join(gains) + " |")
    lines += ["", f"Each cell: the task's objective per round (negativity: minus the negative share of feed comments), "
                  f"averaged over the rounds of the {len(results['eval_seeds'])} held-out episodes (seeds "
                  f"{results['eval_seeds'][0]}–{results['eval_seeds'][-1]}); PPO: mean ± standard deviation over "
                  "training seeds. A relative gain is given where the best hand-written value is positive. "
                  "Written by `python benchmarks/platform_tasks.py`."]
    return "\n".join(lines)


def study_markdown(results: dict, seconds: float | None, machine: str) -> str:
    lines = [study.summary_markdown({**results, "ppo": {o: results["ppo"][o] for o in study.OBJECTIVES
                                                       if o in results["ppo"]}}).strip(), ""]
    points = study.ranker_points({**results, "ppo": {o: results["ppo"][o] for o in study.OBJECTIVES}})
    lines.append("Engagement–welfare Pareto front (no other ranker is better on both): "
                 + ", ".join(study.pareto_front(points)) + ".")
    if seconds is not None:
        lines.append(f"The study took {seconds / 60:.1f} minutes on {machine} "
                     f"(`socialgym study platform-objectives`, training and evaluation).")
    lines.append("Written by `python benchmarks/platform_tasks.py` from benchmarks/results_platform.json.")
    return "\n".join(lines)


def reproduction_summary(results: dict) -> dict:
    m = results["milli"]
    return {"study": "platform-objectives", "command": "socialgym study platform-objectives --out runs/platform",
            "design": {"agents": 30, "rounds": 15, "runs": m.get("n", 0)}, "model": None,
            "milli": m}


def write_docs(data: dict) -> None:
    results = data["results"]
    print(f"written to {write_section('platform.md', 'platform-table', table_markdown(results))}")
    print(f"written to {write_section('platform.md', 'platform-study', study_markdown(results, data.get('study_seconds'), data['machine']))}")
    study.pareto_figure({**results, "ppo": {o: results["ppo"][o] for o in study.OBJECTIVES}}, FIGURE)
    SUMMARY.write_text(json.dumps(reproduction_summary(results), indent=1, sort_keys=True, allow_nan=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--evaluate", action="store_true",
                        help="re-evaluate with the trained models in --out (kept), keeping the recorded study time")
    parser.add_argument("--out", default="runs/platform")
    args = parser.parse_args()
    if args.train:
        out = Path(args.out)
        if out.exists():
            shutil.rmtree(out)
        start = time.perf_counter()
        study.run_study(out)
        seconds = time.perf_counter() - start
        results = study.run_study(out, objectives=study.ALL_OBJECTIVES)
        data = {"results": results, "study_seconds": round(seconds, 1),
                "machine": machine()}
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    elif args.evaluate:
        previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
        results = study.run_study(Path(args.out), objectives=study.ALL_OBJECTIVES)
        data = {"results": results, "study_seconds": previous.get("study_seconds"),
                "machine": machine()}
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    data = json.loads(RESULTS.read_text())
    write_docs(data)


if __name__ == "__main__":
    main()
