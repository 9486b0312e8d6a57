"""Defining a study: the config's schema, loading a YAML file into it, the checks of what it
names, scheduled interventions and surveys, the sweep grid and what a fork may change.

    from socialgym.experiments.define import load_config
    cfg = load_config("study.yaml", ["env.n_agents=50"])      # ConfigError names a bad key

Modules: ``schema`` (the frozen sections, limits, ``to_dict`` / ``dump_yaml``), ``loading``
(the hardened YAML reader, ``load_config``, ``from_dict``, ``grid`` / ``with_values``,
``fork_config``), ``validation`` (recommender, policy and persona checks), ``schedule`` (when and
to whom an intervention or survey applies), ``interventions`` and ``surveys`` (their specs),
``forks`` (what a fork may change).
"""

from socialgym.experiments.define.loading import (apply_override, fork_config, from_dict, grid, llm_section,
                                                  load_config, wandb_section, with_values)
from socialgym.experiments.define.schema import (ENV_GROUPS, ENV_RESERVED, MAX_CONFIG_BYTES, MAX_MESSAGE_CHARS,
                                                 MAX_SHOWN_CHARS, RANGES, ConfigError, ExperimentConfig, FrozenDict,
                                                 LLMConfig, LoggingConfig, PersonaConfig, PolicyConfig, PolicyGroup,
                                                 RunConfig, WandbConfig, dump_yaml, freeze, thaw, to_dict)

__all__ = ["load_config", "from_dict", "apply_override", "grid", "with_values", "fork_config", "wandb_section", "llm_section",
           "ConfigError", "ExperimentConfig", "FrozenDict", "LLMConfig", "LoggingConfig", "PersonaConfig",
           "PolicyConfig", "PolicyGroup", "RunConfig", "WandbConfig", "dump_yaml", "freeze", "thaw", "to_dict",
           "ENV_GROUPS", "ENV_RESERVED", "MAX_CONFIG_BYTES", "MAX_MESSAGE_CHARS", "MAX_SHOWN_CHARS", "RANGES"]
