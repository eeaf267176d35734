"""Server-Sent Events: the framing, and a response that sends each event the moment it exists."""

from __future__ import annotations

import json
from typing import Any

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_event(data: object, event: str | None = None) -> str:
    """One event; `data` is sent as JSON (a string as it is)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return head + "".join(f"data: {line}\n" for line in payload.split("\n")) + "\n"


def event_stream(description: str, data_schema: str | None = None) -> dict[str, Any]:
    """The OpenAPI description of a 200 answered as Server-Sent Events (whose `data` are the
    component `data_schema`, when named)."""
    # one event as a client's parser reads it (its `data` a JSON text)
    event = {
        "type": "object",
        "properties": {"event": {"type": "string"}, "data": {"type": "string"},
                       "id": {"type": "string"}, "retry": {"type": "integer"}},
    }  # fmt: skip
    media: dict[str, Any] = {"schema": event}
    if data_schema:
        media["x-event-data"] = {"$ref": f"#/components/schemas/{data_schema}"}
    return {"description": description, "content": {"text/event-stream": media}}
