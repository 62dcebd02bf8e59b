# ruff: noqa: F811  (fixtures imported from the reader tests are named as arguments)
"""SCIM 2.0 provisioning (`/scim/v2/Users`, `/scim/v2/Groups`): the identity provider keeps readers and
their groups current, and de-provisioning a person leaves its reader holding nothing.

Requests go over HTTP through Django's test client to our own server, as an IdP's SCIM client sends
them; the reader-token provider is the loopback one of test_reader_tokens."""

import json
from urllib.parse import quote

import pytest

from collections_app.models import IdpGroup, Label, ProvisionedUser, Reader
from collections_app.services.agents import issue_key
from tests.collections.test_reader_tokens import documents, labelled, provider, search  # noqa: F401
from tests.collections.test_reader_view import twins  # noqa: F401

TOKEN = "scim-secret-token-0123456789"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ASKED = {"question": "leave carry-over vault code"}


@pytest.fixture
def scim(client, settings):
    settings.SCIM_TOKEN = TOKEN

    def call(method, path, body=None, *, token=TOKEN, raw=None):
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        data = raw if raw is not None else (json.dumps(body) if body is not None else "")
        if method in ("GET", "DELETE"):
            data = ""
        path, _, query = path.partition("?")
        url = f"/scim/v2/{path}" + (f"?{quote(query, safe='=&')}" if query else "")
        return client.generic(method, url, data, content_type="application/scim+json", headers=headers)

    return call


def scim_error(response, status: int, scim_type: str | None = None) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/scim+json"
    body = response.json()
    assert body["schemas"] == [ERROR] and body["status"] == str(status) and body["detail"]
    assert body.get("scimType") == scim_type
    return body


def provision(scim, user_name, groups=(), **extra) -> str:
    made = scim("POST", "Users", {"schemas": [USER], "userName": user_name, **extra})
    assert made.status_code == 201, made.content
    user_id = made.json()["id"]
    for name in groups:
        found = scim("GET", f'Groups?filter=displayName eq "{name}"').json()["Resources"]
        if found:
            patch = {"op": "add", "path": "members", "value": [{"value": user_id}]}
            added = scim("PATCH", f"Groups/{found[0]['id']}", {"schemas": [PATCH], "Operations": [patch]})
            assert added.status_code == 200, added.content
        else:
            body = {"schemas": [GROUP], "displayName": name, "members": [{"value": user_id}]}
            assert scim("POST", "Groups", body).status_code == 201
    return user_id


@pytest.mark.parametrize("token", [None, "wrong", TOKEN[:-1], TOKEN + "x", ""])
def test_a_missing_or_wrong_token_is_a_401_in_scims_shape(scim, db, token):
    for method, path in (("GET", "Users"), ("POST", "Users"), ("GET", "Groups/1"), ("DELETE", "Users/1")):
        response = scim(method, path, {"schemas": [USER], "userName": "x"}, token=token)
        scim_error(response, 401)
        assert response["WWW-Authenticate"].startswith("Bearer")
    assert not ProvisionedUser.objects.exists()


def test_scim_is_off_until_its_token_is_set(scim, db, settings):
    settings.SCIM_TOKEN = ""
    assert "SCIM_TOKEN" in scim_error(scim("GET", "Users", token=""), 401)["detail"]


@pytest.mark.parametrize(
    ("raw", "scim_type"),
    [
        ("{not json", "invalidSyntax"),
        ('["a list"]', "invalidSyntax"),
        ('{"schemas": ["' + USER + '"], "userName": NaN}', "invalidSyntax"),
        (json.dumps({"schemas": [USER]}), "invalidValue"),
        (json.dumps({"schemas": [USER], "userName": 7}), "invalidValue"),
        (json.dumps({"schemas": [USER], "userName": "x" * 201}), "invalidValue"),
        (json.dumps({"schemas": [USER], "userName": "bob", "active": "perhaps"}), "invalidValue"),
    ],
    ids=["not-json", "not-object", "nan", "no-userName", "number-userName", "long-userName", "bad-active"],
)
def test_a_malformed_user_is_a_400_in_scims_shape(scim, db, raw, scim_type):
    scim_error(scim("POST", "Users", raw=raw), 400, scim_type)
    assert not ProvisionedUser.objects.exists() and not Reader.objects.exists()


def test_malformed_patches_filters_and_members_are_400s_and_change_nothing(scim, db):
    user_id = provision(scim, "bob@example.org")
    bad_op = {"schemas": [PATCH], "Operations": [{"op": "frob", "path": "active", "value": False}]}
    scim_error(scim("PATCH", f"Users/{user_id}", bad_op), 400, "invalidValue")
    scim_error(scim("PATCH", f"Users/{user_id}", {"schemas": [PATCH]}), 400, "invalidValue")
    scim_error(scim("GET", "Users?filter=userName eq"), 400, "invalidFilter")
    scim_error(scim("GET", 'Users?filter=title eq "boss"'), 400, "invalidFilter")
    scim_error(scim("GET", 'Users?filter=userName co "bob"'), 400, "invalidFilter")
    scim_error(scim("GET", "Users?count=many"), 400, "invalidValue")
    stranger = {"schemas": [GROUP], "displayName": "hr", "members": [{"value": "999999"}]}
    scim_error(scim("POST", "Groups", stranger), 400, "invalidValue")
    scim_error(scim("POST", "Users", raw='{"userName": "' + "x" * (1 << 20) + '"}'), 413)
    scim_error(scim("POST", "Users", raw='{"userName": "' + "x" * (3 << 20) + '"}'), 413)  # past Django's
    assert scim("GET", f"Users?startIndex={10**30}&count=-5").json()["Resources"] == []
    assert scim("GET", f"Users/{user_id}").json()["active"] is True
    assert not IdpGroup.objects.exists()


def test_users_are_created_read_listed_filtered_replaced_and_deleted(scim, db):
    made = scim("POST", "Users", {"schemas": [USER], "userName": "Bob@Example.org", "externalId": "00u1"})
    assert made.status_code == 201
    user = made.json()
    assert made["Location"].endswith(f"/scim/v2/Users/{user['id']}")
    assert user["meta"]["resourceType"] == "User"
    assert (user["userName"], user["externalId"], user["active"]) == ("Bob@Example.org", "00u1", True)
    assert Reader.objects.filter(external_id="Bob@Example.org").exists()
    assert scim("GET", f"Users/{user['id']}").json()["userName"] == "Bob@Example.org"
    scim_error(scim("POST", "Users", {"schemas": [USER], "userName": "bob@example.org"}), 409, "uniqueness")
    provision(scim, "carol@example.org")
    listed = scim("GET", 'Users?filter=userName eq "bob@example.org"').json()
    assert listed["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:ListResponse"]
    assert (listed["totalResults"], [u["id"] for u in listed["Resources"]]) == (1, [user["id"]])
    assert scim("GET", 'Users?filter=userName eq "nobody"').json()["totalResults"] == 0
    page = scim("GET", "Users?startIndex=2&count=1").json()
    assert (page["totalResults"], page["startIndex"], page["itemsPerPage"]) == (2, 2, 1)
    replaced = scim("PUT", f"Users/{user['id']}", {"schemas": [USER], "userName": "bob@example.org"})
    assert replaced.status_code == 200 and replaced.json()["userName"] == "bob@example.org"
    assert Reader.objects.filter(external_id="bob@example.org").exists()
    assert not Reader.objects.filter(external_id="Bob@Example.org").exists()  # renamed, not copied
    assert scim("DELETE", f"Users/{user['id']}").status_code == 204
    scim_error(scim("GET", f"Users/{user['id']}"), 404)
    scim_error(scim("DELETE", f"Users/{user['id']}"), 404)
    scim_error(scim("GET", "Users/not-an-id"), 404)
    scim_error(scim("GET", "Teams"), 404)


def test_groups_give_their_members_the_labels_the_admin_mapped(client, scim, labelled):
    """The admin mapped `hr` and `security-team` to labels (test_reader_tokens' fixture); the IdP pushes
    those groups and their members, and each member reads what its groups give, with no login."""
    _agent, raw = labelled
    bob = provision(scim, "bob@example.org", groups=["hr"])
    assert documents(search(client, raw, {**ASKED, "reader": "bob@example.org"})) == {"leave.md"}
    group = scim("GET", 'Groups?filter=displayName eq "hr"').json()["Resources"][0]
    assert group["members"] == [
        {
            "value": bob,
            "$ref": f"http://testserver/scim/v2/Users/{bob}",
            "type": "User",
            "display": "bob@example.org",
        }
    ]
    assert IdpGroup.objects.filter(name="hr").count() == 1  # the admin's group, claimed, not doubled
    provision(scim, "carol@example.org", groups=["security-team"])
    move = {"op": "add", "path": "members", "value": [{"value": bob}]}
    security = scim("GET", 'Groups?filter=displayName eq "security-team"').json()["Resources"][0]
    scim("PATCH", f"Groups/{security['id']}", {"schemas": [PATCH], "Operations": [move]})
    leave = {"op": "remove", "path": f'members[value eq "{bob}"]'}
    left = scim("PATCH", f"Groups/{group['id']}", {"schemas": [PATCH], "Operations": [leave]})
    assert left.status_code == 200
    assert documents(search(client, raw, {**ASKED, "reader": "bob@example.org"})) == {"security.md"}
    assert {g["display"] for g in scim("GET", f"Users/{bob}").json()["groups"]} == {"security-team"}
    # The admin maps security-team to hr as well: its provisioned members follow at once.
    from collections_app.services.scim import refresh_group_members

    mapped = IdpGroup.objects.get(name="security-team")
    mapped.labels.add(Label.objects.get(name="hr"))
    assert refresh_group_members(group=mapped) == 2
    carol = {**ASKED, "reader": "carol@example.org"}
    assert documents(search(client, raw, carol)) == {"leave.md", "security.md"}
    assert scim("DELETE", f"Groups/{security['id']}").status_code == 204
    assert documents(search(client, raw, {**ASKED, "reader": "carol@example.org"})) == set()


@pytest.mark.parametrize("how", ["delete", "patch-active-false", "put-active-false"])
def test_a_deprovisioned_reader_reads_as_one_holding_nothing(
    client,
    scim,
    labelled,
    provider,
    settings,
    how,
):
    """De-provisioned: its labels grant nothing, whether it is named in plain text or by a reader token
    still within its lifetime, and an admin's label given by hand is ignored too."""
    _agent, raw = labelled
    settings.SCIM_READER_ID = "{externalId}@" + provider.issuer.removeprefix("http://")
    user_id = provision(scim, "alice@example.org", groups=["hr", "security-team"], externalId="alice")
    reader_id = Reader.objects.get().external_id
    token = provider.token(sub="alice", groups=["hr", "security-team"])
    assert documents(search(client, raw, {**ASKED, "readerToken": token})) == {"leave.md", "security.md"}
    nobody = documents(search(client, raw, {**ASKED, "reader": "someone-with-no-labels"}))
    if how == "delete":
        assert scim("DELETE", f"Users/{user_id}").status_code == 204
    elif how == "patch-active-false":
        off = {"op": "replace", "value": {"active": False}}
        answer = scim("PATCH", f"Users/{user_id}", {"schemas": [PATCH], "Operations": [off]})
        assert answer.status_code == 200 and answer.json()["active"] is False
    else:
        body = {"schemas": [USER], "userName": "alice@example.org", "externalId": "alice", "active": False}
        assert scim("PUT", f"Users/{user_id}", body).json()["active"] is False
    Reader.objects.get(external_id=reader_id).labels.add(Label.objects.get(name="hr"))  # by hand, ignored
    assert documents(search(client, raw, {**ASKED, "reader": reader_id})) == nobody == set()
    assert documents(search(client, raw, {**ASKED, "readerToken": token})) == nobody
    if how == "patch-active-false":  # and back: the groups it still belongs to count again
        on = {"op": "replace", "path": "active", "value": True}
        assert scim("PATCH", f"Users/{user_id}", {"schemas": [PATCH], "Operations": [on]}).status_code == 200
        assert documents(search(client, raw, {**ASKED, "reader": reader_id})) == {"leave.md", "security.md"}


def test_a_reader_id_naming_external_id_needs_one(scim, db, settings):
    settings.SCIM_READER_ID = "{externalId}@idp.example.org"
    scim_error(scim("POST", "Users", {"schemas": [USER], "userName": "dan"}), 400, "invalidValue")
    provision(scim, "dan", externalId="00u9")
    assert Reader.objects.filter(external_id="00u9@idp.example.org").exists()


@pytest.mark.postgres
@pytest.mark.parametrize("hidden", [{1, 3}, {0, 5, 6}, set()])
def test_the_twin_rule_holds_for_a_scim_provisioned_reader(client, scim, agent, twins, hidden):
    """The reader twin test with the reader provisioned over SCIM (its labels from its IdP group)."""
    _key, raw = issue_key(agent=agent)
    hidden_one, twin = twins(hidden, 8)
    IdpGroup.objects.create(name="readers-of-pub").labels.add(Label.objects.get(name="pub"))
    provision(scim, "erin@example.org", groups=["readers-of-pub"])
    for question in ("birch policy", "heron inlet", "apple kelp larch"):
        for around in (0, 2):
            body = {"question": question, "reader": "erin@example.org", "most": 50, "around": around}
            mine = search(client, raw, body, name=hidden_one.name)
            theirs = search(client, raw, body, name=twin.name)
            assert mine.status_code == theirs.status_code == 200, (mine.content, theirs.content)
            assert mine.json() == theirs.json()
            if around == 0:
                assert len(mine.json()["paragraphs"]) == 8 - len(hidden)


def test_labels_saved_on_a_group_in_the_admin_reach_its_provisioned_members(admin_client, scim, db):
    hr = Label.objects.create(name="hr")
    provision(scim, "fay@example.org", groups=["people-team"])
    group = IdpGroup.objects.get(name="people-team")
    assert not Reader.objects.get(external_id="fay@example.org").labels.exists()
    saved = admin_client.post(
        f"/admin/collections_app/idpgroup/{group.pk}/change/", {"name": "people-team", "labels": [hr.pk]}
    )
    assert saved.status_code == 302, saved.content[:2000]
    assert list(Reader.objects.get(external_id="fay@example.org").labels.values_list("name", flat=True)) == [
        "hr"
    ]
    listed = admin_client.get("/admin/collections_app/provisioneduser/")
    assert listed.status_code == 200 and b"fay@example.org" in listed.content
    assert admin_client.get("/admin/collections_app/provisioneduser/add/").status_code == 403
