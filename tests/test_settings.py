"""Every setting is documented; settings come from the environment in one place."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def declared_settings() -> set[str]:
    source = (ROOT / "config" / "settings.py").read_text()
    return set(re.findall(r'env(?:\.\w+)?\(\s*"([A-Z][A-Z0-9_]+)"', source))


def test_every_environment_setting_is_documented():
    documented = (ROOT / "docs" / "configuration.md").read_text()
    names = declared_settings() | {"KNOWLEDGE_<COLLECTION>_FOLDER", "KNOWLEDGE_<AGENT>__<COLLECTION>_FOLDER"}
    missing = sorted(name for name in names if f"`{name}`" not in documented)
    assert not missing, f"docs/configuration.md does not document: {missing}"


def test_the_design_settings_are_all_declared():
    design = {
        "DATABASE_URL",
        "REDIS_URL",
        "EMBED_BACKEND",
        "EMBED_MODEL_DIR",
        "EMBED_URL",
        "EMBED_MODEL",
        "EMBED_API_KEY",
        "JUDGE_URL",
        "JUDGE_MODEL",
        "JUDGE_API_KEY",
        "MIN_SCORE",
        "AROUND",
        "MODEL_PRICES",
    }
    assert design <= declared_settings()


def test_application_code_reads_no_environment_variables():
    offenders = []
    for path in [*ROOT.glob("collections_app/**/*.py"), *ROOT.glob("memory_app/**/*.py")]:
        text = path.read_text()
        if "os.environ" in text and path.name != "conf.py":
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders


def test_knowledge_folder_variable_name_follows_the_collection_name():
    from collections_app.conf import folder_variable

    assert folder_variable("hr-policies") == "KNOWLEDGE_HR_POLICIES_FOLDER"
    assert folder_variable("Docs.v2") == "KNOWLEDGE_DOCS_V2_FOLDER"


def test_knowledge_folder_is_read_when_asked(monkeypatch, tmp_path):
    from collections_app.conf import knowledge_folder

    assert knowledge_folder("nowhere-configured") is None
    monkeypatch.setenv("KNOWLEDGE_HANDBOOK_FOLDER", str(tmp_path))
    assert knowledge_folder("handbook") == tmp_path


# --- seed rules: settings are range-checked at start-up ------------------------------------------


def setting_errors():
    from collections_app.checks import check_settings

    return [(error.id, error.msg) for error in check_settings()]


def test_the_default_settings_pass_the_checks():
    assert setting_errors() == []


@pytest.mark.parametrize(
    ("name", "value", "check_id"),
    [
        ("AROUND", 6, "collections.E002"),
        ("AROUND", -1, "collections.E002"),
        ("AROUND", 1.5, "collections.E002"),
        ("MIN_SCORE", 1.5, "collections.E003"),
        ("MIN_SCORE", -0.1, "collections.E003"),
        ("MIN_SCORE", float("nan"), "collections.E003"),
        ("JUDGE_URL", "ftp://judge.example", "collections.E004"),
        ("JUDGE_URL", "judge.example:8080", "collections.E004"),
        ("JUDGE_URL", "http://", "collections.E004"),
        ("JUDGE_URL", "http://judge:80x", "collections.E004"),
        ("JUDGE_URL", "http://judge/v1?key=1", "collections.E004"),
        ("EMBED_URL", "http://embed host", "collections.E004"),
        ("EMBED_TIMEOUT", 0, "collections.E005"),
        ("JUDGE_TIMEOUT", -5, "collections.E005"),
        ("RERANK_TIMEOUT", 0, "collections.E005"),
        ("RERANK_DEPTH", 0, "collections.E005"),
        ("RERANK_URL", "rerank.example/rerank", "collections.E004"),
        ("EMBED_BATCH_SIZE", 0, "collections.E005"),
        ("EMBED_CONCURRENCY", 0, "collections.E005"),
        ("IVF_NPROBE", -1, "collections.E005"),
        ("IVF_RECALL", 0, "collections.E005"),
        ("IVF_RECALL", 1.01, "collections.E005"),
        ("IVF_MIN_PARAGRAPHS", -1, "collections.E005"),
        ("BUILD_HEARTBEAT_TIMEOUT", 0, "collections.E005"),
        ("MAX_UPLOAD_BYTES", 0, "collections.E005"),
        ("HEALTH_REPAIR_MINUTES", 0, "collections.E005"),
        ("MODEL_PRICES", {"gpt": {"input": -1}}, "collections.E006"),
        ("MODEL_PRICES", {"gpt": {"input": "cheap"}}, "collections.E006"),
        ("MODEL_PRICES", {"gpt": 0.5}, "collections.E006"),
        ("MODEL_PRICES", {"gpt": {"inptu": 0.5}}, "collections.E006"),
        ("MODEL_PRICES", [], "collections.E006"),
    ],
)
def test_seed_settings_out_of_range_fail_the_system_check_with_a_stable_id(settings, name, value, check_id):
    """AROUND 0-5, MIN_SCORE 0-1 (seed 000's floor: 0 turns it off), prices and budgets at least 0, URLs
    well-formed: a value no search could use is refused at start-up, not met as a 500 later."""
    setattr(settings, name, value)
    errors = setting_errors()
    assert [check for check, _msg in errors] == [check_id]
    assert name in errors[0][1]


def test_settings_at_the_edges_of_their_ranges_pass(settings):
    settings.AROUND, settings.MIN_SCORE, settings.IVF_MIN_PARAGRAPHS = 5, 0, 0
    settings.IVF_NPROBE, settings.IVF_RECALL, settings.EMBED_CONCURRENCY = 0, 1, 1
    settings.JUDGE_URL, settings.EMBED_URL = "https://api.openai.com/v1", "http://127.0.0.1:8080/"
    settings.MODEL_PRICES = {"gpt-4o-mini": {"input": 0, "output": 0.6}}
    assert setting_errors() == []
    settings.AROUND, settings.MIN_SCORE = 0, 1
    assert setting_errors() == []


def test_an_http_embedder_without_a_url_fails_the_check(settings):
    settings.EMBED_BACKEND, settings.EMBED_URL = "http", ""
    assert [check for check, _msg in setting_errors()] == ["collections.E004"]


@pytest.mark.django_db  # the plain check also reads the store's schema version
def test_the_settings_checks_run_with_a_plain_manage_py_check(settings):
    from django.core import checks

    settings.AROUND = 9
    assert "collections.E002" in [error.id for error in checks.run_checks()]


@pytest.mark.django_db
def test_seed_judge_url_may_end_in_v1_like_the_embedding_url(agent, knowledge_folder, settings):
    """JUDGE_URL is a base URL as EMBED_URL is: with or without its trailing /v1, the judge is asked."""
    from collections_app.services.agents import create_collection
    from collections_app.services.builds import build_collection
    from collections_app.services.search import search_collection
    from tests.conftest import HANDBOOK
    from tests.servers import JudgeServer, serving

    collection = create_collection(agent=agent, name="handbook", judge=True)
    knowledge_folder("handbook", HANDBOOK)
    build_collection(collection=collection)
    with serving(JudgeServer()) as judge:
        for url in (judge.url, judge.url + "/v1", judge.url + "/v1/"):
            settings.JUDGE_URL, settings.JUDGE_MODEL = url, "judge-mini"
            answer = search_collection(agent=agent, collection="handbook", question="carry-over of leave")
            assert answer["refused"] is False and answer["judge"]["status"] == "answered", url
        assert {request["path"] for request in judge.requests} == {"/v1/chat/completions"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "built_from",
    [
        "/srv/shares/hr",
        "~/documents",
        "./policies",
        "C:\\Users\\hr\\policies",
        "\\\\fileserver\\hr",
        "file:///etc/hr",
        "https://intranet.example/policies",
        "srv/shares/hr",
        "shares\\hr",
    ],
)
def test_seed_built_from_refuses_anything_that_looks_like_a_path(agent, built_from):
    """Seed 000: built_from "is for a person, not a program. The HR share, the policy site - never a path"."""
    from django.core.exceptions import ValidationError

    from collections_app.models import Collection
    from collections_app.services.agents import create_collection
    from ragsite.errors import RagsiteError

    with pytest.raises(RagsiteError) as caught:
        create_collection(agent=agent, name="hr", built_from=built_from)
    assert caught.value.code == "invalid_built_from" and "never where" in caught.value.message
    with pytest.raises(ValidationError) as invalid:  # the admin's form validates the model
        Collection(agent=agent, name="hr", built_from=built_from).full_clean()
    assert "built_from" in invalid.value.message_dict
    assert not Collection.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "built_from", ["the HR share", "the policy site", "HR/Finance handbooks", "24/7 runbooks", ""]
)
def test_built_from_accepts_descriptions_for_people(agent, built_from):
    from collections_app.services.agents import create_collection

    assert create_collection(agent=agent, name="hr", built_from=built_from).built_from == built_from


@pytest.mark.django_db
def test_a_negative_daily_budget_is_refused(agent):
    from decimal import Decimal

    from django.core.exceptions import ValidationError

    agent.daily_budget = Decimal("-1")
    with pytest.raises(ValidationError, match="at least 0"):
        agent.full_clean()
    agent.daily_budget = Decimal("0")
    agent.full_clean()


@pytest.mark.django_db
@pytest.mark.parametrize(("field", "value"), [("min_score", 1.5), ("min_score", -0.5), ("around", 6)])
def test_a_collections_floor_and_around_overrides_obey_the_settings_ranges(agent, field, value):
    from django.core.exceptions import ValidationError

    from collections_app.models import Collection

    collection = Collection(agent=agent, name="hr", **{field: value})
    with pytest.raises(ValidationError) as invalid:
        collection.full_clean()
    assert set(invalid.value.message_dict) == {field}
    Collection(agent=agent, name="hr", min_score=0, around=5).full_clean()


@pytest.mark.django_db
def test_a_path_stored_in_built_from_before_the_check_is_reported(agent):
    from collections_app.checks import check_built_from
    from collections_app.models import Collection
    from collections_app.services.agents import create_collection

    create_collection(agent=agent, name="hr", built_from="the HR share")
    assert check_built_from(databases=["default"]) == []
    Collection.objects.filter(name="hr").update(built_from="/srv/shares/hr")  # written by an older ragsite
    (warning,) = check_built_from(databases=["default"])
    assert warning.id == "collections.W001" and "alpha/hr" in warning.msg and "/srv" not in warning.msg
