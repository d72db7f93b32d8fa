"""The docs hold the current record (issue 77, item 1): the README stays short and quotes only figures that
docs/results.md records; every command results.md gives names a script or module that exists and answers
``--help``; every relative link of the README and docs/*.md leads to a file and, for ``#anchors`` into
docs/*.md, to a heading (GitHub's slug rules). docs/history/ is the unedited record: its links are not checked.
No model is loaded; the ``--help`` cases run each script in a subprocess (a few seconds each)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Dict, List, Set, Tuple

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(REPO, "README.md")
RESULTS = os.path.join(REPO, "docs", "results.md")
DOCS = os.path.join(REPO, "docs")

README_MAX_LINES, README_MAX_LINE_CHARS, RESULTS_MAX_LINES = 250, 300, 400
TABLE_ROW_MAX_CHARS, TABLE_MAX_ROWS = 200, 8

# A ratio or a range of ratios ("0.46×", "0.66–0.78×"), and a BLEU-like decimal (two places, maybe signed).
RATIO = re.compile(r"\d+(?:\.\d+)?(?:–\d+(?:\.\d+)?)?×")
DECIMAL = re.compile(r"(?<![\d.])[−+]?\d+\.\d\d(?![\d×])")
# What a command in results.md can name: a script file, a module run with -m, a package file.
SCRIPT = re.compile(r"(?<![\w/.])((?:scripts|fairseq_stream)/[\w/.-]+\.(?:sh|py))\b")
MODULE = re.compile(r"python3? -m (fairseq_stream(?:\.\w+)+)")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _results_table(readme: str) -> List[str]:
    """The rows of the table under the README's "## Results" heading (header and rule excluded)."""
    section = readme.split("\n## Results", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return rows[2:]


def _commands(markdown: str) -> List[str]:
    """Every code span and indented code block of a Markdown text (a span may wrap over lines)."""
    spans = [m.group(1).replace("\n", " ") for m in re.finditer(r"`([^`]+)`", markdown)]
    blocks = [line.strip() for line in markdown.splitlines() if line.startswith("    ")]
    return spans + blocks


def _named_programs(markdown: str) -> Tuple[Set[str], Set[str]]:
    """The script files and the ``python -m`` modules that results.md's commands name."""
    scripts: Set[str] = set()
    modules: Set[str] = set()
    for command in _commands(markdown):
        scripts.update(m.group(1) for m in SCRIPT.finditer(command))
        modules.update(m.group(1) for m in MODULE.finditer(command))
    return scripts, modules


def _module_path(module: str) -> str:
    """The file a ``python -m`` module runs from: module.py, or a package's __main__.py/__init__.py."""
    base = os.path.join(REPO, *module.split("."))
    for candidate in (base + ".py", os.path.join(base, "__main__.py"), os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return ""


def test_the_readme_and_the_record_stay_short():
    lines = _read(README).splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    long_lines = [(n, len(line)) for n, line in enumerate(lines, 1) if len(line) > README_MAX_LINE_CHARS]
    assert not long_lines, f"README.md lines over {README_MAX_LINE_CHARS} characters (line, length): {long_lines}"
    rows = _results_table(_read(README))
    assert 0 < len(rows) <= TABLE_MAX_ROWS, f"the README's results table has {len(rows)} rows"
    long_rows = [row[:60] for row in rows if len(row) > TABLE_ROW_MAX_CHARS]
    assert not long_rows, f"README results rows over {TABLE_ROW_MAX_CHARS} characters: {long_rows}"
    results = _read(RESULTS).splitlines()
    assert len(results) <= RESULTS_MAX_LINES, f"docs/results.md has {len(results)} lines (at most {RESULTS_MAX_LINES})"


def test_every_figure_of_the_readme_results_table_is_in_results_md():
    results = _read(RESULTS)
    missing: List[str] = []
    for row in _results_table(_read(README)):
        cells = row.split("|")[1:-1]
        text = " ".join(cells[:2])  # what and result: the machine and the link carry no figures
        for ratio in RATIO.findall(text):
            if ratio not in results:
                missing.append(ratio)
        for decimal in DECIMAL.findall(text):
            if not re.search(r"(?<![\d.])" + re.escape(decimal) + r"(?!\d)", results):
                missing.append(decimal)
    assert not missing, f"README figures with no row in docs/results.md: {missing}"


def test_every_command_in_results_md_names_a_file_that_exists():
    scripts, modules = _named_programs(_read(RESULTS))
    assert scripts and modules, "docs/results.md names no script or module: the extraction is broken"
    absent = sorted(s for s in scripts if not os.path.isfile(os.path.join(REPO, s)))
    absent += sorted(m for m in modules if not _module_path(m))
    assert not absent, f"docs/results.md names scripts or modules that do not exist: {absent}"


def _help_cases() -> List[str]:
    scripts, modules = _named_programs(_read(RESULTS))
    return sorted(scripts) + sorted("-m " + m for m in modules)


def _answers_help_before_working(path: str) -> bool:
    """Whether a script handles --help itself, so that running it with --help cannot install or decode."""
    source = _read(path)
    if path.endswith(".sh"):
        return bool(re.search(r"--help\s*\)|\|\s*--help\b|\"--help\"", source))
    return "argparse" in source or "--help" in source


@pytest.mark.parametrize("program", _help_cases())
def test_every_program_results_md_names_runs_help(program: str):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if program.startswith("-m "):
        module = program[3:]
        assert _module_path(module), f"no module {module}"
        argv = [sys.executable, "-m", module, "--help"]
    else:
        path = os.path.join(REPO, program)
        assert os.path.isfile(path), f"{program} does not exist"
        # A script that ignores --help would run for real (an install, a benchmark): not run, a failure.
        assert _answers_help_before_working(path), f"{program} does not handle --help"
        argv = (["bash"] if program.endswith(".sh") else [sys.executable]) + [path, "--help"]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(argv[-3:])}: exit {done.returncode}\n{done.stderr[-2000:]}"
    assert done.stdout.strip(), f"{program} --help printed nothing"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link's text stays
    text = text.lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)  # \w keeps letters of any script (δ), digits and "_"
    return text.replace(" ", "-")


def _anchors(path: str) -> Set[str]:
    """The anchors of a Markdown file's headings; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: Dict[str, int] = {}
    anchors: Set[str] = set()
    in_fence = False
    for line in _read(path).splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = _slug(match.group(1))
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _doc_files() -> List[str]:
    names = sorted(name for name in os.listdir(DOCS) if name.endswith(".md"))
    return [README] + [os.path.join(DOCS, name) for name in names]


def _relative_links(path: str) -> List[str]:
    """The relative link targets of a Markdown file (outside code), web and mail links left out."""
    text = re.sub(r"```.*?```", "", _read(path), flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    targets = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("doc", [os.path.relpath(p, REPO) for p in _doc_files()])
def test_every_relative_link_leads_to_a_file_and_heading(doc: str):
    source = os.path.join(REPO, doc)
    broken: List[str] = []
    for target in _relative_links(source):
        file_part, _, anchor = target.partition("#")
        dest = source if not file_part else os.path.normpath(os.path.join(os.path.dirname(source), file_part))
        if not os.path.exists(dest):
            broken.append(f"{target} (no such file)")
            continue
        if anchor and dest.endswith(".md") and anchor not in _anchors(dest):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{doc}: broken links: {broken}"
