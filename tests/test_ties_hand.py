"""Hand-computed tie-dynamics tests (specification §4; docs/api-contract.md).

Default heuristic evidence (api-contract):
    e = sigmoid(-2 + 1*S_nov + 2*S_appr + 0.5*S_rec + 2*S_aff),  sigmoid(x) = 1/(1+exp(-x))
Update after the vote phase:
    active   : W[v,u] += min(delta_max, (1 - W[v,u]) * max(0, e - xi))     xi = 0.1, delta_max = 0.25
    inactive : W[v,u] *= (1 - delta),  delta = 1 - 2**(-1/half_life)      half_life = 5
Signals:
    S_nov  = 1 if a topic of v's activating actions is new to u (not seen before round t), else 0
    S_appr = (L+ - L-)/max(1, L+ + L-) over v's votes on u's items
    S_rec  = 1 - |Lh(v->u) - Lh(u->v)| / (Lh(v->u) + Lh(u->v) + eps),
             Lh_t = b_rec*Lh_{t-1} + (1-b_rec)*likes_t, b_rec = 0.5, eps = 1e-6
             (with no likes ever, both Lh are 0 and S_rec = 1 - 0/(0+eps) = 1)
    S_aff  = mean s(a) of v's DMs to u, only if v cast no non-zero vote on u's items and sent a DM

Frequently used numbers (math.exp only):
    sigmoid(-1.5) = 0.1824255  -> increase 0.0824255   (no signal but S_rec = 1)
    sigmoid(-0.5) = 0.3775407  -> increase 0.2775407   (S_nov = 1 or S_aff = 0.5, plus S_rec = 1)
    sigmoid( 0.5) = 0.6224593  -> increase 0.5224593   (capped at 0.25 by default)
    sigmoid(-3.5) = 0.0293122  -> below xi, no increase
    sigmoid( 0  ) = 0.5        -> increase 0.4
    1 - delta = 2**(-1/5) = 0.8705506

Set-up unless a test says otherwise: 3 agents, n_actions = 1, topics ["a", "b"], chronological
feed, sentiment "tone", and round 1 = every agent POSTs topic "a" (ids 0, 1, 2) with no votes
and no mentions, so every tie is 0 after round 1 and every agent has seen topic "a" (own
action) before round 2.

A0, A1, A2, AGENTS, EPS, NOT, the builders post/com/dm and the helpers make_env/act/vote/play_round
are fixtures of tests/conftest.py (the scripted episodes).
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp

TOL = dict(rel=1e-6, abs=1e-7)


def sig(x):
    return 1.0 / (1.0 + math.exp(-x))


DECAY = 2.0 ** (-1.0 / 5.0)  # 1 - delta with half_life 5 = 0.8705506
W_NEUTRAL = sig(-2 + 0.5 * 1) - 0.1  # 0.1824255 - 0.1 = 0.0824255


# --------------------------------------------------------------------------- helpers
# make_env (n_actions 1 by default, returns the env), post/com/dm/NOT and act/vote are conftest's
# fixtures; a round here is conftest's play_round, returning the tie matrix after the vote step.
@pytest.fixture(scope="module")
def play_round(play_round):
    scripted_round = play_round

    def round_then_ties(env, acts, votes=None):
        scripted_round(env, acts, votes)
        return tie(env)
    return round_then_ties


def tie(env):
    m = env.unwrapped.tie_matrix()
    arr = m.toarray() if hasattr(m, "toarray") else np.asarray(m)
    arr = np.asarray(arr, dtype=float)
    assert arr.shape == (3, 3)
    assert np.all(np.diag(arr) == 0.0), "diagonal must stay 0"
    assert np.all(arr >= 0.0) and np.all(arr <= 1.0)
    return arr


@pytest.fixture(scope="module")
def round1_all_post_a(play_round, post, AGENTS):
    def round1_all_post_a(env, n_actions=1):
        W = play_round(env, {ag: [post("a") for _ in range(n_actions)] for ag in AGENTS})
        assert np.all(W == 0.0)
        return W
    return round1_all_post_a


def assert_only(W, expected):
    """expected: {(v, u): value}; every other entry must be 0."""
    for v in range(3):
        for u in range(3):
            exp = expected.get((v, u), 0.0)
            assert W[v, u] == pytest.approx(exp, **TOL), f"W[{v},{u}] = {W[v, u]}, expected {exp}"


# --------------------------------------------------------------------------- basics
def test_tie_matrix_is_sparse_and_starts_at_zero(make_env):
    env = make_env()
    m = env.unwrapped.tie_matrix()
    assert sp.issparse(m)
    assert m.shape == (3, 3)
    assert np.all(m.toarray() == 0.0)


def test_no_interaction_round_leaves_ties_zero(make_env, round1_all_post_a):
    """Round 1 with posts only and no votes/mentions activates nothing -> W stays 0."""
    env = make_env()
    round1_all_post_a(env)


def test_ties_change_only_after_vote_step(make_env, round1_all_post_a, act, vote, dm, A0, A1):
    """r2: agent_0 DMs agent_1.  After the act step W is still 0; after the vote step W[0,1] > 0."""
    env = make_env()
    round1_all_post_a(env)
    act(env, {A0: [dm(A1, "a")]})
    assert np.all(tie(env) == 0.0)
    vote(env)
    assert tie(env)[0, 1] == pytest.approx(W_NEUTRAL, **TOL)


# --------------------------------------------------------------------------- activation kinds
def test_neutral_dm_value_and_row_is_source(make_env, round1_all_post_a, play_round, dm, A0, A1):
    """r2: agent_0 DM agent_1, topic a (seen by agent_1: its own r1 post), tone neutral (s = 0).
    S_nov 0, S_appr 0 (no votes), S_rec 1 (no likes either way), S_aff = mean s = 0
    e = sigmoid(-2 + 0.5) = 0.1824255 -> W[0,1] = 0 + min(0.25, 1*(0.1824255-0.1)) = 0.0824255.
    Orientation: row = source, so W[0,1] is set and W[1,0] stays 0."""
    env = make_env()
    round1_all_post_a(env)
    W = play_round(env, {A0: [dm(A1, "a", "neutral")]})
    assert_only(W, {(0, 1): W_NEUTRAL})
    assert W[0, 1] == pytest.approx(0.0824255, abs=1e-7)


def test_mention_in_post_value(make_env, round1_all_post_a, play_round, post, A0, A1):
    """r2: agent_0 POST a mentioning agent_1 (ADDRESS).  S_nov 0 (a seen), S_appr 0, S_rec 1, S_aff 0
    e = sigmoid(-1.5) -> W[0,1] = 0.0824255; nobody else touched."""
    env = make_env()
    round1_all_post_a(env)
    W = play_round(env, {A0: [post("a", mentions=[A1])]})
    assert_only(W, {(0, 1): W_NEUTRAL})


def test_comment_on_item_value_and_comment_tone_not_in_s_aff(make_env, round1_all_post_a, play_round, com,
                                                             A0):
    """r2: agent_0 COM on id 1 (agent_1's r1 post, topic a), tone critical (ENGAGE).
    S_aff only uses DMs -> 0; S_nov 0; S_appr 0; S_rec 1 -> e = sigmoid(-1.5) -> W[0,1] = 0.0824255."""
    env = make_env()
    round1_all_post_a(env)
    W = play_round(env, {A0: [com(1, "critical")]})
    assert_only(W, {(0, 1): W_NEUTRAL})


def test_comment_mention_activates_both_target_author_and_mentioned(make_env, round1_all_post_a, play_round,
                                                                    com, A0, A2):
    """r2: agent_0 COM on id 1 (author agent_1) mentioning agent_2.
    agent_0->agent_1 (ENGAGE) and agent_0->agent_2 (ADDRESS), both e = sigmoid(-1.5)
    -> W[0,1] = W[0,2] = 0.0824255."""
    env = make_env()
    round1_all_post_a(env)
    W = play_round(env, {A0: [com(1, "neutral", mentions=[A2])]})
    assert_only(W, {(0, 1): W_NEUTRAL, (0, 2): W_NEUTRAL})


def test_like_is_capped_then_scaled_by_one_minus_w(make_env, round1_all_post_a, play_round, post, NOT, A0,
                                                   A1, A2, EPS):
    """agent_1 POSTs topic a every round (r2 id 3, r3 id 4, r4 id 5, r5 id 6), agent_0 likes it, nobody
    else acts.  S_appr = 1/1 = 1; S_aff 0 (voted); S_nov 0 (a seen by agent_1).
    Lh(0->1): r2 0.5, r3 0.75, r4 0.875, r5 0.9375; Lh(1->0) = 0 -> S_rec = 1 - Lh/(Lh + 1e-6) ~ 1e-6
    e = sigmoid(-2 + 2 + 0.5*S_rec) ~ 0.5 -> raw increase (1 - W)*0.4:
      r2: min(0.25, 1.00*0.4 = 0.40) = 0.25 -> 0.25
      r3: min(0.25, 0.75*0.4 = 0.30) = 0.25 -> 0.50
      r4: min(0.25, 0.50*0.4 = 0.20) = 0.20 -> 0.70
      r5: min(0.25, 0.30*0.4 = 0.12) = 0.12 -> 0.82
    W[1,0] stays 0 (agent_1 never acted towards agent_0)."""
    env = make_env(max_rounds=5)
    round1_all_post_a(env)
    expected = [0.25, 0.5, 0.7, 0.82]
    w = 0.0
    lh = 0.0
    for k, item_id in enumerate([3, 4, 5, 6]):
        W = play_round(env, {A0: [NOT], A1: [post("a")], A2: [NOT]}, {A0: {item_id: +1}})
        lh = 0.5 * lh + 0.5 * 1
        e = sig(-2 + 2 * 1 + 0.5 * (1 - lh / (lh + EPS)))
        w = w + min(0.25, (1 - w) * max(0.0, e - 0.1))
        assert w == pytest.approx(expected[k], abs=1e-6)
        assert_only(W, {(0, 1): w})


def test_dislike_below_xi_no_increase_and_no_decay(make_env, round1_all_post_a, play_round, post, dm, NOT,
                                                   A0, A1, A2):
    """r2: agent_0 DM agent_1 neutral -> W[0,1] = 0.0824255 (see the DM test).
    r3: agent_1 POST a (id 4; ids: r1 0-2, r2 DM 3), agent_0 votes -1 on it (active, ENGAGE).
    S_appr = (0-1)/max(1,1) = -1; S_rec = 1 (no likes); S_aff 0 (non-zero vote); S_nov 0
    e = sigmoid(-2 - 2 + 0.5) = sigmoid(-3.5) = 0.0293 < xi -> increase 0, and as the tie is active it
    does not decay: W[0,1] stays 0.0824255 (decay would give 0.0717556)."""
    env = make_env()
    round1_all_post_a(env)
    W = play_round(env, {A0: [dm(A1, "a", "neutral")]})
    assert W[0, 1] == pytest.approx(W_NEUTRAL, **TOL)
    W = play_round(env, {A0: [NOT], A1: [post("a")], A2: [NOT]}, {A0: {4: -1}})
    assert_only(W, {(0, 1): W_NEUTRAL})


def test_dislike_from_zero_stays_zero(make_env, round1_all_post_a, play_round, post, NOT, A0, A1, A2):
    """r2: agent_1 POST a (id 3), agent_0 votes -1: e = sigmoid(-3.5) < xi -> W[0,1] = 0."""
    env = make_env()
    round1_all_post_a(env)
    W = play_round(env, {A0: [NOT], A1: [post("a")], A2: [NOT]}, {A0: {3: -1}})
    assert_only(W, {})


def test_critical_dm_below_xi_no_increase(make_env, round1_all_post_a, play_round, dm, A0, A1):
    """r2: agent_0 DM agent_1 critical: S_aff = -1 -> e = sigmoid(-2 + 0.5 - 2) = sigmoid(-3.5) < xi -> 0."""
    env = make_env()
    round1_all_post_a(env)
    W = play_round(env, {A0: [dm(A1, "a", "critical")]})
    assert_only(W, {})


# --------------------------------------------------------------------------- cap
@pytest.mark.parametrize(
    "delta_max, expected",
    [
        # supportive DM: S_aff = 1, S_rec = 1 -> e = sigmoid(-2 + 0.5 + 2) = sigmoid(0.5) = 0.6224593
        # raw increase (1 - 0)*(0.6224593 - 0.1) = 0.5224593
        (None, 0.25),  # default delta_max 0.25 -> capped
        (0.4, 0.4),  # capped at 0.4
        (1.0, 0.5224593),  # not capped
    ],
)
def test_supportive_dm_increase_capped_by_delta_max(delta_max, expected, make_env, round1_all_post_a,
                                                    play_round, dm, A0, A1):
    kw = {} if delta_max is None else {"delta_max": delta_max}
    env = make_env(**kw)
    round1_all_post_a(env)
    W = play_round(env, {A0: [dm(A1, "a", "supportive")]})
    assert W[0, 1] == pytest.approx(expected, abs=1e-7)
    assert_only(W, {(0, 1): expected})


# --------------------------------------------------------------------------- decay
@pytest.mark.parametrize("half_life", [None, 2.0])
def test_inactive_tie_decays_by_half_life(half_life, make_env, round1_all_post_a, play_round, dm, NOT, A0,
                                          A1, AGENTS):
    """r2: agent_0 DM agent_1 neutral -> w0 = 0.0824255.  r3..r7: everybody NOT -> inactive ->
    W[0,1] = w0 * (1 - delta)^k with 1 - delta = 2**(-1/half_life).
    half_life 5: k = 1..5 -> 0.0717556, 0.0624669, 0.0543806, 0.0473410, 0.0412128 (= w0/2 at k = 5)
    half_life 2: k = 2 -> w0/2 = 0.0412128, k = 4 -> w0/4 = 0.0206064."""
    kw = {} if half_life is None else {"half_life": half_life}
    hl = 5.0 if half_life is None else half_life
    env = make_env(max_rounds=7, **kw)
    round1_all_post_a(env)
    W = play_round(env, {A0: [dm(A1, "a", "neutral")]})
    w0 = W_NEUTRAL
    assert W[0, 1] == pytest.approx(w0, **TOL)
    for k in range(1, 6):
        W = play_round(env, {ag: [NOT] for ag in AGENTS})
        assert_only(W, {(0, 1): w0 * 2.0 ** (-k / hl)})
        if hl == 5.0:
            assert W[0, 1] == pytest.approx([0.0717556, 0.0624669, 0.0543806, 0.0473410, 0.0412128][k - 1], abs=1e-7)
        if k == hl:
            assert W[0, 1] == pytest.approx(w0 / 2, **TOL)


# --------------------------------------------------------------------------- reciprocity EMA
@pytest.mark.parametrize(
    "b_rec, w01_r3",
    [
        # b_rec 0.5: Lh(0->1) = 0.5*0.5 + 0.5*1 = 0.75, Lh(1->0) = 0.5*0.5 + 0 = 0.25
        #   S_rec = 1 - 0.5/(1.0 + 1e-6) = 0.5000005, e3 = sigmoid(0 + 0.25) = 0.5621766
        #   W = 0.5224593 + (1 - 0.5224593)*(0.5621766 - 0.1) = 0.5224593 + 0.4775407*0.4621766 = 0.7431674
        (0.5, 0.7431674),
        # b_rec 0.0: Lh(0->1) = 1, Lh(1->0) = 0 -> S_rec ~ 1e-6, e3 = sigmoid(~0) = 0.5000001
        #   W = 0.5224593 + 0.4775407*0.4000001 = 0.7134757
        (0.0, 0.7134757),
        # b_rec 0.8: r2 Lh = 0.2 both; r3 Lh(0->1) = 0.8*0.2 + 0.2*1 = 0.36, Lh(1->0) = 0.8*0.2 = 0.16
        #   S_rec = 1 - 0.2/(0.52 + 1e-6) = 0.6153854, e3 = sigmoid(0.3076927) = 0.5763220
        #   W = 0.5224593 + 0.4775407*0.4763220 = 0.7499224
        (0.8, 0.7499224),
    ],
)
def test_reciprocity_ema_with_b_rec(b_rec, w01_r3, make_env, round1_all_post_a, play_round, post, NOT, A0,
                                    A1, A2, EPS):
    """delta_max = 1 (no cap) so the evidence is visible.
    r2: agent_0 POST a (id 3), agent_1 POST a (id 4); agent_0 likes 4, agent_1 likes 3.
        Lh(0->1) = Lh(1->0) = (1 - b_rec)*1 -> S_rec = 1; S_appr = 1; S_aff = 0; S_nov = 0
        e2 = sigmoid(-2 + 2 + 0.5) = 0.6224593 -> W[0,1] = W[1,0] = 0.5224593
    r3: agent_0 POST a (id 5), agent_1 POST a (id 6); only agent_0 likes (6); agent_1 votes nothing.
        agent_0->agent_1 active with S_appr = 1 and S_rec from the EMA (see parameters);
        agent_1->agent_0 inactive -> 0.5224593 * 2**(-1/5) = 0.4548273."""
    env = make_env(delta_max=1.0, b_rec=b_rec)
    round1_all_post_a(env)
    W = play_round(env, {A0: [post("a")], A1: [post("a")], A2: [NOT]}, {A0: {4: +1}, A1: {3: +1}})
    w2 = sig(0.5) - 0.1  # 0.5224593
    assert_only(W, {(0, 1): w2, (1, 0): w2})
    W = play_round(env, {A0: [post("a")], A1: [post("a")], A2: [NOT]}, {A0: {6: +1}})
    lh01 = b_rec * (1 - b_rec) + (1 - b_rec) * 1
    lh10 = b_rec * (1 - b_rec)
    s_rec = 1 - abs(lh01 - lh10) / (lh01 + lh10 + EPS)
    e3 = sig(-2 + 2 * 1 + 0.5 * s_rec)
    assert W[0, 1] == pytest.approx(w2 + (1 - w2) * (e3 - 0.1), **TOL)
    assert W[0, 1] == pytest.approx(w01_r3, abs=1e-6)
    assert W[1, 0] == pytest.approx(w2 * DECAY, **TOL)
    assert W[1, 0] == pytest.approx(0.4548273, abs=1e-6)
    assert_only(W, {(0, 1): W[0, 1], (1, 0): W[1, 0]})


# --------------------------------------------------------------------------- S_aff
@pytest.mark.parametrize(
    "a0_vote, expected",
    [
        # like: S_appr 1, S_aff 0 (non-zero vote), Lh(0->1) = 0.5, Lh(1->0) = 0 -> S_rec = 1 - 0.5/0.500001 ~ 2e-6
        #   e = sigmoid(-2 + 2 + 0.5*2e-6) = 0.5000003 -> W = 0.4000003  (0.7807971 if S_aff counted)
        (+1, 0.4000003),
        # explicit 0 vote: not a non-zero vote -> S_aff = +1; S_appr = 0/max(1,0) = 0; S_rec = 1
        #   e = sigmoid(-2 + 0.5 + 2) = sigmoid(0.5) = 0.6224593 -> W = 0.5224593
        (0, 0.5224593),
        # dislike: S_appr -1, S_aff 0, S_rec 1 -> e = sigmoid(-2 - 2 + 0.5) = 0.0293 < xi -> W = 0
        (-1, 0.0),
    ],
)
def test_s_aff_only_without_nonzero_vote(a0_vote, expected, make_env, round1_all_post_a, play_round, post,
                                         dm, NOT, A0, A1, A2):
    """delta_max = 1.  r2: agent_0 DM agent_1 topic a supportive (id 3, s = +1); agent_1 POST a (id 4);
    agent_0 votes a0_vote on 4."""
    env = make_env(delta_max=1.0)
    round1_all_post_a(env)
    W = play_round(env, {A0: [dm(A1, "a", "supportive")], A1: [post("a")], A2: [NOT]}, {A0: {4: a0_vote}})
    assert W[0, 1] == pytest.approx(expected, abs=1e-6)
    assert_only(W, {(0, 1): W[0, 1]})


@pytest.mark.parametrize(
    "tones, expected",
    [
        # supportive + neutral: S_aff = (1 + 0)/2 = 0.5 -> e = sigmoid(-2 + 0.5 + 1) = sigmoid(-0.5) = 0.3775407
        #   -> W = 0.2775407
        (("supportive", "neutral"), 0.2775407),
        # supportive + critical: S_aff = (1 - 1)/2 = 0 -> e = sigmoid(-1.5) -> W = 0.0824255
        (("supportive", "critical"), 0.0824255),
    ],
)
def test_s_aff_is_mean_sentiment_of_dms(tones, expected, make_env, round1_all_post_a, play_round, dm, NOT,
                                        A0, A1, A2):
    """n_actions = 2, delta_max = 1.  r1: everybody POSTs a twice (ids 0-5).
    r2: agent_0 sends two DMs (topic a) to agent_1 with the given tones; no votes."""
    env = make_env(n_actions=2, delta_max=1.0)
    round1_all_post_a(env, n_actions=2)
    W = play_round(
        env,
        {A0: [dm(A1, "a", tones[0]), dm(A1, "a", tones[1])], A1: [NOT, NOT], A2: [NOT, NOT]},
    )
    assert_only(W, {(0, 1): expected})


# --------------------------------------------------------------------------- S_nov
def test_s_nov_new_topic_mention(make_env, round1_all_post_a, play_round, post, NOT, A0, A1, A2):
    """delta_max = 1.  r2: agent_0 POST topic b mentioning agent_1 (id 3); agent_2 POST topic a
    mentioning agent_1 (id 4).  agent_1 has seen only topic a before r2 (its own r1 post; its r1 feed
    was empty and every r1 item was topic a).
    agent_0->agent_1: S_nov 1 -> e = sigmoid(-2 + 1 + 0.5) = 0.3775407 -> W[0,1] = 0.2775407
    agent_2->agent_1: S_nov 0 -> e = sigmoid(-1.5)              -> W[2,1] = 0.0824255"""
    env = make_env(delta_max=1.0)
    round1_all_post_a(env)
    W = play_round(env, {A0: [post("b", mentions=[A1])], A1: [NOT], A2: [post("a", mentions=[A1])]})
    assert_only(W, {(0, 1): sig(-0.5) - 0.1, (2, 1): W_NEUTRAL})
    assert W[0, 1] == pytest.approx(0.2775407, abs=1e-7)


def test_s_nov_new_topic_capped_with_default_delta_max(make_env, round1_all_post_a, play_round, post, NOT,
                                                       A0, A1, A2):
    """Same as above with default delta_max: 0.2775407 is capped to 0.25, W[2,1] = 0.0824255."""
    env = make_env()
    round1_all_post_a(env)
    W = play_round(env, {A0: [post("b", mentions=[A1])], A1: [NOT], A2: [post("a", mentions=[A1])]})
    assert_only(W, {(0, 1): 0.25, (2, 1): W_NEUTRAL})


def test_s_nov_topic_seen_in_earlier_feed_is_not_new(make_env, play_round, post, NOT, A0, A1, A2, AGENTS):
    """delta_max = 1.
    r1: agent_0 POST a (id 0), agent_1 POST a (id 1), agent_2 POST b (id 2); no votes.
    r2: everybody NOT; agent_1's r2 feed is [2 (b), 0 (a)] so agent_1 has seen b before r3.
    r3: agent_0 POST b mentioning agent_1 (id 3) -> S_nov 0 -> W[0,1] = 0.0824255
        agent_2 POST c mentioning agent_1 (id 4)  -> 'c' never seen by agent_1 -> S_nov 1
        -> W[2,1] = sigmoid(-0.5) - 0.1 = 0.2775407"""
    env = make_env(delta_max=1.0)
    W = play_round(env, {A0: [post("a")], A1: [post("a")], A2: [post("b")]})
    assert_only(W, {})
    W = play_round(env, {ag: [NOT] for ag in AGENTS})
    assert_only(W, {})
    W = play_round(env, {A0: [post("b", mentions=[A1])], A1: [NOT], A2: [post("c", mentions=[A1])]})
    assert_only(W, {(0, 1): W_NEUTRAL, (2, 1): sig(-0.5) - 0.1})


# --------------------------------------------------------------------------- positive round, diagonal
def test_plainly_positive_rounds_strengthen_tie_both_ways(make_env, round1_all_post_a, play_round, post, dm,
                                                          NOT, A0, A1, A2):
    """n_actions = 2, defaults.  r1: everybody POSTs a twice (ids 0-5).
    r2: agent_0 POST a (6) + DM agent_1 supportive (7); agent_1 POST a (8) + DM agent_0 supportive (9);
        agent_0 likes 8, agent_1 likes 6.
        each direction: S_appr 1, Lh = 0.5 both -> S_rec 1, S_aff 0 (voted), S_nov 0
        e = sigmoid(0.5) = 0.6224593 -> min(0.25, 0.5224593) = 0.25 -> W[0,1] = W[1,0] = 0.25
    r3: agent_0 POST a (10) + reply to DM 9 (11); agent_1 POST a (12) + reply to DM 7 (13); mutual likes.
        Lh = 0.75 both -> S_rec 1, same e -> min(0.25, 0.75*0.5224593 = 0.3918) = 0.25 -> 0.5 each way.
    agent_2 is never involved -> its row and column stay 0."""
    env = make_env(n_actions=2)
    round1_all_post_a(env, n_actions=2)
    W2 = play_round(
        env,
        {
            A0: [post("a"), dm(A1, "a", "supportive")],
            A1: [post("a"), dm(A0, "a", "supportive")],
            A2: [NOT, NOT],
        },
        {A0: {8: +1}, A1: {6: +1}},
    )
    assert_only(W2, {(0, 1): 0.25, (1, 0): 0.25})
    W3 = play_round(
        env,
        {
            A0: [post("a"), dm(A1, "a", "supportive", reply_to=9)],
            A1: [post("a"), dm(A0, "a", "supportive", reply_to=7)],
            A2: [NOT, NOT],
        },
        {A0: {12: +1}, A1: {10: +1}},
    )
    assert_only(W3, {(0, 1): 0.5, (1, 0): 0.5})
    assert W3[0, 1] > W2[0, 1] > 0.0
    assert W3[1, 0] > W2[1, 0] > 0.0


def test_self_mention_keeps_diagonal_zero(make_env, round1_all_post_a, play_round, post, A0, A1):
    """r2: agent_0 POST a mentioning agent_0 (ignored) and agent_1 -> W[0,0] = 0, W[0,1] = 0.0824255."""
    env = make_env()
    round1_all_post_a(env)
    W = play_round(env, {A0: [post("a", mentions=[A0, A1])]})
    assert W[0, 0] == 0.0
    assert_only(W, {(0, 1): W_NEUTRAL})
