# For type checkers: tuner/integrations/__init__.py imports these names lazily.
from tuner.integrations.lightgbm import LightGBMCallback as LightGBMCallback
from tuner.integrations.lightning import LightningCallback as LightningCallback
from tuner.integrations.transformers import TransformersCallback as TransformersCallback
from tuner.integrations.xgboost import XGBoostCallback as XGBoostCallback
