"""Evidence records of a verification run (one per verified kernel or schedule and backend).

Each record names the hashes of what ran (kernel source and headers, contract, what verify read outside
the contract -- dims, ISV layout, the launches' buffers and their writers' domains --, cubins and their code
hashes -- the identity that holds in every checkout, see :func:`audit.compile.code_hash` -- build flags,
architecture), where it ran (device, driver, CUDA runtime, backend and its version, Python and numpy),
how (seed, sizes) and every check with its verdict and errors. A subject with no passing anchor check
(no reference and no gradient check ran) gets no record: missing evidence is reported as such, never
as a pass. Written atomically through :func:`audit.evidence.write_record`.

>>> paths = write_evidence(run, cs, cfg, folder)      # doctest: +SKIP
"""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..compile import CODE_HASH_VERSION
from ..evidence import CheckOutcome, EvidenceRecord, kernel_inputs, kernel_source_hash, schedule_hashes, schedule_inputs, write_record
from ..hashing import contract_hash
from ._results import VerifyRun


def build_record(run: VerifyRun, result: Any, cs: Any, cfg: Any) -> EvidenceRecord | None:
    env = run.environments.get(result.backend)
    build = run.build
    if result.kind == "kernel":
        k = cs.kernel(result.subject)
        src = kernel_source_hash(cs, cfg, k)
        con = contract_hash(k)
        inputs = kernel_inputs(cs, k)
        sources = [k.source]
    else:
        sched = cs.schedule_map[result.subject]
        src, con = schedule_hashes(cs, cfg, sched)
        inputs = schedule_inputs(cs, sched)
        sources = sorted({cs.kernel_map[s.launch].source for s in sched.launches if s.launch in cs.kernel_map})
    hashes = getattr(build, "cubin_hashes", {}) or {}
    codes = getattr(build, "code_hashes", {}) or {}
    versions = tool_versions(result.backend, env, build)
    checks = [
        CheckOutcome(
            name=c.check, verdict=c.verdict, detail=c.message, size=c.case,
            max_abs_err=c.max_abs_err, max_rel_err=c.max_rel_err, rel_norm_err=c.rel_norm_err,
        )  # fmt: skip
        for c in result.checks
    ]
    return EvidenceRecord(
        subject=result.subject,
        kind=result.kind,
        backend=result.backend,
        verdict="pass" if result.verdict == "pass" else "fail",
        source_hash=src,
        contract_hash=con,
        cubin_hashes={s: hashes[s] for s in sources if s in hashes},
        code_hashes={s: codes[s] for s in sources if s in codes},
        code_hash_version=CODE_HASH_VERSION if codes else "",
        build_flags=list(getattr(build, "flags", []) or []),
        arch=getattr(build, "arch", "") or "",
        device=dict(env.device) if env else {},
        versions=versions,
        seed=run.seed,
        sizes=list(result.sizes),
        checks=checks,
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        duration_s=round(result.duration_s, 3),
        cases=[dict(c) for c in result.cases],
        tails=[dict(t) for t in result.tails],
        references=list(result.references),
        inputs=inputs,
    )


def tool_versions(backend: str, env: Any, build: Any) -> dict[str, str]:
    """The versions a record names: Python, numpy, the backend, driver, CUDA runtime, nvcc, and the header
    packages the kernels were built against (``include_packages``, e.g. "nvidia-cutlass")."""
    versions = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "backend": f"{backend} {env.backend_version}" if env else backend,
        "driver": env.driver_version if env else "",
        "cuda_runtime": env.runtime_version if env else "",
        "nvcc": getattr(build, "nvcc_version", "") or "",
    }
    versions.update({name: v for name, v in sorted((getattr(build, "packages", None) or {}).items()) if name not in versions})
    return versions


def write_evidence(run: VerifyRun, cs: Any, cfg: Any, folder: Path, skip: set[str] = frozenset()) -> tuple[list[Path], list[str]]:
    """Write a record per result; returns (paths written, subjects left without a record and why)."""
    paths, skipped = [], []
    for r in run.results:
        if r.subject in skip:
            skipped.append(f'{r.kind} "{r.subject}": verified with a replacement source, no evidence written')
            continue
        if r.verdict == "not_run":
            skipped.append(f'{r.kind} "{r.subject}" on {r.backend}: nothing was compared with a reference, no evidence written')
            continue
        if r.kind == "kernel" and r.subject not in cs.kernel_map:
            continue
        rec = build_record(run, r, cs, cfg)
        if rec is not None:
            paths.append(write_record(folder, rec))
    return paths, skipped
