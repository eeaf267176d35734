"""What the caller asks of the answer's form: stop sequences and a JSON response format.

Only the final LLM request of a chain carries them (a map or refine step cut short by a stop
sequence, or forced into JSON, would break the chain). Neither is taken on trust: the text is
cut at the first stop sequence here too (a server may ignore `stop`), and a JSON answer is
parsed and, for `json_schema`, validated before it is returned.

A caller's schema costs bounded work: it is refused (400) when it refers to anything outside
itself (a `$ref` to a URL: nothing is ever fetched), refers to itself (a cycle of `$ref`s, or
`$dynamicRef`/`$recursiveRef`), uses `patternProperties` (a regular expression run against the
answer's keys, which a caller could make backtrack for ever), or would expand, its `$ref`s
followed, past MAX_SCHEMA_NODES subschemas (nested `anyOf`s over shared definitions grow
exponentially). `pattern` is accepted and not checked. Validation runs off the event loop.

    >>> form = AnswerFormat.of(stop=["\\n\\n"], response_format={"type": "json_object"})
    >>> form.payload()
    {'stop': ['\\n\\n'], 'response_format': {'type': 'json_object'}}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.validators import Draft202012Validator, extend

from service.errors import InvalidChatRequest, UnsupportedParameter

MAX_STOP_SEQUENCES = 4  # OpenAI's limit
MAX_STOP_CHARS = 256
MAX_SCHEMA_CHARS = 65_536
# subschemas a caller's schema may expand to, its $refs followed (a real one has dozens)
MAX_SCHEMA_NODES = 2_000
_REFUSED_KEYWORDS = {
    "$dynamicRef": "refers to itself ($dynamicRef)",
    "$recursiveRef": "refers to itself ($recursiveRef)",
    "patternProperties": "uses patternProperties (its regular expressions are not run)",
}


def _unchecked(*_: object) -> None:
    """A schema keyword not checked: regular expressions from a caller could run for ever."""


# the caller's schema is checked without its regular expressions (pattern, patternProperties)
_Validator = extend(
    Draft202012Validator, validators={"pattern": _unchecked, "patternProperties": _unchecked}
)


@dataclass(frozen=True)
class Sampling:
    """OpenAI's sampling options a caller set (each None: the LLM's default), checked at the
    edge (service.api.openai_schema): sent with the final request, never dropped."""

    top_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    seed: int | None = None
    logit_bias: tuple[tuple[str, float], ...] | None = None  # token id -> bias, sorted
    user: str | None = None

    def payload(self) -> dict[str, Any]:
        """The options set, as the LLM's payload names them."""
        fields = {name: getattr(self, name) for name in SAMPLING_OPTIONS}
        if self.logit_bias is not None:
            fields["logit_bias"] = dict(self.logit_bias)
        return {name: value for name, value in fields.items() if value is not None}


SAMPLING_OPTIONS = ("top_p", "frequency_penalty", "presence_penalty", "seed", "logit_bias", "user")
NO_SAMPLING = Sampling()


@dataclass(frozen=True)
class AnswerFormat:
    """Stop sequences, a response format and sampling options for the answer (all optional)."""

    stop: tuple[str, ...] = ()
    response_format: dict[str, Any] | None = None
    # OpenAI's sampling options the caller set (top_p, penalties, seed, logit_bias, user)
    sampling: Sampling = NO_SAMPLING
    # a GBNF grammar the answer must follow (llama.cpp's `grammar`): the short answer's
    # (service.chains.short_answer), set by the chain, never by a caller
    grammar: str | None = None

    @classmethod
    def of(
        cls,
        *,
        stop: object = None,
        response_format: object = None,
        sampling: Sampling = NO_SAMPLING,
    ) -> AnswerFormat:
        """Validated from an OpenAI request's `stop` and `response_format`; raises
        InvalidChatRequest (a 400) naming what is wrong."""
        return cls(stop_sequences(stop), checked_response_format(response_format), sampling)

    @property
    def json(self) -> bool:
        """Whether the answer must be JSON (then it is checked whole before it is sent)."""
        return self.response_format is not None

    def payload(self) -> dict[str, Any]:
        """The fields the final request adds to the LLM's payload."""
        fields = self.sampling.payload()
        if self.stop:
            fields["stop"] = list(self.stop)
        if self.response_format is not None:
            fields["response_format"] = self.response_format
        if self.grammar is not None:
            fields["grammar"] = self.grammar
        return fields

    def check(self, text: str) -> None:
        """Raises UnsupportedParameter (a 400) when a JSON answer was asked for and the LLM
        wrote something else: the configured model cannot honour response_format."""
        if self.response_format is None:
            return
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise UnsupportedParameter(
                "response_format: the LLM did not answer in JSON (the configured model may not "
                "support JSON output; ask without response_format, or use a model that does)"
            ) from None
        if self.response_format["type"] == "json_object" and not isinstance(value, dict):
            raise UnsupportedParameter("response_format: the LLM's JSON answer is not an object")
        schema = self.response_format.get("json_schema", {}).get("schema")
        if schema is not None:
            error = jsonschema.exceptions.best_match(_Validator(schema).iter_errors(value))
            if error is not None:
                raise UnsupportedParameter(
                    f"response_format: the LLM's JSON answer does not match the schema "
                    f"({error.message[:200]})"
                )


PLAIN = AnswerFormat()


def stop_sequences(stop: object) -> tuple[str, ...]:
    if stop is None:
        return ()
    sequences = [stop] if isinstance(stop, str) else stop
    if (
        not isinstance(sequences, list)
        or len(sequences) > MAX_STOP_SEQUENCES
        or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in sequences)
    ):
        raise InvalidChatRequest(
            f"stop must be a string or a list of at most {MAX_STOP_SEQUENCES} non-empty "
            f"strings of at most {MAX_STOP_CHARS} characters"
        )
    return tuple(sequences)


def checked_response_format(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise InvalidChatRequest("response_format.type must be text, json_object or json_schema")
    spec = value.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise InvalidChatRequest("response_format.json_schema needs a name and a schema")
    if schema is not None:
        if not isinstance(schema, dict) or len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
            raise InvalidChatRequest(
                f"response_format.json_schema.schema must be a JSON Schema object of at most "
                f"{MAX_SCHEMA_CHARS} characters"
            )
        try:
            _Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as error:
            raise InvalidChatRequest(
                f"response_format.json_schema.schema is not a valid JSON Schema: "
                f"{error.message[:200]}"
            ) from None
        problem = schema_problem(schema)
        if problem:
            raise InvalidChatRequest(f"response_format.json_schema.schema {problem}")
    return {"type": "json_schema", "json_schema": spec}


# the most items, characters or properties a schema may require: the LLM's grammar spells
# out each one it requires, and must write them (llama.cpp refuses minItems 3000 with a 400,
# which was a 502); an upper bound (maxItems) requires nothing
MAX_SCHEMA_COUNT = 500
_COUNTS = ("minItems", "minLength", "minProperties")


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why validating against `schema` could cost unbounded work, or None (module docstring)."""
    sizes: dict[int, int] = {}

    def expanded(node: object, path: tuple[int, ...]) -> int:
        if id(node) in path:
            raise _Refused("refers to itself (a cycle of $ref)")
        if id(node) in sizes:
            return sizes[id(node)]
        total = 1
        children: list[object] = []
        if isinstance(node, dict):
            for keyword, reason in _REFUSED_KEYWORDS.items():
                if keyword in node:
                    raise _Refused(reason)
            for keyword in _COUNTS:
                count = node.get(keyword)
                if isinstance(count, int | float) and count > MAX_SCHEMA_COUNT:
                    raise _Refused(
                        f"requires {keyword} {str(count)[:20]}, more than {MAX_SCHEMA_COUNT}: the "
                        "LLM would have to write each one"
                    )
            ref = node.get("$ref")
            if ref is not None:
                children.append(_local_target(schema, ref))
            children.extend(v for k, v in node.items() if k != "$ref")
        elif isinstance(node, list):
            children.extend(node)
        for child in children:
            if isinstance(child, dict | list):
                total += expanded(child, (*path, id(node)))
                if total > MAX_SCHEMA_NODES:
                    raise _Refused(
                        f"expands, its $refs followed, past {MAX_SCHEMA_NODES} subschemas"
                    )
        sizes[id(node)] = total
        return total

    try:
        expanded(schema, ())
    except _Refused as refused:
        return str(refused)
    except RecursionError:
        return "nests its $refs too deep"
    return None


class _Refused(Exception):
    """A schema that cannot be validated within bounds; the message says why."""


def _local_target(schema: dict[str, Any], ref: object) -> object:
    """What a `$ref` within the schema points at (`#`, `#/$defs/name`, ...)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise _Refused(f"has a $ref outside the schema ({str(ref)[:80]!r}): only #/... is read")
    node: object = schema
    for part in [p for p in ref[1:].split("/") if p]:
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isascii() and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise _Refused(f"has a $ref to nothing ({ref[:80]!r})")
    return node


class StopCut:
    """Cuts a text at the first of `sequences`, also when it arrives in pieces: a piece is held
    back only while its end could still begin a stop sequence."""

    def __init__(self, sequences: tuple[str, ...]) -> None:
        self._sequences = sequences
        self._held = ""
        self.stopped = False

    def feed(self, piece: str) -> str:
        """The part of `piece` (with what was held) that is certainly before any stop."""
        if self.stopped:
            return ""
        text = self._held + piece
        cut = min((i for i in (text.find(s) for s in self._sequences) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped, self._held = True, ""
            return text[:cut]
        keep = max((_overlap(text, s) for s in self._sequences), default=0)
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What was held back, once the text has ended without a stop."""
        held, self._held = self._held, ""
        return "" if self.stopped else held


def _overlap(text: str, sequence: str) -> int:
    """Length of the longest end of `text` that begins `sequence` (shorter than it)."""
    for size in range(min(len(text), len(sequence) - 1), 0, -1):
        if sequence.startswith(text[-size:]):
            return size
    return 0
