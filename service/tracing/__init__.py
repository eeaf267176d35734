"""OpenTelemetry traces: one trace per question, from the HTTP request through each stage to
Solr, the model server and the LLM (issue 85).

    >>> with tracing.installed(settings.observability):      # the service's life (or a command's)
    ...     with tracing.stage("retrieve"):                    # a span, the current one inside
    ...         headers = {}; tracing.inject(headers)          # its traceparent, sent upstream

Off by default; on with observability.tracing.enabled or the standard OTEL_* variables
(service.tracing._config). Off, no span object is ever made: each helper checks one module
global and hands back the same no-op context manager. Nothing a person wrote (a question, a
document, a prompt, an answer) goes in a span unless an operator turns content capture on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from service.tracing._config import TracingConfig, without_login
from service.tracing._genai import NO_CALL, LlmCall, llm_call
from service.tracing._solr import solr_call
from service.tracing._spans import (
    CLIENT,
    INTERNAL,
    NO_SPAN,
    NOTHING,
    SERVER,
    Span,
    current,
    inject,
    server,
    span,
    stage,
)
from service.tracing._state import capture_content, enabled, install, uninstall

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from service.config.settings import ObservabilitySettings


@contextmanager
def installed(
    keys: ObservabilitySettings,
    env: Mapping[str, str] | None = None,
    version: str = "",
    exporter: SpanExporter | None = None,
) -> Iterator[bool]:
    """Tracing as `keys` and the environment say, for the time of the `with` (the service's
    life, a command's run): the last spans sent on leaving. Yields whether it is on.
    `exporter`: where spans go instead of OTLP (a test's memory)."""
    config = TracingConfig.of(keys, os.environ if env is None else env)
    handle = install(config, version, exporter)
    try:
        yield handle is not None
    finally:
        uninstall(handle)


__all__ = [
    "CLIENT",
    "INTERNAL",
    "NOTHING",
    "NO_CALL",
    "NO_SPAN",
    "SERVER",
    "LlmCall",
    "Span",
    "TracingConfig",
    "capture_content",
    "current",
    "enabled",
    "inject",
    "installed",
    "llm_call",
    "server",
    "solr_call",
    "span",
    "stage",
    "without_login",
]
