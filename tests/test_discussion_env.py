"""The discussion environment: PettingZoo API, turn-taking (eq. 3), moderator turns, bans,
invalid input, context length, the content store, and rewards computed by hand."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test

import socialgym
from socialgym.annotation import LexiconAnnotator, ScriptedAnnotator, annotate_discussion
from socialgym.baselines.discussion import ScriptedModerator, ScriptedUser
from socialgym.discussion import DiscussionConfig, paper_turn, run_discussion, score_discussion
from socialgym.platform.actions import COM, POST


def make(**kw):
    kw.setdefault("seed", 0)
    return socialgym.discussion_env(**kw)


# ---------------------------------------------------------------------------- PettingZoo API
@pytest.mark.parametrize("moderator", [True, False])
@pytest.mark.parametrize("annotated", [True, False])
def test_pettingzoo_api(moderator, annotated):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # "observation is not a numpy array": it is a Dict space
        for seed in range(3):
            env = make(n_users=4, roles={"user_3": "troll"}, max_turns=12, moderator=moderator, seed=seed,
                       annotator=LexiconAnnotator(3) if annotated else None)
            api_test(env, num_cycles=400)


def test_metadata_and_registry():
    env = socialgym.make("socialgym/discussion-v0", n_users=3)
    assert env.unwrapped.metadata["name"] == "socialgym_discussion_v0"
    assert env.unwrapped.metadata["is_parallelizable"] is False
    assert env.unwrapped.possible_agents == ["user_0", "user_1", "user_2", "moderator"]
    raw = env.unwrapped
    assert raw.observation_space("user_0") is raw.observation_space("user_0")
    assert raw.action_space("moderator") is raw.action_space("moderator")


# ---------------------------------------------------------------------------- turn taking
def _sequences(n_users, length, draws, seed=0):
    rng = np.random.default_rng(seed)
    active = list(range(n_users))
    out = np.empty((draws, length), int)
    for d in range(draws):
        history = []
        for _ in range(length):
            history.append(paper_turn(history, active, rng))
        out[d] = history
    return out


def _close(p_hat, p, n):
    """Within 4.5 binomial standard errors (false alarm about 1e-5 per check)."""
    return abs(p_hat - p) <= 4.5 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_paper_turn_taking_matches_eq3():
    n = 5
    seqs = _sequences(n, 8, 6000)
    # i = 1, 2: uniform over U (and independent: t(2) == t(1) with probability 1/n)
    for i in (0, 1):
        for u in range(n):
            assert _close((seqs[:, i] == u).mean(), 1 / n, len(seqs))
    assert _close((seqs[:, 1] == seqs[:, 0]).mean(), 1 / n, len(seqs))
    prev, before, now = seqs[:, 1:-1].ravel(), seqs[:, :-2].ravel(), seqs[:, 2:].ravel()
    differ = prev != before
    # t(i-1) != t(i-2): 0.4 -> t(i-2); 0.6 -> uniform over the n-1 others, which include t(i-2)
    assert _close((now[differ] == before[differ]).mean(), 0.4 + 0.6 / (n - 1), differ.sum())
    assert (now[differ] != prev[differ]).all()          # never the previous speaker
    third = (now != prev) & (now != before)
    assert _close(third[differ].mean(), 0.6 * (n - 2) / (n - 1), differ.sum())
    # t(i-1) == t(i-2) (possible after t(1) == t(2)): 0.4 -> that same user again
    same = ~differ
    assert same.sum() > 500
    assert _close((now[same] == prev[same]).mean(), 0.4, same.sum())


def test_turn_taking_through_the_environment():
    env = make(n_users=4, moderator=False, max_turns=200, turn_taking="paper", seed=5).unwrapped
    run_discussion(env, lambda a, o, i: "x", seed=5)
    speakers = [int(r["agent"].split("_")[1]) for r in env.turn_log]
    assert len(speakers) == 200
    s = np.array(speakers)
    prev, before, now = s[1:-1], s[:-2], s[2:]
    assert (now[prev != before] != prev[prev != before]).all()
    assert 0.4 < (now[prev != before] == before[prev != before]).mean() < 0.75   # eq. 3: 0.6


def test_round_robin_random_and_custom():
    env = make(n_users=3, moderator=False, max_turns=7, turn_taking="round_robin").unwrapped
    run_discussion(env, lambda a, o, i: "hi")
    assert [r["agent"] for r in env.turn_log] == ["user_0", "user_1", "user_2", "user_0", "user_1", "user_2", "user_0"]
    env = make(n_users=3, moderator=False, max_turns=3000, turn_taking="random", seed=2).unwrapped
    run_discussion(env, lambda a, o, i: "")
    counts = np.bincount([int(r["agent"][-1]) for r in env.turn_log], minlength=3)
    assert all(_close(c / 3000, 1 / 3, 3000) for c in counts)
    env = make(n_users=3, moderator=False, max_turns=4, turn_taking=lambda h, active, rng: active[-1]).unwrapped
    run_discussion(env, lambda a, o, i: "")
    assert {r["agent"] for r in env.turn_log} == {"user_2"}
    with pytest.raises(ValueError, match="turn-taking function returned 7"):
        make(n_users=3, turn_taking=lambda h, a, rng: 7).reset()


# ---------------------------------------------------------------------------- moderator
def test_moderator_alternates_and_silence_writes_nothing():
    env = make(n_users=3, max_turns=4, turn_taking="round_robin").unwrapped
    replies = iter(["", "@user_1 calm down please", "", ""])
    result = run_discussion(env, {"users": lambda a, o, i: f"comment by {a}", "moderator": lambda a, o, i: next(replies)})
    agents = [r["agent"] for r in result["turns"]]
    assert agents == ["user_0", "moderator", "user_1", "moderator", "user_2", "moderator", "user_0", "moderator"]
    assert [r["text"] for r in result["turns"] if r["agent"] == "moderator"] == ["", "@user_1 calm down please", "", ""]
    kinds, authors = env.store.column("kind"), env.store.column("author")
    assert kinds.tolist() == [POST] + [COM] * 5               # 4 user comments + 1 moderator reply
    assert authors.tolist() == [-1, 0, 1, 3, 2, 0]           # the seed post, users, moderator = index 3
    texts = env.store.texts
    assert texts[1:] == ["comment by user_0", "comment by user_1", "@user_1 calm down please",
                         "comment by user_2", "comment by user_0"]
    assert env.store.mentions_of(3) == [1]
    # the moderator's reply to @user_1 replies to user_1's latest comment (content id 2)
    assert env.store.column("target_id")[3] == 2


def test_ban_is_enforced_and_the_banned_user_leaves():
    env = make(n_users=3, max_turns=12, turn_taking="round_robin").unwrapped
    mod = iter([{"text": "@user_1 you are banned", "ban": "user_1"}] + [""] * 20)
    env.reset()
    seen = []
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        seen.append((agent, term))
        if term or trunc:
            env.step(None)
            continue
        env.step(next(mod) if agent == "moderator" else "hello")
    speakers = [r["agent"] for r in env.turn_log if r["agent"] != "moderator"]
    assert speakers[0] == "user_0"
    assert "user_1" not in speakers                      # banned at the first moderator turn
    assert ("user_1", True) in seen                       # its dead step, then it is gone
    assert env.banned.tolist() == [False, True, False]
    assert env.turn_log[1]["banned"] == ["user_1"]
    assert len(speakers) == 12


def test_warnings_ban_at_the_limit_and_bad_targets():
    env = make(n_users=3, max_turns=6, turn_taking="round_robin", ban_after_warnings=2).unwrapped
    env.reset()
    env.step("a")                                              # user_0
    env.step({"text": "@user_2 careful", "warn": 3})           # Discrete encoding: 3 = user_2
    assert env.warnings.tolist() == [0, 0, 1] and not env.banned.any()
    env.step("b")                                              # user_1
    env.step({"text": "", "warn": "user_2"})                   # second warning -> banned
    assert env.banned.tolist() == [False, False, True]
    assert env.turn_log[-1]["warned"] == ["user_2"] and env.turn_log[-1]["banned"] == ["user_2"]
    assert env.terminations["user_2"]
    env.step(None)                                             # user_2's dead step
    assert "user_2" not in env.agents
    env.step("c")                                              # user_0 (user_2 skipped)
    with pytest.raises(ValueError, match=r"moderator, turn 6, ban: user_2 is already banned"):
        env.step({"text": "", "ban": "user_2"})
    with pytest.raises(ValueError, match=r"warn: 'nobody' is not a user"):
        env.step({"text": "", "warn": "nobody"})


def test_everyone_banned_terminates():
    env = make(n_users=2, max_turns=10).unwrapped
    result = run_discussion(env, {"users": lambda a, o, i: "x",
                                  "moderator": lambda a, o, i: {"text": "", "ban": [1, 2]}})
    assert len(result["turns"]) == 2 and env.agents == []


# ---------------------------------------------------------------------------- invalid input
def test_strict_errors_name_agent_turn_and_field():
    env = make(n_users=2, turn_taking="round_robin", comment_chars=10).unwrapped
    env.reset()
    with pytest.raises(ValueError, match=r"user_0, turn 1, text: 11 characters"):
        env.step("x" * 11)
    with pytest.raises(ValueError, match=r"user_0, turn 1, action: must be the comment text"):
        env.step(42)
    with pytest.raises(ValueError, match=r"user_0, turn 1, mentions: 'ghost' is not a participant"):
        env.step({"text": "hi", "mentions": ["ghost"]})
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['ban'\]"):
        env.step({"text": "hi", "ban": "user_1"})


def test_lenient_falls_back_and_records():
    env = make(n_users=2, turn_taking="round_robin", comment_chars=10, invalid="lenient").unwrapped
    env.reset()
    env.step("y" * 15)
    assert env.turn_log[0]["text"] == "y" * 10
    assert "15 characters" in env.infos["user_0"]["invalid"][0]
    env.step({"text": "ok", "ban": "ghost"})
    assert env.turn_log[1]["banned"] == [] and env.turn_log[1]["text"] == "ok"
    assert "ban: 'ghost' is not a user" in env.infos["moderator"]["invalid"][0]
    env.step(3.5)
    assert env.turn_log[2]["text"] == "" and "action: must be the comment text" in env.turn_log[2]["invalid"][0]


def test_invalid_actions_keyword_and_dict_records_as_in_the_feed_env():
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # the current keyword: no warning
        env = make(n_users=2, turn_taking="round_robin", comment_chars=10, invalid_actions="lenient").unwrapped
        env.reset()
        env.step("y" * 15)
        (record,) = env.infos["user_0"]["invalid"]
        assert record == {"agent": "user_0", "turn": 1, "field": "text",
                          "reason": "15 characters, more than comment_chars=10 (lenient: cut to 10)"}
        assert str(record) == "user_0, turn 1, text: " + record["reason"]   # the strict error's words
        assert env.turn_log[0]["invalid"] == [record]
    with pytest.warns(DeprecationWarning, match="records are dicts"):
        assert "15 characters" in record                # read as the old string form
    with pytest.warns(DeprecationWarning, match="use invalid_actions="):
        assert make(n_users=2, invalid="lenient").unwrapped.config.invalid_actions == "lenient"
    with pytest.raises(ValueError, match="invalid_actions must be one of"):
        make(n_users=2, invalid_actions="maybe")


def test_config_errors():
    with pytest.raises(ValueError, match="n_users must be an integer >= 2"):
        DiscussionConfig(n_users=1)
    with pytest.raises(ValueError, match="user_1 has role 'villain'"):
        DiscussionConfig(n_users=2, roles=["normal", "villain"])
    with pytest.raises(ValueError, match="names unknown user"):
        DiscussionConfig(n_users=2, roles={"user_5": "troll"})
    with pytest.raises(ValueError, match="not a valid @mention name"):
        DiscussionConfig(n_users=2, usernames=["ok", "bad name"])
    with pytest.raises(ValueError, match="turn_taking must be one of"):
        DiscussionConfig(turn_taking="alphabetical")
    with pytest.raises(TypeError, match="unknown discussion config key"):
        socialgym.discussion_env(n_user=3)
    with pytest.raises(ValueError, match="unknown term"):
        DiscussionConfig(role_rewards={"troll": {"chaos": 1.0}})
    with pytest.raises(ValueError, match="unknown moderator reward key"):
        DiscussionConfig(moderator_rewards={"kindness": 1.0})


# ---------------------------------------------------------------------------- observations
def test_context_shows_post_and_last_h_comments():
    env = make(n_users=2, moderator=False, turn_taking="round_robin", context_length=2, topic="Cats or dogs?",
               usernames=["alice", "bob"]).unwrapped
    env.reset()
    for text in ["one", "two", "three"]:
        env.step(text)
    obs, *_ , info = env.last()
    assert obs["context"] == "Post: Cats or dogs?\nbob: two\nalice: three"
    assert [c["text"] for c in info["view"]["comments"]] == ["two", "three"]
    assert info["view"]["username"] == "bob" and info["view"]["users"] == ["alice"]
    f = dict(zip(env.feature_names, obs["observation"]))
    assert f["c0_present"] == 1 and f["c1_present"] == 1 and f["c0_by_self"] == 0 and f["c1_by_self"] == 1
    assert f["progress"] == pytest.approx(3 / env.config.max_turns)
    assert env.observation_space("user_0").contains(obs)


def test_mentions_by_username():
    env = make(n_users=3, moderator=False, turn_taking="round_robin", usernames=["ann", "ben", "cy"]).unwrapped
    env.reset()
    env.step("hello @cy and @ben and @nobody and @ann")
    assert env.turn_log[0]["mentions"] == ["user_2", "user_1"]       # self-mention and unknown dropped


# ---------------------------------------------------------------------------- rewards
RATINGS = {"hello": (1, 3), "you idiot": (5, 1), "@user_1 idiot": (4, 1), "@user_2 please": (1, 2), "sorry": (1, 3)}


def _rater(request):
    return RATINGS.get(request.text, (1, 1))


def _scripted_episode(annotator):
    env = make(n_users=3, roles={"user_2": "troll"}, turn_taking="round_robin", max_turns=5,
               annotator=annotator).unwrapped
    user_lines = iter(["hello", "you idiot", "@user_1 idiot", "@user_2 please", "sorry"])
    mod_lines = iter(["", {"text": "@user_1 keep it civil", "warn": "user_1"}, "", "", ""])
    return env, run_discussion(env, {"users": lambda a, o, i: next(user_lines),
                                     "moderator": lambda a, o, i: next(mod_lines)})


# Hand computation (defaults: moderation game +10 civil, -10 intervene, -10 warn, +15 recovery,
# -8 toxic, -5 ban; toxic >= 3; authority window 4 turns; user terms on (x-1)/4):
#  t1 user_0 "hello" (tox 1, aq 3): user_0 aq 0.5*1.0 = 0.5; moderator civil +10
#  t2 moderator silent: 0
#  t3 user_1 "you idiot" (5, 1): user_1 toxicity 1.0*-0.5 = -0.5 (aq 0); provoked credited to
#     user_0 (previous author; normal weight 0); moderator toxic -8
#  t4 moderator warns user_1 with text: intervene -10 + warn -10 = -20; user_1 warned -0.5
#  t5 user_2 troll "@user_1 idiot" (4, 1): troll toxicity 0.75*0.25 = 0.1875; provoked
#     credited to user_1 (normal weight 0); moderator toxic -8
#  t6 silent. t7 user_0 "@user_2 please" (1, 2): user_0 aq 0.25; user_2 provoked 0; moderator:
#     authority at t4, 7-4 = 3 <= 4 -> no civil; user_0 never toxic -> no recovery: 0
#  t8 silent. t9 user_1 "sorry" (1, 3): user_1 aq 0.5; moderator: 9-4 = 5 > 4 -> civil +10;
#     user_1's last comment was toxic and the moderator intervened after it -> recovery +15
#  t10 silent.
EXPECTED = {"moderator": 10 - 8 - 20 - 8 + 25, "user_0": 0.5 + 0.25, "user_1": -0.5 - 0.5 + 0.5, "user_2": 0.1875}


def test_live_rewards_by_hand():
    env, result = _scripted_episode(ScriptedAnnotator(_rater, _rater))
    assert result["returns"] == pytest.approx(EXPECTED)
    mod_turns = [r for r in env.turn_log if r["agent"] == "moderator"]
    assert len(mod_turns) == 5


def test_post_hoc_scoring_equals_live():
    env, result = _scripted_episode(None)
    # unannotated, only the action terms are paid live: the moderator's warning (t4), user_1 warned
    assert result["returns"] == {"user_0": 0.0, "user_1": -0.5, "user_2": 0.0, "moderator": -20.0}
    annotations = annotate_discussion(env, ScriptedAnnotator(_rater), include_moderator=False)
    assert len(annotations) == 5
    scored = score_discussion(env.turn_log, env.roles, env.moderator)
    assert scored["rewards"] == pytest.approx(EXPECTED)
    assert scored["terms"]["moderator"] == {"civil": 2.0, "toxic": 2.0, "recovery": 1.0, "intervene": 1.0,
                                            "warn": 1.0, "ban": 0.0}


def test_rewards_reported_per_turn_in_infos():
    env = make(n_users=2, turn_taking="round_robin", annotator=ScriptedAnnotator(_rater), max_turns=2).unwrapped
    env.reset()
    env.step("you idiot")
    assert env.infos["moderator"]["reward_terms"] == {"toxic": 1.0, "civil": 0.0, "recovery": 0.0}
    assert env.rewards["moderator"] == -8.0
    assert env.infos["user_0"]["reward_terms"] == {"toxicity": 1.0, "argument_quality": 0.0}


def test_troll_weights_configurable():
    env = make(n_users=2, roles=["normal", "troll"], moderator=False, turn_taking="round_robin", max_turns=2,
               annotator=ScriptedAnnotator(lambda r: (5, 1) if "idiot" in r.text else (1, 1)),
               role_rewards={"troll": {"provoked_toxicity": 2.0, "toxicity": 0.0}}).unwrapped
    result = run_discussion(env, {"user_0": lambda a, o, i: "@user_1 you idiot", "user_1": lambda a, o, i: "bait"})
    # user_1 (troll) wrote "bait" (tox 1) and was answered at toxicity 5 mentioning it: 2.0 * 1.0
    assert result["returns"]["user_1"] == pytest.approx(2.0)


# ---------------------------------------------------------------------------- a whole scripted discussion
def test_full_scripted_discussion_with_scripted_annotators():
    env = make(n_users=5, roles={"user_4": "troll", "user_3": "community"}, max_turns=30, seed=11,
               annotator=LexiconAnnotator(3)).unwrapped
    result = run_discussion(env, {"users": ScriptedUser(seed=1), "moderator": ScriptedModerator(ban_at=1)}, seed=11)
    turns = result["turns"]
    troll = [r for r in turns if r["agent"] == "user_4"]
    assert troll and all(r["toxicity"] >= 2 for r in troll)
    # the rule-based moderator warns the troll right after its first toxic (>= 3) comment and
    # bans it right after the second; the troll never speaks again
    toxic_at = [k for k, r in enumerate(turns) if r["agent"] == "user_4" and r["toxicity"] >= 3]
    assert len(toxic_at) == 2
    assert turns[toxic_at[0] + 1]["warned"] == ["user_4"] and turns[toxic_at[1] + 1]["banned"] == ["user_4"]
    assert env.banned.tolist() == [False, False, False, False, True]
    assert all(r["agent"] != "user_4" for r in turns[toxic_at[1] + 1:])
    # live rewards equal the post-hoc fold
    scored = score_discussion(turns, env.roles, env.moderator)
    assert scored["rewards"] == pytest.approx(result["returns"])
    text = env.render() if env.render_mode else env.transcript()
    assert "[bans @user_4]" in text


def test_banned_users_are_never_credited_and_live_equals_post_hoc():
    """A toxic comment that @mentions a banned troll credits nobody (live and post hoc alike)."""
    rate = ScriptedAnnotator(lambda r: (5, 1) if "idiot" in r.text else (1, 3))
    env = make(n_users=3, roles={"user_2": "troll"}, turn_taking="round_robin", max_turns=4, annotator=rate).unwrapped
    users = iter(["calm words", "bait", "more bait", "@user_2 you idiot"])
    mods = iter(["", {"text": "", "ban": "user_1"}, "", ""])
    result = run_discussion(env, {"users": lambda a, o, i: next(users), "moderator": lambda a, o, i: next(mods)})
    # round robin with user_1 banned: user_0, user_1, user_2, user_0
    assert [r["agent"] for r in result["turns"] if r["agent"] != "moderator"] == ["user_0", "user_1", "user_2", "user_0"]
    env2 = make(n_users=3, roles={"user_1": "troll"}, turn_taking="round_robin", max_turns=4, annotator=rate).unwrapped
    users = iter(["calm words", "bait", "more bait", "@user_1 you idiot"])
    mods = iter(["", {"text": "", "ban": "user_1"}, "", ""])
    result = run_discussion(env2, {"users": lambda a, o, i: next(users), "moderator": lambda a, o, i: next(mods)})
    # the troll user_1 is banned at t4; t7 "@user_1 you idiot" (toxicity 5) would pay it 1.0
    # provoked toxicity, but a banned user is out of the game: its return is only the ban (-2)
    assert result["returns"]["user_1"] == pytest.approx(-2.0)
    scored = score_discussion(env2.turn_log, env2.roles, env2.moderator)
    assert scored["rewards"] == pytest.approx(result["returns"])


def test_action_mask_after_a_ban():
    env = make(n_users=3, turn_taking="round_robin").unwrapped
    env.reset()
    assert env.infos["user_0"].get("action_mask") is None
    env.step("hi")
    assert env.infos["moderator"]["action_mask"]["ban"].tolist() == [1, 1, 1, 1]
    env.step({"text": "", "ban": 2})                 # user_1
    env.step(None)                                   # user_1's dead step
    env.step("again")                                # user_2 (round robin skips user_1)
    assert env.agent_selection == "moderator"
    assert env.infos["moderator"]["action_mask"]["warn"].tolist() == [1, 1, 0, 1]


def test_eq3_fallbacks_after_bans():
    rng = np.random.default_rng(0)
    # t(i-2) = 1 is banned (not active): always the 0.6 branch, i.e. a user other than t(i-1) = 0
    picks = {paper_turn([1, 0], [0, 2, 3], rng) for _ in range(200)}
    assert picks == {2, 3}
    # one user left: that user speaks, also right after itself
    assert {paper_turn([0, 2], [2], rng) for _ in range(50)} == {2}


def test_annotator_error_leaves_the_env_unchanged():
    calls = {"n": 0}

    def flaky(request):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("annotator down")
        return (1, 3)

    env = make(n_users=2, moderator=False, turn_taking="round_robin", annotator=ScriptedAnnotator(flaky)).unwrapped
    env.reset()
    env.step("one")
    with pytest.raises(RuntimeError, match="annotator down"):
        env.step("two")
    assert env.turn == 1 and len(env.turn_log) == 1 and len(env.store) == 2 and env.agent_selection == "user_1"
    env.step("two")                                   # retry works
    assert [r["text"] for r in env.turn_log] == ["one", "two"]
    assert env.view("user_0")["comments"][-1]["toxicity"] == 1.0


def test_bad_role_names_seed_and_mentions():
    with pytest.raises(ValueError, match="unknown role 'trolls'"):
        DiscussionConfig(role_rewards={"trolls": {"toxicity": 1.0}})
    with pytest.raises(ValueError, match="seed must be None or an integer >= 0"):
        DiscussionConfig(seed=-1)
    with pytest.raises(ValueError, match="usernames must be a sequence"):
        DiscussionConfig(n_users=3, usernames="abc")
    env = make(n_users=2, invalid="lenient", turn_taking="round_robin").unwrapped
    env.reset()
    env.step({"text": "hi", "mentions": [["x"], {"a": 1}, "user_1"]})
    assert env.turn_log[0]["mentions"] == ["user_1"]
    assert len(env.infos["user_0"]["invalid"]) == 2
