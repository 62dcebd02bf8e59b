"""The trust probe (tools/trust_probe/): its twin helpers say what differs, and issue 24's families hold."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.trust_probe.twin import SECRET_CLAUSE, first_difference, paragraph, shown, wide_text

ROOT = Path(__file__).resolve().parents[2]


def test_the_probes_modules_import_in_one_direction():
    """probe.py runs the families; the families and their world never import it back (no circle)."""
    folder = ROOT / "tools" / "trust_probe"
    edges = {}
    for path in sorted(folder.glob("*.py")):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tools.trust_probe."):
                found.add(node.module.rpartition(".")[2])
        edges[path.stem] = found
    assert {"probe", "world", "twin"} <= set(edges)

    def reaches(start, goal, seen=()):
        targets = edges.get(start, ())
        return any(t == goal or (t not in seen and reaches(t, goal, (*seen, t))) for t in targets)

    assert [name for name in edges if reaches(name, name)] == []
    assert all("probe" not in targets for targets in edges.values())


def test_the_wide_text_is_one_sentence_with_the_restricted_clause_where_it_is_placed():
    text = wide_text((1, 11))
    body = text.split("\n\n", 1)[1]
    # No sentence starts inside it, so every piece carries its whole overlap.
    assert not re.search(r"[.!?]\s+\S", body.strip()[:-1])
    assert text.count(SECRET_CLAUSE) == 2
    assert body.index(SECRET_CLAUSE) > body.index("note 0 apple")
    assert body.index(SECRET_CLAUSE) < body.index("note 1 birch")


def test_a_twins_paragraphs_fit_one_piece_each_so_deleting_them_leaves_the_rest_as_they_were():
    # Size 120: one paragraph is one piece, and no two paragraphs fit in one.
    for n in range(10):
        for hidden in (False, True):
            assert 60 < len(paragraph(n, hidden)) <= 120


def test_the_first_difference_of_two_answers_names_the_field_and_the_paragraph():
    one = {"floor": 0, "paragraphs": [{"text": "a", "score": 0.5, "chunk_ids": ["d#0"]}]}
    assert first_difference(one, json.loads(json.dumps(one))) == "equal"
    two = {"floor": 0, "paragraphs": [{"text": "a", "score": 0.4, "chunk_ids": ["d#0"]}]}
    assert first_difference(one, two) == "#0 score: '0.5' vs '0.4'"
    assert first_difference(one, {"floor": 0.1, "paragraphs": []}) == "floor: 0 vs 0.1"
    # Scores aside, the two are shown alike.
    one["paragraphs"][0].update(passages=1, first=1, last=1)
    two["paragraphs"][0].update(passages=1, first=1, last=1)
    assert shown(one) == shown(two)


@pytest.mark.slow
def test_issue_24s_families_run_quick_and_hold_on_sqlite(tmp_path):
    """`busy` and `bigfile` are left out: they take minutes."""
    families = ["ids", "scores", "wideoverlap", "legacyvar", "edit", "floor", "diskfull"]
    out = tmp_path / "trust.json"
    command = [
        sys.executable,
        "tools/trust_probe/probe.py",
        "--quick",
        "--families",
        ",".join(families),
        "--json",
        str(out),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    figures = json.loads(out.read_text())["sqlite"]
    for family in families:
        row = figures[family]
        assert row["tried"] > 0 and row["held"] == row["tried"], (family, row)


@pytest.mark.slow
def test_issue_39s_families_run_quick_and_hold_on_sqlite(tmp_path):
    """Hostile numbers on every surface, files copied slowly into a synced folder, and conflicting files
    beside a live document, for each reader: every try held (about 30 s)."""
    families = ["numbers", "partial", "conflicts"]
    out = tmp_path / "trust.json"
    command = [sys.executable, "tools/trust_probe/probe.py", "--quick", "--families", ",".join(families)]
    done = subprocess.run(
        [*command, "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    figures = json.loads(out.read_text())["sqlite"]
    for family in families:
        row = figures[family]
        assert row["tried"] > 0 and row["held"] == row["tried"], (family, row)
    assert figures["numbers"]["tried"] >= 200 and figures["conflicts"]["tried"] >= 30
