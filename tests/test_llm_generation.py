"""Generation modes of LLMPolicy against the loopback fake server (issue 14).

``split``: a plan under a schema whose fields are closed choices, then exactly one plain text
request per POST/COM/DM (none for NOT or votes), started as soon as the agent's own plan
arrives; failing text requests give an empty text with the fallback recorded; the cache replays
a split run exactly. ``joint``: texts inside the plan's JSON, as before. And the Plan prompt
carries every element of the core paper's App. A Plan prompt.
"""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from capabilities import need_module

need_module("openai")

import socialgym  # noqa: E402
from socialgym.agents import Coach, LLMPolicy, generate_personas  # noqa: E402
from socialgym.agents.llm_policy import list_users, place_mention  # noqa: E402
from socialgym.llm import LLMClient  # noqa: E402
from socialgym.llm.testing import FakeReply, FakeServer, schema_of  # noqa: E402

TEXT_REPLY = 'Sure! Here is the post: "Solar power keeps getting cheaper. What do you think?"'
CLEANED = "Solar power keeps getting cheaper. What do you think?"


def is_text(body: dict) -> bool:
    return schema_of(body) is None


def purpose(body: dict) -> str:
    if is_text(body):
        return "text"
    return next(iter(schema_of(body).get("properties", {"?": 0})))


def text_or_schema(body, n):
    return TEXT_REPLY if is_text(body) else None


def episode(client, n_agents=4, rounds=3, seed=0, env_kwargs=None, **policy_kwargs):
    policy = LLMPolicy(client, generate_personas(n_agents, seed=seed), **policy_kwargs)
    env = socialgym.parallel_env(n_agents=n_agents, max_rounds=rounds, n_actions=3, seed=seed,
                                 recommender="random", invalid_actions="strict", **(env_kwargs or {}))
    obs, _ = env.reset(seed=seed)
    created = []
    while env.agents:
        obs, _, _, _, _ = env.step(policy.act(obs))
        created += [e for e in env.unwrapped.round_transcript() if e["kind"] != "VOTE"] \
            if obs[next(iter(obs))]["phase"] == "act" else []
    return policy, env, created


def test_split_sends_one_text_request_per_post_com_dm_and_none_for_not_or_votes():
    with FakeServer(text_or_schema) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy, env, created = episode(client, generation="split")
        assert policy.generation_mode == "split"
        kinds = [e["kind"] for e in created]
        texts = [b for b in server.requests if is_text(b)]
        acted = sum(kinds.count(k) for k in ("POST", "COM", "DM"))
        assert acted >= 12 and len(texts) == acted                 # one per POST/COM/DM, none for NOT
        planned_not = sum(a["type"] == "NOT" for b in server.requests if purpose(b) == "actions"
                          for a in json.loads(_reply_of(server, b))["actions"])
        assert planned_not > 0                                      # the random plans did include NOTs
        # plans carry no free text: every string field of the plan schema is an enum or a topic pattern
        plan_schema = schema_of(next(b for b in server.requests if purpose(b) == "actions"))
        assert '"text"' not in json.dumps(plan_schema)
        # votes are JSON; every public/private text is the cleaned plain reply (+ a planned @mention,
        # at the end: the reply does not use the mentioned person's name)
        for e in created:
            assert e["text"] == CLEANED or e["text"] in {f"{CLEANED} @{m}" for m in e["mentions"]}, e["text"]
        assert client.usage.fallbacks == []
        by_purpose = client.usage.by_purpose()
        assert by_purpose["write"]["requests"] == acted


def _reply_of(server, body):
    # the fake's default reply is drawn from the schema with its own RNG; re-derive it from the log
    return server.replies[server.requests.index(body)]


def test_split_text_request_carries_persona_and_the_action():
    with FakeServer(text_or_schema) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy, env, created = episode(client, rounds=2, generation="split")
        texts = [b for b in server.requests if is_text(b)]
        for body in texts:
            system, user = body["messages"]
            assert system["role"] == "system" and system["content"].startswith("You are ")
            assert "One or two sentences" in user["content"]
            assert any(w in user["content"] for w in ("Write a new public post about", "Write a private message to",
                                                      " posted: ", " sent you a private message: "))
        personas = {p.name for p in policy.personas.values()}
        assert {b["messages"][0]["content"].split(",")[0][len("You are "):] for b in texts} <= personas


def test_split_texts_start_as_soon_as_the_agents_own_plan_arrives():
    SLOW_PLAN = 2.0           # the fast agent's plan and its two texts fit well within it, even under load
    arrivals: list[tuple[float, str, str]] = []
    lock = threading.Lock()

    def responder(body, n):
        system = body["messages"][0]["content"]
        who = "slow" if "agent_is_slow" in system else "fast"
        with lock:
            arrivals.append((time.monotonic(), who, purpose(body)))
        if is_text(body):
            return TEXT_REPLY
        if who == "slow" and purpose(body) == "actions":
            return FakeReply(content=None, delay=SLOW_PLAN)     # this agent's plan takes 2 s
        return None

    personas = generate_personas(2, seed=0)
    import dataclasses
    personas[1] = dataclasses.replace(personas[1], description="agent_is_slow")
    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy = LLMPolicy(client, personas, generation="split")
        env = socialgym.parallel_env(n_agents=2, max_rounds=1, n_actions=2, seed=0)
        obs, _ = env.reset(seed=0)
        policy.act(obs)
    slow_plan = next(t for t, who, p in arrivals if who == "slow" and p == "actions")
    fast_texts = [t for t, who, p in arrivals if who == "fast" and p == "text"]
    assert len(fast_texts) == 2
    # no barrier: sent while the slow plan was pending, i.e. before its reply could have gone out
    assert max(fast_texts) < slow_plan + SLOW_PLAN


def test_failing_text_request_gives_empty_text_and_records_the_fallback():
    def responder(body, n):
        return FakeReply(status=400, error="no text for you") if is_text(body) else None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy, env, created = episode(client, rounds=2, generation="split")
        writes = [f for f in client.usage.fallbacks if f.purpose == "write"]
        acted = [e for e in created if e["kind"] in ("POST", "COM", "DM")]
        assert len(writes) == len(acted) > 0
        assert all("HTTP 400" in f.reason and "no text for you" in f.reason for f in writes)
        assert all(f.used.startswith("empty text") for f in writes)
        for e in acted:                  # only a planned @mention remains of the text
            assert e["text"] == "" or (e["text"].startswith("@") and " " not in e["text"])
        assert [f.purpose for f in client.usage.fallbacks if f.purpose != "write"] == []


def test_empty_text_reply_is_a_recorded_fallback():
    def responder(body, n):
        return "   " if is_text(body) else None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        episode(client, n_agents=2, rounds=1, generation="split")
        writes = [f for f in client.usage.fallbacks if f.purpose == "write"]
        assert len(writes) == 2 * 3 and all("no usable text" in f.reason for f in writes)


def test_cache_replays_a_split_run_exactly(tmp_path):
    cache = tmp_path / "c.sqlite"
    with FakeServer(text_or_schema, seed=1) as server, \
            LLMClient(server.base_url, "fake", api_key="k", cache=cache, seed=0) as client:
        _, env1, created1 = episode(client, generation="split")
        sent = len(server.requests)
    with FakeServer(lambda b, n: FakeReply(status=500), seed=2) as server2, \
            LLMClient(server2.base_url, "fake", api_key="k", cache=cache, seed=0) as client2:
        _, env2, created2 = episode(client2, generation="split")
        assert server2.requests == []                           # nothing sent: all from the cache
        assert client2.usage.total()["cached"] == sent
    assert created1 == created2
    assert (env1.unwrapped.tie_matrix() != env2.unwrapped.tie_matrix()).nnz == 0


def test_joint_keeps_texts_in_the_plan_reply():
    with FakeServer() as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy, env, created = episode(client, rounds=2, generation="joint")
        assert policy.generation_mode == "joint"
        assert not any(is_text(b) for b in server.requests)
        plan = schema_of(next(b for b in server.requests if purpose(b) == "actions"))
        assert '"text"' in json.dumps(plan)
        assert sum(e["text"] != "" for e in created) > 0      # the fake's words, from the plan JSON
        per = client.usage.per_agent_round()
        assert per["requests"] == 2.0                          # plan + vote, every agent-round


def test_auto_is_split_for_local_models_and_joint_otherwise():
    class Stub:
        def __init__(self, local=False, model="m", base_url="http://127.0.0.1:1/v1"):
            self.local, self.model, self.base_url = local, model, base_url

    assert LLMPolicy(Stub(local=True)).generation_mode == "split"
    assert LLMPolicy(Stub(model="/models/tiny.Q4_K_M.gguf")).generation_mode == "split"
    assert LLMPolicy(Stub()).generation_mode == "joint"
    assert LLMPolicy(Stub(local=True), generation="joint").generation_mode == "joint"
    assert LLMPolicy(Stub(base_url="https://api.openai.com/v1")).id_mode == "validate"
    assert LLMPolicy(Stub()).id_mode == "enum"
    with pytest.raises(ValueError, match="generation"):
        LLMPolicy(Stub(), generation="both")
    with pytest.raises(ValueError, match="schema_ids"):
        LLMPolicy(Stub(), schema_ids="loose")
    with pytest.raises(ValueError, match="max_users"):
        LLMPolicy(Stub(), max_users=0)


# ------------------------------------------------------------------------ the paper's prompt
def _round2_plan(coached: bool, **kwargs):
    tips = ["DM agent_1 about energy in a supportive tone.", "COM on the most-liked post.",
            "POST a question about food."]

    def responder(body, n):
        if body["messages"][-1]["content"].startswith("Priorities this round"):    # the coach, asked plainly
            return "Here are my tips:\n" + "\n".join(f"- {t}" for t in tips) if is_text(body) else None
        return TEXT_REPLY if is_text(body) else None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        policy = LLMPolicy(client, generate_personas(5, seed=0), coach=Coach(client) if coached else None,
                           generation="split", **kwargs)
        env = socialgym.parallel_env(n_agents=5, max_rounds=2, n_actions=3, seed=0, recommender="random",
                                     feed_size=4)
        obs, _ = env.reset(seed=0)
        while env.agents:
            obs, *_ = env.step(policy.act(obs))
        plans = [b for b in server.requests if purpose(b) == "actions" and "Round 2." in b["messages"][1]["content"]]
        coach = [b for b in server.requests if b["messages"][-1]["content"].startswith("Priorities this round")]
        return plans, coach, tips, policy


def test_plan_prompt_carries_every_element_of_the_papers_plan_prompt():
    plans, _, tips, policy = _round2_plan(coached=True)
    system, user = plans[0]["messages"][0]["content"], plans[0]["messages"][1]["content"]
    assert "exactly 3 actions" in system and "build relationships over the rounds" in system  # game, N
    assert "use what you remember" in system                                                 # memory use
    assert "Your best round so far: round 1, score " in user and "when you did: " in user     # best round
    assert "Your sole aim: raise your score" in system                                       # "only goal"
    assert "Your weights: SOC " in system                                                    # proportions
    for name in ("SOC (social interaction)", "INF (information)", "PRE (self-presentation)",
                 "COORD (coordination)", "EMO (emotional support)"):
        assert name in system                                                                # reward docs
    assert "weights λ that sum to 1" in system                                               # combination
    for rule in ("Answer who wrote to you", "Pick topics you have not met lately",            # five rules
                 "end with a question", "Set mention to a listed user", "A supportive tone brings it"):
        assert rule in system
    assert "Coach's tips: " + " ".join(tips) in user                                         # the tip
    for key in ('"type"', '"topic"', '"target_id"', '"recipient"', '"mention"', '"tone"'):   # keys
        assert key in user
    assert "the listed DM it answers, or null to open a conversation" in user                # DM modes
    assert "Topics may be new." in user                                                      # new topics
    assert "Your actions last round: " in user and "Scores: SOC " in user                    # last round
    assert "Users you can interact with: " in user and "Topics known so far" in user
    assert "DMs sent to you last round" in user and "Posts you can comment on" in user
    uncoached = [b for b in plans if "Coach's tips" not in b["messages"][1]["content"]]
    assert uncoached == [] and len(plans) == 5                                              # all coached
    assert policy.tips["agent_0"] == tips                                                   # read from the lines


def test_coach_prompt_carries_the_papers_elements():
    _, coach, _, _ = _round2_plan(coached=True)
    system, user = coach[0]["messages"][0]["content"], coach[0]["messages"][1]["content"]
    assert "a round's total reward can be at most 1" in system
    assert "3 to 5 tips of one sentence each" in system and "Skip any introduction" in system
    assert "depend on how the other players react" in system and "the first needs the most work" in system
    assert user.startswith("Priorities this round, highest first: ")
    assert "response_format" not in coach[0] and user.endswith("each line starting with '- '.")   # plain
    for part in ("- other users: ", "- sent the player DMs last round: ", "- the player's partners lately: ",
                 "- topics seen so far: ", "- the player's topics over the last three rounds: "):
        assert part in user
    for part in ("an action type (POST, COM or DM)", "'the most-liked post'", "a new one, which helps INF",
                 "@mention the player back (only when COORD is a priority)", "a tone"):
        assert part in user


def test_cut_lists_say_how_many_were_left_out():
    plans, _, _, _ = _round2_plan(coached=False, max_users=2, max_posts=1, max_topics=2)
    user = plans[0]["messages"][1]["content"]
    assert "Users you can interact with: " in user and "(2 more users not listed)" in user   # 4 peers, 2 shown
    assert "(3 more posts not listed)" in user                                               # feed 4, 1 shown
    assert "more topics not listed)" in user
    full, _, _, _ = _round2_plan(coached=False, max_topics=None)
    assert "not listed" not in full[0]["messages"][1]["content"]                             # uncut: all
    users = full[0]["messages"][1]["content"].split("Users you can interact with: ")[1].split("\n")[0]
    # 4 peers of agent_0..agent_4, as a range without the planning agent
    assert re.fullmatch(r"agent_\d to agent_\d( except agent_\d)?", users), users


def test_users_are_listed_as_a_range_when_they_are_numbered():
    assert list_users([f"agent_{i}" for i in range(20) if i != 7]) == "agent_0 to agent_19 except agent_7"
    assert list_users([f"agent_{i}" for i in range(1, 20)]) == "agent_1 to agent_19"
    assert list_users(["agent_0", "agent_2", "agent_4", "agent_5"]) == "agent_0, agent_2, agent_4, agent_5"  # 2 gaps
    assert list_users(["ann", "bob", "cy", "dee"]) == "ann, bob, cy, dee"
    assert list_users(["agent_1", "agent_2"]) == "agent_1, agent_2"                       # too short for a range
    assert list_users(["agent_01", "agent_2", "agent_3", "agent_4"]) == "agent_01, agent_2, agent_3, agent_4"
    assert list_users([]) == "none"


def test_a_mention_takes_the_place_of_the_name_or_goes_at_the_end():
    assert place_mention("Thanks Chloe Silva, good point!", "agent_5", "Chloe Silva") == "Thanks @agent_5, good point!"
    assert place_mention("Chloe, what do you think?", "agent_5", "Chloe Silva") == "@agent_5, what do you think?"
    assert place_mention("Solar is cheap now.", "agent_5", "Chloe Silva") == "Solar is cheap now. @agent_5"
    assert place_mention("Chloesque ideas.", "agent_5", "Chloe Silva") == "Chloesque ideas. @agent_5"   # whole words
    assert place_mention("", "agent_5", "Chloe Silva") == "@agent_5"
