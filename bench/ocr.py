"""OCR and PDF reading, measured on scans made from known text.

    python bench/ocr.py                  # everything below; about 10 minutes on 2 shared cores
    python bench/ocr.py --pages 8        # the renderer comparison on that many pages (default 8)

The known text is the dev set's corpus (``bench/known_answers/corpus/``, twelve manual chapters). Each
chapter is set as a born-digital PDF by `samples.pdf_bytes` (headings in bold, 45 lines an A4 page),
then "scanned": every page rendered at 300 dpi and stored as a picture with no text layer
(`samples.scanned_pdf_bytes`). Measured:

1. **Renderers** for OCR on the first ``--pages`` scanned pages: pypdfium2 (in process), poppler's
   ``pdftoppm`` (a process a page, when installed) and the page's own embedded picture taken out with
   pypdf. Seconds a page to get the picture and the character error rate (CER) tesseract reaches on it.
2. **CER of the scans**: each chapter's OCR text (ragsite's extractor, OCR on) against its born-digital
   text, heading marks left out of both.
3. **found@5** of the dev set's questions (default settings) on collections built from: the Markdown
   originals; the born-digital PDFs read as before this change (pypdf's text, pages joined; written
   out as .txt); the same PDFs read now (headings, paragraphs); the scans with OCR; and the scans
   without OCR (OCR_LANGUAGES empty: every chapter refused, so nothing is found).
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness  # noqa: E402

WORK = harness.ROOT / "data" / "bench" / "ocr"
LINES_PER_PAGE = 45


def blocks_of(markdown: str) -> list[tuple[str, str]]:
    blocks = []
    for part in markdown.split("\n\n"):
        lines = [line.strip() for line in part.splitlines() if line.strip()]
        if not lines:
            continue
        if lines[0].startswith("#"):
            blocks.append(("h", lines[0].lstrip("# ")))
            lines = lines[1:]
        if lines:
            blocks.append(("p", " ".join(lines)))
    return blocks


def paginate(blocks: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Blocks into A4 pages as `pdf_bytes` sets them (60 / 86 characters a line, a blank line after each)."""
    pages, page, used = [], [], 0
    for kind, text in blocks:
        lines = textwrap.wrap(text, 60 if kind == "h" else 86)
        while lines:
            room = LINES_PER_PAGE - used - 1
            if room < (2 if kind == "p" else 3):
                pages.append(page)
                page, used = [], 0
                continue
            taken, lines = lines[:room], lines[room:]
            page.append((kind, " ".join(taken)))
            used += len(taken) + 1
    if page:
        pages.append(page)
    return pages


def words(text: str) -> str:
    return " ".join(line.lstrip("# ") for line in text.splitlines() if line.strip())


def make_corpus() -> dict[str, tuple[bytes, bytes]]:
    from collections_app.samples import pdf_bytes, scanned_pdf_bytes

    made = {}
    for path in sorted((harness.KNOWN_ANSWERS / "corpus").glob("*.md")):
        digital = pdf_bytes(paginate(blocks_of(path.read_text(encoding="utf-8"))))
        made[path.stem] = (digital, scanned_pdf_bytes(digital, dpi=300))
    return made


def old_pdf_text(data: bytes) -> str:
    """What the PDF reader gave before this change: pypdf's text of each page, pages joined by a
    blank line."""
    from pypdf import PdfReader

    return "\n\n".join(
        t.strip() for t in (p.extract_text() or "" for p in PdfReader(io.BytesIO(data)).pages) if t.strip()
    )


def compare_renderers(corpus, pages: int) -> None:
    import pypdfium2
    from PIL import Image
    from pypdf import PdfReader

    from collections_app.metrics import character_error_rate
    from collections_app.text.ocr import OcrOptions, ocr_image

    options = OcrOptions()
    program = shutil.which("tesseract")
    chosen = []
    for name, (digital, scan) in corpus.items():
        truth_pages = [p.extract_text() or "" for p in PdfReader(io.BytesIO(digital)).pages]
        chosen += [(name, scan, number, truth_pages[number]) for number in range(len(truth_pages))]
    step = max(1, len(chosen) // pages)
    chosen = chosen[::step][:pages]

    def pdfium(scan, number):
        page = pypdfium2.PdfDocument(scan)[number]
        return page.render(scale=300 / 72, grayscale=True).to_pil()

    def poppler(scan, number):
        done = subprocess.run(
            ["pdftoppm", "-gray", "-r", "300", "-f", str(number + 1), "-l", str(number + 1), "-"],
            input=scan,
            capture_output=True,
            check=True,
        )
        return Image.open(io.BytesIO(done.stdout))

    def embedded(scan, number):
        return PdfReader(io.BytesIO(scan)).pages[number].images[0].image

    renderers = {"pypdfium2": pdfium, "pdftoppm (poppler)": poppler, "pypdf embedded image": embedded}
    if shutil.which("pdftoppm") is None:
        del renderers["pdftoppm (poppler)"]
    print(f"\n## Renderers: {len(chosen)} scanned pages at 300 dpi, tesseract {options.languages}\n")
    print("| renderer | seconds a page to the picture (median) | OCR seconds a page (median) | CER |")
    print("|---|---|---|---|")
    for label, render in renderers.items():
        render_times, ocr_times, errors = [], [], []
        for _name, scan, number, truth in chosen:
            started = time.perf_counter()
            picture = render(scan, number)
            picture.load()
            render_times.append(time.perf_counter() - started)
            picture.info["ocr_dpi"] = 300
            started = time.perf_counter()
            read = ocr_image(picture, options, program=program)
            ocr_times.append(time.perf_counter() - started)
            errors.append((character_error_rate(read.text, truth), len(" ".join(truth.split()))))
        cer = sum(e * n for e, n in errors) / sum(n for _e, n in errors)
        print(
            f"| {label} | {sorted(render_times)[len(render_times) // 2]:.3f} | "
            f"{sorted(ocr_times)[len(ocr_times) // 2]:.2f} | {cer:.4f} |"
        )


def corpus_cer(corpus) -> None:
    from collections_app.metrics import character_error_rate
    from collections_app.text.extract import extract
    from collections_app.text.ocr import OcrOptions

    print("\n## CER: each chapter's scan read by OCR against its born-digital text\n")
    print("| chapter | pages | OCR seconds a page | CER |")
    print("|---|---|---|---|")
    total_errors = total_chars = total_pages = 0
    total_seconds = 0.0
    for name, (digital, scan) in corpus.items():
        truth = words(extract(name + ".pdf", digital).text)
        started = time.perf_counter()
        read = extract(name + ".pdf", scan, ocr=OcrOptions())
        seconds = time.perf_counter() - started
        cer = character_error_rate(words(read.text), truth)
        total_errors += cer * len(truth)
        total_chars += len(truth)
        total_pages += read.ocr_pages
        total_seconds += seconds
        print(f"| {name} | {read.ocr_pages} | {seconds / max(1, read.ocr_pages):.2f} | {cer:.4f} |")
    print(
        f"| **all** | {total_pages} | {total_seconds / max(1, total_pages):.2f} "
        f"| {total_errors / total_chars:.4f} |"
    )


def found_at_5(corpus) -> None:
    import os

    from bench.known_answers import evaluate

    questions, controls = harness.load_items()
    folders = {"markdown originals": harness.KNOWN_ANSWERS / "corpus"}
    for kind in ("before", "digital", "scanned"):
        (WORK / kind).mkdir(parents=True, exist_ok=True)
    for name, (digital, scan) in corpus.items():
        (WORK / "before" / f"{name}.txt").write_text(old_pdf_text(digital), encoding="utf-8")
        (WORK / "digital" / f"{name}.pdf").write_bytes(digital)
        (WORK / "scanned" / f"{name}.pdf").write_bytes(scan)
    folders["born-digital PDFs, read as before"] = WORK / "before"
    folders["born-digital PDFs, read now"] = WORK / "digital"
    folders["scans, OCR"] = WORK / "scanned"
    print("\n## found@5 of the dev set (default settings, hybrid)\n")
    print("| documents | paragraphs | found@1 | found@5 | found@10 |")
    print("|---|---|---|---|---|")
    for number, (label, folder) in enumerate(folders.items()):
        agent, collection = harness.built_collection(f"ocr-{number}", folder)
        result = evaluate(agent, collection, questions, [], mode="hybrid", floor=None)
        found = result["found"]
        print(
            f"| {label} | {collection.built.passages} | {found[1]:.3f} | {found[5]:.3f} | {found[10]:.3f} |"
        )
    os.environ["OCR_LANGUAGES"] = ""
    from django.conf import settings

    settings.OCR_LANGUAGES = ""
    from collections_app.text import bounded

    bounded._shared.clear()
    try:
        harness.built_collection("ocr-off", WORK / "scanned")
    except SystemExit as refused:
        print(f"| scans, OCR off | 0 (build refused: {str(refused)[:80]}…) | 0 | 0 | 0 |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=8)
    args = parser.parse_args()
    harness.setup("ocr")
    started = time.perf_counter()
    corpus = make_corpus()
    pages = sum(len(__import__("pypdf").PdfReader(io.BytesIO(d)).pages) for d, _s in corpus.values())
    print(f"# {len(corpus)} chapters, {pages} A4 pages; the machine is shared (2 cores, other agents)")
    compare_renderers(corpus, args.pages)
    corpus_cer(corpus)
    found_at_5(corpus)
    print(f"\n# {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
