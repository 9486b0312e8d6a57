"""docs/reproduction.md from the committed summaries of the runs behind it.

    python benchmarks/reproduction.py                 # rebuild the page from benchmarks/reproduction/*.json
    python benchmarks/reproduction.py --rerun         # rerun the scripted studies, rewrite their summaries, rebuild
    python benchmarks/reproduction.py --core runs/study-small --moderation runs/moderation \\
        --moderation-no-trolls runs/moderation-no-trolls  # summaries of the LLM studies from their output directories

``make reproduction`` runs ``--rerun``. Every number of the page comes from a summary in
``benchmarks/reproduction/`` (small JSON files: one value per independent run and measure), and
each summary from a run's output directory:

- ``core.json``: the core paper's study (``socialgym study ties-coach``: run_records.json, study.json);
- ``moderation.json``: the facilitators' strategy comparison (``socialgym moderation``: discussions.jsonl),
  with a no-troll arm for the troll claim;
- ``recagent.json``, ``agentsociety.json``: the scripted-user studies
  (``socialgym study recagent``: results.json beside its run directories /
  ``socialgym study agentsociety``: summary.json);
- ``soc_strategy.json``: recagent's Soc-Strategy as a fork on the social recommender (``socialgym study soc-strategy``);
- ``rerun.json``: what ``--rerun`` took, on which machine.

The verdicts follow the rules of evidence (socialgym/experiments/studies/evidence.py), fixed before
the data; tests/test_reproduction_page.py checks that the page equals this script's output.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _docs import DOCS, machine, write_section  # noqa: E402

from socialgym.rundir.files import finite_json  # noqa: E402

SUMMARIES = ROOT / "benchmarks" / "reproduction"
PAGE = DOCS / "reproduction.md"
SCRIPTED = ("recagent", "agentsociety", "soc_strategy")


def load(name: str) -> dict | None:
    path = SUMMARIES / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def save(name: str, summary: dict) -> Path:
    SUMMARIES.mkdir(parents=True, exist_ok=True)
    path = SUMMARIES / f"{name}.json"
    path.write_text(json.dumps(summary, indent=1, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------ summaries from run directories
def core_summary(study: Path) -> dict:
    from socialgym.experiments.define import load_config
    from socialgym.rundir import layout

    info = json.loads((study / layout.STUDY_INFO).read_text())
    records = json.loads((study / layout.STUDY_RECORDS).read_text())
    cfg = load_config(study / layout.CONFIG)
    model = info["model"]
    return finite_json({"study": "ties-coach", "scale": info.get("scale"), "model": model,
                    "command": f"socialgym study ties-coach --scale {info.get('scale')} --out DIR",
                    "design": {"agents": int(cfg.env["n_agents"]), "rounds": int(cfg.env["max_rounds"]),
                               "actions": int(cfg.env.get("n_actions", 3)), "replicates": int(cfg.run.replicates),
                               "runs": len(records)},
                    "wall_seconds": info["wall_seconds"], "resumed": bool(info.get("resumed")),
                    "machine": info["machine"], "runs": records})


def _discussions(out: Path, arm: str | None = None) -> list[dict]:
    """One record per discussion: mean toxicity of the users' comments, its slope on the user turn,
    the non-troll users' mean toxicity, mean words, ROUGE-L diversity, and the slope of a comment's
    nDFU on its toxicity."""
    import numpy as np

    from socialgym.experiments.studies.moderation import comment_rows, load_records
    from socialgym.experiments.studies.reproduction_table import slope

    records = load_records(out)
    rows = comment_rows(records)
    out_rows = []
    for rec in records:
        mine = [r for r in rows if r["strategy"] == rec["strategy"] and r["discussion"] == rec["index"]]
        tox = [r["toxicity"] for r in mine]
        finite = [t for t in tox if t is not None and math.isfinite(t)]
        others = [r["toxicity"] for r in mine if r["role"] != "troll" and r["toxicity"] is not None
                  and math.isfinite(r["toxicity"])]
        out_rows.append({"strategy": arm or rec["strategy"], "discussion": rec["index"],
                         "toxicity": float(np.mean(finite)) if finite else None,
                         "toxicity_slope": slope([r["user_turn"] for r in mine], tox),
                         "others_toxicity": float(np.mean(others)) if others else None,
                         "words": float(np.mean([r["words"] for r in mine])) if mine else None,
                         "diversity": rec.get("diversity"),
                         "ndfu_slope": slope(tox, [r["ndfu_toxicity"] for r in mine])})
    return out_rows


def moderation_summary(out: Path, no_trolls: Path | None) -> dict:
    config = json.loads((out / "config.json").read_text())
    discussions = _discussions(out)
    if no_trolls is not None:
        discussions += [dict(d, strategy="trolls") for d in discussions if d["strategy"] == "no_moderator"]
        discussions += _discussions(no_trolls, "no_trolls")
    per_strategy = len([d for d in discussions if d["strategy"] == "no_moderator"])
    model = (config.get("llm") or {}).get("model") or config.get("model") or "the embedded SmolLM2-135M"
    return finite_json({"study": "moderation", "model": model,
                    "command": "socialgym moderation --out DIR (and --trolls 0 --strategies no_moderator)",
                    "design": {"agents": config.get("users"), "rounds": config.get("max_turns"),
                               "runs": per_strategy, "annotators": config.get("annotators")},
                    "discussions": discussions})


def soc_strategy_summary(study: Path) -> dict:
    from socialgym.experiments.define import load_config
    from socialgym.rundir import layout

    effects = json.loads((study / layout.EFFECTS_JSON).read_text())
    cfg = load_config(study / layout.CONFIG)
    info = json.loads((study / layout.STUDY_INFO).read_text())
    measures = {}
    for e in effects["effects"]:
        measures[f"{e['metric']}:difference"] = {
            "description": f"{e['b']} − {e['a']}, per replicate pair, mean over rounds {e['from_round']}..T",
            "per_run": {"soc − control": e["per_pair"]}}
    return finite_json({"study": "soc-strategy", "command": "socialgym study soc-strategy --out DIR",
                    "population": "scripted users", "wall_seconds": info["wall_seconds"],
                    "design": {"agents": int(cfg.env["n_agents"]), "rounds": int(cfg.env["max_rounds"]),
                               "runs": len(next(iter(measures.values()))["per_run"]["soc − control"]),
                               "recommender": cfg.env["recommender"], "fork_at": int(cfg.run.fork_at)},
                    "measures": measures})


# ------------------------------------------------------------------------ the scripted rerun
def rerun(root: Path) -> dict:
    """Run the scripted studies afresh into ``root`` and rewrite their summaries."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    times = {}
    for name, command, result in (
            ("recagent", ["-m", "socialgym.cli", "study", "recagent"], "results.json"),
            ("agentsociety", ["-m", "socialgym.cli", "study", "agentsociety"], "summary.json")):
        out = root / name
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        subprocess.run([sys.executable, *command, "--out", str(out)], check=True, env=env)
        times[name] = round(time.perf_counter() - start, 1)
        save(name, json.loads((out / result).read_text()))
    from socialgym.experiments.studies.ties_coach import run_study

    out = root / "soc-strategy"
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    run_study("soc-strategy", out, progress=False)
    times["soc_strategy"] = round(time.perf_counter() - start, 1)
    save("soc_strategy", soc_strategy_summary(out))
    record = {"seconds": times, "total_seconds": round(sum(times.values()), 1),
              "machine": machine(), "python": platform.python_version()}
    save("rerun", record)
    return record


# ------------------------------------------------------------------------ the page
def page() -> str:
    from socialgym.experiments.studies import reproduction as rep

    summaries = {name: load(name) for name in ("core", "moderation", *SCRIPTED, "rerun", "platform")}
    return rep.render_page(summaries, learnability_section())


def cocoon_table(summary: dict | None) -> str:
    """The ``cocoon`` section of docs/recommenders.md: recagent's conditions, means over seeds."""
    if summary is None:
        return "Not run yet: `make reproduction`."
    import numpy as np

    m, d = summary["measures"], summary["design"]
    entropy, satisfaction = m["entropy_after"]["per_run"], m["satisfaction_after"]["per_run"]
    lines = [f"| condition (from round {d['intervene_from']}) | mean entropy (nats) | satisfaction (1-10, scripted rule) |",
             "|---|---:|---:|"]
    order = ("none", "replace_1", "replace_3", "replace_5", "every_5", "every_10", "friends_1", "friends_3",
             "friends_5", "both")
    for c in [c for c in order if c in entropy]:
        key = "soc" if c == "friends_1" and c not in satisfaction else c      # the same runs
        sat = f"{np.mean(satisfaction[key]):.2f}" if key in satisfaction else "—"
        lines.append(f"| {c} | {np.mean(entropy[c]):.3f} | {sat} |")
    drop = np.mean(m["entropy_drop_from_peak"]["per_run"]["none"])
    lines += ["", f"{d['agents']} scripted users with {d.get('interests_per_user')} interests, {d['rounds']} rounds, "
                  f"{d['items_per_list']} items per list, MF, means over {d['runs']} seeds; without intervention the "
                  f"entropy ends {100 * drop:.1f} % below its peak. replace_1 is also the Rec-Strategy and the "
                  "every-round intervention. Written by `python benchmarks/reproduction.py` from "
                  "benchmarks/reproduction/recagent.json."]
    return "\n".join(lines)


def learnability_section() -> str:
    """The section benchmarks/tasks.py writes, rebuilt from its committed results."""
    from tasks import RESULTS, learnability_markdown

    if not RESULTS.is_file():
        return "Not measured yet: run `python benchmarks/tasks.py --train`."
    return learnability_markdown(json.loads(RESULTS.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rerun", action="store_true", help="rerun the scripted studies (make reproduction)")
    parser.add_argument("--runs", default="runs/reproduction", help="where --rerun writes its runs")
    parser.add_argument("--core", help="a finished `socialgym study ties-coach` directory")
    parser.add_argument("--moderation", help="a finished `socialgym moderation` directory")
    parser.add_argument("--moderation-no-trolls", help="the same with --trolls 0 --strategies no_moderator")
    parser.add_argument("--soc-strategy", help="a finished `socialgym study soc-strategy` directory")
    parser.add_argument("--recagent", help="a finished `socialgym study recagent` directory")
    parser.add_argument("--agentsociety", help="a finished `socialgym study agentsociety` directory")
    args = parser.parse_args()
    if args.core:
        print(f"written {save('core', core_summary(Path(args.core)))}")
    if args.moderation:
        no_trolls = Path(args.moderation_no_trolls) if args.moderation_no_trolls else None
        print(f"written {save('moderation', moderation_summary(Path(args.moderation), no_trolls))}")
    if args.soc_strategy:
        print(f"written {save('soc_strategy', soc_strategy_summary(Path(args.soc_strategy)))}")
    if args.recagent:
        print(f"written {save('recagent', json.loads((Path(args.recagent) / 'results.json').read_text()))}")
    if args.agentsociety:
        print(f"written {save('agentsociety', json.loads((Path(args.agentsociety) / 'summary.json').read_text()))}")
    if args.rerun:
        record = rerun(Path(args.runs))
        print(f"scripted studies rerun in {record['total_seconds']:.0f} s: {record['seconds']}")
    PAGE.write_text(page(), encoding="utf-8")
    print(f"written {PAGE}")
    print(f"written {write_section('recommenders.md', 'cocoon', cocoon_table(load('recagent')))}")


if __name__ == "__main__":
    main()
