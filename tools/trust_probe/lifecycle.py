"""tools/trust_probe/probe.py's families for a synced folder's lifecycle (issue 39, findings 1 and 2).

* partial - files copied slowly into a synced folder while sync checks run every 0.3 s, beside files
  with temporary names (`.part`, `~$`, `.crdownload`, dot-files) that never stop existing: failed = a
  check built while a file was being written, or the live version stopped answering, or the finished
  files were not built whole once they stood still; leaked = any answer (API, MCP, /v1) holding text of
  a half-written file or of a temporary one.
* conflicts - new and changed files that contradict a live document of a per-reader collection, round
  after round: failed = a build that put a paragraph in review reported anything but
  `succeeded_with_review`, or the live document stopped answering for a reader who may read it, or the
  conflicting figure answered before a person approved it; leaked = a reader got a paragraph it may
  not read. Then, in a collection that lets the newer replace the older, the approval switches.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from tools.trust_probe.world import Tally, http_client

GUIDE = "# Printers\n\nThe printer on the second floor takes staff badges since March.\n"
TEMPORARY = ("report.md.part", "~$budget.md", "film.md.crdownload", ".draft.md", "notes.md.tmp")
TEMPORARY_WORD = "quokkatemporary"


def _answers(http, base: str, key: str, collection: str, question: str, reader: str | None = None) -> dict:
    """The texts one question gets from the API, MCP and /v1, by surface ("" where a surface failed)."""
    from ragsite.mcp.protocol import LATEST_LEGACY

    auth = {"Authorization": f"Bearer {key}"}
    who = {"reader": reader} if reader else {}
    out = {}
    api = http.post(
        f"{base}/api/v1/collections/{collection}/search",
        json={"question": question, "min_score": 0, **who},
        headers=auth,
    )
    out["api"] = " ".join(p["text"] for p in api.json()["paragraphs"]) if api.status_code == 200 else ""
    mcp = http.post(
        f"{base}/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "search",
                "arguments": {"collection": collection, "question": question, "min_score": 0, **who},
            },
        },
        headers={
            **auth,
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": LATEST_LEGACY,
        },
    )
    try:
        paragraphs = mcp.json()["result"]["structuredContent"]["paragraphs"]
        out["mcp"] = " ".join(p["text"] for p in paragraphs)
    except (ValueError, KeyError, TypeError):
        out["mcp"] = ""
    store = http.post(
        f"{base}/v1/vector_stores/{collection}/search",
        json={"query": question, "ranking_options": {"score_threshold": 0}, **who},
        headers=auth,
    )
    out["v1"] = (
        " ".join(r["content"][0]["text"] for r in store.json()["data"]) if store.status_code == 200 else ""
    )
    return out


def partial(tally: Tally, base: str, world: dict, scratch: Path) -> None:
    from django.conf import settings

    from collections_app.models import BuildRun
    from collections_app.services import sync, sync_check
    from collections_app.services.agents import create_collection, get_agent

    folder = scratch / "deployment-secret-folder" / "partial"
    folder.mkdir()
    (folder / "guide.md").write_text(GUIDE)
    os.environ["KNOWLEDGE_AGENT_A__PARTIAL_FOLDER"] = str(folder)
    collection = create_collection(agent=get_agent("agent-a"), name="partial", method="structure")
    sync.set_sync(collection=collection, every=1)
    previous = settings.SYNC_SETTLE_SECONDS
    settings.SYNC_SETTLE_SECONDS = 0
    first = sync_check.check_source(collection=collection)
    tally.count("partial", failed=first.build is None, note=f"first build: {first.outcome}")
    for name in TEMPORARY:  # present from before the copy, and never read
        (folder / name).write_text(f"# Draft\n\nThe {TEMPORARY_WORD} draft says the printer is broken.\n")
    settings.SYNC_SETTLE_SECONDS = 2
    done = threading.Event()

    def writer() -> None:
        # A slow copy: a new version of guide.md and a new manual, a line every 0.2 s for about 2.4 s.
        with (folder / "guide.md").open("w") as guide, (folder / "manual.md").open("w") as manual:
            for word in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot") * 2:
                guide.write(f"The guide halfcopied goes on about {word}.\n\n")
                manual.write(f"The manual halfcopied describes {word}.\n\n")
                guide.flush()
                manual.flush()
                time.sleep(0.2)
            guide.write("The printer on the second floor takes pin codes from May. ENDOFGUIDE\n")
            manual.write("The manual ends here. ENDOFMANUAL\n")
        done.set()

    thread = threading.Thread(target=writer)
    try:
        with http_client() as http:
            thread.start()
            while not done.is_set():
                check = sync_check.check_source(collection=collection)
                texts = _answers(http, base, world["a_key"], "partial", "which printer takes staff badges")
                texts.update(
                    {
                        f"{k} manual": v
                        for k, v in _answers(
                            http, base, world["a_key"], "partial", "manual describes"
                        ).items()
                    }
                )
                seen = " ".join(texts.values())
                live = all("takes staff badges" in texts[s] for s in ("api", "mcp", "v1"))
                tally.count(
                    "partial",
                    failed=check.build is not None or not live,
                    leaked="halfcopied" in seen or TEMPORARY_WORD in seen,
                    note=f"while copying: build {check.build and check.build.pk}, {check.outcome[:80]}, "
                    f"live on every surface {live}",
                )
                time.sleep(0.3)
            thread.join()
            time.sleep(2.3)  # the settle window, and a little
            check = sync_check.check_source(collection=collection)
            if check.build is not None:
                check.build.refresh_from_db()
            tally.count(
                "partial",
                failed=check.build is None
                or check.build.status != BuildRun.SUCCEEDED
                or sorted(check.new + check.changed) != ["guide.md", "manual.md"],
                note=f"once still: {check.outcome[:120]}",
            )
            for question, marker in (
                ("which printer takes pin codes", "ENDOFGUIDE"),
                ("manual ends", "ENDOFMANUAL"),
            ):
                texts = _answers(http, base, world["a_key"], "partial", question)
                seen = " ".join(texts.values())
                tally.count(
                    "partial",
                    failed=not all(marker in t for t in texts.values()),
                    leaked=TEMPORARY_WORD in seen,
                    note=f"whole after settling: {marker} on {[s for s, t in texts.items() if marker in t]}",
                )
        names = set(collection.documents.values_list("name", flat=True))
        tally.count(
            "partial",
            leaked=bool(names & set(TEMPORARY)),
            note=f"temporary names became documents: {sorted(names & set(TEMPORARY))}",
        )
    finally:
        done.set()
        if thread.is_alive():
            thread.join()
        settings.SYNC_SETTLE_SECONDS = previous


HANDBOOK = (
    "# Passwords\n\nPasswords of staff accounts are rotated every 180 days by the IT desk.\n\n"
    "# Stolen laptops\n\nReport a stolen laptop at once by calling the IT desk on extension 4242.\n"
)
# Each round's new or changed file: a contradiction of the live rotation, and an unrelated section.
ROUNDS = [
    ("password-policy.md", 90, "Visitors join the guest wireless network called Lobby with the badge code."),
    ("it-faq.md", 60, "The help desk answers tickets within one working day of their opening."),
    ("password-policy.md", 30, "Visitors join the guest wireless network called Lobby with the badge code."),
]


def _conflicting(days: int, unrelated: str) -> str:
    return (
        f"# Passwords\n\nPasswords of staff accounts are rotated every {days} days by the IT desk.\n\n"
        f"# More\n\n{unrelated}\n"
    )


def conflicts(tally: Tally, base: str, world: dict, scratch: Path) -> None:
    from collections_app.models import BuildRun, Collection, Label, Paragraph
    from collections_app.services import sync, sync_check
    from collections_app.services.agents import create_collection, get_agent
    from collections_app.services.review import approve_documents

    def made(name: str, on_conflict: str) -> tuple[Collection, Path]:
        folder = scratch / "deployment-secret-folder" / name
        folder.mkdir()
        (folder / "security-handbook.md").write_text(HANDBOOK)
        os.environ[f"KNOWLEDGE_AGENT_A__{name.upper()}_FOLDER"] = str(folder)
        collection = create_collection(
            agent=get_agent("agent-a"), name=name, method="structure", per_reader=True
        )
        collection.on_conflict = on_conflict
        collection.save(update_fields=["on_conflict"])
        sync.set_sync(collection=collection, every=1)
        check = sync_check.check_source(collection=collection)
        check.build.refresh_from_db()
        tally.count("conflicts", failed=check.build.status != BuildRun.SUCCEEDED, note=f"{name}: first build")
        # The stolen-laptop paragraph is bob's alone; the rotation is everyone's (label pub).
        secret, public = Label.objects.get(name="secret"), Label.objects.get(name="pub")
        for paragraph in Paragraph.objects.filter(collection=collection):
            paragraph.labels.add(secret if "4242" in paragraph.text else public)
        return collection, folder

    from django.conf import settings

    # Files written here are whole at once: the settle window is the partial family's, not this one's.
    previous, settings.SYNC_SETTLE_SECONDS = settings.SYNC_SETTLE_SECONDS, 0
    try:
        _conflicts(tally, base, world, made, approve_documents)
    finally:
        settings.SYNC_SETTLE_SECONDS = previous


def _conflicts(tally: Tally, base: str, world: dict, made, approve_documents) -> None:
    from collections_app.models import BuildRun, Collection
    from collections_app.services import sync_check

    readers = ("alice@example.com", "bob@example.com")
    collection, folder = made("conflicts", Collection.KEEP_LIVE)
    with http_client() as http:
        for name, days, unrelated in ROUNDS:
            (folder / name).write_text(_conflicting(days, unrelated))
            check = sync_check.check_source(collection=collection)
            if check.build is not None:
                check.build.refresh_from_db()
            status = check.build.status if check.build is not None else None
            tally.count(
                "conflicts",
                failed=status != BuildRun.SUCCEEDED_WITH_REVIEW,
                note=f"{name} at {days} days: build {status}, {check.outcome[:100]}",
            )
            listed = http.get(
                f"{base}/api/v1/collections/conflicts/builds/{check.build.pk}" if check.build else base,
                headers={"Authorization": f"Bearer {world['a_key']}"},
            )
            tally.count(
                "conflicts",
                failed=listed.status_code != 200
                or listed.json().get("status") != BuildRun.SUCCEEDED_WITH_REVIEW,
                note=f"the API's build status: {listed.status_code} {listed.text[:120]}",
            )
            for reader in readers:
                rotation = _answers(
                    http, base, world["a_key"], "conflicts", "how often are passwords rotated", reader
                )
                laptop = _answers(http, base, world["a_key"], "conflicts", "report a stolen laptop", reader)
                for surface in ("api", "mcp", "v1"):
                    kept = (
                        "every 180 days" in rotation[surface]
                        and f"every {days} days" not in rotation[surface]
                    )
                    # bob may read the laptop paragraph, and a conflict elsewhere never holds it back
                    laptop_ok = "4242" in laptop[surface] if reader.startswith("bob") else True
                    tally.count(
                        "conflicts",
                        failed=not kept or not laptop_ok,
                        leaked=reader.startswith("alice") and "4242" in laptop[surface] + rotation[surface],
                        note=f"{name} {days} days, {reader} on {surface}: {rotation[surface][:100]!r}",
                    )
            unrelated_answer = _answers(http, base, world["a_key"], "conflicts", unrelated, readers[0])
            tally.count(
                "conflicts",
                failed=not all(unrelated[:30] in t for t in unrelated_answer.values()),
                note=f"{name}'s unrelated section did not answer: {unrelated_answer['api'][:100]!r}",
            )

    # A collection where the newer replaces the older once a person approves it.
    replacing, folder = made("replacing", Collection.NEWER_REPLACES)
    (folder / "password-policy.md").write_text(_conflicting(90, ROUNDS[0][2]))
    check = sync_check.check_source(collection=replacing)
    check.build.refresh_from_db()
    tally.count(
        "conflicts",
        failed=check.build.status != BuildRun.SUCCEEDED_WITH_REVIEW,
        note=f"replacing: build {check.build.status}",
    )
    with http_client() as http:
        before = _answers(
            http, base, world["a_key"], "replacing", "how often are passwords rotated", readers[0]
        )
        tally.count(
            "conflicts",
            failed=not all("every 180 days" in t and "every 90 days" not in t for t in before.values()),
            note=f"replacing, before approval: {before}",
        )
        approve_documents(replacing.documents.filter(name="password-policy.md"), by="trust-probe")
        for reader in readers:
            after = _answers(
                http, base, world["a_key"], "replacing", "how often are passwords rotated", reader
            )
            laptop = _answers(http, base, world["a_key"], "replacing", "report a stolen laptop", reader)
            tally.count(
                "conflicts",
                failed=not all("every 90 days" in t and "every 180 days" not in t for t in after.values())
                or (reader.startswith("bob") and not all("4242" in t for t in laptop.values())),
                leaked=reader.startswith("alice") and any("4242" in t for t in laptop.values()),
                note=f"replacing, after approval, {reader}: {after['api'][:100]!r}",
            )
