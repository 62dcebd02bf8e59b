"""Recall's second pass (memory_app.expansion, services.recall._second_pass): searching again with the
names and numbers of the first pass's best excerpts finds a record that shares only a name with them."""

import pytest

from memory_app import conf, services
from memory_app.expansion import found_terms
from ragsite.analyzers import analyzer

pytestmark = pytest.mark.django_db

FIRST_HIT = "Caroline met her friend Jolene at the pottery class in town."
# Shares no word with the question below, only the name "Jolene" with the first hit.
SECOND_HIT = "Jolene moved to Vermont last spring for a new job."
OTHERS = [
    "Caroline bought bread at the market on Saturday.",
    "The pottery class meets on Tuesdays in the old school.",
    "Caroline likes to swim in the lake where her friend lives.",
    "Melanie painted a sunrise over the hills.",
    "Caroline and Melanie went to a concert together.",
    "The town library opens at nine.",
]
QUESTION = "Where did the friend Caroline met at pottery class move?"


def test_found_terms_are_the_rarest_names_and_numbers_the_question_lacks():
    rare = {"jolene": 3.0, "vermont": 2.5, "2019": 2.0, "caroline": 0.1, "the": 0.0}
    texts = ["Caroline met Jolene in 2019. The trip to Vermont was long.", "Jolene again."]
    found = found_terms(texts, ["caroline", "trip"], lambda term: rare.get(term, 1.0), most=3, least_idf=0.5)
    # "caroline" is asked already; "The" is too common; lowercase words ("trip", "long") are not names.
    assert found == ["jolene", "vermont", "2019"]
    assert found_terms(texts, [], lambda term: rare.get(term, 1.0), most=1) == ["jolene"]
    assert found_terms(["nothing named here"], [], lambda term: 5.0, most=3) == []


def test_found_terms_are_the_recall_analyzers_terms():
    """With a stemming analyzer the found names are looked up as the index holds them, and a name the
    question already asks (in any inflection) is not searched again."""
    english = analyzer("english").terms
    texts = ["Caroline met the Jolenes in Vermonts."]
    found = found_terms(texts, english("where did Caroline go"), lambda term: 2.0, most=4, analyze=english)
    assert found == ["jolen", "vermont"]
    # Seed 004's terms, the default, keep the words whole.
    assert found_terms(texts, ["caroline"], lambda term: 2.0, most=4) == ["jolenes", "vermonts"]


def _recalled(agent, weight, monkeypatch):
    monkeypatch.setattr(conf, "RECALL_SECOND_PASS", weight)
    return [e["text"] for e in services.recall(agent=agent, query=QUESTION, most=3)["excerpts"]]


def test_the_second_pass_finds_a_record_that_shares_only_a_name_with_the_first_hit(
    agent, run_on_commit, monkeypatch
):
    for text in [FIRST_HIT, SECOND_HIT, *OTHERS]:
        run_on_commit(services.store_memory, agent=agent, text=text)
    one_pass = _recalled(agent, 0.0, monkeypatch)
    assert one_pass[0] == FIRST_HIT and SECOND_HIT not in one_pass
    two_passes = _recalled(agent, 0.5, monkeypatch)
    assert two_passes[0] == FIRST_HIT and SECOND_HIT in two_passes
    # From the first hit alone, the name it shares is the only word searched again: the second hit follows it.
    monkeypatch.setattr(conf, "RECALL_SECOND_PASS_FROM", 1)
    assert _recalled(agent, 0.5, monkeypatch)[:2] == [FIRST_HIT, SECOND_HIT]


def test_without_a_name_in_the_first_hits_the_second_pass_changes_nothing(agent, run_on_commit, monkeypatch):
    for text in ["the kettle is in the left cupboard", "the spare key is under the blue pot", "tea at four"]:
        run_on_commit(services.store_memory, agent=agent, text=text)
    monkeypatch.setattr(conf, "RECALL_SECOND_PASS", 0.0)
    before = services.recall(agent=agent, query="where is the kettle", most=3)["excerpts"]
    monkeypatch.setattr(conf, "RECALL_SECOND_PASS", 0.5)
    after = services.recall(agent=agent, query="where is the kettle", most=3)["excerpts"]
    assert [(e["id"], e["score"]) for e in after] == [(e["id"], e["score"]) for e in before]


def _seen(agent, **filters):
    """(text, score) of a recall with two passes: a twin's record ids differ, its texts do not."""
    answer = services.recall(agent=agent, query=QUESTION, most=50, **filters)
    return [(e["text"], e["score"]) for e in answer["excerpts"]]


def test_a_filtered_recalls_second_pass_never_brings_back_a_filtered_out_record(
    agent, other_agent, run_on_commit, monkeypatch
):
    """The second pass searches with the filters of the first: the record it would find (it shares
    the name with the first hit) stays out when the filter leaves it out, and the answer is the one
    of a store holding only the kept records (the found name's idf is theirs)."""
    kept = [FIRST_HIT, *OTHERS, "Jolene sent a postcard from the coast."]
    for text in kept:
        run_on_commit(services.store_memory, agent=agent, text=text, tags=["kept"])
        run_on_commit(services.store_memory, agent=other_agent, text=text, tags=["kept"])
    run_on_commit(services.store_memory, agent=agent, text=SECOND_HIT, tags=["left-out"])
    monkeypatch.setattr(conf, "RECALL_SECOND_PASS", 0.5)
    monkeypatch.setattr(conf, "RECALL_SECOND_PASS_FROM", 1)
    # Unfiltered, the second pass brings the left-out record in (one pass does not: see above).
    assert SECOND_HIT in [text for text, _ in _seen(agent)][:3]
    for filters in ({"tags": ["kept"]}, {"kinds": ["mem"], "tags": ["kept"]}):
        filtered = _seen(agent, **filters)
        assert filtered and SECOND_HIT not in [text for text, _ in filtered]
        assert filtered == _seen(other_agent), filters  # the twin: only the kept records
    assert {text for text, _ in _seen(agent, tags=["left-out"])} <= {SECOND_HIT}
