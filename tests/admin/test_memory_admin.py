"""The memory admin: a record's text shown as its nodes, the repair action, the health page, staff only.

Django's test client for most of it; one Playwright test (`pytest -m browser`) drives the pages in chromium.
The embedder is the memory tests' one: the hash backend with a 40-token window, so 200 words make
several nodes.
"""

import re
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from memory_app import services
from memory_app.models import EPISODE, MEMORY, Episode, Memory, RecordNode
from memory_app.schedules import ensure_schedules
from ragsite.embedders import HashEmbedder, NoneEmbedder
from tests.memory.conftest import DIMENSIONS, WINDOW, prose

HEALTH = "/admin/memory_app/memory/health/"
# Markup characters in a record must come back as text, and still cover it exactly.
MARKUP = '\n\nA <b>bold</b> claim & "quotes" </span> stay text.\n\n'


@pytest.fixture(autouse=True)
def embedder(monkeypatch, settings):
    """The memory tests' embedder: hash vectors, a 40-token window, patched where services look it up."""
    settings.EMBED_BACKEND = "hash"
    small = HashEmbedder(dimensions=DIMENSIONS, window=WINDOW)
    monkeypatch.setattr("ragsite.embedding.get_embedder", lambda backend=None: small)
    return small


@pytest.fixture
def built(django_capture_on_commit_callbacks):
    """Store a record and run its queued node build, as the task queue would."""

    def store(agent, text, kind=MEMORY):
        function = services.store_memory if kind == MEMORY else services.archive_episode
        with django_capture_on_commit_callbacks(execute=True):
            record, _nodes = function(agent=agent, text=text)
        return record

    return store


def unbuilt(agent, text, kind=MEMORY):
    """A record whose node build never ran (the test transaction never commits, so nothing is enqueued)."""
    function = services.store_memory if kind == MEMORY else services.archive_episode
    return function(agent=agent, text=text)[0]


def change_url(record):
    return reverse(f"admin:memory_app_{record._meta.model_name}_change", args=[record.pk])


def changelist_url(model):
    return reverse(f"admin:memory_app_{model._meta.model_name}_changelist")


def texts(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


class Spans(HTMLParser):
    """The spans inside #record-text: (class, title, data-node, text) of each, in order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0  # > 0 inside #record-text
        self.spans: list[dict] = []
        self.current: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if self.depth:
            self.depth += 1
            assert tag == "span" and self.current is None, "a node span holds text only"
            self.current = {
                "class": attrs.get("class", ""),
                "title": attrs.get("title"),
                "node": attrs.get("data-node"),
                "id": attrs.get("id"),
                "text": "",
            }
        elif attrs.get("id") == "record-text":
            self.depth = 1

    def handle_endtag(self, tag):
        if not self.depth:
            return
        self.depth -= 1
        if self.current is not None:
            self.spans.append(self.current)
            self.current = None

    def handle_data(self, data):
        if self.depth:
            assert self.current is not None, f"text outside a span: {data!r}"
            self.current["text"] += data


def spans_of(body: str) -> list[dict]:
    parser = Spans()
    parser.feed(body)
    return parser.spans


# --- A record's page: its text as its nodes ------------------------------------------------------


@pytest.mark.django_db
def test_a_long_memorys_spans_cover_its_text_exactly_one_per_node(admin_client, agent, built):
    text = prose(150) + MARKUP + prose(120, seed=2)
    memory = built(agent, text)
    nodes = services.record_nodes(MEMORY, memory.pk)
    assert len(nodes) >= 5

    body = admin_client.get(change_url(memory)).content.decode()
    spans = spans_of(body)
    assert "".join(span["text"] for span in spans) == text
    assert [span["node"] for span in spans] == [str(node.node_index) for node in nodes]
    for span, node in zip(spans, nodes, strict=True):
        assert span["text"] == text[node.start_char : node.end_char]
        assert (
            span["title"]
            == f"node {node.node_index}: {node.start_char}–{node.end_char}, {node.token_count} tokens"
        )
        assert span["class"] == f"rs-node rs-node-{'ab'[node.node_index % 2]}"  # alternating colours
        assert span["id"] == f"node-{node.node_index}"
    assert "<b>bold</b>" not in body and "&lt;b&gt;bold&lt;/b&gt;" in body


@pytest.mark.django_db
def test_the_node_table_gives_offsets_tokens_window_model_and_whether_it_is_current(
    admin_client, agent, built
):
    memory = built(agent, prose(200))
    nodes = services.record_nodes(MEMORY, memory.pk)
    body = admin_client.get(change_url(memory)).content.decode()
    assert (
        f"{len(nodes)} nodes made by hash-{DIMENSIONS} (the current model), each cut against a "
        f"{WINDOW}-token window" in body
    )
    rows = re.findall(r'<tr data-node="(\d+)">(.*?)</tr>', body, re.S)
    assert [int(index) for index, _ in rows] == [node.node_index for node in nodes]
    for (_index, row), node in zip(rows, nodes, strict=True):
        cells = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td>(.*?)</td>", row, re.S)]
        assert cells == [
            f"#{node.node_index}: characters {node.start_char}–{node.end_char}",
            str(node.token_count),
            str(WINDOW),
            f"hash-{DIMENSIONS}",
            "yes",
        ]
    assert body.count('class="rs-swatch') == len(nodes)


@pytest.mark.django_db
def test_an_episodes_page_shows_its_nodes_too(admin_client, agent, built):
    episode = built(agent, prose(180, seed=5), kind=EPISODE)
    body = admin_client.get(change_url(episode)).content.decode()
    spans = spans_of(body)
    assert len(spans) == RecordNode.objects.filter(parent_kind=EPISODE, parent_id=episode.pk).count() > 1
    assert "".join(span["text"] for span in spans) == episode.text


@pytest.mark.django_db
def test_a_record_without_nodes_says_whether_it_needs_none_or_misses_them(admin_client, agent, built):
    short = built(agent, "A short memory: it fits the window.")
    missing = unbuilt(agent, prose(200, seed=3))
    for record in (short, missing):
        spans = spans_of(admin_client.get(change_url(record)).content.decode())
        assert len(spans) == 1 and spans[0]["text"] == record.text and "rs-node-whole" in spans[0]["class"]
    body = admin_client.get(change_url(short)).content.decode()
    assert "No nodes, and none needed: the record fits the 40-token window" in body
    assert "(9 tokens)" in body and 'data-state="fits"' in body and '<table class="rs-node-table"' not in body
    body = admin_client.get(change_url(missing)).content.decode()
    assert (
        "Nodes missing: the record runs past the 40-token window" in body and 'data-state="missing"' in body
    )
    assert f'href="{HEALTH}"' in body


@pytest.mark.django_db
def test_nodes_of_another_model_are_shown_and_marked_as_not_current(admin_client, agent, built):
    memory = built(agent, prose(200))
    RecordNode.objects.update(embedding_model="retired-model")
    body = admin_client.get(change_url(memory)).content.decode()
    assert "made by another model (retired-model; the current model is hash-256)" in body
    assert body.count('<span class="rs-refused-names">no</span>') == RecordNode.objects.count()
    assert "".join(span["text"] for span in spans_of(body)) == memory.text


@pytest.mark.django_db
def test_a_record_whose_length_cannot_be_counted_says_so(admin_client, agent, monkeypatch):
    memory = unbuilt(agent, prose(200))
    monkeypatch.setattr("ragsite.embedding.get_embedder", lambda backend=None: NoneEmbedder())
    body = admin_client.get(change_url(memory)).content.decode()
    assert "lexical cannot count this record" in body and 'data-state="unknown"' in body


@pytest.mark.django_db
def test_the_text_is_read_only_and_locking_keeps_the_nodes(admin_client, agent, built):
    memory = built(agent, prose(200))
    count = RecordNode.objects.count()
    response = admin_client.post(change_url(memory), {"locked": "on", "text": "replaced"})
    assert response.status_code == 302
    memory.refresh_from_db()
    assert memory.locked and memory.text != "replaced" and RecordNode.objects.count() == count


@pytest.mark.django_db
def test_the_changelists_count_nodes_and_link_to_the_health_page(admin_client, agent, built):
    memory = built(agent, prose(200))
    built(agent, prose(200, seed=4), kind=EPISODE)
    for model in (Memory, Episode):
        body = admin_client.get(changelist_url(model)).content.decode()
        assert f'<a href="{HEALTH}" id="memory-health">Memory health</a>' in body
        assert "Repair missing nodes" in body
    body = admin_client.get(changelist_url(Memory)).content.decode()
    count = RecordNode.objects.filter(parent_kind=MEMORY, parent_id=memory.pk).count()
    assert f'<td class="field-node_count">{count}</td>' in body


# --- The repair action ---------------------------------------------------------------------------


def run_action(client, model, records):
    return client.post(
        changelist_url(model),
        {"action": "repair_missing_nodes", "_selected_action": [record.pk for record in records]},
        follow=True,
    )


@pytest.mark.django_db
def test_the_repair_action_builds_the_selected_long_records_without_nodes(admin_client, agent, built):
    long_ones = [unbuilt(agent, prose(200, seed=n)) for n in range(2)]
    untouched = unbuilt(agent, prose(200, seed=9))  # not selected
    short = unbuilt(agent, "short")
    divided = built(agent, prose(200, seed=7))
    before = RecordNode.objects.filter(parent_id=divided.pk).count()
    response = run_action(admin_client, Memory, [*long_ones, short, divided])
    assert response.status_code == 200
    said = texts(response)
    names = f"mem:{long_ones[0].pk}, mem:{long_ones[1].pk}"
    assert any(m.startswith(f"Built the nodes of 2 records ({names};") for m in said), said
    assert (
        "1 record already had nodes of the current model; 1 record fits the window and needs no nodes."
        in said
    )
    for record in long_ones:
        nodes = services.record_nodes(MEMORY, record.pk)
        assert len(nodes) > 1 and nodes[0].start_char == 0 and nodes[-1].end_char == len(record.text)
    assert not RecordNode.objects.filter(parent_id__in=[untouched.pk, short.pk]).exists()
    assert RecordNode.objects.filter(parent_id=divided.pk).count() == before
    assert Memory.objects.get(pk=long_ones[0].pk).text == long_ones[0].text  # the record is not modified


@pytest.mark.django_db
def test_the_repair_action_on_episodes_and_stale_nodes(admin_client, agent, built):
    episode = unbuilt(agent, prose(200), kind=EPISODE)
    stale = built(agent, prose(200, seed=2), kind=EPISODE)
    RecordNode.objects.filter(parent_id=stale.pk).update(embedding_model="retired-model")
    said = texts(run_action(admin_client, Episode, [episode, stale]))
    assert any(m.startswith("Built the nodes of 2 records") for m in said), said
    assert set(RecordNode.objects.values_list("embedding_model", flat=True)) == {f"hash-{DIMENSIONS}"}
    assert RecordNode.objects.filter(parent_kind=EPISODE, parent_id=episode.pk).exists()


@pytest.mark.django_db
def test_the_repair_action_builds_at_most_fifty_and_says_how_many_remain(admin_client, agent):
    records = [unbuilt(agent, prose(45, seed=n)) for n in range(52)]
    said = texts(run_action(admin_client, Memory, records))
    assert "2 still need nodes: the action builds at most 50 at a time; run it again." in said
    assert RecordNode.objects.values("parent_id").distinct().count() == 50
    # Oldest first.
    assert not RecordNode.objects.filter(parent_id__in=[r.pk for r in records[-2:]]).exists()


@pytest.mark.django_db
def test_the_repair_action_with_nothing_missing_says_so(admin_client, agent):
    short = unbuilt(agent, "short")
    assert "No selected record was missing nodes." in texts(run_action(admin_client, Memory, [short]))


# --- The health page ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_health_page_shows_the_report(admin_client, agent, built):
    missing = unbuilt(agent, prose(200))
    missing_episode = unbuilt(agent, prose(200, seed=1), kind=EPISODE)
    built(agent, prose(200, seed=2))
    built(agent, "short")
    ensure_schedules()
    response = admin_client.get(HEALTH)
    assert response.status_code == 200
    body = response.content.decode()
    report = services.check_health()
    assert report["missing_nodes"] == 2
    assert f'<dd class="rs-count" data-role="records">{report["records"]}</dd>' in body
    assert f'<dd class="rs-count" data-role="long">{report["long_records"]}</dd>' in body
    assert '<span class="rs-count rs-refused-names">2</span> long records' in body
    assert f'<a href="{change_url(missing)}">mem:{missing.pk}</a>' in body
    assert f'<a href="{change_url(missing_episode)}">ep:{missing_episode.pk}</a>' in body
    assert f"{WINDOW} tokens" in body and f"hash-{DIMENSIONS}" in body and "all present" in body
    assert "memory: repair record nodes" in body and "every 15 minutes" in body
    assert 'id="repair-now"' in body and "csrfmiddlewaretoken" in body


@pytest.mark.django_db
def test_repair_now_builds_the_missing_nodes_and_says_what_it_did(admin_client, agent):
    memory = unbuilt(agent, prose(200))
    episode = unbuilt(agent, prose(200, seed=1), kind=EPISODE)
    response = admin_client.post(HEALTH, follow=True)
    assert response.redirect_chain == [(HEALTH, 302)]
    said = texts(response)
    assert len(said) == 1 and said[0].startswith(
        f"Repair: built the nodes of 2 records (mem:{memory.pk}, ep:{episode.pk};"
    )
    assert said[0].endswith("; 0 remain.")
    assert services.record_nodes(MEMORY, memory.pk) and services.record_nodes(EPISODE, episode.pk)
    assert services.check_health()["missing_nodes"] == 0
    assert 'data-role="none-missing"' in response.content.decode()
    assert texts(admin_client.post(HEALTH, follow=True)) == [
        "Nothing to repair: every long record has nodes of the current model."
    ]


@pytest.mark.django_db
def test_repair_now_repairs_at_most_fifty_records_a_run(admin_client, agent):
    for n in range(53):
        unbuilt(agent, prose(45, seed=n))
    said = texts(admin_client.post(HEALTH, follow=True))
    assert said[0].endswith("; 3 remain (a run repairs at most 50; repair again).")
    assert RecordNode.objects.values("parent_id").distinct().count() == 50
    admin_client.post(HEALTH)
    assert services.check_health()["missing_nodes"] == 0


@pytest.mark.django_db
def test_repair_now_removes_orphan_nodes(admin_client, agent, built):
    memory = built(agent, prose(200))
    RecordNode.objects.create(
        parent_kind=MEMORY,
        parent_id=memory.pk + 1000,
        node_index=0,
        start_char=0,
        end_char=5,
        token_count=3,
        window=WINDOW,
        embedding_model=f"hash-{DIMENSIONS}",
    )
    assert (
        '<span class="rs-count">1</span> nodes whose record is gone'
        in admin_client.get(HEALTH).content.decode()
    )
    said = texts(admin_client.post(HEALTH, follow=True))
    assert said == ["Repair: removed 1 orphan node; 0 remain."]


@pytest.mark.django_db
def test_the_health_page_with_an_embedder_that_cannot_count(admin_client, agent, monkeypatch):
    unbuilt(agent, prose(200))
    monkeypatch.setattr("ragsite.embedding.get_embedder", lambda backend=None: NoneEmbedder())
    body = admin_client.get(HEALTH).content.decode()
    assert "the model cannot count tokens, so no nodes can be built" in body
    assert 'id="repair-now" disabled' in body
    said = texts(admin_client.post(HEALTH, follow=True))
    assert said == [
        "Nothing was repaired: the embedding model cannot count tokens, so no nodes can be built."
    ]


# --- Staff only, CSRF, no paths ------------------------------------------------------------------


@pytest.fixture
def pages(agent):
    memory = unbuilt(agent, prose(200))
    episode = unbuilt(agent, "an episode", kind=EPISODE)
    return [changelist_url(Memory), changelist_url(Episode), change_url(memory), change_url(episode), HEALTH]


@pytest.mark.django_db
def test_anonymous_visitors_and_non_staff_are_sent_to_the_login_page(client, plain_user, pages):
    for user in (None, plain_user):
        if user is not None:
            client.force_login(user)
        for page in pages:
            response = client.get(page)
            assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), page
        response = client.post(HEALTH)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
        response = run_action(client, Memory, Memory.objects.all())
        assert response.redirect_chain[-1][0].startswith("/admin/login/")
    assert not RecordNode.objects.exists()


@pytest.mark.django_db
def test_staff_need_the_memory_permissions(client, staff_user, agent):
    unbuilt(agent, prose(200))
    client.force_login(staff_user)
    assert client.get(HEALTH).status_code == 403
    assert client.post(HEALTH).status_code == 403
    staff_user.user_permissions.add(*Permission.objects.filter(codename__in=["view_memory", "view_episode"]))
    body = client.get(HEALTH).content.decode()
    assert 'id="repair-now"' not in body and "repairing needs the permission" in body
    assert client.post(HEALTH).status_code == 403
    # Without the change permission the action is not offered, and posting it anyway does nothing.
    assert "repair_missing_nodes" not in client.get(changelist_url(Memory)).content.decode()
    run_action(client, Memory, Memory.objects.all())
    assert not RecordNode.objects.exists()
    staff_user.user_permissions.add(
        *Permission.objects.filter(codename__in=["change_memory", "change_episode"])
    )
    client.post(HEALTH)
    assert RecordNode.objects.exists()


@pytest.mark.django_db
def test_posts_without_a_csrf_token_are_refused(admin_user, agent):
    memory = unbuilt(agent, prose(200))
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.post(HEALTH).status_code == 403
    assert (
        client.post(
            changelist_url(Memory), {"action": "repair_missing_nodes", "_selected_action": [memory.pk]}
        ).status_code
        == 403
    )
    assert not RecordNode.objects.exists()


@pytest.mark.django_db
def test_no_memory_page_shows_a_filesystem_path(admin_client, agent, built, settings, tmp_path):
    memory = built(agent, prose(200))
    episode = unbuilt(agent, prose(200, seed=1), kind=EPISODE)
    forbidden = [str(settings.BASE_DIR), str(settings.DATA_DIR), str(settings.MEDIA_ROOT), str(tmp_path)]
    for page in [
        changelist_url(Memory),
        changelist_url(Episode),
        change_url(memory),
        change_url(episode),
        HEALTH,
    ]:
        body = admin_client.get(page).content.decode()
        assert not [f for f in forbidden if f in body], page
    body = admin_client.post(HEALTH, follow=True).content.decode()
    assert not [f for f in forbidden if f in body]
