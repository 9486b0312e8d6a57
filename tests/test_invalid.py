"""Invalid input (specification §6): strict raises naming agent, slot and field; lenient records a NOT."""


import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import socialgym

KW = dict(n_agents=3, n_actions=2, max_rounds=3, topics=["a", "b"], sentiment="tone")
GOOD_POST = {"type": "POST", "topic": "a"}


def env_in_round2(mode="strict"):
    """An env at the act phase of round 2: items 0..5 are round-1 POSTs (agent_i made 2i, 2i+1)."""
    env = socialgym.parallel_env(invalid_actions=mode, **KW)
    env.reset(seed=0)
    env.step({a: {"actions": [GOOD_POST, GOOD_POST]} for a in env.agents})
    obs, *_ = env.step({a: {"votes": {}} for a in env.agents})
    return env, obs


def act(env, agent_action, agent="agent_0"):
    actions = {a: {"actions": [{"type": "NOT"}, {"type": "NOT"}]} for a in env.agents}
    actions[agent] = agent_action
    return env.step(actions)


@pytest.mark.parametrize("bad, field", [
    ({"type": "SHOUT"}, "type"),
    ({"type": "COM", "target_id": 999}, "target_id"),
    ({"type": "COM", "target_id": 0}, "target_id"),             # own item: not in own feed
    ({"type": "COM", "target_id": "2"}, "target_id"),
    ({"type": "COM", "target_id": True}, "target_id"),
    ({"type": "DM", "recipient": "agent_0", "topic": "a"}, "recipient"),
    ({"type": "DM", "recipient": "agent_9", "topic": "a"}, "recipient"),
    ({"type": "DM", "recipient": "agent_1", "topic": "a", "target_id": 2}, "target_id"),  # a POST, not a DM
    ({"type": "POST", "topic": "a", "text": float("nan")}, "text"),
    ({"type": "POST", "topic": "a", "text": 42}, "text"),
    ({"type": "POST", "topic": "a", "text": "x" * 20_000}, "text"),
    ({"type": "POST", "topic": ""}, "topic"),
    ({"type": "POST"}, "topic"),
    ({"type": "POST", "topic": "a", "mentions": ["agent_7"]}, "mentions"),
    ({"type": "POST", "topic": "a", "mentions": "agent_1"}, "mentions"),
    ({"type": "POST", "topic": "a", "tone": "angry"}, "tone"),
    ({"type": "POST", "topic": "a", "colour": "red"}, "colour"),
    ({"type": "NOT", "text": "hello"}, "text"),
    ("POST", "type"),
])
def test_strict_names_agent_slot_field(bad, field):
    env, _ = env_in_round2()
    with pytest.raises(ValueError) as info:
        act(env, {"actions": [{"type": "NOT"}, bad]})
    msg = str(info.value)
    assert "agent_0" in msg and "slot 1" in msg and repr(field) in msg


@pytest.mark.parametrize("payload", [
    {"actions": [{"type": "NOT"}]},                       # too few
    {"actions": [{"type": "NOT"}] * 3},                   # too many
    {"acts": []},
    None,
    "POST",
    np.array([1.5, 2.0]),                                  # wrong numeric shape
])
def test_strict_payload_errors_name_agent(payload):
    env, _ = env_in_round2()
    with pytest.raises(ValueError, match="agent_0"):
        act(env, payload)


def test_missing_agent_is_an_error_in_strict_and_recorded_in_lenient():
    env, _ = env_in_round2()
    with pytest.raises(ValueError, match="agent_2.*no action given"):
        env.step({a: {"actions": [{"type": "NOT"}] * 2} for a in env.agents[:2]})
    env, _ = env_in_round2("lenient")
    _, _, _, _, infos = env.step({a: {"actions": [{"type": "NOT"}] * 2} for a in env.agents[:2]})
    assert infos["agent_2"]["invalid"][0]["field"] == "actions"


def test_non_post_in_round_1_is_invalid():
    env = socialgym.parallel_env(invalid_actions="strict", **KW)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="agent_0.*slot 0.*'type'.*round 1"):
        env.step({a: {"actions": [{"type": "NOT"}, GOOD_POST]} for a in env.agents})


def test_strict_error_leaves_state_unchanged_so_a_retry_works():
    env, _ = env_in_round2()
    n_items, n_topics = len(env.content), len(env.vocab)
    with pytest.raises(ValueError):
        env.step({"agent_0": {"actions": [{"type": "POST", "topic": "brand new"}, {"type": "SHOUT"}]},
                  "agent_1": {"actions": [GOOD_POST, GOOD_POST]},
                  "agent_2": {"actions": [GOOD_POST, GOOD_POST]}})
    assert len(env.content) == n_items and len(env.vocab) == n_topics and env.phase == "act"
    obs, *_ = env.step({a: {"actions": [GOOD_POST, GOOD_POST]} for a in env.agents})
    assert env.phase == "vote"


def test_lenient_turns_invalid_slot_into_not_and_records_it():
    env, _ = env_in_round2("lenient")
    before = len(env.content)
    _, _, _, _, infos = act(env, {"actions": [GOOD_POST, {"type": "COM", "target_id": 999}]})
    assert len(env.content) == before + 1          # only the valid POST was created
    (record,) = infos["agent_0"]["invalid"]
    assert record["slot"] == 1 and record["field"] == "target_id" and record["phase"] == "act"
    assert infos["agent_1"]["invalid"] == []


def test_votes_strict_and_lenient():
    env, _ = env_in_round2()
    obs, *_ = env.step({a: {"actions": [GOOD_POST, GOOD_POST]} for a in env.agents})
    mine = [i for i in range(len(env.content)) if env.content.column("author")[i] == 0][-1]
    bad_votes = [{mine: 1}, {12345: 1}, {obs["agent_0"]["vote_items"][0]["id"]: 2},
                 {obs["agent_0"]["vote_items"][0]["id"]: float("nan")}, {"x": 1}, [1, 2]]
    for votes in bad_votes:
        with pytest.raises(ValueError, match="agent_0"):
            env.step({"agent_0": {"votes": votes}, "agent_1": {"votes": {}}, "agent_2": {"votes": {}}})
    # JSON-style string keys are accepted
    item = obs["agent_0"]["vote_items"][0]["id"]
    env.step({"agent_0": {"votes": {str(item): 1}}, "agent_1": {"votes": {}}, "agent_2": {"votes": {}}})
    assert env.content.column("likes")[item] == 1

    env, _ = env_in_round2("lenient")
    obs, *_ = env.step({a: {"actions": [GOOD_POST, GOOD_POST]} for a in env.agents})
    item = obs["agent_0"]["vote_items"][0]["id"]
    _, _, _, _, infos = env.step({"agent_0": {"votes": {item: 1, 12345: -1}},
                                  "agent_1": {"votes": {item: 7}}, "agent_2": {"votes": {}}})
    assert env.content.column("likes")[item] == 1 and env.content.column("dislikes")[item] == 0
    assert [r["field"] for r in infos["agent_0"]["invalid"]] == ["votes[12345]"]
    assert [r["field"] for r in infos["agent_1"]["invalid"]] == [f"votes[{item}]"]


def test_numeric_out_of_range_and_empty_slots():
    env, obs = env_in_round2()
    lay = env.layout
    vec = np.zeros(lay.length, np.int64)
    vec[lay.act_length:] = 1
    vec[0] = 7                                     # type out of range
    with pytest.raises(ValueError, match="agent_0.*slot 0.*'type'"):
        act(env, vec)
    vec[0] = 1                                     # COM on feed slot 5: empty (only 4 items shown)
    vec[1] = 5
    with pytest.raises(ValueError, match="agent_0.*slot 0.*'target_slot'.*empty"):
        act(env, vec)
    env, obs = env_in_round2("lenient")
    vec[lay.slot_width] = 3                       # slot 1 NOT
    _, _, _, _, infos = act(env, vec)
    assert infos["agent_0"]["invalid"][0]["field"] == "target_slot"


# ---------------------------------------------------------------- property-based fuzzing
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30))
keys = st.sampled_from(["type", "topic", "text", "target_id", "recipient", "mentions", "tone", "junk"])
arrays = st.builds(np.array, st.lists(st.one_of(st.integers(-3, 3), st.sampled_from(["agent_1", "a"])), max_size=3))
values = st.one_of(json_scalars, arrays, st.sampled_from(["POST", "COM", "DM", "NOT", "agent_1", "agent_0", "a",
                                                  "supportive"]),
                   st.lists(st.one_of(st.text(max_size=8), st.sampled_from(["agent_1", "agent_2"])), max_size=3))
actions = st.one_of(json_scalars, st.dictionaries(keys, values, max_size=6))
payloads = st.one_of(json_scalars, st.fixed_dictionaries({"actions": st.lists(actions, max_size=4)}),
                     st.dictionaries(st.text(max_size=5), json_scalars, max_size=3))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=payloads)
def test_fuzz_strict_raises_only_value_error_and_never_corrupts(payload):
    env, _ = env_in_round2()
    n_items = len(env.content)
    try:
        act(env, payload)
    except ValueError as err:
        assert "agent_0" in str(err)
        assert len(env.content) == n_items and env.phase == "act"
    else:
        assert env.phase == "vote"


def _blank(value) -> bool:
    """None or an empty string / list / tuple / array (an empty numpy array has no truth value)."""
    return value is None or (isinstance(value, (str, list, tuple, np.ndarray)) and len(value) == 0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=payloads)
def test_fuzz_lenient_never_raises_and_accounts_for_every_slot(payload):
    env, _ = env_in_round2("lenient")
    n_items = len(env.content)
    _, _, _, _, infos = act(env, payload)
    created = len(env.content) - n_items
    records = infos["agent_0"]["invalid"]
    # every slot is either a created item, a valid NOT, or a recorded invalid action
    assert created <= 2
    if created < 2:
        valid_nots = 0
        if isinstance(payload, dict) and isinstance(payload.get("actions"), list):
            valid_nots = sum(1 for a in payload["actions"][:2] if isinstance(a, dict)
                             and str(a.get("type", "")).strip().upper() == "NOT"
                             and all(_blank(a[k]) for k in a if k != "type"))
        assert created + valid_nots == 2 or records
    for r in records:
        assert set(r) == {"phase", "slot", "field", "reason"} and r["reason"]


@settings(max_examples=200, deadline=None)
@given(vec=st.lists(st.one_of(st.integers(-5, 40), st.floats(allow_nan=True)), min_size=0, max_size=60))
def test_fuzz_numeric_vectors(vec):
    env, _ = env_in_round2("lenient")
    arr = np.array(vec) if vec else np.zeros(0)
    _, _, _, _, infos = act(env, arr)
    assert all(isinstance(r["reason"], str) for r in infos["agent_0"]["invalid"])
    env, _ = env_in_round2("strict")
    try:
        act(env, arr)
    except ValueError as err:
        assert "agent_0" in str(err)


@settings(max_examples=200, deadline=None)
@given(votes=st.one_of(json_scalars, st.dictionaries(st.one_of(st.integers(-3, 20), st.text(max_size=3)),
                                                     st.one_of(st.integers(-3, 3), st.floats(allow_nan=True),
                                                               st.booleans(), st.none()), max_size=6)))
def test_fuzz_votes(votes):
    env, _ = env_in_round2("lenient")
    env.step({a: {"actions": [GOOD_POST, GOOD_POST]} for a in env.agents})
    likes_before = env.content.column("likes").sum() + env.content.column("dislikes").sum()
    _, _, _, _, infos = env.step({"agent_0": {"votes": votes}, "agent_1": {"votes": {}}, "agent_2": {"votes": {}}})
    cast = env.content.column("likes").sum() + env.content.column("dislikes").sum() - likes_before
    assert cast <= 6
    for r in infos["agent_0"]["invalid"]:
        assert r["phase"] == "vote"


def test_lenient_round_one_with_nothing_created():
    """Every round-1 action invalid (NOT is not allowed then): lenient mode stores nothing, and
    the next rounds still run on the empty content store."""
    import socialgym

    env = socialgym.parallel_env(n_agents=4, n_actions=1, max_rounds=3, invalid_actions="lenient", seed=0)
    env.reset(seed=0)
    obs, rewards, *_ , infos = env.step({a: {"actions": [{"type": "NOT"}]} for a in env.agents})
    assert len(env.content) == 0 and all(infos[a]["invalid"] for a in env.possible_agents)
    env.step({a: {"votes": {}} for a in env.agents})
    obs, *_ = env.step({a: {"actions": [{"type": "NOT"}]} for a in env.agents})
    assert obs["agent_0"]["round"] == 2
