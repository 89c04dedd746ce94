"""Where verification workers run: how many, and on which GPU each one is pinned.

``--workers auto|N`` is read by :func:`parse_workers`; :func:`plan_workers` turns it into a
:class:`WorkerPlan`: one device (or None) per worker slot. The GPUs are found without initialising CUDA
in this process (a CUDA context in the supervisor would hold memory on every device and survive a
worker's fault): ``CUDA_VISIBLE_DEVICES`` where it is set, else ``nvidia-smi -L`` (each GPU by its UUID,
or its MIG instances where it is split, so the pinning does not depend on CUDA's device order).

* ``auto``: one worker per visible GPU (at least one); on the emulated backend, one per usable CPU core.
* ``N``: N workers, spread over the GPUs in turn (``--workers 8`` on 2 GPUs: 4 on each). On one GPU or
  none nothing is pinned: N workers share the device, as ``wireup mutate --workers N`` always did.

A worker is pinned by giving it ``CUDA_VISIBLE_DEVICES`` set to its device, so it sees exactly one GPU.

>>> plan_workers("auto", emulated=False, gpus=["GPU-a", "GPU-b"]).devices
['GPU-a', 'GPU-b']
>>> plan_workers(3, emulated=False, gpus=["GPU-a", "GPU-b"]).devices
['GPU-a', 'GPU-b', 'GPU-a']
>>> plan_workers(2, emulated=False, gpus=["GPU-a"]).devices
[None, None]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError

AUTO = "auto"
VISIBLE = "CUDA_VISIBLE_DEVICES"
_GPU_LINE = re.compile(r"^GPU\s+\d+:.*\(UUID:\s*(?P<uuid>[^)\s]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG\s.*\(UUID:\s*(?P<uuid>[^)\s]+)\)")


@dataclass(frozen=True)
class WorkerPlan:
    """``devices[i]`` is what worker slot ``i`` is pinned to (a ``CUDA_VISIBLE_DEVICES`` value), or None
    where it is not pinned; ``gpus`` are the GPUs that were found."""

    devices: list[str | None]
    gpus: list[str]

    @property
    def count(self) -> int:
        return len(self.devices)

    def env(self, slot: int) -> dict[str, str]:
        """The environment that pins slot ``slot`` (empty where it is not pinned)."""
        dev = self.devices[slot % len(self.devices)] if self.devices else None
        return {VISIBLE: dev} if dev is not None else {}


def parse_workers(text: str | int | None, flag: str = "--workers") -> int | str | None:
    """``"auto"``, a positive count, or None (not given); anything else is a :class:`UsageError`."""
    if text is None or isinstance(text, int) and not isinstance(text, bool):
        if isinstance(text, int) and text < 1:
            raise UsageError(f'{flag} takes "auto" or a positive number of workers, found {text}.')
        return text
    value = str(text).strip().lower()
    if value == AUTO:
        return AUTO
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f'{flag} takes "auto" or a positive number of workers, found "{text}".')
    return n


def visible_gpus(environ: Mapping[str, str] | None = None, run: Callable[[list[str]], str | None] | None = None) -> list[str]:
    """The GPUs this process may use, without initialising CUDA: the entries of ``CUDA_VISIBLE_DEVICES``
    where it is set (an empty value or ``-1`` hides every GPU), else the UUIDs ``nvidia-smi -L`` lists
    (a GPU split into MIG instances counts as its instances); [] where neither tells."""
    environ = os.environ if environ is None else environ
    if VISIBLE in environ:
        out = []
        for item in environ[VISIBLE].split(","):
            item = item.strip()
            if not item or item.startswith("-"):
                break  # CUDA stops at the first invalid entry: what follows it is hidden too
            out.append(item)
        return out
    text = (run or _nvidia_smi)(["nvidia-smi", "-L"])
    return gpus_from_listing(text or "")


def gpus_from_listing(text: str) -> list[str]:
    """The device UUIDs of an ``nvidia-smi -L`` listing: each GPU's, or its MIG instances' instead."""
    out: list[str] = []
    gpu: str | None = None
    migs: list[str] = []
    for line in text.splitlines():
        if m := _GPU_LINE.match(line):
            out += migs or ([gpu] if gpu else [])
            gpu, migs = m["uuid"], []
        elif (m := _MIG_LINE.match(line)) and gpu is not None:
            migs.append(m["uuid"])
    out += migs or ([gpu] if gpu else [])
    return out


def _nvidia_smi(argv: list[str]) -> str | None:
    exe = shutil.which(argv[0])
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask), not every core of the machine."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def plan_workers(workers: int | str | None, emulated: bool, gpus: Sequence[str] | None = None, default: int = 1) -> WorkerPlan:
    """The workers of a run (see the module docstring); ``workers`` None means ``default`` of them.
    ``gpus`` defaults to :func:`visible_gpus` (never asked for on the emulated backend)."""
    found = [] if emulated else list(visible_gpus() if gpus is None else gpus)
    if workers == AUTO:
        n = usable_cores() if emulated else max(1, len(found))
    else:
        n = max(1, int(default if workers is None else workers))
    if len(found) < 2:
        return WorkerPlan([None] * n, found)
    return WorkerPlan([found[i % len(found)] for i in range(n)], found)


def run_units(job: dict[str, Any], workers: int | str | None, cluster: str | None, timeout: float, launch_timeout: float | None = None,
              progress: Callable[[dict[str, Any]], None] | None = None, crash_verdict: bool = True, wrapper: Any = None,
              default: int = 1, devices: Sequence[str | None] | None = None, on_done: Any = None) -> Any:  # fmt: skip
    """Run the units of ``job`` where ``workers`` and ``cluster`` say: on a Ray cluster
    (:func:`audit.runtime._cluster.supervise_on_ray`), else in local worker processes pinned by
    :func:`plan_workers` (or to ``devices``, one slot each) through the one supervisor. The same
    ``SupervisedRun`` either way, its outcomes by unit index whatever ran where."""
    if cluster is not None:
        from ._cluster import supervise_on_ray

        return supervise_on_ray(job, cluster, workers, timeout, launch_timeout, progress, crash_verdict, on_done=on_done)
    from ._supervisor import supervise

    emulated = list(job["base"]["backends"]) == ["emulated"]
    if devices is not None:
        slots, pins = len(devices), list(devices)
    else:
        plan = plan_workers(workers, emulated, default=default)
        slots, pins = plan.count, plan.devices
    return supervise(job, workers=slots, timeout=timeout, launch_timeout=launch_timeout, progress=progress, wrapper=wrapper,
                     crash_verdict=crash_verdict, devices=pins, on_done=on_done)  # fmt: skip
