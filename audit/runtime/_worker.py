"""The worker process: ``python -m audit.runtime._worker JOB.json`` verifies the job's subjects.

Protocol: one JSON object per line on the worker's original stdout (see :mod:`audit.runtime._runner`);
anything a library prints to stdout is redirected to stderr so it cannot corrupt the protocol. The worker
leaves with ``os._exit`` so no atexit handler (a CUDA context pop after a fault) can hang it.
Exit codes: 0 done, 3 the CUDA context was poisoned (the supervisor restarts a worker for the rest),
4 an internal error (its traceback was sent as a ``crash`` event).
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def main(argv: list[str]) -> int:
    from ._worker_lifetime import die_with_parent

    die_with_parent()  # a supervisor killed outright takes this worker with it
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(ev: dict) -> None:
        proto.write(json.dumps(ev, default=str) + "\n")
        proto.flush()

    code = 0
    try:
        from ._session import JobSpec

        with open(argv[0]) as fh:
            job = JobSpec.from_dict(json.load(fh))
        for p in reversed([job.root, *job.python_paths]):
            if p not in sys.path:
                sys.path.insert(0, p)
        from ._runner import run_job

        poisoned = []

        def watch(ev: dict) -> None:
            if ev.get("event") == "poisoned":
                poisoned.append(ev)
            emit(ev)

        run_job(job, watch)
        code = 3 if poisoned else 0
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the supervisor
        emit({"event": "crash", "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        code = 4
    try:
        proto.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
