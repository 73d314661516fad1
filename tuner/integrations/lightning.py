"""PyTorch Lightning: one training epoch is one step of the trial.

:class:`LightningCallback` reports the monitored metric at each epoch's end, saves the
trainer's full checkpoint (weights, optimizers, schedulers, loops: what Lightning's own
``ckpt_path`` resume reads) through the trial's context when the segment ends, and stops the
trainer there. The next segment hands that checkpoint back to ``trainer.fit(ckpt_path=...)``.
Uses ``lightning.pytorch``, or ``pytorch_lightning`` where only that is installed.
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

try:
    import lightning.pytorch as pl
except ImportError:
    try:  # the older distribution's name
        import pytorch_lightning as pl  # type: ignore[no-redef]
    except ImportError as exc:
        raise ImportError("LightningCallback needs PyTorch Lightning: pip install "
                          "'elastune[lightning]'") from exc

from tuner.integrations._metrics import (
    Monitor,
    metric_names,
    own_checkpoint,
    pick,
    segment_ends,
)

if TYPE_CHECKING:
    from worker import TrialContext

_KEY = "lightning_checkpoint"


class LightningCallback(pl.Callback):
    """Run a ``Trainer`` as one segment of a trial: one epoch per step.

    ``monitor``: the metric(s) to report, as logged (``self.log("val_acc", ...)``): a name,
    a list, or ``{name in the sweep: name logged}``. Pass ``ckpt_path`` to
    ``trainer.fit`` so a promoted trial continues from its checkpoint:

        cb = LightningCallback(ctx, monitor="val_acc")
        trainer = L.Trainer(max_epochs=100, callbacks=[cb], logger=False,
                            enable_checkpointing=False, enable_progress_bar=False)
        trainer.fit(model, train_loader, val_loader, ckpt_path=cb.ckpt_path)

    ``max_epochs`` may be the sweep's ``max_resource`` (the callback ends each segment at
    ``ctx.stop_step``; a schedule that reads ``max_epochs`` then sees the same horizon in
    every segment) or ``ctx.stop_step``. One process per trial: ``ctx`` lives in it.
    """

    def __init__(self, ctx: TrialContext, monitor: Monitor) -> None:
        super().__init__()
        self._ctx = ctx
        self._names = metric_names(monitor)
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._restored = False
        self._ckpt_path: str | None = None
        self._kept = False

    @property
    def ckpt_path(self) -> str | None:
        """The trial's checkpoint as a file for ``trainer.fit(ckpt_path=...)``, or None on
        the trial's first segment."""
        if not self._restored:
            self._restored = True
            saved = own_checkpoint(self._ctx, _KEY, "LightningCallback")
            if saved is not None:
                self._ckpt_path = os.path.join(self._tmp(), "restore.ckpt")
                with open(self._ckpt_path, "wb") as fh:
                    fh.write(saved)
        return self._ckpt_path

    def _tmp(self) -> str:
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="elastune-lightning-")
        return self._folder.name

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        ctx = self._ctx
        if trainer.current_epoch != ctx.start_step:
            hint = (" (pass ckpt_path=callback.ckpt_path to trainer.fit)"
                    if trainer.current_epoch == 0 else "")
            raise RuntimeError(
                f"trial {ctx.trial_id}'s segment starts after step {ctx.start_step}, but the "
                f"trainer starts at epoch {trainer.current_epoch}{hint}")
        if trainer.max_epochs is not None and 0 <= trainer.max_epochs < ctx.stop_step:
            raise ValueError(
                f"Trainer(max_epochs={trainer.max_epochs}) ends before the segment's last "
                f"step {ctx.stop_step}: give max_epochs >= the sweep's max_resource")

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Validation of the epoch has run by now, so its metrics are in callback_metrics.
        step = trainer.current_epoch + 1
        self._ctx.report(step, **pick(trainer.callback_metrics, self._names,
                                      f"LightningCallback at epoch {step}"))
        if segment_ends(self._ctx, step):
            self._keep(trainer)
            trainer.should_stop = True

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Another callback (early stopping) ended training before the segment's last step:
        # the model it ends with is kept all the same.
        if not self._kept and self._ctx.last_reported > self._ctx.start_step:
            self._keep(trainer)

    def _keep(self, trainer: pl.Trainer) -> None:
        path = os.path.join(self._tmp(), "segment.ckpt")
        trainer.save_checkpoint(path)
        with open(path, "rb") as fh:
            self._ctx.checkpoint({_KEY: fh.read(), "epoch": self._ctx.last_reported})
        os.remove(path)
        self._kept = True

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                 stage: str) -> None:
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None
