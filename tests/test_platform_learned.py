"""A trained platform policy deployed as a recommender (``recommender="learned"``), and the
co-adaptation loop in which users and platform train together."""

from __future__ import annotations

import numpy as np
import pytest
from capabilities import need_module

import socialgym
from socialgym.recommenders import ParamError, make_recommender
from socialgym.recommenders.features import RANKING_FEATURES
from socialgym.recommenders.learned import PlatformPolicy, slate_scores

torch = need_module("torch")
from test_platform_seat import TONES, _seat_world  # noqa: E402


def tone_policy(path):
    """A scorer whose logit rises with the item's tone and ignores every other feature."""
    policy = PlatformPolicy(hidden=4)
    first, second, last = policy.scorer[0], policy.scorer[2], policy.scorer[4]
    with torch.no_grad():
        for layer in (first, second, last):
            layer.weight.zero_()
            layer.bias.zero_()
        first.weight[0, RANKING_FEATURES.index("tone")] = 1.0
        second.weight[0, 0] = 1.0
        last.weight[0, 0] = 1.0          # logit = tanh(tanh(tone)): increasing in tone
    policy.save(path, {"objective": "test"})
    return path


def test_learned_ranker_shows_the_highest_logits(tmp_path):
    path = tone_policy(tmp_path / "policy.pt")
    c, req = _seat_world()
    ranker = make_recommender("learned", path=str(path), candidates=10, window=3)
    feed = ranker.recommend(req, np.random.default_rng(0))
    # items 0..5 (all by agent 3) have tones TONES = .2, -.5, .9, -1, .4, .1: the four best are 2, 4, 0, 5
    assert TONES == [0.2, -0.5, 0.9, -1.0, 0.4, 0.1]
    assert feed.tolist() == [[2, 4, 0, 5]] * 3 + [[-1] * 4]


def test_learned_ranker_by_name_in_a_feed_env(tmp_path):
    path = tone_policy(tmp_path / "policy.pt")
    env = socialgym.parallel_env(n_agents=6, max_rounds=3, recommender="learned",
                                 recommender_kwargs={"path": str(path)})
    obs, _ = env.reset(seed=0)
    for _ in range(4):
        obs, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
    sentiment = env.content.column("sentiment")
    feeds = env.act_feeds
    for row in feeds:
        shown = [sentiment[i] for i in row if i >= 0]
        assert shown == sorted(shown, reverse=True)


def test_learned_ranker_refuses_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no trained platform policy"):
        make_recommender("learned", path=str(tmp_path / "none.pt"))
    with pytest.raises(ParamError, match="path"):
        make_recommender("learned", path=3)


def test_slate_scores_show_the_slate_in_order():
    scores = slate_scores(np.array([[2, 0, -1], [1, 2, 0]]), (2, 4))
    assert scores[0].tolist() == pytest.approx([2 / 3, -1, 1, -1])
    assert scores[1].tolist() == pytest.approx([1 / 3, 1, 2 / 3, -1])


def test_plackett_luce_logprob_by_hand():
    logits = torch.log(torch.tensor([[[1.0, 2.0, 3.0, 4.0]]]))          # weights 1..4
    slate = torch.tensor([[[3, 0, -1]]])
    # P = 4/10 * 1/6 (item 3 of weight 4 out of 10, then item 0 of weight 1 out of 1+2+3)
    got = PlatformPolicy.slate_logprob(logits, slate)
    assert float(got) == pytest.approx(np.log(4 / 10 * 1 / 6))


def test_coadaptation_trains_both(tmp_path):
    from socialgym.experiments.studies.coadaptation import Args, run
    result = run(Args(iterations=2, episodes=1, out=str(tmp_path)), log=None)
    curves = result["curves"]
    assert [c["iteration"] for c in curves] == [1, 2]
    assert all(np.isfinite(c["users_return"]) and np.isfinite(c["platform_return"]) for c in curves)
    assert (tmp_path / "curves.json").is_file()
