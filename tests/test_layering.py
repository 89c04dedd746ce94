"""The package's layers, read from its imports.

* ``audit/cuda`` reads CUDA source and PTX; it imports neither the compile step nor mutation testing.
* Nothing below the command layer imports ``audit.commands``, and nothing outside mutation testing imports
  ``audit.mutate`` (its privates least of all).
* The static commands load neither the GPU runtime, nor mutation testing, nor a GPU package, nor the
  project's reference modules.
* No module imports another that imports it back, not even lazily inside a function.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "audit"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def import_graph() -> nx.DiGraph:
    """module -> module for every import of the package, top-level or inside a function, except imports
    under ``if TYPE_CHECKING:`` (which never run)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                found = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            if _in_type_checking(node, parents):
                continue
            for target in found:
                if target in modules and target != name:
                    graph.add_edge(name, target)
    return graph


GRAPH = import_graph()


def _importers_of(prefix: str) -> set[str]:
    return {a for a, b in GRAPH.edges if b == prefix or b.startswith(prefix + ".")}


def test_cuda_reading_imports_neither_compile_nor_mutate():
    offenders = {(a, b) for a, b in GRAPH.edges if a.startswith("audit.cuda") and b.startswith(("audit.compile", "audit.mutate"))}
    assert offenders == set()


def test_no_lower_layer_imports_mutate_or_commands():
    upper = ("audit.commands", "audit.cli", "audit.__main__")
    assert {m for m in _importers_of("audit.commands") if not m.startswith(upper)} == set()
    assert {m for m in _importers_of("audit.mutate") if not m.startswith(("audit.mutate", *upper))} == set()


def test_no_module_imports_a_private_module_of_another_package():
    offenders = set()
    for a, b in GRAPH.edges:
        owner, _, leaf = b.rpartition(".")
        # a package and its subpackages may use its private modules; another package may not
        if leaf.startswith("_") and not leaf.startswith("__") and a != owner and not a.startswith(owner + "."):
            offenders.add((a, b))
    assert sorted(offenders) == []


@pytest.mark.parametrize(
    "argv",
    [["check", "--format", "json"], ["graph"], ["rules"], ["layout", "fingerprint"], ["report", "--check"]],
    ids=lambda argv: " ".join(argv),
)
def test_static_commands_load_no_runtime_mutation_or_gpu_package(argv, tmp_path, request):
    root = str(request.config.rootpath)
    code = (
        "import sys, contextlib, io\n"
        "from audit.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main({[*argv, '--root', root]!r})\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('audit.runtime', 'audit.mutate', 'pycuda', 'cupy', 'torch', 'audit.references')))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.stdout.strip().splitlines()[-1:] == ["[]"], out.stdout + out.stderr


def test_no_import_circles():
    """Not even through an import inside a function: a circle means two modules that cannot be read, tested
    or moved apart (the rule registry, the backend factory and the session with its verifiers were)."""
    cycles = sorted(sorted(c) for c in nx.simple_cycles(GRAPH))
    assert cycles == []
