"""SCIM 2.0 provisioning (RFC 7643/7644): the identity provider keeps readers and their groups current.

A SCIM User is a `ProvisionedUser`: the `Reader` it reads as (SCIM_READER_ID, e.g. the id its reader
tokens name) and the `IdpGroup`s it belongs to. Its reader's labels are the labels those groups give
(the same group -> labels mapping reader tokens use), recomputed whenever the person, one of its groups
or a group's labels change. De-provisioning (DELETE, or active=false) withdraws the reader: it holds no
label, and neither a reader token nor a label given by hand gives it one (`readers.resolve_reader`,
`reader_tokens.token_reader`), so it reads exactly as a reader holding nothing.

Requests and answers are scim2-models resources, validated at the edge (`collections_app.scim_api`);
protocol errors are scim2-models' exceptions, each carrying its HTTP status and scimType.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from scim2_models import (
    Group,
    GroupMember,
    GroupMembership,
    InvalidFilterException,
    InvalidValueException,
    Meta,
    NotFoundException,
    PatchOp,
    ScimFilter,
    UniquenessException,
    User,
)
from scim2_models.path.expressions import Comparison

from ..conf import scim_reader_id
from ..models import IdpGroup, ProvisionedUser, Reader

MAX_NAME = 200  # the longest userName, externalId, displayName and reader id stored
MAX_COUNT = 200  # the most resources one page of a list holds
# The filters answered (RFC 7644 §3.4.2.2 allows a provider to support a subset): one `eq` on these.
USER_FILTERS = {"username": "user_name__iexact", "externalid": "external_id", "id": "pk"}
GROUP_FILTERS = {"displayname": "name__iexact", "externalid": "external_id", "id": "pk"}


# --- Users -------------------------------------------------------------------------------------


def list_users(*, filter: str | None, start_index: int, count: int) -> tuple[int, list[User]]:
    """One page of the provisioned people matching `filter`, and how many match in all."""
    people = ProvisionedUser.objects.select_related("reader")
    found = _filtered(people, ScimFilter[User], USER_FILTERS, filter)
    total = found.count()
    page = found.prefetch_related("groups")[start_index - 1 : start_index - 1 + count]
    return total, [_user_resource(person) for person in page]


def get_user(*, user_id: str) -> User:
    return _user_resource(_person(user_id))


def create_user(*, user: User) -> User:
    with transaction.atomic():
        person = _store_user(None, user)
    return _user_resource(person)


def replace_user(*, user_id: str, user: User) -> User:
    with transaction.atomic():
        person = _store_user(_person(user_id, for_update=True), user)
    return _user_resource(person)


def patch_user(*, user_id: str, patch: PatchOp[User]) -> User:
    """`patch` applied to the person as SCIM shows it, then kept as a replacement would be."""
    with transaction.atomic():
        person = _person(user_id, for_update=True)
        resource = _user_resource(person)
        patch.patch(resource)
        person = _store_user(person, resource)
    return _user_resource(person)


def delete_user(*, user_id: str) -> None:
    """The person is forgotten here and its reader withdrawn (kept, so a token still names nobody)."""
    with transaction.atomic():
        person = _person(user_id, for_update=True)
        reader = person.reader
        person.delete()
        _withdraw(reader)


# --- Groups ------------------------------------------------------------------------------------


def list_groups(*, filter: str | None, start_index: int, count: int) -> tuple[int, list[Group]]:
    found = _filtered(IdpGroup.objects.filter(provisioned=True), ScimFilter[Group], GROUP_FILTERS, filter)
    total = found.count()
    page = found.prefetch_related("members")[start_index - 1 : start_index - 1 + count]
    return total, [_group_resource(group) for group in page]


def get_group(*, group_id: str) -> Group:
    return _group_resource(_group(group_id))


def create_group(*, group: Group) -> Group:
    """A new group, or the admin's group of that name (typed there to map it to labels) claimed."""
    name = _text(group.display_name, "displayName", required=True)
    with transaction.atomic():
        existing = IdpGroup.objects.select_for_update().filter(name__iexact=name).first()
        if existing is not None and existing.provisioned:
            raise UniquenessException(detail=f'a group named "{name}" is provisioned already')
        stored = _store_group(existing or IdpGroup(name=name), group)
    return _group_resource(stored)


def replace_group(*, group_id: str, group: Group) -> Group:
    with transaction.atomic():
        stored = _store_group(_group(group_id, for_update=True), group)
    return _group_resource(stored)


def patch_group(*, group_id: str, patch: PatchOp[Group]) -> Group:
    with transaction.atomic():
        stored = _group(group_id, for_update=True)
        resource = _group_resource(stored)
        patch.patch(resource)
        stored = _store_group(stored, resource)
    return _group_resource(stored)


def delete_group(*, group_id: str) -> None:
    """The group is gone: its members lose what it gave them (its label mapping goes with it)."""
    with transaction.atomic():
        stored = _group(group_id, for_update=True)
        members = list(stored.members.select_related("reader"))
        stored.delete()
        _refresh_all(members)


# --- Labels ------------------------------------------------------------------------------------


def refresh_labels(person: ProvisionedUser) -> None:
    """The person's reader holds the labels its groups give while it is active, nothing otherwise."""
    reader = person.reader
    active = reader.withdrawn_at is None
    reader.hold_only(IdpGroup.labels_given(IdpGroup.objects.filter(members=person)) if active else set())


def refresh_group_members(*, group: IdpGroup) -> int:
    """After a group's labels changed (in the admin): its provisioned members' readers follow."""
    return _refresh_all(group.members.select_related("reader"))


def _refresh_all(people) -> int:
    count = 0
    for person in people:
        refresh_labels(person)
        count += 1
    return count


# --- Storing -----------------------------------------------------------------------------------


def _store_user(person: ProvisionedUser | None, user: User) -> ProvisionedUser:
    user_name = _text(user.user_name, "userName", required=True)
    external_id = _text(user.external_id, "externalId")
    others = ProvisionedUser.objects.exclude(pk=person.pk if person else None)
    if others.filter(user_name__iexact=user_name).exists():
        raise UniquenessException(detail=f'userName "{user_name}" is provisioned already')
    try:
        reader_id = scim_reader_id(user_name=user_name, external_id=external_id)
    except ValueError:
        raise InvalidValueException(detail="externalId is required here (SCIM_READER_ID names it)") from None
    if not reader_id or len(reader_id) > MAX_NAME or "\x00" in reader_id:
        raise InvalidValueException(detail=f"the reader id made must be 1 to {MAX_NAME} characters")
    reader = _reader_for(person, reader_id)
    reader.withdrawn_at = None if user.active is not False else (reader.withdrawn_at or timezone.now())
    reader.save()
    if person is None:
        person = ProvisionedUser(reader=reader)
    person.user_name, person.external_id, person.reader = user_name, external_id, reader
    person.display_name = _text(user.display_name, "displayName")
    person.save()
    refresh_labels(person)
    return person


def _reader_for(person: ProvisionedUser | None, reader_id: str) -> Reader:
    """The reader `reader_id` names, for `person`: its own renamed, or one that exists unclaimed."""
    named = Reader.objects.select_for_update().filter(external_id=reader_id).first()
    if person is not None and (named is None or named.pk == person.reader_id):
        reader = person.reader
        reader.external_id = reader_id
        return reader
    if named is not None and ProvisionedUser.objects.filter(reader=named).exists():
        raise UniquenessException(detail="another provisioned user reads as the same reader")
    if person is not None:  # renamed onto a reader that already exists: the old one is withdrawn
        _withdraw(person.reader)
    return named or Reader(external_id=reader_id)


def _store_group(stored: IdpGroup, group: Group) -> IdpGroup:
    name = _text(group.display_name, "displayName", required=True)
    if IdpGroup.objects.filter(name__iexact=name).exclude(pk=stored.pk).exists():
        raise UniquenessException(detail=f'a group named "{name}" exists already')
    wanted = _member_ids(group.members or [])
    before = set(stored.members.values_list("pk", flat=True)) if stored.pk else set()
    stored.name, stored.external_id, stored.provisioned = name, _text(group.external_id, "externalId"), True
    stored.save()
    stored.members.set(wanted)
    _refresh_all(ProvisionedUser.objects.filter(pk__in=before | wanted).select_related("reader"))
    return stored


def _member_ids(members: list[GroupMember]) -> set[int]:
    ids = {_pk(member.value, "members.value") for member in members}
    known = set(ProvisionedUser.objects.filter(pk__in=ids).values_list("pk", flat=True))
    if known != ids:
        raise InvalidValueException(detail="a member is not a provisioned user (add users before groups)")
    return known


def _withdraw(reader: Reader) -> None:
    reader.withdrawn_at = reader.withdrawn_at or timezone.now()
    reader.save(update_fields=["withdrawn_at"])
    reader.labels.clear()


# --- Reading -----------------------------------------------------------------------------------


def _person(user_id: str, *, for_update: bool = False) -> ProvisionedUser:
    people = ProvisionedUser.objects.select_related("reader")
    person = (people.select_for_update() if for_update else people).filter(pk=_pk(user_id)).first()
    if person is None:
        raise NotFoundException(detail=f"no user {user_id}")
    return person


def _group(group_id: str, *, for_update: bool = False) -> IdpGroup:
    groups = IdpGroup.objects.filter(provisioned=True)
    group = (groups.select_for_update() if for_update else groups).filter(pk=_pk(group_id)).first()
    if group is None:
        raise NotFoundException(detail=f"no group {group_id}")
    return group


def _filtered(found: QuerySet, bound: type[ScimFilter], fields: dict[str, str], text: str | None) -> QuerySet:
    """`found` narrowed by a SCIM filter; only one `eq` on the attributes in `fields` is answered."""
    if not text:
        return found.order_by("pk")
    expression = bound(text).ast  # a filter that does not parse raises InvalidFilterException
    if not isinstance(expression, Comparison) or expression.op.value != "eq" or expression.attr_path.sub_attr:
        raise InvalidFilterException(detail=f"only {_eq_list(fields)} filters are supported")
    field = fields.get(str(expression.attr_path.attr).lower())
    if field is None or not isinstance(expression.value, str):
        raise InvalidFilterException(detail=f"only {_eq_list(fields)} filters are supported")
    value = expression.value
    if field == "pk":
        value = int(value) if value.isdigit() else -1  # an id that was never issued matches nothing
    return found.filter(**{field: value}).order_by("pk")


def _eq_list(fields: dict[str, str]) -> str:
    names = {"username": "userName", "externalid": "externalId", "displayname": "displayName", "id": "id"}
    return ", ".join(f'{names[name]} eq "..."' for name in fields)


def _pk(value: str | None, where: str = "id") -> int:
    if not value or not str(value).isdigit() or len(str(value)) > 18:
        if where == "id":
            raise NotFoundException(detail=f"no resource {value}")
        raise InvalidValueException(detail=f"{where} must be the id this server gave")
    return int(value)


def _text(value: str | None, name: str, *, required: bool = False) -> str:
    value = (value or "").strip()
    if required and not value:
        raise InvalidValueException(detail=f"{name} is required")
    if len(value) > MAX_NAME or "\x00" in value:
        raise InvalidValueException(detail=f"{name} must be at most {MAX_NAME} characters of text")
    return value


# --- Shown -------------------------------------------------------------------------------------


def _user_resource(person: ProvisionedUser) -> User:
    return User(
        id=str(person.pk),
        user_name=person.user_name,
        external_id=person.external_id or None,
        display_name=person.display_name or None,
        active=person.active,
        groups=[GroupMembership(value=str(g.pk), display=g.name) for g in person.groups.all()] or None,
        meta=Meta(resource_type="User", created=person.created_at, last_modified=person.modified_at),
    )


def _group_resource(group: IdpGroup) -> Group:
    return Group(
        id=str(group.pk),
        display_name=group.name,
        external_id=group.external_id or None,
        members=[GroupMember(value=str(p.pk), type="User", display=p.user_name) for p in group.members.all()]
        or None,
        meta=Meta(resource_type="Group", last_modified=group.modified_at),
    )
