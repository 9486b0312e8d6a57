"""The co-adaptation example's curves in docs/platform.md: users and platform trained together.

    python benchmarks/platform_coadaptation.py          # trains (a few minutes on 2 cores), then writes the docs
    python benchmarks/platform_coadaptation.py --from-results

Runs ``socialgym.experiments.studies.coadaptation`` with its default ``Args`` (the platform paid
for engagement, the users for their own λ-weighted rewards) and draws both learning curves.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _docs import DOCS, machine, write_section  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results_platform_coadaptation.json"
FIGURE = DOCS / "images" / "platform_coadaptation.png"


def figure(data: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = data["curves"]
    it = [c["iteration"] for c in curves]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for ax, key, title in ((axes[0], "users_return", "users (PPO): mean return per agent"),
                           (axes[1], "platform_return", f"platform (PPO): {data['args']['platform_objective']}")):
        ax.plot(it, [c[key] for c in curves], linewidth=0.8)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("iteration")
    fig.tight_layout()
    fig.savefig(FIGURE, dpi=120)
    plt.close(fig)


def markdown(data: dict) -> str:
    curves = data["curves"]
    head, tail = curves[:5], curves[-5:]

    def mean(rows, key):
        return np.mean([r[key] for r in rows])
    a = data["args"]
    return "\n".join([
        "| | first 5 iterations | last 5 iterations |", "|---|---:|---:|",
        f"| users: mean return per agent (λ-weighted, per episode) | {mean(head, 'users_return'):.3f} | "
        f"{mean(tail, 'users_return'):.3f} |",
        f"| platform: {a['platform_objective']} return per episode | {mean(head, 'platform_return'):.3f} | "
        f"{mean(tail, 'platform_return'):.3f} |", "",
        "![Both learning curves](images/platform_coadaptation.png)", "",
        f"{a['iterations']} iterations of {a['episodes']} episodes, training seed {a['seed']}, "
        f"{curves[-1]['seconds'] / 60:.1f} minutes on {data['machine']}. Over the run the users' return "
        f"{_moved(mean(head, 'users_return'), mean(tail, 'users_return'))} and the platform's "
        f"{_moved(mean(head, 'platform_return'), mean(tail, 'platform_return'))}. One training run: it shows both "
        "sides training at once and the platform's objective moving with the users' policy, not an equilibrium. "
        "Written by `python benchmarks/platform_coadaptation.py`."])


def _moved(first: float, last: float) -> str:
    return "rose" if last > first else "fell" if last < first else "stayed level"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from-results", action="store_true")
    args = parser.parse_args()
    if not args.from_results:
        from socialgym.experiments.studies.coadaptation import Args, run
        data = run(Args(out=str(ROOT / "runs" / "coadaptation")))
        data["machine"] = machine()
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    data = json.loads(RESULTS.read_text())
    figure(data)
    print(f"written to {write_section('platform.md', 'coadaptation', markdown(data))}")


if __name__ == "__main__":
    main()
