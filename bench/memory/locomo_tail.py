"""Recall's tail (issue 44: the 8k margin and multi-hop), a prototype measured in process over the store of
an earlier `make bench-memory` run. Recall is unchanged; the prototype wraps `services.recall._ordered`
for this process only. The best excerpts are first chosen as recall chooses them, within (1 - TAIL_SHARE)
of the budget (from budgets of TAIL_FROM characters); the rest of the budget is then spent on one of:

* short excerpts (at most TAIL_LONGEST characters, the best run of whole lines) of the next candidates
  among the first TAIL_DEPTH of the fused order, each of a record nothing quoted yet (TAIL_NEW_RECORDS)
  or overlapping nothing quoted (otherwise);
* the same, with the candidates in the order of recall's second pass (`RECALL_SECOND_PASS` =
  TAIL_SECOND: the names and numbers of the first pass's best candidates searched again);
* the line before and/or after each excerpt held, best excerpt first (TAIL_EXTEND "both", "before",
  "after").

    python bench/memory/locomo_tail.py [--data <locomo-dev>] [--sweep-json <file>] \
        --variant "" --variant "TAIL_SHARE=0.2" --variant "TAIL_SHARE=0.1;TAIL_EXTEND='after';TAIL_FROM=4000"

The names TAIL_* are the prototype's own (set on `memory_app.conf` for the run only); the variants go to
memory_locomo.py's in-process sweep, which prints the margins per part of the split and the paired
difference against the first variant. Figures: docs/benchmarks.md (none was adopted).
"""

from __future__ import annotations

import sys
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "memory"))

import memory_locomo  # noqa: E402

PROTOTYPE = {
    "TAIL_SHARE": 0.0,  # the share of the budget the tail may spend (0: off)
    "TAIL_LONGEST": 300,  # a tail excerpt's characters at most
    "TAIL_NEW_RECORDS": True,  # only records nothing quoted yet
    "TAIL_DEPTH": 100,  # candidates read for the tail
    "TAIL_FROM": 0,  # the budget from which the tail is on
    # the tail extends each excerpt held by a line instead, best first: "both" sides, "before", "after"
    "TAIL_EXTEND": "",
    "TAIL_SECOND": 0.0,  # the tail's order: the second pass merged at this weight (0: the first pass's)
}


def install() -> None:
    import importlib

    from memory_app import conf
    from memory_app.excerpts import Excerpt, Selection, _trim, cut_to_fit, node_rest_score, select

    module = importlib.import_module("memory_app.services.recall")

    for name, value in PROTOTYPE.items():
        setattr(conf, name, value)
    original = module._ordered

    def ordered(index, query, most, max_chars, vector, keep=None):
        candidates, text_of, choose = original(index, query, most, max_chars, vector, keep)
        if not conf.TAIL_SHARE or max_chars < conf.TAIL_FROM:
            return candidates, text_of, choose
        query_terms = set(index.terms(query))

        def tailed(stream, texts):
            pool = list(islice(stream, conf.TAIL_DEPTH))
            head_chars = int((1.0 - conf.TAIL_SHARE) * max_chars)
            first = select(
                iter(pool),
                texts,
                max_chars=head_chars,
                most=most,
                terms_of=lambda text: set(index.terms(text)),
                query_terms=query_terms,
                longest=max(1, int(conf.EXCERPT_SHARE * head_chars)),
                rest_score=node_rest_score(conf.NODE_SCORE_MIX) if conf.EXCERPT_PIECE else None,
                piece=conf.EXCERPT_PIECE,
            )
            if conf.TAIL_SECOND:
                saved = conf.RECALL_SECOND_PASS
                conf.RECALL_SECOND_PASS = conf.TAIL_SECOND
                try:
                    again = original(index, query, most, max_chars, vector, keep)[0]
                    pool = list(islice(again, conf.TAIL_DEPTH))
                finally:
                    conf.RECALL_SECOND_PASS = saved
            held = list(first.excerpts)
            chars = first.chars
            quoted = {(e.kind, e.id) for e in held}
            if conf.TAIL_EXTEND:
                for excerpt in sorted(held, key=lambda e: -e.score):
                    text = texts(excerpt.kind, excerpt.id)
                    before = text.rfind("\n", 0, max(0, excerpt.start - 1)) + 1
                    after = text.find("\n", excerpt.end + 1)
                    after = len(text) if after < 0 else after
                    if conf.TAIL_EXTEND == "after":
                        before = excerpt.start
                    elif conf.TAIL_EXTEND == "before":
                        after = excerpt.end
                    others = [
                        e for e in held if e is not excerpt and (e.kind, e.id) == (excerpt.kind, excerpt.id)
                    ]
                    if any(e.end > before and e.start < excerpt.start for e in others):
                        before = excerpt.start
                    if any(e.start < after and e.end > excerpt.end for e in others):
                        after = excerpt.end
                    cost = (excerpt.start - before) + (after - excerpt.end)
                    if cost > max_chars - chars:
                        break
                    excerpt.start, excerpt.end = before, after
                    chars += cost
                return Selection(held, chars, first.cut)
            for candidate in pool:
                if len(held) >= most or chars >= max_chars:
                    break
                key = (candidate.kind, candidate.id)
                if conf.TAIL_NEW_RECORDS and key in quoted:
                    continue
                text = texts(*key)
                span = _trim(text, candidate.start, candidate.end)
                if span[1] <= span[0]:
                    continue
                if any((e.kind, e.id) == key and e.start < span[1] and span[0] < e.end for e in held):
                    continue
                room = min(conf.TAIL_LONGEST, max_chars - chars)
                if span[1] - span[0] > room:
                    span = cut_to_fit(text, candidate, room, lambda t: set(index.terms(t)), query_terms)
                    if span is None:
                        continue
                if any((e.kind, e.id) == key and e.start < span[1] and span[0] < e.end for e in held):
                    continue
                held.append(
                    Excerpt(
                        candidate.kind,
                        candidate.id,
                        candidate.source,
                        span[0],
                        span[1],
                        candidate.score,
                        candidate.node,
                        candidate.node,
                        cut=True,
                        pieces=[span],
                    )
                )
                quoted.add(key)
                chars += span[1] - span[0]
            return Selection(held, chars, first.cut)

        return candidates, text_of, tailed

    module._ordered = ordered


def main() -> None:
    real_sweep = memory_locomo.sweep

    def sweep(*args, **kwargs):
        install()
        return real_sweep(*args, **kwargs)

    memory_locomo.sweep = sweep
    if "--only-sweep" not in sys.argv:
        sys.argv.append("--only-sweep")
    memory_locomo.main()


if __name__ == "__main__":
    main()
