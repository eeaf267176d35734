"""An OpenAI chat completion request as a RAG request: KAITO RAGEngine's rules (seeds 000/001),
grounded by default.

The request arrives validated (`ChatCompletionRequest.parse`, service.api.openai_schema);
`retrieval_of(request, settings)` decides, in this order:
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
- Nothing relevant found: the not-found sentence with `abstained` (`openai.no.context=refuse`,
  shipped: service.api.openai), the LLM answering the conversation without sources (`answer`,
  KAITO's rule), or 428 NoFileFound (`error`).

    >>> plan = plan_of(request, settings, scope)   # raises InvalidChatRequest (a 400)
    >>> reply = await ask(snapshot, plan.query)     # its options applied (service.rag.assemble)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from service.api.openai_schema import ChatCompletionRequest, ChatMessageIn
from service.config import Settings
from service.config.settings import RETRIEVAL_METHODS, Retrieval
from service.errors import (
    ContextLengthExceeded,
    InvalidChatRequest,
    ModelNotServed,
    RelayDisabled,
    UnsupportedParameter,
)
from service.ingest.partitions import INDEX_NAME, RESERVED_NAMES
from service.llm import ChatMessage
from service.models.local import LOCAL_MODELS
from service.rag.request import RagQuery
from service.retrieval import Scope
from service.snapshot.options import RequestOptions
from service.text.tokens import MESSAGE_TOKENS, TokenCounter, token_counter

log = logging.getLogger(__name__)

CHAT_ROLES = frozenset({"system", "developer", "user", "assistant"})
# the models GET /v1/models lists for clients that only pick a model: each names a retrieval
# ("": the configured one)
RAG_MODELS = {"rag": "", **{f"rag-{method}": method for method in RETRIEVAL_METHODS}}
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


def plan_of(request: ChatCompletionRequest, settings: Settings, scope: Scope) -> ChatPlan:
    """The plan of a chat request; raises InvalidChatRequest (a 400) for what cannot be
    answered, RelayDisabled when it is for the LLM and relaying is off."""
    method = retrieval_of(request, settings)
    if method is None:
        if not settings.openai.passthrough:
            raise RelayDisabled(PASSTHROUGH_OFF)
        return ChatPlan(query=None)
    query = chat_query(request, settings, scope, method)
    rag_model = rag_model_of(request)
    inline = settings.openai.sources_inline
    return ChatPlan(
        query=query,
        model=rag_model,
        inline_sources=not query.options.form.json
        and (inline == "always" or (inline == "rag-models" and rag_model is not None)),
    )


def retrieval_of(request: ChatCompletionRequest, settings: Settings) -> Retrieval | None:
    """The retrieval method a chat request is answered with, or None: the LLM as it is."""
    rag_model = rag_model_of(request)
    beyond = _beyond_rag(request)
    if beyond:
        if rag_model is not None:
            raise UnsupportedParameter(
                f"{beyond}: the {rag_model} model answers from the index, with text only; send "
                "them to the LLM's own model name instead"
            )
        return None
    index = request.index_name
    if index is not None:
        return _method_of(index, settings) if index != "" else None
    if rag_model is not None:
        return RAG_MODELS[rag_model] or settings.retrieval.in_force
    if settings.openai.passthrough and request.model:
        return None
    default = settings.openai.default_index
    return _method_of(default, settings) if default else None


def rag_model_of(request: ChatCompletionRequest) -> str | None:
    """The rag* model the request names, if any."""
    return request.model if request.model in RAG_MODELS else None


def _beyond_rag(request: ChatCompletionRequest) -> str | None:
    """What makes the request one a RAG answer cannot take (KAITO's bypass), if anything."""
    if request.tools or request.functions:
        return "tools" if request.tools else "functions"
    for message in request.messages:
        if message.role not in CHAT_ROLES:
            return f"messages: the role {message.role[:40]!r}"
        if message.role == "user" and not message.is_text:
            return "messages: content that is not text"
    return None


def chat_query(
    request: ChatCompletionRequest, settings: Settings, scope: Scope, method: Retrieval
) -> RagQuery:
    """The RagQuery of a chat request answered by `method`, with its options: the model,
    temperature and max_tokens it asks for, the token budget its context window leaves, and
    its answer's form (stop, response_format, sampling)."""
    _refuse_unsupported(request)
    form = request.form
    messages = request.messages
    question, history = split_conversation(messages)
    model = _model_of(request, settings)
    window = settings.llm.context_window
    counter = token_counter(settings.llm.tokenizer, model or settings.llm.model)
    prompt_tokens = count_tokens(messages, counter)
    free = window - prompt_tokens - INSTRUCTION_TOKENS
    if free < 1:
        raise ContextLengthExceeded(TOO_LONG)
    ratio = request.context_token_ratio
    share = int(free * (settings.openai.context_ratio if ratio is None else ratio))
    # no max_tokens asked: what the sources leave (KAITO: no limit beyond the window), not
    # llm.maxTokens; one asked for: lowered so that the sources keep a fifth at least
    allowed = free - int(free * MIN_CONTEXT_RATIO)
    asked = request.asked_max_tokens
    max_tokens = asked if asked is not None else free - share
    if max_tokens > allowed:
        log.info(
            "max_tokens lowered from %d to %d (context window %d)", max_tokens, allowed, window
        )
        max_tokens = allowed
    sources = min(share, free - max_tokens)
    request_tokens = prompt_tokens + INSTRUCTION_TOKENS + sources
    dynamic = settings.openai.dynamic_top_k
    options = RequestOptions(
        retrieval_method=method,
        max_request_tokens=min(settings.prompt.max_request_tokens or window, request_tokens),
        similarity_min=request.similarity_threshold,
        top_k=min(max(MIN_CANDIDATES, free // PASSAGE_TOKENS), MAX_CANDIDATES) if dynamic else None,
        strategy="stuff" if dynamic else None,
        model=model,
        max_tokens=max_tokens,
        temperature=request.temperature,
        form=form,
        always_use_history=True,
        answer_without_sources=settings.openai.no_context == "answer",
    )
    index = partition_of(request.index_name)
    return RagQuery(
        query=question,
        history=tuple(history),
        scope=scope if index is None else scope.in_partition(index),
        options=options,
    )


def split_conversation(messages: list[ChatMessageIn]) -> tuple[str, list[ChatMessage]]:
    """(question, history): the user messages after the last assistant message, joined by a
    blank line; everything else in order."""
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    tail = range(last_assistant + 1, len(messages))
    question_at = [i for i in tail if messages[i].role == "user"]
    if not question_at:
        raise InvalidChatRequest(NO_USER_PROMPT)
    question = "\n\n".join(messages[i].text for i in question_at)
    history = [
        ChatMessage("system" if m.role == "developer" else m.role, m.text)
        for i, m in enumerate(messages)
        if i not in question_at
    ]
    return question, history


def count_tokens(messages: list[ChatMessageIn], counter: TokenCounter) -> int:
    """The tokens of a conversation in the chat format, as `counter` counts them."""
    return sum(counter.count(m.text) + MESSAGE_TOKENS for m in messages)


def _refuse_unsupported(request: ChatCompletionRequest) -> None:
    """OpenAI options a RAG answer cannot honour are refused, never silently ignored."""
    # JSON's true and 1.0 equal 1 in Python: only the integer 1 is one choice
    if request.n is not None and (type(request.n) is not int or request.n != 1):
        raise UnsupportedParameter(
            "n: RAG answers have one choice; send n=1 (or leave it out), or ask n times"
        )
    if request.logprobs or request.top_logprobs:
        raise UnsupportedParameter("logprobs: RAG answers do not report token probabilities")
    if request.tool_choice is not None and request.tool_choice not in ("none", "auto"):
        raise UnsupportedParameter(
            "tool_choice: a RAG answer calls no tool; send none or auto (or leave it out)"
        )


def _method_of(index: str, settings: Settings) -> Retrieval:
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
    if partition_of(index):
        return configured
    raise InvalidChatRequest(
        f"Unknown index_name {index[:100]!r}: use FileShare, VectorMain, rag, bm25, vector, "
        'hybrid, a KAITO index (GET /indexes), or "" for the LLM without retrieval.'
    )


def partition_of(index: object) -> str | None:
    """The KAITO index (POST /index) an index_name names, if it is not one of ours."""
    if not isinstance(index, str) or index.lower() in RESERVED_NAMES:
        return None
    return index if INDEX_NAME.fullmatch(index) else None


def _model_of(request: ChatCompletionRequest, settings: Settings) -> str | None:
    """The LLM model the caller names (a rag* model: the configured one). The service's own
    local models (llama.cpp's, the quoting one) answer to any name, so there another name
    than llm.model's is refused rather than answered by a model the caller did not ask for."""
    model = request.model
    if not model or rag_model_of(request):
        return None
    local = settings.llm.model
    if local in LOCAL_MODELS and model != local:
        raise ModelNotServed(
            f"model {model[:256]!r} is not served here: this service answers with its local "
            f"model {local!r} (llm.model); name it or a rag* model (GET /v1/models lists them)"
        )
    return model
