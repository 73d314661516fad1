"""tuner.integrations: the shared metric handling (quick), and each framework's callback run
in this process as successive segments of one trial on a real TrialContext (slow: a Redis
server carries its reports and stop requests), where a promotion must continue the model and
a mistake must fail loudly."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tuner.integrations._metrics import check_every, metric_names, pick

ROOT = Path(__file__).resolve().parents[2]


def test_monitor_takes_a_name_a_list_or_a_mapping():
    assert metric_names("val_acc") == {"val_acc": "val_acc"}
    assert metric_names(["a", "b"]) == {"a": "a", "b": "b"}
    assert metric_names({"accuracy": "eval_accuracy"}) == {"accuracy": "eval_accuracy"}
    for bad in ("", [], {"a": ""}):
        with pytest.raises(ValueError, match="names no metric"):
            metric_names(bad)
    with pytest.raises(TypeError, match="monitor must be"):
        metric_names(3)  # type: ignore[arg-type]


def test_a_metric_that_was_not_logged_is_an_error_naming_those_that_were():
    assert pick({"x": 1, "loss": "0.5"}, {"l": "loss"}, "here") == {"l": 0.5}
    with pytest.raises(KeyError, match=r"here: .*\['val_acc'\].*logged: \['loss', 'x'\]"):
        pick({"x": 1, "loss": 0.5}, {"val_acc": "val_acc"}, "here")


def test_a_step_is_a_whole_number_of_rounds():
    assert check_every(3, "rounds_per_step") == 3
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="rounds_per_step must be a whole number"):
            check_every(bad, "rounds_per_step")  # type: ignore[arg-type]


def test_the_type_stub_names_every_export():
    import ast

    import tuner.integrations as integrations

    stub = ast.parse((ROOT / "tuner" / "integrations" / "__init__.pyi").read_text())
    assert {a.asname or a.name for node in stub.body if isinstance(node, ast.ImportFrom)
            for a in node.names} == set(integrations.__all__)


@pytest.mark.parametrize(("module", "blocked", "extra"), [
    ("lightning", ("lightning", "lightning.pytorch", "pytorch_lightning"), "lightning"),
    ("transformers", ("transformers",), "transformers"),
    ("xgboost", ("xgboost",), "xgboost"),
    ("lightgbm", ("lightgbm",), "lightgbm"),
])
def test_a_missing_framework_names_the_extra_that_installs_it(module, blocked, extra,
                                                              monkeypatch):
    import importlib

    for name in blocked:
        monkeypatch.setitem(sys.modules, name, None)    # as if not installed
    monkeypatch.delitem(sys.modules, f"tuner.integrations.{module}", raising=False)
    with pytest.raises(ImportError, match=rf"pip install 'elastune\[{extra}\]'"):
        importlib.import_module(f"tuner.integrations.{module}")


@pytest.mark.slow
def test_importing_the_package_imports_no_framework():
    code = ("import sys, tuner.integrations as ti\n"
            "assert set(ti.__all__) <= set(dir(ti))\n"
            "heavy = [m for m in ('torch', 'lightning', 'pytorch_lightning', 'transformers',"
            " 'xgboost', 'lightgbm') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# --- each callback in successive segments on a real context -------------------------------

@pytest.fixture(scope="module")
def redis_client():
    from worker import EmbeddedRedis

    server = EmbeddedRedis()
    address = server.start()
    yield address.client()
    server.stop()


class Trial:
    """One trial's segments run here, one after another, on real TrialContexts."""

    def __init__(self, client, folder: Path) -> None:
        self.client, self.folder, self.id = client, folder, uuid.uuid4().hex[:8]

    def run(self, fn, params, start, stop, *, stop_requested=False):
        from worker import TrialContext
        from worker.records import Segment

        seg = Segment(segment_id=uuid.uuid4().hex, experiment_id="e", trial_id=self.id,
                      trainable="x:y", params=params, start_step=start, stop_step=stop,
                      checkpoint_dir=str(self.folder), events_key=f"ev-{self.id}",
                      stop_key=f"stop-{self.id}")
        if stop_requested:
            self.client.sadd(seg.stop_key, seg.segment_id)
        ctx = TrialContext(seg, self.client, [])
        try:
            fn(params, ctx)
        finally:
            events = [json.loads(v[b"e"]) for _, v in self.client.xrange(seg.events_key)]
            self.client.delete(seg.events_key)
            self.reports = [(e["step"], e["metrics"]) for e in events]
        return ctx

    def state(self, at_most=10**6):
        from worker import load_checkpoint

        return load_checkpoint(self.folder, at_most)


@pytest.fixture
def trial(redis_client, tmp_path):
    return Trial(redis_client, tmp_path / "ckpt")


@pytest.mark.slow
def test_xgboost_steps_of_several_rounds_boost_on_and_stop_when_asked(trial):
    xgb = pytest.importorskip("xgboost")
    from examples.digits import data
    from tuner.integrations import XGBoostCallback

    x_train, _, y_train, _ = data()
    dtrain = xgb.DMatrix(x_train[:300], label=y_train[:300])

    def train(params, ctx, resume=True):
        cb = XGBoostCallback(ctx, monitor={"loss": "train-mlogloss"}, rounds_per_step=2)
        xgb.train({"objective": "multi:softprob", "num_class": 10, "nthread": 1,
                   "eval_metric": "mlogloss"}, dtrain, num_boost_round=cb.num_boost_round,
                  xgb_model=cb.xgb_model if resume else None, evals=[(dtrain, "train")],
                  callbacks=[cb], verbose_eval=False)

    trial.run(train, {}, 0, 2)
    assert [s for s, _ in trial.reports] == [1, 2]
    ctx = trial.run(train, {}, 2, 5, stop_requested=True)   # a stop: checkpoint at once
    assert [s for s, _ in trial.reports] == [3] and ctx.checkpoint_step == 3
    step, state = trial.state()
    assert step == 3 and xgb.Booster(model_file=bytearray(state["xgboost_booster"])
                                     ).num_boosted_rounds() == 6
    with pytest.raises(RuntimeError, match="pass xgb_model=callback.xgb_model"):
        trial.run(lambda p, c: train(p, c, resume=False), {}, 3, 5)

    class EndsAtRound8(xgb.callback.TrainingCallback):   # as early stopping would
        def after_iteration(self, model, epoch, evals_log):
            return model.num_boosted_rounds() >= 8

    def ended_early(params, ctx):
        cb = XGBoostCallback(ctx, monitor={"loss": "train-mlogloss"}, rounds_per_step=2)
        xgb.train({"num_class": 10, "objective": "multi:softprob", "nthread": 1}, dtrain,
                  num_boost_round=cb.num_boost_round, xgb_model=cb.xgb_model,
                  evals=[(dtrain, "train")], callbacks=[cb, EndsAtRound8()],
                  verbose_eval=False)

    ctx = trial.run(ended_early, {}, 3, 6)   # ends at step 4: its booster is kept there
    assert [s for s, _ in trial.reports] == [4] and ctx.checkpoint_step == 4


@pytest.mark.slow
def test_lightgbm_steps_of_several_rounds_boost_on_and_refuse_a_short_run(trial):
    lgb = pytest.importorskip("lightgbm")
    from examples.digits import data
    from tuner.integrations import LightGBMCallback

    x_train, _, y_train, _ = data()

    def train(params, ctx, rounds=None, monitor="train-multi_logloss"):
        data_set = lgb.Dataset(x_train[:300], label=y_train[:300], free_raw_data=False)
        cb = LightGBMCallback(ctx, monitor=monitor, rounds_per_step=2)
        lgb.train({"objective": "multiclass", "num_class": 10, "num_threads": 1,
                   "verbosity": -1, "metric": "multi_logloss"}, data_set,
                  num_boost_round=rounds or cb.num_boost_round, init_model=cb.init_model,
                  valid_sets=[data_set], valid_names=["train"], callbacks=[cb])

    trial.run(train, {}, 0, 2)
    trial.run(train, {}, 2, 4)
    assert [s for s, _ in trial.reports] == [3, 4]
    assert lgb.Booster(model_str=trial.state()[1]["lightgbm_model"]).current_iteration() == 8
    with pytest.raises(ValueError, match="num_boost_round=callback.num_boost_round"):
        trial.run(lambda p, c: train(p, c, rounds=1), {}, 4, 6)
    with pytest.raises(KeyError, match=r"\['val-auc'\].*logged: \['train-multi_logloss'\]"):
        trial.run(lambda p, c: train(p, c, monitor="val-auc"), {}, 4, 6)


@pytest.mark.slow
def test_lightning_continues_from_its_checkpoint_and_says_when_it_was_not_given(trial):
    pytest.importorskip("lightning")
    from examples.lightning_digits import train
    from tuner.integrations import LightningCallback

    trial.run(train, {"lr": 1e-2}, 0, 1)
    ctx = trial.run(train, {"lr": 1e-2}, 1, 3, stop_requested=True)
    assert [s for s, _ in trial.reports] == [2] and ctx.checkpoint_step == 2
    assert trial.state()[1]["epoch"] == 2

    import examples.lightning_digits as example

    def forgetful(params, ctx):
        cb = LightningCallback(ctx, monitor="val_acc")
        trainer = example.L.Trainer(max_epochs=9, callbacks=[cb], logger=False,
                                    enable_checkpointing=False, enable_progress_bar=False)
        trainer.fit(example.DigitsMLP(16, 1e-2), *example.loaders(64))

    with pytest.raises(RuntimeError, match="pass ckpt_path=callback.ckpt_path"):
        trial.run(forgetful, {}, 2, 3)

    class StopsAfterOneEpoch(example.L.Callback):   # as early stopping would
        def on_train_epoch_end(self, trainer, pl_module):
            trainer.should_stop = True

    def ended_early(params, ctx):
        cb = LightningCallback(ctx, monitor="val_acc")
        trainer = example.L.Trainer(max_epochs=9, callbacks=[cb, StopsAfterOneEpoch()],
                                    logger=False, enable_checkpointing=False,
                                    enable_progress_bar=False)
        trainer.fit(example.DigitsMLP(64, 1e-2), *example.loaders(64), ckpt_path=cb.ckpt_path)

    ctx = trial.run(ended_early, {}, 2, 5)   # ends at step 3: its model is kept there
    assert [s for s, _ in trial.reports] == [3] and ctx.checkpoint_step == 3
    assert trial.state()[1]["epoch"] == 3


@pytest.mark.slow
def test_transformers_steps_of_optimizer_steps_continue_the_trainer(trial):
    pytest.importorskip("transformers")
    from transformers import Trainer, TrainingArguments

    import examples.transformers_tiny as example
    from tuner.integrations import TransformersCallback

    def train(params, ctx):
        cb = TransformersCallback(ctx, monitor="eval_accuracy", every_steps=4)
        args = TrainingArguments(output_dir=cb.output_dir, max_steps=40, learning_rate=3e-3,
                                 per_device_train_batch_size=32, save_strategy="no",
                                 report_to="none", disable_tqdm=True, use_cpu=True)
        model = example.BertForSequenceClassification(example.BertConfig(
            vocab_size=example.VOCAB, hidden_size=16, num_hidden_layers=1,
            num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=example.LENGTH, num_labels=2))
        train_set, val_set = example.data()
        Trainer(model=model, args=args, train_dataset=train_set, eval_dataset=val_set,
                compute_metrics=example.accuracy, callbacks=[cb]
                ).train(resume_from_checkpoint=cb.resume_from_checkpoint)

    trial.run(train, {}, 0, 1)
    trial.run(train, {}, 1, 3)
    assert [s for s, _ in trial.reports] == [2, 3]
    files = trial.state()[1]["transformers_checkpoint"]
    assert json.loads(files["trainer_state.json"])["global_step"] == 12
    # The trial's checkpoints are the Trainer's: another callback refuses them, loudly.
    pytest.importorskip("lightgbm")
    from tuner.integrations import LightGBMCallback

    with pytest.raises(ValueError, match="not written by LightGBMCallback"):
        trial.run(lambda p, c: LightGBMCallback(c, monitor="x").init_model, {}, 3, 4)


def test_the_guide_has_a_whole_script_per_framework():
    import re

    page = (ROOT / "docs" / "guides" / "frameworks.md").read_text()
    scripts = re.findall(r"```python\n(.*?)```", page, re.S)
    names = {"LightningCallback", "TransformersCallback", "XGBoostCallback", "LightGBMCallback"}
    used = set()
    for code in scripts:
        compile(code, "frameworks.md", "exec")
        assert 'if __name__ == "__main__":' in code and "tune(" in code
        used |= {n for n in names if f"from tuner.integrations import {n}" in code}
    assert used == names


@pytest.mark.slow
def test_transformers_reports_a_step_once_under_the_users_own_evaluations(trial):
    pytest.importorskip("transformers")
    from transformers import Trainer, TrainingArguments

    import examples.transformers_tiny as example
    from tuner.integrations import TransformersCallback

    def train(params, ctx, epochs=3):
        cb = TransformersCallback(ctx, monitor="eval_loss")
        # The user's own evaluations: every 2 optimizer steps, mid-epoch and at its end.
        args = TrainingArguments(output_dir=cb.output_dir, num_train_epochs=epochs,
                                 per_device_train_batch_size=128, eval_strategy="steps",
                                 eval_steps=2, save_strategy="no", report_to="none",
                                 disable_tqdm=True, use_cpu=True)
        model = example.BertForSequenceClassification(example.BertConfig(
            vocab_size=example.VOCAB, hidden_size=16, num_hidden_layers=1,
            num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=example.LENGTH, num_labels=2))
        train_set, val_set = example.data()
        Trainer(model=model, args=args, train_dataset=train_set, eval_dataset=val_set,
                callbacks=[cb]).train(resume_from_checkpoint=cb.resume_from_checkpoint)

    trial.run(train, {}, 0, 3)   # (an evaluation at epoch 2.5 rounds to step 2: not again)
    assert [s for s, _ in trial.reports] == [1, 2, 3]
    with pytest.raises(ValueError, match="give num_train_epochs the sweep's max_resource"):
        trial.run(train, {}, 3, 4)
