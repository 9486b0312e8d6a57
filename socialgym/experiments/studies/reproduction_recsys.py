"""The reproduction table's rows for the recommender papers: recagent (Fig. 4, Fig. 5) and
agentsociety2 (§7.4, §7.5), from the scripted-user studies' summaries.

Each row compares conditions of the same seeds (common random numbers), so the unit is the seed:
a paired difference, a relative change of paired means, or a slope across a treatment's levels
fitted per seed and then bootstrapped (``evidence``). Scripted users test the platform's
mechanics (entropy, exposure); claims about what LLM agents do (satisfaction, conformity, choice)
are "not tested at this scale" with scripted users whatever the result.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from socialgym.experiments.studies import evidence as ev
from socialgym.experiments.studies.reproduction_table import Claim, Row, fmt, not_run, per_run, row

REC = "recagent"
REC_DESIGN = ev.Design(agents=50, rounds=50)
"""recagent's cocoon experiments: 50 agents, 50 rounds, MF, 5 items per list; no replicates given."""
REC_BEHAVIOUR = ev.Design(agents=50, rounds=50, llm_behaviour=True)
"""For claims that rest on what the agents do: satisfaction, conformity, and the Soc-Strategy, whose
effect runs through friends changing what a user looks for (scripted users have that pull written in:
TopicUsers.add_friends)."""
REC_COMMAND = "socialgym study recagent --out DIR"
FIG4 = "Results, information cocoon"


def _paired(s: Mapping, measure: str, a: str, b: str) -> ev.Interval:
    return ev.paired_difference(per_run(s, measure, a), per_run(s, measure, b), seed=21)


def _relative(s: Mapping, measure: str, a: str, b: str) -> ev.Interval:
    return ev.relative_change(per_run(s, measure, a), per_run(s, measure, b), seed=22)


def _levels(s: Mapping, measure: str, conditions: tuple[str, ...], x: tuple[float, ...]) -> ev.Interval:
    curves = np.column_stack([per_run(s, measure, c) for c in conditions])
    return ev.trend(curves, x, seed=23)


def recagent_rows(s: Mapping | None) -> list[Row]:
    claims = _recagent_claims()
    if s is None:
        return [not_run(c.paper, c.claim, c.paper_value, c.where, REC_COMMAND) for c, _ in claims]
    return [build(s, c) for c, build in claims]


def _recagent_claims():
    def cocoon(s, c):
        iv = ev.bootstrap_mean(per_run(s, "entropy_drop_from_peak", "none"), seed=24)
        peak = ev.bootstrap_mean(per_run(s, "entropy_peak", "none"), seed=25)
        return row(c, s, f"fall from the peak {fmt(iv, percent=True)} (peak {peak.mean:.3f} nats; "
                         f"{s['design'].get('interests_per_user', '?')} interests per user)", iv, +1, percent=True)

    def rel(a, b, measure="entropy_after", expected=+1):
        def build(s, c):
            iv = _relative(s, measure, a, b)
            return row(c, s, f"mean entropy from round {s['design']['intervene_from']}, {a} vs {b}: "
                             f"{fmt(iv, percent=True)}", iv, expected, percent=True)
        return build

    def levels(conditions, x, measure, expected, what):
        def build(s, c):
            iv = _levels(s, measure, conditions, x)
            means = ", ".join(f"{k} {np.mean(per_run(s, measure, k)):.3f}" for k in conditions)
            return row(c, s, f"{what}: per-seed slope {iv.text(4)}; means {means}", iv, expected)
        return build

    return [
        (Claim(REC, "under MF the topic entropy of what users are recommended falls from its peak",
               "about 8.5 % below its peak", f"{FIG4}, Fig. 4a", REC_DESIGN, 0.085), cocoon),
        (Claim(REC, "replacing one recommended item by a random one (Rec-Strategy) raises the entropy",
               "higher than no strategy (figure only)", f"{FIG4}, Fig. 4a", REC_DESIGN), rel("replace_1", "none")),
        (Claim(REC, "replacing 3 items rather than 1 raises the entropy further", "+30.8 %", f"{FIG4}, Fig. 4d",
               REC_DESIGN, 0.308), rel("replace_3", "replace_1")),
        (Claim(REC, "replacing 5 items rather than 1 raises the entropy further", "+52.6 %", f"{FIG4}, Fig. 4d",
               REC_DESIGN, 0.526), rel("replace_5", "replace_1")),
        (Claim(REC, "a friend with other interests (Soc-Strategy) raises the entropy under MF",
               "higher than no strategy (figure only)", f"{FIG4}, Fig. 4a", REC_BEHAVIOUR), rel("soc", "none")),
        (Claim(REC, "the Rec-Strategy raises the entropy more than the Soc-Strategy",
               "Rec above Soc (figure only)", f"{FIG4}, Fig. 4a", REC_BEHAVIOUR), rel("rec", "soc")),
        (Claim(REC, "both strategies together raise the entropy more than the Rec-Strategy alone",
               "combined highest (figure only)", f"{FIG4}, Fig. 4a", REC_BEHAVIOUR), rel("both", "rec")),
        (Claim(REC, "more friends with other interests (1 / 3 / 5) raise the entropy more",
               "rises with the number of friends (figure only)", f"{FIG4}, Fig. 4b", REC_BEHAVIOUR),
         levels(("friends_1", "friends_3", "friends_5"), (1, 3, 5), "entropy_after", +1,
                "entropy against friends added")),
        (Claim(REC, "intervening every round rather than every 5 rounds raises the entropy", "+15.3 %",
               f"{FIG4}, Fig. 4c", REC_DESIGN, 0.153), rel("every_1", "every_5")),
        (Claim(REC, "intervening every round rather than every 10 rounds raises the entropy", "+19.6 %",
               f"{FIG4}, Fig. 4c", REC_DESIGN, 0.196), rel("every_1", "every_10")),
        (Claim(REC, "satisfaction falls as more items are replaced (1 / 3 / 5)", "falls (figure only, 1-10 scale)",
               f"{FIG4}, Fig. 4d inset", REC_BEHAVIOUR),
         levels(("replace_1", "replace_3", "replace_5"), (1, 3, 5), "satisfaction_after", -1,
                "satisfaction against items replaced")),
        (Claim(REC, "satisfaction falls as the intervention is more frequent (every 10 / 5 / 1 rounds)",
               "falls (figure only, 1-10 scale)", f"{FIG4}, Fig. 4c inset", REC_BEHAVIOUR),
         levels(("every_10", "every_5", "every_1"), (0.1, 0.2, 1.0), "satisfaction_after", -1,
                "satisfaction against interventions per round")),
        (Claim(REC, "agents with more friends change their ratings more often (conformity)",
               "AC rises with the number of friends (figure only)", "Results, user conformity, Fig. 5b",
               REC_BEHAVIOUR),
         levels(("friends_1", "friends_3", "friends_5"), (1, 3, 5), "conformity", +1, "AC against friends")),
    ]


def soc_strategy_rows(s: Mapping | None) -> list[Row]:
    c = Claim(REC, "a friend with other interests raises the entropy of what users are recommended (social "
                   "recommender, fork after round 19)", "raises it (figure only)", f"{FIG4}, Fig. 4a/b", REC_DESIGN)
    if s is None:
        return [not_run(c.paper, c.claim, c.paper_value, c.where, "socialgym study soc-strategy --out DIR")]
    iv = ev.bootstrap_mean(per_run(s, "mean_topic_entropy:difference", "soc − control"), seed=26)
    return [row(c, s, f"entropy, treated − control branch per replicate pair: {iv.text()} nats "
                      f"({s['design']['recommender']} recommender)", iv, +1)]


# ------------------------------------------------------------------------ agentsociety2
AS2 = "agentsociety2"
AS_COCOON = ev.Design(agents=10_000, rounds=10)
"""§7.4: 10,000 users, 10 rounds, rule-based agents (no LLM): a claim about the platform's mechanics."""
AS_POLAR = ev.Design(agents=200, rounds=8)
"""§7.5: 200 agents per condition (100 per camp), 8 weekly steps."""
AS_POLAR_BEHAVIOUR = ev.Design(agents=200, rounds=8, llm_behaviour=True)
AS_COMMAND = "socialgym study agentsociety --out DIR"


def _polar(s: Mapping) -> Mapping:
    """The §7.5 half of the summary, with its own scale."""
    d = s["design"]
    return {**s, "design": {**d, "agents": d["polar_agents"], "rounds": d["polar_rounds"]}}


def agentsociety_rows(s: Mapping | None) -> list[Row]:
    claims = _agentsociety_claims(s)
    if s is None:
        return [not_run(c.paper, c.claim, c.paper_value, c.where, AS_COMMAND) for c, _ in claims]
    return [build(s, c) for c, build in claims]


def _agentsociety_claims(s: Mapping | None):
    groups = list((s or {}).get("design", {}).get("groups", ("narrow", "medium", "broad")))
    target = (s or {}).get("design", {}).get("target_group", "narrow")
    broad = groups[-1]

    def every_group(s, c):
        ivs = {g: ev.bootstrap_mean(per_run(s, f"entropy_drop:{g}", "base"), seed=31) for g in groups}
        dirs = [ev.direction(iv, +1) for iv in ivs.values()]
        verdict = (ev.SUPPORTED if all(d == ev.SUPPORTED for d in dirs) else
                   ev.CONTRADICTED if ev.CONTRADICTED in dirs else ev.INCONCLUSIVE)
        text = "entropy fall, first third − last third of rounds: " + "; ".join(f"{g} {iv.text()}" for g, iv in ivs.items())
        return row(c, s, text, ivs[target], +1, verdict=verdict)

    def deeper(s, c):
        iv = ev.paired_difference(per_run(s, f"deep_cocoon_share:{target}", "base"),
                                  per_run(s, f"deep_cocoon_share:{broad}", "base"), seed=32)
        return row(c, s, f"deep-cocoon share, {target} − {broad} group: {iv.text()}", iv, +1)

    def strategy(kind):
        def build(s, c):
            iv = _paired(s, f"deep_cocoon_share:{target}", kind, "base")
            others = "; ".join(f"{g} {_paired(s, f'deep_cocoon_share:{g}', kind, 'base').text()}" for g in groups
                               if g != target)
            return row(c, s, f"deep-cocoon share of the {target} group, {kind} − base: {iv.text()} (untargeted: "
                             f"{others})", iv, -1)
        return build

    def penalty(s, c):
        p = _polar(s)
        iv = ev.paired_difference([100 * v for v in per_run(p, "cross_cutting_shown", "stance_penalty")],
                                  [100 * v for v in per_run(p, "cross_cutting_shown", "base")], seed=33)
        return row(c, p, f"cross-cutting share shown, penalty − none: {iv.text(2, ' pp')}", iv, -1, unit=" pp")

    def split(s, c):
        p = _polar(s)
        choice = ev.bootstrap_mean(per_run(p, "gap_choice_pp", "stance_penalty"), seed=34)
        ranking = ev.bootstrap_mean(per_run(p, "gap_ranking_pp", "stance_penalty"), seed=35)
        larger = ev.paired_difference(np.abs(per_run(p, "gap_choice_pp", "stance_penalty")),
                                      np.abs(per_run(p, "gap_ranking_pp", "stance_penalty")), seed=36)
        return row(c, p, f"under the penalty, against the supply: choice {choice.text(2, ' pp')}, ranking "
                         f"{ranking.text(2, ' pp')}; /choice/ − /ranking/ {larger.text(2, ' pp')}", larger, +1)

    return [
        (Claim(AS2, "a cocoon forms in every group (viewing entropy falls)", "every age group (figure only)",
               "§7.4.3, Fig. 24", AS_COCOON), every_group),
        (Claim(AS2, "some groups end in deeper cocoons (the paper: users aged 50+)", "older groups deeper (figure only)",
               "§7.4.3, Fig. 24", AS_COCOON), deeper),
        (Claim(AS2, "Tail QuotaTransfer (30 % of the top-10 categories' quota to the bottom 10) lowers the target "
                    "group's deep-cocoon share", "lower for the 50+ groups (figure only)", "§7.4.3, Fig. 25a",
               AS_COCOON), strategy("tail_quota_transfer")),
        (Claim(AS2, "Efficiency Boost (30 % to the most efficient non-head categories) lowers it",
               "lower (figure only)", "§7.4.3, Fig. 25b", AS_COCOON), strategy("efficiency_boost")),
        (Claim(AS2, "UnderServedBoost (30 % to efficient, little-shown categories) lowers it", "lower (figure only)",
               "§7.4.3, Fig. 25c", AS_COCOON), strategy("underserved_boost")),
        (Claim(AS2, "the stance penalty (strength 0.4) lowers cross-cutting exposure",
               "no on/off contrast; the ranking adds −4.27 pp to the pro-attitudinal condition's exposure gap",
               "§7.5.3, Fig. 28b", AS_POLAR),
         penalty),
        (Claim(AS2, "users' choice moves exposure more than the ranking does",
               "choice −5.23 pp vs ranking −4.27 pp (pro); +5.24 vs +1.75 (counter)", "§7.5.3, Fig. 28b, Table 8",
               AS_POLAR_BEHAVIOUR), split),
    ]
