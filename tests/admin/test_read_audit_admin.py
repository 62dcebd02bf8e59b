"""The read audit for staff: its own permissions to see and to export, filters, the exports (admin
action and command), the scheduled purge."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.utils import timezone
from django_q.models import Schedule

from collections_app.models import ReadAudit
from collections_app.schedules import PURGE_READ_AUDIT, PURGE_READ_AUDIT_FUNC
from collections_app.services.agents import create_collection
from collections_app.services.audit import purge_reads
from collections_app.tasks import purge_read_audit

from .conftest import url

PARAGRAPH = "Carry-over of annual leave is capped at five days a year."


def entry(**fields) -> ReadAudit:
    values = {
        "channel": "api",
        "kind": "search",
        "agent_id": "alpha",
        "key_id": 7,
        "target": "handbook",
        "reader": "hr-staff",
        "question_sha256": "ab" * 32,
        "ids": ["leave.md#0", "leave.md#1"],
        "size": len(PARAGRAPH),
        **fields,
    }
    return ReadAudit.objects.create(**values)


def grant(user, *codenames):
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))


def test_staff_without_the_permission_cannot_see_the_trail(client, staff_user, db):
    entry()
    client.force_login(staff_user)
    assert client.get(url("readaudit_changelist")).status_code == 403


def test_the_trail_is_filtered_by_agent_reader_collection_and_date(client, staff_user, db):
    entry(agent_id="alpha", reader="hr-staff", target="handbook")
    entry(agent_id="beta", reader="finance", target="ledger")
    grant(staff_user, "view_readaudit")
    client.force_login(staff_user)
    page = client.get(url("readaudit_changelist"))
    assert page.status_code == 200 and b"beta" in page.content and PARAGRAPH.encode() not in page.content
    for query in ("agent_id=alpha", "reader=hr-staff", "target=handbook"):
        shown = client.get(url("readaudit_changelist", query=query)).context["cl"].result_list
        assert [e.agent_id for e in shown] == ["alpha"], query
    today = timezone.now()
    dated = f"at__year={today.year}&at__month={today.month}&at__day={today.day}"
    assert len(client.get(url("readaudit_changelist", query=dated)).context["cl"].result_list) == 2
    # Read-only: no add page, and an entry's page has nothing to save.
    assert client.get(url("readaudit_add")).status_code == 403
    detail = client.get(url("readaudit_change", ReadAudit.objects.first().pk))
    assert detail.status_code == 200 and b'name="_save"' not in detail.content


def test_exporting_takes_its_own_permission(client, staff_user, db):
    first = entry()
    grant(staff_user, "view_readaudit")
    client.force_login(staff_user)
    action = {"action": "export_jsonl", "_selected_action": [first.pk]}
    refused = client.post(url("readaudit_changelist"), action)
    assert not refused.get("Content-Disposition")
    grant(staff_user, "export_readaudit")
    staff_user = type(staff_user).objects.get(pk=staff_user.pk)  # permissions are cached per user object
    client.force_login(staff_user)
    answer = client.post(url("readaudit_changelist"), action)
    assert "attachment" in answer["Content-Disposition"]
    rows = [json.loads(line) for line in b"".join(answer.streaming_content).decode().splitlines()]
    assert [(r["agent_id"], r["ids"], r["status"]) for r in rows] == [
        ("alpha", ["leave.md#0", "leave.md#1"], 200)
    ]
    csv_answer = client.post(url("readaudit_changelist"), {**action, "action": "export_csv"})
    table = list(csv.DictReader(io.StringIO(b"".join(csv_answer.streaming_content).decode())))
    assert table[0]["ids"] == "leave.md#0 leave.md#1" and table[0]["reader"] == "hr-staff"


def test_the_command_exports_json_lines_and_csv_with_filters(db, tmp_path):
    entry(agent_id="alpha", question='=HYPERLINK("http://evil")')
    entry(agent_id="beta")
    out = io.StringIO()
    call_command("export_read_audit", "--agent", "alpha", stdout=out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["agent_id"] for r in rows] == ["alpha"] and rows[0]["question"].startswith("=HYPERLINK")
    target = tmp_path / "audit.csv"
    call_command("export_read_audit", "--format", "csv", "--output", str(target))
    table = list(csv.DictReader(target.open(encoding="utf-8")))
    assert [r["agent_id"] for r in table] == ["alpha", "beta"]
    # A question a spreadsheet would run as a formula is quoted in CSV.
    assert table[0]["question"].startswith("'=")
    later = io.StringIO()
    call_command(
        "export_read_audit", "--since", (timezone.now() + timedelta(days=1)).date().isoformat(), stdout=later
    )
    assert later.getvalue() == ""


def test_the_purge_keeps_the_retention_and_is_scheduled(db, settings):
    now = timezone.now()
    old, recent = entry(), entry()
    ReadAudit.objects.filter(pk=old.pk).update(at=now - timedelta(days=31))
    settings.AUDIT_RETENTION_DAYS = 0
    assert purge_reads() == 0 and ReadAudit.objects.count() == 2  # 0: kept forever
    settings.AUDIT_RETENTION_DAYS = 30
    assert purge_read_audit() == 1
    assert list(ReadAudit.objects.values_list("pk", flat=True)) == [recent.pk]
    schedule = Schedule.objects.get(name=PURGE_READ_AUDIT)  # made by migrate
    assert (schedule.func, schedule.minutes) == (PURGE_READ_AUDIT_FUNC, 60)


@pytest.mark.parametrize("mode", ["verbatim", ""])
def test_an_unknown_question_mode_is_refused_by_name(mode, settings):
    from django.core.exceptions import ImproperlyConfigured

    from ragsite.audit import question_fields

    with pytest.raises(ImproperlyConfigured, match="AUDIT_QUESTIONS"):
        question_fields("q", mode)


def test_a_playground_search_is_audited_with_the_person_who_made_it(
    admin_client, admin_user, handbook, agent
):
    never = create_collection(agent=agent, name="never")
    for collection in (handbook, never):
        admin_client.post(
            url("collection_playground"),
            {"collection": collection.pk, "question": "how many days of annual leave carry over", "most": 3},
        )
    answered, refused = ReadAudit.objects.order_by("id")
    assert (answered.channel, answered.kind, answered.staff_user, answered.agent_id, answered.key_id) == (
        "admin",
        "search",
        admin_user.get_username(),
        agent.agent_id,
        None,
    )
    assert (answered.target, answered.status) == ("handbook", 200) and answered.ids and answered.size > 0
    assert (refused.target, refused.status, refused.ids) == ("never", 409, [])
