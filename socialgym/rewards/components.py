"""SOC, INF, PRE, COORD and EMO (specification §3). Any fraction with a zero denominator is 0."""

from __future__ import annotations

import numpy as np

from socialgym.platform.actions import DM, POST, RoundBatch


def _ratio(num: np.ndarray, den: np.ndarray | float) -> np.ndarray:
    """num / den elementwise, 0 where den == 0."""
    den = np.broadcast_to(np.asarray(den, dtype=float), np.shape(num))
    out = np.zeros(np.shape(num), dtype=float)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _count(index: np.ndarray, n: int, weights: np.ndarray | None = None) -> np.ndarray:
    return np.bincount(index, weights=weights, minlength=n).astype(float, copy=False)


def soc_reward(batch: RoundBatch, b_soc: float = 0.5) -> np.ndarray:
    """(1-b) I_sent/N + b I_rec/|B^DIR|: direct interactions sent and received."""
    n, direct = batch.n_agents, batch.is_direct
    i_sent = _count(batch.sender[direct], n)
    i_rec = _count(batch.recipient[direct], n)
    total_direct = batch.population_total(batch.sender, direct)
    return (1 - b_soc) * i_sent / batch.n_actions + b_soc * _ratio(i_rec, total_direct)


def inf_reward(batch: RoundBatch, seen_feed_topics: np.ndarray, n_topics: int,
               b_inf: float = 0.5) -> np.ndarray:
    """(1-b) T/K + b H/log K over the act-phase feed C_t(u).

    ``seen_feed_topics`` is an (n, >=K) boolean matrix: topics of feed items u saw in rounds < t.
    """
    n = batch.n_agents
    topics = np.sort(batch.feed_topics, axis=1)           # -1 (empty slot) sorts first
    width = topics.shape[1]
    if width == 0 or n_topics == 0:
        return np.zeros(n)
    valid = topics >= 0
    first = np.ones_like(valid)
    first[:, 1:] = topics[:, 1:] != topics[:, :-1]
    distinct = first & valid
    rows = np.broadcast_to(np.arange(n)[:, None], topics.shape)
    seen = np.zeros_like(valid)
    in_range = valid & (topics < seen_feed_topics.shape[1])
    seen[in_range] = seen_feed_topics[rows[in_range], topics[in_range]]
    new_topics = (distinct & ~seen).sum(axis=1)

    # Shannon entropy of topic frequencies: run lengths of equal topics in each sorted row.
    flat_first = np.flatnonzero(distinct.ravel())
    row_of_run = flat_first // width
    run_end = np.empty_like(flat_first)
    # a run ends at the next run start in the same row, or at the row's end
    run_end[:-1] = np.where(row_of_run[1:] == row_of_run[:-1], flat_first[1:], (row_of_run[:-1] + 1) * width)
    if len(flat_first):
        run_end[-1] = (row_of_run[-1] + 1) * width
    run_len = (run_end - flat_first).astype(float, copy=False)
    total = valid.sum(axis=1).astype(float, copy=False)
    p = run_len / total[row_of_run]
    entropy = -np.bincount(row_of_run, weights=p * np.log(p), minlength=n)
    entropy_term = entropy / np.log(n_topics) if n_topics > 1 else np.zeros(n)
    return (1 - b_inf) * new_topics / n_topics + b_inf * entropy_term


def pre_reward(batch: RoundBatch, b_pre: float = 0.5) -> np.ndarray:
    """(1-b) P/N + b (L+ - L-)/((|V|-1) N): own posts and the votes they got this round."""
    n, big_n = batch.n_agents, batch.n_actions
    posts = _count(batch.sender[batch.kind == POST], n)
    on_posts = batch.vote_kind == POST
    net = _count(batch.vote_author[on_posts], n, batch.vote_value[on_posts].astype(float, copy=False))
    return (1 - b_pre) * posts / big_n + b_pre * net / ((batch.population - 1) * big_n)


def coord_reward(batch: RoundBatch, b_coord: float = 0.5) -> np.ndarray:
    """(1-b) M/|B^PUB| + b R/|D_{t-1}|: being mentioned, and answering last round's DMs."""
    n = batch.n_agents
    public = batch.is_public
    mentioned = _count(batch.mention_agent[public[batch.mention_action]], n)
    mention_term = _ratio(mentioned, batch.population_total(batch.sender, public))

    prev = np.unique(batch.prev_dm_sender.astype(np.int64, copy=False) * n + batch.prev_dm_recipient)
    senders_to_me = _count((prev % n).astype(np.int64, copy=False), n)              # |D_{t-1}(u)|
    dm = batch.kind == DM
    replies = np.unique(batch.sender[dm].astype(np.int64, copy=False) * n + batch.recipient[dm])  # u -> r
    reverse = (replies % n) * n + replies // n                           # r -> u
    answered = replies[np.isin(reverse, prev, assume_unique=True)]
    r_count = _count((answered // n).astype(np.int64, copy=False), n)
    return (1 - b_coord) * mention_term + b_coord * _ratio(r_count, senders_to_me)


def emo_reward(batch: RoundBatch, b_emo: float = -1.0, eps: float = 1e-6) -> np.ndarray:
    """0.5 (1 + (U+ + b U-)/(U+ + |b| U- + eps)) over DMs and COMs received; 0.5 with none."""
    n, direct = batch.n_agents, batch.is_direct
    s = batch.sentiment[direct]
    rec = batch.recipient[direct]
    u_pos = _count(rec, n, np.maximum(0.0, s))
    u_neg = _count(rec, n, np.maximum(0.0, -s))
    return 0.5 * (1.0 + (u_pos + b_emo * u_neg) / (u_pos + abs(b_emo) * u_neg + eps))
