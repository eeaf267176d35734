"""The ingestion pipeline against the real Solr and the model server: groups of passages
embedded while the group before is written, progress after each write, and an error from
either stage raised as itself."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import httpx
import pytest

from service.errors import ServiceError, UpstreamBadResponse
from service.ingest import SourceDocument
from service.ingest.indexer import Indexer, IngestProgress, PassageIndex
from service.ingest.passages import PassageSplitter
from service.ingest.progress import ProgressLine, duration, progress_text
from service.llm import EmbeddingsClient, LLMOptions
from service.retrieval import SolrClient
from testing.corpus import remove_documents

PARAGRAPH = "The ferry crossed the strait at dawn and came back at dusk. " * 6


def ferry(n: int, **fields: str) -> SourceDocument:
    """A document of 3 passages."""
    return SourceDocument(
        id=f"pipeline-{n}",
        title=f"Ferry log {n}",
        url=f"https://example.org/pipeline-{n}",
        content="\n\n".join(f"Day {day} of log {n}. {PARAGRAPH}" for day in range(3)),
        fields=tuple(fields.items()),
    )


@pytest.fixture
async def solr(solr_url: str) -> AsyncIterator[SolrClient]:
    async with httpx.AsyncClient() as http:
        yield SolrClient(http, solr_url)
    remove_documents(solr_url, [f"pipeline-{n}" for n in range(10)])


def indexer(solr: SolrClient, embeddings_url: str, **options: int) -> Indexer:
    http = httpx.AsyncClient()
    embeddings = EmbeddingsClient(
        http, LLMOptions(endpoint=embeddings_url, model="all-MiniLM-L6-v2", retries=0)
    )
    passages = PassageIndex(
        collection="VectorMain",
        splitter=PassageSplitter(400, 0),
        vector_field="vector_384",
        embeddings=embeddings,
        model="all-MiniLM-L6-v2",
    )
    return Indexer(solr, "FileShare", passages=passages, **options)


async def test_groups_are_written_with_progress_after_each(
    solr: SolrClient, model_server_url: str
) -> None:
    seen: list[IngestProgress] = []
    documents = [ferry(n) for n in range(7)]
    run = indexer(solr, f"{model_server_url}/v1/", batch_size=3, group_passages=4)
    summary = await run.run(documents, seen.append)

    assert (summary.documents, summary.passages, summary.embedded) == (7, 21, 21)
    # a group closes at 4 passages (2 documents), and at the end
    assert [state.documents for state in seen] == [2, 4, 6, 7]
    assert [(state.passages, state.embedded) for state in seen][-1] == (21, 21)
    assert all(state.total == 7 for state in seen)
    assert [state.seconds for state in seen] == sorted(state.seconds for state in seen)
    stored = await solr.select(
        "VectorMain",
        {
            "q": "parent_id:pipeline-*",
            "defType": "lucene",
            "fq": "embedding_model_s:*",
            "fl": "vector_384",
            "rows": 100,
        },
    )
    assert [len(doc["vector_384"]) for doc in stored["response"]["docs"]] == [384] * 21

    seen.clear()
    again = await run.run(documents, seen.append)  # unchanged: a progress line per batch
    assert (again.documents, again.unchanged, again.embedded) == (0, 7, 0)
    assert [state.documents for state in seen] == [3, 6, 7]


async def test_a_failed_write_is_raised_as_itself_while_the_next_group_embeds(
    solr: SolrClient, model_server_url: str
) -> None:
    # Solr refuses the first group (a *_i field that is not a number) while the second embeds
    documents = [ferry(8, broken_i="not a number"), ferry(9)]
    run = indexer(solr, f"{model_server_url}/v1/", batch_size=1, group_passages=1)
    with pytest.raises(UpstreamBadResponse, match="400"):
        await run.run(documents)


async def test_a_failed_embedding_is_raised_as_itself(solr: SolrClient) -> None:
    run = indexer(solr, "http://127.0.0.1:9/v1/", group_passages=1)
    with pytest.raises(ServiceError) as raised:
        await run.run([ferry(5)])
    assert not isinstance(raised.value, BaseExceptionGroup)
    assert await run.count("pipeline-5") == 0


def test_the_progress_line_shows_rates_and_time_left() -> None:
    state = IngestProgress(documents=420, total=1400, passages=630, embedded=600, seconds=35.0)
    text = progress_text(state)
    assert "420/1400 documents" in text
    assert "12.0 documents/s" in text and "18.0 passages/s" in text
    assert "(17.1 embedded/s)" in text
    assert "1m22s left" in text  # 980 documents at 12/s
    assert [duration(s) for s in (4.4, 65, 7_620)] == ["4s", "1m05s", "2h07m"]
    log = io.StringIO()  # not a terminal: a line a step
    line = ProgressLine(log)
    line(state)
    line(IngestProgress(1400, 1400, 2100, 2000, 100.0))
    line.done()
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("[" + "#" * 24 + "]")
    assert lines[1].endswith("0s left")
