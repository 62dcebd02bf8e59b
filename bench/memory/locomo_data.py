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


def load(folder: Path) -> list[Conversation]:
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
    """Evidence recall and all-evidence per method and setting, per category and over 1-4."""

    def __init__(self) -> None:
        self.scores: dict[tuple[str, str], dict[int, list[tuple[float, bool]]]] = defaultdict(
            lambda: defaultdict(list)
        )

    def add(self, method: str, setting: str, category: int, score: tuple[float, bool]) -> None:
        self.scores[(method, setting)][category].append(score)

    def figures(self, method: str, setting: str, category: int | None = None) -> tuple[float, float]:
        by = self.scores[(method, setting)]
        rows = [s for c in (CATEGORIES if category is None else (category,)) for s in by[c]]
        if not rows:
            return 0.0, 0.0
        return 100 * sum(r for r, _ in rows) / len(rows), 100 * sum(a for _, a in rows) / len(rows)

    def methods(self) -> list[str]:
        return list(dict.fromkeys(method for method, _ in self.scores))


def settings_asked() -> list[tuple[str, int, int]]:
    """(name, most, max_chars) of every recall asked per question."""
    return [(f"{b // 1000}k", 50, b) for b in BUDGETS] + [(f"most {m}", m, UNBOUNDED) for m in MOSTS]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else 0.0
