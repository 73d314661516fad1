"""The dashboard: a local web page over experiment stores, and a one-file HTML report.

    >>> from tuner.dashboard import make_app, serve, write_report   # doctest: +SKIP
    >>> write_report("experiments/digits-mlp-20261202-1", "report.html")   # doctest: +SKIP
"""

from tuner.dashboard._app import make_app
from tuner.dashboard._report import write_report
from tuner.dashboard._server import DEFAULT_PORT, check_bind, is_loopback, serve

__all__ = ["DEFAULT_PORT", "check_bind", "is_loopback", "make_app", "serve", "write_report"]
