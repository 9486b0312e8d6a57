"""What `socialgym demo` writes, measured: wall time, English-like texts, tokens, fallbacks.

    python benchmarks/bench_demo_text.py                 # runs the demo, writes docs/llm.md's table
    python benchmarks/bench_demo_text.py --run runs/demo-3   # measures an existing demo run

Runs ``socialgym demo`` (6 LLM agents x 4 rounds on the embedded SmolLM2-135M model, split
generation) in a fresh directory as a user would and times the whole command (the llama.cpp
server's start and the report included). A text is English-like when at least 80 % of its words,
@mentions removed, are in Debian's wamerican word list (``socialgym.metrics.language``).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import write_section  # noqa: E402


FUNCTION_WORDS = frozenset("""a about above after again all also am an and any are as at be been before being but by
can could did do does doing for from had has have having he her here hers him his how i if in into is it its just
me more most my no not now of on once only or other our ours out over own same she should so some such than that
the their theirs them then there these they this those through to too under until up very was we were what when
where which while who whom why will with would you your yours yourself really like get one make much many well""".split())
"""Words that carry no content: a comment "shares a content word" with its post when they have a
word of at least three letters in common that is not one of these."""


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z']{3,}", text.lower().replace("’", "'")) if w not in FUNCTION_WORDS}


def answering(events: list[dict]) -> dict:
    """Of the comments on a post with a text, how many share a content word with that post."""
    by_id = {e["id"]: e for e in events if e["kind"] in ("POST", "COM", "DM")}
    pairs = [(e["text"], by_id[e["target_id"]]["text"]) for e in events if e["kind"] == "COM" and e["text"]
             and e.get("target_id") in by_id and by_id[e["target_id"]]["text"]]
    shared = sum(bool(content_words(c) & content_words(p)) for c, p in pairs)
    return {"comments_on_texts": len(pairs), "comments_sharing_a_content_word": shared}


ECHO_WORDS = 6
"""A text *echoes* its request when it repeats this many consecutive words of the request's own
instruction and quotes (the small model copying the post it answers or its own earlier post)."""


def echoes(run_dir: Path) -> dict:
    """Of the text requests (purpose ``write``) in the run's transcripts, how many replies repeat
    ``ECHO_WORDS`` consecutive words of their request's user message."""
    from socialgym.rundir import layout

    def words(text: str) -> list[str]:
        return re.findall(r"[a-z0-9']+", text.lower().replace("\u2019", "'"))

    rows = [json.loads(line) for line in (run_dir / layout.TRANSCRIPTS).read_text().splitlines() if line.strip()]
    writes = [r for r in rows if r.get("purpose") == "write" and r.get("reply")]
    echoed = 0
    for r in writes:
        asked, said = words(r["messages"][-1]["content"]), words(r["reply"])
        runs = {tuple(asked[i:i + ECHO_WORDS]) for i in range(len(asked) - ECHO_WORDS + 1)}
        echoed += any(tuple(said[i:i + ECHO_WORDS]) in runs for i in range(len(said) - ECHO_WORDS + 1))
    return {"text_requests": len(writes), "texts_echoing_their_request": echoed}


def measure(run_dir: Path, seconds: float | None) -> dict:
    from socialgym.metrics.language import english_share, load_wordlist

    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    texts = [e["text"] for e in events if e["kind"] in ("POST", "COM", "DM")]
    summary = json.loads((run_dir / "summary.json").read_text())
    quality = english_share(texts, load_wordlist())
    llm = summary["llm"]
    agent_rounds = summary["n_agents"] * summary["rounds_completed"]
    examples = [e["text"] for e in events if e["kind"] in ("POST", "COM", "DM") and e["round"] == 4][:3]
    opening = sum(t.startswith("@") for t in texts)
    return {"wall_seconds": round(seconds, 1) if seconds is not None else None, "run_seconds": summary["seconds"],
            "texts": quality["texts"], "english_like": quality["english_like"],
            "english_share": round(quality["share"], 3), "median_word_share": round(quality["median_word_share"], 3),
            "requests_per_agent_round": round(llm["requests"] / agent_rounds, 2),
            "prompt_tokens_per_agent_round": round(llm["prompt_tokens"] / agent_rounds, 1),
            "completion_tokens_per_agent_round": round(llm["completion_tokens"] / agent_rounds, 1),
            "fallbacks": llm["fallbacks"], "repairs": llm["repairs"], "examples": examples,
            "distinct_texts": len(set(texts)), "texts_opening_with_a_mention": opening,
            **answering(events), **echoes(run_dir),
            "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores"}


def markdown(m: dict) -> str:
    wall = f"{m['wall_seconds']:.0f} s" if m["wall_seconds"] is not None else "not timed"
    rows = [("wall time of `socialgym demo` (server start and report included)", wall),
            ("time of the run itself (summary.json)", f"{m['run_seconds']:.0f} s"),
            ("texts (POST, COM, DM)", m["texts"]),
            ("English-like texts", f"{m['english_like']} ({100 * m['english_share']:.1f} %)"),
            ("distinct texts", f"{m['distinct_texts']} ({100 * m['distinct_texts'] / max(1, m['texts']):.1f} %)"),
            ("texts opening with an @mention", m["texts_opening_with_a_mention"]),
            ("comments sharing a content word with the post they answer",
             f"{m['comments_sharing_a_content_word']} of {m['comments_on_texts']}"),
            (f"replies repeating {ECHO_WORDS}+ consecutive words of their own text request",
             f"{m['texts_echoing_their_request']} of {m['text_requests']}"),
            ("median share of English words per text", f"{100 * m['median_word_share']:.0f} %"),
            ("requests per agent-round", m["requests_per_agent_round"]),
            ("prompt tokens per agent-round (SmolLM2 tokenizer)", f"{m['prompt_tokens_per_agent_round']:,.0f}"),
            ("completion tokens per agent-round", f"{m['completion_tokens_per_agent_round']:,.0f}"),
            ("fallbacks / re-prompts", f"{m['fallbacks']} / {m['repairs']}")]
    lines = [f"Measured with `python benchmarks/bench_demo_text.py` ({m['machine']}):", "",
             "| | |", "|---|---:|"] + [f"| {k} | {v} |" for k, v in rows]
    lines += ["", "Texts of the last round:", ""] + [f"- {json.dumps(t, ensure_ascii=False)}" for t in m["examples"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default=None, help="an existing demo run directory to measure instead")
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results_demo_text.json")))
    args = parser.parse_args()
    seconds = None
    if args.run is None:
        run_dir = Path(tempfile.mkdtemp(prefix="socialgym-demo-")) / "demo"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "socialgym.cli", "demo", "--out", str(run_dir)], check=True)
        seconds = time.perf_counter() - start
    else:
        run_dir = Path(args.run)
    result = measure(run_dir, seconds)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    table = markdown(result)
    print(table)
    if not args.no_docs:
        print(f"written to {write_section('llm.md', 'demo_text', table)}")


if __name__ == "__main__":
    main()
