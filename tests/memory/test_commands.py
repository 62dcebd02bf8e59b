"""manage.py check_health, export_memories and import_memories."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from memory_app import services
from memory_app.models import EPISODE, MEMORY, Episode, Memory, RecordNode

from .conftest import prose

pytestmark = pytest.mark.django_db


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_check_health_prints_a_json_report_and_repairs_with_a_limit(agent):
    for seed in range(3):
        services.store_memory(agent=agent, text=prose(200, seed=seed))
    out, _ = run("check_health", "--json")
    report = json.loads(out)
    assert report["missing_nodes"] == 3 and len(report["missing"]) == 3
    out, _ = run("check_health", "--repair", "--limit", "2", "--agent", "alpha")
    assert "repaired 2 records (2 divided), 1 remain" in out
    out, _ = run("check_health")
    assert "1 missing nodes" in out


def test_check_health_for_an_unknown_agent_fails_cleanly(db):
    with pytest.raises(CommandError, match='no agent "nobody"'):
        run("check_health", "--agent", "nobody")


def test_export_then_import_round_trips_records_and_rebuilds_nodes(
    agent, other_agent, run_on_commit, tmp_path
):
    long_text = prose(200, seed=1)
    run_on_commit(services.store_memory, agent=agent, text="A short memory, with a comma.")
    run_on_commit(services.store_memory, agent=agent, text=long_text)
    episode, _ = run_on_commit(services.archive_episode, agent=agent, text="Ünïcode episode 日本語。")
    Episode.objects.filter(pk=episode.pk).update(locked=True)
    path = tmp_path / "alpha.jsonl"
    run("export_memories", "alpha", str(path))

    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["kind"] for line in lines] == [MEMORY, MEMORY, EPISODE]
    assert all(set(line) == {"kind", "text", "locked", "created_at"} for line in lines)  # no nodes, no ids

    with_callbacks = run_on_commit(lambda: run("import_memories", "beta", str(path)))
    assert (
        "Imported 2 memories and 1 episodes" in with_callbacks[0]
        and "1 node builds queued" in with_callbacks[0]
    )

    def records(owner):
        return sorted(
            (r.KIND, r.text, r.locked, r.created_at)
            for model in (Memory, Episode)
            for r in model.objects.filter(agent=owner)
        )

    assert records(other_agent) == records(agent)
    imported_long = Memory.objects.get(agent=other_agent, text=long_text)
    original_long = Memory.objects.get(agent=agent, text=long_text)
    assert imported_long.pk != original_long.pk
    offsets = lambda record: list(  # noqa: E731
        RecordNode.objects.filter(parent_kind=MEMORY, parent_id=record.pk).values_list(
            "start_char", "end_char"
        )
    )
    assert offsets(imported_long) == offsets(original_long) != []


def test_export_writes_to_standard_output_by_default(agent):
    services.store_memory(agent=agent, text="to stdout")
    out, err = run("export_memories", "alpha")
    assert json.loads(out)["text"] == "to stdout"
    assert "Exported 1 records" in err


def test_a_bad_line_refuses_the_whole_import_and_names_the_line(agent, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"kind": "mem", "text": "fine"})
        + "\n\n"
        + json.dumps({"kind": "mem", "text": "x" * 16_001})
        + "\n"
    )
    with pytest.raises(CommandError, match="line 3: text is 16,001 characters"):
        run("import_memories", "alpha", str(path))
    assert Memory.objects.count() == 0
    path.write_text('{"kind": "note", "text": "x"}\n')
    with pytest.raises(CommandError, match="line 1: kind must be one of mem, ep"):
        run("import_memories", "alpha", str(path))


def test_import_of_a_missing_file_fails_cleanly(agent, tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        run("import_memories", "alpha", str(tmp_path / "absent.jsonl"))
