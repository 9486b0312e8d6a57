"""Hybrid populations at 100,000 agents: LLM agents, archetypes and agents distilled from LLM runs.

Three steps, each resumable by re-running (a finished step is skipped), then the docs:

    python benchmarks/hybrid_scale.py --sources   # small LLM runs on the embedded model, decision logs kept
    python benchmarks/hybrid_scale.py --distill   # socialgym distill: model.pt and the fidelity report
    python benchmarks/hybrid_scale.py --scale     # 100,000 agents, 5 rounds: 20 LLM agents, archetypes, distilled
    python benchmarks/hybrid_scale.py --measure   # (re)read the scale run's requests, tokens and tiers
    python benchmarks/hybrid_scale.py --docs      # docs/hybrid.md from benchmarks/results_hybrid.json

Every step runs the ``socialgym`` command itself (what a user would type) and times it whole.
The outputs go to ``runs/hybrid/`` (ignored by git); the numbers to ``results_hybrid.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _docs import machine, write_section  # noqa: E402

OUT = ROOT / "runs" / "hybrid"
RESULTS = ROOT / "benchmarks" / "results_hybrid.json"
SOCIALGYM = str(Path(sys.executable).with_name("socialgym"))

# the LLM agents' settings: the demo's compact prompts; at most 8 peers named in a plan (at
# 100,000 agents the full list would be a 100,000-value enum in the plan's schema)
LLM_PARAMS = {"generation": "split", "text_chars": 160, "text_tokens": 38, "new_topics": False, "max_topics": 6,
              "item_chars": 56, "own_posts": 0, "max_users": 8,
              "memory": {"recent": 3, "peers_in_prompt": 1, "opinions_in_prompt": 2, "max_chars": 320}}
# one per-agent interface for the sources and the scale run (a distilled network fits one)
ENV = {"n_actions": 2, "recommender": "random", "feed_size": 4, "vote_feed_size": 3}
SOURCES = {"runs": 3, "agents": 8, "rounds": 4}
SCALE = {"agents": 100_000, "rounds": 5, "llm_agents": 20, "archetype_share": 0.3, "k": 4, "pool_size": 2}


def _save(key: str, value) -> None:
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[key] = value
    data["machine"] = machine()
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")


def _run(args: list[str]) -> float:
    start = time.perf_counter()
    print("$ socialgym " + " ".join(args), flush=True)
    subprocess.run([SOCIALGYM, *args], check=True)
    return time.perf_counter() - start


def _config(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def sources() -> None:
    """Small all-LLM runs with decision logs: what the distilled policy learns from."""
    out, rows = OUT / "sources", []
    for s in range(SOURCES["runs"]):
        run = out / f"run{s}"
        cfg = _config(out / "config.yaml", {
            "seed": s, "env": {**ENV, "n_agents": SOURCES["agents"], "max_rounds": SOURCES["rounds"]},
            "policy": {"kind": "llm", "coach": False, "params": LLM_PARAMS}, "llm": {"max_concurrency": 1},
            "logging": {"decisions": "llm", "report": False, "progress": False}})
        if not (run / "summary.json").exists() or json.loads((run / "summary.json").read_text())["status"] != "complete":
            if run.exists():
                import shutil
                shutil.rmtree(run)
            seconds = _run(["run", str(cfg), "--out", str(run), "--quiet", "--set", f"seed={s}"])
        else:
            seconds = None
        summary = json.loads((run / "summary.json").read_text())
        rows.append({"run": str(run.relative_to(ROOT)), "seconds": seconds, "llm": summary["llm"]})
    _save("sources", {**SOURCES, "runs_done": rows})


def distill() -> None:
    runs = [str(OUT / "sources" / f"run{s}") for s in range(SOURCES["runs"])]
    seconds = _run(["distill", *runs, "--out", str(OUT / "model.pt"), "--report", str(OUT / "fidelity")])
    from socialgym.rundir import layout
    result = json.loads((OUT / "fidelity" / layout.FIDELITY_JSON).read_text())
    _save("distill", {"seconds": seconds, "result": result})


def scale() -> None:
    run = OUT / "scale"
    cfg = _config(OUT / "scale.yaml", {
        "seed": 0, "env": {**ENV, "n_agents": SCALE["agents"], "max_rounds": SCALE["rounds"]},
        "policy": {"groups": [
            {"name": "llm", "policy": "llm", "agents": SCALE["llm_agents"], "coach": False, "params": LLM_PARAMS},
            {"name": "archetypes", "policy": "archetype", "share": SCALE["archetype_share"],
             "params": {"k": SCALE["k"], "pool_size": SCALE["pool_size"]}},
            {"name": "distilled", "policy": "distilled", "params": {"path": str(OUT / "model.pt")}}]},
        "llm": {"max_concurrency": 1},
        "run": {"snapshots": False},
        "logging": {"events": False, "transcripts": True, "network_every": SCALE["rounds"], "report": False}})
    if run.exists():
        import shutil
        shutil.rmtree(run)
    seconds = _run(["run", str(cfg), "--out", str(run)])
    measure(seconds)


def measure(seconds: float | None = None) -> None:
    """The scale run's numbers: requests and tokens by group and purpose (the usage log kept in
    its checkpoint), each tier's metrics. ``seconds``: the command's wall time (None: keep the
    recorded one)."""
    from socialgym.experiments.analysis.tiers import tier_table
    from socialgym.experiments.run.checkpoint import read_checkpoint
    from socialgym.rundir import layout

    run = OUT / "scale"
    if seconds is None:
        seconds = json.loads(RESULTS.read_text())["scale"]["seconds"]
    summary = json.loads((run / layout.SUMMARY).read_text())
    groups = summary["groups"]
    usage = read_checkpoint(run / layout.CHECKPOINT)["llm"]["usage"]
    by = {}
    for call in usage.calls:
        row = by.setdefault((groups.get(call.agent, "?"), call.purpose), Counter())
        row.update(requests=1, prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens)
    _save("scale", {**SCALE, "seconds": seconds, "run_seconds": summary["seconds"], "llm": summary["llm"],
                    "requests": [{"group": g, "purpose": p, **c} for (g, p), c in sorted(by.items())],
                    "tiers": tier_table(run)})


def docs() -> None:
    from socialgym.experiments.analysis.fidelity import fidelity_markdown
    from socialgym.experiments.analysis.tiers import tier_markdown

    data = json.loads(RESULTS.read_text())
    src = data["sources"]
    done = [r for r in src["runs_done"] if r["seconds"] is not None]
    write_section("hybrid.md", "fidelity",
                  f"Sources: {src['runs']} runs of {src['agents']} LLM agents x {src['rounds']} rounds on the embedded "
                  f"model (SmolLM2-135M), {sum(r['seconds'] for r in done) / 60:.1f} min in all; the last run held out. "
                  f"`socialgym distill` took {data['distill']['seconds']:.0f} s (training and the replay).\n\n"
                  + fidelity_markdown(data["distill"]["result"]).replace(str(ROOT) + "/", ""))
    s = data["scale"]
    lines = [f"{s['agents']:,} agents, {s['rounds']} rounds on {data['machine']}: **{s['seconds'] / 60:.1f} min** for the "
             f"whole `socialgym run` (the run itself: {s['run_seconds'] / 60:.1f} min). "
             f"LLM requests {s['llm']['requests']:,}, prompt tokens {s['llm']['prompt_tokens']:,}, completion tokens "
             f"{s['llm']['completion_tokens']:,}, fallbacks {s['llm']['fallbacks']}.", "",
             "| group | purpose | requests | prompt tokens | completion tokens |", "|---|---|---:|---:|---:|"]
    lines += [f"| {r['group']} | {r['purpose']} | {r['requests']:,} | {r['prompt_tokens']:,} | {r['completion_tokens']:,} |"
              for r in s["requests"]]
    lines += ["", "Each tier's metrics (per agent-round; ties after the last round):", "", tier_markdown(s["tiers"])]
    write_section("hybrid.md", "scale", "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for step in ("sources", "distill", "scale", "measure", "docs"):
        parser.add_argument(f"--{step}", action="store_true")
    args = parser.parse_args()
    for step, fn in (("sources", sources), ("distill", distill), ("scale", scale), ("measure", measure),
                     ("docs", docs)):
        if getattr(args, step):
            fn()


if __name__ == "__main__":
    main()
