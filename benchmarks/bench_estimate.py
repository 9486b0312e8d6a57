"""How close ``socialgym estimate`` comes: its counts against real runs, its token count against a real tokenizer.

    python benchmarks/bench_estimate.py            # writes results_estimate.json and docs/experiments.md's table
    python benchmarks/bench_estimate.py --no-docs  # only the JSON (and the table on stdout)

Three measurements (the JSON's top-level ``seconds``: how long all three took):

1. **Counts.** The demo config (``socialgym.cli.DEMO_CONFIG``: 6 LLM agents x 4 rounds) and
   ``configs/studies/ties-coach.yaml`` shortened to 4 rounds (4 cells x 3 replicates of 30 agents)
   are estimated and then really run, every cell and replicate, against a loopback
   ``FakeServer`` with its default replies: the comparison of ``tests/test_estimate.py``, with
   the same quiet logging overrides and the same ``--text-chars`` (5 for the demo, the length of
   the fake's plain reply "hello"; 13 for ties-coach, the mean length of the fake's eight JSON
   phrases). Both sides count tokens the fake's way (characters // 4 + 1), so this measures the
   simulation: requests, prompt growth, the actions the replies lead to. The estimate is timed.
2. **Tokenizer.** The same two configs as a user estimates them (the embedded model, default
   replies: free texts three quarters of their limit) while every request body the stand-in
   gets and every reply it gives are recorded (by swapping ``standin.StandIn`` for a recording
   subclass during the call). Each request is then counted with the embedded model's own
   tokenizer (SmolLM2's, from its GGUF, vocabulary only) after SmolLM2's chat template
   (``<|im_start|>role\\ncontent<|im_end|>\\n`` per message, its default system message when the
   first message is not one, and the ``<|im_start|>assistant\\n`` generation prompt); each reply
   as its text plus the one ``<|im_end|>`` token that ends it. The ratio is real / stand-in.
3. **Time.** ``estimate()`` of the full ``ties-coach.yaml`` (4 cells x 3 replicates of 30 agents
   x 15 rounds), once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TIES_COACH = ROOT / "configs" / "studies" / "ties-coach.yaml"
FIELDS = ("requests", "prompt_tokens", "completion_tokens")
QUIET = ["logging.report=false", "logging.progress=false", "logging.transcripts=false", "llm.cache=false",
         "run.checkpoint=false", "run.snapshots=false"]
"""Settings that change no request, only what the real runs write (as in tests/test_estimate.py)."""


def _configs() -> list[tuple[str, object, list[str], int]]:
    """(name, source, overrides, the fake's text length for ``ReplyModel(chars=...)``)."""
    from socialgym.cli import DEMO_CONFIG

    return [("demo", DEMO_CONFIG, [], 5),
            ("ties-coach, 4 rounds", TIES_COACH, ["env.max_rounds=4"], 13)]


# ---------------------------------------------------------------------------------- 1. counts
def _actual(cfg) -> dict:
    """Every run of ``cfg`` (each sweep cell x replicate) against its server, summed."""
    from socialgym.experiments import run_experiment
    from socialgym.experiments.run.sweep import jobs

    total = dict.fromkeys(FIELDS, 0)
    with tempfile.TemporaryDirectory(prefix="socialgym-bench-estimate-") as tmp:
        for job in jobs(cfg):
            summary = run_experiment(job.config, Path(tmp) / job.out, progress=False)
            for key in FIELDS:
                total[key] += summary["llm"][key]
    return total


def counts(name: str, source, overrides: list[str], text_chars: int) -> dict:
    from socialgym.experiments import load_config
    from socialgym.experiments.run.estimate import estimate
    from socialgym.experiments.run.standin import ReplyModel
    from socialgym.llm.testing import FakeServer

    with FakeServer() as server:
        cfg = load_config(source, [f"llm.base_url={server.base_url}", "llm.model=fake", *QUIET, *overrides])
        t0 = time.perf_counter()
        result = estimate(cfg, replies=ReplyModel(chars=text_chars))
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        actual = _actual(cfg)
        run_seconds = time.perf_counter() - t0
    predicted = {k: result["total"][k] for k in FIELDS}
    out = {"config": name, "overrides": overrides, "text_chars": text_chars, "runs": result["runs"],
           "agents": result["agents"], "rounds": result["rounds"], "estimated": predicted, "actual": actual,
           "deviation": {k: round(predicted[k] / actual[k] - 1, 4) for k in FIELDS},
           "estimate_seconds": round(seconds, 1), "real_runs_seconds": round(run_seconds, 1)}
    print(f"{name}: estimate {predicted} vs actual {actual} ({seconds:.1f} s vs {run_seconds:.1f} s)", flush=True)
    return out


# ---------------------------------------------------------------------------------- 2. tokenizer
@contextlib.contextmanager
def recording_stand_in() -> Iterator[list[tuple[dict, str]]]:
    """While open, every stand-in answers as usual and appends (request body, reply) to the list."""
    from socialgym.experiments.run import standin

    seen: list[tuple[dict, str]] = []
    original = standin.StandIn

    class Recording(original):
        def __call__(self, body: dict, n: int) -> str:
            reply = super().__call__(body, n)
            seen.append((body, reply))
            return reply

    standin.StandIn = Recording
    try:
        yield seen
    finally:
        standin.StandIn = original


def _template(messages: list, default_system: str) -> str:
    """SmolLM2's chat template, generation prompt included."""
    parts = []
    if not messages or not isinstance(messages[0], dict) or messages[0].get("role") != "system":
        parts.append(f"<|im_start|>system\n{default_system}<|im_end|>\n")
    for m in messages:
        m = m if isinstance(m, dict) else {}
        parts.append(f"<|im_start|>{m.get('role', 'user')}\n{m.get('content', '')}<|im_end|>\n")
    return "".join(parts) + "<|im_start|>assistant\n"


def _default_system(vocab) -> str:
    """The system message SmolLM2's template adds when a conversation has none (from the GGUF)."""
    template = vocab.metadata.get("tokenizer.chat_template") or ""
    mark = "<|im_start|>system\n"
    if mark in template:
        return template.split(mark, 1)[1].split("<|im_end|>", 1)[0]
    return ""


def tokenizer_gap(name: str, source, overrides: list[str], vocab) -> dict:
    from socialgym.experiments import load_config
    from socialgym.experiments.run.estimate import estimate

    cfg = load_config(source, overrides)
    with recording_stand_in() as seen:
        result = estimate(cfg)
    system = _default_system(vocab)

    def tokens(text: str) -> int:
        return len(vocab.tokenize(text.encode("utf-8", "replace"), add_bos=False, special=True))

    prompt = dict(standin=0, real=0, chars=0)
    completion = dict(standin=0, real=0, chars=0)
    for body, reply in seen:
        messages = body.get("messages") or []
        chars = sum(len(str(m.get("content", ""))) for m in messages if isinstance(m, dict))
        prompt["standin"] += chars // 4 + 1
        prompt["chars"] += chars
        prompt["real"] += tokens(_template(messages, system))
        completion["standin"] += len(reply) // 4 + 1
        completion["chars"] += len(reply)
        completion["real"] += tokens(reply) + 1     # the <|im_end|> that ends the reply
    runs = result["runs"] // len(result["cells"])   # replicates: the estimate counts each simulated request x them
    if (result["total"]["prompt_tokens"], result["total"]["completion_tokens"]) != \
            (runs * prompt["standin"], runs * completion["standin"]):
        print(f"warning: {name}: the recorded requests do not add up to the estimate's total", flush=True)
    out = {"config": name, "overrides": overrides, "requests": len(seen),
           "prompt_tokens": {**prompt, "ratio": round(prompt["real"] / prompt["standin"], 3),
                             "chars_per_real_token": round(prompt["chars"] / prompt["real"], 2)},
           "completion_tokens": {**completion, "ratio": round(completion["real"] / completion["standin"], 3),
                                 "chars_per_real_token": round(completion["chars"] / completion["real"], 2)}}
    print(f"{name}: SmolLM2 / stand-in tokens: prompts {out['prompt_tokens']['ratio']}, "
          f"completions {out['completion_tokens']['ratio']} ({len(seen)} requests)", flush=True)
    return out


# ---------------------------------------------------------------------------------- 3. time
def full_estimate() -> dict:
    from socialgym.experiments import load_config
    from socialgym.experiments.run.estimate import estimate

    cfg = load_config(TIES_COACH, [])
    t0 = time.perf_counter()
    result = estimate(cfg)
    seconds = time.perf_counter() - t0
    out = {"config": "ties-coach", "cells": len(result["cells"]), "runs": result["runs"],
           "agents": result["agents"], "rounds": result["rounds"], "seconds": round(seconds, 1),
           "estimated": {k: result["total"][k] for k in FIELDS}}
    print(f"ties-coach (full): {seconds:.1f} s, {out['estimated']}", flush=True)
    return out


# ---------------------------------------------------------------------------------- table
def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def markdown(r: dict) -> str:
    names = {"requests": "requests", "prompt_tokens": "prompt tokens", "completion_tokens": "completion tokens"}
    lines = [f"Measured with `python benchmarks/bench_estimate.py` ({r['machine']}).", "",
             "The estimate against real runs on the loopback fake server (its default replies; tokens "
             "counted the fake's way on both sides):", "",
             "| config | runs | | estimated | actual | estimate vs actual |", "|---|---:|---|---:|---:|---:|"]
    for c in r["counts"]:
        shape = f"{c['config']} ({c['agents']} agents × {c['rounds']} rounds)"
        for i, k in enumerate(FIELDS):
            head = (shape, str(c["runs"])) if i == 0 else ("", "")
            lines.append(f"| {head[0]} | {head[1]} | {names[k]} | {c['estimated'][k]:,} | {c['actual'][k]:,} | "
                         f"{_pct(c['deviation'][k])} |")
    full = r["full"]
    times = " and ".join(f"{c['estimate_seconds']:.1f} s ({c['config']})" for c in r["counts"])
    lines += ["", f"The estimates took {times}. The estimate of the full `ties-coach.yaml` ({full['cells']} "
                  f"cells × {full['runs'] // full['cells']} replicates of {full['agents']} agents × {full['rounds']} "
                  f"rounds: {full['estimated']['requests']:,} requests, {full['estimated']['prompt_tokens']:,} prompt "
                  f"and {full['estimated']['completion_tokens']:,} completion tokens) took {full['seconds']:.0f} s.",
              "", "The embedded model's tokenizer (SmolLM2, chat template included) on the stand-in's own requests "
                  "and replies, against the stand-in's count (characters // 4 + 1), for the configs as "
                  "estimated without `--text-chars` (requests: each cell simulated once, before its replicates "
                  "multiply it):", "",
              "| config | requests | prompt tokens: stand-in | SmolLM2 | ratio | completion tokens: stand-in | "
              "SmolLM2 | ratio |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for g in r["tokenizer"]:
        p, c = g["prompt_tokens"], g["completion_tokens"]
        lines.append(f"| {g['config']} (embedded model) | {g['requests']:,} | {p['standin']:,} | {p['real']:,} | {p['ratio']:.2f} | "
                     f"{c['standin']:,} | {c['real']:,} | {c['ratio']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results_estimate.json")))
    args = parser.parse_args()
    import llama_cpp

    from socialgym.llm.local import default_model_path

    started = time.perf_counter()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_average_at_start": load}
    result["counts"] = [counts(*c) for c in _configs()]
    vocab = llama_cpp.Llama(model_path=str(default_model_path()), vocab_only=True, verbose=False)
    result["tokenizer_model"] = default_model_path().name
    result["tokenizer"] = [tokenizer_gap(name, source, overrides, vocab) for name, source, overrides, _ in _configs()]
    result["full"] = full_estimate()
    result["seconds"] = round(time.perf_counter() - started, 1)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    table = markdown(result)
    print(table)
    if not args.no_docs:
        print(f"written to {write_section('experiments.md', 'estimate_accuracy', table)}")


if __name__ == "__main__":
    main()
