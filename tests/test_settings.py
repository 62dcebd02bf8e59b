"""Every setting is documented; settings come from the environment in one place."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def declared_settings() -> set[str]:
    source = (ROOT / "ragsite" / "settings.py").read_text()
    return set(re.findall(r'env(?:\.\w+)?\(\s*"([A-Z][A-Z0-9_]+)"', source))


def test_every_environment_setting_is_documented():
    documented = (ROOT / "docs" / "configuration.md").read_text()
    names = declared_settings() | {"KNOWLEDGE_<COLLECTION>_FOLDER", "KNOWLEDGE_<AGENT>__<COLLECTION>_FOLDER"}
    missing = sorted(name for name in names if f"`{name}`" not in documented)
    assert not missing, f"docs/configuration.md does not document: {missing}"


def test_the_design_settings_are_all_declared():
    design = {"DATABASE_URL", "REDIS_URL", "EMBED_BACKEND", "EMBED_MODEL_DIR", "EMBED_URL", "EMBED_MODEL",
              "EMBED_API_KEY", "JUDGE_URL", "JUDGE_MODEL", "JUDGE_API_KEY", "MIN_SCORE", "AROUND", "MODEL_PRICES"}
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
