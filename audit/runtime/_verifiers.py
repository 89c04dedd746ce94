"""The session that verifies: :class:`~audit.runtime._session.Session` with its verifiers chosen.

The kernel and schedule verifiers (:mod:`._kernel`, :mod:`._chain`) are built on the session, so the
session cannot import them without a circle; this module, one layer up, joins them.

>>> s = VerifyingSession(job, cs, cfg, backends={"emulated": EmulatedBackend()})   # doctest: +SKIP
>>> [r.verdict for r in s.run_subject("kernel", "strided_gather")]                 # doctest: +SKIP
['pass']
"""

from __future__ import annotations

from typing import Any

from ._chain import ScheduleVerifier
from ._kernel import KernelVerifier
from ._session import Session


class VerifyingSession(Session):
    """A session whose subjects run through :class:`KernelVerifier` and :class:`ScheduleVerifier`."""

    def verifier(self, kind: str, name: str) -> Any:
        if kind == "kernel":
            return KernelVerifier(self, self.cs.kernel(name))
        return ScheduleVerifier(self, self.cs.schedule_map[name])
