"""Target orders, word positions and masks of the IBDecoder family (Zhang2020 §4, Eqs. 4–12).

Pure functions on token lists and tensors (the training batch's rewrite is whole-tensor,
:func:`reorder_batch`; per-batch masks and encodings come from a small cache), shared by the training task
(:mod:`fairseq_stream.integration.ib_task`), the model
(:mod:`fairseq_stream.integration.ib_model`) and the multi-word beam
(:mod:`fairseq_stream.search.ib_beam`).

* ``h`` generation directions, ``c`` words per direction and step: ``z = h·c`` words per step.
* **IBDecoder** (h = 2): ``y_bd = [y1 yn, y2 yn−1, …]`` (Eq. 6); IBDecoder+SA (c = 2) keeps this
  order and enlarges the step (Eq. 12).
* **IMDecoder** (h = 4, 6, …): the sentence is split into h/2 near-equal segments, each
  interleaved as above, and step k holds the k-th word pair of every segment (Eq. 9).

End of sentence (our design; the paper only says a hypothesis ends when a word is EOS): each
segment's interleaved sequence is followed by EOS. In the interleaved order the end of a
segment is where its two directions *meet*, so an EOS there means "the middle is reached":
everything before it is the segment, what the step predicts after it is discarded. With one
segment (IBDecoder, IBDecoder+SA) a hypothesis ends as soon as any word of a step is EOS
(Algorithm 1, line 17). With several segments (IMDecoder) each segment ends on its own EOS,
its later slots are padding (ignored by the loss, forced at decoding), and the hypothesis ends
when every segment has ended; segments are padded with PAD pairs to a common number of steps.

``eos="step"`` (default) fills the rest of the meeting step with EOS (IMDecoder: the rest of
the segment's word pair). Why: the step's words are predicted independently, and with a single
EOS (``eos="single"``, the literal reading) the slot after it is padding, so for an even length
the right-to-left slot never learns what to say once the directions have met — at decoding it
emits a word there, duplicating one at the junction, and the two directions run past each
other. With the fill, every slot is trained to say EOS once its direction has nothing left
(for an odd length the left slot still emits the middle word while the right one says EOS).

* **Vanilla SA** (h = 1, Wang et al. 2018; Table 2 rows 6 and 8): the left-to-right order,
  ``c`` neighbouring words per step, positions ``t − 1`` (Eq. 5) and M(1, c); the target is
  the sentence and its EOS (``eos="step"``: EOS up to the end of the step).
* **Middle-to-side** (``order="middle-to-side"``, the ablation of Table 2 row 4): a segment is
  generated from its middle out to its two ends, "a reverse mode of IBDecoder". The paper
  gives no formula; our reading mirrors Eq. 6: with ``m = ⌈n/2⌉`` the order is
  ``[ym, ym+1, ym−1, ym+2, …]`` — the first slot of a step always walks left, the second
  always walks right, as in IBDecoder — and EOS follows once both ends are reached (for an odd
  length the left walk has the last word, paired with the right walk's EOS).
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable, List, Optional, Tuple

import torch
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError

EOS_FILLS = ("step", "single")
ORDERS = ("side-to-middle", "middle-to-side")
# Codes of :func:`reorder_index` for the slots that hold no word of the sentence.
EOS_CODE, PAD_CODE = -1, -2


def interleave(words: List[int]) -> List[int]:
    """Eq. 6: ``[y1, yn, y2, yn−1, …]``."""
    out, i, j = [], 0, len(words) - 1
    while i <= j:
        out.append(words[i])
        if i != j:
            out.append(words[j])
        i, j = i + 1, j - 1
    return out


def deinterleave(seq: List[int]) -> List[int]:
    """The inverse of :func:`interleave`: left-to-right words, then the right-to-left ones reversed."""
    return seq[::2] + seq[1::2][::-1]


def middle_out(words: List[int]) -> List[int]:
    """The middle-to-side order of a segment: ``[ym, ym+1, ym−1, ym+2, …]`` with ``m = ⌈n/2⌉`` (module doc)."""
    m = (len(words) + 1) // 2
    return [words[m - 1 - q // 2] if q % 2 == 0 else words[m + q // 2] for q in range(len(words))]


def arrange(words: List[int], h: int, order: str = "side-to-middle") -> List[int]:
    """One segment's words in generation order: left to right (h = 1), Eq. 6 or middle-to-side."""
    if h == 1:
        return list(words)
    return middle_out(words) if order == "middle-to-side" else interleave(words)


def unarrange(n: int, h: int, order: str = "side-to-middle") -> List[int]:
    """For a segment of ``n`` words in generation order: the slot of each word, in word order."""
    out = [0] * n
    for slot, word in enumerate(arrange(list(range(n)), h, order)):
        out[word] = slot
    return out


def n_segments(h: int) -> int:
    """Segments of the target: one for h = 1 and 2, h/2 for IMDecoder (Eq. 9)."""
    return max(1, h // 2)


def segment_sizes(n: int, segments: int) -> List[int]:
    """``n`` words in ``segments`` near-equal, contiguous segments (the first ones longer)."""
    return [n // segments + (1 if i < n % segments else 0) for i in range(segments)]


def check_hc(h: int, c: int) -> Optional[str]:
    """Why (h, c) is not supported, or None."""
    if h != 1 and (h < 2 or h % 2):
        return (f"--ib-h must be 1 (left to right: vanilla SA) or an even number >= 2 (directions come in "
                f"pairs), got {h}")
    if c < 1:
        return f"--ib-c must be >= 1, got {c}"
    if h > 2 and c != 1:
        return "IMDecoder (--ib-h > 2) predicts one word per direction: --ib-c must be 1"
    return None


def check_layout(h: int, c: int, order: str, independent: bool) -> Optional[str]:
    """Why the layout (h, c, order, independent directions) is not supported, or None."""
    problem = check_hc(h, c)
    if problem:
        return problem
    if order not in ORDERS:
        return f"--ib-order must be 'side-to-middle' or 'middle-to-side', got {order!r}"
    if h == 1 and order != "side-to-middle":
        return "--ib-order middle-to-side needs two directions (--ib-h >= 2); --ib-h 1 decodes left to right"
    if h == 1 and independent:
        return "--ib-independent-directions needs two directions (--ib-h >= 2); --ib-h 1 has one"
    return None


def reorder(words: List[int], h: int, c: int, eos: int, pad: int, fill: str = "step",
            order: str = "side-to-middle") -> List[int]:
    """A target sentence (without its EOS) → the decoder's training target (with EOS, see module doc).

    ``fill``: ``"step"`` completes the meeting step with EOS, ``"single"`` appends one EOS.
    ``order``: each segment's generation order, one of :data:`ORDERS` (h >= 2).
    """
    if fill not in EOS_FILLS:
        raise ValueError(f"fill must be one of {EOS_FILLS}, got {fill!r}")
    if h <= 2:
        seq = arrange(words, h, order) + [eos]
        if fill == "step":
            seq += [eos] * (-len(seq) % (h * c))
        return seq
    segments = h // 2
    sizes = segment_sizes(len(words), segments)
    starts = [sum(sizes[:i]) for i in range(segments)]
    parts = [arrange(words[s: s + n], h, order) + [eos] for s, n in zip(starts, sizes)]
    if fill == "step":
        parts = [p + [eos] * (len(p) % 2) for p in parts]
    steps = max(math.ceil(len(p) / 2) for p in parts)
    parts = [p + [pad] * (2 * steps - len(p)) for p in parts]
    return [tok for k in range(steps) for p in parts for tok in p[2 * k: 2 * k + 2]]


def reorder_width(words: int, h: int, c: int, fill: str = "step") -> int:
    """Length of :func:`reorder`'s output for a sentence of ``words`` words (non-decreasing in
    ``words``; the same for every order)."""
    segments = n_segments(h)
    r = h * c // segments  # EOS fills a segment's sequence up to a multiple of r: the step (h <= 2) or the word pair
    first = -(-words // segments) + 1  # the first (longest) segment's words and its EOS
    if fill == "step":
        first = -(-first // r) * r
    return first if h <= 2 else h * c * -(-first // r)


def reorder_index(lengths: Tensor, width: int, h: int, c: int, fill: str = "step",
                  order: str = "side-to-middle") -> Tensor:
    """:func:`reorder` of whole batches at once, as indices: entry ``[b, k]`` is the index of the
    word (in its sentence of ``lengths[b]`` words) at decoder slot ``k``, or EOS_CODE / PAD_CODE.

    Closed form of Eqs. 6 and 9: slot ``k`` belongs to segment ``g = (k mod z) // r`` and is
    position ``q = r·⌊k/z⌋ + k mod r`` of that segment's sequence (``r = z / segments`` words of
    a segment per step: ``c`` for h = 1, ``2c`` for h = 2, 2 for IMDecoder).
    """
    if fill not in EOS_FILLS:
        raise ValueError(f"fill must be one of {EOS_FILLS}, got {fill!r}")
    segments, z = n_segments(h), h * c
    r = z // segments
    k = torch.arange(width, device=lengths.device)  # (W,)
    g = torch.div(k % z, r, rounding_mode="floor")
    q = r * torch.div(k, z, rounding_mode="floor") + k % r
    n = lengths.unsqueeze(1)  # (B, 1)
    base, extra = torch.div(n, segments, rounding_mode="floor"), n % segments
    size = base + (g < extra)  # (B, W): words of slot k's segment (segment_sizes)
    start = g * base + torch.minimum(g, extra)
    filled = size + 1
    if fill == "step":
        filled = torch.div(filled + r - 1, r, rounding_mode="floor") * r
    half = torch.div(q, 2, rounding_mode="floor")
    if h == 1:  # left to right
        word = start + q
    elif order == "middle-to-side":  # ym, ym+1, ym−1, ym+2, … with m = ⌈n/2⌉
        middle = torch.div(size + 1, 2, rounding_mode="floor")
        word = start + torch.where(q % 2 == 0, middle - 1 - half, middle + half)
    else:  # interleave: y1, yn, y2, yn−1, …
        word = start + torch.where(q % 2 == 0, half, size - 1 - half)
    return torch.where(q < size, word, torch.where(q < filled, EOS_CODE, PAD_CODE))  # (B, W)


def sentence_words(target: Tensor, eos: int, pad: int) -> Tuple[Tensor, Tensor]:
    """A collated target (B, n) → its rows' words first, in order (B, n), and their numbers (B,):
    the non-padding tokens (wherever the padding is) without a final EOS, as :func:`reorder` takes them."""
    is_pad = target.eq(pad)
    order = torch.argsort(is_pad.to(torch.uint8), dim=1, stable=True)  # stable: words keep their order
    words = target.gather(1, order)
    count = target.size(1) - is_pad.sum(dim=1)
    last = words.gather(1, (count - 1).clamp(min=0).unsqueeze(1)).squeeze(1)  # PAD when count = 0
    return words, count - last.eq(eos).long()


def reorder_batch(target: Tensor, h: int, c: int, eos: int, pad: int, fill: str = "step",
                  order: str = "side-to-middle") -> Tuple[Tensor, int]:
    """Every row of a collated target (B, n) → :func:`reorder` of its words, padded to a common
    width; also the number of non-padding tokens. Whole-tensor ops, the order of each sentence
    length read from a cached :func:`reorder_index` table, and one read of two numbers from the
    device (the width and the count are host integers fairseq needs)."""
    words, lengths = sentence_words(target, eos, pad)  # (B, n), (B,)
    n = target.size(1)
    plan = _PLANS.get(n + 1, (h, c, fill, order, target.device))[: n + 1, : reorder_width(n, h, c, fill)]
    index = plan.index_select(0, lengths)  # (B, W(n)): wide enough for every row
    longest, ntokens = torch.stack([lengths.max(), index.ne(PAD_CODE).sum()]).tolist()
    index = index[:, : reorder_width(longest, h, c, fill)]  # the columns cut are padding in every row
    out = words.gather(1, index.clamp(min=0))
    return out.masked_fill(index.eq(EOS_CODE), eos).masked_fill(index.eq(PAD_CODE), pad), int(ntokens)


def restore_order(seq: List[int], h: int, c: int, eos: int, pad: int, order: str = "side-to-middle") -> List[int]:
    """Indices into a decoder output ``seq`` (any length, EOS anywhere) of its words in the
    original order: post(·) of Algorithm 1, line 28. Apply them to tokens and scores alike."""
    if h <= 2:
        cut = seq.index(eos) if eos in seq else len(seq)
        return unarrange(cut, h, order)
    parts: List[List[int]] = [[] for _ in range(h // 2)]
    for i in range(len(seq)):
        parts[(i % h) // 2].append(i)
    out: List[int] = []
    for part in parts:
        toks = [seq[i] for i in part]
        cut = toks.index(eos) if eos in toks else len(toks)
        kept = [i for i in part[:cut] if seq[i] != pad]
        out += [kept[slot] for slot in unarrange(len(kept), h, order)]
    return out


def restore(seq: List[int], h: int, c: int, eos: int, pad: int, order: str = "side-to-middle") -> List[int]:
    """Decoder output → words in the original order (see :func:`restore_order`)."""
    return [seq[i] for i in restore_order(seq, h, c, eos, pad, order)]


def slot_positions(slots: Tensor, h: int, mode: str = "bidirectional") -> Tensor:
    """Word positions of 0-based target slots ``t − 1`` (float, for sinusoidal encodings).

    ``bidirectional`` (h = 2): Eq. 7, ``(−1)^(t−1)·⌈t/2⌉``, negative for right-to-left words.
    IMDecoder (h > 2): the step index ``⌊(t−1)/h⌋`` of Eq. 10 (the direction goes to
    :func:`slot_directions`). ``vanilla``: Eq. 5, ``t − 1`` (the ablation of Table 2).
    """
    t = slots.double() + 1
    if mode == "vanilla" or h == 1:  # one direction (vanilla SA): Eq. 5
        return t - 1
    if h == 2:
        sign = 1.0 - 2.0 * torch.remainder(t - 1, 2)
        return sign * torch.ceil(t / 2)
    return torch.floor((t - 1) / h)


def slot_directions(slots: Tensor, h: int) -> Tensor:
    """Direction index ``(t − 1) mod h`` of each slot (Eq. 10)."""
    return torch.remainder(slots, h)


def sinusoid(positions: Tensor, dim: int) -> Tensor:
    """fairseq's sinusoidal encoding (``SinusoidalPositionalEmbedding.get_embedding``) of any real positions."""
    half = dim // 2
    scale = math.log(10000) / (half - 1)
    freq = torch.exp(torch.arange(half, dtype=torch.float64, device=positions.device) * -scale)
    angles = positions.double().unsqueeze(-1) * freq
    emb = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
    if dim % 2 == 1:
        emb = torch.nn.functional.pad(emb, (0, 1))
    return emb


def allowed(i: Tensor, j: Tensor, h: int, c: int, *, vanilla: bool = False, independent: bool = False) -> Tensor:
    """Boolean M(h, c) of Eq. 4 between 0-based slots ``i`` (queries) and ``j`` (keys), broadcast.

    Slot ``i`` may see slot ``j`` when ``⌈(i+1)/z⌉ ≥ ⌈(j+1)/z⌉`` (all earlier steps and its own
    step), or ``j ≤ i`` with the vanilla mask; ``independent`` also requires the same direction
    (the "independent directions" ablation of Table 2).
    """
    z = h * c
    ok = (j <= i) if vanilla else (torch.div(i, z, rounding_mode="floor") >= torch.div(j, z, rounding_mode="floor"))
    if independent:
        ok = ok & (torch.remainder(i, h) == torch.remainder(j, h))
    return ok


def mask(n: int, h: int, c: int, *, vanilla: bool = False, independent: bool = False,
         dtype: torch.dtype = torch.float32, device=None) -> Tensor:
    """Additive (n, n) self-attention mask M(h, c): 0 where allowed, −inf elsewhere."""
    idx = torch.arange(n, device=device)
    ok = allowed(idx.unsqueeze(1), idx.unsqueeze(0), h, c, vanilla=vanilla, independent=independent)
    return torch.zeros(n, n, dtype=dtype, device=device).masked_fill(~ok, float("-inf"))


class PrefixCache:
    """Per-batch constants whose answer for length n is the first n rows of a larger one (M(h, c)
    of Eq. 4, the position encodings of Eqs. 7/10): built once per key at a size rounded up to
    ``step``, then sliced, so batches of every length reuse one tensor, as fairseq's own decoder
    reuses its causal mask. At most ``max_keys`` keys (the least recently used goes first)."""

    def __init__(self, build: Callable[..., Tensor], *, max_keys: int = 16, step: int = 64) -> None:
        self.build, self.max_keys, self.step = build, max_keys, step
        self.tables: "OrderedDict[Hashable, Tensor]" = OrderedDict()

    def get(self, n: int, key: Tuple[Hashable, ...]) -> Tensor:
        """A tensor of at least ``n`` rows for ``key`` (``build(size, *key)``); the caller slices it."""
        table = self.tables.get(key)
        if table is None or table.size(0) < n:
            table = self.build(-(-max(n, 1) // self.step) * self.step, *key)
        self.tables[key] = table
        self.tables.move_to_end(key)
        while len(self.tables) > self.max_keys:
            self.tables.popitem(last=False)
        return table


def _mask_table(size: int, h: int, c: int, vanilla: bool, independent: bool, dtype: torch.dtype, device) -> Tensor:
    return mask(size, h, c, vanilla=vanilla, independent=independent, dtype=dtype, device=device)


def _encoding_table(size: int, h: int, mode: str, dim: int, dtype: torch.dtype, device) -> Tensor:
    slots = torch.arange(size, device=device)
    return sinusoid(slot_positions(slots, h, mode), dim).to(dtype)


def _plan_table(size: int, h: int, c: int, fill: str, order: str, device) -> Tensor:
    """Row L: :func:`reorder_index` of a sentence of L words (L < size)."""
    return reorder_index(torch.arange(size, device=device), reorder_width(size - 1, h, c, fill), h, c, fill, order)


_PLANS = PrefixCache(_plan_table)
_MASKS = PrefixCache(_mask_table)
_ENCODINGS = PrefixCache(_encoding_table)


def cached_mask(n: int, h: int, c: int, *, vanilla: bool = False, independent: bool = False,
                dtype: torch.dtype = torch.float32, device=None) -> Tensor:
    """:func:`mask` (n, n) as a view of a cached one: equal values, built once per (h, c, dtype, device)."""
    key = (h, c, vanilla, independent, dtype, torch.device(device or "cpu"))
    return _MASKS.get(n, key)[:n, :n]


def cached_slot_encodings(n: int, h: int, mode: str, dim: int, *, dtype: torch.dtype = torch.float32,
                          device=None) -> Tensor:
    """Sinusoidal encodings (n, dim) of slots 0 … n−1 (:func:`slot_positions` → :func:`sinusoid`, in
    ``dtype``), the same every batch: computed once in float64 per (h, mode, dim, dtype, device)."""
    key = (h, mode, dim, dtype, torch.device(device or "cpu"))
    return _ENCODINGS.get(n, key)[:n]


def shift_inputs(target: Tensor, z: int, bos: int, pad: int) -> Tensor:
    """Decoder inputs: the target shifted right by ``z`` with ``z`` start symbols (§4, footnote 3)."""
    b, n = target.shape
    start = target.new_full((b, min(z, n)), bos)
    return torch.cat([start, target[:, : max(0, n - z)]], dim=1)


def dedup_indices(words: List[int], max_n: int = 4) -> List[int]:
    """Indices of ``words`` kept when immediately repeated n-grams (n ≤ ``max_n``) are removed:
    the deduplication of §5.1 / Figure 4 ("a b a b c" → "a b c")."""
    keep = list(range(len(words)))
    for n in range(1, max_n + 1):
        out: List[int] = []
        for i in keep:
            out.append(i)
            if len(out) >= 2 * n and [words[k] for k in out[-n:]] == [words[k] for k in out[-2 * n: -n]]:
                del out[-n:]
        keep = out
    return keep


def dedup(words: List[int], max_n: int = 4) -> List[int]:
    return [words[i] for i in dedup_indices(words, max_n)]


@dataclass(frozen=True)
class IBSpec:
    """The decoder's generation layout: ``h`` directions × ``c`` words per step, and ablations."""

    h: int = 2
    c: int = 1
    vanilla_mask: bool = False
    vanilla_positions: bool = False
    independent_directions: bool = False
    order: str = "side-to-middle"  # ORDERS: "middle-to-side" is the ablation of Table 2 row 4

    @property
    def z(self) -> int:
        return self.h * self.c

    @staticmethod
    def from_args(args: Any) -> "IBSpec":
        spec = IBSpec(
            h=int(getattr(args, "ib_h", 2)),
            c=int(getattr(args, "ib_c", 1)),
            vanilla_mask=getattr(args, "ib_mask", "relaxed") == "vanilla",
            vanilla_positions=getattr(args, "ib_positions", "bidirectional") == "vanilla",
            independent_directions=bool(getattr(args, "ib_independent_directions", False)),
            # Checkpoints from before the option have no ``ib_order``: they were side-to-middle.
            order=str(getattr(args, "ib_order", "side-to-middle")),
        )
        problem = check_layout(spec.h, spec.c, spec.order, spec.independent_directions)
        if problem:
            raise FairseqStreamError(problem)
        return spec

    def describe(self) -> str:
        if self.h == 1:
            name = "left-to-right" if self.c == 1 else "vanilla SA"
        elif self.h > 2:
            name = "IMDecoder"
        else:
            name = "IBDecoder" if self.c == 1 else "IBDecoder+SA"
        order = ", middle-to-side" if self.order == "middle-to-side" else ""
        return f"{name} (h={self.h}, c={self.c}{order})"
