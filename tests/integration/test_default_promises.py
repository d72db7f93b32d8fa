"""The promises the docs make, checked on the defaults a CPU user gets (issue 80, item 4).

Through ``fairseq-generate`` with no ``--step-mode`` (the native step on a CPU) and ``var-stream``'s
default pruning (a rule each sentence decides alone, issue 81). What docs/usage.md promises there: one
command on one input gives one output, run after run; ``var-stream`` returns ``var-batch``'s hypotheses
whatever the capacity and batch size (tests/equivalence/test_default_rule_promises.py checks the rest:
var-fifo, batch 1, float32 and int8, on a model where the default prunes).
The one-host-read-a-step promise on the defaults is in tests/conformance/test_host_reads.py, bad
input on the defaults in test_bad_input.py (which passes no ``--step-mode``).
"""
import os
import re

import pytest

from conftest import DEMO, binarize, run_cli

CKPT = os.path.join(DEMO, "checkpoint.pt")
N = 40


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return binarize(str(tmp_path_factory.mktemp("promises")), {"test": N})


def _generate(data: str, *extra: str) -> tuple:
    proc = run_cli(["fairseq-generate", data, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--gen-subset", "test", "--max-len-b", "20", "--beam", "5", *extra])
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = sorted(l for l in proc.stdout.splitlines() if l.startswith(("H-", "P-")))
    assert len([l for l in lines if l.startswith("H-")]) == N  # nothing dropped
    return lines, proc.stderr


def test_the_default_gives_one_output_per_command_on_the_native_step(data):
    first, stderr = _generate(data, "--search", "var-stream")
    assert re.search(r"step mode native: \d+ native, 0 eager", stderr), stderr[-1500:]  # the CPU default
    assert "--prune-auto" not in stderr and "a pruned sentence's rows a step" in stderr  # each sentence's own pruning
    again, _ = _generate(data, "--search", "var-stream")
    assert again == first


@pytest.mark.slow  # two decodes; the float32/int8 suite checks it through the Python session in the fast tier
def test_by_default_var_stream_equals_var_batch_on_the_native_step(data):
    batch, _ = _generate(data, "--search", "var-batch", "--batch-size", "16")
    stream, stderr = _generate(data, "--search", "var-stream", "--stream-capacity", "7")
    assert "step mode native" in stderr
    assert stream == batch
