"""The failures a request can end in, each with its HTTP status and user-facing message.

Stages raise these; the web layer turns them into Datafari's error envelope once, at the edge
(`service.api.errors`). The `kind` is the part of Datafari's label after the feature name:
`rag` + `NoFileFound` is `ragNoFileFound`, `summarization` + `NoFileFound` is
`summarizationNoFileFound`.
"""

from __future__ import annotations

TECHNICAL_MESSAGE = (
    "Sorry, I met a technical issue. Please try again later, and if the problem remains, "
    "contact an administrator."
)


class ServiceError(Exception):
    """A failure with a documented label; `reason` is technical detail and never holds secrets."""

    kind = "TechnicalError"
    status = 500
    message = TECHNICAL_MESSAGE
    openai_code: str | None = None  # the `code` OpenAI clients see; None: the kind

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        if status is not None:
            self.status = status


class FeatureDisabled(ServiceError):
    kind = "ErrorNotEnabled"
    status = 403
    message = "Sorry, it seems the feature is not enabled."


class Unauthorized(ServiceError):
    kind = "Unauthorized"
    status = 401
    message = "Sorry, this needs a valid token."


class InvalidConfigChange(ServiceError):
    kind = "InvalidConfig"
    status = 422
    message = "Sorry, this configuration change is not valid: nothing was saved."


class ConfigChangedMeanwhile(ServiceError):
    kind = "Conflict"
    status = 409
    message = "The configuration changed meanwhile: reload it and apply your change again."


class BadRequest(ServiceError):
    kind = "BadRequest"
    status = 400
    message = (
        "Sorry, It appears there is an issue with the request. "
        "Please check your question and try again."
    )


class PromptTooLong(BadRequest):
    """What the caller sent (instructions, history, question) leaves too little room for
    sources in one LLM request; OpenAI clients see `context_length_exceeded`."""

    openai_code = "context_length_exceeded"


class TooManyCalls(BadRequest):
    """Answering would take more LLM calls than `llm.max.calls.per.request` allows."""


class PayloadTooLarge(ServiceError):
    """A body or an uploaded file (once decompressed) is larger than the service accepts."""

    kind = "BadRequest"
    status = 413
    message = "Sorry, what you sent is too large."


class ModelNotServed(ServiceError):
    """The request names a model the LLM API does not serve (OpenAI's `model_not_found`)."""

    kind = "BadRequest"
    status = 404
    openai_code = "model_not_found"
    message = "Sorry, the model named in the request is not available."


class NoDocumentFound(ServiceError):
    """The search found nothing to answer from (Datafari answers 428; kept for compatibility)."""

    kind = "NoFileFound"
    status = 428
    message = "Sorry, I couldn't find any relevant document to answer your request."


class DocumentNotFound(ServiceError):
    """The `id` named in the request is not in FileShare, or not visible to the caller.

    Datafari answers 428; we answer 404, since the client named a resource that is not there.
    """

    kind = "FileNotFound"
    status = 404
    message = "Sorry, the requested file does not exist, or is not available."


class EmptyDocument(ServiceError):
    kind = "EmptyFile"
    status = 428
    message = "Sorry, the requested file is empty: there is nothing to summarize."


class NoValidAnswer(ServiceError):
    kind = "NoValidAnswer"
    status = 428
    message = "Sorry, I could not find an answer to your question."


class TechnicalError(ServiceError):
    """Something outside the request failed: Solr, the LLM, or our own code."""

    metric = "internal"  # the `kind` label of solr_rag_upstream_errors


class UpstreamUnavailable(TechnicalError):
    """Solr or the LLM could not be reached (connection refused, DNS, reset)."""

    status = 503
    metric = "unavailable"


class UpstreamTimeout(TechnicalError):
    status = 504
    metric = "timeout"


class UpstreamBadResponse(TechnicalError):
    """Solr or the LLM answered with an error or with something we cannot read."""

    status = 502
    metric = "bad_response"
