"""A 2-layer BERT, built from a config (nothing downloaded), learns a synthetic task with
the ``transformers`` Trainer: one epoch per step, through
:class:`tuner.integrations.TransformersCallback` (report, checkpoint, resume, stop).

The task: in a sequence of random tokens, does token 3 come before token 4? CPU, a fraction
of a second an epoch.
Sweep: ``examples/transformers_tiny.yaml``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    EvalPrediction,
    Trainer,
    TrainingArguments,
)

from tuner.integrations import TransformersCallback

MAX_EPOCHS = 27   # the sweep's max_resource
VOCAB, LENGTH, FIRST, SECOND = 32, 16, 3, 4


class Sequences(torch.utils.data.Dataset):
    def __init__(self, ids: np.ndarray, labels: np.ndarray) -> None:
        self.ids, self.labels = torch.tensor(ids), torch.tensor(labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


@lru_cache(maxsize=1)
def data(n_train: int = 512, n_val: int = 256) -> tuple[Sequences, Sequences]:
    rng = np.random.default_rng(0)
    n = n_train + n_val
    ids = rng.integers(SECOND + 1, VOCAB, size=(n, LENGTH))
    at = np.argsort(rng.random((n, LENGTH)), axis=1)[:, :2]   # two distinct positions
    ids[np.arange(n), at[:, 0]] = FIRST
    ids[np.arange(n), at[:, 1]] = SECOND
    labels = (at[:, 0] < at[:, 1]).astype(np.int64)
    return (Sequences(ids[:n_train], labels[:n_train]),
            Sequences(ids[n_train:], labels[n_train:]))


def accuracy(pred: EvalPrediction) -> dict[str, float]:
    return {"accuracy": float((np.argmax(pred.predictions, -1) == pred.label_ids).mean())}


def train(params: dict[str, Any], ctx: Any) -> None:
    torch.set_num_threads(1)   # a model this small only loses to thread contention
    config = BertConfig(vocab_size=VOCAB, hidden_size=int(params.get("hidden", 32)),
                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=LENGTH, num_labels=2)
    torch.manual_seed(int(params.get("seed", 0)))
    model = BertForSequenceClassification(config)
    callback = TransformersCallback(ctx, monitor="eval_accuracy")
    args = TrainingArguments(
        output_dir=callback.output_dir, num_train_epochs=MAX_EPOCHS,
        learning_rate=float(params.get("lr", 1e-3)), per_device_train_batch_size=32,
        per_device_eval_batch_size=256, save_strategy="no", eval_strategy="no",
        report_to="none", disable_tqdm=True, use_cpu=True, seed=int(params.get("seed", 0)))
    train_set, val_set = data()
    trainer = Trainer(model=model, args=args, train_dataset=train_set, eval_dataset=val_set,
                      compute_metrics=accuracy, callbacks=[callback])
    trainer.train(resume_from_checkpoint=callback.resume_from_checkpoint)
