"""What each rag.properties key is, for people: type, default, limits, help text, and how a
value typed in a form or sent as JSON becomes the text written in the file.

The admin API and page are built from this, so a key added to Settings appears there with its
validation, without a second list to keep in step.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Literal

import annotated_types
from pydantic import SecretStr

from service.config.settings import Settings, key_field, known_keys

Kind = Literal["boolean", "integer", "number", "string", "choice", "secret"]

# Not editable through the admin API: the vector field must match the collection's schema
# (Datafari shows it read-only), the admin token guards the API itself, the TLS files are
# paths on the server's disk (an admin session must not make the service read another file),
# and so are the folders a sync may index (jobs.sync.folders: any file under them would
# become a document): each set on the server, in rag.properties or the environment. The
# tracing keys are read at startup only (an edit would change nothing until a restart), and
# say where spans, with content capture the questions too, are sent.
READ_ONLY = frozenset(
    {
        "solr.vector.field",
        "admin.token",
        "solr.tls.ca",
        "solr.tls.cert",
        "solr.tls.key",
        "jobs.sync.folders",
        "observability.tracing.enabled",
        "observability.tracing.endpoint",
        "observability.tracing.protocol",
        "observability.tracing.sample.ratio",
        "observability.tracing.capture.content",
    }
)


@dataclass(frozen=True)
class KeyInfo:
    """What one rag.properties key is, for people: type, default, limits, help."""

    key: str
    kind: Kind
    default: Any
    description: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    read_only: bool = False
    optional: bool = False  # blank is a value (null: the key unset, its meaning "none")

    def shown(self, settings: Settings) -> Any:
        """The value in force, as JSON; a secret only says whether it is set."""
        value = settings.value(self.key)
        if isinstance(value, SecretStr):
            return "***" if value.get_secret_value() else ""
        return value

    def as_property(self, value: Any) -> str | None:
        """A JSON value as rag.properties text (None: remove the key, back to its default);
        raises ValueError when it is the wrong type (the typed validation of Settings then
        checks the text)."""
        if value is None:
            return None
        if self.kind == "boolean":
            if not isinstance(value, bool):
                raise ValueError("must be true or false")
            return "true" if value else "false"
        if self.kind in ("integer", "number"):
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise ValueError(f"must be a{'n integer' if self.kind == 'integer' else ' number'}")
            return str(value)
        if not isinstance(value, str):
            raise ValueError("must be a string")
        return value


def catalog() -> list[KeyInfo]:
    return [_info(key) for key in known_keys()]


def by_key() -> dict[str, KeyInfo]:
    return {info.key: info for info in catalog()}


def _info(key: str) -> KeyInfo:
    field = key_field(key)
    annotation = field.annotation
    arguments = typing.get_args(annotation)
    optional = type(None) in arguments and len(arguments) == 2
    if optional:  # `float | None`: a number that may be left blank
        annotation = next(argument for argument in arguments if argument is not type(None))
    choices: tuple[str, ...] = ()
    if typing.get_origin(annotation) is Literal:
        kind: Kind = "choice"
        choices = tuple(str(choice) for choice in typing.get_args(annotation))
    elif annotation is SecretStr:
        kind = "secret"
    elif annotation is bool:
        kind = "boolean"
    elif annotation is int:
        kind = "integer"
    elif annotation is float:
        kind = "number"
    else:
        kind = "string"
    default = field.default
    if isinstance(default, SecretStr):
        default = ""
    minimum = maximum = None
    exclusive = False
    for rule in field.metadata:
        if isinstance(rule, annotated_types.Ge):
            minimum = float(rule.ge)  # type: ignore[arg-type]
        elif isinstance(rule, annotated_types.Gt):
            minimum, exclusive = float(rule.gt), True  # type: ignore[arg-type]
        elif isinstance(rule, annotated_types.Le):
            maximum = float(rule.le)  # type: ignore[arg-type]
    return KeyInfo(
        key=key,
        kind=kind,
        default=default,
        description=field.description or "",
        choices=choices,
        minimum=minimum,
        maximum=maximum,
        exclusive_minimum=exclusive,
        read_only=key in READ_ONLY,
        optional=optional,
    )
