"""scripts/models/train_autocast.py: fairseq-train with bfloat16 products where the CPU has them (the zoo's and
the drafts' training). float32 through it is fairseq-train bit for bit; bf16 really trains in bfloat16 (other
weights, the same validation loss, float32 checkpoints); ``auto`` follows the CPU's flags."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import torch

from conftest import REPO, tiny_train_args

SCRIPT = os.path.join(REPO, "scripts", "models", "train_autocast.py")


def load_script():
    spec = importlib.util.spec_from_file_location("train_autocast_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("flags, expected", [
    ("fpu sse2 avx2 avx512f avx512_vnni amx_bf16 amx_tile", "bf16"),  # an Intel Xeon with AMX
    ("fpu sse2 avx2 avx512f avx512_bf16", "bf16"),  # an AMD Zen 4
    ("fpu sse2 avx2 fma", "float32"),  # AVX2 only: bfloat16 would be emulated
])
def test_auto_follows_the_cpu(tmp_path, flags, expected):
    mod = load_script()
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n", encoding="utf-8")
    assert mod.resolve("auto", str(cpuinfo)) == expected
    assert mod.resolve("float32", str(cpuinfo)) == "float32" and mod.resolve("bf16", str(cpuinfo)) == "bf16"
    assert mod.resolve("auto", str(tmp_path / "missing")) == "float32"  # no /proc: nothing assumed
    with pytest.raises(ValueError, match="--precision must be one of"):
        mod.resolve("fp16", str(cpuinfo))


def test_bf16_bounds_onednns_primitive_cache_unless_the_user_chose():
    """bf16 products keep a oneDNN primitive per batch shape: unbounded, the base-sized model's training grew
    ~1 GB a minute until it was killed for memory."""
    train_autocast = load_script()
    env = {}
    train_autocast.bound_primitive_cache(env)
    assert env == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": train_autocast.PRIMITIVE_CACHE}
    env = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "256"}
    train_autocast.bound_primitive_cache(env)
    assert env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "256"


def test_without_fairseq_arguments_it_says_what_to_give():
    proc = subprocess.run([sys.executable, SCRIPT, "--precision", "bf16"], capture_output=True, text=True)
    assert proc.returncode == 2 and "give fairseq-train's arguments after --" in proc.stderr


def _train(data: str, save: str, precision: str) -> dict:
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    # the tiny_transformer_ckpt fixture's own arguments: float32 through the script must give its bits
    command = load_script().command(precision, tiny_train_args(data, save, "transformer"))
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"fairseq-train with {precision} products" in proc.stdout
    return torch.load(os.path.join(save, "checkpoint_best.pt"), map_location="cpu", weights_only=False)


def test_float32_is_fairseq_train_and_bf16_trains_in_bfloat16(tiny_train_bin, tiny_transformer_ckpt, tmp_path):
    stock = torch.load(tiny_transformer_ckpt, map_location="cpu", weights_only=False)["model"]
    same = _train(tiny_train_bin, str(tmp_path / "f32"), "float32")
    trained = _train(tiny_train_bin, str(tmp_path / "bf16"), "bf16")
    bf16 = trained["model"]
    same, losses = same["model"], (same["extra_state"]["best"], trained["extra_state"]["best"])
    # it learns as float32 does: the validation loss after 10 updates within 0.05 (9.145 vs 9.146 when written; a
    # forward that read stale bfloat16 copies of the weights, autocast's cache, was 1.4 behind)
    assert abs(losses[0] - losses[1]) < 0.05, losses
    assert stock.keys() == same.keys() == bf16.keys()
    assert all(torch.equal(stock[k], same[k]) for k in stock)  # the same seed and thread: the same bits
    assert all(v.dtype == torch.float32 for v in bf16.values() if v.is_floating_point())  # float32 master weights
    moved = [k for k in stock if stock[k].is_floating_point() and not torch.equal(stock[k], bf16[k])]
    assert len(moved) > len(stock) // 2  # the products' rounding changed the updates
    assert all(torch.isfinite(bf16[k]).all() for k in moved)
