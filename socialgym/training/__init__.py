"""Training and running networks: the PPO trainers (``ppo`` for feed agents, ``platform_ppo``
for the platform), behaviour cloning from logged decisions (``distill``) and the runtime that
plays a saved network (``torch_policy.TorchPolicy``). Scripted policies stay in
:mod:`socialgym.baselines`.

``TorchPolicy`` is exported lazily: ``from socialgym.training import TorchPolicy`` imports torch
(an optional extra, ``socialgym[torch]``) on first use, and ``import socialgym.training`` alone
never does.
"""

__all__: list[str] = []           # TorchPolicy needs torch: not part of ``import *``

_LAZY = {"TorchPolicy": "socialgym.training.torch_policy"}


def __getattr__(name: str):
    """Lazy exports (PEP 562). Without torch installed this raises torch_policy's ImportError,
    which says how to install it."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
