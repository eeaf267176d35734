"""What a client reads of a failure, in each protocol's shape: Datafari's error envelope (6.2:
`{status: ERROR, content: {code, label, message, reason}}`), Datafari 7's (`content.error`, its
codes), OpenAI's (`{error: {message, type, code}}`). The renderers (service.api.protocols) and
the error handlers (service.api.errors) both write them from here."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from service.api.messages import user_message
from service.errors import (
    BadRequest,
    CallerOverLimit,
    ContextLengthExceeded,
    FeatureDisabled,
    IndexNotFound,
    InvalidChatRequest,
    MethodNotAllowed,
    ModelNotServed,
    NotFound,
    PromptTooLong,
    RelayDisabled,
    ServiceError,
    UnsupportedParameter,
)


class ErrorContent(BaseModel):
    """The content of Datafari's error envelope."""

    code: str = Field(description="The HTTP status, as a string (Datafari's shape).")
    label: str = Field(description="Feature + kind, e.g. ragNoFileFound.")
    message: str = Field(description="A sentence for the user.")
    reason: str = Field(description="Technical detail for the operator; never holds secrets.")


class ErrorEnvelope(BaseModel):
    """Datafari's error envelope: status ERROR and what went wrong."""

    status: Literal["ERROR"]
    content: ErrorContent


class OpenAIErrorDetail(BaseModel):
    """What went wrong, as OpenAI clients read it."""

    message: str
    type: str
    code: str | None


class OpenAIErrorBody(BaseModel):
    """OpenAI's error shape, for /v1/."""

    error: OpenAIErrorDetail


def openai_error_body(status: int, message: str, code: str | None) -> dict[str, object]:
    kind = "invalid_request_error" if status < 500 else "api_error"
    return {"error": {"message": message, "type": kind, "code": code}}


# the `code` OpenAI clients see, by error class (a subclass takes its nearest listed
# ancestor's); the others: the error's kind
_OPENAI_CODES: dict[type[ServiceError], str] = {
    NotFound: "not_found",
    IndexNotFound: "index_not_found",
    MethodNotAllowed: "method_not_allowed",
    UnsupportedParameter: "unsupported_parameter",
    ContextLengthExceeded: "context_length_exceeded",
    PromptTooLong: "context_length_exceeded",
    RelayDisabled: "passthrough_disabled",
    ModelNotServed: "model_not_found",
    CallerOverLimit: "rate_limit_exceeded",
}


def openai_body_of(error: ServiceError) -> dict[str, object]:
    """A ServiceError in OpenAI's shape: the user sentence and the reason in one message; a
    chat request's own errors, the reason alone (KAITO's exact sentences)."""
    if isinstance(error, InvalidChatRequest):
        message = error.reason
    else:
        message = f"{error.message} ({error.reason})"
    code = next(
        (_OPENAI_CODES[kind] for kind in type(error).__mro__ if kind in _OPENAI_CODES),
        error.kind,
    )
    return openai_error_body(error.status, message, code)


def error_body(feature: str, error: ServiceError, language: str | None = None) -> dict[str, object]:
    """Datafari's error envelope; its message in the request's `language` when there is one."""
    return {
        "status": "ERROR",
        "content": {
            "code": str(error.status),
            "label": feature + error.kind,
            "message": user_message(error, language),
            "reason": error.reason,
        },
    }


def datafari_code(feature: str, error: ServiceError) -> tuple[str, str]:
    """Datafari 7's code and label of a failure (its AiService and ApiError): "400"
    aiBadRequest for a request it refuses, "422" for a feature off (and a summary's missing or
    empty file), "428" for nothing found or no valid answer, "500" for a technical failure."""
    label = feature + error.kind
    if isinstance(error, BadRequest):
        return "400", "aiBadRequest"
    if isinstance(error, FeatureDisabled) or (
        feature in ("summarization", "synthesis")
        and error.kind in ("NoFileFound", "FileNotFound", "EmptyFile", "NoFileContent")
    ):
        return "422", label
    if error.status in (404, 428):
        return "428", label
    if error.status >= 500:
        return "500", feature + "TechnicalError"
    return str(error.status), label


def ai_error_body(
    feature: str, error: ServiceError, language: str | None = None
) -> dict[str, object]:
    """Datafari 7's error envelope (its AI API: `content.error`, Datafari's codes), the 6.2
    fields beside it."""
    message = user_message(error, language)
    code, label = datafari_code(feature, error)
    detail = {"code": code, "label": label, "message": message, "reason": error.reason}
    return {
        "status": "ERROR",
        "content": {"message": message, "documents": [], "sources": [], **detail,
                    "error": detail},
    }  # fmt: skip
