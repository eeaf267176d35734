"""Work asked once for the callers that come together (service.flights)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from service.flights import Flights


def test_callers_of_one_key_wait_for_one_task_and_a_caller_that_leaves_leaves_it_running() -> None:
    async def scenario() -> None:
        flights: Flights[str, int] = Flights()
        started = []
        release = asyncio.Event()

        async def work() -> int:
            started.append(1)
            await release.wait()
            return 42

        leaver = asyncio.ensure_future(flights.join("k", work))
        stayers = [asyncio.ensure_future(flights.join("k", work)) for _ in range(3)]
        await asyncio.sleep(0)
        leaver.cancel()  # its deadline: the others still get the answer
        await asyncio.sleep(0)
        other = asyncio.ensure_future(flights.join("other", work))
        await asyncio.sleep(0)
        release.set()
        assert await asyncio.gather(*stayers, other) == [42, 42, 42, 42]
        assert len(started) == 2  # one task for "k", one for "other"
        assert len(flights) == 0  # none kept once done

    asyncio.run(scenario())


def test_a_failure_reaches_every_caller_and_the_next_caller_asks_again() -> None:
    async def scenario() -> None:
        flights: Flights[str, int] = Flights()
        calls = []

        async def failing() -> int:
            calls.append(1)
            await asyncio.sleep(0)
            raise ValueError("Solr said no")

        results = await asyncio.gather(
            flights.join("k", failing), flights.join("k", failing), return_exceptions=True
        )
        assert [type(r) for r in results] == [ValueError, ValueError] and len(calls) == 1
        with pytest.raises(ValueError):
            await flights.join("k", failing)
        assert len(calls) == 2

    asyncio.run(scenario())


def test_a_failure_nobody_awaits_is_not_logged_as_never_retrieved() -> None:
    async def scenario() -> list[dict]:
        flights: Flights[str, int] = Flights()
        seen: list[dict] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, context: seen.append(context))

        async def failing() -> int:
            await asyncio.sleep(0.01)
            raise ValueError("late")

        caller = asyncio.ensure_future(flights.join("k", failing))
        await asyncio.sleep(0)
        caller.cancel()  # the only caller leaves; the task fails with nobody to tell
        await asyncio.sleep(0.05)
        gc.collect()
        return seen

    assert asyncio.run(scenario()) == []


def test_a_task_whose_loop_closed_before_it_ended_is_forgotten() -> None:
    flights: Flights[str, int] = Flights()

    async def never() -> int:
        await asyncio.Event().wait()
        return 0

    async def leave() -> asyncio.Future[int]:
        caller = asyncio.ensure_future(flights.join("old", never))
        await asyncio.sleep(0)
        return caller

    loop = asyncio.new_event_loop()
    loop.run_until_complete(leave())
    loop.close()  # its task never ended
    assert len(flights) == 1

    async def again() -> int:
        async def one() -> int:
            return 1

        return await flights.join("new", one)

    assert asyncio.run(again()) == 1
    assert len(flights) == 0
