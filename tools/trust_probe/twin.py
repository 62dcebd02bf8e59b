"""tools/trust_probe/probe.py's twin families (issue 24, items 2-4): what alice is shown from a per-reader
collection must be what she would be shown had its hidden paragraphs never existed.

* ids, scores - each layout is a pair: `twinxN`, a per-reader collection whose paragraphs (one piece
  each: structure chunking, overlap 0) are hidden from alice where the layout says, and `twinyN`, the
  same documents built alike with those paragraphs then deleted from the store, so alice's view of the
  one is the whole of the other (a gap marks both alike).
  She asks both the same questions (around 0-3, most, floor). ids: failed = what she is shown differs,
  scores aside (texts, passages, `chunk_id`, `chunk_ids`, `first`/`last`): a gap in her ids or a run
  that stops early says where a hidden paragraph sits (items 2, 3). scores: failed = the whole answer
  differs (also scores, order and which hit a run cites): a score moved with text she may not read.
* wideoverlap - structure chunking with overlap from 50 % to 90 % of the size over one long sentence,
  so a piece carries text from many pieces before it; the pieces whose own text is restricted are
  hidden from alice: leaked = a restricted word in her answer (item 4).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from tools.trust_probe.world import SECRET_WORDS, Tally, alice_asks, http_client

WORDS = ["apple", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron", "inlet", "juniper"]


def paragraph(n: int, hidden: bool) -> str:
    word = WORDS[n]
    if hidden:  # restricted text that shares the question's words, so it would rank if it counted
        return f"Restricted {word} policy: Hooli merger, zanzibarquux, SECRETSALARY, ninety million."
    return f"Paragraph {word} tells of the {word} policy and the shared leave rules for staff."


OTHER = "\n\n".join(
    f"Handbook {w} page: the canteen opens at eight and the {w} policy covers travel." for w in WORDS[:4]
)


def layouts(quick: bool) -> list[set[int]]:
    fixed = [{1, 3, 6}, {0}, {7, 8, 9}]
    if quick:
        return fixed
    rng = random.Random(24)
    return fixed + [set(rng.sample(range(10), rng.randint(1, 5))) for _ in range(4)]


def make_twins(scratch: Path, quick: bool) -> list[tuple[str, str, bool]]:
    """(x, y, alike) per layout; alike: x's paragraphs alice may read are exactly y's, in order."""
    from collections_app.models import Label, Paragraph
    from collections_app.services.agents import create_collection, get_agent
    from collections_app.services.builds import build_collection

    agent = get_agent("agent-a")
    public, secret = Label.objects.get_or_create(name="pub")[0], Label.objects.get_or_create(name="secret")[0]
    pairs = []
    for n, hidden in enumerate(layouts(quick)):
        made = {}
        # The twin is the same documents with the hidden paragraphs deleted from the store (DESIGN.md §5):
        # the gap they leave is in its text too, so both answers mark it with the same elision.
        for name in (f"twinx{n}", f"twiny{n}"):
            folder = scratch / "deployment-secret-folder" / name
            folder.mkdir(parents=True)
            (folder / "doc.md").write_text("\n\n".join(paragraph(i, i in hidden) for i in range(10)) + "\n")
            (folder / "other.md").write_text(OTHER + "\n")
            os.environ[f"KNOWLEDGE_AGENT_A__{name.upper()}_FOLDER"] = str(folder)
            collection = create_collection(
                agent=agent, name=name, method="structure", size=120, overlap=0, per_reader=True
            )
            build_collection(collection=collection)
            rows = list(Paragraph.objects.filter(collection=collection).order_by("document__name", "ordinal"))
            restricted = [row for row in rows if "Restricted" in row.text]
            if name.startswith("twiny"):
                delete_rows(collection, restricted)
                rows = [row for row in rows if row not in restricted]
            for row in rows:
                row.labels.add(secret if row in restricted else public)
            made[name[4]] = [(r.document.name, r.text) for r in rows if "Restricted" not in r.text]
        pairs.append((f"twinx{n}", f"twiny{n}", made["x"] == made["y"]))
    return pairs


def delete_rows(collection, rows) -> None:
    """Delete stored paragraphs and move the build record on: the next search maps an index without them."""
    from datetime import timedelta

    from collections_app.models import CollectionBuilt, Paragraph

    Paragraph.objects.filter(pk__in=[row.pk for row in rows]).delete()
    built = CollectionBuilt.objects.get(collection=collection)
    built.passages -= len(rows)
    built.built_at += timedelta(seconds=1)
    built.save(update_fields=["passages", "built_at"])


def shown(answer: dict) -> list[tuple]:
    """What a reader is shown, scores aside (so order, and which hit a run cites, aside too)."""
    return sorted(
        (p["text"], p["passages"], tuple(p["chunk_ids"]), p["first"], p["last"])
        for p in answer.get("paragraphs", [])
    )


def first_difference(one: dict, two: dict) -> str:
    for key in sorted(set(one) | set(two)):
        if key != "paragraphs" and one.get(key) != two.get(key):
            return f"{key}: {one.get(key)!r} vs {two.get(key)!r}"
    mine, theirs = one.get("paragraphs", []), two.get("paragraphs", [])
    if len(mine) != len(theirs):
        return f"{len(mine)} vs {len(theirs)} paragraphs"
    for k, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        for field in sorted(set(a) | set(b)):
            if a.get(field) != b.get(field):
                return f"#{k} {field}: {str(a.get(field))[:60]!r} vs {str(b.get(field))[:60]!r}"
    return "equal"


QUESTIONS = [
    "birch policy",
    "Hooli merger zanzibarquux",
    "ember fjord grove",
    "heron inlet juniper",
    "apple cedar delta policy",
    "canteen travel policy",
    "SECRETSALARY leave rules",
    "shared leave rules for staff",
]


def twins(tally: Tally, base: str, world: dict, scratch: Path, quick: bool) -> list[tuple[str, str, bool]]:
    """The ids and scores families over the same requests."""
    headers = {"Authorization": f"Bearer {world['a_key']}"}
    pairs = make_twins(scratch, quick)
    questions = QUESTIONS[:6] if quick else QUESTIONS
    grid = [
        (floor, around, most)
        for floor in ((0,) if quick else (0, None))
        for around in (0, 1, 2, 3)
        for most in ((5, 50) if quick else (1, 5, 50))
    ]
    with http_client() as http:
        for x, y, alike in pairs:
            for family in ("ids", "scores"):
                tally.count(family, failed=not alike, note=f"{x}: alice's paragraphs are not {y}'s")
            for question in questions:
                for floor, around, most in grid:
                    body = alice_asks(question, around, most, floor)
                    one = http.post(f"{base}/api/v1/collections/{x}/search", headers=headers, json=body)
                    two = http.post(f"{base}/api/v1/collections/{y}/search", headers=headers, json=body)
                    broken = one.status_code != 200 or two.status_code != 200
                    mine, theirs = (one.json(), two.json()) if not broken else ({}, {})
                    words = [w for w in SECRET_WORDS if w in one.text]
                    where = f"{x} {question!r} around {around} most {most} floor {floor}"
                    # Which paragraphs make the answer follows the scores, unless every readable one
                    # comes back: only there does a difference say something of ids and runs alone.
                    if most == 50 and floor == 0:
                        tally.count(
                            "ids",
                            failed=broken or shown(mine) != shown(theirs),
                            leaked=bool(words),
                            note=f"{where}: {first_difference(mine, theirs)} {words}",
                        )
                    tally.count(
                        "scores",
                        failed=broken or mine != theirs,
                        note=f"{where}: {first_difference(mine, theirs)}",
                    )
    return pairs


# --- wideoverlap ---------------------------------------------------------------------------------

CLAUSES = [f"public note {w} says the canteen opens at eight on weekdays" for w in WORDS]
SECRET_CLAUSE = "the zanzibarquux codename covers the Hooli merger and SECRETSALARY bands of ninety million"


def wide_text(secret_at: tuple[int, ...]) -> str:
    """One long sentence: no sentence starts in reach, so each piece carries its whole overlap."""
    parts = []
    for k, clause in enumerate(CLAUSES + CLAUSES):
        if k in secret_at:
            parts.append(SECRET_CLAUSE)
        parts.append(clause.replace("note", f"note {k}"))
    sentence = "; ".join(parts)
    return "# Plans\n\n" + sentence[0].upper() + sentence[1:] + ".\n"


def wideoverlap(tally: Tally, base: str, world: dict, scratch: Path, quick: bool) -> None:
    from collections_app.models import Label, Paragraph
    from collections_app.services.agents import create_collection, get_agent
    from collections_app.services.builds import build_collection

    headers = {"Authorization": f"Bearer {world['a_key']}"}
    agent = get_agent("agent-a")
    public, secret = Label.objects.get_or_create(name="pub")[0], Label.objects.get_or_create(name="secret")[0]
    shares = (0.75, 0.9) if quick else (0.5, 0.75, 0.8, 0.9)
    placements = ((1,), (5, 11)) if quick else ((1,), (5, 11), (3, 4, 15))
    questions = [
        "Hooli merger SECRETSALARY ninety million",
        "zanzibarquux codename",
        "canteen opens",
        "public note 6 weekdays",
    ]
    with http_client() as http:
        for share in shares:
            carried = 0
            for placed in placements:
                name = f"wide{int(share * 100)}x{'-'.join(map(str, placed))}"
                folder = scratch / "deployment-secret-folder" / name
                folder.mkdir(parents=True)
                (folder / "plans.md").write_text(wide_text(placed))
                os.environ[f"KNOWLEDGE_AGENT_A__{name.upper().replace('-', '_')}_FOLDER"] = str(folder)
                collection = create_collection(
                    agent=agent,
                    name=name,
                    method="structure",
                    size=400,
                    overlap=int(400 * share),
                    per_reader=True,
                )
                build_collection(collection=collection)
                rows = list(Paragraph.objects.filter(collection=collection).order_by("ordinal"))
                end = 0
                for row in rows:  # restricted when its own text, past what it carries, holds a secret
                    own = row.text[max(0, end - row.start_char) :]
                    row.labels.add(secret if any(w in own for w in SECRET_WORDS) else public)
                    carried += any(w in row.text for w in SECRET_WORDS) and not any(
                        w in own for w in SECRET_WORDS
                    )
                    end = row.end_char
                for question in questions:
                    for around in (0, 1, 3):
                        body = alice_asks(question, around, 50, 0)
                        answer = http.post(
                            f"{base}/api/v1/collections/{name}/search", headers=headers, json=body
                        )
                        texts = (
                            " ".join(p["text"] for p in answer.json().get("paragraphs", []))
                            if answer.status_code == 200
                            else ""
                        )
                        found = [w for w in SECRET_WORDS if w in texts]
                        tally.count(
                            "wideoverlap",
                            failed=answer.status_code != 200 or not texts,
                            leaked=bool(found),
                            note=f"{name} {question!r} around {around}: {answer.status_code} {found}",
                        )
            # A share means something only when restricted text is carried into readable pieces
            # (at 50 % a restricted clause may end before the next piece starts).
            tally.count(
                "wideoverlap",
                failed=not carried,
                note=f"overlap {share:.0%}: no readable piece carries restricted text",
            )
