"""Text and config correctness (issue 28, item 6): wrong results that used to pass without a word.

1. ``clean_text`` split sentences at every period ("3.5" became "3. 5", URLs, e-mail addresses
   and version numbers were cut, "Dr. Smith" counted as two sentences);
2. text that cannot be encoded as UTF-8 (a lone surrogate) in a config passed validation and
   killed the run at its round (and on every resume); now one line naming the key, at load time,
   also for ``--set`` and ``fork --set`` values;
3. a policy group named ``all`` was accepted, and ``target: all`` then meant every agent;
4. ``fork --set llm.api_key=...`` was silently dropped (the fork used ``llm.api_key_env``).
"""

from __future__ import annotations

import pytest

from socialgym.experiments import ConfigError, RunError, load_config, run_experiment
from socialgym.experiments.define import fork_config, to_dict
from socialgym.llm.text import clean_text

LONE = "\ud800"          # a lone surrogate: a str, but no UTF-8 text


# ============================================================================ 1. clean_text
@pytest.mark.parametrize("raw, expected", [
    ("It costs 3.5 dollars. That is cheap. Really.", "It costs 3.5 dollars. That is cheap."),
    ("Read https://example.org/a.b today. It helps. More.", "Read https://example.org/a.b today. It helps."),
    ("See https://example.org/a.b. Then reply. Later.", "See https://example.org/a.b. Then reply."),
    ("Upgrade to v1.2.3 now. Python 3.11 is fast. Third one.", "Upgrade to v1.2.3 now. Python 3.11 is fast."),
    ("Mail ana.b@example.org today. Thanks. Bye.", "Mail ana.b@example.org today. Thanks."),
    ("Dr. Smith agrees. The U.S. plan works. Third.", "Dr. Smith agrees. The U.S. plan works."),
    ("Eat fruit, e.g. Apples and pears. Third sentence. Fourth.", "Eat fruit, e.g. Apples and pears. Third sentence."),
    ("Some fruit, i.e. Apples, is good. Yes. No.", "Some fruit, i.e. Apples, is good. Yes."),
    ("Apples, pears, etc. are fine. Yes. No.", "Apples, pears, etc. are fine. Yes."),
    ("Mr. and Mrs. Lee came. They left. Bye.", "Mr. and Mrs. Lee came. They left."),
    ("I moved to the U.S. Then I left. Bye.", "I moved to the U.S. Then I left."),     # an initialism can end one
    ("It rose in 2023. 2024 was better. Third.", "It rose in 2023. 2024 was better."),
    ("Hello.World is a site", "Hello.World is a site"),                         # no space: no boundary
    ("It costs 3.5 dollars and", "It costs 3.5 dollars and"),                   # not cut to "It costs 3."
    ("Wow! that is great. Yes.", "Wow! that is great."),                        # ! and ? end before any word
    ("Really? yes. No.", "Really? yes."),
    ('She said "act now." We agree. Third.', 'She said "act now." We agree.'),
    ("One. Two. Three.", "One. Two."),
    ("Well... Maybe later. Sure.", "Well... Maybe later."),
    ("Wind farms work. They really do. And more", "Wind farms work. They really do."),
])
def test_clean_text_splits_sentences_only_at_real_boundaries(raw, expected):
    assert clean_text(raw, 200) == expected


def test_clean_text_keeps_numbers_when_cutting_to_length():
    # the cut to max_chars still falls between whole sentences, never inside "3.5"
    assert clean_text("Pi is about 3.14159 here. " + "word " * 60, 40) == "Pi is about 3.14159 here."
    assert clean_text("Version 3.11 is out. Update now. Seriously.", 200, max_sentences=1) == "Version 3.11 is out."


def test_clean_text_never_inserts_a_space():
    for raw in ("It costs 3.5 dollars.", "See https://example.org/a.b?x=1!y for it.", "v1.2.3 and 10.0.0.1 work.",
                "Ask a.b@c.org or Dr.Who now.", "Wait...what?!No way."):
        assert clean_text(raw, 500, max_sentences=10) == raw


# ============================================================================ 2. text that is no UTF-8
BASE = {
    "seed": 3,
    "env": {"n_agents": 6, "max_rounds": 4, "recommender": "random", "topics": ["energy", "food"]},
    "policy": {"groups": [{"name": "g", "kind": "greedy", "agents": 3}, {"name": "r", "kind": "random"}]},
    "logging": {"report": False, "progress": False},
}


def with_(**sections) -> dict:
    return {**BASE, **sections}


def post(**extra) -> dict:
    return {"kind": "post", "at_round": 2, "author": "agent_0", "topic": "energy", "text": "A correction.", **extra}


@pytest.mark.parametrize("config, key", [
    (with_(interventions=[post(text=f"Hello {LONE} world")]), "interventions[0].text"),
    (with_(interventions=[post(topic=LONE)]), "interventions[0].topic"),
    (with_(surveys=[{"name": "exit", "at_round": 2, "items": [{"id": "q", "text": f"Fair? {LONE}"}]}]),
     "surveys[0].items[0].text"),
    (with_(surveys=[{"instrument": "stance", "at_round": 2, "topic": "energy", "issue": LONE}]), "surveys[0].issue"),
    (with_(env={**BASE["env"], "topics": ["energy", f"f{LONE}od"]}), "env.topics[1]"),
    (with_(policy={"groups": [{"name": f"g{LONE}", "kind": "greedy", "agents": 3}, {"name": "r", "kind": "random"}]}),
     "policy.groups[0].name"),
    (with_(run={"name": f"study {LONE}"}), "run.name"),
    (with_(sweep={"run.name": ["a", LONE]}), "sweep.run.name[1]"),
])
def test_text_that_is_no_utf8_is_refused_at_load_naming_the_key(config, key):
    with pytest.raises(ConfigError) as err:
        load_config(config)
    message = str(err.value)
    assert message.startswith(f"{key}: ") and "UTF-8" in message and "\n" not in message, message


def test_set_values_that_are_no_utf8_are_refused():
    # a YAML escape in a --set value, and an undecodable command-line byte (surrogateescape)
    with pytest.raises(ConfigError, match=r"^interventions\[0\]\.text: not valid UTF-8"):
        load_config(BASE, ['interventions=[{kind: post, at_round: 2, author: agent_0, topic: energy, '
                           'text: "bad \\ud800 text"}]'])
    with pytest.raises(ConfigError, match=r"^run\.name: not valid UTF-8"):
        load_config(BASE, ["run.name=caf\udce9"])


def test_the_checkers_refuse_it_when_called_directly():
    from socialgym.experiments.define.interventions import InterventionError, check_interventions
    from socialgym.experiments.define.surveys import SurveyError, check_surveys

    agents = [f"agent_{i}" for i in range(4)]
    with pytest.raises(InterventionError, match=r"^interventions\[0\]\.text: not valid UTF-8"):
        check_interventions([post(text=LONE)], max_rounds=4, agents=agents, groups={})
    with pytest.raises(SurveyError, match=r"^surveys\[0\]\.items\[0\]\.text: not valid UTF-8"):
        check_surveys([{"name": "s", "at_round": 1, "items": [{"id": "q", "text": LONE}]}], max_rounds=4,
                      agents=agents)


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("text-config") / "base"
    run_experiment(load_config(BASE), out)
    return out


def test_fork_set_values_that_are_no_utf8_are_refused(base_run, tmp_path):
    from socialgym.experiments.run.fork import fork_run

    with pytest.raises(RunError, match=r"^fork: interventions\[0\]\.text: not valid UTF-8"):
        fork_run(base_run, 2, tmp_path / "bad", overrides=[
            'interventions=[{kind: post, at_round: 3, author: agent_0, topic: energy, text: "x \\udfff"}]'])
    assert not (tmp_path / "bad").exists()


# ============================================================================ 3. reserved group names
def test_a_group_named_all_is_refused():
    groups = [{"name": "all", "kind": "greedy", "agents": 3}, {"name": "r", "kind": "random"}]
    with pytest.raises(ConfigError, match=r"^policy\.groups\[0\]\.name: 'all' is reserved"):
        load_config(with_(policy={"groups": groups}))
    # other names, also ones that look alike, still work, and target: all still means every agent
    cfg = load_config(with_(policy={"groups": [{"name": "All", "kind": "greedy", "agents": 3},
                                               {"name": "everyone", "kind": "random"}]},
                            interventions=[{"kind": "lambdas", "at_round": 2, "target": "all",
                                            "lambdas": [1, 0, 0, 0, 0]}]))
    assert [g.name for g in cfg.policy.groups] == ["All", "everyone"]


def test_the_reserved_names_are_those_a_target_gives_a_meaning_to():
    from socialgym.experiments.define.schedule import RESERVED_TARGETS, check_target

    assert "all" in RESERVED_TARGETS
    for name in RESERVED_TARGETS:
        assert check_target(name, "t", ["agent_0"], [], ValueError) == name     # no group needed


# ============================================================================ 4. fork and an inline api key
LLM_BASE = with_(llm={"model": "m", "base_url": "http://127.0.0.1:9/v1"})


def test_fork_config_refuses_an_inline_api_key():
    base = load_config(LLM_BASE)
    target = load_config(to_dict(base), ["llm.api_key=sk-never-sent"])
    with pytest.raises(ConfigError) as err:
        fork_config(base, target, 2)
    message = str(err.value)
    assert message.startswith("llm.api_key: ") and "llm.api_key_env" in message and "sk-never" not in message
    # the key's variable may change: that is how a fork gets another key
    other = load_config(to_dict(base), ["llm.api_key_env=OTHER_KEY"])
    cfg, changes = fork_config(base, other, 2)
    assert cfg.llm.api_key_env == "OTHER_KEY" and cfg.llm.api_key is None


def test_fork_run_refuses_an_inline_api_key(base_run, tmp_path):
    from socialgym.experiments.run.fork import fork_run

    with pytest.raises(RunError, match=r"^fork: llm\.api_key: .*llm\.api_key_env") as err:
        fork_run(base_run, 2, tmp_path / "keyed", overrides=["llm.api_key=sk-secret-456"])
    assert "sk-secret" not in str(err.value) and not (tmp_path / "keyed").exists()
