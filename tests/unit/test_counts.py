"""A scope's count as Solr gives it (service.retrieval.counts): a body that holds no count is an
upstream error, which the vector search reads as "search the graph", never a 500."""

from __future__ import annotations

from typing import Any

import pytest

from service.errors import UpstreamBadResponse
from service.retrieval.counts import Counts, count


class Answering:
    """What counts.count needs of a Solr client: its counts, and a select that answers `body`."""

    def __init__(self, body: object) -> None:
        self.body, self.counts, self.asked = body, Counts(), 0

    async def select(self, collection: str, params: Any) -> Any:
        self.asked += 1
        return self.body


async def test_a_count_is_asked_once_then_known() -> None:
    solr = Answering({"response": {"numFound": 7, "docs": []}})
    assert await count(solr, "VectorMain", {"fq": ["allowed_groups:g1"]}) == 7
    assert await count(solr, "VectorMain", {"fq": ["allowed_groups:g1"]}) == 7
    assert solr.asked == 1


@pytest.mark.parametrize(
    "body",
    [
        {"response": None},
        {"response": []},
        {"response": {"numFound": True}},
        {"response": {"numFound": -1}},
        {"response": {"numFound": "7"}},
        {},
        [],
        None,
    ],
    ids=["null", "a list", "true", "negative", "a text", "no response", "a list body", "null body"],
)
async def test_a_body_without_a_count_is_an_upstream_error(body: object) -> None:
    solr = Answering(body)
    with pytest.raises(UpstreamBadResponse, match="was not a number"):
        await count(solr, "VectorMain", {"fq": ["allowed_groups:g1"]})
    solr.body = {"response": {"numFound": 3}}  # nothing was kept: the next search asks again
    assert await count(solr, "VectorMain", {"fq": ["allowed_groups:g1"]}) == 3
    assert solr.asked == 2
