"""Readers named by a signed token of the organisation's identity provider (`readerToken`).

The provider is a real HTTP server on 127.0.0.1 publishing a discovery document and its JWKS; the
tokens are RS256 JWTs signed with its keys (and, for the forgeries, with others). The twin rule holds
for a token reader exactly as for a named one."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from collections_app.models import IdpGroup, Label, Reader
from collections_app.services.agents import create_agent, create_collection, issue_key
from collections_app.services.builds import build_collection
from collections_app.services.readers import tokens as reader_tokens
from tests.collections.test_reader_view import twins  # noqa: F401  (the twin fixture)

AUDIENCE = "intranet-app"


class Provider:
    """Discovery and JWKS on loopback; `token(...)` signs an ID token with the published key."""

    def __init__(self):
        self.key = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig", "alg": "RS256"})
        self.published = [self.key]
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": provider.issuer, "jwks_uri": f"{provider.issuer}/jwks"}
                elif self.path == "/jwks":
                    body = KeySet(provider.published).as_dict(private=False)
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, sub="alice", groups=("hr",), *, key=None, aud=AUDIENCE, iss=None, expires_in=300) -> str:
        key = key or self.key
        claims = {
            "iss": iss or self.issuer,
            "sub": sub,
            "aud": aud,
            "iat": int(time.time()),
            "exp": int(time.time()) + expires_in,
            "groups": list(groups),
        }
        return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)


@pytest.fixture
def provider(settings):
    reader_tokens._cache.clear()
    served = Provider()
    settings.READER_TOKEN_DISCOVERY_URL = f"{served.issuer}/.well-known/openid-configuration"
    settings.READER_TOKEN_AUDIENCES = [AUDIENCE]
    yield served
    served.server.shutdown()
    reader_tokens._cache.clear()


@pytest.fixture
def labelled(db, knowledge_folder):
    """A per-reader handbook whose leave paragraphs are labelled hr and whose security ones it-sec."""
    agent, raw = create_agent(agent_id="alpha", name="Alpha")
    collection = create_collection(agent=agent, name="handbook", method="structure", per_reader=True)
    knowledge_folder(
        "handbook",
        {
            "leave.md": "# Leave\n\nCarry-over of annual leave is capped at five days a year.\n",
            "security.md": "# Security\n\nThe vault code is changed every Monday at noon.\n",
        },
    )
    assert build_collection(collection=collection).status == "succeeded"
    hr, it = Label.objects.create(name="hr"), Label.objects.create(name="it-sec")
    for row in collection.paragraphs.all():
        row.labels.add(hr if row.document.name == "leave.md" else it)
    IdpGroup.objects.create(name="hr").labels.add(hr)
    IdpGroup.objects.create(name="security-team").labels.add(it)
    return agent, raw


def search(client, raw, body, name="handbook"):
    return client.post(
        f"/api/v1/collections/{name}/search",
        data=json.dumps({"min_score": 0, **body}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )


def documents(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {p["document"] for p in response.json()["paragraphs"]}


def test_a_token_readers_groups_give_its_labels_refreshed_at_each_token(client, provider, labelled):
    _agent, raw = labelled
    host = provider.issuer.removeprefix("http://")
    asked = {"question": "leave carry-over vault code"}
    assert documents(search(client, raw, {**asked, "readerToken": provider.token()})) == {"leave.md"}
    assert set(Reader.objects.get(external_id=f"alice@{host}").labels.values_list("name", flat=True)) == {
        "hr"
    }
    moved = provider.token(groups=["security-team"])
    assert documents(search(client, raw, {**asked, "readerToken": moved})) == {"security.md"}
    both = provider.token(groups=["hr", "security-team", "unmapped"])
    assert documents(search(client, raw, {**asked, "readerToken": both})) == {"leave.md", "security.md"}
    nothing = provider.token(groups=[])
    assert documents(search(client, raw, {**asked, "readerToken": nothing})) == set()
    # Over MCP too.
    from tests.collections.test_mcp import call_tool

    result = call_tool(
        client, raw, "search", {"collection": "handbook", "question": "vault code", "readerToken": moved}
    )
    assert {p["document"] for p in result["structuredContent"]["paragraphs"]} == {"security.md"}
    # And through /v1/vector_stores, in the body or as the Ragsite-Reader-Token header.
    for extra in (
        {"data": json.dumps({"query": "vault code", "readerToken": moved})},
        {"data": json.dumps({"query": "vault code"}), "headers": {"Ragsite-Reader-Token": moved}},
    ):
        found = client.post(
            "/v1/vector_stores/handbook/search",
            content_type="application/json",
            **{**extra, "headers": {"Authorization": f"Bearer {raw}", **extra.get("headers", {})}},
        )
        assert found.status_code == 200, found.content
        assert {hit["filename"] for hit in found.json()["data"]} == {"security.md"}


def test_an_unchanged_token_reader_writes_nothing(client, provider, labelled):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    reader_tokens.token_reader(provider.token())  # the first token makes the reader
    with CaptureQueriesContext(connection) as queries:
        reader_tokens.token_reader(provider.token())
    writes = [q["sql"] for q in queries if q["sql"].split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]
    assert writes == []


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda p: p.token(key=RSAKey.generate_key(2048, parameters={"kid": "k1"})), "reader_token_invalid"),
        (lambda p: p.token(expires_in=-600), "reader_token_expired"),
        (lambda p: p.token(aud="another-app"), "reader_token_audience"),
        (lambda p: p.token(iss="https://evil.example"), "reader_token_issuer"),
        (lambda p: "not.a.token", "reader_token_invalid"),
    ],
    ids=["forged", "expired", "wrong-audience", "wrong-issuer", "malformed"],
)
def test_a_bad_token_is_a_401_with_its_code_and_never_a_reader(client, provider, labelled, make, code):
    _agent, raw = labelled
    response = search(client, raw, {"question": "vault code", "readerToken": make(provider)})
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == code
    assert not Reader.objects.exists()


def test_a_key_rotated_in_after_the_keys_were_fetched_is_fetched(client, provider, labelled):
    _agent, raw = labelled
    assert search(client, raw, {"question": "leave", "readerToken": provider.token()}).status_code == 200
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2", "use": "sig", "alg": "RS256"})
    provider.published = [provider.key, rotated]
    assert documents(
        search(client, raw, {"question": "leave", "readerToken": provider.token(key=rotated)})
    ) == {"leave.md"}


def test_plain_readers_only_where_allowed_and_never_with_a_token(client, provider, labelled, settings):
    _agent, raw = labelled
    Reader.objects.create(external_id="bob").labels.add(Label.objects.get(name="hr"))
    assert documents(search(client, raw, {"question": "leave", "reader": "bob"})) == {"leave.md"}
    both = search(client, raw, {"question": "leave", "reader": "bob", "readerToken": provider.token()})
    assert both.status_code == 400 and both.json()["error"]["code"] == "reader_and_token"
    settings.READER_PLAIN = False
    refused = search(client, raw, {"question": "leave", "reader": "bob"})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "reader_token_required"
    assert documents(search(client, raw, {"question": "leave", "readerToken": provider.token()})) == {
        "leave.md"
    }


@pytest.mark.postgres
@pytest.mark.parametrize("hidden", [{1, 3}, {0, 5, 6}, {2}, set()])
def test_the_twin_rule_holds_for_a_token_reader(client, provider, agent, twins, hidden):  # noqa: F811
    """The reader twin test with the reader named by its token, through the API (SQLite and PostgreSQL):
    the whole answer from a collection with paragraphs hidden from it equals the twin's without them."""
    _key, raw = issue_key(agent=agent)
    hidden_one, twin = twins(hidden, 8)
    IdpGroup.objects.create(name="readers-of-pub").labels.add(Label.objects.get(name="pub"))
    token = provider.token(sub="alice-idp", groups=["readers-of-pub"])
    for question in ("birch policy", "heron inlet", "apple kelp larch"):
        for around in (0, 2):
            body = {"question": question, "readerToken": token, "most": 50, "around": around}
            mine = search(client, raw, body, name=hidden_one.name)
            theirs = search(client, raw, body, name=twin.name)
            assert mine.status_code == theirs.status_code == 200, (mine.content, theirs.content)
            assert mine.json() == theirs.json()
            if around == 0:  # floor 0, most 50: every paragraph the reader may read, and no other
                assert len(mine.json()["paragraphs"]) == 8 - len(hidden)
