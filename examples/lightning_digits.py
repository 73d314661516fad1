"""A PyTorch Lightning MLP on scikit-learn's digits: one epoch per step, through
:class:`tuner.integrations.LightningCallback` (report, checkpoint, resume, stop).

CPU, a fraction of a second per epoch. Sweep: ``examples/lightning_digits.yaml``.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from examples.digits import data
from tuner.integrations import LightningCallback

MAX_EPOCHS = 9    # the sweep's max_resource


class DigitsMLP(L.LightningModule):
    def __init__(self, hidden: int, lr: float) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean())

    def configure_optimizers(self) -> Any:
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        # A schedule over the whole run: resuming restores where it is.
        return [opt], [torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=MAX_EPOCHS)]


def loaders(batch_size: int) -> tuple[DataLoader, DataLoader]:
    x_train, x_val, y_train, y_val = data()
    train = TensorDataset(torch.tensor(x_train, dtype=torch.float32), torch.tensor(y_train))
    val = TensorDataset(torch.tensor(x_val, dtype=torch.float32), torch.tensor(y_val))
    return (DataLoader(train, batch_size=batch_size, shuffle=True),
            DataLoader(val, batch_size=512))


def train(params: dict[str, Any], ctx: Any) -> None:
    torch.set_num_threads(1)   # a model this small only loses to thread contention
    L.seed_everything(int(params.get("seed", 0)) + ctx.start_step, verbose=False)
    model = DigitsMLP(hidden=int(params.get("hidden", 64)), lr=float(params.get("lr", 1e-3)))
    callback = LightningCallback(ctx, monitor="val_acc")
    trainer = L.Trainer(max_epochs=MAX_EPOCHS, callbacks=[callback], accelerator="cpu",
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(model, *loaders(int(params.get("batch_size", 64))),
                ckpt_path=callback.ckpt_path)
