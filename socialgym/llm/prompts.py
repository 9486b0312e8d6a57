"""Every prompt the LLM layer sends, in one place (paper App. A: Coach, Plan, Vote, Tie-Update;
plus the Mini-IPIP survey, the text-writing step and the repair message).

Templates use ``str.format`` fields. Override any of them::

    prompts = PromptSet().replace(vote_system="...")      # in code
    prompts = PromptSet.from_dir("my_prompts/")          # one <name>.txt file per template
    prompts = PromptSet.from_mapping({"coach_user": "..."})

An override may only use the fields its template offers (checked when the set is built), so a
typo fails at once rather than mid-run.

Layout, for small local models: the long, stable part of each conversation (rules, reward
definitions, then the persona) comes first and the per-round part last, so that a server's
prompt cache re-uses the prefix across rounds and, for the shared rules, across agents.
"""

from __future__ import annotations

import dataclasses
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

REWARD_DOCS: dict[str, str] = {
    "SOC": "SOC (social interaction): share of your actions that are COM/DM, plus COM/DM you "
           "receive. Comment and message people; reply when they message you.",
    "INF": "INF (information): new and diverse topics in your feed. Engage with many topics; "
           "exploring new topics helps.",
    "PRE": "PRE (self-presentation): your POSTs and the likes minus dislikes they get. Post "
           "concise content that invites likes, e.g. ending with a question.",
    "COORD": "COORD (coordination): posts and comments that @mention you, and DM replies to "
             "those who messaged you. Mention others so they mention you back; answer DMs.",
    "EMO": "EMO (emotional support): positive tone of the comments and DMs you receive. Be "
           "supportive so others reply warmly.",
}

PLAN_SYSTEM = """\
You play a multi-round social media game. Each round you take exactly {n_actions} actions: \
POST (public post), COM (comment on a post from the list), DM (private message) or NOT \
(do nothing). Choices accumulate across rounds and shape relationships and rewards.
Rewards (each 0..1):
{reward_docs}
Rules: a COM must target a listed post id. A DM either replies to a listed DM (use its id) \
or is a cold DM to a listed user. Set "mention" to a user id to @mention them in a POST or \
COM, else null. "text" is what you write, in your own voice, at most two sentences.
Reply with JSON only: {{"actions": [ ... ]}} with exactly {n_actions} actions.

You are {name}, {role}. {description} Stance: {stance}. Style: {style}. \
Personality: {personality}.
You value (weights): {weights}."""

PLAN_USER = """\
Round {round}. {best}
Last rewards: {last_rewards}
{tip}{memory}Users: {users}
Topics: {topics}
DMs to you:
{dms}
Posts you can comment on:
{posts}
Plan your {n_actions} actions now.{round_rule}"""

WRITE_SYSTEM = """\
You write short social media texts in character. You are {name}, {role}. {description} \
Stance: {stance}. Style: {style}. Reply with JSON only: {{"texts": [ ... ]}}, one text per \
action, each at most two sentences, in your own voice and tone. Where an action mentions a \
user, include the literal @id in its text."""

WRITE_USER = """\
Write the texts for these actions:
{actions}"""

VOTE_SYSTEM = """\
You vote on content in a multi-round social media game: 1 like, -1 dislike, 0 no opinion. \
Likes and dislikes affect how others see you and the tone of your relationships. \
Use 0 when you have no strong opinion.
You are {name}, a {role} with a {personality} personality. Stance: {stance}."""

VOTE_USER = """\
Items (id, sender, content{relationship_header}):
{items}
Reply with JSON only: {{"votes": {{"<id>": 1 | 0 | -1, ...}}}}, one vote per item."""

COACH_SYSTEM = """\
You are a strategy coach in a multi-round social media game. Help the agent close the gaps \
between its reward scores and its target weights; priorities are ordered, the first needs the \
most improvement. Many rewards depend on how others engage, so encourage responses and \
collaboration, and vary partners and topics across rounds. Output 3-5 one-sentence tips, each \
naming an action type (POST/COM/DM), a target user or 'top-liked post', a topic, whether to \
@mention, and a tone (supportive/neutral/critical). Reply with JSON only: {{"tips": [ ... ]}}."""

COACH_USER = """\
Priority this round (high to low): {focus}
Guidelines: {guidelines}
Users: {users}
DM senders last round: {dm_last_senders}
Recent partners: {recent_partners}
Known topics: {seen_topics}
Recent topics (last 3): {last_recent}"""

TIE_SYSTEM = """\
You judge, from the LAST ROUND's transcript only, how much evidence there is for increasing \
your social connection to each peer. Scores: 5 exceptional (repeated warmth, help, \
coordination), 4 strong (mutual positivity, clear support), 3 good (polite, some constructive \
exchange), 2 weak (minor positive cues), 1 very weak (faint positivity), 0 none (mixed, \
negative or insufficient). Be conservative: if unsure, 0. One rating per peer, with a factual \
reason of at most one sentence.
You are {name}. Reply with JSON only: \
{{"ratings": {{"<peer>": {{"score": 0-5, "reason": "..."}}, ...}}}}."""

TIE_USER = """\
Your peers this round: {peers}
Transcript of the last round:
{transcript}
Rate each peer."""

SURVEY_SYSTEM = """\
You are {name}, {role}. {description} Stance: {stance}. Style: {style}. Answer as this \
person would, honestly."""

SURVEY_USER = """\
Rate how well each statement describes you: 1 very inaccurate, 2 moderately inaccurate, \
3 neither, 4 moderately accurate, 5 very accurate.
{items}
Reply with JSON only: {{"answers": {{"q1": 1-5, ..., "q{n_items}": 1-5}}}}."""

REPAIR = """\
Your reply was not valid: {error}
Reply again with JSON only, fixing this."""

# The fields each template may use; overrides are checked against them.
FIELDS: dict[str, frozenset[str]] = {
    "plan_system": frozenset({"n_actions", "reward_docs", "name", "role", "description", "stance",
                              "style", "personality", "weights"}),
    "plan_user": frozenset({"round", "best", "last_rewards", "tip", "memory", "users", "topics",
                            "dms", "posts", "n_actions", "round_rule"}),
    "write_system": frozenset({"name", "role", "description", "stance", "style"}),
    "write_user": frozenset({"actions"}),
    "vote_system": frozenset({"name", "role", "personality", "stance"}),
    "vote_user": frozenset({"items", "relationship_header"}),
    "coach_system": frozenset(),
    "coach_user": frozenset({"focus", "guidelines", "users", "dm_last_senders", "recent_partners",
                             "seen_topics", "last_recent"}),
    "tie_system": frozenset({"name"}),
    "tie_user": frozenset({"peers", "transcript"}),
    "survey_system": frozenset({"name", "role", "description", "stance", "style"}),
    "survey_user": frozenset({"items", "n_items"}),
    "repair": frozenset({"error"}),
}


def template_fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


@dataclass(frozen=True)
class PromptSet:
    """All templates; ``PromptSet()`` is the default set."""

    plan_system: str = PLAN_SYSTEM
    plan_user: str = PLAN_USER
    write_system: str = WRITE_SYSTEM
    write_user: str = WRITE_USER
    vote_system: str = VOTE_SYSTEM
    vote_user: str = VOTE_USER
    coach_system: str = COACH_SYSTEM
    coach_user: str = COACH_USER
    tie_system: str = TIE_SYSTEM
    tie_user: str = TIE_USER
    survey_system: str = SURVEY_SYSTEM
    survey_user: str = SURVEY_USER
    repair: str = REPAIR
    reward_docs: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(REWARD_DOCS))

    def __post_init__(self) -> None:
        for name, allowed in FIELDS.items():
            template = getattr(self, name)
            if not isinstance(template, str):
                raise TypeError(f"prompt {name!r} must be a string, got {type(template).__name__}")
            try:
                used = template_fields(template)
            except ValueError as err:
                raise ValueError(f"prompt {name!r} is not a valid format string: {err}") from None
            unknown = used - allowed
            if unknown:
                raise ValueError(f"prompt {name!r} uses unknown field(s) {sorted(unknown)}; "
                                 f"it may use {sorted(allowed)}")
        missing = set(REWARD_DOCS) - set(self.reward_docs)
        if missing:
            raise ValueError(f"reward_docs lacks {sorted(missing)}")

    def replace(self, **overrides: str) -> "PromptSet":
        unknown = set(overrides) - set(FIELDS) - {"reward_docs"}
        if unknown:
            raise ValueError(f"unknown prompt name(s) {sorted(unknown)}; known: {sorted(FIELDS)}")
        return dataclasses.replace(self, **overrides)

    @classmethod
    def from_mapping(cls, overrides: Mapping[str, str]) -> "PromptSet":
        return cls().replace(**dict(overrides))

    @classmethod
    def from_dir(cls, path: str | Path) -> "PromptSet":
        """Override the templates that have a ``<name>.txt`` file in ``path``."""
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"prompt directory {path} does not exist")
        overrides = {}
        for file in sorted(path.glob("*.txt")):
            if file.stem not in FIELDS:
                raise ValueError(f"{file.name}: not a prompt name; known: {sorted(FIELDS)}")
            overrides[file.stem] = file.read_text(encoding="utf-8").rstrip("\n")
        return cls().replace(**overrides)

    def render(self, template: str, /, **values) -> str:
        return getattr(self, template).format(**values)
