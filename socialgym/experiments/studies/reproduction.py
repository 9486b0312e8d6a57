"""The reproduction table: every claim of the four papers the package can test, one row each.

Each row is built from a small summary of the runs behind it (``benchmarks/reproduction/*.json``,
written by ``benchmarks/reproduction.py``) and judged by the rules of evidence
(:mod:`socialgym.experiments.studies.evidence`): the paper's value and where it says so,
socialgym's value with its number of independent runs and a bootstrap interval, the size beside
the paper's, the population (scripted users or LLM agents), the command that reruns it, and the
verdict — "not tested at this scale" whenever the runs are below the paper's design.

The paper's values below are copied from the papers (notes/reproduction_sources.md has the
sources); socialgym's values come only from the summaries.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence


from socialgym.experiments.studies import claims as core
from socialgym.experiments.studies import evidence as ev
from socialgym.experiments.studies import reproduction_recsys as recsys
from socialgym.experiments.studies.platform_objectives import milli_rows
from socialgym.experiments.studies.reproduction_table import Claim, Row, not_run, row, scale_of


# ------------------------------------------------------------------------ the core paper
CORE = "core paper"
CORE_COMMAND = "socialgym study ties-coach --scale paper --replicates 5 --base-url URL --model M --out DIR"
CORE_CLAIMS = {
    "1.": ("rewards are learnable: performance rises over rounds, with and without the coach",
           "rises over rounds (figure only)", "§4, Fig. 2"),
    "2.": ("INF is the easiest task, EMO relatively high, PRE partly controllable, COORD (coordination) the hardest",
           "INF easiest, coordination hardest (figure only)", "§4, Fig. 2"),
    "3.": ("the coach speeds up early learning; without it agents end higher",
           "coach faster early, better final performance without it (figure only)", "§4, Fig. 2a/2b"),
    "4.": ("LLM text-based ties are steadier across θ and closer to real networks than the heuristic",
           "steadier and closer (figure only)", "§4, Figs. 3-4"),
    "5.": ("with the coach, degrees shift lower", "lower degrees with the coach (figure only)",
           "App. C.2, Figs. 5-8"),
    "6.": ("the coach speeds up early learning for some tasks", "for some policies (figure only; no per-group number)",
           "§4, Fig. 2"),
    "7.": ("the heuristic diverges in clustering and average shortest path", "diverges (figure only)",
           "§4, Fig. 3"),
    "8.": ("stance homophily of the final network (φ < 1: ties within a stance)",
           "not reported (φ defined only)", "App. C.1"),
}


def _core_result(v: core.Verdict) -> str:
    x = v.numbers
    key = v.claim.split(" ")[0]
    if key == "1.":
        return "slope per round: " + "; ".join(f"{t} {ev.Interval(**x[t]).text()}" for t in x)
    if key == "2.":
        return ("last-third means " + " > ".join(f"{t} {x['means'][t]:.3f}" for t in x["ranking"])
                + f"; the paper's order in {100 * x['p_paper_order']:.0f} % of run resamples, the opposite in "
                f"{100 * x['p_opposite']:.0f} %")
    if key == "3.":
        return f"coach − none, first third {ev.Interval(**x['early']).text()}; last third {ev.Interval(**x['late']).text()}"
    if key == "4.":
        return (f"LLM − heuristic: steadier on {x['llm_more_stable']} of {x['metrics']} metrics, closer to the "
                "band on " + f"{x['llm_closer']}; " + "; ".join(
                    f"{m} spread {ev.Interval(**x[m]['spread']).text()}, distance {ev.Interval(**x[m]['distance']).text()}"
                    for m in x if isinstance(x[m], dict)))
    if key == "5.":
        return f"mean degree, coach − none: {ev.Interval(**x['difference']).text()}"
    if key == "6.":
        return "early third, coach − none: " + "; ".join(f"{t} {ev.Interval(**x[t]).text()}" for t in x)
    if key == "7.":
        return "distance to the band, LLM − heuristic: " + "; ".join(
            f"{m} {ev.Interval(**x[m]['distance']).text()}" for m in x)
    phi = ev.Interval(**x["phi"])
    if phi.n == 0:
        return "φ undefined in every run (n = 0): a run's agents hold one stance, or no tie reaches θ"
    return f"φ {phi.text()}"


def core_rows(summary: Mapping | None) -> list[Row]:
    if summary is None:
        return [not_run(CORE, c, v, w, CORE_COMMAND) for c, v, w in CORE_CLAIMS.values()]
    from socialgym.experiments.studies.ties_coach import bands

    scale = scale_of(summary)
    model = summary.get("model")
    rows = []
    for v in core.all_claims(summary["runs"], bands(), scale):
        claim, value, where = CORE_CLAIMS[v.claim.split(" ")[0]]
        rows.append(Row(CORE, claim, value, where, f"LLM agents ({model})", _core_result(v) + f" (n = {v.n} independent units)",
                        "the paper gives no number", CORE_COMMAND, v.verdict, v.shortfalls))
    return rows


# ------------------------------------------------------------------------ facilitators
FAC = "facilitators"
FAC_COMMAND = "socialgym moderation --discussions 8 --base-url URL --model M --out DIR"
FAC_DESIGN = ev.Design(agents=7, rounds=None, llm_behaviour=True)
"""7 users per discussion; turns and discussions per strategy are not given (MIN_RUNS discussions)."""
TABLE_1 = {"no_instructions": -0.426, "rules_only": -0.461, "moderation_guidelines": -0.277,
           "facilitation_guidelines": -0.230, "moderation_game": -0.435}
"""Table 1: each strategy's OLS coefficient on toxicity against no moderator."""
TABLE_1_TIME = {"no_instructions": -0.003, "rules_only": -0.008, "moderation_guidelines": -0.023,
                "facilitation_guidelines": -0.023, "moderation_game": -0.011}
"""Table 1: strategy x time (Fac. Guid., Mod. Guid. and the game significant)."""
ADVANCED = ("rules_only", "moderation_guidelines", "facilitation_guidelines")


def _per_discussion(summary: Mapping, key: str, strategy: str) -> dict[int, float]:
    return {int(d["discussion"]): float(d[key]) for d in summary["discussions"]
            if d["strategy"] == strategy and d.get(key) is not None and math.isfinite(d[key])}


def _paired_strategies(summary: Mapping, key: str, a: str, b: str) -> ev.Interval:
    x, y = _per_discussion(summary, key, a), _per_discussion(summary, key, b)
    common = sorted(set(x) & set(y))
    return ev.paired_difference([x[k] for k in common], [y[k] for k in common], seed=11)


def _distinct(summary: Mapping) -> list[Mapping]:
    """Every discussion once: the "trolls" arm repeats the no-moderator discussions."""
    return [d for d in summary["discussions"] if d["strategy"] != "trolls"]


def _all_of(intervals: Sequence[ev.Interval], expected: int) -> str:
    dirs = [ev.direction(iv, expected) for iv in intervals]
    return (ev.SUPPORTED if dirs and all(d == ev.SUPPORTED for d in dirs) else
            ev.CONTRADICTED if ev.CONTRADICTED in dirs else ev.INCONCLUSIVE)


def facilitator_rows(summary: Mapping | None) -> list[Row]:
    claims = _facilitator_claims()
    if summary is None:
        return [not_run(c.paper, c.claim, c.paper_value, c.where, FAC_COMMAND) for c, _ in claims]
    return [build(summary) for _, build in claims]


def _facilitator_claims() -> list[tuple[Claim, Callable[[Mapping], Row]]]:
    strategies = list(TABLE_1)
    c1 = Claim(FAC, "every moderation strategy lowers toxicity against no moderator",
               "all negative, p < .05: " + ", ".join(f"{s} {v:+.3f}" for s, v in TABLE_1.items()),
               "§5.1, Table 1", FAC_DESIGN, TABLE_1["moderation_guidelines"])
    c2 = Claim(FAC, "the moderator's effect grows over the discussion (strategy × time below 0)",
               "Fac. Guid. −0.023***, Mod. Guid. −0.023***, game −0.011*; No Instr., Rules n.s.",
               "§5.1, Table 1", FAC_DESIGN, TABLE_1_TIME["moderation_guidelines"])
    c3 = Claim(FAC, "advanced instructions add little over a moderator with no instructions",
               "marginal or no significant gain (Rules −0.461, Mod. −0.277, Fac. −0.230 vs No Instr. −0.426)",
               "§5.1, Fig. 4", FAC_DESIGN)
    c4 = Claim(FAC, "trolls raise the other participants' toxicity", "higher, p < .000 (no effect size)",
               "§5.1, Fig. 3", FAC_DESIGN)
    c5 = Claim(FAC, "longer comments go with lower ROUGE-L diversity", "negative correlation, p < .000",
               "§5.1, Figs. 5a, 6a", FAC_DESIGN)
    c6 = Claim(FAC, "annotators disagree more (nDFU) on more toxic comments", "positive, p < .000",
               "App. A.3.2, Fig. 8", FAC_DESIGN)

    def table_1(s: Mapping) -> Row:
        ivs = {k: _paired_strategies(s, "toxicity", k, "no_moderator") for k in strategies}
        result = "toxicity, strategy − no moderator per discussion: " + "; ".join(
            f"{k} {iv.text()}" for k, iv in ivs.items())
        return row(c1, s, result, ivs["moderation_guidelines"], -1, verdict=_all_of(list(ivs.values()), -1))

    def over_time(s: Mapping) -> Row:
        keys = ("moderation_guidelines", "facilitation_guidelines", "moderation_game")
        ivs = {k: _paired_strategies(s, "toxicity_slope", k, "no_moderator") for k in keys}
        result = "per-discussion slope of toxicity on turn, strategy − no moderator: " + "; ".join(
            f"{k} {iv.text()}" for k, iv in ivs.items())
        return row(c2, s, result, ivs["moderation_guidelines"], -1, verdict=_all_of(list(ivs.values()), -1))

    def advanced(s: Mapping) -> Row:
        ivs = {k: _paired_strategies(s, "toxicity", k, "no_instructions") for k in ADVANCED}
        dirs = [ev.direction(iv, -1) for iv in ivs.values()]
        # supported: no advanced strategy is significantly less toxic; contradicted: all of them are
        verdict = (ev.SUPPORTED if ev.SUPPORTED not in dirs else
                   ev.CONTRADICTED if all(d == ev.SUPPORTED for d in dirs) else ev.INCONCLUSIVE)
        result = "toxicity, strategy − no instructions: " + "; ".join(f"{k} {iv.text()}" for k, iv in ivs.items())
        first = next(iter(ivs.values()))
        return row(c3, s, result, first, -1, verdict=verdict)

    def trolls(s: Mapping) -> Row:
        x = _per_discussion(s, "others_toxicity", "trolls")
        y = _per_discussion(s, "others_toxicity", "no_trolls")
        common = sorted(set(x) & set(y))
        iv = ev.paired_difference([x[k] for k in common], [y[k] for k in common], seed=12)
        return row(c4, s, f"non-troll users' toxicity, with − without a troll (no moderator): {iv.text()}", iv, +1)

    def length_diversity(s: Mapping) -> Row:
        pts = [(d["words"], d["diversity"]) for d in _distinct(s)
               if d.get("words") is not None and d.get("diversity") is not None]
        iv = ev.bootstrap_slope([p[0] for p in pts], [p[1] for p in pts], seed=13)
        return row(c5, s, f"slope of a discussion's ROUGE-L diversity on its mean words per comment: {iv.text(4)}",
                   iv, -1)

    def ndfu(s: Mapping) -> Row:
        iv = ev.bootstrap_mean([d["ndfu_slope"] for d in _distinct(s) if d.get("ndfu_slope") is not None],
                               seed=14)
        return row(c6, s, f"per discussion, slope of a comment's nDFU on its toxicity: {iv.text()}", iv, +1)

    return [(c1, table_1), (c2, over_time), (c3, advanced), (c4, trolls), (c5, length_diversity), (c6, ndfu)]


# ------------------------------------------------------------------------ the page
HEADER = ["#", "paper: claim", "the paper says (where)", "population", "socialgym: mean [95 % interval] (n)",
          "size against the paper", "command", "verdict"]


def all_rows(summaries: Mapping[str, Mapping | None]) -> list[Row]:
    return (core_rows(summaries.get("core")) + recsys.recagent_rows(summaries.get("recagent"))
            + recsys.soc_strategy_rows(summaries.get("soc_strategy"))
            + recsys.agentsociety_rows(summaries.get("agentsociety")) + facilitator_rows(summaries.get("moderation"))
            + milli_rows(summaries.get("platform")))


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _runs_section(summaries: Mapping[str, Mapping | None]) -> list[str]:
    lines = ["## The runs behind the rows", "",
             "Each summary in `benchmarks/reproduction/` holds one value per independent run and measure; the "
             "page is rebuilt from them by `python benchmarks/reproduction.py` (`make reproduction` first reruns "
             "the scripted studies).", "", "| summary | population | agents | rounds | independent runs | "
             "wall time | command |", "|---|---|---:|---:|---:|---:|---|"]
    for name in ("core", "moderation", "recagent", "soc_strategy", "agentsociety"):
        s = summaries.get(name)
        if s is None:
            lines.append(f"| {name}.json | not run | | | | | |")
            continue
        d = s["design"]
        who = s.get("population") or (f"LLM agents ({s['model']})" if s.get("model") else "scripted users")
        wall = f"{s['wall_seconds']:.0f} s" if s.get("wall_seconds") is not None else "—"
        wall += " (the last resumption)" if s.get("resumed") else ""
        lines.append(f"| {name}.json | {who} | {d.get('agents')} | {d.get('rounds')} | {d.get('runs')} | {wall} | "
                     f"`{s['command']}` |")
    missing = [n for n in ("core", "moderation") if summaries.get(n) is None]
    if missing:
        lines += ["", "No summary is committed for " + " and ".join(f"`{n}.json`" for n in missing) + ": "
                  "its rows say \"not run\". The LLM studies run on the embedded model at a few seconds per "
                  "request on 2 cores; add them with `make study` or `make moderation` (which also runs the no-troll arm) "
                  "and `python "
                  "benchmarks/reproduction.py --core runs/study-small --moderation runs/moderation "
                  "--moderation-no-trolls runs/moderation-no-trolls`."]
    rerun = summaries.get("rerun")
    if rerun:
        lines += ["", f"`make reproduction` reran the scripted studies in {rerun['total_seconds']:.0f} s on "
                      f"{rerun['machine']} (" + ", ".join(f"{k} {v:.0f} s" for k, v in rerun["seconds"].items())
                  + ")."]
    notes = [(name, n) for name in ("recagent", "soc_strategy", "agentsociety")
             for n in ((summaries.get(name) or {}).get("notes") or [])]
    if notes:
        lines += ["", "Departures of the scripted set-ups from the papers' (also in docs/specification.md):", ""]
        lines += [f"- {name}: {n}" for name, n in notes]
    return lines


RULES = [
    "Rules of evidence, fixed before the data (`socialgym/experiments/studies/evidence.py`; the core paper's "
    "statistics in `claims.py`, the others in `reproduction.py` and `reproduction_recsys.py`):", "",
    "1. **Scale first.** A row is supported or contradicted only when its runs reach the paper's design: as "
    "many agents and rounds as the paper's experiment, as many independent runs as the paper and never fewer "
    f"than {ev.MIN_RUNS}, and, for a claim about what LLM agents do, a model named capable enough "
    "(`evidence.CAPABLE_MODELS`: the papers' own models and larger). Scripted users never test a claim about "
    "LLM behaviour. Below that the row says **not tested at this scale**, lists what falls short, and its "
    "command is the one that would test it.",
    "2. **The independent run is the unit** — for a paired design the run pair (same seed, one run per arm); "
    "groups, rounds and agents are averaged within their run first.",
    f"3. **Intervals** are 95 % percentile bootstrap intervals over the runs ({ev.BOOTSTRAP:,} resamples, seeded).",
    "4. **Trends per run, then across runs**: a slope is fitted inside each run, and the runs' slopes are "
    "bootstrapped.",
    "5. **Ranks with bootstrap confidence**: an ordering is supported when it holds in at least 95 % of the run "
    "resamples, contradicted when the opposite does.",
    "6. **Direction and size apart**: the verdict is the direction (interval on the paper's side of 0: "
    "supported; on the other: contradicted; across 0: inconclusive); the size is set beside the paper's value.",
    "7. **The real-network band** is the spread between Chang et al.'s eight networks, mean ± 1.96 SD "
    "(SD = SE · √8), not the standard error of their mean (notes/chang2024_real_networks.md).",
]


def render_page(summaries: Mapping[str, Mapping | None], learnability: str) -> str:
    rows = all_rows(summaries)
    counts = {v: sum(r.verdict == v for r in rows) for v in (*ev.VERDICTS, core.NO_CLAIM, "not run")}
    lines = ["# Reproduction: the papers' claims, tested", "",
             "Generated by `python benchmarks/reproduction.py` from the committed run summaries in "
             "`benchmarks/reproduction/`; do not edit by hand (tests/test_reproduction_page.py checks it). Paper "
             "values and their places: notes/reproduction_sources.md.", "",
             f"{len(rows)} rows: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + ".", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += [f"| {i} | " + " | ".join(_cell(c) for c in r.cells()) + " |" for i, r in enumerate(rows, 1)]
    lines += ["", *RULES, "", *_runs_section(summaries), "",
              "## Learnability by reinforcement learning", "",
              "PPO on the same rewards (the registered single-reward tasks, docs/tasks.md), against random play "
              "and the hand-written greedy heuristic.", "",
              "<!-- tasks-learnability:begin -->", learnability.strip(), "<!-- tasks-learnability:end -->", ""]
    return "\n".join(lines)
