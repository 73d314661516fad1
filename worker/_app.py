"""The Celery app: one place for every setting, shared by the controller and the workers."""

from __future__ import annotations

import ssl

from celery import Celery

from worker._broker import BrokerAddress


def make_app(address: BrokerAddress) -> Celery:
    app = Celery("elastune", broker=address.celery_url, set_as_current=False)
    app.conf.update(
        # Only JSON crosses the broker: a pickled message is refused, never executed.
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        event_serializer="json",
        # Results travel through our Redis stream, not Celery's result backend.
        task_ignore_result=True,
        # Ack after the segment ends, so a worker that dies mid-segment leaves the message to be
        # redelivered instead of silently dropping it.
        task_acks_late=True,
        # ...and when the pool process is killed (OOM, SIGKILL) requeue rather than ack.
        task_reject_on_worker_lost=True,
        # Segments are long and placed per worker by the controller: a worker must never hoard
        # messages it cannot start, so it reserves one at a time.
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
        task_create_missing_queues=True,
        # Nothing here uses Celery's remote control (the controller talks to workers through
        # its own keys); off, a worker leaves no pidbox binding behind in a user's Redis.
        worker_enable_remote_control=False,
        broker_transport_options={"visibility_timeout": 3600},
    )
    if address.tls:
        # kombu's default for rediss:// is TLS without certificate checks (a warning, then
        # CERT_NONE). Verify the broker's certificate against the system's trust store, as
        # redis-py does for the same URL (SSL_CERT_FILE / SSL_CERT_DIR name a private CA).
        app.conf.broker_use_ssl = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    from worker._task import TASK_NAME, run_segment

    app.task(name=TASK_NAME, acks_late=True, reject_on_worker_lost=True)(run_segment)
    return app
