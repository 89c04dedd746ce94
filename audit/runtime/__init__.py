"""The GPU runner behind ``wireup verify``: real compiled kernels against float64 references.

Public face: :func:`verify` (select, build, run in supervised workers, judge with the verify rules,
write evidence) and :class:`VerifyOutcome`. The pieces live in private modules: backends
(``_backend``, ``_pycuda``, ``_cupy``, ``_emulated``), test data (``_inputs``), guarded memory
(``_memory``), the tolerance rule (``_compare``), kernel checks (``_kernel``), schedules (``_chain``), the
one worker and its one supervisor (``_worker``, ``_supervisor``: units of work, a per-launch watchdog,
worker retirement, the context-lost retry), compute-sanitizer (``_sanitizer``) and evidence
(``_evidence``). :func:`verify_many` (``_many``) verifies many variants of the kernels (mutants) in a
few long-lived workers of the same supervisor; both spread their workers over the GPUs
(``_placement``: ``--workers auto|N``) or over a Ray cluster (``_cluster``: ``--cluster ray``). The checks themselves are catalogued in
:mod:`audit.verify_checks`. Importing this package imports no GPU package; the backends do, when opened.

>>> outcome = verify(Path("."), kernels=["strided_gather"], sizes=[1, 37])   # doctest: +SKIP
>>> outcome.result.exit_code                                                 # doctest: +SKIP
0
"""

from ._cluster import parse_cluster as parse_cluster, require_ray as require_ray
from ._many import Variant as Variant, VariantOutcome as VariantOutcome, gpu_target as gpu_target, verify_many as verify_many
from ._journal import Journal as Journal, VerdictJournal as VerdictJournal, sanitizer_journal_path as sanitizer_journal_path
from ._worker_lifetime import all_workers_stopped as all_workers_stopped
from ._placement import parse_workers as parse_workers, plan_workers as plan_workers, visible_gpus as visible_gpus
from ._plan import dims_variants as dims_variants, uses_runtime_dim as uses_runtime_dim
from ._results import CheckRecord as CheckRecord, SubjectResult as SubjectResult, VerifyRun as VerifyRun
from ._verify import VerifyOutcome as VerifyOutcome, verify as verify
