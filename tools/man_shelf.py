"""Render the man-page shelf (bench/answers/man_shelf/): twelve GNU man pages as Markdown, from this
machine's man.

    python tools/man_shelf.py        # writes data/bench/man-shelf/<page>.md (gitignored)

Each page is ``man -P cat`` at 100 columns through ``col -b``; its first line becomes the title
("# ls(1)"), every unindented line a section heading ("## DESCRIPTION"), the footer line is dropped and
tabs become spaces. Nothing else changes: option lists keep their man-page shape (a term line over its
indented description), which is what the parent strategy's list entries are for. The questions in
bench/answers/man_shelf/questions.jsonl (written for this project) mark their answers with verbatim
substrings of these renderings.
"""

import os
import subprocess
from pathlib import Path

PAGES = ("ls", "grep", "sort", "du", "df", "wc", "head", "tail", "xargs", "date", "cp", "chmod")
OUT = Path(__file__).resolve().parents[1] / "data" / "bench" / "man-shelf"


def render(page: str) -> str:
    raw = subprocess.run(
        ["man", "-P", "cat", page],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MANWIDTH": "100"},
    ).stdout
    lines = subprocess.run(["col", "-b"], input=raw, capture_output=True, text=True, check=True).stdout
    lines = lines.expandtabs(8).splitlines()
    out = [f"# {page}(1)", ""]
    for line in lines[1:-1]:  # the header and footer lines
        out.append(f"## {line.strip()}" if line.strip() and not line[0].isspace() else line.rstrip())
    return "\n".join(out).strip() + "\n"


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for page in PAGES:
        (OUT / f"{page}.md").write_text(render(page), encoding="utf-8")
    print(f"{len(PAGES)} pages in {OUT}")
