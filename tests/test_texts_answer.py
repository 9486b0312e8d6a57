"""Texts that answer each other (issue 30): what a text request carries, and its sampling seed.

A COM's request quotes the post it replies to (and, for a comment on a comment, the post above
it); a DM's request the latest messages with its recipient; a POST's the agent's own latest
posts. Every request has its own seed per (agent, round, purpose, slot), so equal prompts do
not give equal texts, while a rerun with the same seed sends the same requests.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from capabilities import need_module

need_module("openai")

import socialgym  # noqa: E402
from socialgym.agents import LLMPolicy, generate_personas  # noqa: E402
from socialgym.llm import LLMClient  # noqa: E402
from socialgym.llm.testing import FakeServer, schema_of  # noqa: E402

SENTENCES = ("Heat pumps cut my winter bill by a third.", "Our town planted two hundred trees.",
             "Buses at night need a charging plan.", "Farmers need support, not lectures.",
             "The flood showed how old our drains are.", "Solar on school roofs teaches kids too.")


def by_seed(body, n):
    """Texts picked by the request's seed and prompt: a pure function of the request."""
    if schema_of(body) is not None:
        return None
    digest = hashlib.sha256(json.dumps([body["messages"], body.get("seed")]).encode()).digest()
    return SENTENCES[digest[0] % len(SENTENCES)]


def policy_with_memory():
    personas = generate_personas(3, seed=1)
    policy = LLMPolicy(None, personas, item_chars=40)
    policy.assign_personas(["agent_0", "agent_1", "agent_2"])
    return policy, {a: p.name for a, p in zip(["agent_0", "agent_1", "agent_2"], personas)}


def user_of(messages):
    return messages[1]["content"]


def test_a_comment_quotes_its_post_and_the_post_above_a_comment():
    policy, names = policy_with_memory()
    post = {"id": 4, "type": "POST", "author": "agent_1", "topic": "energy", "target_id": None,
            "text": "Wind farms should go offshore where nobody minds the noise."}
    comment = {"id": 9, "type": "COM", "author": "agent_2", "topic": "energy", "target_id": 4,
               "text": "Offshore costs twice as much per megawatt."}
    policy._remember_items({"feed": [post, comment], "dms": []})
    action = {"type": "COM", "target_id": 9, "tone": "critical", "mention": None}
    user = user_of(policy.text_messages("agent_0", action, {9: comment}))
    # the comment answered whole (text_chars = 200), the post above it cut to item_chars = 40
    assert f'{names["agent_2"]} posted: "Offshore costs twice as much per megawatt."' in user
    assert f'{names["agent_1"]} posted: "Wind farms should go offshore where nob…"' in user
    assert user.index(names["agent_1"]) < user.index(names["agent_2"])          # the thread's head first
    on_post = user_of(policy.text_messages("agent_0", {**action, "target_id": 4}, {4: post}))
    assert on_post.count(" posted: ") == 1                                      # a post has no head


def test_a_dm_carries_the_conversation_with_its_recipient():
    policy, names = policy_with_memory()
    mem = policy.memories["agent_0"]
    mem.record_actions(1, [{"type": "DM", "recipient": "agent_1", "topic": "food", "text": "Do you grow your own?"},
                           {"type": "DM", "recipient": "agent_2", "topic": "food", "text": "Not for agent_1."}], {})
    mem.observe({"round": 2, "agent": "agent_0", "last_rewards": {"total": 0.1}, "feed": [],
                 "dms": [{"round": 1, "author": "agent_1", "topic": "food", "text": "Only tomatoes, sadly."}]})
    reply = {"type": "DM", "recipient": "agent_1", "target_id": 7, "tone": "supportive"}
    dm = {"id": 7, "type": "DM", "author": "agent_1", "topic": "food", "text": "Only tomatoes, sadly."}
    user = user_of(policy.text_messages("agent_0", reply, {7: dm}))
    assert f'Your latest messages with {names["agent_1"]}:\n- you: "Do you grow your own?"\n' in user
    assert user.count("Only tomatoes, sadly.") == 1                  # the DM answered is quoted once, below
    assert f'{names["agent_1"]} sent you a private message: "Only tomatoes, sadly."' in user
    assert "Not for agent_1." not in user                            # another peer's conversation
    new = user_of(policy.text_messages("agent_0", {"type": "DM", "recipient": "agent_1", "target_id": None,
                                                       "topic": "food", "tone": "neutral"}, {}))
    assert f'- you: "Do you grow your own?"\n- {names["agent_1"]}: "Only tomatoes, sadly."\n' in new
    other = user_of(policy.text_messages("agent_0", {"type": "DM", "recipient": "agent_2", "target_id": None, "topic": "x", "tone": "neutral"}, {}))
    assert f'Your latest messages with {names["agent_2"]}:\n- you: "Not for agent_1."\n' in other
    assert "tomatoes" not in other


def test_a_post_quotes_the_agents_two_latest_posts():
    policy, _ = policy_with_memory()
    mem = policy.memories["agent_0"]
    for r, text in enumerate(("First post.", "Second post.", "Third post."), start=1):
        mem.record_actions(r, [{"type": "POST", "topic": "t", "text": text}], {})
    user = user_of(policy.text_messages("agent_0", {"type": "POST", "topic": "t", "tone": "neutral",
                                                        "mention": None}, {}))
    assert user.startswith('Your recent posts: "Second post." | "Third post."\n')
    first = user_of(policy.text_messages("agent_1", {"type": "POST", "topic": "t", "tone": "neutral",
                                                         "mention": None}, {}))
    assert first.startswith("Write a new public post about t in a neutral tone.")   # nothing posted yet


def test_seeds_differ_per_agent_round_and_slot_and_repeat_in_a_rerun():
    policy, _ = policy_with_memory()
    seeds = {policy.request_seed(a, r, "write", s) for a in ("agent_0", "agent_1") for r in (1, 2) for s in (0, 1, 2)}
    assert len(seeds) == 12 and all(0 <= s < 2**31 for s in seeds)
    again, _ = policy_with_memory()
    assert again.request_seed("agent_1", 2, "write", 1) == policy.request_seed("agent_1", 2, "write", 1)
    other = LLMPolicy(None, generate_personas(3, seed=1), seed=5)
    assert other.request_seed("agent_1", 2, "write", 1) != policy.request_seed("agent_1", 2, "write", 1)


def run_episode(server, cache=None, same_persona=False):
    personas = generate_personas(4, seed=0)
    if same_persona:                       # four copies of one persona: equal prompts across agents
        personas = [personas[0]] * 4
    with LLMClient(server.base_url, "fake", api_key="k", cache=cache, seed=0) as client:
        policy = LLMPolicy(client, personas, generation="split")
        env = socialgym.parallel_env(n_agents=4, max_rounds=3, n_actions=3, seed=0, recommender="random")
        obs, _ = env.reset(seed=0)
        created = []
        while env.agents:
            obs, *_ = env.step(policy.act(obs))
            if obs and obs[next(iter(obs))]["phase"] == "vote":
                created += [e for e in env.unwrapped.round_transcript() if e["kind"] != "VOTE"]
            obs, *_ = env.step(policy.act(obs))
        return created, client.usage.total()


def test_against_the_fake_comments_quote_their_targets_equal_prompts_get_other_seeds_and_reruns_repeat(tmp_path):
    with FakeServer(by_seed) as server:
        created, _ = run_episode(server, same_persona=True)
        texts = [b for b in server.requests if schema_of(b) is None]
    by_id = {e["id"]: e for e in created}
    coms = [e for e in created if e["kind"] == "COM" and e["target_id"] in by_id and by_id[e["target_id"]]["text"]]
    assert coms, "the random plans made comments on texts"
    for e in coms:
        quoted = by_id[e["target_id"]]["text"][:47]
        assert any(f'posted: "{quoted}' in b["messages"][1]["content"] for b in texts), e
    prompts: dict[str, set] = {}
    for b in texts:
        prompts.setdefault(json.dumps(b["messages"]), set()).add(b["seed"])
    repeated = [len(s) for k, s in prompts.items() if sum(json.dumps(b["messages"]) == k for b in texts) > 1]
    assert repeated, "four agents with one persona sent equal prompts"
    for k, seeds in prompts.items():            # equal prompts: one seed per request, never shared
        assert len(seeds) == sum(json.dumps(b["messages"]) == k for b in texts)
    # a rerun (a fresh server) sends the same requests and creates the same texts
    with FakeServer(by_seed) as server2:
        again, _ = run_episode(server2, same_persona=True)
        assert sorted(json.dumps(b, sort_keys=True) for b in server2.requests) == \
            sorted(json.dumps(b, sort_keys=True) for b in server.requests)
    assert again == created
    # with a cache, the rerun is served from it entirely and gives the same texts
    cache = tmp_path / "cache.sqlite"
    with FakeServer(by_seed) as s3:
        first, _ = run_episode(s3, cache=cache)
    with FakeServer(by_seed) as s4:
        replay, usage = run_episode(s4, cache=cache)
        assert s4.requests == [] and usage["cached"] == usage["requests"] > 0
    assert replay == first


def test_own_posts_sets_how_many_are_quoted_and_0_quotes_none():
    policy, _ = policy_with_memory()
    for r, text in enumerate(("First post.", "Second post.", "Third post."), start=1):
        policy.memories["agent_0"].record_actions(r, [{"type": "POST", "topic": "t", "text": text}], {})
    post = {"type": "POST", "topic": "t", "tone": "neutral", "mention": None}
    policy.own_posts = 1
    assert user_of(policy.text_messages("agent_0", post, {})).startswith('Your recent posts: "Third post."\n')
    policy.own_posts = 0
    assert user_of(policy.text_messages("agent_0", post, {})).startswith("Write a new public post about t")
    for bad in (-1, 21, 1.5, "2"):
        with pytest.raises(ValueError, match="own_posts"):
            LLMPolicy.check_params(own_posts=bad)
