"""The world tools/trust_probe/probe.py probes: two agents, readers, a per-reader collection labelled after
its build, a memory; the HTTP client every family asks with, and the tally each family counts into."""

from __future__ import annotations

import os
from pathlib import Path

SECRET_WORDS = ("Hooli", "ninety million", "zanzibarquux", "SECRETSALARY")

FAMILIES = (
    "isolation",
    "oracles",
    "overlap",
    "ids",
    "scores",
    "wideoverlap",
    "legacyvar",
    "edit",
    "floor",
    "bodies",
    "files",
    "stale",
    "secrets",
    "busy",
    "bigfile",
    "diskfull",
    "numbers",
    "partial",
    "conflicts",
    "rls",
)


class Tally(dict):
    def __init__(self):
        super().__init__(
            {family: {"tried": 0, "held": 0, "failed": 0, "leaked": 0, "notes": []} for family in FAMILIES}
        )

    def count(self, family: str, *, failed: bool = False, leaked: bool = False, note: str = "") -> None:
        row = self[family]
        row["tried"] += 1
        row["held"] += int(not (failed or leaked))
        row["failed"] += int(failed)
        row["leaked"] += int(leaked)
        if (failed or leaked) and note:
            row["notes"].append(note[:300])


def http_client():
    import httpx

    return httpx.Client(timeout=60)


def alice_asks(question: str, around: int, most: int, floor: float | None = None) -> dict:
    """A search body for reader alice (label pub); no floor given: the collection's own applies."""
    body = {"question": question, "reader": "alice@example.com", "around": around, "most": most}
    if floor is not None:
        body["min_score"] = floor
    return body


LABELLED = (
    "# Plans\n\n"
    + "Our public leave policy gives everyone twenty days a year and is generous and clear. " * 6
    + "\n\nRestricted merger note: the acquisition target is Hooli and the price is ninety million. "
    + "The codename zanzibarquux covers it and SECRETSALARY figures are attached. " * 3
    + "\n\n"
    + "The canteen opens at eight and closes at four on every weekday of the year. " * 6
    + "\n\nRestricted: the Hooli deal closes in March; the SECRETSALARY band rises by ninety million. " * 2
    + "\n\n"
    + "Travel is booked in standard class and mileage is paid at the usual public rate. " * 6
)


def build_world(scratch: Path) -> dict:
    """Two agents, readers, a per-reader collection labelled after its build, memories."""
    from collections_app.models import Label, Paragraph
    from collections_app.services.agents import create_agent, create_collection, create_reader
    from collections_app.services.builds import build_collection
    from memory_app.services import store_memory

    folder = scratch / "deployment-secret-folder"
    (folder / "alpha").mkdir(parents=True)
    (folder / "labelled").mkdir()
    (folder / "alpha" / "leave.md").write_text(
        "# Leave\n\nAlpha's private note: carry-over is capped at 7 days."
    )
    (folder / "labelled" / "plans.md").write_text(LABELLED)
    os.environ["KNOWLEDGE_AGENT_A__ALPHA_FOLDER"] = str(folder / "alpha")
    os.environ["KNOWLEDGE_AGENT_A__LABELLED_FOLDER"] = str(folder / "labelled")

    a, a_key = create_agent(agent_id="agent-a")
    b, b_key = create_agent(agent_id="agent-b")
    alpha = create_collection(agent=a, name="alpha")
    labelled = create_collection(
        agent=a, name="labelled", method="structure", size=400, overlap=150, per_reader=True
    )
    build_collection(collection=alpha)
    build_collection(collection=labelled)
    public, secret = Label.objects.create(name="pub"), Label.objects.create(name="secret")
    paragraphs = list(Paragraph.objects.filter(collection=labelled).order_by("ordinal"))
    previous_end = 0
    for paragraph in paragraphs:  # labelled after the build, as a librarian does
        # Secret when its own text (past what the overlap copied from the piece before) is restricted.
        own = paragraph.text[max(0, previous_end - paragraph.start_char) :]
        hidden = any(word in own for word in (*SECRET_WORDS, "Restricted"))
        paragraph.labels.add(secret if hidden else public)
        previous_end = paragraph.end_char
    create_reader(external_id="alice@example.com", labels=["pub"])
    create_reader(external_id="bob@example.com", labels=["pub", "secret"])
    memory, _nodes = store_memory(agent=a, text="Agent A's memory: the vault code is 4417.")
    readable = [p for p in paragraphs if p.labels.filter(name="pub").exists()]
    hidden = [p for p in paragraphs if not p.labels.filter(name="pub").exists()]
    return {
        "a_key": a_key,
        "b_key": b_key,
        "memory": memory.pk,
        "folder": str(folder),
        "readable": readable,
        "hidden": hidden,
    }


def hidden_only(world) -> list[str]:
    """20-character stretches held only by secret pieces (the owner of a character is the earliest
    piece covering it, since overlap copies the end of a piece into the next)."""
    pieces = sorted(world["readable"] + world["hidden"], key=lambda p: p.ordinal)
    hidden_ids = {p.pk for p in world["hidden"]}
    owner: dict[int, int] = {}
    for piece in reversed(pieces):
        for position in range(piece.start_char, piece.end_char):
            owner[position] = piece.pk
    stretches = []
    for piece in world["hidden"]:
        own = [i for i in range(piece.start_char, piece.end_char) if owner.get(i) == piece.pk]
        text = LABELLED_TEXT(world)
        for start in own[::7]:
            chunk = text[start : start + 20]
            if len(chunk) == 20 and all(owner.get(start + k) in hidden_ids for k in range(20)):
                if text.count(chunk) == 1:
                    stretches.append(chunk)
    return stretches


def LABELLED_TEXT(world) -> str:  # noqa: N802 - the document's text as extracted
    from collections_app.text.extract import extract

    return extract("plans.md", LABELLED.encode()).text
