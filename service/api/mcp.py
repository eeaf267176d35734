"""/mcp: the Model Context Protocol, for agents (Claude Desktop, Cursor, Open WebUI, VS Code,
LangChain and LlamaIndex agents), over streamable HTTP; `solr-rag mcp` serves the same tools
over stdio for desktop clients.

Tools: `search` (the configured retrieval: sources with ids, titles, URLs, excerpts), `ask`
(the RAG answer: text, cited sources, grounding report), `summarize`, `get_document`,
`list_indexes` (KAITO's indexes); resources: `solr-rag://doc/{id}`.

The REST API's security holds: over HTTP the request goes through the same middlewares (body
limit, per-caller cap, request id, metrics), needs one of `api.keys` when any is set, and each
tool sees only what the caller's groups (header or JWT) may see; the LLM call budget and the
deadline are the pipeline's. Over stdio the caller is the local user who started it, with the
groups given on its command line.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, TypeVar, get_args
from urllib.parse import unquote

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.fastmcp.resources import ResourceTemplate
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ClientNotification,
    ClientRequest,
    JSONRPCMessage,
)
from pydantic import BaseModel, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Send
from starlette.types import Scope as AsgiScope

from service.actions.search import shown_score
from service.api.door import caller_of
from service.api.errors import describe_validation_errors, error_response
from service.api.fields import MAX_QUERY_PARAM
from service.api.identity import groups_scope
from service.api.mcp_progress import reporting, wants_stream
from service.api.payload import NOT_JSON, QUESTION_BYTES, checked_body
from service.api.protocols.mcp import AskResult, SummaryResult
from service.api.rag import RagRequest
from service.api.summarize import SummarizeRequest
from service.config import Settings
from service.errors import (
    BadRequest,
    DocumentNotFound,
    MethodNotAllowed,
    ServiceError,
    Unauthorized,
)
from service.ingest.partitions import metadata_filters
from service.rag import assemble
from service.rag.stages import fetch
from service.retrieval import Scope
from service.runtime import Runtime
from service.snapshot import Snapshot
from service.text.sanitize import sanitize_query

log = logging.getLogger(__name__)
DOCUMENT_URI = "solr-rag://doc/"  # + a document's id: its text (a resource template)

PATH = "/mcp"
MAX_RESULTS = 50
EXCERPT_CHARS = 600
MAX_DOCUMENT_CHARS = 200_000

INSTRUCTIONS = (
    "Search and answer questions from this organisation's documents (an Apache Solr index). "
    "Use `ask` for a question: it answers from the documents the caller may see and cites "
    "them as [n]. Use `search` to find documents, `get_document` to read one, `summarize` "
    "for a summary, `list_indexes` for the named indexes."
)

T = TypeVar("T")
# who the caller is: what it may see, from the request (HTTP) or the command line (stdio)
ScopeOf = Callable[[Context, Snapshot], Scope]  # type: ignore[type-arg]


class Source(BaseModel):
    """A document (or passage) found, with where to read it."""

    id: str
    title: str
    url: str
    excerpt: str = Field(description=f"The start of its text (at most {EXCERPT_CHARS} chars).")
    score: float | None = None


class SearchResult(BaseModel):
    sources: list[Source]


class Document(BaseModel):
    id: str
    title: str
    url: str
    content: str
    truncated: bool = Field(description=f"Whether content was cut at {MAX_DOCUMENT_CHARS} chars.")


class Indexes(BaseModel):
    indexes: list[str]


class _Server(FastMCP):  # type: ignore[type-arg]
    """FastMCP, a tool's arguments refused in words that say the fix: which argument, and
    what it must be (the SDK's text is pydantic's report, the input repeated, a link)."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                problems = describe_validation_errors(error.__cause__)[:1000]
                raise ToolError(f"{name}: invalid arguments: {problems}") from None
            raise


def create_mcp(runtime: Runtime, scope_of: ScopeOf) -> FastMCP:  # type: ignore[type-arg]
    """The MCP server: its tools answer from `runtime`'s settings in force, within what
    `scope_of` says the caller may see."""
    server = _Server(
        "solr-rag",
        instructions=INSTRUCTIONS,
        streamable_http_path=PATH,
        # stateless: any worker answers any request; JSON: one response per request
        stateless_http=True,
        json_response=True,
        # the REST API's rules apply (API keys, CORS); a Host check would refuse every
        # deployment not reached as localhost
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    async def guarded(ctx: Context, work: Callable[[Snapshot, Scope], Awaitable[T]]) -> T:  # type: ignore[type-arg]
        """`work` on this request's snapshot and the caller's scope; our errors as the
        tool's error (their message and reason: no secrets, no addresses), others logged."""
        try:
            snapshot = Snapshot(runtime)
            return await work(snapshot, scope_of(ctx, snapshot))
        except ServiceError as error:
            raise ToolError(f"{error.message} ({error.reason})") from None
        except ValidationError as error:
            raise ToolError(f"invalid arguments: {_problems(error)}") from None
        except Exception:
            log.exception("MCP tool failed")
            raise ToolError("unexpected error; see the service log") from None

    @server.tool(structured_output=True)
    async def search(
        ctx: Context,  # type: ignore[type-arg]
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_PARAM)],
        top_k: Annotated[int, Field(ge=1, le=MAX_RESULTS)] = 5,
        index: Annotated[str | None, Field(max_length=64)] = None,
        metadata_filter: dict[str, str | int | float | bool] | None = None,
    ) -> SearchResult:
        """Find the documents (or passages) that best match `query`, with the service's
        configured retrieval (BM25, vector or hybrid). `index`: a named index (list_indexes)
        only; `metadata_filter`: its documents whose metadata has these values."""

        async def found(snapshot: Snapshot, scope: Scope) -> SearchResult:
            if index is not None:
                await snapshot.partitions.require(index)
                scope = scope.in_partition(index, metadata_filters(metadata_filter))
            elif metadata_filter:
                raise BadRequest("metadata_filter needs an index")
            words = sanitize_query(query)  # Solr's, as every route's (no syntax, 500 chars)
            if not words:
                raise BadRequest("query: no words to search for once Solr's syntax is left out")
            documents = await snapshot.index_retriever(scope, top_k).run(words)
            security = snapshot.settings.security
            return SearchResult(
                sources=[
                    Source(
                        id=d.source_id,
                        title=d.title,
                        url=d.url,
                        excerpt=d.content[:EXCERPT_CHARS],
                        score=shown_score(d.score, rank, security) or None,
                    )
                    for rank, d in enumerate(documents[:top_k], start=1)
                ]
            )

        return await guarded(ctx, found)

    @server.tool(structured_output=True)
    async def ask(
        ctx: Context,  # type: ignore[type-arg]
        question: Annotated[str, Field(min_length=1, max_length=20_000)],
        id: Annotated[str | None, Field(max_length=512)] = None,
        lang: Annotated[str | None, Field(max_length=16)] = None,
        format: Literal["default", "text", "bulletpoint", "stepbystep"] = "default",
        history: Annotated[list[dict[str, str]] | None, Field(max_length=100)] = None,
    ) -> AskResult:
        """Answer `question` from the documents the caller may see, citing them as [n]
        (`id`: from that document only; `lang`: ISO code of the answer's language; `history`:
        earlier messages, {role: user|assistant, content}). Says so when the documents do
        not hold the answer."""

        async def answered(snapshot: Snapshot, scope: Scope) -> AskResult:
            body = RagRequest.model_validate(
                {"query": question, "id": id, "lang": lang, "format": format, "history": history}
            )
            async with reporting(ctx) as progress:  # a host that asked for progress
                reply = await assemble.ask(snapshot, body.to_query(scope), progress)
                return AskResult.of(await reply.complete())

        return await guarded(ctx, answered)

    @server.tool(structured_output=True)
    async def summarize(
        ctx: Context,  # type: ignore[type-arg]
        id: Annotated[str | None, Field(max_length=512)] = None,
        text: Annotated[str | None, Field(max_length=2_000_000)] = None,
        lang: Annotated[str | None, Field(max_length=16)] = None,
    ) -> SummaryResult:
        """Summarize one document (`id`) or a text (`text`): give exactly one."""

        async def summarized(snapshot: Snapshot, scope: Scope) -> SummaryResult:
            body = SummarizeRequest.model_validate({"id": id, "text": text, "lang": lang})
            query = body.to_query(scope)
            async with reporting(ctx) as progress:
                reply = await assemble.summarize(snapshot, query, progress)
                return SummaryResult(summary=(await reply.complete()).message)

        return await guarded(ctx, summarized)

    @server.tool(structured_output=True)
    async def get_document(
        ctx: Context,  # type: ignore[type-arg]
        id: Annotated[str, Field(min_length=1, max_length=512)],
    ) -> Document:
        """The whole text of one document (an id from search or ask's sources)."""
        return await guarded(ctx, lambda snapshot, scope: _document(snapshot, scope, id))

    @server.tool(structured_output=True)
    async def list_indexes(ctx: Context) -> Indexes:  # type: ignore[type-arg]
        """The named indexes (KAITO's API) that search can be limited to."""

        async def listed(snapshot: Snapshot, scope: Scope) -> Indexes:
            return Indexes(indexes=await snapshot.partitions.names())

        return await guarded(ctx, listed)

    @server.resource(DOCUMENT_URI + "{id}", mime_type="text/plain")
    async def document_text(id: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """A document's text, as get_document gives it (`id` as it is, slashes included, or
        percent-encoded)."""
        found = await guarded(ctx, lambda snapshot, scope: _document(snapshot, scope, id))
        return found.content

    _any_id(server, DOCUMENT_URI + "{id}")
    return server


class _AnyIdTemplate(ResourceTemplate):
    """A template whose one parameter takes the rest of the URI, slashes included: the SDK's
    own matching stops at the first `/`, and most ids hold one (a folder's, an upload's)."""

    def matches(self, uri: str) -> dict[str, Any] | None:
        prefix = self.uri_template.split("{", 1)[0]
        if not uri.startswith(prefix) or len(uri) == len(prefix):
            return None
        return {"id": unquote(uri[len(prefix) :])}


def _any_id(server: FastMCP, uri_template: str) -> None:  # type: ignore[type-arg]
    """The registered template replaced by one that matches ids holding `/` (the SDK has no
    public way to give a template its matching)."""
    templates = server._resource_manager._templates
    plain = templates[uri_template]
    templates[uri_template] = _AnyIdTemplate.model_construct(**dict(plain))


async def _document(snapshot: Snapshot, scope: Scope, document_id: str) -> Document:
    found = await fetch(snapshot.solr, snapshot.settings.solr, document_id, scope)
    if found is None:
        raise DocumentNotFound(f"no document with id {document_id!r}, or not visible")
    return Document(
        id=found.id,
        title=found.title,
        url=found.url,
        content=found.content[:MAX_DOCUMENT_CHARS],
        truncated=len(found.content) > MAX_DOCUMENT_CHARS,
    )


def _problems(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or 'arguments'}: {item['msg']}"
        for item in error.errors()
    )


def fixed_scope(groups: list[str], settings: Settings) -> Scope:
    """Over stdio: what the groups given on the command line may see (security on)."""
    return groups_scope(groups, settings.security, "--groups")


def http_scope(ctx: Context, snapshot: Snapshot) -> Scope:  # type: ignore[type-arg]
    """Over HTTP: the caller's groups from its request, as the REST API reads them."""
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise Unauthorized("no HTTP request to identify the caller by")
    return caller_of(request).scope


def _malformed(value: object) -> JSONResponse | None:
    """JSON-RPC's own error (HTTP 400, id null) for a body that is no JSON-RPC message, in
    words that say the fix; the SDK would answer with pydantic's report, every union member's
    errors and the input repeated."""
    if value is NOT_JSON:
        code, message = PARSE_ERROR, "Parse error: the body is not JSON"
    elif not isinstance(value, dict):
        code, message = (
            INVALID_REQUEST,
            ("Invalid Request: send one JSON-RPC message, an object (MCP sends no batches)"),
        )
    elif "method" in value and "id" in value and type(value["id"]) not in (str, int):
        code, message = (
            INVALID_REQUEST,
            (
                'Invalid Request: a request\'s "id" is a string or an integer (or leave it out: '
                "a notification, which gets no answer)"
            ),
        )
    else:
        try:
            JSONRPCMessage.model_validate(value)
            return None
        except ValidationError:
            code, message = (
                INVALID_REQUEST,
                (
                    'Invalid Request: a JSON-RPC 2.0 message has "jsonrpc": "2.0" and a "method" '
                    '(a request or notification: with an "id" of a string or number, an object '
                    'of "params") or an "id" with a "result" or an "error"'
                ),
            )
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=400)


def _by_method(union: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The messages the SDK's server reads (a union's members: ClientRequest's,
    ClientNotification's), by method."""
    members = get_args(union.model_fields["root"].annotation)
    return {get_args(m.model_fields["method"].annotation)[0]: m for m in members}


REQUESTS = _by_method(ClientRequest)
NOTIFICATIONS = _by_method(ClientNotification)


def _valid(message: type[BaseModel], value: dict[str, Any]) -> ValidationError | None:
    fields = {"method": value["method"]}
    if value.get("params") is not None:
        fields["params"] = value["params"]
    try:
        message.model_validate(fields)
        return None
    except ValidationError as error:
        return error


def _unanswerable(value: object) -> Response | None:
    """JSON-RPC's error, answered with the request's id, for a request (an id, a method) the
    SDK's server cannot read: -32601 for a method no MCP server has, -32602 naming what is
    wrong with its params. The SDK answers both -32602 "Invalid request parameters", and logs
    a warning of every ClientRequest member's errors (about 5 KB a message). A notification it
    cannot read (a warning quoting it whole, up to the body's 512 KiB) gets its 202 here."""
    if not isinstance(value, dict) or "method" not in value:
        return None  # a response
    if "id" not in value:  # a notification: never answered, and one the SDK cannot read is
        notification = NOTIFICATIONS.get(value["method"])  # logged whole: taken here, unread
        if notification is None or _valid(notification, value) is not None:
            return Response(status_code=202)
        return None
    request = REQUESTS.get(value["method"])
    if request is None:
        method = str(value["method"])[:100]
        code = METHOD_NOT_FOUND
        message = f"Method not found: {method!r}; an MCP server answers {', '.join(REQUESTS)}"
    else:
        error = _valid(request, value)
        if error is None:
            return None
        code = INVALID_PARAMS
        message = f"Invalid params of {value['method']}: {_problems(error)}"[:1000]
    body = {"jsonrpc": "2.0", "id": value["id"], "error": {"code": code, "message": message}}
    return JSONResponse(body)


class McpEndpoint:
    """The ASGI endpoint of /mcp: the API key check of the public endpoints, then the SDK's
    streamable HTTP transport: JSON responses, or an SSE stream for a tool call that asks for
    progress (service.api.mcp_progress). `running()` runs both while the service serves."""

    def __init__(self, runtime: Runtime, server: FastMCP) -> None:  # type: ignore[type-arg]
        self._runtime = runtime
        self._server = server
        server.streamable_http_app()  # makes its session manager (JSON responses)
        self._streaming = StreamableHTTPSessionManager(
            app=server._mcp_server,
            json_response=False,
            stateless=True,
            security_settings=server.settings.transport_security,
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self._server.session_manager.run(), self._streaming.run():
            yield

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)  # its caller identified at the door
        if request.method != "POST":  # stateless: no stream to open, no session to delete
            refused = error_response(
                request, MethodNotAllowed("/mcp answers POST (stateless streamable HTTP)")
            )
            refused.headers["Allow"] = "POST"
            await refused(scope, receive, send)
            return
        try:  # nested past 64 levels, the SDK's parser would recurse until it fails: a 400
            body, value = await checked_body(request, QUESTION_BYTES)
        except ServiceError as error:
            await error_response(request, error)(scope, receive, send)
            return
        if (refused := _malformed(value) or _unanswerable(value)) is not None:
            await refused(scope, receive, send)
            return
        sent = False

        async def replayed() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # then only the disconnect

        accept = request.headers.get("accept", "")
        manager = self._streaming if wants_stream(value, accept) else self._server.session_manager
        await manager.handle_request(scope, replayed, send)
