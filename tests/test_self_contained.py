"""The suite reads nothing beside the repository: `make test` passes on a clone made anywhere.

A test once read `../shared/testdata/...` (one folder above the clone) and errored on every fresh
clone. This reads each test module's source with `ast` and refuses a path that climbs out of the
repository; `.ci/run` also runs the suite in a clone with nothing beside it, which catches the rest.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = "../" + "shared"  # spelt in two so that this module does not trip its own check
TESTS = sorted(p for p in (ROOT / "tests").rglob("*.py") if "node_modules" not in p.parts)


def _escapes(path: Path, root: Path = ROOT) -> list[str]:
    """Each place in the module that names a path above the repository root."""
    depth = len(path.relative_to(root).parts)  # tests/x/y.py: parents[2] is the root, parents[3] is beside it
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "parents"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, int)
            and node.slice.value >= depth
        ):
            found.append(f"line {node.lineno}: parents[{node.slice.value}] is above the repository")
        # The workspace's shared folder beside the clone (hostile "../x" inputs elsewhere are fine).
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(SHARED):
            found.append(f"line {node.lineno}: {node.value!r} leaves the repository")
        # ROOT.parent / REPO.parent: the folder that holds the clone.
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "parent"
            and isinstance(node.value, ast.Name)
            and node.value.id in ("ROOT", "REPO")
        ):
            found.append(f"line {node.lineno}: {node.value.id}.parent is beside the repository")
    return found


def test_the_test_modules_are_found():
    assert len(TESTS) > 50 and ROOT / "tests" / "shared" / "test_embedders.py" in TESTS


@pytest.mark.parametrize("path", TESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_test_module_reads_beside_the_repository(path):
    assert _escapes(path) == []


def test_the_check_sees_the_old_way_out(tmp_path):
    """The pattern that broke fresh clones is caught (the check above can fail)."""
    old = tmp_path / "tests" / "shared" / "old_way.py"
    old.parent.mkdir(parents=True)
    old.write_text(
        'REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "x.json"\n'
        'P = "../shared/datasets"\nQ = ROOT.parent / "shared"\nFINE = Path(__file__).parents[2]\n',
        encoding="utf-8",
    )
    assert sorted(line.split(":")[0] for line in _escapes(old, root=tmp_path)) == [
        "line 1",
        "line 2",
        "line 3",
    ]
