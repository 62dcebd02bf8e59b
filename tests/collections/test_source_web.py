"""A website as a collection's source (docs/sources.md): http.server on loopback serving a small site
with a sitemap, robots.txt, a redirect, a 404, a link to another host and a page that changes; the
crawl keeps to its host and its caps, and a sync picks up a changed, a new and a removed page."""

import os
import time

import pytest

from collections_app.models import BuildRun, Document, Paragraph
from collections_app.services import origins, sync, sync_check
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.documents import delete_collection
from collections_app.services.origins import web
from tests.collections.sources_servers import Website, texts
from tests.collections.sources_servers import web_page as page

pytestmark = pytest.mark.django_db


@pytest.fixture
def served(tmp_path, settings):
    settings.SOURCE_ALLOWED_HOSTS = []
    settings.SOURCE_TIMEOUT = 10
    site = tmp_path / "site"
    (site / "private").mkdir(parents=True)
    (site / "guide").mkdir()
    (site / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n")
    port_placeholder = "PORT"
    (site / "index.html").write_text(
        page(
            "Handbook",
            "Welcome to the staff handbook.",
            "a.html",
            "/old",
            "/away",
            "missing.html",
            "private/secret.html",
            f"http://localhost:{port_placeholder}/a.html",
            "guide/",
            "a.html?print=1",
            "mailto:hr@example.org",
        )
    )
    (site / "a.html").write_text(
        page("Leave", "Carry-over of annual leave is capped at five days.", "c.html")
    )
    (site / "c.html").write_text(page("Deep", "Deep pages are read up to the depth cap."))
    (site / "guide" / "index.html").write_text(page("Guide", "Mileage is reimbursed at 0.42 per kilometre."))
    (site / "private" / "secret.html").write_text(page("Secret", "Salaries of the board."))
    (site / "only-in-sitemap.html").write_text(page("Sitemap", "Badges are worn at all times on site."))
    server = Website(site).start()
    index = (site / "index.html").read_text().replace(port_placeholder, str(server.port))
    (site / "index.html").write_text(index)
    (site / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{server.url}only-in-sitemap.html</loc></url></urlset>"
    )
    yield server, site
    server.stop()


def make(agent, server, **extra):
    collection = create_collection(agent=agent, name="site", method="fixed", size=80)
    origins.set_source(
        collection=collection,
        kind="web",
        settings={"start_url": server.url, "sitemap_url": server.url + "sitemap.xml", **extra},
    )
    return collection


def names(collection) -> set[str]:
    return set(Document.objects.filter(collection=collection).values_list("name", flat=True))


def test_a_crawl_keeps_to_its_host_robots_and_links(agent, served):
    server, _site = served
    collection = make(agent, server)
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED, run.error
    # The redirect lands on a.html (read once); robots.txt keeps private/ out; the 404, the other host
    # (localhost, also through /away), the query string and mailto: are left out; the sitemap adds its page.
    assert names(collection) == {"index.html", "a.html", "c.html", "guide/index.html", "only-in-sitemap.html"}
    assert "five days" in texts(collection, "annual leave carry-over")
    assert "Salaries" not in texts(collection, "salaries of the board")


def test_the_caps_and_patterns_bound_the_crawl(agent, served):
    server, _site = served
    shallow = make(agent, server, max_depth="1", exclude="/guide/*", sitemap_url="")
    assert build_collection(collection=shallow).status == BuildRun.SUCCEEDED
    assert names(shallow) == {"index.html", "a.html"}  # c.html is two links away; guide/ excluded
    origins.set_source(collection=shallow, kind="web", settings={"start_url": server.url, "max_pages": "2"})
    assert build_collection(collection=shallow).status == BuildRun.SUCCEEDED
    assert len(names(shallow)) == 2


def test_a_sync_picks_up_a_changed_a_new_a_removed_and_a_moved_page(agent, served, check):
    server, site = served
    collection = make(agent, server)
    sync.set_sync(collection=collection, every=5)
    assert check(collection).build.status == BuildRun.SUCCEEDED
    assert check(collection).outcome == "unchanged"
    known = set(Paragraph.objects.filter(collection=collection).values_list("fingerprint", flat=True))
    (site / "guide" / "index.html").write_text(page("Guide", "Mileage is reimbursed at 0.55 per kilometre."))
    (site / "c.html").unlink()
    (site / "a.html").write_text(
        page("Leave", "Carry-over of annual leave is capped at five days.", "d.html")
    )
    (site / "d.html").write_text(page("Canteen", "The canteen serves lunch from noon until two."))
    # A rename on a website: the page moves to another address, which the sitemap now lists.
    (site / "only-in-sitemap.html").rename(site / "badges.html")
    sitemap = site / "sitemap.xml"
    sitemap.write_text(sitemap.read_text().replace("only-in-sitemap.html", "badges.html"))
    found = check(collection)
    assert (found.new, found.changed, found.deleted) == (
        ["badges.html", "d.html"],
        ["a.html", "guide/index.html"],
        ["c.html", "only-in-sitemap.html"],
    )
    assert found.build.status == BuildRun.SUCCEEDED
    assert "0.55 per kilometre" in texts(collection, "mileage per kilometre")
    assert "worn at all times" in texts(collection, "badges worn on site")
    # Only text never seen before is embedded: the moved page's is found by its text.
    now = list(Paragraph.objects.filter(collection=collection).values_list("document__name", "fingerprint"))
    assert any(name == "badges.html" and fingerprint in known for name, fingerprint in now)
    assert found.build.paragraphs_embedded == len({f for _name, f in now if f not in known})


def test_an_unreachable_site_keeps_the_last_build_answering(agent, served, check):
    server, _site = served
    collection = make(agent, server)
    sync.set_sync(collection=collection, every=5)
    check(collection)
    server.stop()
    away = check(collection)
    assert (
        away.outcome.startswith(sync_check.UNREADABLE) and "web source could not be reached" in away.outcome
    )
    assert build_collection(collection=collection).status == BuildRun.FAILED
    assert "five days" in texts(collection, "annual leave carry-over")


def test_a_web_source_takes_no_credentials_and_needs_an_address(agent):
    collection = create_collection(agent=agent, name="site")
    with pytest.raises(origins.InvalidSource):
        origins.set_source(collection=collection, kind="web", settings={})
    with pytest.raises(origins.InvalidSource):
        origins.set_source(
            collection=collection,
            kind="web",
            settings={"start_url": "http://127.0.0.1:1/"},
            credentials={"username": "x"},
        )


def pages_asked(server, since: int) -> dict[str, int]:
    """Each HTML page's status in the requests made since the `since`-th (robots.txt, sitemap left out)."""
    return {path: status for path, status in server.answers[since:] if path.endswith((".html", "/"))}


def test_an_unchanged_site_answers_a_sync_check_with_304s_and_a_changed_page_is_read(
    agent, tmp_path, settings, check
):
    settings.SOURCE_ALLOWED_HOSTS, settings.SOURCE_TIMEOUT = [], 10
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(page("Handbook", "Welcome to the staff handbook.", "a.html", "b.html"))
    (site / "a.html").write_text(page("Leave", "Carry-over of annual leave is capped at five days."))
    (site / "b.html").write_text(page("Desk", "The service desk opens at eight."))
    for file in site.iterdir():
        os.utime(file, (time.time() - 3600, time.time() - 3600))  # written an hour ago: a strong date
    server = Website(site, etags=True).start()
    try:
        collection = make_quiet(agent, server)
        assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
        since = len(server.answers)
        found = check(collection)
        assert found.outcome == "unchanged"
        assert pages_asked(server, since) == {"/": 304, "/a.html": 304, "/b.html": 304}
        (site / "b.html").write_text(page("Desk", "The service desk opens at nine.", "c.html"))
        (site / "c.html").write_text(page("Canteen", "The canteen serves lunch from noon."))
        since = len(server.answers)
        found = check(collection)
        assert (found.new, found.changed, found.deleted) == (["c.html"], ["b.html"], [])
        assert found.build.status == BuildRun.SUCCEEDED
        # The check downloads the changed and the new page; its build lists the site again (all 304 now)
        # and downloads just those two to read them; the unchanged page is reused, never downloaded.
        pages = [answer for answer in server.answers[since:] if answer[0] != "/robots.txt"]
        assert pages == [
            *[("/", 304), ("/a.html", 304), ("/b.html", 200), ("/c.html", 200)],
            *[("/", 304), ("/a.html", 304), ("/b.html", 304), ("/c.html", 304)],
            *[("/b.html", 200), ("/c.html", 200)],
        ]
        assert "opens at nine" in texts(collection, "when does the service desk open")
        assert "lunch from noon" in texts(collection, "canteen lunch")
        assert "five days" in texts(collection, "annual leave carry-over")
    finally:
        server.stop()


def test_a_page_changed_in_the_second_it_was_read_is_not_taken_for_unchanged(
    agent, tmp_path, settings, check
):
    """http.server's dates are whole seconds: a Last-Modified no earlier than a second before the answer's
    Date may hide a later change in that second, so it is not used to ask conditionally."""
    settings.SOURCE_ALLOWED_HOSTS, settings.SOURCE_TIMEOUT = [], 10
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(page("Handbook", "Welcome.", "a.html"))
    (site / "a.html").write_text(page("Leave", "Carry-over of annual leave is capped at five days."))
    written = int(time.time()) - 600
    for file in site.iterdir():
        os.utime(file, (written, written))
    server = Website(site).start()
    server.date = written + 0.5  # the site answers in the second its pages were written
    try:
        collection = make_quiet(agent, server)
        assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
        (site / "a.html").write_text(page("Leave", "Carry-over of annual leave is capped at ten days."))
        os.utime(site / "a.html", (written, written))  # changed within that same second
        server.date = None
        found = check(collection)
        assert found.changed == ["a.html"] and found.build.status == BuildRun.SUCCEEDED
        assert "ten days" in texts(collection, "annual leave carry-over")
        since = len(server.answers)
        assert check(collection).outcome == "unchanged"
        assert pages_asked(server, since) == {"/": 304, "/a.html": 304}  # dated a second before: strong
    finally:
        server.stop()


def test_what_a_site_listing_remembers_goes_with_its_collection(agent, served, settings):
    server, _site = served
    collection = make(agent, server)
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    remembered = web.cache_of(collection.pk)
    assert remembered.exists() and "five days" not in remembered.read_text()  # URLs and links, no text
    stray = web.cache_of(987654)
    stray.write_text("{}")
    assert 987654 in origins.prune_copies() and not stray.exists() and remembered.exists()
    delete_collection(collection=collection)
    assert not remembered.exists()


def make_quiet(agent, server):
    collection = create_collection(agent=agent, name="quiet", method="fixed", size=80)
    origins.set_source(collection=collection, kind="web", settings={"start_url": server.url})
    return collection
