"""The benchmark harness: FIXED's batches apart from the streamed pool, oracle lengths, devices."""
import os
import subprocess
import sys

import pytest
import torch

from conftest import REPO
from fairseq_stream.tools.bench import RunSpec, batching, parse_run, run_benchmark
from fairseq_stream.errors import FairseqStreamError

GEN_KEYS = ["beam", "max_len_a", "max_len_b"]


def test_fixed_batches_and_the_streamed_pool_are_separate_settings():
    fixed, stream = RunSpec("FIXED", "beam"), RunSpec("VAR-STREAM", "var-stream")
    limits = dict(max_tokens=None, batch_size=64)
    assert batching(fixed, 500, pool_size=0, **limits) == {"max_tokens": None, "batch_size": 64}
    # the whole input is one pool, not cut to a multiple of 8
    assert batching(stream, 500, pool_size=0, **limits) == {"max_tokens": None, "batch_size": 500,
                                                            "required_batch_size_multiple": 1}
    assert batching(stream, 500, pool_size=100, **limits)["batch_size"] == 100
    assert batching(stream, 500, pool_size=None, **limits) == {"max_tokens": None, "batch_size": 64}


def test_length_from_is_a_row_option():
    run = parse_run("jacobi:beam=1,length_from=Greedy,label=PJ", GEN_KEYS)
    assert (run.label, run.length_from, run.gen, run.opts) == ("PJ", "Greedy", {"beam": 1}, {})


def test_oracle_lengths_keep_greedy_output(demo_session, demo_sources, demo_references):
    """PJ with greedy's lengths as maximum lengths (paper 004's ideal condition) returns greedy's output."""
    runs = [RunSpec("Greedy", "beam", gen={"beam": 1}),
            RunSpec("PJ", "jacobi", gen={"beam": 1}, opts={"stream_capacity": 1}, length_from="Greedy")]
    rows = run_benchmark(demo_session, demo_sources[:4], demo_references[:4], runs, repeats=1, batch_size=1,
                         progress=False, log=lambda m: None)
    assert rows[0]["bleu"] == rows[1]["bleu"] and rows[1]["stats"]["sentences"] == 4
    with pytest.raises(FairseqStreamError, match="must name an earlier row"):
        run_benchmark(demo_session, demo_sources[:2], demo_references[:2], runs[::-1], repeats=1, progress=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_device_cuda_without_gpu_is_one_line():
    proc = subprocess.run([sys.executable, "-m", "fairseq_stream.tools.bench", "--limit", "2", "--device", "cuda"], cwd=REPO,
                          capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == "fairseq-stream: error: --device cuda: torch sees no GPU (use --device cpu)"


def test_a_run_value_of_the_wrong_type_is_one_line_before_decoding(tmp_path):
    """Was a TypeError deep in fairseq once a row came to decode; now exit 2 right after the model loads."""
    proc = subprocess.run([sys.executable, "-m", "fairseq_stream.tools.bench", "--limit", "2", "--json", str(tmp_path / "r.json"),
                           "--run", "beam:beam=5", "--run", "var-stream:beam=abc"], cwd=REPO, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == \
        "fairseq-stream: error: --run 'var-stream:beam=abc': beam='abc' must be an integer"
    assert "repeat 1/" not in proc.stderr and not (tmp_path / "r.json").exists()  # nothing was decoded
