"""LightGBM: a boosting round (or every ``rounds_per_step`` rounds) is one step of the trial.

:class:`LightGBMCallback` reports the monitored eval metric at each step, keeps the booster
(its model text) through the trial's context when the segment ends, and stops boosting
there. The next segment boosts on from that booster (``lgb.train(..., init_model=...)``), so
the final booster has exactly ``max_resource`` steps' rounds, never a restart's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

try:
    import lightgbm as lgb
except ImportError as exc:
    raise ImportError("LightGBMCallback needs LightGBM: pip install 'elastune[lightgbm]'"
                      ) from exc

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

_KEY = "lightgbm_model"


class LightGBMCallback:
    """Run ``lgb.train`` as one segment of a trial.

    ``monitor``: the metric(s) to report, named ``"<valid set>-<metric>"``
    (``valid_sets=[val], valid_names=["val"]`` with ``metric="multi_logloss"``:
    ``"val-multi_logloss"``): a name, a list, or ``{name in the sweep: name logged}``:

        cb = LightGBMCallback(ctx, monitor="val-multi_logloss")
        lgb.train(params, train_set, num_boost_round=cb.num_boost_round,
                  init_model=cb.init_model, valid_sets=[val_set], valid_names=["val"],
                  callbacks=[cb])
    """

    # After LightGBM's own callbacks (record_evaluation is 20, early_stopping 30).
    order = 40
    before_iteration = False

    def __init__(self, ctx: TrialContext, monitor: Monitor, *,
                 rounds_per_step: int = 1) -> None:
        self._ctx = ctx
        self._names = metric_names(monitor)
        self._every = check_every(rounds_per_step, "rounds_per_step")
        self._restored = False
        self._booster: lgb.Booster | None = None
        self._checked = False

    @property
    def num_boost_round(self) -> int:
        """The rounds this segment boosts: its steps times ``rounds_per_step``."""
        return (self._ctx.stop_step - self._ctx.start_step) * self._every

    @property
    def init_model(self) -> lgb.Booster | None:
        """The trial's booster at the segment's start, for ``lgb.train(init_model=...)``, or
        None on the trial's first segment."""
        if not self._restored:
            self._restored = True
            saved = own_checkpoint(self._ctx, _KEY, "LightGBMCallback")
            if saved is not None:
                self._booster = lgb.Booster(model_str=saved)
        return self._booster

    def _check(self, env: lgb.callback.CallbackEnv) -> None:
        ctx = self._ctx
        ctx_rounds = ctx.start_step * self._every
        if env.begin_iteration != ctx_rounds:
            hint = (" (pass init_model=callback.init_model to lgb.train)"
                    if env.begin_iteration == 0 else "")
            raise RuntimeError(
                f"trial {ctx.trial_id}'s segment starts after step {ctx.start_step} "
                f"({ctx_rounds} rounds), but the booster has {env.begin_iteration}{hint}")
        if env.end_iteration < ctx.stop_step * self._every:
            raise ValueError(
                f"lgb.train boosts to round {env.end_iteration}, before the segment's last "
                f"step {ctx.stop_step} ({ctx.stop_step * self._every} rounds): pass "
                "num_boost_round=callback.num_boost_round")
        self._checked = True

    def __call__(self, env: lgb.callback.CallbackEnv) -> None:
        if not self._checked:
            self._check(env)
        rounds = env.iteration + 1
        if rounds % self._every:
            return
        step = rounds // self._every
        logged = {f"{data}-{metric}": value
                  for data, metric, value, *_ in env.evaluation_result_list or []}
        self._ctx.report(step, **pick(logged, self._names, f"LightGBMCallback at step {step}"))
        if not segment_ends(self._ctx, step):
            return
        self._ctx.checkpoint({_KEY: env.model.model_to_string(), "step": step})
        if rounds < env.end_iteration:
            # LightGBM's way to end boosting early; it keeps every round (best_iteration is
            # set to this one).
            raise lgb.callback.EarlyStopException(env.iteration,
                                                  env.evaluation_result_list or [])
