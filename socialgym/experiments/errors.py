"""The experiment layer's run error, shared by every room (a config's errors are
:class:`socialgym.experiments.define.schema.ConfigError`)."""


class RunError(RuntimeError):
    """A run cannot start or continue (e.g. resume of a directory that is not a run); the message
    is one line that names the file or setting and what to do."""


__all__ = ["RunError"]
