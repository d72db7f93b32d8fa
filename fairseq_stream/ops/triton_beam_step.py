"""The fused beam step on a GPU: the search step of a group in two Triton kernels.

The GPU counterpart of ``csrc/beam_step.cpp`` (see :mod:`fairseq_stream.ops.beam_step` for
what a step does and the contract). On CUDA the PyTorch reference of
:class:`~fairseq_stream.search.beam.BeamSearch` is ~150 kernel launches per step; here:

1. :func:`_sentence_step` — one program per sentence: the pool of ``k·c`` expansions and the
   carried ended candidates, the best ``W`` (ties: the lower pool index), finalisation, final
   hypotheses into the ``fin_*`` buffers, beam shrink, the pruning rules (thresholds measured
   from the ``final``/``active``/``normalized`` reference, computed at first use; rpl), the new
   beam with its token history (read from a copy taken before the step);
2. :func:`_rows_and_packet` — one program: the next rows (sentence-major, the sentences that
   go on first) and the packet the host reads once.

plus a few launches of set-up (the row map, the history copies). The state stays in its order
(``compacted=False``): the runner compacts it after its read, as for the reference. The
arithmetic is the reference's (IEEE division), so the outputs are bit-identical;
``tests/unit/test_step_backends.py`` checks that under Triton's interpreter on the CPU
(``TRITON_INTERPRET=1``, set before this module is imported), and on CUDA where there is one.
The first launch of a compile signature runs on copies of the state
(:func:`~fairseq_stream.ops.triton_common.first_contact`); a NaN score counts as -inf; the
program of a sentence loads everything it reads of the state before it writes any of it (a
barrier between: threads of one program must not see each other's writes).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import torch
import triton
import triton.language as tl
from torch import Tensor

from fairseq_stream.ops import packets
from fairseq_stream.ops.beam_step import FIELDS, StepResult
from fairseq_stream.ops.triton_common import bucket, finished_last, first_contact, live_rows, step_jit


@triton.jit
def _best_of_pool(top_lp, row_of, c, scores, ended, s, k, W, P2: tl.constexpr, W2: tl.constexpr):
    """Steps 1–2: the pool (every slot's c expansions, then the carried ended candidates) and its
    best W, best first; ties (and -inf) by the lower pool index. Returns (pool index, value)."""
    NEG = float("-inf")
    kc = k * c
    p = tl.arange(0, P2)
    in_pool = p < kc + k
    expansion = p < kc
    j = tl.where(expansion, p // c, p - kc)
    r = tl.load(row_of + s * k + j, mask=in_pool, other=-1)
    has_row = expansion & (r >= 0)
    slot_score = tl.load(scores + s * k + j, mask=in_pool, other=NEG)
    slot_ended = tl.load(ended + s * k + j, mask=in_pool, other=0) != 0
    lp = tl.load(top_lp + r * c + p % c, mask=has_row, other=0.0)
    pv = tl.where(expansion, tl.where(has_row, slot_score + lp, NEG), tl.where(slot_ended, slot_score, NEG))
    pv = tl.where(pv != pv, NEG, pv)  # NaN (fp16 overflow) is no candidate: it would match no maximum
    lane = tl.arange(0, W2)
    taken = p < 0
    sel = tl.zeros([W2], dtype=tl.int32)
    val = tl.full([W2], NEG, dtype=pv.dtype)
    for w in range(W):
        m = tl.max(tl.where(taken, NEG, pv), axis=0)
        i = tl.min(tl.where((~taken) & in_pool & (pv == m), p, P2), axis=0)
        taken = taken | (p == i)
        sel = tl.where(lane == w, i, sel)
        val = tl.where(lane == w, m, val)
    return sel, val


@triton.jit
def _copy_row(src, dst, cols, in_l, at, value, other):
    """``dst[:] = src[:]`` with column ``at`` set to ``value`` (a token history row)."""
    row = tl.load(src + cols, mask=in_l, other=other)
    tl.store(dst + cols, tl.where(cols == at, value, row), mask=in_l)


@triton.jit
def _record_finals(ok, rank, par, length, val, tlp, old_tokens, old_scores, fin_tokens, fin_scores, fin_len, fin_total,
                   s, k, W, Z1, L, st, eos, pad, W2: tl.constexpr, L2: tl.constexpr):
    """Step 4: the final candidates ``ok`` into the ``fin_*`` buffers at ``rank``."""
    lane = tl.arange(0, W2)
    cols = tl.arange(0, L2)
    in_l = cols < L
    for w in range(W):
        here = lane == w
        if tl.sum(tl.where(here & ok, 1, 0), axis=0) != 0:
            dst = s * Z1 + tl.sum(tl.where(here, rank, 0), axis=0)
            src = s * k + tl.sum(tl.where(here, par, 0), axis=0)
            _copy_row(old_tokens + src * L, fin_tokens + dst * L, cols, in_l, st, eos, pad)
            _copy_row(old_scores + src * L, fin_scores + dst * L, cols, in_l, st, tl.sum(tl.where(here, tlp, 0.0), axis=0), 0.0)
            tl.store(fin_len + dst, tl.sum(tl.where(here, length, 0), axis=0))
            tl.store(fin_total + dst, tl.sum(tl.where(here, val, 0.0), axis=0))


@triton.jit
def _apply_rules(keep, val, tok, tlp, carry, pw, length, bf, bfn, rule_kind, rule_ref, rule_keep, rule_param, n_rules,
                 eos, W2: tl.constexpr, FP32: tl.constexpr):
    """Step 5's rules in order: thresholds (ap, rp: kind 0; the surprisal-scaled δ: kind 2) from the final / active /
    normalized reference, each computed at its first use with the keep mask of that moment; rpl (kind 1). Two
    parameters a rule (``_rules_on``): the margin, or kind 2's α and floor."""
    NEG = float("-inf")
    have = tl.zeros([4], dtype=tl.int32)
    which = tl.arange(0, 4)
    ref_scalar = tl.full([4], NEG, dtype=val.dtype)
    ref_norm = tl.full([W2], NEG, dtype=val.dtype)
    lane = tl.arange(0, W2)
    for i in range(n_rules):
        kind = tl.load(rule_kind + i)
        ref = tl.load(rule_ref + i)
        spare_ended = tl.load(rule_keep + i)
        param = tl.load(rule_param + 2 * i).to(val.dtype)
        threshold_kind = (kind == 0) | (kind == 2)
        first_use = threshold_kind & (tl.sum(tl.where(which == ref, have, 0), axis=0) == 0)
        best = tl.max(tl.where(keep, val, NEG), axis=0)
        # kind 2 (pruning.SurprisalScaledThreshold): δ = max(floor, α · −best / |best|), the first of equal bests
        at = tl.min(tl.where(keep & (val == best), lane, W2), axis=0)
        best_len = tl.maximum(tl.sum(tl.where(lane == at, length, 0), axis=0), 1).to(val.dtype)
        if FP32:  # IEEE division, as the CPU's
            surprisal = tl.math.div_rn(-best, best_len)
        else:
            surprisal = -best / best_len
        surprisal = tl.where((at < W2) & (best != NEG), surprisal, 0.0)
        floor = tl.load(rule_param + 2 * i + 1).to(val.dtype)
        margin = tl.where(kind == 2, tl.maximum(param * surprisal, floor), param)
        ref_scalar = tl.where(first_use & (which == ref), tl.where(ref == 0, tl.maximum(best, bf), best), ref_scalar)
        ref_norm = tl.where(first_use & (ref == 2), tl.maximum(best, bfn * pw), ref_norm)
        have = tl.where(first_use & (which == ref), 1, have)
        chosen = tl.sum(tl.where(which == ref, ref_scalar, 0.0), axis=0)
        threshold = tl.where(ref == 2, ref_norm, chosen) - margin
        by_threshold = keep & ((val > threshold) | ((spare_ended != 0) & (tok == eos)))
        local = tl.max(tl.where(keep & ~carry, tlp, NEG), axis=0)
        by_local = keep & (carry | (tlp > local + param))
        keep = tl.where(threshold_kind, by_threshold, by_local)
    return keep


@triton.jit
def _shrink_and_prune(keep, val, tok, tlp, carry, pw, length, bf, bfn, nf_new, k, mode, rule_kind, rule_ref, rule_keep,
                      rule_param, n_rules, eos, W2: tl.constexpr, FP32: tl.constexpr):
    """Step 5: the beam shrinks by the final count, then the pruning rules; a sentence without
    any final hypothesis keeps its best candidate when the rules would prune them all."""
    lane = tl.arange(0, W2)
    width = tl.where(mode != 1, tl.maximum(k - nf_new, 0), k)  # rule fairseq (1) keeps k
    keep = keep & (tl.cumsum(keep.to(tl.int64), axis=0) <= width)
    before = keep
    keep = _apply_rules(keep, val, tok, tlp, carry, pw, length, bf, bfn, rule_kind, rule_ref, rule_keep, rule_param,
                        n_rules, eos, W2, FP32)
    stranded = (nf_new == 0) & (tl.sum(keep.to(tl.int64), axis=0) == 0)
    best = tl.min(tl.where(before, lane, W2), axis=0)
    return keep | (stranded & (lane == best))


@triton.jit
def _new_beam(keep, carry, tok, par, val, tlp, par_ended_len, done, old_tokens, old_scores, scores, ended, ended_len,
              tokens, token_scores, out_live, out_parent, out_tok, s, k, W, L, st, eos, pad,
              W2: tl.constexpr, L2: tl.constexpr):
    """Step 6: the kept candidates first (in rank order), then the others, into the k slots."""
    NEG = float("-inf")
    lane = tl.arange(0, W2)
    in_w = lane < W
    cols = tl.arange(0, L2)
    in_l = cols < L
    kept = tl.sum(keep.to(tl.int64), axis=0)
    dest = tl.where(keep, tl.cumsum(keep.to(tl.int64), axis=0) - 1,
                    kept + tl.cumsum((in_w & ~keep).to(tl.int64), axis=0) - 1)
    for w in range(W):
        here = lane == w
        d = tl.sum(tl.where(here, dest, 0), axis=0)
        if d < k:
            w_keep = tl.sum(tl.where(here & keep, 1, 0), axis=0) != 0
            w_carry = tl.sum(tl.where(here & carry, 1, 0), axis=0) != 0
            w_tok = tl.sum(tl.where(here, tok, 0), axis=0)
            w_par = tl.sum(tl.where(here, par, 0), axis=0)
            w_ended = w_keep & (w_carry | (w_tok == eos))
            slot = s * k + d
            tl.store(scores + slot, tl.where(w_keep, tl.sum(tl.where(here, val, 0.0), axis=0), NEG))
            tl.store(ended + slot, w_ended)
            w_el = tl.sum(tl.where(here, par_ended_len, 0), axis=0)
            tl.store(ended_len + slot, tl.where(w_carry, w_el, tl.where(w_ended, st + 1, 0)))
            src = (s * k + w_par) * L
            _copy_row(old_tokens + src, tokens + slot * L, cols, in_l, st, tl.where(w_carry, pad, w_tok), pad)
            w_lp = tl.sum(tl.where(here, tlp, 0.0), axis=0)
            _copy_row(old_scores + src, token_scores + slot * L, cols, in_l, st, tl.where(w_carry, 0.0, w_lp), 0.0)
            tl.store(out_live + slot, (w_keep & ~w_ended & ~done).to(tl.int8))
            tl.store(out_parent + slot, w_par)
            tl.store(out_tok + slot, w_tok)


@step_jit
def _sentence_step(top_lp, top_tok, row_of, c, scores, ended, ended_len, tokens, token_scores, old_tokens, old_scores,
                   steps, n_final, best_final, best_final_norm, fin_tokens, fin_scores, fin_len, fin_total, len_pow,
                   rule_kind, rule_ref, rule_keep, rule_param, n_rules, out_done, out_live, out_parent, out_tok,
                   k, W, z, Z1, L, eos, pad, mode, track_best,
                   P2: tl.constexpr, W2: tl.constexpr, L2: tl.constexpr, FP32: tl.constexpr):
    s = tl.program_id(0)
    NEG = float("-inf")
    kc = k * c
    sel, val = _best_of_pool(top_lp, row_of, c, scores, ended, s, k, W, P2, W2)
    lane = tl.arange(0, W2)
    in_w = lane < W
    carry = in_w & (sel >= kc)
    flat = tl.minimum(sel, kc - 1)
    par = tl.where(carry, sel - kc, flat // c)
    rr = tl.load(row_of + s * k + flat // c, mask=in_w, other=-1)
    from_row = in_w & (~carry) & (rr >= 0)
    tok = tl.where(carry, eos, tl.load(top_tok + rr * c + flat % c, mask=from_row, other=pad))
    tlp = tl.where(carry, 0.0, tl.load(top_lp + rr * c + flat % c, mask=from_row, other=0.0)).to(val.dtype)
    st = tl.load(steps + s)
    par_ended_len = tl.load(ended_len + s * k + par, mask=in_w, other=0)
    nf = tl.load(n_final + s)
    bf = tl.load(best_final + s)
    bfn = tl.load(best_final_norm + s)
    # Everything this program reads of the state is loaded: from here on it writes.
    tl.debug_barrier()
    length = tl.where(carry, par_ended_len, st + 1)
    valid = in_w & (val != NEG)
    # 3. finalisation (mode, beam_rules.FINALIZATION_CODES): "ours" (0) the ended run at the top,
    # "fairseq" (1) every ended one in the top k, "shrink" (2) every ended one in the top k - finals
    is_eos = valid & (tok == eos)
    first_open = tl.min(tl.where(is_eos, W2, lane), axis=0)
    limit = tl.where(mode == 2, k - nf, k)
    fin = tl.where(mode == 0, lane < first_open, is_eos & (lane < limit))
    keep = valid & tl.where(mode == 0, ~fin, ~is_eos)
    # 4. final hypotheses, the first Z of the sentence
    rank = nf + tl.cumsum(fin.to(tl.int64), axis=0) - 1
    ok = fin & (rank < z)
    _record_finals(ok, rank, par, length, val, tlp, old_tokens, old_scores, fin_tokens, fin_scores, fin_len, fin_total,
                   s, k, W, Z1, L, st, eos, pad, W2, L2)
    nf_new = nf + tl.sum(ok.to(tl.int64), axis=0)
    tl.store(n_final + s, nf_new)
    pw = tl.load(len_pow + length, mask=in_w, other=1.0)
    if track_best != 0:
        if FP32:  # IEEE division, as the CPU's (a GPU's float "/" may be approximate)
            norm = tl.math.div_rn(val, pw)
        else:
            norm = val / pw
        bf = tl.maximum(bf, tl.max(tl.where(ok, val, NEG), axis=0))
        bfn = tl.maximum(bfn, tl.max(tl.where(ok, norm, NEG), axis=0))
        tl.store(best_final + s, bf)
        tl.store(best_final_norm + s, bfn)
    keep = _shrink_and_prune(keep, val, tok, tlp, carry, pw, length, bf, bfn, nf_new, k, mode, rule_kind, rule_ref,
                             rule_keep, rule_param, n_rules, eos, W2, FP32)
    # 6. the new beam
    done = (nf_new >= z) | (tl.sum(keep.to(tl.int64), axis=0) == 0)
    _new_beam(keep, carry, tok, par, val, tlp, par_ended_len, done, old_tokens, old_scores, scores, ended, ended_len,
              tokens, token_scores, out_live, out_parent, out_tok, s, k, W, L, st, eos, pad, W2, L2)
    tl.store(steps + s, st + 1)
    tl.store(out_done + s, done.to(tl.int8))


@step_jit
def _rows_and_packet(out_done, out_live, out_parent, out_tok, row_of, sentences, n_final, fin_len, fin_total, rows,
                     packet, at_rows, at_finished, at_widest, at_count, at_sentence, at_final_count, at_final_len,
                     at_final_total, at_position, S, k, z, Z1, S2: tl.constexpr, K2: tl.constexpr, Z2: tl.constexpr):
    """The next rows and the packet (its field starts ``at_*`` from :data:`packets.BEAM_STEP`)."""
    sl, in_s, _, _, n_on, pos = finished_last(out_done, S, S2)
    kl, grid, live, count, rank, at = live_rows(out_live, sl, in_s, k, K2)
    parent = tl.load(out_parent + grid, mask=live, other=0)
    n = S * k
    tl.store(rows + at, tl.load(row_of + sl[:, None] * k + parent, mask=live, other=0), mask=live)
    tl.store(rows + n + at, tl.load(out_tok + grid, mask=live, other=0), mask=live)
    tl.store(rows + 2 * n + at, rank, mask=live)
    tl.store(rows + 3 * n + at, pos[:, None] + kl[None, :] * 0, mask=live)
    tl.store(rows + 4 * n + at, pos[:, None] * k + kl[None, :], mask=live)
    tl.store(packet + at_rows, tl.sum(count, axis=0).to(tl.float64))
    tl.store(packet + at_finished, (S - n_on).to(tl.float64))
    tl.store(packet + at_widest, tl.max(count, axis=0).to(tl.float64))
    tl.store(packet + at_count + pos, count.to(tl.float64), mask=in_s)
    tl.store(packet + at_sentence + pos, tl.load(sentences + sl, mask=in_s, other=0).to(tl.float64), mask=in_s)
    tl.store(packet + at_final_count + pos, tl.load(n_final + sl, mask=in_s, other=0).to(tl.float64), mask=in_s)
    zl = tl.arange(0, Z2)
    in_sz = in_s[:, None] & (zl < z)[None, :]
    fin = sl[:, None] * Z1 + zl[None, :]
    out = pos[:, None] * z + zl[None, :]
    tl.store(packet + at_final_len + out, tl.load(fin_len + fin, mask=in_sz, other=0).to(tl.float64), mask=in_sz)
    tl.store(packet + at_final_total + out, tl.load(fin_total + fin, mask=in_sz, other=0.0).to(tl.float64), mask=in_sz)
    tl.store(packet + at_position + pos, sl.to(tl.float64), mask=in_s)


_rule_tensors: Dict[Tuple[Tuple[int, ...], Tuple[float, ...], torch.device], Tuple[Tensor, ...]] = {}


def _rules_on(device: torch.device, ints: List[int], params: List[float]) -> Tuple[Tensor, ...]:
    """The rules' kinds, references and ended flags, and two parameters a rule (the kernel reads rule i's at 2i and
    2i + 1): encode_rules' list has two for kinds 2 and 4 (the C++ operator's layout), one for the others."""
    key = (tuple(ints), tuple(params), device)
    if key not in _rule_tensors:  # once per search and device: no copy per step
        triples = torch.tensor(ints or [0, 0, 0], dtype=torch.int32).view(-1, 3)
        pairs: List[float] = []
        at = 0
        for kind in ints[0::3]:
            two = kind in (2, 4)
            pairs += [params[at], params[at + 1] if two else 0.0]
            at += 2 if two else 1
        _rule_tensors[key] = (triples[:, 0].contiguous().to(device), triples[:, 1].contiguous().to(device),
                              triples[:, 2].contiguous().to(device),
                              torch.tensor(pairs or [0.0, 0.0], dtype=torch.float64, device=device))
    return _rule_tensors[key]


def triton_step(state_tensors: Sequence[Tensor], top_lp: Tensor, top_tok: Tensor, row_slot: Tensor, len_pow: Tensor,
                *, k: int, width: int, final_count: int, eos: int, pad: int, finalize: int, track_best: bool,
                rules: Tuple[List[int], List[float]]) -> StepResult:
    """One step by the Triton kernels (the contract of :mod:`fairseq_stream.ops.beam_step`, uncompacted)."""
    s, (r, c) = state_tensors[0].numel(), top_lp.shape
    cols = state_tensors[FIELDS.index("tokens")].size(2)
    w = min(width, k * c + k)
    sizes = dict(P2=triton.next_power_of_2(k * c + k), W2=triton.next_power_of_2(w), L2=bucket(cols),
                 S2=bucket(s), K2=triton.next_power_of_2(k), Z2=triton.next_power_of_2(final_count))
    signature = ("beam_step", top_lp.dtype, top_lp.device, tuple(sorted(sizes.items())))

    def launch(dry: bool) -> StepResult:
        state = [t.clone() for t in state_tensors] if dry else list(state_tensors)
        return _launch(state, top_lp.contiguous(), top_tok.contiguous(), row_slot, len_pow, sizes, k=k, w=w,
                       final_count=final_count, eos=eos, pad=pad, finalize=finalize, track_best=track_best, rules=rules)

    return first_contact(signature, launch)


def _launch(state_tensors: List[Tensor], top_lp: Tensor, top_tok: Tensor, row_slot: Tensor, len_pow: Tensor,
            sizes: Dict[str, int], *, k: int, w: int, final_count: int, eos: int, pad: int, finalize: int, track_best: bool,
            rules: Tuple[List[int], List[float]]) -> StepResult:
    f = dict(zip(FIELDS, state_tensors))
    s, dev = f["sentences"].numel(), top_lp.device
    r, c = top_lp.shape
    # a padding row (slot -1) writes a scratch entry past the slots, which no sentence reads
    row_of = torch.full((s * k + 1,), -1, dtype=torch.long, device=dev).scatter_(
        0, torch.where(row_slot >= 0, row_slot, s * k), torch.arange(r, device=dev))
    old_tokens, old_scores = f["tokens"].clone(), f["token_scores"].clone()  # read while the beam is rewritten
    cols, z1 = f["tokens"].size(2), f["fin_tokens"].size(1)
    done = torch.empty(s, dtype=torch.int8, device=dev)
    live = torch.empty(s, k, dtype=torch.int8, device=dev)
    parent = torch.empty(s, k, dtype=torch.long, device=dev)
    tok = torch.empty(s, k, dtype=torch.long, device=dev)
    kind, ref, spare, params = _rules_on(dev, *rules)
    n_rules = len(rules[0]) // 3
    _sentence_step[(s,)](
        top_lp, top_tok, row_of, c, f["scores"], f["ended"], f["ended_len"], f["tokens"],
        f["token_scores"], old_tokens, old_scores, f["steps"], f["n_final"], f["best_final"], f["best_final_norm"],
        f["fin_tokens"], f["fin_scores"], f["fin_len"], f["fin_total"], len_pow, kind, ref, spare, params, n_rules,
        done, live, parent, tok, k, w, final_count, z1, cols, eos, pad, finalize, int(track_best),
        P2=sizes["P2"], W2=sizes["W2"], L2=sizes["L2"], FP32=top_lp.dtype == torch.float32)
    rows = torch.zeros(5, s * k, dtype=torch.long, device=dev)
    rows[4].fill_(-1)  # the next rows' slots past the live ones: padding rows
    at = packets.BEAM_STEP.starts(s, final_count)
    packet = torch.empty(at[-1], dtype=torch.float64, device=dev)
    _rows_and_packet[(1,)](done, live, parent, tok, row_of, f["sentences"], f["n_final"], f["fin_len"], f["fin_total"],
                           rows, packet, *at[:-1], s, k, final_count, z1, S2=sizes["S2"], K2=sizes["K2"],
                           Z2=sizes["Z2"])
    return StepResult(packet, rows, False)
