"""ArchetypePolicy (issue 34): k archetypes plan for N agents against the loopback fake server.

Request counts scale with k, not N (pool mode); every member acts validly with its own targets;
the clustering is deterministic and puts equal personas together; parameters are checked; the
policy pickles without its client.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import time

import numpy as np
import pytest
from capabilities import need_module

need_module("openai")

import socialgym  # noqa: E402
from socialgym.agents import generate_personas  # noqa: E402
from socialgym.agents.archetype import (  # noqa: E402
    PLAN_NAME, VOTE_NAME, ArchetypePolicy, kmeans, persona_features, pick_item, squared_distances,
)
from socialgym.llm import LLMClient  # noqa: E402
from socialgym.llm.testing import FakeReply, FakeServer, schema_of  # noqa: E402
from socialgym.recommenders.params import ParamError  # noqa: E402

K, POOL, N_ACTIONS = 3, 3, 3


def kind(body: dict) -> str:
    """``text`` for a plain request, else the schema name (archetype_plan / archetype_votes)."""
    fmt = body.get("response_format")
    return "text" if fmt is None else fmt["json_schema"]["name"]


def scripted(body: dict, n: int):
    """Texts "Text number n." (unique); plans: round 1 three POSTs, later COM, DM, NOT on the
    first offered topic; votes: like the first topic, dislike the second, 0 for the rest."""
    what = kind(body)
    if what == "text":
        return f"Text number {n}."
    schema = schema_of(body)
    if what == PLAN_NAME:
        slot = schema["properties"]["actions"]["items"]["properties"]
        types = ["POST"] * 3 if slot["type"]["enum"] == ["POST"] else ["COM", "DM", "NOT"]
        return json.dumps({"actions": [{"type": t, "topic": slot["topic"]["enum"][0], "tone": "supportive"}
                                       for t in types]})
    topics = list(schema["properties"]["topics"]["properties"])
    return json.dumps({"topics": {t: 1 if i == 0 else -1 if i == 1 else 0 for i, t in enumerate(topics)}})


def make_env(n_agents: int, rounds: int = 3):
    return socialgym.parallel_env(n_agents=n_agents, max_rounds=rounds, n_actions=N_ACTIONS, seed=0,
                                  recommender="random", invalid_actions="strict")


def episode(server, client, n_agents: int, rounds: int = 3, **kwargs):
    """Play an episode; per step: the observations, the actions, the requests it sent, the stats."""
    policy = ArchetypePolicy(client, generate_personas(n_agents, seed=0), k=K, pool_size=POOL, **kwargs)
    env = make_env(n_agents, rounds)
    obs, _ = env.reset(seed=0)
    steps = []
    while env.agents:
        before = len(server.requests)
        actions = policy.act(obs)
        steps.append({"obs": obs, "actions": actions, "bodies": list(range(before, len(server.requests))),
                      "stats": dict(policy.round_stats)})
        obs, _, _, _, infos = env.step(actions)           # strict: an invalid action raises
        assert all(info.get("invalid", []) == [] for info in infos.values())
    return policy, steps


def count(server, step: dict, what: str) -> int:
    return sum(kind(server.requests[i]) == what for i in step["bodies"])


def check_own_targets(obs: dict, actions: dict) -> None:
    for agent, payload in actions.items():
        feed = {it["id"]: it for it in obs[agent]["feed"]}
        dms = {d["id"]: d for d in obs[agent]["dms"]}
        for a in payload["actions"]:
            if a["type"] == "COM":
                assert a["target_id"] in feed and feed[a["target_id"]]["author"] != agent
            elif a["type"] == "DM":
                assert a["recipient"] != agent
                if a["target_id"] is not None:
                    assert dms[a["target_id"]]["author"] == a["recipient"]
                else:
                    assert a["recipient"] in {it["author"] for it in feed.values()}


@pytest.mark.parametrize("n_agents", [12, 60])
def test_pool_mode_requests_scale_with_k_not_n(n_agents):
    with FakeServer(scripted) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy, steps = episode(server, client, n_agents)
        assert len(set(policy.archetype_of.values())) == K and len(policy.archetype_of) == n_agents
        act, vote = steps[0::2], steps[1::2]
        assert len(act) == len(vote) == 3
        assert [count(server, s, PLAN_NAME) for s in act] == [K, K, K]
        # round 1: 3 POST slots; later: COM and DM planned (NOT needs no text)
        assert [count(server, s, "text") for s in act] == [K * POOL * 3, K * POOL * 2, K * POOL * 2]
        assert [count(server, s, VOTE_NAME) for s in vote] == [K, K, K]
        assert all(count(server, s, PLAN_NAME) == count(server, s, "text") == 0 for s in vote)
        assert len(server.requests) == 3 * (K + K) + K * POOL * 7
        assert (policy.plans_made, policy.votes_made, policy.texts_made) == (3 * K, 3 * K, K * POOL * 7)
        assert act[1]["stats"] == {"round": 2, "phase": "act", "archetypes": K, "plan_requests": K,
                                   "text_requests": K * POOL * 2, "vote_requests": 0, "fallback_actions": 0,
                                   "empty_texts": 0}
        assert client.usage.fallbacks == []
        replies = 0
        for s in act[1:]:
            for agent, payload in s["actions"].items():
                assert [a["type"] for a in payload["actions"]] == ["COM", "DM", "NOT"]
                dms = s["obs"][agent]["dms"]          # a DM answers the newest DM received, if any
                assert payload["actions"][1]["target_id"] == (max(d["id"] for d in dms) if dms else None)
                replies += bool(dms)
            check_own_targets(s["obs"], s["actions"])
        assert replies > n_agents // 2               # round 3: most got a DM in round 2


def test_members_draw_texts_from_their_archetypes_pool():
    with FakeServer(scripted) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy, steps = episode(server, client, 12, rounds=2)
        for s in steps[0::2]:
            speaker_of = {server.replies[i]: server.requests[i]["messages"][0]["content"]
                          for i in s["bodies"] if kind(server.requests[i]) == "text"}
            for agent, payload in s["actions"].items():
                rep = policy.representatives[policy.archetype_of[agent]]
                for a in payload["actions"]:
                    if a["type"] != "NOT":
                        assert speaker_of[a["text"]] == policy.persona_block(rep)
            used = {a["text"] for p in s["actions"].values() for a in p["actions"] if a["type"] != "NOT"}
            assert 1 < len(used) <= len(speaker_of)


def test_members_vote_their_own_items_by_the_archetypes_verdict():
    with FakeServer(scripted) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy, steps = episode(server, client, 12, rounds=2)
        for s in steps[1::2]:
            verdicts = {}
            for i in s["bodies"]:
                topics = list(schema_of(server.requests[i])["properties"]["topics"]["properties"])
                verdicts[server.requests[i]["messages"][0]["content"]] = \
                    {t: 1 if j == 0 else -1 if j == 1 else 0 for j, t in enumerate(topics)}
            assert len(verdicts) == K
            for agent, payload in s["actions"].items():
                verdict = verdicts[policy.persona_block(policy.representatives[policy.archetype_of[agent]])]
                items = s["obs"][agent]["vote_items"]
                assert payload["votes"] == {it["id"]: verdict.get(it["topic"], 0) for it in items}
                assert any(v != 0 for v in payload["votes"].values())


@pytest.mark.parametrize("n_agents", [12, 60])
def test_member_mode_sends_one_text_per_member_action(n_agents):
    with FakeServer(scripted) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy, steps = episode(server, client, n_agents, texts="member")
        for s in steps[0::2]:
            acted = [(agent, a) for agent, p in s["actions"].items() for a in p["actions"] if a["type"] != "NOT"]
            assert count(server, s, "text") == len(acted) == n_agents * (3 if s["obs"]["agent_0"]["round"] == 1 else 2)
            assert count(server, s, PLAN_NAME) == K
            systems = [server.requests[i]["messages"][0]["content"] for i in s["bodies"]
                       if kind(server.requests[i]) == "text"]
            for agent in s["actions"]:         # each member's texts are asked with its own persona
                mine = sum(a["type"] != "NOT" for a in s["actions"][agent]["actions"])
                assert systems.count(policy.persona_block(agent)) == mine
            check_own_targets(s["obs"], s["actions"])
        for s in steps[2::2]:                    # rounds 2 and 3: each member's COM text quotes its own target
            asked = {}
            for i in s["bodies"]:
                system, user = (m["content"] for m in server.requests[i]["messages"])
                if kind(server.requests[i]) == "text" and " posted: " in user:
                    asked.setdefault(system, []).append(user)
            for agent, payload in s["actions"].items():
                feed = {it["id"]: it for it in s["obs"][agent]["feed"]}
                target = feed[payload["actions"][0]["target_id"]]
                [user] = asked[policy.persona_block(agent)]
                assert f'"{target["text"]}"' in user and target["text"].startswith("Text number")


def test_random_plans_with_not_give_valid_actions_and_the_pool_formula():
    # the fake's default replies: random schema instances, NOTs included
    with FakeServer() as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        _, steps = episode(server, client, 12)
        for s in steps[0::2]:
            plans = [json.loads(server.replies[i])["actions"] for i in s["bodies"]
                     if kind(server.requests[i]) == PLAN_NAME]
            assert len(plans) == K
            planned = sum(slot["type"] != "NOT" for plan in plans for slot in plan)
            assert count(server, s, "text") == POOL * planned
            check_own_targets(s["obs"], s["actions"])
        assert client.usage.fallbacks == [] and all(s["stats"]["fallback_actions"] == 0 for s in steps)


def test_a_member_that_cannot_comment_posts_instead_and_it_is_counted():
    with FakeServer(scripted) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy = ArchetypePolicy(client, generate_personas(6, seed=0), k=2, pool_size=1)
        env = make_env(6)
        obs, _ = env.reset(seed=0)
        for _ in range(2):
            obs, *_ = env.step(policy.act(obs))
        obs["agent_0"]["feed"] = []               # nothing to comment on, nobody seen
        actions = policy.act(obs)
        mine = actions["agent_0"]["actions"]
        assert [a["type"] for a in mine] == ["POST", "DM", "NOT"]
        assert mine[0]["text"] == "" and mine[1]["recipient"] != "agent_0"
        assert policy.round_stats["fallback_actions"] == 1
        assert policy.round_stats["empty_texts"] == 1      # the plan had no POST slot: no pool to draw from
        fallbacks = client.usage.fallbacks
        assert [(f.agent, f.purpose, f.slot) for f in fallbacks] == [("agent_0", "execute", 0), ("agent_0", "write", 0)]
        env.step(actions)                          # strict: still valid


def test_failed_texts_and_plans_fall_back_and_are_recorded():
    def responder(body, n):
        if kind(body) == "text":
            return FakeReply(status=400, error="no text")
        if kind(body) == PLAN_NAME:
            return "not json at all"
        return None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key="k", max_repairs=0) as client:
        policy = ArchetypePolicy(client, generate_personas(6, seed=0), k=2, pool_size=2)
        env = make_env(6)
        obs, _ = env.reset(seed=0)
        actions = policy.act(obs)                  # round 1: a failed plan becomes POSTs
        for agent, payload in actions.items():
            topic = policy.personas[policy.representatives[policy.archetype_of[agent]]].interests[0]
            assert payload["actions"] == [{"type": "POST", "topic": topic, "tone": "neutral", "mentions": [],
                                           "text": ""}] * 3
        purposes = [f.purpose for f in client.usage.fallbacks]
        assert purposes.count("plan") == 2 * 3 and purposes.count("write") == 2 * 3 * 2 + 6 * 3
        obs, *_ = env.step(actions)
        obs, *_ = env.step(policy.act(obs))
        actions = policy.act(obs)                  # later rounds: NOT
        assert all(p["actions"] == [{"type": "NOT"}] * 3 for p in actions.values())


def test_plan_requests_go_out_concurrently():
    arrivals = []
    delay = {"plan": 0.0}

    def slow_plans(body, n):
        reply = scripted(body, n)
        if kind(body) != PLAN_NAME:
            return reply
        arrivals.append(time.monotonic())
        return FakeReply(content=reply, delay=delay["plan"])

    with FakeServer(slow_plans) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy = ArchetypePolicy(client, generate_personas(12, seed=0), k=K)
        env = make_env(12)
        obs, _ = env.reset(seed=0)
        for _ in range(2):            # round 1 (the client finds the server's JSON form on its first request)
            obs, *_ = env.step(policy.act(obs))
        arrivals.clear()
        delay["plan"] = 2.0
        policy.act(obs)
    # none waited for another: every plan arrived before the first one's reply (2 s after it)
    # could have been sent; one after another they would be >= 2 s apart
    assert len(arrivals) == K and max(arrivals) - min(arrivals) < delay["plan"]


def test_pick_item_prefers_unused_then_the_plans_topic_then_likes():
    items = [{"id": 1, "topic": "a", "likes": 5}, {"id": 2, "topic": "b", "likes": 1},
             {"id": 3, "topic": "b", "likes": 4}, {"id": 4, "topic": "b", "likes": 4}]
    assert pick_item(items, "b", set())["id"] == 4           # topic b, 4 likes, newest
    assert pick_item(items, "b", {4})["id"] == 3
    assert pick_item(items, "c", set())["id"] == 1           # no item on c: the most liked
    assert pick_item(items, "a", {1, 2, 3, 4})["id"] == 1    # all used: reuse the best
    assert pick_item([], "a", set()) is None


# ---------------------------------------------------------------------------- clustering
def test_kmeans_recovers_separated_groups_and_numbers_them_by_first_row():
    x = np.array([[5.0, 5.0], [0.0, 0.0], [5.0, 5.2], [9.0, 0.0], [0.0, 0.2], [9.0, 0.2]])
    labels, centers = kmeans(x, 3, seed=1)
    assert labels.tolist() == [0, 1, 0, 2, 1, 2]
    np.testing.assert_allclose(centers, [[5.0, 5.1], [0.0, 0.1], [9.0, 0.1]])
    labels, centers = kmeans(x[[0, 0, 1, 1]], 3, seed=0)           # two distinct rows: k cut to 2
    assert labels.tolist() == [0, 0, 1, 1] and centers.shape == (2, 2)


def test_kmeans_is_deterministic_for_a_seed():
    x = np.random.default_rng(3).normal(size=(200, 6))
    a, b = kmeans(x, 8, seed=11), kmeans(x, 8, seed=11)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert sorted(set(a[0].tolist())) == list(range(8))            # no empty archetype
    p1 = ArchetypePolicy(None, generate_personas(40, seed=2), k=5, seed=7)
    p2 = ArchetypePolicy(None, generate_personas(40, seed=2), k=5, seed=7)
    agents = [f"agent_{i}" for i in range(40)]
    p1.assign_personas(agents)
    p2.assign_personas(agents)
    assert p1.archetype_of == p2.archetype_of and p1.representatives == p2.representatives
    assert np.array_equal(p1.centroids, p2.centroids)
    assert len(set(p1.archetype_of.values())) == 5


def test_equal_personas_share_an_archetype_and_late_agents_join_the_nearest():
    a, b, c = generate_personas(3, seed=4)
    personas = {f"agent_{i}": p for i, p in enumerate([a] * 4 + [b] * 4 + [c] * 4)}
    personas["agent_12"] = a                                           # arrives later
    personas["agent_13"] = dataclasses.replace(c, name="Someone Else")    # the name is no feature
    policy = ArchetypePolicy(None, personas, k=5)
    policy.assign_personas([f"agent_{i}" for i in range(12)])
    groups = [{policy.archetype_of[f"agent_{i}"] for i in range(g, g + 4)} for g in (0, 4, 8)]
    assert all(len(g) == 1 for g in groups) and len(set.union(*groups)) == 3        # k cut to 3 distinct
    assert len(policy.representatives) == 3
    assert [policy.archetype_of[r] for r in policy.representatives] == [0, 1, 2]
    policy.assign_personas([f"agent_{i}" for i in range(14)])
    assert policy.archetype_of["agent_12"] == policy.archetype_of["agent_0"]
    assert policy.archetype_of["agent_13"] == policy.archetype_of["agent_8"]
    x = persona_features([personas["agent_13"]], *policy.feature_space)
    assert policy.archetype_of["agent_13"] == int(squared_distances(x, policy.centroids).argmin())


# ---------------------------------------------------------------------------- parameters, pickling
@pytest.mark.parametrize("name, value", [
    ("k", 0), ("k", 1001), ("k", 2.5), ("k", True), ("k", "3"), ("texts", "all"), ("texts", None),
    ("pool_size", 0), ("pool_size", 21), ("pool_size", 1.0), ("text_chars", 5), ("item_chars", "40"),
    ("max_posts", 0), ("max_vote_items", -1), ("seed", -1), ("prompts", "default")])
def test_check_params_rejects_bad_values_naming_the_parameter(name, value):
    with pytest.raises(ParamError, match=name) as err:
        ArchetypePolicy.check_params(**{name: value})
    assert err.value.param == name
    with pytest.raises(ParamError, match=name):
        ArchetypePolicy(None, None, **{name: value})


def test_check_params_accepts_good_values_and_rejects_unknown_keywords():
    ArchetypePolicy.check_params(k=1, texts="member", pool_size=20, seed=None, text_chars=10, item_chars=40,
                                 max_posts=None, max_vote_items=1, prompts=None)
    ArchetypePolicy.check_params(k=1000, texts="pool", pool_size=1)
    with pytest.raises(TypeError):
        ArchetypePolicy.check_params(kk=3)


def test_policy_pickles_without_its_client_and_carries_on():
    with FakeServer(scripted) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy = ArchetypePolicy(client, generate_personas(12, seed=0), k=K)
        env = make_env(12)
        obs, _ = env.reset(seed=0)
        obs, *_ = env.step(policy.act(obs))
        restored = pickle.loads(pickle.dumps(policy))
        assert restored.client is None and policy.client is client
        assert restored.archetype_of == policy.archetype_of and restored.representatives == policy.representatives
        assert restored.plans_made == 1 * K and np.array_equal(restored.centroids, policy.centroids)
        restored.client = client
        before = len(server.requests)
        obs, *_ = env.step(restored.act(obs))              # the vote step, then round 2
        restored.act(obs)
        assert sum(kind(b) == PLAN_NAME for b in server.requests[before:]) == K
