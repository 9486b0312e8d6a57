"""Several independent platforms stepped as one array computation (the engine of ``socialgym.vector``).

``BatchedFeedEnv(platforms=E, n_agents=n, ...)`` is one :class:`FeedEnv` of ``E * n`` agents
whose agents ``[e * n, (e + 1) * n)`` form platform ``e``. Nothing crosses a platform: feeds and
vote items come from the viewer's own platform, a DM's recipient index counts within the
sender's platform, the population totals of the rewards (SOC's ``|B^DIR|``, PRE's ``|V| - 1``,
COORD's ``|B^PUB|``) are each platform's, and the author features of the observations are
indices within the platform. Each platform has its own random generator, seeded by its own seed,
and the recommender is called once per platform with that generator, so platform ``e`` draws
exactly what a single environment with the same seed draws.

Content, ties and the per-agent arrays are shared tables indexed by global ids, so one step
parses, rewards, updates ties and builds observations for every platform at once; only the
recommender call loops over platforms. A platform's content ids differ from a single
environment's (the platforms' items interleave), their order does not.

What this needs of the configuration: every agent-level setting the same on every platform
(``lambdas`` one row, or an ``(n, 5)`` matrix used for every platform; see ``set_lambdas`` for
per-platform weights) and a recommender that keeps no state between rounds (its ``update`` is
the base class's no-op, as for ``chronological`` and ``random``). Settings that would need a
per-platform copy (``agent_interests``, ``agent_groups``, ``seed_graph``, ``soc_strategy``,
``rerank``, an LLM tie scorer, ``exposure_in_infos``) are refused with a ValueError naming them.

A size that cannot fit in memory (``socialgym.platform.validation.check_memory`` for all
``platforms * n_agents`` agents) is a MemoryError raised right after the one platform's settings
are checked, before anything per agent of the whole population is built or validated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from socialgym.config import REWARD_NAMES, FeedConfig
from socialgym.envs.feed.encoding import ActionLayout
from socialgym.envs.feed.env import FeedEnv
from socialgym.envs.feed.feeds import check_feed
from socialgym.envs.feed.observations import ObservationBuilder
from socialgym.platform.validation import check_memory, check_seed
from socialgym.recommenders import EMPTY, FeedRequest, Recommender

PER_PLATFORM_SETTINGS = ("agent_interests", "agent_groups", "seed_graph", "soc_strategy", "rerank",
                         "tie_scorer", "exposure_in_infos")
"""FeedConfig keys a batched environment refuses (they would need one copy per platform); a
``tie_scorer`` other than the default logistic G_theta is refused."""


class BatchedFeedEnv(FeedEnv):
    """``platforms`` disjoint platforms of ``n_agents`` agents each, one step for all (see the
    module docstring). Rows of every array are ``platform * n_agents + agent``."""

    def __init__(self, platforms: int, render_mode: str | None = None, **config: Any) -> None:
        if isinstance(platforms, bool) or not isinstance(platforms, (int, np.integer)) or platforms < 1:
            raise ValueError(f"platforms must be an integer >= 1, got {platforms!r}")
        single = FeedConfig.from_kwargs(**config)        # validates the per-platform configuration
        if single.obs_format != "numeric":
            raise ValueError("a batched environment steps numeric arrays only: pass obs_format='numeric' (structured "
                             "actions could name agents and add topics across platforms)")
        refused = [k for k in PER_PLATFORM_SETTINGS if getattr(single, k) not in (None, 0, (), False, "logistic")]
        if refused:
            raise ValueError(f"a batched environment cannot take {refused}: they would need one copy per "
                             "platform; use single environments (socialgym.parallel_env) for them")
        n = single.n_agents
        check_memory(int(platforms) * n, single.n_actions, single.max_rounds,   # before any per-agent work
                     single.feed_size + single.vote_feed_size + single.dm_inbox_size)
        lambdas = single.lambdas
        if not (lambdas is None or np.shape(lambdas) == (len(REWARD_NAMES),)):   # per agent: a copy per platform
            lambdas = np.tile(np.asarray(single.lambda_matrix(), float), (int(platforms), 1))
        # None or one 5-vector is every agent's row on every platform (no per-row validation again)
        super().__init__(render_mode, **{**config, "n_agents": int(platforms) * n, "lambdas": lambdas})
        if type(self.recommender).update is not Recommender.update:
            raise ValueError(f"a batched environment needs a recommender without state between rounds "
                             f"(chronological, random, ...); {single.recommender!r} learns from each round")
        self.platforms, self.platform_size = int(platforms), n
        self.single_config = single
        cfg = self.config
        self.layout = ActionLayout(n, cfg.n_actions, cfg.feed_size, cfg.dm_inbox_size, cfg.max_topics,
                                   cfg.vote_feed_size)
        self._observations = ObservationBuilder(cfg, self.layout, self.agents_all)
        self._platform_rngs: list[np.random.Generator] = []

    # ---------------------------------------------------------------- episode
    def reset(self, seed: Any = None, options: dict | None = None):
        """Start every platform's episode (see :meth:`reset_arrays`); per-agent observations."""
        self._start_platforms(seed)
        return self._observe(), {a: {"phase": "act", "round": 1} for a in self.agents}

    def reset_arrays(self, seed: Any = None) -> dict:
        """Start every platform's episode; returns the stacked arrays :meth:`step_arrays`
        returns. ``seed``: a list of one seed per platform (integers >= 0), an integer ``s``
        (platform ``e`` gets ``s + e``), or None (each
        platform's generator runs on; on the first reset platform ``e`` starts from the config's
        ``seed`` + e, or fresh entropy when that is None)."""
        self._start_platforms(seed)
        return self.observe_arrays()

    def platform_seeds(self, seed: Any) -> list[int] | None:
        """Each platform's seed: from a list (one per platform) or an integer ``s`` (platform
        ``e`` gets ``s + e``, as Gymnasium's vector environments); None stays None."""
        if seed is None:
            return None
        if isinstance(seed, (list, tuple, np.ndarray)):
            if len(seed) != self.platforms:
                raise ValueError(f"seed: {len(seed)} seeds for {self.platforms} platforms")
            return [check_seed(s, f"seed[{e}]") for e, s in enumerate(seed)]
        base = check_seed(seed, "seed")
        return [base + e for e in range(self.platforms)]

    def _start_platforms(self, seed: Any) -> None:
        seeds = self.platform_seeds(seed)
        if seeds is not None:
            self._platform_rngs = [np.random.default_rng(s) for s in seeds]
        elif not self._platform_rngs:
            base = self.config.seed
            self._platform_rngs = [np.random.default_rng(None if base is None else base + e)
                                   for e in range(self.platforms)]
        self.rng = self._platform_rngs[0]
        self._start_episode(None)

    def platform_rows(self, platform: int) -> slice:
        """The rows (agents) of one platform."""
        return slice(platform * self.platform_size, (platform + 1) * self.platform_size)

    # ---------------------------------------------------------------- step hooks
    def _recommend(self, pool: np.ndarray, k: int, phase: str) -> np.ndarray:
        """One recommender call per platform, each over its own agents and items, with its own
        generator; checked as one (n_total, k) table."""
        n, total = self.platform_size, self.config.n_agents
        pool_platform = self.content.column("author")[pool] // n if len(pool) else np.zeros(0, np.int64)
        by_platform = np.argsort(pool_platform, kind="stable")          # each platform's items, still ascending
        grouped = pool[by_platform]
        bounds = np.searchsorted(pool_platform[by_platform], np.arange(self.platforms + 1))
        out = np.full((total, k), EMPTY, dtype=np.int64)
        for e, rng in enumerate(self._platform_rngs):
            rows = self.platform_rows(e)
            request = FeedRequest(viewers=np.arange(rows.start, rows.stop), candidates=grouped[bounds[e]:bounds[e + 1]],
                                  k=k, phase=phase, round=self.round, content=self.content,
                                  ties=self.tie_matrix, n_agents=total, tie_lookup=self._tie_lookup)
            raw = np.asarray(self.recommender.recommend(request, rng))
            if raw.ndim == 2 and raw.shape[0] == n and raw.shape[1] <= k and raw.dtype.kind in "iu":
                out[rows, :raw.shape[1]] = raw
            else:
                out[rows] = check_feed(raw, pool, k, phase, self.recommender, self.content, n)  # raises: names it
        feed = check_feed(out, pool, k, phase, self.recommender, self.content, total)
        rows, cols = np.nonzero(feed >= 0)
        if len(rows) and np.any(self.content.column("author")[feed[rows, cols]] // n != rows // n):
            raise ValueError(f"recommender {getattr(self.recommender, 'name', '?')!r} showed an item of another platform")
        return feed

    # ---------------------------------------------------------------- what would cross platforms
    def step(self, actions: dict):
        """Refused: per-agent payloads (structured ones above all) could name agents of other
        platforms and add topics to the shared vocabulary. Use :meth:`step_arrays`."""
        raise TypeError("a batched environment steps numeric matrices only: use step_arrays() (socialgym.vector)")

    def set_recommender(self, recommender, rerank=None, *, reset: bool = True, **kwargs) -> None:
        """As for one environment, for recommenders without state between rounds only."""
        before = self.recommender
        super().set_recommender(recommender, rerank, reset=reset, **kwargs)
        if type(self.recommender).update is not Recommender.update:
            self.recommender = before
            raise ValueError("a batched environment needs a recommender without state between rounds")

    def add_ties(self, src, dst, weight) -> None:
        """As for one environment, for pairs within one platform."""
        s, d = np.atleast_1d(np.asarray(src)), np.atleast_1d(np.asarray(dst))
        if s.dtype.kind in "iu" and d.dtype.kind in "iu" and np.any(s // self.platform_size != d // self.platform_size):
            raise ValueError("add_ties: a tie between agents of two platforms")
        super().add_ties(src, dst, weight)

    def inject_post(self, author, topic: str, text: str | None = None, sentiment: float = 0.0) -> int:
        """As for one environment, on a topic of the configured list only (the platforms share it)."""
        if str(topic) not in self.vocab.names:
            raise ValueError(f"inject_post: {topic!r} is not one of the configured topics, and a batched environment "
                             "cannot add one to a single platform")
        return super().inject_post(author, topic, text, sentiment)

    def _snapshot(self) -> tuple:
        return super()._snapshot(), [r.bit_generator.state for r in self._platform_rngs]

    def _restore(self, snapshot: tuple) -> None:
        base, states = snapshot
        super()._restore(base)
        for rng, state in zip(self._platform_rngs, states):
            rng.bit_generator.state = state


__all__ = ["BatchedFeedEnv", "PER_PLATFORM_SETTINGS"]
