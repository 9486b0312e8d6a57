"""``ArchetypePolicy``: LLM-driven agents at scale (issue 34).

The agents are clustered once, by persona, into ``k`` archetypes (seeded k-means over a persona
feature vector, numpy only); each archetype's **representative** is the member closest to its
centroid, and its persona speaks for the archetype. Agents first seen later join the nearest
archetype. Per round:

- **act**: ONE plan request per archetype with members present, under a small closed-choice
  schema (per action slot a type POST/COM/DM/NOT, a topic from a short offered list, a tone);
  round 1 allows only POST. Every member carries the plan out with its OWN targets: a COM goes
  to an item of its own feed (the plan's topic first, then the most liked),
  a DM answers its newest unanswered DM, else opens a conversation with a peer seen in its feed;
  a slot a member cannot carry out becomes a POST on the planned topic, counted in
  ``round_stats["fallback_actions"]`` and recorded as a ``Fallback`` (purpose ``execute``);
- **texts**: ``texts="pool"`` (default) asks ``pool_size`` plain texts per archetype and planned
  non-NOT slot (persona of the representative, a short instruction), and members draw from the
  pool; ``texts="member"`` asks one text per member action with its real target (the LLMPolicy
  text prompts of ``PromptSet``), which scales with N;
- **vote**: ONE vote request per archetype: like (1), dislike (-1) or 0 for each topic of its
  members' vote items; every member then votes its items by their topic.

Requests per round, with k' <= k archetypes present and s the planned non-NOT slots of an
archetype: k' plan requests + ``pool_size`` * sum(s) pool texts (``member``: one per member
non-NOT action) in the act step, at most k' vote requests in the vote step (none for an
archetype with nothing to vote on). Requests go out concurrently through the client; each has
a stable seed (:meth:`ArchetypePolicy.request_seed`). The JSON requests are named
``archetype_plan`` / ``archetype_votes`` (the schema name the server sees); text requests carry
no schema. They are logged under the representative's id (the client routes by agent).
Failed replies fall back like LLMPolicy's: a plan slot to NOT (round 1: a POST), a vote to 0,
a text to "" (the tone then sets the sentiment), each recorded in ``client.usage.fallbacks``.
"""

from __future__ import annotations

import asyncio
import inspect
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from socialgym.agents.memory import clip_text
from socialgym.agents.persona import STANCES, TRAITS, Persona, load_personas, personas_for
from socialgym.config import MAX_TEXT_CHARS, REWARD_NAMES
from socialgym.llm.prompts import PromptSet
from socialgym.llm.schemas import Checked
from socialgym.llm.text import clean_text
from socialgym.llm.usage import Fallback
from socialgym.platform.actions import ACTION_TYPES, TONES
from socialgym.platform.validation import is_int, show
from socialgym.recommenders.params import ParamError, check_seed_param

TEXT_MODES = ("pool", "member")
MAX_ARCHETYPES = 1000
MAX_POOL_SIZE = 20
PLAN_TOPICS = 8
"""Topics offered in a plan request: the representative's interests, those most common in the
members' feeds, then the vocabulary."""
VOTE_TOPICS = 12
"""Topics put to a vote request (the most common among the members' vote items; others get 0)."""
KMEANS_ITERATIONS = 100
FEATURE_WEIGHTS = {"interests": 1.0, "role": 0.5, "stance": 1.0, "big_five": 0.5, "lambdas": 2.0}
"""Scale of each block of the persona feature vector (lambdas sum to 1, so they are scaled up
to weigh about as much as one interest)."""
PLAN_NAME, VOTE_NAME = "archetype_plan", "archetype_votes"

PLAN_USER = """\
You decide for a group of {size} similar users. Round {round}. {n_actions} actions each.
What the group sees:
{summary}
Topics: {topics}
Types: POST (new post), COM (comment on a post in their feed), DM (private message), NOT (nothing).\
{round_rule}
Reply with JSON only: {{"actions": [{{"type": "...", "topic": "...", "tone": "supportive|neutral|critical"}}, \
...]}}, {n_actions} actions."""

VOTE_USER = """\
You decide for a group of {size} similar users. Round {round}: they vote on what they were shown.
Topics of the items (how many, an example):
{topics}
For each topic: 1 (like), -1 (dislike) or 0 (no opinion), as you would.
Reply with JSON only: {{"topics": {{"<topic>": 1 | 0 | -1, ...}}}}."""

POOL_TEXT = {
    "POST": "Write a short public post about {topic} in a {tone} tone. One or two sentences. "
            "Reply with the post text only.",
    "COM": "Write a short comment answering someone's post about {topic}, in a {tone} tone. One or two "
           "sentences. Reply with the comment text only.",
    "DM": "Write a short private message to a friend about {topic}, in a {tone} tone. One or two "
          "sentences. Reply with the message text only.",
}


# ---------------------------------------------------------------------------- clustering
def stance_position(stance: str) -> float:
    """Where a persona's stance sits on the STANCES scale, 0 (strongly supports) to 1
    (strongly opposes); 0.5 when it names none of them."""
    found = [i for i, s in enumerate(STANCES) if s in stance]
    if not found:
        return 0.5
    best = max(found, key=lambda i: len(STANCES[i]))        # "strongly supports" over "supports"
    return best / (len(STANCES) - 1)


def persona_features(personas: Sequence[Persona], interests: Sequence[str], roles: Sequence[str]) -> np.ndarray:
    """One row per persona: interests (1 the main one, 0.5 the others; only those in
    ``interests``), role one-hot, stance position, Big Five on [0, 1], lambdas; each block scaled
    by FEATURE_WEIGHTS."""
    col = {t: i for i, t in enumerate(interests)}
    role_col = {r: i for i, r in enumerate(roles)}
    w = FEATURE_WEIGHTS
    rows = []
    for p in personas:
        tops = np.zeros(len(interests))
        for rank, topic in enumerate(p.interests):
            if topic in col:
                tops[col[topic]] = max(tops[col[topic]], 1.0 if rank == 0 else 0.5)
        role = np.zeros(len(roles))
        if p.role in role_col:
            role[role_col[p.role]] = 1.0
        big = [(p.big_five.get(t, 3.0) - 1) / 4 for t in TRAITS]
        lam = [(p.lambdas or {}).get(c, 1 / len(REWARD_NAMES)) for c in REWARD_NAMES]
        rows.append(np.concatenate([w["interests"] * tops, w["role"] * role, [w["stance"] * stance_position(p.stance)],
                                    w["big_five"] * np.asarray(big), w["lambdas"] * np.asarray(lam)]))
    return np.asarray(rows, dtype=float).reshape(len(rows), -1)


def squared_distances(x: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """(rows, centers) squared Euclidean distances, in O(rows * centers) memory."""
    d = (x * x).sum(axis=1)[:, None] - 2.0 * x @ centers.T + (centers * centers).sum(axis=1)[None, :]
    return np.maximum(d, 0.0)


def kmeans(x: np.ndarray, k: int, seed: int | None = 0,
           iterations: int = KMEANS_ITERATIONS) -> tuple[np.ndarray, np.ndarray]:
    """Seeded k-means (k-means++ start, Lloyd steps): ``(labels, centroids)``. ``k`` is cut to
    the number of distinct rows; clusters are numbered by their first row and none is empty."""
    n = len(x)
    k = max(1, min(k, len(np.unique(x, axis=0))))
    rng = np.random.default_rng(seed)
    centers = [x[int(rng.integers(n))]]
    d2 = squared_distances(x, centers[0][None, :])[:, 0]
    while len(centers) < k:                           # distinct rows are left, so d2.sum() > 0
        centers.append(x[int(rng.choice(n, p=d2 / d2.sum()))])
        d2 = np.minimum(d2, squared_distances(x, centers[-1][None, :])[:, 0])
    c = np.asarray(centers, dtype=float)
    labels = np.full(n, -1)
    for _ in range(iterations):
        d = squared_distances(x, c)
        new = d.argmin(axis=1)
        for j in np.setdiff1d(np.arange(k), new):     # an emptied cluster takes the worst-fit row of a larger one
            fit = d[np.arange(n), new]
            fit[np.bincount(new, minlength=k)[new] < 2] = -1.0
            new[int(fit.argmax())] = j
        if (new == labels).all():
            break
        labels = new
        c = np.stack([x[labels == j].mean(axis=0) for j in range(k)])
    first = list(dict.fromkeys(labels.tolist()))          # old label -> number by first row
    renumber = np.empty(k, dtype=int)
    renumber[first] = np.arange(k)
    return renumber[labels], c[first]


# ---------------------------------------------------------------------------- schemas
def group_plan_schema(n_actions: int, topics: Sequence[str], post_only: bool) -> dict:
    slot = {"type": "object", "properties": {
        "type": {"type": "string", "enum": ["POST"] if post_only else list(ACTION_TYPES)},
        "topic": {"type": "string", "enum": list(topics)},
        "tone": {"type": "string", "enum": list(TONES)}},
        "required": ["type", "topic", "tone"], "additionalProperties": False}
    return {"type": "object", "properties": {"actions": {"type": "array", "items": slot, "minItems": n_actions,
                                                         "maxItems": n_actions}},
            "required": ["actions"], "additionalProperties": False}


def check_group_plan(value: Any, n_actions: int, topics: Sequence[str], post_only: bool) -> Checked:
    """A plan reply: ``value`` is a list of ``n_actions`` slots ({type, topic, tone} or None)."""
    raw = value.get("actions") if isinstance(value, dict) else None
    if not isinstance(raw, list):
        return Checked([None] * n_actions, ['the reply must be an object {"actions": [...]}'])
    errors = [] if len(raw) == n_actions else [f"expected exactly {n_actions} actions, got {len(raw)}"]
    slots: list = []
    for i, a in enumerate(raw[:n_actions]):
        problem = slot_problem(a, topics, post_only)
        if problem:
            errors.append(f"action {i + 1}: {problem}")
        slots.append(None if problem else {"type": "NOT"} if a["type"] == "NOT" else
                     {"type": a["type"], "topic": a["topic"], "tone": a["tone"]})
    return Checked(slots + [None] * (n_actions - len(slots)), errors)


def slot_problem(slot: Any, topics: Sequence[str], post_only: bool) -> str | None:
    """What is wrong with one planned slot, or None."""
    if not isinstance(slot, dict):
        return f"each action must be an object, got {show(slot)}"
    kind = slot.get("type")
    if kind not in ACTION_TYPES:
        return f"type must be one of {list(ACTION_TYPES)}, got {show(kind)}"
    if post_only and kind != "POST":
        return f"round 1 allows only POST, got {kind}"
    if kind == "NOT":
        return None
    if slot.get("topic") not in topics:
        return f"topic must be one of {list(topics)}, got {show(slot.get('topic'))}"
    if slot.get("tone") not in TONES:
        return f"tone must be one of {list(TONES)}, got {show(slot.get('tone'))}"
    return None


def topic_vote_schema(topics: Sequence[str]) -> dict:
    vote = {"type": "integer", "enum": [1, 0, -1]}
    verdicts = {"type": "object", "properties": {t: vote for t in topics}, "required": list(topics),
                "additionalProperties": False}
    return {"type": "object", "properties": {"topics": verdicts}, "required": ["topics"], "additionalProperties": False}


def check_topic_votes(value: Any, topics: Sequence[str]) -> Checked:
    """A vote reply: ``value`` is {topic: 1 | 0 | -1} for the valid entries (missing ones are 0)."""
    verdicts = value.get("topics") if isinstance(value, dict) else None
    if not isinstance(verdicts, dict):
        return Checked({}, ['the reply must be {"topics": {"<topic>": 1 | 0 | -1, ...}}'])
    out, errors = {}, []
    for topic, vote in verdicts.items():
        if topic not in topics:
            errors.append(f"{topic!r} is not one of the topics {list(topics)}")
        elif not is_int(vote, numpy=False) or vote not in (-1, 0, 1):
            errors.append(f"the vote on {topic!r} must be 1, 0 or -1, got {vote!r}")
        else:
            out[topic] = int(vote)
    return Checked(out, errors)


def check_chars(name: str, value: Any) -> None:
    if not is_int(value, numpy=False) or not 10 <= value <= MAX_TEXT_CHARS:
        raise ParamError(name, f"{name} must be an integer in [10, {MAX_TEXT_CHARS}], got {show(value)}")


# ---------------------------------------------------------------------------- the policy
class ArchetypePolicy:
    """k LLM archetypes acting for N agents (see the module docstring).

    ``personas``: one per agent, by id (a mapping), in agent order (a sequence or a persona file,
    as ``load_personas`` reads), or None (generated with the seed). After the first ``act``:
    ``archetype_of`` (agent -> archetype), ``representatives`` (archetype -> agent),
    ``centroids``; ``plans_made`` / ``texts_made`` / ``votes_made`` count the requests sent
    (episodes together); ``round_stats`` describes the last step (requests of each kind,
    ``fallback_actions``: slots a member could not carry out, ``empty_texts``)."""

    def __init__(self, client, personas: Mapping[str, Persona] | Sequence[Persona] | str | Path | None, *, k: int = 8,
                 texts: str = "pool", pool_size: int = 3, seed: int | None = 0, prompts: PromptSet | None = None,
                 text_chars: int = 200, item_chars: int = 40, max_posts: int | None = 10,
                 max_vote_items: int | None = 20) -> None:
        ArchetypePolicy.check_params(k=k, texts=texts, pool_size=pool_size, seed=seed, prompts=prompts,
                                     text_chars=text_chars, item_chars=item_chars, max_posts=max_posts,
                                     max_vote_items=max_vote_items)
        self.client = client
        self.k, self.texts, self.pool_size, self.seed = k, texts, pool_size, seed
        self.prompts = prompts or PromptSet()
        self.text_chars, self.item_chars = text_chars, item_chars
        self.max_posts, self.max_vote_items = max_posts, max_vote_items
        if isinstance(personas, (str, Path)):
            personas = load_personas(personas)
        # a one-shot iterable (a generator) is read once, here
        self._persona_arg = personas if personas is None or isinstance(personas, Mapping) else list(personas)
        self.personas: dict[str, Persona] = {}
        self.archetype_of: dict[str, int] = {}
        self.representatives: list[str] = []           # archetype -> the member closest to its centroid
        self.centroids: np.ndarray | None = None
        self.feature_space: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())   # (interests, roles)
        self.distance: dict[str, float] = {}           # agent -> squared distance to its centroid
        self.plans_made = self.texts_made = self.votes_made = 0
        self.round_stats: dict[str, Any] = {}

    @classmethod
    def check_params(cls, **params: Any) -> None:
        """Raise what ``ArchetypePolicy(client, personas, **params)`` would raise about these
        keywords: a TypeError for an unknown keyword, a ``ParamError`` naming the parameter for a
        bad value."""
        inspect.signature(ArchetypePolicy).bind_partial(**params)
        limits = {"k": MAX_ARCHETYPES, "pool_size": MAX_POOL_SIZE}
        for name, high in limits.items():
            if name in params and (not is_int(params[name], numpy=False) or not 1 <= params[name] <= high):
                raise ParamError(name, f"{name} must be an integer in [1, {high}], got {show(params[name])}")
        if "texts" in params and (not isinstance(params["texts"], str) or params["texts"] not in TEXT_MODES):
            raise ParamError("texts", f"texts must be one of {TEXT_MODES}, got {show(params['texts'])}")
        for name in ("text_chars", "item_chars"):
            if name in params:
                check_chars(name, params[name])
        for name in ("max_posts", "max_vote_items"):
            value = params.get(name)
            if value is not None and (not is_int(value, numpy=False) or value < 1):
                raise ParamError(name, f"{name} must be a positive integer or None (show all), got {show(value)}")
        if params.get("prompts") is not None and not isinstance(params["prompts"], PromptSet):
            raise ParamError("prompts", f"prompts must be a PromptSet or None, got {show(params['prompts'])}")
        if "seed" in params:
            check_seed_param(params["seed"])

    # checkpoints pickle this object without its client (sockets, a loop thread, the API key);
    # the runner attaches a fresh client after loading
    def __getstate__(self) -> dict:
        return {**self.__dict__, "client": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    # ------------------------------------------------------------------ protocol
    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        return self.client.run(self.aact(observations))

    async def aact(self, observations: dict[str, Any]) -> dict[str, Any]:
        agents = list(observations)
        if not agents:
            return {}
        self.assign_personas(agents)
        first = observations[agents[0]]
        self.round_stats = {"round": first["round"], "phase": first["phase"], "archetypes": 0, "plan_requests": 0,
                            "text_requests": 0, "vote_requests": 0, "fallback_actions": 0, "empty_texts": 0}
        groups = self.groups(agents)
        self.round_stats["archetypes"] = len(groups)
        step = self._act_group if first["phase"] == "act" else self._vote_group
        results = await asyncio.gather(*(step(j, members, observations) for j, members in groups.items()))
        merged = {a: r for result in results for a, r in result.items()}
        return {a: merged[a] for a in agents}

    def reset(self) -> None:
        """Start a new episode: personas, archetypes and the request totals stay."""
        self.round_stats = {}

    @property
    def fallbacks(self) -> list[Fallback]:
        return self.client.usage.fallbacks

    def request_seed(self, who: str, rnd: int, purpose: str, slot: int | None = None) -> int:
        """The sampling seed of one request, stable across reruns with the same seed."""
        return zlib.crc32(f"{self.seed}|{who}|{rnd}|{purpose}|{slot}".encode()) & 0x7FFFFFFF

    # ------------------------------------------------------------------ personas and archetypes
    def assign_personas(self, agents: Sequence[str]) -> None:
        """Give each new agent its persona and archetype (the first call clusters them all)."""
        new = [a for a in agents if a not in self.personas]
        if not new:
            return
        self.personas.update(personas_for(new, self._persona_arg, len(self.personas),
                                          0 if self.seed is None else self.seed))
        if self.centroids is None:
            self.cluster(new)
        else:
            self._join(new)

    def cluster(self, agents: Sequence[str]) -> None:
        """Cluster ``agents`` into at most ``k`` archetypes (done once, on the first act)."""
        personas = [self.personas[a] for a in agents]
        interests = tuple(sorted({t for p in personas for t in p.interests}))
        roles = tuple(sorted({p.role for p in personas}))
        self.feature_space = (interests, roles)
        x = persona_features(personas, interests, roles)
        labels, self.centroids = kmeans(x, min(self.k, len(agents)), self.seed)
        d = squared_distances(x, self.centroids)[np.arange(len(agents)), labels]
        self.archetype_of = {a: int(j) for a, j in zip(agents, labels.tolist())}
        self.distance = {a: float(v) for a, v in zip(agents, d.tolist())}
        self.representatives = [min((a for a in agents if self.archetype_of[a] == j), key=self.distance.__getitem__)
                                for j in range(len(self.centroids))]

    def _join(self, agents: Sequence[str]) -> None:
        x = persona_features([self.personas[a] for a in agents], *self.feature_space)
        d = squared_distances(x, self.centroids)
        for a, row in zip(agents, d):
            self.archetype_of[a] = int(row.argmin())
            self.distance[a] = float(row.min())

    def groups(self, agents: Sequence[str]) -> dict[int, list[str]]:
        """Archetype -> its members among ``agents``, the one that speaks for it first (the
        representative when present, else the member closest to the centroid)."""
        out: dict[int, list[str]] = {}
        for a in agents:
            out.setdefault(self.archetype_of[a], []).append(a)
        return {j: sorted(out[j], key=lambda a: (a != self.representatives[j], self.distance[a]))
                for j in sorted(out)}

    def persona_block(self, agent: str) -> str:
        p = self.personas[agent]
        return self.prompts.render("persona", name=p.name, role=p.role, description=p.description,
                                   stance=p.stance, style=p.style, personality=p.personality())

    def _name(self, agent: str) -> str:
        p = self.personas.get(agent)
        return p.name if p is not None else agent

    # ------------------------------------------------------------------ act phase
    async def _act_group(self, j: int, members: list[str], observations: dict) -> dict:
        speaker, obs = members[0], observations[members[0]]
        slots = await self._plan(j, members, observations)
        planned = {m: self._execute(m, observations[m], slots) for m in members}
        if self.texts == "pool":
            pools = await self._pools(j, speaker, obs["round"], slots)
            for m, actions in planned.items():
                for i, (action, source) in enumerate(actions):
                    if action["type"] != "NOT":
                        action["text"] = self._draw(m, obs["round"], i, action, source, slots, pools)
        else:
            await asyncio.gather(*(self._write(m, observations[m], i, action)
                                   for m, actions in planned.items()
                                   for i, (action, _) in enumerate(actions) if action["type"] != "NOT"))
        return {m: {"actions": [action for action, _ in actions]} for m, actions in planned.items()}

    def _offered_topics(self, members: list[str], observations: dict) -> list[str]:
        seen = Counter(it["topic"] for m in members for it in observations[m]["feed"])
        ranked = [t for t, _ in seen.most_common()]
        return list(dict.fromkeys([*self.personas[members[0]].interests, *ranked,
                                   *observations[members[0]]["topics"]]))[:PLAN_TOPICS] or ["general"]

    def plan_messages(self, members: list[str], observations: dict, topics: list[str]) -> list[dict]:
        """The plan request of an archetype: the game, its speaker's persona and weights, then a
        compact view of what its members see."""
        pr, speaker = self.prompts, members[0]
        obs = observations[speaker]
        lambdas = obs["lambdas"]
        active = [c for c in REWARD_NAMES if lambdas.get(c, 0) > 0]
        goal = pr.render("goal", active_comps=", ".join(active) or "none",
                         active_weights=", ".join(f"{c} {lambdas[c]:.2f}" for c in active) or "none")
        system = f"{pr.render('game', n_actions=obs['n_actions'])}\n{self.persona_block(speaker)}\n{goal}"
        feed = obs["feed"] if self.max_posts is None else obs["feed"][:self.max_posts]
        lines = [f"- [{it['topic']}] {it['likes']} likes: {clip_text(it['text'], self.item_chars) or '(no text)'}"
                 for it in feed] or ["- nothing posted yet"]
        seen = Counter(it["topic"] for m in members for it in observations[m]["feed"])
        if seen:
            lines.append("Most seen topics: " + ", ".join(f"{t} ({n})" for t, n in seen.most_common(PLAN_TOPICS)))
        inbox = sum(bool(observations[m]["dms"]) for m in members)
        if inbox:
            lines.append(f"{inbox} of the {len(members)} users got private messages.")
        user = PLAN_USER.format(size=len(members), round=obs["round"], n_actions=obs["n_actions"],
                                summary="\n".join(lines), topics=", ".join(topics),
                                round_rule=" Round 1: every action must be a POST." if obs["round"] == 1 else "")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def _plan(self, j: int, members: list[str], observations: dict) -> list[dict]:
        """The archetype's planned slots ({type, topic, tone}); a slot left invalid falls back to
        NOT (round 1: a POST on the first offered topic), recorded."""
        speaker = members[0]
        obs = observations[speaker]
        rnd, n = obs["round"], obs["n_actions"]
        topics = self._offered_topics(members, observations)
        post_only = rnd == 1
        self.plans_made += 1
        self.round_stats["plan_requests"] += 1
        reply = await self.client.complete_json(
            self.plan_messages(members, observations, topics), group_plan_schema(n, topics, post_only),
            lambda v: check_group_plan(v, n, topics, post_only), name=PLAN_NAME, agent=speaker, round=rnd,
            purpose="plan", max_tokens=24 + 30 * n, repair=self.prompts.repair,
            seed=self.request_seed(f"archetype_{j}", rnd, "plan"))
        slots = list(reply.checked.value) if reply.checked is not None and reply.checked.value else [None] * n
        for i, slot in enumerate(slots):
            if slot is None:
                slots[i] = ({"type": "POST", "topic": topics[0], "tone": "neutral"} if post_only else {"type": "NOT"})
                self._fallback(speaker, rnd, "plan", i, reply.error or "no action in this slot", slots[i])
        return slots

    def _execute(self, agent: str, obs: dict, slots: list[dict]) -> list[tuple[dict, int]]:
        """The member's env actions for the planned slots, each with the slot it carries out, with
        its own targets; a slot it cannot carry out becomes a POST on the planned topic."""
        feed = obs["feed"]           # the env never shows an agent its own items (specification §5)
        inbox = sorted(obs["dms"], key=lambda d: d["id"], reverse=True)
        used: set = set()
        out = []
        for i, slot in enumerate(slots):
            kind = slot["type"]
            action = None
            if kind == "NOT":
                action = {"type": "NOT"}
            elif kind == "POST":
                action = {"type": "POST", "topic": slot["topic"], "tone": slot["tone"], "mentions": []}
            elif kind == "COM":
                target = pick_item(feed, slot["topic"], used)
                if target is not None:
                    used.add(target["id"])
                    action = {"type": "COM", "target_id": target["id"], "tone": slot["tone"], "mentions": []}
            else:
                action = self._message(agent, obs, slot, inbox, feed, used, i)
            if action is None:
                action = {"type": "POST", "topic": slot["topic"], "tone": slot["tone"], "mentions": []}
                self.round_stats["fallback_actions"] += 1
                self._fallback(agent, obs["round"], "execute", i, f"nothing to address with the planned {kind}",
                               "a POST on the planned topic")
            out.append((action, i))
        return out

    def _message(self, agent: str, obs: dict, slot: dict, inbox: list[dict], feed: list[dict], used: set,
                 i: int) -> dict | None:
        """A DM: the answer to the newest DM not answered yet, else a new one to a peer seen in
        the feed (the plan's topic first), else to a peer drawn with a stable seed."""
        for dm in inbox:
            if dm["id"] not in used:
                used.add(dm["id"])
                return {"type": "DM", "recipient": dm["author"], "target_id": dm["id"], "tone": slot["tone"]}
        peers = [it for it in feed if ("peer", it["author"]) not in used]
        item = pick_item(peers, slot["topic"], set())
        if item is not None:
            peer = item["author"]
        else:
            users = [u for u in obs["users"] if ("peer", u) not in used]      # users: everyone but the agent
            if not users:
                return None
            peer = users[self.request_seed(agent, obs["round"], "peer", i) % len(users)]
        used.add(("peer", peer))
        return {"type": "DM", "recipient": peer, "target_id": None, "topic": slot["topic"], "tone": slot["tone"]}

    # ------------------------------------------------------------------ texts
    async def _pools(self, j: int, speaker: str, rnd: int, slots: list[dict]) -> dict[int, list[str]]:
        """Planned slot -> its texts that came back usable (``pool_size`` requests per non-NOT slot)."""
        wanted = [(i, n) for i, slot in enumerate(slots) if slot["type"] != "NOT" for n in range(self.pool_size)]
        texts = await asyncio.gather(*(self._pool_text(j, speaker, rnd, i, n, slots[i]) for i, n in wanted))
        pools: dict[int, list[str]] = {i: [] for i, slot in enumerate(slots) if slot["type"] != "NOT"}
        for (i, _), text in zip(wanted, texts):
            if text:
                pools[i].append(text)
        return pools

    async def _pool_text(self, j: int, speaker: str, rnd: int, slot: int, n: int, planned: dict) -> str:
        self.texts_made += 1
        self.round_stats["text_requests"] += 1
        user = POOL_TEXT[planned["type"]].format(topic=planned["topic"], tone=planned["tone"])
        reply = await self.client.complete_text(
            [{"role": "system", "content": self.persona_block(speaker)}, {"role": "user", "content": user}],
            clean=lambda raw: clean_text(raw, self.text_chars), agent=speaker, round=rnd, purpose="write",
            max_tokens=self.text_chars // 4 + 8,
            seed=self.request_seed(f"archetype_{j}", rnd, "write", slot * MAX_POOL_SIZE + n))
        if not reply.ok:
            self._fallback(speaker, rnd, "write", slot, reply.error, "left out of the text pool")
        return reply.text

    def _draw(self, agent: str, rnd: int, i: int, action: dict, source: int, slots: list[dict],
              pools: dict[int, list[str]]) -> str:
        """A text for a member's action from the pool of the slot it carries out; an action that
        fell back to another type takes a pool of that type (the same topic first)."""
        if slots[source]["type"] == action["type"]:
            pool = pools.get(source, [])
        else:
            same = [s for s, slot in enumerate(slots) if slot["type"] == action["type"] and pools.get(s)]
            same.sort(key=lambda s: slots[s].get("topic") != action.get("topic"))
            pool = pools[same[0]] if same else []
        if not pool:
            self.round_stats["empty_texts"] += 1
            self._fallback(agent, rnd, "write", i, f"no usable {action['type']} text in the archetype's pool",
                           "empty text (the tone sets the sentiment)")
            return ""
        return pool[self.request_seed(agent, rnd, "draw", i) % len(pool)]

    def text_messages(self, agent: str, obs: dict, action: dict) -> list[dict]:
        """A member's own text request (``texts="member"``): its persona and the action with its
        real target, in the PromptSet's text prompts."""
        pr, kind, tone = self.prompts, action["type"], action["tone"]
        items = {it["id"]: it for it in (*obs["feed"], *obs["dms"])}
        target = items.get(action.get("target_id"))
        if kind == "POST":
            user = pr.render("text_post", recent="", topic=action["topic"], tone=tone, mention="")
        elif kind == "COM":
            user = pr.render("text_comment", thread="", author=self._name(target["author"]), tone=tone, mention="",
                             content=clip_text(target["text"], self.text_chars) or f"(a post about {target['topic']})",
                             topic=target["topic"])
        elif target is not None:
            content = clip_text(target["text"], self.text_chars) or f"(a message about {target['topic']})"
            user = pr.render("text_dm_reply", conversation="", recipient=self._name(action["recipient"]), tone=tone,
                             content=content)
        else:
            user = pr.render("text_dm", conversation="", recipient=self._name(action["recipient"]),
                             topic=action["topic"], tone=tone)
        return [{"role": "system", "content": self.persona_block(agent)}, {"role": "user", "content": user}]

    async def _write(self, agent: str, obs: dict, slot: int, action: dict) -> None:
        self.texts_made += 1
        self.round_stats["text_requests"] += 1
        reply = await self.client.complete_text(
            self.text_messages(agent, obs, action), clean=lambda raw: clean_text(raw, self.text_chars),
            agent=agent, round=obs["round"], purpose="write", max_tokens=self.text_chars // 4 + 8,
            seed=self.request_seed(agent, obs["round"], "write", slot))
        action["text"] = reply.text
        if not reply.ok:
            self.round_stats["empty_texts"] += 1
            self._fallback(agent, obs["round"], "write", slot, reply.error, "empty text (the tone sets the sentiment)")

    # ------------------------------------------------------------------ vote phase
    async def _vote_group(self, j: int, members: list[str], observations: dict) -> dict:
        """One vote request for the archetype; members vote their own items by topic."""
        speaker = members[0]
        rnd = observations[speaker]["round"]
        items = {m: self._vote_items(observations[m]) for m in members}
        counts = Counter(it["topic"] for its in items.values() for it in its)
        if not counts:
            return {m: {"votes": {}} for m in members}
        topics = [t for t, _ in counts.most_common(VOTE_TOPICS)]
        example = {}
        for its in items.values():
            for it in its:
                if it["text"] and it["topic"] not in example:
                    example[it["topic"]] = clip_text(it["text"], self.item_chars)
        lines = "\n".join(f"- {t} ({counts[t]})" + (f': "{example[t]}"' if t in example else "") for t in topics)
        user = VOTE_USER.format(size=len(members), round=rnd, topics=lines)
        self.votes_made += 1
        self.round_stats["vote_requests"] += 1
        reply = await self.client.complete_json(
            [{"role": "system", "content": self.persona_block(speaker)}, {"role": "user", "content": user}],
            topic_vote_schema(topics), lambda v: check_topic_votes(v, topics), name=VOTE_NAME, agent=speaker,
            round=rnd, purpose="vote", max_tokens=16 + 12 * len(topics), repair=self.prompts.repair,
            seed=self.request_seed(f"archetype_{j}", rnd, "vote"))
        verdict = dict(reply.checked.value) if reply.checked is not None and reply.checked.value else {}
        if not reply.ok:
            self._fallback(speaker, rnd, "vote", None, reply.error,
                           f"0 on {len(topics) - len(verdict)} of {len(topics)} topics")
        return {m: {"votes": {it["id"]: verdict.get(it["topic"], 0) for it in its}} for m, its in items.items()}

    def _vote_items(self, obs: dict) -> list[dict]:
        items = obs["vote_items"]
        return items if self.max_vote_items is None else items[:self.max_vote_items]

    def _fallback(self, agent, rnd, purpose, slot, reason, used) -> None:
        self.client.usage.record_fallback(Fallback(agent, rnd, purpose, slot, str(reason), used))


def pick_item(items: Sequence[dict], topic: str, used: set) -> dict | None:
    """The item to address: not used yet if possible, the plan's topic first, then the most
    liked, then the newest."""
    fresh = [it for it in items if it["id"] not in used] or list(items)
    if not fresh:
        return None
    return max(fresh, key=lambda it: (it["topic"] == topic, it.get("likes", 0), it["id"]))
