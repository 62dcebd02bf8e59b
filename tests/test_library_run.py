"""Issue 25's done-when, against real processes: a librarian's folder — a scanned PDF, a mixed PDF, a PDF
with an outline, a PDF with a table, a PPTX, an XLSX, a CSV, an EPUB and a DOCX with a table — dropped
under KNOWLEDGE_ROOT and built by the server `make run` starts (migrate, demo, then `config.serve`: the
web server and the task cluster with its build worker, the real model). Every document is read, OCR'd
pages are counted, and a search over HTTP answers one question per file from that file, with the
section and the page the answer is on.
"""

import re
import shutil
import sys
import time

import httpx
import pytest

from collections_app.models import BuildRun, Document
from collections_app.samples import pdf_bytes, scanned_pdf_bytes, with_outline
from tests.collections.test_office_build import FILES as OFFICE
from tests.collections.test_scanned_folder import MIXED, OUTLINED, SCANNED

from .test_walkthrough import Processes, free_port, process_env, wait_for_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.qcluster,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which("tesseract"), reason="needs Tesseract (make ocr-tools)"),
]

PRICES = [
    [
        ("h", "Price list"),
        ("p", "The prices below hold until the end of March."),
        (
            "t",
            "Part\tDescription\tStock\tPrice\nA-100\tHex bolt M6\t1,200\t0.12\n"
            "B-220\tBearing 608ZZ\t85\t1.90",
        ),
    ]
]

FOLDER = {
    "scan.pdf": scanned_pdf_bytes(pdf_bytes(SCANNED)),
    "mixed.pdf": scanned_pdf_bytes(pdf_bytes(MIXED), pages=[2]),
    "outlined.pdf": with_outline(pdf_bytes(OUTLINED), [("Working hours", 1, 0), ("Remote work", 2, 0)]),
    "prices.pdf": pdf_bytes(PRICES),
    **{name: OFFICE[name] for name in ("deck.pptx", "rooms.xlsx", "codes.csv", "tale.epub", "benefits.docx")},
}

# question: (document, section, a page the answer is on (None: a format without pages), words it holds)
QUESTIONS = {
    "Which car park do staff use, and where do visitors park?": ("scan.pdf", None, 1, "north car park"),
    # OCR'd text has no headings: the scanned page 2 runs on under page 1's heading.
    "When do borrowed books go back to the library?": ("mixed.pdf", "Canteen", 2, "three weeks"),
    "When does outgoing post leave the mail room?": ("mixed.pdf", "Post", 3, "four in the afternoon"),
    "Does remote work need a signed agreement?": ("outlined.pdf", "Remote work", 2, "signed"),
    "What is the price of the bearing 608ZZ?": ("prices.pdf", "Price list", 1, "| B-220 | Bearing 608ZZ |"),
    "When does the Berlin office open?": ("deck.pptx", "Slide 2: Expansion", 2, "March 2027"),
    "How many seats does the Oak room have?": ("rooms.xlsx", "Rooms", 2, "| Oak | 14 | yes |"),
    "Which error code means the coolant reservoir is empty?": ("codes.csv", "Document", None, "E9001"),
    "Who guards the lighthouse on the northern cape?": ("tale.epub", "The Keeper", None, "Old Marta"),
    "How much is the gym subsidy?": ("benefits.docx", "Benefits", None, "| Gym subsidy | 30 euros"),
}


@pytest.fixture
def processes(tmp_path):
    started = Processes(tmp_path)
    yield started
    started.stop()


def test_make_run_builds_a_librarians_folder_and_answers_a_question_per_file_with_its_page(
    processes, tmp_path
):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    root = tmp_path / "knowledge"
    env = process_env(KNOWLEDGE_ROOT=str(root), DATA_DIR=str(tmp_path / "data"))
    processes.run("migrate", "--noinput", env=env)
    demo = processes.run("demo", "--host", "127.0.0.1", "--port", str(port), env=env)
    key = re.search(r"API key:  (\S+)", demo.stderr).group(1)  # said once, labelled
    processes.start("serve", env=env, command=[sys.executable, "-m", "config.serve", f"127.0.0.1:{port}"])
    wait_for_server(base, processes, "serve", timeout=120)

    folder = root / "demo" / "library"
    folder.mkdir(parents=True)
    for name, data in FOLDER.items():
        (folder / name).write_bytes(data)
    auth = {"Authorization": f"Bearer {key}"}
    api = httpx.Client(base_url=f"{base}/api/v1/collections", headers=auth, timeout=120)
    made = api.post("", json={"name": "library", "folder": "library", "built_from": "the library share"})
    assert made.status_code == 201, made.text
    queued = api.post("/library/build")
    assert queued.status_code == 202, queued.text
    build = queued.json()["build"]
    deadline = time.monotonic() + 600  # three scanned pages OCR'd on a shared machine
    while True:
        record = api.get(f"/library/builds/{build}").json()
        if record["status"] not in ("queued", "running") or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert record["status"] == "succeeded", (record, processes.tail("serve"))
    assert record["refused"] == [] and record["documents_read"] == len(FOLDER), record
    assert str(root) not in str(record)
    # The build record counts the OCR'd pages (the admin shows them): scan.pdf's two, mixed.pdf's second.
    assert BuildRun.objects.get(pk=build).ocr_pages == 3
    assert dict(Document.objects.filter(collection__name="library").values_list("name", "ocr_pages")) == {
        name: {"scan.pdf": 2, "mixed.pdf": 1}.get(name, 0) for name in FOLDER
    }

    for question, (document, section, page, words) in QUESTIONS.items():
        asked = {"question": question, "min_score": 0, "around": 0, "most": 3}
        found = api.post("/library/search", json=asked)
        assert found.status_code == 200, found.text
        best = found.json()["paragraphs"][0]
        assert best["document"] == document, (question, best)
        assert words in best["text"], (question, best)
        if section is not None:
            assert best["section"] == section, (question, best)
        if page is None:
            assert best["pages"] is None, (question, best)
        else:
            assert best["pages"][0] <= page <= best["pages"][1], (question, best)
