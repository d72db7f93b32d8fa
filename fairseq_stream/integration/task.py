"""``--task translation_stream``: fairseq's translation task with fairseq-stream's decoders.

It differs from ``translation`` in these ways only:

* its config carries ``--search`` and the strategy options, and :meth:`build_generator`
  returns the chosen strategy (``beam`` is fairseq's own generator);
* batches never lose sentences: fairseq-fixed 0.12.3.1's ``batch_by_size`` drops the last
  ``n mod 8`` sentences under the default ``--required-batch-size-multiple 8``; every batch
  iterator of this task puts the dropped tail back as one final batch (fairseq 0.12.2's
  behaviour), for training, validation and generation alike;
* ``--stream-input-order as-given`` reads the input in its own order instead of fairseq's
  length-sorted one (for every ``--search``);
* missing dictionaries, splits and over-long inputs are one-line errors; fairseq-interactive
  reports a line it cannot translate by its input line number, skips it and goes on
  (:mod:`fairseq_stream.integration.input_checks`);
* :meth:`build_generator` refuses generation options no strategy can honour (a length limit
  below ``--min-len``, ``--beam 0``) for every ``--search``, and under the fairseq CLIs adds a
  sentence progress bar and a thread count that does not oversubscribe a busy CPU
  (:mod:`fairseq_stream.integration.runtime`);
* under fairseq-generate and fairseq-interactive its batch iterators can be read ahead
  (:mod:`fairseq_stream.integration.read_ahead`; fairseq-interactive's input across ``--buffer-size``
  chunks: :mod:`fairseq_stream.integration.interactive_input`), so that our generators stream across
  fairseq's batches instead of draining at each one's end (unless ``--stream-per-batch``);
* under fairseq-generate and fairseq-interactive (:mod:`fairseq_stream.integration.compat`) the data
  loader runs in the main process unless ``--num-workers`` is given: a worker whose batches cannot
  reach the main process (``ulimit -f``, ``ulimit -n``) left the run waiting forever;
* ``--tokenizer moses`` detokenises typographic quotes and apostrophes as the package's own text
  pipeline does (:class:`fairseq_stream.integration.text.TypographicMoses`).
"""

import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from fairseq import utils
from fairseq.data import BaseWrapperDataset, FairseqDataset, data_utils
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_stream.integration import interactive_input
from fairseq_stream.integration.generator import StreamGenerator
from fairseq_stream.integration.build import build_generator
from fairseq_stream.errors import DirectionMismatch, FairseqStreamError
from fairseq_stream.integration.checkpoints import checkpoint_being_loaded
from fairseq_stream.integration.cli import add_dataclass_args, fairseq_cli_name
from fairseq_stream.integration.input_checks import InputBuffer, UnknownWords, is_blank, raise_or_warn, report_skipped, too_long, undecodable
from fairseq_stream.integration.input_checks import check_split_has_sentences, no_sentences
from fairseq_stream.integration.read_ahead import read_ahead
from fairseq_stream.integration.run_context import RunContext
from fairseq_stream.engine.options import StreamDecodingConfig
from fairseq_stream.engine.validation import check_options
from fairseq_stream.integration.runtime import SentenceProgress, avoid_oversubscription, wants_progress, warn_about_resources

logger = logging.getLogger(__name__)


def _generation_cli() -> bool:
    """Under fairseq-generate / fairseq-interactive, whose loops hand us batches."""
    return fairseq_cli_name() in ("generate", "interactive")


_said_put_back = False


def restore_dropped_batches(batches: List[np.ndarray], indices: np.ndarray) -> List[np.ndarray]:
    """Append, as one last batch, the indices that ``batch_by_size`` left out (keeping order)."""
    kept = sum(len(b) for b in batches)
    if kept == len(indices):
        return batches
    seen = np.concatenate(batches) if batches else np.empty(0, dtype=np.int64)
    missing = np.asarray(indices)[~np.isin(indices, seen)]
    global _said_put_back
    if not _said_put_back:  # once a run: a benchmark builds its batches once a pass
        _said_put_back = True
        logger.info("put back %d sentence(s) that fairseq's batch_by_size dropped", len(missing))
    return list(batches) + [missing.astype(np.int64)]


class CompleteBatchesDataset(BaseWrapperDataset):
    """A dataset view whose ``batch_by_size`` never drops a sentence; with ``input_order="as-given"``
    its batches follow the dataset's own order instead of fairseq's length sorting."""

    def __init__(self, dataset: FairseqDataset, input_order: str = "sorted") -> None:
        super().__init__(dataset)
        self.input_order = input_order

    def ordered_indices(self):
        if self.input_order == "as-given":  # --stream-input-order as-given: no length sorting
            return np.arange(len(self), dtype=np.int64)
        return self.dataset.ordered_indices()

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        if len(indices) == 0:  # every sentence skipped: fairseq's batch_by_size fails on nothing
            return []
        batches = self.dataset.batch_by_size(
            indices,
            max_tokens=max_tokens,
            max_sentences=max_sentences,
            required_batch_size_multiple=required_batch_size_multiple,
        )
        return restore_dropped_batches(batches, indices)


@dataclass
class TranslationStreamConfig(TranslationConfig, StreamDecodingConfig):
    pass


def _check_data_dir(cfg: TranslationConfig) -> None:
    """Fail with one line when the data directory or its dictionaries are missing."""
    if not cfg.data:
        raise FairseqStreamError("no data directory given (the first positional argument, e.g. data-bin/wmt)")
    first = utils.split_paths(cfg.data)[0]
    if not os.path.isdir(first):
        raise FairseqStreamError(f"data directory {first!r} does not exist")
    src, tgt = cfg.source_lang, cfg.target_lang
    if src is None or tgt is None:
        src, tgt = data_utils.infer_language_pair(first)
    if src is None or tgt is None:
        raise FairseqStreamError(
            f"no dictionaries in {first!r}: expected dict.SRC.txt and dict.TGT.txt as written "
            "by fairseq-preprocess (or pass --source-lang/--target-lang)"
        )
    for lang in (src, tgt):
        path = os.path.join(first, f"dict.{lang}.txt")
        if not os.path.isfile(path):
            raise FairseqStreamError(f"missing dictionary {path!r}; run fairseq-preprocess on this data first")


def _training_data_pair(model_cfg: Any) -> Tuple[Optional[str], Optional[str]]:
    """The language pair of the binarized training data a legacy checkpoint names (``data``), as
    fairseq infers it (``train.SRC-TGT.SRC.bin``); ``(None, None)`` when it is gone or unnamed."""
    data = getattr(model_cfg, "data", None)
    first = utils.split_paths(data)[0] if isinstance(data, str) and data else None
    if first is None or not os.path.isdir(first):
        return None, None
    pair = data_utils.infer_language_pair(first)
    return (pair[0], pair[1]) if pair and None not in pair else (None, None)


def check_direction(model_cfg: Any, source_lang: Optional[str], target_lang: Optional[str]) -> None:
    """Refuse a checkpoint trained for another language pair than the run's, where it records one.

    Legacy (argparse) checkpoints keep every training option in ``cfg.model``, the languages
    included; reversed languages load fine (same dictionaries) and only give a BLEU of 0. The
    file is named (fairseq's loader is reading it: :func:`checkpoint_being_loaded`), so that the
    member of an ensemble ``--path a.pt:b.pt`` of the other direction is found.
    """
    saved = (getattr(model_cfg, "source_lang", None), getattr(model_cfg, "target_lang", None))
    where = "its saved source_lang/target_lang"
    if None in saved:  # recorded nowhere: the file names of the training data, where they still exist
        saved, where = _training_data_pair(model_cfg), "the file names of its training data"
    given = (source_lang, target_lang)
    if None in saved or None in given or saved == given:
        return
    loading = checkpoint_being_loaded()
    if loading is not None and loading.files > 1:  # one member of an ensemble: the others may be right
        message = (f"the ensemble member {loading.path} was trained for {saved[0]}→{saved[1]} ({where}), but this "
                   f"run asks for {given[0]}→{given[1]}; every checkpoint of --path must translate "
                   f"{given[0]}→{given[1]}: drop {loading.path} or replace it with a {given[0]}→{given[1]} checkpoint")
    else:
        message = (f"the checkpoint {loading.path + ' ' if loading else ''}was trained for {saved[0]}→{saved[1]} "
                   f"({where}), but this run asks for {given[0]}→{given[1]} (--source-lang {given[0]} --target-lang "
                   f"{given[1]}); pass --source-lang {saved[0]} --target-lang {saved[1]} or use a "
                   f"{given[0]}→{given[1]} checkpoint")
    raise DirectionMismatch(message, saved=saved, given=given, where=where,  # type: ignore[arg-type]
                            path=loading.path if loading else None)


@register_task("translation_stream", dataclass=TranslationStreamConfig)
class TranslationStreamTask(TranslationTask):
    """Translation with ``--search`` strategies and complete batches."""

    cfg: TranslationStreamConfig

    def __init__(self, cfg: TranslationStreamConfig, src_dict, tgt_dict) -> None:
        super().__init__(cfg, src_dict, tgt_dict)
        # A few recent views, so fairseq's per-dataset iterator cache keeps working while
        # fairseq-interactive's one-dataset-per-buffer pattern does not grow memory.
        self._complete_views: "OrderedDict[Tuple[int, str], CompleteBatchesDataset]" = OrderedDict()
        self._max_tokens: Optional[int] = None  # of the batch iterator being built
        self._lines_read = 0  # fairseq-interactive input lines seen so far
        self._input_buffer: Optional[InputBuffer] = None  # the interactive buffer being batched
        self._has_bpe = False
        self._split_size = 0  # sentences of the split loaded last (the progress bar's total)
        self._unknown_words = UnknownWords()
        self.run = RunContext(interactive=True)  # the generation iterator built last, and the progress bar

    @classmethod
    def add_args(cls, parser: Any) -> None:
        # The generation parsers already hold the decoding options (see integration.compat): add
        # the task's other fields only.
        add_dataclass_args(parser, getattr(cls, "__dataclass")())

    @classmethod
    def setup_task(cls, cfg: TranslationStreamConfig, **kwargs: Any) -> "TranslationStreamTask":
        check_options(cfg)  # before any data or model is loaded
        _check_data_dir(cfg)
        return super().setup_task(cfg, **kwargs)

    def build_model(self, cfg: Any, from_checkpoint: bool = False) -> Any:
        if from_checkpoint:
            check_direction(cfg, self.cfg.source_lang, self.cfg.target_lang)
        return super().build_model(cfg, from_checkpoint)

    def load_dataset(self, split: str, epoch: int = 1, combine: bool = False, **kwargs: Any) -> None:
        check_split_has_sentences(self.cfg.data, split, epoch, self.cfg.source_lang, self.cfg.target_lang)
        try:
            super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        except FileNotFoundError as exc:
            raise FairseqStreamError(
                f"{exc}; choose an existing split with --gen-subset (or --valid-subset)"
            ) from None
        self._split_size = len(self.datasets[split])  # fairseq-generate loads only --gen-subset
        if not self._split_size:  # e.g. --dataset-impl raw on an empty file: fairseq divided by zero at the end
            raise no_sentences(split, "0 sentences")

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        kept, ignored = dataset.filter_indices_by_size(indices, max_positions)
        inner = dataset.dataset if isinstance(dataset, CompleteBatchesDataset) else dataset
        reasons = too_long(inner, kept, max_positions, ignored, self._max_tokens)
        buffer = self._input_buffer
        if buffer is not None and buffer.size == len(dataset):
            # fairseq-interactive: report each bad line by its input line number and go on.
            sized = list(reasons) if ignore_invalid_inputs else []
            reasons.update(buffer.invalid)
            report_skipped(buffer, reasons, warn_only=sized)
        elif reasons:
            raise_or_warn(reasons, ignore_invalid_inputs, len(indices))
        if not reasons:
            return kept
        return np.asarray([i for i in np.asarray(kept).tolist() if i not in reasons], dtype=np.int64)

    def get_interactive_tokens_and_lengths(self, lines: List[str], encode_fn: Any):
        """fairseq-interactive's encoding of one buffer; remembers where the buffer starts."""
        first, self._lines_read = self._lines_read + 1, self._lines_read + len(lines)
        invalid = {i: why for i, why in enumerate(map(undecodable, lines)) if why}
        clean = ["" if i in invalid or is_blank(line) else line for i, line in enumerate(lines)]
        tokens, lengths = super().get_interactive_tokens_and_lengths(clean, encode_fn)
        self._input_buffer = InputBuffer(first, len(lines), invalid)
        valid = [t for i, t in enumerate(tokens) if i not in invalid]
        self._unknown_words.check(valid, self.source_dictionary.unk(), self._has_bpe)
        return tokens, lengths

    def build_tokenizer(self, args: Any) -> Any:
        # fairseq's Moses decoding leaves typographic quotes spaced out ("light. ”"). Imported
        # here: a module-level import made `python -m fairseq_stream.tools.text` warn (runpy).
        from fairseq_stream.integration.text import with_typographic_quotes

        return with_typographic_quotes(super().build_tokenizer(args))

    def build_bpe(self, args: Any) -> Any:
        bpe = super().build_bpe(args)
        self._has_bpe = bpe is not None
        return bpe

    def get_batch_iterator(self, dataset: FairseqDataset, *args: Any, input_order: Optional[str] = None, **kwargs: Any):
        """fairseq's iterator over a complete-batches view of ``dataset``, in ``input_order``
        (default ``--stream-input-order``; the Python session passes each run's own)."""
        self._max_tokens = kwargs.get("max_tokens", args[0] if args else None)
        order = input_order or self.cfg.stream_input_order
        key = (id(dataset), order)  # one view per order: fairseq caches an iterator per dataset object
        view = self._complete_views.get(key)
        if view is None or view.dataset is not dataset:
            view = self._complete_views[key] = CompleteBatchesDataset(dataset, order)
            while len(self._complete_views) > 4:
                self._complete_views.popitem(last=False)
        epoch_itr = super().get_batch_iterator(view, *args, **kwargs)
        if _generation_cli():
            read_ahead(epoch_itr, self.run.attach)  # our generators stream across its batches
        return epoch_itr

    def build_generator(
        self,
        models: List[Any],
        args: Any,
        seq_gen_cls: Optional[type] = None,
        extra_gen_cls_kwargs: Optional[Dict[str, Any]] = None,
        prefix_allowed_tokens_fn: Any = None,
    ) -> Any:
        generator = build_generator(  # validates the whole run first (engine.validation.validate_run)
            self.cfg.search,
            self,
            models,
            args,
            self.cfg,
            seq_gen_cls=seq_gen_cls,
            extra_gen_cls_kwargs=extra_gen_cls_kwargs,
            prefix_allowed_tokens_fn=prefix_allowed_tokens_fn,
        )
        if _generation_cli():
            avoid_oversubscription(on_cpu=not any(p.is_cuda for m in models for p in m.parameters()))
            warn_about_resources(models, args, opts=self.cfg, sentences=self._split_size or None)
        if isinstance(generator, StreamGenerator):
            # fairseq-generate builds its iterator first, fairseq-interactive one per buffer
            # later: the generator asks the run context for the current one at each batch.
            # Under fairseq-interactive the stream reads ahead across buffers (interactive_input).
            self.run.progress = SentenceProgress(self._split_size) if self._split_size and wants_progress() else None
            if self.cfg.stream_per_batch:
                generator.attach(RunContext(progress=self.run.progress))
            else:
                interactive_input.enable()
                generator.attach(self.run)
        return generator
