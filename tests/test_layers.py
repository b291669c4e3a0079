"""The layout's floors, read from the code's own imports: each floor imports only the floors below it.

Every import counts, including those under `if TYPE_CHECKING:` and inside functions: a late import
hides a dependency from the reader, not from the design. The floors, bottom to top:

    models, reference_impl        the spec and the implementation; nothing of ours (models.core aside)
    traces                        the trace as data: models.core only
    properties.engines            the engines: models.core, traces; never a mechanism by name
    properties.jvm                the JVM controller's Python side (build, lock-level protocol): the engines
    properties.<mechanism>        one mechanism's binding: engines, its own model and reference
    properties.registry           the mechanisms by name
    properties.pipeline           the Spark pipeline over event logs: any mechanism's, through the registry
    properties.cli                the command line: imports any floor but the mechanisms', imported by nothing

The pipeline, the command line and the trace format name no mechanism in code, and no module imports another
module's underscore names.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

from properties.registry import mechanisms

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "reference_impl", "traces", "properties")
MECHANISMS = tuple(mechanisms())
"""Read from the registry: a mechanism added there is held to these rules with no edit here."""


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def _imports(module: str, path: Path, known: set[str]) -> Iterator[str]:
    """Every module of ours that `module` imports, wherever the import statement sits."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from package import submodule` imports the submodule
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                yield target


def _graph() -> nx.DiGraph:
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module, path in modules.items():
        graph.add_edges_from((module, target) for target in _imports(module, path, set(modules)))
    return graph


GRAPH = _graph()


def _floor(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "properties" or len(parts) == 1:
        return parts[0]
    return "mechanism" if parts[1] in MECHANISMS else parts[1]


FLOORS = ("models", "reference_impl", "traces", "engines", "jvm", "mechanism", "registry", "pipeline", "cli")
ALLOWED: dict[str, set[str]] = {
    "models": {"models"},
    "reference_impl": {"reference_impl"},
    "traces": {"traces", "models"},
    "engines": {"engines", "traces", "models"},
    "jvm": {"jvm", "engines", "traces", "models"},
    "mechanism": {"mechanism", "jvm", "engines", "traces", "models", "reference_impl"},
    "registry": {"registry", "mechanism", "engines", "traces", "models"},
    "pipeline": {"pipeline", "registry", "engines", "traces", "models"},
    "cli": set(FLOORS) - {"mechanism", "reference_impl"},
}


def _violations(allowed: dict[str, set[str]]) -> list[str]:
    return [f"{a} -> {b}" for a, b in sorted(GRAPH.edges) if _floor(b) not in allowed[_floor(a)]]


def test_the_graph_was_read() -> None:
    """The rules below mean something only if the reader sees the imports it must see."""
    assert GRAPH.has_edge("properties.engines.explorer", "models.core")
    assert GRAPH.has_edge("properties.keyshared.dispatcher", "reference_impl.keyshared")
    assert set(map(_floor, GRAPH.nodes)) == set(FLOORS) | {"properties"}


def test_every_floor_imports_only_the_floors_below_it() -> None:
    assert _violations(ALLOWED) == []


def test_the_rule_fails_on_an_upward_import() -> None:
    """Its twin: an engine allowed nothing but itself breaks the rule (it imports models.core)."""
    assert "properties.engines.explorer -> models.core" in _violations({**ALLOWED, "engines": {"engines"}})


@pytest.mark.parametrize("floor", ["models", "engines", "traces"])
def test_only_models_core_is_imported_from_models_below_the_mechanisms(floor: str) -> None:
    """The models and the engines know the model protocol, never another model."""
    wrong = [f"{a} -> {b}" for a, b in GRAPH.edges
             if _floor(a) == floor and b.startswith("models.") and b != "models.core"
             and not (floor == "models" and b.split(".")[1] == a.split(".")[1])]
    assert wrong == []


def test_a_mechanism_imports_no_other_mechanism() -> None:
    def name(module: str) -> str:
        return module.split(".")[1]

    crossing = [f"{a} -> {b}" for a, b in GRAPH.edges
                if _floor(a) == _floor(b) == "mechanism" and a.startswith("properties.") and name(a) != name(b)]
    assert crossing == []


def test_no_engine_names_a_mechanism() -> None:
    """Engines take a `Mechanism`; the names are the registry's."""
    named = [(m, word) for m, path in _modules().items() if _floor(m) == "engines"
             for word in MECHANISMS if f'"{word}' in path.read_text(encoding="utf-8")]
    assert named == []


def test_no_circle_anywhere() -> None:
    assert list(nx.simple_cycles(GRAPH)) == []


UPPER = ("properties.pipeline", "properties.cli", "traces")
"""The floors above the mechanisms (and the trace format below them) that must work for any mechanism."""
NAMED = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(MECHANISMS) + r")(?![A-Za-z0-9])")
"""A mechanism's name as a word of code: `keyshared_check` and `"delayed"` match, Spark's `_metadata` does not."""


def _upper(module: str) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in UPPER)


def test_the_upper_floors_import_no_mechanism() -> None:
    """The pipeline, the command line and the trace format reach a mechanism through the registry only."""
    reaching = [f"{a} -> {b}" for a, b in GRAPH.edges if _upper(a)
                and (b.startswith("reference_impl") or (b.startswith("models.") and b != "models.core")
                     or _floor(b) == "mechanism")]
    assert reaching == []


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (of a module, class or function, or an attribute's)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for index, statement in enumerate(body):
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
                    and isinstance(statement.value.value, str) and (index == 0 or isinstance(
                        body[index - 1], ast.Assign | ast.AnnAssign)):
                found.add(id(statement.value))
    return found


def _named(source: str) -> list[str]:
    """Every place the code (not a docstring or a comment) names a mechanism: strings, names and attributes."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    words: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.append((node.lineno, node.value))
        elif isinstance(node, ast.Name):
            words.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            words.append((node.lineno, node.attr))
        elif isinstance(node, ast.alias):
            words.append((node.lineno, node.asname or node.name))
        elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef | ast.arg):
            words.append((node.lineno, node.name if not isinstance(node, ast.arg) else node.arg))
    return [f"line {line}: {word!r}" for line, word in words if NAMED.search(word)]


def test_the_upper_floors_name_no_mechanism_in_code() -> None:
    """Adding a mechanism adds its folders and one line in the registry, and touches none of these."""
    named = {module: found for module, path in _modules().items() if _upper(module)
             and (found := _named(path.read_text(encoding="utf-8")))}
    assert named == {}


def test_a_mechanism_named_in_code_is_seen_and_a_docstring_is_not() -> None:
    """The rule's twin: the reader finds the name in a string, an import and an identifier, not in a docstring."""
    source = '"""About keyshared."""\nimport properties.keyshared\nX = "delayed"\nkeyshared_check = 1\n'
    assert _named(source) == ["line 2: 'properties.keyshared'", "line 3: 'delayed'", "line 4: 'keyshared_check'"]


def _underscore_names(source: str) -> list[str]:
    """The underscore names `source` imports from other modules, as module.name."""
    return [f"{node.module}.{alias.name}" for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)
            for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]


def test_no_module_imports_another_modules_underscore_names() -> None:
    """A name another module needs is public; an underscore says "only this module", so an import of one lies."""
    tests = {_module(p): p for p in (ROOT / "tests").rglob("*.py")}
    private = [f"{module}: {name}" for module, path in {**_modules(), **tests}.items()
               for name in _underscore_names(path.read_text(encoding="utf-8"))]
    assert private == []


def test_the_underscore_rule_sees_an_import_of_a_private_name() -> None:
    """Its twin: a module importing `_private` is reported, `__future__`'s dunder names are not."""
    source = "from __future__ import annotations\nfrom models.core import _private, Action\n"
    assert _underscore_names(source) == ["models.core._private"]
