"""The prompts of the feed game's LLM agents, in one place: the core paper's App. A prompts
(Coach, Plan, Vote, Tie-Update) restated in the project's own words, plus the text-writing step,
the reflect (stance) step, the Mini-IPIP survey, the surveys put to agents during a run
(``survey_round_*``, ``socialgym.experiments.run.surveys``) and the repair message (also the default
re-prompt of every JSON request ``LLMClient`` sends).

Prompts sent elsewhere live with their users: the discussion environment's texts (actor
prompts, user roles, moderator strategies, annotator instructions) in
``socialgym/discussion/prompts.py``; the reply-format lines added to them and the moderator
coach's prompt in ``socialgym/agents/discussion.py`` and ``socialgym/annotation/annotators.py``;
and, for servers that take no JSON schema, the schema appended to a request by
``socialgym/llm/client.py``.

Templates use ``str.format`` fields. Override any of them::

    prompts = PromptSet().replace(vote_user="...")      # in code
    prompts = PromptSet.from_dir("my_prompts/")          # one <name>.txt file per template
    prompts = PromptSet.from_mapping({"coach_user": "..."})

An override may only use the fields its template offers (checked when the set is built), so a
typo fails at once rather than mid-run.

Layout, for the server's prefix cache (docs/llm.md, "Prompt layout"): what changes least comes
first. The plan and vote requests share one system message: the game in plain words and the five
reward parts (``game``, ``rewards``: the same for every agent, so a server's cache shares them
across agents), then the persona and weights (``persona``, ``goal``: the same every round). The
plan's user message starts with the parts that change slowly (the users one may address, the
best round, memory summaries), then what this round brings (scores, DMs, posts) and the reply
format (``plan_format``). A text request is the persona plus one short plain instruction (small
local models write fluent text only when asked plainly) with what the text answers: the post
(and the post above a comment), the recent messages with a DM's recipient, or the agent's own
recent posts.
"""

from __future__ import annotations

import dataclasses
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

REWARD_DOCS: dict[str, str] = {
    "SOC": "SOC (social interaction): COMs and DMs you send and get. Answer who wrote to you.",
    "INF": "INF (information): new, varied topics in your feed. Pick topics you have not met lately.",
    "PRE": "PRE (self-presentation): your POSTs and their net likes. Post briefly; end with a question.",
    "COORD": "COORD (coordination): @mentions of you, your DM answers. Set mention to a listed user.",
    "EMO": "EMO (emotional support): how positive the COMs and DMs you get are. A supportive tone brings it.",
}

PERSONA = """\
You are {name}, {role}. {description} Stance: {stance}. Writing style: {style}. Personality: \
{personality}."""

GAME = """\
A social media game of several rounds. Each round every user takes exactly {n_actions} actions: \
POST (public post), COM (comment on a post), DM (private message) or NOT (nothing). Others \
read, answer and vote on your texts; exchanges build relationships over the rounds, so use what \
you remember."""

REWARDS = """\
Your round score mixes five parts (0 to 1 each) with weights λ that sum to 1:
{reward_docs}"""

GOAL = """\
Your weights: {active_weights}. Your sole aim: raise your score in these proportions."""

TOPIC_RULE_OPEN = "Topics may be new."

TOPIC_RULE_CLOSED = "Topics: listed ones only."

TEXT_RULE = ', "text" (your words, at most two sentences)'

PLAN_FORMAT = """\
Reply with JSON {{"actions": [...]}}, {n_actions} objects with keys "type" (POST, COM, DM, \
NOT), "topic", "target_id", "recipient", "mention", "tone" (supportive, neutral, \
critical){text_rule}. COM: target_id = a listed post. DM: recipient = a user; target_id = the \
listed DM it answers, or null to open a conversation. mention: a user to @mention in a POST or \
COM, or null. {topic_rule}"""

PLAN_USER = """\
Users you can interact with: {users}
{best}
{memory}Round {round}. Your actions last round: {last_actions}. Scores: {last_rewards}.
{tip}Topics known so far{topics_note}: {topics}
DMs sent to you last round:
{dms}
Posts you can comment on:
{posts}
{format}{round_rule}"""

TEXT_POST = """\
{recent}Write a new public post about {topic} in a {tone} tone{mention}. One or two sentences, \
not a repeat of your earlier posts. Reply with the post text only."""

TEXT_COMMENT = """\
{thread}{author} posted: "{content}"
Write your comment answering {author}'s post in a {tone} tone{mention}. One or two sentences. \
Reply with the comment text only."""

TEXT_DM = """\
{conversation}Write a private message to {recipient} about {topic} in a {tone} tone. One or \
two sentences. Reply with the message text only."""

TEXT_DM_REPLY = """\
{conversation}{recipient} sent you a private message: "{content}"
Write your private reply to {recipient} in a {tone} tone, answering what they wrote. One or two \
sentences. Reply with the message text only."""

VOTE_USER = """\
Round {round} votes: like (1), dislike (-1) or skip (0) each item, as your persona\
{relationship_hint} would.
Items (id, sender, content{relationship_header}):
{items}
Your stance now on {issue}: one of {stances}.
{format}"""

VOTE_FORMAT_KEYED = """\
Reply with JSON only: {{"votes": {{"<id>": 1 | 0 | -1, ...}}, "stance": "..."}}."""

VOTE_FORMAT_LIST = """\
Reply with JSON only: {{"votes": [{{"id": <id>, "vote": 1 | 0 | -1}}, ...], "stance": "..."}}, \
one vote per item."""

REFLECT_USER = """\
Round {round} is over and nothing new came up for a vote. Where do you stand now on {issue}? \
One of {stances}. Reply with JSON only: {{"stance": "..."}}."""

COACH_SYSTEM = """\
You coach a player of a social media game that runs over several rounds. Help the player earn \
more over the long run by narrowing the gaps between its latest reward scores and its target \
weights. The priorities come in order of importance: the first needs the most work. Give 3 to \
5 tips of one sentence each, concrete enough to carry out as they stand, and spread them over \
different partners and topics from round to round so that the player explores. Skip any \
introduction or explanation. Keep in mind that a round's total reward can be at most 1, and \
that most reward parts depend on how the other players react, so favour tips that draw replies \
and cooperation."""

COACH_USER = """\
Priorities this round, highest first: {focus}
What they reward: {guidelines}
Situation:
- other users: {users}
- sent the player DMs last round: {dm_last_senders}
- the player's partners lately: {recent_partners}
- topics seen so far: {seen_topics}
- the player's topics over the last three rounds: {last_recent}
Every tip names an action type (POST, COM or DM); a target, either a user from these lists or \
'the most-liked post'; a topic (a relevant one, or a new one, which helps INF); whether to ask \
the target to @mention the player back (only when COORD is a priority); and a tone \
(supportive, neutral or critical).
The priorities are sorted by how far each reward sits below its target: aim the tips at the \
first ones, and vary topics and partners to keep learning and meeting people.
{format}"""

COACH_FORMAT_JSON = 'Reply with JSON only: {{"tips": ["...", ...]}}.'

COACH_FORMAT_TEXT = "Write the tips only, one per line, each line starting with '- '."

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

# Surveys during a run (socialgym.experiments.run.surveys): the persona and memory, then the items.
SURVEY_ROUND_SYSTEM = """\
{persona}
{memory}You are now filling in a short survey about your time on the platform. It is not a move \
in the game and changes nothing in it. Answer as {name} honestly would, drawing on what you \
remember."""

SURVEY_ROUND_USER = """\
Survey after round {round}. Give each question a score on the scale shown in brackets after it.
{items}
Reply with JSON only: {format}"""

SURVEY_ROUND_TEXT = """\
Survey after round {round}. {question}
Reply in one to three sentences, in your own voice, with the answer only."""

REPAIR = """\
Your reply was not valid: {error}
Reply again with JSON only, fixing this."""

# The fields each template may use; overrides are checked against them.
FIELDS: dict[str, frozenset[str]] = {
    "persona": frozenset({"name", "role", "description", "stance", "style", "personality"}),
    "game": frozenset({"n_actions"}),
    "plan_format": frozenset({"n_actions", "text_rule", "topic_rule"}),
    "topic_rule_open": frozenset(),
    "topic_rule_closed": frozenset(),
    "text_rule": frozenset(),
    "rewards": frozenset({"reward_docs"}),
    "goal": frozenset({"active_comps", "active_weights"}),
    "plan_user": frozenset({"users", "best", "memory", "round", "last_actions", "last_rewards", "tip", "topics",
                            "topics_note", "dms", "posts", "n_actions", "round_rule", "format"}),
    "text_post": frozenset({"recent", "topic", "tone", "mention"}),
    "text_comment": frozenset({"thread", "author", "content", "topic", "tone", "mention"}),
    "text_dm": frozenset({"conversation", "recipient", "topic", "tone"}),
    "text_dm_reply": frozenset({"conversation", "recipient", "content", "tone"}),
    "vote_user": frozenset({"round", "items", "relationship_header", "relationship_hint", "issue", "stances",
                            "format"}),
    "vote_format_keyed": frozenset(),
    "vote_format_list": frozenset(),
    "reflect_user": frozenset({"round", "issue", "stances"}),
    "coach_system": frozenset(),
    "coach_user": frozenset({"focus", "guidelines", "users", "dm_last_senders", "recent_partners",
                             "seen_topics", "last_recent", "format"}),
    "coach_format_json": frozenset(),
    "coach_format_text": frozenset(),
    "tie_system": frozenset({"name"}),
    "tie_user": frozenset({"peers", "transcript"}),
    "survey_system": frozenset({"name", "role", "description", "stance", "style"}),
    "survey_user": frozenset({"items", "n_items"}),
    "survey_round_system": frozenset({"persona", "memory", "name"}),
    "survey_round_user": frozenset({"round", "items", "format"}),
    "survey_round_text": frozenset({"round", "question"}),
    "repair": frozenset({"error"}),
}


def template_fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


@dataclass(frozen=True)
class PromptSet:
    """All templates; ``PromptSet()`` is the default set."""

    persona: str = PERSONA
    game: str = GAME
    text_rule: str = TEXT_RULE
    topic_rule_open: str = TOPIC_RULE_OPEN
    topic_rule_closed: str = TOPIC_RULE_CLOSED
    rewards: str = REWARDS
    goal: str = GOAL
    plan_format: str = PLAN_FORMAT
    plan_user: str = PLAN_USER
    text_post: str = TEXT_POST
    text_comment: str = TEXT_COMMENT
    text_dm: str = TEXT_DM
    text_dm_reply: str = TEXT_DM_REPLY
    vote_user: str = VOTE_USER
    vote_format_keyed: str = VOTE_FORMAT_KEYED
    vote_format_list: str = VOTE_FORMAT_LIST
    reflect_user: str = REFLECT_USER
    coach_system: str = COACH_SYSTEM
    coach_user: str = COACH_USER
    coach_format_json: str = COACH_FORMAT_JSON
    coach_format_text: str = COACH_FORMAT_TEXT
    tie_system: str = TIE_SYSTEM
    tie_user: str = TIE_USER
    survey_system: str = SURVEY_SYSTEM
    survey_user: str = SURVEY_USER
    survey_round_system: str = SURVEY_ROUND_SYSTEM
    survey_round_user: str = SURVEY_ROUND_USER
    survey_round_text: str = SURVEY_ROUND_TEXT
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
