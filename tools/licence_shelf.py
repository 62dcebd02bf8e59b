"""Render the licence shelf (bench/answers/licence_shelf/): fourteen licence texts from this machine's
/usr/share/common-licenses, half as plain text and half as PDF, several of them close versions of one
another (GPL 1/2/3, LGPL 2/2.1/3, MPL 1.1/2.0, GFDL 1.2/1.3).

    python tools/licence_shelf.py        # writes data/bench/licence-shelf/ (gitignored)

It stands in for a shelf of licences an organisation keeps, where the common failure is the right
passage of the wrong version. Each question in bench/answers/licence_shelf/questions.jsonl (written for
this project) names its document, and a hit counts only from that document. The PDFs are printed by
headless Chromium from a page where every short one-line block is a heading and every other block a
paragraph, so their paragraphs are split by real headings as an office's PDFs are.
"""

import html
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path("/usr/share/common-licenses")
OUT = Path(__file__).resolve().parents[1] / "data" / "bench" / "licence-shelf"
AS_TEXT = ("GPL-1", "GPL-2", "LGPL-2", "LGPL-3", "MPL-1.1", "GFDL-1.2", "BSD")
AS_PDF = ("GPL-3", "LGPL-2.1", "MPL-2.0", "Apache-2.0", "GFDL-1.3", "Artistic", "CC0-1.0")
HEADING_CHARS = 70


def page(text: str) -> str:
    """The licence as HTML: its first block the title (in larger type, as a licence's PDF sets it), short
    one-line blocks headings, the rest paragraphs."""
    blocks = [block.strip() for block in text.replace("\f", "\n").split("\n\n") if block.strip()]
    out = []
    for number, block in enumerate(blocks):
        lines = [line.strip() for line in block.splitlines()]
        if number == 0 and all(len(line) <= HEADING_CHARS for line in lines):
            out.append(f"<h1>{'<br>'.join(html.escape(line) for line in lines)}</h1>")
        elif len(lines) == 1 and len(lines[0]) <= HEADING_CHARS:
            out.append(f"<h2>{html.escape(lines[0])}</h2>")
        else:
            out.append(f"<p>{html.escape(' '.join(lines))}</p>")
    return "<!doctype html><meta charset=utf-8><body>" + "\n".join(out) + "</body>"


def print_pdf(markup: str, target: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "page.html"
        source.write_text(markup, encoding="utf-8")
        subprocess.run(
            [
                shutil.which("chromium") or "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-pdf-header-footer",
                f"--user-data-dir={scratch}/profile",
                f"--print-to-pdf={target}",
                source.as_uri(),
            ],
            check=True,
            capture_output=True,
        )


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name in AS_TEXT:
        shutil.copyfile(SOURCE / name, OUT / f"{name}.txt")
    for name in AS_PDF:
        print_pdf(page((SOURCE / name).read_text(encoding="utf-8")), OUT / f"{name}.pdf")
    print(f"{len(AS_TEXT) + len(AS_PDF)} licences in {OUT}")
