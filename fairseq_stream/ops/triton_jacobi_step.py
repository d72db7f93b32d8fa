"""The fused Jacobi iteration on a GPU: two Triton kernels.

The GPU counterpart of ``csrc/jacobi_step.cpp`` (see :mod:`fairseq_stream.ops.jacobi_step` for
the iteration and the contract): :func:`_iteration`, one program per sentence (verification,
tokens, the next draft, window and feed, the summed score), and :func:`_packet`, one program
(the host's packet, laid out by :data:`fairseq_stream.ops.packets.JACOBI_STEP`, and the order
that puts the finished sentences last). The state stays in its order (``compacted=False``): the
runner compacts it after its read. Equal to the PyTorch reference under Triton's interpreter on
the CPU (``tests/unit/test_step_backends.py``); on a GPU the summed score (a scan) may differ
in its last bits, the tokens cannot. As the beam step's kernels: compiled once per size class,
first launched on copies of the state, loads before stores within a program.
"""
from __future__ import annotations

from typing import Dict, List

import torch
import triton
import triton.language as tl
from torch import Tensor

from fairseq_stream.ops import packets
from fairseq_stream.ops.jacobi_step import FIELDS, IterationResult
from fairseq_stream.ops.triton_common import bucket, finished_last, first_contact, step_jit


@step_jit
def _iteration(pred, score, feed, tokens, token_scores, verified, max_len, iterations, width, draft_out, feed_out,
               done_out, accept_out, total_out, b, L, B, eos, pad, bos, block, init_pad, tail, max_parallel,
               BL: tl.constexpr, FB: tl.constexpr, L2: tl.constexpr):
    s = tl.program_id(0)
    j = tl.arange(0, BL)
    in_b = j < b
    p = tl.load(pred + s * b + j, mask=in_b, other=pad)
    # 1. verified: the first prediction, then each whose inputs all matched; the first EOS ends it
    nxt = tl.load(feed + s * b + j + 1, mask=j + 1 < b, other=pad)
    first_bad = tl.min(tl.where((j + 1 < b) & (nxt != p), j, b - 1), axis=0)
    w_old = tl.load(width + s)
    a = tl.load(verified + s)
    its = tl.load(iterations + s)
    ml = tl.load(max_len + s)
    cols = tl.arange(0, L2)
    old = tl.load(token_scores + s * L + cols, mask=cols < a, other=0.0)
    # Everything this program reads of the state is loaded: from here on it writes.
    tl.debug_barrier()
    acc = tl.minimum(first_bad + 1, w_old)
    eos_at = tl.min(tl.where(in_b & (p == eos) & (j < acc), j, BL), axis=0)
    has_eos = eos_at < BL
    acc = tl.where(has_eos, eos_at + 1, acc)
    # 2. the verified predictions join the tokens; the summed score of the prefix (a scan in
    # float64, as PyTorch's CPU cumsum accumulates)
    v = a + acc
    new = tl.load(score + s * b + cols - a, mask=(cols >= a) & (cols < v), other=0.0)
    sums = tl.cumsum(tl.where(cols < a, old, new).to(tl.float64), axis=0)
    total = tl.sum(tl.where(cols == tl.maximum(v, 1) - 1, sums.to(old.dtype).to(tl.float64), 0.0), axis=0)
    kept = j < acc
    tl.store(tokens + s * L + a + j, p, mask=kept)
    tl.store(token_scores + s * L + a + j, tl.load(score + s * b + j, mask=in_b, other=0.0), mask=kept)
    # 3. the next draft: the unverified predictions, shifted (PAD at a fresh aligned block)
    safe_block = tl.maximum(block, 1)
    fresh = (init_pad != 0) & (block > 0) & (v % safe_block == 0)
    shift = j + acc
    d = tl.load(pred + s * b + tl.minimum(shift, b - 1), mask=j < b - 1, other=pad)
    tl.store(draft_out + s * (b - 1) + j, tl.where((shift >= w_old) | fresh, pad, d), mask=j < b - 1)
    # 4. the next window and feed: the last verified token, the draft, PAD past the window
    remaining = ml + 1 - v
    w_new = tl.where(block < 0, remaining, tl.where(tail != 0, block, block - v % safe_block))
    w_new = tl.where((max_parallel >= 0) & (v >= max_parallel), 1, w_new)
    w_new = tl.maximum(tl.minimum(w_new, remaining), 1)
    f = tl.arange(0, FB)
    shift2 = f - 1 + acc
    df = tl.load(pred + s * b + tl.minimum(shift2, b - 1), mask=(f >= 1) & (f - 1 < b - 1), other=pad)
    df = tl.where((f >= 1) & (f - 1 < b - 1) & (shift2 < w_old) & ~fresh, df, pad)
    last = tl.load(pred + s * b + acc - 1)
    tl.store(feed_out + s * B + f, tl.where(f == 0, last, tl.where(f < w_new, df, pad)), mask=f < B)
    tl.store(verified + s, v)
    tl.store(iterations + s, its + 1)
    tl.store(width + s, w_new)
    tl.store(done_out + s, (has_eos | (v > ml)).to(tl.int8))
    tl.store(accept_out + s, acc)
    tl.store(total_out + s, total)


@step_jit
def _packet(done_in, accept, total, sentences, verified, iterations, width, packet, aux, at_finished, at_next_width,
            at_longest, at_accepted, at_shortest, at_done, at_sentence, at_verified, at_iterations, at_total, at_position,
            S, S2: tl.constexpr):
    """The packet (its field starts ``at_*`` from :data:`packets.JACOBI_STEP`) and ``aux``."""
    sl, in_s, done, going, n_on, pos = finished_last(done_in, S, S2)
    ver = tl.load(verified + sl, mask=in_s, other=0)
    wid = tl.load(width + sl, mask=in_s, other=1)
    acc = tl.load(accept + sl, mask=in_s, other=0)
    tl.store(packet + at_finished, (S - n_on).to(tl.float64))
    tl.store(packet + at_next_width, tl.max(tl.where(going, wid, 1), axis=0).to(tl.float64))
    tl.store(packet + at_longest, tl.max(tl.where(in_s, ver, -(1 << 30)), axis=0).to(tl.float64))
    tl.store(packet + at_accepted, tl.sum(acc, axis=0).to(tl.float64))
    tl.store(packet + at_shortest, tl.min(tl.where(going, ver, 1 << 30), axis=0).to(tl.float64))
    tl.store(packet + at_done + pos, done.to(tl.float64), mask=in_s)
    tl.store(packet + at_sentence + pos, tl.load(sentences + sl, mask=in_s, other=0).to(tl.float64), mask=in_s)
    tl.store(packet + at_verified + pos, ver.to(tl.float64), mask=in_s)
    tl.store(packet + at_iterations + pos, tl.load(iterations + sl, mask=in_s, other=0).to(tl.float64), mask=in_s)
    tl.store(packet + at_total + pos, tl.load(total + sl, mask=in_s, other=0.0), mask=in_s)
    tl.store(packet + at_position + pos, sl.to(tl.float64), mask=in_s)
    tl.store(aux + sl, acc, mask=in_s)
    tl.store(aux + S + pos, sl.to(tl.int64), mask=in_s)


def triton_iteration(state_tensors: List[Tensor], pred: Tensor, score: Tensor, feed: Tensor, *, eos: int, pad: int,
                     bos: int, block: int, init_pad: bool, tail: bool, max_parallel: int,
                     feed_width: int) -> IterationResult:
    """One iteration by the Triton kernels (the contract of :mod:`fairseq_stream.ops.jacobi_step`, uncompacted)."""
    s, b = pred.shape
    cols = state_tensors[FIELDS.index("tokens")].size(1)
    sizes = dict(BL=triton.next_power_of_2(b), FB=triton.next_power_of_2(feed_width), L2=bucket(cols), S2=bucket(s))
    signature = ("jacobi_step", score.dtype, score.device, tuple(sorted(sizes.items())))
    options = dict(eos=eos, pad=pad, bos=bos, block=block, init_pad=int(init_pad), tail=int(tail),
                   max_parallel=max_parallel, feed_width=feed_width)

    def launch(dry: bool) -> IterationResult:
        state = [t.clone() for t in state_tensors] if dry else list(state_tensors)
        return _launch(state, pred.contiguous(), score.contiguous(), feed.contiguous(), sizes, **options)

    return first_contact(signature, launch)


def _launch(state_tensors: List[Tensor], pred: Tensor, score: Tensor, feed: Tensor, sizes: Dict[str, int], *, eos: int,
            pad: int, bos: int, block: int, init_pad: int, tail: int, max_parallel: int,
            feed_width: int) -> IterationResult:
    f = dict(zip(FIELDS, state_tensors))
    s, b = pred.shape
    dev, cols = pred.device, f["tokens"].size(1)
    draft = torch.empty(s, b - 1, dtype=torch.long, device=dev)
    next_feed = torch.empty(s, feed_width, dtype=torch.long, device=dev)
    done = torch.empty(s, dtype=torch.int8, device=dev)
    accept = torch.empty(s, dtype=torch.long, device=dev)
    total = torch.empty(s, dtype=torch.float64, device=dev)
    _iteration[(s,)](pred, score, feed, f["tokens"], f["token_scores"], f["verified"], f["max_len"], f["iterations"],
                     f["width"], draft, next_feed, done, accept, total, b, cols, feed_width, eos, pad, bos, block,
                     init_pad, tail, max_parallel, BL=sizes["BL"], FB=sizes["FB"], L2=sizes["L2"])
    at = packets.JACOBI_STEP.starts(s)
    packet = torch.empty(at[-1], dtype=torch.float64, device=dev)
    aux = torch.empty(2, s, dtype=torch.long, device=dev)
    _packet[(1,)](done, accept, total, f["sentences"], f["verified"], f["iterations"], f["width"], packet, aux,
                  *at[:-1], s, S2=sizes["S2"])
    return IterationResult(packet, draft, next_feed, aux, False)
