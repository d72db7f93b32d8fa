"""Imports only point down the layers, and nothing circles: ops ← model ← search ← engine ← integration ← tools.

Every ``import`` of the package's own modules is read with ``ast``, those inside functions too.
There is no list of allowed exceptions: a module that needs something from a higher layer is in
the wrong layer, or the thing it needs is (docs/architecture.md, "The layers").
"""
import ast
import os
from typing import Dict, Iterator, List, Set, Tuple

from conftest import REPO

PACKAGE = os.path.join(REPO, "fairseq_stream")
#: Bottom to top. errors.py is below everything; the package's own __init__/__main__ above everything.
LAYERS = ("errors", "ops", "model", "search", "engine", "integration", "tools")
TOP = len(LAYERS)


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else TOP


def module_name(rel: str) -> str:
    name = rel[:-3].replace(os.sep, ".")
    return "fairseq_stream" + ("" if name == "__init__" else "." + name.removesuffix(".__init__"))


def modules() -> Dict[str, str]:
    """Every module of the package → its file."""
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                found[module_name(os.path.relpath(path, PACKAGE))] = path
    return found


def imports(path: str, module: str, known: Set[str]) -> Iterator[Tuple[int, str]]:
    """(line, imported module) of every import of the package's own modules in the file, relative
    ones resolved; ``from package import submodule`` names the submodule."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        yield from ((node.lineno, t) for t in targets if t.split(".")[0] == "fairseq_stream" and t != module)


def graph() -> Dict[str, Dict[str, int]]:
    """module → {imported module: first line}."""
    known = modules()
    edges: Dict[str, Dict[str, int]] = {}
    for module, path in known.items():
        edges[module] = {}
        for line, target in imports(path, module, set(known)):
            edges[module].setdefault(target, line)
    return edges


def cycles(edges: Dict[str, Dict[str, int]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, {}):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_folder_of_the_package_is_a_layer():
    folders = {d for d in os.listdir(PACKAGE) if os.path.isdir(os.path.join(PACKAGE, d)) and d != "__pycache__"}
    folders -= {"csrc"}
    assert folders <= set(LAYERS), f"folders that are not a layer: {sorted(folders - set(LAYERS))}"
    assert {m for m in modules() if layer(m) == TOP} == {"fairseq_stream", "fairseq_stream.__main__"}


def test_no_import_points_up_a_layer():
    up = [f"{m.replace('.', '/')}.py:{line} imports {t}" for m, targets in graph().items()
          for t, line in targets.items() if layer(t) > layer(m)]
    assert not up, "imports that point up the layers (" + " ← ".join(LAYERS) + "): " + "; ".join(up)


def test_no_imports_circle():
    assert cycles(graph()) == []


def test_no_module_only_re_exports_or_swaps_itself():
    """A module whose only content is imports (a re-export) or a ``sys.modules`` swap is a shim."""
    shims = []
    for module, path in modules().items():
        if path.endswith("__init__.py"):
            continue  # a package's face
        with open(path, encoding="utf-8") as f:
            source = f.read()
        body = [n for n in ast.parse(source).body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        if "sys.modules[__name__]" in source or (body and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in body)):
            shims.append(module)
    assert not shims


def test_the_scan_sees_an_upward_import_and_a_circle(tmp_path):
    """The checks themselves: imports inside functions, relative ones, and a circle of two."""
    ops = tmp_path / "ops"
    ops.mkdir()
    (ops / "bad.py").write_text("def f():\n    from ..search import state\n    import fairseq_stream.engine.scheduler\n")
    found = [t for _, t in imports(str(ops / "bad.py"), "fairseq_stream.ops.bad", {"fairseq_stream.search.state"})]
    assert found == ["fairseq_stream.search.state", "fairseq_stream.engine.scheduler"]
    assert all(layer(t) > layer("fairseq_stream.ops.bad") for t in found)
    assert cycles({"a": {"b": 1}, "b": {"a": 2}, "c": {"a": 3}}) == [["a", "b"]]


def test_the_public_import_paths_work():
    """What users write: the session, the plug-in API of docs/architecture.md, the console scripts' modules."""
    from fairseq_stream.ops.pruning import StepView
    from fairseq_stream.search.beam_rules import register_pruning_rule
    from fairseq_stream.search.registry import register_search
    from fairseq_stream.tools import bench, ddgviz, demo, frontier, shard
    from fairseq_stream.tools.session import TranslationSession

    assert callable(register_pruning_rule) and callable(register_search) and StepView and TranslationSession
    assert all(callable(m.main) for m in (bench, ddgviz, demo, frontier, shard))
