"""Only stable files are read: a file still being written is left for later, its previous version answering.

The interfaces review: a file copied slowly into a synced folder was built half-written and served
truncated for two minutes, with a build.succeeded webhook."""

import os
import threading
import time

import pytest

from collections_app.models import BuildRun
from collections_app.services import sync, sync_check
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from collections_app.services.sources import (
    Source,
    StillWriting,
    collection_sources,
    folder_entries,
    is_partial_name,
    read_bounded,
)

pytestmark = pytest.mark.django_db

GUIDE = "# Guide\n\nThe printer on the second floor takes badges since March.\n"


def answer(collection, question: str) -> str:
    found = search_collection(agent=collection.agent, collection=collection, question=question, min_score=0)
    return " ".join(p["text"] for p in found["paragraphs"])


def age(path, seconds: float) -> None:
    """Make a file look untouched for ``seconds``."""
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.mark.parametrize(
    "name",
    ["report.docx.part", "~$budget.docx", "film.mp4.crdownload", "notes.md.tmp", "draft.md~", "x.partial"],
)
def test_temporary_and_partial_names_are_partial(name):
    assert is_partial_name(name) and is_partial_name(f"sub/{name}")
    assert not is_partial_name("report.docx") and not is_partial_name("partial-results.md")


def test_temporary_partial_and_hidden_files_are_never_read(agent, knowledge_folder):
    folder = knowledge_folder(
        "docs",
        {
            "guide.md": GUIDE,
            "guide.md.part": "# Guide\n\nThe printer on the second",
            "~$budget.docx": b"\x00lock",
            "video.crdownload": b"\x00\x01",
            "notes.md.tmp": "# Notes\n\nhalf",
            ".guide.md.swp": "swap",
        },
    )
    assert [e.name for e in folder_entries(folder)] == ["guide.md"]
    collection = create_collection(agent=agent, name="docs")
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED and run.documents_total == 1
    assert list(collection.documents.values_list("name", flat=True)) == ["guide.md"]


def test_a_file_written_to_while_it_is_read_is_not_taken(tmp_path):
    path = tmp_path / "growing.md"
    path.write_text("# Growing\n\nThe first half of the file")

    def read_while_the_writer_appends(limit: int) -> bytes:
        with path.open("rb") as handle:
            data = handle.read(limit)
        with path.open("a") as handle:  # the writer goes on after the read
            handle.write(" and the second half.\n")
        return data

    source = Source(name="growing.md", read=read_while_the_writer_appends, size=lambda: 0, path=path)
    with pytest.raises(StillWriting):
        read_bounded(source)


def test_a_build_waits_for_a_file_just_written_and_reads_it_whole(agent, knowledge_folder, settings):
    """A person copies a folder and builds at once: the build waits out the window, then reads."""
    settings.SYNC_SETTLE_SECONDS = 1
    knowledge_folder("docs", {"guide.md": GUIDE})
    collection = create_collection(agent=agent, name="docs")
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED and run.warnings == []
    assert "takes badges" in answer(collection, "which printer takes badges")


def test_a_build_keeps_the_previous_version_of_a_file_still_being_written(agent, knowledge_folder, settings):
    folder = knowledge_folder("docs", {"guide.md": GUIDE})
    collection = create_collection(agent=agent, name="docs")
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    settings.SYNC_SETTLE_SECONDS = 2
    stop = threading.Event()

    def writer() -> None:  # two files written to every 0.1 s until the build is over
        with (folder / "guide.md").open("w") as guide, (folder / "new.md").open("w") as new:
            guide.write(GUIDE.replace("badges", "pin codes"))
            new.write("# Canteen\n\nThe canteen opens")
            while not stop.is_set():
                for handle in (guide, new):
                    handle.write(" and more")
                    handle.flush()
                time.sleep(0.1)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.3)
        run = build_collection(collection=collection)
    finally:
        stop.set()
        thread.join()
    assert run.status == BuildRun.SUCCEEDED
    assert "guide.md is still being written: its previous version keeps answering" in " ".join(run.warnings)
    assert "new.md is still being written: not read yet" in " ".join(run.warnings)
    assert list(collection.documents.values_list("name", flat=True)) == ["guide.md"]
    printer = answer(collection, "which printer takes badges")
    assert "takes badges" in printer and "pin codes" not in printer
    # Once both stand still they are read whole.
    age(folder / "guide.md", 60)
    age(folder / "new.md", 60)
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    assert "pin codes" in answer(collection, "which printer takes pin codes")
    assert sorted(collection.documents.values_list("name", flat=True)) == ["guide.md", "new.md"]


def test_a_file_growing_while_sync_checks_run_is_built_only_once_it_stands_still(
    agent, knowledge_folder, settings, django_capture_on_commit_callbacks
):
    folder = knowledge_folder("docs", {"guide.md": GUIDE})
    collection = create_collection(agent=agent, name="docs")
    sync.set_sync(collection=collection, every=5)

    def check() -> sync_check.Check:
        with django_capture_on_commit_callbacks(execute=True):
            found = sync_check.check_source(collection=collection)
        if found.build is not None:
            found.build.refresh_from_db()
        return found

    assert check().build.status == BuildRun.SUCCEEDED
    settings.SYNC_SETTLE_SECONDS = 3
    done = threading.Event()

    def writer() -> None:
        # A slow copy: a new version of guide.md and a new file, a line every 0.2 s for about 2.5 s.
        with (folder / "guide.md").open("w") as guide, (folder / "manual.md").open("w") as manual:
            for word in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot") * 2:
                guide.write(f"The guide goes on about {word}, still being copied.\n\n")
                manual.write(f"The manual describes {word} while the copy runs.\n\n")
                guide.flush()
                manual.flush()
                time.sleep(0.2)
            guide.write("The printer on the second floor takes pin codes from May. END OF GUIDE\n")
            manual.write("The manual ends here. END OF MANUAL\n")
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    seen = []
    try:
        while not done.is_set():
            found = check()
            seen.append(found)
            assert found.build is None, "a file still being written was built"
            assert "takes badges" in answer(collection, "which printer takes badges")
            time.sleep(0.3)
    finally:
        thread.join()
    assert seen and all("still being written" in found.outcome for found in seen)
    assert all(found.new == [] and found.changed == [] for found in seen)
    state = collection.sync.__class__.objects.get(collection=collection)
    assert (state.next_check_at - state.last_checked_at).total_seconds() <= 4  # looked at again soon
    # Standing still for the window: the next check builds both files whole.
    time.sleep(3.2)
    found = check()
    assert (found.new, found.changed) == (["manual.md"], ["guide.md"])
    assert found.build.status == BuildRun.SUCCEEDED
    assert "END OF GUIDE" in answer(collection, "which printer takes pin codes from May")
    assert "END OF MANUAL" in answer(collection, "where does the manual end")
    assert BuildRun.objects.filter(collection=collection).count() == 2
    assert collection_sources(collection)  # the folder as the build sees it: both, nothing partial
