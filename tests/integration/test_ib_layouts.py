"""Vanilla SA (``--ib-h 1 --ib-c 2|4``) and the middle-to-side order (Zhang2020, Table 2 rows 4, 6
and 8): trained by stock ``fairseq-train`` (a 64-dim, 1-layer model, 30 updates), decoded by
``fairseq-generate --search ib-beam``, and each greedy hypothesis checked against one
teacher-forced forward pass of the same model: under M(h, c) the words of a step see only
earlier steps, so greedy decoding's words are the forward pass's argmax at every slot."""
import os
import re

import pytest
import torch
from fairseq import checkpoint_utils

from conftest import run_cli, train_tiny
from fairseq_stream.search import ib_order

LAYOUTS = {"sa2": ["--ib-h", "1", "--ib-c", "2"], "sa4": ["--ib-h", "1", "--ib-c", "4"],
           "m2s": ["--ib-h", "2", "--ib-c", "1", "--ib-order", "middle-to-side"]}
MIN_LEN = 6  # longer outputs than a model of 30 updates would stop at: more words compared


def sentences(stdout: str, prefix: str) -> dict:
    out = {}
    for line in stdout.splitlines():
        m = re.match(rf"^{prefix}-(\d+)\t(.*)$", line)
        if m:
            out[int(m.group(1))] = m.group(2).split("\t")[-1]
    return out


@pytest.mark.slow  # trains three tiny models with fairseq-train
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layout_trains_and_greedy_decoding_is_the_forward_pass_argmax(name, tiny_train_bin, tmp_path):
    ckpt = train_tiny(tiny_train_bin, str(tmp_path / name), "ib", updates=30, extra=LAYOUTS[name])
    models, _ = checkpoint_utils.load_model_ensemble([ckpt])
    model = models[0].eval()
    spec = model.decoder.ib
    want = dict(zip(LAYOUTS[name][::2], LAYOUTS[name][1::2]))
    assert (spec.h, spec.c) == (int(want["--ib-h"]), int(want["--ib-c"]))
    assert spec.order == want.get("--ib-order", "side-to-middle")  # saved in the checkpoint
    proc = run_cli(["fairseq-generate", tiny_train_bin, "--user-dir", "fairseq_stream", "--path", ckpt, "--cpu",
                    "--gen-subset", "valid", "--search", "ib-beam", "--beam", "1", "--batch-size", "4",
                    "--max-len-b", "40", "--min-len", str(MIN_LEN)], env_extra={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    src, hyp = sentences(proc.stdout, "S"), sentences(proc.stdout, "H")
    assert sorted(hyp) == list(range(13))  # every sentence of the split once
    task_dict = model.decoder.dictionary
    eos, pad, z = task_dict.eos(), task_dict.pad(), spec.z
    checked = 0
    for sid in sorted(hyp):
        words = [task_dict.index(w) for w in hyp[sid].split()]
        seq = ib_order.reorder(words, spec.h, spec.c, eos, pad, "single", spec.order)  # decoder order, then EOS
        source = task_dict.encode_line(src[sid], add_if_not_exist=False).long().unsqueeze(0)
        prev = ib_order.shift_inputs(torch.tensor([seq]), z, eos, pad)
        with torch.no_grad():
            logits = model(source, torch.tensor([source.size(1)]), prev)[0][0]  # (len(seq), vocab)
        logits[:MIN_LEN, eos] = -float("inf")  # --min-len: no EOS in the first slots
        best = logits.argmax(dim=-1).tolist()
        forced_end = len(seq) - 1 >= 40  # the maximum length ended it, not the model
        slots = range(len(seq) - 1 if forced_end else len(seq))
        assert [best[k] for k in slots] == [seq[k] for k in slots], (sid, hyp[sid])
        checked += len(slots)
    assert checked >= 13 * (MIN_LEN + 1)
