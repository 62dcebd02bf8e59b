"""LoCoMo for `bench/memory/memory_locomo.py`: the conversations and questions read from the dataset, the
recall settings each question is asked with, and how an answer's excerpts are scored.

Split from the benchmark script so that each stays a readable size.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

BUDGETS = (1000, 2000, 4000, 8000)
MOSTS = (1, 3, 5, 10)
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
UNBOUNDED = 100_000
# The development conversations split in two, fixed before any figure was looked at: weights are tuned
# on the first part only; the second is the check, never tuned on (its figures are reported beside).
PARTS = {"tuning": ("26", "30", "42"), "check": ("41", "43")}
BOOTSTRAP = 2000


# --- The data -------------------------------------------------------------------------------


@dataclass
class Session:
    conversation: str
    number: int
    text: str
    turns: dict[str, tuple[int, int]]  # dia_id -> (start, end) of the turn's text in `text`
    lines: list[tuple[int, int]]  # (start, end) of each turn's whole line, in order
    record_id: int | None = None


@dataclass
class Question:
    conversation: str
    question: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    name: str
    sessions: list[Session] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    def turn(self, dia_id: str) -> tuple[Session, int, int] | None:
        for session in self.sessions:
            if dia_id in session.turns:
                return session, *session.turns[dia_id]
        return None


def clean_evidence(raw: list) -> list[str]:
    """SOURCE.md's cleaning: split "a; b", drop a stray colon after D, strip leading zeros."""
    ids = []
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            match = re.fullmatch(r"D:?(\d+):0*(\d+)", part.strip())
            if match:
                ids.append(f"D{int(match[1])}:{int(match[2])}")
    return ids


class NoData(Exception):
    """The LoCoMo folder is missing or holds no conversation: said plainly rather than failing later."""


def default_folder(root: Path) -> Path:
    """``shared/datasets/locomo-dev`` beside the repository, or beside a folder above it (a worktree
    sits one level deeper than a clone); the first that exists, else the one beside the repository."""
    beside = [folder / "shared" / "datasets" / "locomo-dev" for folder in root.parents]
    return next((folder for folder in beside if folder.is_dir()), beside[0])


def load(folder: Path) -> list[Conversation]:
    """The conversations of `folder` (one JSON file each); `NoData` when it is not a folder or holds none."""
    if not folder.is_dir():
        raise NoData(f"no LoCoMo folder at {folder}: pass --data <locomo-dev> (make: LOCOMO=<folder>)")
    conversations = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        talk = data.get("conversation", data)
        conversation = Conversation(path.stem)
        numbers = sorted(int(m[1]) for key in talk if (m := re.fullmatch(r"session_(\d+)", key)))
        for number in numbers:
            turns = talk[f"session_{number}"]
            if not turns:
                continue
            text = f"[{talk.get(f'session_{number}_date_time', '')}]\n"
            spans, lines = {}, []
            for turn in turns:
                prefix = f"{turn['speaker']}: "
                start = len(text) + len(prefix)
                body = " ".join(str(turn.get("text", "")).split())
                lines.append((len(text), start + len(body)))
                text += prefix + body + "\n"
                spans[turn["dia_id"]] = (start, start + len(body))
            conversation.sessions.append(Session(path.stem, number, text.rstrip("\n"), spans, lines))
        for qa in data["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            evidence = [e for e in clean_evidence(qa.get("evidence", [])) if conversation.turn(e)]
            if evidence:
                conversation.questions.append(Question(path.stem, qa["question"], qa["category"], evidence))
        conversations.append(conversation)
    if not conversations:
        raise NoData(
            f"no conversation (*.json) in {folder}: pass --data <locomo-dev> (make: LOCOMO=<folder>)"
        )
    return conversations


# --- Scoring an answer --------------------------------------------------------------------------


def found(conversation: Conversation, question: Question, excerpts: list[dict]) -> tuple[float, bool]:
    """(share of evidence turns inside one excerpt, whether all are)."""
    inside = 0
    for dia_id in question.evidence:
        session, start, end = conversation.turn(dia_id)
        inside += any(
            e["id"] == session.record_id and e["start"] <= start and end <= e["end"] for e in excerpts
        )
    return inside / len(question.evidence), inside == len(question.evidence)


class Tally:
    """Evidence recall and all-evidence per method and setting, per question: by category (1-4), by part of
    the split (`PARTS`), with 95 % bootstrap intervals over the questions."""

    def __init__(self) -> None:
        # (method, setting) -> [(conversation, category, question number, (recall share, all found))]
        self.scores: dict[tuple[str, str], list[tuple[str, int, int, tuple[float, bool]]]] = defaultdict(list)
        self._asked: dict[tuple[str, str], int] = defaultdict(int)

    def add(
        self, method: str, setting: str, category: int, score: tuple[float, bool], conversation: str = ""
    ) -> None:
        key = (method, setting)
        self.scores[key].append((conversation, category, self._asked[(key, conversation)], score))
        self._asked[(key, conversation)] += 1

    def rows(
        self, method: str, setting: str, category: int | None = None, part: str | None = None
    ) -> dict[tuple[str, int], tuple[float, bool]]:
        """(conversation, question number) -> score, of one category (None: 1-4) and part (None: all)."""
        names = PARTS[part] if part else None
        return {
            (conversation, number): score
            for conversation, cat, number, score in self.scores[(method, setting)]
            if (category is None or cat == category) and (names is None or conversation in names)
        }

    def figures(
        self, method: str, setting: str, category: int | None = None, part: str | None = None
    ) -> tuple[float, float]:
        rows = list(self.rows(method, setting, category, part).values())
        if not rows:
            return 0.0, 0.0
        return 100 * sum(r for r, _ in rows) / len(rows), 100 * sum(a for _, a in rows) / len(rows)

    def interval(
        self,
        method: str,
        setting: str,
        category: int | None = None,
        part: str | None = None,
        minus: str | None = None,
    ) -> tuple[float, float, float]:
        """(estimate, low, high): evidence recall with its 95 % percentile bootstrap interval over the
        questions; with `minus`, the paired difference against that method on the same questions."""
        import numpy as np

        mine = self.rows(method, setting, category, part)
        keys = sorted(mine)
        if not keys:
            return 0.0, 0.0, 0.0
        values = np.asarray([mine[k][0] for k in keys], dtype=np.float64)
        if minus is not None:
            other = self.rows(minus, setting, category, part)
            values = values - np.asarray([other[k][0] for k in keys], dtype=np.float64)
        draws = np.random.default_rng(44).integers(0, len(values), size=(BOOTSTRAP, len(values)))
        means = values[draws].mean(axis=1)
        low, high = np.percentile(means, [2.5, 97.5])
        return 100 * float(values.mean()), 100 * float(low), 100 * float(high)

    def best_baseline(self, setting: str, category: int | None = None, part: str | None = None) -> str:
        """The baseline with the highest evidence recall at `setting` (on these questions)."""
        return max(
            (m for m in self.methods() if m != "ragsite"),
            key=lambda m: (self.figures(m, setting, category, part)[0], m),
        )

    def methods(self) -> list[str]:
        return list(dict.fromkeys(method for method, _ in self.scores))


# What an agent asking nothing more gets: `most` 5 and MEMORY_RECALL_MAX_CHARS (4,000).
DEFAULT_ASK = ("default", 5, 4000)


def settings_asked() -> list[tuple[str, int, int]]:
    """(name, most, max_chars) of every recall asked per question: each budget (with `most` 50), each
    `most` (with no budget that binds), and the agent's default."""
    return (
        [(f"{b // 1000}k", 50, b) for b in BUDGETS]
        + [(f"most {m}", m, UNBOUNDED) for m in MOSTS]
        + [DEFAULT_ASK]
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else 0.0
