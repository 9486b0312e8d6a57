"""Recommenders, re-rankers and policies check their own parameters, without being built.

Every registered recommender class, every re-ranker and the four configurable policies have a
classmethod ``check_params(**kwargs)``: a TypeError for an unknown keyword, a ``ParamError`` (a
ValueError naming the parameter) for a bad value. Their constructors apply the same rules, so
``check_params`` rejects exactly what building rejects (a table of cases and a hypothesis
search). ``registry.check_recommender`` / ``check_reranking`` do what ``make_recommender`` /
``apply_reranking`` would reject, building nothing: the MF model's limits are checked without
importing torch.
"""

from __future__ import annotations

import inspect
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socialgym.agents.llm_policy import LLMPolicy
from socialgym.baselines.greedy import GreedyPolicy
from socialgym.baselines.random_policy import RandomPolicy
from socialgym.baselines.topic_users import TopicUsers
from socialgym.recommenders import (
    Hybrid, Popularity, RandomReplacement, Reranker, Social, StancePenalty, TailQuotaTransfer, TopicAffinity,
    make_recommender,
)
from socialgym.recommenders.mf import MatrixFactorization
from socialgym.recommenders.params import PARAM_LIMITS, ParamError, declared_params
from socialgym.recommenders.registry import (
    REGISTRY, RERANKERS, apply_reranking, check_recommender, check_reranking, recommender_class,
)
from socialgym.recommenders.scored import ScoredRecommender
from socialgym.recommenders.simple import Chronological, RandomFeed

NAN, INF = float("nan"), float("inf")


PREFS = np.ones((2, 3))


def _built(cls):
    """A function building ``cls`` from keywords (re-rankers around a chronological base,
    TopicUsers with explicit preferences, LLMPolicy without a client)."""
    if issubclass(cls, Reranker):
        return lambda **kw: cls(Chronological(), **kw)
    if cls is LLMPolicy:
        return lambda **kw: LLMPolicy(None, {}, **kw)
    if cls is TopicUsers:
        return lambda **kw: TopicUsers(PREFS, **kw)
    return cls


def _checked(cls):
    """``cls.check_params`` with the same data as :func:`_built` (TopicUsers' preferences)."""
    if cls is TopicUsers:
        return lambda **kw: TopicUsers.check_params(preferences=PREFS, **kw)
    return cls.check_params


# class, valid keywords, bad (parameter, value) pairs
CASES = [
    (Chronological, {}, []),
    (RandomFeed, {}, []),
    (Popularity, {"half_life": 3, "window": 4, "recency_weight": -0.5, "cell_budget": 10},
     [("half_life", 0), ("half_life", -1), ("half_life", NAN), ("half_life", "2"), ("window", 0),
      ("window", 2.5), ("window", PARAM_LIMITS["window"] + 1), ("recency_half_life", 0), ("max_candidates", 0),
      ("cell_budget", 10**10), ("sample_block", True), ("recency_weight", INF)]),
    (TopicAffinity, {"w_comment": 2.0, "w_dislike": 0, "profile_half_life": 1, "recency_weight": 0.0},
     [("w_like", NAN), ("profile_half_life", 0), ("w_post", None), ("recency_weight", "x")]),
    (Social, {"in_weight": 0.0, "max_social_candidates": 0, "window": None},
     [("in_weight", INF), ("max_social_candidates", -1), ("max_social_candidates", 10**7)]),
    (MatrixFactorization, {"dim": 8, "epochs": 1, "lr": 0.0, "batch_size": 64, "replay_rounds": 2.0},
     [("dim", 0), ("dim", 10**8), ("epochs", 1001), ("lr", -0.1), ("weight_decay", NAN),
      ("batch_size", 1.5), ("replay_rounds", "3"), ("dislike_weight", -1), ("max_pos_weight", INF),
      ("init_scale", -0.1)]),
    (RandomReplacement, {"n": 2, "every": 3, "start_round": 5, "phases": ["act", "vote"]},
     [("n", -1), ("n", 10**9), ("every", 0), ("start_round", 0), ("start_round", 10**6),
      ("phases", "act"), ("phases", ["act", "later"]), ("phases", 5)]),
    (StancePenalty, {"stances": ["a", None, 2, NAN], "strength": 1.5, "overfetch": 2},
     [("strength", -0.1), ("strength", NAN), ("overfetch", 0), ("overfetch", 101), ("stances", "ab"),
      ("stances", [["a"], "b"]), ("stances", 3)]),
    (TailQuotaTransfer, {"share": 1, "n_head": 1, "n_tail": 2, "overfetch": 1},
     [("share", 1.01), ("share", -0.1), ("share", NAN), ("n_head", 0), ("n_tail", 10**4), ("overfetch", 0.5)]),
    (RandomPolicy, {"seed": 3, "mention_prob": 1},
     [("seed", -1), ("seed", 1.5), ("seed", "1"), ("mention_prob", 1.5), ("mention_prob", NAN)]),
    (GreedyPolicy, {"seed": None, "b": 0.0}, [("seed", True), ("b", -0.1), ("b", "half")]),
    (TopicUsers, {"seed": 1, "p_post": 0.5, "base": -1.0, "dislike_prob": 0, "supportive_threshold": 2},
     [("seed", -2), ("p_post", 1.1), ("dislike_prob", NAN), ("base", INF), ("gain", "x"), ("tie_gain", NAN)]),
    (LLMPolicy, {"generation": "split", "schema_ids": "enum", "max_users": 3, "item_chars": 10,
                 "text_chars": 1_000_000, "new_topics": False, "memory": {"recent": 2}, "seed": 5,
                 "plan_tokens": 100, "vote_tokens": None},
     [("generation", "both"), ("generation", 3), ("schema_ids", "loose"), ("max_users", 0), ("max_topics", 2.0),
      ("item_chars", 9), ("text_chars", 1_000_001), ("new_topics", 1), ("memory", {"recent": -1}),
      ("memory", [("recent", 2)]), ("seed", -1), ("plan_tokens", 0), ("text_tokens", 10**7)]),
]
IDS = [c[0].__name__ for c in CASES]


def _outcome(fn, **kwargs):
    """None, TypeError or ValueError: what calling ``fn(**kwargs)`` raises (a TypeError first,
    a ParamError counting as a ValueError)."""
    try:
        fn(**kwargs)
    except TypeError:
        return TypeError
    except ValueError:
        return ValueError
    return None


@pytest.mark.parametrize("cls, valid, bad", CASES, ids=IDS)
def test_valid_keywords_pass_and_build(cls, valid, bad):
    assert cls.check_params(**valid) is None
    assert _checked(cls)(**valid) is None
    _built(cls)(**valid)


@pytest.mark.parametrize("cls, valid, bad", CASES, ids=IDS)
def test_an_unknown_keyword_is_a_type_error_naming_it(cls, valid, bad):
    with pytest.raises(TypeError, match="bogus_param"):
        cls.check_params(**valid, bogus_param=1)
    with pytest.raises(TypeError):
        _built(cls)(**valid, bogus_param=1)


@pytest.mark.parametrize("cls, name, value", [(c, n, v) for c, _, bad in CASES for n, v in bad],
                         ids=[f"{c.__name__}-{n}-{v!r}" for c, _, bad in CASES for n, v in bad])
def test_a_bad_value_is_a_param_error_naming_it_and_the_constructor_agrees(cls, name, value):
    valid = dict(next(v for c, v, _ in CASES if c is cls))
    kwargs = {**valid, name: value}
    with pytest.raises(ParamError) as err:
        cls.check_params(**kwargs)
    assert err.value.param == name and str(err.value).startswith(name), str(err.value)
    with pytest.raises(ParamError):
        _checked(cls)(**kwargs)
    with pytest.raises(ValueError):
        _built(cls)(**kwargs)


def test_the_declared_keywords_are_the_constructors():
    """Each class's PARAMS (with its bases') names exactly its constructor's keywords (the wrapped
    recommender of a re-ranker aside), so check_params can never refuse a real keyword."""
    for cls in [recommender_class(name) for name in REGISTRY] + list(RERANKERS.values()):
        names = set()
        for klass in cls.__mro__:
            if "__init__" in klass.__dict__ and klass is not object:
                names |= {p.name for p in inspect.signature(klass.__init__).parameters.values()
                          if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in ("self", "base")}
        assert set(declared_params(cls)) == names, cls.__name__


def test_the_limits_hold_for_every_way_of_building():
    for name, limit in PARAM_LIMITS.items():
        owners = [cls for cls in [recommender_class(n) for n in REGISTRY] + list(RERANKERS.values())
                  if name in declared_params(cls)]
        assert owners, name
        for cls in owners:
            assert declared_params(cls)[name].high == limit, (cls.__name__, name)
            required = {"n": 1} if cls is RandomReplacement else {"stances": []} if cls is StancePenalty else {}
            required = {**required, "components": [(Popularity(), 1.0)]} if cls is Hybrid else required
            required = {"stances": []} if cls.__name__ == "BridgingRanker" else required
            required = {"path": "policy.pt"} if cls.__name__ == "LearnedRanker" else required
            with pytest.raises(ParamError, match=f"{name} must be at most {limit}"):
                cls.check_params(**{**required, name: limit + 1})
            with pytest.raises(ValueError, match="at most"):
                _built(cls)(**{**required, name: limit + 1})
    with pytest.raises(ValueError, match="dim must be at most 4096"):
        make_recommender("mf", dim=4097)
    with pytest.raises(ValueError, match="n must be at most"):
        apply_reranking(make_recommender("chronological"), [{"kind": "random_replacement", "n": 10**6}])


# ---------------------------------------------------------------------------------- registry
def test_check_recommender_refuses_what_make_recommender_refuses():
    cases = [
        ("nope", {}, ValueError), ("popularity", {"halflife": 2}, TypeError),
        ("popularity", {"half_life": -1}, ValueError),
        ("random", {"window": 2}, TypeError), ("hybrid", {}, TypeError),
        ("hybrid", {"components": {"chronological": 1.0}}, TypeError),
        ("hybrid", {"components": {"nope": 1.0}}, ValueError),
        ("hybrid", {"components": {"popularity": NAN}}, ValueError),
        ("hybrid", {"components": {"popularity": "1"}}, ValueError),
        ("hybrid", {"components": {}}, ValueError), ("hybrid", {"components": "mf"}, ValueError),
        ("hybrid", {"components": [("popularity", 1.0, 2)]}, ValueError),
        ("hybrid", {"components": {"hybrid": 1.0}}, TypeError),
        ("hybrid", {"components": {"popularity": 0.5}, "window": 0}, ValueError),
        ("hybrid", {"components": {"popularity": 0.5}, "bogus": 0}, TypeError),
        ("hybrid", {"components": [(lambda request, rng: None, 1.0)]}, TypeError),
        ("hybrid", {"components": [(42, 1.0)]}, TypeError),
        (42, {}, TypeError), (lambda request, rng: None, {"window": 2}, TypeError),
        ("mf", {"dim": 0}, ValueError), ("mf", {"epochs": 10**4}, ValueError),
        ("hybrid", {"components": {"mf": 0.5, "social": 0.5}, "window": 3}, None),
        ("hybrid", {"components": [(Popularity(), -1.0)]}, None), ("social", {"in_weight": 0}, None),
        (Chronological(), {}, None), (lambda request, rng: None, {}, None),
    ]
    for spec, kwargs, expected in cases:
        assert _outcome(check_recommender, spec=spec, **kwargs) is expected, (spec, kwargs)
        assert _outcome(make_recommender, spec=spec, **kwargs) is expected, (spec, kwargs)


def test_check_reranking_refuses_what_apply_reranking_refuses():
    cases = [
        ([{"kind": "nope"}], ValueError), ([{"n": 1}], TypeError), ([42], TypeError),
        ("random_replacement", TypeError),
        ([{"kind": "random_replacement"}], TypeError),
        ([{"kind": "random_replacement", "n": 1, "bogus": 1}], TypeError),
        ([{"kind": "random_replacement", "n": 1, "base": None}], TypeError),
        ([{"kind": "random_replacement", "n": -1}], ValueError),
        ([{"kind": "tail_quota_transfer", "share": NAN}], ValueError),
        ([{"kind": "stance_penalty"}], TypeError), ([{"kind": "stance_penalty", "stances": [[1]]}], ValueError),
        ([{"kind": "stance_penalty", "stances": ["a", "b"]}, {"kind": "random_replacement", "n": 1}], None),
        ([lambda rec: rec, {"kind": "tail_quota_transfer"}], None), (None, None), ([], None),
    ]
    for steps, expected in cases:
        assert _outcome(check_reranking, steps=steps) is expected, steps
        assert _outcome(apply_reranking, recommender=Chronological(), steps=steps) is expected, steps


def test_check_reranking_with_n_agents_refuses_a_wrong_number_of_stances():
    check_reranking([{"kind": "stance_penalty", "stances": ["a", "b", None]}], n_agents=3)
    with pytest.raises(ParamError, match="stances has 2 labels for n_agents = 3") as err:
        check_reranking([{"kind": "stance_penalty", "stances": ["a", "b"]}], n_agents=3)
    assert err.value.param == "stances"


def test_errors_can_be_keyed_by_a_caller():
    """What the experiment config does with them: ``{where}.{exc}`` for a ParamError."""
    with pytest.raises(ParamError) as err:
        check_reranking([{"kind": "random_replacement", "n": 10**9}])
    assert f"env.rerank[0].{err.value}" == "env.rerank[0].n must be at most 1000, got 1000000000"
    with pytest.raises(ParamError) as err:
        check_recommender("popularity", half_life=-1)
    assert f"env.recommender_kwargs.{err.value}".startswith("env.recommender_kwargs.half_life must be")


def test_the_mf_limits_are_checked_without_torch():
    code = ("import sys\n"
            "from socialgym.recommenders import check_recommender\n"
            "from socialgym.recommenders.params import ParamError\n"
            "try:\n"
            "    check_recommender('mf', dim=10**8)\n"
            "except ParamError as exc:\n"
            "    assert exc.param == 'dim', exc\n"
            "else:\n"
            "    raise SystemExit('not refused')\n"
            "check_recommender('mf', dim=64, epochs=3)\n"
            "check_recommender('hybrid', components={'mf': 0.5, 'popularity': 0.5})\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr


def test_mf_without_torch_is_an_import_error_found_without_importing(monkeypatch):
    import importlib.util

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else object())
    with pytest.raises(ImportError, match="needs torch"):
        check_recommender("mf")
    with pytest.raises(ImportError, match="needs torch"):
        check_recommender("hybrid", components={"popularity": 0.5, "mf": 0.5})
    with pytest.raises(ValueError, match="dim"):          # a bad value first, as building says
        check_recommender("mf", dim=0)


def test_checks_build_nothing(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise AssertionError(f"{type(self).__name__} was built")

    classes = {recommender_class(name) for name in REGISTRY} | set(RERANKERS.values())
    for cls in classes | {ScoredRecommender, TopicUsers, LLMPolicy, RandomPolicy, GreedyPolicy}:
        if "__init__" in cls.__dict__:
            monkeypatch.setattr(cls, "__init__", refuse)
    for name in REGISTRY:
        kwargs = {"hybrid": {"components": {"mf": 0.6, "popularity": 0.2, "social": 0.2}},
                  "bridging": {"stances": ["a", "b"]}, "learned": {"path": "policy.pt"}}.get(name, {})
        check_recommender(name, **kwargs)
    check_recommender("mf", dim=32, epochs=4, window=3)
    check_reranking([{"kind": "random_replacement", "n": 1}, {"kind": "tail_quota_transfer", "share": 0.5},
                     {"kind": "stance_penalty", "stances": ["a", "b"]}], n_agents=2)
    LLMPolicy.check_params(generation="joint", memory={"recent": 3}, text_tokens=40)
    TopicUsers.check_params(seed=0, p_post=0.2, concentration=0.5)
    RandomPolicy.check_params(seed=0, mention_prob=0.1)
    GreedyPolicy.check_params(seed=0, b=0.1)


# ---------------------------------------------------------------------------------- policies
def test_topic_users_check_covers_from_interests_keywords():
    with pytest.raises(ParamError, match="concentration") as err:
        TopicUsers.check_params(seed=0, concentration=1.5)
    assert err.value.param == "concentration"
    with pytest.raises(ValueError, match="concentration"):
        TopicUsers.from_interests(["a", "b"], ["a", "b"], concentration=1.5)
    # with explicit preferences concentration and interests_per_agent are unused, as in the constructor
    TopicUsers.check_params(preferences=np.ones((2, 2)), concentration=5, interests_per_agent=0)
    TopicUsers(np.ones((2, 2)), concentration=5, interests_per_agent=0)
    for kwargs in ({"n_topics": 0}, {"n_agents": -1}, {"interests_per_agent": 0}, {"concentration": 0}):
        with pytest.raises(ParamError):
            TopicUsers.check_params(**{"n_topics": 3, "n_agents": 2, **kwargs})
        with pytest.raises(ValueError):
            TopicUsers(**{"n_topics": 3, "n_agents": 2, **kwargs})
    TopicUsers.check_params(n_topics=3, n_agents=2, interests_per_agent=3, concentration=1)
    TopicUsers(n_topics=3, n_agents=2, interests_per_agent=3, concentration=1)


@pytest.mark.parametrize("interests, concentration", [
    (["a", "b", "a"], 0.8), ([0, 1, 2], 1), (["a", "z"], 0.8), ([3], 0.8), ([True], 0.8), (["a"], 0),
    (["a"], NAN), ([], 0.8), ("a", 0.8), ([[1, 0], [0.5, 0.5]], 5), ([[1, -1]], 0.8), ([[NAN, 1]], 0.8),
    ([[0, 0]], 0.8), ([["x", 1]], 0.8), ([[[1]]], 0.8), (np.eye(3), 0.8),
])
def test_check_interests_refuses_what_from_interests_refuses(interests, concentration):
    topics = ["a", "b", "c"]
    expected = _outcome(TopicUsers.from_interests, interests=interests, topics=topics, concentration=concentration)
    assert _outcome(TopicUsers.check_interests, interests=interests, topics=topics,
                    concentration=concentration) is expected


def test_llm_policy_check_needs_no_client_and_knows_every_keyword():
    params = inspect.signature(LLMPolicy).parameters
    LLMPolicy.check_params(**{name: p.default for name, p in params.items()
                              if p.default is not inspect.Parameter.empty})
    with pytest.raises(TypeError, match="memory: .*bogus"):
        LLMPolicy.check_params(memory={"bogus": 1})


# ---------------------------------------------------------------------------------- the search
JUNK = st.one_of(st.integers(-3, 12), st.sampled_from([0, 1, 10, 100, 2**40, -2**40, 10**12]),
                 st.floats(-2, 5, allow_nan=False), st.sampled_from([NAN, INF, -INF, 0.5, 1.0, 2.0, 1e9]),
                 st.none(), st.booleans(), st.sampled_from(["", "2", "act", "split", "auto"]),
                 st.lists(st.sampled_from(["act", "vote", "x", 1, None]), max_size=3))
SEARCHED = [c for c, _, _ in CASES] + [Hybrid]
SKIP = {"preferences", "layout", "agent_ids", "n_topics", "n_agents", "client", "personas", "coach",
        "coached", "prompts", "memory", "components"}


def _names(cls):
    if cls in (LLMPolicy, TopicUsers, RandomPolicy, GreedyPolicy):
        return [n for n in inspect.signature(cls).parameters if n not in SKIP]
    return [n for n in declared_params(cls) if n not in SKIP]


@settings(max_examples=400, derandomize=True, deadline=None, database=None)
@given(data=st.data())
def test_check_params_rejects_exactly_what_the_constructor_rejects(data):
    cls = data.draw(st.sampled_from(SEARCHED))
    names = _names(cls)
    kwargs = data.draw(st.dictionaries(st.sampled_from(names + ["bogus"]) if names else st.just("bogus"),
                                       JUNK, max_size=3))
    if cls is StancePenalty and "stances" not in kwargs and data.draw(st.booleans()):
        kwargs["stances"] = data.draw(st.lists(st.sampled_from(["a", "b", None]), max_size=3))
    if cls is RandomReplacement and "n" not in kwargs and data.draw(st.booleans()):
        kwargs["n"] = data.draw(st.integers(0, 3))
    if cls is Hybrid:
        kwargs["components"] = [(Popularity(), data.draw(JUNK))]
    assert _outcome(_checked(cls), **kwargs) is _outcome(_built(cls), **kwargs), (cls.__name__, kwargs)


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(data=st.data())
def test_check_recommender_rejects_exactly_what_make_recommender_rejects(data):
    name = data.draw(st.sampled_from(sorted(REGISTRY) + ["nope"]))
    keys = [k for k in declared_params(recommender_class(name)) if k != "components"] if name in REGISTRY else []
    kwargs = data.draw(st.dictionaries(st.sampled_from(keys + ["bogus"]), JUNK, max_size=2))
    if name == "hybrid" and data.draw(st.integers(0, 9)):
        weights = st.one_of(st.floats(-1, 1), st.sampled_from([NAN, "x", None]))
        kwargs["components"] = data.draw(st.dictionaries(st.sampled_from(sorted(REGISTRY) + ["nope"]), weights,
                                                         max_size=3))
    expected = _outcome(make_recommender, spec=name, **kwargs)
    assert _outcome(check_recommender, spec=name, **kwargs) is expected, (name, kwargs)


def test_integral_floats_count_as_integers_as_the_constructors_always_took_them():
    rec = make_recommender("mf", dim=8.0, epochs=np.int64(2))
    assert rec.dim == 8 and rec.epochs == 2
    assert math.isclose(make_recommender("popularity", half_life=np.float32(1.5)).half_life, 1.5)
