"""The feed environment's modules: FeedEnv keeps the state and the step, the intervention API
and the metrics come from mixins in their own modules, and the public API is unchanged."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import numpy as np

import socialgym
from socialgym.baselines import GreedyPolicy
from socialgym.envs.feed import FeedEnv
from socialgym.envs.feed.atomic import AtomicSteps
from socialgym.envs.feed.interventions import FeedInterventions
from socialgym.envs.feed.measures import FeedMeasures

FEED = Path(__file__).resolve().parents[1] / "socialgym" / "envs" / "feed"

INTERVENTIONS = ("add_ties", "remove_ties", "set_recommender", "set_lambdas", "set_param", "inject_post",
                 "refresh_feeds", "act_feeds", "RUNTIME_PARAMS", "_between_rounds")
MEASURES = ("exposure_metrics", "topic_entropy", "intervention_stats", "network_metrics", "_shown_window",
            "_groups", "_round_extras")
STEP = ("reset", "step", "step_arrays", "action_space", "observation_space", "tie_matrix", "round_transcript",
        "render", "close", "_act_step", "_vote_step", "_commit_act", "_commit_vote")
ATOMIC = ("_atomic_step", "_snapshot", "_restore")


def test_methods_live_in_their_modules_and_stay_on_the_env():
    for name in INTERVENTIONS:
        assert name in vars(FeedInterventions) and getattr(FeedEnv, name) is getattr(FeedInterventions, name)
    for name in MEASURES:
        assert name in vars(FeedMeasures) and getattr(FeedEnv, name) is getattr(FeedMeasures, name)
    for name in STEP:
        assert name in vars(FeedEnv), name
    for name in ATOMIC:
        assert name in vars(AtomicSteps) and getattr(FeedEnv, name) is getattr(AtomicSteps, name)
    assert FeedEnv.RUNTIME_PARAMS == ("half_life", "xi", "delta_max", "b_rec")
    assert isinstance(vars(FeedInterventions)["act_feeds"], property)


def test_parallel_env_is_a_feed_env_and_pickles_mid_episode():
    env = socialgym.parallel_env(n_agents=6, n_actions=2, max_rounds=3, seed=0)
    assert isinstance(env, FeedEnv)
    policy = GreedyPolicy(seed=0)
    obs, _ = env.reset(seed=0)
    obs = env.step(policy.act(obs))[0]
    env.step(policy.act(obs))
    env.add_ties([0], [1], 0.5)
    copy = pickle.loads(pickle.dumps(env))
    assert isinstance(copy, FeedEnv) and copy.round == env.round == 2
    assert (copy.tie_matrix() != env.tie_matrix()).nnz == 0
    assert repr(copy.exposure_metrics()) == repr(env.exposure_metrics())
    assert np.array_equal(copy.act_feeds, env.act_feeds)


def _functions(tree: ast.AST):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_size_limits_and_no_private_imports():
    assert len((FEED / "env.py").read_text(encoding="utf-8").splitlines()) <= 500
    for path in sorted(FEED.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in _functions(tree):
            assert fn.end_lineno - fn.lineno + 1 <= 80, f"{path.name}: {fn.name} is longer than 80 lines"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                assert not private, f"{path.name} imports private {private} from {node.module}"
