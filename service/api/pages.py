"""The admin page (`/admin`), the chat page (`/ui`) and the embeddable widget script.

The pages hold no data: the admin page reads and saves through /admin/config with the token
the admin types in; the widget calls /ai/rag. So the pages themselves need no auth.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from service import __version__
from service.runtime import Runtime

WEB = Path(__file__).resolve().parent.parent / "web"

router = APIRouter(tags=["pages"], include_in_schema=False)

_templates = Environment(
    loader=FileSystemLoader(WEB / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)

# Datafari's "RAG & AI configuration" table, in its order: (key, label)
MAIN_FIELDS = (
    ("ai.enable.rag", "Enable RAG"),
    ("ai.enable.summarization", "Enable summarization"),
    ("ai.api.endpoint", "LLM API endpoint"),
    ("ai.api.token", "API token"),
    ("ai.llm.service", "LLM service type"),
    ("llm.model", "Model"),
    ("llm.temperature", "Temperature"),
    ("llm.maxTokens", "Max tokens"),
    ("prompt.chunking.strategy", "Chunk strategy"),
    ("prompt.max.request.size", "Max request size (characters)"),
    ("chunking.chunk.size", "Chunk size (characters)"),
    ("chat.query.rewriting.enabled", "Query rewriting"),
    ("chat.memory.enabled", "Chat memory"),
    ("chat.memory.history.size", "History size (messages)"),
    ("retrieval.method", "Retrieval method"),
    ("solr.embeddings.model", "Embeddings model"),
    ("solr.vector.field", "Vector field"),
    ("solr.topK", "Top K (vector search)"),
    ("chunking.maxFiles", "Max files (BM25 search)"),
    ("rag.operator", "Operator"),
)


def _page(name: str, **context: object) -> HTMLResponse:
    html = _templates.get_template(name).render(version=__version__, **context)
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
            "style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff",
        },
    )


@router.get("/admin")
async def admin_page() -> HTMLResponse:
    return _page("admin.html", main_fields=MAIN_FIELDS)


@router.get("/")
@router.get("/ui")
async def chat_page(request: Request) -> HTMLResponse:
    runtime: Runtime = request.app.state.runtime
    settings = runtime.settings()
    return _page("chat.html", chat_memory=settings.chat.memory_enabled)


@router.get("/ui/widget.js")
async def widget_script() -> FileResponse:
    return _static("widget.js")


@router.get("/favicon.ico")
async def favicon() -> Response:
    """No icon: 204, so browsers stop asking and the log shows no 404 for every page view."""
    return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})


@router.get("/static/{name}")
async def static_file(name: str) -> FileResponse:
    return _static(name)


def _static(name: str) -> FileResponse:
    try:
        path = (WEB / "static" / name).resolve()
        found = path.parent == (WEB / "static").resolve() and path.is_file()
    except (ValueError, OSError):  # a NUL byte, a name too long for the file system
        found = False
    if not found:
        raise HTTPException(404, "no such file")
    media = {".js": "text/javascript", ".css": "text/css"}.get(path.suffix, "text/plain")
    return FileResponse(path, media_type=f"{media}; charset=utf-8")
