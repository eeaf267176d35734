"""Spans as the service writes them: started as the current span, ended on leaving, a failure
marked by its type (never its message: a reason may quote a question).

With tracing off every helper returns NOTHING, one shared context manager that makes no span
and whose `Span` (NO_SPAN) ignores what it is told: no object is made, no attribute built.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry import context, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from service.tracing import _state

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Tracer
    from opentelemetry.util.types import AttributeValue

SERVER, CLIENT, INTERNAL = SpanKind.SERVER, SpanKind.CLIENT, SpanKind.INTERNAL
# Phoenix (and other OpenInference readers) draw a span by this kind: LLM, EMBEDDING, CHAIN...
KIND = "openinference.span.kind"
_PROPAGATOR = TraceContextTextMapPropagator()
# what of a caller's headers is continued: its traceparent only, when no longer than the SDK
# reads one (a longer one is ignored without the SDK's warning). Its tracestate and baggage are
# neither kept nor sent on: a caller's words never reach Solr or a third party's LLM that way.
TRACEPARENT = "traceparent"
MAX_TRACEPARENT = 512


class Span:
    """A span being recorded, as a caller writes to it."""

    __slots__ = ("otel",)

    def __init__(self, otel: trace.Span) -> None:
        self.otel = otel

    @property
    def trace_id(self) -> str:
        """Its trace's id, 32 hex digits ("" for NO_SPAN)."""
        return format(self.otel.get_span_context().trace_id, "032x")

    def set(self, key: str, value: AttributeValue) -> None:
        self.otel.set_attribute(key, value)

    def rename(self, name: str) -> None:
        self.otel.update_name(name)

    def failed(self, error: BaseException | str) -> None:
        """Marked as failed, by the error's type (semconv's error.type), never its message;
        work cancelled (its client left) is marked `cancelled`, not failed."""
        if isinstance(error, GeneratorExit | asyncio.CancelledError):
            self.otel.set_attribute("error.type", "cancelled")
            return
        kind = error if isinstance(error, str) else type(error).__name__
        self.otel.set_attribute("error.type", kind)
        self.otel.set_status(Status(StatusCode.ERROR))


class _NoSpan(Span):
    """What a caller writes to when tracing is off: nothing is kept."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    @property
    def trace_id(self) -> str:
        return ""

    def set(self, key: str, value: AttributeValue) -> None:
        pass

    def rename(self, name: str) -> None:
        pass

    def failed(self, error: BaseException | str) -> None:
        pass


NO_SPAN = _NoSpan()


class Current:
    """`with Current(span) as written:` the span is the current one inside (what a child span,
    or a traceparent sent upstream, descends from), and ends on leaving."""

    __slots__ = ("_otel", "_token")

    def __init__(self, otel: trace.Span) -> None:
        self._otel = otel
        self._token: object = None

    def __enter__(self) -> Span:
        self._token = context.attach(trace.set_span_in_context(self._otel))
        return Span(self._otel)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None:
            Span(self._otel).failed(error)
        context.detach(self._token)  # type: ignore[arg-type]
        self._otel.end()


class _Nothing:
    """The context manager of every span helper when tracing is off."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return NO_SPAN

    def __exit__(self, *exception: object) -> None:
        return None


NOTHING = _Nothing()


def span(
    name: str,
    attributes: Mapping[str, AttributeValue] | None = None,
    *,
    kind: SpanKind = INTERNAL,
    root: bool = False,
) -> Current | _Nothing:
    """A span named `name`, the current span's child (`root`: a new trace's first, as an
    ingestion job's is)."""
    tracer = _state.tracer()
    if tracer is None:
        return NOTHING
    parent = context.Context() if root else None
    return Current(tracer.start_span(name, parent, kind, attributes))


def stage(name: str) -> Current | _Nothing:
    """The span of one stage of a question (rag/pipeline.py's loop, the answer's stages)."""
    tracer = child_tracer()
    if tracer is None:
        return NOTHING
    attributes = {"solr_rag.stage": name, KIND: "CHAIN"}
    return Current(tracer.start_span(f"stage {name}", attributes=attributes))


def server(
    name: str, headers: Mapping[str, str] | None, attributes: Mapping[str, AttributeValue]
) -> Current | _Nothing:
    """The span of a request the service serves: the `traceparent` of its `headers` continued
    (a gateway's, a widget's), else a new trace; None for headers: a new trace whatever the
    current span (a WebSocket's turn)."""
    tracer = _state.tracer()
    if tracer is None:
        return NOTHING
    incoming = (headers.get(TRACEPARENT) or "") if headers is not None else ""
    parent: Context = (
        _PROPAGATOR.extract({TRACEPARENT: incoming})
        if 0 < len(incoming) <= MAX_TRACEPARENT
        else context.Context()
    )
    return Current(tracer.start_span(name, parent, SERVER, attributes))


def child_tracer() -> Tracer | None:
    """The tracer, when tracing is on and a span is current: a call to Solr or an API made
    outside any traced work (a startup check, the jobs' poll every second) makes no trace of
    its own."""
    tracer = _state.tracer()
    if tracer is None or not trace.get_current_span().get_span_context().is_valid:
        return None
    return tracer


def inject(headers: dict[str, str]) -> None:
    """The current span's `traceparent` added to `headers` of a request to Solr, the model
    server or the LLM (no `tracestate`: a caller's is never kept); nothing when tracing is off
    or no span is current."""
    if _state.tracer() is not None:
        _PROPAGATOR.inject(headers)


def current() -> Span:
    """The current span, to add to (NO_SPAN when tracing is off or none is current)."""
    if _state.tracer() is None:
        return NO_SPAN
    otel = trace.get_current_span()
    return Span(otel) if otel.is_recording() else NO_SPAN


def attach(otel: trace.Span) -> Any:
    """Makes `otel` current until `detach(token)`: for a span that outlives one `with` (a
    streamed answer's, made current only while its request is sent)."""
    return context.attach(trace.set_span_in_context(otel))


def detach(token: Any) -> None:
    context.detach(token)
