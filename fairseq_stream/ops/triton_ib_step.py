"""The IBDecoder family's multi-word beam step on a GPU: three Triton kernels.

The GPU counterpart of ``csrc/ib_step.cpp`` (see :mod:`fairseq_stream.ops.ib_step` for the step,
Zhang2020 Algorithm 1 lines 8–27, and the contract). On CUDA the PyTorch reference of
:class:`~fairseq_stream.search.ib_beam.IBBeamSearch` is ~130 kernel launches per step; here:

1. :func:`_continuations` — one program per decoder row: its best ``Bc`` continuations of ``z``
   words by outer addition of the slots' top-``Bc``, re-pruned to ``Bc`` after each slot (the
   slots of ended IMDecoder segments are PAD for free), and the segments each one ends;
2. :func:`_sentence_step` — one program per sentence: the ``B·Bc`` continuations of its
   hypotheses, the final hypotheses into the ``fin_*`` buffers (in place, after the sentence's
   earlier ones), the ``B`` best open continuations as the new beam (new tensors of the history's
   fixed width: the sentence's ``steps`` words, the ``z`` new ones, PAD after), whether it is done;
3. :func:`_rows_and_packet` — one program: the next rows (parent row, the ``z`` words to feed,
   place among the sentence's rows, flat slot numbered without the finished sentences) and the
   packet the host reads once (:data:`fairseq_stream.ops.packets.IB_STEP`).

The next rows' tensors are ``S·B`` long, as the reference's (the first ``rows`` count, slot −1 after);
a row whose slot is −1 (a static step's padding row) is no sentence's. Every
selection takes the best value first, ties (and -inf) by the lower index, as the reference's
stable sorts; the only arithmetic is the reference's additions in its dtype, so the outputs are
bit-identical (``tests/unit/test_step_backends.py``: under Triton's interpreter on the CPU, and
on CUDA where there is one). A NaN log-probability counts as -inf. The first launch of a compile
signature runs on copies of the state (:func:`~fairseq_stream.ops.triton_common.first_contact`).
The only state written in place is the ``fin_*`` buffers, which no program reads: the history a
final hypothesis copies is the old state's, left as it is.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import torch
import triton
import triton.language as tl
from torch import Tensor

from fairseq_stream.ops import packets
from fairseq_stream.ops.ib_step import FIELDS, IBStepResult
from fairseq_stream.ops.triton_common import bucket, first_contact, live_rows, step_jit


@triton.jit
def _slot_candidates(vals, toks, seg_done, slot_segment, r, prior_at, j, z, bc, G, pad, q, BC2: tl.constexpr):
    """Slot ``j``'s top-``Bc`` of row ``r`` (BC2,): a slot of an ended segment is PAD at 0."""
    NEG = float("-inf")
    in_q = q < bc
    v = tl.load(vals + (r * z + j) * bc + q, mask=in_q, other=NEG)
    v = tl.where(v != v, NEG, v)  # NaN (fp16 overflow) is no candidate: it would match no maximum
    w = tl.load(toks + (r * z + j) * bc + q, mask=in_q, other=pad)
    if G > 1:
        forced = tl.load(seg_done + prior_at + tl.load(slot_segment + j)) != 0
        v = tl.where(forced, tl.where(q == 0, 0.0, NEG).to(v.dtype), v)
        w = tl.where(forced & (q == 0), pad, w)
    return v, w


@triton.jit
def _pick(onehot, x, other):
    """``x``'s element where ``onehot`` (one per row of the (BC2, BC2) mask), exactly (no sum:
    -0.0 stays -0.0)."""
    return tl.max(tl.where(onehot, x, other), axis=1)


@step_jit
def _continuations(vals, toks, row_slot, seg_done, slot_segment, acc_out, words_out, lps_out, seg_out,
                   z, bc, G, eos, pad, BC2: tl.constexpr, Z2: tl.constexpr):
    """Row ``r``'s best ``Bc`` continuations (reference: ``_continuations``, ``_segments_done``)."""
    NEG = float("-inf")
    r = tl.program_id(0)
    q = tl.arange(0, BC2)
    in_q = q < bc
    zl = tl.arange(0, Z2)
    prior_at = tl.maximum(tl.load(row_slot + r), 0) * G  # a padding row (−1) reads slot 0; nobody reads it back
    v, w = _slot_candidates(vals, toks, seg_done, slot_segment, r, prior_at, 0, z, bc, G, pad, q, BC2)
    acc = v
    words = tl.where(zl[None, :] == 0, w[:, None], 0)  # (BC2, Z2) each continuation's words so far
    lps = tl.where(zl[None, :] == 0, v[:, None], 0.0).to(v.dtype)
    key = q[:, None] * BC2 + q[None, :]  # (BC2, BC2): the order of the reference's flat (p, q) index
    pair_ok = in_q[:, None] & in_q[None, :]
    for j in range(1, z):  # outer addition, re-pruned to Bc after each slot (exact: the sum is monotone)
        v, w = _slot_candidates(vals, toks, seg_done, slot_segment, r, prior_at, j, z, bc, G, pad, q, BC2)
        grid = acc[:, None] + v[None, :]
        taken = ~pair_ok
        best = tl.full([BC2], NEG, dtype=v.dtype)
        pick = tl.zeros([BC2], dtype=tl.int32)
        for m in range(bc):
            mx = tl.max(tl.max(tl.where(taken, NEG, grid), axis=1), axis=0)
            i = tl.min(tl.min(tl.where((~taken) & (grid == mx), key, BC2 * BC2), axis=1), axis=0)
            taken = taken | (key == i)
            # the value itself, not the maximum: of 0.0 and -0.0 (equal) the maximum may be either
            best = tl.where(q == m, tl.max(tl.max(tl.where(key == i, grid, NEG), axis=1), axis=0), best)
            pick = tl.where(q == m, i, pick)
        parent = (pick // BC2)[:, None] == q[None, :]  # (m, p)
        new = (pick % BC2)[:, None] == q[None, :]  # (m, q)
        at_j = zl[None, :] == j
        words = tl.where(at_j, _pick(new, w[None, :], -1)[:, None],
                         tl.max(tl.where(parent[:, :, None], words[None, :, :], -1), axis=1))
        lps = tl.where(at_j, _pick(new, v[None, :], NEG)[:, None],
                       tl.max(tl.where(parent[:, :, None], lps[None, :, :], NEG), axis=1))
        acc = best
    in_z = zl[None, :] < z
    cell = (r * bc + q)[:, None] * z + zl[None, :]
    tl.store(acc_out + r * bc + q, acc, mask=in_q)
    tl.store(words_out + cell, words, mask=in_q[:, None] & in_z)
    tl.store(lps_out + cell, lps, mask=in_q[:, None] & in_z)
    is_eos = in_z & (words == eos)
    for g in range(G):  # a segment ends with an EOS in one of its slots (IBDecoder: any slot)
        mine = tl.load(slot_segment + zl, mask=zl < z, other=-1) == g
        hit = tl.max(tl.where(is_eos & ((G == 1) | mine[None, :]), 1, 0), axis=1) != 0
        prior = tl.load(seg_done + prior_at + g) != 0
        tl.store(seg_out + (r * bc + q) * G + g, (hit | prior).to(tl.int8), mask=in_q)


@triton.jit
def _select(x, idx, valid, width, W2: tl.constexpr):
    """The ``width`` best of ``x`` where ``valid``, best first, ties by the lower ``idx``:
    (index, value) per lane of W2."""
    NEG = float("-inf")
    lane = tl.arange(0, W2)
    taken = ~valid
    sel = tl.zeros([W2], dtype=tl.int32)
    val = tl.full([W2], NEG, dtype=x.dtype)
    for m in range(width):
        mx = tl.max(tl.where(taken, NEG, x), axis=0)
        i = tl.min(tl.where((~taken) & (x == mx), idx, 1 << 30), axis=0)
        taken = taken | (idx == i)
        sel = tl.where(lane == m, i, sel)
        val = tl.where(lane == m, tl.max(tl.where(idx == i, x, NEG), axis=0), val)  # -0.0 stays -0.0
    return sel, val


@triton.jit
def _extend(tokens, token_scores, words, lps, hist, cont, t, width, z, cols, write, pad, out_tokens, out_scores,
            out_at, L2: tl.constexpr):
    """Rows ``out_at`` of width ``cols`` where ``write`` (per lane): the history ``hist`` (rows of
    ``width``) of ``t`` words, then the continuation ``cont`` of ``z`` words, PAD (score 0) after."""
    c = tl.arange(0, L2)[None, :]
    ok = write[:, None]
    old = ok & (c < t)
    new = ok & (c >= t) & (c < t + z)
    at_old = hist[:, None] * width + c
    at_new = cont[:, None] * z + c - t
    tok = tl.where(old, tl.load(tokens + at_old, mask=old, other=pad), tl.load(words + at_new, mask=new, other=pad))
    lp = tl.where(old, tl.load(token_scores + at_old, mask=old, other=0.0), tl.load(lps + at_new, mask=new, other=0.0))
    tl.store(out_tokens + out_at[:, None] * cols + c, tok, mask=ok & (c < cols))
    tl.store(out_scores + out_at[:, None] * cols + c, lp, mask=ok & (c < cols))


@step_jit
def _sentence_step(acc, words, lps, seg, row_of, scores, tokens, token_scores, n_final, steps, fin_tokens, fin_scores,
                   fin_len, fin_total, new_scores, new_tokens, new_token_scores, new_seg_done, new_n_final, done_out,
                   parent_out, live_out, B, bc, width, z, G, Z1, cols, pad, top,
                   P2: tl.constexpr, K2: tl.constexpr, L2: tl.constexpr):
    """Sentence ``s``'s step after its rows' continuations (reference: ``step``, ``_record``,
    ``_advance``)."""
    NEG = float("-inf")
    s = tl.program_id(0)
    t = tl.load(steps + s)
    n = B * bc
    p = tl.arange(0, P2)
    in_pool = p < n
    slot = p // bc
    r = tl.load(row_of + s * B + slot, mask=in_pool, other=-1)
    has_row = r >= 0
    cont = tl.maximum(r, 0) * bc + p % bc  # (P2,) the continuation's row · Bc + q
    full = tl.load(scores + s * B + slot, mask=has_row, other=NEG) + tl.load(acc + cont, mask=has_row, other=0.0)
    full = tl.where(has_row & (full == full), full, NEG)
    ends = has_row & (full != NEG) & (full != float("inf"))
    for g in range(G):
        ends = ends & (tl.load(seg + cont * G + g, mask=has_row, other=0) != 0)
    nf = tl.load(n_final + s)
    # 3. final hypotheses ("top": only ended continuations among the sentence's B best)
    ended = tl.where(ends, full, NEG)
    if top != 0:
        _, best = _select(full, p, in_pool, B, P2)
        kth = tl.min(tl.where(tl.arange(0, P2) < B, best, float("inf")), axis=0)
        ended = tl.where(full >= kth, ended, NEG)
    lane = tl.arange(0, K2)
    sel, val = _select(ended, p, in_pool, B, K2)
    ok = (lane < B) & (val != NEG)  # best first: the finite ones lead
    count = tl.sum(ok.to(tl.int64), axis=0)
    dest = s * Z1 + nf + lane
    ok = ok & (nf + lane < Z1 - 1)  # the reference's scratch slot is never written (nor read)
    hist = s * B + sel // bc
    row = tl.maximum(tl.load(row_of + hist, mask=lane < B, other=0), 0)
    _extend(tokens, token_scores, words, lps, hist, row * bc + sel % bc, t, width, z, cols, ok, pad, fin_tokens,
            fin_scores, dest, L2)
    tl.store(fin_len + dest, (t + z) + lane * 0, mask=ok)
    tl.store(fin_total + dest, val, mask=ok)
    nf_new = nf + count
    tl.store(new_n_final + s, nf_new)
    # 4. the B best open continuations become the new beam
    sel, val = _select(tl.where(ends, NEG, full), p, in_pool, B, K2)
    in_b = lane < B
    alive = in_b & (val != NEG)
    done = (nf_new >= B) | (tl.sum(alive.to(tl.int64), axis=0) == 0)
    hist = s * B + sel // bc
    row = tl.maximum(tl.load(row_of + hist, mask=in_b, other=0), 0)
    cont = row * bc + sel % bc
    _extend(tokens, token_scores, words, lps, hist, cont, t, width, z, width, in_b, pad, new_tokens, new_token_scores,
            s * B + lane, L2)
    tl.store(new_scores + s * B + lane, val, mask=in_b)
    for g in range(G):
        tl.store(new_seg_done + (s * B + lane) * G + g, tl.load(seg + cont * G + g, mask=in_b, other=0), mask=in_b)
    tl.store(parent_out + s * B + lane, row, mask=in_b)
    tl.store(live_out + s * B + lane, (alive & ~done).to(tl.int8), mask=in_b)
    tl.store(done_out + s, done.to(tl.int8))


@step_jit
def _rows_and_packet(done_in, live_in, parent_in, new_tokens, steps, parents, feed, slot_out, row_slot_out, packet,
                     at_rows, at_finished, at_widest, S, B, width, z,
                     S2: tl.constexpr, K2: tl.constexpr):
    """The next rows in flat order (the live slots, sentence-major), slots numbered without the
    finished sentences; the packet (its field starts ``at_*`` from :data:`packets.IB_STEP`)."""
    sl = tl.arange(0, S2)
    in_s = sl < S
    done = in_s & (tl.load(done_in + sl, mask=in_s, other=0) != 0)
    kl, grid, live, count, rank, at = live_rows(live_in, sl, in_s, B, K2)
    kept = tl.cumsum((in_s & ~done).to(tl.int64), axis=0) - 1  # the sentence's place without the finished ones
    tl.store(parents + at, tl.load(parent_in + grid, mask=live, other=0), mask=live)
    tl.store(slot_out + at, rank, mask=live)
    tl.store(row_slot_out + at, kept[:, None] * B + kl[None, :], mask=live)
    t = tl.load(steps + sl, mask=in_s, other=0)[:, None]  # each sentence's words before this step's
    for j in range(z):
        tl.store(feed + at * z + j, tl.load(new_tokens + grid * width + t + j, mask=live, other=0), mask=live)
    tl.store(packet + at_rows, tl.sum(count, axis=0).to(tl.float64))
    tl.store(packet + at_finished, tl.sum(done.to(tl.int64), axis=0).to(tl.float64))
    tl.store(packet + at_widest, tl.max(count, axis=0).to(tl.float64))


def triton_step(state_tensors: Sequence[Tensor], vals: Tensor, toks: Tensor, row_slot: Tensor, slot_segment: Tensor, *,
                beam: int, eos: int, pad: int, finalize_top: bool) -> IBStepResult:
    """One step by the Triton kernels from each row's slot candidates ``vals``/``toks`` (R, z, Bc)
    (the contract of :mod:`fairseq_stream.ops.ib_step`; the next rows' tensors ``S·B`` long)."""
    _, z, bc = vals.shape
    cols = max(state_tensors[FIELDS.index("fin_tokens")].size(2), state_tensors[FIELDS.index("tokens")].size(2))
    sizes = dict(BC2=triton.next_power_of_2(bc), Z2=triton.next_power_of_2(z), P2=triton.next_power_of_2(beam * bc),
                 K2=triton.next_power_of_2(beam), L2=bucket(cols), S2=bucket(state_tensors[0].size(0)))
    signature = ("ib_step", vals.dtype, vals.device, tuple(sorted(sizes.items())))

    def launch(dry: bool) -> IBStepResult:
        state = [t.clone() for t in state_tensors] if dry else list(state_tensors)
        return _launch(state, vals.contiguous(), toks.contiguous(), row_slot.contiguous(), slot_segment.contiguous(),
                       sizes, beam=beam, eos=eos, pad=pad, top=int(finalize_top))

    return first_contact(signature, launch)


def _launch(state_tensors: List[Tensor], vals: Tensor, toks: Tensor, row_slot: Tensor, slot_segment: Tensor,
            sizes: Dict[str, int], *, beam: int, eos: int, pad: int, top: int) -> IBStepResult:
    f = dict(zip(FIELDS, state_tensors))
    r, z, bc = vals.shape
    s, b, width = f["tokens"].shape
    g = f["seg_done"].size(2)
    z1, cols = f["fin_tokens"].shape[1:]
    dev, dtype = vals.device, vals.dtype
    seg_done = f["seg_done"].view(torch.int8)  # bool as bytes: Triton stores int8
    # (R, Bc, ·) each row's continuations: sum, words, their log-probabilities, segments ended
    acc = torch.empty(r, bc, dtype=dtype, device=dev)
    words = torch.empty(r, bc, z, dtype=torch.long, device=dev)
    lps = torch.empty(r, bc, z, dtype=dtype, device=dev)
    seg = torch.empty(r, bc, g, dtype=torch.int8, device=dev)
    if r:
        _continuations[(r,)](vals, toks, row_slot, seg_done, slot_segment, acc, words, lps, seg, z, bc, g, eos, pad,
                             BC2=sizes["BC2"], Z2=sizes["Z2"])
    into = torch.where(row_slot < 0, s * b, row_slot)  # a padding row's: the scratch entry s·B
    row_of = torch.full((s * b + 1,), -1, dtype=torch.long, device=dev).scatter_(0, into, torch.arange(r, device=dev))
    new_scores = torch.empty(s, b, dtype=dtype, device=dev)
    new_tokens = torch.empty(s, b, width, dtype=torch.long, device=dev)
    new_token_scores = torch.empty(s, b, width, dtype=dtype, device=dev)
    new_seg_done = torch.empty(s, b, g, dtype=torch.int8, device=dev)
    n_final = torch.empty_like(f["n_final"])
    done = torch.empty(s, dtype=torch.int8, device=dev)
    parent = torch.empty(s, b, dtype=torch.long, device=dev)
    live = torch.empty(s, b, dtype=torch.int8, device=dev)
    _sentence_step[(s,)](acc, words, lps, seg, row_of, f["scores"], f["tokens"], f["token_scores"], f["n_final"],
                         f["steps"], f["fin_tokens"], f["fin_scores"], f["fin_len"], f["fin_total"], new_scores,
                         new_tokens, new_token_scores, new_seg_done, n_final, done, parent, live, b, bc, width, z, g,
                         z1, cols, pad, top, P2=sizes["P2"], K2=sizes["K2"], L2=sizes["L2"])
    parents = torch.zeros(s * b, dtype=torch.long, device=dev)
    feed = torch.zeros(s * b, z, dtype=torch.long, device=dev)
    slot = torch.zeros(s * b, dtype=torch.long, device=dev)
    row_slot_next = torch.full((s * b,), -1, dtype=torch.long, device=dev)
    at = packets.IB_STEP.starts(s)
    packet = torch.empty(at[-1], dtype=torch.float64, device=dev)
    _rows_and_packet[(1,)](done, live, parent, new_tokens, f["steps"], parents, feed, slot, row_slot_next, packet,
                           *at[:-1], s, b, width, z, S2=sizes["S2"], K2=sizes["K2"])
    return IBStepResult(packet, new_scores, new_tokens, new_token_scores, new_seg_done.view(torch.bool), n_final,
                        done.view(torch.bool), parents, feed, slot, row_slot_next)
