# For type checkers: worker/__init__.py imports these names lazily (worker._exports).
from worker._app import make_app as make_app
from worker._broker import RIDE_OUT_S as RIDE_OUT_S
from worker._broker import BrokerAddress as BrokerAddress
from worker._broker import BrokerURLError as BrokerURLError
from worker._checkpoints import load_checkpoint as load_checkpoint
from worker._checkpoints import save_checkpoint as save_checkpoint
from worker._cleanup import forget_workers as forget_workers
from worker._context import TrialContext as TrialContext
from worker._embedded import EmbeddedRedis as EmbeddedRedis
from worker._interruption import NOTICE_KEY as NOTICE_KEY
from worker._main import REGISTRY_KEY as REGISTRY_KEY
from worker._task import KEY_TTL_S as KEY_TTL_S
from worker._task import TASK_NAME as TASK_NAME
from worker._trainable import load_trainable as load_trainable
from worker._trainable import write_bundle as write_bundle
