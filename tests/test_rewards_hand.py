"""Hand-computed reward tests (specification §1, §2, §3; docs/api-contract.md).

Every expected value below is derived by hand from the specification's formulas; the arithmetic is
written in the comments.  Nothing here asks the code under test for an expected value.

Common set-up unless a test says otherwise: 3 agents, n_actions N, topics ["a", "b"],
recommender "chronological" (newest = largest id first), feed_size / vote_feed_size 50
(so every earlier public item of the others is in the feed), sentiment "tone"
(supportive +1, neutral 0, critical -1), every b_* = 0.5, b_emo = -1, eps = 1e-6.

Content ids are assigned in order of creation: within a round agent_0's slots first, then
agent_1's, then agent_2's; POST/COM/DM share one id space, NOT creates nothing.

A0, A1, A2, AGENTS, EPS, NOT, the builders post/com/dm and the helpers make_env/play_round are
fixtures of tests/conftest.py (the scripted episodes); the main episode's script and its
hand-computed tables (MAIN_SCRIPT, SOC, ..., TOTALS) are module-scoped fixtures built from them.
"""

import functools
import math

import numpy as np
import pytest


COMPONENTS = ("SOC", "INF", "PRE", "COORD", "EMO")
LN2, LN3, LN4 = math.log(2), math.log(3), math.log(4)
TOL = dict(rel=1e-6, abs=1e-6)


# --------------------------------------------------------------------------- helpers
# make_env / play_round are conftest's with this module's settings: n_actions 2 by default and
# the reset observation returned (env, obs); every round checks that the act step's rewards are 0.0.
@pytest.fixture(scope="module")
def make_env(make_env):
    return functools.partial(make_env, n_actions=2, return_obs=True)


@pytest.fixture(scope="module")
def play_round(play_round):
    return functools.partial(play_round, check_act_rewards=True)


def comps(infos, agent):
    rc = infos[agent]["reward_components"]
    return {k: float(rc[k]) for k in COMPONENTS}


def feed_ids(obs, agent):
    return [item["id"] for item in obs[agent]["feed"]]


def vote_ids(obs, agent):
    return sorted(item["id"] for item in obs[agent]["vote_items"])


def assert_components(infos, expected):
    for ag, exp in expected.items():
        got = comps(infos, ag)
        for k in COMPONENTS:
            if k in exp:
                assert got[k] == pytest.approx(exp[k], **TOL), f"{ag} {k}: got {got[k]}, expected {exp[k]}"


def entropy(counts):
    # Shannon entropy (natural log) of the frequencies given by counts (helper for the
    # hand-computed INF values; counts are read off the hand-derived feeds).
    n = sum(counts)
    return -sum(c / n * math.log(c / n) for c in counts if c)


@pytest.fixture(scope="module")
def emo(EPS):
    def emo(u_pos, u_neg, b_emo=-1.0):
        # specification §3 EMO formula applied to hand-counted U+ / U-.
        return 0.5 * (1 + (u_pos + b_emo * u_neg) / (u_pos + abs(b_emo) * u_neg + EPS))
    return emo


# --------------------------------------------------------------------------- the main scripted episode
#
# Round 1 (all POSTs), N = 2:
#   agent_0: POST a (id 0), POST b (id 1)
#   agent_1: POST a (id 2), POST a (id 3)
#   agent_2: POST b (id 4), POST a (id 5)
#   votes: agent_0 {2:+1, 4:-1}; agent_1 {0:+1, 1:+1, 4:+1}; agent_2 {0:+1, 2:-1, 3:0}
#
# Round 2 (feeds, newest first): agent_0 [5,4,3,2] topics a,b,a,a
#                                agent_1 [5,4,1,0] topics a,b,b,a
#                                agent_2 [3,2,1,0] topics a,a,b,a
#   agent_0: COM on 2 (author agent_1, topic a), supportive, mentions agent_2   -> id 6
#            DM to agent_1, NEW topic "c", critical                            -> id 7
#   agent_1: DM to agent_0, topic b, critical                                  -> id 8
#            POST b, neutral, mentions agent_0                                 -> id 9
#   agent_2: COM on 1 (author agent_0, topic b), critical                      -> id 10
#            POST NEW topic "d", neutral                                       -> id 11
#   vote items: agent_0 {9,10,11}; agent_1 {6,10,11}; agent_2 {6,9}
#   votes: agent_0 {9:+1, 10:-1, 11:-1}; agent_1 {6:+1, 11:+1}; agent_2 {6:-1, 9:+1}
#
# Round 3 (feeds): agent_0 [11,10,9,5,4,3,2] topics d,b,b,a,b,a,a  (a3 b3 d1)
#                  agent_1 [11,10,6,5,4,1,0] topics d,b,a,a,b,b,a  (a3 b3 d1)
#                  agent_2 [9,6,3,2,1,0]      topics b,a,a,a,b,a    (a4 b2)
#   agent_0: DM reply to 8 (recipient agent_1), topic b, supportive            -> id 12
#            DM to agent_1, topic a, supportive                                -> id 13
#   agent_1: DM to agent_2, topic a, neutral                                   -> id 14
#            POST a, supportive, mentions agent_0, agent_2, agent_1(self!)     -> id 15
#   agent_2: COM on 9 (author agent_1, topic b), supportive, mentions agent_0  -> id 16
#            DM to agent_0, topic b, supportive                                -> id 17
#   vote items: agent_0 {15,16}; agent_1 {16}; agent_2 {15}
#   votes: agent_0 {15:-1, 16:+1}; agent_1 {16:+1}; agent_2 {15:0}


@pytest.fixture(scope="module")
def MAIN_SCRIPT(post, com, dm, A0, A1, A2):
    return [
        (
            {
                A0: [post("a"), post("b")],
                A1: [post("a"), post("a")],
                A2: [post("b"), post("a")],
            },
            {A0: {2: +1, 4: -1}, A1: {0: +1, 1: +1, 4: +1}, A2: {0: +1, 2: -1, 3: 0}},
        ),
        (
            {
                A0: [com(2, "supportive", [A2]), dm(A1, "c", "critical")],
                A1: [dm(A0, "b", "critical"), post("b", "neutral", [A0])],
                A2: [com(1, "critical"), post("d", "neutral")],
            },
            {A0: {9: +1, 10: -1, 11: -1}, A1: {6: +1, 11: +1}, A2: {6: -1, 9: +1}},
        ),
        (
            {
                A0: [dm(A1, "b", "supportive", reply_to=8), dm(A1, "a", "supportive")],
                A1: [dm(A2, "a", "neutral"), post("a", "supportive", [A0, A2, A1])],
                A2: [com(9, "supportive", [A0]), dm(A0, "b", "supportive")],
            },
            {A0: {15: -1, 16: +1}, A1: {16: +1}, A2: {15: 0}},
        ),
    ]


# Sanity of the id bookkeeping the hand computation relies on.
@pytest.fixture(scope="module")
def EXPECTED_FEEDS(A0, A1, A2):
    return [
        {A0: [], A1: [], A2: []},
        {A0: [5, 4, 3, 2], A1: [5, 4, 1, 0], A2: [3, 2, 1, 0]},
        {A0: [11, 10, 9, 5, 4, 3, 2], A1: [11, 10, 6, 5, 4, 1, 0], A2: [9, 6, 3, 2, 1, 0]},
    ]


@pytest.fixture(scope="module")
def EXPECTED_VOTE_ITEMS(A0, A1, A2):
    return [
        {A0: [2, 3, 4, 5], A1: [0, 1, 4, 5], A2: [0, 1, 2, 3]},
        {A0: [9, 10, 11], A1: [6, 10, 11], A2: [6, 9]},
        {A0: [15, 16], A1: [16], A2: [15]},
    ]


# ---- SOC = 0.5 * I_sent/N + 0.5 * I_rec/|B^DIR|
# r1: no DM/COM at all -> I_sent = 0, |B^DIR| = 0 (zero denominator -> 0) -> SOC = 0 for all.
# r2: B^DIR = {6 COM, 7 DM, 8 DM, 10 COM} -> 4
#   agent_0: sent {6,7}=2 -> 0.5*2/2 = 0.5 ; received {8 (DM to a0), 10 (COM on a0's 1)} = 2 -> 0.5*2/4 = 0.25 ; SOC = 0.75
#   agent_1: sent {8}=1 -> 0.25 ; received {6 (COM on a1's 2), 7 (DM)} = 2 -> 0.25 ; SOC = 0.5
#   agent_2: sent {10}=1 -> 0.25 ; received {} -> 0 ; SOC = 0.25
# r3: B^DIR = {12,13,14,17 DMs, 16 COM} -> 5
#   agent_0: sent {12,13} -> 0.5 ; received {17} -> 0.5*1/5 = 0.1 ; SOC = 0.6
#   agent_1: sent {14} -> 0.25 ; received {12,13,16 (COM on a1's 9)} -> 0.5*3/5 = 0.3 ; SOC = 0.55
#   agent_2: sent {16,17} -> 0.5 ; received {14} -> 0.1 ; SOC = 0.6
@pytest.fixture(scope="module")
def SOC(A0, A1, A2):
    return [
        {A0: 0.0, A1: 0.0, A2: 0.0},
        {A0: 0.75, A1: 0.5, A2: 0.25},
        {A0: 0.6, A1: 0.55, A2: 0.6},
    ]


# ---- INF = 0.5 * T/K + 0.5 * H/ln K
# r1: K = |{a,b}| = 2; feeds empty -> T = 0, H = 0 -> INF = 0.
# r2: K = |{a,b,c,d}| = 4 ("c" from DM 7 and "d" from POST 11 join this round), no topic seen
#     in round-1 feeds (they were empty) so T = number of distinct feed topics.
#   agent_0: [a,b,a,a] T = 2, H = -(3/4 ln 3/4 + 1/4 ln 1/4) = 0.5623351
#            INF = 0.5*2/4 + 0.5*0.5623351/ln 4 = 0.25 + 0.2028195 = 0.4528195
#   agent_1: [a,b,b,a] T = 2, H = ln 2 -> INF = 0.25 + 0.5*ln2/ln4 = 0.25 + 0.25 = 0.5
#   agent_2: [a,a,b,a] same as agent_0 -> 0.4528195
# r3: K = 4 (no new topic in round 3).  Topics seen in earlier feeds: r2 feeds = {a,b} for all.
#   agent_0: a3 b3 d1 -> T = 1 (d), H = -(2*(3/7) ln(3/7) + (1/7) ln(1/7)) = 1.0042425
#            INF = 0.5*1/4 + 0.5*1.0042425/ln 4 = 0.125 + 0.3622039 = 0.4872039
#   agent_1: same counts -> 0.4872039
#   agent_2: a4 b2 -> T = 0 (a, b both seen in its r2 feed), H = -(2/3 ln 2/3 + 1/3 ln 1/3) = 0.6365142
#            INF = 0 + 0.5*0.6365142/ln 4 = 0.2295740
@pytest.fixture(scope="module")
def INF(A0, A1, A2):
    return [
        {A0: 0.0, A1: 0.0, A2: 0.0},
        {
            A0: 0.5 * 2 / 4 + 0.5 * entropy([3, 1]) / LN4,  # 0.4528195
            A1: 0.5 * 2 / 4 + 0.5 * LN2 / LN4,  # 0.5
            A2: 0.5 * 2 / 4 + 0.5 * entropy([3, 1]) / LN4,  # 0.4528195
        },
        {
            A0: 0.5 * 1 / 4 + 0.5 * entropy([3, 3, 1]) / LN4,  # 0.4872039
            A1: 0.5 * 1 / 4 + 0.5 * entropy([3, 3, 1]) / LN4,  # 0.4872039
            A2: 0.5 * 0 / 4 + 0.5 * entropy([4, 2]) / LN4,  # 0.2295740
        },
    ]


# ---- PRE = 0.5 * P/N + 0.5 * (L+ - L-)/((|V|-1)*N),  (|V|-1)*N = 2*2 = 4
# r1: every agent 2 POSTs -> P/N = 1.
#   agent_0 posts 0,1: id0 +1(a1) +1(a2), id1 +1(a1) -> L+ 3, L- 0 -> 0.5 + 0.5*3/4 = 0.875
#   agent_1 posts 2,3: id2 +1(a0) -1(a2), id3 0(a2) -> 1-1 = 0 -> 0.5
#   agent_2 posts 4,5: id4 -1(a0) +1(a1) -> 0 -> 0.5
# r2: agent_0 has no POST (COM 6 got +1/-1 -> ignored) -> 0
#     agent_1 POST 9: +1(a0) +1(a2) -> 0.5*1/2 + 0.5*2/4 = 0.5
#     agent_2 POST 11: -1(a0) +1(a1) -> 0.25 + 0 = 0.25   (the -1 on its COM 10 must NOT count)
# r3: agent_0 no POST -> 0
#     agent_1 POST 15: -1(a0), 0(a2) -> 0.25 + 0.5*(-1)/4 = 0.125
#     agent_2 no POST (its COM 16 got two +1 -> ignored) -> 0
@pytest.fixture(scope="module")
def PRE(A0, A1, A2):
    return [
        {A0: 0.875, A1: 0.5, A2: 0.5},
        {A0: 0.0, A1: 0.5, A2: 0.25},
        {A0: 0.0, A1: 0.125, A2: 0.0},
    ]


# ---- COORD = 0.5 * M/|B^PUB| + 0.5 * R/|D_{t-1}|
# r1: B^PUB = 6 posts, no mentions -> 0; D_0 empty -> 0.
# r2: B^PUB = {6,9,10,11} = 4; D_1 = {} for all (round 1 has no DMs).
#   agent_0: mentioned by 9 -> 0.5*1/4 = 0.125 ; agent_1: 0 ; agent_2: mentioned by 6 -> 0.125
# r3: B^PUB = {15,16} = 2.  D_2(a0) = {a1} (DM 8), D_2(a1) = {a0} (DM 7), D_2(a2) = {}.
#   agent_0: mentioned by 15 and 16 -> 0.5*2/2 = 0.5 ; DMs a1 twice (12, 13) -> R = 1 distinct
#            -> 0.5*1/1 = 0.5 ; COORD = 1.0   (counting actions would give 1.5)
#   agent_1: only self-mention in 15 (ignored) -> 0 ; DMs only a2 (not in D) -> R = 0 -> COORD = 0
#   agent_2: mentioned by 15 -> 0.5*1/2 = 0.25 ; D empty -> 0 ; COORD = 0.25
@pytest.fixture(scope="module")
def COORD(A0, A1, A2):
    return [
        {A0: 0.0, A1: 0.0, A2: 0.0},
        {A0: 0.125, A1: 0.0, A2: 0.125},
        {A0: 1.0, A1: 0.0, A2: 0.25},
    ]


# ---- EMO: U+/U- over DMs and COMs whose recipient is u (mentions/votes do not count)
#   r1: nothing -> U+ = U- = 0 -> 0.5 for all
#   r2: agent_0 gets DM 8 (critical -1), COM 10 (critical -1): U+ 0, U- 2
#       agent_1 gets COM 6 (supportive +1), DM 7 (critical -1): U+ 1, U- 1
#       agent_2 gets nothing (the mention in COM 6 is not a receipt): U+ 0, U- 0
#   r3: agent_0 gets DM 17 (+1): U+ 1, U- 0
#       agent_1 gets DM 12 (+1), DM 13 (+1), COM 16 (+1): U+ 3, U- 0
#       agent_2 gets DM 14 (neutral 0): U+ 0, U- 0
@pytest.fixture(scope="module")
def EMO_COUNTS(A0, A1, A2):
    return [
        {A0: (0, 0), A1: (0, 0), A2: (0, 0)},
        {A0: (0, 2), A1: (1, 1), A2: (0, 0)},
        {A0: (1, 0), A1: (3, 0), A2: (0, 0)},
    ]


# b_emo = -1:
#   r2 agent_0: 0.5*(1 + (0 - 2)/(0 + 2 + 1e-6)) = 0.5*(1 - 0.9999995) = 2.5e-7
#   r2 agent_1: 0.5*(1 + (1 - 1)/(1 + 1 + 1e-6)) = 0.5
#   r3 agent_0: 0.5*(1 + 1/(1 + 1e-6)) = 0.9999995
#   r3 agent_1: 0.5*(1 + 3/(3 + 1e-6)) = 0.99999983
#   no/neutral interaction: 0.5*(1 + 0/1e-6) = 0.5
@pytest.fixture(scope="module")
def EMO(A0, A1, A2, EPS):
    return [
        {A0: 0.5, A1: 0.5, A2: 0.5},
        {A0: 0.5 * (1 - 2 / (2 + EPS)), A1: 0.5, A2: 0.5},
        {A0: 0.5 * (1 + 1 / (1 + EPS)), A1: 0.5 * (1 + 3 / (3 + EPS)), A2: 0.5},
    ]


@pytest.fixture(scope="module")
def EXPECTED(SOC, INF, PRE, COORD, EMO):
    return {"SOC": SOC, "INF": INF, "PRE": PRE, "COORD": COORD, "EMO": EMO}


@pytest.fixture(scope="module")
def run_main_episode(make_env, play_round, AGENTS, MAIN_SCRIPT, EXPECTED_FEEDS, EXPECTED_VOTE_ITEMS):
    def run_main_episode(**overrides):
        env, obs = make_env(**overrides)
        rounds = []
        for r, (acts, votes) in enumerate(MAIN_SCRIPT):
            for ag in AGENTS:
                assert obs[ag]["phase"] == "act"
                assert feed_ids(obs, ag) == EXPECTED_FEEDS[r][ag], f"round {r + 1} feed of {ag}"
            act_obs, rew, infos, obs = play_round(env, acts, votes)
            for ag in AGENTS:
                assert act_obs[ag]["phase"] == "vote"
                assert vote_ids(act_obs, ag) == EXPECTED_VOTE_ITEMS[r][ag], f"round {r + 1} vote items of {ag}"
            rounds.append({"rewards": rew, "infos": infos})
        return rounds
    return run_main_episode


@pytest.fixture(scope="module")
def main_episode(run_main_episode):
    return run_main_episode()


# --------------------------------------------------------------------------- main episode tests
@pytest.mark.parametrize("rnd", [0, 1, 2])
@pytest.mark.parametrize("component", COMPONENTS)
def test_main_episode_component(main_episode, component, rnd, AGENTS, EXPECTED):
    """Each of SOC/INF/PRE/COORD/EMO equals its hand value in each of the three rounds."""
    infos = main_episode[rnd]["infos"]
    for ag in AGENTS:
        got = comps(infos, ag)[component]
        exp = EXPECTED[component][rnd][ag]
        assert got == pytest.approx(exp, **TOL), f"round {rnd + 1} {ag} {component}: got {got}, expected {exp}"


def test_round1_zero_denominators_give_zero_not_nan(main_episode, AGENTS):
    """Round 1: no DM/COM (|B^DIR| = 0), no DMs in round 0 (D empty), empty feeds (H of nothing):
    SOC, COORD and INF are exactly 0 and EMO is 0.5 (no interaction)."""
    infos = main_episode[0]["infos"]
    for ag in AGENTS:
        c = comps(infos, ag)
        for k in COMPONENTS:
            assert not math.isnan(c[k])
        assert c["SOC"] == 0.0
        assert c["INF"] == 0.0
        assert c["COORD"] == 0.0
        assert c["EMO"] == pytest.approx(0.5, **TOL)


def test_pre_counts_likes_and_dislikes_on_posts_only(main_episode, A0, A1, A2):
    """r2: agent_2's POST 11 got +1/-1 (net 0) and its COM 10 got -1 -> PRE = 0.25 (0.125 if the COM
    counted).  r3: agent_2's COM 16 got two likes but agent_2 has no POST -> PRE = 0.
    r3: agent_1's POST 15 got one dislike and one 0 vote -> 0.25 - 0.125 = 0.125."""
    assert comps(main_episode[1]["infos"], A2)["PRE"] == pytest.approx(0.25, **TOL)
    assert comps(main_episode[1]["infos"], A0)["PRE"] == pytest.approx(0.0, **TOL)
    assert comps(main_episode[2]["infos"], A2)["PRE"] == pytest.approx(0.0, **TOL)
    assert comps(main_episode[2]["infos"], A1)["PRE"] == pytest.approx(0.125, **TOL)


def test_coord_dm_reciprocity_counts_distinct_agents(main_episode, A0):
    """r3: agent_0 answers its only r2 DM sender (agent_1) with two DMs -> R = 1 (distinct), so
    COORD = 0.5*2/2 + 0.5*1/1 = 1.0, not 0.5 + 0.5*2 = 1.5."""
    assert comps(main_episode[2]["infos"], A0)["COORD"] == pytest.approx(1.0, **TOL)


def test_coord_self_mention_ignored(main_episode, A1):
    """r3: agent_1 mentions itself in POST 15 -> not counted; it DMs only agent_2, who is not in
    D_2(agent_1) = {agent_0} -> COORD = 0."""
    assert comps(main_episode[2]["infos"], A1)["COORD"] == pytest.approx(0.0, **TOL)


def test_inf_new_topics_relative_to_earlier_feeds(main_episode, A0, A2):
    """r3: agent_2's feed topics {a, b} were both in its r2 feed -> T = 0 and INF is the entropy
    term only, 0.5*H(4/6, 2/6)/ln 4 = 0.2295740; agent_0 has only 'd' new -> 0.125 + entropy term."""
    assert comps(main_episode[2]["infos"], A2)["INF"] == pytest.approx(0.5 * entropy([4, 2]) / LN4, **TOL)
    assert comps(main_episode[2]["infos"], A2)["INF"] == pytest.approx(0.2295740, abs=1e-6)
    assert comps(main_episode[2]["infos"], A0)["INF"] == pytest.approx(0.4872039, abs=1e-6)


def test_inf_uses_vocabulary_size_at_end_of_round(main_episode, A1):
    """r2: 'c' (a DM topic) and 'd' (a POST topic) are introduced in round 2 -> K = 4 when the reward
    is computed: agent_1's INF = 0.5*2/4 + 0.5*ln2/ln4 = 0.5 (with K = 2 it would be 1.0)."""
    assert comps(main_episode[1]["infos"], A1)["INF"] == pytest.approx(0.5, **TOL)


def test_emo_b_emo_minus_one(main_episode, A0, A1, A2):
    """b_emo = -1: all-negative receipts -> ~0, balanced -> 0.5, all-positive -> ~1, neutral-only -> 0.5."""
    r2, r3 = main_episode[1]["infos"], main_episode[2]["infos"]
    assert comps(r2, A0)["EMO"] == pytest.approx(2.5e-7, abs=1e-9)  # 0.5*(1 - 2/2.000001)
    assert comps(r2, A1)["EMO"] == pytest.approx(0.5, **TOL)  # U+ = U- = 1
    assert comps(r2, A2)["EMO"] == pytest.approx(0.5, **TOL)  # nothing received
    assert comps(r3, A0)["EMO"] == pytest.approx(0.9999995, abs=1e-9)  # 0.5*(1 + 1/1.000001)
    assert comps(r3, A2)["EMO"] == pytest.approx(0.5, **TOL)  # one neutral DM: U+ = U- = 0


def test_uniform_lambda_total(main_episode, A0, A1, A2, AGENTS, EXPECTED):
    """Default lambda = 0.2 each: reward = 0.2 * sum of the five hand-computed components.
    r1: agent_0 0.2*(0+0+0.875+0+0.5) = 0.275; agent_1/agent_2 0.2*(0.5+0.5) = 0.2
    r2: agent_0 0.2*(0.75+0.4528195+0+0.125+2.5e-7) = 0.2655640
    r3: agent_1 0.2*(0.55+0.4872039+0.125+0+0.9999998) = 0.4324407"""
    assert main_episode[0]["rewards"][A0] == pytest.approx(0.275, **TOL)
    assert main_episode[0]["rewards"][A1] == pytest.approx(0.2, **TOL)
    assert main_episode[0]["rewards"][A2] == pytest.approx(0.2, **TOL)
    assert main_episode[1]["rewards"][A0] == pytest.approx(0.2655640, abs=1e-6)
    assert main_episode[2]["rewards"][A1] == pytest.approx(0.4324407, abs=1e-6)
    for rnd in range(3):
        for ag in AGENTS:
            exp = 0.2 * sum(EXPECTED[k][rnd][ag] for k in COMPONENTS)
            assert main_episode[rnd]["rewards"][ag] == pytest.approx(exp, **TOL)


# --------------------------------------------------------------------------- EMO with other b_emo
# (U+, U-) per round/agent from EMO_COUNTS.  Values by hand:
#   b_emo = -0.5 : r2 a0 (0,2): 0.5*(1 + (0 - 1)/(0 + 1 + 1e-6)) = 5.0e-7
#                  r2 a1 (1,1): 0.5*(1 + (1 - 0.5)/(1 + 0.5 + 1e-6)) = 0.5*(1 + 1/3) = 0.6666667
#                  r3 a0 (1,0): 0.5*(1 + 1/(1+1e-6)) = 0.9999995 ; r3 a1 (3,0): 0.9999998
#   b_emo = -2   : r2 a0 (0,2): 0.5*(1 + (0 - 4)/(0 + 4 + 1e-6)) = 1.25e-7
#                  r2 a1 (1,1): 0.5*(1 + (1 - 2)/(1 + 2 + 1e-6)) = 0.5*(1 - 1/3) = 0.3333333
#   b_emo = 0    : r2 a0 (0,2): 0.5*(1 + 0/(0 + 0 + 1e-6)) = 0.5
#                  r2 a1 (1,1): 0.5*(1 + 1/(1 + 1e-6)) = 0.9999995
#   no interaction / neutral only: 0.5 for every b_emo.
@pytest.mark.parametrize(
    "b_emo, r2_a0, r2_a1",
    [
        (-0.5, 5.0e-7, 2.0 / 3.0),
        (-2.0, 1.25e-7, 1.0 / 3.0),
        (0.0, 0.5, 0.9999995),
    ],
)
def test_emo_other_b_emo(b_emo, r2_a0, r2_a1, run_main_episode, emo, A0, A1, A2, AGENTS, EMO_COUNTS, EXPECTED):
    rounds = run_main_episode(b_emo=b_emo)
    r1, r2, r3 = (rounds[i]["infos"] for i in range(3))
    for ag in AGENTS:
        assert comps(r1, ag)["EMO"] == pytest.approx(0.5, **TOL)
    assert comps(r2, A0)["EMO"] == pytest.approx(r2_a0, abs=1e-6)
    assert comps(r2, A1)["EMO"] == pytest.approx(r2_a1, abs=1e-6)
    assert comps(r2, A2)["EMO"] == pytest.approx(0.5, **TOL)
    assert comps(r3, A0)["EMO"] == pytest.approx(0.9999995, abs=1e-6)
    assert comps(r3, A1)["EMO"] == pytest.approx(0.9999998, abs=1e-6)
    assert comps(r3, A2)["EMO"] == pytest.approx(0.5, **TOL)
    # the formula, applied to the hand-counted U+/U-, for every round and agent
    for rnd in range(3):
        for ag in AGENTS:
            up, un = EMO_COUNTS[rnd][ag]
            assert comps(rounds[rnd]["infos"], ag)["EMO"] == pytest.approx(emo(up, un, b_emo), **TOL)
    # the other four components do not depend on b_emo
    for rnd in range(3):
        for ag in AGENTS:
            c = comps(rounds[rnd]["infos"], ag)
            for k in ("SOC", "INF", "PRE", "COORD"):
                assert c[k] == pytest.approx(EXPECTED[k][rnd][ag], **TOL)


# --------------------------------------------------------------------------- lambda-weighted totals
# Non-uniform per-agent lambdas (order SOC, INF, PRE, COORD, EMO), each on the simplex:
#   agent_0: (0.125, 0.25, 0.125, 0.5, 0.0)
#   agent_1: (0.5, 0.0, 0.0, 0.25, 0.25)
#   agent_2: (0.25, 0.25, 0.25, 0.0, 0.25)
@pytest.fixture(scope="module")
def LAMBDAS(A0, A1, A2):
    return {
        A0: (0.125, 0.25, 0.125, 0.5, 0.0),
        A1: (0.5, 0.0, 0.0, 0.25, 0.25),
        A2: (0.25, 0.25, 0.25, 0.0, 0.25),
    }


# Hand totals:
# r1: a0 = 0.125*0 + 0.25*0 + 0.125*0.875 + 0.5*0 + 0*0.5       = 0.109375
#     a1 = 0.5*0 + 0 + 0 + 0.25*0 + 0.25*0.5                     = 0.125
#     a2 = 0.25*(0 + 0 + 0.5) + 0 + 0.25*0.5                     = 0.25
# r2: a0 = 0.125*0.75 + 0.25*0.4528195 + 0.125*0 + 0.5*0.125 + 0 = 0.09375 + 0.1132049 + 0.0625 = 0.2694549
#     a1 = 0.5*0.5 + 0.25*0 + 0.25*0.5                           = 0.375
#     a2 = 0.25*0.25 + 0.25*0.4528195 + 0.25*0.25 + 0 + 0.25*0.5 = 0.0625 + 0.1132049 + 0.0625 + 0.125 = 0.3632049
# r3: a0 = 0.125*0.6 + 0.25*0.4872039 + 0.125*0 + 0.5*1.0 + 0   = 0.075 + 0.1218010 + 0.5 = 0.6968010
#     a1 = 0.5*0.55 + 0.25*0 + 0.25*0.99999983                  = 0.275 + 0.24999996 = 0.52499996
#     a2 = 0.25*0.6 + 0.25*0.2295740 + 0.25*0 + 0 + 0.25*0.5     = 0.15 + 0.0573935 + 0.125 = 0.3323935
@pytest.fixture(scope="module")
def TOTALS(A0, A1, A2):
    return [
        {A0: 0.109375, A1: 0.125, A2: 0.25},
        {A0: 0.2694549, A1: 0.375, A2: 0.3632049},
        {A0: 0.6968010, A1: 0.52499996, A2: 0.3323935},
    ]


@pytest.fixture(scope="module")
def check_totals(AGENTS, EXPECTED, LAMBDAS, TOTALS):
    def check_totals(rounds):
        for rnd in range(3):
            for ag in AGENTS:
                # rounded hand totals
                assert rounds[rnd]["rewards"][ag] == pytest.approx(TOTALS[rnd][ag], abs=2e-7), (rnd, ag)
                # exact: sum_r lambda_r * (hand component)
                exact = sum(l * EXPECTED[k][rnd][ag] for l, k in zip(LAMBDAS[ag], COMPONENTS))
                assert rounds[rnd]["rewards"][ag] == pytest.approx(exact, **TOL)
                # components are unaffected by lambda
                c = comps(rounds[rnd]["infos"], ag)
                for k in COMPONENTS:
                    assert c[k] == pytest.approx(EXPECTED[k][rnd][ag], **TOL)
    return check_totals


def test_lambda_weighted_total_dict_of_sequences(run_main_episode, check_totals, LAMBDAS):
    check_totals(run_main_episode(lambdas={ag: list(v) for ag, v in LAMBDAS.items()}))


def test_lambda_weighted_total_dict_of_named_weights(run_main_episode, check_totals, LAMBDAS):
    named = {ag: dict(zip(COMPONENTS, v)) for ag, v in LAMBDAS.items()}
    check_totals(run_main_episode(lambdas=named))


def test_lambda_weighted_total_array(run_main_episode, check_totals, A0, A1, A2, LAMBDAS):
    arr = np.array([LAMBDAS[A0], LAMBDAS[A1], LAMBDAS[A2]], dtype=float)  # shape (3, 5)
    check_totals(run_main_episode(lambdas=arr))


def test_lambda_single_sequence_for_all_agents(run_main_episode, AGENTS, PRE):
    """lambdas = (0, 0, 1, 0, 0) for everybody -> reward = PRE.
    r1: 0.875 / 0.5 / 0.5 ; r2: 0 / 0.5 / 0.25 ; r3: 0 / 0.125 / 0."""
    rounds = run_main_episode(lambdas=(0.0, 0.0, 1.0, 0.0, 0.0))
    for rnd in range(3):
        for ag in AGENTS:
            assert rounds[rnd]["rewards"][ag] == pytest.approx(PRE[rnd][ag], **TOL)


# --------------------------------------------------------------------------- focused small episodes
def test_all_not_round_zero_denominators(make_env, play_round, post, NOT, AGENTS):
    """N = 2.  r1: everybody posts a and b (agent_0: 0 a, 1 b; agent_1: 2 a, 3 b; agent_2: 4 a, 5 b),
    no votes.  r2: everybody NOT, NOT.
    r1: SOC 0 (|B^DIR| = 0); INF 0 (empty feed); PRE 0.5*2/2 + 0.5*0/4 = 0.5; COORD 0; EMO 0.5
        total 0.2*(0.5 + 0.5) = 0.2
    r2: |B^DIR| = 0 -> SOC 0; |B^PUB| = 0 and D_1 empty -> COORD 0; P = 0 -> PRE 0; EMO 0.5;
        feed = the 4 items of the two others, topics a,b,a,b, K = 2:
        INF = 0.5*2/2 + 0.5*ln2/ln2 = 1.0 ; total 0.2*(1.0 + 0.5) = 0.3"""
    env, _ = make_env(max_rounds=2)
    r1 = {ag: [post("a"), post("b")] for ag in AGENTS}
    _, rew1, inf1, _ = play_round(env, r1)
    _, rew2, inf2, _ = play_round(env, {ag: [NOT, NOT] for ag in AGENTS})
    for ag in AGENTS:
        assert comps(inf1, ag) == pytest.approx({"SOC": 0.0, "INF": 0.0, "PRE": 0.5, "COORD": 0.0, "EMO": 0.5}, **TOL)
        assert rew1[ag] == pytest.approx(0.2, **TOL)
        assert comps(inf2, ag) == pytest.approx({"SOC": 0.0, "INF": 1.0, "PRE": 0.0, "COORD": 0.0, "EMO": 0.5}, **TOL)
        assert rew2[ag] == pytest.approx(0.3, **TOL)


@pytest.mark.parametrize("topics", [[], ["a"], [" A "]])
def test_inf_entropy_term_zero_when_vocabulary_has_one_topic(topics, make_env, play_round, post, NOT, AGENTS):
    """N = 1, every post on topic 'a' (configured vocabulary empty / ['a'] / [' A '] normalised to 'a')
    -> K = 1.  r2 feed of each agent = the two others' posts, both 'a': T = 1, H = 0 and K <= 1 so the
    entropy term is 0 (not 0/0): INF = 0.5*1/1 + 0 = 0.5."""
    env, _ = make_env(n_actions=1, max_rounds=2, topics=topics)
    play_round(env, {ag: [post("a")] for ag in AGENTS})
    _, _, infos, _ = play_round(env, {ag: [NOT] for ag in AGENTS})
    for ag in AGENTS:
        inf = comps(infos, ag)["INF"]
        assert not math.isnan(inf)
        assert inf == pytest.approx(0.5, **TOL)


def test_inf_new_topic_normalised_and_counted_in_k_and_later_feeds(make_env, play_round, post, NOT, A0, A1, A2, AGENTS):
    """N = 1, topics ['a', 'b'].
    r1: agent_0 POST a (id 0), agent_1 POST a (id 1), agent_2 POST b (id 2).
    r2: agent_0 POST '  E ' (normalised 'e', id 3); the others NOT.  K = |{a,b,e}| = 3.
        feeds: agent_0 [2 b, 1 a]; agent_1 [2 b, 0 a]; agent_2 [1 a, 0 a]; nothing seen before.
        agent_0: T = 2, H = ln2 -> 0.5*2/3 + 0.5*ln2/ln3 = 0.3333333 + 0.3154649 = 0.6487982
        agent_1: same -> 0.6487982
        agent_2: T = 1, H = 0 -> 0.5*1/3 = 0.1666667
    r3: all NOT.  K = 3.
        agent_0 feed [2 b, 1 a]: both seen in r2 -> T = 0, H = ln2 -> 0.5*ln2/ln3 = 0.3154649
        agent_1 feed [3 e, 2 b, 0 a]: 'e' new -> T = 1, H = ln3 -> 0.5/3 + 0.5 = 0.6666667
        agent_2 feed [3 e, 1 a, 0 a]: 'e' new -> T = 1, H = -(1/3 ln1/3 + 2/3 ln2/3) = 0.6365142
                 -> 0.5/3 + 0.5*0.6365142/ln3 = 0.1666667 + 0.2896901 = 0.4563567"""
    env, _ = make_env(n_actions=1, max_rounds=3)
    play_round(env, {A0: [post("a")], A1: [post("a")], A2: [post("b")]})
    _, _, inf2, obs3 = play_round(env, {A0: [post("  E ")], A1: [NOT], A2: [NOT]})
    assert "e" in tuple(obs3[A0]["topics"])
    assert len(tuple(obs3[A0]["topics"])) == 3
    assert feed_ids(obs3, A1) == [3, 2, 0]
    _, _, inf3, _ = play_round(env, {ag: [NOT] for ag in AGENTS})
    assert comps(inf2, A0)["INF"] == pytest.approx(0.5 * 2 / 3 + 0.5 * LN2 / LN3, **TOL)  # 0.6487982
    assert comps(inf2, A1)["INF"] == pytest.approx(0.6487982, abs=1e-6)
    assert comps(inf2, A2)["INF"] == pytest.approx(1 / 6, **TOL)
    assert comps(inf3, A0)["INF"] == pytest.approx(0.5 * LN2 / LN3, **TOL)  # 0.3154649
    assert comps(inf3, A1)["INF"] == pytest.approx(2 / 3, **TOL)
    assert comps(inf3, A2)["INF"] == pytest.approx(1 / 6 + 0.5 * entropy([1, 2]) / LN3, **TOL)  # 0.4563567
    assert comps(inf3, A2)["INF"] == pytest.approx(0.4563567, abs=1e-6)


def test_coord_dm_reciprocity_previous_round_only(make_env, play_round, post, dm, NOT, A0, A1, A2, AGENTS):
    """N = 1, 4 rounds.
    r1: everybody POST a (ids 0, 1, 2).
    r2: agent_0 DM agent_2 (id 3), agent_1 DM agent_2 (id 4), agent_2 NOT.
        D_1 = {} for all -> COORD 0 (and |B^PUB| = 0 -> mention term 0).
    r3: agent_2 DM agent_0 (id 5); others NOT.
        D_2(a2) = {a0, a1}; a2 DMs a0 -> R = 1 -> COORD(a2) = 0.5*1/2 = 0.25
        D_2(a0) = D_2(a1) = {} -> 0.
    r4: agent_0 DM agent_2 (id 6), agent_2 DM agent_1 (id 7), agent_1 NOT.
        D_3(a0) = {a2}; a0 DMs a2 -> 0.5*1/1 = 0.5
        D_3(a2) = {} (a1's DM to a2 was two rounds ago) -> COORD(a2) = 0
        D_3(a1) = {} -> 0."""
    env, _ = make_env(n_actions=1, max_rounds=4)
    _, _, i1, _ = play_round(env, {ag: [post("a")] for ag in AGENTS})
    _, _, i2, _ = play_round(env, {A0: [dm(A2, "a")], A1: [dm(A2, "a")], A2: [NOT]})
    _, _, i3, _ = play_round(env, {A0: [NOT], A1: [NOT], A2: [dm(A0, "a")]})
    _, _, i4, _ = play_round(env, {A0: [dm(A2, "a")], A1: [NOT], A2: [dm(A1, "a")]})
    for ag in AGENTS:
        assert comps(i1, ag)["COORD"] == 0.0
        assert comps(i2, ag)["COORD"] == 0.0
    assert comps(i3, A2)["COORD"] == pytest.approx(0.25, **TOL)
    assert comps(i3, A0)["COORD"] == pytest.approx(0.0, **TOL)
    assert comps(i3, A1)["COORD"] == pytest.approx(0.0, **TOL)
    assert comps(i4, A0)["COORD"] == pytest.approx(0.5, **TOL)
    assert comps(i4, A1)["COORD"] == pytest.approx(0.0, **TOL)
    assert comps(i4, A2)["COORD"] == pytest.approx(0.0, **TOL)


def test_coord_mention_term_counts_items_mentioning_u(make_env, play_round, post, A0, A1, A2):
    """N = 2, round 1 only (all POSTs, mentions allowed in POSTs):
    agent_0: POST a mentions [agent_1, agent_2] (id 0), POST b (id 1)
    agent_1: POST a mentions [agent_2] (id 2), POST a mentions [agent_1] (self, ignored) (id 3)
    agent_2: POST b (id 4), POST b mentions [agent_1] (id 5)
    |B^PUB| = 6.  M(a0) = 0; M(a1) = |{0, 5}| = 2; M(a2) = |{0, 2}| = 2.  D_0 empty.
    COORD: a0 0 ; a1 0.5*2/6 = 0.1666667 ; a2 0.1666667."""
    env, _ = make_env(max_rounds=1)
    acts = {
        A0: [post("a", mentions=[A1, A2]), post("b")],
        A1: [post("a", mentions=[A2]), post("a", mentions=[A1])],
        A2: [post("b"), post("b", mentions=[A1])],
    }
    _, _, infos, _ = play_round(env, acts)
    assert comps(infos, A0)["COORD"] == pytest.approx(0.0, **TOL)
    assert comps(infos, A1)["COORD"] == pytest.approx(1 / 6, **TOL)
    assert comps(infos, A2)["COORD"] == pytest.approx(1 / 6, **TOL)


def test_soc_and_emo_with_comment_on_a_comment(make_env, play_round, post, com, NOT, A0, A1, A2, AGENTS):
    """A COM's recipient is the author of its target, also when the target is a COM.
    N = 1.  r1: everybody POST a (ids 0, 1, 2).
    r2: agent_0 COM on 1 (agent_1's post), supportive (id 3); agent_1 NOT; agent_2 NOT.
    r3: agent_2 COM on 3 (agent_0's COM, in agent_2's feed), critical (id 4); others NOT.
    r3: B^DIR = {4} -> SOC(a0) = 0.5*0/1 + 0.5*1/1 = 0.5 ; SOC(a2) = 0.5*1/1 + 0 = 0.5 ; SOC(a1) = 0
        EMO(a0): U+ 0, U- 1 -> 0.5*(1 - 1/(1 + 1e-6)) = 5e-7 ; EMO(a1) = 0.5 (nothing received)."""
    env, _ = make_env(n_actions=1, max_rounds=3)
    play_round(env, {ag: [post("a")] for ag in AGENTS})
    play_round(env, {A0: [com(1, "supportive")], A1: [NOT], A2: [NOT]})
    _, _, i3, _ = play_round(env, {A0: [NOT], A1: [NOT], A2: [com(3, "critical")]})
    assert comps(i3, A0)["SOC"] == pytest.approx(0.5, **TOL)
    assert comps(i3, A2)["SOC"] == pytest.approx(0.5, **TOL)
    assert comps(i3, A1)["SOC"] == pytest.approx(0.0, **TOL)
    assert comps(i3, A0)["EMO"] == pytest.approx(5e-7, abs=1e-9)
    assert comps(i3, A1)["EMO"] == pytest.approx(0.5, **TOL)


def test_emo_tone_sentiment_ignores_text(make_env, play_round, post, dm, NOT, A0, A1, A2, AGENTS):
    """sentiment='tone': the text is ignored, the tone decides.  N = 1, b_emo = -1.
    r1: all POST a.  r2: agent_0 and agent_2 each DM agent_1 with an angry text but tone supportive
    (s = +1 each; a text scorer would make them negative).
    agent_1: U+ = 2, U- = 0 -> EMO = 0.5*(1 + 2/(2 + 1e-6)) = 0.99999975."""
    env, _ = make_env(n_actions=1, max_rounds=2)
    play_round(env, {ag: [post("a")] for ag in AGENTS})
    angry = "I hate this, it is awful and terrible."
    _, _, i2, _ = play_round(
        env,
        {A0: [dm(A1, "a", "supportive", text=angry)], A1: [NOT], A2: [dm(A1, "a", "supportive", text=angry)]},
    )
    assert comps(i2, A1)["EMO"] == pytest.approx(0.99999975, abs=1e-7)


def test_emo_callable_sentiment_for_text_tone_without_text(make_env, play_round, post, dm, NOT, A0, A1, A2, AGENTS, EPS):
    """sentiment = callable returning 0.25 for any text.  N = 1, b_emo = -1.
    r1: all POST a.  r2: agent_0 DM agent_1 with text 'hello' (s = 0.25, tone ignored since text is
    non-empty), agent_2 DM agent_1 without text, tone critical (s = -1).
    agent_1: U+ = 0.25, U- = 1 -> EMO = 0.5*(1 + (0.25 - 1)/(0.25 + 1 + 1e-6)) = 0.5*(1 - 0.6)
             = 0.2 (more precisely 0.5*(1 - 0.75/1.250001))."""
    env, _ = make_env(n_actions=1, max_rounds=2, sentiment=lambda text: 0.25)
    play_round(env, {ag: [post("a")] for ag in AGENTS})
    _, _, i2, _ = play_round(
        env,
        {A0: [dm(A1, "a", "critical", text="hello")], A1: [NOT], A2: [dm(A1, "a", "critical")]},
    )
    assert comps(i2, A1)["EMO"] == pytest.approx(0.5 * (1 - 0.75 / (1.25 + EPS)), **TOL)
    assert comps(i2, A1)["EMO"] == pytest.approx(0.2, abs=1e-6)


def test_emo_by_polarity_supportive_only_hostile_only_and_balanced(make_env, play_round, post, dm, A0, A1, A2):
    """Specification §3's departure: with b_emo = -1 a round of supportive DMs only scores 1, of
    hostile DMs only 0, and a balanced one 0.5 (the paper's text says one polarity scores near 1)."""
    env, _ = make_env()
    play_round(env, {A0: [post("a"), post("a")], A1: [post("a"), post("a")], A2: [post("a"), post("a")]})
    # round 2: agent_0 gets two supportive DMs; agent_1 two hostile; agent_2 one of each
    _, _, infos, _ = play_round(env, {
        A1: [dm(A0, "a", tone="supportive"), dm(A2, "a", tone="critical")],
        A2: [dm(A0, "a", tone="supportive"), dm(A1, "a", tone="critical")],
        A0: [dm(A1, "a", tone="critical"), dm(A2, "a", tone="supportive")]})
    emo = {ag: comps(infos, ag)["EMO"] for ag in (A0, A1, A2)}
    assert emo[A0] == pytest.approx(1.0, abs=1e-5)          # U- = 0: 0.5 (1 + U+/(U+ + eps))
    assert emo[A1] == pytest.approx(0.0, abs=1e-5)          # U+ = 0: 0.5 (1 - U-/(U- + eps))
    assert emo[A2] == pytest.approx(0.5, abs=1e-5)          # U+ = U- (same |s| for both tones)
