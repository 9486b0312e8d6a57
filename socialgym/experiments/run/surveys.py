"""Surveys during a run: questionnaires put to chosen agents at the end of chosen rounds.

A config's ``surveys:`` section (its form and checks: :mod:`socialgym.experiments.define.surveys`)
says what is asked, when and of whom; this module asks it and collects the answers.

**When.** A survey is administered at the END of its round, after the vote step (so it sees the
round's rewards and tie updates): ``at_round: r``, or ``every: k`` with ``from`` (default ``k``)
and ``until`` (default ``env.max_rounds``), i.e. after rounds from, from + k, ... <= until; so
``every: 3`` asks after rounds 3, 6, 9, ... The rounds follow from the config alone (the
helpers of ``socialgym.experiments.define.schedule``), so a resumed run needs no state for them.

**Whom.** ``target``: ``all`` (default), a policy group's name, or a list of agent ids.

**What.** Scales: ``likert5`` (1..5), ``0-10``, ``1-10`` (integers) and ``text`` (free text, at
most a few sentences). A built-in instrument's survey is named after the instrument unless it
has a ``name``; survey names must be unique within a run. The built-ins (item ids are fixed):

- ``mini_ipip``: the 20 Mini-IPIP statements of ``socialgym.agents.persona.MINI_IPIP``, ids
  ``ipip_1`` .. ``ipip_20`` in that order, likert5, how accurately each describes the agent;
- ``stance``: one item ``stance``, likert5, 1 strongly against .. 5 strongly for the issue. The
  issue's wording is ``issue`` when given, else an LLM agent's persona issue (its
  ``Persona.issue``, unless that is the placeholder default), else the ``topic``;
- ``satisfaction``: one item ``satisfaction``, 1-10, how satisfied the agent is with the posts
  its feed shows it (recagent's 1-10 rating of recommendations);
- ``trust``: one item ``trust``, 0-10, how much the agent trusts the other users.

**Who answers.**

- *LLM agents* (played by a policy with ``personas`` and ``memories``, i.e. ``LLMPolicy``,
  alone or inside a ``PolicyMix``): per agent and survey, one structured request for all
  numeric items (``socialgym.llm.schemas.answers_schema``, re-prompted with the validation
  error by the client) and one plain request per free-text item. The system message is the
  persona (``persona_block``) and what the agent remembers (``AgentMemory.prompt_block``);
  the templates are ``survey_round_system``, ``survey_round_user`` and ``survey_round_text`` of
  the policy's ``PromptSet``. All requests of a round run concurrently (purpose ``survey``). A
  request that fails, or a reply still invalid after its repairs, gives every row it was to
  fill status ``fallback`` with an empty answer, and one recorded fallback
  (``client.usage.fallbacks``, purpose ``survey``). A survey reads the agent's memory; it
  never writes to it, nor to the environment.
- *Other agents*: first the policy's optional hook ``answer_survey(agent, item, context)``
  (``socialgym.baselines.protocol``): ``item`` is a dict (``id``, ``text``, ``scale``,
  ``survey``, ``instrument``, and ``topic`` for stance), ``context`` a :class:`SurveyContext`
  (``round``, ``env`` for reading only, ``index`` of the agent, ``agent``, ``survey``, ``rule``:
  the rule answer below or None). A return other than None must fit the scale (else a
  ``ValueError`` naming the policy, the agent and the item) and is used with source ``hook``.
  Otherwise the rules below answer (source ``rule``), computed for all agents at once with
  numpy. Items without a rule (mini_ipip, custom items) stay ``unanswered``.

**The rules.** A simple, stated model of what a scripted agent would answer, not a claim about
how people answer; every rounding below rounds halves up.

- stance on topic T: ``clip(round(3 + 2 m), 1, 5)``, where ``m`` is the mean sentiment of the
  items on T in the agent's act-phase feeds from round 1 to the survey's round, each
  appearance counted (the exposure that :meth:`Surveys.observe` adds up); 3 when the agent was
  shown nothing on T (also when T is not a topic of the platform yet);
- satisfaction (1-10): ``1 + round(9 s)``, where ``s`` is the share of the items the agent was
  shown to vote on in the survey's round (its vote feed) that it up-voted: how many of the
  recommendations it liked; unanswered for an agent shown nothing to vote on;
- trust (0-10): ``round(10 w)``, where ``w`` is the mean weight of the agent's outgoing ties
  (``env.tie_matrix()`` row, weights > 0); 0 when it has none.

**Output.** :meth:`Surveys.administer` returns the rows (:data:`SURVEY_COLUMNS`; ``answer`` an
int, the text, or ``""``; ``status`` ``ok`` | ``fallback`` | ``unanswered``; ``source`` ``llm`` |
``hook`` | ``rule`` | ``""``), surveys in list order, each survey's agents in
``env.possible_agents`` order, each agent's items in order, and one interview entry per
free-text answer. :func:`interview` puts one question to one LLM agent.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np

from socialgym.experiments.define.schedule import due as _due_specs
from socialgym.experiments.define.surveys import (LLM_ANSWER_CHARS, MAX_ANSWER_CHARS, MAX_TEXT_CHARS,
                                                  SCALES, check_surveys, items_of, scale_hint)
from socialgym.platform.topics import normalise_topic
from socialgym.platform.validation import is_int, show

@dataclass(frozen=True)
class SurveyContext:
    """What an ``answer_survey`` hook gets besides the agent and the item. ``env`` is the live
    environment: read it, never change it."""

    round: int
    env: Any
    index: int
    agent: str
    survey: str
    rule: int | None



# ---------------------------------------------------------------------------------- policies
def _owner(policy: Any, agent: str) -> Any:
    owners = getattr(policy, "owner", None)
    if isinstance(owners, Mapping):             # a PolicyMix
        if agent not in owners:
            raise ValueError(f"{agent!r} is not an agent of this policy mix")
        return owners[agent]
    return policy


def _is_llm(owner: Any) -> bool:
    return hasattr(owner, "personas") and hasattr(owner, "memories")


def _render(prompts: Any, template_name: str, /, **values: Any) -> str:
    template = getattr(prompts, template_name, None)
    if template is None:          # a PromptSet pickled before these templates existed
        from socialgym.llm.prompts import PromptSet
        template = getattr(PromptSet(), template_name)
    return template.format(**values)


def _system(owner: Any, agent: str) -> dict:
    block = owner.memories[agent].prompt_block()
    memory = f"What you remember:\n{block}" if block else ""
    content = _render(owner.prompts, "survey_round_system", persona=owner.persona_block(agent), memory=memory,
                      name=owner.personas[agent].name)
    return {"role": "system", "content": content}


def _numeric_user(owner: Any, r: int, spec: Mapping, items: list[dict]) -> str:
    lines = "\n".join(f"- {it['id']}: {it['text']} [{scale_hint(spec, it['scale'])}]" for it in items)
    fmt = '{"answers": {' + ", ".join(f'"{it["id"]}": <{_range(it["scale"])}>' for it in items) + "}}"
    return _render(owner.prompts, "survey_round_user", round=r, items=lines, format=fmt)


def _range(scale: str) -> str:
    values = SCALES[scale]
    return f"{values[0]}-{values[-1]}"


def _persona_issue(owner: Any, agent: str) -> str | None:
    from socialgym.agents.persona import Persona
    persona = owner.personas.get(agent)
    issue = getattr(persona, "issue", None)
    return issue if issue and issue != Persona.__dataclass_fields__["issue"].default else None


async def _ask_numeric(client, owner, agent: str, r: int, spec: Mapping, items: list[dict], purpose: str):
    from socialgym.llm.schemas import answers_schema, check_answers

    allowed = {it["id"]: SCALES[it["scale"]] for it in items}
    messages = [_system(owner, agent), {"role": "user", "content": _numeric_user(owner, r, spec, items)}]
    return await client.complete_json(messages, answers_schema(allowed), lambda v: check_answers(v, allowed),
                                      name="survey", agent=agent, round=r, purpose=purpose,
                                      max_tokens=32 + 10 * len(items), repair=owner.prompts.repair)


async def _ask_text(client, owner, agent: str, r: int, question: str, purpose: str):
    from socialgym.llm.text import clean_text

    messages = [_system(owner, agent),
                {"role": "user", "content": _render(owner.prompts, "survey_round_text", round=r, question=question)}]
    return await client.complete_text(messages, clean=lambda raw: clean_text(raw, LLM_ANSWER_CHARS, max_sentences=3),
                                      agent=agent, round=r, purpose=purpose, max_tokens=LLM_ANSWER_CHARS // 3)


def _record_fallback(client, agent: str, r: int, purpose: str, reason: str) -> None:
    from socialgym.llm.usage import Fallback
    client.usage.record_fallback(Fallback(agent, r, purpose, None, reason, "no answer"))


def _hook_answer(value: Any, item: Mapping, owner: Any, agent: str) -> int | str:
    scale = item["scale"]
    if scale == "text":
        if isinstance(value, str) and value.strip() and len(value) <= MAX_ANSWER_CHARS:
            return value.strip()
        expected = f"a non-empty string of at most {MAX_ANSWER_CHARS} characters"
    else:
        if is_int(value) and int(value) in SCALES[scale]:
            return int(value)
        expected = f"an integer from {SCALES[scale][0]} to {SCALES[scale][-1]}"
    raise ValueError(f"{type(owner).__name__}.answer_survey returned {show(value)} for {agent}, item "
                     f"{item['survey']}.{item['id']} (scale {scale}); expected {expected} or None")


def _half_up(x: np.ndarray) -> np.ndarray:
    """Round halves up (the tiny slack keeps 3.4999999999 from float sums at 3.5)."""
    return np.floor(np.asarray(x, float) + 0.5 + 1e-9).astype(np.int64)


# ---------------------------------------------------------------------------------- runtime
class Surveys:
    """The run's surveys and the state their rule answers need (picklable: it goes into the
    checkpoint). ``agents``: the env's ``possible_agents``; ``groups`` and ``kinds``: per agent,
    its policy group's name (``""`` when none) and its policy kind (the ``group`` and ``policy``
    columns). Setting ``specs`` checks them again (a fork may change later rounds' surveys)."""

    def __init__(self, specs: Sequence[Mapping], agents: Sequence[str], groups: Sequence[str],
                 kinds: Sequence[str]) -> None:
        self.agents = list(agents)
        n = len(self.agents)
        if isinstance(groups, Mapping):                  # name -> ids: per-agent labels
            label = {a: g for g, ids in groups.items() for a in ids}
            groups = [label.get(a, "") for a in self.agents]
        self.groups, self.kinds = list(groups), list(kinds)
        if len(self.groups) != n or len(self.kinds) != n:
            raise ValueError(f"Surveys: groups ({len(self.groups)}) and kinds ({len(self.kinds)}) must have one "
                             f"entry per agent ({n})")
        self._index = {a: i for i, a in enumerate(self.agents)}
        self.exposure: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        """Normalised stance topic -> (sum, count) per agent of the sentiment of the items on it
        in the agent's act-phase feeds so far."""
        self.observed_round = 0
        self._last_added: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.specs = specs

    # ---- specs -------------------------------------------------------------------------
    @property
    def specs(self) -> list[dict]:
        return self._specs

    @specs.setter
    def specs(self, value: Sequence[Mapping]) -> None:
        self._specs = check_surveys(list(value or []), max_rounds=None, agents=self.agents,
                                    groups=self.members())

    def members(self) -> dict[str, list[str]]:
        """Policy group name -> its agent ids (named groups only)."""
        out: dict[str, list[str]] = {}
        for agent, group in zip(self.agents, self.groups):
            if group:
                out.setdefault(group, []).append(agent)
        return out

    def due(self, r: int, max_rounds: int) -> list[dict]:
        """The surveys to administer after round ``r``, in list order."""
        return list(_due_specs(self._specs, r, max_rounds))

    def targets(self, spec: Mapping) -> np.ndarray:
        """Agent indices a survey asks, ascending (``possible_agents`` order)."""
        target = spec.get("target", "all")
        if target == "all":
            return np.arange(len(self.agents))
        ids = self.members()[target] if isinstance(target, str) else target
        return np.unique(np.array([self._index[a] for a in ids], np.int64))

    # ---- exposure ----------------------------------------------------------------------
    def _stance_topics(self) -> list[str]:
        return list(dict.fromkeys(normalise_topic(s["topic"]) for s in self._specs if s.get("instrument") == "stance"))

    def observe(self, env) -> None:
        """Add the current round's act-phase feeds (``env.act_feeds``) to each agent's exposure on
        every stance topic. Call it once a round, before the act step; a second call in the same
        round replaces that round's contribution (the feeds the agents act on count), and a
        round before the last one observed (a new episode) starts the counts afresh."""
        n = len(self.agents)
        r = int(env.round)
        if r < self.observed_round:
            self.exposure, self._last_added, self.observed_round = {}, {}, 0
        if r == self.observed_round:
            for key, (s, c) in self._last_added.items():
                if key in self.exposure:
                    self.exposure[key][0][:] -= s
                    self.exposure[key][1][:] -= c
        feed = np.asarray(env.act_feeds)
        valid = feed >= 0
        n_items = len(env.content)
        if n_items:
            safe = np.minimum(np.maximum(feed, 0), n_items - 1)
            topics = env.content.column("topic")[safe]
            sentiment = env.content.column("sentiment")[safe]
        added = {}
        for key in self._stance_topics():
            sums, counts = self.exposure.setdefault(key, (np.zeros(n), np.zeros(n, np.int64)))
            tid = env.vocab.get(key)
            if tid is None or not n_items:
                s, c = np.zeros(n), np.zeros(n, np.int64)
            else:
                hit = valid & (topics == tid)
                s, c = np.where(hit, sentiment, 0.0).sum(axis=1), hit.sum(axis=1).astype(np.int64)
            sums += s
            counts += c
            added[key] = (s, c)
        self._last_added, self.observed_round = added, r

    # ---- rule answers ------------------------------------------------------------------
    def stance_rule(self, topic: str) -> np.ndarray:
        """Every agent's rule answer to a stance survey on ``topic`` (see the module docstring)."""
        n = len(self.agents)
        sums, counts = self.exposure.get(normalise_topic(topic), (np.zeros(n), np.zeros(n, np.int64)))
        mean = np.divide(sums, counts, out=np.zeros(n), where=counts > 0)
        return np.where(counts > 0, np.clip(_half_up(3 + 2 * mean), 1, 5), 3).astype(np.int64)

    @staticmethod
    def satisfaction_rule(env) -> np.ndarray | None:
        """``1 + round(9 s)``, ``s`` the up-voted share of the agent's vote items of the last round;
        -1 (unanswered) for an agent shown none, None before the first round closed."""
        if env.last_round is None:
            return None
        batch = env.last_round.batch
        n = len(env.possible_agents)
        shown = (np.asarray(batch.vote_feed) >= 0).sum(axis=1)
        voter, value = np.asarray(batch.vote_voter, np.int64), np.asarray(batch.vote_value)
        liked = np.bincount(voter[value > 0], minlength=n)
        share = np.divide(liked, shown, out=np.zeros(n), where=shown > 0)
        return np.where(shown > 0, 1 + _half_up(9 * share), -1).astype(np.int64)

    @staticmethod
    def trust_rule(env) -> np.ndarray:
        """``round(10 w)``, ``w`` the mean weight of the agent's outgoing ties (0 without any)."""
        W = env.tie_matrix().tocsr()
        n = W.shape[0]
        rows = np.repeat(np.arange(n), np.diff(W.indptr))
        positive = W.data > 0
        sums = np.bincount(rows[positive], weights=W.data[positive], minlength=n)
        counts = np.bincount(rows[positive], minlength=n)
        mean = np.divide(sums, counts, out=np.zeros(n), where=counts > 0)
        return np.where(counts > 0, np.clip(_half_up(10 * mean), 0, 10), 0).astype(np.int64)

    def _rule(self, spec: Mapping, env, cache: dict) -> np.ndarray | None:
        instrument = spec.get("instrument")
        key = (instrument, normalise_topic(spec["topic"]) if instrument == "stance" else None)
        if key not in cache:
            if instrument == "stance":
                cache[key] = self.stance_rule(spec["topic"])
            elif instrument == "satisfaction":
                cache[key] = self.satisfaction_rule(env)
            elif instrument == "trust":
                cache[key] = self.trust_rule(env)
            else:
                cache[key] = None
        return cache[key]

    # ---- administering -----------------------------------------------------------------
    def administer(self, r: int, env, policy, client) -> tuple[list[dict], list[dict]]:
        """Put the surveys due after round ``r`` to their agents (call it after the round's vote
        step). Returns ``(rows, interviews)``: one row (:data:`SURVEY_COLUMNS`) per survey,
        agent and item, and one ``{"round", "agent", "survey", "item", "question", "answer"}``
        entry per free-text answer. Changes neither the env nor any agent's memory."""
        if list(env.possible_agents) != self.agents:
            raise ValueError("Surveys.administer: the env's agents are not the ones these surveys were made for")
        specs = self.due(r, env.config.max_rounds)
        if not specs:
            return [], []
        plan = []            # (spec, [(index, agent, owner, items, is_llm)])
        llm_owners: dict[int, Any] = {}
        for spec in specs:
            entries = []
            for i in self.targets(spec).tolist():
                agent = self.agents[i]
                owner = _owner(policy, agent)
                llm = _is_llm(owner)
                if llm:
                    llm_owners.setdefault(id(owner), owner)
                entries.append([i, agent, owner, None, llm])
            plan.append((spec, entries))
        for owner in llm_owners.values():       # personas as the first act step would assign them
            mine = [a for a in self.agents if _owner(policy, a) is owner]
            if any(a not in owner.personas for a in mine) and hasattr(owner, "assign_personas"):
                owner.assign_personas(mine)
        for spec, entries in plan:
            for entry in entries:
                issue = _persona_issue(entry[2], entry[1]) if entry[4] and spec.get("instrument") == "stance" else None
                entry[3] = items_of(spec, issue)

        # (survey, agent, item id) -> (answer, status, source)
        answers: dict[tuple[int, str, str], tuple[Any, str, str]] = {}
        self._llm_answers(r, plan, client, answers)
        rules: dict = {}
        for s, (spec, entries) in enumerate(plan):
            rule = self._rule(spec, env, rules)
            for i, agent, owner, items, llm in entries:
                if llm:
                    continue
                hook = getattr(owner, "answer_survey", None)
                for item in items:
                    base = rule[i] if rule is not None and item["scale"] != "text" and rule[i] >= 0 else None
                    base = int(base) if base is not None else None
                    if callable(hook):
                        given = dict(item, survey=spec["name"], instrument=spec.get("instrument"))
                        if spec.get("instrument") == "stance":
                            given["topic"] = spec["topic"]
                        value = hook(agent, given, SurveyContext(r, env, i, agent, spec["name"], base))
                        if value is not None:
                            answers[s, agent, item["id"]] = (_hook_answer(value, given, owner, agent), "ok", "hook")
                            continue
                    answers[s, agent, item["id"]] = (base, "ok", "rule") if base is not None else ("", "unanswered", "")

        rows, interviews = [], []
        for s, (spec, entries) in enumerate(plan):
            for i, agent, owner, items, llm in entries:
                for item in items:
                    answer, status, source = answers[s, agent, item["id"]]
                    rows.append({"round": r, "agent": agent, "group": self.groups[i], "policy": self.kinds[i],
                                 "survey": spec["name"], "item": item["id"], "scale": item["scale"],
                                 "answer": answer, "status": status, "source": source})
                    if item["scale"] == "text" and status == "ok":
                        interviews.append({"round": r, "agent": agent, "survey": spec["name"], "item": item["id"],
                                           "question": item["text"], "answer": answer})
        return rows, interviews

    def _llm_answers(self, r: int, plan: list, client, answers: dict) -> None:
        jobs, asks = [], []           # (survey, agent, items, client) and the request each makes
        for s, (spec, entries) in enumerate(plan):
            for i, agent, owner, items, llm in entries:
                if not llm:
                    continue
                use = client if client is not None else getattr(owner, "client", None)
                if use is None:
                    raise ValueError(f"surveys: {agent} is an LLM agent but the run has no LLM client")
                numeric = [it for it in items if it["scale"] != "text"]
                if numeric:
                    jobs.append((s, agent, numeric, use))
                    asks.append(partial(_ask_numeric, use, owner, agent, r, spec, numeric, "survey"))
                for it in items:
                    if it["scale"] == "text":
                        jobs.append((s, agent, [it], use))
                        asks.append(partial(_ask_text, use, owner, agent, r, it["text"], "survey"))
        by_client: dict[int, list[int]] = {}      # (one client in a run; each runs on its own loop)
        for k, job in enumerate(jobs):
            by_client.setdefault(id(job[3]), []).append(k)
        replies: list = [None] * len(jobs)
        for ks in by_client.values():
            async def gather(ks=ks):
                return await asyncio.gather(*(asks[k]() for k in ks))

            for k, reply in zip(ks, jobs[ks[0]][3].run(gather())):
                replies[k] = reply
        for (s, agent, items, use), reply in zip(jobs, replies):
            name = plan[s][0]["name"]
            if not reply.ok:
                what = name if items[0]["scale"] != "text" else f"{name}.{items[0]['id']}"
                _record_fallback(use, agent, r, "survey", f"{what}: {reply.error}")
                for it in items:
                    answers[s, agent, it["id"]] = ("", "fallback", "")
            elif items[0]["scale"] == "text":
                answers[s, agent, items[0]["id"]] = (reply.text, "ok", "llm")
            else:
                value = reply.checked.value
                for it in items:
                    answers[s, agent, it["id"]] = (int(value[it["id"]]), "ok", "llm")


# ---------------------------------------------------------------------------------- interviews
def is_llm_agent(policy, agent: str) -> bool:
    """Whether ``agent`` is played by an LLM policy (one with personas and memories) of ``policy``."""
    return _is_llm(_owner(policy, agent))


def interview(policy, agent: str, question: str, client, *, round: int, scale: str = "text") -> dict:
    """Put one question to one LLM agent, from its current state (persona and memory), without
    changing it. Returns ``{"agent", "round", "question", "scale", "answer", "status"}``:
    ``status`` ``ok``, or ``fallback`` with an empty answer when the server replied but with
    nothing usable (recorded in ``client.usage.fallbacks``, purpose ``interview``). ``scale``:
    ``text`` (default) or a numeric scale (the answer is then an integer of it). Raises
    ``ValueError`` naming the agent when it is not an LLM agent of ``policy`` (or has no persona
    yet), or for a bad question or scale; :class:`RunError` (one line naming the server and the
    reason) when the request itself failed (server down, timeouts, retries spent); the client's
    ``LLMFatalError`` (key or model refused) passes through."""
    owner = _owner(policy, agent)
    if not _is_llm(owner):
        raise ValueError(f"interview: {agent} is not an LLM agent of this policy (it is played by "
                         f"{type(owner).__name__}); only LLM agents can be interviewed")
    if agent not in owner.personas or agent not in owner.memories:
        raise ValueError(f"interview: {agent} has no persona yet (interview it after its first round)")
    if scale not in SCALES:
        raise ValueError(f"interview: scale must be one of {', '.join(SCALES)}, got {show(scale)}")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"interview: the question must be a non-empty string, got {show(question)}")
    if len(question) > MAX_TEXT_CHARS:
        raise ValueError(f"interview: the question has {len(question)} characters, more than {MAX_TEXT_CHARS}")
    if not is_int(round) or round < 0:
        raise ValueError(f"interview: round must be an integer >= 0, got {show(round)}")
    round = int(round)
    use = client if client is not None else getattr(owner, "client", None)
    if use is None:
        raise ValueError(f"interview: no LLM client to ask {agent} with")
    question = question.strip()
    if scale == "text":
        reply = use.run(_ask_text(use, owner, agent, round, question, "interview"))
        answer = reply.text if reply.ok else ""
    else:
        item = {"id": "answer", "text": question, "scale": scale}
        reply = use.run(_ask_numeric(use, owner, agent, round, {}, [item], "interview"))
        answer = int(reply.checked.value["answer"]) if reply.ok else ""
    if not reply.ok and reply.raw is None:       # no reply at all: there is no answer to give
        _request_failed(use, agent, reply.error, round)
    if not reply.ok:
        _record_fallback(use, agent, round, "interview", reply.error)
    return {"agent": agent, "round": round, "question": question, "scale": scale, "answer": answer,
            "status": "ok" if reply.ok else "fallback"}


def _request_failed(client, agent: str, error: str | None, round: int) -> None:
    """Raise the :class:`RunError` of an interview whose request failed (``complete_*``'s
    "request failed: ..." reply), naming the server; ``LLMServerDown`` when no server was there
    to connect to (as a run's round stops)."""
    from socialgym.experiments.errors import RunError
    from socialgym.llm.client import LLMServerDown

    outage = getattr(client, "outage", None)
    down = outage(round) if callable(outage) else None
    if down is not None:
        raise LLMServerDown(f"interview of {agent}: {down}", base_url=getattr(client, "base_url", None))
    reason = (error or "no reply").removeprefix("request failed: ")
    server = getattr(client, "base_url", None) or "(unknown address)"
    raise RunError(f"interview: the request to the LLM server at {server} for {agent} failed: {reason}")


__all__ = ["SurveyContext", "Surveys", "interview", "is_llm_agent"]
