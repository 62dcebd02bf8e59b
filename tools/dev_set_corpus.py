"""Rebuild the known-answers corpus from the Debian documentation packages it was taken from.

    apt-get install python3-doc postgresql-doc sqlite3-doc
    python tools/dev_set_corpus.py            # rewrite corpus/ from the packages
    python tools/dev_set_corpus.py --check    # only say whether corpus/ still matches

The extracted documents are committed under ``corpus/`` (their licences allow it; see
SOURCES.md), so the benchmark runs from a clean checkout without these packages. This script
is how they were made: it cuts each page's main text out of the package's HTML (no navigation,
sidebars, tables of contents or footers), turns it into text with Markdown headings by the
project's own `collections_app.text.extract` (so headings are found exactly as a build finds them),
drops Sphinx's "¶" anchors, and writes ``<name>.md`` with the page's title as its first heading.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from html import unescape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "bench" / "answers" / "dev_set"
sys.path.insert(0, str(ROOT))

from collections_app.text.extract import extract  # noqa: E402

PYTHON = Path("/usr/share/doc/python3-doc/html")
POSTGRES = Path("/usr/share/doc/postgresql-doc-15/html")
SQLITE = Path("/usr/share/doc/sqlite3")


@dataclass(frozen=True)
class Source:
    name: str  # the file written under corpus/, without ".md"
    package: str
    page: Path
    start: str  # regex: the main text starts at its first match
    end: str  # regex: and stops before the first match after that


PY_START, PY_END = r'<div class="body" role="main">', r'<div class="sphinxsidebar"'
PG_START, PG_END = r'<div class="(?:sect1|chapter)"', r'<div class="navfooter">'
SQ_START, SQ_END = r"<h[12][ >]", r'<p align="center"><small><i>This page last modified'

SOURCES = [
    Source("python-logging-howto", "python3-doc", PYTHON / "howto/logging.html", PY_START, PY_END),
    Source("python-tutorial-errors", "python3-doc", PYTHON / "tutorial/errors.html", PY_START, PY_END),
    Source("python-tutorial-classes", "python3-doc", PYTHON / "tutorial/classes.html", PY_START, PY_END),
    Source("python-venv", "python3-doc", PYTHON / "library/venv.html", PY_START, PY_END),
    Source(
        "postgresql-routine-vacuuming",
        "postgresql-doc",
        POSTGRES / "routine-vacuuming.html",
        PG_START,
        PG_END,
    ),
    Source(
        "postgresql-transaction-isolation",
        "postgresql-doc",
        POSTGRES / "transaction-iso.html",
        PG_START,
        PG_END,
    ),
    Source("postgresql-backup-dump", "postgresql-doc", POSTGRES / "backup-dump.html", PG_START, PG_END),
    Source("postgresql-index-types", "postgresql-doc", POSTGRES / "indexes-types.html", PG_START, PG_END),
    Source("sqlite-wal", "sqlite3-doc", SQLITE / "wal.html", SQ_START, SQ_END),
    Source("sqlite-locking", "sqlite3-doc", SQLITE / "lockingv3.html", SQ_START, SQ_END),
    Source("sqlite-datatypes", "sqlite3-doc", SQLITE / "datatype3.html", SQ_START, SQ_END),
    Source("sqlite-autoincrement", "sqlite3-doc", SQLITE / "autoinc.html", SQ_START, SQ_END),
]

# Tables of contents repeat every heading as a link list; the chunker would take them for text.
_TOC = re.compile(r'<div class="toc">.*?</dl></div>', re.DOTALL)


def _title(html: str) -> str:
    found = re.search(r"<title>(.*?)</title>", html, re.DOTALL)
    title = re.sub(r"\s+", " ", unescape(found.group(1))).strip() if found else ""
    return re.sub(r" [—-] Python [\d.]+ documentation$", "", title)


def convert(source: Source) -> str:
    html = source.page.read_text(encoding="utf-8")
    start = re.search(source.start, html)
    if start is None:
        raise SystemExit(f"{source.name}: no main text in {source.page.name}")
    end = re.compile(source.end).search(html, start.start())
    body = _TOC.sub("", html[start.start() : end.start() if end else len(html)])
    text = extract(f"{source.name}.html", body.encode("utf-8")).text
    text = text.replace("¶", "")
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    title = _title(html)
    first = text.split("\n", 1)[0].lstrip("#").strip()
    if first != title:
        text = f"# {title}\n\n{text}"
    return text + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="compare with corpus/ instead of writing it")
    args = parser.parse_args()
    corpus = HERE / "corpus"
    corpus.mkdir(exist_ok=True)
    differ = 0
    for source in SOURCES:
        if not source.page.exists():
            raise SystemExit(f"{source.page} is missing: apt-get install {source.package}")
        text = convert(source)
        target = corpus / f"{source.name}.md"
        if args.check:
            same = target.exists() and target.read_text(encoding="utf-8") == text
            differ += not same
            print(f"{'same' if same else 'DIFFERS'}  {target.name}")
        else:
            target.write_text(text, encoding="utf-8")
            print(f"{len(text):>7} chars  {target.name}")
    if differ:
        raise SystemExit(f"{differ} document(s) differ from the installed packages")


if __name__ == "__main__":
    main()
