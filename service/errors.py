"""Every failure the service names, in one tree.

    SolrRagError
    ├── SetupError            the service cannot start: ConfigError, PromptTemplateError,
    │                         SolrLayoutError (the CLI prints one line and exits 2)
    ├── ConfigConflict        an admin edit based on a version that is gone
    ├── ExtractionFailed      one file cannot be read (ingestion reports it and goes on):
    │                         UnsupportedFile, TooLarge
    └── ServiceError          a request's failure: one HTTP status and one user-facing
        │                     message per class, never overridden
        ├── BadRequest, PromptTooLong, TooManyCalls, MethodNotAllowed, ...
        ├── NotFound          404: a route; and what a request names that is not there (or
        │                     not the caller's): DocumentNotFound, SummarySourceNotFound,
        │                     IndexNotFound, JobNotFound, ModelNotServed, ConversationNotFound,
        │                     AgentNotFound (NoDocumentFound, 428, is "nothing relevant")
        └── TechnicalError    Solr, the LLM or our own code: UpstreamUnavailable (503),
                              UpstreamTimeout (504), UpstreamBadResponse (502; its
                              UpstreamRefused: Solr's 401/403 to our credentials)

Stages raise these; the web layer turns a ServiceError into Datafari's envelope (or OpenAI's
error shape under /v1/) once, at the edge (`service.api.errors`). A ServiceError's `kind` is
the part of Datafari's label after the feature name: `rag` + `NoFileFound` is
`ragNoFileFound`, `summarization` + `NoFileFound` is `summarizationNoFileFound`.
"""

from __future__ import annotations

TECHNICAL_MESSAGE = (
    "Sorry, I met a technical issue. Please try again later, and if the problem remains, "
    "contact an administrator."
)


class SolrRagError(Exception):
    """The root of every failure the service names."""


class SetupError(SolrRagError):
    """Something the service needs to start is missing or invalid."""


class ConfigError(SetupError):
    """rag.properties (or an override) holds a value the service cannot run with."""


class PromptTemplateError(SetupError):
    """A prompt template cannot be read, does not parse, or needs a variable nobody gives."""


class SolrLayoutError(SetupError):
    """Solr lacks a collection or a field the service uses."""


class ConfigConflict(SolrRagError):
    """rag.properties changed between the version an edit was based on and the edit."""


class ExtractionFailed(SolrRagError):
    """A file cannot be read: corrupt, encrypted, or without text."""


class UnsupportedFile(ExtractionFailed):
    """A file of a kind this version cannot extract text from."""


class TooLarge(ExtractionFailed):
    """A file would inflate past what extraction accepts (a zip bomb, or just too big)."""


class ServiceError(SolrRagError):
    """A failure with a documented label and status; `reason` is technical detail and never
    holds secrets or addresses (it reaches anonymous callers)."""

    kind = "TechnicalError"
    status = 500
    message = TECHNICAL_MESSAGE

    def __init__(self, reason: str, *, retry_after: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after  # seconds, sent as Retry-After when set


class FeatureDisabled(ServiceError):
    """The feature is switched off in rag.properties (or has no token to guard it)."""

    kind = "ErrorNotEnabled"
    status = 403
    message = "Sorry, it seems the feature is not enabled."


class Unauthorized(ServiceError):
    """A required token or API key is missing or wrong."""

    kind = "Unauthorized"
    status = 401
    message = "Sorry, this needs a valid token."


class Forbidden(ServiceError):
    """The caller is known but may not do this (a page of another origin opening a socket)."""

    kind = "Forbidden"
    status = 403
    message = "Sorry, this is not allowed from here."


class InvalidConfigChange(ServiceError):
    """An admin edit that fails validation; nothing was written."""

    kind = "InvalidConfig"
    status = 422
    message = "Sorry, this configuration change is not valid: nothing was saved."


class ConfigChangedMeanwhile(ServiceError):
    """An admin edit based on a version of rag.properties that is gone."""

    kind = "Conflict"
    status = 409
    message = "The configuration changed meanwhile: reload it and apply your change again."


class BadRequest(ServiceError):
    """The request itself is malformed or asks for what cannot be done."""

    kind = "BadRequest"
    status = 400
    message = (
        "Sorry, It appears there is an issue with the request. "
        "Please check your question and try again."
    )


class NotFound(ServiceError):
    """No route answers this path."""

    kind = "NotFound"
    status = 404
    message = "Sorry, there is nothing at this address."


class IndexNotFound(NotFound):
    """A KAITO index name that no index has (GET /indexes lists them)."""

    kind = "IndexNotFound"
    status = 404
    message = "Sorry, there is no index by that name."

    def __init__(self, index: str) -> None:
        super().__init__(f"no index named {index[:64]!r} (GET /indexes lists them)")


class MethodNotAllowed(ServiceError):
    """The route exists, for other HTTP methods."""

    kind = "MethodNotAllowed"
    status = 405
    message = "Sorry, this address does not answer that HTTP method."


class InvalidChatRequest(BadRequest):
    """An OpenAI chat request that breaks KAITO's rules (seed 001), in its words."""


class UnsupportedParameter(InvalidChatRequest):
    """An OpenAI option RAG answers cannot honour (`n` > 1, `logprobs`): refused, never
    silently ignored."""


class AgentNotFound(NotFound):
    """The request names an agent agentic.agents does not list."""

    kind = "AgentNotFound"
    message = "Sorry, this agent does not exist, or is not available."


class ConversationNotFound(NotFound):
    """No conversation of this caller has that id (never made, expired, deleted, or another
    caller's): Datafari 7's conversationId."""

    kind = "ConversationNotFound"
    message = "Sorry, this conversation does not exist, or is no longer available."


class FilterRefused(BadRequest):
    """A filter query (Datafari 7's filters.fq) that is not a facet's: the reason says what
    was refused and why."""


class ToolsUnsupported(BadRequest):
    """The configured LLM refuses requests with tools: the agent cannot run on it."""


class ContextLengthExceeded(InvalidChatRequest):
    """The chat's messages alone are longer than the model's context window."""


class RelayDisabled(InvalidChatRequest):
    """A chat request without retrieval, while relaying to the LLM is off."""


class PromptTooLong(BadRequest):
    """What the caller sent (instructions, history, question) leaves too little room for
    sources in one LLM request; OpenAI clients see `context_length_exceeded`."""


class TooManyCalls(BadRequest):
    """Answering would take more LLM calls than `llm.max.calls.per.request` allows."""


class PayloadTooLarge(ServiceError):
    """A body or an uploaded file (once decompressed) is larger than the service accepts."""

    kind = "PayloadTooLarge"
    status = 413
    message = "Sorry, what you sent is too large."


class BodyTimeout(ServiceError):
    """The request's body stopped arriving (request.body.timeout): its connection is freed."""

    kind = "RequestTimeout"
    status = 408
    message = "Sorry, your request arrived too slowly."


class ModelNotServed(NotFound):
    """The request names a model the LLM API does not serve (OpenAI's `model_not_found`)."""

    kind = "ModelNotFound"
    status = 404
    message = "Sorry, the model named in the request is not available."


class NoDocumentFound(ServiceError):
    """The search found nothing to answer from (Datafari answers 428; kept for compatibility)."""

    kind = "NoFileFound"
    status = 428
    message = "Sorry, I couldn't find any relevant document to answer your request."


class DocumentNotFound(NotFound):
    """The `id` named in the request is not in FileShare, or not visible to the caller.

    Datafari answers 428; we answer 404, since the client named a resource that is not there.
    """

    kind = "FileNotFound"
    status = 404
    message = "Sorry, the requested file does not exist, or is not available."


class SummarySourceNotFound(NotFound):
    """The `id` to summarize is not in FileShare, or not visible (Datafari's label for
    summarization, with our 404)."""

    kind = "NoFileFound"
    status = 404
    message = "Sorry, the requested file does not exist, or is not available."


class EmptyDocument(ServiceError):
    """The document to summarize holds no text."""

    kind = "EmptyFile"
    status = 428
    message = "Sorry, the requested file is empty: there is nothing to summarize."


class NoFileContent(ServiceError):
    """None of the documents to synthesize could be read (gone, empty, or not the caller's)."""

    kind = "NoFileContent"
    status = 428
    message = (
        "Sorry, I am unable to generate a synthesis of those documents, since the files are "
        "missing or have no content."
    )


class NoValidAnswer(ServiceError):
    """The LLM answered nothing usable."""

    kind = "NoValidAnswer"
    status = 428
    message = "Sorry, I could not find an answer to your question."


class Overloaded(ServiceError):
    """Every connection to an upstream is in use by other requests: nothing failed, the
    service is busy (never counted against the upstream's circuit breaker)."""

    kind = "TechnicalError"
    status = 503
    message = "Sorry, too many questions are being answered right now. Please try again shortly."


class LlmBusy(Overloaded):
    """The LLM has more questions in progress than it can answer within request.timeout: a
    new one is refused at once (busy is not broken: never counted by the breaker)."""


class JobNotFound(NotFound):
    """No ingestion job has this id (GET /jobs lists them)."""

    kind = "JobNotFound"
    status = 404
    message = "Sorry, there is no ingestion job with this id."


class TooManyJobs(ServiceError):
    """The deployment's or this caller's ingestion jobs are as many as they may be
    (jobs.max.queued, jobs.max.per.caller)."""

    kind = "TooManyRequests"
    status = 429
    message = "Sorry, too many ingestion jobs are waiting. Please try again later."


class CallerOverLimit(ServiceError):
    """This caller already has as many questions in progress as it may
    (llm.max.concurrent.per.caller)."""

    kind = "TooManyRequests"
    status = 429
    message = "Sorry, you have too many questions in progress. Please try again shortly."


class TechnicalError(ServiceError):
    """Something outside the request failed: Solr, the LLM, or our own code."""

    metric = "internal"  # the `kind` label of solr_rag_upstream_errors


class UpstreamUnavailable(TechnicalError):
    """Solr or the LLM could not be reached (connection refused, DNS, reset)."""

    status = 503
    metric = "unavailable"


class UpstreamTimeout(TechnicalError):
    """Solr or the LLM did not answer in time, or the request's deadline passed."""

    status = 504
    metric = "timeout"


class UpstreamBadResponse(TechnicalError):
    """Solr or the LLM answered with an error or with something we cannot read;
    `upstream_status`: the HTTP status it answered, when it answered one."""

    status = 502
    metric = "bad_response"

    def __init__(
        self, reason: str, *, upstream_status: int | None = None, retry_after: int | None = None
    ) -> None:
        super().__init__(reason, retry_after=retry_after)
        self.upstream_status = upstream_status


class UpstreamRefused(UpstreamBadResponse):
    """Solr refused the service's credentials (401) or its role's permissions (403), or TLS
    failed (Solr's certificate not trusted here, or ours refused): the configuration's to
    mend, so it is never tried again on another node or later, and no node is marked down."""

    metric = "refused"
