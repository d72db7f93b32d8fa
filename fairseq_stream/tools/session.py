"""Load a model once and translate with any ``--search`` strategy from Python.

The benchmark harness, the demo and the tests use this; fairseq-generate and
fairseq-interactive go through the task instead. Options are parsed by fairseq's own
generation parser, so every flag means what it means on the command line.

    session = TranslationSession.load("user_dir_examples/demo", "user_dir_examples/demo/checkpoint.pt")
    result = session.translate(session.encode(lines), search="beam", gen={"beam": 5})
"""
from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import torch
from fairseq import checkpoint_utils, options, tasks, utils
from fairseq.dataclass.configs import GenerationConfig
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.tasks import TASK_DATACLASS_REGISTRY
from omegaconf import open_dict

from fairseq_stream.integration.generator import StreamGenerator
from fairseq_stream.errors import FairseqStreamError, memory_errors
from fairseq_stream.integration.input_checks import is_blank
from fairseq_stream.integration.read_ahead import ReadAhead
from fairseq_stream.integration.run_context import RunContext
from fairseq_stream.integration.build import build_generator
from fairseq_stream.engine.stats import DecodeStats
from fairseq_stream.engine.output_paths import check_output_path, write_text_checked
from fairseq_stream.integration.text import BpeCodes, detokenize, tokenize
from fairseq_stream.tools import session_args

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TranslationResult:
    """Hypotheses in input order (each a fairseq n-best list) and the run's statistics."""

    hypos: List[List[Dict[str, Any]]]
    stats: DecodeStats
    strings: List[str] = field(default_factory=list)  # detokenised 1-best, when postprocessed


def _override(config: Any, values: Dict[str, Any], what: str) -> Any:
    out = copy.deepcopy(config)
    with open_dict(out):
        for key, value in values.items():
            if key not in out:
                raise FairseqStreamError(f"unknown {what} option {key!r}")
            out[key] = value
    return out


def check_checkpoint_file(path: str) -> None:
    """``--path`` names a file: a folder is told apart from a missing file (the fix differs)."""
    if os.path.isdir(path):
        found = sorted(n for n in os.listdir(path) if n.endswith(".pt"))[:3]
        hint = f" (it holds {', '.join(found)})" if found else ""
        raise FairseqStreamError(f"checkpoint {path!r} is a folder, not a file{hint}; give the checkpoint file "
                                 "itself to --path")
    if not os.path.isfile(path):
        raise FairseqStreamError(f"checkpoint {path!r} not found (check --path)")


class TranslationSession:
    """A task, an ensemble and the text pipeline, loaded once."""

    def __init__(self, cfg: Any, task: Any, models: List[Any], *, bpe_codes: Optional[str]) -> None:
        self.cfg = cfg
        self.task = task
        self.models = models
        self.use_cuda = torch.cuda.is_available() and not cfg.common.cpu
        self._bpe = BpeCodes(bpe_codes) if bpe_codes else None

    @classmethod
    def load(
        cls,
        data_dir: str,
        checkpoints: str,
        *,
        bpe_codes: Optional[str] = None,
        extra_args: Sequence[str] = (),
        cpu: bool = True,
        dtype: Optional[torch.dtype] = None,
    ) -> "TranslationSession":
        """``data_dir`` holds the dictionaries; ``checkpoints`` is fairseq's ``--path`` (``a.pt:b.pt``).

        ``dtype=torch.float64`` runs the models in double precision (the exactness tests).
        """
        data_dir = session_args.check_path("load(data_dir)", data_dir)
        checkpoints = session_args.check_path("load(checkpoints)", checkpoints)
        bpe_codes = session_args.check_path("load(bpe_codes=...)", bpe_codes, optional=True)
        extra_args = session_args.check_extra_args(extra_args)
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise session_args.refuse("load(dtype=...)", "None or a torch.dtype such as torch.float64", dtype)
        argv = [data_dir, "--user-dir", PACKAGE_DIR, "--path", checkpoints, *extra_args]
        if cpu:
            argv.append("--cpu")
        args = options.parse_args_and_arch(options.get_generation_parser(), input_args=argv)
        cfg = convert_namespace_to_omegaconf(args)
        task = tasks.setup_task(cfg.task)
        for path in utils.split_paths(checkpoints):
            check_checkpoint_file(path)
        models, _ = checkpoint_utils.load_model_ensemble(utils.split_paths(checkpoints), task=task)
        use_cuda = torch.cuda.is_available() and not cpu
        for model in models:
            if use_cuda:
                model.cuda()
            model.prepare_for_inference_(cfg)
            model.eval()
            if dtype is not None:
                model.to(dtype)
        return cls(cfg, task, models, bpe_codes=bpe_codes)

    def close(self) -> None:
        """Give back the memory the models keep for later runs (``release_cached_memory``: free cache buffers,
        logits buffers, bucket states, step graphs); the session stays usable (a later call fills them again).
        fairseq-generate and fairseq-interactive need no such call: their process ends."""
        from fairseq_stream.model.model_step import release_cached_memory

        release_cached_memory(self.models)

    def __enter__(self) -> "TranslationSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def source_lang(self) -> str:
        return self.cfg.task.source_lang

    @property
    def target_lang(self) -> str:
        return self.cfg.task.target_lang

    def source_text(self, line: str) -> str:
        """A raw source sentence as the source dictionary reads it: Moses tokens, then BPE when codes are set."""
        text = "" if is_blank(line) else tokenize(line, self.source_lang)  # blank: the empty hypothesis
        return self._bpe.apply(text) if self._bpe is not None else text

    def encode(self, lines: Sequence[str]) -> Any:
        """Raw source sentences → a fairseq dataset (:meth:`source_text` of each)."""
        src_dict = self.task.source_dictionary
        tokens = []
        for line in session_args.check_lines(lines):
            tokens.append(src_dict.encode_line(self.source_text(line), add_if_not_exist=False, append_eos=True).long())
        lengths = [t.numel() for t in tokens]
        return self.task.build_dataset_for_inference(tokens, lengths)

    def build_generator(self, search: str, gen: Dict[str, Any], opts: Dict[str, Any]) -> Any:
        return self._build(search, gen, opts)[0]

    def _build(self, search: str, gen: Dict[str, Any], opts: Dict[str, Any]) -> "tuple[Any, Any]":
        """The generator and the decoding options it was built with."""
        if not isinstance(search, str):
            raise session_args.refuse("translate(search=...)", "a --search name (str) such as 'var-stream'", search)
        gen = session_args.check_options("translate(gen=...)", gen, GenerationConfig)
        opts = session_args.check_options("translate(opts=...)", opts, TASK_DATACLASS_REGISTRY.get(self.cfg.task._name))
        gen_cfg = _override(self.cfg.generation, gen, "generation")
        stream_opts = _override(self.cfg.task, dict(opts, search=search), "decoding")
        generator = build_generator(  # validates the whole run (engine.validation.validate_run)
            search, self.task, self.models, gen_cfg, stream_opts,
            extra_gen_cls_kwargs={"lm_model": None, "lm_weight": 0.0},
        )
        if stream_opts.stream_stats:  # translate() writes it after the decode: never over a checkpoint read here
            check_output_path(stream_opts.stream_stats, "--stream-stats", inputs=[
                ("the checkpoint of --path", p) for p in utils.split_paths(self.cfg.common_eval.path or "")])
        return generator, stream_opts

    def translate(
        self,
        dataset: Any,
        *,
        search: str = "beam",
        gen: Optional[Dict[str, Any]] = None,
        opts: Optional[Dict[str, Any]] = None,
        max_tokens: Optional[int] = None,
        batch_size: Optional[int] = None,
        required_batch_size_multiple: Optional[int] = None,
        postprocess: bool = True,
        progress: bool = False,
    ) -> TranslationResult:
        """Translate every sentence of ``dataset``; hypotheses come back in input order.

        ``required_batch_size_multiple`` defaults to fairseq's (8): batches are cut to multiples of it.
        """
        session_args.check_dataset(dataset)
        max_tokens = session_args.check_count("translate(max_tokens=...)", max_tokens)
        batch_size = session_args.check_count("translate(batch_size=...)", batch_size)
        required_batch_size_multiple = session_args.check_count("translate(required_batch_size_multiple=...)",
                                                                required_batch_size_multiple)
        generator, stream_opts = self._build(search, gen, opts)
        itr = self.batches(dataset, max_tokens, batch_size, required_batch_size_multiple,
                            input_order=stream_opts.stream_input_order)
        if isinstance(generator, StreamGenerator) and not stream_opts.stream_per_batch:
            # One stream over the whole input: refills read the next batches ahead.
            itr = ReadAhead(itr)
            generator.attach(RunContext(itr))
        hypos: List[Optional[List[Dict[str, Any]]]] = [None] * len(dataset)
        bar = _progress(len(dataset)) if progress else None
        self._synchronize()
        start = time.perf_counter()
        with torch.no_grad(), memory_errors():  # an allocation that fails: one line naming the options to lower
            for sample in itr:
                if self.use_cuda:
                    sample = utils.move_to_cuda(sample)
                out = self.task.inference_step(generator, self.models, sample)
                for i, sample_id in enumerate(sample["id"].tolist()):
                    hypos[sample_id] = out[i]
                if bar is not None:
                    bar.update(len(out))
        self._synchronize()  # CUDA kernels run asynchronously: wait for them before timing
        wall = time.perf_counter() - start
        if bar is not None:
            bar.close()
        missing = [i for i, h in enumerate(hypos) if h is None]
        if missing:
            raise RuntimeError(f"{len(missing)} sentence(s) got no hypothesis, first ids {missing[:5]}")
        stats = copy.copy(getattr(generator, "stats", None) or DecodeStats())
        stats.sentences = len(hypos)
        stats.wall_seconds = wall
        stats.target_tokens = sum(int(h[0]["tokens"].numel()) for h in hypos)
        if stream_opts.stream_stats:  # as fairseq-generate's: whole or not at all, a failure one line
            write_text_checked(stream_opts.stream_stats, stats.to_json(search), "--stream-stats")
        result = TranslationResult(hypos=hypos, stats=stats)  # type: ignore[arg-type]
        if postprocess:
            result.strings = [self.detokenize(h[0]["tokens"]) for h in result.hypos]
        return result

    def batches(self, dataset: Any, max_tokens: Optional[int] = None, batch_size: Optional[int] = None,
                required_batch_size_multiple: Optional[int] = None, input_order: str = "sorted") -> Any:
        """fairseq's batch iterator over ``dataset`` (fairseq-generate's defaults), length-sorted
        or, with ``input_order="as-given"``, in the dataset's order."""
        if max_tokens is None and batch_size is None:
            max_tokens = 12000  # fairseq-generate's default
        from fairseq_stream.integration.task import TranslationStreamTask

        kwargs: Dict[str, Any] = {}
        if isinstance(self.task, TranslationStreamTask):
            kwargs["input_order"] = input_order
        elif input_order != "sorted":
            raise FairseqStreamError("--stream-input-order as-given needs --task translation_stream (or no --task)")
        return self.task.get_batch_iterator(
            **kwargs,
            dataset=dataset,
            max_tokens=max_tokens,
            max_sentences=batch_size,
            max_positions=utils.resolve_max_positions(
                self.task.max_positions(), *[m.max_positions() for m in self.models]
            ),
            required_batch_size_multiple=required_batch_size_multiple or self.cfg.dataset.required_batch_size_multiple,
        ).next_epoch_itr(shuffle=False)

    def _synchronize(self) -> None:
        if self.use_cuda:
            torch.cuda.synchronize()

    def detokenize(self, tokens: torch.Tensor) -> str:
        text = self.task.target_dictionary.string(tokens.int().cpu(), "subword_nmt")
        return detokenize(text, self.target_lang)


def _progress(total: int):
    """A sentence bar on a terminal only (disable=None): written to a log or a pipe, its carriage
    returns put the next line (the demo's "[1/12] warm-up ...") on the bar's line."""
    from tqdm import tqdm

    return tqdm(total=total, unit="sent", delay=2.0, leave=False, dynamic_ncols=True, disable=None)
