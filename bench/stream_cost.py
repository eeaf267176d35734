"""What reading a streamed answer costs the event loop (issue 70; the review of 2026-11-29):
the scaffolding's reader (service.chains.scaffolding_stream.Unscaffolded) and the echo
check's hold (service.rag.stages.echo.EchoHold), fed 4 characters a piece as an LLM streams,
against the same text read whole. CPU seconds of this process; a cost that grows with the
square of the answer's length shows as 16 times the 4 KB row at 16 KB.

    python -m bench.stream_cost
"""

from __future__ import annotations

import time

from service.chains.scaffolding_reading import without_scaffolding
from service.chains.scaffolding_stream import Unscaffolded
from service.rag.gate import Gate
from service.rag.stages.echo import EchoCheck, EchoHold

QUESTION = "When was the lamp electrified?"
SOURCES = ["The lamp burned paraffin."]
TEXTS = {
    "a run of 1,000 spaces": "a" + " " * 1000 + "b. done.",
    "4 KB of spaces, one line": "x " + " " * 4000 + "answer x",
    "4 KB of prose, lines": "The lamp was lit at dusk and burned oil.\n" * 100,
    "16 KB of prose, lines": "The lamp was lit at dusk and burned oil.\n" * 400,
    "16 KB of prose, one line": "The lamp was lit at dusk and burned oil. " * 400,
}
ECHO = {
    "4 KB echo, held": "The lamp was electrified when it was electrified. " * 80,
    "16 KB echo, held": "The lamp was electrified when it was electrified. " * 320,
}


def _seconds(run: object) -> float:
    started = time.process_time()
    run()  # type: ignore[operator]
    return time.process_time() - started


def main() -> None:
    print(f"{'answer':28s} {'whole s':>8s} {'streamed s':>11s}")
    for name, text in TEXTS.items():
        whole = _seconds(lambda text=text: without_scaffolding(text))
        reader = Unscaffolded()

        def streamed(text: str = text, reader: Unscaffolded = reader) -> None:
            for at in range(0, len(text), 4):
                reader.feed(text[at : at + 4])
            reader.flush()

        print(f"{name:28s} {whole:8.3f} {_seconds(streamed):11.3f}")
    check = EchoCheck.of(QUESTION, SOURCES)
    for name, text in ECHO.items():
        gate = Gate(holds=[EchoHold(check)])

        def held(text: str = text, gate: Gate = gate) -> None:
            for at in range(0, len(text), 4):
                gate.feed(text[at : at + 4], ())
            gate.flush(())

        print(f"{name:28s} {'':8s} {_seconds(held):11.3f}")


if __name__ == "__main__":
    main()
