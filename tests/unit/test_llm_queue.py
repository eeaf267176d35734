"""What an LLM server reports of its queue, read (service.llm.queue): llama.cpp's, vLLM's and
SGLang's gauges, from the endpoint's own host."""

from __future__ import annotations

import pytest

from service.llm.queue import LlmLoad, metrics_counts, queue_urls

LLAMA_CPP = """# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 12
llamacpp:n_busy_slots_per_decode 3.9
"""
VLLM = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="a b{c}"} 3.0
vllm:num_requests_running{engine="1",model_name="a b{c}"} 2.0
vllm:num_requests_waiting{engine="0",model_name="a b{c}"} 7.0
vllm:num_requests_waiting_by_reason{reason="capacity"} 99
vllm:request_success_total{finished_reason="stop"} 123
"""


@pytest.mark.parametrize(
    ("text", "counts"),
    [(LLAMA_CPP, (4, 12)), (VLLM, (5, 7)), ("sglang:num_queue_reqs 2\n", (0, 2)),
     ("process_cpu_seconds_total 3\n", None), ("llamacpp:requests_deferred NaN\n", None),
     ("", None)],
)  # fmt: skip
def test_the_queue_gauges_are_read(text: str, counts: tuple[int, int] | None) -> None:
    assert metrics_counts(text) == counts


@pytest.mark.parametrize(
    ("endpoint", "root"),
    [("http://127.0.0.1:8002/v1", "http://127.0.0.1:8002"),
     ("http://127.0.0.1:8002/v1/", "http://127.0.0.1:8002"),
     ("https://llm.example:8443/serving/v1/", "https://llm.example:8443/serving"),
     ("https://api.example/v1?x=1", "https://api.example")],
)  # fmt: skip
def test_the_queue_is_asked_of_the_endpoint_s_own_host(endpoint: str, root: str) -> None:
    assert queue_urls(endpoint) == (f"{root}/metrics", f"{root}/slots")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_seconds_per_call_are_shared_by_the_calls_the_llm_served_meanwhile() -> None:
    """Little's law: two calls at once, answered in 2 s each by an LLM that serves one at a
    time at 1 s a call, measure 1 s a call, not 2; a lone slow call measures its own time."""
    clock = Clock()
    load = LlmLoad("http://127.0.0.1:8002/v1", clock)
    assert load.seconds_per_call() is None and not load.crowded()
    with load.call(), load.call():
        assert load.ahead() == 2 and load.crowded()
        clock.now += 2
    assert load.seconds_per_call() == pytest.approx(1.0)
    assert not load.crowded()  # nothing in flight now
    clock.now += 1
    with load.call():
        assert not load.crowded()  # alone: a timeout now would be the LLM's failure


def test_a_cold_worker_beside_a_busy_shared_llm_still_tries_one_question() -> None:
    """The review's: a worker whose pace is unknown, beside another that keeps the shared LLM
    busy, refused every question, so it never measured a call and stayed cold for good. It
    tries one at a time (its own only), and refuses a second while the LLM is crowded."""
    from service.api.llm_work import LlmPace, refusal
    from service.llm.queue import Reading

    now = 100.0
    load = LlmLoad("http://127.0.0.1:8002/v1", lambda: now)
    load.reading = Reading(processing=2, waiting=0, at=now)  # the other replica's calls
    pace = LlmPace()
    assert refusal(pace, load, deadline=120.0) is None
    pace.in_progress = 1  # that one admitted, not answered yet
    assert refusal(pace, load, deadline=120.0) is not None
