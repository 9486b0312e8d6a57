"""The LLM layer's errors: a failed request (``LLMError``, a policy's fallback) and what ends a
run (``LLMFatalError``: the key, the model, or the server itself gone)."""

from __future__ import annotations


class LLMError(RuntimeError):
    """A request failed for good (after retries, or with a non-retryable status)."""


class LLMFatalError(RuntimeError):
    """The server refused something no retry can mend: the API key, the model, the address.
    Deliberately not an ``LLMError``: the ``complete_*`` methods, and so the policies, do not turn
    it into fallbacks; it ends the run. The message is one line naming the server and the status
    (never the key); every later request of the client raises it again without being sent."""

    def __init__(self, message: str, *, status: int | None = None, base_url: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.base_url = base_url

    def __reduce__(self):       # picklable across processes (sweep workers) with its fields
        return (_fatal_error, (type(self), str(self), self.status, self.base_url))


class LLMAuthError(LLMFatalError):
    """The server refused the API key (HTTP 401 or 403)."""


class LLMModelError(LLMFatalError):
    """The server has no such model, or no chat endpoint at ``base_url`` (HTTP 404)."""


class LLMServerDown(LLMFatalError):
    """The server is gone: the embedded model's process exited (its signal or exit code and the
    end of its log in the message), or every request of a whole round found no server to connect
    to. A run stops there, resumable from its last completed round (``socialgym resume``)."""


def _fatal_error(cls: type, message: str, status: int | None, base_url: str | None) -> LLMFatalError:
    return cls(message, status=status, base_url=base_url)


__all__ = ["LLMError", "LLMFatalError", "LLMAuthError", "LLMModelError", "LLMServerDown"]
