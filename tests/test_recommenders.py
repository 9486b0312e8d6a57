"""Recommenders and re-ranking interventions (issue 3): validity, determinism, what each does."""

from __future__ import annotations

import numpy as np
import pytest
from capabilities import need_module
import scipy.sparse as sp

import socialgym
from socialgym.baselines import RandomPolicy, TopicUsers
from socialgym.platform.actions import POST, RoundBatch
from socialgym.platform.content import ContentStore
from socialgym.recommenders import (
    REGISTRY, FeedRequest, Hybrid, Popularity, RandomReplacement, Social, StancePenalty,
    TailQuotaTransfer, TopicAffinity, make_recommender,
)
from socialgym.ties import different_interest_ties

torch = need_module("torch")
from socialgym.recommenders.mf import MatrixFactorization  # noqa: E402

NAMES = sorted(REGISTRY)
HYBRID_KW = {"components": {"mf": 0.5, "popularity": 0.3, "social": 0.2}}


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory):
    """A (randomly initialised) trained-ranker file for the ``learned`` recommender."""
    need_module("torch")
    from socialgym.recommenders.learned import PlatformPolicy
    path = tmp_path_factory.mktemp("learned") / "policy.pt"
    PlatformPolicy(hidden=8, seed=0).save(path, {})
    return path


def required_kwargs(name: str, n_agents: int, policy_file) -> dict:
    """The keywords a registered name cannot be built without."""
    return {"hybrid": HYBRID_KW, "bridging": {"stances": [i % 2 for i in range(n_agents)]},
            "learned": {"path": str(policy_file)}}.get(name, {})


def _store(authors, topics, rounds, likes=None) -> ContentStore:
    c = ContentStore()
    authors, topics, rounds = map(np.asarray, (authors, topics, rounds))
    for r in np.unique(rounds):
        sel = rounds == r
        m = int(sel.sum())
        b = RoundBatch(n_agents=int(authors.max()) + 1, n_actions=1, round=int(r),
                       sender=authors[sel].astype(np.int32), kind=np.full(m, POST, np.int8),
                       recipient=np.full(m, -1, np.int32), target_id=np.full(m, -1, np.int64),
                       topic=topics[sel].astype(np.int32), sentiment=np.zeros(m))
        c.append_batch(b, [None] * m)
    if likes is not None:
        items = np.repeat(np.arange(len(likes)), np.maximum(likes, 0))
        c.apply_votes(items, np.ones(len(items), np.int8))
    return c


def _request(content, viewers, k, rnd, W=None, phase="act"):
    n = int(content.column("author").max()) + 1 if W is None else W.shape[0]
    n = max(n, int(np.max(viewers)) + 1)
    W = sp.csr_matrix((n, n)) if W is None else sp.csr_matrix(W)
    return FeedRequest(viewers=np.asarray(viewers), candidates=np.arange(len(content)), k=k,
                       phase=phase, round=rnd, content=content, ties=lambda: W, n_agents=n,
                       tie_lookup=lambda s, d: np.asarray(W[np.asarray(s), np.asarray(d)]).ravel())


# ---------------------------------------------------------------- every recommender, in the env
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rerank", [(), ({"kind": "random_replacement", "n": 2},),
                                    ({"kind": "tail_quota_transfer", "share": 0.5},),
                                    ({"kind": "stance_penalty", "stances": [i % 2 for i in range(12)],
                                      "strength": 0.5},)])
def test_valid_lists_in_env_and_deterministic(name, rerank, policy_file):
    """The env's own validation (specification §5: pool only, never own, <= k, no repeats) raises on any
    breach, so a clean episode is the check; the second run checks determinism."""
    needed = required_kwargs(name, 12, policy_file)
    kw = {"recommender_kwargs": needed} if needed else {}

    def run():
        env = socialgym.parallel_env(n_agents=12, n_actions=2, max_rounds=5, feed_size=4,
                                     vote_feed_size=3, recommender=name, rerank=rerank,
                                     obs_format="numeric", seed=5, **kw)
        policy = RandomPolicy(seed=5)
        obs, _ = env.reset(seed=5)
        feeds = []
        while env.agents:
            obs, *_ = env.step(policy.act(obs))
            feeds.append(env._feed.copy())
            assert env._feed.shape[1] == 4
        return feeds

    a, b = run(), run()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any((f >= 0).any() for f in a)


@pytest.mark.parametrize("name", NAMES)
def test_direct_calls_never_own_never_repeat(name, policy_file):
    rng = np.random.default_rng(0)
    n = 6
    authors = np.repeat(np.arange(n), 5)
    content = _store(authors, rng.integers(0, 3, len(authors)), np.tile([1, 1, 2, 2, 2], n),
                     likes=rng.integers(0, 4, len(authors)))
    kw = required_kwargs(name, n, policy_file)
    rec = make_recommender(name, **kw)
    W = sp.random(n, n, density=0.5, random_state=1, format="csr")
    W.setdiag(0)
    out = rec.recommend(_request(content, np.arange(n), 7, 3, W=W), rng)
    assert out.shape[0] == n and out.shape[1] <= 7
    for v in range(n):
        row = out[v][out[v] >= 0]
        assert len(set(row.tolist())) == len(row)
        assert not np.any(content.column("author")[row] == v)
        assert len(row) == 7                         # 25 foreign items available, k = 7


def test_sampled_path_stays_valid_and_uses_the_budget():
    rng = np.random.default_rng(1)
    n = 50
    authors = rng.integers(0, n, 3000)
    content = _store(authors, rng.integers(0, 4, 3000), np.repeat([1, 2, 3], 1000))
    rec = TopicAffinity(max_candidates=40, cell_budget=1000)        # 50 x 3000 cells > budget
    out = rec.recommend(_request(content, np.arange(n), 10, 4), rng)
    assert out.shape == (n, 10) and (out >= 0).all()
    assert not np.any(authors[out] == np.arange(n)[:, None])
    assert all(len(set(r)) == 10 for r in out.tolist())


# ---------------------------------------------------------------- what each recommender ranks by
def test_popularity_ranks_by_decayed_net_likes():
    # items 0..3 by agent 1, round 1 (age 2 at round 3) and round 2 (age 1)
    content = _store([1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 2, 2], likes=[5, 0, 1, 0])
    out = Popularity(half_life=1.0).recommend(_request(content, [0], 4, 3), np.random.default_rng(0))
    # scores (1+net)*2^-(age-1): item0 6*0.5=3, item1 1*0.5=.5, item2 2*1=2, item3 1*1=1
    assert out[0].tolist() == [0, 2, 3, 1]


def test_topic_affinity_follows_engagement_history():
    content = _store([1, 1, 2, 2], [0, 1, 0, 1], [1, 1, 1, 1])
    rec = TopicAffinity(recency_weight=0.0)
    batch = RoundBatch(n_agents=3, n_actions=1, round=1, vote_voter=np.array([0, 0], np.int32),
                       vote_item=np.array([1, 3]), vote_author=np.array([1, 2], np.int32),
                       vote_topic=np.array([1, 1], np.int32), vote_value=np.array([1, 1], np.int8))
    rec.update(content, batch, np.random.default_rng(0))
    out = rec.recommend(_request(content, [0], 2, 2), np.random.default_rng(0))
    assert sorted(out[0].tolist()) == [1, 3]          # both topic-1 items first


def test_social_prefers_tied_authors():
    content = _store([1, 2, 3, 1, 2, 3], [0] * 6, [1] * 6)
    W = np.zeros((4, 4))
    W[0, 3] = 0.9
    W[0, 2] = 0.2
    out = Social(recency_weight=0.0, in_weight=0.0).recommend(_request(content, [0], 3, 2, W=W),
                                                              np.random.default_rng(0))
    assert [int(content.column("author")[i]) for i in out[0]] == [3, 3, 2]


def test_social_candidates_survive_sampling():
    rng = np.random.default_rng(2)
    n = 40
    authors = rng.integers(1, n, 4000)
    content = _store(authors, np.zeros(4000, int), np.repeat([1, 2], 2000))
    W = np.zeros((n, n))
    W[0, 7] = 1.0
    rec = Social(max_candidates=5, cell_budget=100)
    out = rec.recommend(_request(content, [0], 5, 3, W=W), rng)
    assert np.all(content.column("author")[out[0]] == 7)


def test_hybrid_weights_change_the_ranking():
    content = _store([1, 2, 1, 2], [0, 0, 0, 0], [1, 1, 2, 2], likes=[9, 0, 0, 0])
    W = np.zeros((3, 3))
    W[0, 2] = 1.0
    req = _request(content, [0], 1, 3, W=W)
    pop = Hybrid([(Popularity(), 1.0), (Social(), 0.0)]).recommend(req, np.random.default_rng(0))
    soc = Hybrid([(Popularity(), 0.0), (Social(), 1.0)]).recommend(req, np.random.default_rng(0))
    assert pop[0, 0] == 0 and content.column("author")[soc[0, 0]] == 2


# ---------------------------------------------------------------- matrix factorisation
def test_mf_recovers_planted_preferences_on_held_out_items():
    """Agents like items of their planted topic (p=0.8) and others rarely (p=0.05); after five
    rounds of updates MF's top 5 on a new round's items should be mostly the planted topic.
    Random ranking would hit 1/K = 0.2."""
    rng = np.random.default_rng(3)
    n, K, per_round, shown = 40, 5, 120, 15
    planted = np.arange(n) % K
    content = ContentStore()
    rec = MatrixFactorization(dim=8, epochs=20, lr=0.05)
    for rnd in range(1, 7):
        authors = rng.integers(0, n, per_round)
        topics = rng.integers(0, K, per_round)
        b = RoundBatch(n_agents=n, n_actions=3, round=rnd, sender=authors.astype(np.int32),
                       kind=np.full(per_round, POST, np.int8), recipient=np.full(per_round, -1, np.int32),
                       target_id=np.full(per_round, -1, np.int64), topic=topics.astype(np.int32),
                       sentiment=np.zeros(per_round))
        ids = content.append_batch(b, [None] * per_round)
        if rnd == 6:
            break
        vote_feed = np.stack([rng.choice(ids[authors != v], shown, replace=False) for v in range(n)])
        p = np.where(topics[vote_feed - ids[0]] == planted[:, None], 0.8, 0.05)
        like = rng.random(p.shape) < p
        voter, col = np.nonzero(like)
        item = vote_feed[voter, col]
        b.vote_voter, b.vote_item, b.vote_value = voter.astype(np.int32), item, np.ones(len(item), np.int8)
        b.vote_author = content.column("author")[item]
        b.vote_topic = content.column("topic")[item]
        b.feed = np.full((n, 0), -1, np.int64)
        b.vote_feed = vote_feed
        rec.update(content, b, rng)
    held_out = ids                                   # round 6 items: never trained on
    req = FeedRequest(viewers=np.arange(n), candidates=held_out, k=5, phase="vote", round=6,
                      content=content, ties=lambda: sp.csr_matrix((n, n)), n_agents=n)
    out = rec.recommend(req, rng)
    hit = (content.column("topic")[out] == planted[:, None]).mean()
    assert hit >= 0.6, hit


def test_mf_state_round_trip_gives_the_same_ranking():
    env = socialgym.parallel_env(n_agents=10, max_rounds=4, recommender="mf", obs_format="numeric", seed=2)
    policy = RandomPolicy(seed=2)
    obs, _ = env.reset(seed=2)
    for _ in range(4):
        obs, *_ = env.step(policy.act(obs))
    state = env.recommender.state_dict()
    clone = MatrixFactorization()
    clone.load_state_dict(state)
    req = FeedRequest(viewers=np.arange(10), candidates=np.flatnonzero(env.content.public_mask()), k=5,
                      phase="act", round=env.round, content=env.content, ties=env.tie_matrix, n_agents=10)
    np.testing.assert_array_equal(env.recommender.recommend(req, np.random.default_rng(0)),
                                  clone.recommend(req, np.random.default_rng(0)))


# ---------------------------------------------------------------- interventions, counted
def test_random_replacement_replaces_exactly_n_lowest_slots():
    n = 5
    authors = np.repeat(np.arange(n), 8)
    content = _store(authors, np.zeros(len(authors), int), np.ones(len(authors), int))
    base = make_recommender("chronological")
    req = _request(content, np.arange(n), 6, 2)
    plain = base.recommend(req, np.random.default_rng(0))
    rec = RandomReplacement(make_recommender("chronological"), n=2)
    out = rec.recommend(req, np.random.default_rng(0))
    np.testing.assert_array_equal(out[:, :4], plain[:, :4])     # the top 4 kept
    assert rec.last == {"replaced": 10, "rounds_applied": 1}  # 2 slots x 5 viewers
    for v in range(n):
        assert len(set(out[v].tolist())) == 6 and not np.any(authors[out[v]] == v)


def test_random_replacement_frequency():
    content = _store(np.repeat(np.arange(3), 4), np.zeros(12, int), np.ones(12, int))
    rec = RandomReplacement(make_recommender("chronological"), n=1, every=3, start_round=2)
    applied = []
    for rnd in range(2, 11):
        rec.recommend(_request(content, np.arange(3), 3, rnd), np.random.default_rng(rnd))
        applied.append(rec.last["rounds_applied"])
    assert applied == [1, 0, 0, 1, 0, 0, 1, 0, 0]        # rounds 2, 5, 8
    assert rec.counts["replaced"] == 9                     # 3 rounds x 3 viewers x 1


def test_stance_penalty_demotes_cross_cutting_items():
    # viewer 0 (stance A); items newest first: authors 1(B) 2(A) 3(B) 4(A)
    content = _store([4, 3, 2, 1], [0] * 4, [1] * 4)
    stances = ["A", "B", "A", "B", "A"]
    req = _request(content, [0], 2, 2)
    plain = make_recommender("chronological").recommend(req, np.random.default_rng(0))
    assert content.column("author")[plain[0]].tolist() == [1, 2]
    rec = StancePenalty(make_recommender("chronological"), stances, strength=0.5, overfetch=2)
    out = rec.recommend(req, np.random.default_rng(0))
    # rank scores over the 4-long list: 1, .75, .5, .25; minus .5 for B authors -> .5, .75, 0, .25
    assert content.column("author")[out[0]].tolist() == [2, 1]
    rec_strong = StancePenalty(make_recommender("chronological"), stances, strength=1.0, overfetch=2)
    out = rec_strong.recommend(req, np.random.default_rng(0))
    assert content.column("author")[out[0]].tolist() == [2, 4]
    assert rec_strong.last == {"demoted": 1, "cross_cutting_shown": 0}
    assert StancePenalty(make_recommender("chronological"), stances, strength=0.0).recommend(req, None).tolist() == plain.tolist()


def test_tail_quota_transfer_moves_head_slots_to_least_seen_topics():
    # 10 items of topic 0 (newest), then 2 of topic 1, 2 of topic 2; all by agent 1
    topics = [2, 2, 1, 1] + [0] * 10
    content = _store([1] * 14, topics, [1] * 14)
    rec = TailQuotaTransfer(make_recommender("chronological"), share=0.3, n_head=1, n_tail=2, overfetch=1)
    out = rec.recommend(_request(content, [0], 10, 2), np.random.default_rng(0))
    # top 10 = ten topic-0 items (quota 10); 30% = 3 slots go to tails {1, 2}: 1, 2, 1
    shown = content.column("topic")[out[0]]
    assert (shown == 0).sum() == 7 and (shown == 1).sum() == 2 and (shown == 2).sum() == 1
    assert rec.last == {"transferred": 3}


def test_interventions_compose_and_are_counted_in_infos():
    env = socialgym.parallel_env(
        n_agents=8, max_rounds=3, recommender="popularity", obs_format="numeric", seed=1,
        rerank=[{"kind": "stance_penalty", "stances": [0, 1] * 4}, {"kind": "random_replacement", "n": 1}])
    policy = RandomPolicy(seed=1)
    obs, _ = env.reset(seed=1)
    while env.agents:
        obs, _, _, _, infos = env.step(policy.act(obs))
    stats = infos["agent_0"]["interventions"]
    assert set(stats) == {"StancePenalty", "RandomReplacement"}
    assert stats["RandomReplacement"]["total"]["replaced"] == 8 * 2   # feeds of rounds 2, 3


def test_unknown_names_and_parameters_are_clear_errors():
    with pytest.raises(ValueError, match="unknown recommender 'nope'"):
        socialgym.parallel_env(recommender="nope")
    with pytest.raises(TypeError, match="bad parameters for recommender 'popularity'"):
        socialgym.parallel_env(recommender="popularity", recommender_kwargs={"halflife": 2})
    with pytest.raises(ValueError, match="unknown rerank kind"):
        socialgym.parallel_env(rerank=[{"kind": "shuffle"}])
    with pytest.raises(TypeError, match="rerank step must be a dict"):
        socialgym.parallel_env(rerank=[42])
    with pytest.raises(ValueError, match="soc_strategy needs agent_interests"):
        socialgym.parallel_env(soc_strategy=1)


def test_wrappers_take_built_recommenders_and_names_resolve_in_the_registry():
    with pytest.raises(TypeError, match=r"wraps a built recommender.*make_recommender\('chronological'\)"):
        RandomReplacement("chronological", n=1)
    with pytest.raises(TypeError, match="Hybrid components must be scored recommenders"):
        Hybrid({"popularity": 1.0})
    hybrid = make_recommender("hybrid", components={"popularity": 0.5, "social": 0.5})
    assert [type(rec) for rec, _ in hybrid.components] == [Popularity, Social]
    wrapped = RandomReplacement(lambda request, rng: np.zeros((len(request.viewers), 0), np.int64), n=1)
    assert wrapped.base.name == "<lambda>"                     # a plain function is wrapped


def test_custom_recommender_in_a_few_lines():
    from socialgym.recommenders import ScoredRecommender

    class OldestFirst(ScoredRecommender):
        def score(self, request, viewers, cand):
            return -cand.astype(float)

    env = socialgym.parallel_env(n_agents=5, max_rounds=3, recommender=OldestFirst(), seed=0)
    obs, _ = env.reset(seed=0)
    policy = RandomPolicy(seed=0)
    while env.agents:
        obs, *_ = env.step(policy.act(obs))
        ids = [item["id"] for item in obs["agent_0"]["feed"]] if env.agents else []
        assert ids == sorted(ids)


# ---------------------------------------------------------------- Soc-Strategy
def test_soc_strategy_ties_join_different_interests():
    labels = np.array([0] * 10 + [1] * 10 + [2] * 10)
    src, dst = different_interest_ties(labels, 2, np.random.default_rng(0))
    assert np.all(labels[src] != labels[dst])
    out_deg = np.bincount(src, minlength=30)
    assert out_deg.min() >= 2                       # own 2 + reverse ties of others
    keys = set(zip(src.tolist(), dst.tolist()))
    assert all((d, s) in keys for s, d in keys)     # mutual

    interests = np.eye(3)[labels]
    env = socialgym.parallel_env(n_agents=30, soc_strategy=2, agent_interests=interests,
                                 soc_strategy_weight=0.4, seed=3)
    env.reset(seed=3)
    W = env.tie_matrix().tocoo()
    assert W.nnz >= 60 and np.allclose(W.data, 0.4)
    assert np.all(labels[W.row] != labels[W.col])


def test_exposure_metrics_from_the_env():
    prefs = TopicUsers.make_preferences(30, 4, rng=0)
    env = socialgym.parallel_env(n_agents=30, max_rounds=4, recommender="topic_affinity",
                                 topics=["a", "b", "c", "d"], obs_format="numeric",
                                 agent_interests=prefs, exposure_window=2, seed=0, exposure_in_infos=True)
    users = TopicUsers.for_env(env, prefs, seed=0)
    obs, _ = env.reset(seed=0)
    while env.agents:
        obs, _, _, _, infos = env.step(users.act(obs))
    m = env.exposure_metrics()
    assert infos["agent_0"]["exposure"] == m
    ent = env.topic_entropy()
    assert ent.shape == (30,) and np.all((ent >= 0) & (ent <= np.log(4) + 1e-12))
    assert m["mean_topic_entropy"] == pytest.approx(float(np.nanmean(ent)))
    assert set(m["cross_cutting_share_by_group"]) <= {"0", "1", "2", "3"}
