"""Shared fixtures. The demo model (shipped, trained on the Bible corpus) serves every test that
needs a trained model; tiny models for the training paths are trained once per session."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(REPO, "user_dir_examples", "demo")
sys.path.insert(0, REPO)  # test the working tree, not an installed copy

warnings.filterwarnings("ignore", category=UserWarning)
logging.getLogger("fairseq").setLevel(logging.WARNING)


def read_lines(path: str, limit: int | None = None) -> list[str]:
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


@pytest.fixture(scope="session")
def demo_session():
    """The shipped demo model, loaded once (float32)."""
    from fairseq_stream.session import TranslationSession

    return TranslationSession.load(
        DEMO, os.path.join(DEMO, "checkpoint.pt"), bpe_codes=os.path.join(DEMO, "bpe.codes"),
        extra_args=["--source-lang", "es", "--target-lang", "en"],
    )


@pytest.fixture(scope="session")
def demo_sources():
    return read_lines(os.path.join(DEMO, "test.es"))


@pytest.fixture(scope="session")
def demo_references():
    return read_lines(os.path.join(DEMO, "test.en"))


def run_cli(args: list[str], cwd: str = REPO, stdin: str | None = None, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """Run a fairseq console script of the interpreter running the tests."""
    exe = os.path.join(os.path.dirname(sys.executable), args[0])
    env = dict(os.environ, PYTHONWARNINGS="ignore", **(env_extra or {}))
    return subprocess.run([exe, *args[1:]], cwd=cwd, input=stdin, capture_output=True, text=True, env=env)
