"""End-to-end with the embedded model (SmolLM2-135M-Instruct via llama.cpp's server).

Needs the ``local`` extra, which ``make test`` installs. About a minute on two cores.
"""

from __future__ import annotations

import os

import pytest
from capabilities import need_embedded_model, need_module, need_wordlist

need_embedded_model()
need_module("openai")

import socialgym  # noqa: E402
from socialgym.agents import LLMPolicy, generate_personas, lambdas_matrix  # noqa: E402
from socialgym.llm import LLMClient, local_server  # noqa: E402


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_three_agents_two_rounds_valid_without_fallbacks():
    personas = generate_personas(3, seed=0)
    with local_server() as server:
        pid = server.pid
        with LLMClient(server.base_url, server.model, api_key=server.api_key, seed=0, temperature=0.7) as client:
            policy = LLMPolicy(client, personas, generation="joint", text_chars=80, new_topics=False,
                               max_users=3, max_posts=3, max_vote_items=4, max_topics=5)
            env = socialgym.parallel_env(n_agents=3, max_rounds=2, n_actions=2, seed=0, recommender="random",
                                         feed_size=3, vote_feed_size=4, lambdas=lambdas_matrix(personas),
                                         invalid_actions="strict")
            obs, _ = env.reset(seed=0)
            steps = 0
            while env.agents:
                obs, rewards, _, _, infos = env.step(policy.act(obs))   # strict env: raises on any invalid action
                steps += 1
                assert all(info["invalid"] == [] for info in infos.values())
            assert steps == 4
            assert client.mode == "json_object"          # llama-cpp-python's server form, detected
            assert client.usage.fallbacks == []          # the schema made every reply valid
            total = client.usage.total()
            assert total["requests"] >= 3 * 2 * 2 - 3    # plan per agent-round, votes where items exist
            assert total["completion_tokens"] > 0
            kinds = [e["kind"] for e in env.unwrapped.round_transcript()]
            assert kinds.count("POST") + kinds.count("COM") + kinds.count("DM") >= 1
    assert not _alive(pid)                                # stopped on exit


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_split_generation_writes_english_on_the_embedded_model():
    """3 agents x 2 rounds, split: closed choices under the schema, texts asked for plainly. The
    texts must be English-like (>= 80 % of words in the word list, @mentions removed)."""
    from socialgym.agents.demo import COMPACT_POLICY
    from socialgym.metrics.language import english_share

    words = need_wordlist()
    personas = generate_personas(3, seed=1)
    with local_server() as server:
        with LLMClient(server.base_url, server.model, api_key=server.api_key, seed=0, max_concurrency=1,
                       local=True) as client:
            policy = LLMPolicy(client, personas, **{**COMPACT_POLICY, "generation": "auto"})
            assert policy.generation_mode == "split"
            env = socialgym.parallel_env(n_agents=3, max_rounds=2, n_actions=2, seed=0, recommender="random",
                                         feed_size=3, vote_feed_size=3, lambdas=lambdas_matrix(personas),
                                         invalid_actions="strict")
            obs, _ = env.reset(seed=0)
            texts = []
            while env.agents:
                obs, _, _, _, infos = env.step(policy.act(obs))
                texts += [e["text"] for e in env.unwrapped.round_transcript()
                          if e["kind"] in ("POST", "COM", "DM")] if obs[next(iter(obs))]["phase"] == "act" else []
            assert client.usage.fallbacks == []
            writes = client.usage.by_purpose()["write"]["requests"]
    assert len(texts) == writes >= 6                     # one plain request per text
    quality = english_share(texts, words)
    assert quality["share"] >= 0.9, (quality, texts)


def test_server_stops_on_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt):
        with local_server() as server:
            pid = server.pid
            raise KeyboardInterrupt
    assert not _alive(pid)


def test_bad_model_path():
    with pytest.raises(FileNotFoundError, match="does not exist"):
        with local_server("/nonexistent/model.gguf"):
            pass
