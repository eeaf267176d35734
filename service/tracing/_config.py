"""Whether and where spans go: rag.properties' observability.tracing.* keys, with the standard
OTEL_* environment variables over them (as the SOLR_RAG_* variables are over the file)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.errors import ConfigError

if TYPE_CHECKING:
    from service.config.settings import ObservabilitySettings

PROTOCOLS = ("http/protobuf", "grpc")
TRACES_PATH = "/v1/traces"  # what OTLP over HTTP adds to a base endpoint
_TRUE = ("true", "1", "yes", "on")
ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# the SDK's variables it reads as integers: a value it cannot take is refused here, by name,
# where the SDK would raise from the service's start (a traceback) or log one and go on
_POSITIVE = ("OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
_LIMITS = (  # 0 or more, or "unset"
    "OTEL_BSP_EXPORT_TIMEOUT",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_SPAN_EVENT_COUNT_LIMIT",
    "OTEL_SPAN_LINK_COUNT_LIMIT",
    "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT",
)
_QUEUE, _BATCH = 2048, 512  # the SDK's defaults of OTEL_BSP_MAX_QUEUE_SIZE / _EXPORT_BATCH_SIZE


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in _TRUE


def _first(env: Mapping[str, str], *names: str) -> str:
    """The value of the first of `names` that is set (a signal's own variable before the
    generic one, as OpenTelemetry reads them)."""
    return next((env[name].strip() for name in names if env.get(name, "").strip()), "")


def propagators_refused(env: Mapping[str, str]) -> str | None:
    """What is wrong with OTEL_PROPAGATORS, or None: OpenTelemetry loads the propagators it
    names when its API is first imported (FastAPI imports it), and a name no installed
    package answers to raises there, a traceback before any command runs. Read here as
    OpenTelemetry reads it (set when not empty, even blank; the names in order, an empty one
    included; `none` ends the reading where it stands) from the installed entry points,
    without importing OpenTelemetry."""
    configured = env.get("OTEL_PROPAGATORS", "")
    if not configured:
        return None
    from importlib.metadata import entry_points  # only when it is set

    installed = sorted({point.name for point in entry_points(group="opentelemetry_propagator")})
    for name in (item.strip() for item in configured.split(",")):
        if name.lower() == "none":
            return None
        if name not in installed:
            return (
                f"OTEL_PROPAGATORS names {name[:64]!r}, which no installed package provides "
                f"(installed: {', '.join(installed) or 'none'}): unset it, or name those "
                "(comma-separated, no empty item), or none"
            )
    return None


def without_login(url: str) -> str:
    """`url` as a log line or an error may show it: without its `user:password@` (up to the
    last @, a password may hold one), its query string or its fragment (a token may be there)."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        scheme, rest = "", url
    rest = re.split(r"[?#]", rest.rpartition("@")[2], maxsplit=1)[0]
    return f"{scheme}{separator}{rest}"


@dataclass(frozen=True)
class TracingConfig:
    """What the tracer is set up with; `on` False: no tracer at all (no span is made)."""

    on: bool
    protocol: str = "http/protobuf"
    # the traces endpoint to give the exporter; None: it reads OTEL_EXPORTER_OTLP_*ENDPOINT
    # itself, or takes its default (localhost:4318 / :4317)
    endpoint: str | None = None
    # share of new traces kept; None: OTEL_TRACES_SAMPLER (and its _ARG) decide
    ratio: float | None = 1.0
    capture_content: bool = False
    where: str = ""  # the collector, as the log names it

    @classmethod
    def of(cls, keys: ObservabilitySettings, env: Mapping[str, str]) -> TracingConfig:
        """The keys with the environment over them; ConfigError for what no exporter sends."""
        if _flag(env, "OTEL_SDK_DISABLED"):
            return cls(on=False)
        exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
        if exporter == "none":
            return cls(on=False)
        if exporter not in ("", "otlp"):
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER={exporter[:64]}: this service sends traces over OTLP only; "
                "unset it (or set otlp), and point OTEL_EXPORTER_OTLP_ENDPOINT at a collector "
                "(an OpenTelemetry Collector forwards to Zipkin or others)"
            )
        from_env = _first(env, *ENDPOINTS)
        if not (keys.tracing_enabled or from_env):
            return cls(on=False)
        protocol = _first(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
        protocol = protocol or keys.tracing_protocol
        if protocol not in PROTOCOLS:
            raise ConfigError(
                f"OTLP protocol {protocol[:64]!r} (OTEL_EXPORTER_OTLP_PROTOCOL): use "
                "http/protobuf (port 4318) or grpc (4317); the Python exporters send no http/json"
            )
        if from_env:
            _check_endpoint(env, protocol)
        _check_numbers(env)
        endpoint = None if from_env else _traces_endpoint(keys.tracing_endpoint, protocol)
        sampler = env.get("OTEL_TRACES_SAMPLER", "").strip()
        default = (
            "http://localhost:4318" if protocol == "http/protobuf" else "http://localhost:4317"
        )
        return cls(
            on=True,
            protocol=protocol,
            endpoint=endpoint,
            ratio=None if sampler else keys.tracing_sample_ratio,
            capture_content=keys.tracing_capture_content
            or _flag(env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
            where=from_env or keys.tracing_endpoint or default,
        )


def _traces_endpoint(base: str, protocol: str) -> str | None:
    """The key's base URL as the exporter takes it: OTLP/HTTP's with /v1/traces, gRPC's as
    it is; None (the exporter's default) when the key is empty."""
    if not base:
        return None
    if protocol == "grpc" or base.rstrip("/").endswith(TRACES_PATH):
        return base
    return base.rstrip("/") + TRACES_PATH


def _check_endpoint(env: Mapping[str, str], protocol: str) -> None:
    """The OTLP endpoint the exporter will read, as the observability.tracing.endpoint key is
    checked (gRPC's may also be a bare host:port); ConfigError naming the variable, never
    its login or query."""
    from service.config.settings import collector_url_problem

    name = next(name for name in ENDPOINTS if env.get(name, "").strip())
    value = env[name].strip()
    bare = protocol == "grpc" and "://" not in value
    problem = collector_url_problem(f"http://{value}" if bare else value)
    if problem is not None:
        shown = without_login(value)[:200]
        hidden = " (shown without its login and query)" if shown != value else ""
        raise ConfigError(f"{name}={shown!r}{hidden}: {problem}")


def _check_numbers(env: Mapping[str, str]) -> None:
    """The SDK's integer variables (OTEL_BSP_*, the span limits) as it can take them."""
    numbers: dict[str, int] = {}
    for name in (*_POSITIVE, *_LIMITS):
        if name not in env or (name in _LIMITS and env[name].strip().lower() == "unset"):
            continue
        try:
            numbers[name] = int(env[name].strip())
        except ValueError:
            numbers[name] = -1
        if numbers[name] < (1 if name in _POSITIVE else 0):
            least = "a whole number above 0" if name in _POSITIVE else "0 or more, or unset"
            raise ConfigError(f"{name}={env[name][:64]!r}: must be {least}, or left unset")
    queue = numbers.get("OTEL_BSP_MAX_QUEUE_SIZE", _QUEUE)
    if numbers.get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", _BATCH) > queue:
        raise ConfigError(
            f"OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be at most OTEL_BSP_MAX_QUEUE_SIZE ({queue})"
        )
