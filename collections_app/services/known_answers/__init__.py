"""A collection's known answers: the librarian's own questions, asked of every build (docs/measure.md).

A collection holds up to 200 questions with the text that marks their answer, and controls the
documents cannot answer — the format measure reads. Every build is asked them:

- by a task once the build has committed (`measure_build`), so the build never waits; or,
- with KNOWN_ANSWERS_GATE set, from the candidate's paragraphs in memory before the swap
  (`gate_build`), so a build that loses too many answers is refused while the old paragraphs
  keep answering — the same path, and as atomic, as the refusal of an empty build.

Either way the questions are ranked by the pure `measure.outcomes`, the steps a search takes,
over the rows the search would load, with their entries when ENTRIES is on (`scratch`), and the result is
one row: the build's `KnownAnswersReport`.
Nothing else is written — not a paragraph, document or build record of the live collection
(the one other write is the ledger's count of embedding tokens with the "http" embedder, as a
build records). Questions and markers are the librarian's data: no log line and no ledger row
holds one.

The package splits along that story: `the_set` (the questions, read, checked and replaced),
`measuring` (asking them of a build: the task, the gate, the report), `scratch` (the rows asked and the
in-memory index over them) and `reading` (the reports for the admin, the API and the build status). Its
callers reach every public name from here.
"""

from .measuring import (
    DEPTH,
    EVERY_LABEL,
    LOST_NAMED,
    SAMPLE_SET,
    after_build,
    gate_build,
    give_sample_set,
    measure_again,
    measure_build,
)
from .reading import HISTORY, describe, for_build, history, latest_report, summary
from .scratch import CandidateRow
from .the_set import (
    MAX_FILE_BYTES,
    MAX_KNOWN_ANSWERS,
    as_items,
    as_lines,
    check_items,
    known_answers,
    live_build_id,
    parse_jsonl,
    parse_lines,
    set_known_answers,
)

__all__ = [
    "DEPTH",
    "EVERY_LABEL",
    "HISTORY",
    "LOST_NAMED",
    "MAX_FILE_BYTES",
    "MAX_KNOWN_ANSWERS",
    "SAMPLE_SET",
    "CandidateRow",
    "after_build",
    "as_items",
    "as_lines",
    "check_items",
    "describe",
    "for_build",
    "gate_build",
    "give_sample_set",
    "history",
    "known_answers",
    "latest_report",
    "live_build_id",
    "measure_again",
    "measure_build",
    "parse_jsonl",
    "parse_lines",
    "set_known_answers",
    "summary",
]
