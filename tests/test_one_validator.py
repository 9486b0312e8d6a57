"""Issue 28, item 3: one validator per value, whatever the way in — the constructor, a config,
an intervention, ``set_param`` and ``set_lambdas`` refuse the same values."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

import socialgym
from socialgym.config import FeedConfig
from socialgym.experiments import ConfigError, load_config


@pytest.fixture()
def env():
    e = socialgym.parallel_env(n_agents=3, max_rounds=4, seed=0)
    e.reset(seed=0)
    return e


@pytest.mark.parametrize("name, value", [("half_life", math.nan), ("half_life", -1.0), ("half_life", 0.0),
                                         ("half_life", math.inf), ("xi", 1.0), ("xi", -0.1),
                                         ("delta_max", -2.0), ("b_rec", 1.5), ("b_rec", math.nan)])
def test_set_param_refuses_what_the_constructor_refuses(env, name, value):
    with pytest.raises(ValueError) as constructed:
        FeedConfig.from_kwargs(**{name: value})
    with pytest.raises(ValueError) as changed:
        env.set_param(name, value)
    assert str(changed.value) == str(constructed.value)
    assert getattr(env.config, name) == getattr(FeedConfig(), name)        # unchanged


def test_set_param_takes_a_valid_value(env):
    env.set_param("half_life", 2.0)
    assert env.config.half_life == 2.0 and env.ties.decay == pytest.approx(1 - 0.5 ** 0.5)   # 1 - 2^(-1/h)


@pytest.mark.parametrize("agents, words", [([-1], "index -1 out of range [0, 3)"), ([3], "index 3 out of range"),
                                           (["agent_9"], "unknown agent 'agent_9'"), ([True], "unknown agent True")])
def test_set_lambdas_refuses_an_agent_that_is_not_there(env, agents, words):
    before = env.lambdas.copy()
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace(")", r"\)")):
        env.set_lambdas(agents, [1, 0, 0, 0, 0])
    assert (env.lambdas == before).all()


def test_an_intervention_obeys_the_limits_of_the_config():
    base = {"seed": 0, "env": {"n_agents": 4, "max_rounds": 3}, "policy": {"kind": "greedy"}}
    with pytest.raises(ConfigError, match="dim") as direct:
        load_config({**base, "env": {**base["env"], "recommender": "mf", "recommender_kwargs": {"dim": 10**8}}})
    with pytest.raises(ConfigError, match="interventions\\[0\\].*dim") as scheduled:
        load_config({**base, "interventions": [{"kind": "recommender", "at_round": 2, "recommender": "mf",
                                                "params": {"dim": 10**8}}]})
    assert "4096" in str(direct.value) and "4096" in str(scheduled.value)


def test_an_oversized_model_is_refused_before_torch_is_imported():
    code = ("import sys\nfrom socialgym.experiments import ConfigError, load_config\n"
            "try:\n    load_config({'env': {'n_agents': 4}, 'policy': {'kind': 'greedy'}, 'interventions': "
            "[{'kind': 'recommender', 'at_round': 2, 'recommender': 'mf', 'params': {'epochs': 10**8}}]})\n"
            "except ConfigError as e:\n    print('refused', 'torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "refused False", done.stderr[-2000:]
