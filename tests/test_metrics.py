"""`GET /metrics`: protected, in Prometheus' text format, counting what the server does by route
pattern, mode and outcome, with no question, text, reader or path in any label.

tests/test_metrics_prometheus.py scrapes a real gunicorn with a real Prometheus."""

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from collections_app.services.ledger import record_call
from collections_app.services.sync_check import check_source
from tests.conftest import HANDBOOK

SECRET_QUESTION = "zebra-quartz-question about annual leave carry over"
SECRET_READER = "reader-named-ophelia"


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return samples(response.content.decode())


def samples(text: str) -> dict:
    """{(name, frozenset(labels.items())): value} of every sample."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: dict, name: str, **labels) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def built(db, knowledge_folder):
    agent, raw = create_agent(agent_id="alpha", name="Alpha")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80, per_reader=True)
    knowledge_folder("handbook", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    return agent, raw, collection


def test_only_loopback_clients_may_scrape_unless_a_token_is_set(client, settings, db):
    assert client.get("/metrics").status_code == 200  # the test client is 127.0.0.1
    far = client.get("/metrics", REMOTE_ADDR="203.0.113.7")
    assert far.status_code == 403 and far.json()["error"]["code"] == "forbidden"
    settings.METRICS_TOKEN = "scrape-secret-123"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "scrape-secret-123"}):
        refused = client.get("/metrics", headers=headers)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert (
        client.get(
            "/metrics", headers={"Authorization": "Bearer scrape-secret-123"}, REMOTE_ADDR="203.0.113.7"
        ).status_code
        == 200
    )
    assert client.post("/metrics").status_code == 405


def test_a_search_counts_by_route_mode_and_read_and_names_no_question_or_reader(client, built):
    agent, raw, _collection = built
    before = scrape(client)
    for _ in range(2):
        response = client.post(
            "/api/v1/collections/handbook/search",
            data=json.dumps({"question": SECRET_QUESTION, "reader": SECRET_READER}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {raw}"},
        )
        assert response.status_code in (200, 403), response.content
    status = str(response.status_code)
    after_response = client.get("/metrics")
    after = samples(after_response.content.decode())
    route = {"route": "api/v1/collections/<name>/search", "method": "POST", "status": status}
    assert (
        value(after, "ragsite_http_requests_total", **route)
        - value(before, "ragsite_http_requests_total", **route)
        == 2
    )
    count = {"route": "api/v1/collections/<name>/search", "method": "POST"}
    assert (
        value(after, "ragsite_http_request_seconds_count", **count)
        - value(before, "ragsite_http_request_seconds_count", **count)
        == 2
    )
    read = {"kind": "search", "channel": "api", "status": status}
    assert value(after, "ragsite_reads_total", **read) - value(before, "ragsite_reads_total", **read) == 2
    # Neither the question, the reader, a collection's name nor a folder reaches the exposition.
    text = after_response.content.decode()
    for secret in (SECRET_QUESTION, "zebra", SECRET_READER, "handbook", "deployment-secret"):
        assert secret not in text


def test_searches_count_per_mode_and_mapped_indexes_are_gauged(client, db, knowledge_folder):
    agent, raw = create_agent(agent_id="beta", name="Beta")
    collection = create_collection(agent=agent, name="notes", method="fixed", size=80)
    knowledge_folder("notes", HANDBOOK, agent="beta")
    assert build_collection(collection=collection).status == "succeeded"
    before = scrape(client)
    response = client.post(
        "/api/v1/collections/notes/search",
        data=json.dumps({"question": "mileage reimbursed"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )
    mode = response.json()["mode"]
    after = scrape(client)
    assert (
        value(after, "ragsite_searches_total", mode=mode) - value(before, "ragsite_searches_total", mode=mode)
        == 1
    )
    assert value(after, "ragsite_indexes_mapped") >= 1 and value(after, "ragsite_index_mapped_bytes") > 0
    assert value(after, "ragsite_embedded_texts_total", purpose="question") > value(
        before, "ragsite_embedded_texts_total", purpose="question"
    )


def test_builds_documents_embedding_sync_checks_and_spend_are_counted(client, db, knowledge_folder):
    before = scrape(client)
    agent, _raw = create_agent(agent_id="gamma", name="Gamma")
    collection = create_collection(agent=agent, name="policies", method="fixed", size=80)
    knowledge_folder("policies", {**HANDBOOK, "broken.pdf": b"%PDF-1.4 not really"}, agent="gamma")
    assert build_collection(collection=collection).status == "succeeded"
    check_source(collection=collection)
    record_call(
        agent=agent, collection=collection, purpose="judge", model="judge-model", tokens_in=120, tokens_out=3
    )
    after = scrape(client)

    def grew(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("ragsite_builds_total", outcome="succeeded") == 1
    assert grew("ragsite_build_seconds_count", outcome="succeeded") == 1
    assert grew("ragsite_build_documents_total", outcome="read") == 3
    assert grew("ragsite_build_documents_total", outcome="refused") == 1
    assert grew("ragsite_embedded_texts_total", purpose="build") > 0
    assert grew("ragsite_sync_checks_total", outcome="unchanged") == 1
    assert grew("ragsite_model_calls_total", purpose="judge", model="judge-model") == 1
    assert grew("ragsite_model_tokens_total", purpose="judge", direction="in") == 120
    assert ("ragsite_task_queue_depth", frozenset()) in after
    assert value(after, "ragsite_task_queue_oldest_build_seconds") == 0  # nothing queued


def test_webhook_attempts_are_counted_by_outcome(
    client, db, knowledge_folder, settings, django_capture_on_commit_callbacks
):
    from django.utils import timezone

    from collections_app.models import Webhook, WebhookDelivery
    from collections_app.services import webhooks
    from tests.servers import WebhookReceiver, serving

    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receiver listens on 127.0.0.1
    agent, _raw = create_agent(agent_id="delta", name="Delta")
    collection = create_collection(agent=agent, name="hooks", method="fixed", size=80)
    knowledge_folder("hooks", HANDBOOK, agent="delta")
    before = scrape(client)
    with serving(WebhookReceiver()) as receiver:
        Webhook.objects.create(
            agent=agent, url=webhooks.validate_url(receiver.url), events=[Webhook.BUILD_SUCCEEDED]
        )
        receiver.statuses = [500]
        with django_capture_on_commit_callbacks(execute=True):
            assert build_collection(collection=collection).status == "succeeded"
        delivery = WebhookDelivery.objects.get()
        WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
        assert webhooks.deliver(delivery_id=delivery.pk) == "delivered"
    after = scrape(client)
    for outcome in ("retrying", "delivered"):
        grew = value(after, "ragsite_webhook_attempts_total", outcome=outcome) - value(
            before, "ragsite_webhook_attempts_total", outcome=outcome
        )
        assert grew == 1, outcome
