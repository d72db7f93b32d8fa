"""Imports only point down the layers: ops ← core ← strategies ← integration / ib / tools.

Every ``import`` of the package's own modules is read with ``ast`` (those inside functions too);
one that points up a layer fails here unless it is one of ``ALLOWED``, each of which
docs/architecture.md names with its reason.
"""
import ast
import os
from typing import Iterator, Optional, Tuple

from conftest import REPO

PACKAGE = os.path.join(REPO, "fairseq_stream")
#: Bottom to top; errors.py is below everything, the package's own __init__/__main__ above everything.
LAYERS = {"errors": 0, "ops": 1, "core": 2, "strategies": 3, "integration": 4, "ib": 4, "tools": 4}
TOP = 5
#: (importing file, imported module) → why it may point up; docs/architecture.md names each.
ALLOWED = {
    ("core/engine.py", "fairseq_stream.integration"): "the old path of integration/engine.py, resolved on first use",
    ("strategies/ib_beam.py", "fairseq_stream.ib"): "the IBDecoder family's strategy reads its target order",
    ("strategies/ib_beam.py", "fairseq_stream.ib.model"): "the IBDecoder family's strategy reads its spec",
}


def layer(module: str) -> Optional[int]:
    parts = module.split(".")
    if parts[0] != "fairseq_stream":
        return None  # not ours
    return LAYERS.get(parts[1], TOP) if len(parts) > 1 else TOP


def module_name(rel: str) -> str:
    name = rel[:-3].replace(os.sep, ".")
    return "fairseq_stream" + ("" if name == "__init__" else "." + name.removesuffix(".__init__"))


def imports(path: str, rel: str) -> Iterator[Tuple[int, str]]:
    """(line, imported module) of every import in the file, relative ones resolved."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module_name(rel).split(".")
    if not rel.endswith("__init__.py"):
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            yield node.lineno, base


def back_imports() -> Iterator[Tuple[str, int, str]]:
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, PACKAGE)
                here = layer(module_name(rel))
                for line, target in imports(path, rel):
                    there = layer(target)
                    if there is not None and there > here:
                        yield rel.replace(os.sep, "/"), line, target


def test_no_import_points_up_a_layer_unless_named():
    found = {(rel, target): line for rel, line, target in back_imports()}
    new = [f"fairseq_stream/{rel}:{line} imports {target}" for (rel, target), line in found.items()
           if (rel, target) not in ALLOWED]
    assert not new, "imports that point up the layers (ops ← core ← strategies ← integration/ib/tools): " + "; ".join(new)
    assert set(ALLOWED) <= set(found), "an allowed back-import is gone: drop it from ALLOWED and the docs"


def test_the_architecture_doc_names_every_remaining_back_import():
    with open(os.path.join(REPO, "docs", "architecture.md"), encoding="utf-8") as f:
        doc = f.read()
    for rel, target in ALLOWED:
        shown = target.removeprefix("fairseq_stream.").replace(".", "/")
        assert f"`{rel}` → `{shown}" in doc, f"docs/architecture.md does not name {rel} → {shown}"


def test_the_scan_sees_an_upward_import(tmp_path):
    """The check itself: a relative and an absolute import from ops up to core are both found."""
    ops = tmp_path / "ops"
    ops.mkdir()
    (ops / "bad.py").write_text("def f():\n    from ..core import engine\n    import fairseq_stream.core.state\n")
    found = [target for _, target in imports(str(ops / "bad.py"), os.path.join("ops", "bad.py"))]
    assert found == ["fairseq_stream.core", "fairseq_stream.core.state"]
    assert all(layer(t) > layer("fairseq_stream.ops.bad") for t in found)


def test_the_old_import_paths_still_work():
    from fairseq_stream.core import engine as old_engine
    from fairseq_stream.core import linear_kernels as old_lk, quantize as old_q
    from fairseq_stream.integration import engine
    from fairseq_stream.ops import linear_kernels, quantize
    from fairseq_stream.strategies.beam_rules import AbsoluteThreshold, StepView
    from fairseq_stream.ops import pruning
    from fairseq_stream.core.processors import RowContext
    from fairseq_stream.ops.score_edits import RowContext as ops_row_context

    assert old_engine.build_generator is engine.build_generator
    assert old_lk is linear_kernels and old_q is quantize
    assert AbsoluteThreshold is pruning.AbsoluteThreshold and StepView is pruning.StepView
    assert RowContext is ops_row_context
