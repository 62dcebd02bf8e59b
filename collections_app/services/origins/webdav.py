"""A WebDAV share (Nextcloud, ownCloud, SharePoint's WebDAV, Apache mod_dav, ...) as a collection's
source, through httpx.

A listing walks the folder with `PROPFIND` at `Depth: 1` (many servers refuse `infinity`), one request
per sub-folder, bounded by SOURCE_MAX_DOCUMENTS documents and MAX_FOLDERS folders; each file's token
is its ETag (its last-modified date and size where the server gives no ETag), so a check downloads
nothing. A fetch is one `GET`, read to at most the document limit. Redirects are not followed, and
every address listed must stay on the share's host and under its folder. Credentials are `username`
and `password` (HTTP Basic) or a `token` (Bearer).
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from urllib.parse import quote, unquote, urljoin, urlsplit

from . import readers
from .base import (
    Entry,
    InvalidSource,
    SourceUnavailable,
    checked_url,
    max_documents,
    timeout_seconds,
    too_many,
)

SETTINGS = ("url", "path", "reader_rules")
CREDENTIALS = ("username", "password", "token")
MAX_FOLDERS = 2000
MAX_LISTING_BYTES = 16 * 1024 * 1024  # one PROPFIND answer
DAV = "{DAV:}"
PROPFIND = (
    b'<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="DAV:"><d:prop><d:resourcetype/>'
    b"<d:getcontentlength/><d:getetag/><d:getlastmodified/></d:prop></d:propfind>"
)


def checked_settings(raw: dict) -> dict:
    unknown = sorted(set(raw) - set(SETTINGS))
    if unknown:
        raise InvalidSource(f"a webdav source takes {', '.join(SETTINGS)}; not {', '.join(unknown[:5])}")
    url = checked_url(raw.get("url"), schemes=("https", "http"), what="a webdav source's url")
    path = raw.get("path") or ""
    if not isinstance(path, str) or len(path) > 500 or any(p in ("..", ".") for p in path.split("/")):
        raise InvalidSource("a webdav source's path is a folder inside the share (no . or ..)")
    return {
        "url": url,
        "path": path.strip("/"),
        **readers.rules_setting(raw.get("reader_rules"), "webdav"),
    }


def checked_credentials(raw: dict) -> dict:
    unknown = sorted(set(raw) - set(CREDENTIALS))
    if unknown or not all(isinstance(v, str) and len(v) <= 1000 for v in raw.values()):
        raise InvalidSource(f"a webdav source's credentials are {', '.join(CREDENTIALS)}, strings")
    return dict(raw)


class WebDavOrigin:
    kind = "webdav"

    def __init__(self, *, collection_id: int, settings: dict, credentials: dict):
        root = settings["url"].rstrip("/") + "/"
        self.base = urljoin(root, quote(settings["path"]) + "/") if settings["path"] else root
        self.credentials = credentials
        self.rules = readers.PathRules(settings.get("reader_rules") or ())

    def _client(self):
        import httpx

        checked_url(self.base, schemes=("https", "http"), what="the webdav source's url")
        headers, auth = {}, None
        if self.credentials.get("token"):
            headers["Authorization"] = f"Bearer {self.credentials['token']}"
        elif self.credentials.get("username"):
            auth = (self.credentials["username"], self.credentials.get("password", ""))
        return httpx.Client(timeout=timeout_seconds(), follow_redirects=False, headers=headers, auth=auth)

    def entries(self) -> list[Entry]:
        base_path = urlsplit(self.base).path
        entries, folders, seen = [], [self.base], {self.base}
        with self._client() as client:
            while folders:
                folder = folders.pop()
                for href, is_folder, size, token in self._propfind(client, folder):
                    url = urljoin(folder, href)
                    if url.rstrip("/") == folder.rstrip("/"):
                        continue  # the folder itself
                    split = urlsplit(url)
                    if split.netloc != urlsplit(self.base).netloc or not split.path.startswith(base_path):
                        raise SourceUnavailable("the webdav source listed an address outside its folder")
                    if is_folder:
                        url = url.rstrip("/") + "/"
                        if url not in seen:
                            seen.add(url)
                            folders.append(url)
                            if len(seen) > MAX_FOLDERS:
                                raise _too_many_folders()
                        continue
                    name = unquote(split.path[len(base_path) :])
                    entries.append(
                        Entry(name=name, size=size, token=token, key=url, readers=self.rules.readers(name))
                    )
                    if len(entries) > max_documents():
                        raise too_many(self.kind)
        return sorted(entries, key=lambda e: e.name)

    def _propfind(self, client, url: str) -> list[tuple[str, bool, int, str]]:
        status, body = self._request(client, "PROPFIND", url, headers={"Depth": "1"}, content=PROPFIND)
        if status != 207:
            raise _refusal(status)
        try:
            tree = ElementTree.fromstring(body)
        except ElementTree.ParseError:
            raise SourceUnavailable("the webdav source answered a listing that is not XML") from None
        found = []
        for response in tree.iter(f"{DAV}response"):
            href = response.findtext(f"{DAV}href") or ""
            props = {}
            for propstat in response.iter(f"{DAV}propstat"):
                if " 200 " not in f" {propstat.findtext(f'{DAV}status') or ''} ":
                    continue
                for prop in propstat.iter(f"{DAV}prop"):
                    props.update({child.tag: child for child in prop})
            kind = props.get(f"{DAV}resourcetype")
            is_folder = kind is not None and kind.find(f"{DAV}collection") is not None
            length = _text(props, "getcontentlength") or "0"
            etag, modified = _text(props, "getetag"), _text(props, "getlastmodified")
            size = int(length) if length.strip().isdigit() else 0
            found.append((href, is_folder, size, etag.strip('"') or f"{modified}|{size}"))
        return found

    def fetch(self, entry: Entry, limit: int) -> bytes:
        with self._client() as client:
            try:
                with client.stream("GET", entry.key) as answer:
                    if answer.status_code != 200:
                        raise _refusal(answer.status_code)
                    data = bytearray()
                    for block in answer.iter_bytes():
                        data += block
                        if len(data) >= limit:
                            break
                    return bytes(data[:limit])
            except SourceUnavailable:
                raise
            except Exception as exc:
                raise _unreachable(exc) from None

    def _request(self, client, method: str, url: str, **kwargs) -> tuple[int, bytes]:
        """(status, body) of one request, the body read to at most MAX_LISTING_BYTES."""
        try:
            with client.stream(method, url, **kwargs) as answer:
                body = bytearray()
                for block in answer.iter_bytes():
                    body += block
                    if len(body) > MAX_LISTING_BYTES:
                        raise SourceUnavailable(
                            f"the webdav source's listing of one folder is larger than "
                            f"{MAX_LISTING_BYTES // (1024 * 1024)} MiB",
                            code="source_too_large",
                        )
                return answer.status_code, bytes(body)
        except SourceUnavailable:
            raise
        except Exception as exc:
            raise _unreachable(exc) from None


def _text(props: dict, name: str) -> str:
    # An element without children is falsy: compared with None, never tested for truth.
    element = props.get(f"{DAV}{name}")
    return (element.text or "").strip() if element is not None else ""


def _too_many_folders() -> SourceUnavailable:
    return SourceUnavailable(
        f"the webdav source holds more than {MAX_FOLDERS} folders; narrow its path", code="source_too_large"
    )


def _unreachable(exc: Exception) -> SourceUnavailable:
    return SourceUnavailable(f"the webdav source could not be reached ({type(exc).__name__})")


def _refusal(status: int) -> SourceUnavailable:
    if status in (401, 403):
        return SourceUnavailable(
            f"the webdav source refused the credentials ({status})", code="source_refused"
        )
    if status == 404:
        return SourceUnavailable("the webdav source has no such folder (404)", code="source_missing")
    if 300 <= status < 400:
        return SourceUnavailable(f"the webdav source redirected ({status}); redirects are not followed")
    return SourceUnavailable(f"the webdav source answered {status}")
