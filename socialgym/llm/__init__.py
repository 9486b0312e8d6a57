"""The LLM layer: an OpenAI-compatible client, prompt templates, schemas, the embedded model.

``openai`` (and, for the embedded model, ``llama-cpp-python``) are optional extras; importing
this package does not need them until a request is made or a server started.
"""

from socialgym.llm.cache import ResponseCache
from socialgym.llm.client import (JSONReply, LLMAuthError, LLMClient, LLMError, LLMFatalError, LLMModelError,
                                  LLMServerDown, TextReply)
from socialgym.llm.connect import open_client
from socialgym.llm.local import LocalServer, default_model_path, local_server
from socialgym.llm.prompts import REWARD_DOCS, PromptSet
from socialgym.llm.router import Endpoint
from socialgym.llm.sanitize import drop_secrets, redact
from socialgym.llm.usage import Call, Fallback, Usage

__all__ = ["LLMClient", "LLMError", "LLMFatalError", "LLMAuthError", "LLMModelError", "LLMServerDown", "redact",
           "drop_secrets", "JSONReply", "TextReply", "ResponseCache",
           "PromptSet", "REWARD_DOCS", "Usage", "Call", "Fallback", "local_server", "LocalServer", "default_model_path",
           "open_client", "Endpoint"]
