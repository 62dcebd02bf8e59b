"""Every file is bounded: extraction runs in a child process with a wall-clock limit and a memory
cap, the size is checked before reading, and a name the store cannot hold is refused by name.
Each hostile file is refused with its reason category in bounded time; the build goes on."""

import logging
import os
import resource
import time

import pytest

from collections_app.models import BuildRun, Document
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.text.bounded import BoundedExtractor, Limits, stderr_summary
from collections_app.text.extract import BAD_NAME, REFUSAL_REASONS, TIMED_OUT, TOO_LARGE, Unreadable
from tests.hostile import long_path, looping_pdf, non_utf8_name, sparse_file, zip_bomb_docx

LIMITS = Limits(seconds=3.0, memory_bytes=256 * 1024 * 1024)

# These ran with the database tests for a while because, last in the full suite, fresh children
# seemed to die at once: the worker's select() on pipes numbered past 1024 (see the descriptor test).


@pytest.fixture
def extractor():
    bounded = BoundedExtractor(LIMITS)
    yield bounded
    bounded.close()


def _refused(extractor, name, data) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(Unreadable) as raised:
        extractor.extract(name, data)
    return raised.value.category, time.monotonic() - started


def test_a_docx_that_expands_to_hundreds_of_megabytes_is_too_large(extractor, tmp_path):
    bomb = zip_bomb_docx(tmp_path / "bomb.docx", expanded_mb=300).read_bytes()
    assert len(bomb) < 2 * 1024 * 1024
    category, seconds = _refused(extractor, "bomb.docx", bomb)
    assert category == TOO_LARGE and seconds < LIMITS.seconds + 2


@pytest.fixture
def roomy_extractor():
    # The looping PDF also grows (about 35-60 MB a second here): with room to spare, it is the
    # clock that stops it, whatever the machine's speed.
    bounded = BoundedExtractor(Limits(seconds=LIMITS.seconds, memory_bytes=2048 * 1024 * 1024))
    yield bounded
    bounded.close()


def test_a_pdf_that_loops_is_stopped_at_the_time_limit(roomy_extractor, tmp_path):
    pdf = looping_pdf(tmp_path / "loop.pdf").read_bytes()
    assert len(pdf) < 100_000
    category, seconds = _refused(roomy_extractor, "loop.pdf", pdf)
    assert category == TIMED_OUT and LIMITS.seconds <= seconds < LIMITS.seconds + 2


def test_after_a_killed_child_the_next_document_is_read_by_a_fresh_one(roomy_extractor, tmp_path):
    assert (
        _refused(roomy_extractor, "loop.pdf", looping_pdf(tmp_path / "loop.pdf").read_bytes())[0] == TIMED_OUT
    )
    assert (
        roomy_extractor.extract("after.md", b"# After\n\nStill reading.").text == "# After\n\nStill reading."
    )


def test_after_a_child_reaches_its_memory_cap_the_next_document_is_read_by_a_fresh_one(extractor, tmp_path):
    bomb = zip_bomb_docx(tmp_path / "bomb.docx", expanded_mb=300).read_bytes()
    assert _refused(extractor, "bomb.docx", bomb)[0] == TOO_LARGE
    assert extractor.extract("after.md", b"# After\n\nStill reading.").text == "# After\n\nStill reading."


def test_ordinary_refusals_keep_their_reason_and_category(extractor):
    with pytest.raises(Unreadable) as raised:
        extractor.extract("scan.pdf", b"%PDF-1.4 not really")
    assert raised.value.reason  # said by extract, carried across the process boundary
    assert raised.value.category is None or raised.value.category in REFUSAL_REASONS


def test_a_dead_childs_cause_is_logged_without_paths_and_kept_out_of_the_refusal(caplog):
    # An 8 MB cap leaves no room to read a 12 MB document: the child dies with a MemoryError.
    starved = BoundedExtractor(Limits(seconds=LIMITS.seconds, memory_bytes=8 * 1024 * 1024))
    try:
        with caplog.at_level(logging.WARNING, logger="ragsite.builds"), pytest.raises(Unreadable) as raised:
            starved.extract("big.md", b"# Big\n\n" + b"word " * 2_400_000)
    finally:
        starved.close()
    assert raised.value.category == TOO_LARGE and "MemoryError" not in raised.value.reason
    [line] = [r.getMessage() for r in caplog.records if "extraction child failed" in r.getMessage()]
    assert "before answering any document" in line and "exit status 1" in line and "MemoryError" in line
    assert "/" not in line  # the traceback's file paths stay out of the log


def test_a_worker_holding_over_1024_descriptors_still_reads_through_its_child():
    # Late in the full suite the test process held ~2,700 descriptors (each index mapping keeps one),
    # so a fresh child's pipes got numbers past select()'s FD_SETSIZE of 1024: select raised
    # ValueError, read as "the child crashed", and every document was refused. A long-lived worker
    # mapping many collections' indexes gets there too.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("this system allows fewer than 1,200 descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        bounded = BoundedExtractor(LIMITS)
        try:
            assert (
                bounded.extract("after.md", b"# After\n\nStill reading.").text == "# After\n\nStill reading."
            )
        finally:
            bounded.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_stderr_summary_keeps_the_last_line_and_drops_paths():
    traceback = (
        b'Traceback (most recent call last):\n  File "/srv/ragsite/.venv/lib/python3.12/runpy.py", line 198\n'
        b"    return _run_code(code)\n           ^^^^^^^^^^^^^^\n"
        b"OSError: [Errno 24] Too many open files: '/srv/ragsite/data/knowledge/a.pdf'\n"
    )
    summary = stderr_summary(traceback)
    assert "OSError: [Errno 24] Too many open files: '<path>'" in summary and "/srv" not in summary
    assert stderr_summary(b"") == "nothing on stderr"
    assert stderr_summary(b"x" * 5000 + b"\nline\nforged\n") == "'forged'"  # one line, escaped, bounded


@pytest.mark.django_db
def test_a_build_refuses_each_hostile_file_by_name_in_bounded_time_and_reads_the_rest(
    agent, knowledge_folder, settings, caplog
):
    settings.EXTRACT_TIMEOUT, settings.EXTRACT_MEMORY_MB = (
        LIMITS.seconds,
        LIMITS.memory_bytes // (1024 * 1024),
    )
    forged = "inj\n2026-12-01 07:00:00,000 CRITICAL ragsite.fake forged line.exe"
    folder = knowledge_folder("hostile", {"good.md": "# Good\n\nThe canteen opens at eight.", forged: "x"})
    zip_bomb_docx(folder / "bomb.docx", expanded_mb=300)
    looping_pdf(folder / "loop.pdf")
    sparse_file(folder / "big.txt")
    bad = non_utf8_name(folder)
    deep = long_path(folder)
    assert len(deep) >= 600
    collection = create_collection(agent=agent, name="hostile", method="structure")

    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="ragsite.builds"):
        run = build_collection(collection=collection)
    seconds = time.monotonic() - started

    assert run.status == BuildRun.SUCCEEDED, run.error
    assert seconds < 30
    shown_bad = bad.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    assert "bomb.docx" in run.refused and "loop.pdf" in run.refused and "big.txt" in run.refused
    assert shown_bad in run.refused and any(name.startswith("d" * 50) for name in run.refused)
    assert len(run.refused) == 6 and forged in run.refused
    assert Document.objects.get(collection=collection, name="good.md").status == Document.ACTIVE
    categories = {"bomb.docx": TOO_LARGE, "loop.pdf": TIMED_OUT, "big.txt": TOO_LARGE, shown_bad: BAD_NAME}
    for name, category in categories.items():
        assert run.refusal_reasons[name] == category
        assert any(w.startswith(f"{name} was refused ({category})") for w in run.warnings), (
            name,
            run.warnings,
        )
    # Names the store cannot hold get no Document row; the log shows them escaped.
    assert not Document.objects.filter(collection=collection, name__startswith="ddd").exists()
    assert "'bad\ufffdname.md'" in caplog.text and "\udcff" not in caplog.text
    # A name cannot forge a log line (docs/decisions/0054): it is logged escaped.
    assert "\nCRITICAL" not in caplog.text and "inj\\n2026" in caplog.text
