"""Session-wide test settings, and the fixtures of the scripted episodes."""

import os
import tempfile
from pathlib import Path

import pytest

# checkpoints are signed with a per-user key (socialgym/experiments/run/checkpoint.py): the tests use
# a key of their own, set before any test (or subprocess it starts) reads it, never the user's
os.environ.setdefault("SOCIALGYM_KEY_FILE", os.path.join(tempfile.mkdtemp(prefix="socialgym-key-"),
                                                         "checkpoint.key"))

# The crash tests' kill switch. The runner calls a fault hook (socialgym.experiments.run.runner.
# _fault_hook, None outside the tests) at the points where a crash is hardest to recover from.
# tests/faults/sitecustomize.py installs one in every Python process the tests start (CLI
# subprocesses, sweep workers): with SOCIALGYM_KILL_AT="<round>:<act|outputs|checkpoint>" in its
# environment, such a process SIGKILLs itself at that point. This process itself is never armed.
FAULTS = Path(__file__).resolve().parent / "faults"
os.environ["PYTHONPATH"] = os.pathsep.join([str(FAULTS), *filter(None, [os.environ.get("PYTHONPATH")])])


# --------------------------------------------------------------------------- scripted episodes
# The hand-computed modules (test_rewards_hand.py, test_ties_hand.py) play short scripted
# episodes: 3 agents, a chronological recommender, feeds large enough to show every earlier
# item, strict invalid-action handling and the "tone" sentiment. The fixtures below give them
# the agent ids, the action builders of the env's act step and the step helpers, by name.
# They hold no state, so they are session-scoped (usable from module-scoped fixtures too).

_AGENTS = ["agent_0", "agent_1", "agent_2"]
_NOT = {"type": "NOT"}


def _make_env(n_actions=1, *, return_obs=False, **overrides):
    """A reset (seed 0) 3-agent env; ``overrides`` replace any config entry.

    Returns the env, or ``(env, obs)`` with the reset observation when ``return_obs`` is true.
    """
    socialgym = pytest.importorskip("socialgym")
    cfg = dict(
        n_agents=3,
        n_actions=n_actions,
        max_rounds=3,
        topics=["a", "b"],
        recommender="chronological",
        feed_size=50,
        vote_feed_size=50,
        invalid_actions="strict",
        sentiment="tone",
        seed=0,
    )
    cfg.update(overrides)
    env = socialgym.parallel_env(**cfg)
    obs, _infos = env.reset(seed=0)
    return (env, obs) if return_obs else env


def _post(topic, tone="neutral", mentions=None):
    a = {"type": "POST", "topic": topic, "tone": tone}
    if mentions:
        a["mentions"] = list(mentions)
    return a


def _com(target_id, tone="neutral", mentions=None):
    a = {"type": "COM", "target_id": target_id, "tone": tone}
    if mentions:
        a["mentions"] = list(mentions)
    return a


def _dm(recipient, topic, tone="neutral", reply_to=None, text=None):
    a = {"type": "DM", "recipient": recipient, "target_id": reply_to, "topic": topic, "tone": tone}
    if text is not None:
        a["text"] = text
    return a


def _act(env, acts):
    """Act step; agents not listed do NOT (n_actions NOTs).  Returns env.step's 5-tuple."""
    n = len(next(iter(acts.values())))
    return env.step({ag: {"actions": acts.get(ag, [_NOT] * n)} for ag in _AGENTS})


def _vote(env, votes=None):
    """Vote step; agents not listed cast no votes.  Returns env.step's 5-tuple."""
    votes = votes or {}
    return env.step({ag: {"votes": dict(votes.get(ag, {}))} for ag in _AGENTS})


def _play_round(env, acts, votes=None, *, check_act_rewards=False):
    """One round = act step + vote step.

    Returns (act_obs, rewards, infos, next_obs): act_obs is the observation returned by the act
    step (it carries the vote_items); rewards, infos and next_obs come from the vote step.
    With ``check_act_rewards`` it also asserts that the act step's rewards are all 0.0.
    """
    act_obs, rew, _term, _trunc, _inf = _act(env, acts)
    if check_act_rewards:
        for ag in _AGENTS:
            assert rew[ag] == 0.0, "rewards after an act step must be 0.0"
    next_obs, rew, _term, _trunc, infos = _vote(env, votes)
    return act_obs, rew, infos, next_obs


@pytest.fixture(scope="session")
def AGENTS():
    """The 3 agents' ids, ``[A0, A1, A2]``."""
    return _AGENTS


@pytest.fixture(scope="session")
def A0():
    return _AGENTS[0]


@pytest.fixture(scope="session")
def A1():
    return _AGENTS[1]


@pytest.fixture(scope="session")
def A2():
    return _AGENTS[2]


@pytest.fixture(scope="session")
def EPS():
    """The stabiliser of EMO and S_rec, at its default."""
    return 1e-6


@pytest.fixture(scope="session")
def NOT():
    """The NOT action."""
    return _NOT


@pytest.fixture(scope="session")
def make_env():
    """``make_env(n_actions=1, *, return_obs=False, **overrides)``: a reset 3-agent env."""
    return _make_env


@pytest.fixture(scope="session")
def post():
    """``post(topic, tone="neutral", mentions=None)``: a POST action."""
    return _post


@pytest.fixture(scope="session")
def com():
    """``com(target_id, tone="neutral", mentions=None)``: a COM action."""
    return _com


@pytest.fixture(scope="session")
def dm():
    """``dm(recipient, topic, tone="neutral", reply_to=None, text=None)``: a DM action."""
    return _dm


@pytest.fixture(scope="session")
def act():
    """``act(env, {agent: [actions]})``: the act step (agents not listed do NOT)."""
    return _act


@pytest.fixture(scope="session")
def vote():
    """``vote(env, {agent: {id: vote}})``: the vote step (agents not listed cast no votes)."""
    return _vote


@pytest.fixture(scope="session")
def play_round():
    """``play_round(env, acts, votes=None, *, check_act_rewards=False)``: act step + vote step,
    returning (act_obs, rewards, infos, next_obs)."""
    return _play_round
