"""``open_client()``: an :class:`LLMClient` on a server, or on the embedded model started for it.

Every command that talks to a model (the experiment runner, the moderation experiment, the
evaluation's LLM agents, the agents' demo) sets up its client here::

    with open_client(base_url, model, api_key_env="OPENAI_API_KEY", max_concurrency=16) as client:
        ...
    with open_client(None, n_ctx=4096, server_log=out / "llm_server.log") as client:   # embedded
        ...
    with open_client(endpoints=[{"base_url": url_a, "model": "m"}, {"base_url": url_b, "model": "m"}]) as client:
        ...
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Iterator, Mapping, Sequence

from socialgym.llm.client import LLMClient
from socialgym.llm.local import local_server
from socialgym.llm.router import Endpoint, as_endpoints


@contextlib.contextmanager
def open_client(base_url: str | None = None, model: str | None = None, *, api_key: str | None = None,
                api_key_env: str | None = None, n_ctx: int = 4096, server_log: str | os.PathLike | None = None,
                endpoints: Sequence[Endpoint | Mapping[str, Any]] | None = None,
                **settings: Any) -> Iterator[LLMClient]:
    """An :class:`LLMClient` on the OpenAI-compatible server at ``base_url``, or — ``base_url``
    None — on the embedded model, served by :func:`local_server` (``n_ctx``, its log in
    ``server_log``) for as long as the block lasts. On the way out the client is closed, then the
    server stopped.

    The key: ``api_key``, else the environment variable named ``api_key_env`` (neither: the
    client's own ``OPENAI_API_KEY`` fallback); the embedded model uses its server's random key,
    and ``model`` defaults to its alias. ``settings`` are the client's other keywords
    (``max_concurrency``, ``temperature``, ``cache`` ...); ``local`` is set here, true exactly for
    the embedded model (small: policies plan under a schema and write texts plainly).

    The embedded server's process is watched (``client.server_check``): once it has exited,
    requests raise ``LLMServerDown`` naming its signal or exit code instead of falling back.

    ``endpoints`` (``Endpoint``s or mappings with its field names): several servers instead of
    ``base_url`` and ``model``, which must then be None. An endpoint with neither ``api_key``
    nor ``api_key_env`` takes ``api_key``, else ``api_key_env``, from here."""
    if endpoints is not None:
        if base_url is not None or model is not None:
            raise ValueError("give either endpoints or base_url/model, not both (each endpoint names its "
                             "base_url and model)")
        endpoints = [e if e.api_key is not None or e.api_key_env is not None
                     else dataclasses.replace(e, api_key=api_key, api_key_env=api_key_env)
                     for e in as_endpoints(endpoints)]
        with LLMClient(endpoints=endpoints, local=False, **settings) as client:
            yield client
        return
    with contextlib.ExitStack() as stack:
        if base_url is None:
            server = stack.enter_context(local_server(n_ctx=n_ctx, log_path=server_log))
            base_url, model, key = server.base_url, model or server.model, server.api_key
            local = True
        else:
            server, key = None, api_key or (os.environ.get(api_key_env) if api_key_env else None)
            local = False
        client = stack.enter_context(LLMClient(base_url, model, api_key=key, local=local, **settings))
        if server is not None:     # its process watched: a dead server stops the caller, named
            client.server_check = server.failure
        yield client


__all__ = ["open_client"]
