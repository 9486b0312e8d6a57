"""Session-wide test settings, and the fixtures of the scripted episodes."""

import os
import tempfile
from pathlib import Path

import pytest

from capabilities import CAPABILITY, NOT_APPLICABLE, in_ci

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

# Under pytest-xdist (`make test-fast`: 2 workers on 2 cores) each worker, and what it starts,
# keeps to one OpenMP/BLAS thread: two workers each spinning a thread per core oversubscribe
# the cores, and a short torch training then takes 20 times as long.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")


# --------------------------------------------------------------------------- skips, counted
# Every skip goes through tests/capabilities.py: a missing capability (skipped locally, failed
# under CI) or a test that does not apply here. The summary counts the two apart, so that a
# local run says how much it did not test for want of an install.
def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip raised inside tests/capabilities.py is reported at the test that asked for it."""
    outcome = yield
    report = outcome.get_result()
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3 \
            and _skip_reason(report).startswith((CAPABILITY, NOT_APPLICABLE)):
        path, lineno, _ = item.location
        report.longrepr = (path, (lineno or 0) + 1, longrepr[2])


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a module skipped whole (need_module at its top): reported at the module."""
    outcome = yield
    report = outcome.get_result()
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3 \
            and _skip_reason(report).startswith((CAPABILITY, NOT_APPLICABLE)) and hasattr(collector, "path"):
        report.longrepr = (collector.nodeid.split("::")[0] or str(collector.path), 1, longrepr[2])


def pytest_terminal_summary(terminalreporter):
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if not hasattr(r, "wasxfail")]
    if not skipped:
        return
    reasons = [_skip_reason(r) for r in skipped]
    capability = [r for r in reasons if r.startswith(CAPABILITY)]
    other = [r for r in reasons if r.startswith(NOT_APPLICABLE)]
    stray = [r for r in reasons if not r.startswith((CAPABILITY, NOT_APPLICABLE))]
    write = terminalreporter.write_line
    terminalreporter.section("skips")
    write(f"{len(capability)} skipped for a missing capability"
          + (" (CI=true fails these instead)" if not in_ci() else ""))
    for reason in sorted(set(capability)):
        write(f"  {capability.count(reason):4d} x {reason.removeprefix(CAPABILITY)}")
    write(f"{len(other)} skipped as not applicable here (races, hardware; the same under CI)")
    if stray:
        write(f"{len(stray)} skipped outside tests/capabilities.py (a bug of the tests):")
        for reason in sorted(set(stray)):
            write(f"  {stray.count(reason):4d} x {reason}")


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
    import socialgym

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
