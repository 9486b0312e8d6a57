"""The two intervention studies of issue 20, run as forks, with their numbers written into the docs.

    .venv/bin/python benchmarks/intervention_studies.py                 # scripted agents (seconds)
    .venv/bin/python benchmarks/intervention_studies.py --scale llm     # the embedded model (tens of minutes)
    .venv/bin/python benchmarks/intervention_studies.py --docs-only     # rewrite the docs from the results file

Each study runs through ``socialgym study NAME --scale SCALE --out runs/studies/NAME-SCALE``
(``socialgym.experiments.studies.fork_studies``); its wall time, runs, model and machine (study.json),
its LLM usage (every run's summary.json) and its effects and verdicts (effects.json) go into
``benchmarks/results_intervention_studies.json`` under ``NAME/SCALE``, and from there into the
section ``intervention-studies`` of docs/experiments.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import write_section  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results_intervention_studies.json"
STUDY_NAMES = ("soc-strategy", "misinformation")


def run(name: str, scale: str, root: Path) -> dict:
    import shutil

    from socialgym.experiments.studies.ties_coach import run_study

    out = root / f"{name}-{scale}"
    shutil.rmtree(out, ignore_errors=True)          # a fresh run: its wall time is the study's time
    result = run_study(name, out, scale=scale, progress=False)
    info = json.loads((out / "study.json").read_text())
    effects = json.loads((out / "effects.json").read_text())
    manifest = json.loads((out / "sweep.json").read_text())
    llm = llm_usage(out)
    return {"out": str(out), "wall_seconds": info["wall_seconds"], "runs": info["runs"], "model": info["model"],
            "survey_answers": survey_answers(out),
            "machine": info["machine"], "replicates": len({j["replicate"] for j in manifest["jobs"]}),
            "fork_at": manifest["jobs"][-1].get("fork_at"), "llm": llm, "effects": effects["effects"],
            "verdicts": effects["verdicts"], "problems": result.get("problems", [])}


def llm_usage(out: Path) -> dict[str, int]:
    """The LLM requests and tokens the study's runs sent, and their fallbacks. A fork's summary
    counts the rounds it shares with its origin too (its usage log starts as the origin's):
    those are taken off with the cumulative counts of network.csv at the fork's round."""
    import csv

    usage = {"requests": 0, "fallbacks": 0, "prompt_tokens": 0, "completion_tokens": 0}
    columns = {"requests": "llm_calls", "prompt_tokens": "prompt_tokens", "completion_tokens": "completion_tokens"}
    for job in json.loads((Path(out) / "sweep.json").read_text())["jobs"]:
        run = Path(out) / job["out"]
        llm = json.loads((run / "summary.json").read_text()).get("llm") or {}
        shared = dict.fromkeys(columns, 0)
        if job.get("fork_from"):
            with open(run / "network.csv", newline="") as f:
                row = next(r for r in csv.DictReader(f) if int(r["round"]) == job["fork_at"])
            shared = {k: int(float(row[c])) for k, c in columns.items()}
        for key in usage:
            usage[key] += int(llm.get(key, 0)) - shared.get(key, 0)
    return usage


def survey_answers(out: Path) -> dict[str, list]:
    """Every distinct numeric answer of each survey item over the study's runs (how much the
    agents' answers vary at all)."""
    import csv

    seen: dict[str, set] = {}
    for path in sorted(Path(out).glob("runs/*/rep_*/surveys.csv")):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["status"] == "ok" and row["scale"] != "text":
                    seen.setdefault(f"{row['survey']}.{row['item']}", set()).add(int(row["answer"]))
    return {k: sorted(v) for k, v in sorted(seen.items())}


def _num(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:+.3f}"


def _interval(e: dict) -> str:
    if e["n_pairs"] < 2 or e["ci_low"] is None:
        return "one pair" if e["n_pairs"] == 1 else "n/a"
    return f"[{e['ci_low']:+.3f}, {e['ci_high']:+.3f}]"


def section(results: dict) -> str:
    lines = ["Measured by `benchmarks/intervention_studies.py` (the numbers below are written by it from "
             "`benchmarks/results_intervention_studies.json`).", ""]
    lines += ["| study | agents | runs | replicates | forked after round | wall time | LLM requests sent | "
              "fallbacks | machine | survey answers given |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in STUDY_NAMES:
        for scale, r in sorted(results.get(name, {}).items()):
            who = "scripted" if scale == "scripted" else r["model"]
            wall = f"{r['wall_seconds'] / 60:.1f} min" if r["wall_seconds"] >= 120 else f"{r['wall_seconds']:.0f} s"
            answers = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in r.get("survey_answers", {}).items())
            lines.append(f"| {name} | {who} | {r['runs']} | {r['replicates']} | {r['fork_at']} | {wall} | "
                         f"{r['llm']['requests']} | {r['llm']['fallbacks']} | {r['machine']} | {answers or 'n/a'} |")
    for name in STUDY_NAMES:
        for scale, r in sorted(results.get(name, {}).items()):
            lines += ["", f"**{name}, {scale}** — expectations:", "",
                      "| expectation | B - A | effect | 95 % interval | pairs | verdict |", "|---|---|---|---|---|---|"]
            for v in r["verdicts"]:
                lines.append(f"| {v['text']} | {v['b']} - {v['a']} ({v['metric']}) | {_num(v['effect'])} | "
                             f"{_interval(v)} | {v['n_pairs']} | **{v['verdict']}** |")
            lines += ["", "| B - A | metric | from round | effect | 95 % interval |", "|---|---|---|---|---|"]
            for e in r["effects"]:
                lines.append(f"| {e['b']} - {e['a']} | {e['metric']} | {e['from_round']} | {_num(e['effect'])} | "
                             f"{_interval(e)} |")
            if r["problems"]:
                lines += ["", "Problems reported by the runs: " + "; ".join(r["problems"])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=("scripted", "llm"), default="scripted")
    parser.add_argument("--studies", nargs="+", choices=STUDY_NAMES, default=list(STUDY_NAMES))
    parser.add_argument("--root", default="runs/studies", help="where the study directories go")
    parser.add_argument("--docs-only", action="store_true", help="only rewrite the docs from the results file")
    args = parser.parse_args(argv)
    results = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if not args.docs_only:
        for name in args.studies:
            print(f"{name} ({args.scale}) ...", flush=True)
            results.setdefault(name, {})[args.scale] = run(name, args.scale, Path(args.root))
            RESULTS.write_text(json.dumps(results, indent=1) + "\n")        # after each study: nothing lost
            r = results[name][args.scale]
            print(f"  {r['runs']} runs in {r['wall_seconds']:.0f} s; " +
                  "; ".join(f"{v['verdict']}: {v['text']}" for v in r["verdicts"]), flush=True)
    print(write_section("experiments.md", "intervention-studies", section(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
