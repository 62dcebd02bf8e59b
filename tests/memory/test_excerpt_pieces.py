"""A node competes part by part (`memory_app.excerpts.select` with `piece`, conf.EXCERPT_PIECE): its best
lines first, what they leave out as candidates of their own, scored by the passages they hold."""

import pytest

from memory_app import conf, services
from memory_app.excerpts import NODE, Candidate, node_rest_score, select

from .conftest import prose

MIX = (0.3, 0.3, 0.2)

# Two records, each one "node" of three lines (a conversation's turns); the question is about line 1 of
# the first and line 2 of the second.
FIRST = [
    "Ana: We sailed past the lighthouse at dawn and it was cold out there.",
    "Ben: Did you see the seals on the rocks by the old pier this time?",
    "Ana: Dozens of them, and a heron too, standing on the breakwater.",
]
SECOND = [
    "Cai: My sister starts at the bakery on Monday, the one on Elm Street.",
    "Dee: Does she bake the rye bread there, or only the sweet buns?",
    "Cai: The seals came up the river as far as the bakery last winter.",
]
THIRD = [
    "Eli: A seal pup slept on the slipway all morning, nobody minded it.",
    "Fay: I bought new boots for the winter walks along the harbour wall.",
    "Eli: They look warm; mine leak at the toes and the heels already.",
]
TEXTS = {("ep", 1): "\n".join(FIRST), ("ep", 2): "\n".join(SECOND), ("ep", 3): "\n".join(THIRD)}


def line_parts(lines, scores):
    parts, at = [], 0
    for line, score in zip(lines, scores, strict=True):
        parts.append((at, at + len(line), score))
        at += len(line) + 1
    return parts


def node(id, lines, score, line_scores):
    text = "\n".join(lines)
    return Candidate("ep", id, NODE, 0, 0, len(text), score, line_parts(lines, line_scores))


def chosen(candidates, piece, max_chars, most=10):
    return select(
        candidates,
        lambda kind, id: TEXTS[(kind, id)],
        max_chars=max_chars,
        most=most,
        longest=max(1, int(0.7 * max_chars)),
        rest_score=node_rest_score(MIX) if piece else None,
        piece=piece,
    )


def quoted(selection):
    return [TEXTS[(e.kind, e.id)][e.start : e.end] for e in selection.excerpts]


def test_a_budget_holds_the_best_lines_of_more_nodes_rather_than_fewer_whole_nodes():
    nodes = [node(1, FIRST, 0.8, [0.2, 0.9, 0.3]), node(2, SECOND, 0.6, [0.1, 0.2, 0.7])]
    nodes.append(node(3, THIRD, 0.5, [0.6, 0.1, 0.1]))
    budget = 400
    whole = chosen(nodes, None, budget)
    # Off: the first node whole, then the second cut to what is left, and nothing of the third.
    assert [e.id for e in whole.excerpts] == [1, 2] and quoted(whole)[0] == TEXTS[("ep", 1)]
    parts = chosen(nodes, 0.67, budget)
    # On: the best lines of each of the three, within the same budget.
    assert [e.id for e in parts.excerpts] == [1, 2, 3] and parts.chars <= budget
    # The second and third are quoted by part of their node; the first's rest joined it again.
    assert [e.cut for e in parts.excerpts] == [False, True, True]
    text = "\n".join(quoted(parts))
    assert FIRST[1] in text and SECOND[2] in text and THIRD[0] in text


def test_what_a_piece_leaves_out_comes_back_where_its_score_places_it_and_joins_its_excerpt():
    first = node(1, FIRST, 0.8, [0.2, 0.9, 0.3])
    second = node(2, SECOND, 0.6, [0.1, 0.2, 0.7])
    (one, two) = chosen([first, second], 0.67, 10_000).excerpts
    # With room for everything, the first node's rest joins its excerpt: whole again, still one place.
    assert (one.id, one.start, one.end) == (1, 0, len(TEXTS[("ep", 1)]))
    assert (two.id, two.start, two.end) == (2, 0, len(TEXTS[("ep", 2)]))
    assert not one.cut and not two.cut  # each quotes its node whole again


def test_once_most_excerpts_are_held_only_their_own_rests_join_them():
    first = node(1, FIRST, 0.8, [0.2, 0.9, 0.3])
    second = node(2, SECOND, 0.6, [0.1, 0.2, 0.7])
    (only,) = chosen([first, second], 0.67, 10_000, most=1).excerpts
    assert (only.id, only.start, only.end) == (1, 0, len(TEXTS[("ep", 1)]))
    assert quoted(chosen([first, second], 0.67, 10_000, most=1)) == quoted(
        chosen([first, second], None, 10_000, most=1)
    )


def test_a_rest_scores_the_node_with_its_own_best_passages_in_place_of_the_nodes():
    score = node_rest_score(MIX)
    candidate = Candidate("ep", 1, NODE, 0, 0, 100, 0.5, [(0, 10, 0.9), (10, 20, 0.4), (20, 30, 0.1)])
    norm = 1 + sum(MIX)
    # The rest holds the second and third passages: its best is 0.4 (was 0.9), its second 0.1 (was 0.4).
    expected = 0.5 - ((0.9 - 0.4) + MIX[1] * (0.4 - 0.1)) / norm
    assert score(candidate, [(10, 20, 0.4), (20, 30, 0.1)]) == pytest.approx(expected)
    # A rest holding the best passage loses only what its second-best lacks; nothing goes below 0.
    assert score(candidate, [(0, 10, 0.9)]) == pytest.approx(0.5 - MIX[1] * 0.4 / norm)
    assert score(Candidate("ep", 1, NODE, 0, 0, 9, 0.01, [(0, 9, 0.9)]), []) == 0.0


# --- Through recall, on the test database (SQLite and PostgreSQL) ----------------------------------

PLANTED = [
    "The quokka festival tickets cost nine dollars.",
    "Quokka festival tickets were sold out by noon.",
    "Tickets for the quokka festival came by post.",
]


@pytest.mark.django_db
def test_recall_at_a_budget_quotes_more_places_and_keeps_its_contract(agent, run_on_commit, monkeypatch):
    for seed, fact in enumerate(PLANTED):
        text = prose(60, seed) + " " + fact + " " + prose(60, seed + 10)
        run_on_commit(services.archive_episode, agent=agent, text=text)
    question = "quokka festival tickets"

    def ask(piece, **limits):
        monkeypatch.setattr(conf, "EXCERPT_PIECE", piece)
        return services.recall(agent=agent, query=question, **limits)

    budget = 1000
    off, on = ask(0, most=50, max_chars=budget), ask(0.67, most=50, max_chars=budget)

    def facts(answer):
        return sum(any(fact in e["text"] for e in answer["excerpts"]) for fact in PLANTED)

    # The same facts, and more places: the best parts of further nodes where whole nodes filled it.
    assert facts(on) == facts(off) == len(PLANTED)
    assert len(on["excerpts"]) > len(off["excerpts"])
    for answer in (off, on):
        for excerpt in answer["excerpts"]:
            text = services.read_record(agent=agent, kind=excerpt["kind"], id=excerpt["id"])["text"]
            assert text[excerpt["start"] : excerpt["end"]] == excerpt["text"]
        assert answer["chars"] == sum(len(e["text"]) for e in answer["excerpts"]) <= budget
    # `most` 1 with room to spare: the best node whole either way.
    assert [e["text"] for e in ask(0.67, most=1, max_chars=20_000)["excerpts"]] == [
        e["text"] for e in ask(0, most=1, max_chars=20_000)["excerpts"]
    ]
