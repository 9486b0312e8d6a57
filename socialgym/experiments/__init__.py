"""The experiment layer, in four rooms named for what a researcher does:

- ``define``: a study's config — the schema, the hardened YAML loader, the checks of what it
  names, scheduled interventions and surveys, the sweep grid, what a fork may change;
- ``run``: running it — the runner with checkpoint/resume, the recorder, forks and interviews,
  interventions and surveys applied, replicates and sweeps (process pool or Ray), wandb;
- ``analysis``: reading runs back — the HTML report, paired comparisons, policy evaluation,
  the discussion statistics, and every PNG figure (``plotting``);
- ``studies``: the bundled studies — ties-coach with its claims, the fork studies, the
  information cocoon, the moderation strategies.

The rooms import downwards only (define < analysis < run < studies; ``tests/test_layers.py``).
The run directory's format lives below them all, in :mod:`socialgym.rundir`.
"""

from socialgym.experiments.define import ConfigError, ExperimentConfig, load_config
from socialgym.experiments.errors import RunError
from socialgym.experiments.run.runner import resume_experiment, run_experiment
from socialgym.experiments.run.sweep import aggregate, resume_sweep, run_sweep

__all__ = ["ConfigError", "ExperimentConfig", "load_config", "RunError", "run_experiment", "resume_experiment",
           "run_sweep", "resume_sweep", "aggregate"]
