"""Choosing excerpts (memory_app.excerpts): best first, merged when they touch, within a budget."""

from memory_app.excerpts import NODE, WHOLE, Candidate, cut_to_fit, select

# One record of four "nodes" of two sentences each, and a short record.
NODES = [
    "Anna planted tulips in April. The bulbs came from Leiden.\n",
    "Ben fixed the boat on Tuesday. He used copper nails.\n",
    "Clara baked bread for the fair. It sold out by noon.\n",
    "Dev moved to Lisbon in June. He loves the trams there.",
]
LONG = "".join(NODES)
SHORT = "The spare key is under the blue pot."
TEXTS = {("ep", 1): LONG, ("mem", 2): SHORT}


def spans():
    out, at = [], 0
    for node in NODES:
        out.append((at, at + len(node)))
        at += len(node)
    return out


def node(index, score, parts=()):
    start, end = spans()[index]
    return Candidate("ep", 1, NODE, index, start, end, score, parts)


def whole(score):
    return Candidate("mem", 2, WHOLE, None, 0, len(SHORT), score)


def chosen(candidates, max_chars=10_000, most=10):
    return select(candidates, lambda kind, id: TEXTS[(kind, id)], max_chars=max_chars, most=most)


def test_nodes_that_touch_are_merged_in_text_order_and_keep_the_best_score():
    result = chosen([node(2, 0.9), whole(0.8), node(1, 0.7), node(3, 0.1)])
    first, second = result.excerpts
    assert (first.start, first.end) == (spans()[1][0], len(LONG))
    assert (first.first_node, first.last_node, first.score) == (1, 3, 0.9)
    assert LONG[first.start : first.end].startswith("Ben fixed") and (second.kind, second.id) == ("mem", 2)
    assert result.chars == (first.end - first.start) + len(SHORT) and not result.cut


def test_nodes_that_do_not_touch_stay_apart_until_one_between_joins_them():
    apart = chosen([node(0, 0.9), node(2, 0.8)])
    assert [(e.first_node, e.last_node) for e in apart.excerpts] == [(0, 0), (2, 2)]
    joined = chosen([node(0, 0.9), node(2, 0.8), node(1, 0.5)])
    (only,) = joined.excerpts
    assert (only.first_node, only.last_node, only.start) == (0, 2, 0)
    assert only.end == spans()[2][1] - 1  # the separator after the last node is not quoted


def test_most_caps_excerpts_not_merged_pieces():
    result = chosen([node(1, 0.9), node(2, 0.8), whole(0.7), node(0, 0.6)], most=2)
    merged, short = result.excerpts
    assert (merged.first_node, merged.last_node) == (1, 2) and short.id == 2
    (only,) = chosen([node(1, 0.9), node(2, 0.8)], most=1).excerpts  # the cap is reached: nothing more
    assert (only.first_node, only.last_node) == (1, 1)


def test_the_budget_cuts_the_last_excerpt_at_a_sentence_and_stops():
    room = len(NODES[2].strip()) + 30
    parts = [(spans()[3][0], spans()[3][0] + 28, 0.1), (spans()[3][0] + 29, spans()[3][1], 0.9)]
    result = chosen([node(2, 0.9), node(0, 0.85, ()), whole(0.5)], max_chars=room)
    assert result.cut and result.chars <= room
    first, last = result.excerpts
    assert LONG[last.start : last.end] == "Anna planted tulips in April."  # the sentence that fits
    assert last.cut and not first.cut
    # The part that scores best is kept when the cut must choose.
    cut = chosen([node(3, 0.9, parts)], max_chars=30).excerpts[0]
    assert LONG[cut.start : cut.end] == "He loves the trams there."


def test_a_cut_with_no_sentence_that_fits_ends_at_a_word_or_gives_nothing():
    candidate = whole(1.0)
    assert cut_to_fit(SHORT, candidate, 12) == (0, 9)  # "The spare", not "The spare ke"
    assert cut_to_fit(SHORT, candidate, 2) is None
    assert chosen([whole(1.0)], max_chars=2).excerpts == []


def test_the_budget_is_never_exceeded_and_characters_are_counted_exactly():
    for budget in (1, 20, 57, 120, 300):
        result = chosen(
            [node(1, 0.9), node(3, 0.8), whole(0.7), node(0, 0.6), node(2, 0.5)], max_chars=budget
        )
        assert result.chars == sum(e.end - e.start for e in result.excerpts) <= budget


def test_with_longest_a_long_candidate_is_quoted_by_its_best_whole_lines_and_others_still_fit():
    # Two "nodes" of three lines each (a conversation's turns); the question matches one line of each.
    turns = [
        "Ana: We sailed past the lighthouse at dawn. It was cold.",
        "Ben: Did you see the seals?",
        "Ana: Dozens of them, on the rocks by the pier.",
        "Ben: My sister starts at the bakery on Monday.",
        "Ana: Which bakery? The one on Elm Street?",
        "Ben: Yes, she will bake the rye bread there.",
    ]
    text = "\n".join(turns)
    middle = text.index(turns[3])
    first = Candidate("ep", 1, NODE, 0, 0, middle - 1, 0.9, [(text.index(turns[2]), middle - 1, 0.9)])
    second = Candidate("ep", 1, NODE, 2, middle, len(text), 0.8, [(text.index(turns[5]), len(text), 0.8)])
    result = select([first, second], lambda kind, id: text, max_chars=120, most=10, longest=84)
    quoted = [text[e.start : e.end] for e in result.excerpts]
    # Each node alone is longer than 70 % of the budget: the first is quoted by its best line and the
    # neighbour that still fits (whole lines), so the second place fits too where the first node
    # would have taken the budget.
    assert quoted[0] == f"{turns[1]}\n{turns[2]}" and len(quoted[0]) <= 84 and result.excerpts[0].cut
    assert quoted[1] == turns[5] and result.chars <= 120
    # Without `longest`, the first node does not fit the budget: it is cut to fit and is the only place.
    plain = select([first, second], lambda kind, id: text, max_chars=120, most=10)
    assert len(plain.excerpts) == 1 and plain.cut


def test_a_cut_keeps_whole_lines_before_sentences():
    text = "Ana: We met at noon. Then we walked.\nBen: The museum was shut. We had tea instead."
    candidate = Candidate("ep", 1, NODE, 0, 0, len(text), 0.5, [(text.index("The museum"), len(text), 0.5)])
    assert text[slice(*cut_to_fit(text, candidate, 50))] == "Ben: The museum was shut. We had tea instead."
    # No line fits: sentences then.
    assert text[slice(*cut_to_fit(text, candidate, 30))] == "Ben: The museum was shut."


# --- Diversity (memory_app.excerpts.diversified) -----------------------------------------------------


def _vector_node(index, score, vector):
    start, end = spans()[index]
    return Candidate("ep", 1, NODE, index, start, end, score, (), vector)


def _places(result):
    return [(e.id, e.first_node) for e in result.excerpts]


def test_a_records_further_excerpt_yields_to_a_new_records_at_a_large_budget():
    # Nodes 0 and 2 of record 1 do not touch: in score order they fill `most` 2, and record 2 is left out.
    ranked = [node(0, 0.9), node(2, 0.8), whole(0.7)]
    assert _places(chosen(ranked, most=2)) == [(1, 0), (1, 2)]
    # A penalty of a half: 0.8 * 0.5 = 0.4 < 0.7, so the other record's excerpt comes second ...
    fair = select(ranked, lambda kind, id: TEXTS[(kind, id)], max_chars=10_000, most=2, repeat_penalty=0.5)
    assert _places(fair) == [(1, 0), (2, None)]
    assert fair.excerpts[1].score == 0.7  # an excerpt keeps its own score, not the discounted one
    # ... and with room for all three, every one is quoted, the penalised one last.
    roomy = select(ranked, lambda kind, id: TEXTS[(kind, id)], max_chars=10_000, most=3, repeat_penalty=0.5)
    assert _places(roomy) == [(1, 0), (2, None), (1, 2)]
    # A penalty that leaves 0.8 above 0.7 changes nothing.
    mild = select(ranked, lambda kind, id: TEXTS[(kind, id)], max_chars=10_000, most=2, repeat_penalty=0.1)
    assert _places(mild) == [(1, 0), (1, 2)]


def test_a_neighbour_that_says_again_what_was_quoted_waits_and_one_with_new_content_does_not():
    import numpy as np

    same, other = np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32)

    def quoted(second_vector):
        ranked = [
            _vector_node(0, 0.9, same),
            _vector_node(1, 0.8, second_vector),
            Candidate("mem", 2, WHOLE, None, 0, len(SHORT), 0.7, (), other),
        ]
        result = select(ranked, lambda kind, id: TEXTS[(kind, id)], max_chars=10_000, most=2, redundancy=0.3)
        return [(e.id, e.first_node, e.last_node) for e in result.excerpts]

    # Node 1 touches node 0. Saying again what node 0 said (cosine 1): 0.8 - 0.3 = 0.5 < 0.7, so record 2
    # comes second and fills `most` 2; node 1 is never quoted.
    assert quoted(same) == [(1, 0, 0), (2, None, None)]
    # New content (cosine 0): 0.8 stands, node 1 joins node 0's excerpt, then record 2.
    assert quoted(other) == [(1, 0, 1), (2, None, None)]


def test_diversity_reads_no_further_than_it_needs_and_keeps_ties_in_order():
    read = []

    def stream():
        for candidate in [node(0, 0.9), whole(0.9), node(2, 0.2), node(3, 0.1), node(1, 0.05)]:
            read.append(candidate.node)
            yield candidate

    texts = lambda kind, id: TEXTS[(kind, id)]  # noqa: E731
    result = select(stream(), texts, max_chars=10_000, most=2, repeat_penalty=0.5)
    assert _places(result) == [(1, 0), (2, None)]  # equal scores keep the order they came in
    assert len(read) <= 4 and 1 not in read  # the last was never read
