"""The format of a run directory: every file name, every column, where each kind of file lies.

A run directory (``socialgym run``, ``resume``, ``fork``), a sweep directory (a folder per
condition and replicate beside ``sweep.json``), a study directory (a sweep with the study's
figures and claims) and a moderation-experiment directory hold the files named here; the
table of what each holds is in ``docs/experiments.md`` ("The run directory"). No other module
writes one of these names as a string: they import it from here (``tests/test_structure.py``).
"""

from __future__ import annotations

from pathlib import Path

from socialgym.config import MAX_ROUNDS, REWARD_NAMES
from socialgym.platform.actions import ACTION_TYPES

# ---------------------------------------------------------------------------------- one run
CONFIG = "config.yaml"
"""The resolved config, secrets removed; what ``resume`` reads. Its presence marks a run directory."""
RUN_INFO = "run.json"
"""The run's id, sweep condition, replicate and seed; ``config_changes``; a fork's origin."""
SUMMARY = "summary.json"
"""Status (running / complete / failed / interrupted / budget), problems, rounds completed, final
means, LLM usage and spend."""
ROUNDS = "rounds.csv"
NETWORK = "network.csv"
EVENTS = "events.jsonl"
TRANSCRIPTS = "transcripts.jsonl"
SURVEYS = "surveys.csv"
INTERVIEWS = "interviews.jsonl"
FALLBACKS = "fallbacks.jsonl"
"""Runs with an LLM: every fallback (a slot or answer the model could not fill) with its reason."""
ROUTES = "llm_routes.jsonl"
"""Runs with ``llm.endpoints``: every failover and breaker change of the LLM router, one line each."""
PERSONAS = "personas.json"
LLM_CACHE = "llm_cache.sqlite"
CHECKPOINT = "checkpoint.pkl"
SNAPSHOTS = "snapshots"
"""Folder of the checkpoint after each round (``snapshots/round_NNNN.pkl``), for forks and interviews."""
TIES = "ties"
"""Folder of the tie matrix after each round (``ties/round_NNNN.npz``)."""
DECISIONS = "decisions"
"""Runs with ``logging.decisions``: folder of each round's logged decisions (``decisions/round_NNNN.npz``:
numeric observations, the structured choices in the numeric encoding), what ``socialgym distill`` learns from."""
PLOTS = "plots"
REPORT = "report.html"
VIEWER = "viewer.html"
COMPARE_CSV = "compare.csv"
COMPARE_MD = "compare.md"

TEXT_FILES = (ROUNDS, NETWORK, EVENTS, TRANSCRIPTS, SURVEYS, INTERVIEWS, FALLBACKS, ROUTES)
"""The append-only files the recorder writes round by round (cut back to a checkpoint on resume)."""

# ---------------------------------------------------------------------------------- a sweep, a study
SWEEP = "sweep.json"
"""A sweep's manifest: its conditions, replicates and each job's folder."""
AGGREGATE = "aggregate.csv"
SWEEP_INDEX = "index.html"
"""A sweep's page: every job with its status and links to its report and viewer."""
STUDY_CONFIG = "study_config.json"
STUDY_HTML = "study.html"
STUDY_INFO = "study.json"
"""What a study ran on: its runs, wall time, model and machine."""
CLAIMS_MD = "claims.md"
CLAIMS_JSON = "claims.json"
STUDY_RECORDS = "run_records.json"
"""A ties-coach study's runs as the claims read them (claims.py): the reproduction page's input."""
TASK_REWARDS = "task_rewards.csv"
THETA_SWEEP = "theta_sweep.csv"
EFFECTS_CSV = "effects.csv"
EFFECTS_MD = "effects.md"
EFFECTS_JSON = "effects.json"

# ---------------------------------------------------------------------------------- realism
REALISM_MD, REALISM_JSON, REALISM_CSV, REALISM_HTML = "realism.md", "realism.json", "realism.csv", "realism.html"
"""``socialgym validate --out DIR``: the scorecard as Markdown, JSON, CSV and a page."""
CALIBRATION_JSON, CALIBRATION_MD = "calibration.json", "calibration.md"
"""``socialgym calibrate``: the result (best parameters, before / after per fact)."""
SEARCH_LOG, SEARCH_KEY = "search.log", "search.json"
"""``socialgym calibrate``: the Optuna journal the search resumes from, and what it searches
(config, targets, parameters: a resume must keep them)."""

# ---------------------------------------------------------------------------------- distillation
FIDELITY_MD, FIDELITY_JSON = "fidelity.md", "fidelity.json"
"""``socialgym distill --report DIR``: distilled against LLM agents on held-out runs."""
REPLAYS = "replays"
"""``socialgym distill --report DIR``: folder of the held-out runs replayed with the distilled policy."""

# ---------------------------------------------------------------------------------- a moderation experiment
DISCUSSIONS = "discussions.jsonl"

# ---------------------------------------------------------------------------------- columns
REWARD_COLUMNS = (*REWARD_NAMES, "total")
ACTION_COUNTS = (*ACTION_TYPES, "votes_up", "votes_down", "invalid")
"""The agent's actions of the round by type (NOTs included), its votes and its invalid actions."""
COUNT_COLUMNS = (*ACTION_COUNTS, "fallbacks")
ROUND_COLUMNS = ("round", "agent", "group", "policy", "coached", *REWARD_COLUMNS, *COUNT_COLUMNS)
"""rounds.csv: one row per agent and round."""
NETWORK_METRICS = ("n_edges", "density", "clustering", "lcc_fraction", "avg_shortest_path", "modularity",
                   "homophily", "directed_density", "directed_clustering")
EXPOSURE_METRICS = ("mean_topic_entropy", "deep_cocoon_share", "author_exposure_gini", "cross_cutting_share")
GROUP_EXPOSURE_METRICS = ("deep_cocoon_share", "cross_cutting_share", "mean_topic_entropy")
"""The exposure metrics network.csv also gives per group (``<metric>:<group>``)."""
SURVEY_COLUMNS = ("round", "agent", "group", "policy", "survey", "item", "scale", "answer", "status", "source")
"""surveys.csv: one row per agent, item and round."""


def network_columns(groups: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """network.csv's columns for a run whose agents form ``groups`` (sorted, empty names left out)."""
    return ("round", *NETWORK_METRICS, "n_ties", "mean_tie", "max_tie", *EXPOSURE_METRICS,
            *(f"{m}:{g}" for m in GROUP_EXPOSURE_METRICS for g in groups),
            "mean_total", "llm_calls", "prompt_tokens", "completion_tokens")


# ---------------------------------------------------------------------------------- per-round files
def tie_path(run: Path, round: int) -> Path:
    """The tie matrix written after ``round``."""
    return Path(run) / TIES / f"round_{int(round):04d}.npz"


def snapshot_path(run: Path, round: int) -> Path:
    """The checkpoint kept after ``round`` (``run.snapshots``)."""
    return Path(run) / SNAPSHOTS / f"round_{int(round):04d}.pkl"


def decision_path(run: Path, round: int) -> Path:
    """The decisions logged in ``round``."""
    return Path(run) / DECISIONS / f"round_{int(round):04d}.npz"


def _numbered(folder: Path, suffix: str) -> dict[int, Path]:
    """round -> file for the files named ``round_<ASCII digits><suffix>`` whose round a run can
    have (0..MAX_ROUNDS); others (``round_²³.npz``, ``round_<2**70>.npz``) are not a round's file."""
    found = {}
    for path in folder.glob(f"round_*{suffix}"):
        stem = path.name[len("round_"):-len(suffix)]
        if stem.isascii() and stem.isdigit() and len(stem) <= 7 and int(stem) <= MAX_ROUNDS:
            found[int(stem)] = path
    return dict(sorted(found.items()))


def stray_round_files(run: Path) -> list[Path]:
    """Files in ``ties/``, ``decisions/`` and ``snapshots/`` named like a round's (``round_*``)
    that name no round a run can have (``round_²³.npz``, ``round_<2**70>.npz``): the readers leave
    them out, and say so."""
    out = []
    for folder, suffix in ((TIES, ".npz"), (DECISIONS, ".npz"), (SNAPSHOTS, ".pkl")):
        counted = set(_numbered(Path(run) / folder, suffix).values())
        out += sorted(p for p in (Path(run) / folder).glob(f"round_*{suffix}") if p not in counted)
    return out


def tie_files(run: Path) -> dict[int, Path]:
    """round -> tie matrix file, in round order (files not named ``round_NNNN.npz`` left out)."""
    return _numbered(Path(run) / TIES, ".npz")


def decision_files(run: Path) -> dict[int, Path]:
    """round -> logged decisions, in round order."""
    return _numbered(Path(run) / DECISIONS, ".npz")


def snapshot_files(run: Path) -> dict[int, Path]:
    """round -> kept checkpoint, in round order."""
    return _numbered(Path(run) / SNAPSHOTS, ".pkl")

