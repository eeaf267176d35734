"""The process's tracer, when tracing is on: None otherwise, and then nothing else here runs.

The OpenTelemetry SDK and its exporters are imported only when tracing is turned on. Spans
leave in the background (a batch processor's thread); a collector that is down costs dropped
spans and one log line, never a request's failure or its time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from service.errors import ConfigError
from service.tracing._config import TracingConfig, without_login

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.trace import Tracer

log = logging.getLogger("service.tracing")

SERVICE_NAME = "solr-rag"
STOP_SECONDS = 3.0  # what the service's stop waits, at most, for the last spans to leave
FAILING_STOP_SECONDS = 0.5  # the same when the batch before failed
# the exporters' own lines: each failed batch, each retry (the QuietExporter says it once)
EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp",)


class Installed:
    """The tracer in force: its provider (what stops it) and the config it was made of."""

    def __init__(
        self, config: TracingConfig, provider: TracerProvider, exporter: QuietExporter
    ) -> None:
        self.config = config
        self.provider = provider
        self.exporter = exporter
        self.tracer: Tracer = provider.get_tracer("solr-rag")

    def stop(self) -> None:
        """The last spans sent, within STOP_SECONDS; within FAILING_STOP_SECONDS when the
        last batch already failed (a collector that is down holds no stop, one back up answers
        in milliseconds)."""
        stopping = threading.Thread(target=self.provider.shutdown, name="tracing stop", daemon=True)
        stopping.start()
        stopping.join(FAILING_STOP_SECONDS if self.exporter.failing else STOP_SECONDS)


_installed: Installed | None = None


def tracer() -> Tracer | None:
    """The tracer in force; None when tracing is off (the one check every span makes)."""
    return _installed.tracer if _installed is not None else None


def enabled() -> bool:
    return _installed is not None


def capture_content() -> bool:
    """Whether an operator asked for the LLM's messages in its spans (off by default)."""
    return _installed is not None and _installed.config.capture_content


def install(
    config: TracingConfig, version: str = "", exporter: SpanExporter | None = None
) -> Installed | None:
    """The tracer `config` asks for, now in force for this process; None when it is off.
    `exporter`: where spans go instead of OTLP (a test's memory)."""
    global _installed
    if not config.on:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    where = without_login(config.where)
    try:  # what the SDK reads of OTEL_* and still refuses: a setting's error, not a traceback
        resource = Resource.create({})  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
        if version:
            resource = resource.merge(Resource({"service.version": version}))
        sampler = None if config.ratio is None else ParentBased(TraceIdRatioBased(config.ratio))
        provider = TracerProvider(resource=resource, sampler=sampler)
        quiet = QuietExporter(exporter or _exporter(config), where)
        provider.add_span_processor(BatchSpanProcessor(quiet))  # type: ignore[arg-type]
    except (ValueError, TypeError, OSError) as error:
        raise ConfigError(
            f"tracing cannot start ({type(error).__name__}: {str(error)[:200]}): "
            "check the OTEL_* variables and observability.tracing.*"
        ) from None
    for name in EXPORTER_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    _installed = Installed(config, provider, quiet)
    log.info(
        "tracing on: OTLP %s to %s, %s sampled%s",
        config.protocol,
        where,
        "OTEL_TRACES_SAMPLER" if config.ratio is None else f"{config.ratio:.0%}",
        ", with the LLM's messages (content capture)" if config.capture_content else "",
    )
    return _installed


def uninstall(installed: Installed | None) -> None:
    """`installed` stopped, and tracing off unless another tracer was put in force since."""
    global _installed
    if installed is None:
        return
    if _installed is installed:
        _installed = None
    installed.stop()


def _exporter(config: TracingConfig) -> SpanExporter:
    if config.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        # an http:// endpoint is a plain-text one, as OTEL_EXPORTER_OTLP_INSECURE says
        insecure = config.endpoint.startswith("http://") if config.endpoint else None
        return OTLPSpanExporter(endpoint=config.endpoint, insecure=insecure)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter(endpoint=config.endpoint)


class QuietExporter:
    """An exporter that never raises and says once that spans cannot be sent (and once that
    they can again), where the SDK's would log every batch and every retry."""

    def __init__(self, exporter: SpanExporter, where: str) -> None:
        self._exporter = exporter
        self._where = where
        self._failing = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self._exporter.export(spans)
        except Exception as error:  # the exporter's bug: still no failure of ours
            result = SpanExportResult.FAILURE
            reason = f"{type(error).__name__}: {str(error)[:200]}"
        else:
            reason = "the collector refused them or did not answer"
        if result is SpanExportResult.FAILURE and not self._failing:
            self._failing = True
            log.warning(
                "traces cannot be sent to %s (%s): is the collector running there? Set "
                "OTEL_EXPORTER_OTLP_ENDPOINT (or observability.tracing.endpoint) to it; spans "
                "are dropped meanwhile, answers are not affected",
                self._where,
                reason,
            )
        elif result is SpanExportResult.SUCCESS and self._failing:
            self._failing = False
            log.info("traces reach %s again", self._where)
        return result

    @property
    def failing(self) -> bool:
        """Whether the last batch could not be sent."""
        return self._failing

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._exporter.force_flush(timeout_millis)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._exporter, name)
