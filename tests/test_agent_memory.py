"""Agent memory (specification §8, issue 14): everything kept, a bounded prompt view, recagent-style
forgetting computed by hand, model-written stance entries, and memory restored from a run's
checkpoint."""

from __future__ import annotations

import json
import pickle

import pytest
from capabilities import need_embedded_model, need_module

from socialgym.agents.memory import AgentMemory, Interaction


def _obs(rnd, *, total=0.0, dms=(), feed=()):
    return {"round": rnd, "agent": "me", "last_rewards": {"total": total}, "dms": list(dms), "feed": list(feed)}


def _one_round(mem, r, text):
    """One round: 2 DMs and 1 mention received, 3 actions (DM, COM with a mention, POST), 2 votes."""
    a, b, c = (f"peer_{(3 * r + k) % 30:02d}" for k in range(3))
    mem.observe(_obs(r, dms=[{"author": a, "round": r - 1, "text": text, "topic": "music"},
                             {"author": b, "round": r - 1, "text": text, "topic": "art"}],
                     feed=[{"id": 1000 + r, "author": c, "round": r - 1, "text": text, "mentions": ["me"],
                            "topic": "food"}]))
    mem.record_actions(r, [{"type": "DM", "recipient": a, "topic": "music", "text": text},
                           {"type": "COM", "target_id": 1000 + r, "mentions": [b], "text": text},
                           {"type": "POST", "topic": "climate", "text": text}], {1000 + r: c})
    mem.record_votes({1000 + r: 1, 2000 + r: -1}, [{"id": 1000 + r, "author": c}])
    mem.record_stance(r, "supports")


def _simulate(mem, rounds, text):
    for r in range(1, rounds + 1):
        _one_round(mem, r, text)


def test_every_interaction_is_kept():
    mem = AgentMemory()
    _simulate(mem, 50, "hello there")
    # per round: 3 received (2 DMs, 1 mention) + 4 sent (DM, COM, its mention of b, POST)
    assert len(mem.conversation) == 50 * 7
    assert len(mem.opinions) == 50 and mem.opinions[0] == (1, "supports")
    assert sum(i.direction == "in" and i.kind == "DM" for i in mem.conversation) == 100
    restored = pickle.loads(pickle.dumps(mem))
    assert restored.conversation == mem.conversation and restored.prompt_block() == mem.prompt_block()


def test_prompt_view_stays_within_its_bound_over_30_rounds():
    gguf = need_embedded_model()                       # the tokenizer of the embedded model
    import llama_cpp

    tokenizer = llama_cpp.Llama(str(gguf), vocab_only=True, verbose=False)
    long_text = "Solar panels and wind farms deserve a closer look from everyone " * 20
    mem = AgentMemory()                                # defaults: max_chars 1000
    sizes = []
    for r in range(1, 31):
        _one_round(mem, r, long_text)
        block = mem.prompt_block()
        sizes.append(len(tokenizer.tokenize(block.encode(), add_bos=False)))
        assert len(block) <= 1000
    assert max(sizes) <= 300                           # the documented bound (docs/llm.md)
    assert len(mem.conversation) == 30 * 7             # while nothing was dropped


def test_retention_is_recagents_curve_by_hand():
    mem = AgentMemory(beta=2.0, delta=0.2)
    mem.round = 5
    dm_in = Interaction(3, "in", "DM", "p", "t", "x")          # s = 1.0, r = 1/3, r^2 = 1/9 < 0.2
    assert mem.retention(dm_in) == pytest.approx((1.0 + 1 / 3) / 2 * 0.2)
    com_out = Interaction(4, "out", "COM", "p", "t", "x")      # s = 0.6, r = 1/2, r^2 = 0.25 > 0.2
    assert mem.retention(com_out) == pytest.approx((0.6 + 0.5) / 2 * 0.25)
    now = Interaction(5, "out", "POST", None, "t", "x")        # s = 0.3, r = 1
    assert mem.retention(now) == pytest.approx((0.3 + 1.0) / 2 * 1.0)


def test_old_comments_fade_from_the_view_while_received_dms_stay():
    mem = AgentMemory(recent=0)                                 # forget_below 0.065
    mem.record_actions(1, [{"type": "COM", "target_id": 7, "text": "nice"}], {7: "commented_on"})
    mem.observe(_obs(1, dms=[{"author": "wrote_me", "round": 1, "text": "hi", "topic": "t"}]))
    mem.round = 20       # age 19: comment retention (0.6 + 1/20) / 2 * 0.2 = 0.065 -> kept
    assert [p for p, _ in mem.older_peers()] == ["wrote_me", "commented_on"]
    mem.round = 21       # age 20: (0.6 + 1/21) / 2 * 0.2 = 0.0648 < 0.065 -> forgotten in the view
    assert [p for p, _ in mem.older_peers()] == ["wrote_me"]    # the DM: (1 + 1/21) / 2 * 0.2 = 0.105
    assert "commented_on" in mem.relationships                 # still remembered
    mem.round = 1000
    assert [p for p, _ in mem.older_peers()] == ["wrote_me"]    # >= (1 + 0) / 2 * 0.2 = 0.1 forever


def test_view_shows_recent_verbatim_then_peers_and_stances():
    mem = AgentMemory(recent=2, peers_in_prompt=5, opinions_in_prompt=2)
    mem.record_actions(1, [{"type": "DM", "recipient": "ann", "topic": "energy", "text": "first"}], {})
    mem.record_stance(1, "supports")
    mem.observe(_obs(2, total=0.4, dms=[{"author": "bob", "round": 1, "text": "second", "topic": "food"}]))
    mem.record_actions(2, [{"type": "POST", "topic": "climate", "text": "third"}], {})
    mem.record_stance(2, "strongly supports")
    mem.record_stance(3, "supports")
    block = mem.prompt_block()
    assert block == ("Earlier, by peer: ann: sent 1, got 0, topics energy, last (round 1): you DM: first\n"
                     "Your stance after each round: r2 strongly supports; r3 supports\n"
                     "Recent exchanges: r1 bob sent you a DM [food]: second | r2 you posted [climate]: third\n")


def test_best_round_and_last_actions():
    mem = AgentMemory()
    totals = {1: 0.5, 2: 1.2, 3: 0.7, 4: 1.2}
    for r in range(1, 6):
        mem.observe(_obs(r, total=totals.get(r - 1, 0.0)))
        if r <= 4:
            mem.record_actions(r, [{"type": "POST", "topic": f"t{r}", "tone": "supportive", "text": "hi"}], {})
    assert mem.best == (2, 1.2, "POST on t2 (supportive)")          # strict >: round 4 does not replace it
    assert mem.best_line() == "Your best round so far: round 2, score 1.20, when you did: POST on t2 (supportive)."
    assert AgentMemory().best_line() == "No best round yet."


def test_relationship_counts_and_lines():
    mem = AgentMemory()
    mem.observe(_obs(3, dms=[{"author": "peer_a", "round": 2, "text": "hello   there", "topic": "t"}],
                     feed=[{"author": "peer_b", "round": 2, "text": "hey @me", "mentions": ["me"], "topic": "u"},
                           {"author": "peer_c", "round": 1, "text": "old", "mentions": ["me"], "topic": "u"},
                           {"author": "peer_d", "round": 2, "text": "not me", "mentions": ["x"], "topic": "u"}]))
    mem.record_actions(3, [{"type": "DM", "recipient": "peer_a", "topic": "t", "text": "hi"},
                           {"type": "COM", "target_id": 5, "mentions": ["peer_c"], "text": "yes"},
                           {"type": "NOT"}], {5: "peer_b"})
    mem.record_votes({5: 1, 6: -1, 7: 0}, [{"id": 5, "author": "peer_b"}, {"id": 6, "author": "peer_b"},
                                           {"id": 7, "author": "peer_e"}])
    rel = mem.relationships
    assert set(rel) == {"peer_a", "peer_b", "peer_c"}          # a 0 vote creates no relationship
    assert (rel["peer_a"].sent, rel["peer_a"].received) == (1, 1)
    assert (rel["peer_b"].sent, rel["peer_b"].received, rel["peer_b"].likes_given, rel["peer_b"].dislikes_given) \
        == (1, 1, 1, 1)
    assert (rel["peer_c"].sent, rel["peer_c"].received) == (1, 0)
    assert rel["peer_b"].brief() == "sent 1, got 1, liked 1, disliked 1"
    assert mem.relationship_line("peer_b") == "sent 1, got 1, liked 1, disliked 1, topics u, " \
                                              "last (round 3): you COM: yes"
    assert mem.relationship_line("nobody") == "no history"
    assert mem.last_actions == ["DM to peer_a on t (neutral)", "COM to peer_b (neutral)", "NOT"]


def test_bad_memory_settings_name_the_field():
    with pytest.raises(ValueError, match="recent"):
        AgentMemory(recent=-1)
    with pytest.raises(ValueError, match="max_chars"):
        AgentMemory(max_chars=3)
    with pytest.raises(ValueError, match="beta"):
        AgentMemory(beta=0.5)


def test_memory_is_restored_from_a_runs_checkpoint(tmp_path):
    """A run against the fake server: the checkpoint's policy holds every interaction of each
    agent, counted independently from events.jsonl."""
    need_module("openai")
    from socialgym.experiments import load_config, run_experiment
    from socialgym.llm.testing import FakeServer

    with FakeServer(lambda body, n: "We should talk about this more." if not body.get("response_format")
                    else None) as server:
        cfg = load_config({"seed": 3, "env": {"n_agents": 4, "max_rounds": 3, "n_actions": 2, "recommender": "random"},
                           "policy": {"kind": "llm", "params": {"generation": "split"}},
                           "llm": {"base_url": server.base_url, "model": "fake", "api_key": "k", "cache": False}})
        run_experiment(cfg, tmp_path / "run", progress=False)
    from socialgym.experiments.run.checkpoint import read_checkpoint
    state = read_checkpoint(tmp_path / "run" / "checkpoint.pkl")
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    for agent, mem in state["policy"].memories.items():
        own = [e for e in events if e["kind"] in ("POST", "COM", "DM") and e["sender"] == agent]
        dms_in = [e for e in events if e["kind"] == "DM" and e["recipient"] == agent and e["round"] < 3]
        assert sum(i.direction == "out" and i.kind in ("POST", "COM", "DM") for i in mem.conversation) == len(own)
        assert sum(i.direction == "in" and i.kind == "DM" for i in mem.conversation) == len(dms_in)
        assert len(mem.opinions) == 3 and all(r == k + 1 for k, (r, _) in enumerate(mem.opinions))


def test_a_full_view_keeps_the_newest_exchange():
    mem = AgentMemory(recent=2, peers_in_prompt=4, max_chars=300)
    _simulate(mem, 6, "Solar panels and wind farms deserve a closer look from everyone today")
    block = mem.prompt_block()
    assert len(block) <= 300 and block.endswith("\n")
    newest = mem.conversation[-1].line(mem.text_chars)
    assert newest in block                          # the older peer summaries were shortened instead
    assert block.splitlines()[0].startswith("Earlier, by peer: ") and block.splitlines()[0].endswith("…")
