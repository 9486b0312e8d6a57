"""recagent's recommender experiments with scripted users (socialgym.experiments.studies.recagent)."""

import json
import subprocess
import sys

import numpy as np
import pytest
from capabilities import need_module

from socialgym.baselines.topic_users import TopicUsers
from socialgym.experiments.studies.recagent import regular_friends
from socialgym.platform.population import favourite_topics
from socialgym.ties import different_interest_ties

torch = need_module("torch")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("recagent")
    subprocess.run([sys.executable, "-m", "socialgym.cli", "study", "recagent", "--out", str(out), "--quick"],
                   check=True, capture_output=True, timeout=240)
    return json.loads((out / "results.json").read_text()), out


@pytest.mark.slow
def test_summary_structure(quick):
    summary, out = quick
    assert summary["study"] == "recagent" and summary["population"] == "scripted users"
    assert summary["command"] == "socialgym study recagent --out DIR"
    assert isinstance(summary["wall_seconds"], float)
    design = summary["design"]
    for key, kind in (("agents", int), ("rounds", int), ("runs", int), ("items_per_list", int),
                      ("intervene_from", int)):
        assert isinstance(design[key], kind), key
    assert design["recommender"] == "mf" and design["runs"] == 2
    measures = summary["measures"]
    expected = {"entropy_peak": {"none"}, "entropy_drop_from_peak": {"none"},
                "entropy_after": {"none", "replace_1", "replace_3", "replace_5", "soc", "rec", "both", "friends_1",
                                  "friends_3", "friends_5", "every_1", "every_5", "every_10"},
                "conformity": {"friends_1", "friends_3", "friends_5"}}
    for name, conditions in expected.items():
        assert set(measures[name]["per_run"]) == conditions, name
    assert {"replace_1", "replace_5", "every_10"} <= set(measures["satisfaction_after"]["per_run"])
    for name, m in measures.items():
        assert isinstance(m["description"], str) and "\n" not in m["description"]
        for values in m["per_run"].values():
            assert len(values) == design["runs"] and all(isinstance(v, float) and np.isfinite(v) for v in values)
    assert all(isinstance(n, str) and "\n" not in n for n in summary["notes"]) and summary["notes"]
    assert (out / "curves.json").is_file()
    # one run directory per condition and replicate: 10 conditions x 2 replicates
    assert len(list((out / "runs").glob("*/rep_*/summary.json"))) == 20


@pytest.mark.slow
def test_quick_directions(quick):
    m = quick[0]["measures"]
    ent, sat = m["entropy_after"]["per_run"], m["satisfaction_after"]["per_run"]
    for k in range(2):                                 # same seed = same users, same first rounds
        assert ent["replace_5"][k] > ent["none"][k]
        assert ent["replace_5"][k] > ent["replace_1"][k]
        assert sat["replace_5"][k] < sat["none"][k]   # random items are liked less
    assert ent["rec"] == ent["replace_1"] == ent["every_1"] and ent["soc"] == ent["friends_1"]
    conf = m["conformity"]["per_run"]
    assert np.mean(conf["friends_5"]) > np.mean(conf["friends_1"])
    assert 0 <= m["entropy_drop_from_peak"]["per_run"]["none"][0] < 1


def test_multi_interest_preferences():
    pref = TopicUsers.make_preferences(40, 8, rng=3, interests_per_agent=3, concentration=0.8, interest_decay=1.0)
    np.testing.assert_allclose(pref.sum(axis=1), 1)
    top = np.sort(pref, axis=1)[:, ::-1]
    np.testing.assert_allclose(top[:, :3], 0.8 / 3)          # three equal favourites
    np.testing.assert_allclose(top[:, 3:], 0.2 / 5)          # the rest shares 1 - concentration
    # the default keeps halving weights and the same favourites for the same rng
    halving = TopicUsers.make_preferences(40, 8, rng=3, interests_per_agent=3, concentration=0.8)
    assert ((halving > 0.2 / 5 + 1e-9) == (pref > 0.2 / 5 + 1e-9)).all()
    np.testing.assert_allclose(np.sort(halving, axis=1)[:, -1], 0.8 * 4 / 7)
    with pytest.raises(ValueError, match="interest_decay"):
        TopicUsers.make_preferences(4, 4, interest_decay=0)


def test_friends_and_influence():
    pref = TopicUsers.make_preferences(30, 8, rng=0, interests_per_agent=3, interest_decay=1.0)
    fav = pref > pref.min(axis=1, keepdims=True) + 1e-12
    assert (favourite_topics(pref, 30) == fav).all() and (fav.sum(axis=1) == 3).all()   # all three equal favourites
    src, dst = different_interest_ties(favourite_topics(pref, 30), 2, np.random.default_rng(0))
    assert not (fav[src] & fav[dst]).any()                   # friends share no favourite
    assert set(zip(src.tolist(), dst.tolist())) == set(zip(dst.tolist(), src.tolist()))
    assert (np.bincount(src, minlength=30) >= 2).all()
    users = TopicUsers(pref, seed=0)
    before = users.preferences.copy()
    users.add_friends(src, dst, 0.25)
    after = users.preferences
    np.testing.assert_allclose(after.sum(axis=1), 1)
    a, b = int(src[0]), int(dst[0])
    friend_top = np.argmax(before[b])
    assert after[a, friend_top] > before[a, friend_top]
    assert (users.main_interest == np.argmax(before, axis=1)).all()


def test_conformity_rule():
    adj = regular_friends(10, 3, np.random.default_rng(0))
    assert (adj.sum(axis=1) == 3).all() and (adj == adj.T).all() and not adj.diagonal().any()
    x = np.array([2.0, 9.0] + [5.0] * 8)
    new, scores = TopicUsers.conform(x, adj, np.random.default_rng(1), weight=0.3, talk_prob=1.0)
    heard = adj @ TopicUsers.rating_scores(x)
    np.testing.assert_allclose(new, (x + 0.3 * heard) / (1 + 0.3 * 3))
    unchanged, _ = TopicUsers.conform(x, adj, np.random.default_rng(1), talk_prob=0.0)
    np.testing.assert_array_equal(unchanged, x)
    assert scores.dtype.kind == "i" and scores.min() >= 1 and scores.max() <= 10
