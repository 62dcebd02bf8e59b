"""The trust probe's families on what one agent's collection may take from others or lose to an edit
(issue 24, items 1, 5 and 6).

* legacyvar - `KNOWLEDGE_LEGACY_FOLDER` (agent-less) holds agent A's text, bound by staff to A's
  `legacy`; `KNOWLEDGE_UNCLAIMED_FOLDER` is bound to nobody. Agent B, through the API (so under
  row-level security on PostgreSQL), creates and builds `legacy`, `unclaimed` and a made-up name,
  searches and reads them, and tries to bind the variable itself; B also creates `legacyb` before A
  does. leaked = A's or the unclaimed text in any answer to B or in B's paragraphs; failed = an
  answer to B that differs from the made-up name's (it tells of A's names), a build of B's that is
  not refused, a binding B could set, or a build of A's that B's same name blocked.
* edit - a public paragraph before a restricted one, labelled; one sentence added to the public
  paragraph (at its start, middle or end), rebuilt: leaked = restricted text in alice's answers, or
  a piece whose own text is restricted that is enabled and readable to alice after the rebuild.
* floor - both collections of a twin pair (tools/trust_probe/twin.py) measured with known answers while
  not per-reader, then made per-reader; and the measured floor asked for on a per-reader collection.
  failed = the request is not refused, an answer's floor is "measured", or alice's (bob's, an unknown
  reader's) floor differs between the collection and its twin without the hidden paragraphs.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

from tools.trust_probe.world import SECRET_WORDS, Tally, http_client

A_TEXT, UNCLAIMED_TEXT = "5150", "8086"


def _normal(text: str, name: str) -> str:
    return text.replace(name.upper().replace("-", "_"), "NAME").replace(name, "NAME")


def legacyvar(tally: Tally, base: str, world: dict, scratch: Path) -> None:
    from django.core.management import call_command

    from collections_app.models import BuildRun, Paragraph

    for name, text in (
        ("legacy", f"Agent A's door code is {A_TEXT}."),
        ("legacyb", f"Agent A's safe code is {A_TEXT}."),
        ("unclaimed", f"The unclaimed secret is {UNCLAIMED_TEXT}."),
    ):
        folder = scratch / f"deployment-{name}"
        folder.mkdir()
        (folder / "door.md").write_text(f"# Legacy\n\n{text}\n")
        os.environ[f"KNOWLEDGE_{name.upper()}_FOLDER"] = str(folder)
    as_a = {"Authorization": f"Bearer {world['a_key']}"}
    as_b = {"Authorization": f"Bearer {world['b_key']}"}

    def a_succeeded(name: str) -> int:
        return BuildRun.objects.filter(
            collection__agent__agent_id="agent-a", collection__name=name, status=BuildRun.SUCCEEDED
        ).count()

    with http_client() as http:
        api = f"{base}/api/v1/collections"
        # B takes `legacyb` first; A's own `legacyb`, once staff bind it, must still build.
        early = http.post(api, headers=as_b, json={"name": "legacyb"})
        for name in ("legacy", "legacyb"):
            http.post(api, headers=as_a, json={"name": name})
            unbound = http.post(f"{api}/{name}/build", headers=as_a, json={})
            tally.count(
                "legacyvar",
                failed=unbound.status_code != 409,
                note=f"A's unbound {name} built from the agent-less variable: {unbound.status_code}",
            )
            try:
                call_command("bind_folder", "agent-a", name, stdout=io.StringIO())
            except Exception as exc:  # an older server has no binding: the rest is still probed
                tally.count("legacyvar", failed=True, note=f"staff could not bind {name}: {exc}")
            bound = http.post(f"{api}/{name}/build", headers=as_a, json={})
            tally.count(
                "legacyvar",
                failed=bound.status_code != 202 or a_succeeded(name) != 1,
                note=f"A's bound {name}: {bound.status_code} {bound.text[:120]}",
            )
        answers = {}
        for name in ("legacy", "unclaimed", "made-up"):
            made = http.post(api, headers=as_b, json={"name": name})
            answers[name] = [
                made,
                http.post(f"{api}/{name}/build", headers=as_b, json={}),
                http.post(
                    f"{api}/{name}/search", headers=as_b, json={"question": "door code", "min_score": 0}
                ),
                http.get(f"{api}/{name}", headers=as_b),
            ]
        answers["legacyb"] = [
            early,
            http.post(f"{api}/legacyb/build", headers=as_b, json={}),
            http.post(f"{api}/legacyb/search", headers=as_b, json={"question": "door code", "min_score": 0}),
            http.get(f"{api}/legacyb", headers=as_b),
        ]
        steps = ("create", "build", "search", "read")
        for name, said in answers.items():
            for step, answer, control in zip(steps, said, answers["made-up"], strict=True):
                alike = answer.status_code == control.status_code and _normal(answer.text, name) == _normal(
                    control.text, "made-up"
                )
                if step in ("create", "read"):  # the answers hold the collection's own id and times
                    alike = answer.status_code == control.status_code and re.sub(
                        r"\d+", "N", _normal(answer.text, name)
                    ) == re.sub(r"\d+", "N", _normal(control.text, "made-up"))
                tally.count(
                    "legacyvar",
                    failed=not alike or answer.status_code >= 500,
                    leaked=A_TEXT in answer.text or UNCLAIMED_TEXT in answer.text or "agent-a" in answer.text,
                    note=f"B's {step} of {name}: {answer.status_code} {answer.text[:150]}",
                )
        refused = http.post(api, headers=as_b, json={"name": "legacyc", "folder_variable_bound": True})
        tally.count(
            "legacyvar",
            failed=refused.status_code != 422,
            note=f"B set folder_variable_bound itself: {refused.status_code}",
        )
        # A still builds `legacy` with B's same-named collection beside it.
        again = http.post(f"{api}/legacy/build", headers=as_a, json={})
        tally.count(
            "legacyvar",
            failed=again.status_code != 202 or a_succeeded("legacy") != 2,
            note=f"A's rebuild of legacy after B's: {again.status_code} {again.text[:120]}",
        )
    texts = " ".join(
        Paragraph.objects.filter(collection__agent__agent_id="agent-b").values_list("text", flat=True)
    )
    tally.count(
        "legacyvar",
        leaked=A_TEXT in texts or UNCLAIMED_TEXT in texts,
        note="B's paragraphs hold A's or the unclaimed folder's text",
    )


# --- edit ----------------------------------------------------------------------------------------

PUBLIC = "Our public leave policy is generous and clear to everyone. "
SECRET = "The zanzibarquux codename covers SECRETSALARY bands of ninety million for Hooli. "
TAIL = "The canteen opens at eight and closes at four on every weekday. "
MEMO = f"# Memo\n\n{PUBLIC * 4}\n\n{SECRET * 4}\n\n{TAIL * 4}\n"
EDITS = {
    "end": lambda memo: memo.replace(f"{PUBLIC}\n", f"{PUBLIC}Reviewed in 2026.\n"),
    "start": lambda memo: memo.replace(f"\n\n{PUBLIC}", f"\n\nReviewed in 2026. {PUBLIC}", 1),
    "middle": lambda memo: memo.replace(f"{PUBLIC}{PUBLIC}", f"{PUBLIC}Reviewed in 2026. {PUBLIC}", 1),
}


def _own_texts(collection) -> list:
    from collections_app.models import Paragraph

    rows, end, owned = Paragraph.objects.filter(collection=collection).order_by("document", "ordinal"), 0, []
    for row in rows:
        owned.append((row, row.text[max(0, end - row.start_char) :]))
        end = row.end_char
    return owned


def edit(tally: Tally, base: str, world: dict, scratch: Path, quick: bool) -> None:
    from collections_app.models import BuildRun, Label
    from collections_app.services.agents import create_collection, get_agent
    from collections_app.services.builds import build_collection

    agent = get_agent("agent-a")
    public, secret = Label.objects.get_or_create(name="pub")[0], Label.objects.get_or_create(name="secret")[0]
    overlaps = (150,) if quick else (0, 150, 300)
    with http_client() as http:
        for overlap in overlaps:
            for where, change in EDITS.items():
                name = f"edit{overlap}{where}"
                folder = scratch / "deployment-secret-folder" / name
                folder.mkdir(parents=True)
                (folder / "memo.md").write_text(MEMO)
                os.environ[f"KNOWLEDGE_AGENT_A__{name.upper()}_FOLDER"] = str(folder)
                collection = create_collection(
                    agent=agent, name=name, method="structure", size=400, overlap=overlap, per_reader=True
                )
                build_collection(collection=collection)
                for row, own in _own_texts(collection):
                    row.labels.add(secret if any(w in own for w in SECRET_WORDS) else public)
                (folder / "memo.md").write_text(change(MEMO))
                run = build_collection(collection=collection)
                exposed = [
                    row.pk
                    for row, own in _own_texts(collection)
                    if any(w in own for w in SECRET_WORDS)
                    and row.enabled
                    and ({"pub"} & set(row.labels.values_list("name", flat=True)) or not row.labels.exists())
                ]
                tally.count(
                    "edit",
                    failed=run.status != BuildRun.SUCCEEDED,
                    leaked=bool(exposed),
                    note=f"{name}: build {run.status}, restricted pieces readable to alice {exposed}",
                )
                for question in ("zanzibarquux SECRETSALARY", "Hooli ninety million", "public leave policy"):
                    for around in (0, 1):
                        answer = http.post(
                            f"{base}/api/v1/collections/{name}/search",
                            headers={"Authorization": f"Bearer {world['a_key']}"},
                            json={
                                "question": question,
                                "reader": "alice@example.com",
                                "around": around,
                                "most": 50,
                                "min_score": 0,
                            },
                        )
                        found = [w for w in SECRET_WORDS if w in answer.text]
                        tally.count(
                            "edit",
                            failed=answer.status_code != 200,
                            leaked=bool(found),
                            note=f"{name} {question!r} around {around}: {answer.status_code} {found}",
                        )


# --- floor ---------------------------------------------------------------------------------------

KNOWN = [
    {"question": "birch policy", "answer": "birch policy"},
    {"question": "when does the canteen open", "answer": "canteen opens at eight"},
    {"question": "shared leave rules", "answer": "shared leave rules"},
    {"question": "what is the recipe for sourdough bread", "control": True},
]


def floor(tally: Tally, base: str, world: dict, pairs: list[tuple[str, str, bool]], quick: bool) -> None:
    from collections_app.models import Collection, Reader
    from collections_app.services.known_answers import set_known_answers
    from collections_app.services.readers.labels import set_per_reader
    from ragsite.errors import RagsiteError

    for x, y, _alike in pairs[: 2 if quick else len(pairs)]:
        collection = Collection.objects.get(agent__agent_id="agent-a", name=x)
        try:
            set_known_answers(collection=collection, items=KNOWN, floor_measured=True)
            refusal = "accepted"
        except RagsiteError as exc:
            refusal = exc.code
        tally.count(
            "floor",
            failed=refusal != "per_reader_floor",
            note=f"{x}: a measured floor on a per-reader collection was {refusal}",
        )
        # Measured before it answered per reader (a collection turned per-reader later).
        for name in (x, y):
            one = Collection.objects.get(agent__agent_id="agent-a", name=name)
            set_per_reader(collection=one, per_reader=False)
            set_known_answers(collection=Collection.objects.get(pk=one.pk), items=KNOWN, floor_measured=True)
            set_per_reader(collection=one, per_reader=True)
        Reader.objects.get_or_create(external_id="nobody@example.com")
        headers = {"Authorization": f"Bearer {world['a_key']}"}
        with http_client() as http:
            for reader in ("alice@example.com", "bob@example.com", "nobody@example.com"):
                for question in ("birch policy", "canteen"):
                    body = {"question": question, "reader": reader}
                    one = http.post(f"{base}/api/v1/collections/{x}/search", headers=headers, json=body)
                    two = http.post(f"{base}/api/v1/collections/{y}/search", headers=headers, json=body)
                    if one.status_code != 200 or two.status_code != 200:
                        tally.count(
                            "floor", failed=True, note=f"{x} {reader}: {one.status_code} {two.status_code}"
                        )
                        continue
                    mine = (one.json()["floor"], one.json()["floor_source"])
                    theirs = (two.json()["floor"], two.json()["floor_source"])
                    tally.count(
                        "floor",
                        failed=mine != theirs or "measured" in (mine[1], theirs[1]),
                        note=f"{x} vs {y}, {reader}: floor {mine} vs {theirs}",
                    )
