"""Hardening of the environments (issue 16): every case reproduces a bad outcome a probe found.

Integer and oversized topics, text that is not UTF-8, conflicting duplicate vote keys, bad
seeds, accessors before ``reset()``, atomic steps (an exception anywhere in a step leaves the
environment exactly as it was), an empty topic vocabulary with the random policy, and mentions
of unknown users in an empty discussion comment.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

import socialgym
from socialgym.baselines import RandomPolicy
from socialgym.config import DEFAULT_EVIDENCE_WEIGHTS
from socialgym.envs.feed import env as feed_env_module
from socialgym.platform import MAX_TOPIC_CHARS, NotResetError, TopicVocabulary
from socialgym.recommenders import Chronological, RandomFeed, Recommender
from socialgym.ties import LogisticEvidence

KW = dict(n_agents=3, n_actions=2, max_rounds=3, topics=["a", "b"], sentiment="tone")
GOOD_POST = {"type": "POST", "topic": "a"}
NOT = {"type": "NOT"}


def env_in_round2(mode="strict", **overrides):
    """Act phase of round 2: items 0..5 are round-1 POSTs on topic "a" (agent_i made 2i, 2i+1)."""
    env = socialgym.parallel_env(invalid_actions=mode, **{**KW, **overrides})
    env.reset(seed=0)
    env.step({a: {"actions": [GOOD_POST, GOOD_POST]} for a in env.agents})
    obs, *_ = env.step({a: {"votes": {}} for a in env.agents})
    return env, obs


def act(env, agent_action, agent="agent_0", others=None):
    actions = {a: {"actions": others or [NOT, NOT]} for a in env.agents}
    actions[agent] = agent_action
    return env.step(actions)


# ------------------------------------------------------------------ comparing whole states
def feed_state(env) -> dict:
    """Everything a step may change, as plain values (copied, so later steps cannot alter it)."""
    pending = None
    if env._pending is not None:
        batch, texts, invalid = env._pending
        pending = (dataclasses.asdict(batch), list(texts), invalid)
    last = env.last_round
    return copy.deepcopy({
        "round": env.round, "phase": env.phase, "agents": list(env.agents),
        "content": env.content.state_dict(), "n_items": len(env.content),
        "vocab": env.vocab.names, "vocab_index": dict(env.vocab._index),
        "ties": env.ties.state_dict(), "rng": env.rng.bit_generator.state,
        "feed": env._feed, "vote_items": env._vote_items, "inbox": env._inbox,
        "inbox_ids": env._inbox_ids, "inbox_ptr": env._inbox_ptr,
        "prev_dm": (env._prev_dm_sender, env._prev_dm_recipient), "last": env._last,
        "seen_feed": env._seen_feed, "seen_any": env._seen_any, "shown": list(env._shown_history),
        "pending": pending,
        "last_round": None if last is None else (last.round, last.components, last.totals, last.invalid),
        "recommender": env.recommender.state_dict(),
    })


def assert_same(a, b, path="state"):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, f"{path}: {a.shape} {a.dtype} != {b.shape} {b.dtype}"
        np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys {a.keys()} != {b.keys()}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{path}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


# ================================================================== 1. integer and string topics
@pytest.mark.parametrize("topic", [999, 2, -1, 2 ** 40, True, np.bool_(False), 1.0, np.int64(-3)])
def test_bad_integer_topic_strict_raises_before_anything_changes(topic):
    # reported: 999 -> IndexError after the step was committed; -1 -> shown as the last topic;
    # 2**40 -> OverflowError after other agents' new topics were added
    env, _ = env_in_round2()
    before = feed_state(env)
    with pytest.raises(ValueError) as info:
        act(env, {"actions": [GOOD_POST, {"type": "POST", "topic": topic}]},
            others=[{"type": "POST", "topic": "fresh"}, NOT])
    msg = str(info.value)
    assert "agent_0" in msg and "slot 1" in msg and "'topic'" in msg
    assert_same(feed_state(env), before)
    obs, *_ = act(env, {"actions": [GOOD_POST, {"type": "POST", "topic": 1}]})   # the env still works
    assert env.phase == "vote" and env.vocab.names == ("a", "b")


@pytest.mark.parametrize("topic", [999, -1, 2 ** 40])
def test_bad_integer_topic_lenient_becomes_not_with_a_record(topic):
    env, _ = env_in_round2("lenient")
    n_items = len(env.content)
    obs, _, _, _, infos = act(env, {"actions": [GOOD_POST, {"type": "POST", "topic": topic}]},
                              others=[{"type": "POST", "topic": "fresh"}, NOT])
    (record,) = infos["agent_0"]["invalid"]
    assert record["slot"] == 1 and record["field"] == "topic" and str(topic) in record["reason"]
    assert len(env.content) == n_items + 3                       # agent_0's POST + 2 others' "fresh"
    assert obs["agent_1"]["topics"] == ("a", "b", "fresh")
    assert sorted(item["topic"] for item in obs["agent_1"]["vote_items"]) == ["a", "fresh"]
    env.step({a: {"votes": {}} for a in env.agents})             # the round closes normally


def test_integer_topic_is_a_vocabulary_index_like_the_numeric_encoding():
    env, _ = env_in_round2()
    obs, *_ = act(env, {"actions": [{"type": "POST", "topic": 1}, {"type": "POST", "topic": np.int64(0)}]})
    assert env.content.column("topic")[-2:].tolist() == [1, 0]
    assert [i["topic"] for i in obs["agent_1"]["vote_items"]] == ["a", "b"]      # newest first
    # the same POST in the numeric encoding (topic index 1) reaches the same stored topic
    env2, _ = env_in_round2()
    lay = env2.layout
    vec = np.zeros(lay.length, np.int64)
    vec[lay.act_length:] = 1
    vec[4] = 1                                         # slot 0: POST, topic index 1
    vec[lay.slot_width] = 0                            # slot 1: POST, topic index 0
    act(env2, vec)
    assert env2.content.column("topic")[-2:].tolist() == [1, 0]


def test_topic_index_refers_to_the_vocabulary_before_the_step():
    env, _ = env_in_round2()
    with pytest.raises(ValueError, match=r"agent_1, slot 0, field 'topic': topic index 2 is not in the vocabulary"):
        env.step({"agent_0": {"actions": [{"type": "POST", "topic": "new"}, NOT]},
                  "agent_1": {"actions": [{"type": "POST", "topic": 2}, NOT]},
                  "agent_2": {"actions": [NOT, NOT]}})


@pytest.mark.parametrize("topic, reason", [
    ("x" * (MAX_TOPIC_CHARS + 1), "more than MAX_TOPIC_CHARS=64"),
    ("x" * 1_000_000, "1000000 characters"),
    ("clim\x00ate", "control character '\\x00'"),
    ("two\nlines", "control character '\\n'"),
    ("esc\x1b[31m", "control character '\\x1b'"),
    ("bad \ud800 topic", "not valid UTF-8"),
    ("   ", "non-empty"),
])
def test_topic_strings_are_limited_and_clean(topic, reason):
    assert MAX_TOPIC_CHARS == 64
    env, _ = env_in_round2()
    with pytest.raises(ValueError) as info:
        act(env, {"actions": [GOOD_POST, {"type": "POST", "topic": topic}]})
    msg = str(info.value)
    assert "agent_0, slot 1, field 'topic'" in msg and reason in msg and len(msg) < 300
    env, _ = env_in_round2("lenient")
    _, _, _, _, infos = act(env, {"actions": [GOOD_POST, {"type": "POST", "topic": topic}]})
    assert [r["field"] for r in infos["agent_0"]["invalid"]] == ["topic"]
    assert env.vocab.names == ("a", "b")


def test_topic_at_the_limit_is_accepted_and_the_vocabulary_refuses_bad_ones():
    env, _ = env_in_round2()
    obs, *_ = act(env, {"actions": [{"type": "POST", "topic": "  " + "T" * MAX_TOPIC_CHARS + " "}, NOT]})
    assert obs["agent_1"]["topics"][-1] == "t" * MAX_TOPIC_CHARS
    with pytest.raises(ValueError, match="control character"):
        TopicVocabulary(("ok", "a\x00b"))
    with pytest.raises(ValueError, match=r"topics\[1\]: topic contains the control character"):
        socialgym.parallel_env(n_agents=3, topics=["ok", "a\x00b"])
    with pytest.raises(ValueError, match=r"topics\[0\].* 65 characters, more than MAX_TOPIC_CHARS"):
        socialgym.parallel_env(n_agents=3, topics=["y" * 65])


# ================================================================== 2. text that is not UTF-8
def test_text_that_cannot_be_encoded_as_utf8_is_invalid():
    env, _ = env_in_round2()
    before = feed_state(env)
    with pytest.raises(ValueError, match=r"agent_0, slot 1, field 'text': text is not valid UTF-8.*\\ud800"):
        act(env, {"actions": [GOOD_POST, {"type": "POST", "topic": "a", "text": "hi \ud800 there"}]})
    assert_same(feed_state(env), before)
    with pytest.raises(ValueError, match=r"agent_0, slot 0, field 'mentions'"):
        act(env, {"actions": [{"type": "POST", "topic": "a", "mentions": ["agent_\udc80"]}, NOT]})
    with pytest.raises(ValueError, match=r"agent_0, slot 0, field 'recipient'"):
        act(env, {"actions": [{"type": "DM", "topic": "a", "recipient": "agent_1\ud800"}, NOT]})
    env, _ = env_in_round2("lenient")
    n_items = len(env.content)
    _, _, _, _, infos = act(env, {"actions": [GOOD_POST, {"type": "POST", "topic": "a", "text": "\ud800"}]})
    assert [(r["slot"], r["field"]) for r in infos["agent_0"]["invalid"]] == [(1, "text")]
    assert len(env.content) == n_items + 1
    # valid non-ASCII text is fine
    env, _ = env_in_round2()
    act(env, {"actions": [{"type": "POST", "topic": "a", "text": "grüße 🌍 日本"}, NOT]})
    assert env.content.texts[-1] == "grüße 🌍 日本"


def test_discussion_comment_that_is_not_utf8_is_invalid():
    env = socialgym.discussion_env(n_users=2, turn_taking="round_robin", seed=0).unwrapped
    env.reset()
    with pytest.raises(ValueError, match=r"user_0, turn 1, text: not valid UTF-8"):
        env.step("hello \ud800")
    assert env.turn == 0 and len(env.store) == 1                  # nothing happened
    env.step({"text": "ünïcode ok"})
    assert env.turn_log[0]["text"] == "ünïcode ok"
    env = socialgym.discussion_env(n_users=2, turn_taking="round_robin", invalid="lenient", seed=0).unwrapped
    env.reset()
    env.step("hello \ud800")
    assert env.turn_log[0]["text"] == "" and env.turn_log[0]["content_id"] is None
    assert "text: not valid UTF-8" in env.infos["user_0"]["invalid"][0]
    env.step({"text": "fine", "warn": "\udcff"})                  # moderator's target: not a user
    assert "warn: '\\udcff' is not a user" in env.infos["moderator"]["invalid"][0]


# ================================================================== 3. duplicate vote keys
def _vote_round(mode):
    env, _ = env_in_round2(mode)
    obs, *_ = env.step({a: {"actions": [GOOD_POST, GOOD_POST]} for a in env.agents})
    return env, obs["agent_0"]["vote_items"][0]["id"]


def test_conflicting_duplicate_vote_keys_are_invalid():
    env, item = _vote_round("strict")
    before = feed_state(env)
    pattern = rf"agent_0, payload, field 'votes\[{item}\]': conflicting votes on item {item}"
    with pytest.raises(ValueError, match=pattern):
        env.step({"agent_0": {"votes": {item: 1, str(item): -1}}, "agent_1": {"votes": {}}, "agent_2": {"votes": {}}})
    assert_same(feed_state(env), before)
    env, item = _vote_round("lenient")
    _, _, _, _, infos = env.step({"agent_0": {"votes": {item: 1, str(item): -1, f" {item} ": 1}},
                                  "agent_1": {"votes": {}}, "agent_2": {"votes": {}}})
    assert env.content.column("likes")[item] == 0 and env.content.column("dislikes")[item] == 0
    assert [r["field"] for r in infos["agent_0"]["invalid"]] == [f"votes[{item}]"] * 2


def test_identical_duplicate_vote_keys_count_once():
    env, item = _vote_round("strict")
    _, _, _, _, infos = env.step({"agent_0": {"votes": {item: 1, str(item): 1, f" {item}": 1.0}},
                                  "agent_1": {"votes": {}}, "agent_2": {"votes": {}}})
    assert env.content.column("likes")[item] == 1 and infos["agent_0"]["invalid"] == []


def test_zero_and_nonzero_for_one_item_conflict():
    env, item = _vote_round("lenient")
    _, _, _, _, infos = env.step({"agent_0": {"votes": {str(item): 0, item: -1}},
                                  "agent_1": {"votes": {}}, "agent_2": {"votes": {}}})
    assert env.content.column("dislikes")[item] == 0
    assert "conflicting votes" in infos["agent_0"]["invalid"][0]["reason"]


# ================================================================== 4. seeds
BAD_SEEDS = [(-1, ValueError), (1.0, TypeError), ("3", TypeError), (np.bool_(True), TypeError),
             (True, TypeError), (2.5, TypeError), (np.int64(-2), ValueError), ([1, 2], TypeError)]


@pytest.mark.parametrize("seed, error", BAD_SEEDS)
def test_bad_seed_feed_env(seed, error):
    env = socialgym.parallel_env(**KW)
    with pytest.raises(error, match=r"^seed must be None or an integer >= 0, got"):
        env.reset(seed=seed)


@pytest.mark.parametrize("seed, error", BAD_SEEDS)
def test_bad_seed_discussion_env(seed, error):
    env = socialgym.discussion_env(n_users=2).unwrapped
    with pytest.raises(error, match=r"^seed must be None or an integer >= 0, got"):
        env.reset(seed=seed)
    env.reset(seed=0)                                       # a failed reset did not break the env
    assert env.agent_selection.startswith("user_")


def test_bad_config_seed_is_refused_at_construction():
    with pytest.raises(ValueError, match="seed must be None or an integer >= 0, got -1"):
        socialgym.parallel_env(seed=-1, **KW)
    with pytest.raises(TypeError, match="seed must be None or an integer >= 0, got float"):
        socialgym.parallel_env(seed=0.5, **KW)


def test_large_and_numpy_integer_seeds_work_and_are_deterministic():
    def feeds(seed):
        env = socialgym.parallel_env(recommender="random", **KW)
        env.reset(seed=seed)
        env.step({a: {"actions": [GOOD_POST, GOOD_POST]} for a in env.agents})
        return env._vote_items.tolist()

    assert feeds(2 ** 70) == feeds(2 ** 70)
    assert feeds(np.int64(7)) == feeds(7) == feeds(np.uint8(7))
    env = socialgym.discussion_env(n_users=3, turn_taking="random").unwrapped
    env.reset(seed=2 ** 70)
    first = env.agent_selection
    env.reset(seed=2 ** 70)
    assert env.agent_selection == first


# ================================================================== 5. accessors before reset
FEED_ACCESSORS = {
    "network_metrics": lambda e: e.network_metrics(),
    "tie_matrix": lambda e: e.tie_matrix(),
    "exposure_metrics": lambda e: e.exposure_metrics(),
    "topic_entropy": lambda e: e.topic_entropy(),
    "round_transcript": lambda e: e.round_transcript(),
    "add_ties": lambda e: e.add_ties(0, 1, 0.5),
    "render": lambda e: e.render(),
    "step": lambda e: e.step({}),
    "step_arrays": lambda e: e.step_arrays(np.zeros((3, e.layout.length), np.int64)),
}


@pytest.mark.parametrize("name", sorted(FEED_ACCESSORS))
def test_feed_accessors_before_reset_raise_not_reset_error(name):
    # reported: AttributeError ('FeedEnv' object has no attribute 'ties' / 'content' ...)
    env = socialgym.parallel_env(render_mode="ansi", **KW)
    with pytest.raises(NotResetError, match=rf"^FeedEnv\.{name}: the environment has no state yet; "
                                            rf"call reset\(\) first$"):
        FEED_ACCESSORS[name](env)
    assert issubclass(NotResetError, RuntimeError)
    env.reset(seed=0)
    if not name.startswith("step"):
        FEED_ACCESSORS[name](env)                       # works after reset


@pytest.mark.parametrize("call", [
    lambda e: e.observe("user_0"), lambda e: e.view("user_0"), lambda e: e.context(),
    lambda e: e.transcript(), lambda e: e.step("hi"), lambda e: e.last(), lambda e: e.render(),
    lambda e: e.annotation(1), lambda e: e.set_annotations({}), lambda e: e.request(1),
])
def test_discussion_accessors_before_reset_raise_not_reset_error(call):
    env = socialgym.discussion_env(n_users=2, render_mode="ansi").unwrapped
    with pytest.raises(NotResetError, match=r"DiscussionEnv\.\w+: .*call reset\(\) first"):
        call(env)


def test_episode_over_is_still_a_plain_runtime_error():
    env = socialgym.parallel_env(**{**KW, "max_rounds": 1})
    env.reset(seed=0)
    env.step({a: {"actions": [GOOD_POST, GOOD_POST]} for a in env.agents})
    env.step({a: {"votes": {}} for a in env.agents})
    with pytest.raises(RuntimeError, match="episode is over") as info:
        env.step({})
    assert not isinstance(info.value, NotResetError)
    assert env.tie_matrix().shape == (3, 3)                  # accessors still work after the end


# ================================================================== 6. atomic steps
class Flaky(Recommender):
    """Delegates to ``base``; learns a history in ``update`` (kept in its state_dict); raises on
    the ``fail_at``-th call of ``recommend`` (1-based)."""

    name = "flaky"

    def __init__(self, base, fail_at):
        self.base, self.fail_at, self.calls, self.history = base, fail_at, 0, []

    def recommend(self, request, rng):
        self.calls += 1
        if self.calls == self.fail_at:
            rng.random(5)                          # consume some randomness first: must be undone
            raise RuntimeError("recommender down")
        return self.base.recommend(request, rng)

    def update(self, content, batch, rng):
        self.history.append(int(batch.round))

    def state_dict(self):
        return {"history": list(self.history)}

    def load_state_dict(self, state):
        self.history = list(state["history"])


class Learner(Flaky):
    """Flaky's twin that never fails (the recommender a clean run uses)."""

    def __init__(self, base):
        super().__init__(base, fail_at=None)


def _run(env, policy, on_error=None, steps=None, api="dict"):
    """Play a whole episode; on an exception call ``on_error(env, exc)`` and retry the same step.
    Returns every step's rewards and the final state."""
    obs, _ = env.reset(seed=3)
    if api == "arrays":
        obs = {"action_mask": env._masks()}
        decide = lambda o: policy.sample_masks(o["action_mask"])  # noqa: E731
        step = env.step_arrays
    else:
        decide, step = policy.act, env.step
    rewards, failures = [], 0
    while env.agents:
        actions = decide(obs)
        try:
            out = step(actions)
        except Exception as exc:                   # noqa: BLE001
            failures += 1
            on_error(env, exc)
            out = step(actions)
        obs = out[0]
        rewards.append(out[1] if api == "arrays" else dict(out[1]))
    return rewards, feed_state(env), failures


def _episode_kwargs(**kw):
    return dict(n_agents=4, n_actions=2, max_rounds=4, topics=["a", "b", "c"], sentiment="tone",
                feed_size=4, vote_feed_size=4, **kw)


@pytest.mark.parametrize("base", [Chronological, RandomFeed])
@pytest.mark.parametrize("fail_at", [3, 4, 6])      # act step of round 2, vote steps of rounds 2 and 3
def test_recommender_failure_leaves_state_unchanged_and_a_retry_matches_a_clean_run(base, fail_at):
    clean = socialgym.parallel_env(recommender=Learner(base()), **_episode_kwargs())
    expected_rewards, expected_state, _ = _run(clean, RandomPolicy(seed=5))

    def on_error(env, exc):
        assert str(exc) == "recommender down"
        assert_same(feed_state(env), feed_state(saved[0]))   # exactly as before the step
        env.recommender = Learner(base())
        env.recommender.load_state_dict(saved[0].recommender.state_dict())

    flaky_env = socialgym.parallel_env(recommender=Flaky(base(), fail_at), **_episode_kwargs())
    saved = []
    original_step = flaky_env.step

    def step(actions):                            # a deep copy of the env before every step
        saved[:] = [copy.deepcopy(flaky_env)]
        return original_step(actions)

    flaky_env.step = step
    rewards, state, failures = _run(flaky_env, RandomPolicy(seed=5), on_error)
    assert failures == 1
    assert rewards == expected_rewards
    assert_same(state, expected_state)


def test_act_step_failure_forgets_new_topics_ids_and_grown_arrays():
    env = socialgym.parallel_env(recommender=Flaky(Chronological(), fail_at=3), max_topics=1,
                                 **{**KW, "topics": ["a"]})
    env.reset(seed=0)
    env.step({a: {"actions": [GOOD_POST, GOOD_POST]} for a in env.agents})
    env.step({a: {"votes": {}} for a in env.agents})
    before, width = feed_state(env), env._seen_any.shape[1]
    new_topics = {a: {"actions": [{"type": "POST", "topic": f"new {a}"}, {"type": "POST", "topic": "x"}]}
                  for a in env.agents}
    with pytest.raises(RuntimeError, match="recommender down"):
        env.step(new_topics)
    assert_same(feed_state(env), before)
    assert env._seen_any.shape[1] == width and env.vocab.get("x") is None
    obs, *_ = env.step(new_topics)                 # the retry creates ids 6.. exactly once
    assert len(env.content) == 12 and env.content.column("round")[6:].tolist() == [2] * 6
    assert obs["agent_0"]["topics"] == ("a", "new agent_0", "x", "new agent_1", "new agent_2")


class FlakyTies:
    """The default G_theta evidence, raising on the ``fail_at``-th round it scores."""

    def __init__(self, fail_at):
        self.inner, self.fail_at, self.calls = LogisticEvidence(DEFAULT_EVIDENCE_WEIGHTS), fail_at, 0

    def score(self, signals, context):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("tie scorer down")
        return self.inner.score(signals, context)


def _retry_episode(make_env, error, policy=RandomPolicy):
    """Run an episode whose hook fails once: state before == after the failed step, and the run
    equals the clean one."""
    expected_rewards, expected_state, _ = _run(make_env(False), policy(seed=9))
    env = make_env(True)
    snapshots = []
    original = env.step

    def step(actions):
        snapshots[:] = [feed_state(env)]
        return original(actions)

    env.step = step

    def on_error(env_, exc):
        assert error in str(exc)
        assert_same(feed_state(env_), snapshots[0])

    rewards, state, failures = _run(env, policy(seed=9), on_error)
    assert failures == 1 and rewards == expected_rewards
    assert_same(state, expected_state)


def test_tie_scorer_failure_is_rolled_back():
    # the like EMA is advanced before the scorer is called: it must be rolled back too
    _retry_episode(lambda fail: socialgym.parallel_env(tie_scorer=FlakyTies(2 if fail else None),
                                                       **_episode_kwargs()), "tie scorer down")


def test_sentiment_hook_failure_is_rolled_back():
    calls = {"n": 0}

    def sentiment(text):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("sentiment down")
        return 0.25

    class Texty(RandomPolicy):
        def _one_action(self, obs):
            action = super()._one_action(obs)
            if action["type"] != "NOT":
                action["text"] = "some words"
            return action

    def make(fail):
        calls["n"] = 0 if fail else 1
        return socialgym.parallel_env(**{**_episode_kwargs(), "sentiment": sentiment})

    _retry_episode(make, "sentiment down", Texty)


def test_reward_hook_failure_after_votes_were_applied_is_rolled_back(monkeypatch):
    real = feed_env_module.reward_components
    state = {"fail": False, "calls": 0}

    def reward_components(*args, **kwargs):
        state["calls"] += 1
        if state["fail"] and state["calls"] == 2:
            raise RuntimeError("reward hook down")
        return real(*args, **kwargs)

    monkeypatch.setattr(feed_env_module, "reward_components", reward_components)

    def make(fail):
        state.update(fail=fail, calls=0)
        return socialgym.parallel_env(**_episode_kwargs())

    _retry_episode(make, "reward hook down")


def test_observation_failure_after_the_round_closed_is_rolled_back():
    def make(fail):
        env = socialgym.parallel_env(recommender="random", **_episode_kwargs())
        if fail:
            real, calls = env._observations.structured, {"n": 0}

            def observations(state):
                calls["n"] += 1
                if calls["n"] == 5:                  # reset, act 1, vote 1, act 2, vote 2
                    raise MemoryError("out of memory while building observations")
                return real(state)
            env._observations.structured = observations
        return env

    _retry_episode(make, "out of memory")


def test_step_arrays_is_atomic_too():
    kw = _episode_kwargs(obs_format="numeric")
    clean = socialgym.parallel_env(recommender=Learner(RandomFeed()), **kw)
    expected_rewards, expected_state, _ = _run(clean, RandomPolicy(seed=4), api="arrays")
    env = socialgym.parallel_env(recommender=Flaky(RandomFeed(), fail_at=4), **kw)
    snapshots = []
    original = env.step_arrays

    def step_arrays(actions):
        snapshots[:] = [feed_state(env)]
        return original(actions)

    env.step_arrays = step_arrays

    def on_error(env_, exc):
        assert_same(feed_state(env_), snapshots[0])
        env_.recommender.fail_at = None

    rewards, state, failures = _run(env, RandomPolicy(seed=4), on_error, api="arrays")
    assert failures == 1
    for got, want in zip(rewards, expected_rewards):
        np.testing.assert_array_equal(got, want)
    assert_same(state, expected_state)


def test_invalid_action_in_lenient_vote_records_are_not_duplicated_by_a_retry():
    env, item = _vote_round("lenient")
    env.recommender = Flaky(Chronological(), fail_at=1)
    votes = {"agent_0": {"votes": {12345: 1}}, "agent_1": {"votes": {}}, "agent_2": {"votes": {}}}
    with pytest.raises(RuntimeError, match="recommender down"):
        env.step(votes)
    assert env._pending[2] == {}
    _, _, _, _, infos = env.step(votes)
    assert [r["field"] for r in infos["agent_0"]["invalid"]] == ["votes[12345]"]


# ================================================================== 7. empty topic vocabulary
def test_random_policy_with_an_empty_vocabulary_introduces_topics():
    # reported: topics=[] (specification §2: "may be empty") with random policies crashed with
    # "ValueError: high <= 0" where the random policy draws a topic index. The observation an
    # agent gets then has topics == (); a POST (the only round-1 action) must bring a new topic.
    env = socialgym.parallel_env(n_agents=3, n_actions=2, max_rounds=2, topics=["a"], sentiment="tone")
    obs, _ = env.reset(seed=0)
    for o in obs.values():
        o["topics"] = ()
    actions = RandomPolicy(seed=0).act(obs)
    topics = {a["topic"] for acts in actions.values() for a in acts["actions"]}
    assert topics and topics <= {f"new_topic_{k}" for k in range(4)}
    obs, *_ = env.step(actions)                                 # valid: every action is a POST
    assert set(obs["agent_0"]["topics"]) == {"a"} | topics
    # the same stream as before when topics exist: one integer draw per topic
    a, b = RandomPolicy(seed=1), np.random.default_rng(1)
    assert a._topic(("x", "y", "z")) == ("x", "y", "z")[int(b.integers(3))]


def test_random_policy_runs_an_episode_with_an_empty_topic_list():
    # the reported case itself: FeedConfig(topics=[]) with the random baseline
    env = socialgym.parallel_env(n_agents=3, n_actions=2, max_rounds=3, topics=[], sentiment="tone")
    obs, _ = env.reset(seed=0)
    assert obs["agent_0"]["topics"] == ()
    policy = RandomPolicy(seed=0)
    while env.agents:
        obs, *_ = env.step(policy.act(obs))
    assert 1 <= len(env.vocab) <= 4 and set(env.vocab.names) <= {f"new_topic_{k}" for k in range(4)}
    assert len(env.content) >= 6                               # round 1: every agent posted twice


def test_numeric_policy_with_an_empty_topic_list_gets_a_clear_invalid_action():
    # numeric actions cannot introduce topics, so round 1 (POST only) has no valid numeric
    # action: the mask says so and the step names the field instead of crashing
    env = socialgym.parallel_env(n_agents=3, n_actions=1, max_rounds=2, topics=[], obs_format="numeric",
                                 sentiment="tone", invalid_actions="strict")
    obs, _ = env.reset(seed=0)
    assert not obs["agent_0"]["action_mask"][0].any()
    with pytest.raises(ValueError, match="agent_0, slot 0, field 'topic': topic index beyond the vocabulary of 0"):
        env.step(RandomPolicy(seed=0).act(obs))


# ================================================================== 8. discussion mentions
def test_discussion_unknown_mentions_with_empty_text_are_invalid():
    env = socialgym.discussion_env(n_users=2, turn_taking="round_robin", seed=0).unwrapped
    env.reset()
    with pytest.raises(ValueError, match=r"user_0, turn 1, mentions: 'ghost' is not a participant"):
        env.step({"text": "", "mentions": ["ghost"]})
    with pytest.raises(ValueError, match=r"user_0, turn 1, mentions: 'ghost' is not a participant"):
        env.step({"text": "   ", "mentions": ["ghost"]})
    assert env.turn == 0
    env.step({"text": "", "mentions": ["user_1"]})             # known mention, empty text: a pass
    assert env.turn_log[0]["mentions"] == [] and env.turn_log[0]["content_id"] is None
    with pytest.raises(ValueError, match=r"moderator, turn 2, mentions: 'ghost' is not a participant"):
        env.step({"text": "", "mentions": ["ghost"]})
    env = socialgym.discussion_env(n_users=2, turn_taking="round_robin", invalid="lenient", seed=0).unwrapped
    env.reset()
    env.step({"text": "", "mentions": ["ghost", "user_1"]})
    assert env.turn_log[0]["text"] == "" and env.turn_log[0]["mentions"] == []
    assert env.infos["user_0"]["invalid"] == ["user_0, turn 1, mentions: 'ghost' is not a participant"]


# ================================================================== 6b. atomic discussion turns
def _discussion_state(env) -> dict:
    return copy.deepcopy({
        "turn": env.turn, "user_turns": env.user_turns, "selection": env.agent_selection,
        "agents": list(env.agents), "history": list(env.history), "active": list(env.active),
        "warnings": env.warnings, "banned": env.banned, "turn_log": env.turn_log,
        "comment_ids": list(env.comment_ids), "store": env.store.state_dict(), "n_store": len(env.store),
        "rewards": env.rewards, "cumulative": env._cumulative_rewards, "terminations": env.terminations,
        "truncations": env.truncations, "infos": env.infos, "rng": env.rng.bit_generator.state,
        "tracker": dataclasses.asdict(env.tracker),
    })


@pytest.mark.parametrize("failure", ["raise", "bad index"])
@pytest.mark.parametrize("fail_at", [2, 3])     # after the moderator's warning (and ban), after a silent turn
def test_discussion_turn_taking_failure_leaves_the_turn_undone(failure, fail_at):
    # reported by this hardening pass: the turn-taking function runs after the turn was
    # recorded, so its error left the comment stored and a retry wrote it twice
    def make(fail_at):
        calls = {"n": 0}

        def turn_taker(history, active, rng):
            calls["n"] += 1
            pick = active[int(rng.integers(len(active)))]
            if calls["n"] == fail_at:
                if failure == "raise":
                    raise RuntimeError("turn taker down")
                return 99
            return pick
        return socialgym.discussion_env(n_users=3, turn_taking=turn_taker, max_turns=4, seed=1,
                                        ban_after_warnings=1).unwrapped

    script = ["hello @user_1", {"text": "calm down", "warn": "user_1"}, "fine", "", "ok", "", "bye", ""]

    def drive(env):
        env.reset(seed=1)
        lines, failures = iter(script), 0
        while env.agents:
            agent = env.agent_selection
            dead = env.terminations[agent] or env.truncations[agent]
            action = None if dead else next(lines, "")
            before = _discussion_state(env)
            try:
                env.step(action)
            except (RuntimeError, ValueError) as exc:
                failures += 1
                assert "turn taker down" in str(exc) or "turn-taking function returned 99" in str(exc)
                assert_same(_discussion_state(env), before)
                env.step(action)                                 # the retry
        return failures

    clean, env = make(None), make(fail_at)
    assert drive(clean) == 0 and drive(env) == 1
    assert_same(_discussion_state(env), _discussion_state(clean))
    assert [r["text"] for r in env.turn_log] == [r["text"] for r in clean.turn_log]
    assert env.turn_log[1]["banned"] == ["user_1"]


def test_unknown_keys_of_mixed_types_are_named():
    """Probe: an action with an int and a str unknown key raised TypeError from sorting them."""
    import socialgym

    env = socialgym.parallel_env(n_agents=3, n_actions=1, max_rounds=2, seed=0, invalid_actions="strict")
    env.reset(seed=0)
    actions = {a: {"actions": [{"type": "POST", "topic": env.config.topics[0] if env.config.topics else "t"}]}
               for a in env.agents}
    actions["agent_1"] = {"actions": [{"type": "POST", "topic": "t", 1: 2, "zz": 3}]}
    with pytest.raises(ValueError, match=r"agent_1, slot 0, field 'zz': unknown key\(s\) \['zz', '1'\]"):
        env.step(actions)
