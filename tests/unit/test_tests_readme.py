"""tests/README.md against the tree: its module table lists every module of the package (and only real ones),
every test file it names exists, and every test file is named there at least once."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Set

TESTS = Path(__file__).resolve().parents[1]
PACKAGE = TESTS.parent / "fairseq_stream"
README = TESTS / "README.md"
MODULES_HEADING = "## Modules"
TEST_FILE = re.compile(r"`((?:unit|integration|equivalence|conformance)/test_\w+\.py)`")


def module_rows() -> List[str]:
    """The first cell of each row of the module table (``| `engine/scheduler.py` | ... |``)."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index(MODULES_HEADING)
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        m = re.match(r"\| `([^`]+)` \|", line)
        if m:
            rows.append(m.group(1))
    return rows


def package_modules() -> Set[str]:
    """Every ``.py`` file of the package but the packages' ``__init__.py``, and every C++ source of ``ops/csrc``."""
    found = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
             if p.name != "__init__.py" and "__pycache__" not in p.parts}
    return found | {p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "ops" / "csrc").glob("*.cpp")}


def test_every_module_has_a_row_and_every_row_is_a_module() -> None:
    rows = module_rows()
    missing = sorted(package_modules() - set(rows))
    assert not missing, f"tests/README.md's module table lacks {missing}"
    stale = sorted(r for r in rows if not (PACKAGE / r).is_file())
    assert not stale, f"tests/README.md lists modules that do not exist: {stale}"
    twice = sorted({r for r in rows if rows.count(r) > 1})
    assert not twice, f"tests/README.md lists these modules twice: {twice}"


def test_every_module_row_names_a_test_file() -> None:
    text = README.read_text(encoding="utf-8")
    bare = [r for r in module_rows() if not TEST_FILE.search(next(line for line in text.splitlines()
                                                                  if line.startswith(f"| `{r}` |")))]
    assert not bare, f"tests/README.md names no test file for {bare}"


def test_every_test_file_named_exists_and_every_test_file_is_named() -> None:
    named = set(TEST_FILE.findall(README.read_text(encoding="utf-8")))
    assert named, "tests/README.md names no test file"
    absent = sorted(n for n in named if not (TESTS / n).is_file())
    assert not absent, f"tests/README.md names test files that do not exist: {absent}"
    present = {p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts}
    unnamed = sorted(present - named)
    assert not unnamed, f"tests/README.md does not name {unnamed}: add each to its module's or promise's row"
