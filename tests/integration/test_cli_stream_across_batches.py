"""fairseq-generate / fairseq-interactive stream across fairseq's batches: the same output lines
in the same order as batch by batch (``--stream-per-batch``), in fewer decoder steps.

The CLIs decode in float32, where a product's last bits depend on the batch it is computed
in: scores are compared to 1e-4 (every token, id and line exactly); the float64 equality of
the two is ``tests/equivalence/test_stream_across_batches.py``."""
import json
import os
import re

import pytest

from conftest import DEMO, run_cli

CKPT = os.path.join(DEMO, "checkpoint.pt")
SENTENCE_LINE = re.compile(r"^[STHDP]-\d+\t")
NUMBER = re.compile(r"-?\d+\.\d+|-inf")


def assert_same_lines(a, b):
    """Line for line equal, numbers (scores) to one unit of their last printed place: fairseq
    prints 4 decimals, so float32 scores 1e-6 apart (a different batch shape, another kernel's
    summation order) can print 1e-4 apart."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert NUMBER.sub("#", x) == NUMBER.sub("#", y), (x, y)
        assert [float(v) for v in NUMBER.findall(x)] == pytest.approx([float(v) for v in NUMBER.findall(y)], abs=1.5e-4)


def generate(demo_bin, stats_path, subset, size, *extra):
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--gen-subset", subset, "--batch-size", str(size), "--search", "var-stream", "--beam", "4",
                    "--stream-capacity", str(size), "--stream-stats", str(stats_path), *extra])
    assert proc.returncode == 0, proc.stderr[-2000:]  # (each sentence's own pruning: the same searches per batch and across)
    lines = [line for line in proc.stdout.splitlines() if SENTENCE_LINE.match(line)]
    bleu = [line for line in proc.stdout.splitlines() if "BLEU" in line]
    return lines + bleu, json.loads(stats_path.read_text())


@pytest.mark.slow  # two fairseq-generate processes end to end (the fast tier's CLI runs stream across batches too)
def test_generate_prints_the_same_lines_across_batches(demo_bin, tmp_path, subset="test", n=100, size=16):
    per_batch, per_batch_stats = generate(demo_bin, tmp_path / "per_batch.json", subset, size, "--stream-per-batch")
    across, stats = generate(demo_bin, tmp_path / "across.json", subset, size)
    assert len([line for line in across if line.startswith("H-")]) == n
    assert_same_lines(across, per_batch)  # same lines, same order
    assert stats["expansions"] == per_batch_stats["expansions"]
    # Batches of the stream's capacity: each drains its stream on its own, one stream does not.
    assert stats["timesteps"] < per_batch_stats["timesteps"], (stats["timesteps"], per_batch_stats["timesteps"])
    assert stats["encoder_slots"] <= size and stats["peak_in_flight"] <= size


@pytest.mark.slow  # four fairseq-interactive processes end to end
@pytest.mark.parametrize("buffer_size", [1, 7])
def test_interactive_prints_the_same_lines_across_batches_and_buffers(tmp_path, buffer_size):
    """Sentences of later --buffer-size chunks join the stream: the same lines, fewer steps."""
    lines = ["Y dijo Dios: Sea la luz.", "", "En el principio crió Dios los cielos y la tierra.",
             "Y vio Dios que la luz era buena."] * 3
    source = tmp_path / "input.es"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outputs, stats = [], []
    for extra in ([], ["--stream-per-batch"]):
        stats_path = tmp_path / f"stats{len(extra)}.json"
        proc = run_cli(["fairseq-interactive", DEMO, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                        "--source-lang", "es", "--target-lang", "en", "--tokenizer", "moses", "--bpe", "subword_nmt",
                        "--bpe-codes", os.path.join(DEMO, "bpe.codes"), "--search", "var-stream", "--beam", "4",
                        "--buffer-size", str(buffer_size), "--batch-size", str(min(2, buffer_size)), "--stream-capacity", "3",
                        "--input", str(source), "--stream-stats", str(stats_path), *extra])
        assert proc.returncode == 0, proc.stderr[-2000:]
        outputs.append([line for line in proc.stdout.splitlines() if re.match(r"^[SHDP]-\d+\t", line)])
        stats.append(json.loads(stats_path.read_text()))
    assert len([line for line in outputs[0] if line.startswith("H-")]) == len(lines)
    assert_same_lines(outputs[0], outputs[1])
    assert stats[0]["expansions"] == stats[1]["expansions"]
    assert stats[0]["extra"]["chunks_read_ahead"] > 0
    assert stats[0]["timesteps"] < stats[1]["timesteps"], (stats[0]["timesteps"], stats[1]["timesteps"])
