"""Reading pictures of text with Tesseract: scanned PDF pages and image files.

Pure in the house sense: no models, no settings. The limits arrive as an `OcrOptions` (built from
the OCR_* settings by the build, carried into the extraction child as JSON). Tesseract is called as
its command-line program, one process per page with a wall-clock limit, its image given on stdin as a
PGM (uncompressed: encoding a PNG costs more than the pipe saves). The child process this runs in
has its address space capped, and tesseract inherits that cap.

Rendering a PDF page is pypdfium2's (chosen by measurement, docs/decisions/0043); images are
opened with Pillow, whose own pixel limit is replaced by ours.
"""

from __future__ import annotations

import io
import math
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "NotInstalled",
    "OcrOptions",
    "OcrPage",
    "available_languages",
    "missing_languages",
    "ocr_image",
    "ocr_images",
    "render_pdf_pages",
]


@dataclass(frozen=True)
class OcrOptions:
    """How OCR is bounded. ``languages`` is Tesseract's form ("eng", "eng+deu")."""

    languages: str = "eng"
    max_pages: int = 50  # pages OCR'd per document; the rest are reported unread
    page_seconds: float = 30.0  # wall-clock per page, rendering excluded
    max_pixels: int = 12_000_000  # a page is rendered (or an image scaled) to at most this many pixels
    dpi: int = 300  # rendering resolution of a PDF page, lowered when the page would exceed max_pixels

    def as_json(self) -> dict:
        return {
            "languages": self.languages,
            "max_pages": self.max_pages,
            "page_seconds": self.page_seconds,
            "max_pixels": self.max_pixels,
            "dpi": self.dpi,
        }

    @classmethod
    def from_json(cls, data: dict) -> OcrOptions:
        return cls(**data)


class NotInstalled(Exception):
    """Tesseract, or one of the languages asked for, is not installed on this machine."""


@dataclass(frozen=True)
class OcrPage:
    """One page's OCR: its text ("" when nothing was read) and, when it failed, why."""

    text: str
    problem: str = ""


def available_languages() -> set[str]:
    """The language packs Tesseract has; raises NotInstalled when the program is missing."""
    program = shutil.which("tesseract")
    if program is None:
        raise NotInstalled("tesseract is not installed")
    try:
        listed = subprocess.run([program, "--list-langs"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NotInstalled(f"tesseract could not be run ({type(exc).__name__})") from exc
    lines = listed.stdout.decode("utf-8", "replace").splitlines()
    # The first line is a header ("List of available languages in ...", which names a path).
    return {line.strip() for line in lines[1:] if line.strip()}


def missing_languages(languages: str) -> list[str]:
    """The languages of ``languages`` ("eng+deu") Tesseract lacks; raises NotInstalled without it."""
    have = available_languages()
    return [name for name in languages.split("+") if name and name not in have]


def _tesseract(options: OcrOptions) -> str:
    program = shutil.which("tesseract")
    if program is None:
        raise NotInstalled("tesseract is not installed")
    missing = missing_languages(options.languages)
    if missing:
        raise NotInstalled(f"tesseract has no language pack for {', '.join(missing)}")
    return program


def _pgm(image) -> bytes:
    buffer = io.BytesIO()
    image.convert("L").save(buffer, format="PPM")  # mode L is written as binary PGM
    return buffer.getvalue()


def ocr_image(image, options: OcrOptions, *, program: str) -> OcrPage:
    """The text Tesseract reads in one Pillow image (already within ``max_pixels``)."""
    # One thread: the machine's cores belong to many workers, and OpenMP's thread stacks would count
    # against the address-space cap of the child this runs in. Nothing else of the worker's environment
    # is passed on (the program's path is absolute; Debian's tessdata is where tesseract looks).
    env = {"OMP_THREAD_LIMIT": "1", "LC_ALL": "C"}
    dpi = int(image.info.get("ocr_dpi", 300))
    try:
        done = subprocess.run(
            [program, "stdin", "stdout", "-l", options.languages, "--psm", "3", "--dpi", str(dpi)],
            input=_pgm(image),
            capture_output=True,
            timeout=options.page_seconds,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return OcrPage("", f"OCR took longer than {options.page_seconds:g} s")
    except OSError as exc:
        return OcrPage("", f"tesseract could not be run ({type(exc).__name__})")
    if done.returncode != 0:
        return OcrPage("", f"tesseract failed (exit status {done.returncode})")
    return OcrPage(done.stdout.decode("utf-8", "replace"))


def _scale_for(width_pt: float, height_pt: float, options: OcrOptions) -> float:
    """Points to pixels: the configured resolution, lowered so the page stays within max_pixels."""
    scale = options.dpi / 72
    area = max(width_pt * height_pt, 1.0)
    if area * scale * scale > options.max_pixels:
        scale = math.sqrt(options.max_pixels / area)
    return scale


def render_pdf_pages(
    data: bytes, numbers: list[int], options: OcrOptions, *, on_page: Callable[[int], None] | None = None
) -> dict[int, OcrPage]:
    """OCR the pages ``numbers`` (1-based) of the PDF ``data``, at most ``options.max_pages`` of them.

    Pages past the limit get an `OcrPage` naming the limit. Raises NotInstalled before rendering
    anything when Tesseract or a language is missing."""
    import pypdfium2

    program = _tesseract(options)
    read: dict[int, OcrPage] = {}
    document = pypdfium2.PdfDocument(data)
    try:
        for count, number in enumerate(numbers):
            if count >= options.max_pages:
                read[number] = OcrPage("", f"over the limit of {options.max_pages} OCR pages a document")
                continue
            if on_page is not None:
                on_page(count + 1)
            page = document[number - 1]
            try:
                width, height = page.get_size()
                scale = _scale_for(width, height, options)
                bitmap = page.render(scale=scale, grayscale=True)
                image = bitmap.to_pil()
                image.info["ocr_dpi"] = max(1, round(scale * 72))
                read[number] = ocr_image(image, options, program=program)
                del image, bitmap
            finally:
                page.close()
    finally:
        document.close()
    return read


def ocr_images(
    data: bytes, options: OcrOptions, *, on_page: Callable[[int], None] | None = None
) -> list[OcrPage]:
    """OCR an image file (PNG, JPEG, TIFF; a multi-page TIFF is one page a frame).

    An image larger than ``max_pixels`` is scaled down to it before reading; one over sixteen times
    that is not decoded at all (ValueError), since decoding is what would cost the memory."""
    from PIL import Image

    program = _tesseract(options)
    Image.MAX_IMAGE_PIXELS = None  # our limit below, not Pillow's warning
    image = Image.open(io.BytesIO(data))
    pages: list[OcrPage] = []
    frames = getattr(image, "n_frames", 1)
    for frame in range(frames):
        if frame >= options.max_pages:
            pages.append(OcrPage("", f"over the limit of {options.max_pages} OCR pages a document"))
            continue
        image.seek(frame)
        if on_page is not None:
            on_page(frame + 1)
        width, height = image.size
        if width * height > 16 * options.max_pixels:
            raise ValueError(f"an image of {width}x{height} pixels is over the OCR pixel limit")
        if hasattr(image, "draft") and image.format == "JPEG":
            image.draft("L", (width, height))
        picture = image.convert("L")
        if width * height > options.max_pixels:
            shrink = math.sqrt(options.max_pixels / (width * height))
            picture = picture.resize((max(1, int(width * shrink)), max(1, int(height * shrink))))
        dpi = image.info.get("dpi", (300, 300))[0] or 300
        picture.info["ocr_dpi"] = max(70, min(1200, round(float(dpi))))
        pages.append(ocr_image(picture, options, program=program))
    return pages
