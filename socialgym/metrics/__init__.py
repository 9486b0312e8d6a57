"""Metrics computed from the platform state, kept apart from the step logic."""

from socialgym.metrics.exposure import (author_exposure_gini, cross_cutting_by_group,
                                        cross_cutting_share, deep_cocoon_share,
                                        default_cocoon_threshold, exposure_metrics, gini,
                                        mean_topic_entropy, topic_counts, topic_entropy)
from socialgym.metrics.network import THETAS, network_metrics, theta_sweep, undirected_graph

__all__ = ["network_metrics", "theta_sweep", "THETAS", "undirected_graph",
           "topic_counts", "topic_entropy", "mean_topic_entropy", "deep_cocoon_share",
           "default_cocoon_threshold", "gini", "author_exposure_gini", "cross_cutting_share",
           "cross_cutting_by_group", "exposure_metrics"]
