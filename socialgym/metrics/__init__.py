"""Metrics computed from the platform state, kept apart from the step logic."""

from socialgym.metrics.network import network_metrics, undirected_graph

__all__ = ["network_metrics", "undirected_graph"]
