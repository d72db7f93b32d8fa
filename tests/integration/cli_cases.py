"""Run many command-line cases in one process: import fairseq once, fork once per case.

A fairseq-generate start costs ~5 s of CPU, mostly imports; the bad-input catalogue has
dozens of cases. Each case runs in a forked child that behaves as the interpreter's top level
does for a console script: argv set, stdin/stdout/stderr on files, the real ``cli_main``
called, an uncaught exception handed to ``sys.excepthook`` (the hook the package installs
when fairseq imports ``--user-dir fairseq_stream``) and exit status 1, atexit handlers run.

    python cli_cases.py < cases.json > results.json
    cases:   [{"argv": ["fairseq-generate", ...], "stdin": "...", "env": {...}}]  (or "module": "pkg.mod")
    results: [{"rc": 0, "stdout": "...", "stderr": "..."}]
"""
from __future__ import annotations

import atexit
import json
import os
import runpy
import shutil
import sys
import tempfile
import warnings
from typing import Any, Dict, List, Optional, Tuple

warnings.filterwarnings("ignore")
import fairseq_cli.generate  # noqa: E402  (both before forking: the imports are the cost)
import fairseq_cli.interactive  # noqa: E402

ENTRY = {"fairseq-generate": fairseq_cli.generate.cli_main, "fairseq-interactive": fairseq_cli.interactive.cli_main}


def _child(case: Dict[str, Any], out: str, err: str, inp: str) -> None:
    atexit._clear()  # the parent's handlers are not the case's
    for fd, path, mode in ((0, inp, os.O_RDONLY), (1, out, os.O_WRONLY), (2, err, os.O_WRONLY)):
        os.dup2(os.open(path, mode), fd)
    sys.argv = list(case["argv"])
    os.environ.update(case.get("env") or {})
    code = 0
    try:
        if case.get("module"):
            sys.path.insert(0, os.getcwd())  # as python -m does
            runpy.run_module(case["module"], run_name="__main__", alter_sys=True)
        else:
            ENTRY[case["argv"][0]]()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # what the interpreter does with an uncaught exception
        sys.excepthook(*sys.exc_info())
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _start(case: Dict[str, Any], work: str, n: int) -> Tuple[int, List[str]]:
    paths = [os.path.join(work, f"{n}.{s}") for s in ("out", "err", "in")]
    for path in paths:
        open(path, "w").close()
    with open(paths[2], "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(case.get("stdin") or "")
    pid = os.fork()
    if pid == 0:
        _child(case, *paths)
    return pid, paths


def _result(status: int, paths: List[str]) -> Dict[str, Any]:
    result = {"rc": os.waitstatus_to_exitcode(status)}
    for key, path in zip(("stdout", "stderr"), paths):
        with open(path, encoding="utf-8", errors="replace") as f:
            result[key] = f.read()
    return result


def run_cases(cases: List[Dict[str, Any]], work: str, jobs: int) -> List[Dict[str, Any]]:
    """Every case in its own forked child, ``jobs`` at a time (the cases share no files: each
    writes where its arguments say, and its output goes to files of its own)."""
    results: List[Optional[Dict[str, Any]]] = [None] * len(cases)
    running: Dict[int, Tuple[int, List[str]]] = {}  # pid -> (case number, its files)
    todo = list(enumerate(cases))
    while todo or running:
        while todo and len(running) < jobs:
            n, case = todo.pop(0)
            pid, paths = _start(case, work, n)
            running[pid] = (n, paths)
        pid, status = os.wait()
        n, paths = running.pop(pid)
        results[n] = _result(status, paths)
    return results  # type: ignore[return-value]


def main() -> None:
    cases = json.load(sys.stdin)
    work = tempfile.mkdtemp()
    try:
        # One child per core: each runs with one torch thread (OMP_NUM_THREADS=1 from the test).
        results = run_cases(cases, work, jobs=max(1, len(os.sched_getaffinity(0))))
    finally:
        shutil.rmtree(work)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
