"""response_format schemas that would cost unbounded validation work, for the tests and the
hostile load benchmark (service.llm.answer_format refuses each with a 400)."""

from __future__ import annotations


def chained_any_of(levels: int) -> dict[str, object]:
    """Each level any of two references to the next: 2**levels subschemas once followed."""
    defs: dict[str, object] = {
        f"l{i}": {"anyOf": [{"$ref": f"#/$defs/l{i + 1}"}, {"$ref": f"#/$defs/l{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"l{levels}"] = {"type": "integer"}
    return {"$ref": "#/$defs/l0", "$defs": defs}


# name: (schema, what the refusal names)
HOSTILE_SCHEMAS: dict[str, tuple[dict[str, object], str]] = {
    "18 chained anyOf": (chained_any_of(18), "past 2000 subschemas"),
    "itself": ({"$ref": "#"}, "refers to itself"),
    "a two-step loop": (
        {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}},
        "refers to itself",
    ),
    "a URL": ({"$ref": "https://example.com/schema.json"}, "outside the schema"),
    "a catastrophic key pattern": (
        {"type": "object", "patternProperties": {"^(a+)+$": {}}, "additionalProperties": False},
        "patternProperties",
    ),
    "a dynamic reference": ({"$dynamicRef": "#node"}, "refers to itself"),
    "3,000 items required": (
        {"type": "array", "minItems": 3000, "items": {"type": "integer"}},
        "minItems 3000",
    ),
}
