"""An OpenAI chat completion request as a RAG request: KAITO RAGEngine's rules (seeds 000/001).

- RAG applies when the body names an index in `index_name`: `FileShare` (BM25 over whole
  documents), `VectorMain` (passages, by the configured vector or hybrid search), or a method
  directly: `bm25`, `vector`, `hybrid`.
- The request is for the LLM as it is (`needs_relay`) when no index is named, when `tools` or
  `functions` are present, when a message has a role other than system/developer/user/
  assistant, or when user content is not text.
- The user messages after the last assistant message, joined by a blank line, are the
  question; every other message is history, sent with every LLM request.
- Prompt size: tokens are counted as 4 characters each (a documented estimate: no tokenizer
  download); over `llm.context.window` -> 400; `max_tokens` above what is left is lowered,
  and with RAG to half the window at most, so that the sources fit in the other half.

    >>> query = chat_query(body, settings, scope)   # raises InvalidChatRequest (a 400)
    >>> reply = await runtime.rag_pipeline(query.overrides).run(query)
"""

from __future__ import annotations

import logging
import math
from typing import Any

from service.config import Settings
from service.config.settings import CHARS_PER_TOKEN
from service.errors import ContextLengthExceeded, InvalidChatRequest, UnsupportedParameter
from service.llm import ChatMessage
from service.pipeline import Overrides, RagQuery
from service.retrieval import Scope

log = logging.getLogger(__name__)

CHAT_ROLES = frozenset({"system", "developer", "user", "assistant"})
METHODS = frozenset({"bm25", "vector", "hybrid"})
MAX_MODEL_NAME = 256
NO_USER_PROMPT = "There must be a user prompt since the latest assistant message."
TOO_LONG = "Prompt length exceeds context window."


def needs_relay(body: dict[str, Any]) -> bool:
    """Whether the request is for the LLM as it is, without retrieval."""
    if body.get("index_name") is None or body.get("tools") or body.get("functions"):
        return True
    for message in body["messages"]:
        if message["role"] not in CHAT_ROLES:
            return True
        if message["role"] == "user" and not _is_text(message.get("content")):
            return True
    return False


def chat_query(body: dict[str, Any], settings: Settings, scope: Scope) -> RagQuery:
    """The RagQuery of a chat request that needs no relay, with its overrides: the retrieval
    its index names, the model, temperature and max_tokens it asks for, and the token budget
    its context window leaves."""
    _refuse_unsupported(body)
    messages = body["messages"]
    question, history = split_conversation(messages)
    window = settings.llm_context_window
    prompt_tokens = estimate_tokens(messages)
    if prompt_tokens > window:
        raise ContextLengthExceeded(TOO_LONG)
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    max_tokens = int(asked) if isinstance(asked, int) and asked > 0 else settings.llm_max_tokens
    # what is left after the prompt, and at most half the window: the sources get the rest
    allowed = min(window - prompt_tokens, window // 2)
    if max_tokens > allowed:
        log.info(
            "max_tokens lowered from %d to %d (context window %d)", max_tokens, allowed, window
        )
        max_tokens = allowed
    overrides = Overrides(
        retrieval_method=_method_of(str(body["index_name"]), settings),
        max_request_tokens=min(settings.max_request_tokens or window, window - max_tokens),
        model=_model_of(body),
        max_tokens=max_tokens,
        temperature=_temperature_of(body),
    )
    return RagQuery(
        query=question,
        history=tuple(history),
        always_use_history=True,
        scope=scope,
        overrides=overrides,
    )


def split_conversation(messages: list[dict[str, Any]]) -> tuple[str, list[ChatMessage]]:
    """(question, history): the user messages after the last assistant message, joined by a
    blank line; everything else in order."""
    last_assistant = max(
        (i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1
    )
    tail = range(last_assistant + 1, len(messages))
    question_at = [i for i in tail if messages[i]["role"] == "user"]
    if not question_at:
        raise InvalidChatRequest(NO_USER_PROMPT)
    question = "\n\n".join(_text(messages[i].get("content")) for i in question_at)
    history = [
        ChatMessage("system" if m["role"] == "developer" else m["role"], _text(m.get("content")))
        for i, m in enumerate(messages)
        if i not in question_at
    ]
    return question, history


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    characters = sum(len(_text(message.get("content"))) for message in messages)
    return math.ceil(characters / CHARS_PER_TOKEN)


def _refuse_unsupported(body: dict[str, Any]) -> None:
    """OpenAI options a RAG answer cannot honour are refused, never silently ignored."""
    n = body.get("n")
    if n is not None and n != 1:
        raise UnsupportedParameter(
            "n: RAG answers have one choice; send n=1 (or leave it out), or ask n times"
        )
    if body.get("logprobs") or body.get("top_logprobs"):
        raise UnsupportedParameter("logprobs: RAG answers do not report token probabilities")


def _method_of(index: str, settings: Settings) -> str:
    key = index.lower()
    if key == "fileshare":
        return "bm25"
    if key == "vectormain":
        return settings.retrieval if settings.retrieval != "bm25" else "hybrid"
    if key in METHODS:
        return key
    raise InvalidChatRequest(
        f"Unknown index_name {index!r}: use FileShare, VectorMain, bm25, vector or hybrid."
    )


def _model_of(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if model is None or model == "":
        return None
    if not isinstance(model, str) or len(model) > MAX_MODEL_NAME:
        raise InvalidChatRequest(
            f"model must be a model name of at most {MAX_MODEL_NAME} characters"
        )
    return model


def _temperature_of(body: dict[str, Any]) -> float | None:
    temperature = body.get("temperature")
    if temperature is None:
        return None
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise InvalidChatRequest("temperature must be a number from 0 to 2")
    if not 0 <= temperature <= 2:
        raise InvalidChatRequest("temperature must be a number from 0 to 2")
    return float(temperature)


def _is_text(content: object) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "text" for part in content
    )


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
