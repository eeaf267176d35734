"""The French long-page set (bench/data/french-pages, its README): Debian's French manuals,
one page a document, and the questions written against them.

    python -m bench.french_pages --build   # pages.jsonl again, from the pinned packages

`--build` fetches the packages with `apt-get download` (Debian's registry), reads their HTML
and writes each page of 1,000 words or more as text; the questions are not built, they were
written (questions.jsonl). `load()` is what the benchmarks read.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "data" / "french-pages"
MIN_WORDS = 1000


@dataclass(frozen=True)
class Manual:
    key: str
    package: str
    version: str
    folder: str  # where its French HTML is, inside the package
    url: str  # where a page is published, {} its name
    left_out: tuple[str, ...] = ()


MANUALS = (
    Manual("hb", "debian-handbook", "11.20220922", "usr/share/doc/debian-handbook/html/fr-FR",
           "https://debian-handbook.info/browse/fr-FR/stable/{}.html",
           ("index", "sect.acknowledgments")),
    Manual("dr", "developers-reference-fr", "12.18", "usr/share/developers-reference/fr",
           "https://www.debian.org/doc/manuals/developers-reference/fr/{}.html",
           ("developers-reference", "index", "search")),
    Manual("mg", "maint-guide-fr", "1.2.53", "usr/share/doc/maint-guide-fr/html",
           "https://www.debian.org/doc/manuals/maint-guide/{}.html", ("index.fr",)),
    Manual("faq", "debian-faq-fr", "11.1", "usr/share/doc/debian/FAQ/fr",
           "https://www.debian.org/doc/manuals/debian-faq/{}.html", ("index.fr",)),
    Manual("ref", "debian-reference-fr", "2.100", "usr/share/debian-reference",
           "https://www.debian.org/doc/manuals/debian-reference/{}.html", ("index.fr",)),
)  # fmt: skip

_BLOCKS = frozenset({"p", "div", "br", "li", "h1", "h2", "h3", "h4", "pre", "tr", "dt", "dd"})


class _Text(HTMLParser):
    """A page's title and its text, a line break before each block, scripts left out."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.title = ""
        self._skipped = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("script", "style"):
            self._skipped += 1
        elif tag == "title":
            self._in_title = True
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skipped -= 1
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skipped:
            self.parts.append(data)


def page_text(html: str) -> tuple[str, str]:
    """(title, text) of one HTML page, blank lines between blocks."""
    parser = _Text()
    parser.feed(html)
    text = re.sub(r"[ \t]+", " ", "".join(parser.parts))
    return parser.title.strip(), re.sub(r"\n\s*\n+", "\n\n", text).strip()


def build(folder: Path = FOLDER) -> int:
    """pages.jsonl from the pinned packages; the number of pages written."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="french-pages-") as work:
        for manual in MANUALS:
            subprocess.run(["apt-get", "download", f"{manual.package}={manual.version}"],
                           cwd=work, check=True, capture_output=True)  # fmt: skip
            deb = next(Path(work).glob(f"{manual.package}_*.deb"))
            unpacked = Path(work) / manual.key
            subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
            for path in sorted((unpacked / manual.folder).glob("*.html*")):
                name = path.name.removesuffix(".gz").removesuffix(".html")
                if manual.key == "ref" and not name.endswith(".fr"):
                    continue  # the reference ships every language in one folder
                raw = path.read_bytes()
                html = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
                title, text = page_text(html)
                words = len(text.split())
                if words < MIN_WORDS or name in manual.left_out:
                    continue
                rows.append({"id": f"{manual.key}/{name}", "title": title,
                             "url": manual.url.format(name), "package": manual.package,
                             "words": words, "content": text})  # fmt: skip
    with (folder / "pages.jsonl").open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)


def load(folder: Path = FOLDER) -> tuple[list[dict], list[dict]]:
    """(pages, questions) as the files hold them."""
    pages = [json.loads(line) for line in (folder / "pages.jsonl").open(encoding="utf-8")]
    asked = [json.loads(line) for line in (folder / "questions.jsonl").open(encoding="utf-8")]
    return pages, asked


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true", help="write pages.jsonl again")
    parser.add_argument("--to", type=Path, default=FOLDER, help="the folder to write it in")
    args = parser.parse_args(argv)
    if args.build:
        print(f"{build(args.to)} pages written to {args.to / 'pages.jsonl'}")
    pages, asked = load()
    print(f"{len(pages)} pages, {sum(p['words'] for p in pages)} words, {len(asked)} questions")


if __name__ == "__main__":
    main()
