"""The experiment layer: YAML configs, the runner with checkpoint/resume, run outputs and the
HTML report, wandb logging, and replicates/sweeps on a process pool or Ray; the studies built
on them (``study``, ``moderation`` with ``discussion_analysis``, ``evaluate``, ``cocoon``), whose
figures all come from ``plotting``.

Layout of a run directory: ``docs/experiments.md``.
"""

from socialgym.experiments.config import ConfigError, ExperimentConfig, load_config
from socialgym.experiments.runner import RunError, resume_experiment, run_experiment
from socialgym.experiments.sweep import aggregate, resume_sweep, run_sweep

__all__ = ["ConfigError", "ExperimentConfig", "load_config", "RunError", "run_experiment", "resume_experiment",
           "run_sweep", "resume_sweep", "aggregate"]
