"""An ensemble's next-token scores from its models' scores: fairseq's ``EnsembleModel`` average.

One model: its raw logits (divided by ``--temperature``), left unnormalised, so that the fused
output layer (Hoang2018 §3.1) normalises only the candidates it keeps. Several models: the
average of their probabilities, ``log Σ_m p_m − log M`` (fairseq's
``EnsembleModel.forward_decoder``), which needs every row in full, so the scores come back as
log-probabilities (:attr:`fairseq_stream.model.model_step.ModelStep.normalized_scores`).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor


def normalizes(models: int) -> bool:
    """Whether the ensemble's scores are log-probabilities already (several models) or raw logits (one)."""
    return models > 1


def search_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the search reads a model's scores of ``dtype`` in: float32 for half precision."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def search_scores(scores: Tensor) -> Tensor:
    """A model's scores as the search reads them (half precision as float32: a copy; else as they are)."""
    return scores.float() if scores.dtype != search_dtype(scores.dtype) else scores


def ensemble_scores(per_model: Sequence[Tensor], temperature: float = 1.0) -> Tensor:
    """Each model's scores (R, b, V) → the ensemble's (R, b, V), float32 or wider."""
    scaled = []
    for scores in map(search_scores, per_model):
        scaled.append(scores / temperature if temperature != 1.0 else scores)
    if not normalizes(len(scaled)):
        return scaled[0]
    log_probs = torch.stack([torch.log_softmax(s, dim=-1) for s in scaled], dim=0)  # (M, R, b, V)
    return torch.logsumexp(log_probs, dim=0) - math.log(len(scaled))
