"""The retrievers on their own, against the real Solr holding the test corpus (no HTTP to the
service): BM25 on FileShare, kNN on VectorMain with the model server's embeddings, their
fusion, multi-query fusion, and one document by id."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from service.config.field_map import parse_fields
from service.llm import EmbeddingsClient, LLMOptions
from service.retrieval import Bm25Retriever, DocumentById, RetrievedDocument, SolrClient
from service.retrieval.fusion import (
    HybridRetriever,
    MultiQueryRetriever,
    Ranking,
    reciprocal_rank_fusion,
    score_fusion,
    without_duplicate_content,
)
from service.retrieval.scope import Scope
from service.retrieval.vector import VectorRetriever
from service.text import sanitize_query
from testing.corpus import remove_documents

pytestmark = pytest.mark.usefixtures("corpus")


@pytest.fixture
async def solr(solr_url: str) -> AsyncIterator[SolrClient]:
    async with httpx.AsyncClient() as http:
        yield SolrClient(http, solr_url)


@pytest.fixture
async def embeddings(model_server_url: str) -> AsyncIterator[EmbeddingsClient]:
    async with httpx.AsyncClient() as http:
        options = LLMOptions(endpoint=f"{model_server_url}/v1/", model="all-MiniLM-L6-v2")
        yield EmbeddingsClient(http, options)


def bm25(solr: SolrClient, collection: str = "FileShare", **options: object) -> Bm25Retriever:
    kind = "passages" if collection == "VectorMain" else "documents"
    settings = {
        "fields": "title content",
        "operator": "OR",
        "rows": 5,
        "field_map": parse_fields("", kind),
        **options,
    }
    return Bm25Retriever(solr, collection, **settings)  # type: ignore[arg-type]


def ids(documents: list[RetrievedDocument]) -> list[str]:
    return [document.source_id for document in documents]


async def test_bm25_ranks_the_matching_document_first(solr: SolrClient) -> None:
    found = await bm25(solr).run("lighthouse lamp")
    assert ids(found)[0] == "lighthouse"
    assert found[0].score > 0


async def test_bm25_operator_and_needs_every_word(solr: SolrClient) -> None:
    either = set(ids(await bm25(solr).run("zebra quokka")))
    both = ids(await bm25(solr, operator="AND").run("zebra quokka"))
    assert {"zebra-quokka", "zebra-only", "quokka-only"} <= either
    assert both == ["zebra-quokka"]


async def test_a_scope_limits_the_search_to_one_parent(solr: SolrClient) -> None:
    scoped = bm25(solr, "VectorMain", scope=Scope().with_parent("orchard"))
    assert set(ids(await scoped.run("apple pruning lighthouse"))) == {"orchard"}


async def test_document_by_id_finds_it_or_nothing(solr: SolrClient) -> None:
    by_id = DocumentById(solr, "FileShare")
    manual = await by_id.run("turbine-manual", Scope())
    assert manual is not None and "wind turbine" in manual.content.lower()
    assert await by_id.run("no-such-document", Scope()) is None


async def test_knn_finds_passages_by_meaning(
    solr: SolrClient, embeddings: EmbeddingsClient
) -> None:
    knn = VectorRetriever(solr, "VectorMain", embeddings, field="vector_384", top_k=3)
    found = await knn.run("When should fruit trees be cut back?")
    assert ids(found)[0] == "orchard"
    assert all(passage.parent_id for passage in found)


async def test_knn_keeps_only_passages_similar_enough(
    solr: SolrClient, embeddings: EmbeddingsClient
) -> None:
    def knn(floor: float) -> VectorRetriever:
        return VectorRetriever(
            solr, "VectorMain", embeddings, field="vector_384", top_k=5, min_similarity=floor
        )

    unrelated = "How do I bake sourdough bread at home?"
    assert len(await knn(0.0).run(unrelated)) == 5  # the nearest, however far
    assert await knn(0.3).run(unrelated) == []
    found = await knn(0.3).run("When should fruit trees be cut back?")
    assert ids(found)[0] == "orchard"
    assert all(2 * passage.score - 1 >= 0.3 for passage in found)  # Solr: (1 + cosine) / 2


async def test_hybrid_fuses_both_rankings(solr: SolrClient, embeddings: EmbeddingsClient) -> None:
    lexical = bm25(solr, "VectorMain")
    semantic = VectorRetriever(solr, "VectorMain", embeddings, field="vector_384", top_k=5)
    hybrid = HybridRetriever(lexical, semantic, k=60, limit=5)
    query = "keeper of the lighthouse"
    fused = await hybrid.run(query)
    assert ids(fused)[0] == "lighthouse"
    union = {d.id for d in await lexical.run(query)} | {d.id for d in await semantic.run(query)}
    assert {d.id for d in fused} <= union


async def test_a_question_the_encoder_does_not_read_leans_on_bm25(
    solr: SolrClient, embeddings: EmbeddingsClient
) -> None:
    """Issue 60: an English encoder's vectors of a French question pull wrong passages up;
    with foreign weight 0 hybrid is BM25's ranking, and the kNN side (its similarity floor
    too) is not asked; an English question is fused as before."""
    lexical = bm25(solr, "VectorMain")
    semantic = VectorRetriever(solr, "VectorMain", embeddings, field="vector_384", top_k=5,
                               min_similarity=0.99)  # fmt: skip
    hybrid = HybridRetriever(lexical, semantic, limit=5, needs_meaning=True,
                             reads=frozenset({"en"}), foreign_weight=0.0)  # fmt: skip
    french = "Le mistral souffle sur la côte"
    assert hybrid.foreign(french) and not hybrid.foreign("keeper of the lighthouse")
    assert hybrid.foreign("متى أضيء المنارة؟") and hybrid.foreign("Когда зажгли маяк?")
    assert not hybrid.foreign("lighthouse") and not hybrid.foreign("1952")
    found = ids(await hybrid.run(french))
    assert found and found == ids(await lexical.run(french))[:5] and found[0] == "marseille"
    assert await hybrid.run("keeper of the lighthouse") == []  # the floor, for English
    anything = HybridRetriever(lexical, semantic, limit=5, needs_meaning=True, reads=None)
    assert not anything.foreign(french) and await anything.run(french) == []


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Le mistral souffle sur Marseille, the coast in summer?", "marseille"),  # mixed
        ("Wann hat der Leuchtturmwärter die lighthouse Lampe angezündet?", "lighthouse"),
        ("متى أضاء حارس المنارة lighthouse المصباح؟", "lighthouse"),  # Arabic, one word known
        ("mistral", "marseille"),  # one word
        ("1952", None),  # only digits
    ],
)
async def test_questions_in_languages_the_encoder_does_not_read_rank_as_bm25_does(
    solr: SolrClient, embeddings: EmbeddingsClient, question: str, expected: str | None
) -> None:
    """Issue 60's bad input, with the shipped fusion (kNN x1.5, foreign x0.25, the
    similarity floor): mixed, German, Arabic, one word, digits: never an error, and the
    document BM25 puts first is hybrid's first too."""
    lexical = bm25(solr, "VectorMain")
    semantic = VectorRetriever(solr, "VectorMain", embeddings, field="vector_384", top_k=10,
                               min_similarity=0.3)  # fmt: skip
    hybrid = HybridRetriever(lexical, semantic, limit=5, needs_meaning=True, semantic_weight=1.5,
                             reads=frozenset({"en"}), foreign_weight=0.25)  # fmt: skip
    by_words = ids(await lexical.run(question))
    found = ids(await hybrid.run(question))
    if expected is not None:
        assert by_words[:1] == [expected] and found[:1] == [expected], (by_words, found)


async def test_a_flat_knn_ranking_leans_on_bm25(
    solr: SolrClient, embeddings: EmbeddingsClient
) -> None:
    """Issue 60: when the kNN ranking's best and last similarities are within
    hybrid.flat.spread, its weight is the foreign one (0 here: BM25's order)."""
    lexical = bm25(solr, "VectorMain")
    semantic = VectorRetriever(solr, "VectorMain", embeddings, field="vector_384", top_k=5)
    query = "lamp keeper wind orchard"
    found = await semantic.run(query)
    spread = 2 * (found[0].score - found[-1].score)  # cosine: Solr scores (1 + cosine) / 2
    assert spread > 0

    def hybrid(flat: float | None) -> HybridRetriever:
        return HybridRetriever(lexical, semantic, limit=5, foreign_weight=0.0, flat_spread=flat)

    assert hybrid(spread * 1.01).flat(found) and not hybrid(spread * 0.99).flat(found)
    assert not hybrid(None).flat(found) and not hybrid(2.0).flat(found[:1])
    by_words = ids(await lexical.run(query))
    assert ids(await hybrid(spread * 1.01).run(query))[: len(by_words)] == by_words[:5]
    fused = ids(await hybrid(None).run(query))
    assert fused == ids(await HybridRetriever(lexical, semantic, limit=5).run(query))


async def test_multi_query_retrieval_fuses_each_querys_documents(solr: SolrClient) -> None:
    found = await MultiQueryRetriever(bm25(solr), k=60, limit=4).run(
        ["lighthouse lamp", "apple orchard pruning"]
    )
    assert {"lighthouse", "orchard"} <= set(ids(found))
    assert len(found) <= 4


def doc(doc_id: str, content: str = "", score: float = 0.0) -> RetrievedDocument:
    return RetrievedDocument(
        id=doc_id, title=doc_id, url="", content=content or doc_id, score=score
    )


def test_reciprocal_rank_fusion_sums_weighted_reciprocal_ranks() -> None:
    fused = reciprocal_rank_fusion(
        [Ranking([doc("a"), doc("b")], 1.0), Ranking([doc("b"), doc("c")], 2.0)], k=1, limit=10
    )
    assert [d.id for d in fused] == ["b", "c", "a"]
    assert fused[0].score == pytest.approx(1 / 3 + 2 / 2)
    assert fused[1].score == pytest.approx(2 / 3)
    assert fused[2].score == pytest.approx(1 / 2)
    weighted = reciprocal_rank_fusion(
        [Ranking([doc("a")], 0.0), Ranking([doc("d")], 2.0)], k=60, limit=1
    )
    assert [d.id for d in weighted] == ["d"]


def test_fusion_keeps_first_appearance_on_ties_and_honours_the_limit() -> None:
    for fuse in (
        lambda rankings: reciprocal_rank_fusion(rankings, k=60, limit=1),
        lambda rankings: score_fusion(rankings, limit=1),
    ):
        fused = fuse([Ranking([doc("x", score=2.0)]), Ranking([doc("y", score=3.0)])])
        assert [d.id for d in fused] == ["x"]


def test_score_fusion_places_each_score_within_three_deviations_of_its_rankings_mean() -> None:
    lexical = Ranking([doc("a", score=8.0), doc("b", score=2.0)], weight=1.0)  # mean 5, sd 3
    semantic = Ranking(  # mean 0.6, sd 0.163
        [doc("b", score=0.8), doc("c", score=0.6), doc("d", score=0.4)], weight=3.0
    )
    fused = {d.id: d.score for d in score_fusion([lexical, semantic], limit=10)}
    spread_l, spread_s = 9.0, 3 * (0.08 / 3) ** 0.5  # 3 sd each
    assert fused["a"] == pytest.approx((8 - 5 + spread_l) / (2 * spread_l) / 4)  # no kNN: 0
    assert fused["b"] == pytest.approx(
        ((2 - 5 + spread_l) / (2 * spread_l) + 3 * (0.8 - 0.6 + spread_s) / (2 * spread_s)) / 4
    )
    assert fused["c"] == pytest.approx(3 * 0.5 / 4)  # the mean: halfway
    assert fused["d"] == pytest.approx(3 * (0.4 - 0.6 + spread_s) / (2 * spread_s) / 4)
    assert list(fused) == ["b", "c", "d", "a"]


def test_score_fusion_ignores_each_rankings_scale_and_offset() -> None:
    """A model whose cosines sit close together fuses as one whose cosines spread widely."""
    lexical = Ranking([doc("a", score=12.0), doc("b", score=7.5), doc("c", score=1.0)])
    cosines = [("b", 0.71), ("c", 0.55), ("d", 0.52), ("a", 0.30)]
    wide = Ranking([doc(i, score=s) for i, s in cosines])
    narrow = Ranking([doc(i, score=0.8 + s / 10) for i, s in cosines])
    one = score_fusion([lexical, wide], limit=10)
    other = score_fusion([lexical, narrow], limit=10)
    assert [d.id for d in one] == [d.id for d in other]
    assert [d.score for d in one] == pytest.approx([d.score for d in other])


def test_score_fusion_of_empty_or_scoreless_rankings_is_defined() -> None:
    assert score_fusion([Ranking([]), Ranking([])], limit=5) == []
    # one score, or all equal: each is as good as the ranking's best
    fused = score_fusion([Ranking([doc("a", score=0.0)]), Ranking([], weight=0.0)], limit=5)
    assert [(d.id, d.score) for d in fused] == [("a", 1.0)]
    ties = score_fusion([Ranking([doc("a", score=2.0), doc("b", score=2.0)])], limit=5)
    assert [(d.id, d.score) for d in ties] == [("a", 1.0), ("b", 1.0)]
    unweighted = score_fusion([Ranking([doc("a", score=1.0)], weight=0.0)], limit=5)
    assert [(d.id, d.score) for d in unweighted] == [("a", 0.0)]


def test_the_same_text_twice_is_kept_once_whatever_its_spacing() -> None:
    kept = without_duplicate_content(
        [doc("a", "Same  text."), doc("b", "same text."), doc("c", "Other.")]
    )
    assert [d.id for d in kept] == ["a", "c"]


# documents in six scripts, each found by its own words once sanitized (issue 17: folding every
# combining mark made "हिन्दी" into "हिनदी", which Solr does not find)
WORLD = {
    "world-hi": ("हिन्दी भाषा", "हिन्दी भारत की एक भाषा है।"),
    "world-ar": ("اللغة العربية", "اللغة العربية لغة سامية."),
    "world-th": ("ภาษาไทย", "ภาษาไทย เป็นภาษาราชการ"),
    "world-vi": ("Tiếng Việt", "Tiếng Việt là ngôn ngữ chính thức."),
    "world-el": ("Ελληνικά", "Η ελληνική γλώσσα είναι ινδοευρωπαϊκή."),
    "world-zh": ("中文", "中文是汉语的书面语。"),
}


@pytest.fixture
async def world(solr: SolrClient, solr_url: str) -> AsyncIterator[None]:
    documents = [
        {"id": key, "title": title, "content": content, "url": f"https://example.org/{key}"}
        for key, (title, content) in WORLD.items()
    ]
    await solr.add("FileShare", documents, commit=True)
    yield
    remove_documents(solr_url, WORLD)


@pytest.mark.parametrize(
    ("key", "query"),
    [
        ("world-hi", "हिन्दी"),
        ("world-ar", "العربية"),
        ("world-th", "ภาษาไทย"),
        ("world-vi", "Tiếng Việt"),
        ("world-el", "ελληνική γλώσσα"),
        ("world-zh", "汉语"),
    ],
)
async def test_bm25_finds_every_script_through_the_sanitizer(
    solr: SolrClient, world: None, key: str, query: str
) -> None:
    found = await bm25(solr).run(sanitize_query(query))
    assert ids(found)[:1] == [key]
