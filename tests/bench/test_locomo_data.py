"""bench/memory/locomo_data.py: the LoCoMo bench finds its data from a clone or a worktree, and says
plainly when the folder is missing or empty instead of failing on the first conversation it lacks."""

import json

import pytest

from bench.memory.locomo_data import NoData, default_folder, load


def test_the_data_folder_is_found_beside_the_repository_or_a_folder_above_it(tmp_path):
    clone = tmp_path / "work" / "clone"
    worktree = tmp_path / "work" / "trees" / "one"
    clone.mkdir(parents=True)
    worktree.mkdir(parents=True)
    data = tmp_path / "work" / "shared" / "datasets" / "locomo-dev"
    assert default_folder(clone) == data  # nothing there yet: the clone's place, named in the error
    data.mkdir(parents=True)
    assert default_folder(clone) == data
    assert default_folder(worktree) == data


def test_a_missing_or_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(NoData, match="no LoCoMo folder"):
        load(tmp_path / "absent")
    with pytest.raises(NoData, match="no conversation"):
        load(tmp_path)


def test_a_conversation_is_read_with_its_questions(tmp_path):
    talk = {
        "session_1_date_time": "1 May 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I moved to  Porto."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice!"},
        ],
    }
    qa = [
        {"question": "Where did Ann move?", "category": 4, "evidence": ["D1:01"]},
        {"question": "Unanswerable", "category": 5, "evidence": ["D1:1"]},
        {"question": "No evidence left", "category": 1, "evidence": ["D9:9"]},
    ]
    (tmp_path / "7.json").write_text(json.dumps({"conversation": talk, "qa": qa}))
    (conversation,) = load(tmp_path)
    session, start, end = conversation.turn("D1:1")
    assert session.text[start:end] == "I moved to Porto."
    assert [q.question for q in conversation.questions] == ["Where did Ann move?"]
