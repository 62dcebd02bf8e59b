"""The direction of the arrows: adapters -> services -> pure modules and models, apps on the shared floor.

Read from the source with `ast` (nothing is imported), so a new import that breaks a rule fails here
whether or not any test happens to execute it. docs/architecture.md draws the same picture.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("config", "ragsite", "collections_app", "memory_app")

# The house, top to bottom: `config` is the Django project (settings, URL wiring, middleware, process
# entry points) and may import anything; the two apps stand on the shared floor; the floor is the whole
# `ragsite` package, read from the folder, so a module added there is held to the rule without a list.
PROJECT = "config"
FLOOR = ("ragsite",)
APPS = ("collections_app", "memory_app")
# Pure modules: formulas and formats, tested without a database. No models, no settings, no services.
# Whole folders are pure (a module added to one is checked without being listed here), plus a few
# single modules that sit beside the models.
PURE_FOLDERS = ("ragsite.embedders", "ragsite.model_calls", "collections_app.text", "collections_app.index")
PURE = (
    *PURE_FOLDERS,
    "ragsite.lexical",
    "ragsite.fusion",
    "ragsite.top",
    "ragsite.division",
    "collections_app.ranking",
    "collections_app.interchange",
    "collections_app.measure",
    "collections_app.scratch",
    "collections_app.metrics",
    "memory_app.nodes",
    "memory_app.recall_index",
)
# What memory may take from collections: the models (agents own memories), the agent look-up, and the
# ledger model calls are charged to (agents own it, whichever app made the call).
MEMORY_MAY_USE = (
    "collections_app.models",
    "collections_app.services.agents",
    "collections_app.services.ledger",
)
# Adapters: they call services; services never call them.
ADAPTERS = ("admin", "api", "mcp_tools", "management", "tasks", "embedding_server", "views")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _source_files():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in the file (function-level imports count too)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            # `from package import module` names a module too.
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {module for module in found if module.split(".")[0] in PACKAGES}


GRAPH = {_module_name(path): _imports(path) for path in _source_files()}
MODULES = set(GRAPH)


def _project_edges(name: str) -> set[str]:
    """The project modules `name` imports (names that are attributes, not modules, are dropped)."""
    return {target for target in GRAPH[name] if target in MODULES and target != name}


def _within(module: str, prefixes) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def test_the_tree_is_read():
    assert "collections_app.services.search" in GRAPH and "ragsite.mcp.transport" in GRAPH
    assert "config.urls" in GRAPH and {"ragsite.rls", "ragsite.security"} <= MODULES
    assert all(any(_within(m, (folder,)) and m != folder for m in MODULES) for folder in PURE_FOLDERS)
    assert "ragsite.analyzers" in _project_edges("collections_app.services.search.plan")


def test_no_import_cycle_between_project_modules():
    # Tarjan's strongly connected components; any component of more than one module is a cycle.
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in _project_edges(module):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            # A package and its own submodules (`from .x import y` in __init__) are one unit, not a cycle.
            outside = {m for m in component if not any(m.startswith(o + ".") for o in component)}
            if len(outside) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == []


def test_the_shared_floor_imports_no_app():
    offending = {
        m: sorted(t for t in _project_edges(m) if not _within(t, FLOOR)) for m in MODULES if _within(m, FLOOR)
    }
    assert {m: t for m, t in offending.items() if t} == {}


def test_nothing_imports_the_project_package():
    # The arrows run down only: the apps and the floor never reach up into the project's wiring.
    offending = {
        m: sorted(t for t in _project_edges(m) if _within(t, (PROJECT,)))
        for m in MODULES
        if not _within(m, (PROJECT,))
    }
    assert {m: t for m, t in offending.items() if t} == {}


def test_collections_never_import_memory():
    offending = {
        m: sorted(t for t in _project_edges(m) if t.startswith("memory_app"))
        for m in MODULES
        if m.startswith("collections_app")
    }
    assert {m: t for m, t in offending.items() if t} == {}


def test_memory_takes_only_models_and_the_agent_lookup_from_collections():
    offending = {
        m: sorted(
            t
            for t in _project_edges(m)
            if t.startswith("collections_app") and t != "collections_app" and not _within(t, MEMORY_MAY_USE)
        )
        for m in MODULES
        if m.startswith("memory_app")
    }
    assert {m: t for m, t in offending.items() if t} == {}


def test_no_app_imports_another_apps_services_beyond_the_agent_lookup():
    # The project's wiring (urls, the API router) mounts the apps, so it is above them and may.
    for module in {m for m in MODULES if _within(m, APPS)}:
        app = module.split(".")[0]
        for target in _project_edges(module):
            if ".services" in target and target.split(".")[0] != app and _within(target, APPS):
                assert app == "memory_app" and _within(target, MEMORY_MAY_USE), (module, target)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _within(m, PURE)))
def test_pure_modules_import_no_models_settings_or_services(module):
    forbidden = [
        t
        for t in GRAPH[module]
        if t.endswith(".models")
        or ".services" in t
        or t in ("ragsite.conf", "config.settings")
        or t.endswith(".conf")
    ]
    assert forbidden == []
    source = (ROOT / Path(*module.split("."))).with_suffix(".py")
    if not source.exists():
        source = ROOT / Path(*module.split(".")) / "__init__.py"
    text = source.read_text(encoding="utf-8")
    assert "django.conf" not in text and "django.db" not in text


@pytest.mark.parametrize("module", sorted(m for m in MODULES if ".services" in m))
def test_services_never_call_adapters(module):
    adapters = [t for t in _project_edges(module) if any(part in ADAPTERS for part in t.split(".")[1:])]
    assert adapters == []


def _sizes(files) -> dict[str, int]:
    return {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in files
        if "node_modules" not in path.parts
    }


def test_no_source_file_is_a_hall():
    # Rooms of a readable size (issues 14 and 27): no module over 500 lines, migrations aside, tests and
    # benchmarks too; a module is split where its concepts split, never squeezed to fit.
    files = [
        *_source_files(),
        *sorted((ROOT / "tests").rglob("*.py")),
        *sorted((ROOT / "bench").rglob("*.py")),
        *sorted((ROOT / "tools").rglob("*.py")),
    ]
    assert {path: lines for path, lines in _sizes(files).items() if lines > 500} == {}
