"""Every doc page, decision record and bench script the code, tests and docs cite exists.

The code points into docs/ to say where a figure or a reason is written down; a pointer to a page,
a record or a script that is gone sends a reader nowhere. The decision records are numbered once,
listed in their index, and each has its sections. App code carries its reason, not its history:
no issue numbers, sessions or review ids (git and the records keep those).
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DECISIONS = ROOT / "docs" / "decisions"
HISTORY = ROOT / "docs" / "history"  # frozen: its paths are those of its time
APPS = ("collections_app", "memory_app", "ragsite", "config")

DOC_PATH = re.compile(r"(?<![\w/])docs/[\w./-]*?\.md\b")
DECISION_ID = re.compile(r"(?<![\w/])docs/decisions/(\d{4})(?![\w-])")  # the short form code cites
SCRIPT_PATH = re.compile(r"(?<![\w/])(?:bench|tools)/[\w/-]+\.py\b")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
RECORD = re.compile(r"^(\d{4}|XXXX)-[a-z0-9]+(?:-[a-z0-9]+)*\.md$")
RETIRED = re.compile(r"git show [0-9a-f]{7,40}:(bench/[\w/-]+\.py)")
# Written as text in a test, not cited: a document name in an interchange fixture.
NOT_CITATIONS = {"docs/leave.md"}


def sources() -> list[Path]:
    """Every tracked-looking text file that may cite docs: code, tests, docs, the project's files."""
    found = [ROOT / name for name in ("README.md", "Makefile", "pyproject.toml") if (ROOT / name).exists()]
    for top in (*APPS, "tests", "bench", "tools", "templates", "docs"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in {".py", ".md", ".html", ".txt", ".toml"} and path.is_file():
                if "node_modules" in path.parts or HISTORY in path.parents:
                    continue
                found.append(path)
    return found


def cited(pattern: re.Pattern, paths) -> dict[str, list[str]]:
    where: dict[str, list[str]] = {}
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in pattern.finditer(line):
                where.setdefault(match.group(0), []).append(f"{path.relative_to(ROOT)}:{number}")
    return where


def test_every_doc_path_cited_exists():
    missing = {
        path: where
        for path, where in cited(DOC_PATH, sources()).items()
        if path not in NOT_CITATIONS and not (ROOT / path).exists()
    }
    assert not missing, f"cited but not in docs/: {missing}"


def test_every_decision_id_cited_is_one_record():
    unknown = {
        cite: where
        for cite, where in cited(DECISION_ID, sources()).items()
        if len(list(DECISIONS.glob(f"{cite.rsplit('/', 1)[1]}-*.md"))) != 1
    }
    assert not unknown, f"no record (or more than one) with this number: {unknown}"


def test_every_bench_and_tool_script_cited_exists():
    """Records may name a retired script, but only beside the commit that still has it."""
    records = set(DECISIONS.glob("*.md"))
    missing = {}
    for path, where in cited(SCRIPT_PATH, [p for p in sources() if p not in records]).items():
        if not (ROOT / path).exists():
            missing[path] = where
    for record in sorted(records):
        text = record.read_text(encoding="utf-8")
        retired = set(RETIRED.findall(text))
        for match in SCRIPT_PATH.finditer(text):
            if not (ROOT / match.group(0)).exists() and match.group(0) not in retired:
                missing.setdefault(match.group(0), []).append(record.name)
    assert not missing, f"cited scripts that do not exist (a retired one needs `git show <sha>:…`): {missing}"


def test_every_relative_link_in_the_docs_resolves():
    broken = []
    for page in [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_the_records_are_numbered_once_listed_and_complete():
    records = sorted(path for path in DECISIONS.glob("*.md") if path.name != "README.md")
    assert records, "docs/decisions/ holds no records"
    bad_names = [path.name for path in records if not RECORD.match(path.name)]
    assert not bad_names, f"a record is NNNN-<kebab-title>.md (XXXX until it is numbered): {bad_names}"
    numbers = [path.name[:4] for path in records if not path.name.startswith("XXXX")]
    assert len(numbers) == len(set(numbers)), "two records share a number"
    assert numbers == [f"{n:04d}" for n in range(1, len(numbers) + 1)], "numbers run from 0001 without gaps"
    index = (DECISIONS / "README.md").read_text(encoding="utf-8")
    for path in records:
        text = path.read_text(encoding="utf-8")
        if path.name.startswith("XXXX"):
            continue  # numbered, and indexed, when it lands
        assert f"({path.name})" in index, f"{path.name} is not in docs/decisions/README.md"
        assert text.startswith(f"# {path.name[:4]}. "), f"{path.name}: the title starts with its number"
        for section in ("## Context", "## Decision", "## Status"):
            assert f"\n{section}\n" in text, f"{path.name} has no {section}"


@pytest.mark.parametrize(
    "history",
    [
        r"\bissues? #?\d+",  # an issue number
        r"\b[Ss]ession \d+",  # a working session
        r"\bD\d{1,2}\b",  # an external review's finding id
        r"\b20\d\d-\d\d-\d\d review\b",
    ],
)
def test_app_code_keeps_its_reasons_not_its_history(history):
    pattern = re.compile(history)
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
