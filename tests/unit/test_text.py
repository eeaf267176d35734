"""sanitizeInput, cleanContext, chunking and packing, on their own."""

from __future__ import annotations

import pytest

from service.chains.packing import pack_greedy
from service.text import Chunker, clean_context, normalize_question, sanitize_query


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Où est l'été ?", "Ou est l'ete"),
        ("When was it electrified?", "When was it electrified"),  # ? is a wildcard
        ("{!lucene}*:* && title:x || y", "!lucene : title:x y"),
        ("a+b [c] {d} ^e ~f \\g <h> =i #j", "a b c d e f g h i j"),
        ("line\none\ttab\x00nul\x07bell", "line one tab nul bell"),
        ("  many    spaces  ", "many spaces"),
        ("한국어 검색", "한국어 검색"),
        ("", ""),
        (None, ""),
    ],
)
def test_sanitize_query(raw: str | None, expected: str) -> None:
    assert sanitize_query(raw) == expected


# Datafari folds U+0300-U+036F only: other scripts' marks are parts of their letters
MULTILINGUAL = [
    ("hi", "हिन्दी भाषा", "हिन्दी भाषा"),  # virama and vowel signs kept
    ("ar", "اللُّغَة العَرَبِيَّة", "اللُّغَة العَرَبِيَّة"),  # harakat kept
    ("th", "ภาษาไทย กินข้าว", "ภาษาไทย กินข้าว"),  # tone marks kept
    ("vi", "Tiếng Việt", "Tieng Viet"),  # Latin accents folded, as Datafari does
    ("el", "Ελληνικά γλώσσα", "Ελληνικα γλωσσα"),  # tonos folded, as Datafari does
    ("zh", "中文检索", "中文检索"),
    ("ja", "日本語のテキスト", "日本語のテキスト"),  # kana voicing marks recomposed
]


@pytest.mark.parametrize(("language", "raw", "expected"), MULTILINGUAL)
def test_sanitize_query_folds_latin_and_greek_accents_only(
    language: str, raw: str, expected: str
) -> None:
    assert sanitize_query(raw) == expected


def test_sanitize_query_never_leaves_local_params_or_wildcards() -> None:
    hostile = "{!term f=id v=$x}" * 50 + "*:*" * 50 + "\x00" * 50
    cleaned = sanitize_query(hostile)
    assert "{" not in cleaned and "}" not in cleaned and "*" not in cleaned


def test_sanitize_query_cuts_at_500_characters() -> None:
    assert len(sanitize_query("word " * 4000)) <= 500


def test_normalize_question_keeps_accents_but_not_control_characters() -> None:
    assert normalize_question("Où\x00 est\n l'été ?") == "Où est l'été ?"


def test_clean_context_follows_datafari() -> None:
    raw = "a\\b\nc\rd\te\bf'''g######h\"i\""
    assert clean_context(raw) == "a/b\\nc d ef" + "gh`i`"


def test_chunker_respects_size_and_keeps_every_word() -> None:
    text = "\n\n".join(f"Paragraph {n}. " + "word " * (n * 30) for n in range(1, 12))
    chunks = Chunker(size=300).run(text)
    assert len(chunks) > 5
    assert all(len(chunk) <= 300 for chunk in chunks)
    assert " ".join(chunks).split() == text.split()


def test_chunker_prefers_paragraph_boundaries() -> None:
    chunks = Chunker(size=40).run("First paragraph is short.\n\nSecond paragraph is short too.")
    assert chunks == ["First paragraph is short.", "Second paragraph is short too."]


def test_chunker_of_blank_text_is_empty() -> None:
    assert Chunker(size=100).run(" \n\n ") == []


def test_pack_greedy_fills_each_group() -> None:
    assert pack_greedy([3, 3, 3, 10, 1], limit=6) == [[0, 1], [2], [3], [4]]
    assert pack_greedy([], limit=6) == []
