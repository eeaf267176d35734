"""Datafari 7's `filters.fq`: what a facet UI sends is read and written again; everything else a
browser could send is refused with a reason (issue 47, item 2)."""

from __future__ import annotations

import pytest

from service.config.field_map import SchemaFields
from service.errors import FilterRefused
from service.retrieval.facet_filter import facet_filter

SCHEMA = SchemaFields(
    declared=frozenset(
        {"extension", "source", "last_modified", "title", "allowed_groups", "stored_only"}
    ),
    dynamic=("allow_token_*", "meta_*_s"),
    unsearchable=frozenset({"stored_only"}),
)


@pytest.mark.parametrize(
    ("sent", "written"),
    [
        ("extension:pdf", 'extension:"pdf"'),
        ('source:"web site"', 'source:"web site"'),
        ('{!tag=ext}extension:("pdf" OR docx)', 'extension:("pdf" OR "docx")'),
        ("last_modified:[NOW-7DAYS TO NOW]", 'last_modified:["NOW-7DAYS" TO "NOW"]'),
        (
            "last_modified:[* TO 2020-01-01T00:00:00Z}",
            'last_modified:[* TO "2020-01-01T00:00:00Z"}',
        ),
        ("extension:pdf OR source:web", 'extension:"pdf" OR source:"web"'),
        ("(extension:pdf || extension:odt)", 'extension:"pdf" OR extension:"odt"'),
        ('meta_author_s:"O\\"Brien"', 'meta_author_s:"O\\"Brien"'),
        ("title:/etc/passwd", 'title:"/etc/passwd"'),  # a value, never a regular expression
    ],
)
def test_what_a_facet_sends_is_written_again_quoted(sent: str, written: str) -> None:
    assert facet_filter(sent, SCHEMA) == written


@pytest.mark.parametrize(
    ("sent", "why"),
    [
        ("{!join from=id to=parent_id}title:x", "local parameters"),
        ("{!func}sum(1,1)", "local parameters"),
        ("{!frange l=0}title", "local parameters"),
        ("{!tag=x}{!join from=a to=b}title:x", "local parameters"),
        ("title:${secret}", "macros"),
        ('_query_:"{!lucene}*:*"', "nested queries"),
        ('_val_:"sum(1,1)"', "nested queries"),
        ("allowed_groups:*", "security field"),
        ("allowed_groups:admins", "security field"),
        ("allow_token_document:x", "security field"),
        ("title:secr*", "not a word"),
        ("title:s?cret", "not a word"),
        ("title:secret~2", "not a word"),
        ("title:secret^10", "not a word"),
        ('title:"a b"~3', "proximity"),
        ("nosuchfield:x", "does not search"),
        ("stored_only:x", "does not search"),
        ("extension:pdf AND source:web", "goes on past"),
        ("extension:pdf NOT source:web", "goes on past"),
        ("*:*", "field:value"),
        ("extension:(pdf OR docx", "unclosed parenthesis"),
        ('extension:"pdf', "unclosed quote"),
        ("last_modified:[NOW TO", "without TO"),
        ("last_modified:[NOW NOW]", "without TO"),
        ("", "non-empty"),
        ("x" * 2000, "at most"),
        ("extension:(" + " OR ".join(["a"] * 150) + ")", "more than"),
    ],
)
def test_anything_else_is_refused_saying_why(sent: str, why: str) -> None:
    with pytest.raises(FilterRefused) as refused:
        facet_filter(sent, SCHEMA)
    assert refused.value.status == 400
    assert why in str(refused.value)
