"""`solr-rag eval FILE` (issue 38): an admin's own questions through a running service's
/ai/rag, scored and summed up as bench.answers does; its errors are one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main as cli
from testing.llm_server import LLMScript, Step
from testing.service import ServiceFactory

QUESTIONS = [
    {"question": "When was the lighthouse lamp electrified?", "answers": ["1952"],
     "documents": ["lighthouse"]},
    {"question": "Who painted the lighthouse keeper?", "no_answer": True},
]  # fmt: skip


def _file(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _script(llm: LLMScript) -> None:
    llm.then(
        Step(content="In 1952 [1]."), Step(content="I could not find the answer in the documents.")
    )


def test_eval_scores_the_running_service_on_the_questions(
    service: ServiceFactory, llm: LLMScript, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = service()
    _script(llm)
    questions = _file(tmp_path, [json.dumps(q) for q in QUESTIONS])
    rows = tmp_path / "rows.json"
    assert cli(["eval", str(questions), "--url", base, "--rows", str(rows)]) == 0
    measured = dict(
        line.rsplit(None, 1) for line in capsys.readouterr().out.splitlines() if line.strip()
    )
    assert measured["contained"] == "1.0" and measured["gold source"] == "1.0"
    assert measured["abstained (unanswerable)"] == "1.0"
    assert measured["wrong abstentions"] == "0.0" and measured["citation precision"] == "1.0"
    assert measured["recall"] == "1.0"
    # asked with `stream`, as a chat widget asks: the first words are timed
    assert measured["first words p50 s"] != "-"
    written = json.loads(rows.read_text())
    assert [row["status"] for row in written] == [200, 200]
    assert all(0 < row["first_words"] <= row["seconds"] for row in written)
    # the token events put together are the message kept, for the answer and the abstention
    assert [row["streamed_is_kept"] for row in written] == [True, True]
    assert measured["streamed = kept"] == "1.0"
    assert len(llm.requests) == 2


def test_eval_with_the_services_api_key_and_without(
    service: ServiceFactory, llm: LLMScript, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = service({"api.keys": "eval-secret-key"})
    questions = _file(tmp_path, [json.dumps(QUESTIONS[0])])
    assert cli(["eval", str(questions), "--url", base]) == 2
    assert "--api-key" in capsys.readouterr().err
    llm.then(Step(content="In 1952 [1]."))
    assert cli(["eval", str(questions), "--url", base, "--api-key", "eval-secret-key"]) == 0
    said = capsys.readouterr()
    assert "eval-secret-key" not in said.out + said.err


def test_a_bad_question_file_or_an_absent_service_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _file(tmp_path, [json.dumps(QUESTIONS[0]), '{"question": "q", "answers": "1952"}'])
    assert cli(["eval", str(bad)]) == 2
    assert "line 2: answers must be a list of strings" in capsys.readouterr().err
    good = _file(tmp_path, [json.dumps(QUESTIONS[0])])
    assert cli(["eval", str(good), "--url", "http://127.0.0.1:9"]) == 2
    error = capsys.readouterr().err
    assert "did not answer" in error and len(error.strip().splitlines()) == 1
