"""A git repository as a collection's source, through the `git` binary.

A listing asks the remote for the branch's commit (`git ls-remote`, no download), fetches that commit
into this node's cache (a bare repository under SOURCE_CACHE_DIR, shallow, only when the cache lacks
it), and lists the tree under `path` (`git ls-tree`): each file's token is its blob id, which is its
content's hash, so an unchanged file is never read again. A fetch reads one blob from the cache.

Only `https://`, `http://` and `git://` URLs are taken, and git itself is told to speak no other
protocol (no `file:`, `ext::` or ssh, also not through a submodule or a redirect), to follow no
redirect, and to give up on a stalled transfer; every command is bounded by SOURCE_TIMEOUT.
Credentials (`username` and `password`, or a `token`) travel as an HTTP header set through git's
environment, never on a command line or in a URL.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from . import readers
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
    too_many,
)

SCHEMES = ("https", "http", "git")
BRANCH = re.compile(r"^[A-Za-z0-9._/-]{1,200}$")
COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
SETTINGS = ("url", "branch", "path", "reader_rules")
CREDENTIALS = ("username", "password", "token")
# What git says when the server refused the credentials (or wanted some): git may not prompt, so a 401 it
# would have answered with a password reads "could not read Username"; a 403 is curl's "returned error".
REFUSALS = (
    "could not read Username",
    "could not read Password",
    "Authentication failed",
    "returned error: 401",
    "returned error: 403",
)


def checked_settings(raw: dict) -> dict:
    unknown = sorted(set(raw) - set(SETTINGS))
    if unknown:
        raise InvalidSource(f"a git source takes {', '.join(SETTINGS)}; not {', '.join(unknown[:5])}")
    url = checked_url(raw.get("url"), schemes=SCHEMES, what="a git source's url")
    branch = raw.get("branch") or "main"
    if not isinstance(branch, str) or not BRANCH.match(branch) or ".." in branch or branch.startswith("-"):
        raise InvalidSource("a git source's branch is a branch name (letters, digits, . _ / -)")
    return {
        "url": url,
        "branch": branch,
        "path": _clean_path(raw.get("path") or ""),
        **readers.rules_setting(raw.get("reader_rules"), "git"),
    }


def checked_credentials(raw: dict) -> dict:
    unknown = sorted(set(raw) - set(CREDENTIALS))
    if unknown or not all(isinstance(v, str) and len(v) <= 1000 for v in raw.values()):
        raise InvalidSource(f"a git source's credentials are {', '.join(CREDENTIALS)}, strings")
    return dict(raw)


def _clean_path(path: object) -> str:
    if not isinstance(path, str) or len(path) > 500:
        raise InvalidSource("a git source's path is a folder inside the repository")
    parts = PurePosixPath(path.strip("/")).parts
    if any(part in ("..", ".") for part in parts):
        raise InvalidSource("a git source's path stays inside the repository (no . or ..)")
    return "/".join(parts)


class GitOrigin:
    kind = "git"

    def __init__(self, *, collection_id: int, settings: dict, credentials: dict):
        self.url, self.branch, self.path = settings["url"], settings["branch"], settings["path"]
        self.credentials = credentials
        self.rules = readers.PathRules(settings.get("reader_rules") or ())
        self.cache = cache_of(collection_id)

    def entries(self) -> list[Entry]:
        checked_url(self.url, schemes=SCHEMES, what="the git source's url")  # the allow-list may have changed
        commit = self.remote_commit()
        self._ensure(commit)
        return self._tree(commit)

    def remote_commit(self) -> str:
        """The commit the branch names on the remote, asked without downloading anything."""
        out = self._git("ls-remote", "--", self.url, f"refs/heads/{self.branch}", remote=True)
        for line in out.decode("ascii", "replace").splitlines():
            commit, _, ref = line.partition("\t")
            if ref == f"refs/heads/{self.branch}" and COMMIT.match(commit):
                return commit
        raise SourceUnavailable(f'the git source has no branch "{self.branch}"', code="source_missing")

    def fetch(self, entry: Entry, limit: int) -> bytes:
        process = subprocess.Popen(
            ["git", "--git-dir", str(self.cache), "cat-file", "blob", entry.key],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self._environment(),
        )
        try:
            data = process.stdout.read(limit)
        finally:
            process.kill()
            process.wait()
        if len(data) < min(entry.size, limit):
            raise SourceUnavailable(f"the git source's copy of {entry.name} could not be read")
        return data

    def _ensure(self, commit: str) -> None:
        if self.cache.is_dir() and self._has(commit):
            return
        if not self.cache.is_dir():
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            self._git("init", "--bare", "--quiet", str(self.cache))
        try:
            self._git(
                "--git-dir", str(self.cache), "fetch", "--quiet", "--depth", "1", "--no-tags", "--", self.url,
                f"+refs/heads/{self.branch}:refs/heads/ragsite", remote=True,
            )  # fmt: skip
        except SourceUnavailable:
            if not self._has_objects():  # a cache that never held anything is made afresh next time
                shutil.rmtree(self.cache, ignore_errors=True)
            raise
        if not self._has(commit):  # the branch moved between the two questions: the next listing catches up
            raise SourceUnavailable(
                "the git source's branch moved while it was read; the next check reads it"
            )

    def _has(self, commit: str) -> bool:
        result = subprocess.run(
            ["git", "--git-dir", str(self.cache), "cat-file", "-e", f"{commit}^{{commit}}"],
            capture_output=True,
            env=self._environment(),
            timeout=timeout_seconds(),
        )
        return result.returncode == 0

    def _has_objects(self) -> bool:
        return any((self.cache / "objects").glob("pack/*.pack"))

    def _tree(self, commit: str) -> list[Entry]:
        spec = [self.path] if self.path else []
        out = self._git("--git-dir", str(self.cache), "ls-tree", "-r", "-l", "-z", commit, "--", *spec)
        prefix = self.path + "/" if self.path else ""
        entries = []
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, name = record.partition(b"\t")
            mode, kind, blob, size = meta.split()
            if kind != b"blob" or mode == b"120000":  # submodules and symbolic links are not documents
                continue
            path = name.decode("utf-8", "surrogateescape")
            if not path.startswith(prefix):
                continue
            name = path[len(prefix) :]
            entries.append(
                Entry(
                    name=name,
                    size=int(size),
                    token=blob.decode(),
                    key=blob.decode(),
                    readers=self.rules.readers(name),
                )
            )
            if len(entries) > max_documents():
                raise too_many(self.kind)
        return sorted(entries, key=lambda e: e.name)

    def _git(self, *args: str, remote: bool = False) -> bytes:
        try:
            result = subprocess.run(
                ["git", *args],
                capture_output=True,
                env=self._environment(remote=remote),
                timeout=timeout_seconds(),
            )
        except subprocess.TimeoutExpired:
            raise SourceUnavailable(
                f"the git source did not answer within {timeout_seconds():g} s (SOURCE_TIMEOUT)"
            ) from None
        if result.returncode != 0:
            said = _said(result.stderr)
            if any(refusal in said for refusal in REFUSALS):
                # The same code as S3's and WebDAV's refusals: the credentials, not the network, are wrong.
                raise SourceUnavailable(
                    f"the git source refused the credentials ({said})", code="source_refused"
                )
            raise SourceUnavailable(f"the git source could not be read: {said}")
        return result.stdout

    def _environment(self, *, remote: bool = False) -> dict:
        """git's environment: no user or system configuration, no prompt, only the network protocols,
        no redirects, a stalled transfer given up; the credentials as one HTTP header."""
        config = {
            "protocol.allow": "never",
            "protocol.https.allow": "always",
            "protocol.http.allow": "always",
            "protocol.git.allow": "always",
            "http.followRedirects": "false",
            "http.lowSpeedLimit": "1000",
            "http.lowSpeedTime": str(int(timeout_seconds())),
            "core.askPass": "",
        }
        header = self._authorization() if remote else ""
        if header:
            config["http.extraHeader"] = header
        env = {
            # The process's own search path (not a setting), so git finds its helper programs.
            "PATH": os.pathsep.join(os.get_exec_path()),
            "HOME": "/nonexistent",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_COUNT": str(len(config)),
            "LC_ALL": "C",
        }
        for i, (key, value) in enumerate(config.items()):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
        return env

    def _authorization(self) -> str:
        if self.credentials.get("token"):
            return f"Authorization: Bearer {self.credentials['token']}"
        if self.credentials.get("username") or self.credentials.get("password"):
            pair = f"{self.credentials.get('username', '')}:{self.credentials.get('password', '')}"
            return f"Authorization: Basic {base64.b64encode(pair.encode()).decode()}"
        return ""


def _said(stderr: bytes) -> str:
    """git's complaint, cut to its last line and short; git never prints the header it was given."""
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return (lines[-1] if lines else "git failed")[:200]


def cache_of(collection_id: int) -> Path:
    """This node's bare copy of a collection's repository."""
    return cached(collection_id, ".git")


def forget(collection_id: int) -> None:
    """Remove this node's copy of a collection's repository. A copy holds every file of the commits it
    fetched, so it must not outlive the collection or its source: a deleted collection's files would
    stay on disk, and a new URL would be fetched into the old repository's objects."""
    remove_cached(cache_of(collection_id))


def prune(keep: set[int]) -> list[int]:
    """Remove this node's copies of every collection not in `keep` (those still read from git); the
    copies a deletion on another node could not reach. Returns the collection ids removed."""
    return prune_cached(".git", keep)
