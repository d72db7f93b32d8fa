#!/usr/bin/env python
"""``fairseq-train`` with its products in bfloat16 on a CPU that multiplies bfloat16 natively (the zoo's builds).

    python scripts/models/train_autocast.py --precision auto -- DATA --arch transformer ...   # fairseq-train's args

The whole of fairseq-train runs inside ``torch.autocast("cpu", dtype=torch.bfloat16)``: the matrix products (the
linear layers, attention's batched products) take bfloat16 operands and accumulate in float32; the weights, the
optimizer's state, the softmax, the layer norms and the loss stay float32 (autocast's own op lists). That is
mixed-precision training with float32 master weights, so an update too small for a bfloat16 weight still
accumulates in the float32 one, and the weights are cast afresh for every forward. Its losses follow float32's
update by update (the 3 + 3 × 256 recipe: 13.169 / 11.332 after 25 / 50 updates against 13.167 / 11.331). On an
Intel Xeon with AMX, one thread, it trained the zoo's 6 + 6 × 512 shape at ~1.9× float32's tokens a second
(~600–785 against ~270–390) and 3 + 3 × 256 at ~1.5× (~2,600 against ~1,600–1,800), so a wall-clock budget
(``--stop-time-hours``) buys that many more updates; where the CPU has no bfloat16 instructions the products would
be emulated, slower than float32.

``--precision``: ``float32`` (fairseq-train as it is), ``bf16``, or ``auto`` (the default): ``bf16`` where the
CPU has AMX-BF16 or AVX512-BF16 (:func:`native_bf16`), ``float32`` otherwise. The models it writes are ordinary
float32 fairseq checkpoints; nothing at decoding time depends on how they were trained.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, MutableMapping, Optional, Sequence

PRECISIONS = ("auto", "float32", "bf16")


def native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (the ``amx_bf16`` or ``avx512_bf16`` flag)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        pass
    return False


def resolve(precision: str, cpuinfo: str = "/proc/cpuinfo") -> str:
    """``float32`` or ``bf16`` for a ``--precision`` value (``auto`` by the CPU)."""
    if precision not in PRECISIONS:
        raise ValueError(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "auto":
        return "bf16" if native_bf16(cpuinfo) else "float32"
    return precision


#: oneDNN primitives kept (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``; oneDNN's default 1024) under bf16 products
PRIMITIVE_CACHE = "16"


def bound_primitive_cache(environ: MutableMapping[str, str]) -> None:
    """Keep few oneDNN primitives, unless the user chose how many. bfloat16 products go through oneDNN, which
    keeps a primitive (with its buffers) per product shape, and every batch of a token budget has its own
    shapes: the base-sized model's fairseq-train grew ~1 GB a minute to 15.5 GB and was killed for memory
    (24 GB machine). With 16 it stays at ~5 GB, at the same speed (the same updates' wall time)."""
    environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", PRIMITIVE_CACHE)


def command(precision: str, args: Sequence[str]) -> List[str]:
    """The command that runs fairseq-train with ``args`` at ``precision`` (already resolved or ``auto``)."""
    return [sys.executable, os.path.abspath(__file__), "--precision", precision, "--", *args]


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    rest: List[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     usage="%(prog)s [--precision {auto,float32,bf16}] -- FAIRSEQ-TRAIN-ARGS")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help="the products' precision (default auto: bf16 where the CPU has it)")
    args = parser.parse_args(argv)
    if not rest:
        parser.error("give fairseq-train's arguments after --")
    precision = resolve(args.precision)
    print(f"train_autocast.py: fairseq-train with {precision} products", flush=True)
    if precision == "bf16":
        bound_primitive_cache(os.environ)  # before torch loads oneDNN

    import torch
    from fairseq.models import BaseFairseqModel
    from fairseq_cli.train import cli_main

    def fresh_casts(module: torch.nn.Module, args: object) -> None:
        # autocast keeps each weight's bfloat16 copy until the outermost autocast region exits, and this one spans
        # every update; fairseq's train_step enters an inner region that turns the cache back on (cache_enabled is
        # global), so without this a model's forward would read the copies of the first update forever
        if isinstance(module, BaseFairseqModel):
            torch.clear_autocast_cache()

    sys.argv = ["fairseq-train", *rest]  # fairseq reads its own arguments from sys.argv
    hook = torch.nn.modules.module.register_module_forward_pre_hook(fresh_casts)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16", cache_enabled=False):
            cli_main()
    finally:
        hook.remove()


if __name__ == "__main__":
    main()
