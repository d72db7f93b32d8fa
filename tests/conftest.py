"""Shared fixtures. The demo model (shipped, trained on the Bible corpus) serves every test that
needs a trained model; tiny models for the training paths are trained once per session."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import List, Tuple

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(REPO, "user_dir_examples", "demo")
sys.path.insert(0, REPO)  # test the working tree, not an installed copy
# One torch thread in the tests' process (before torch is imported), as run_cli gives each
# subprocess: the test models gain nothing from more, and where another process keeps a core busy
# an OpenMP thread spins on the lock (a quick-tier Jacobi test took 80 s instead of 4 on a loaded
# 2-core machine). OMP_NUM_THREADS of the caller's wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")

logging.getLogger("fairseq").setLevel(logging.WARNING)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: "quick" is added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` are skipped where torch sees no CUDA device; the quick tier is marked."""
    mark_quick_tier(items)
    config.stash[TIERS] = [(item.nodeid, item.get_closest_marker("slow") is not None,
                            item.get_closest_marker("quick") is not None) for item in items]
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; torch sees none")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


# Every collected test as (node id, slow, quick), kept before -m deselects any: tests/unit/test_tiers.py
# checks from it that every fast-tier test function has a case in the quick tier.
TIERS = pytest.StashKey[List[Tuple[str, bool, bool]]]()


def mark_quick_tier(items: list[pytest.Item]) -> None:
    """Mark the quick tier (``bash scripts/test.sh``: ``-m quick``): every test of the fast tier, but of
    a parametrized test only its first case that is not ``slow``, since the others repeat its
    contract with other settings. ``@pytest.mark.quick_every_case`` keeps every case (each is a
    contract of its own, or all run in one shared fixture anyway); ``slow`` tests are never quick.
    """
    quick: set = set()
    for item in items:
        if item.get_closest_marker("slow"):
            continue
        function = item.nodeid.split("[", 1)[0]
        if function not in quick or item.get_closest_marker("quick_every_case"):
            item.add_marker(pytest.mark.quick)
            quick.add(function)


def read_lines(path: str, limit: int | None = None) -> list[str]:
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


def _load_demo(**kwargs):
    from fairseq_stream.tools.session import TranslationSession

    return TranslationSession.load(
        DEMO, os.path.join(DEMO, "checkpoint.pt"), bpe_codes=os.path.join(DEMO, "bpe.codes"),
        extra_args=["--source-lang", "es", "--target-lang", "en"], **kwargs,
    )


@pytest.fixture(scope="session")
def demo_session():
    """The shipped demo model, loaded once (float32)."""
    return _load_demo()


@pytest.fixture(scope="session")
def demo_session64():
    """The shipped demo model in float64, for the exactness tests; loaded once."""
    import torch

    return _load_demo(dtype=torch.float64)


@pytest.fixture(scope="session")
def demo_sources():
    return read_lines(os.path.join(DEMO, "test.es"))


@pytest.fixture(scope="session")
def demo_references():
    return read_lines(os.path.join(DEMO, "test.en"))


def run_cli(args: list[str], cwd: str = REPO, stdin: str | None = None, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """Run a fairseq console script of the interpreter running the tests."""
    exe = os.path.join(os.path.dirname(sys.executable), args[0])
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    # One torch thread unless a test says otherwise: outputs compared across two runs must not
    # depend on how many idle cores the load check found at each run's start (float sums differ).
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(env_extra or {})
    return subprocess.run([exe, *args[1:]], cwd=cwd, input=stdin, capture_output=True, text=True, env=env)


def _write(path: str, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def binarize(dest: str, splits: dict[str, int], offset: int = 0) -> str:
    """Binarize the first N demo test pairs per split (BPE with the demo codes, demo dictionaries)."""
    from fairseq_stream.integration.text import BpeCodes, tokenize

    bpe = BpeCodes(os.path.join(DEMO, "bpe.codes"))
    raw = os.path.join(dest, "raw")
    os.makedirs(raw, exist_ok=True)
    args = ["fairseq-preprocess", "--source-lang", "es", "--target-lang", "en", "--destdir", dest,
            "--srcdict", os.path.join(DEMO, "dict.es.txt"), "--tgtdict", os.path.join(DEMO, "dict.en.txt"),
            "--workers", "1"]
    for split, n in splits.items():
        for lang in ("es", "en"):
            lines = read_lines(os.path.join(DEMO, f"test.{lang}"))[offset: offset + n]
            _write(os.path.join(raw, f"{split}.{lang}"), [bpe.apply(tokenize(s, lang)) for s in lines])
        args += [f"--{split}pref", os.path.join(raw, split)]
    proc = run_cli(args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dest


@pytest.fixture(scope="session")
def demo_bin(tmp_path_factory):
    """Binarized demo data: ``test`` = 100 sentences, ``valid`` = 13 (neither a multiple of 8)."""
    return binarize(str(tmp_path_factory.mktemp("demo_bin")), {"test": 100, "valid": 13})


TINY_ARCHS = {
    "transformer": ["--arch", "transformer", "--share-all-embeddings", "--encoder-layers", "1", "--decoder-layers", "1",
                    "--encoder-embed-dim", "64", "--decoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128",
                    "--decoder-ffn-embed-dim", "128", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2"],
    "ib": ["--user-dir", "fairseq_stream", "--task", "translation_ib", "--arch", "transformer_ib", "--share-all-embeddings",
           "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
           "--encoder-ffn-embed-dim", "128", "--decoder-ffn-embed-dim", "128", "--encoder-attention-heads", "2",
           "--decoder-attention-heads", "2"],
    "lstm": ["--arch", "lstm", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-hidden-size", "32",
             "--decoder-hidden-size", "32", "--decoder-out-embed-dim", "32", "--encoder-layers", "1", "--decoder-layers", "1"],
}


def tiny_train_args(data: str, save_dir: str, arch: str, updates: int = 10, extra: list[str] | None = None) -> list[str]:
    """fairseq-train's arguments (after the program) for a tiny model: :func:`train_tiny`'s."""
    return [data, "--cpu", *TINY_ARCHS[arch], "--optimizer", "adam", "--lr", "0.005", "--max-tokens", "2000",
            "--max-update", str(updates), "--save-dir", save_dir, "--no-epoch-checkpoints", "--no-last-checkpoints",
            "--seed", "1", "--log-format", "none", "--num-workers", "0", *(extra or [])]


def train_tiny(data: str, save_dir: str, arch: str, updates: int = 10, extra: list[str] | None = None) -> str:
    """Train a tiny model with stock ``fairseq-train`` (seconds); return its checkpoint path.

    One torch thread: the models are too small to gain from more, and on a shared CPU idle
    threads spin (an LSTM's 30 updates took 124 s of CPU with two threads, 16 s with one for 10).
    """
    proc = run_cli(["fairseq-train", *tiny_train_args(data, save_dir, arch, updates, extra)],
                   env_extra={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return os.path.join(save_dir, "checkpoint_best.pt")


@pytest.fixture(scope="session")
def tiny_train_bin(tmp_path_factory):
    """300 demo pairs as a training split (validation on 13)."""
    return binarize(str(tmp_path_factory.mktemp("tiny_bin")), {"train": 300, "valid": 13}, offset=100)


@pytest.fixture(scope="session")
def tiny_transformer_ckpt(tiny_train_bin, tmp_path_factory):
    """A tiny Transformer, 10 updates (with validation, so ``extra_state`` holds numpy scalars)."""
    return train_tiny(tiny_train_bin, str(tmp_path_factory.mktemp("tiny_tf")), "transformer")


@pytest.fixture(scope="session")
def tiny_ib_ckpt(tiny_train_bin, tmp_path_factory):
    """A tiny IBDecoder (h = 2, c = 1), 30 updates: enough for ib-beam to take real steps."""
    return train_tiny(tiny_train_bin, str(tmp_path_factory.mktemp("tiny_ib")), "ib", updates=30)


@pytest.fixture(scope="session")
def tiny_lstm_ckpt(tiny_train_bin, tmp_path_factory):
    """A tiny LSTM, 10 updates: a non-Transformer model for the stream == batch check."""
    return train_tiny(tiny_train_bin, str(tmp_path_factory.mktemp("tiny_lstm")), "lstm")
