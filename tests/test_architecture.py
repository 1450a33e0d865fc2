"""Architecture rules of the code base (DESIGN.md §10), checked on the source text.

* no import cycles among the project's modules (every import statement counts, also
  inside functions; ``backends/`` is the package ``linview.backends``);
* no module imports another module's private (underscore) name;
* no file in ``linview/`` or ``backends/`` is longer than :data:`MAX_LINES` lines;
* the ``explain`` listing for ``examples/ols.m`` in README.md is the command's real output.
"""

from __future__ import annotations

import ast
import difflib
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: source folder -> the dotted package it is installed as
PACKAGES = {"linview": "linview", "backends": "linview.backends"}
MAX_LINES = 450


def module_name(path: Path) -> str:
    folder, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = PACKAGES[folder].split(".") + rest
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files() -> dict[str, Path]:
    """Every project module: ``{dotted name: path}``."""
    out = {}
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            out[module_name(path)] = path
    return out


MODULES = source_files()


def imports(name: str, path: Path) -> list[tuple[str, str, int]]:
    """``(module, imported name or "", line)`` for every import in the file, at any level.
    Relative imports are resolved against ``name``'s package."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, "", node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out += [(base, alias.name, node.lineno) for alias in node.names]
    return out


def project_targets(module: str, imported: str) -> list[str]:
    """The project modules an import statement loads by name: ``from P import m`` loads
    the module ``P.m`` when there is one, else ``P`` itself."""
    if imported and f"{module}.{imported}" in MODULES:
        return [f"{module}.{imported}"]
    return [module] if module in MODULES else []


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for module, imported, _ in imports(name, path):
            graph[name] |= {t for t in project_targets(module, imported) if t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_checks_see_the_whole_project():
    assert {"linview", "linview.backends"} <= set(MODULES)
    assert any(m.startswith("linview.backends.") for m in MODULES)
    assert sum(len(v) for v in import_graph().values()) > len(MODULES)


def test_imports_inside_functions_and_relative_imports_count(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text("import os\n\n\ndef f():\n    from linview.compiler import ir\n"
                    "    from . import sibling\n    from ..up import _x\n")
    found = imports("linview.compiler.mod", path)
    assert ("linview.compiler", "ir", 5) in found
    assert ("linview.compiler", "sibling", 6) in found
    assert ("linview.up", "_x", 7) in found
    assert project_targets("linview", "errors") == ["linview.errors"]  # a module
    assert project_targets("linview", "LinviewError") == ["linview"]  # a name in a package
    assert project_targets("numpy", "linalg") == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    found = cycles(import_graph())
    graph = import_graph()
    detail = "\n".join(
        "  " + ", ".join(c) + "\n    " + "; ".join(
            f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c)
        for c in found)
    assert not found, f"import cycles among project modules:\n{detail}"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_imports_a_private_name_of_another():
    bad = []
    for name, path in MODULES.items():
        for module, imported, line in imports(name, path):
            if module.split(".")[0] != "linview" or module == name:
                continue
            if imported and is_private(imported) and f"{module}.{imported}" not in MODULES:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {imported} from {module}")
    assert not bad, "private names imported from other modules:\n  " + "\n  ".join(bad)


def test_no_source_file_is_too_long():
    long = []
    for path in MODULES.values():
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not long, f"files over {MAX_LINES} lines:\n  " + "\n  ".join(long)


# ------------------------------------------------------------------ README
EXPLAIN_ARGS = ["explain", "examples/ols.m", "--dims", "m=4000,n=2000,p=1"]


def readme_block_after(command: list[str]) -> str:
    """The first fenced block after the README sentence that runs ``linview <command>``."""
    text = (ROOT / "README.md").read_text()
    pattern = r"\s+".join(re.escape(w) for w in ["linview", *command])
    found = re.search(pattern, text)
    assert found, f"README.md has no sentence running `linview {' '.join(command)}`"
    block = re.search(r"^```[^\n]*\n(.*?)^```", text[found.end():], re.S | re.M)
    assert block, "no fenced block after the command in README.md"
    return block.group(1)


def normalized(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@pytest.fixture
def linview_main():
    (ep,) = entry_points(group="console_scripts", name="linview")
    return ep.load()


def test_readme_explain_listing_is_the_real_output(linview_main, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert linview_main(EXPLAIN_ARGS) == 0
    real = normalized(capsys.readouterr().out)
    shown = normalized(readme_block_after(EXPLAIN_ARGS))
    diff = "\n".join(difflib.unified_diff(shown, real, "README.md", "linview explain",
                                          lineterm=""))
    assert shown == real, f"README's explain listing for examples/ols.m is stale:\n{diff}"
