"""service/api/mcp_progress.py: the progress notifications end with the tool call, whenever
the call ends (Python 3.11's wait_for lost a cancellation that came as a stage arrived: the
sender outlived the answer and the host's request never ended)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from service.api.mcp_progress import reporting


class Host:
    """A request context that asked for progress, recording what it is sent."""

    def __init__(self) -> None:
        self.request_context = SimpleNamespace(meta=SimpleNamespace(progressToken="p-1"))
        self.sent: list[tuple[float, str | None]] = []

    async def report_progress(self, done: float, total: float | None, message: str | None) -> None:
        self.sent.append((done, message))


async def test_the_notifications_end_when_the_answer_ends_even_as_a_stage_arrives() -> None:
    for _ in range(20):
        host = Host()

        async def answer(host: Host = host) -> None:
            async with reporting(host, every=60) as progress:  # type: ignore[arg-type]
                await asyncio.sleep(0.01)  # the sender waits for the next stage
                progress("chain")  # it arrives as the block ends: in the same turn of the loop

        await asyncio.wait_for(answer(), 5)  # before the fix: no end (the next in 60 s)
        assert host.sent == [(1, "started"), (2, "chain")], host.sent


async def test_every_stage_begun_is_told_before_the_result_even_when_the_sender_lags() -> None:
    """A quick answer on a busy machine: its stages begin before the sender has had a turn.
    Each is told, in order, before the block ends (the result follows it)."""
    host = Host()
    async with reporting(host, every=60) as progress:  # type: ignore[arg-type]
        progress("retrieve")  # no turn of the loop between them and the block's end
        progress("chunk")
        progress("chain")
    assert host.sent == [(1, "started"), (2, "retrieve"), (3, "chunk"), (4, "chain")]


async def test_a_stage_is_told_and_a_silence_repeats_it() -> None:
    host = Host()
    async with reporting(host, every=0.2) as progress:  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        progress("retrieve")
        await asyncio.sleep(0.5)
    messages = [message for _, message in host.sent]
    # nothing began since: still working on the last stage, said again every 0.2 s
    assert (
        messages[:2] == ["started", "retrieve"]
        and messages[2:]
        and set(messages[2:]) == {"retrieve"}
    ), messages
    assert [done for done, _ in host.sent] == list(range(1, len(host.sent) + 1))


def test_no_service_code_waits_with_wait_for() -> None:
    """The same loss can strike any `asyncio.wait_for` on 3.11 (a task called off that goes on,
    and whoever awaits it waits for its natural end): service/ bounds its waits with
    `asyncio.timeout`, which keeps the cancellation."""
    service = Path(__file__).resolve().parents[2] / "service"
    calls = [
        f"{path.relative_to(service.parent)}:{number}"
        for path in sorted(service.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "wait_for(" in line and not line.lstrip().startswith("#")
    ]
    assert calls == [], f"use `async with asyncio.timeout(...)` instead: {calls}"
