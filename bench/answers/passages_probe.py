"""Probe: a prose paragraph's passages as its entries. Measured, not adopted (docs/benchmarks.md, *Passages
as entries*).

    python bench/answers/passages_probe.py lic,man,dev 400 0,0 1,1 0.5,0.5 1,0
    #                                      sets        passage size  (cosine share, BM25 share) ...

A `structure` paragraph of legal prose packs several clauses into up to 1,800 characters, and a question
about one clause meets the whole paragraph: its cosine is diluted, and a short paragraph that says mostly
the document's title (a man page's NAME line, a licence's preamble) wins on the question's naming words.
Entries repair that dilution for lists (`text.entries`, decision 0089); this probe asks whether passages of
prose do the same. A paragraph with fewer than `MIN_ENTRIES` list entries gets its passages as entries
instead: its whole sentences and lines (`budget._units`) grouped up to the passage size in characters, when
it makes two or more. They go through the whole entries path (embedded with the paragraph's context at the
build, indexed on both legs, the row lifted by its best entry, the excerpt centred on it), with a share of
their own on each leg (list entries keep `ENTRY_SHARE`).

Each passage size has a store and indexes of its own (``data/bench/passages<size>*``); the embedding cache
is shared. Each share pair is asked at the defaults an agent meets (hybrid, floor 0.22, around 1, the
budget; found@1 asked with ``most`` 1) and printed with 95 % Wilson intervals; share 0,0 is the
collection without passages (its focus may still fall on a passage). The sets: ``lic`` the licence shelf
(tools/licence_shelf.py), ``man`` the man shelf (tools/man_shelf.py), ``dev`` the dev set.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.common import harness  # noqa: E402

SETS = {
    "lic": ("data/bench/licence-shelf", "bench/answers/licence_shelf/questions.jsonl"),
    "man": ("data/bench/man-shelf", "bench/answers/man_shelf/questions.jsonl"),
    "dev": ("bench/answers/dev_set/corpus", "bench/answers/dev_set/questions.jsonl"),
}


def wilson(found: int, n: int, z: float = 1.96) -> tuple[int, int]:
    """The 95 % Wilson interval of ``found`` of ``n``, in questions (rounded outwards)."""
    if not n:
        return 0, 0
    p = found / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return math.floor((centre - half) * n), math.ceil((centre + half) * n)


# An entry that opens with a list's marker: an option flag, a bullet, a number, a table row (after any
# heading lines over it).
MARKER = re.compile(r"(?:[ \t]*#+[^\n]*\n)*[ \t]*(?:--?[A-Za-z0-9]|[*+\u2022-][ \t]|\d{1,3}[.)][ \t]|\|)")


def install_passages(size: int, flagged: int | None = None):
    """Make `entry_spans` give a prose paragraph its passages (``size`` 0: none), everywhere the build, the
    index writer, measure and the known answers read it, and with ``flagged`` a list of that many entries or
    more, each opening with a marker, its entries; returns the list-only `entry_spans` (with ``flagged``)."""
    from collections_app import measure
    from collections_app.services.builds import embed, prepare
    from collections_app.services.indexes import entries as index_entries
    from collections_app.services.known_answers import scratch
    from collections_app.text import entries
    from collections_app.text.budget import _units

    unflagged = entries.entry_spans

    def lists_only(text: str, carried: int = 0) -> list[tuple[int, int]]:
        spans = unflagged(text, carried)
        if spans or flagged is None:
            return spans
        least, entries.MIN_ENTRIES = entries.MIN_ENTRIES, 1
        try:
            few = unflagged(text, carried)
        finally:
            entries.MIN_ENTRIES = least
        return few if len(few) >= flagged and all(MARKER.match(text, a) for a, _b in few) else []

    def passage_spans(text: str, start: int) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        begin = end = None
        for a, b in _units(text[start:]):
            a, b = a + start, b + start
            if not text[a:b].strip():
                continue
            if begin is not None and b - begin > size:
                spans.append((begin, end))
                begin = None
            begin = a if begin is None else begin
            end = b
        if begin is not None:
            spans.append((begin, end))
        return spans[: entries.MAX_ENTRIES] if size and len(spans) >= 2 else []

    def entry_spans(text: str, carried: int = 0) -> list[tuple[int, int]]:
        return lists_only(text, carried) or passage_spans(text, max(int(carried), 0))

    for module in (entries, embed, index_entries, scratch, measure):
        module.entry_spans = entry_spans
    # Read every document again, as a change of what an entry is must (`entries.ENTRIES_BUILT`).
    prepare.ENTRIES_BUILT = entries.ENTRIES_BUILT = 10_000 + 100 * size + (flagged or 0)
    return lists_only


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sets", help="comma-separated: lic, man, dev")
    parser.add_argument("size", type=int, help="a passage's most characters")
    parser.add_argument("shares", nargs="*", default=["0,0", "1,1"], help="cosine,bm25 shares of passages")
    parser.add_argument("--json", type=Path, help="every question's outcome per share")
    parser.add_argument(
        "--flagged",
        type=int,
        default=None,
        help="a list whose every entry opens with a marker needs this many",
    )
    args = parser.parse_args()

    store = f"passages{args.size}" + (f"-flagged{args.flagged}" if args.flagged else "")
    harness.setup(store, environ={"INDEX_DIR": str(ROOT / "data" / "bench" / f"{store}-indexes")})
    import numpy as np

    from bench.answers.known_answers import evaluate
    from collections_app import ranking
    from collections_app.models import Paragraph
    from collections_app.services.indexes import mapped_index
    from collections_app.services.search import search_collection
    from collections_app.services.search.rows import search_state

    lists_only = install_passages(args.size, args.flagged)
    whole = ranking.lifted_legs
    state = {"passage_rows": None, "share": (1.0, 1.0)}

    def lifted_legs(cosine, bm25, upper, entries, rows=None):
        """`ranking.lifted_legs` with the passages' own shares on the rows whose entries are passages."""
        passage_rows = state["passage_rows"]
        if entries is None or passage_rows is None:
            return whole(cosine, bm25, upper, entries, rows)
        at = passage_rows if rows is None else passage_rows[rows]
        share_cosine, share_bm25 = state["share"]

        def of(values):
            return values if rows is None else values[rows]

        if cosine is not None and entries.cosine is not None:
            lift = np.maximum(of(entries.cosine) - cosine, 0.0)
            cosine = (cosine + np.where(at, share_cosine, ranking.ENTRY_SHARE) * lift).astype(cosine.dtype)
        if bm25 is not None and entries.lexical is not None and upper > 0:
            bm25 = np.asarray(bm25, dtype=np.float64)
            lift = np.maximum(of(entries.lexical) * upper - bm25, 0.0)
            bm25 = bm25 + np.where(at, share_bm25, ranking.ENTRY_SHARE) * lift
        return cosine, bm25

    ranking.lifted_legs = lifted_legs
    shares = [tuple(float(x) for x in pair.split(",")) for pair in args.shares]
    outcomes: dict[str, list] = {}
    print("| set | passage chars | shares (cosine, BM25) | found@1 | found@5 | found@10 | controls empty |")
    print("|---|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        corpus, questions_path = (ROOT / part for part in SETS[name])
        questions, controls = harness.load_items(questions_path)
        suffix = "" if name == "dev" else f"-{corpus.resolve().name}"
        agent, collection = harness.built_collection("known-answers" + suffix, corpus)
        state["passage_rows"] = None
        search_collection(agent=agent, collection=collection, question="map the index", most=1)
        index = mapped_index(collection, search_state(collection)[0])[1]
        texts = dict(Paragraph.objects.filter(collection=collection).values_list("pk", "text"))
        state["passage_rows"] = np.array([not lists_only(texts[int(pk)]) for pk in index.row_paragraph])
        has = np.zeros(index.size, dtype=bool)
        if index.entries is not None:
            has[np.asarray(index.entry_row)] = True
        print(
            f"# {name}: {index.size} rows, {int(has.sum())} with entries, "
            f"{int((has & state['passage_rows']).sum())} of them passages",
            file=sys.stderr,
        )
        for pair in shares:
            state["share"] = pair
            result = evaluate(agent, collection, questions, controls, mode="hybrid", floor=None)
            n = len(questions)
            found = {k: round(v * n) for k, v in result["found"].items()}
            cells = " | ".join(f"{found[k]} [{'–'.join(map(str, wilson(found[k], n)))}]" for k in (1, 5, 10))
            empty = sum(c["empty"] for c in result["controls"])
            shown = f"| {name} ({n}) | {args.size} | {pair} | {cells} | {empty} of {len(controls)} |"
            print(shown, flush=True)
            outcomes[f"{name} {pair}"] = [(q["question"], q["at_1"], q["rank"]) for q in result["questions"]]
    if args.json:
        args.json.write_text(json.dumps(outcomes, indent=1))


if __name__ == "__main__":
    main()
