"""Hugging Face ``transformers``: a ``Trainer`` epoch (or every ``every_steps`` optimizer
steps) is one step of the trial.

:class:`TransformersCallback` asks the ``Trainer`` to evaluate at each step and reports the
monitored eval metric; when the segment ends it asks for a checkpoint (model, optimizer,
scheduler, RNG and trainer state: what ``resume_from_checkpoint`` reads), keeps that folder
through the trial's context, and stops training. The next segment unpacks it for
``trainer.train(resume_from_checkpoint=...)``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    from transformers import (
        TrainerCallback,
        TrainerControl,
        TrainerState,
        TrainingArguments,
    )
except ImportError as exc:
    raise ImportError("TransformersCallback needs transformers: pip install "
                      "'elastune[transformers]'") from exc

from tuner.integrations._metrics import (
    Monitor,
    check_every,
    metric_names,
    own_checkpoint,
    pick,
    segment_ends,
)

if TYPE_CHECKING:
    from worker import TrialContext

_KEY = "transformers_checkpoint"


class TransformersCallback(TrainerCallback):
    """Run a ``transformers.Trainer`` as one segment of a trial.

    ``monitor``: the eval metric(s) to report, as the Trainer names them
    (``"eval_loss"``, ``"eval_accuracy"`` from ``compute_metrics``): a name, a list, or
    ``{name in the sweep: name logged}``. ``every_steps``: None (an epoch is a step) or k
    (k optimizer steps are a step). Give the Trainer ``output_dir`` and resume from
    ``resume_from_checkpoint``:

        cb = TransformersCallback(ctx, monitor="eval_accuracy")
        args = TrainingArguments(output_dir=cb.output_dir, num_train_epochs=10,
                                 save_strategy="no", report_to="none")
        trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=val,
                          compute_metrics=accuracy, callbacks=[cb])
        trainer.train(resume_from_checkpoint=cb.resume_from_checkpoint)

    ``num_train_epochs`` (or ``max_steps``) should be the sweep's ``max_resource``: the
    learning-rate schedule then spans the whole run in every segment, and the callback ends
    each segment at ``ctx.stop_step``.
    """

    def __init__(self, ctx: TrialContext, monitor: Monitor, *,
                 every_steps: int | None = None) -> None:
        self._ctx = ctx
        self._names = metric_names(monitor)
        self._every = None if every_steps is None else check_every(every_steps, "every_steps")
        self._folder = tempfile.TemporaryDirectory(prefix="elastune-transformers-")
        self._restored = False
        self._resume: str | None = None
        self._pending: int | None = None     # the step whose evaluation was asked for
        self._reported: int | None = None    # the last step reported (reported once)
        self._saving: int | None = None      # the step whose checkpoint was asked for

    @property
    def output_dir(self) -> str:
        """A private folder for ``TrainingArguments(output_dir=...)``, removed with the
        callback: what the Trainer writes there is kept through the trial's context."""
        return self._folder.name

    @property
    def resume_from_checkpoint(self) -> str | None:
        """The trial's checkpoint as a folder for ``trainer.train(resume_from_checkpoint=...)``,
        or None on the trial's first segment."""
        if not self._restored:
            self._restored = True
            saved = own_checkpoint(self._ctx, _KEY, "TransformersCallback")
            if saved is not None:
                folder = Path(self._folder.name) / "restore"
                for name, data in saved.items():
                    (folder / name).parent.mkdir(parents=True, exist_ok=True)
                    (folder / name).write_bytes(data)
                self._resume = str(folder)
        return self._resume

    def _step(self, state: TrainerState) -> int:
        if self._every is None:
            return round(state.epoch or 0)
        return state.global_step // self._every

    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, **kwargs: Any) -> None:
        ctx = self._ctx
        at = self._step(state)
        if at != ctx.start_step:
            hint = (" (pass resume_from_checkpoint=callback.resume_from_checkpoint to "
                    "trainer.train)" if state.global_step == 0 else "")
            raise RuntimeError(f"trial {ctx.trial_id}'s segment starts after step "
                               f"{ctx.start_step}, but the Trainer starts at step {at}{hint}")
        if self._every is None and state.num_train_epochs < ctx.stop_step:
            raise ValueError(
                f"the Trainer stops after {state.num_train_epochs} epochs, before the "
                f"segment's last step {ctx.stop_step}: give num_train_epochs the sweep's "
                "max_resource")
        if self._every is not None and state.max_steps // self._every < ctx.stop_step:
            raise ValueError(
                f"the Trainer stops after {state.max_steps} optimizer steps, "
                f"{state.max_steps // self._every} steps of every_steps={self._every}, before "
                f"the segment's last step {ctx.stop_step}: give max_steps the sweep's "
                f"max_resource times {self._every}")

    def _boundary(self, state: TrainerState, control: TrainerControl) -> None:
        step = self._step(state)
        if step > self._ctx.start_step and step != self._pending:
            self._pending = step
            control.should_evaluate = True

    def on_step_end(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, **kwargs: Any) -> None:
        if self._every is not None and state.global_step % self._every == 0:
            self._boundary(state, control)

    def on_epoch_end(self, args: TrainingArguments, state: TrainerState,
                     control: TrainerControl, **kwargs: Any) -> None:
        if self._every is None:
            self._boundary(state, control)

    def on_evaluate(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, metrics: dict[str, float] | None = None,
                    **kwargs: Any) -> None:
        step = self._pending
        if step is None or step != self._step(state) or self._reported == step:
            return      # an evaluation between steps, or a second one at a step
        self._ctx.report(step, **pick(metrics or {}, self._names,
                                      f"TransformersCallback at step {step}"))
        self._reported = step
        if segment_ends(self._ctx, step):
            self._saving = step
            control.should_save = True
            control.should_training_stop = True

    def on_save(self, args: TrainingArguments, state: TrainerState,
                control: TrainerControl, **kwargs: Any) -> None:
        if self._saving is None:
            return
        folder = Path(str(args.output_dir)) / f"checkpoint-{state.global_step}"
        files = {str(p.relative_to(folder)): p.read_bytes()
                 for p in sorted(folder.rglob("*")) if p.is_file()}
        self._ctx.checkpoint({_KEY: files, "step": self._saving})
        shutil.rmtree(folder, ignore_errors=True)
        self._saving = None

    def on_train_end(self, args: TrainingArguments, state: TrainerState,
                     control: TrainerControl, **kwargs: Any) -> None:
        if os.path.isdir(self._folder.name):
            self._folder.cleanup()
