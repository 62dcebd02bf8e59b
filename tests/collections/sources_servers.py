"""Real source servers on loopback for the sources' tests: a bare git repository served by `git daemon`,
and an S3 endpoint (moto's server) that boto3 speaks to as it would to AWS."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(port: int, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def git(*args: str, cwd: Path | None = None) -> str:
    environment = {
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
        "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
        "PATH": "/usr/bin:/bin",
    }  # fmt: skip
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=environment, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


class Repository:
    """A bare repository under `root` and a working copy that commits and pushes to it."""

    def __init__(self, root: Path, name: str = "docs.git", branch: str = "main"):
        self.root, self.branch = root, branch
        self.bare = root / name
        self.work = root.parent / f"{name}-work"
        git("init", "--bare", "--quiet", "-b", branch, str(self.bare))
        git("init", "--quiet", "-b", branch, str(self.work))

    def commit(self, files: dict[str, str | None], message: str = "change") -> str:
        """Write (or, for None, delete) files, commit and push; returns the new commit id."""
        for name, text in files.items():
            path = self.work / name
            if text is None:
                git("rm", "--quiet", name, cwd=self.work)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            git("add", name, cwd=self.work)
        git("commit", "--quiet", "-m", message, cwd=self.work)
        git("push", "--quiet", str(self.bare), f"{self.branch}:{self.branch}", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    def move(self, old: str, new: str) -> str:
        git("mv", old, new, cwd=self.work)
        git("commit", "--quiet", "-m", f"move {old}", cwd=self.work)
        git("push", "--quiet", str(self.bare), f"{self.branch}:{self.branch}", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)


class GitDaemon:
    """`git daemon` serving every repository under `root` at git://127.0.0.1:<port>/; stop() and
    start() again on the same port make an outage."""

    def __init__(self, root: Path):
        self.root, self.port, self.process = root, free_port(), None

    def url(self, name: str = "docs.git") -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> GitDaemon:
        self.process = subprocess.Popen(
            [
                "git", "daemon", "--reuseaddr", "--export-all", "--informative-errors",
                f"--base-path={self.root}", "--listen=127.0.0.1", f"--port={self.port}", str(self.root),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(self.port)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


class S3Server:
    """moto's S3 server on 127.0.0.1 (ThreadedMotoServer: real HTTP, boto3 signs and parses as with AWS);
    stop() and start() again on the same port make an outage. Its state lives in this process, so a
    restart keeps the buckets."""

    def __init__(self):
        self.port, self.server = free_port(), None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        from moto.server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        wait_for(self.port)
        return self

    def reset(self) -> None:
        """Forget every bucket: moto keeps its state per process, across servers and tests."""
        import httpx

        httpx.post(f"{self.url}/moto-api/reset", timeout=10).raise_for_status()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="AKIDTEST",
            aws_secret_access_key="test-secret",
        )


class ThreadedServer:
    """A loopback server run in a thread of the test process (`self.server` made by a subclass's
    start(), which ends with `return self._serve()`); stop() and start() again make an outage."""

    server = thread = None
    port: int

    def _serve(self):
        import threading

        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        wait_for(self.port)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(timeout=10)
            self.server = None


class WebDavServer(ThreadedServer):
    """wsgidav serving `folder` at http://127.0.0.1:<port>/share/, HTTP Basic for `reader` with
    `password`; stop() and start() again on the same port make an outage."""

    def __init__(self, folder: Path, password: str = "pw"):
        self.folder, self.password, self.port = folder, password, free_port()
        self.server, self.thread = None, None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/share/"

    def start(self) -> WebDavServer:
        from socketserver import ThreadingMixIn
        from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

        from wsgidav.wsgidav_app import WsgiDAVApp

        class Quiet(WSGIRequestHandler):
            def log_message(self, *args):
                pass

        class Threading(ThreadingMixIn, WSGIServer):
            daemon_threads = True
            allow_reuse_address = True

        app = WsgiDAVApp(
            {
                "provider_mapping": {"/share": str(self.folder)},
                "http_authenticator": {
                    "accept_basic": True,
                    "accept_digest": False,
                    "default_to_digest": False,
                },
                "simple_dc": {"user_mapping": {"*": {"reader": {"password": self.password}}}},
                "dir_browser": {"enable": False},
                "logging": {"enable": False},
                "verbose": 0,
            }
        )
        self.server = make_server("127.0.0.1", self.port, app, server_class=Threading, handler_class=Quiet)
        return self._serve()


class Website(ThreadedServer):
    """http.server on 127.0.0.1 serving `folder`, with `/old` redirecting to `/a.html` and `/away`
    redirecting to another host name (localhost); stop() and start() on the same port make an outage.
    http.server answers If-Modified-Since (by the file's mtime, in whole seconds); with `etags`, each
    file also gets a strong ETag of its bytes, and If-None-Match is answered. `answers` records each
    request's (path, status); `date`, when set, is the Date every answer gives (a timestamp)."""

    def __init__(self, folder: Path, etags: bool = False):
        self.folder, self.port, self.server, self.thread = folder, free_port(), None, None
        self.etags, self.answers, self.date = etags, [], None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> Website:
        import functools
        import hashlib
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

        port, website = self.port, self

        class Site(SimpleHTTPRequestHandler):
            etag = ""

            def do_GET(self):
                moves = {"/old": "/a.html", "/away": f"http://localhost:{port}/a.html"}
                if self.path in moves:
                    self.send_response(301)
                    self.send_header("Location", moves[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                file = Path(self.translate_path(self.path))
                if website.etags and file.is_file():
                    self.etag = '"' + hashlib.sha256(file.read_bytes()).hexdigest()[:20] + '"'
                    if self.headers.get("If-None-Match") == self.etag:
                        self.send_response(304)
                        self.end_headers()
                        return
                super().do_GET()

            def end_headers(self):
                if self.etag:
                    self.send_header("ETag", self.etag)
                super().end_headers()

            def date_time_string(self, timestamp=None):
                return super().date_time_string(website.date if timestamp is None else timestamp)

            def log_request(self, code="-", size="-"):
                website.answers.append((self.path, int(code)))

            def log_message(self, *args):
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(
            ("127.0.0.1", self.port), functools.partial(Site, directory=str(self.folder))
        )
        return self._serve()


class GitHttp(ThreadedServer):
    """`git http-backend` (git's own smart-HTTP server, run as CGI) behind HTTP Basic on 127.0.0.1:
    `user`/`password` are let in, anyone else is answered 401; stop() and start() make an outage."""

    def __init__(self, root: Path, user: str = "reader", password: str = "pw"):
        import base64

        self.root, self.port, self.server, self.thread = root, free_port(), None, None
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def url(self, name: str = "docs.git") -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def start(self) -> GitHttp:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        root, expected = self.root, self.expected

        class Backend(BaseHTTPRequestHandler):
            def _serve(self):
                if self.headers.get("Authorization") != expected:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path, _, query = self.path.partition("?")
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                env = {
                    "PATH": "/usr/bin:/bin", "GIT_PROJECT_ROOT": str(root), "GIT_HTTP_EXPORT_ALL": "1",
                    "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
                    "REMOTE_USER": "reader", "REMOTE_ADDR": "127.0.0.1",
                    "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                }  # fmt: skip
                out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
                head, _, payload = out.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode("latin-1").split("\r\n"):
                    key, _, value = line.partition(":")
                    if key.lower() == "status":
                        status = int(value.split()[0])
                    elif key:
                        headers.append((key, value.strip()))
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _serve

            def log_message(self, *args):
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Backend)
        return self._serve()


def texts(collection, question: str) -> str:
    """The texts a question finds in `collection` (floor off, ten at most), joined."""
    from collections_app.services.search import search_collection

    answer = search_collection(
        agent=collection.agent, collection=collection, question=question, min_score=0, most=10
    )
    return " ".join(p["text"] for p in answer["paragraphs"])


def web_page(title: str, text: str, *links: str) -> str:
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    return (
        f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p>{anchors}</body></html>"
    )


def serve_handbook(kind: str, root: Path, files: dict[str, str], stop: list) -> tuple[dict, dict]:
    """`files` served by a real server of `kind` under `root` (each server's stop() appended to `stop`);
    returns the source's (settings, credentials) as a collection would be given them."""
    if kind == "git":
        repository = Repository(root / "repos")
        repository.commit({f"handbook/{name}": text for name, text in files.items()})
        daemon = GitDaemon(root / "repos").start()
        stop.append(daemon.stop)
        return {"url": daemon.url(), "branch": "main", "path": "handbook"}, {}
    if kind == "s3":
        server = S3Server().start()
        stop.append(server.stop)
        server.reset()
        bucket = server.client()
        bucket.create_bucket(Bucket="handbook-bucket")
        for name, text in files.items():
            bucket.put_object(Bucket="handbook-bucket", Key=f"policies/{name}", Body=text.encode())
        settings = {"endpoint_url": server.url, "bucket": "handbook-bucket", "prefix": "policies/"}
        return settings, {"access_key_id": "AKIDTEST", "secret_access_key": "test-secret"}
    if kind == "webdav":
        (root / "share" / "handbook").mkdir(parents=True)
        for name, text in files.items():
            (root / "share" / "handbook" / name).write_text(text)
        server = WebDavServer(root / "share", password="dav-secret-pw").start()
        stop.append(server.stop)
        return {"url": server.url, "path": "handbook"}, {"username": "reader", "password": "dav-secret-pw"}
    if kind == "web":
        site = root / "site"
        site.mkdir(parents=True)
        pages = {name.rsplit(".", 1)[0] + ".html": text for name, text in files.items()}
        (site / "index.html").write_text(web_page("Handbook", "The staff handbook.", *pages))
        for name, text in pages.items():
            title, _, body = text.partition("\n\n")
            (site / name).write_text(web_page(title.lstrip("# "), body.replace("\n\n", "</p><p>")))
        website = Website(site).start()
        stop.append(website.stop)
        return {"start_url": website.url}, {}
    raise ValueError(kind)
