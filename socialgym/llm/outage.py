"""Whether a server is there at all: what turns a dead LLM server into a named stop instead of
rounds played on stand-ins (``LLMClient.outage``, ``LLMServerDown``)."""

from __future__ import annotations

from socialgym.llm.sanitize import one_line


def no_server(err: BaseException | None) -> bool:
    """The attempt found no server to connect to: a refused or reset connection somewhere behind
    ``err`` (the HTTP libraries wrap it, aiohttp's even as a timeout), not a slow server."""
    seen = 0
    while err is not None and seen < 10:
        if isinstance(err, (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
            return True
        err, seen = err.__cause__ or err.__context__, seen + 1
    return False


class Reach:
    """Per round: the requests sent to a server, and how many of them found none to connect to.
    Cached replies are not counted (they reach no server); requests without a round neither."""

    def __init__(self) -> None:
        self.rounds: dict[int, list[int]] = {}
        self.last_error = ""

    def count(self, round: int | None, unreachable: bool, error: str = "") -> None:
        if round is None:
            return
        counts = self.rounds.setdefault(int(round), [0, 0])
        counts[0] += 1
        if unreachable:
            counts[1] += 1
            self.last_error = error

    def outage(self, round: int, where: str) -> str | None:
        """Why round ``round`` shows no server at ``where``: every request it sent (at least one)
        found none to connect to; else None."""
        sent, unreachable = self.rounds.get(int(round), (0, 0))
        if sent and unreachable == sent:
            return (f"every one of the {sent} LLM request(s) of round {round} found no server to connect to "
                    f"({where}); last error: {one_line(self.last_error, 300)}")
        return None


__all__ = ["Reach", "no_server"]
