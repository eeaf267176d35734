"""Files -> SourceDocuments: text, Markdown, HTML, PDF and DOCX, with a title and a stable id."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

from service.errors import ExtractionFailed, TooLarge, UnsupportedFile
from service.ingest.office import docx_text, pdf_text, tidy_text

TEXT_SUFFIXES = frozenset({".txt", ".text", ".md", ".markdown", ".rst"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
_OFFICE_READERS = {".pdf": pdf_text, ".docx": docx_text}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | frozenset(_OFFICE_READERS)
MAX_TITLE_CHARS = 200
# what one file may yield (checked where it is extracted, in the worker process): a small file
# can inflate to far more text (a 0.7 MB DOCX to 92 MB) or pages (a 3 MB PDF of 10,000), and
# each passage costs an embedding; POST /documents takes documents of the same size
MAX_DOCUMENT_CHARS = 5_000_000
MAX_DOCUMENT_SECTIONS = 5_000  # pages or sections, each at least one passage


@dataclass(frozen=True)
class SourceDocument:
    """One document as FileShare stores it."""

    id: str
    title: str
    url: str
    content: str
    # ISO 639 code; empty: Solr's language identifier detects it at indexing
    language: str = ""
    last_modified: datetime = field(default_factory=lambda: datetime.now(UTC))
    allowed_groups: tuple[str, ...] = ()  # none: public
    denied_groups: tuple[str, ...] = ()
    # pages (PDF) or heading sections (DOCX): passages never cross their boundaries
    sections: tuple[str, ...] = ()
    # more Solr fields, on the document and its passages (a KAITO index's name, metadata)
    fields: tuple[tuple[str, str], ...] = ()

    def to_solr(self) -> dict[str, object]:
        document: dict[str, object] = {
            "id": self.id,
            "title": self.title,
            "url": self.url,
            "content": self.content,
            **({"language": self.language} if self.language else {}),
            "last_modified": self.last_modified.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "content_hash": hashlib.sha256(self.content.encode("utf-8")).hexdigest(),
        }
        if self.allowed_groups:
            document["allowed_groups"] = list(self.allowed_groups)
        if self.denied_groups:
            document["denied_groups"] = list(self.denied_groups)
        document.update(self.fields)
        return document


__all__ = ["SourceDocument", "extract_bytes"]


def extract_bytes(
    name: str,
    data: bytes,
    *,
    document_id: str,
    url: str = "",
    language: str = "",
    last_modified: datetime | None = None,
) -> SourceDocument:
    """A file's content (uploaded or read) as a SourceDocument; its kind comes from `name`."""
    suffix = Path(name).suffix.lower()
    sections: tuple[str, ...] = ()
    if suffix in _OFFICE_READERS:
        extracted = _OFFICE_READERS[suffix](data)
        sections = extracted.sections
        content = "\n\n".join(sections)
        title = extracted.title or _first_line_title(content, markdown=False)
    elif suffix in HTML_SUFFIXES:
        title, content = _html_text(data.decode("utf-8", errors="replace"))
    elif suffix in TEXT_SUFFIXES:
        raw = data.decode("utf-8", errors="replace")
        title, content = _first_line_title(raw, markdown=suffix in {".md", ".markdown"}), raw
    else:
        raise UnsupportedFile(f"{name}: {suffix or 'no suffix'} files are not supported")
    if not content.strip():
        raise ExtractionFailed(f"{name}: no text to index (the file is empty or blank)")
    if len(content) > MAX_DOCUMENT_CHARS:
        raise TooLarge(
            f"{name}: its text ({len(content):,} characters) is over the {MAX_DOCUMENT_CHARS:,} "
            "a document may hold; split it"
        )
    if len(sections) > MAX_DOCUMENT_SECTIONS:
        raise TooLarge(
            f"{name}: {len(sections):,} pages or sections, over the {MAX_DOCUMENT_SECTIONS:,} "
            "a document may have; split it"
        )
    return SourceDocument(
        id=document_id,
        title=title[:MAX_TITLE_CHARS] or Path(name).stem,
        url=url,
        content=content.strip(),
        language=language,
        last_modified=last_modified or datetime.now(UTC),
        sections=sections,
    )


_MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")


def _first_line_title(text: str, *, markdown: bool) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if markdown:
        for line in lines:
            heading = _MARKDOWN_HEADING.match(line)
            if heading:
                return heading.group(1)[:MAX_TITLE_CHARS]
    return lines[0][:MAX_TITLE_CHARS] if lines else ""


class _HtmlText(HTMLParser):
    _SKIPPED = frozenset({"script", "style", "noscript", "template", "head"})
    _BLOCKS = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
         "pre", "table", "ul", "ol", "dd", "dt", "blockquote", "hr"}
    )  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self.first_heading = ""
        self._stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._stack.append(tag)
        if tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass
        if tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if "title" in self._stack:
            self.title += data
            return
        if any(tag in self._SKIPPED for tag in self._stack):
            return
        if not self.first_heading and "h1" in self._stack:
            self.first_heading = data.strip()
        self.parts.append(data)


def _html_text(html: str) -> tuple[str, str]:
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    title = (parser.title.strip() or parser.first_heading)[:MAX_TITLE_CHARS]
    return title, tidy_text("".join(parser.parts))
