"""--quantize reaches fairseq-generate and fairseq-interactive; its refusals are one line."""
import os

import pytest

from conftest import DEMO, binarize, run_cli

CKPT = os.path.join(DEMO, "checkpoint.pt")
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def six_bin(tmp_path_factory):
    return binarize(str(tmp_path_factory.mktemp("six_bin")), {"test": 6})


def _generate(data, *flags):
    return run_cli(["fairseq-generate", data, "--user-dir", "fairseq_stream", "--task", "translation_stream", "--cpu",
                    "--beam", "5", *flags], env_extra=ONE_THREAD)


@pytest.mark.slow  # loads and quantises the ensemble in a fairseq-generate subprocess
def test_generate_with_an_int8_ensemble(six_bin):
    proc = _generate(six_bin, "--path", f"{CKPT}:{CKPT}", "--search", "var-stream", "--quantize", "int8")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sum(line.startswith("H-") for line in proc.stdout.splitlines()) == 6


@pytest.mark.parametrize("flags,message", [
    (["--fp16"], "--quantize int8 needs float32 models (got torch.float16); drop --fp16/--bf16"),
    (["--quantize", "int4"], "--quantize must be one of none, int8, got 'int4'"),
])
@pytest.mark.slow  # fairseq-generate subprocesses; test_quantize.py checks the refusals in-process
def test_refusals_are_one_line(six_bin, flags, message):
    args = ["--quantize", "int8", *flags] if flags[0] == "--fp16" else flags
    proc = _generate(six_bin, "--path", CKPT, "--search", "beam", *args)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"fairseq-stream: error: {message}"


@pytest.mark.slow  # a fairseq-interactive subprocess
def test_interactive_with_int8():
    with open(os.path.join(DEMO, "test.es"), encoding="utf-8") as f:
        lines = [next(f) for _ in range(3)]
    proc = run_cli(["fairseq-interactive", DEMO, "--user-dir", "fairseq_stream", "--task", "translation_stream",
                    "--path", CKPT, "--source-lang", "es", "--target-lang", "en", "--tokenizer", "moses", "--bpe",
                    "subword_nmt", "--bpe-codes", os.path.join(DEMO, "bpe.codes"), "--cpu", "--search", "fixed-ours",
                    "--beam", "5", "--quantize", "int8"], stdin="".join(lines), env_extra=ONE_THREAD)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sum(line.startswith("D-") for line in proc.stdout.splitlines()) == 3
