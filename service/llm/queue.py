"""What the LLM has to do besides this request: its own queue (what the LLM server reports
of it, and the calls this worker has in flight) and the time it has been taking per call.

- BusyClock: one request's LLM time (concurrent calls count once).
- LlmLoad: one LLM endpoint's calls in flight from this worker, the LLM's queue as the server
  reports it (llama.cpp's and vLLM's `/metrics`, else llama.cpp's `/slots`: polled on demand,
  at most every REFRESH_SECONDS, from the endpoint's own host, failures passed over), and the
  LLM seconds per call it has been delivering (Little's law: a call's time divided by the
  calls the LLM was serving meanwhile, so workers and replicas sharing one LLM measure it as
  one). The door's admission (service.api.door) reads it; the circuit breaker asks it
  whether a timeout came of a queue (`crowded`), which is no failure.
- LlmLoads: the LlmLoad of each endpoint, shared by a worker's requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from service.errors import UpstreamTimeout
from service.metrics import LLM_CALL_SECONDS

log = logging.getLogger(__name__)

REFRESH_SECONDS = 0.5  # a reading of the LLM's queue is read again after this long
FRESH_SECONDS = 3.0  # ... and trusted this long (a server that stopped answering is not idle)
READ_SECONDS = 2.0  # one reading may take this long (llama.cpp answers between two batches)
OBSERVE_WAIT = 0.25  # a question waits this long at most for a reading (later: the next's)
UNREADABLE_SECONDS = 60.0  # a server that has no such endpoint is not asked again for this long
MAX_METRICS_BYTES = 2_000_000
MAX_SLOTS_BYTES = 256_000  # llama.cpp's /slots: about 1 KB a slot
MAX_SLOTS = 256  # more slots than any server runs: not a reading
PACE_SECONDS = 120.0  # the seconds per call: older calls weigh less, over about this long
MIN_MEASURED = 2  # calls answered before their pace is trusted
# the gauges that count an LLM server's requests: (in progress, waiting for a slot)
GAUGES = {
    "llamacpp:requests_processing": "processing",
    "llamacpp:requests_deferred": "waiting",
    "vllm:num_requests_running": "processing",
    "vllm:num_requests_waiting": "waiting",
    "sglang:num_running_reqs": "processing",
    "sglang:num_queue_reqs": "waiting",
}
_SAMPLE = re.compile(r'^([A-Za-z_:][\w:]*)(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)')


class BusyClock:
    """Wall time during which at least one call was in flight: concurrent calls count once,
    so a request's LLM time can be taken from its total to leave the service's own. Each call
    is also observed in solr_rag_llm_call_seconds, and in the endpoint's LlmLoad (when given)."""

    def __init__(self, upstream: str, load: LlmLoad | None = None) -> None:
        self.seconds = 0.0
        self.load = load
        self._upstream = upstream
        self._active = 0
        self._since = 0.0

    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        started = time.perf_counter()
        if self._active == 0:
            self._since = started
        self._active += 1
        try:
            with self.load.call() if self.load else contextlib.nullcontext():
                yield
        finally:
            self._active -= 1
            now = time.perf_counter()
            LLM_CALL_SECONDS.labels(self._upstream).observe(now - started)
            if self._active == 0:
                self.seconds += now - self._since

    def queued(self) -> bool:
        """Whether the LLM had other calls than one to serve while the calls in flight were
        (a timeout then says it is busy, not broken)."""
        return self.load is not None and self.load.crowded()


@dataclass(frozen=True)
class Reading:
    """The LLM's requests as its server reported them."""

    processing: int
    waiting: int
    at: float

    @property
    def total(self) -> int:
        return self.processing + self.waiting


class LlmLoad:
    """One LLM endpoint's load as this worker sees it (the module's docstring)."""

    def __init__(self, endpoint: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.metrics_url, self.slots_url = queue_urls(endpoint)
        self.in_flight = 0  # this worker's calls
        self.measured = 0  # calls answered whose time was measured
        self.reading: Reading | None = None
        self._clock = clock
        self._seconds = 0.0  # calls' seconds, decayed
        self._served = 0.0  # calls the LLM served meanwhile (time-weighted), decayed
        self._since = clock()
        self._area = 0.0  # calls at the LLM integrated over time (call-seconds)
        self._area_at = clock()
        self._crowded_at = -math.inf
        self._starts: list[float] = []  # of this worker's calls in flight
        self._unreadable_until = -math.inf
        self._task: asyncio.Task[None] | None = None

    def reported(self) -> int | None:
        """The requests the LLM server reported in progress or waiting, while fresh."""
        reading = self.reading
        if reading is None or self._clock() - reading.at > FRESH_SECONDS:
            return None
        return reading.total

    def ahead(self) -> int:
        """The calls a new one would find at the LLM: what it reports, or this worker's own
        calls in flight, whichever is more."""
        return max(self.reported() or 0, self.in_flight)

    def seconds_per_call(self) -> float | None:
        """The LLM's seconds per call of late, for every caller (None until measured)."""
        if self.measured < MIN_MEASURED or self._served <= 0:
            return None
        return self._seconds / self._served

    def crowded(self) -> bool:
        """Whether the LLM had more than one call to serve since the oldest call in flight
        started (or has now)."""
        if self.ahead() > 1:
            return True
        return bool(self._starts) and self._crowded_at >= min(self._starts)

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """One call of this worker in flight while the block runs; measured when it is
        answered, or times out (its time then the least the LLM takes); a refused or abandoned
        call says nothing of the LLM's pace."""
        started = self._advance()
        self.in_flight += 1
        self._starts.append(started)
        self._note(max((self.reported() or 0) + 1, self.in_flight))
        area, measured = self._area, False
        try:
            yield
            measured = True
        except UpstreamTimeout:
            measured = True
            raise
        finally:
            ended = self._advance()
            self._note(self.ahead())
            self.in_flight -= 1
            self._starts.remove(started)
            seconds = ended - started
            if measured and seconds > 0:  # the calls the LLM was serving meanwhile, on average
                self._measure(seconds, max(1.0, (self._area - area) / seconds))

    def _advance(self) -> float:
        """The calls at the LLM integrated up to now (at the level since the last change)."""
        now = self._clock()
        self._area += self.ahead() * max(0.0, now - self._area_at)
        self._area_at = now
        return now

    def _note(self, serving: int) -> None:
        if serving > 1:
            self._crowded_at = self._clock()

    def _measure(self, seconds: float, serving: float) -> None:
        now = self._clock()
        decay = math.exp(-max(0.0, now - self._since) / PACE_SECONDS)
        self._since = now
        self._seconds = self._seconds * decay + seconds
        self._served = self._served * decay + serving
        self.measured += 1

    async def observe(self, http: Callable[[], httpx.AsyncClient], token: str, wait: float) -> None:
        """A fresh reading of the LLM's queue, waited for at most `wait` seconds (a slower one
        lands later, for the next question); nothing when the server has none to give."""
        now = self._clock()
        if now < self._unreadable_until:
            return
        if self.reading is not None and now - self.reading.at < REFRESH_SECONDS:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._read(http, token))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):  # wait_for may lose a cancellation on 3.11
                await asyncio.shield(self._task)

    async def _read(self, pool: Callable[[], httpx.AsyncClient], token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        timeout = httpx.Timeout(READ_SECONDS)
        try:
            http = pool()
            # the whole reading within its time, however slowly its bytes come
            async with asyncio.timeout(2 * READ_SECONDS):
                reading = await self._metrics(http, headers, timeout)
                if reading is None:
                    reading = await self._slots(http, headers, timeout)
        except Exception as error:  # a reading is a hint, its failure none of the answer's
            log.debug("the LLM's queue is unreadable: %s", type(error).__name__)
            reading = None
        if reading is None:
            self._unreadable_until = self._clock() + UNREADABLE_SECONDS
            return
        self._advance()
        self.reading = reading
        if reading.total > 1:
            self._crowded_at = reading.at

    async def _metrics(
        self, http: httpx.AsyncClient, headers: dict[str, str], timeout: httpx.Timeout
    ) -> Reading | None:
        text = await _bounded(http, self.metrics_url, headers, timeout)
        counts = metrics_counts(text.decode("utf-8", errors="replace")) if text else None
        if counts is None:
            return None
        return Reading(counts[0], counts[1], self._clock())

    async def _slots(
        self, http: httpx.AsyncClient, headers: dict[str, str], timeout: httpx.Timeout
    ) -> Reading | None:
        text = await _bounded(http, self.slots_url, headers, timeout, MAX_SLOTS_BYTES)
        slots = json.loads(text) if text else None
        if not isinstance(slots, list) or not slots or len(slots) > MAX_SLOTS:
            return None
        busy = sum(1 for slot in slots if isinstance(slot, dict) and slot.get("is_processing"))
        return Reading(busy, 0, self._clock())


async def _bounded(
    http: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    timeout: httpx.Timeout,
    most: int = MAX_METRICS_BYTES,
) -> bytes | None:
    """A 200's body of at most `most` bytes (else None: a reading is a hint, never a load)."""
    async with http.stream("GET", url, headers=headers, timeout=timeout) as got:
        if got.status_code != 200:
            return None
        body = bytearray()
        async for part in got.aiter_bytes():
            body += part
            if len(body) > most:
                return None
    return bytes(body)


class LlmLoads:
    """The LlmLoad of each LLM endpoint (the last few), shared by a worker's requests."""

    def __init__(self, pool: Callable[[], httpx.AsyncClient]) -> None:
        self._pool = pool
        self._loads: dict[str, LlmLoad] = {}

    def of(self, endpoint: str) -> LlmLoad:
        if endpoint not in self._loads:
            if len(self._loads) >= 8:  # an endpoint edited often: forget the oldest
                self._loads.pop(next(iter(self._loads)))
            self._loads[endpoint] = LlmLoad(endpoint)
        return self._loads[endpoint]

    async def observe(self, endpoint: str, token: str, wait: float = OBSERVE_WAIT) -> LlmLoad:
        load = self.of(endpoint)
        await load.observe(self._pool, token, wait)
        return load


def queue_urls(endpoint: str) -> tuple[str, str]:
    """Where the server of an OpenAI-compatible endpoint reports its queue (`/metrics`,
    `/slots`): the endpoint's own scheme, host and port (its token goes nowhere else), its
    path without the API's `/v1`."""
    parts = urlsplit(endpoint)
    path = parts.path.rstrip("/")
    path = path.removesuffix("/v1")
    root = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    return f"{root}/metrics", f"{root}/slots"


def metrics_counts(text: str) -> tuple[int, int] | None:
    """(in progress, waiting) from a Prometheus exposition of llama.cpp, vLLM or SGLang
    (every label set summed); None when it holds neither gauge."""
    found = {"processing": 0.0, "waiting": 0.0}
    seen = False
    for line in text.splitlines():
        if not line.startswith(("llamacpp:", "vllm:", "sglang:")):
            continue
        sample = _SAMPLE.match(line)
        kind = GAUGES.get(sample.group(1)) if sample else None
        if sample is None or kind is None:
            continue
        try:
            value = float(sample.group(2))
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            found[kind] += value
            seen = True
    if not seen:
        return None
    return round(found["processing"]), round(found["waiting"])
