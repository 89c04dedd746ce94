"""The catalogue of ``wireup verify`` checks: one entry per check, with its rule ID and purpose.

A check is what the GPU runner records per case (``CheckRecord.check``, the ``name`` of an evidence
record's check); its rule is what ``wireup verify`` reports when the check fails (one verify rule per
check, registered by :mod:`audit.rules.verify`). The runtime records checks through these entries, the
verify rules, mutate and the reports read them back through :func:`check_named`; a name that is not
in the catalogue is an error (:class:`UnknownCheck`), never a silent VERIFY_REFERENCE.

Pure data: importing it imports no GPU package and nothing of the runtime.

>>> REFERENCE.rule
'VERIFY_REFERENCE'
>>> check_named("guards").rule
'VERIFY_OUT_OF_BOUNDS'
>>> GRADCHECK.failure("kernel", "aux_trunk_backward", "output \\"dx\\" has NaN/Inf", at="B=37")
'Kernel "aux_trunk_backward" fails VERIFY_GRADCHECK at B=37: output "dx" has NaN/Inf.'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VerifyCheck:
    """One verify check: ``name`` as recorded per case, the ``rule`` ID it fails as, its ``purpose``."""

    name: str
    rule: str
    purpose: str

    def failure(self, kind: str, subject: str, what: str, at: str = "") -> str:
        """The finding sentence of a failure of this check: ``Kernel "k" fails RULE at AT: WHAT.``
        (``kind`` is "kernel" or "schedule"; without ``at`` the sentence has no "at" part)."""
        where = f" at {at}" if at else ""
        return f'{"Kernel" if kind == "kernel" else "Schedule"} "{subject}" fails {self.rule}{where}: {what}.'


class UnknownCheck(LookupError):
    """A check name that is not in the catalogue: a bug in whatever recorded it (not a user error)."""


REFERENCE = VerifyCheck("reference", "VERIFY_REFERENCE", "Every kernel output matches its float64 reference within the documented float32 tolerance, at every size and dims variant.")
WRITTEN = VerifyCheck("written", "VERIFY_UNWRITTEN_OUTPUT", "A kernel writes every element of every output: none still holds the poison pattern after two runs.")
GUARDS = VerifyCheck("guards", "VERIFY_OUT_OF_BOUNDS", "A kernel writes nothing into the guard bands around its buffers.")
UNTOUCHED = VerifyCheck("untouched", "VERIFY_UNTOUCHED", "A kernel leaves what lies outside its declared write range, and outside the views it writes of a flat buffer, byte for byte unchanged.")
INPUTS_UNMODIFIED = VerifyCheck("inputs_unmodified", "VERIFY_INPUT_MODIFIED", "A kernel leaves every input buffer (and a read-only ISV) byte for byte unchanged.")
FINITE = VerifyCheck("finite", "VERIFY_NAN", "A kernel produces no NaN or Inf where its float64 reference is finite.")
GRADCHECK = VerifyCheck("gradcheck", "VERIFY_GRADCHECK", "A backward kernel's outputs equal central finite differences of its gradient-check loss.")
MASK_ZERO = VerifyCheck("mask_zero", "VERIFY_MASK_ZERO", "Rows a mask skips are exactly zero in every output the contract lists under mask.zeroes.")
ALL_SKIP = VerifyCheck("all_skip", "VERIFY_ALL_SKIP", "A batch whose rows are all skipped gives zeros in the masked outputs and no NaN anywhere.")
UNIT_SCALE = VerifyCheck("unit_scale", "VERIFY_UNIT_SCALE", "A unit_scale property holds: the output stays O(1) for inputs of every declared magnitude once the ISV slot holds their scale.")
DIVISOR_ZERO = VerifyCheck("divisor_zero", "VERIFY_DIVISOR_ZERO", "An ISV scale or divisor slot a kernel reads, set to 0, gives no NaN or Inf.")
INOUT_DELTA = VerifyCheck("inout_delta", "VERIFY_INOUT_DELTA", "The change a kernel makes to an inout or accumulate buffer (out - in) matches the reference's change within a tolerance relative to that change.")
ACCUMULATE = VerifyCheck("accumulate", "VERIFY_ACCUMULATE", "An accumulate parameter adds to its previous contents instead of overwriting them.")
DETERMINISM = VerifyCheck("determinism", "VERIFY_DETERMINISM", "Two runs on identical inputs agree bit for bit, or within the declared nondeterministic tolerance.")
CHAIN = VerifyCheck("chain", "VERIFY_CHAIN", "A schedule run end to end on the device matches the float64 reference chain in every buffer it writes.")
GRAPH_REPLAY = VerifyCheck("graph_replay", "VERIFY_GRAPH_REPLAY", "A captured CUDA graph replayed after inputs and ISV change in place equals an eager run on the same inputs.")
EQUIVALENCE = VerifyCheck("equivalence", "VERIFY_EQUIVALENCE", "A schedule declared equivalent to another gives the same losses and gradients from identical inputs.")
TIMEOUT = VerifyCheck("timeout", "VERIFY_TIMEOUT", "No kernel hangs: every launch finishes within the verify timeout.")
LAUNCH = VerifyCheck("launch", "VERIFY_LAUNCH_ERROR", "Every kernel loads and launches without a CUDA error.")
SANITIZER_MEMCHECK = VerifyCheck("sanitizer_memcheck", "SANITIZER_MEMCHECK", "compute-sanitizer memcheck reports no invalid memory access in any kernel.")
SANITIZER_RACECHECK = VerifyCheck("sanitizer_racecheck", "SANITIZER_RACECHECK", "compute-sanitizer racecheck reports no shared-memory data race in any kernel.")
SANITIZER_INITCHECK = VerifyCheck("sanitizer_initcheck", "SANITIZER_INITCHECK", "compute-sanitizer initcheck reports no read of uninitialised device memory.")
SANITIZER_SYNCCHECK = VerifyCheck("sanitizer_synccheck", "SANITIZER_SYNCCHECK", "compute-sanitizer synccheck reports no invalid barrier use.")

# every check, in the order ``wireup rules`` lists the verify rules
CHECKS: tuple[VerifyCheck, ...] = (
    REFERENCE, WRITTEN, GUARDS, UNTOUCHED, INPUTS_UNMODIFIED, FINITE, GRADCHECK, MASK_ZERO, ALL_SKIP, UNIT_SCALE, DIVISOR_ZERO,
    ACCUMULATE, INOUT_DELTA, DETERMINISM, CHAIN, GRAPH_REPLAY, EQUIVALENCE, TIMEOUT, LAUNCH,
    SANITIZER_MEMCHECK, SANITIZER_RACECHECK, SANITIZER_INITCHECK, SANITIZER_SYNCCHECK,
)  # fmt: skip

# compute-sanitizer tool -> the check its reports fail
SANITIZER_CHECKS: dict[str, VerifyCheck] = {
    "memcheck": SANITIZER_MEMCHECK, "racecheck": SANITIZER_RACECHECK, "initcheck": SANITIZER_INITCHECK, "synccheck": SANITIZER_SYNCCHECK,
}  # fmt: skip

# the checks whose pass makes a subject verified: a kernel compared with its reference or its gradient
# check, a schedule with its reference chain (anything else passing alone proves too little)
ANCHORS: dict[str, tuple[VerifyCheck, ...]] = {"kernel": (REFERENCE, GRADCHECK), "schedule": (CHAIN,)}

_BY_NAME = {c.name: c for c in CHECKS}
_BY_RULE = {c.rule: c for c in CHECKS}


def check_named(name: str) -> VerifyCheck:
    """The catalogue entry of the check ``name``; raises :class:`UnknownCheck` for any other name.

    >>> check_named("no_such_check")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    audit.verify_checks.UnknownCheck: "no_such_check" is not a verify check; the checks are "reference", "written", ...
    """
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        valid = ", ".join(f'"{c.name}"' for c in CHECKS)
        raise UnknownCheck(f'"{name}" is not a verify check; the checks are {valid}.') from None


def check_for_rule(rule_id: str) -> VerifyCheck:
    """The check that fails as ``rule_id``; raises :class:`UnknownCheck` when no check does."""
    try:
        return _BY_RULE[rule_id]
    except (KeyError, TypeError):
        raise UnknownCheck(f'"{rule_id}" is the rule of no verify check.') from None
