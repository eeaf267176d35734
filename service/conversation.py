"""An OpenAI chat completion request as a RAG request: KAITO RAGEngine's rules (seeds 000/001),
grounded by default.

`retrieval_of(body, settings)` decides, in this order:
- `tools` or `functions`, a role other than system/developer/user/assistant, or user content
  that is not text: the LLM as it is (KAITO's bypass); with a rag* model, a 400 instead.
- `index_name` names the index (KAITO): `FileShare` (BM25 over whole documents),
  `VectorMain` (passages, by the configured vector or hybrid search), `rag` (the configured
  retrieval) or a method directly: `bm25`, `vector`, `hybrid`; `""` opts out: the LLM as it is.
- A rag* model (`rag`, `rag-bm25`, `rag-vector`, `rag-hybrid`, listed by GET /v1/models)
  names the retrieval, for clients that can only pick a model.
- With `openai.passthrough.enabled`, any other model named: the LLM as it is.
- Otherwise `openai.default.index` (shipped: `rag`); empty: the LLM as it is.
The LLM as it is needs `openai.passthrough.enabled` (the router's 400 otherwise).
- The user messages after the last assistant message, joined by a blank line, are the
  question; every other message is history, sent with every LLM request.
- Prompt size (KAITO's token allocation): the conversation's tokens are counted as the model
  counts them (`llm.tokenizer`); with 150 more for the instructions, over
  `llm.context.window` -> 400. Of the rest, `context_token_ratio` (the request's, else
  `openai.context.token.ratio`, 0.2-0.8) may hold sources; `max_tokens` defaults to what
  the sources leave (KAITO: no limit beyond the window), and one asked for is lowered so that
  the sources keep at least a fifth.
- `similarity_threshold` (KAITO's, 0-1) overrides `retrieval.similarity.min` for the request;
  `openai.dynamic.topk` fetches at least 100 passages and stuffs the most relevant that fit.
- Nothing relevant found: the LLM answers the conversation without sources
  (`openai.no.context=answer`, KAITO's rule), or 428 NoFileFound (`error`).

    >>> plan = plan_of(body, settings, scope)   # raises InvalidChatRequest (a 400)
    >>> reply = await rag_pipeline(snapshot.overridden(plan.query.overrides)).run(plan.query)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from service.config import Settings
from service.config.settings import RETRIEVAL_METHODS
from service.errors import (
    ContextLengthExceeded,
    InvalidChatRequest,
    ModelNotServed,
    RelayDisabled,
    UnsupportedParameter,
)
from service.ingest.indexes import INDEX_NAME, RESERVED_NAMES
from service.llm import ChatMessage
from service.llm.answer_format import AnswerFormat
from service.models.local import LOCAL_MODELS
from service.rag.request import Overrides, RagQuery
from service.retrieval import Scope
from service.text.tokens import MESSAGE_TOKENS, TokenCounter, token_counter

log = logging.getLogger(__name__)

CHAT_ROLES = frozenset({"system", "developer", "user", "assistant"})
# the models GET /v1/models lists for clients that only pick a model: each names a retrieval
# ("": the configured one)
RAG_MODELS = {"rag": "", **{f"rag-{method}": method for method in RETRIEVAL_METHODS}}
MAX_MODEL_NAME = 256
NO_USER_PROMPT = "There must be a user prompt since the latest assistant message."
TOO_LONG = "Prompt length exceeds context window."
# KAITO's token allocation: tokens kept for the prompt template's instructions, the least share
# of the free window the sources keep, and the tokens one retrieved passage is reckoned at when
# the dynamic top-k sizes the search (at least MIN_CANDIDATES passages)
INSTRUCTION_TOKENS = 150
MIN_CONTEXT_RATIO = 0.2
PASSAGE_TOKENS = 500
MIN_CANDIDATES = 100
MAX_CANDIDATES = 1000


PASSTHROUGH_OFF = (
    "This request is for the LLM without retrieval (tools or functions, another role, non-text "
    'content, or index_name ""), and relaying it to the LLM as it is is off here: send text '
    "messages (they are answered from the index), or ask the administrator to set "
    "openai.passthrough.enabled=true."
)


@dataclass(frozen=True)
class ChatPlan:
    """How one chat request is answered: `query` through the pipeline (None: relayed to the
    LLM as it is), the model name the response shows (None: the LLM's), and whether the
    sources are also written inside the message."""

    query: RagQuery | None
    model: str | None = None
    inline_sources: bool = False


def plan_of(body: dict[str, Any], settings: Settings, scope: Scope) -> ChatPlan:
    """The plan of a chat request; raises InvalidChatRequest (a 400) for what cannot be
    answered, RelayDisabled when it is for the LLM and relaying is off."""
    method = retrieval_of(body, settings)
    if method is None:
        if not settings.openai.passthrough:
            raise RelayDisabled(PASSTHROUGH_OFF)
        return ChatPlan(query=None)
    query = chat_query(body, settings, scope, method)
    rag_model = rag_model_of(body)
    inline = settings.openai.sources_inline
    return ChatPlan(
        query=query,
        model=rag_model,
        inline_sources=not query.form.json
        and (inline == "always" or (inline == "rag-models" and rag_model is not None)),
    )


def retrieval_of(body: dict[str, Any], settings: Settings) -> str | None:
    """The retrieval method a chat request is answered with, or None: the LLM as it is."""
    rag_model = rag_model_of(body)
    beyond = _beyond_rag(body)
    if beyond:
        if rag_model is not None:
            raise UnsupportedParameter(
                f"{beyond}: the {rag_model} model answers from the index, with text only; send "
                "them to the LLM's own model name instead"
            )
        return None
    index = body.get("index_name")
    if index is not None:
        if not isinstance(index, str):
            raise InvalidChatRequest(
                f'index_name must be a string (an index\'s name, or ""), not {type(index).__name__}'
            )
        return _method_of(index, settings) if index != "" else None
    if rag_model is not None:
        return RAG_MODELS[rag_model] or settings.retrieval.in_force
    if settings.openai.passthrough and body.get("model"):
        return None
    default = settings.openai.default_index
    return _method_of(default, settings) if default else None


def rag_model_of(body: dict[str, Any]) -> str | None:
    """The rag* model the request names, if any."""
    model = body.get("model")
    return model if isinstance(model, str) and model in RAG_MODELS else None


def _beyond_rag(body: dict[str, Any]) -> str | None:
    """What makes the request one a RAG answer cannot take (KAITO's bypass), if anything."""
    if body.get("tools") or body.get("functions"):
        return "tools" if body.get("tools") else "functions"
    for message in body["messages"]:
        if message["role"] not in CHAT_ROLES:
            return f"messages: the role {str(message['role'])[:40]!r}"
        if message["role"] == "user" and not _is_text(message.get("content")):
            return "messages: content that is not text"
    return None


def chat_query(body: dict[str, Any], settings: Settings, scope: Scope, method: str) -> RagQuery:
    """The RagQuery of a chat request answered by `method`, with its overrides: the model,
    temperature and max_tokens it asks for, and the token budget its context window leaves;
    and its answer's form (stop, response_format)."""
    _refuse_unsupported(body)
    form = AnswerFormat.of(
        stop=body.get("stop"), response_format=body.get("response_format"), request=body
    )
    messages = body["messages"]
    question, history = split_conversation(messages)
    model = _model_of(body, settings)
    window = settings.llm.context_window
    counter = token_counter(settings.llm.tokenizer, model or settings.llm.model)
    prompt_tokens = count_tokens(messages, counter)
    free = window - prompt_tokens - INSTRUCTION_TOKENS
    if free < 1:
        raise ContextLengthExceeded(TOO_LONG)
    ratio = _number_in(body, "context_token_ratio", MIN_CONTEXT_RATIO, 0.8)
    share = int(free * (settings.openai.context_ratio if ratio is None else ratio))
    # no max_tokens asked: what the sources leave (KAITO: no limit beyond the window), not
    # llm.maxTokens; one asked for: lowered so that the sources keep a fifth at least
    allowed = free - int(free * MIN_CONTEXT_RATIO)
    asked = _max_tokens_of(body)
    max_tokens = asked if asked is not None else free - share
    if max_tokens > allowed:
        log.info(
            "max_tokens lowered from %d to %d (context window %d)", max_tokens, allowed, window
        )
        max_tokens = allowed
    sources = min(share, free - max_tokens)
    request_tokens = prompt_tokens + INSTRUCTION_TOKENS + sources
    dynamic = settings.openai.dynamic_top_k
    overrides = Overrides(
        retrieval_method=method,
        max_request_tokens=min(settings.prompt.max_request_tokens or window, request_tokens),
        similarity_min=_number_in(body, "similarity_threshold", 0, 1),
        top_k=min(max(MIN_CANDIDATES, free // PASSAGE_TOKENS), MAX_CANDIDATES) if dynamic else None,
        strategy="stuff" if dynamic else None,
        model=model,
        max_tokens=max_tokens,
        temperature=_temperature_of(body),
    )
    index = kaito_index_of(body.get("index_name"))
    return RagQuery(
        query=question,
        history=tuple(history),
        always_use_history=True,
        scope=scope if index is None else scope.in_index(index),
        overrides=overrides,
        form=form,
        answer_without_sources=settings.openai.no_context == "answer",
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


def count_tokens(messages: list[dict[str, Any]], counter: TokenCounter) -> int:
    """The tokens of a conversation in the chat format, as `counter` counts them."""
    return sum(counter.count(_text(m.get("content"))) + MESSAGE_TOKENS for m in messages)


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
    configured = settings.retrieval.in_force
    if key == "fileshare":
        return "bm25"
    if key == "vectormain":
        return configured if configured != "bm25" else "hybrid"
    if key == "rag":
        return configured
    if key in RETRIEVAL_METHODS:
        return key
    if kaito_index_of(index):
        return configured
    raise InvalidChatRequest(
        f"Unknown index_name {index[:100]!r}: use FileShare, VectorMain, rag, bm25, vector, "
        'hybrid, a KAITO index (GET /indexes), or "" for the LLM without retrieval.'
    )


def kaito_index_of(index: object) -> str | None:
    """The KAITO index (POST /index) an index_name names, if it is not one of ours."""
    if not isinstance(index, str) or index.lower() in RESERVED_NAMES:
        return None
    return index if INDEX_NAME.fullmatch(index) else None


def _model_of(body: dict[str, Any], settings: Settings) -> str | None:
    """The LLM model the caller names (a rag* model: the configured one). The service's own
    local models (llama.cpp's, the quoting one) answer to any name, so there another name
    than llm.model's is refused rather than answered by a model the caller did not ask for."""
    model = body.get("model")
    if model is None or model == "" or rag_model_of(body):
        return None
    if not isinstance(model, str) or len(model) > MAX_MODEL_NAME:
        raise InvalidChatRequest(
            f"model must be a model name of at most {MAX_MODEL_NAME} characters"
        )
    local = settings.llm.model
    if local in LOCAL_MODELS and model != local:
        raise ModelNotServed(
            f"model {model[:256]!r} is not served here: this service answers with its local "
            f"model {local!r} (llm.model); name it or a rag* model (GET /v1/models lists them)"
        )
    return model


def _max_tokens_of(body: dict[str, Any]) -> int | None:
    """max_completion_tokens (or the older max_tokens), a whole number of at least 1."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidChatRequest(f"{name} must be a whole number of at least 1")
        return value
    return None


def _temperature_of(body: dict[str, Any]) -> float | None:
    return _number_in(body, "temperature", 0, 2)


def _number_in(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    """The number `body[name]` (None when absent); InvalidChatRequest when it is not a
    number from `low` to `high`."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise InvalidChatRequest(f"{name} must be a number from {low:g} to {high:g}")
    return float(value)


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
