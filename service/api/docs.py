"""/docs (Swagger UI) and /redoc, served offline: their scripts and styles come from the
`fastapi-offline` package, installed with the service, never from a CDN."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
ASSETS_PATH = "/docs/assets"

router = APIRouter(include_in_schema=False)


def install_docs(app: FastAPI) -> None:
    """The two documentation pages and their assets (the app is built with docs_url=None)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS), name="docs-assets")
    app.include_router(router)


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="solr-rag API",
        oauth2_redirect_url="/docs/oauth2-redirect",
        swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
    )


@router.get("/docs/oauth2-redirect")
async def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title="solr-rag API",
        redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
        with_google_fonts=False,
    )
