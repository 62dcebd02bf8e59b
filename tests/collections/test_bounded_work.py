"""Bounded work on every file (issue 24, item 8): a real build in a fresh process, its peak memory read.

The stated bounds (docs/collections.md, "Limits"): a file over 100 MiB is refused unread; text past
4,000,000 characters is left out; a package that declares more than 256 MiB unpacked (or a part over
64 MiB) is refused before it is inflated. Under them a single document adds at most
`WORKER_GROWTH_MIB` to the build worker's peak (measured: about 110 for a 100 MB text file, where the
code before this bound reached 2,033 MiB), and the extraction child stays under its address-space cap.
Memory is not time: these bounds hold on a busy machine.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile import zip_bomb_docx

ROOT = Path(__file__).resolve().parents[2]
WORKER_GROWTH_MIB = 320
CHILD_CAP_MIB = 1024  # EXTRACT_MEMORY_MB's default


def write_text(folder: Path) -> None:
    line = b"The quick brown fox jumps over the lazy dog near the river bank today.\n"
    with (folder / "big.txt").open("wb") as out:
        for _ in range(100):
            out.write(line * (1024 * 1024 // len(line)))


def write_html(folder: Path) -> None:
    with (folder / "big.html").open("wb") as out:
        out.write(b"<html><body><nav>menu</nav>")
        for n in range(520_000):
            out.write(
                b"<div><p>Paragraph %d of the long page, with <b>bold</b> and "
                b"<a href='#'>links</a>.</p></div>\n" % n
            )
        out.write(b"</body></html>")


def write_bomb(folder: Path) -> None:
    zip_bomb_docx(folder / "bomb.docx")


@pytest.mark.parametrize(
    ("make", "megabytes", "read", "note"),
    [
        (write_text, 100, 1, "only its first 4,000,000 characters were read"),
        (write_html, 50, 1, "only its first 4,000,000 characters were read"),
        (write_bomb, 2, 0, "bomb.docx was refused (too large)"),
    ],
    ids=["100MB-text", "50MB-html", "docx-bomb"],
)
def test_one_huge_or_hostile_file_keeps_the_build_worker_within_its_stated_bound(
    tmp_path, make, megabytes, read, note
):
    folder = tmp_path / "docs"
    folder.mkdir()
    make(folder)
    size = sum(path.stat().st_size for path in folder.iterdir())
    assert size >= megabytes * 1000 * 1000
    command = [sys.executable, "-m", "tests.worker_peak", str(folder), str(tmp_path / "store.sqlite3")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["read"] == read
    assert any(note in warning for warning in outcome["warnings"])
    assert outcome["peak_mib"] - outcome["before_mib"] < WORKER_GROWTH_MIB, outcome
    assert outcome["child_peak_mib"] < CHILD_CAP_MIB, outcome
