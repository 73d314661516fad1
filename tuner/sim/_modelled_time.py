"""Seconds for curve sets that record no wall-clock time (``opda_deberta_mnli``): modelled as
proportional to the examples trained on, optimizer steps x batch size, as that set's README
suggests. One published rate sets the constant; the model is deterministic.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

MNLI_TRAIN_EXAMPLES = 392_702
# Why this rate: no published single-GPU DeBERTa-base fine-tuning throughput was found, so we take
# the nearest published one, BERT-base (the same 12-layer, 768-wide encoder size) fine-tuned on
# MultiNLI for 3 epochs at sequence length 128 and batch 32 in 2:35:23 on one Titan RTX, FP32
# (huggingface/transformers, examples/pytorch/text-classification/README.md, commit 05ce25b):
# 7.9 ms per example, about 126 examples a second. DeBERTa's disentangled attention makes it
# slower per example than BERT (microsoft/DeBERTa#100), so these seconds are a floor.
SECONDS_PER_EXAMPLE = (2 * 3600 + 35 * 60 + 23) / (3 * MNLI_TRAIN_EXAMPLES)


def modelled_seconds(optimizer_steps: npt.ArrayLike, batch_size: float) -> npt.NDArray[np.float64]:
    """Seconds to train ``optimizer_steps`` steps of ``batch_size`` examples each from the start,
    at :data:`SECONDS_PER_EXAMPLE` (cumulative when the steps are).

    >>> round(float(modelled_seconds(1000, 32)), 1)
    253.2
    """
    if not (np.isfinite(batch_size) and batch_size > 0):
        raise ValueError(f"batch_size is {batch_size!r}, but must be a number > 0")
    return np.asarray(optimizer_steps, dtype=float) * float(batch_size) * SECONDS_PER_EXAMPLE
