"""Datafari 7's MCP server (francelabs/datafari, datafari-mcp-server) as our client, byte for
byte (../shared/datafari7-clients.md, issue 68): its three requests sent on a real socket as
its DatafariClient writes them (the path and query Spring's UriBuilder writes, the body
Jackson writes from its LinkedHashMap, the headers RestClient sets, the caller's
Authorization forwarded), and each answer read as its readers read it: any HTTP 4xx/5xx
throws (RestClient.retrieve()), a `status` other than OK throws "Datafari AI API error:
label - message - reason", summarize takes `content.sources.getFirst()`, the search tool
reads Solr's `response.docs[]` and says `null` on any exception. A change of shape that would
break the MCP server fails here."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from testing.llm_server import LLMScript, Step
from testing.service import ServiceFactory
from tests.service.test_datafari7 import NOT_THERE

KEY = "mcp-forwarded-key"
# DatafariClient.DEFAULT_FL (datafari-mcp-server @494ebd7e)
DEFAULT_FL = (
    "title,url,id,docId,extension,preview_content,last_modified,crawl_date,author,"
    "original_file_size,emptied,repo_source"
)
# RestClient's default transport, the JDK's HttpClient (its pom brings no Apache, Jetty or
# Reactor Netty client): on http:// it offers HTTP/2 as an upgrade, answered in HTTP/1.1
JDK = [
    ("Connection", "Upgrade, HTTP2-Settings"),
    ("HTTP2-Settings", "AAEAAEAAAAIAAAABAAMAAABkAAQBAAAAAAUAAEAA"),
    ("Upgrade", "h2c"),
    ("User-Agent", "Java-http-client/21.0.5"),
]
JSON_ACCEPTED = [("Accept", "application/json")]
AGENTIC_BODY = (
    b'{"query":"Who kept the lighthouse lamp lit?","action":"agentic","agent":"generic",'
    b'"filters":{},"history":[]}'
)
AGENTIC_BODY_LANG = (
    b'{"query":"Who kept the lighthouse lamp lit?","action":"agentic","agent":"generic",'
    b'"lang":"en","filters":{},"history":[]}'
)
SUMMARIZE_BODY = b'{"action":"summarize","id":"lighthouse","lang":"en","history":[],"filters":{}}'


class RestClientError(Exception):
    """What Spring's RestClient.retrieve() throws on an HTTP 4xx/5xx: the tool fails."""


class DatafariApiError(Exception):
    """What DatafariClient.callAiPoweredApi throws on a status other than OK."""


@dataclass(frozen=True)
class Source:
    """The MCP server's Source record, as its readers fill it."""

    id: str | None
    title: str | None
    content: str | None
    url: str | None
    repo_source: str | None = None


def send(base: str, method: str, target: str, headers: list[tuple[str, str]],
         body: bytes = b"") -> tuple[int, bytes]:  # fmt: skip
    """One request on a socket, exactly these headers in this order, this body."""
    where = urlsplit(base)
    connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=300)
    try:
        connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for name, value in [("Content-Length", str(len(body))), ("Host", where.netloc),
                            *headers]:  # fmt: skip
            connection.putheader(name, value)
        connection.endheaders(body or None)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def retrieved(status: int, body: bytes) -> dict:
    """RestClient.retrieve().body(JsonNode.class)."""
    if status >= 400:
        raise RestClientError(f"{status}: {body[:200]!r}")
    return json.loads(body)


def text(node: object) -> str | None:
    """JsonNode.asString(null): a missing or null node is null; a value must be a string
    (a number, a list or an object where the client reads text is a change of shape)."""
    assert node is None or isinstance(node, str), f"{node!r} where a string is read"
    return node


def first_text(node: object) -> str | None:
    """DatafariClient.firstText: an array's first element, or the value itself."""
    if isinstance(node, list):
        return text(node[0]) if node else None
    return text(node)


def read_ai(status: int, body: bytes) -> tuple[str | None, list[Source]]:
    """DatafariClient.callAiPoweredApi and mapAiResponse: content.message and
    content.sources[].{id, title, content, url}; any other status than OK throws."""
    root = retrieved(status, body)
    content = root.get("content") or {}
    if str(root.get("status", "")).upper() != "OK":
        error = content.get("error") or {}
        raise DatafariApiError(
            f"Datafari AI API error: {error.get('label', '')} - {error.get('message', '')} - "
            f"{error.get('reason', '')}"
        )
    nodes = content.get("sources")
    sources = [
        Source(text(n.get("id")), text(n.get("title")), text(n.get("content")),
               text(n.get("url")))
        for n in (nodes if isinstance(nodes, list) else [])
    ]  # fmt: skip
    return text(content.get("message")), sources


def read_search(status: int, body: bytes) -> list[Source] | None:
    """DatafariClient.search and mapSearchResponse; any exception: null (the tool's text)."""
    try:
        docs = retrieved(status, body).get("response", {}).get("docs")
        return [
            Source(text(d.get("docId")), first_text(d.get("title")),
                   first_text(d.get("preview_content")), text(d.get("url")),
                   text(d.get("repo_source")))
            for d in (docs if isinstance(docs, list) else [])
        ]  # fmt: skip
    except Exception:  # the client's own catch-all
        return None


def search_target(query: str, rows: int = 10) -> str:
    """The path and query Spring's UriBuilder writes (spaces as %20, the commas kept)."""
    return (
        f"/Datafari/rest/v2.0/search/select?q={query.replace(' ', '%20')}&fl={DEFAULT_FL}"
        f"&sort=score%20desc&q.op=AND&rows={rows}&start=0&aggregator=&wt=json"
    )


def post_ai(base: str, body: bytes, forwarded: list[tuple[str, str]] | None = None) -> tuple:
    headers = [*JDK, ("Content-Type", "application/json"), *JSON_ACCEPTED, *(forwarded or [])]
    return send(base, "POST", "/Datafari/rest/v2.0/ai", headers, body)


def test_its_search_tool_lists_the_documents(service: ServiceFactory) -> None:
    base = service()
    found = read_search(*send(base, "GET", search_target("lighthouse keeper"),
                              [*JDK, *JSON_ACCEPTED]))  # fmt: skip
    assert found, "the tool would have said null, or listed nothing"
    first = found[0]
    assert (first.id, first.title) == ("lighthouse", "The lighthouse keeper")
    assert first.content and first.content.startswith("The keeper of the Brannoch lighthouse")
    # its host may ask for at most 100 rows; 50 is what the search API serves in one page
    many = read_search(*send(base, "GET", search_target("lighthouse", rows=50), JSON_ACCEPTED))
    assert many and all(source.id for source in many)
    # words the documents do not hold: an empty list, not null
    assert read_search(*send(base, "GET", search_target("xylophone quasar"), JSON_ACCEPTED)) == []


def test_its_agentic_tool_gets_the_generic_agent_s_answer_with_a_citation(
    service: ServiceFactory, llm: LLMScript
) -> None:
    base = service({"agentic.enabled": True, "agentic.max.steps": 3})
    for body in (AGENTIC_BODY, AGENTIC_BODY_LANG):
        llm.reset()
        llm.answer = lambda request: "The keeper of the Brannoch lighthouse lit it [1]."
        message, sources = read_ai(*post_ai(base, body))
        assert message == "The keeper of the Brannoch lighthouse lit it [1]."
        assert sources and sources[0].id == "lighthouse"  # what [1] names
        assert sources[0].title == "The lighthouse keeper"
        assert all(s.content and len(s.content) <= 201 for s in sources)  # Datafari's 200 + …
        # issue 83: its first search (no LLM call) found the document: rag's answer from it,
        # in rag's one call here (no verification), no turn of the agent's loop
        (written,) = llm.requests
        assert "tools" not in written.body and "Brannoch" in written.prompt
        assert "Who kept the lighthouse lamp lit?" in written.prompt
        # an answer that abstains: generic's tools, its first search already called
        llm.reset()
        llm.then(NOT_THERE)
        read_ai(*post_ai(base, body))
        turn = llm.requests[1].body
        assert "bm25Search" in {t["function"]["name"] for t in turn["tools"]}  # generic's tools
        assert "Who kept the lighthouse lamp lit?" in llm.requests[1].prompt


def test_its_summarize_tool_reads_the_first_source(service: ServiceFactory, llm: LLMScript) -> None:
    base = service({"ai.enable.summarization": True})
    message, sources = read_ai(*post_ai(base, SUMMARIZE_BODY))
    assert message
    first = sources[0]  # getFirst(): an empty list would throw
    assert (first.id, first.title) == ("lighthouse", "The lighthouse keeper")
    assert "Brannoch" in llm.requests[-1].prompt  # the document itself was summarized
    # an id that is not there: the error the tool shows, in an HTTP 200 it can read
    missing = SUMMARIZE_BODY.replace(b'"lighthouse"', b'"no-such-document"')
    with pytest.raises(DatafariApiError, match=r"^Datafari AI API error: \w+ - .+ - "):
        read_ai(*post_ai(base, missing))


def test_the_caller_s_forwarded_authorization_is_honoured(
    service: ServiceFactory, llm: LLMScript
) -> None:
    """The MCP server forwards its caller's Authorization header; with api.keys set, a key
    sent as a bearer token is the caller's (and none is refused, as RestClient then throws)."""
    base = service({"api.keys": KEY, "ai.enable.summarization": True})
    forwarded = [("Authorization", f"Bearer {KEY}")]
    found = read_search(*send(base, "GET", search_target("lighthouse keeper"),
                              [*JDK, *JSON_ACCEPTED, *forwarded]))  # fmt: skip
    assert found and found[0].id == "lighthouse"
    assert (
        read_search(*send(base, "GET", search_target("lighthouse keeper"), JSON_ACCEPTED)) is None
    )
    llm.then(Step(content="The keeper lights the Brannoch lamp at dusk."))
    message, sources = read_ai(*post_ai(base, SUMMARIZE_BODY, forwarded))
    assert message and sources[0].id == "lighthouse"
    with pytest.raises(RestClientError, match=r"^401"):
        read_ai(*post_ai(base, SUMMARIZE_BODY))
