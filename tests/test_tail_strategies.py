"""agentsociety2 §7.4's three quota re-rankers: Tail QuotaTransfer, Efficiency Boost,
UnderServedBoost. Every expected list below is worked out by hand in the comments."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import socialgym
from socialgym.baselines import TopicUsers
from socialgym.platform.actions import COM, POST, RoundBatch
from socialgym.platform.content import ContentStore
from socialgym.recommenders import FeedRequest, ParamError, TailQuotaTransfer, make_recommender
from socialgym.recommenders.interventions import EfficiencyBoost, UnderServedBoost
from socialgym.recommenders.registry import RERANKERS, apply_reranking, check_reranking


def _store(authors, topics) -> ContentStore:
    c = ContentStore()
    m = len(authors)
    c.append_batch(RoundBatch(n_agents=max(authors) + 1, n_actions=1, round=1,
                              sender=np.asarray(authors, np.int32), kind=np.full(m, POST, np.int8),
                              recipient=np.full(m, -1, np.int32), target_id=np.full(m, -1, np.int64),
                              topic=np.asarray(topics, np.int32), sentiment=np.zeros(m)), [None] * m)
    return c


def _fixed(ranking):
    """A base recommender that ranks every viewer's items as ``ranking`` (truncated to k)."""
    def rank(request, rng):
        out = np.full((len(request.viewers), request.k), -1, np.int64)
        head = ranking[:request.k]
        out[:, :len(head)] = head
        return out
    return rank


def _request(content, k, n_agents=2, viewers=(0,)):
    W = sp.csr_matrix((n_agents, n_agents))
    return FeedRequest(viewers=np.asarray(viewers), candidates=np.arange(len(content)), k=k, phase="act",
                       round=2, content=content, ties=lambda: W, n_agents=n_agents)


# items 0-5 topic 0, 6-8 topic 1, 9-10 topic 2, 11-12 topic 3; all by agent 1 unless stated
TOPICS_1 = [0] * 6 + [1] * 3 + [2] * 2 + [3] * 2
RANKING_1 = [0, 1, 2, 3, 4, 6, 7, 9, 5, 8, 10, 11, 12]


def test_tail_quota_transfer_by_hand():
    content = _store([1] * 13, TOPICS_1)
    rec = TailQuotaTransfer(_fixed(RANKING_1), share=0.3, n_head=2, n_tail=2, overfetch=2)
    out = rec.recommend(_request(content, 8), np.random.default_rng(0))
    # top 8 topics 0,0,0,0,0,1,1,2 -> quotas {0: 5, 1: 2, 2: 1}; head {0, 1}
    # 0.3 * (5 + 2) = 2.1 -> 2 slots; floors 1 (1.5) and 0 (0.6); the remainder 0.6 > 0.5 gives
    # topic 1 the second: topic 0 gives 1 (item 4), topic 1 gives 1 (item 7)
    # targets (fewest slots first): topic 3 (0 slots), topic 2 (1 slot): one slot each
    # -> topic 2 keeps 9 and takes 10, topic 3 takes 11; base order
    assert out.tolist() == [[0, 1, 2, 3, 6, 9, 10, 11]]
    assert rec.last == {"transferred": 2}


def test_a_target_without_items_gives_its_slot_back():
    content = _store([1] * 11 + [0, 0], TOPICS_1)          # topic 3 is only the viewer's own
    rec = TailQuotaTransfer(_fixed(RANKING_1[:11]), share=0.3, n_head=2, n_tail=2, overfetch=2)
    out = rec.recommend(_request(content, 8), np.random.default_rng(0))
    # as above, but topic 3 has nothing to show: its slot goes to the base's next item (4)
    assert out.tolist() == [[0, 1, 2, 3, 4, 6, 9, 10]]
    assert rec.last == {"transferred": 1}


def test_no_head_share_or_untargeted_viewers_keep_the_base_list():
    content = _store([1] * 13, TOPICS_1)
    base = _fixed(RANKING_1)
    for rec in (TailQuotaTransfer(base, share=0.0, n_head=2, n_tail=2),
                TailQuotaTransfer(base, n_head=2, n_tail=2, users=[True, False])):
        out = rec.recommend(_request(content, 8, viewers=(1,)), np.random.default_rng(0))
        assert out.tolist() == [RANKING_1[:8]]
        assert rec.last == {"transferred": 0}


# items 0-3 topic 0; topic 1: 4, 5 (5 the viewer's own); topic 2: 6, 7; topic 3: 8, 9 (9 own); topic 4: 10
AUTHORS_2 = [1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1]
TOPICS_2 = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4]
STATE_2 = {"base": {}, "counts": {},
           "seen": [[10, 4, 4, 2, 3], [0, 0, 8, 0, 0]], "watched": [[5, 1, 3, 0, 0], [0, 0, 0, 0, 0]]}


@pytest.mark.parametrize("cls, expected", [
    # bottom topics: no slots anywhere, then fewest shown: topic 3 (2 shown) -> newest not own: 8
    (TailQuotaTransfer, 8),
    # rho = (w + W/E) / (e + 1), W/E = 9/23 = .391: t1 .278, t2 .678, t3 .130, t4 .098 -> topic 2
    # -> newest item 7
    (EfficiencyBoost, 7),
    # volume over both viewers [10, 4, 12, 2, 3], max 12: 1 - v/max = .667, 0, .833, .75 for t1..t4;
    # potential t1 .186, t2 0, t3 .109, t4 .073 -> topic 1 -> newest not own: 4
    (UnderServedBoost, 4),
])
def test_each_strategy_picks_its_own_target(cls, expected):
    content = _store(AUTHORS_2, TOPICS_2)
    rec = cls(_fixed([0, 1, 2, 3]), share=0.25, n_head=1, n_tail=1, overfetch=1)
    rec.load_state_dict(STATE_2)
    out = rec.recommend(_request(content, 4), np.random.default_rng(0))
    # the head topic 0 (4 slots) gives up round(0.25 * 4) = 1: its lowest item 3
    assert out.tolist() == [[0, 1, 2, expected]]
    assert rec.last == {"transferred": 1}


def test_round_robin_over_several_targets():
    content = _store(AUTHORS_2, TOPICS_2)
    rec = EfficiencyBoost(_fixed([0, 1, 2, 3]), share=0.75, n_head=1, n_tail=2, overfetch=1)
    rec.load_state_dict(STATE_2)
    out = rec.recommend(_request(content, 4), np.random.default_rng(0))
    # 3 slots move; targets by rho: topic 2 (.678), topic 1 (.278) -> 2 and 1 slots:
    # topic 2's items 7, 6 (newest first), topic 1's 4; pool-only items follow by topic id
    assert out.tolist() == [[0, 4, 7, 6]]
    assert rec.last == {"transferred": 3}


def test_update_counts_shown_and_commented_topics():
    content = _store([1, 1, 0], [0, 2, 1])
    rec = EfficiencyBoost(make_recommender("chronological"))
    batch = RoundBatch(n_agents=2, n_actions=2, round=2, sender=np.array([0, 0, 0, 1], np.int32),
                       kind=np.full(4, COM, np.int8), recipient=np.array([1, 1, 1, 0], np.int32),
                       target_id=np.array([1, 1, 0, 2], np.int64), topic=np.array([2, 2, 0, 1], np.int32),
                       sentiment=np.zeros(4), feed=np.array([[1, 0], [2, -1]]),
                       feed_topics=np.array([[2, 0], [1, -1]]))
    rec.update(content, batch, np.random.default_rng(0))
    # agent 0 saw topics 2 and 0 and commented on item 1 (twice: counted once) and item 0;
    # agent 1 saw topic 1 and commented on item 2
    assert rec.seen.tolist() == [[1, 0, 1], [0, 1, 0]]
    assert rec.watched.tolist() == [[1, 0, 1], [0, 1, 0]]
    state = rec.state_dict()
    fresh = EfficiencyBoost(make_recommender("chronological"))
    fresh.load_state_dict(state)
    assert fresh.seen.tolist() == rec.seen.tolist() and fresh.watched.tolist() == rec.watched.tolist()
    rec.reset()
    assert rec.seen is None and rec.watched is None


@pytest.mark.parametrize("kind", ["tail_quota_transfer", "efficiency_boost", "underserved_boost"])
@pytest.mark.parametrize("param, value, message", [
    ("share", 1.5, "share must be at most 1"), ("share", -0.1, "share must be a finite number"),
    ("n_head", 0, "n_head must be an integer with n_head >= 1"), ("n_tail", 2.5, "n_tail must be an integer"),
    ("overfetch", 0, "overfetch must be"), ("users", "all", "users must be None or a list"),
    ("users", [True, 2], r"users\[1\] must be a boolean"),
])
def test_bad_parameters_are_clear_errors(kind, param, value, message):
    with pytest.raises(ParamError, match=message):
        RERANKERS[kind].check_params(**{param: value})
    with pytest.raises(ParamError, match=message):
        apply_reranking(make_recommender("chronological"), [{"kind": kind, param: value}])


def test_bad_prior_weight_unknown_keyword_and_user_count():
    with pytest.raises(ParamError, match="prior_weight must be a finite number with prior_weight >= 0"):
        EfficiencyBoost(make_recommender("chronological"), prior_weight=-1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'prior_weight'"):
        TailQuotaTransfer.check_params(prior_weight=1)
    with pytest.raises(ParamError, match="users has 3 flags for n_agents = 4"):
        check_reranking([{"kind": "underserved_boost", "users": [True] * 3}], n_agents=4)
    rec = TailQuotaTransfer(make_recommender("chronological"), users=[True] * 3)
    with pytest.raises(ValueError, match="3 users flags for 2 agents"):
        rec.recommend(_request(_store([1] * 13, TOPICS_1), 8), np.random.default_rng(0))


@pytest.mark.parametrize("kind", ["tail_quota_transfer", "efficiency_boost", "underserved_boost"])
def test_the_strategies_run_in_the_environment(kind):
    """The env validates every list (pool only, not own, no repeats); the strategy moves slots."""
    prefs = TopicUsers.make_preferences(12, 6, rng=0)
    env = socialgym.parallel_env(n_agents=12, max_rounds=5, topics=[f"t{i}" for i in range(6)],
                                 recommender="topic_affinity", rerank=[{"kind": kind, "n_head": 2, "n_tail": 2}],
                                 feed_size=6, obs_format="numeric", agent_interests=prefs, sentiment="tone", seed=0)
    users = TopicUsers.for_env(env, prefs, seed=0)
    obs, _ = env.reset(seed=0)
    while env.agents:
        obs, *_ = env.step(users.act(obs))
    name = type(env.unwrapped.recommender).__name__ if hasattr(env, "unwrapped") else None
    stats = env.intervention_stats()
    assert list(stats) == [name] and stats[name]["total"]["transferred"] > 0
