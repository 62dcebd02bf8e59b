"""Logs cannot leak credentials: upstream URLs are written without userinfo or query
(docs/decisions/0054)."""

import io
import logging

import httpx
import pytest

from ragsite.logs import RedactUpstreamURLs, redact_url
from tests.servers import JudgeServer, serving


@pytest.mark.parametrize(
    ("url", "logged"),
    [
        (
            "http://user:s3cret@127.0.0.1:8199/v1/embeddings?api_key=KEY123",
            "http://127.0.0.1:8199/v1/embeddings",
        ),
        ("https://embed.example.com/v1?token=abc#frag", "https://embed.example.com/v1"),
        ("http://[::1]:9000/v1/chat/completions", "http://[::1]:9000/v1/chat/completions"),
    ],
)
def test_a_url_keeps_only_scheme_host_port_and_path(url, logged):
    assert redact_url(url) == logged


def test_the_configured_console_handler_logs_httpx_requests_without_credentials():
    handler = next(
        h for h in logging.getLogger().handlers if any(isinstance(f, RedactUpstreamURLs) for f in h.filters)
    )
    captured = io.StringIO()
    previous = handler.setStream(captured)
    httpx_logger = logging.getLogger("httpx")
    level, httpx_logger.level = httpx_logger.level, logging.INFO
    try:
        with serving(JudgeServer()) as server:
            port = server.url.rsplit(":", 1)[1]
            httpx.post(
                f"http://user:s3cretpass@127.0.0.1:{port}/v1/chat/completions?api_key=KEY123",
                json={"model": "judge", "messages": []},
                timeout=5,
            )
    finally:
        handler.setStream(previous)
        httpx_logger.level = level
    text = captured.getvalue()
    assert f"POST http://127.0.0.1:{port}/v1/chat/completions" in text
    assert "s3cretpass" not in text and "KEY123" not in text and "user" not in text


@pytest.mark.django_db
def test_an_admin_permission_denied_and_a_500_are_logged_without_install_paths(
    client, settings, django_user_model
):
    """Issue 24, item 10: Django logs tracebacks at WARNING and ERROR; the console formatter replaces the
    checkout, the Python and the data folders with placeholders, so no deployment path reaches the log."""
    import sys
    from pathlib import Path

    from django.urls import reverse

    from ragsite.logs import WithoutInstallPaths

    handler = next(h for h in logging.getLogger().handlers if isinstance(h.formatter, WithoutInstallPaths))
    captured = io.StringIO()
    previous = handler.setStream(captured)
    try:
        clerk = django_user_model.objects.create_user("clerk", password="pw-clerk-123", is_staff=True)
        client.force_login(clerk)
        assert client.get(reverse("admin:collections_app_collection_playground")).status_code == 403
        try:
            Path(settings.DATA_DIR, "no-such-folder", "x").read_text()
        except OSError:
            logging.getLogger("ragsite.api").error("unexpected OSError in %r", "/api/v1/x", exc_info=True)
    finally:
        handler.setStream(previous)
    text = captured.getvalue()
    assert "Forbidden (Permission denied)" in text and "Traceback" in text and "FileNotFoundError" in text
    assert 'File "<ragsite>/' in text and 'File "<python>/' in text and "<data>/no-such-folder" in text
    for root in {str(settings.BASE_DIR), sys.prefix, str(Path(sys.prefix).resolve()), str(settings.DATA_DIR)}:
        assert root not in text, root


def test_the_task_clusters_routine_lines_are_debug_and_its_start_and_failures_stay(caplog):
    """An idle cluster made three schedule lines a minute at INFO, burying the one-time admin password."""
    queue = logging.getLogger("django-q")  # django-q2's logger, as configured by settings.LOGGING
    with caplog.at_level(logging.INFO):
        queue.info("Process-1 created task thirty-lima from schedule [collections: check synced folders]")
        queue.info("Processed 'collections_app.tasks.sweep_sync' (thirty-lima)")
        # The line django-q2 1.11's worker writes for every task it takes (seen three a minute, idle).
        queue.info(
            "Process-066ade1f processing october-low-jupiter-papa 'collections_app.tasks.sweep_stale_builds'"
            " [collections: fail builds whose worker died]"
        )
        queue.info("Process-2 ready for work at 1234")
        queue.info("Q Cluster thirty-lima starting.")
        queue.error("Failed 'collections_app.tasks.run_build' (x) - boom")
    shown = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "django-q"]
    assert shown == [
        ("INFO", "Q Cluster thirty-lima starting."),
        ("ERROR", "Failed 'collections_app.tasks.run_build' (x) - boom"),
    ]
    caplog.clear()
    level = queue.level
    queue.setLevel(logging.DEBUG)  # LOG_LEVEL=DEBUG shows them, as DEBUG
    try:
        with caplog.at_level(logging.DEBUG):
            queue.info("Process-1 created task thirty-lima from schedule [x]")
    finally:
        queue.setLevel(level)
    assert [(r.levelname, r.name) for r in caplog.records] == [("DEBUG", "django-q")]


@pytest.mark.django_db
def test_a_favicon_is_served_so_no_page_logs_a_not_found(client, caplog):
    with caplog.at_level(logging.INFO):
        icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert icon.content.startswith(b"<svg")
    assert not [r for r in caplog.records if r.name == "django.request"]


def test_json_lines_carry_the_request_id_and_no_question(client, db, knowledge_folder):
    """LOG_FORMAT=json: the configured console handler, given the JSON formatter, writes one object a
    line; a search's INFO line carries the id the answer's X-Request-ID names, and never the question."""
    import json

    from collections_app.services.agents import create_agent, create_collection
    from collections_app.services.builds import build_collection
    from ragsite.logs import JsonLines
    from tests.conftest import HANDBOOK

    agent, raw = create_agent(agent_id="logged", name="Logged")
    knowledge_folder("handbook", HANDBOOK, agent="logged")
    assert build_collection(collection=create_collection(agent=agent, name="handbook")).status == "succeeded"
    handler = next(
        h for h in logging.getLogger().handlers if any(isinstance(f, RedactUpstreamURLs) for f in h.filters)
    )
    captured = io.StringIO()
    previous, formatter = handler.setStream(captured), handler.formatter
    handler.setFormatter(JsonLines())
    try:
        answers = [
            client.post(
                "/api/v1/collections/handbook/search",
                data=json.dumps({"question": "quasar-walrus mileage question"}),
                content_type="application/json",
                headers={"Authorization": f"Bearer {raw}", **extra},
            )
            for extra in ({"X-Request-ID": "trace-me-42"}, {"X-Request-ID": "not a plain id\n{}"})
        ]
    finally:
        handler.setStream(previous)
        handler.setFormatter(formatter)
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    searches = [line for line in lines if line["logger"] == "ragsite.search" and "mode" in line["message"]]
    assert [line["request_id"] for line in searches] == [a["X-Request-ID"] for a in answers]
    assert answers[0]["X-Request-ID"] == "trace-me-42"
    assert len(answers[1]["X-Request-ID"]) == 32  # a header that is not a plain token is replaced
    assert set(searches[0]) == {"time", "level", "logger", "message", "request_id", "trace_id"}
    assert "quasar" not in captured.getvalue()


def test_an_unknown_log_format_stops_the_settings(monkeypatch):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "config.settings", "LOG_FORMAT": "xml"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and 'LOG_FORMAT is "plain" or "json"' in done.stderr
