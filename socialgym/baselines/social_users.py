"""Scripted users who use every action of the platform, with parameters meant to be calibrated.

:class:`SocialUsers` extends :class:`~socialgym.baselines.topic_users.TopicUsers` (topic
preferences, preference-driven engagement) with what TopicUsers leaves out: heterogeneous
activity (a few very active accounts, many quiet ones), direct messages (new ones and replies to
the inbox), mentions, critical tones, homophily (engaging more with authors who share one's main
interest) and reciprocity (answering those who are tied to or mention oneself). Every behaviour
is a probability with a keyword, and :attr:`SocialUsers.TUNABLE` gives each tunable keyword's
search range, so the parameters can be fitted to published platform statistics.

Parameter sets are stored as named *populations* (JSON files, :func:`save_population`,
:func:`load_population`); ``socialgym/populations/`` holds the bundled ones (``default``).
"""

from __future__ import annotations

import inspect
import json
import math
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from socialgym.baselines.topic_users import TopicUsers, is_stacked, phase_name
from socialgym.envs.feed.encoding import DM_FEATURES, FEED_ITEM_FEATURES, FIELDS, ActionLayout
from socialgym.platform.actions import ACTION_TYPES, COM, DM, NOT, POST, TONES
from socialgym.platform.validation import is_int, show
from socialgym.recommenders.params import ParamError

_PRESENT, _AUTHOR, _TOPIC, _TIE_OUT, _TIE_IN, _MENTIONS_ME = (
    FEED_ITEM_FEATURES.index(f) for f in ("present", "author", "topic", "tie_out", "tie_in", "mentions_me"))
_DM_PRESENT, _DM_AUTHOR, _DM_TOPIC = (DM_FEATURES.index(f) for f in ("present", "author", "topic"))
_TYPE, _TARGET, _RECIPIENT, _REPLY, _TOPIC_FIELD, _TONE = (
    FIELDS.index(f) for f in ("type", "target_slot", "recipient", "reply_slot", "topic", "tone"))
_SUPPORTIVE, _NEUTRAL, _CRITICAL = (TONES.index(t) for t in ("supportive", "neutral", "critical"))
_TOPIC_KEYWORDS = frozenset(inspect.signature(TopicUsers).parameters)
MAX_ACTIVITY_SIGMA = 10.0
"""Largest ``activity_sigma`` accepted: the multipliers' median is ``exp(-sigma^2 / 2)``, so
beyond it almost every agent would be silent."""
POPULATION_KIND = "social_users"


@dataclass
class _SocialView:
    """What one call reads, as arrays (row k = agent ``rows[k]``, at least one column each).

    ``topic``/``author``/``tie_out``/``tie_in``/``mentions_me``/``present`` describe the feed in
    the act phase and the vote items in the vote phase; ``dm_*`` the inbox (act phase). Authors
    are policy rows (-1 unknown). ``ids``/``dm_ids``: content ids, for structured output only.
    ``topic_limit``: the numeric topic dimension (numeric output), None for structured output.
    """

    rows: np.ndarray
    phase: str
    first_round: bool
    n_actions: int
    present: np.ndarray
    topic: np.ndarray
    author: np.ndarray
    tie_out: np.ndarray
    tie_in: np.ndarray
    mentions_me: np.ndarray
    dm_present: np.ndarray
    dm_topic: np.ndarray
    dm_author: np.ndarray
    ids: np.ndarray | None = None
    dm_ids: np.ndarray | None = None
    topic_names: Any = None
    topic_limit: int | None = None


class SocialUsers(TopicUsers):
    """Topic users with heterogeneous activity who post, comment, DM, mention, vote and criticise.

    Preferences, ``r[c]`` (relative preference), ``base``/``gain``/``tie_gain``, ``dislike_prob``
    and ``supportive_threshold`` are as in :class:`TopicUsers`. With ``tie_out``/``tie_in`` the
    item's ``tie_out``/``tie_in`` features (the viewer's tie to the author and back),
    ``same_group`` 1 when the author's main interest equals the viewer's and ``mentions_me`` 1
    when the item mentions the viewer, the **engagement probability** of a shown item is

        p(item) = clip(base + gain * r[topic] + tie_gain * tie_out + group_gain * same_group
                       + reciprocity_gain * max(tie_in, mentions_me), 0, 1)

    **Activity.** Agent i's per-slot activity is ``clip(activity * m_i, 0, 1)``; ``m_i`` is drawn
    once at construction from a lognormal with mean 1 and log-sd ``activity_sigma`` (0: all 1).

    **Act phase**, for each of the ``N`` slots of an agent (round 1: every slot POSTs, the only
    valid type): the slot is used with the agent's activity, else NOT. A used slot POSTs with
    probability ``p_post`` (topic drawn from the preferences), sends a DM with ``p_dm``, and
    otherwise considers commenting: the k-th commenting slot takes the k-th most engaging feed
    item (cycling) and COMs on it with ``p(item)``, else NOT. A DM slot of an agent with inbox DMs
    replies with ``dm_reply_prob`` (the k-th replying slot to the k-th inbox DM, cycling; the
    reply goes to the DM's author and keeps its topic); otherwise it sends a new DM to the author
    of its most engaging feed item written by someone else, on that item's topic, or, with no
    such item, to a uniformly drawn other agent on a topic drawn from the preferences.

    **Tone.** A COM or DM is critical with probability ``clip(critical_prob * (1 - r) * (2 if the
    other party's main interest differs else 1), 0, 1)``, ``r`` the relative preference of its
    topic; otherwise (and always for a POST) supportive if ``r >= supportive_threshold``, else
    neutral. **Mentions.** A POST or COM mentions the author of the agent's most engaging feed
    item by someone else with probability ``mention_prob``.

    **Vote phase**, for each vote item: like with ``p(item)``, dislike with
    ``dislike_prob * (1 - r[topic])`` in the band above it (as TopicUsers), else no vote.

    Observations: structured with numeric parts (``obs_format="both"``, as the runner gives) ->
    structured actions; structured only -> structured actions with tie features 0 (a warning);
    numeric only -> numeric actions, which need the env's layout (:meth:`for_env` or
    ``layout=``). :meth:`act_arrays` takes stacked numeric arrays. All randomness comes from
    ``self.rng``; each call draws arrays of fixed shapes, so a seed fixes every choice.
    """

    TUNABLE: dict[str, tuple] = {
        "activity": (0.02, 1.0, True),
        "activity_sigma": (0.0, 2.5, False),
        "p_post": (0.05, 0.6, False),
        "p_dm": (0.0, 0.4, False),
        "base": (0.0, 0.3, False),
        "gain": (0.0, 1.0, False),
        "tie_gain": (0.0, 1.0, False),
        "group_gain": (0.0, 1.0, False),
        "reciprocity_gain": (0.0, 1.0, False),
        "dislike_prob": (0.0, 0.6, False),
        "critical_prob": (0.0, 1.0, False),
        "dm_reply_prob": (0.0, 1.0, False),
        "mention_prob": (0.0, 0.5, False),
        "concentration": (0.3, 1.0, False),
        "interests_per_agent": (1, 4, False),
    }
    """Calibration search range of each tunable keyword: ``name -> (low, high, log)``; ints for
    ``interests_per_agent``. Every value in a range is valid (``p_post + p_dm`` stays <= 1)."""

    def __init__(self, preferences: Any = None, n_topics: int | None = None, seed: int | None = None,
                 interests_per_agent: int = 1, *, layout: ActionLayout | None = None,
                 n_agents: int | None = None, concentration: float = 0.8, p_post: float = 0.3,
                 base: float = 0.05, gain: float = 0.6, tie_gain: float = 0.3,
                 dislike_prob: float = 0.2, supportive_threshold: float = 0.5, agent_ids: Any = None,
                 activity: float = 0.6, activity_sigma: float = 1.0, p_dm: float = 0.15,
                 group_gain: float = 0.2, reciprocity_gain: float = 0.3, dm_reply_prob: float = 0.7,
                 critical_prob: float = 0.2, mention_prob: float = 0.1) -> None:
        own = dict(activity=activity, activity_sigma=activity_sigma, p_dm=p_dm, group_gain=group_gain,
                   reciprocity_gain=reciprocity_gain, dm_reply_prob=dm_reply_prob,
                   critical_prob=critical_prob, mention_prob=mention_prob)
        SocialUsers.check_params(p_post=p_post, **own)      # before TopicUsers draws preferences
        super().__init__(preferences, n_topics, seed, interests_per_agent, layout=layout, n_agents=n_agents,
                         concentration=concentration, p_post=p_post, base=base, gain=gain, tie_gain=tie_gain,
                         dislike_prob=dislike_prob, supportive_threshold=supportive_threshold,
                         agent_ids=agent_ids)
        for name, value in own.items():
            setattr(self, name, float(value))
        sigma = self.activity_sigma
        # mean exp(mu + sigma^2 / 2) = 1; drawn after the preferences, so those match TopicUsers'
        multiplier = self.rng.lognormal(-0.5 * sigma * sigma, sigma, self.n_agents)
        multiplier.flags.writeable = False
        self.activity_multiplier = multiplier
        self.agent_activity = np.clip(self.activity * multiplier, 0.0, 1.0)
        self.agent_activity.flags.writeable = False

    @classmethod
    def check_params(cls, **params: Any) -> None:
        """Raise what the constructor (or :meth:`from_interests`) would raise about these
        keywords, building nothing: a TypeError for an unknown one, a ``ParamError`` naming the
        parameter for a bad value. TopicUsers' keywords follow :meth:`TopicUsers.check_params`;
        ``activity``, ``p_dm``, ``dm_reply_prob``, ``critical_prob``, ``mention_prob``:
        probabilities, with ``p_post + p_dm <= 1``; ``activity_sigma`` in [0, 10];
        ``group_gain``, ``reciprocity_gain``: finite numbers."""
        inspect.signature(SocialUsers).bind_partial(**params)
        TopicUsers.check_params(**{k: v for k, v in params.items() if k in _TOPIC_KEYWORDS})
        for name in ("activity", "p_dm", "dm_reply_prob", "critical_prob", "mention_prob"):
            if name in params:
                _probability(name, params[name])
        for name in ("group_gain", "reciprocity_gain"):
            if name in params and not _finite(params[name]):
                raise ParamError(name, f"{name} must be a finite number, got {show(params[name])}")
        sigma = params.get("activity_sigma", 0.0)
        if not _finite(sigma) or not 0.0 <= sigma <= MAX_ACTIVITY_SIGMA:
            raise ParamError("activity_sigma", f"activity_sigma must be a number in [0, {MAX_ACTIVITY_SIGMA:g}] "
                                               f"(0 = equally active agents), got {show(sigma)}")
        p_post, p_dm = params.get("p_post", 0.3), params.get("p_dm", 0.15)
        if p_post + p_dm > 1.0 + 1e-12:
            name = "p_dm" if "p_dm" in params else "p_post"
            raise ParamError(name, f"{name}: p_post + p_dm (the shares of used slots that POST and DM) must be "
                                   f"at most 1, got {show(p_post)} + {show(p_dm)}")

    # ------------------------------------------------------------------ engagement
    def same_group(self, rows: Any, authors: Any) -> np.ndarray:
        """Whether each author (policy row, -1 unknown; shape (m, S)) shares the main interest of
        viewer ``rows[k]`` (shape (m,)); unknown authors are in no group."""
        rows, authors = np.asarray(rows, np.int64), np.asarray(authors, np.int64)
        known = (authors >= 0) & (authors < self.n_agents)
        main = self.main_interest
        return known & (main[np.where(known, authors, 0)] == main[rows][:, None])

    def engagement_probability(self, rows: np.ndarray, topics: np.ndarray, tie: Any = 0.0, *,
                               author: Any = None, tie_in: Any = 0.0, mentions_me: Any = 0.0) -> np.ndarray:
        """``p(item)`` of the class docstring for agents ``rows`` (m,) and items with topics
        ``topics`` (m, S); ``author`` (policy rows, -1 unknown) gives the homophily term."""
        rows = np.asarray(rows, np.int64)
        topics = np.asarray(topics, np.int64)
        same = self.same_group(rows, author) if author is not None else 0.0
        answer = np.maximum(np.asarray(tie_in, np.float64), np.asarray(mentions_me, np.float64))
        return np.clip(self.base + self.gain * self._relative(rows, topics) + self.tie_gain * np.asarray(tie)
                       + self.group_gain * same + self.reciprocity_gain * answer, 0.0, 1.0)

    # ------------------------------------------------------------------ entry points
    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        """One action per agent of ``observations``: structured actions for structured (or
        ``"both"``) observations, numeric vectors for numeric ones (which need the layout)."""
        if not observations:
            return {}
        agents = list(observations)
        view = self._social_view(observations)
        return dict(zip(agents, self._decide(view)))

    def act_arrays(self, obs: dict[str, Any]) -> np.ndarray:
        """The ``(n_agents, L)`` numeric action matrix for ``env.step_arrays``, from its stacked
        observation arrays or a per-agent dict of numeric (or ``"both"``) observations."""
        self._need_numeric_layout()
        if is_stacked(obs):
            phase = phase_name(obs["phase"])
            if phase == "act" and "action_mask" in obs and len(obs["action_mask"]):
                self._check_vocab(int(np.sum(obs["action_mask"][0][_TOPIC_FIELD])), "numeric")
            items = obs["feed"] if phase == "act" else obs["vote_items"]
            if len(items) != self.n_agents:
                raise ValueError(f"stacked observations of {len(items)} agents, the policy has {self.n_agents}")
            view = self._numeric_view(np.arange(self.n_agents), phase, int(obs["round"]), np.asarray(items),
                                      np.asarray(obs["dms"]))
        else:
            missing = [a for a in self.agent_ids if a not in obs]
            if missing:
                raise ValueError(f"act_arrays needs the observation of every agent; missing {missing[:5]}")
            numeric = {a: obs[a] if not isinstance(obs[a].get("feed"), list) else obs[a].get("numeric")
                       for a in self.agent_ids}
            if any(o is None for o in numeric.values()):
                raise ValueError("act_arrays needs numeric observations (obs_format 'numeric' or 'both')")
            view = self._numeric_dicts_view(numeric)
        return self._encode_numeric(view, self._decide_arrays(view))

    # ------------------------------------------------------------------ observations -> view
    def _need_numeric_layout(self) -> ActionLayout:
        if self.layout is None:
            raise ValueError("SocialUsers got numeric observations but has no action layout, which numeric "
                             "actions need: build it with SocialUsers.for_env(env, ...) or layout=env.layout, "
                             "or run the env with obs_format='both' (or 'structured') for structured actions")
        return self.layout

    def _social_view(self, observations: dict[str, Any]) -> _SocialView:
        agents, first, phase = self.check_batch(observations)
        if isinstance(first["feed"], list):
            return self._structured_view(observations, agents, phase)
        return self._numeric_dicts_view(observations)

    def _numeric_dicts_view(self, observations: dict[str, Any]) -> _SocialView:
        self._need_numeric_layout()
        agents = list(observations)
        first = observations[agents[0]]
        phase = phase_name(first["phase"])
        key = "feed" if phase == "act" else "vote_items"
        if phase == "act" and "action_mask" in first:
            self._check_vocab(int(np.sum(first["action_mask"][_TOPIC_FIELD])), "numeric")
        rows = np.fromiter((self._row_of[a] for a in agents), np.int64, len(agents))
        items = np.stack([np.asarray(observations[a][key]) for a in agents])
        dms = np.stack([np.asarray(observations[a]["dms"]) for a in agents])
        return self._numeric_view(rows, phase, int(first["round"]), items, dms)

    def _numeric_view(self, rows: np.ndarray, phase: str, rnd: int, items: np.ndarray,
                      dms: np.ndarray) -> _SocialView:
        items, dms = _at_least_one_slot(items), _at_least_one_slot(dms)     # the choices index one column
        present = items[..., _PRESENT] > 0
        author = np.where(present, items[..., _AUTHOR], -1).astype(np.int64)
        author = np.where(author < self.n_agents, author, -1)
        dm_present = dms[..., _DM_PRESENT] > 0
        return _SocialView(
            rows, phase, rnd == 1, self.layout.n_actions, present,
            np.where(present, items[..., _TOPIC], -1).astype(np.int64), author,
            np.where(present, items[..., _TIE_OUT], 0.0).astype(np.float64),
            np.where(present, items[..., _TIE_IN], 0.0).astype(np.float64),
            np.where(present, items[..., _MENTIONS_ME], 0.0).astype(np.float64),
            dm_present, np.where(dm_present, dms[..., _DM_TOPIC], -1).astype(np.int64),
            np.where(dm_present, dms[..., _DM_AUTHOR], -1).astype(np.int64),
            topic_limit=self.layout.max_topics)

    def _structured_view(self, observations: dict[str, Any], agents: list, phase: str) -> _SocialView:
        first = observations[agents[0]]
        names = first.get("topics")
        if names is None:
            raise ValueError("structured observations must carry 'topics' (the vocabulary)")
        if phase == "act":
            self._check_vocab(len(names), "structured")
        key = "feed" if phase == "act" else "vote_items"
        lists = [observations[a][key] for a in agents]
        inboxes = [observations[a].get("dms") or [] if phase == "act" else [] for a in agents]
        m, lay = len(agents), self.layout
        # with a layout the widths are the numeric ones, so the draws have the numeric path's shapes
        widths = (lay.feed_size if phase == "act" else lay.vote_feed_size, lay.dm_inbox_size) if lay else (1, 1)
        items = _blank(m, max([1, widths[0]] + [len(x) for x in lists]), ("ids", "topic", "author"),
                       ("tie_out", "tie_in", "mentions_me"))
        inbox = _blank(m, max([1, widths[1]] + [len(x) for x in inboxes]), ("ids", "topic", "author"), ())
        index, row_of = {name: c for c, name in enumerate(names)}, self._row_of
        has_numeric = "numeric" in first
        for k, agent in enumerate(agents):
            for j, item in enumerate(lists[k]):
                items["ids"][k, j], items["topic"][k, j] = item["id"], index.get(item["topic"], -1)
                items["author"][k, j] = row_of.get(item["author"], -1)
                items["mentions_me"][k, j] = agent in (item.get("mentions") or ())
            if has_numeric and lists[k]:
                feats = np.asarray(observations[agent]["numeric"][key])[:len(lists[k])]
                for name, column in (("tie_out", _TIE_OUT), ("tie_in", _TIE_IN), ("mentions_me", _MENTIONS_ME)):
                    items[name][k, :len(feats)] = feats[:, column]
            for j, dm in enumerate(inboxes[k]):
                inbox["ids"][k, j], inbox["topic"][k, j] = dm["id"], index.get(dm["topic"], -1)
                inbox["author"][k, j] = row_of.get(dm["author"], -1)
        if not has_numeric and (self.tie_gain or self.reciprocity_gain) and not self._warned_ties:
            warnings.warn("structured observations carry no tie strengths: SocialUsers uses tie_out = tie_in = 0 "
                          "(use obs_format='both' for the tie_gain and reciprocity_gain terms)", stacklevel=3)
            self._warned_ties = True
        rows = np.fromiter((row_of[a] for a in agents), np.int64, m)
        return _SocialView(rows, phase, int(first["round"]) == 1, int(first.get("n_actions", 0) or self._slots()),
                           items["ids"] >= 0, items["topic"], items["author"], items["tie_out"], items["tie_in"],
                           items["mentions_me"], inbox["author"] >= 0, inbox["topic"], inbox["author"],
                           items["ids"], inbox["ids"], names)

    def _slots(self) -> int:
        if self.layout is None:
            raise ValueError("structured observations without 'n_actions' need the env's layout")
        return self.layout.n_actions

    # ------------------------------------------------------------------ decisions
    def _decide(self, view: _SocialView) -> Any:
        choice = self._decide_arrays(view)
        if view.ids is None:
            return self._encode_numeric(view, choice)
        return self._encode_structured(view, choice)

    def _decide_arrays(self, view: _SocialView) -> dict[str, np.ndarray]:
        if view.phase == "vote":
            return {"votes": self._social_votes(view)}
        return self._social_act(view)

    def _social_votes(self, view: _SocialView) -> np.ndarray:
        """(m, V) votes in {-1, 0, +1}."""
        u = self.rng.random(view.topic.shape)
        p = self.engagement_probability(view.rows, view.topic, view.tie_out, author=view.author,
                                        tie_in=view.tie_in, mentions_me=view.mentions_me)
        p_dislike = self.dislike_prob * (1.0 - self._relative(view.rows, view.topic))
        like = view.present & (u < p)
        dislike = view.present & ~like & (u < p + p_dislike)
        return like.astype(np.int64) - dislike.astype(np.int64)

    def _social_act(self, view: _SocialView) -> dict[str, np.ndarray]:
        """Per (agent, slot): kind, feed slot (COM), topic, tone, recipient row (DM), inbox slot
        (DM reply) and mentioned feed slot; -1 where a slot has none."""
        m, n_slots = len(view.rows), view.n_actions
        u_use, u_kind, u_topic, u_engage, u_tone, u_reply, u_mention, u_other = self.rng.random((8, m, n_slots))
        jitter = self.rng.random(view.topic.shape)
        rows = view.rows
        if view.first_round:
            post = np.ones((m, n_slots), bool)
            dm = consider = np.zeros((m, n_slots), bool)
        else:
            used = u_use < self.agent_activity[rows][:, None]
            post = used & (u_kind < self.p_post)
            dm = used & ~post & (u_kind < self.p_post + self.p_dm)
            consider = used & ~post & ~dm
        drawn = np.minimum((u_topic[:, :, None] >= self._cdf[rows][:, None, :]).sum(axis=2),
                           self._last_topic[rows][:, None])              # float round-off
        p = self.engagement_probability(rows, view.topic, view.tie_out, author=view.author,
                                        tie_in=view.tie_in, mentions_me=view.mentions_me)
        order = np.lexsort((jitter, -np.where(view.present, p, -1.0)), axis=-1)   # best first
        n_present = view.present.sum(axis=1)
        rank = (np.cumsum(consider, axis=1) - 1) % np.maximum(n_present, 1)[:, None]
        slot = np.take_along_axis(order, rank, axis=1)
        com = consider & (n_present > 0)[:, None] & (u_engage < np.take_along_axis(p, slot, axis=1))
        # the most engaging item written by someone else: whom a new DM and a mention address
        other = np.take_along_axis(view.present & (view.author >= 0) & (view.author != rows[:, None]), order, axis=1)
        best = order[np.arange(m), np.argmax(other, axis=1)]
        has_other = other.any(axis=1)[:, None]
        reply, new_dm, recipient, dm_topic, inbox_slot = self._choose_dms(view, dm, u_reply, u_other, drawn, best,
                                                                          has_other)
        kind = np.select([post, com, reply | new_dm], [POST, COM, DM], NOT)
        topic = np.select([com, reply, new_dm], [np.take_along_axis(view.topic, slot, axis=1), dm_topic, dm_topic],
                          drawn)
        unusable = topic < 0            # and numeric topics must fit the numeric topic dimension
        if view.topic_limit is not None:
            unusable |= topic >= view.topic_limit
        topic = np.where(unusable & ~com, drawn, topic)
        party = np.select([com, kind == DM], [np.take_along_axis(view.author, slot, axis=1), recipient], -1)
        r = self._relative(rows, topic)
        outsider = ~self.same_group(rows, party)
        p_critical = np.clip(self.critical_prob * (1.0 - r) * np.where(outsider, 2.0, 1.0), 0.0, 1.0)
        critical = (com | (kind == DM)) & (u_tone < p_critical)
        tone = np.where(critical, _CRITICAL, np.where(r >= self.supportive_threshold, _SUPPORTIVE, _NEUTRAL))
        mention = (post | com) & has_other & (u_mention < self.mention_prob)
        return {"kind": kind, "slot": np.where(com, slot, -1), "topic": topic,
                "tone": np.where(kind == NOT, _NEUTRAL, tone), "recipient": np.where(kind == DM, recipient, -1),
                "reply": np.where(reply, inbox_slot, -1), "mention": np.where(mention, best[:, None], -1)}

    def _choose_dms(self, view: _SocialView, dm: np.ndarray, u_reply: np.ndarray, u_other: np.ndarray,
                    drawn: np.ndarray, best: np.ndarray, has_other: np.ndarray) -> tuple[np.ndarray, ...]:
        """(replies, new DMs, recipient rows, topics, inbox slots) of the DM slots ``dm``."""
        m = len(view.rows)
        n_dm = view.dm_present.sum(axis=1)
        reply = dm & (n_dm > 0)[:, None] & (u_reply < self.dm_reply_prob)
        # the k-th replying slot answers the k-th DM of the inbox (present DMs first)
        inbox_order = np.argsort(~view.dm_present, axis=1, kind="stable")
        rank = (np.cumsum(reply, axis=1) - 1) % np.maximum(n_dm, 1)[:, None]
        inbox_slot = np.take_along_axis(inbox_order, rank, axis=1)
        n = self.n_agents
        new_dm = dm & ~reply & (n > 1)
        anyone = (view.rows[:, None] + 1 + np.floor(u_other * (n - 1)).astype(np.int64)) % n
        best_author = view.author[np.arange(m), best][:, None]
        best_topic = view.topic[np.arange(m), best][:, None]
        recipient = np.where(reply, np.take_along_axis(view.dm_author, inbox_slot, axis=1),
                             np.where(has_other, best_author, anyone))
        topic = np.where(reply, np.take_along_axis(view.dm_topic, inbox_slot, axis=1),
                         np.where(has_other, best_topic, drawn))
        return reply, new_dm, recipient, topic, inbox_slot

    # ------------------------------------------------------------------ arrays -> actions
    def _encode_numeric(self, view: _SocialView, choice: dict[str, np.ndarray]) -> np.ndarray:
        lay = self._need_numeric_layout()
        m = len(view.rows)
        matrix = np.zeros((m, lay.length), np.int64)
        act, vote = lay.split(matrix)                                            # views
        if view.phase == "vote":
            act[:, :, _TYPE] = NOT
            act[:, :, _TONE] = _NEUTRAL
            values = choice["votes"]
            width = min(values.shape[1], vote.shape[1])       # a padded empty column has no vote slot
            vote[:, :width] = values[:, :width] + 1
            vote[:, width:] = 1
            return matrix
        kind, reply = choice["kind"], choice["reply"]
        act[:, :, _TYPE] = kind
        act[:, :, _TARGET] = np.maximum(choice["slot"], 0)
        new_dm = (kind == DM) & (reply < 0)
        # a new DM's recipient is coded as an offset after the sender (never the sender itself)
        act[:, :, _RECIPIENT] = np.where(new_dm, (choice["recipient"] - view.rows[:, None] - 1) % lay.n_agents, 0)
        act[:, :, _REPLY] = reply + 1
        act[:, :, _TOPIC_FIELD] = np.where((kind == POST) | (kind == DM), choice["topic"], 0)
        act[:, :, _TONE] = choice["tone"]
        a_idx, s_idx = np.nonzero(choice["mention"] >= 0)
        act[a_idx, s_idx, len(FIELDS) + choice["mention"][a_idx, s_idx]] = 1
        vote[:] = 1
        return matrix

    def _encode_structured(self, view: _SocialView, choice: dict[str, np.ndarray]) -> list[dict]:
        if view.phase == "vote":
            values = choice["votes"]
            out: list[dict] = [{"votes": {}} for _ in range(len(view.rows))]
            a_idx, v_idx = np.nonzero(values)
            for a, item, value in zip(a_idx.tolist(), view.ids[a_idx, v_idx].tolist(), values[a_idx, v_idx].tolist()):
                out[a]["votes"][item] = value
            return out
        ids = self.agent_ids
        target = np.take_along_axis(view.ids, np.maximum(choice["slot"], 0), axis=1)
        replied = np.take_along_axis(view.dm_ids, np.maximum(choice["reply"], 0), axis=1)
        mentioned = np.take_along_axis(view.author, np.maximum(choice["mention"], 0), axis=1)
        columns = [choice["kind"], choice["topic"], choice["tone"], target, choice["recipient"], choice["reply"],
                   replied, np.where(choice["mention"] >= 0, mentioned, -1)]
        names, out = view.topic_names, []
        for row in zip(*(c.tolist() for c in columns)):
            actions = []
            for kind, topic, tone, cid, to, reply, dm_id, who in zip(*row):
                action: dict[str, Any] = {"type": ACTION_TYPES[kind]}
                if kind == POST:
                    action["topic"] = names[topic]
                elif kind == COM:
                    action["target_id"] = cid
                elif kind == DM:
                    action["recipient"] = ids[to]
                    if reply >= 0:
                        action["target_id"] = dm_id            # the reply keeps the DM's topic
                    else:
                        action["topic"] = names[topic]
                if kind != NOT:
                    action["tone"] = TONES[tone]
                if who >= 0:
                    action["mentions"] = [ids[who]]
                actions.append(action)
            out.append({"actions": actions})
        return out


# ---------------------------------------------------------------------------------- populations
def bundled_populations() -> list[str]:
    """The names of the populations shipped in ``socialgym/populations/``."""
    folder = resources.files("socialgym.populations")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def check_population_params(params: Any) -> dict:
    """``params`` as a plain dict if it is a valid parameter set of a population: behaviour
    keywords of :class:`SocialUsers` only (:attr:`SocialUsers.TUNABLE` and
    ``supportive_threshold``; no seed or data), checked by :meth:`SocialUsers.check_params`."""
    if not isinstance(params, dict):
        raise ValueError(f"a population's params must be a mapping of parameter names to values, got {show(params)}")
    allowed = set(SocialUsers.TUNABLE) | {"supportive_threshold"}
    for key in params:
        if key not in allowed:
            raise ParamError(str(key), f"{key} is not a population parameter; a population sets "
                                       f"{', '.join(sorted(allowed))}")
    SocialUsers.check_params(**params)
    return dict(params)


def population_document(name: str, params: dict, meta: dict | None = None) -> str:
    """The population ``name`` (parameters checked first) as the JSON text of a population file:
    ``{"name", "kind": "social_users", "params", "meta"}``."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a population's name must be a non-empty string, got {show(name)}")
    params = check_population_params(params)
    if meta is not None and not isinstance(meta, dict):
        raise ValueError(f"meta must be a dict or None, got {show(meta)}")
    data = {"name": name, "kind": POPULATION_KIND, "params": _plain(params), "meta": _plain(meta or {})}
    return json.dumps(data, indent=2) + "\n"


def save_population(path: str | Path, name: str, params: dict, meta: dict | None = None) -> Path:
    """Write :func:`population_document` to ``path`` (a file of your choosing; ``socialgym
    calibrate`` writes its own through the run directory's link-refusing writer); returns it."""
    text = population_document(name, params, meta)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load_population(source: str | Path) -> dict:
    """The parameters of a population: ``source`` is the path of a JSON file written by
    :func:`save_population` or the name of a bundled population (:func:`bundled_populations`)."""
    path = _population_file(source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"population file {path} could not be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"population file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != POPULATION_KIND:
        kind = data.get("kind") if isinstance(data, dict) else None
        raise ValueError(f"population file {path} must be a JSON object with \"kind\": \"{POPULATION_KIND}\", "
                         f"got kind {show(kind)}")
    try:
        return check_population_params(data.get("params"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"population file {path}: {exc}") from None


def _population_file(source: Any) -> Any:
    if isinstance(source, Path) or (isinstance(source, str) and (source.endswith(".json") or "/" in source
                                                                 or "\\" in source)):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"population file {path} does not exist")
        return path
    names = bundled_populations()
    if not isinstance(source, str) or source not in names:
        raise ValueError(f"unknown population {show(source)}: give the path of a .json file or a bundled "
                         f"population ({', '.join(names)})")
    return resources.files("socialgym.populations") / f"{source}.json"


# ---------------------------------------------------------------------------------- helpers
def _blank(m: int, width: int, ints: tuple, floats: tuple) -> dict[str, np.ndarray]:
    out = {name: np.full((m, width), -1, np.int64) for name in ints}
    out.update({name: np.zeros((m, width)) for name in floats})
    return out


def _at_least_one_slot(features: np.ndarray) -> np.ndarray:
    """(m, S, k) features with S >= 1 (an absent slot added when S = 0)."""
    if features.shape[1]:
        return features
    return np.zeros((features.shape[0], 1, features.shape[2]), features.dtype)


def _plain(value: Any) -> Any:
    """JSON-ready: numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _probability(name: str, value: Any) -> None:
    if not _finite(value) or not 0.0 <= value <= 1.0:
        raise ParamError(name, f"{name} must be a probability in [0, 1], got {show(value)}")


def _finite(value: Any) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
            and (is_int(value) or math.isfinite(value)))
