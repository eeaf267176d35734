"""The passages whose document is gone, found for `solr-rag sync` without reading the index.

A document deleted from the documents collection leaves no trace there: only its passages
say it was. Counting tells whether one may be gone, in a few requests whatever the size:

    passages' parents   = the documents that have passages + the gone ones
    documents counted   = the documents that have passages + those without (no text)

Every document the last runs read is known: it has passages (its first one, `chunk_index`
0) or it is among the ids without (`textless`, kept by sync). So with F the documents up to
the run's mark (`settled`), R those above it (written since: their ids read, and whether they
have passages), Q the first passages and T the textless ids below the mark,

    Q - F - (R with passages) + T = gone - (documents below the mark that lost their passages)

(and more when a textless id is gone). The lost are not counted here, where a gone document
would cancel one: they are found before, the passages collection's first passages counted at
a run's start against what the last run left (sync_state: fewer, and every document is read
again). So exactly 0 means none is gone; anything else (or when forced: a first run, one that
resumed after a crash, a passages collection without `chunk_index`) has both collections' ids
walked in order side by side (10,000 a request, read from the values the sort reads, never
from the stored documents) and the passages of every parent the documents collection lacks
deleted; the walk also lists the documents without passages (sync reads again those it did
not know to be without text).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from service.ingest.indexer import ID_SEPARATOR
from service.retrieval.pages import pages
from service.retrieval.scope import INDEX_FIELD
from service.retrieval.solr import SolrClient

WALK_PAGE = 10_000  # ids read a request when the ids are compared
LOOKUP = 500  # ids a terms query names
FIRST = "chunk_index"  # a passage's rank in its document: 0 for the first


@dataclass(frozen=True)
class Side:
    """One collection as the check reads it: its id field (for passages, their parent's) and
    the filter of the documents sync looks after (KAITO's indexes left out)."""

    collection: str
    key: str  # the field compared: the documents' id, the passages' parent
    unique: str  # the collection's uniqueKey (cursorMark sorts on it last)
    corpus: tuple[str, ...] = ()
    main_field: str = ""  # INDEX_FIELD when the collection has one: who is in the corpus


@dataclass(frozen=True)
class OrphanReport:
    """What the check did: parents gone (their passages deleted), ids compared (0: the
    counts showed none could be gone), and the main corpus' documents without passages when
    it walked them."""

    removed: int
    compared: int
    unpassaged: frozenset[str] | None  # None: not walked (the counts sufficed)


class Orphans:
    """>>> report = await Orphans(solr, documents, passages, first=True).run(settled, ids)"""

    def __init__(
        self,
        solr: SolrClient,
        documents: Side,
        passages: Side,
        *,
        first: bool,
        page: int = WALK_PAGE,
    ) -> None:
        """`documents`: keyed by their id; `passages`: by their parent's; `first`: whether the
        passages have chunk_index (without it, the ids are always compared)."""
        self._solr = solr
        self._documents, self._passages = documents, passages
        self._first = first
        self._page = page

    async def run(
        self, settled: int | None, textless: frozenset[str], *, compare: bool = False
    ) -> OrphanReport:
        """`settled`: the run's mark (documents above it were written since); `textless`:
        the ids of documents without passages, as sync knows them; `compare`: compare the
        ids whatever the counts say."""
        counted = not compare and self._first and settled is not None
        if counted and await self.may_be_gone(settled or 0, textless) == 0:
            return OrphanReport(0, 0, None)  # below 0: the counts are wrong, ids compared
        return await self._compare()

    async def firsts(self) -> int:
        """The first passages of the main corpus (every passage, without `chunk_index`)."""
        return await self._count(self._passages, *([f"{FIRST}:0"] if self._first else []))

    async def may_be_gone(self, settled: int, textless: frozenset[str]) -> int:
        """How many documents with passages are gone, if the counts hold (the module's doc)."""
        documents, passages = self._documents, self._passages
        recent = [
            key
            async for key, _ in self._walk(
                documents, [f"_version_:{{{settled} TO *]"], f"{documents.unique} asc"
            )
        ]
        counted = await self._count(documents, f"_version_:[* TO {settled}]")
        first = await self._count(passages, f"{FIRST}:0")
        recent_first = 0
        for start in range(0, len(recent), LOOKUP):
            batch = [i for i in recent[start : start + LOOKUP] if ID_SEPARATOR not in i]
            if batch:
                named = _terms(passages.key, batch)
                recent_first += await self._count(passages, f"{FIRST}:0", named)
        return first - counted - recent_first + len(textless - set(recent))

    async def _compare(self) -> OrphanReport:
        """Both collections' ids side by side, in order: the parents the documents lack are
        gone (their passages deleted); the main corpus' documents no passage names are listed.
        Every document counts here, KAITO's too: a passage of one is no orphan."""
        documents, passages = self._documents, self._passages
        held = _Ordered(self._walk(documents, [], f"{documents.key} asc", whole=True))
        sort = f"{passages.key} asc, {passages.unique} asc"
        parents = self._walk(passages, [], sort, whole=True)
        gone: list[str] = []
        removed = walked = 0
        last = None
        await held.next()
        async for parent, _ in parents:
            walked += 1
            if parent == last:
                continue
            last = parent
            if not await held.reaches(last):
                gone.append(last)
            if len(gone) >= LOOKUP:
                removed += await self._delete(gone)
                gone = []
        await held.reaches(None)
        removed += await self._delete(gone)
        return OrphanReport(removed, walked + held.walked, frozenset(held.unpassaged))

    async def _delete(self, parents: list[str]) -> int:
        """The passages of these parents deleted (committed by sync, with its other writes)."""
        if parents:
            key = self._passages.key
            commands = [("delete", {"query": f"{{!term f={key}}}{p}"}) for p in parents]
            await self._solr.update(self._passages.collection, commands)
        return len(parents)

    async def _walk(
        self, side: Side, filters: Sequence[str], sort: str, *, whole: bool = False
    ) -> AsyncIterator[tuple[str, bool]]:
        """The side's keys in `sort` order, a page a request, each with whether it is of the
        main corpus; `whole`: KAITO's indexes too. Read through `field()`, from the values
        the sort itself reads (docValues, or the field uninverted): a stored id is read with
        its whole document (a passage's vector, a document's text), 5 to 20 times slower."""
        corpus = [] if whole else list(side.corpus)
        fields = f"k:field({side.key})"
        if side.main_field:
            fields += f",other:exists({side.main_field})"
        params = {"q": "*:*", "defType": "lucene", "fq": [*corpus, *filters], "fl": fields,
                  "sort": sort, "rows": self._page}  # fmt: skip
        async for found, _ in pages(self._solr, side.collection, params):
            for doc in found["response"]["docs"]:
                if doc.get("k") is not None:
                    yield str(doc["k"]), not doc.get("other")

    async def _count(self, side: Side, *filters: str) -> int:
        found = await self._solr.select(
            side.collection,
            {"q": "*:*", "defType": "lucene", "fq": [*side.corpus, *filters], "rows": 0},
        )
        return int(found["response"]["numFound"])


class _Ordered:
    """The documents' ids in order, stepped through as the passages' parents come: those
    passed over have no passage (the main corpus' among them are listed: without text, or
    with passages lost)."""

    def __init__(self, keys: AsyncIterator[tuple[str, bool]]) -> None:
        self._keys = keys
        self._key: tuple[str, bool] | None = None
        self.walked = 0
        self.unpassaged: set[str] = set()

    async def next(self) -> None:
        self._key = await anext(self._keys, None)
        self.walked += self._key is not None

    async def reaches(self, parent: str | None) -> bool:
        """Steps to `parent` (None: to the end): whether the documents hold it."""
        while self._key is not None and (parent is None or self._key[0] < parent):
            if self._key[1]:
                self.unpassaged.add(self._key[0])
            await self.next()
        if parent is not None and self._key is not None and self._key[0] == parent:
            await self.next()
            return True
        return False


def corpus_side(collection: str, key: str, unique: str, has_index_field: bool, corpus: str) -> Side:
    """A side whose collection may hold KAITO's indexes (`has_index_field`): `corpus`, the
    main corpus' filter, keeps them out."""
    if not has_index_field:
        return Side(collection, key, unique)
    return Side(collection, key, unique, (corpus,), INDEX_FIELD)


def _terms(field: str, values: Sequence[str]) -> str:
    return f"{{!terms f={field} separator='{ID_SEPARATOR}'}}" + ID_SEPARATOR.join(values)
