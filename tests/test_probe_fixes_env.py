"""Bad outcomes of the reliability probe (benchmarks/probe_reliability.py: flatobs, batched,
platform) on the environment side: one-line values in messages, what FlatObservation wraps, the
vector env's task ids and action matrices, objective weights, one stance rule."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import socialgym
from socialgym import FlatObservation
from socialgym.platform.validation import show


# ------------------------------------------------------------------------------------ show()
class _Repr:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


@pytest.mark.parametrize("text", ["a\rb", "a\x0cb", "a\x0bb", "a \u2028  b", "a\x85b", "a\n\n   b", "a\r\n  b"])
def test_show_puts_every_line_break_on_one_line(text):
    assert show(_Repr(text)) == "a b"
    assert show(_Repr(text)).splitlines() == ["a b"]


def test_show_keeps_within_its_limit_and_one_line_for_numpy_reprs():
    assert show("x" * 50, 0) == "…"
    assert show("x" * 50, 1) == "…"
    assert show("x" * 50, 10) == "'xxxxxxxx…"
    dates = np.array([["2020-01-01"], ["2020-01-02"]], dtype="datetime64[D]")
    assert show(dates) == "array([['2020-01-01'], ['2020-01-02']], dtype='datetime64[D]')"
    assert show(np.zeros((2, 2)), 15) == "array([[0., 0.…"


# ------------------------------------------------------------------------- platform weights
def test_objective_weights_are_named_on_one_short_line():
    from socialgym.rewards.platform import platform_weights

    with pytest.raises(ValueError) as big_int:
        platform_weights({"engagement": 10**400})
    assert str(big_int.value) == ("platform objective weight 'engagement' must be a finite number, got "
                                  "1" + "0" * 38 + "…")
    with pytest.raises(ValueError) as big_float:
        platform_weights({"welfare": 1e301})
    assert str(big_float.value) == ("platform objective weight 'welfare' must be a finite number of size at "
                                    "most 1e300, got 1e+301")
    with pytest.raises(ValueError) as array:
        platform_weights({"engagement": np.arange(4).reshape(2, 2)})
    assert str(array.value) == ("platform objective weight 'engagement' must be a finite number, got "
                                "array([[0, 1], [2, 3]])")
    with pytest.raises(TypeError) as matrix:
        platform_weights(np.eye(2))
    assert str(matrix.value) == ("platform objective: a name or a mapping name -> weight, got "
                                 "array([[1., 0.], [0., 1.]])")
    assert platform_weights({"engagement": 1e300})[0] == 1e300


# ------------------------------------------------------------------------ FlatObservation
def test_flat_observation_refuses_the_platform_agent_env_and_takes_a_batched_one():
    from socialgym.envs.feed.batched import BatchedFeedEnv
    from socialgym.envs.platform.agent import PlatformAgentEnv

    with pytest.raises(TypeError) as err:
        FlatObservation(PlatformAgentEnv(n_agents=4))
    assert str(err.value) == ("FlatObservation wraps a parallel feed environment (socialgym.parallel_env or "
                              "socialgym.make of a feed task, not yet flat), got PlatformAgentEnv")
    flat = FlatObservation(BatchedFeedEnv(2, n_agents=3, obs_format="numeric"))
    observations, _ = flat.reset(seed=0)
    length = flat.feature_size + flat.mask_size
    assert len(observations) == 6 and all(o.shape == (length,) for o in observations.values())


def test_flat_observation_split_names_both_lengths():
    flat = FlatObservation(socialgym.parallel_env(n_agents=3, obs_format="numeric"))
    length = flat.feature_size + flat.mask_size
    with pytest.raises(ValueError) as err:
        flat.split(np.zeros((2, length + 1)))
    assert str(err.value) == (f"FlatObservation.split: a flat observation has {length} entries "
                              f"({flat.feature_size} features + {flat.mask_size} mask), got shape (2, {length + 1})")


# ------------------------------------------------------------------------------ make_vec
def test_make_vec_names_an_unknown_task_in_one_short_line():
    from socialgym.vector import make_vec

    with pytest.raises(ValueError) as long_name:
        make_vec("x" * 1000, 2)
    assert str(long_name.value) == (
        "unknown task '" + "x" * 78 + "…: socialgym.tasks.TASKS lists the registered ids (such as "
        "'socialgym/feed-SOC-v0'); an objective is one of SOC, INF, PRE, COORD, EMO, mixed")
    assert len(str(long_name.value)) < 300
    with pytest.raises(ValueError) as unknown:
        make_vec("socialgym/feed-XYZ-v0", 2)
    assert str(unknown.value).startswith("unknown task 'socialgym/feed-XYZ-v0': socialgym.tasks.TASKS lists")
    with pytest.raises(TypeError) as not_a_str:
        make_vec(["a"], 2)
    assert str(not_a_str.value) == "task_id must be a task id or an objective (a str), got list ['a']"


def test_step_arrays_refuses_a_transposed_nested_list():
    from socialgym.vector import make_vec

    venv = make_vec("mixed", 2, max_rounds=2)
    venv.reset(seed=0)
    L = venv.layout.length
    assert (venv.n_agents, L) == (20, 30)
    transposed = np.zeros((venv.n_agents, 2, L), np.int64)
    for matrix in (transposed, transposed.tolist()):
        with pytest.raises(ValueError) as err:
            venv.step_arrays(matrix)
        assert str(err.value) == ("step_arrays: a 3-D action matrix must have shape (num_envs, n_agents, L) = "
                                  "(2, 20, L), got (20, 2, 30)")
    obs, rewards, *_ = venv.step_arrays(np.zeros((2, venv.n_agents, L), np.int64).tolist())
    assert rewards.shape == (40,)


# -------------------------------------------------------------------------------- stances
@pytest.mark.parametrize("stances, shown", [({"a"}, "set {'a'}"), (frozenset({"a"}), "frozenset frozenset({'a'})"),
                                            ({"a": 1}, "dict {'a': 1}"), ("ab", "str 'ab'"),
                                            (np.array([["a"], ["b"]]), "ndarray array([['a'], ['b']], dtype='<U1')")])
def test_check_stances_refuses_what_stance_codes_refuses_in_the_same_words(stances, shown):
    from socialgym.recommenders.features import stance_codes
    from socialgym.recommenders.params import ParamError, check_stances

    rule = f"one label per agent, in agent order (a list, tuple or 1-D array), got {shown}"
    with pytest.raises(ParamError) as param:
        check_stances("stances", stances)
    assert str(param.value) == f"stances must be {rule}"
    with pytest.raises(TypeError) as codes:
        stance_codes(stances, 2)
    assert str(codes.value) == f"stances: {rule}"


def test_a_stance_penalty_a_label_short_is_refused_before_it_records_anything():
    from socialgym.platform.actions import POST, RoundBatch
    from socialgym.platform.content import ContentStore
    from socialgym.recommenders import FeedRequest, make_recommender
    from socialgym.recommenders.interventions import StancePenalty

    content = ContentStore()
    m = 4
    content.append_batch(RoundBatch(n_agents=4, n_actions=1, round=1, sender=np.arange(m, dtype=np.int32),
                                    kind=np.full(m, POST, np.int8), recipient=np.full(m, -1, np.int32),
                                    target_id=np.full(m, -1, np.int64), topic=np.zeros(m, np.int32),
                                    sentiment=np.zeros(m)), [None] * m)
    W = sp.csr_matrix((4, 4))
    request = FeedRequest(viewers=np.arange(4), candidates=np.arange(m), k=2, phase="act", round=2,
                          content=content, ties=lambda: W, n_agents=4)
    rerank = StancePenalty(make_recommender("chronological"), ["a", "b", "a"], strength=0.5)
    with pytest.raises(ValueError) as err:
        rerank.recommend(request, np.random.default_rng(0))
    assert str(err.value) == "StancePenalty has 3 stances for 4 agents"
    assert rerank.last == {} and not rerank.counts
    with pytest.raises(ValueError, match="stances has 3 labels for n_agents = 4 agents"):
        socialgym.parallel_env(n_agents=4, rerank=[{"kind": "stance_penalty", "stances": ["a", "b", "a"]}])
