"""The stylised facts of the realism scorecard: what each measures, the published reference
and the pass rule, fixed here before any run was scored (docs/realism.md).

A fact passes when the mean of its value over the runs given lies inside its ``band`` (both
ends included). The band is written from the references below: where papers give one value
per platform, the band spans them (with the margin the fact states); where a paper states only
a direction (longer threads are more toxic), the band is that side of zero. Every reference
names its paper and the place in it; numbers that could not be checked against a source are
not used (docs/realism.md lists them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from socialgym.experiments.analysis.realism_data import RunData
from socialgym.metrics import undirected_graph
from socialgym.metrics.exposure import gini
from socialgym.metrics.realism import (active_share, group_assortativity, negativity_trend, reciprocity,
                                       tail_exponent, thread_roots)

FIRST_MEASURED_ROUND = 2
"""Activity facts start at round 2: in round 1 the platform requires every action slot to POST
(nothing exists yet; specification section 1), so round 1 says nothing about who chooses to act."""
TIE_THRESHOLD = 0.1
"""Tie graph: an undirected edge where (W + W^T)/2 >= 0.1, as ``socialgym.metrics.network_metrics``."""


def in_band(value: float, band: tuple[float, float]) -> bool | None:
    """The pass rule: ``low <= value <= high``; None for a value that could not be measured (NaN)."""
    if math.isnan(value):
        return None
    return band[0] <= value <= band[1]


@dataclass(frozen=True)
class Reference:
    """One published value: what was measured, on which platform, by whom, and where."""

    value: str
    platform: str
    citation: str
    where: str


@dataclass(frozen=True)
class Fact:
    key: str
    title: str
    measure: str
    """How socialgym computes the value from a run directory."""
    band: tuple[float, float]
    rule: str
    references: tuple[Reference, ...]
    compute: Callable[[RunData], float]
    domain: tuple[float, float] = (0.0, 1.0)
    """The values the measure can take (shares and Ginis 0 - 1, correlations -1 - 1, tail
    exponents 1 - inf): a target band outside it could never pass."""

    def passes(self, value: float) -> bool | None:
        """The rule on a mean over runs; None when the value could not be measured."""
        return in_band(value, self.band)


# ---------------------------------------------------------------------------------- measures
def _content_per_user(run: RunData) -> np.ndarray:
    """POSTs and COMs per agent from round 2 on, every agent of the run included (zeros too)."""
    public = run.of_kind("POST", "COM") & (run.sender >= 0) & (run.round >= FIRST_MEASURED_ROUND)
    return np.bincount(run.sender[public], minlength=run.n_agents)


def _votes_per_item(run: RunData) -> np.ndarray:
    """Votes (likes and dislikes) per public item, items without votes included."""
    items = np.unique(run.content_id[run.of_kind("POST", "COM")])
    if items.size == 0:
        return items
    voted = run.vote_item[np.isin(run.vote_item, items)]
    return np.bincount(np.searchsorted(items, voted), minlength=items.size)


def _interaction_pairs(run: RunData) -> tuple[np.ndarray, np.ndarray]:
    """Directed interactions: a COM (to the replied item's author) or a DM (to its recipient)."""
    mask = run.of_kind("COM", "DM") & (run.sender >= 0) & (run.recipient >= 0)
    return run.sender[mask], run.recipient[mask]


def _tie_graph(run: RunData):
    return None if run.ties is None else undirected_graph(run.ties, TIE_THRESHOLD)


def _degrees(run: RunData) -> np.ndarray:
    g = _tie_graph(run)
    return np.zeros(0) if g is None else np.diff(g.indptr)


def _clustering(run: RunData) -> float:
    """Mean local clustering coefficient ``2 T_v / (k_v (k_v - 1))`` of the nodes with degree
    >= 2, T_v the triangles through v (``diag(A^3) / 2``, sparse)."""
    g = _tie_graph(run)
    if g is None:
        return math.nan
    A = (g > 0).astype(np.float64).tocsr()
    k = np.asarray(A.sum(axis=1)).ravel()
    keep = k >= 2
    if not keep.any():
        return math.nan
    triangles = np.asarray((A @ A).multiply(A).sum(axis=1)).ravel() / 2.0
    return float(np.mean(2.0 * triangles[keep] / (k[keep] * (k[keep] - 1.0))))


def _topic_assortativity(run: RunData) -> float:
    """Assortativity of the tie graph by each agent's main topic (agents that never posted
    left out)."""
    g = _tie_graph(run)
    if g is None:
        return math.nan
    upper = sp.triu(g, k=1).tocoo()
    topics = run.main_topics()
    known = (topics[upper.row] != "") & (topics[upper.col] != "")
    return group_assortativity(np.stack([upper.row[known], upper.col[known]], axis=1), topics)


def _threads(run: RunData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    public = run.of_kind("POST", "COM")
    target = np.where(run.of_kind("POST"), -1, run.target)
    return run.content_id[public], target[public], run.sentiment[public]


def _thread_depth(run: RunData) -> float:
    """Share of POSTs whose thread stays within one reply level: no comment on a comment."""
    ids, target, _ = _threads(run)
    posts = ids[target < 0]
    if posts.size == 0:
        return math.nan
    nested = np.isin(target, ids[target >= 0])              # a COM replying to a COM
    deep = np.unique(thread_roots(ids, target)[nested])
    return float(1.0 - np.isin(posts, deep).mean())


def _negativity_trend(run: RunData) -> float:
    return negativity_trend(*_threads(run))


def _active_share(run: RunData) -> float:
    if run.active is None:
        return math.nan
    return active_share(run.active[run.active_rounds >= FIRST_MEASURED_ROUND])


# ---------------------------------------------------------------------------------- the facts
def _posts_gini(run: RunData) -> float:
    return gini(_content_per_user(run), all_zero=math.nan) if run.n_agents else math.nan


def _posts_tail(run: RunData) -> float:
    return tail_exponent(_content_per_user(run))


def _votes_gini(run: RunData) -> float:
    votes = _votes_per_item(run)
    return gini(votes, all_zero=math.nan) if votes.size else math.nan


def _reciprocity(run: RunData) -> float:
    return reciprocity(*_interaction_pairs(run))


def _degree_tail(run: RunData) -> float:
    return tail_exponent(_degrees(run))


def _giant_component(run: RunData) -> float:
    """Share of all agents in the tie graph's largest connected component."""
    g = _tie_graph(run)
    if g is None or g.shape[0] == 0:
        return math.nan
    from scipy.sparse.csgraph import connected_components
    _, labels = connected_components(g, directed=False)
    return float(np.bincount(labels).max() / g.shape[0])


# ---------------------------------------------------------------------------------- references
_KONECT_SLASHDOT = Reference(
    "degree Gini 0.712, power-law exponent 1.911 (d_min = 1), reciprocity 21.6 %, clustering 0.605 %",
    "Slashdot reply network (51,083 users, 140,778 replies)",
    "KONECT, Kunegis, 'KONECT - The Koblenz Network Collection', WWW 2013 Companion",
    "network page slashdot-threads, computed statistics")
_KONECT_TWITTER = Reference(
    "degree Gini 0.798, power-law exponent 2.845 (tail 1.861), reciprocity 3.20 %, clustering 0.59 %",
    "Twitter @-mention network (2.92M users; De Choudhury et al., ICWSM 2010)",
    "KONECT, Kunegis, WWW 2013 Companion", "network page munmun_twitterex_at, computed statistics")
_NIELSEN = Reference(
    "90 % of users never contribute, 9 % a little, 1 % account for almost all of it (a heuristic, not "
    "peer reviewed)", "online communities", "Nielsen, 'The 90-9-1 Rule for Participation Inequality', "
    "Nielsen Norman Group, 2006", "the column's opening")
_TEXTBOOK_CLUSTERING = Reference(
    "clustering 0.14 (users with 100 friends); Flickr 0.31, LiveJournal 0.33, Orkut 0.17, YouTube 0.13",
    "Facebook (Ugander et al. 2011); Mislove et al. 2007 for the others",
    "Zafarani, Abbasi & Liu, Social Media Mining, Cambridge UP 2014", "section 4.1.2, Table 4.1")
_CONOVER_2012 = Reference(
    "clustering 0.134 (left) and 0.221 (right); reciprocity 42.8 % and 64.8 %",
    "Twitter follower graphs of politically active users, 2010",
    "Conover, Goncalves, Flammini & Menczer, 'Partisan asymmetries in online political activity', "
    "EPJ Data Science 1:6 (2012)", "Table 4")

FACTS: tuple[Fact, ...] = (
    Fact("posts_gini", "Activity inequality (Gini of posts per user)",
         "Gini coefficient of each agent's POSTs and COMs from round 2 on (round 1 is the platform's compulsory "
         "posting round), agents who wrote nothing included.",
         (0.6, 1.0), "Pass when the Gini is at least 0.6: the reply and mention networks' Ginis (0.71, 0.80) less "
         "0.1, and the 90-9-1 heuristic implies more. The references count interaction partners, not posts: the "
         "nearest published measure of who does the talking.", (_KONECT_SLASHDOT, _KONECT_TWITTER, _NIELSEN),
         _posts_gini),
    Fact("posts_tail", "Activity tail exponent (posts per user)",
         "Maximum-likelihood exponent of a discrete power law fitted to the positive per-agent counts of POSTs "
         "and COMs from round 2 on, x_min by the Kolmogorov-Smirnov distance (Clauset et al. 2009; powerlaw package).",
         (1.5, 3.2), "Pass when the exponent lies in 1.5 - 3.2: the published estimates 1.86 - 2.85 for reply and "
         "mention networks (whose degree counts each user's replies), widened by about 0.35 on each side.",
         (_KONECT_SLASHDOT, _KONECT_TWITTER), _posts_tail, (1.0, math.inf)),
    Fact("votes_gini", "Engagement concentration (Gini of votes per item)",
         "Gini coefficient of the votes (likes and dislikes) each public item (POST or COM) received, items "
         "without votes included.",
         (0.5, 1.0), "Pass when the Gini is at least 0.5. No published Gini could be verified; the sources report "
         "a lognormal count of votes per story and inequality that social influence raises. 0.5 is the Gini of a "
         "lognormal with sigma 0.95, the least concentration the word 'lognormal' is given here.",
         (Reference("votes per front-page story follow a lognormal distribution", "Digg",
                    "Van Mieghem, Blenn & Doerr, 'Lognormal distribution in the digg online social network', "
                    "Eur. Phys. J. B (2011)", "abstract"),
          Reference("stronger social influence raises inequality of success (no single value used)",
                    "MusicLab (48 songs, 14,341 participants)",
                    "Salganik, Dodds & Watts, Science 311:854 (2006)", "abstract and Fig. 1")), _votes_gini),
    Fact("reciprocity", "Reciprocity of the interaction graph",
         "With an edge a -> b wherever a commented on an item of b or sent b a DM, the share of edges whose "
         "reverse edge exists (KONECT's measure).",
         (0.02, 0.3), "Pass in 0.02 - 0.30: the same measure on interaction networks gives 3.2 % (Twitter "
         "mentions) to 21.6 % (Slashdot replies), widened a little. The follow graphs' values (about 22 % on "
         "Twitter; 43 - 65 % of connected pairs among political users) describe another graph and are listed "
         "for context.",
         (_KONECT_TWITTER, _KONECT_SLASHDOT,
          Reference("about 22 % of connections reciprocal (reported in press coverage; the paper says 'low "
                    "reciprocity')", "Twitter follow graph, 2009",
                    "Kwak, Lee, Park & Moon, 'What is Twitter, a social network or a news media?', WWW 2010",
                    "abstract; the number from ReadWrite's report of the paper"), _CONOVER_2012), _reciprocity),
    Fact("clustering", "Clustering of the tie graph",
         "Mean local clustering coefficient of the final tie graph (edge where (W + W^T)/2 >= 0.1), over the "
         "agents with at least two ties.",
         (0.1, 0.35), "Pass in 0.10 - 0.35: the friendship and follower graphs' values 0.13 - 0.33.",
         (_TEXTBOOK_CLUSTERING, _CONOVER_2012), _clustering),
    Fact("degree_tail", "Degree tail exponent of the tie graph",
         "Maximum-likelihood power-law exponent of the final tie graph's positive degrees (as posts_tail).",
         (1.5, 3.2), "Pass in 1.5 - 3.2, as posts_tail: the reply and mention networks' degree exponents "
         "1.86 - 2.85. Facebook's and Twitter's follow graphs are reported not to be power laws at all.",
         (_KONECT_SLASHDOT, _KONECT_TWITTER,
          Reference("'a non-power-law follower distribution'", "Twitter follow graph, 2009", "Kwak et al., WWW 2010",
                    "abstract")), _degree_tail, (1.0, math.inf)),
    Fact("giant_component", "Giant component of the tie graph",
         "Share of all agents in the largest connected component of the final tie graph.",
         (0.95, 1.0), "Pass when at least 0.95 of the agents are in one component: Facebook's 99.91 %, less a "
         "margin for populations of hundreds rather than millions.",
         (Reference("99.91 % of users in one connected component", "Facebook, 721M users, 2011",
                    "Ugander, Karrer, Backstrom & Marlow, 'The Anatomy of the Facebook Social Graph', "
                    "arXiv:1111.4503", "abstract"),), _giant_component),
    Fact("homophily", "Homophily of the tie graph (assortativity by interest)",
         "Newman's assortativity coefficient of the final tie graph by each agent's main topic (the topic of most "
         "of its POSTs; agents that never posted left out).",
         (0.05, 0.8), "Pass in 0.05 - 0.8: ties form within interest groups more than by chance (the sources "
         "describe segregated retweet graphs and strong age homophily), up to the 0.8 of a sharply polarised "
         "retweet network.",
         (Reference("assortativity 0.8 by political leaning", "Twitter retweet network (#Charlottesville)",
                    "Tien, Eisenberg, Cherng & Porter, Applied Network Science 5:10 (2020)", "abstract"),
          Reference("retweet network 'highly segregated', mention network one heterogeneous cluster",
                    "Twitter, 2010 US midterms", "Conover et al., 'Political Polarization on Twitter', ICWSM 2011",
                    "abstract")), _topic_assortativity, (-1.0, 1.0)),
    Fact("thread_depth", "Comment threads end within one reply level",
         "Share of POSTs whose thread has no comment on a comment (posts nobody answered included): the thread "
         "ends within one level below the post.",
         (0.9, 1.0), "Pass when at least 0.9: 'the vast majority of cascades are small ... terminate within one "
         "degree' (a summary of the paper reports 95 % never reshared and 3 % reshared once).",
         (Reference("the vast majority of cascades are small and terminate within one degree",
                    "seven online domains (Twitter, Yahoo! services)",
                    "Goel, Watts & Goldstein, 'The Structure of Online Diffusion Networks', ACM EC 2012",
                    "abstract"),), _thread_depth),
    Fact("negativity_trend", "Negativity rises with thread length",
         "Spearman correlation, over threads with a comment, between the thread's length and the share of its "
         "comments with sentiment below -0.05 (scripted tones: the critical ones).",
         (0.001, 1.0), "Pass when the correlation is positive (>= 0.001): 'long conversations consistently exhibit "
         "higher toxicity' on eight platforms. socialgym measures negative sentiment, not toxicity.",
         (Reference("longer conversations are consistently more toxic; toxicity does not deter participation",
                    "8 platforms, 34 years (Usenet to Voat, Gab, Facebook, Reddit, Twitter, YouTube)",
                    "Avalle et al., 'Persistent interaction patterns across social media platforms and over "
                    "time', Nature 628:582 (2024)", "abstract; Fig. 2 and Extended Data Fig. 5"),), _negativity_trend, (-1.0, 1.0)),
    Fact("active_share", "Share of users who post per round",
         "Mean over rounds 2 on of the share of agents with at least one POST, COM or DM in the round (the "
         "run's per-round action counts).",
         (0.01, 0.1), "Pass in 0.01 - 0.10: if 90 % of users never contribute, at most 10 % contribute in any one "
         "period. A heuristic, the weakest reference here; Facebook's daily/monthly active ratio (about 0.66) "
         "counts visits, not posts, and is not used.", (_NIELSEN,), _active_share),
)
"""The facts, in scorecard order."""
