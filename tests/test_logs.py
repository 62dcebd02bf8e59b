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
