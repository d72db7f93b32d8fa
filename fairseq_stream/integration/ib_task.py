"""``--task translation_ib``: train the IBDecoder family with fairseq's data pipeline and criterion.

    fairseq-train DATA --user-dir fairseq_stream --task translation_ib --arch transformer_ib \\
        --ib-h 2 --ib-c 1 --criterion label_smoothed_cross_entropy ...

A :class:`~fairseq_stream.integration.task.TranslationStreamTask` (so batches never
lose sentences and ``--search`` works) whose training and validation batches are rewritten
before the model sees them: each target is reordered (:func:`fairseq_stream.search.ib_order.reorder_batch`,
Eqs. 6 and 9, EOS filling the step where the directions meet, ``--ib-eos``) and the decoder
inputs are the reordered target shifted by ``z = h·c`` (footnote 3). The datasets themselves
keep the original order, so ``fairseq-generate`` scores hypotheses against the real references.
``h``, ``c`` and the ablations of Table 2 are options of this task, copied into the model's
arguments and so saved in the checkpoint.
"""
from dataclasses import dataclass, field
from typing import Any, Dict

from fairseq.tasks import register_task

from fairseq_stream.search import ib_order
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.ib_order import IBSpec
from fairseq_stream.integration.task import TranslationStreamConfig, TranslationStreamTask


@dataclass
class TranslationIBConfig(TranslationStreamConfig):
    ib_h: int = field(default=2, metadata={"help": "generation directions h: 1 = left to right (vanilla SA with c > 1), "
                                                   "2 = IBDecoder, 4, 6, ... = IMDecoder (Zhang2020)"})
    ib_c: int = field(default=1, metadata={"help": "words per direction and step c: 2 = IBDecoder+SA (Zhang2020 Eq. 12); "
                                                   "with --ib-h 1, vanilla SA (Table 2 rows 6 and 8)"})
    ib_order: str = field(
        default="side-to-middle",
        metadata={"help": "generation order of each segment (h >= 2): 'side-to-middle' = Eq. 6; 'middle-to-side' = "
                          "from the middle out to both ends (ablation, Table 2 row 4)"},
    )
    ib_mask: str = field(default="relaxed", metadata={"help": "'relaxed' = M(h, c) of Eq. 4; 'vanilla' = causal (ablation, Table 2)"})
    ib_positions: str = field(
        default="bidirectional",
        metadata={"help": "'bidirectional' = Eq. 7 (Eq. 10 for IMDecoder); 'vanilla' = t - 1 (ablation, Table 2)"},
    )
    ib_independent_directions: bool = field(
        default=False, metadata={"help": "forbid attention across directions (ablation 'indep. directions', Table 2)"}
    )
    ib_eos: str = field(
        default="step",
        metadata={"help": "end of the target: 'step' = EOS fills the step where the directions meet (our design, "
                          "see fairseq_stream/search/ib_order.py); 'single' = one EOS, the rest of that step is padding"},
    )


@register_task("translation_ib", dataclass=TranslationIBConfig)
class TranslationIBTask(TranslationStreamTask):
    cfg: TranslationIBConfig

    def __init__(self, cfg: TranslationIBConfig, src_dict, tgt_dict) -> None:
        super().__init__(cfg, src_dict, tgt_dict)
        if cfg.ib_mask not in ("relaxed", "vanilla"):
            raise FairseqStreamError(f"--ib-mask must be 'relaxed' or 'vanilla', got {cfg.ib_mask!r}")
        if cfg.ib_positions not in ("bidirectional", "vanilla"):
            raise FairseqStreamError(f"--ib-positions must be 'bidirectional' or 'vanilla', got {cfg.ib_positions!r}")
        if cfg.ib_eos not in ib_order.EOS_FILLS:
            raise FairseqStreamError(f"--ib-eos must be 'step' or 'single', got {cfg.ib_eos!r}")
        if cfg.eval_bleu:
            raise FairseqStreamError(
                "--eval-bleu is not supported with --task translation_ib; score checkpoints with "
                "fairseq-generate --search ib-beam"
            )
        self.spec = IBSpec.from_args(cfg)

    def build_model(self, cfg: Any, from_checkpoint: bool = False):
        arch = getattr(cfg, "arch", None) or getattr(cfg, "_name", None)
        if arch is not None and not str(arch).startswith("transformer_ib"):
            raise FairseqStreamError(f"--task translation_ib trains --arch transformer_ib, not {arch!r}")
        for name in ("ib_h", "ib_c", "ib_order", "ib_mask", "ib_positions", "ib_independent_directions", "ib_eos"):
            setattr(cfg, name, getattr(self.cfg, name))
        return super().build_model(cfg, from_checkpoint)

    def reorder_sample(self, sample: Dict[str, Any]) -> Dict[str, Any]:
        """Rewrite a collated batch's target and decoder inputs into the decoder's order."""
        eos, pad = self.tgt_dict.eos(), self.tgt_dict.pad()
        # Whole-batch tensor ops on the batch's device (no per-sentence loop, no per-row copies):
        # this runs before every training step, on the GPU's critical path.
        new_target, ntokens = ib_order.reorder_batch(sample["target"], self.spec.h, self.spec.c, eos, pad,
                                                     self.cfg.ib_eos, self.spec.order)
        out = dict(sample)
        out["target"] = new_target
        out["net_input"] = dict(sample["net_input"])
        out["net_input"]["prev_output_tokens"] = ib_order.shift_inputs(new_target, self.spec.z, eos, pad)
        out["ntokens"] = ntokens
        return out

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        return super().train_step(self.reorder_sample(sample), model, criterion, optimizer, update_num, ignore_grad)

    def valid_step(self, sample, model, criterion):
        return super().valid_step(self.reorder_sample(sample), model, criterion)
