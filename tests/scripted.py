"""Shared helpers for the hand-computed test modules (test_rewards_hand.py, test_ties_hand.py).

A plain module, not a test file: pytest's default "prepend" import mode puts tests/ (it has no
__init__.py) on sys.path, so the test modules import it as ``from scripted import ...``.

Scripted episodes use 3 agents, a chronological recommender, feeds large enough to show every
earlier item, strict invalid-action handling and the "tone" sentiment; builders below make the
action dicts of the env's act step.
"""

import pytest

socialgym = pytest.importorskip("socialgym")

A0, A1, A2 = "agent_0", "agent_1", "agent_2"
AGENTS = [A0, A1, A2]
EPS = 1e-6

NOT = {"type": "NOT"}


def make_env(n_actions=1, *, return_obs=False, **overrides):
    """A reset (seed 0) 3-agent env; ``overrides`` replace any config entry.

    Returns the env, or ``(env, obs)`` with the reset observation when ``return_obs`` is true.
    """
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


def post(topic, tone="neutral", mentions=None):
    a = {"type": "POST", "topic": topic, "tone": tone}
    if mentions:
        a["mentions"] = list(mentions)
    return a


def com(target_id, tone="neutral", mentions=None):
    a = {"type": "COM", "target_id": target_id, "tone": tone}
    if mentions:
        a["mentions"] = list(mentions)
    return a


def dm(recipient, topic, tone="neutral", reply_to=None, text=None):
    a = {"type": "DM", "recipient": recipient, "target_id": reply_to, "topic": topic, "tone": tone}
    if text is not None:
        a["text"] = text
    return a


def act(env, acts):
    """Act step; agents not listed do NOT (n_actions NOTs).  Returns env.step's 5-tuple."""
    n = len(next(iter(acts.values())))
    return env.step({ag: {"actions": acts.get(ag, [NOT] * n)} for ag in AGENTS})


def vote(env, votes=None):
    """Vote step; agents not listed cast no votes.  Returns env.step's 5-tuple."""
    votes = votes or {}
    return env.step({ag: {"votes": dict(votes.get(ag, {}))} for ag in AGENTS})


def play_round(env, acts, votes=None, *, check_act_rewards=False):
    """One round = act step + vote step.

    Returns (act_obs, rewards, infos, next_obs): act_obs is the observation returned by the act
    step (it carries the vote_items); rewards, infos and next_obs come from the vote step.
    With ``check_act_rewards`` it also asserts that the act step's rewards are all 0.0.
    """
    act_obs, rew, _term, _trunc, _inf = act(env, acts)
    if check_act_rewards:
        for ag in AGENTS:
            assert rew[ag] == 0.0, "rewards after an act step must be 0.0"
    next_obs, rew, _term, _trunc, infos = vote(env, votes)
    return act_obs, rew, infos, next_obs
