"""PDF and DOCX -> text, kept in pages (PDF) or heading sections (DOCX).

Each page or section becomes one section of the SourceDocument, and passages never cross a
section boundary. A corrupt, encrypted or empty file raises ExtractionFailed, which ingestion
reports and skips while the rest of the batch goes on.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass

from service.errors import ExtractionFailed, TooLarge


@dataclass(frozen=True)
class Extracted:
    """The text by page or section, and the title the file names (empty when it names none:
    the caller falls back to the first line)."""

    title: str
    sections: tuple[str, ...]


def pdf_text(data: bytes) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractionFailed("the PDF is encrypted")
        pages = tuple(tidy_text(page.extract_text() or "") for page in reader.pages)
        title = str((reader.metadata or {}).get("/Title") or "").strip()
    except ExtractionFailed:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as error:
        raise ExtractionFailed(f"not a readable PDF ({type(error).__name__}: {error})") from None
    except Exception as error:  # pypdf raises many kinds on damaged files
        raise ExtractionFailed(f"not a readable PDF ({type(error).__name__})") from None
    pages = tuple(page for page in pages if page)
    if not pages:
        raise ExtractionFailed("the PDF holds no text (a scan needs OCR first)")
    return Extracted(title, pages)


MAX_INFLATED_BYTES = 100 * 1024 * 1024  # a DOCX's parts, once decompressed
MAX_INFLATE_RATIO = 200  # decompressed / compressed; ordinary DOCX files stay under 30


def check_archive(data: bytes) -> None:
    """Refuses a zip (DOCX) whose declared content is too large or too compressed, before any
    of it is decompressed."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            inflated = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a zip: the reader says what it is not
    if inflated > MAX_INFLATED_BYTES:
        raise TooLarge(
            f"it holds {inflated >> 20} MB once decompressed; at most "
            f"{MAX_INFLATED_BYTES >> 20} MB are accepted"
        )
    if inflated > MAX_INFLATE_RATIO * max(len(data), 1):
        raise TooLarge(
            f"it decompresses {inflated // max(len(data), 1)} times over (a zip bomb?); at most "
            f"{MAX_INFLATE_RATIO} times are accepted"
        )


def docx_text(data: bytes) -> Extracted:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    check_archive(data)
    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, ValueError, KeyError, OSError) as error:
        raise ExtractionFailed(f"not a readable DOCX ({type(error).__name__})") from None
    except Exception as error:  # zipfile.BadZipFile, lxml errors...
        raise ExtractionFailed(f"not a readable DOCX ({type(error).__name__})") from None
    sections: list[list[str]] = [[]]
    first_heading = ""
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = (paragraph.style.name if paragraph.style is not None else "") or ""
        if style.startswith(("Heading", "Title")):
            first_heading = first_heading or text
            if sections[-1]:
                sections.append([])
        sections[-1].append(text)
    for table in document.tables:
        rows = [" | ".join(cell.text.strip() for cell in row.cells) for row in table.rows]
        sections.append([row for row in rows if row.strip(" |")])
    parts = tuple("\n\n".join(section) for section in sections if section)
    if not parts:
        raise ExtractionFailed("the DOCX holds no text")
    return Extracted((document.core_properties.title or "").strip() or first_heading, parts)


def tidy_text(text: str) -> str:
    """Runs of spaces as one, blank-line runs as one paragraph break, trimmed."""
    text = re.sub(r"[ \t\r\f\v]+", " ", text)
    return re.sub(r"\s*\n\s*\n\s*", "\n\n", text).strip()
