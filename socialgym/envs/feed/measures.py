"""The feed environment's measures: exposure and cocoon metrics, network metrics, intervention counts.

``FeedMeasures`` is a mixin of :class:`socialgym.envs.feed.env.FeedEnv`; its methods read the
environment's state (the act-phase feeds of the exposure window, the content store, the ties,
the recommender) and compute with ``socialgym.metrics``: ``env.exposure_metrics()``,
``env.topic_entropy()``, ``env.network_metrics()``, ``env.intervention_stats()``.
"""

from __future__ import annotations

import numpy as np

from socialgym.recommenders import EMPTY, Reranker
from socialgym.ties import main_interests


class FeedMeasures:
    """Metrics of the platform as it stands, and the per-round figures of the step's infos."""

    def _round_extras(self) -> dict:
        """Per-round platform figures shared by every agent's info (one object, not copies)."""
        extras = {}
        if isinstance(self.recommender, Reranker):
            extras["interventions"] = self.intervention_stats()
        if self.config.exposure_in_infos:
            extras["exposure"] = self.exposure_metrics()
        return extras

    def exposure_metrics(self, groups=None, threshold: float | None = None) -> dict:
        """Cocoon and exposure metrics over the act-phase feeds of the last ``exposure_window``
        rounds (see ``socialgym.metrics.exposure_metrics``): mean topic entropy, deep-cocoon
        share, author exposure Gini and, with groups (default ``agent_groups``, else the main
        ``agent_interests``), per-group cocoon shares and cross-cutting exposure."""
        from socialgym.metrics import exposure_metrics
        self._require_state("exposure_metrics")
        topics, authors = self._shown_window()
        groups = self._groups() if groups is None else groups
        threshold = self.config.cocoon_threshold if threshold is None else threshold
        return exposure_metrics(topics, authors, max(len(self.vocab), 1), self.config.n_agents,
                                groups=groups, threshold=threshold)

    def topic_entropy(self) -> np.ndarray:
        """Per-agent topic entropy (nats) of its act-phase feeds over the exposure window;
        NaN for an agent shown nothing."""
        from socialgym.metrics import topic_counts, topic_entropy
        self._require_state("topic_entropy")
        topics, _ = self._shown_window()
        return topic_entropy(topic_counts(topics, max(len(self.vocab), 1)))

    def _shown_window(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.config.n_agents
        if not self._shown_history:
            empty = np.full((n, 0), EMPTY, dtype=np.int64)
            return empty, empty
        ids = np.concatenate(list(self._shown_history), axis=1)
        safe = np.maximum(ids, 0)
        topics = np.where(ids >= 0, self.content.column("topic")[safe], EMPTY)
        authors = np.where(ids >= 0, self.content.column("author")[safe], EMPTY)
        return topics, authors

    def _groups(self):
        cfg = self.config
        if cfg.agent_groups is not None:
            return np.asarray(cfg.agent_groups)
        if cfg.agent_interests is not None:
            return main_interests(cfg.agent_interests, cfg.n_agents)
        return None

    def intervention_stats(self) -> dict:
        """Cumulative counts of every re-ranking intervention (empty without any)."""
        rec = self.recommender
        return rec.intervention_stats() if isinstance(rec, Reranker) else {}

    def network_metrics(self, threshold: float = 0.1, groups=None) -> dict:
        from socialgym.metrics import network_metrics
        self._require_state("network_metrics")
        # large platforms: sampled path sources, sparse triangle counts, no modularity (metrics.network.LARGE_GRAPH)
        return network_metrics(self.tie_matrix(), threshold=threshold, groups=groups, large="sample")

