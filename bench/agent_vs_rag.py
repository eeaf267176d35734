"""Datafari 7's MCP agentic request against action=rag, side by side (issue 83, item 1).

Against a running service (`make run`, or `solr-rag serve --with-model-server --samples`),
each question is asked through POST /Datafari/rest/v2.0/ai as Datafari's MCP server's agentic
tool sends it (its exact body: ../shared/datafari7-clients.md) and as action=rag with the same
fields; the seconds each took and the LLM calls it made (the answer's `usage.llm_calls`) are
printed side by side. The actions alternate and so do the languages, so that neither reads the
other's whole prompt from llama.cpp's prompt cache (only the instructions they share).

    python -m bench.agent_vs_rag [--url http://127.0.0.1:8000] [--rounds 2]
                                 [--llm-metrics http://127.0.0.1:8002/metrics]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import httpx

PATH = "/Datafari/rest/v2.0/ai"
QUESTIONS = (
    ("en", "What does the assert statement do?"),
    ("fr", "Que fait l'instruction assert ?"),
)
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def body(action: str, question: str, lang: str | None) -> dict[str, Any]:
    """Datafari's MCP agentic tool's body (AgenticRequest: agent generic, lang when given),
    or the same fields asking action=rag."""
    sent: dict[str, Any] = {"query": question, "action": action}
    if action == "agentic":
        sent["agent"] = "generic"
    if lang is not None:
        sent["lang"] = lang
    return {**sent, "filters": {}, "history": []}


def idle(client: httpx.Client, metrics: str | None, quiet: float = 6.0) -> None:
    """Wait until llama.cpp (its /metrics) has answered nothing for `quiet` seconds: another
    client's requests would be timed with ours (a shared box)."""
    if not metrics:
        return
    since = time.monotonic()
    while time.monotonic() - since < quiet:
        text = client.get(metrics).text
        busy = any(line.startswith("llamacpp:requests_processing") and not line.endswith(" 0")
                   for line in text.splitlines())  # fmt: skip
        if busy:
            since = time.monotonic()
        time.sleep(0.5)


def asked(client: httpx.Client, url: str, sent: dict[str, Any]) -> dict[str, Any]:
    while True:
        started = time.perf_counter()
        response = client.post(url + PATH, json=sent, headers=HEADERS)
        seconds = time.perf_counter() - started
        if response.status_code != 503:  # the local model full (another client): later
            break
        time.sleep(float(response.headers.get("Retry-After", "5")))
    response.raise_for_status()
    answer = response.json()
    content = answer.get("content", {})
    return {
        "seconds": round(seconds, 1),
        "calls": answer.get("usage", {}).get("llm_calls"),
        "status": answer.get("status"),
        "message": (content.get("message") or content.get("error", {}).get("reason", ""))[:90],
        "sources": [source.get("id") for source in content.get("sources", [])][:3],
        "abstained": bool(answer.get("abstained")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--first",
        choices=("rag", "agentic"),
        default="rag",
        help="the action asked first in the first round (llama.cpp then holds its prompts: "
        "the other reads them from its cache; a fresh server times the first one cold)",
    )
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", action="store_true", help="print each answer as JSON too")
    parser.add_argument(
        "--llm-metrics",
        default="",
        help="llama.cpp's /metrics (e.g. http://127.0.0.1:8002/metrics): each request waits "
        "until it is idle",
    )
    args = parser.parse_args()
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with httpx.Client(timeout=args.timeout) as client:
        for turn in range(args.rounds):
            # --first's action first in even rounds, the other in odd ones
            actions = ("rag", "agentic") if args.first == "rag" else ("agentic", "rag")
            actions = actions if turn % 2 == 0 else actions[::-1]
            for action in actions:
                for lang, question in QUESTIONS:
                    sent = body(action, question, lang if lang != "en" else None)
                    idle(client, args.llm_metrics)
                    result = asked(client, args.url, sent)
                    rows.setdefault((lang, action), []).append(result)
                    if args.json:
                        print(json.dumps({"lang": lang, "action": action, **result}))
    print(f"{'question':<38} {'rag s':>7} {'calls':>5} {'agent s':>8} {'calls':>5} {'ratio':>6}")
    for lang, question in QUESTIONS:
        for rag, agent in zip(rows[(lang, "rag")], rows[(lang, "agentic")], strict=True):
            ratio = agent["seconds"] / rag["seconds"] if rag["seconds"] else float("nan")
            print(
                f"{question[:38]:<38} {rag['seconds']:>7.1f} {rag['calls']!s:>5} "
                f"{agent['seconds']:>8.1f} {agent['calls']!s:>5} {ratio:>5.2f}x"
            )
    for (lang, action), results in rows.items():
        last = results[-1]
        print(f"{lang} {action:<8} {last['status']} abstained={last['abstained']} "
              f"sources={last['sources']} {last['message']!r}")  # fmt: skip


if __name__ == "__main__":
    main()
