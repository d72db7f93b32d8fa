"""docs/architecture.md and docs/papers.md against the code: the module map lists every module and only
modules that exist, the glossary defines each private word once, the static step's section stays short,
and every paper the code cites has its entry in papers.md."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Set

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "fairseq_stream"
ARCHITECTURE = REPO / "docs" / "architecture.md"
PAPERS = REPO / "docs" / "papers.md"

MAP_HEADING = "## The module map"
GLOSSARY_HEADING = "## Glossary"
STATIC_HEADING = "### The static step and CUDA graphs"
STATIC_MAX_LINES = 40
#: the private words a newcomer meets first (issue 77): each has one entry, with one meaning
GLOSSARY_WORDS = ("region", "bucket", "tail", "packet", "arena", "slab", "bucket state", "rung", "inert",
                  "settle", "chain", "lease", "pin")
#: a layer's ``__init__.py`` only says what the layer holds; it may be listed, and need not be
SKIPPED = ("__init__.py",)


def section(text: str, heading: str) -> List[str]:
    """The lines under the heading that starts with ``heading``, up to the next heading of its level or above."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(heading)]
    assert len(starts) == 1, f"architecture.md needs one heading starting {heading!r}, found {len(starts)}"
    level = len(heading) - len(heading.lstrip("#"))
    out = []
    for line in lines[starts[0] + 1:]:
        hashes = len(line) - len(line.lstrip("#"))
        if 0 < hashes <= level and line[hashes:hashes + 1] == " ":
            break
        out.append(line)
    return out


def mapped_paths(lines: List[str]) -> List[str]:
    """The module map's entries: the first backticked path of each bullet (``- `model/row_arena.py` — ...``)."""
    return [m.group(1) for m in (re.match(r"- `([^`]+)`", line) for line in lines) if m]


def package_modules() -> Set[str]:
    """Every ``.py`` module of the package and every C++ source of ``ops/csrc``, relative to ``fairseq_stream/``."""
    found = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
             if p.name not in SKIPPED and "__pycache__" not in p.parts}
    return found | {p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "ops" / "csrc").glob("*.cpp")}


def test_module_map_lists_every_module_and_only_real_ones() -> None:
    listed = mapped_paths(section(ARCHITECTURE.read_text(encoding="utf-8"), MAP_HEADING))
    assert listed, "the module map lists no module"
    problems = {"lacks": sorted(package_modules() - set(listed)),
                "lists paths that do not exist": sorted(p for p in listed if not (PACKAGE / p).exists()),
                "lists more than once": sorted({p for p in listed if listed.count(p) > 1})}
    assert not any(problems.values()), "docs/architecture.md's module map " + "; ".join(
        f"{what}: {paths}" for what, paths in problems.items() if paths)


def test_glossary_defines_each_word_once() -> None:
    lines = section(ARCHITECTURE.read_text(encoding="utf-8"), GLOSSARY_HEADING)
    entries = [m.group(1).lower() for m in (re.match(r"- \*\*([^*]+)\*\*", line) for line in lines) if m]
    for word in GLOSSARY_WORDS:
        assert entries.count(word) == 1, f"the glossary must define {word!r} once, as '- **{word}**' (found {entries.count(word)})"
    twice = sorted({e for e in entries if entries.count(e) > 1})
    assert not twice, f"glossary entries defined twice: {twice}"


def test_static_section_is_short() -> None:
    lines = section(ARCHITECTURE.read_text(encoding="utf-8"), STATIC_HEADING)
    while lines and not lines[-1].strip():
        lines.pop()
    assert 0 < len(lines) <= STATIC_MAX_LINES, f"the static step's section has {len(lines)} lines (at most {STATIC_MAX_LINES})"


def cited_papers() -> Set[str]:
    """What the code cites: keys (``Yang2020``), ``Name et al. YEAR`` and ``(Name YEAR)``, in its text and comments."""
    cited: Set[str] = set()
    for path in list(PACKAGE.rglob("*.py")) + list((PACKAGE / "ops" / "csrc").glob("*.cpp")):
        text = path.read_text(encoding="utf-8")
        cited.update(re.findall(r"\b[A-Z][a-z]+(?:19|20)\d\d\b", text))
        cited.update(f"{name} et al. {year}" for name, year in re.findall(r"\b([A-Z][a-z]+) et al\.,? \(?((?:19|20)\d\d)", text))
        cited.update(f"{name} {year}" for name, year in re.findall(r"\(([A-Z][a-z]+) ((?:19|20)\d\d)[,:;)]", text))
    return cited


def test_papers_lists_every_paper_the_code_cites() -> None:
    papers = PAPERS.read_text(encoding="utf-8")
    cited = cited_papers()
    assert "Yang2020" in cited and "Leviathan et al. 2023" in cited  # the patterns still see the code's citations
    missing = sorted(c for c in cited if c not in papers)
    assert not missing, f"docs/papers.md lacks these papers the code cites: {missing}"
