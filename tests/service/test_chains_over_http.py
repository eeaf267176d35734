"""Prompt chains through /ai/rag: how many requests, how big, in what order, with what."""

from __future__ import annotations

import itertools
import re

import pytest
from fastapi.testclient import TestClient

from service.chains.result import NO_ANSWER
from service.text.claims import claims_of
from testing.corpus import load_corpus
from testing.llm_server import LLMScript, RecordedRequest, Step
from testing.service import ClientFactory
from tests.service.test_streaming import read_events

BLOCK = re.compile(r"^######\n\[(\d+)\] [^\n]*\n[^\n]*\n", re.M)
BUDGET = 2500
MANUAL = {"query": "turbine maintenance", "id": "turbine-manual"}


def chain_client(make_client: ClientFactory, strategy: str, **extra: object) -> TestClient:
    return make_client(
        {
            "prompt.chunking.strategy": strategy,
            "prompt.max.request.size": BUDGET,
            "chunking.chunk.size": 500,
            **extra,
        }
    )


def post_ok(client: TestClient, body: dict) -> dict:
    response = client.post("/ai/rag", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def blocks_of(request: RecordedRequest) -> list[str]:
    return [match.group(0) for match in BLOCK.finditer(request.prompt)]


def is_map(request: RecordedRequest) -> bool:
    return NO_ANSWER in request.prompt


def in_manual_order(requests: list[RecordedRequest]) -> list[RecordedRequest]:
    """Concurrent requests arrive in any order: sort them by where their first source starts
    in the manual."""
    manual = next(d for d in load_corpus() if d.id == "turbine-manual").content

    def position(request: RecordedRequest) -> int:
        first_text = blocks_of(request)[0].split("\n", 2)[2][:80]
        return manual.index(first_text)

    return sorted(requests, key=position)


def assert_packs_are_greedy(requests: list[RecordedRequest], budget: int) -> None:
    """Every request fits, and none could have taken the next request's first source: for
    sources kept in order, that is the fewest requests possible."""
    for request in requests:
        assert request.size <= budget
    for current, following in itertools.pairwise(in_manual_order(requests)):
        assert current.size + len(blocks_of(following)[0]) > budget


@pytest.mark.parametrize("strategy", ["stuff", "mapreduce", "refine"])
def test_what_fits_in_one_request_is_one_stuff_request(
    make_client: ClientFactory, llm: LLMScript, strategy: str
) -> None:
    post_ok(make_client({"prompt.chunking.strategy": strategy}), {"query": "lighthouse"})
    assert len(llm.requests) == 1
    assert not is_map(llm.requests[0])


def test_explicit_stuff_keeps_only_what_fits(make_client: ClientFactory, llm: LLMScript) -> None:
    payload = post_ok(chain_client(make_client, "stuff"), MANUAL)
    assert len(llm.requests) == 1
    assert llm.requests[0].size <= BUDGET
    sent = blocks_of(llm.requests[0])
    assert sent and "Step 1 of the wind turbine" in sent[0]  # the first chunks, in order
    assert payload["usage"]["llm_calls"] == 1


def test_mapreduce_makes_one_request_per_greedy_pack_then_reduces(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    payload = post_ok(chain_client(make_client, "mapreduce"), MANUAL)
    maps = [r for r in llm.requests if is_map(r)]
    reduces = [r for r in llm.requests if not is_map(r)]
    assert len(maps) >= 4
    assert len(reduces) == 1
    assert_packs_are_greedy(maps, BUDGET)
    assert reduces[0].size <= BUDGET
    assert payload["usage"]["llm_calls"] == len(maps) + 1
    assert payload["content"]["message"].startswith("Test answer to:")


def test_mapreduce_runs_map_requests_concurrently(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    llm.delay = 0.4
    post_ok(chain_client(make_client, "mapreduce", **{"prompt.map.concurrency": 16}), MANUAL)
    maps = [r for r in llm.requests if is_map(r)]
    reduce = next(r for r in llm.requests if not is_map(r))
    assert len(maps) >= 4
    assert max(r.started for r in maps) < min(r.finished for r in maps)  # all in flight at once
    assert reduce.started >= max(r.finished for r in maps)


def test_mapreduce_concurrency_is_bounded(make_client: ClientFactory, llm: LLMScript) -> None:
    llm.delay = 0.2
    post_ok(chain_client(make_client, "mapreduce", **{"prompt.map.concurrency": 2}), MANUAL)
    maps = [r for r in llm.requests if is_map(r)]
    # at the moment each map request arrives, how many are in flight (itself included)
    in_flight = [sum(o.started <= r.started < o.finished for o in maps) for r in maps]
    assert max(in_flight) == 2


def test_reduce_sees_every_relevant_partial_answer(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    counter = iter(range(100))

    def answer(request: RecordedRequest) -> str:
        if not is_map(request):
            return "Merged: step 1 of the wind turbine manual [1]"
        number = next(counter)
        return NO_ANSWER if number % 2 else f"Partial answer number {number} [1]"

    llm.answer = answer
    payload = post_ok(chain_client(make_client, "mapreduce"), MANUAL)
    maps = [r for r in llm.requests if is_map(r)]
    reduce_prompt = next(r for r in llm.requests if not is_map(r)).prompt
    kept = [f"Partial answer number {n} [1]" for n in range(0, len(maps), 2)]
    assert all(partial in reduce_prompt for partial in kept)
    assert NO_ANSWER not in reduce_prompt.split("######", 1)[1].rsplit("Question:", 1)[0]
    assert payload["content"]["message"] == "Merged: step 1 of the wind turbine manual [1]"


def test_mapreduce_with_nothing_relevant_gives_ragNoValidAnswer(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    llm.answer = lambda request: NO_ANSWER
    response = chain_client(make_client, "mapreduce").post("/ai/rag", json=MANUAL)
    assert response.status_code == 428
    assert response.json()["content"]["label"] == "ragNoValidAnswer"


def test_reduce_runs_in_levels_when_partials_do_not_fit(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    long_partial = "This partial answer is long. " * 30  # ~870 characters: two fit a reduce

    llm.answer = lambda request: (
        long_partial + "[1]" if is_map(request) else "Level: step 1 of the wind turbine manual [1]"
    )
    payload = post_ok(chain_client(make_client, "mapreduce"), MANUAL)
    maps = [r for r in llm.requests if is_map(r)]
    reduces = [r for r in llm.requests if not is_map(r)]
    assert len(reduces) >= 2  # more than one level
    assert all(r.size <= BUDGET for r in llm.requests)
    assert payload["usage"]["llm_calls"] == len(maps) + len(reduces)
    assert payload["content"]["message"] == "Level: step 1 of the wind turbine manual [1]"


def test_refine_requests_are_sequential_and_carry_the_answer_so_far(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    llm.delay = 0.05
    counter = iter(range(100))
    llm.answer = lambda request: f"Answer version {next(counter)} [1]"
    payload = post_ok(chain_client(make_client, "refine"), MANUAL)
    requests = llm.requests
    assert len(requests) >= 4
    for earlier, later in itertools.pairwise(requests):
        assert later.started >= earlier.finished
    for number, request in enumerate(requests[1:]):
        assert f"Answer version {number} [1]" in request.prompt
    assert payload["content"]["message"] == f"Answer version {len(requests) - 1} [1]"
    assert all(r.size <= BUDGET for r in requests)
    assert_packs_are_greedy(requests[1:], BUDGET - 200 * 4)  # later packs keep room for it


def test_refine_cuts_an_answer_so_far_longer_than_its_reserve(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    llm.answer = lambda request: "A very long answer. " * 100  # 2,000 characters
    post_ok(chain_client(make_client, "refine", **{"llm.maxTokens": 50}), MANUAL)
    assert len(llm.requests) >= 2
    assert all(r.size <= BUDGET for r in llm.requests)


# five surveys told apart by their number, the lighthouse and the orchard: more than one
# request holds (in requests of 2,100 characters that keep 600 for the answer so far)
GLACIER = {"query": "Vatnaj glacier survey retreat, lighthouse keeper, apple trees pruned"}
SMALL = {"prompt.max.request.size": 2100, "llm.maxTokens": 150, "chunking.maxFiles": 7}


class CitingModel:
    """A model that answers every step of a chain as asked: the sentences the earlier answers
    in its prompt carry, then the first sentence of each document it is shown, each followed
    by its document's number; but from its `careless_from`-th request on (its chain's last
    step) it drops every bracket."""

    def __init__(self, careless_from: int | None = None) -> None:
        self.careless_from = careless_from
        self.requests = 0
        self.written: list[str] = []  # every sentence it wrote, cited

    def __call__(self, request: RecordedRequest) -> str:
        self.requests += 1
        carried = [sentence for sentence in self.written if sentence in request.prompt]
        shown = [
            f"{FULL_STOP.split(text)[0].rstrip('.')} [{number}]."
            for number, text in SOURCE.findall(request.prompt)
        ]
        self.written += [sentence for sentence in shown if sentence not in self.written]
        answer = " ".join(dict.fromkeys([*carried, *shown]))
        if self.careless_from is not None and self.requests >= self.careless_from:
            return re.sub(r" ?\[\d+\]", "", answer)
        return answer


SOURCE = re.compile(r"^######\n\[(\d+)\] [^\n]*\n([^\n]+)", re.M)
FULL_STOP = re.compile(r"(?<=\.)(?: |\\n)+")  # a source's literal \n too (Datafari's)


def sentences_cited(message: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(claim.text, claim.cited) for claim in claims_of(message)]


@pytest.mark.parametrize("strategy", ["refine", "mapreduce"])
def test_the_answer_keeps_the_citations_its_last_step_dropped(
    make_client: ClientFactory, llm: LLMScript, strategy: str
) -> None:
    """Issue 86: whatever the last step of refine or map-reduce writes, each sentence of the
    answer cites the source that says it: the steps' own citations when the last step keeps
    them, the same ones when it drops them all (grounding off: the chain restores them)."""
    client = chain_client(make_client, strategy, **SMALL)
    llm.answer = careful = CitingModel()
    kept = post_ok(client, GLACIER)
    steps = careful.requests
    assert steps >= 2 and kept["usage"]["llm_calls"] == steps, kept
    expected = sentences_cited(kept["content"]["message"])
    assert len(expected) >= 3 and all(len(cited) == 1 for _, cited in expected), expected
    said = dict(enumerate((d["content"] for d in kept["content"]["documents"]), start=1))
    assert all(text.rstrip(".") in said[n] for text, (n,) in expected), (expected, said)
    llm.answer = CitingModel(careless_from=steps)
    body = post_ok(client, GLACIER)
    message = body["content"]["message"]
    # (map-reduce's maps run at once: the stand-in writes its sentences in the order they came)
    assert sorted(sentences_cited(message)) == sorted(expected), message
    assert body["content"]["documents"] == kept["content"]["documents"]
    assert "grounding" not in body["timings"]  # the chain restored them, not the check
    llm.answer = CitingModel(careless_from=steps)  # streamed: shown first, cited at its end
    with client.stream("POST", "/ai/rag", json={**GLACIER, "stream": True}) as response:
        events = read_events(response)
    streamed = "".join(data["text"] for name, data in events if name == "token")
    done = events[-1][1]
    assert streamed == done["message"], (streamed, done)
    numbers = {f"[{n}]" for _, (n,) in expected}
    restored = re.search(r"\. ((?:\[\d+\] ?)+)$", streamed)
    assert restored and set(restored.group(1).split()) == numbers, streamed


def test_a_chunk_larger_than_a_request_is_split_not_dropped(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    # calls for every piece (the call budget, which leaves the least relevant out, is
    # tests/unit/test_chains.py's): how many pieces there are depends on the templates' length
    overrides = {"chunking.enable": False, "llm.max.calls.per.request": 20}
    client = chain_client(make_client, "mapreduce", **overrides)
    post_ok(client, MANUAL)
    maps = [r for r in llm.requests if is_map(r)]
    assert len(maps) >= 4
    assert all(r.size <= BUDGET for r in maps)
    sent = " ".join(
        block.split("\n", 2)[2].replace("\\n", " ") for r in maps for block in blocks_of(r)
    )
    for step in range(1, 25):
        assert f"Step {step} of the wind turbine maintenance manual" in sent


def test_token_budget_caps_the_request_size(make_client: ClientFactory, llm: LLMScript) -> None:
    client = chain_client(
        make_client,
        "mapreduce",
        **{"prompt.max.request.size": 40000, "prompt.max.request.tokens": 600},
    )
    post_ok(client, MANUAL)
    assert len(llm.requests) > 2
    assert all(r.size <= 2400 for r in llm.requests)


def test_history_goes_into_every_request_trimmed(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = chain_client(
        make_client,
        "mapreduce",
        **{"chat.memory.enabled": True, "chat.memory.history.size": 2},
    )
    history = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "second answer"},
    ]
    post_ok(client, {**MANUAL, "history": history})
    assert len(llm.requests) >= 3
    for request in llm.requests:
        contents = [m["content"] for m in request.messages]
        assert contents[1:3] == ["second question", "second answer"]
        assert "first question" not in contents


def test_rewriting_changes_the_search_but_not_the_question(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"chat.query.rewriting.enabled": True, "chunking.maxFiles": 6})
    llm.then(Step(content="zebra quokka"))
    payload = post_ok(client, {"query": "Which animals graze together at Ravensholt park?"})
    rewrite, answer = llm.requests
    assert "If you cannot generate a search query, return just the number 0." in rewrite.prompt
    assert "- user: Which animals graze together at Ravensholt park?" in rewrite.prompt
    found = {d["id"] for d in payload["content"]["documents"]}
    assert {"zebra-only", "quokka-only"} <= found  # only the rewritten query finds these
    assert answer.prompt.rsplit("Question:", 1)[1].split("\n", 1)[0].strip() == (
        "Which animals graze together at Ravensholt park?"
    )
    assert payload["usage"]["llm_calls"] == 2


@pytest.mark.parametrize("step", [Step(content="0"), Step(content="  "), Step(status=500)])
def test_rewriting_that_fails_keeps_the_original_query(
    make_client: ClientFactory, llm: LLMScript, step: Step
) -> None:
    client = make_client({"chat.query.rewriting.enabled": True})
    llm.then(step)
    payload = post_ok(client, {"query": "lighthouse keeper"})
    assert payload["content"]["documents"][0]["id"] == "lighthouse"


def test_rewriting_uses_the_history_only_with_chat_memory(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    history = [{"role": "user", "content": "Tell me about the Brannoch lighthouse."}]
    for memory, expected in ((False, False), (True, True)):
        llm.reset()
        client = make_client({"chat.query.rewriting.enabled": True, "chat.memory.enabled": memory})
        llm.then(Step(content="lighthouse"))
        post_ok(client, {"query": "When was it electrified?", "history": history})
        assert ("Brannoch lighthouse" in llm.requests[0].prompt) is expected


def test_citations_mark_the_documents_cited(client: TestClient, llm: LLMScript) -> None:
    llm.then(Step(content="Both graze together [1], and the herd migrates [3]."))
    payload = post_ok(client, {"query": "zebra quokka"})
    documents = payload["content"]["documents"]
    assert len(documents) == 3
    assert [d["cited"] for d in documents] == [True, False, True]
    prompt = llm.requests[0].prompt
    for number, document in enumerate(documents, start=1):
        assert f"[{number}] {document['title']}" in prompt
