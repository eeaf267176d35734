"""OpenAI's chat shapes, as this service speaks them, for /openapi.json.

The chat request is validated by its model, once, at the edge (`ChatCompletionRequest.parse`:
KAITO's rules answer malformed chat requests in their own words); `add_schemas` puts the
models no route declares into the document's components.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import models_json_schema

from service.api.grounding import GroundingOut
from service.api.sources import SourceOut
from service.errors import InvalidChatRequest
from service.llm.answer_format import (
    AnswerFormat,
    Sampling,
    checked_response_format,
    stop_sequences,
)

REF = "#/components/schemas/{model}"
MAX_MODEL_NAME = 256
MAX_LOGIT_BIAS = 300
MAX_USER_CHARS = 256
# the numbers a chat request may send: (low, high)
NUMBER_RANGES = {
    "similarity_threshold": (0.0, 1.0),
    "context_token_ratio": (0.2, 0.8),
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "frequency_penalty": (-2.0, 2.0),
    "presence_penalty": (-2.0, 2.0),
}


class ChatMessageIn(BaseModel):
    """A message of the conversation: system, developer, user or assistant (another role, or
    content that is not text, is for the LLM as it is)."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: Any = None

    @property
    def is_text(self) -> bool:
        """Whether the content is text (a string, or text parts only)."""
        content = self.content
        if isinstance(content, str):
            return True
        return isinstance(content, list) and all(
            isinstance(part, dict) and part.get("type") == "text" for part in content
        )

    @property
    def text(self) -> str:
        """The content's text (text parts joined by a line; other content: nothing)."""
        content = self.content
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        return ""


class ChatCompletionRequest(BaseModel):
    """POST /v1/chat/completions: OpenAI's request, plus KAITO's `index_name`,
    `similarity_threshold` and `context_token_ratio`; validated once, at the edge, each
    malformed field refused (InvalidChatRequest, a 400) in KAITO's words. What only a RAG
    answer cannot honour (`n`, `logprobs`, `tool_choice`) is refused by service.api.conversation,
    since a request relayed to the LLM may send it."""

    model_config = ConfigDict(extra="allow")

    messages: list[ChatMessageIn] = Field(
        min_length=1,
        description="The conversation; the user messages after the last assistant message "
        "are the question, the rest is history.",
    )
    model: str | None = Field(
        None,
        description="rag, rag-bm25, rag-vector or rag-hybrid: answers from the index; another "
        "name: the LLM model that answers (relayed as it is with openai.passthrough.enabled).",
    )
    index_name: str | None = Field(
        None,
        description="KAITO's choice of index: FileShare, VectorMain, rag, bm25, vector, hybrid; "
        '"" for the LLM without retrieval. Absent: openai.default.index.',
    )
    similarity_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="KAITO's relevance floor for this request: passages whose cosine similarity "
        "to the question is below it are not used (vector, hybrid). Absent: "
        "retrieval.similarity.min.",
    )
    context_token_ratio: float | None = Field(
        None,
        ge=0.2,
        le=0.8,
        description="KAITO's share of the free context window (after the conversation and 150 "
        "tokens of instructions) the sources may take; max_tokens defaults to the rest. Absent: "
        "openai.context.token.ratio.",
    )
    stream: StrictBool = False  # "yes" or 1 is no true: a 400
    stream_options: dict[str, Any] | None = Field(
        None, description="include_usage: true adds a last chunk with the usage."
    )
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = Field(
        None, description="Up to 4 sequences; the answer ends before the first."
    )
    response_format: dict[str, Any] | None = Field(
        None,
        description="text, json_object or json_schema: the answer is checked to be JSON (and "
        "to match the schema), else a 400.",
    )
    top_p: float | None = Field(None, ge=0, le=1)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    seed: int | None = Field(None, description="A whole number (64-bit).")
    logit_bias: dict[str, float] | None = Field(
        None, description=f"At most {MAX_LOGIT_BIAS} token ids, each -100 to 100."
    )
    user: str | None = Field(None, max_length=MAX_USER_CHARS)
    n: Any = Field(None, description="1 only: other values are refused (400).")
    logprobs: Any = Field(None, description="Refused (400) when true.")
    top_logprobs: Any = Field(None, description="Refused (400).")
    tool_choice: Any = Field(None, description="none or auto with a rag* model.")
    tools: list[dict[str, Any]] | None = Field(
        None, description="Relayed to the LLM (openai.passthrough.enabled); a rag* model: 400."
    )
    functions: Any = Field(None, description="As tools.")

    @field_validator("messages", mode="before")
    @classmethod
    def _messages(cls, value: object) -> object:
        if not isinstance(value, list) or not value:
            raise InvalidChatRequest("messages must be a non-empty list.")
        if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value):
            raise InvalidChatRequest("every message needs a role.")
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: object) -> object:
        if value is not None and (not isinstance(value, str) or len(value) > MAX_MODEL_NAME):
            raise InvalidChatRequest(
                f"model must be a model name of at most {MAX_MODEL_NAME} characters"
            )
        return value

    @field_validator("index_name", mode="before")
    @classmethod
    def _index_name(cls, value: object) -> object:
        if value is not None and not isinstance(value, str):
            raise InvalidChatRequest(
                f'index_name must be a string (an index\'s name, or ""), not {type(value).__name__}'
            )
        return value

    @field_validator(
        "similarity_threshold",
        "context_token_ratio",
        "temperature",
        "top_p",
        "frequency_penalty",
        "presence_penalty",
        mode="before",
    )
    @classmethod
    def _number(cls, value: object, info: ValidationInfo) -> object:
        low, high = NUMBER_RANGES[info.field_name or ""]
        number = not isinstance(value, bool) and isinstance(value, int | float)
        if value is not None and (not number or not low <= value <= high):  # type: ignore[operator]
            raise InvalidChatRequest(f"{info.field_name} must be a number from {low:g} to {high:g}")
        return value

    @field_validator("max_tokens", "max_completion_tokens", mode="before")
    @classmethod
    def _token_count(cls, value: object, info: ValidationInfo) -> object:
        whole = not isinstance(value, bool) and isinstance(value, int)
        if value is not None and (not whole or value < 1):  # type: ignore[operator]
            raise InvalidChatRequest(f"{info.field_name} must be a whole number of at least 1")
        return value

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, value: object) -> object:
        stop_sequences(value)
        return value

    @field_validator("response_format", mode="before")
    @classmethod
    def _response_format(cls, value: object) -> object:
        checked_response_format(value)
        return value

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, value: object) -> object:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 2**63
        ):
            raise InvalidChatRequest("seed must be a whole number (64-bit)")
        return value

    @field_validator("logit_bias", mode="before")
    @classmethod
    def _logit_bias(cls, value: object) -> object:
        if value is not None and (
            not isinstance(value, dict)
            or len(value) > MAX_LOGIT_BIAS
            or not all(
                isinstance(token, str) and token.isascii() and token.isdigit() and len(token) <= 10
                and not isinstance(bias, bool) and isinstance(bias, int | float)
                and -100 <= bias <= 100
                for token, bias in value.items()
            )
        ):  # fmt: skip
            raise InvalidChatRequest(
                f"logit_bias must map at most {MAX_LOGIT_BIAS} token ids to numbers from -100 "
                "to 100"
            )
        return value

    @field_validator("user", mode="before")
    @classmethod
    def _user(cls, value: object) -> object:
        if value is not None and (not isinstance(value, str) or len(value) > MAX_USER_CHARS):
            raise InvalidChatRequest(
                f"user must be a string of at most {MAX_USER_CHARS} characters"
            )
        return value

    @classmethod
    def parse(cls, body: object) -> ChatCompletionRequest:
        """The request, validated; InvalidChatRequest (a 400) naming what is wrong."""
        if not isinstance(body, dict):
            raise InvalidChatRequest("The body must be a JSON object.")
        if "messages" not in body:
            cls._messages(None)  # refused in KAITO's words, as an empty list is
        try:
            return cls.model_validate(body)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise InvalidChatRequest(f"{where}: {first['msg']}"[:300]) from None

    @property
    def form(self) -> AnswerFormat:
        """The answer's form: stop sequences, response format and sampling options."""
        bias = self.logit_bias
        sampling = Sampling(
            top_p=self.top_p,
            frequency_penalty=self.frequency_penalty,
            presence_penalty=self.presence_penalty,
            seed=self.seed,
            logit_bias=None if bias is None else tuple(sorted(bias.items())),
            user=self.user,
        )
        return AnswerFormat.of(
            stop=self.stop, response_format=self.response_format, sampling=sampling
        )

    @property
    def asked_max_tokens(self) -> int | None:
        """max_completion_tokens, or the older max_tokens."""
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens
        return self.max_tokens

    @property
    def wants_usage(self) -> bool:
        """stream_options.include_usage: the stream ends with a usage chunk."""
        return bool(self.stream_options and self.stream_options.get("include_usage") is True)

    def relayed(self) -> dict[str, Any]:
        """The request as the LLM gets it, relayed as it is (without KAITO's index_name)."""
        return self.model_dump(exclude_unset=True, exclude={"index_name"})


class AssistantMessage(BaseModel):
    """The answer."""

    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    """The one choice of an answer."""

    index: int
    message: AssistantMessage
    finish_reason: str = Field(description="stop, or length when max_tokens cut the answer.")


class CompletionUsage(BaseModel):
    """Tokens the answer cost, over every LLM call it made."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    """OpenAI's chat.completion, with the sources two ways: `sources` and `citations`."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    sources: list[SourceOut]
    citations: list[str] = Field(description="The sources' URLs (or ids), in citation order.")
    grounding: GroundingOut | None = Field(
        None, description="Each sentence checked against its sources (grounding.enabled only)."
    )
    cached: bool | None = Field(None, description="true for an answer from the answer cache.")
    cache_age: float | None = Field(None, description="Seconds since a cached answer was made.")


class ChatCompletionChunk(BaseModel):
    """One Server-Sent Event of a streamed answer (`data: {...}`); the last one before
    `data: [DONE]` has the finish_reason, usage, sources, citations (and grounding)."""

    model_config = ConfigDict(extra="allow")

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[dict[str, Any]]


class Model(BaseModel):
    """A model a request may name."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    """GET /v1/models."""

    object: Literal["list"] = "list"
    data: list[Model]


def request_body(model: type[BaseModel]) -> dict[str, Any]:
    """A route's documented JSON body, by reference to a component `add_schemas` adds."""
    return {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}},
    }


def add_schemas(document: dict[str, Any], *more: type[BaseModel]) -> None:
    """Puts the models routes refer to by hand into `components.schemas` (the chat request's,
    and `more`: bodies validated off the event loop)."""
    models = [ChatCompletionRequest, ChatCompletionChunk, *more]
    _, definitions = models_json_schema(
        [(model, "validation") for model in models], ref_template=REF
    )
    document.setdefault("components", {}).setdefault("schemas", {}).update(
        definitions.get("$defs", {})
    )
