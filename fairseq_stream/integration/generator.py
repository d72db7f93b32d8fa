"""The generator fairseq sees: ``generate(models, sample, **kwargs)`` over the streaming scheduler.

fairseq-generate and fairseq-interactive hand the generator one batch at a time and print
its hypotheses before handing over the next; batches stay the unit of input and output
(same lines, same order). Decoding does not stop at a batch's end: one scheduler streams
over the whole run (Yang2020 Algorithm 1 over all of ``X``). ``generate(sample)`` queues
the batch's sentences (unless a refill already read them ahead), steps until every one of
them finished and returns their hypotheses; sentences of later batches that joined in the
meantime stay in flight for the next call, and the last batch drains the stream. A refill
that wants more sentences than are queued reads the next batches ahead from fairseq's
iterator (:mod:`fairseq_stream.integration.read_ahead`, reached through the task's or the session's
:class:`~fairseq_stream.integration.run_context.RunContext`), encodes only
the sentences it admits, and memory holds the encoder states of the sentences in flight,
never of the input (:mod:`fairseq_stream.model.encoder_slots`). Without an attached iterator, or
with ``--stream-per-batch``, each batch is decoded on its own (the stream drains per batch).
The statistics of the whole run are logged at the end of fairseq-generate's (fairseq-interactive's)
``main`` and, with ``--stream-stats``, written as JSON (:func:`report_pending`, called there by the hook of
:mod:`fairseq_stream.integration.compat`; at exit otherwise). The file is checked against every file of
the run before the first decode (:func:`check_stats_path`) and written whole or not at all
(:func:`~fairseq_stream.engine.output_paths.write_text_checked`): a failure is one line and exit status 1.
"""
from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
import time
from typing import Any, Callable, Dict, FrozenSet, List, Optional

import torch

from fairseq_stream.errors import PREFIX, FairseqStreamError
from fairseq_stream.engine.output_paths import check_output_path, write_text_checked
from fairseq_stream.engine.validation import decoding_inputs
from fairseq_stream.integration.cli import fairseq_cli_name
from fairseq_stream.engine.input_stream import InputStream, QueuedBatch
from fairseq_stream.search.interface import SearchStrategy
from fairseq_stream.integration import interactive_input
from fairseq_stream.model.model_step import ModelStep
from fairseq_stream.ops import extension, fused_output
from fairseq_stream.search.score_edits import NoRepeatNgram, max_lengths
from fairseq_stream.integration.run_context import RunContext
from fairseq_stream.integration.runtime import SentenceProgress
from fairseq_stream.engine.scheduler import SchedulerConfig, StreamingScheduler
from fairseq_stream.engine.stats import DecodeStats

WARNING = "fairseq-stream: warning: "
logger = logging.getLogger("fairseq_stream")


class StreamGenerator:
    """A fairseq generator running ``make_strategy(stats)`` under the streaming scheduler."""

    def __init__(
        self,
        models: List[Any],
        tgt_dict: Any,
        *,
        name: str,
        make_strategy: Callable[[DecodeStats], SearchStrategy],
        hooks: FrozenSet[str],  # the strategy's declared optional hooks (Capabilities.hooks)
        scheduler: SchedulerConfig,
        gen_cfg: Any,
        rows_per_sentence: int,
        stats_path: Optional[str] = None,
        config: Any = None,
        step_mode: str = "auto",
        report: bool = True,
    ) -> None:
        self.name = name
        self.hooks = hooks
        self.config = config  # the strategy's configuration (its options, validated)
        self.model = ModelStep(models, temperature=float(gen_cfg.temperature), step_mode=step_mode)
        self.tgt_dict = tgt_dict
        self.eos, self.pad = tgt_dict.eos(), tgt_dict.pad()
        self.bos = self.eos  # fairseq translation decoders start from EOS
        self.make_strategy = make_strategy
        self.scheduler_cfg = scheduler
        self.gen_cfg = gen_cfg
        self.rows_per_sentence = rows_per_sentence
        self.stats = DecodeStats(trace=[] if stats_path else None)
        self.stats_path = stats_path
        # report=False: a helper decode of the run's (--prune-auto's calibration) says nothing at the end;
        # its work is in the run's statistics, which the run's own generator reports.
        self._reported = not report
        self.run: RunContext = RunContext()  # where the input is read ahead from, and the progress bar
        self.strategy = make_strategy(self.stats)  # built once; the scheduler takes it at the first batch
        self.input = InputStream(pad=self.pad, eos=self.eos, nbest=int(gen_cfg.nbest), max_lengths=lambda lengths: max_lengths(
            lengths, gen_cfg, self.model.max_decoder_positions))
        self._scheduler: Optional[StreamingScheduler] = None

    def attach(self, run: RunContext) -> None:
        """Read ahead from ``run``'s input (the batches given to :meth:`generate` come from it) and
        advance its progress bar; without it each batch is decoded on its own."""
        self.run = run

    @property
    def progress(self) -> Optional[SentenceProgress]:
        return self.run.progress

    @torch.no_grad()
    def generate(self, models: Any, sample: Dict[str, Any], prefix_tokens: Any = None,
                 constraints: Any = None, bos_token: Optional[int] = None, **kwargs: Any) -> List[List[Dict[str, Any]]]:
        if prefix_tokens is not None:
            raise FairseqStreamError(f"--search {self.name} does not support prefix tokens (--prefix-size)")
        if constraints is not None:
            raise FairseqStreamError(f"--search {self.name} does not support --constraints")
        check_net_input(self.name, sample)
        start = time.perf_counter()
        scheduler = self._scheduler_for(bos_token)
        batch = self.input.batch_for(sample, self.run.source())
        scheduler.advance(lambda: self._complete(batch, scheduler))
        if batch.missing:  # the stream ran dry: what finished last may still be on the device
            scheduler.read_finished()
        if batch.missing:
            raise FairseqStreamError(f"internal error: {batch.missing} sentence(s) of a batch got no hypothesis")
        hypos: List[List[Dict[str, Any]]] = batch.hypos  # type: ignore[assignment]
        self.stats.sentences += batch.size
        self.stats.target_tokens += sum(int(h[0]["tokens"].numel()) for h in hypos if h)
        for name in ("fewer_than_nbest", "empty_sources", "without_hypothesis"):
            if getattr(self.input, name):
                self.stats.extra[name] = float(getattr(self.input, name))
        self.stats.wall_seconds += time.perf_counter() - start
        for kernel in fused_output.take_cuda_kernels():  # measured per shape class on CUDA, logged there
            self.stats.note_backend("output_layer", kernel)
        self.stats.step_mode = dict(self.model.step_stats.as_dict(), mode=self.model.step_mode)
        self.stats.fallbacks.update(self.model.fallbacks)
        self.stats.fallbacks.update(extension.unavailable())
        self._schedule_report()
        return hypos

    def _scheduler_for(self, bos_token: Optional[int]) -> StreamingScheduler:
        """The run's one scheduler, built at the first batch."""
        if self._scheduler is None:
            if self.progress is not None:
                self.input.on_done = self.progress.advance_to
            self._scheduler = StreamingScheduler(
                self.model, self.strategy, self.scheduler_cfg, source=self.input,
                bos=bos_token if bos_token is not None else self.bos, pad=self.pad, eos=self.eos,
                rows_per_sentence=self.rows_per_sentence, stats=self.stats, hooks=self.hooks)
        return self._scheduler

    def _complete(self, batch: QueuedBatch, scheduler: StreamingScheduler) -> bool:
        # Strategies that keep finished hypotheses on the device (ib-beam) are read only when
        # enough finished to complete the batch, and at least a capacity's worth: a read per
        # refill at most, not per step.
        if batch.missing and scheduler.unread_count >= max(batch.missing, self.scheduler_cfg.capacity):
            scheduler.read_finished()
        return batch.missing == 0

    def _schedule_report(self) -> None:
        # Under fairseq-generate / fairseq-interactive, whose loops we do not own, the run's
        # statistics are reported at the end of their main (report_pending); library users read ``stats``.
        if not self._reported and fairseq_cli_name() in ("generate", "interactive"):
            self._reported = True
            if not _unreported:
                atexit.register(_report_at_exit)
            _unreported.append(self)

    def report(self) -> None:
        """Log the run's statistics (and write them as JSON with ``--stream-stats``)."""
        if self.progress is not None:
            self.progress.close()
        chunked = interactive_input.current()
        if chunked is not None and chunked.chunks_read_ahead:
            self.stats.extra["chunks_read_ahead"] = chunked.chunks_read_ahead
        logger.info("fairseq-stream %s: %s", self.name, self.stats.summary())
        for line in closing_warnings(self.stats.extra, self.stats.sentences, int(self.gen_cfg.nbest)):
            print(line, file=sys.stderr, flush=True)
        if self.stats_path:
            write_text_checked(self.stats_path, self.stats.to_json(self.name), "--stream-stats")


#: generators whose statistics the command-line run has yet to report (:meth:`StreamGenerator._schedule_report`)
_unreported: List[StreamGenerator] = []


def report_pending() -> None:
    """Report (and write) the statistics of the run's generators: at the end of fairseq-generate's or
    fairseq-interactive's ``main``, where a file that cannot be written still makes the exit status 1."""
    while _unreported:
        _unreported.pop(0).report()


def _report_at_exit() -> None:
    # Where main was not wrapped (or raised): an atexit callback's exception is only printed and the
    # status stays 0, so a failure is said in one line and the process ends with status 1 itself.
    try:
        report_pending()
    except FairseqStreamError as exc:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        print(PREFIX + str(exc), file=sys.stderr, flush=True)
        os._exit(1)


def _cfg_value(cfg: Any, section: str, name: str) -> Any:
    """An option of fairseq's main: an argparse namespace (cli_main) or its omegaconf config."""
    if isinstance(cfg, argparse.Namespace):
        return getattr(cfg, name, None)
    node = cfg.get(section) if hasattr(cfg, "get") else None
    return node.get(name) if node is not None else None


def check_stats_path(cfg: Any, cli: Optional[str] = None) -> None:
    """``--stream-stats`` of fairseq-generate / fairseq-interactive (``cfg``: what their main is given),
    before any work: a file that can be written and names none of the run's files — the checkpoints of
    ``--path`` (an ensemble's each), the draft, the prior, the data, ``--input``, the results file — nor
    the file stdout goes to (:func:`~fairseq_stream.engine.output_paths.check_output_path`)."""
    path = _cfg_value(cfg, "task", "stream_stats")
    if not path:
        return
    task = cfg if isinstance(cfg, argparse.Namespace) else cfg.get("task")
    inputs = [("the checkpoint of --path", p) for p in (_cfg_value(cfg, "common_eval", "path") or "").split(os.pathsep) if p]
    if _cfg_value(cfg, "generation", "lm_path"):
        inputs.append(("the language model of --lm-path", _cfg_value(cfg, "generation", "lm_path")))
    inputs += decoding_inputs(task)
    source = _cfg_value(cfg, "interactive", "input")
    if source and source != "-" and (cli or fairseq_cli_name()) == "interactive":
        inputs.append(("--input", source))
    outputs = []
    results = _cfg_value(cfg, "common_eval", "results_path")
    if results and (cli or fairseq_cli_name()) == "generate":
        subset = _cfg_value(cfg, "dataset", "gen_subset") or "test"
        outputs.append(("--results-path's file", os.path.join(results, f"generate-{subset}.txt")))
    check_output_path(path, "--stream-stats", inputs=inputs, outputs=outputs)


def closing_warnings(extra: Dict[str, float], sentences: int, nbest: int) -> List[str]:
    """The warnings a run's statistics call for, one line each, said once at its end."""
    lines = []
    short, blank = int(extra.get("fewer_than_nbest", 0)), int(extra.get("empty_sources", 0))
    if short:  # variable-width beams may end a sentence before --nbest hypotheses are final
        why = []
        if blank:
            why.append(f"{blank} empty source line(s), answered with the one empty hypothesis")
        if short - blank:
            why.append(f"{short - blank} pruned beam(s) that ended with what they found")
        lines.append(f"{WARNING}{short} of {sentences} sentence(s) got fewer than --nbest {nbest} hypotheses: "
                     f"{'; '.join(why)} (docs/usage.md, \"fairseq's own options\")")
    forced = int(extra.get(NoRepeatNgram.STAT, 0))
    if forced:
        lines.append(f"{WARNING}--no-repeat-ngram-size banned EOS for {forced} hypothesis row(s) at their maximum "
                     "length; they ended there with EOS anyway, instead of with no hypothesis")
    lost = int(extra.get("without_hypothesis", 0))
    if lost:
        lines.append(f"{WARNING}{lost} sentence(s) ended with no hypothesis left (blocking banned every "
                     "candidate); each got the empty hypothesis")
    return lines


#: what every encoder gets (``prev_output_tokens`` is the teacher-forcing input: fairseq's generator drops it too)
NET_INPUT_KEYS = frozenset({"src_tokens", "src_lengths", "prev_output_tokens"})


def check_net_input(name: str, sample: Dict[str, Any]) -> None:
    """A model that needs more than the source tokens and lengths is refused: sentences of several
    batches stream together, and its extra inputs would be dropped without a word."""
    extra = sorted(set(sample.get("net_input", {})) - NET_INPUT_KEYS)
    if extra:
        raise FairseqStreamError(f"the model's input has {', '.join(extra)} besides src_tokens and src_lengths, which "
                                 f"--search {name} does not pass to the encoder; decode it with --search beam")
