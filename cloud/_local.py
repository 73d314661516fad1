"""The local provider: each "VM" is an ``elastune worker`` process on this machine.

It bills like a cloud (a price per worker-hour, default $1.00, per-second with the ledger's
minimum) so a local sweep reports spend the way a cloud one does.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from budgets import Clock, RealClock
from cloud._provider import ProviderError
from worker.records import Instance, InstanceState

DEFAULT_PRICE_PER_HOUR = 1.0
INSTANCE_TYPE = "local"
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class LocalProvider:
    name = "local"
    blocking_launch = False

    def __init__(
        self,
        broker_url: str,
        *,
        slots: int = 1,
        price_per_hour: float = DEFAULT_PRICE_PER_HOUR,
        workdir: str | Path | None = None,
        log_dir: str | Path | None = None,
        python_path: Sequence[str] = (),
        preload: Sequence[str] = (),
        prefix: str = "local",
        clock: Clock | None = None,
        insecure_broker: bool = False,
        taken: Collection[str] = (),
    ) -> None:
        """``taken``: instance ids an earlier run of the experiment used; a resumed sweep's
        workers get other ids, so each run's workers keep their own rows in the store."""
        self._broker_url = broker_url
        self._insecure = insecure_broker
        self._slots = slots
        self._price = price_per_hour
        self._workdir = str(workdir or os.getcwd())
        self._log_dir = Path(log_dir) if log_dir else None
        self._python_path = list(python_path)
        self._preload = list(preload)
        self._prefix = prefix
        self._clock = clock or RealClock()
        self._counter = itertools.count(1)
        self._taken = frozenset(taken)
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._instances: dict[str, Instance] = {}

    def price_per_hour(self, instance_type: str = INSTANCE_TYPE, spot: bool = False) -> float:
        return self._price

    def slots(self, instance_type: str = INSTANCE_TYPE) -> int:
        return self._slots

    def launch(self, count: int, instance_type: str = INSTANCE_TYPE, spot: bool = False,
               tags: Mapping[str, str] | None = None) -> list[Instance]:
        if instance_type != INSTANCE_TYPE:
            raise ProviderError(f"the local provider has one instance type, {INSTANCE_TYPE!r}")
        env = dict(os.environ)
        # The password travels in the environment, not on the command line where `ps` shows it.
        env["ELASTUNE_BROKER_URL"] = self._broker_url
        env["PYTHONPATH"] = os.pathsep.join(
            [*self._python_path, *filter(None, [env.get("PYTHONPATH")])])
        env.pop("CUDA_VISIBLE_DEVICES", None)
        # Each local "VM" gets its share of the cores, as a real VM would: math libraries
        # otherwise start one thread per core in every worker and oversubscribe the machine.
        threads = str(max(1, (os.cpu_count() or 1) // max(1, count + len(self.live()))))
        for var in _THREAD_VARS:
            env.setdefault(var, threads)
        launched = []
        for _ in range(count):
            iid = f"{self._prefix}-{next(self._counter)}"
            while iid in self._taken:
                iid = f"{self._prefix}-{next(self._counter)}"
            cmd = [sys.executable, "-m", "worker", "--name", iid, "--queue", iid,
                   "--slots", str(self._slots), "--parent-pid", str(os.getpid())]
            for module in self._preload:
                cmd += ["--preload", module]
            if self._insecure:
                cmd.append("--insecure")
            out = subprocess.DEVNULL
            if self._log_dir is not None:
                self._log_dir.mkdir(parents=True, exist_ok=True)
                out = open(self._log_dir / f"{iid}.log", "ab")  # noqa: SIM115 - owned by child
            self._procs[iid] = subprocess.Popen(
                cmd, cwd=self._workdir, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
            if out is not subprocess.DEVNULL:
                out.close()
            inst = Instance(instance_id=iid, provider=self.name, instance_type=INSTANCE_TYPE,
                            spot=False, slots=self._slots, price_per_hour=self._price,
                            state=InstanceState.RUNNING, launched_at=self._clock.now(),
                            queue=iid, tags=dict(tags or {}))
            self._instances[iid] = inst
            launched.append(inst)
        return launched

    def live(self) -> list[str]:
        return [iid for iid, p in self._procs.items() if p.poll() is None]

    def terminate(self, instance_ids: Sequence[str]) -> list[Instance]:
        """Stop the worker processes at once, as a cloud stops a VM: the controller has already
        stopped or collected every segment on them. Billing stops when the process is gone."""
        done = []
        for iid in instance_ids:
            proc = self._procs.get(iid)
            if proc is not None:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            inst = self._instances.get(iid)
            if inst is not None and inst.state != InstanceState.TERMINATED:
                inst = inst.model_copy(update={"state": InstanceState.TERMINATED,
                                               "terminated_at": self._clock.now()})
                self._instances[iid] = inst
            if inst is not None:
                done.append(inst)
        return done

    def list(self, experiment: str | None = None) -> list[Instance]:
        out = []
        for iid, inst in self._instances.items():
            proc = self._procs.get(iid)
            if inst.state == InstanceState.RUNNING and proc is not None and proc.poll() is not None:
                inst = inst.model_copy(update={"state": InstanceState.TERMINATED,
                                               "terminated_at": self._clock.now()})
                self._instances[iid] = inst
            if experiment is None or inst.tags.get("experiment") == experiment:
                out.append(inst)
        return out
