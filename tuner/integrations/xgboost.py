"""XGBoost: a boosting round (or every ``rounds_per_step`` rounds) is one step of the trial.

:class:`XGBoostCallback` reports the monitored eval metric at each step, keeps the booster
through the trial's context when the segment ends, and stops boosting there. The next
segment boosts on from that booster (``xgb.train(..., xgb_model=cb.xgb_model)``), so the
final booster has exactly ``max_resource`` steps' rounds, never a restart's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

try:
    import xgboost as xgb
except ImportError as exc:
    raise ImportError("XGBoostCallback needs XGBoost: pip install 'elastune[xgboost]' (or "
                      "'elastune[xgboost-cpu]', a CPU-only build)") from exc

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

_KEY = "xgboost_booster"


class XGBoostCallback(xgb.callback.TrainingCallback):
    """Run ``xgb.train`` as one segment of a trial.

    ``monitor``: the metric(s) to report, named ``"<eval set>-<metric>"`` as XGBoost prints
    them (``evals=[(dval, "val")]`` with ``eval_metric="mlogloss"``: ``"val-mlogloss"``): a
    name, a list, or ``{name in the sweep: name logged}``:

        cb = XGBoostCallback(ctx, monitor="val-mlogloss")
        xgb.train(params, dtrain, num_boost_round=cb.num_boost_round, xgb_model=cb.xgb_model,
                  evals=[(dval, "val")], callbacks=[cb], verbose_eval=False)
    """

    def __init__(self, ctx: TrialContext, monitor: Monitor, *,
                 rounds_per_step: int = 1) -> None:
        super().__init__()
        self._ctx = ctx
        self._names = metric_names(monitor)
        self._every = check_every(rounds_per_step, "rounds_per_step")
        self._restored = False
        self._booster: xgb.Booster | None = None
        self._kept = False

    @property
    def num_boost_round(self) -> int:
        """The rounds this segment boosts: its steps times ``rounds_per_step``."""
        return (self._ctx.stop_step - self._ctx.start_step) * self._every

    @property
    def xgb_model(self) -> xgb.Booster | None:
        """The trial's booster at the segment's start, for ``xgb.train(xgb_model=...)``, or
        None on the trial's first segment."""
        if not self._restored:
            self._restored = True
            saved = own_checkpoint(self._ctx, _KEY, "XGBoostCallback")
            if saved is not None:
                self._booster = xgb.Booster(model_file=bytearray(saved))
        return self._booster

    def before_training(self, model: xgb.Booster) -> xgb.Booster:
        ctx, rounds = self._ctx, model.num_boosted_rounds()
        if rounds != ctx.start_step * self._every:
            hint = " (pass xgb_model=callback.xgb_model to xgb.train)" if rounds == 0 else ""
            raise RuntimeError(
                f"trial {ctx.trial_id}'s segment starts after step {ctx.start_step} "
                f"({ctx.start_step * self._every} rounds), but the booster has {rounds}{hint}")
        return model

    def after_iteration(self, model: xgb.Booster, epoch: int,
                        evals_log: dict[str, dict[str, Any]]) -> bool:
        rounds = model.num_boosted_rounds()
        if rounds % self._every:
            return False
        step = rounds // self._every
        logged = {f"{data}-{metric}": values[-1] for data, metrics in evals_log.items()
                  for metric, values in metrics.items()}
        self._ctx.report(step, **pick(logged, self._names, f"XGBoostCallback at step {step}"))
        if not segment_ends(self._ctx, step):
            return False
        self._keep(model)
        return True

    def after_training(self, model: xgb.Booster) -> xgb.Booster:
        # Another callback (early stopping) ended boosting before the segment's last step:
        # the booster it ends with is kept all the same.
        if not self._kept and self._ctx.last_reported > self._ctx.start_step:
            self._keep(model)
        return model

    def _keep(self, model: xgb.Booster) -> None:
        self._ctx.checkpoint({_KEY: bytes(model.save_raw("ubj")),
                              "step": self._ctx.last_reported})
        self._kept = True
