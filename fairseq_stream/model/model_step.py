"""The only module that calls the models: encode sources, step rows of hypotheses, reorder caches.

Strategies and the scheduler see an ensemble through :class:`ModelStep` and the opaque
:class:`DecoderState` of a set of *rows* (hypotheses), each tied to a source sentence: an
index into an encoded pool (:meth:`ModelStep.encode`), or the handle of a sentence a stream
admitted (:meth:`ModelStep.admit` encodes a refill's sentences into the stream's slots,
:mod:`fairseq_stream.model.encoder_slots`). Two adapters sit behind it, chosen per model:

* fairseq transformers run on :class:`~fairseq_stream.model.block_decoder.BlockDecoder`
  (blocks, per-row positions, per-sentence encoder keys);
* any other ``FairseqIncrementalDecoder`` (LSTM, convolutional, hand-written test decoders)
  runs through fairseq's own ``forward`` with an incremental state, one token per step, rows of
  equal length. fairseq skips the encoder-attention cache reorder when the new order has the
  old size (``MultiheadAttention.reorder_incremental_state``), which silently mixes sentences
  once rows are permuted; :meth:`_GenericAdapter.select` reorders those buffers itself.

Ensembles average probabilities as fairseq does: ``logsumexp(log p_m) − log M``.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from fairseq_stream.model.encoder_slots import (
    SLOT_MODULUS, EncoderSlots, LiveBytes, SourceTable, tensors_in, write_memory,
)
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model.encoder import cpu_fallback, encoder_out
from fairseq_stream.model.ensemble import ensemble_scores, normalizes
from fairseq_stream.model.static.buckets import length_bucket
from fairseq_stream.model.static.graphs import StepGraphs
from fairseq_stream.model.static.modes import StepModeStats, resolve_step_mode
from fairseq_stream.model.static.region import StaticStep
from fairseq_stream.model.static.streams import StreamBuffers
from fairseq_stream.model.static.tail import RegionTail, StepScores
from fairseq_stream.model.row_cache import RowCache, SentenceIndex
from fairseq_stream.model.block_decoder import BlockDecoder, check_supported
from fairseq_stream.model import native_decoder
from fairseq_stream.model.native_loops import BeamLoopSearch, GreedySearch, VerifySearch


@dataclass
class PoolEncoding:
    """The encoded source sentences of one pool (a fairseq batch)."""

    per_model: List[Any]
    src_lengths: Tensor  # (N,) non-pad source tokens, EOS included

    @property
    def size(self) -> int:
        return int(self.src_lengths.numel())


#: What the decoder reads encoder states from: an encoded pool or a stream's slots.
Sources = Union[PoolEncoding, EncoderSlots]


def descendants_index(index: SentenceIndex, lineage: Tensor) -> SentenceIndex:
    """The index of rows whose ancestors are ``index``'s rows ``lineage`` (R',), each sentence's rows consecutive (as
    a beam step's packet lays them out): a row's sentence is its ancestor's."""
    local = index.local.index_select(0, lineage)
    _, counts = torch.unique_consecutive(local, return_counts=True)
    starts = torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    slot = torch.arange(local.numel(), dtype=index.slot.dtype, device=local.device) - starts
    return SentenceIndex(index.sentences, local, slot, int(counts.max()) if counts.numel() else 0).inherit(index)


@dataclass
class DecoderState:
    """Caches of ``R`` rows for every model of the ensemble.

    ``row_sentence`` (R,): pool index or stream handle of each row; a sentence's rows are consecutive
    (None where ``index`` says it: computed from the index when read — only a refill reads it, so a
    reorder by the strategy's index costs no gather of it).
    ``lengths`` (R,): target tokens fed so far (BOS included) = position of the next token.
    ``max_length`` (host): an upper bound of ``lengths``, so no step reads it from the device.
    ``history`` (R, T): fed tokens, kept only when a generic adapter needs full prefixes.
    ``index``: the rows' per-sentence layout for encoder attention, when the strategy knows it
    (built from ``row_sentence`` with host reads otherwise).
    """

    caches: List[Any]
    handles: Optional[Tensor]  # row_sentence as given (None: from ``index``)
    lengths: Tensor
    history: Optional[Tensor] = None
    index: Optional[SentenceIndex] = field(default=None, repr=False)
    max_length: int = 0

    def __post_init__(self) -> None:
        if self.handles is None and self.index is None:
            raise ValueError("DecoderState needs the rows' sentences or their index")

    @property
    def row_sentence(self) -> Tensor:
        if self.handles is None:
            self.handles = self.index.sentences.index_select(0, self.index.local)  # type: ignore[union-attr]
        return self.handles

    @property
    def rows(self) -> int:
        return int((self.handles if self.handles is not None else self.index.local).numel())  # type: ignore[union-attr]

    def sentence_index(self) -> SentenceIndex:
        if self.index is None:
            self.index = SentenceIndex.build(self.row_sentence)
        return self.index


#: one block decoder per decoder, kept while the model lives: a static step's pooled buffers, the buffer sets
#: streams hand back and the captured graphs serve every later run of the same model (a benchmark's
#: repeats, a session's calls)
_BLOCK_DECODERS: "weakref.WeakKeyDictionary[Any, BlockDecoder]" = weakref.WeakKeyDictionary()


def _block_decoder_of(decoder: Any) -> BlockDecoder:
    block = _BLOCK_DECODERS.get(decoder)
    if block is None:
        block = _BLOCK_DECODERS[decoder] = BlockDecoder(decoder)
    return block


#: one static step per decoder, kept as its block decoder is: its slab pool, idle stream buffers and graphs
_STATIC_STEPS: "weakref.WeakKeyDictionary[Any, StaticStep]" = weakref.WeakKeyDictionary()


def _static_step_of(decoder: Any) -> StaticStep:
    static = _STATIC_STEPS.get(decoder)
    if static is None:
        static = _STATIC_STEPS[decoder] = StaticStep(_block_decoder_of(decoder))
    return static


def _decoders_of(models: Optional[Sequence[Any]]) -> List[Any]:
    """The decoders of ``models`` and of the copies made of them (oneDNN's, int8's: the ones that run); every
    decoder a step has run when ``models`` is None."""
    from fairseq_stream.model.linear_kernels import REGISTRIES

    if models is None:
        return list(_BLOCK_DECODERS.keys()) + list(_STATIC_STEPS.keys())
    runs = list(models) + [copy for registry in list(REGISTRIES) for m in models for copy in registry.copies_of(m)]
    return [m.decoder for m in runs if getattr(m, "decoder", None) is not None]


def release_cached_memory(models: Optional[Sequence[Any]] = None) -> int:
    """Give back the memory kept with ``models`` (every model when None) for later runs and held by no run now: the
    static step's free cache slabs, idle stream buffers (their logits buffers) and the strategies' free bucket
    states, the step graphs, the step tables; then the allocator's cached blocks (CUDA) or the C library's free heap
    pages (Linux) go back to the system. The bytes the pools gave back, by their own accounting.

    ``TranslationSession.close()`` (and leaving ``with TranslationSession.load(...)``) calls it. A command-line run
    needs no call: its process ends. The models stay usable: a later run fills the pools again (and captures its
    graphs again). The weights and what is made once from them (stacked q/k/v, the native step) are kept."""
    from fairseq_stream.model.row_cache import _TABLES
    from fairseq_stream.model.static.inputs import _PADDING_ROWS

    freed = 0
    for decoder in {id(d): d for d in _decoders_of(models)}.values():
        static = _STATIC_STEPS.get(decoder)
        if static is not None:
            freed += static.release()
    _TABLES.clear()  # (views that live runs hold keep their tables)
    _PADDING_ROWS.clear()
    _return_to_system()
    return freed


def _return_to_system() -> None:
    """Memory freed by Python goes back to the system: CUDA's cached blocks, glibc's free heap (``malloc_trim``)."""
    import gc

    gc.collect()  # leases and bucket states held only by reference cycles
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


class _TransformerAdapter:
    block_steps = True
    mixed_lengths = True

    def __init__(self, model: Any, *, static: bool = False, graph: bool = False, native: bool = False,
                 stats: Optional[StepModeStats] = None) -> None:
        self.model = model
        self.block_decoder = _block_decoder_of(model.decoder)
        self.block_decoder.check_weights()  # weights changed in place since the last generator: stacked again
        # --step-mode static|graph: the slot caches and the static step
        self.static_step: Optional[StaticStep] = _static_step_of(model.decoder) if static else None
        self.native = native  # --step-mode native: the eager step as one C++ call (model/native_decoder.py)
        self.stats = stats  # this generator's: its steps, and the graphs they captured or evicted
        # --step-mode graph: the model's step graphs, shared by its streams (keyed by the buffers they bind)
        self.graphs: Optional[StepGraphs] = (self.static_step.step_graphs()
                                             if graph and self.static_step is not None else None)
        # the stream's encoder slots and input/output buffers while it has sentences in flight (see drained)
        self.buffers: Optional[StreamBuffers] = None

    def _buffers(self) -> StreamBuffers:
        if self.buffers is None:
            self.buffers = self.static_step.streams.acquire()  # type: ignore[union-attr]
        return self.buffers

    def drained(self) -> bool:
        """The stream has nothing in flight: its buffer set goes back to the model, for the next stream
        (True when it held one: its encoder slots are the set's, and no longer the stream's)."""
        if self.buffers is None:
            return False
        self.static_step.streams.release(self.buffers)  # type: ignore[union-attr]
        self.buffers = None
        return True

    def encode(self, net_input: Dict[str, Tensor]) -> Any:
        return self.block_decoder.encoder_memory(encoder_out(self.model.encoder, net_input))

    def admit(self, memory: Any, net_input: Dict[str, Tensor], free: Tensor, size: int, meter: LiveBytes,
              *, pad: int, eos: int, left_pad: bool) -> Any:
        """Encode only the admitted sentences and write their keys/values into their slots."""
        block = self.block_decoder.encoder_memory(encoder_out(self.model.encoder, net_input), keep_padding=True)
        meter.track(block.keys + block.values + ([] if block.padding is None else [block.padding]))
        if self.static_step is not None:  # slot buffers of doubling widths, kept by the static step: graphs bind to them
            return write_memory(memory, block, free, size, meter, width_of=length_bucket,
                                alloc=self._buffers().memory_buffer)
        return write_memory(memory, block, free, size, meter)

    def initial(self, memory: Any, sentences: Tensor) -> RowCache:
        if self.static_step is not None:
            return self.static_step.empty_cache(len(sentences), memory.keys[0])
        # the native step reads through a row table: caches that never move (model/row_arena.py)
        fixed = self.native and not isinstance(self.block_decoder.native_decoder(), str)
        return self.block_decoder.empty_cache(len(sentences), memory.keys[0], fixed=fixed)

    def step(self, memory: Any, cache: RowCache, state: DecoderState, tokens: Tensor,
             block_mask: Optional[Tensor], tail: Optional[RegionTail] = None) -> tuple:
        """Logits (R, b, V), the cache, how the step ran (``replayed``, ``static``, ``native`` or ``eager``)
        and what ``tail`` returned, where a static step ran it inside its region (None otherwise)."""
        if self.static_step is not None:  # its positions are the rows' cache lengths (= state.lengths), in its region
            done = self.static_step.forward(cache, tokens, memory, state.sentence_index(),
                                            block_mask, buffers=self._buffers(), graphs=self.graphs, stats=self.stats,
                                            tail=tail)
            if done is not None:
                return done
            if self.stats is not None:
                self.stats.fallback("a step with no rows or a per-row block mask")
        positions = state.lengths.unsqueeze(1) + torch.arange(tokens.size(1), device=tokens.device)
        if self.native:
            done = self.block_decoder.forward_native(cache, tokens, positions, memory, state.sentence_index(),
                                                     block_mask, max_position=state.max_length + tokens.size(1) - 1)
            if not isinstance(done, str):
                return done[0], done[1], "native", None
            if self.stats is not None:
                self.stats.fallback(done)
        feats, cache = self.block_decoder.forward(cache, tokens, positions, memory, state.sentence_index(),
                                                  block_mask, max_position=state.max_length + tokens.size(1) - 1)
        return self.block_decoder.logits(feats), cache, "eager", None

    def greedy(self, memory: Any, cache: RowCache, state: DecoderState, first: Tensor,
               steps: int) -> Union[Tuple[Tensor, RowCache], str]:
        """``steps`` native steps fed their own arg-max after the block ``first`` (:meth:`ModelStep.greedy_steps`)."""
        if not self.native:
            return "not --step-mode native"
        positions = state.lengths.unsqueeze(1) + torch.arange(first.size(1), device=first.device)
        return self.block_decoder.greedy_native(cache, first, steps, positions, memory, state.sentence_index(),
                                                max_position=state.max_length + first.size(1) - 1)

    def beam_search(self, memory: Any, cache: RowCache, state: DecoderState, first: Tensor,
                    search: "GreedySearch | BeamLoopSearch") -> Union[Tuple[Optional[Tensor], RowCache, int], str]:
        """Native steps searched by a beam's rule (:meth:`ModelStep.beam_search`): the greedy loop's or a wider beam's."""
        if not self.native:
            return "not --step-mode native"
        run = (self.block_decoder.beam_search_native if isinstance(search, BeamLoopSearch)
               else self.block_decoder.greedy_search_native)
        return run(cache, first, state.lengths.unsqueeze(1), memory, state.sentence_index(),
                   max_position=state.max_length, search=search)

    def verify(self, memory: Any, cache: RowCache, state: DecoderState, feed: Tensor, search: VerifySearch,
               draft: Optional["_TransformerAdapter"]) -> Union[Tuple[Tensor, RowCache, int, Optional[RowCache]], str]:
        """Native Jacobi iterations of one sentence (:meth:`ModelStep.verify`)."""
        if not self.native or (draft is not None and not draft.native):
            return "not --step-mode native"
        return self.block_decoder.verify_native(cache, feed, memory, state.sentence_index(), search,
                                                None if draft is None else draft.block_decoder)

    def select(self, cache: RowCache, rows: Tensor) -> RowCache:
        return cache.select(rows)

    def narrow(self, cache: RowCache, start: int, length: int) -> RowCache:
        return cache.narrow(start, length)

    def concat(self, caches: Sequence[RowCache]) -> RowCache:
        return RowCache.concat(caches)

    def accept(self, cache: RowCache, keep: Tensor, block: int, width: int) -> RowCache:
        return cache.accept(keep, block, width)


def normalizes_itself(model: Any) -> bool:
    """True when ``model``'s scores are not the log-softmax of its decoder's output: an adaptive
    softmax, or a model or decoder with its own ``get_normalized_probs`` (a decoder returning
    probabilities, as fairseq's test decoders do). Its scores must come from
    ``model.get_normalized_probs`` (what fairseq's generator calls); for the others that is
    ``log_softmax`` of the output, which the output layer computes from the raw scores itself."""
    from fairseq.models import BaseFairseqModel, FairseqDecoder
    from fairseq.models.transformer import TransformerModelBase

    decoder = getattr(model, "decoder", None)
    if decoder is None or not hasattr(model, "get_normalized_probs"):
        return False  # not a fairseq model (a test's stand-in)
    if getattr(decoder, "adaptive_softmax", None) is not None:
        return True
    # fairseq's transformer re-declares the model's method only to export it to TorchScript (same body)
    delegating = {BaseFairseqModel.get_normalized_probs, TransformerModelBase.get_normalized_probs}
    return (getattr(type(model), "get_normalized_probs", None) not in delegating
            or type(model).get_normalized_probs_scriptable is not BaseFairseqModel.get_normalized_probs_scriptable
            or type(decoder).get_normalized_probs is not FairseqDecoder.get_normalized_probs
            or type(decoder).get_normalized_probs_scriptable is not FairseqDecoder.get_normalized_probs_scriptable)


def _is_encoder_attention_buffer(name: str, attn_ids: set) -> bool:
    return name.split(".")[0] in attn_ids


class _GenericAdapter:
    """Any incremental fairseq decoder, through its own ``forward`` (one token per step)."""

    block_steps = False

    def __init__(self, model: Any) -> None:
        from fairseq.models import FairseqIncrementalDecoder
        from fairseq.models.lstm import LSTMDecoder
        from fairseq.modules import MultiheadAttention

        if not isinstance(model.decoder, FairseqIncrementalDecoder):
            raise FairseqStreamError(
                f"{type(model.decoder).__name__} cannot decode incrementally; fairseq-stream needs "
                "a FairseqIncrementalDecoder"
            )
        self.model = model
        # An LSTM decoder reads only the last token and has no positions: rows of different
        # lengths may share a step (the paper's suggestion for VAR-STR-FIFO on RNNs).
        self.mixed_lengths = isinstance(model.decoder, LSTMDecoder)
        # Scores through fairseq's own normalisation where it is more than a log-softmax.
        self.normalizes_itself = normalizes_itself(model)
        self._enc_attn_ids = {
            m._incremental_state_id
            for m in model.decoder.modules()
            if isinstance(m, MultiheadAttention) and m.encoder_decoder_attention
        }

    def encode(self, net_input: Dict[str, Tensor]) -> Any:
        return self.model.encoder.forward_torchscript(net_input)

    def admit(self, memory: Optional[SourceTable], net_input: Dict[str, Tensor], free: Tensor, size: int,
              meter: LiveBytes, *, pad: int, eos: int, left_pad: bool) -> SourceTable:
        """Write the admitted sources into the table and encode the table (see :class:`SourceTable`)."""
        table = SourceTable.write(memory, net_input["src_tokens"], net_input["src_lengths"], free, size,
                                  pad=pad, eos=eos, left_pad=left_pad)
        # fairseq batches come longest first, and some encoders rely on it (the LSTM packs its
        # input with enforce_sorted): encode in that order, then put the rows back in slot order.
        order = torch.argsort(table.lengths, descending=True, stable=True)
        encoded = self.encode({"src_tokens": table.trimmed().index_select(0, order),
                               "src_lengths": table.lengths.index_select(0, order)})
        table.encoder_out = self.model.encoder.reorder_encoder_out(encoded, torch.argsort(order))
        meter.track(tensors_in(table.encoder_out))
        return table

    def initial(self, memory: Any, sentences: Tensor) -> Dict[str, Any]:
        return {}

    def step(self, memory: Any, cache: Dict[str, Any], state: DecoderState, tokens: Tensor,
             block_mask: Optional[Tensor], tail: Any = None) -> tuple:
        if tokens.size(1) != 1:
            raise FairseqStreamError(
                f"{type(self.model.decoder).__name__} decodes one token per step; this strategy "
                "needs block steps (fairseq transformer models only)"
            )
        rows = state.row_sentence
        if isinstance(memory, SourceTable):  # a stream's slots: handle mod modulus
            memory, rows = memory.encoder_out, rows % SLOT_MODULUS
        enc = self.model.encoder.reorder_encoder_out(memory, rows)
        prefix = torch.cat([state.history, tokens], dim=1)
        out = self.model.decoder.forward(prefix, encoder_out=enc, incremental_state=cache)
        if self.normalizes_itself:  # adaptive softmax, probabilities: log-probabilities as fairseq gets them
            last = (out[0][:, -1:, :],) + tuple(out[1:])
            return self.model.get_normalized_probs(last, log_probs=True), cache, "eager", None
        return out[0][:, -1:, :], cache, "eager", None

    def select(self, cache: Dict[str, Any], rows: Tensor) -> Dict[str, Any]:
        if not cache:
            return cache
        # Take the encoder-attention buffers out: fairseq would skip them for same-size orders.
        enc = {k: v for k, v in cache.items() if _is_encoder_attention_buffer(k, self._enc_attn_ids)}
        rest = {k: v for k, v in cache.items() if k not in enc}
        self.model.decoder.reorder_incremental_state_scripting(rest, rows)
        for name, buf in enc.items():
            rest[name] = {k: (None if t is None else t.index_select(0, rows)) for k, t in buf.items()}
        return rest

    def narrow(self, cache: Dict[str, Any], start: int, length: int) -> Dict[str, Any]:
        # fairseq's reorder rewrites the buffers' dicts in place: reorder copies of them.
        copied = {name: dict(buf) if isinstance(buf, dict) else buf for name, buf in cache.items()}
        device = next(self.model.parameters()).device
        return self.select(copied, torch.arange(start, start + length, device=device))

    def concat(self, caches: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
        if len(caches) == 1:
            return caches[0]
        out: Dict[str, Any] = {}
        for name in caches[0]:
            out[name] = {}
            for key in caches[0][name]:
                parts = [c[name][key] for c in caches]
                if all(p is None for p in parts):
                    out[name][key] = None
                    continue
                if any(p is None for p in parts):
                    raise FairseqStreamError("cannot merge incremental states of this decoder")
                dim = 1 if key in ("prev_hiddens", "prev_cells") else 0  # LSTM stacks layers first
                out[name][key] = torch.cat(parts, dim=dim)
        return out

    def accept(self, cache: Any, keep: Tensor, block: int, width: int) -> Any:
        raise FairseqStreamError("block steps need fairseq transformer models")


def _cache_lengths(caches: Sequence[Any], compute: Any) -> Tensor:
    """The rows' lengths of a new state: one transformer's cache holds them already (``RowCache.lens``: the tokens
    fed, changed by every step, reorder and split as ``DecoderState.lengths`` is), so they are that tensor, not a
    second one computed beside it; ``compute()`` otherwise (an ensemble, fairseq's incremental states)."""
    if len(caches) == 1 and isinstance(caches[0], RowCache):
        return caches[0].lens
    return compute()


def _why_not_native(models: Sequence[Any]) -> Optional[str]:
    """Why ``--step-mode auto`` cannot take the native step on a CPU for ``models`` ("" where only its kernel is
    missing); None where it can."""
    for i, model in enumerate(models):
        decoder = getattr(model, "decoder", None)
        why = check_supported(decoder)
        if why is None:
            why = native_decoder.uncovered(decoder)
        if why is not None:
            return why if len(models) == 1 else f"model {i + 1}: {why}"
    return None if native_decoder.kernel_available() is None else ""


class ModelStep:
    """An ensemble seen as: encode sources, then step/select/concat rows of hypotheses."""

    def __init__(self, models: Sequence[Any], *, temperature: float = 1.0, step_mode: str = "eager") -> None:
        """``temperature`` and ``step_mode`` as checked by engine/validation.py (``auto``: graph on CUDA, native on
        a CPU where the C++ step runs every model, else eager)."""
        self.models = list(models)
        self.temperature = temperature
        param = next(self.models[0].parameters(), None)
        self.device = torch.device("cpu") if param is None else param.device
        self.step_mode = resolve_step_mode(step_mode, self.device)
        not_native = None  # why auto took eager on a CPU: named in the closing statistics
        if step_mode == "auto" and self.step_mode == "native":
            not_native = _why_not_native(self.models)
            if not_native is not None:
                self.step_mode = "eager"  # auto takes native only where it runs every step
        self.step_stats = StepModeStats()  # how the run's steps ran (the closing statistics)
        static = self.step_mode in ("static", "graph")
        self.adapters = [self._adapter(m, static, self.step_mode == "native") for m in self.models]
        self.fallbacks = self._encoder_fallbacks()  # what drops a bit-exactness promise (the closing statistics)
        if not_native:  # (a kernel that is not there is named by the kernels' own fallback)
            self.fallbacks["step mode"] = f"eager, not native ({not_native})"
        self.block_steps = all(b.block_steps for b in self.adapters)
        self.mixed_lengths = all(b.mixed_lengths for b in self.adapters)
        self.needs_history = not self.block_steps
        # One model: raw logits (normalised lazily by the output scorer); an ensemble: log-probs.
        self.normalized_scores = normalizes(len(self.models))
        self.max_decoder_positions = min(int(m.max_decoder_positions()) for m in self.models)

    def _adapter(self, model: Any, static: bool, native: bool) -> Any:
        why_not = check_supported(getattr(model, "decoder", None))
        if why_not is not None:
            if static or native:  # generic decoders keep fairseq's own incremental step
                self.step_stats.fallback(f"{type(model.decoder).__name__}: eager only")
            return _GenericAdapter(model)
        return _TransformerAdapter(model, static=static, graph=self.step_mode == "graph", native=native,
                                   stats=self.step_stats)

    def _encoder_fallbacks(self) -> Dict[str, str]:
        """``{"encoder": "fairseq's forward (why): ..."}`` for each transformer whose encoder runs
        fairseq's forward on a CPU in float32 (:func:`~fairseq_stream.model.encoder.cpu_fallback`)."""
        out: Dict[str, str] = {}
        for i, adapter in enumerate(self.adapters):
            why = cpu_fallback(adapter.model.encoder) if isinstance(adapter, _TransformerAdapter) else None
            if why is not None:
                name = "encoder" if len(self.adapters) == 1 else f"encoder of model {i + 1}"
                out[name] = f"fairseq's forward ({why}): batch-size bit-exactness not promised"
        return out

    def require_block_steps(self, what: str) -> None:
        if not self.block_steps:
            names = ", ".join(sorted({type(b.model.decoder).__name__ for b in self.adapters if not b.block_steps}))
            raise FairseqStreamError(f"{what} needs fairseq transformer models (got {names})")

    # ---- sources --------------------------------------------------------------------------
    def encode(self, src_tokens: Tensor, src_lengths: Tensor, pad: int, eos: int) -> PoolEncoding:
        net_input = {"src_tokens": src_tokens, "src_lengths": src_lengths}
        lengths = src_tokens.ne(pad).long().sum(dim=1)
        return PoolEncoding([b.encode(net_input) for b in self.adapters], lengths)

    def slots(self) -> EncoderSlots:
        """An empty ``E`` for a stream (Yang2020 Algorithm 1, line 2)."""
        return EncoderSlots([None] * len(self.adapters))

    def admit(self, store: EncoderSlots, src_tokens: Tensor, src_lengths: Tensor, free: Tensor, *,
              pad: int, eos: int, left_pad: bool) -> None:
        """Encode the sentences one refill admits (Algorithm 1, line 9) into slots ``free`` (m,).

        ``src_tokens`` (m, w), padded on the left or right as fairseq's batches are; one
        encoder call per model. ``store.size`` slots are allocated (grown when needed).
        """
        net_input = {"src_tokens": src_tokens, "src_lengths": src_lengths}
        store.per_model = [b.admit(mem, net_input, free, store.size, store.meter, pad=pad, eos=eos, left_pad=left_pad)
                           for b, mem in zip(self.adapters, store.per_model)]

    def drained(self, store: EncoderSlots) -> None:
        """The stream of ``store`` has nothing in flight (no rows, no caches): a static step's buffers go
        back to the models, where the next stream (this one's next refill, or another generator's)
        takes them. Its slots are re-allocated at its next refill, from the buffer set it takes then."""
        for i, adapter in enumerate(self.adapters):
            if isinstance(adapter, _TransformerAdapter) and adapter.drained():
                store.per_model[i] = None

    def initial_state(self, pool: Sources, sentences: Tensor, bos: int) -> DecoderState:
        """One row per sentence in ``sentences`` (pool indices or stream handles), nothing fed yet."""
        caches = [b.initial(mem, sentences) for b, mem in zip(self.adapters, pool.per_model)]
        history = sentences.new_zeros(len(sentences), 0) if self.needs_history else None
        return DecoderState(caches, sentences, torch.zeros_like(sentences), history, SentenceIndex.one_per_row(sentences), 0)

    # ---- steps ----------------------------------------------------------------------------
    def step(self, pool: Sources, state: DecoderState, tokens: Tensor,
             block_mask: Optional[Tensor] = None) -> tuple:
        """Feed ``tokens`` (R, b); return next-token scores (R, b, V) and the new state.

        The scores are raw logits for one model and log-probabilities for an ensemble
        (:attr:`normalized_scores`); either way ``log p = scores − logsumexp(scores)``.
        """
        scored, new_state = self.scored_step(pool, state, tokens, block_mask)
        return scored.scores, new_state

    def _native_adapter(self, state: DecoderState) -> Optional["_TransformerAdapter"]:
        """The one transformer whose native operators may run several steps of ``state`` in one call (no ensemble,
        no temperature, ``--step-mode native``, no fed-token history); None otherwise."""
        if (len(self.adapters) != 1 or self.temperature != 1.0 or self.step_mode != "native"
                or state.history is not None):
            return None
        adapter = self.adapters[0]
        return adapter if isinstance(adapter, _TransformerAdapter) else None

    def greedy_steps(self, pool: Sources, state: DecoderState, first: Tensor,
                     steps: int) -> Optional[Tuple[Tensor, DecoderState]]:
        """Feed ``first`` (R,) or a block (R, f), then ``steps − 1`` times each row's arg-max of the last
        scores, as one native call: the arg-maxes (R, steps) and the new state — what :meth:`step` and
        ``scores[:, -1].argmax(-1)`` in a loop give (a draft's greedy proposals, search/speculative.py).
        None where the model cannot (an ensemble, a temperature, another step mode, a decoder the operator
        does not run): loop then."""
        adapter = self._native_adapter(state)
        if adapter is None or steps < 1:
            return None
        block = first if first.dim() == 2 else first.unsqueeze(1)
        done = adapter.greedy(pool.per_model[0], state.caches[0], state, block, steps)
        if isinstance(done, str):
            return None
        tokens, cache = done
        self.step_stats.count("native", steps)
        fed = block.size(1) + steps - 1
        new_state = DecoderState([cache], state.handles, state.lengths + fed, None, state.index,
                                 state.max_length + fed)
        return tokens, new_state

    def beam_search(self, pool: Sources, state: DecoderState, feed: Tensor, search: "GreedySearch | BeamLoopSearch"
                    ) -> Optional[Tuple[Optional[StepScores], DecoderState, List[int]]]:
        """A beam's steps run ahead as one native call: feed ``feed`` (R, 1), and while no sentence may end (the greedy
        beam, :class:`GreedySearch`: ``decoder_greedy_search``) or finishes (a wider beam of a lone group,
        :class:`BeamLoopSearch`: ``decoder_beam_search``, its rows reordered over the row arena in the call), search
        each step as the strategy would (its state updated in place) and feed its tokens; at most ``search.calls``
        calls. Returns the last call's scores, unsearched (the strategy's own step takes them; None where a beam loop
        searched that step too: ``search.ran`` has its packet, and the caller reorders), the new state (the last
        call's rows: a pruned beam's width changes from step to step) and the rows of each call made —
        :meth:`scored_step` that many times, the strategy's step between; or None where the model cannot
        (:meth:`greedy_steps`' conditions; a beam's cache over a row arena): the caller steps as usual."""
        adapter = self._native_adapter(state)
        if adapter is None or search.calls < 1 or feed.dim() != 2 or feed.size(1) != 1:
            return None
        done = adapter.beam_search(pool.per_model[0], state.caches[0], state, feed, search)
        if isinstance(done, str):
            return None
        logits, cache, calls = done
        self.step_stats.count("native", calls)
        handles, index, rows = state.handles, state.index, [state.rows] * calls
        if isinstance(search, BeamLoopSearch):  # the loop's reorders (the last step's, where searched, the caller's)
            self.step_stats.table_reorders += calls - 1
            rows = search.ran.rows  # type: ignore[union-attr]
            handles, index = None, descendants_index(state.sentence_index(), search.ran.lineage)  # type: ignore[union-attr]
        new_state = DecoderState([cache], handles, cache.lens, None, index, state.max_length + calls)
        return (None if logits is None else StepScores(logits)), new_state, rows

    def verify(self, pool: Sources, state: DecoderState, feed: Tensor,
               search: VerifySearch) -> Optional[Tuple[StepScores, DecoderState, List[int]]]:
        """One sentence's Jacobi iterations run ahead as one native call (``decoder_jacobi``, or ``decoder_speculate``
        with a draft, native too, whose catch-up and proposals run inside): feed the block ``feed`` (1, b), and
        while no iteration may end the sentence, verify it as the strategy would, guess the next block and feed
        it; at most ``search.calls`` calls. Returns the last call's scores, unsearched (the strategy's own step
        verifies them), the new state and the rows of each call made (one), with what the loop did in ``search.ran``;
        or None where the models cannot (:meth:`greedy_steps`' conditions, one row): the caller steps as usual."""
        adapter, draft = self._native_adapter(state), None
        if search.draft is not None:
            draft = search.draft.model._native_adapter(search.draft.state)
            if draft is None:
                return None
        if adapter is None or search.calls < 2 or state.rows != 1 or feed.size(0) != 1:
            return None
        done = adapter.verify(pool.per_model[0], state.caches[0], state, feed, search, draft)
        if isinstance(done, str):
            return None
        logits, cache, calls, draft_cache = done
        self.step_stats.count("native", calls)
        run = search.ran
        if search.draft is not None and draft_cache is not None and run is not None:
            ds = search.draft.state
            search.draft.model.step_stats.count("native", search.draft.gamma * len(run.accepted))
            run.draft_state = DecoderState([draft_cache], ds.handles, draft_cache.lens, None, ds.index, draft_cache.width)
        new_state = DecoderState([cache], state.handles, cache.lens, None, state.index, cache.width)
        return StepScores(logits), new_state, [1] * calls

    def run_ahead(self, pool: Sources, state: DecoderState, feed: Tensor, search: "GreedySearch | BeamLoopSearch | VerifySearch"
                  ) -> Optional[Tuple[Optional[StepScores], DecoderState, List[int]]]:
        """The scheduler's "ahead" hook: the strategy's native loop (:meth:`beam_search` or :meth:`verify`)."""
        if isinstance(search, VerifySearch):
            return self.verify(pool, state, feed, search)
        return self.beam_search(pool, state, feed, search)

    def strategy_pool(self, owner: type, make: Callable[[], Any]) -> Any:
        """The buffers of kind ``make`` that strategies of class ``owner`` keep with the model across runs (made by
        ``make`` the first time), so that a repeat of a run takes the addresses its step graphs were captured with;
        only where :attr:`takes_tails`. The model does not look inside them."""
        pools = self.adapters[0].static_step.strategy_pools
        key = (owner, make)
        if key not in pools:
            pools[key] = make()
        return pools[key]

    @property
    def takes_tails(self) -> bool:
        """Whether :meth:`scored_step` may run a strategy's :class:`RegionTail` inside the decoder step's
        region: one transformer under ``--step-mode static|graph`` (an ensemble's scores are averaged,
        a temperature divides them, after the step)."""
        return (len(self.adapters) == 1 and self.temperature == 1.0 and self.step_mode in ("static", "graph")
                and isinstance(self.adapters[0], _TransformerAdapter))

    def scored_step(self, pool: Sources, state: DecoderState, tokens: Tensor, block_mask: Optional[Tensor] = None,
                    *, tail: Optional[RegionTail] = None) -> Tuple[StepScores, DecoderState]:
        """:meth:`step`'s scores as a :class:`StepScores` with what ``tail`` (the strategy's output layer, and its
        search step) returned for the live rows, where the static step ran it inside its region — one CUDA graph
        replay with the decoder; ``top`` None where it did not (:attr:`takes_tails` false, a step that ran
        eager): the strategy runs it itself then."""
        tail = tail if self.takes_tails else None
        outputs, caches, ran = [], [], []
        made = None
        for adapter, memory, cache in zip(self.adapters, pool.per_model, state.caches):
            logits, cache, how, made = adapter.step(memory, cache, state, tokens, block_mask, tail)
            ran.append(how)
            outputs.append(logits)
            caches.append(cache)
        lprobs = ensemble_scores(outputs, self.temperature)  # (R, b, V)
        # an ensemble's step is as static (or native) as its least static model's
        self.step_stats.count(next(h for h in ("eager", "native", "static", "replayed") if h in ran))
        self.step_stats.output_in_step += made is not None
        self.step_stats.search_in_step += made is not None and made.searched
        history = None if state.history is None else torch.cat([state.history, tokens], dim=1)
        lengths = _cache_lengths(caches, lambda: state.lengths + tokens.size(1))
        new_state = DecoderState(caches, state.handles, lengths, history, state.index,
                                 state.max_length + tokens.size(1))
        scored = StepScores(lprobs) if made is None else StepScores(lprobs, made.top, made.searched)
        return scored, new_state

    def select(self, state: DecoderState, rows: Tensor, index: Optional[SentenceIndex] = None) -> DecoderState:
        """Rows ``rows`` of ``state`` (repetition allowed); keep sentences' rows consecutive.

        ``index``: the new rows' per-sentence layout when the caller knows it (no host read).
        """
        caches = [b.select(c, rows) for b, c in zip(self.adapters, state.caches)]
        if any(getattr(c, "arena", None) is not None for c in caches):  # caches that never move: a table copy
            self.step_stats.table_reorders += 1
        history = None if state.history is None else state.history.index_select(0, rows)
        if index is not None:
            index.inherit(state.index)
        handles = None if index is not None else state.row_sentence.index_select(0, rows)
        return DecoderState(caches, handles,
                            _cache_lengths(caches, lambda: state.lengths.index_select(0, rows)), history, index,
                            state.max_length)

    def split(self, state: DecoderState, rows: int, sentences: int) -> Tuple[DecoderState, DecoderState]:
        """The first ``rows`` rows (those of the first ``sentences`` sentences) and the rest: views of
        the transformer caches, no copy (a step writes only its own rows)."""
        ix = state.index
        parts = []
        for lo, hi, first, last in ((0, rows, 0, sentences), (rows, state.rows, sentences, None)):
            index = None
            if ix is not None:  # the layout is known: slice it instead of reading it again
                index = SentenceIndex(ix.sentences[first:last], ix.local[lo:hi] - first, ix.slot[lo:hi], ix.width)
            caches = [b.narrow(c, lo, hi - lo) for b, c in zip(self.adapters, state.caches)]
            history = None if state.history is None else state.history[lo:hi]
            parts.append(DecoderState(caches, state.row_sentence[lo:hi], state.lengths[lo:hi], history, index,
                                      state.max_length))
        return parts[0], parts[1]

    def concat(self, states: Sequence[DecoderState]) -> DecoderState:
        """Rows of several states in one (rows of different lengths need a transformer ensemble)."""
        if len(states) == 1:
            return states[0]
        lengths = torch.cat([s.lengths for s in states])
        if not self.mixed_lengths and bool((lengths != lengths[0]).any()):
            raise FairseqStreamError("rows of different lengths can only share a step with transformer models")
        caches = [b.concat([s.caches[i] for s in states]) for i, b in enumerate(self.adapters)]
        history = None
        if self.needs_history:
            width = max(s.history.size(1) for s in states)
            history = torch.cat([torch.nn.functional.pad(s.history, (width - s.history.size(1), 0)) for s in states])
        index = None
        if all(s.index is not None for s in states):
            index = SentenceIndex.concat([s.index for s in states])
        return DecoderState(caches, torch.cat([s.row_sentence for s in states]), lengths, history, index,
                            max(s.max_length for s in states))

    def accept(self, state: DecoderState, keep: Tensor, block: int, max_length: Optional[int] = None) -> DecoderState:
        """After a block step, keep the first ``keep[r]`` block tokens of each row in the cache.

        ``max_length``: the host-known maximum of the new lengths (the strategy's control
        read); read from the device when not given.
        """
        if max_length is None:
            max_length = int((state.lengths - block + keep).max()) if keep.numel() else 0
        caches = [b.accept(c, keep, block, max_length) for b, c in zip(self.adapters, state.caches)]
        return replace(state, caches=caches, lengths=_cache_lengths(caches, lambda: state.lengths - block + keep),
                       max_length=max_length)
