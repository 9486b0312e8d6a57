"""Running a study: the runner with checkpoint/resume, the recorder, forks and interviews,
interventions and surveys applied during a run, replicates and sweeps, wandb logging."""
