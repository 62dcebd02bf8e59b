"""A website as a collection's source, through httpx: a crawl from a start page and/or a sitemap.

The crawl stays on the start page's host (scheme, name and port), honours its robots.txt (for the
agent `ragsite`), follows links to at most `max_depth` hops and reads at most `max_pages` pages (and
never more than SOURCE_MAX_DOCUMENTS), keeps only paths the `include` patterns take and `exclude`
leaves (shell-style, comma-separated, on the URL's path), and skips addresses with a query string. A
redirect is followed only to the same host, at most MAX_REDIRECTS in a row; a page that is missing or
fails is left out, but a start page or sitemap that cannot be had fails the listing (the last build
keeps answering). Only HTML, plain text and PDF answers are documents.

A document's name is its URL's path (`/` is `index.html`, `/guide/` is `guide/index.html`, a path
with no suffix gets `.html`), its token the SHA-256 of the page. Finding links needs the pages, so a
listing reads them; the build then reads each page from the listing it made, not a second time.

A listing asks again conditionally (`If-None-Match`, `If-Modified-Since`) for each page this node read
before: a page that answers 304 keeps the token, size and links remembered of it (`Remembered`, in a
file per collection under SOURCE_CACHE_DIR, never its text), so a sync check of an unchanged site
downloads nothing but its robots.txt and sitemaps. A last-modified date is used only when the answer's
own date is at least a second later: with whole seconds, a page changed in the second it was read would
otherwise look unchanged for ever (RFC 9110's weak validator rule).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser
from pathlib import Path
from posixpath import splitext
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

from .base import (
    Entry,
    InvalidSource,
    SourceUnavailable,
    cached,
    checked_url,
    max_documents,
    prune_cached,
    remove_cached,
    timeout_seconds,
)

SETTINGS = ("start_url", "sitemap_url", "include", "exclude", "max_pages", "max_depth")
AGENT = "ragsite"
MAX_PAGE_BYTES = 10 * 1024 * 1024
MAX_REDIRECTS = 5
MAX_SITEMAPS = 20
DEFAULT_PAGES, DEFAULT_DEPTH = 500, 5
KINDS = {
    "text/html": ".html",
    "application/xhtml+xml": ".html",
    "text/plain": ".txt",
    "application/pdf": ".pdf",
}
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@dataclass(frozen=True)
class Remembered:
    """What a listing keeps of a page that answered 200, to ask for it conditionally next time."""

    kind: str
    token: str
    size: int
    links: tuple[str, ...]
    etag: str = ""
    modified: str = ""


@dataclass(frozen=True)
class Page:
    """A page's answer: its final URL, document suffix and body, or `body` None when it answered 304
    to a conditional request (then `remembered` holds what is known of it)."""

    url: str
    kind: str
    body: bytes | None
    etag: str = ""
    modified: str = ""
    remembered: Remembered | None = None


def checked_settings(raw: dict) -> dict:
    unknown = sorted(set(raw) - set(SETTINGS))
    if unknown:
        raise InvalidSource(f"a web source takes {', '.join(SETTINGS)}; not {', '.join(unknown[:5])}")
    start, sitemap = raw.get("start_url") or "", raw.get("sitemap_url") or ""
    if not start and not sitemap:
        raise InvalidSource("a web source needs a start_url, a sitemap_url or both")
    for url, what in ((start, "start_url"), (sitemap, "sitemap_url")):
        if url:
            checked_url(url, schemes=("https", "http"), what=f"a web source's {what}")
    if start and sitemap and _origin(start) != _origin(sitemap):
        raise InvalidSource("a web source's sitemap_url is on the start_url's host")
    checked = {"start_url": start, "sitemap_url": sitemap}
    for name in ("include", "exclude"):
        value = raw.get(name) or ""
        if not isinstance(value, str) or len(value) > 2000:
            raise InvalidSource(f"a web source's {name} is comma-separated path patterns (/docs/*)")
        checked[name] = value
    for name, default, top in (("max_pages", DEFAULT_PAGES, 100_000), ("max_depth", DEFAULT_DEPTH, 50)):
        value = str(raw.get(name) or default)
        if not value.isdigit() or not 1 <= int(value) <= top:
            raise InvalidSource(f"a web source's {name} is a whole number from 1 to {top}")
        checked[name] = value
    return checked


def checked_credentials(raw: dict) -> dict:
    if raw:
        raise InvalidSource("a web source takes no credentials: it reads what the site shows anybody")
    return {}


def _origin(url: str) -> tuple[str, str]:
    split = urlsplit(url)
    return split.scheme, split.netloc.lower()


class _Links(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.links.append(href)


class WebOrigin:
    kind = "web"

    def __init__(self, *, collection_id: int, settings: dict, credentials: dict):
        self.settings = settings
        self.collection_id = collection_id
        self.home = _origin(settings["start_url"] or settings["sitemap_url"])
        self.pages: dict[str, bytes] = {}  # the listing's pages by URL, read by fetch
        self.known: dict[str, Remembered] = {}  # what earlier listings kept, by URL (`remembered`)

    def entries(self) -> list[Entry]:
        import httpx

        seed = self.settings["start_url"] or self.settings["sitemap_url"]
        checked_url(seed, schemes=("https", "http"), what="the web source's address")
        limit = min(int(self.settings["max_pages"]), max_documents())
        depth_limit = int(self.settings["max_depth"])
        self.pages.clear()
        self.known = remembered(self.collection_id)
        kept: dict[str, Remembered] = {}
        entries: dict[str, Entry] = {}
        with httpx.Client(
            timeout=timeout_seconds(), follow_redirects=False, headers={"User-Agent": AGENT}
        ) as web:
            robots = self._robots(web)
            queue: list[tuple[str, int]] = []
            if self.settings["start_url"]:
                queue.append((self.settings["start_url"], 0))
            if self.settings["sitemap_url"]:
                queue += [(url, depth_limit) for url in self._sitemap(web, self.settings["sitemap_url"])]
            seen: set[str] = set()
            first = True
            while queue and len(entries) < limit:
                url, depth = queue.pop(0)
                url = self._normal(url)
                if url is None or url in seen or not robots.can_fetch(AGENT, url) or not self._wanted(url):
                    first = False
                    continue
                seen.add(url)
                got = self._get(web, url, required=first and bool(self.settings["start_url"]))
                first = False
                if got is None:
                    continue
                name = self._name(got.url, got.kind)
                if name is None or name in entries:
                    continue
                page = got.remembered or _remember(got)
                entries[name] = Entry(name=name, size=page.size, token=page.token, key=got.url)
                kept[got.url] = page
                if got.body is not None:
                    self.pages[got.url] = got.body
                if got.kind == ".html" and depth < depth_limit:
                    queue += [(urljoin(got.url, link), depth + 1) for link in page.links]
        if not self.settings["start_url"] and not entries:
            raise SourceUnavailable("the web source's sitemap lists no pages it may read")
        remember(self.collection_id, kept)
        return sorted(entries.values(), key=lambda e: e.name)

    def fetch(self, entry: Entry, limit: int) -> bytes:
        if entry.key in self.pages:
            return self.pages[entry.key][:limit]
        import httpx

        with httpx.Client(
            timeout=timeout_seconds(), follow_redirects=False, headers={"User-Agent": AGENT}
        ) as web:
            got = self._get(web, entry.key, required=True, conditional=False)
        return got.body[:limit]

    def _robots(self, web) -> RobotFileParser:
        robots = RobotFileParser()
        scheme, host = self.home
        try:
            answer = web.get(f"{scheme}://{host}/robots.txt")
        except Exception as exc:
            raise SourceUnavailable(f"the web source could not be reached ({type(exc).__name__})") from None
        if answer.status_code in (401, 403):
            robots.disallow_all = True
        elif answer.status_code == 200:
            robots.parse(answer.text[: 512 * 1024].splitlines())
        else:
            robots.allow_all = True
        return robots

    def _sitemap(self, web, url: str) -> list[str]:
        found, sitemaps, read = [], [url], 0
        while sitemaps and read < MAX_SITEMAPS:
            got = self._get(web, sitemaps.pop(0), required=read == 0, sitemap=True)
            read += 1
            if got is None:
                continue
            try:
                tree = ElementTree.fromstring(got.body)
            except ElementTree.ParseError:
                raise SourceUnavailable("the web source's sitemap is not XML") from None
            locations = [(loc.text or "").strip() for loc in tree.iter(f"{SITEMAP}loc")]
            if tree.tag == f"{SITEMAP}sitemapindex":
                sitemaps += locations
            else:
                found += locations
        return found

    def _get(self, web, url: str, *, required: bool, sitemap: bool = False, conditional: bool = True):
        """The `Page` at `url`, following same-host redirects, asked conditionally when an earlier listing
        remembered it (`conditional`); None for a page left out (missing, elsewhere, not a document);
        `SourceUnavailable` when `required`."""
        for _hop in range(MAX_REDIRECTS + 1):
            known = self.known.get(url) if conditional and not sitemap else None
            try:
                with web.stream("GET", url, headers=_conditions(known)) as answer:
                    status = answer.status_code
                    location = answer.headers.get("location")
                    kind = KINDS.get(answer.headers.get("content-type", "").split(";")[0].strip().lower())
                    etag, modified = answer.headers.get("etag", ""), _strong_date(answer.headers)
                    body = bytearray()
                    if status == 200:
                        for block in answer.iter_bytes():
                            body += block
                            if len(body) > MAX_PAGE_BYTES:
                                return _left_out(
                                    required, f"a page is larger than {MAX_PAGE_BYTES >> 20} MiB"
                                )
            except Exception as exc:
                return _left_out(required, f"could not be reached ({type(exc).__name__})")
            if 300 <= status < 400 and location:
                target = self._normal(urljoin(url, location))
                if target is None:
                    return _left_out(required, "redirected to another host")
                url = target
                continue
            if status == 304 and known is not None:
                return Page(url, known.kind, None, remembered=known)
            if status != 200:
                return _left_out(required, f"answered {status}")
            if sitemap:
                return Page(url, ".xml", bytes(body))
            if kind is None:
                return None
            return Page(url, kind, bytes(body), etag=etag, modified=modified)
        return _left_out(required, f"redirected more than {MAX_REDIRECTS} times")

    def _normal(self, url: str) -> str | None:
        """The URL without its fragment, or None when it leaves the host or carries a query."""
        split = urlsplit(url)
        if (split.scheme, split.netloc.lower()) != self.home or split.query:
            return None
        return urlunsplit((split.scheme, split.netloc, split.path or "/", "", ""))

    def _wanted(self, url: str) -> bool:
        path = urlsplit(url).path
        include = [p.strip() for p in self.settings["include"].split(",") if p.strip()]
        exclude = [p.strip() for p in self.settings["exclude"].split(",") if p.strip()]
        if include and not any(fnmatch.fnmatchcase(path, p) for p in include):
            return False
        return not any(fnmatch.fnmatchcase(path, p) for p in exclude)

    @staticmethod
    def _name(url: str, kind: str) -> str | None:
        path = unquote(urlsplit(url).path).lstrip("/")
        if not path or path.endswith("/"):
            path += "index.html"
        elif not splitext(path)[1]:
            path += kind
        if any(part in ("", ".", "..") for part in path.split("/")):
            return None
        return path


def _links(body: bytes) -> list[str]:
    parser = _Links()
    try:
        parser.feed(body.decode("utf-8", "replace"))
    except Exception:  # a page too broken to parse gives no links; it is still a document
        return []
    return [link for link in parser.links if not re.match(r"^(mailto|javascript|tel|data):", link, re.I)]


def _left_out(required: bool, why: str):
    if required:
        raise SourceUnavailable(f"the web source's start page or sitemap {why}")
    return None


def _remember(page: Page) -> Remembered:
    links = tuple(_links(page.body)) if page.kind == ".html" else ()
    return Remembered(
        kind=page.kind,
        token=hashlib.sha256(page.body).hexdigest(),
        size=len(page.body),
        links=links,
        etag=page.etag,
        modified=page.modified,
    )


def _conditions(known: Remembered | None) -> dict[str, str]:
    if known is None:
        return {}
    asked = {"If-None-Match": known.etag} if known.etag else {}
    if known.modified:
        asked["If-Modified-Since"] = known.modified
    return asked


def _strong_date(headers) -> str:
    """The answer's Last-Modified when its Date is at least a second later, else "" (a weak validator)."""
    modified, date = headers.get("last-modified", ""), headers.get("date", "")
    try:
        if (
            modified
            and date
            and (parsedate_to_datetime(date) - parsedate_to_datetime(modified)).total_seconds() >= 1
        ):
            return modified
    except (TypeError, ValueError):
        pass
    return ""


def cache_of(collection_id: int) -> Path:
    """This node's file of what a collection's web listings remembered (URLs, tokens, links; no text)."""
    return cached(collection_id, ".web.json")


def remembered(collection_id: int) -> dict[str, Remembered]:
    """What the last listing on this node remembered, by URL; {} when there is none or it is unreadable
    (then every page is asked for whole, as on a first listing)."""
    try:
        pages = json.loads(cache_of(collection_id).read_text())
        return {url: Remembered(**{**page, "links": tuple(page["links"])}) for url, page in pages.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def remember(collection_id: int, pages: dict[str, Remembered]) -> None:
    """Keep this listing's pages (only those: a page no longer listed is forgotten), written whole or not
    at all, so a listing on another thread reads the last complete one."""
    path = cache_of(collection_id)
    scratch = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, scratch = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(handle, "w") as out:
            json.dump({url: asdict(page) for url, page in pages.items()}, out)
        os.replace(scratch, path)
        scratch = None
    except OSError:
        pass  # the next listing asks for every page whole: slower, never wrong
    finally:
        if scratch is not None:
            Path(scratch).unlink(missing_ok=True)


def prune(keep: set[int]) -> list[int]:
    """Remove what this node remembers of every collection not in `keep` (those still read from a
    website). Returns the collection ids removed."""
    return prune_cached(".web.json", keep)


def forget(collection_id: int) -> None:
    """Remove what this node remembers of a collection's website."""
    remove_cached(cache_of(collection_id))
