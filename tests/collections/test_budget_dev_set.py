"""Asking for more never finds less: on the known-answers dev set (bench/answers/dev_set), at the default
answer budget, the answers found in an answer of k paragraphs never fall as k rises, because the budget
shortens hits rather than dropping them (text.budget)."""

import json
from pathlib import Path

import pytest

from collections_app.limits import MAX_ANSWER_CHARS
from collections_app.measure import normalise
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

DEV_SET = Path(__file__).resolve().parents[2] / "bench" / "answers" / "dev_set"


def test_found_at_k_never_falls_as_k_rises_at_the_default_budget(agent, knowledge_folder, settings):
    corpus = {path.name: path.read_text(encoding="utf-8") for path in (DEV_SET / "corpus").glob("*.md")}
    knowledge_folder("dev", corpus)
    collection = create_collection(agent=agent, name="dev", method="structure")
    assert build_collection(collection=collection).status == "succeeded"
    items = [json.loads(line) for line in (DEV_SET / "questions.jsonl").read_text().splitlines() if line]
    answerable = [item for item in items if not item.get("control")]
    assert len(answerable) > 60
    found = {}
    for most in (1, 5, 10):
        answers, unbudgeted = [], []
        for item in answerable:
            asked = {"agent": agent, "collection": collection, "question": item["question"], "most": most}
            answers.append(search_collection(min_score=0, **asked))
            unbudgeted.append(search_collection(min_score=0, max_chars=MAX_ANSWER_CHARS, **asked))
        # The budget drops no hit: as many paragraphs (runs of hits) as without it, each holding its hits.
        for answer, whole in zip(answers, unbudgeted, strict=True):
            assert [p["chunk_id"] for p in answer["paragraphs"]] == [
                p["chunk_id"] for p in whole["paragraphs"]
            ]
            assert answer["chars"] <= settings.ANSWER_MAX_CHARS
        found[most] = sum(
            any(normalise(item["answer"]) in normalise(p["text"]) for p in answer["paragraphs"])
            for item, answer in zip(answerable, answers, strict=True)
        )
    assert found[1] <= found[5] <= found[10], found
