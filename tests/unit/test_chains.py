"""The prompt chains and packing on their own: chunks of the test corpus, the real prompt
templates, and the recording LLM answering over HTTP in this process (no socket, no service
in between)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from service.chains import MapReduceChain, PromptBuilder, Question, RefineChain, StuffChain
from service.chains.packing import MIN_ROOM, Packer, pack_greedy
from service.chains.prompts import PromptLibrary
from service.chains.result import Chunk, NumberedChunk, Source, number_chunks
from service.errors import PromptTooLong, TechnicalError, TooManyCalls
from service.llm import ChatClient, ChatMessage, LLMOptions
from service.llm.budget import CallBudget
from service.retrieval import RetrievedDocument
from testing.corpus import load_corpus
from testing.llm_server import LLMScript, create_llm_app
from testing.service import ROOT

PROMPTS = PromptLibrary(ROOT / "prompts")
DOCUMENTS = {document.id: document for document in load_corpus()}
LlmFactory = Callable[[int], ChatClient]


def chunks_of(*ids: str, size: int = 400) -> list[NumberedChunk]:
    from service.text import Chunker

    found = []
    for doc_id in ids:
        source = DOCUMENTS[doc_id]
        document = RetrievedDocument(doc_id, source.title, source.url, source.content)
        found += [Chunk(document, text) for text in Chunker(size).run(source.content)]
    return number_chunks(found)


def builder(history: tuple[ChatMessage, ...] = ()) -> PromptBuilder:
    return PromptBuilder(PROMPTS, Question("How is the turbine maintained?", history=history))


@pytest.fixture
def llm() -> LLMScript:
    return LLMScript()


@pytest.fixture
async def make_llm(llm: LLMScript) -> AsyncIterator[LlmFactory]:
    """make_llm(calls) -> a client of the recording LLM with that call budget."""
    transport = httpx.ASGITransport(app=create_llm_app(llm))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport) as http:
        options = LLMOptions(endpoint="http://llm/v1/", model="test-model", retries=0)
        yield lambda calls: ChatClient(http, options, calls=CallBudget(calls))


async def test_stuff_sends_one_request_with_the_first_pack(
    make_llm: LlmFactory, llm: LLMScript
) -> None:
    result = await StuffChain(make_llm(16), builder(), 3000).run(chunks_of("lighthouse", "orchard"))
    assert len(llm.requests) == 1
    assert [source.document.id for source in result.sources] == ["lighthouse", "orchard"]
    assert "[1] The lighthouse keeper" in llm.requests[0].prompt
    assert result.answer.startswith("Test answer to:")
    assert result.llm_calls == 1


async def test_refine_carries_the_answer_through_every_pack_within_the_budget(
    make_llm: LlmFactory, llm: LLMScript
) -> None:
    llm.answer = lambda request: "Answer so far [1]."
    numbered = chunks_of("turbine-manual")
    result = await RefineChain(make_llm(4), builder(), 2500, answer_reserve=200).run(numbered)
    assert len(llm.requests) == 4  # the manual needs more packs: the tail is left out
    assert all(request.size <= 2500 for request in llm.requests)
    assert all("Answer so far [1]." in r.prompt for r in llm.requests[1:])
    assert result.llm_calls == 4


async def test_map_reduce_plans_maps_and_reduce_levels_within_the_budget(
    make_llm: LlmFactory, llm: LLMScript
) -> None:
    llm.answer = lambda request: "Partial [1]."
    chain = MapReduceChain(make_llm(5), builder(), 2000, concurrency=4, answer_reserve=200)
    result = await chain.run(chunks_of("turbine-manual", size=300))
    assert len(llm.requests) <= 5
    assert result.llm_calls == len(llm.requests)
    assert result.answer == "Partial [1]."


async def test_a_summary_that_cannot_fit_its_calls_is_refused_before_any(
    make_llm: LlmFactory, llm: LLMScript
) -> None:
    chain = MapReduceChain(make_llm(3), builder(), 1500, answer_reserve=200, partial_ok=False)
    with pytest.raises(TooManyCalls, match=r"llm\.max\.calls\.per\.request"):
        await chain.run(chunks_of("turbine-manual", size=300))
    assert llm.requests == []


async def test_the_call_budget_stops_what_a_plan_missed(make_llm: LlmFactory) -> None:
    client = make_llm(1)
    await client.complete([ChatMessage("user", "one")])
    with pytest.raises(TooManyCalls):
        await client.complete([ChatMessage("user", "two")])


def test_packs_are_greedy_and_within_the_room() -> None:
    packer = Packer(builder(), 2000)
    room = packer.room("stuff")
    packs = packer.pack(chunks_of("turbine-manual", size=300), room)
    assert all(len(pack.sources) <= room for pack in packs)
    for pack, following in itertools.pairwise(packs):
        assert len(pack.sources) + len(following.blocks[0]) > room  # the next did not fit


def test_a_chunk_too_large_is_split_into_pieces_as_large_as_the_room() -> None:
    packer = Packer(builder(), 2000)
    room = packer.room("stuff")
    [whole] = chunks_of("turbine-manual", size=100_000)
    packs = packer.pack([whole], room)
    pieces = [item for pack in packs for item in pack.items]
    assert all(item.number == 1 for item in pieces)
    assert all(len(block) <= room for pack in packs for block in pack.blocks)
    assert min(len(item.chunk.text) for item in pieces[:-1]) > room // 2  # no tiny pieces


def test_a_long_title_does_not_shrink_the_pieces() -> None:
    packer = Packer(builder(), 2000)
    room = packer.room("stuff")
    document = RetrievedDocument("long", "Title " * 200, "", "Text of the document. " * 300)
    packs = packer.pack(number_chunks([Chunk(document, document.content)]), room)
    assert len(packs) <= 10  # 6,600 characters of text, not a piece per word
    assert all(len(block) <= room for pack in packs for block in pack.blocks)


def test_a_history_that_leaves_too_little_room_is_the_callers_error() -> None:
    history = (ChatMessage("user", "x" * 1800),)
    with pytest.raises(PromptTooLong, match="history"):
        Packer(builder(history), 2500).room("stuff")


def test_a_budget_too_small_for_the_instructions_is_the_configurations() -> None:
    with pytest.raises(TechnicalError, match=r"prompt\.max\.request\.size"):
        Packer(builder(), MIN_ROOM + 100).room("refine_step", reserve=400, previous_answer="")


def test_pack_greedy_fills_each_group_in_order() -> None:
    assert pack_greedy([3, 3, 3, 5, 1], 6) == [[0, 1], [2], [3, 4]]
    assert pack_greedy([9, 1], 5) == [[0], [1]]  # an item over the budget gets its own group
    assert pack_greedy([2, 2, 2], 4, first=2) == [[0], [1, 2]]


# -- what a small model copies from the prompt -----------------------------------------------------


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("The answer so far, written from the earlier parts of the sources:\nRollo [1]\n"
         "######\nRefined answer: The Norse leader was Rollo [1].",
         "The Norse leader was Rollo [1]."),
        ("Answer: 1952 [1]", "1952 [1]"),
        ("**Final answer:** 1952 [1]", "1952 [1]"),
        ("Question: When was it electrified?\n\n1952 [1]", "1952 [1]"),
        ("An answer written earlier from other documents:\nin 1952 [2]", "in 1952 [2]"),
        ("- answer: yes\n- answer: no", "- answer: yes\n- answer: no"),
        ("### Pruning\nIn late winter [1].", "### Pruning\nIn late winter [1]."),
        ("Answer:", "Answer:"),
        ("A name, a number or a short phrase when that answers it, a sentence or two otherwise."
         "\nAt 50 years of age [2].", "At 50 years of age [2]."),
        ("It raises an AssertionError. The number of the document that says this is [1]",
         "It raises an AssertionError. [1]"),
        ("In 1952. The document that says it is: [2]", "In 1952. [2]"),
        ("The document that says so is the charter.", "The document that says so is the charter."),
        ("A list comprehension is a name, a number or a short phrase when that answers it, a "
         "sentence or two otherwise. It builds a list from an iterable. [1]",
         "It builds a list from an iterable. [1]"),
        ("Keep it short: just the words that answer it if they are enough, otherwise a "
         "sentence or two.\nAt 50 years of age [2].", "At 50 years of age [2]."),
        ("A list comprehension is just the words that answer it if they are enough. It builds "
         "a list from an iterable. [1]", "It builds a list from an iterable. [1]"),
    ],
)  # fmt: skip
def test_scaffolding_copied_from_the_prompt_is_taken_out(written: str, kept: str) -> None:
    from service.chains.scaffolding_reading import without_scaffolding
    from service.chains.scaffolding_stream import Unscaffolded

    assert without_scaffolding(written) == kept
    for size in (1, 2, 3, 7):  # streamed in pieces: the same text, none of it taken back
        reader = Unscaffolded()
        pieces = [reader.feed(written[i : i + size]) for i in range(0, len(written), size)]
        assert "".join(pieces) + reader.flush() == kept


@pytest.mark.parametrize(
    ("answer", "nothing"),
    [
        ("I could not find the answer in the documents.", True),
        ("Je ne peux pas trouver la réponse dans les documents.", True),
        ("Je ne peux pas trouver l'answer dans les documents. [1]", True),
        ("Je n'ai pas trouvé la réponse dans les documents.", True),
        ("Les documents ne mentionnent pas ce délai.", True),
        ("Aucune information pertinente dans les documents.", True),
        ("La CNIL répond en un mois [1].", False),
        ("Vous ne pouvez pas trouver ce formulaire en mairie : il est en ligne [2].", False),
    ],
)
def test_an_answer_that_says_the_documents_hold_nothing_is_recognised_in_french_too(
    answer: str, nothing: bool
) -> None:
    from service.chains.result import says_nothing_relevant

    assert says_nothing_relevant(answer) is nothing


def glacier_sources() -> list[Source]:
    """Five surveys that say the same but for their number (which decides the source), and a
    prime."""
    texts = [f"Survey number {n} of the Vatnaj glacier measured its retreat." for n in range(1, 6)]
    texts.append("As of January 2016 the largest known prime has 22,338,618 decimal digits.")
    return [
        Source(number, RetrievedDocument(str(number), "t", "", text), (text,))
        for number, text in enumerate(texts, start=1)
    ]


@pytest.mark.parametrize(
    ("answer", "whole", "streamed"),
    [
        ("22,338,618 digits.", "22,338,618 digits [6].", "22,338,618 digits. [6]"),
        # each sentence its own survey; one already cited keeps its citation
        ("Survey number 3 of the glacier measured its retreat. Survey 5 measured it too [5].",
         "Survey number 3 of the glacier measured its retreat [3]. Survey 5 measured it too [5].",
         # (marks after a streamed answer are its last sentence's: one not its own, on a line)
         "Survey number 3 of the glacier measured its retreat. Survey 5 measured it too [5].\n[3]"),
        ("- Survey 4 measured the glacier's retreat\n- Survey 1 measured the glacier's retreat",
         "- Survey 4 measured the glacier's retreat [4]\n- Survey 1 measured the glacier's "
         "retreat [1]",
         "- Survey 4 measured the glacier's retreat\n- Survey 1 measured the glacier's retreat "
         "[4] [1]"),
        # what no source supports is never cited, nor a figure none holds
        ("Survey 2 measured its retreat! The moon is made of cheese.",
         "Survey 2 measured its retreat [2]! The moon is made of cheese.",
         "Survey 2 measured its retreat! The moon is made of cheese.\n[2]"),
        ("Survey number 9 of the glacier measured its retreat.",) * 3,
        ("I could not find the answer in the documents.",) * 3,
    ],
)  # fmt: skip
def test_a_sentence_without_citation_gets_the_source_that_supports_it(
    answer: str, whole: str, streamed: str
) -> None:
    """Issue 86: what refine and map-reduce make of their last step's answer."""
    from service.chains.result import with_citations_restored

    assert with_citations_restored(answer, glacier_sources(), shown=False) == whole
    assert with_citations_restored(answer, glacier_sources(), shown=True) == streamed


async def test_a_summary_in_several_steps_is_given_no_citation_an_answer_is(
    make_llm: LlmFactory, llm: LLMScript
) -> None:
    """A summary cites nothing (its prompts ask for none): what its last reduce writes stays as
    written, however much of the document it copies; a question's map-reduce gets its
    citation back."""
    from service.chains import Summarizer

    copied = "Step 1 of the wind turbine maintenance manual covers the blade inspection."
    llm.answer = lambda request: copied
    numbered = chunks_of("turbine-manual", size=300)
    summarizing = PromptBuilder(PROMPTS, Question("Summarize"), system_template="summarize_system")
    summary = await Summarizer(make_llm(20), summarizing, 2000, answer_reserve=200).run(numbered)
    assert len(llm.requests) > 2 and summary.answer == copied
    chain = MapReduceChain(make_llm(20), builder(), 2000, answer_reserve=200)
    answer = await chain.run(numbered)
    assert answer.answer == copied.removesuffix(".") + " [1]."
