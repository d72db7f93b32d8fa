"""The hooks into fairseq, torch and the interpreter: process-wide ones only under fairseq's CLIs."""
import os
import subprocess
import sys

import pytest

from conftest import REPO
from fairseq_stream.integration.cli import fairseq_cli_name


@pytest.mark.parametrize("argv0,main_spec,name", [
    ("/venv/bin/fairseq-generate", "", "generate"),
    ("fairseq-interactive", "", "interactive"),
    ("/venv/bin/fairseq-train", "", "train"),
    ("fairseq-validate", "", "validate"),
    ("fairseq-eval-lm", "", "eval_lm"),
    ("/site-packages/fairseq_cli/generate.py", "fairseq_cli.generate", "generate"),  # python -m fairseq_cli.generate
    ("/venv/bin/fairseq-stream-bench", "", None),  # ours: its main installs what it needs
    ("-c", "", None),
    ("/venv/bin/pytest", "", None),
    ("script.py", "fairseq_cli.not_a_tool", None),
    ("fairseq-generate-x", "", None),
])
def test_fairseq_cli_detection(argv0, main_spec, name):
    assert fairseq_cli_name(argv0, main_spec) == name


def _probe(*argv0s: str) -> list:
    """Import the package in fresh processes whose argv[0] are ``argv0s``; report their hooks.

    fairseq and torch are imported once, then each child imports the package after setting argv[0].
    """
    code = (
        "import atexit, os, sys\n"
        "import fairseq, fairseq_cli.interactive, torch\n"
        f"for argv0 in {list(argv0s)!r}:\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        sys.argv[0] = argv0\n"
        "        before = atexit._ncallbacks()\n"
        "        import fairseq_stream\n"
        "        print(sys.excepthook is sys.__excepthook__, atexit._ncallbacks() == before,\n"
        "              hasattr(fairseq_cli.interactive.main, '_fairseq_stream'), flush=True)\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
    )
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-len(argv0s):]


def test_process_hooks_only_under_fairseq_clis():
    library, interactive = _probe("-c", "/venv/bin/fairseq-interactive")
    # imported as a library: sys.excepthook untouched, no atexit handler, fairseq-interactive's main not wrapped
    assert library == "True True False"
    # under fairseq-interactive: the one-line error hook, and exit status 1 after skipped lines
    assert interactive == "False True True"
