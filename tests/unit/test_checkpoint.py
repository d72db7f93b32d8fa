"""Safe checkpoint loading: the shipped checkpoint loads, unexpected globals stay refused (a fairseq-train
checkpoint: tests/integration/test_trained_models.py)."""
import os
import pickle

import pytest
import torch
from fairseq import checkpoint_utils

import fairseq_stream  # noqa: F401  (registers the allow-list)
from conftest import DEMO
from fairseq_stream.integration.checkpoints import SAFE_CHECKPOINT_GLOBALS


def test_the_shipped_demo_checkpoint_loads():
    state = checkpoint_utils.load_checkpoint_to_cpu(os.path.join(DEMO, "checkpoint.pt"))
    assert any(k.startswith("decoder.layers") for k in state["model"])


class Payload:
    """A class that is not on the allow-list (it could run code when unpickled)."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_a_pickle_with_an_unexpected_global_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "cfg": None, "payload": Payload()}, path)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))


def test_allow_list_is_data_only():
    names = {getattr(g, "__qualname__", str(g)) for g in SAFE_CHECKPOINT_GLOBALS}
    assert "Namespace" in names
    assert not any("system" in n or "eval" in n or "exec" in n for n in names)
