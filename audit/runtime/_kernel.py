"""Verification of one kernel: reference comparison, poison and guards, contract properties, gradients.

For every case of dim values (``B=37``, ``B=4,T=17``; see :mod:`audit.cases`), dims variant and local-dim
binding a *case* is built from the contracts: seeded
inputs, the perturbed ISV, scalar values, and whether the float64 reference runs in full or on sampled
rows. Each backend then runs the case:

* run A: inputs uploaded, outputs poisoned; guards, unmodified inputs, the reference comparison, the
  change of each ``inout``/``accumulate`` buffer against the reference's change, masked rows zero (and
  for an all-skip case: zero outputs, no NaN anywhere);
* run B: same inputs, the other poison pattern: nothing left unwritten, bitwise determinism (or within
  the declared ``nondeterministic`` tolerance);
* run C (``accumulate`` parameters): other initial contents, the result moves by exactly that much;
* run D (optional parameters): NULL pointers, the other outputs still match the reference.

Then the gradient check (``gradcheck`` cases against central differences), ``unit_scale`` properties and
ISV scale/divisor slots at zero.

>>> results = KernelVerifier(session, cs.kernel("aux_trunk_forward")).run()   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cases import DimCase, as_case
from ..gradcheck import central_difference, random_directions
from ..model import MULTIPLICATIVE_ROLES, IsvParam, Kernel, ScalarParam, TensorParam
from ._backend import Backend
from ._compare import DTYPE_EPS, Comparison, DeltaTolerance, Tolerance, compare, compare_delta, sqrt_sumsq, within
from ._inputs import apply_mask, inherited_sentinels, isv_perturbed, resolve_domain
from ._memory import Arena, DeviceBuffer, poison_word
from ._plan import (
    GRADCHECK_SIZES, LocalBinding, batch_leading, binding_neighbours_by_dim, case_label, dims_neighbours, dims_variants, extra_bindings, local_bindings, make_env,
    np_dtype, numel, outside_mask, runtime_dims, scalar_value, shape_of, size_in_range, uses_runtime_dim, write_index,
    written_part,
)  # fmt: skip
from ._reference import ReferenceProblem, call
from ..verify_checks import (
    ACCUMULATE, ALL_SKIP, DETERMINISM, DIVISOR_ZERO, FINITE, GRADCHECK, GUARDS, INOUT_DELTA, INPUTS_UNMODIFIED, LAUNCH, MASK_ZERO,
    REFERENCE, UNIT_SCALE, UNTOUCHED, WRITTEN, VerifyCheck,
)  # fmt: skip
from ._results import SubjectResult
from ._session import LaunchFailure, Session

if TYPE_CHECKING:
    from ..search.values import StressPlan

F32_EPS = float(np.finfo(np.float32).eps)
GRAD_RTOL = 1e-3  # gradient check: relative to the finite difference
GRAD_ATOL = 1e-4  # gradient check: relative to the gradient's scale (max |fd| or ||g||_2)
GRAD_ELEMENTWISE_MAX = 64  # primals up to this many elements are checked element by element
GRAD_DIRECTIONS = 4
SAMPLE_RANDOM_ROWS = 32
SAMPLE_VALID_ROWS = 64
SAMPLE_SKIPPED_ROWS = 16
SAMPLE_ELEMENTS = 256  # elements of a ``sample_axes`` axis a sampled reference computes
SAMPLE_TILES = (32, 64, 128, 256, 512, 1024)  # the first index of each last partial tile is sampled
TILE_EDGES = (31, 32, 63, 64, 127, 128, 255, 256)
PROBE_SIZE = 37
STRESS_ROWS = 16  # the stress cases run at the first size with at least this many rows
HALF_VALID = 0.5  # the half-valid stress case: the share of valid rows (the realistic rate is 1-5%)


#: the suffix of the case label of run E (every pointer off a 16-byte boundary; see ``run_misaligned``)
MISALIGNED = ", pointers misaligned"


@dataclass
class Case:
    """One set of inputs for one dim environment."""

    label: str
    size: int  # rows of the batch-leading tensors (the largest runtime value where none leads with one)
    env: dict[str, int]
    variant: dict[str, int]
    local: LocalBinding
    mask_variant: str
    shapes: dict[str, tuple[int, ...]]
    scalars: dict[str, int | float]
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    init2: dict[str, np.ndarray] = field(default_factory=dict)
    isv: np.ndarray | None = None
    valid: np.ndarray | None = None  # row validity of the masked parameter
    rows: np.ndarray | None = None  # sampled rows (None: the reference runs in full)
    # sampled elements of outputs the reference computes a sample of (``sample_axes``): name -> (axis, indices)
    select: dict[str, tuple[int, np.ndarray]] | None = None
    ref_mode: str | None = "full"  # "full" | "rows" | "select" | None (not run)
    ref_reason: str = ""
    _ref: dict[str, np.ndarray] | None = None
    _ref_error: str | None = None
    _ref_null: dict[str, np.ndarray] | None = None


class KernelVerifier:
    """See the module docstring."""

    def __init__(self, session: Session, kernel: Kernel):
        self.s = session
        self.cs = session.cs
        self.k = kernel
        self.results = {name: SubjectResult(kernel.name, "kernel", name) for name in session.backends}
        self.ref, self.ref_why = session.reference(kernel)
        self.grad, self.grad_why = session.gradcheck_fn(kernel)
        self.mask_param = next((p for p in kernel.tensors if p.mask is not None), None)
        self.written = [p for p in kernel.tensors if p.role != "in"]
        # declared aliasing (``aliases``): the second member of a pair shares the allocation of the one that
        # is read (the kernel works in place); an input whose partner is written changes by design
        self.shared_with: dict[str, str] = {}
        for a in kernel.aliases:
            p, q = kernel.param(a.first), kernel.param(a.second)
            src, other = (p, q) if p.role != "out" or q.role == "out" else (q, p)
            self.shared_with[other.name] = src.name
        self.in_place = {src for other, src in self.shared_with.items() if kernel.param(other).writes}
        # outputs filled with poison before a launch: not one that shares an input's allocation
        self.poisoned = [p for p in self.written if p.role == "out" and p.name not in self.shared_with]
        self.partial = [p for p in self.written if p.write_range is not None]
        # buffers a kernel updates in place: their change is compared besides the whole (VERIFY_INOUT_DELTA)
        self.delta_params = [p for p in kernel.tensors if p.role in ("inout", "accumulate") and p.dtype in DTYPE_EPS]
        self.isv_param = next((p for p in kernel.params if isinstance(p, IsvParam)), None)
        self.isv_written = bool(kernel.isv_writes) and self.isv_param is not None
        self.tol = Tolerance.of(kernel.verify.rtol, kernel.verify.atol)
        self._sample_mode: dict[tuple, tuple[str | None, str]] = {}
        self._select_ok: dict[tuple, str] = {}  # per (variant, binding): "" when the reference honours select=
        self.sizes_run: list[str] = []
        self.cases_run: list[dict[str, int]] = []  # dim assignments that ran
        self.ref_modes: list[str] = []  # how each of them was compared with the reference (REFERENCE_MODES)
        # the ISV an ``isv(SLOT)`` scalar reads on the host: one perturbed state per kernel (scale slots
        # 0.1..10), so a kernel verified alone sees a host-read scale other than its reset value
        self.host_isv = isv_perturbed(self.cs, session.factory.rng("host-read", kernel.name)) if self.cs.isv is not None else None
        self.envs_run: list[dict[str, int]] = []  # their full environments (what tail coverage reads)
        # numeric stress cases (audit/search/values.py): per (dims variant, local binding), the case they run at
        self._stress_at: dict[tuple, tuple[DimCase | int, dict[str, int], LocalBinding, int]] = {}
        self._repeats_noted = False  # the note that runs B and C were left out (JobSpec.repeats), once
        self._stress_source: tuple[str | None, list[tuple[str, str]]] | None = None  # (source text, its local headers)

    def upstream_values(self, p: Any, buf: Any, env: Any) -> Any:
        """The values the writer of ``p``'s buffer declares on its output, where the buffer declares none
        (None otherwise); notes once where an input's domain, or a value of it, came from upstream."""
        if buf is None:
            return None
        up = None if buf.values is not None else self.s.producer_domains.get(buf.name)
        declared = buf.values if buf.values is not None else (up[0] if up else None)
        if declared is None:
            return None
        origin = f'buffer "{buf.name}"' if buf.values is not None else up[1]
        if p.values is None and up is not None:
            self.note(f'input "{p.name}" is drawn from the domain declared on {origin} (the kernel\'s contract gives it none)')
        elif p.values is not None and declared.choices:
            extra = inherited_sentinels(p, resolve_domain(p, None, (), env), declared, env)
            if extra:
                shown = ", ".join(f"{v:g}" for v in extra)
                self.note(f'input "{p.name}" also draws {shown}: {origin} declares it may hold them and the kernel\'s own domain leaves them out')
        return up[0] if up else None

    # -- records ------------------------------------------------------------------------------------
    def add(self, backend: str | None, check: VerifyCheck, verdict: str, case: str, message: str, **nums: Any) -> None:
        for name, r in self.results.items():
            if backend is None or name == backend:
                r.add(check, verdict, case, message, **nums)

    def fail_msg(self, check: VerifyCheck, case: Case | str, what: str) -> str:
        label = case.label if isinstance(case, Case) else case
        return check.failure("kernel", self.k.name, what, at=label)

    def note(self, text: str) -> None:
        for r in self.results.values():
            if text not in r.notes:
                r.notes.append(text)

    # -- driver -------------------------------------------------------------------------------------
    def run(self) -> list[SubjectResult]:
        current_backend = None
        for other, src in self.shared_with.items():
            unpoisoned = f'; "{other}" is not poisoned, so VERIFY_UNWRITTEN_OUTPUT does not judge it' if self.k.param(other).role == "out" else ""
            self.note(f'"{src}" and "{other}" are one allocation (aliases): the kernel runs in place and the reference gets one array under both names{unpoisoned}')
        try:
            sizes = self.s.cases_for("kernel", self.k.name)
            cap = self.k.verify.variant_cases
            planned = self.s.job.cases.get(f"kernel:{self.k.name}") is not None
            # under a sanitizer the given sizes are capped too: an instrumented launch costs 10-100 times a
            # plain one, and a later variant's own paths (other row lengths, alignments) show at small sizes
            of = f"of the sweep's {len(sizes)}" if planned else f"of the {len(sizes)} sizes of the {self.s.job.sanitizer} run"
            capping = planned or self.s.job.sanitizer is not None
            near = dims_neighbours(self.k)
            if near:
                by_dim: dict[str, list[str]] = {}
                for name, x in near:
                    by_dim.setdefault(name, []).append(str(x))
                self.note("the search added dims variants at the neighbours of the listed values inside their range (v - 1, v + 1, v + 2, "
                          "v + 3; one dim at a time): " + "; ".join(f"{n} = {', '.join(v)}" for n, v in by_dim.items()))  # fmt: skip
            for i, variant in enumerate(dims_variants(self.k, self.cs)):
                todo = sizes
                if i and cap is not None and capping and len(sizes) > cap:
                    todo = self.capped(sizes, cap)
                    self.note(f"dims variants after the first ran at {cap} case(s) {of}: its smallest and its smallest "
                              f"of at least {STRESS_ROWS} rows (variant_cases = {cap})")  # fmt: skip
                for size in todo:
                    self.verify_size(size, variant)
                # a capped variant opens code paths (other row lengths, other alignments of the rows): the mask
                # and alignment stress runs at every variant, the numeric stress of the inputs at the first
                self.run_stress(variant, numeric=todo is sizes)
                if todo is not sizes:
                    self.note("the numeric stress cases ran at the first dims variant only (variant_cases caps the others); "
                              "the mask and misaligned-pointer cases at every variant")  # fmt: skip
                if self.grad is not None:
                    self.gradcheck(variant)
                elif self.grad_why:
                    self.add(None, GRADCHECK, "fail", case_label(None, variant, {}, cs=self.cs), self.fail_msg(GRADCHECK, "its gradient check", self.grad_why))
            # [kernel.verify] bindings: local-dim values no launch binds (a shape-generic kernel's other shapes)
            listed = extra_bindings(self.cs, self.k, self.s.wiring)
            bcap, bkey = (self.k.verify.binding_cases, "binding_cases") if self.k.verify.binding_cases is not None else (cap, "variant_cases")
            self.run_bindings(listed, sizes, bcap, bkey, "the extra bindings", capping, of)
            # the search's bindings at the neighbours of the listed ones (binding_neighbours), capped as the
            # dims variants are (variant_cases, else binding_cases)
            near_by = binding_neighbours_by_dim(self.k)
            near_b = [b for _dim, b in near_by]
            if near_b:
                by_dim: dict[str, list[str]] = {}
                for name, b in near_by:
                    by_dim.setdefault(name, []).append(str(b[name]))
                shown = "; ".join(f"{n} = {', '.join(dict.fromkeys(v))}" for n, v in by_dim.items())
                self.note(f"the search added {len(near_b)} bindings at the neighbours of the listed bindings' values inside their range "
                          f"(v - 1, v + 1, v + 2, v + 3; one dim at a time, the binding's other dims kept): {shown}")  # fmt: skip
                first = listed[0]
                near = [LocalBinding(dict(values), first.schedule, first.step, first.buffers) for values in near_b]
                ncap, nkey = (cap, "variant_cases") if cap is not None else (bcap, bkey)
                self.run_bindings(near, sizes, ncap, nkey, "the search's bindings", capping, of)
            self.unit_scale()
            self.divisor_zero()
        except LaunchFailure as exc:
            current_backend = getattr(exc, "backend", None)
            msg = LAUNCH.failure("kernel", self.k.name, str(exc))
            for name in self.results:
                if current_backend is None or name == current_backend:
                    self.add(name, LAUNCH, "fail", getattr(exc, "case", ""), msg)
                else:
                    self.add(name, LAUNCH, "not_run", "", f"stopped after a launch failure on {current_backend}")
            if exc.sticky:
                self.record_coverage()
                exc.results = list(self.results.values())  # type: ignore[attr-defined]
                raise
        finally:
            self.record_coverage()
        return list(self.results.values())

    def run_bindings(self, bindings: list[LocalBinding], sizes: list, cap: int | None, key: str, what: str, capping: bool, of: str) -> None:
        """Verify each of ``bindings`` at ``sizes``, or at ``cap`` of them where capping applies (and say so)."""
        if not bindings:
            return
        todo = sizes
        if cap is not None and capping and len(sizes) > cap:
            todo = self.capped(sizes, cap)
            self.note(f"{what} ran at {cap} case(s) {of}: its smallest and its smallest of at least {STRESS_ROWS} rows ({key} = {cap})")
        for lb in bindings:
            for size in todo:
                self.verify_size(size, {}, only=lb)

    def capped(self, sizes: list, cap: int) -> list:
        """The ``cap`` cases of a capped dims variant: the sweep's smallest, then its smallest of at least
        STRESS_ROWS rows (where several rows share a block and the stress cases run), then the next smallest;
        in the sweep's order. The ``cap`` smallest alone (1, 4, 5 rows) left a variant no block with valid
        and skipped rows side by side, and its stress cases at 5 rows."""
        rows = [as_case(self.cs, s).size for s in sizes]
        picked = {0}
        picked.update([i for i in range(1, len(sizes)) if rows[i] >= STRESS_ROWS][: cap - 1])
        picked.update([i for i in range(1, len(sizes)) if i not in picked][: max(0, cap - len(picked))])
        return [sizes[i] for i in sorted(picked)]

    def record_coverage(self) -> None:
        """The sizes and dim assignments that ran, and the tail coverage of the kernel's launch geometry."""
        from ..search.coverage import kernel_sites, tail_verdicts

        modes: dict[tuple, str] = {}
        for c, m in zip(self.cases_run, self.ref_modes):
            key = tuple(sorted(c.items()))
            modes[key] = least_thorough(modes[key], m) if key in modes else m
        cases = list({tuple(sorted(c.items())): c for c in self.cases_run}.values())
        tails = [v.to_dict() for v in tail_verdicts(self.cs, self.k, self.s.wiring, kernel_sites(self.cs, self.k, self.s.wiring), self.envs_run)]
        for r in self.results.values():
            r.sizes = list(dict.fromkeys(self.sizes_run))
            r.cases = [dict(c) for c in cases]
            r.references = [modes.get(tuple(sorted(c.items())), "not run") for c in cases]
            r.tails = [dict(t) for t in tails]

    def launch(self, backend: Backend, case: Case, ptrs: dict[str, int], run: str) -> None:
        try:
            seconds = self.s.launch(backend, self.k, case.env, ptrs, case.scalars, f"{case.label} (run {run})", self.ref)
        except LaunchFailure as exc:
            exc.backend = backend.name  # type: ignore[attr-defined]
            exc.case = case.label  # type: ignore[attr-defined]
            raise
        if seconds is not None:
            times = self.results[backend.name].launch_seconds
            times[case.label] = min(seconds, times.get(case.label, seconds))

    # -- cases --------------------------------------------------------------------------------------
    def verify_size(self, size: DimCase | int, variant: dict[str, int], only: LocalBinding | None = None) -> None:
        """Every check at one case, for each local-dim binding the launches make (or ``only`` that one)."""
        why = size_in_range(self.cs, size)
        label0 = case_label(size, variant, only.values if only is not None else {}, cs=self.cs)
        if why:
            self.add(None, REFERENCE, "not_run", label0, f"not run at {label0}: {why}")
            return
        if only is not None:
            self.verify_binding(size, variant, only)
            return
        env0 = make_env(self.cs, size, variant)
        bindings, note = local_bindings(self.cs, self.k, env0, self.s.wiring)
        if note:
            self.note(note)
        if not bindings:
            self.add(None, REFERENCE, "not_run", label0, f"not run: {note}")
            return
        for lb in bindings:
            self.verify_binding(size, variant, lb)

    def base_case(self, size: DimCase | int, variant: dict[str, int], lb: LocalBinding, mask_variant: str = "mixed",
                  extra: str = "") -> Case | str:  # fmt: skip
        """The inputs of one case, or a sentence saying why it cannot be built."""
        env = {**make_env(self.cs, size, variant), **lb.values}
        label = case_label(size, variant, lb.values, extra or ("" if mask_variant == "mixed" else mask_variant.replace("_", "-")), cs=self.cs)
        try:
            shapes = {p.name: shape_of(p.shape, env, self.s.slot_index) for p in self.k.tensors}
        except KeyError as exc:
            return f"dim {exc} of a parameter shape is unbound at {label}"
        # checked before any data is generated: one over-budget case (a [65536, 65536] partial) would
        # otherwise spend minutes and gigabytes of host memory drawing inputs it then refuses to run
        in_elems = sum(numel(shapes[p.name]) for p in self.k.tensors if p.role != "out")
        if in_elems > self.s.input_budget:
            return f"inputs too large at {label} ({in_elems:.2e} elements; the budget is {self.s.input_budget:.2e})"
        scalars: dict[str, int | float] = {}
        for p in self.k.params:
            if isinstance(p, ScalarParam):
                try:
                    v = scalar_value(p, env, self.s.slot_index, lb.step, self.host_isv)
                except KeyError as exc:
                    return f'scalar "{p.name}" uses the unbound dim or slot {exc}'
                if v is None:
                    return f'scalar "{p.name}" has no value in the contract or the launch'
                if p.dtype == "f32":
                    v = float(np.float32(v))
                scalars[p.name] = v
        lead = [shapes[p.name][0] for p in self.k.tensors if batch_leading(p.shape, self.cs) and shapes[p.name]]
        case = Case(label, lead[0] if lead else as_case(self.cs, size).size, env, dict(variant), lb, mask_variant, shapes, scalars)
        key = seed_key(size)  # a one-dim case seeds its data as the scalar size always did
        f = self.s.factory
        with self.s.phase("input_generation"):
            for p in self.k.tensors:
                if p.role == "out":
                    continue
                shape = shapes[p.name]
                buf = lb.buffers.get(p.name)
                dom = resolve_domain(p, buf, shape, env, self.upstream_values(p, buf, env))
                batch = batch_leading(p.shape, self.cs)
                salt = "init1" if p.role in ("inout", "accumulate") else ""
                if not batch:
                    # small tensors (weights, counts) get a fresh draw per case, so that one unlucky draw (a
                    # count of 0, say) cannot hide a bug at every size
                    salt += f"@{key}:{sorted(variant.items())}"
                data = f.tensor(p.name, p.dtype, shape, dom, batch, salt)
                if p.mask is not None:
                    rows = shape[0] if shape else 1
                    valid = f.mask_rows((self.k.name, p.name, key, tuple(sorted(variant.items()))), rows)
                    if mask_variant == "all_skip":
                        valid[:] = False
                    elif mask_variant == "all_valid":
                        valid[:] = True
                    elif mask_variant == "one_valid":  # a stress case: one valid row among many skipped
                        valid[:] = False
                        valid[rows // 2] = True
                    elif mask_variant == "half_valid":  # a stress case: each row valid with probability 1/2
                        valid = f.rng("mask-half", self.k.name, p.name, key, tuple(sorted(variant.items()))).random(rows) < HALF_VALID
                    data = apply_mask(data.reshape(rows, -1) if shape else data.reshape(1, -1), valid, p.mask.skip_value).reshape(shape)
                    if p is self.mask_param:
                        case.valid = valid
                case.inputs[p.name] = data
                if p.role == "accumulate":
                    case.init2[p.name] = f.tensor(p.name, p.dtype, shape, dom, batch, "init2" + salt[5:])
            if self.isv_param is not None:
                case.isv = isv_perturbed(self.cs, f.rng(self.k.name, "isv", label))
        return case

    def verify_binding(self, size: DimCase | int, variant: dict[str, int], lb: LocalBinding) -> None:
        case = self.base_case(size, variant, lb)
        if isinstance(case, str):
            self.add(None, REFERENCE, "not_run", case_label(size, variant, lb.values, cs=self.cs), f"not run: {case}")
            return
        nbytes = sum(numel(case.shapes[p.name]) * np_dtype(p.dtype).itemsize for p in self.k.tensors)
        for be in self.s.backends.values():
            free = be.free_memory()
            if free is not None and nbytes > 0.85 * free:
                self.add(be.name, REFERENCE, "not_run", case.label, f"not run at {case.label}: needs {nbytes / 2**30:.1f} GiB of device memory, {free / 2**30:.1f} GiB free")
                return
        self.decide_reference(case)
        self.sizes_run.append(case.label.split(" ")[0])
        self.cases_run.append(as_case(self.cs, size).as_dict())
        self.ref_modes.append({"full": "full", "rows": "sampled", "select": "sampled"}.get(case.ref_mode or "", "not run"))
        self.envs_run.append(dict(case.env))
        variants = ["mixed"] + (["all_skip", "all_valid"] if self.mask_param is not None else [])
        for mv in variants:
            c = case if mv == "mixed" else self.base_case(size, variant, lb, mv)
            if isinstance(c, str):
                continue
            if c is not case:
                c.ref_mode, c.ref_reason = case.ref_mode, case.ref_reason
                if case.ref_mode == "rows":
                    c.rows = self.sample_rows(c)
                c.select = case.select
            for be in self.s.backends.values():
                self.run_case(be, c, full=(mv == "mixed"))
        if case.ref_mode == "full":
            # the stress cases run once per binding, at the first size of at least STRESS_ROWS rows whose
            # reference runs in full (else the largest such size below it)
            key = (tuple(sorted(variant.items())), tuple(sorted(lb.values.items())))
            held = self._stress_at.get(key)
            if held is None or (held[3] < STRESS_ROWS and case.size > held[3]):
                self._stress_at[key] = (size, dict(variant), lb, case.size)

    # -- numeric stress cases -------------------------------------------------------------------------
    def stress_plan(self, case: Case) -> StressPlan:
        """The stress cases of this kernel at ``case``'s dims (domains resolved there)."""
        from ..search.values import stress_headers, stress_plan
        from ..untrusted import SOURCE_LIMIT, UnreadableFile, read_text

        if self._stress_source is None:  # the source and its headers, read once per kernel
            root = Path(self.s.cfg.root)
            try:
                text = read_text(root / self.k.source, root, SOURCE_LIMIT)
            except (OSError, UnreadableFile, UnicodeDecodeError):
                text = None
            self._stress_source = (text, stress_headers(self.s.cfg, root / self.k.source) if text is not None else [])
        text, headers = self._stress_source
        domains: dict[str, tuple[str, float | None, float | None, bool]] = {}
        opt_out: dict[str, str] = {}
        for p in self.k.tensors:
            if p.role == "out":
                continue
            buf = case.local.buffers.get(p.name)
            d = resolve_domain(p, buf, case.shapes[p.name], case.env, self.upstream_values(p, buf, case.env))
            domains[p.name] = ("choices" if d.choices else "range" if d.lo is not None else "scale", d.lo, d.hi, True)
            vals = p.values or (buf.values if buf is not None else None)
            if vals is not None and not vals.stress:
                opt_out[p.name] = vals.stress_reason
        return stress_plan(self.k, text, domains, opt_out, headers)

    def run_stress(self, variant: dict[str, int], numeric: bool = True) -> None:
        """Each stress case once per binding: the numeric stress of the inputs (``numeric``), and for a masked
        kernel one valid row among many skipped and about half the rows valid (valid and skipped rows side by
        side in every block, where an index slip between the two shows); then the case, and for a masked
        kernel its half-valid case, once with the pointers misaligned."""
        from ..search.values import apply_stress

        vkey = tuple(sorted(variant.items()))
        for key, (size, var, lb, _rows) in list(self._stress_at.items()):
            if key[0] != vkey:
                continue
            del self._stress_at[key]
            base = self.base_case(size, var, lb)
            if isinstance(base, str):
                continue
            todo: list[Case] = []
            if numeric:
                plan = self.stress_plan(base)
                for line in plan.lines(self.k.name):
                    self.note(line)
                for sc in plan.cases:
                    c = self.base_case(size, var, lb, "mixed", extra=sc.label)
                    if isinstance(c, str):
                        continue
                    c.inputs[sc.param] = apply_stress(sc, c.inputs[sc.param], self.s.factory.rng(self.k.name, "stress", c.label))
                    todo.append(c)
            half = None
            if self.mask_param is not None and base.size > 1:
                for mv in ("one_valid", "half_valid"):
                    c = self.base_case(size, var, lb, mv, extra=f"stress {self.mask_param.name} {mv.replace('_', '-')}")
                    if not isinstance(c, str):
                        todo.append(c)
                        half = c if mv == "half_valid" else half
            for c in todo:
                c.ref_mode, c.ref_reason = "full", ""
                for be in self.s.backends.values():
                    self.run_case(be, c, full=False)
            # and the case once with its pointers misaligned (same inputs, same reference)
            base.ref_mode, base.ref_reason = "full", ""
            for c in (base, half):
                if c is None:
                    continue
                for be in self.s.backends.values():
                    self.run_misaligned(be, c)

    def decide_reference(self, case: Case) -> None:
        """Full reference, sampled rows (rowwise kernels), sampled elements (``sample_axes``), or not run
        (too large)."""
        if self.ref is None:
            case.ref_mode, case.ref_reason = None, self.ref_why
            return
        elems = sum(numel(s) for s in case.shapes.values())
        mb = self.k.verify.max_batch
        # rowwise kernels switch to sampled rows early: the rows are as telling and far cheaper
        budget = self.s.rowwise_budget if self.k.verify.rowwise else self.s.reference_budget
        full = (case.size <= mb) if mb is not None else elems <= budget
        if full:
            case.ref_mode = "full"
            return
        if not self.k.verify.rowwise and self.k.verify.sample_axes:
            self.decide_select(case, elems)
            return
        if not self.k.verify.rowwise:
            case.ref_mode = None
            limit = f"max_batch = {mb}" if mb is not None else f"the budget is {self.s.reference_budget:.2e} elements"
            case.ref_reason = f"not run at {case.label}: reference too large ({elems:.2e} elements; {limit}; the kernel is not rowwise and declares no sample_axes)"
            return
        not_rows = [p.name for p in self.written if not batch_leading(p.shape, self.cs) or (p.write_range is not None and p.write_range.axis == 0)]
        if self.isv_written:
            not_rows.append(self.isv_param.name)
        if not_rows:
            case.ref_mode = None
            case.ref_reason = f'not run at {case.label}: reference too large ({elems:.2e} elements) and output(s) {", ".join(chr(34) + n + chr(34) for n in not_rows)} have no batch rows to sample'
            return
        mode, why = self.sample_mode(case)
        if mode is None:
            case.ref_mode = None
            case.ref_reason = f"not run at {case.label}: reference too large ({elems:.2e} elements) and {why}"
            return
        case.ref_mode = "rows"
        case.rows = self.sample_rows(case)

    def decide_select(self, case: Case, elems: int) -> None:
        """A reference too large to run in full, computed on a sample of each ``sample_axes`` output (the
        reference gets ``select = {output: indices}``), once a probe showed that it honours the selection."""
        too_large = f"not run at {case.label}: reference too large ({elems:.2e} elements)"
        axes = dict(self.k.verify.sample_axes)
        whole = [p.name for p in self.written if p.name not in axes and numel(case.shapes[p.name]) > self.s.reference_budget]
        if whole:
            case.ref_mode = None
            case.ref_reason = f'{too_large} and output(s) {", ".join(chr(34) + n + chr(34) for n in whole)} have no sample_axes entry'
            return
        unfetched = [n for n in axes if numel(case.shapes[n]) > max(self.s.fetch_budget, self.s.reference_budget)]
        if unfetched:
            case.ref_mode = None
            case.ref_reason = f'{too_large} and output(s) {", ".join(chr(34) + n + chr(34) for n in unfetched)} are too large to copy to the host whole'
            return
        why = self.select_probe(case)
        if why:
            case.ref_mode = None
            case.ref_reason = f"{too_large} and {why}"
            return
        case.ref_mode = "select"
        case.select = {n: (ax, self.sample_indices(case, n, case.shapes[n][ax] if case.shapes[n] else 1)) for n, ax in axes.items()}

    def sample_indices(self, case: Case, name: str, n: int) -> np.ndarray:
        """Up to SAMPLE_ELEMENTS indices of an axis of length ``n``: the first and last, the tile edges, the
        first index of each last partial tile (where a tail's code runs) and its neighbour, then random ones."""
        if n <= SAMPLE_ELEMENTS:
            return np.arange(n, dtype=np.int64)
        idx = {0, 1, n - 2, n - 1} | {e for e in TILE_EDGES if e < n}
        for t in SAMPLE_TILES:
            start = (n - 1) // t * t
            idx |= {start, max(0, start - 1)}
        rng = self.s.factory.rng(self.k.name, "select", name, case.label)
        while len(idx) < SAMPLE_ELEMENTS:  # seeded; O(sample), whatever the length of the axis
            idx |= set(rng.integers(0, n, size=SAMPLE_ELEMENTS - len(idx)).tolist())
        return np.array(sorted(idx), dtype=np.int64)

    def select_probe(self, case: Case) -> str:
        """Whether the reference computes exactly the selected elements: at a small case (every runtime dim
        37, else 1) a call with ``select=`` must return, for each sampled output, the selected slice of a full
        call. Returns "" when it does, else why not (checked once per dims variant and binding)."""
        key = self._mode_key(case)
        if key in self._select_ok:
            return self._select_ok[key]
        why = f"no probe case of at most {self.s.reference_budget:.2e} reference elements can be built to check its select="
        for size in (PROBE_SIZE, 1):
            probe = self.base_case(size, case.variant, case.local, "mixed")
            if isinstance(probe, str) or sum(numel(s) for s in probe.shapes.values()) > self.s.reference_budget:
                continue
            why = self._select_matches(probe)
            break
        if why:
            self.note(f'reference "{self.k.reference}" is not compared on a sample: {why}')
        else:
            self.note(f'reference "{self.k.reference}" computes sampled elements of {", ".join(chr(34) + n + chr(34) for n, _ in self.k.verify.sample_axes)} '
                      "when given select= (checked against a full call); beyond the reference budget only those are compared")
        self._select_ok[key] = why
        return why

    def _select_matches(self, probe: Case) -> str:
        try:
            with self.s.phase("reference"):
                full = call(self.ref, self.k.reference, **self.reference_kwargs(probe, None))
        except ReferenceProblem as exc:
            return f"the reference fails at {probe.label} ({exc})"
        select: dict[str, np.ndarray] = {}
        for n, ax in self.k.verify.sample_axes:
            length = probe.shapes[n][ax] if probe.shapes[n] else 1
            # a strict subset where the axis allows one, so a reference that ignores select= shows
            select[n] = np.array(sorted({0, length // 3, length // 2, length - 1}), dtype=np.int64)
        try:
            with self.s.phase("reference"):
                part = call(self.ref, self.k.reference, **self.reference_kwargs(probe, None), select={n: i.copy() for n, i in select.items()})
        except ReferenceProblem as exc:
            return f"called with select= it raises ({exc})"
        if not isinstance(full, dict) or not isinstance(part, dict):
            return "it does not return a dict of outputs"
        for n, ax in self.k.verify.sample_axes:
            if n not in full or n not in part:
                return f'it returns no "{n}"'
            want = np.take(np.asarray(full[n], dtype=np.float64), select[n], axis=ax)
            got = np.asarray(part[n], dtype=np.float64)
            if got.shape != want.shape:
                return (f'called with select= it returns "{n}" of shape {list(got.shape)}, not the {list(want.shape)} of the '
                        f"{len(select[n])} selected indices along axis {ax} (it must return only the selected elements)")
            if not _rows_match(got, want, slice(None)):
                return f'called with select= it disagrees with a full call on "{n}"'
        return ""

    def sampled_note(self, case: Case) -> str:
        """`` (on 97 sampled rows)``, `` (sampled 256 of 50,257 elements of "colsum")``, or "" (in full)."""
        if case.rows is not None:
            return f" (on {len(case.rows)} sampled rows)"
        if case.select:
            parts = []
            for n, (ax, idx) in case.select.items():
                shape = case.shapes[n]
                total = shape[ax] if shape else 1
                if len(idx) >= total:
                    continue
                what = "elements" if len(shape) <= 1 else "rows" if ax == 0 else "columns" if ax == len(shape) - 1 else f"indices along axis {ax}"
                parts.append(f'{len(idx)} of {total:,} {what} of "{n}"')
            return f" (sampled {'; '.join(parts)})" if parts else ""
        return ""

    def sample_rows(self, case: Case) -> np.ndarray:
        """First, last, tile edges, random rows, every valid (masked-in) row up to a cap, some skipped rows."""
        B = case.size
        rng = self.s.factory.rng(self.k.name, "rows", case.label)
        rows = {0, B - 1} | {e for e in TILE_EDGES if e < B}
        rows |= set(rng.choice(B, size=min(SAMPLE_RANDOM_ROWS, B), replace=False).tolist())
        if case.valid is not None:
            valid = np.flatnonzero(case.valid)
            skipped = np.flatnonzero(~case.valid)
            rows |= set(rng.choice(valid, size=min(SAMPLE_VALID_ROWS, valid.size), replace=False).tolist()) if valid.size else set()
            rows |= set(rng.choice(skipped, size=min(SAMPLE_SKIPPED_ROWS, skipped.size), replace=False).tolist()) if skipped.size else set()
        return np.array(sorted(rows), dtype=np.int64)

    # -- the reference --------------------------------------------------------------------------------
    def reference_kwargs(self, case: Case, rows: np.ndarray | None, mode: str = "full") -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for p in self.k.tensors:
            if p.role == "out":
                continue
            a = case.inputs[p.name]
            if rows is not None and batch_leading(p.shape, self.cs):
                a = a[rows]
            kwargs[p.name] = a.astype(np.int64) if a.dtype.kind in "iu" else a.astype(np.float64)
        for p in self.k.params:
            if isinstance(p, ScalarParam):
                v = case.scalars[p.name]
                if rows is not None and mode == "rows" and uses_runtime_dim(p.value, self.cs):
                    env = dict(case.env)
                    for n in runtime_dims(self.cs):
                        env[n] = len(rows)
                    v = scalar_value(p, env, self.s.slot_index, case.local.step)
                kwargs[p.name] = v
            elif isinstance(p, IsvParam):
                kwargs[p.name] = case.isv.astype(np.float64)
        for other, src in self.shared_with.items():
            if other not in kwargs and src in kwargs:
                kwargs[other] = kwargs[src]  # one allocation: the reference sees one array under both names
        kwargs["include_optional"] = True
        return kwargs

    def reference_of(self, case: Case) -> dict[str, np.ndarray]:
        if case._ref_error:
            raise ReferenceProblem(case._ref_error)
        if case._ref is None:
            mode = self._sample_mode.get(self._mode_key(case), ("full", ""))[0] if case.rows is not None else "full"
            kwargs = self.reference_kwargs(case, case.rows, mode or "full")
            if case.select:
                kwargs["select"] = {n: idx.copy() for n, (_, idx) in case.select.items()}
            try:
                with self.s.phase("reference"):
                    res = call(self.ref, self.k.reference, **kwargs)
            except ReferenceProblem as exc:
                case._ref_error = str(exc)
                raise
            if not isinstance(res, dict):
                case._ref_error = f'"{self.k.reference}" returned {type(res).__name__}, not a dict of outputs'
                raise ReferenceProblem(case._ref_error)
            case._ref = {k: np.asarray(v) for k, v in res.items()}
        return case._ref

    def reference_without(self, case: Case, null: list[str]) -> dict[str, np.ndarray]:
        """The reference with optional inputs left out (they are NULL pointers) and optional outputs off."""
        key = "_ref_null"
        cached = getattr(case, key, None)
        if cached is None:
            mode = self._sample_mode.get(self._mode_key(case), ("full", ""))[0] if case.rows is not None else "full"
            kwargs = self.reference_kwargs(case, case.rows, mode or "full")
            if case.select:
                kwargs["select"] = {n: idx.copy() for n, (_, idx) in case.select.items()}
            for n in null:
                kwargs.pop(n, None)
            kwargs["include_optional"] = False
            with self.s.phase("reference"):
                res = call(self.ref, self.k.reference, **kwargs)
            cached = {k: np.asarray(v) for k, v in res.items()}
            setattr(case, key, cached)
        return cached

    def _mode_key(self, case: Case) -> tuple:
        return (tuple(sorted(case.variant.items())), tuple(sorted(case.local.values.items())))

    def sample_mode(self, case: Case) -> tuple[str | None, str]:
        """How to call the reference on sampled rows, found by comparing with a full call at a small size.

        "full": row slices with the full-size scalars (1/B normalisers stay right); "rows": row slices with
        the runtime-dim scalars set to the number of rows (the reference shapes arrays by B). Neither
        matching means the reference cannot be evaluated on sampled rows.
        """
        key = self._mode_key(case)
        if key in self._sample_mode:
            return self._sample_mode[key]
        probe = self.base_case(PROBE_SIZE, case.variant, case.local, "mixed")
        result: tuple[str | None, str]
        if isinstance(probe, str):
            result = (None, f"the sampling probe at {PROBE_SIZE} rows cannot be built: {probe}")
        else:
            rows = np.array(sorted({0, 3, 17, PROBE_SIZE - 1} | set(np.flatnonzero(probe.valid)[:2].tolist() if probe.valid is not None else [])))
            try:
                with self.s.phase("reference"):
                    full = call(self.ref, self.k.reference, **self.reference_kwargs(probe, None))
            except ReferenceProblem as exc:
                full, result = None, (None, f"the reference fails at {PROBE_SIZE} rows ({exc})")
            if full is not None:
                result = (None, "")
                problems = []
                for mode in ("full", "rows"):
                    try:
                        with self.s.phase("reference"):
                            part = call(self.ref, self.k.reference, **self.reference_kwargs(probe, rows, mode))
                    except ReferenceProblem as exc:
                        problems.append(f"with {mode}-size scalars it raises ({exc})")
                        continue
                    bad = [p.name for p in self.written if p.name in full and not _rows_match(part.get(p.name), np.asarray(full[p.name]), rows)]
                    if not bad:
                        result = (mode, "")
                        break
                    problems.append(f'with {mode}-size scalars it disagrees with the full call on "{bad[0]}"')
                if result[0] is None:
                    result = (None, "the reference cannot be evaluated on sampled rows: " + "; ".join(problems))
                elif result[0] == "rows":
                    self.note(
                        f'reference "{self.k.reference}" is called on sampled rows with the runtime-dim scalars set to the '
                        "number of rows (it shapes its arrays by the scalar, not the arrays); checked against a full call"
                    )
                else:
                    self.note(f'reference "{self.k.reference}" is called on sampled rows with full-size scalars; checked against a full call')
        if result[0] is None:
            self.note(result[1])
        self._sample_mode[key] = result
        return result

    # -- one case on one backend ----------------------------------------------------------------------
    def run_case(self, be: Backend, case: Case, full: bool) -> None:
        s = self.s
        R = self.results[be.name]
        arena = Arena(be, s.job.guard_bytes)
        try:
            with s.phase("transfer"):
                bufs = self.alloc(arena, case)
            ptrs = {n: b.ptr for n, b in bufs.items()}
            with s.phase("transfer"):
                self.prepare(arena, bufs, case, poison=0, init="init1", first=True)
                in_hashes = _hashes(arena, bufs, self.read_only_names())
            self.launch(be, case, ptrs, "A")
            self.check_guards(be, arena, case, "A")
            modified = self.check_inputs(be, arena, bufs, in_hashes, case)
            with s.phase("transfer"):
                outs_a = self.fetch(arena, bufs, case)
                nonfinite = self.nonfinite_counts(arena, bufs, case, self.written_names())
                poison_a = self.poison_counts(arena, bufs, case, 0)
            self.check_reference(be, case, outs_a, nonfinite)
            self.check_untouched(be, case, outs_a)
            self.check_mask_zero(be, case, outs_a)
            if case.mask_variant == "all_skip":
                self.check_all_skip(be, arena, bufs, case)
            if not full:
                return
            if s.job.repeats:
                self.run_repeats(be, arena, bufs, case, ptrs, modified, poison_a, outs_a)
            elif not self._repeats_noted:
                self._repeats_noted = True
                self.note(f"each case's inputs launched once under {s.job.sanitizer}: runs B and C (the same inputs and pointers again, "
                          "other initial contents of the outputs) were left out, so determinism, unwritten outputs and accumulation "
                          "were not judged in this run")  # fmt: skip
            optional = [p.name for p in self.k.tensors if p.optional]
            if optional:
                with s.phase("transfer"):
                    self.prepare(arena, bufs, case, poison=0, init="init1", first=False)
                null_ptrs = {n: (0 if n in optional else v) for n, v in ptrs.items()}
                self.launch(be, case, null_ptrs, "D, optional outputs NULL")
                self.check_guards(be, arena, case, "D")
                with s.phase("transfer"):
                    outs_d = self.fetch(arena, bufs, case, skip=set(optional))
                    nonfinite_d = self.nonfinite_counts(arena, bufs, case, [n for n in self.written_names() if n not in optional])
                null_inputs = [p.name for p in self.k.tensors if p.optional and p.role != "out"]
                self.check_reference(be, case, outs_d, nonfinite_d, suffix=" with its optional outputs NULL", null=null_inputs)
        finally:
            arena.free_all()

    def run_repeats(self, be: Backend, arena: Arena, bufs: dict[str, DeviceBuffer], case: Case, ptrs: dict[str, int], modified: bool,
                    poison_a: Any, outs_a: dict[str, np.ndarray]) -> None:  # fmt: skip
        """Runs B (the other poison: unwritten outputs, determinism) and C (accumulate: other initial contents)."""
        s = self.s
        with s.phase("transfer"):
            hashes_a = _hashes(arena, bufs, self.written_names())
            self.prepare(arena, bufs, case, poison=1, init="init1", first=modified)
        self.launch(be, case, ptrs, "B")
        self.check_guards(be, arena, case, "B")
        with s.phase("transfer"):
            poison_b = self.poison_counts(arena, bufs, case, 1)
        unwritten = self.check_written(be, case, poison_a, poison_b)
        self.check_determinism(be, arena, bufs, case, hashes_a, outs_a, unwritten)
        if any(p.role == "accumulate" for p in self.k.tensors):
            with s.phase("transfer"):
                self.prepare(arena, bufs, case, poison=0, init="init2", first=False)
            self.launch(be, case, ptrs, "C")
            self.check_guards(be, arena, case, "C")
            self.check_accumulate(be, arena, bufs, case, outs_a)

    def written_names(self) -> list[str]:
        names = [p.name for p in self.written]
        if self.isv_written:
            names.append(self.isv_param.name)
        return names

    def read_only_names(self) -> list[str]:
        names = [p.name for p in self.k.tensors if p.role == "in" and p.name not in self.in_place]
        if self.isv_param is not None and not self.isv_written:
            names.append(self.isv_param.name)
        return names

    def alloc(self, arena: Arena, case: Case, misaligned: bool = False) -> dict[str, DeviceBuffer]:
        """The case's buffers; ``misaligned``: each pointer only as aligned as its element (or its declared
        ``align``), never to 16 bytes unless declared, as views into a larger buffer are."""
        bufs = {}
        for p in self.k.tensors:
            if p.name not in self.shared_with:
                dt = np_dtype(p.dtype)
                off = (p.align or dt.itemsize) % 256 if misaligned else 0
                bufs[p.name] = arena.alloc(p.name, dt, case.shapes[p.name], bf16=p.dtype == "bf16", offset=off)
        for other, src in self.shared_with.items():
            bufs[other] = bufs[src]  # declared aliasing: one device pointer for both parameters
        if self.isv_param is not None:
            dt = np_dtype(self.cs.isv.dtype if self.cs.isv else "f32")
            bufs[self.isv_param.name] = arena.alloc(self.isv_param.name, dt, (self.s.isv_dim,), offset=dt.itemsize if misaligned else 0)
        return bufs

    def run_misaligned(self, be: Backend, case: Case) -> None:
        """Run E: the case again with every pointer off a 16-byte boundary (each only as aligned as its
        element, or as its declared ``align``), compared with the same reference. A kernel that uses
        vector loads or stores without checking the pointer (``float4``, ``cp.async`` of 16 bytes) faults
        here, or reads the wrong words, instead of in production on a view at an odd offset."""
        s = self.s
        arena = Arena(be, s.job.guard_bytes)
        try:
            with s.phase("transfer"):
                bufs = self.alloc(arena, case, misaligned=True)
                self.prepare(arena, bufs, case, poison=0, init="init1", first=True)
            self.launch(be, case, {n: b.ptr for n, b in bufs.items()}, "E, pointers misaligned")
            self.check_guards(be, arena, case, "E")
            with s.phase("transfer"):
                outs = self.fetch(arena, bufs, case)
                nonfinite = {n: self.count_nonfinite(arena, bufs, case, n) for n in self.written_names()}
            self.check_reference(be, case, outs, nonfinite, suffix=MISALIGNED)
        finally:
            arena.free_all()

    def prepare(self, arena: Arena, bufs: dict[str, DeviceBuffer], case: Case, poison: int, init: str, first: bool) -> None:
        for p in self.k.tensors:
            if p.name in self.shared_with:
                continue  # its allocation is its alias partner's, filled below with the partner's data
            b = bufs[p.name]
            if p.role == "out":
                arena.poison(b, poison)
            elif p.role == "in":
                if first or p.name in self.in_place:
                    arena.upload(b, case.inputs[p.name])
            elif init == "init2" and p.name in case.init2:
                arena.upload(b, case.init2[p.name])
            else:
                arena.upload(b, case.inputs[p.name])
        if self.isv_param is not None and (first or self.isv_written):
            arena.upload(bufs[self.isv_param.name], case.isv)

    def fetch(self, arena: Arena, bufs: dict[str, DeviceBuffer], case: Case, skip: set[str] = frozenset()) -> dict[str, np.ndarray]:
        out = {}
        for n in self.written_names():
            if n in skip:
                continue
            b = bufs[n]
            p = self.k.param(n)
            if case.rows is not None and isinstance(p, TensorParam) and batch_leading(p.shape, self.cs):
                out[n] = arena.download_rows(b, case.rows)
            elif b.count <= max(self.s.fetch_budget, self.s.reference_budget):
                out[n] = arena.download(b)
        return out

    def count_poison(self, arena: Arena, bufs: dict[str, DeviceBuffer], case: Case, p: TensorParam, which: int) -> int:
        """Elements of ``p`` still holding poison pattern ``which``; of a partly written output only those
        inside its write range (outside it the poison stays by design: VERIFY_UNTOUCHED judges that part)."""
        return self._inside_range(case, p, arena.count_poison(bufs[p.name], which))

    def _inside_range(self, case: Case, p: TensorParam, count: int) -> int:
        if p.write_range is None:
            return count
        shape = case.shapes[p.name]
        outside = int(outside_mask(shape, write_index(p, case.env, self.s.slot_index)).sum())
        return max(0, count - outside)

    def poison_counts(self, arena: Arena, bufs: dict[str, DeviceBuffer], case: Case, which: int) -> dict[str, int]:
        """:meth:`count_poison` of every poisoned output, the device counts in one round trip."""
        counts = arena.count_poison_many([bufs[p.name] for p in self.poisoned], which)
        return {p.name: self._inside_range(case, p, c) for p, c in zip(self.poisoned, counts)}

    def nonfinite_counts(self, arena: Arena, bufs: dict[str, DeviceBuffer], case: Case, names: list[str]) -> dict[str, int]:
        """:meth:`count_nonfinite` of each name, the whole-buffer device counts in one round trip."""
        whole = [n for n in names if not (isinstance(self.k.param(n), TensorParam) and self.k.param(n).write_range is not None)]
        counts = dict(zip(whole, arena.count_nonfinite_many([bufs[n] for n in whole])))
        return {n: counts[n] if n in counts else self.count_nonfinite(arena, bufs, case, n) for n in names}

    def count_nonfinite(self, arena: Arena, bufs: dict[str, DeviceBuffer], case: Case, name: str) -> int:
        """NaN/Inf elements of a written buffer; of a partly written output, inside its write range only
        (the rest holds what was there, for an ``out`` the NaN poison)."""
        p = self.k.param(name)
        if not isinstance(p, TensorParam) or p.write_range is None:
            return arena.count_nonfinite(bufs[name])
        host = arena.download(bufs[name])
        part = host[write_index(p, case.env, self.s.slot_index)]
        return int((~np.isfinite(part.astype(np.float64))).sum()) if host.dtype.kind == "f" else 0

    def check_untouched(self, be: Backend, case: Case, outs: dict[str, np.ndarray]) -> None:
        """Every partly written output keeps, outside its write range, what it held before the launch: the
        poison of run A for an ``out``, its input for an ``inout``/``accumulate`` (compared bit for bit)."""
        if not self.partial:
            return
        compared = []
        with self.s.phase("checks"):
            for p in self.partial:
                got = outs.get(p.name)
                if got is None:
                    self.add(be.name, UNTOUCHED, "not_run", case.label, f'"{p.name}" is too large to fetch at {case.label}', output=p.name)
                    continue
                compared.append(p.name)
                idx = write_index(p, case.env, self.s.slot_index)
                mask = outside_mask(got.shape, idx)
                width = got.dtype.itemsize
                bits = np.ascontiguousarray(got).view(f"u{width}")
                if p.role == "out":
                    want = np.dtype(f"u{width}").type(poison_word(got.dtype, 0, p.dtype == "bf16"))  # broadcast
                else:
                    before = case.inputs[p.name]
                    if case.rows is not None and batch_leading(p.shape, self.cs):
                        before = before[case.rows]
                    want = np.ascontiguousarray(before.astype(got.dtype, copy=False)).view(f"u{width}").reshape(got.shape)
                changed = (bits != want) & mask
                if changed.any():
                    first = [int(i) for i in np.unravel_index(int(np.flatnonzero(changed)[0]), got.shape)]
                    self.add(be.name, UNTOUCHED, "fail", case.label, self.fail_msg(
                        UNTOUCHED, case, f'output "{p.name}" changed {int(changed.sum())} element(s) outside its write range '
                        f"{p.write_range.text} (first at {first}), which must keep what it held before the launch"), output=p.name)  # fmt: skip
                    return
        if compared:
            names = ", ".join(f'"{n}"' for n in compared)
            self.add(be.name, UNTOUCHED, "pass", case.label, f"{names} unchanged outside the write range")

    # -- checks -------------------------------------------------------------------------------------
    def check_guards(self, be: Backend, arena: Arena, case: Case, run: str) -> None:
        if not arena.guard:
            if run == "A":
                self.add(be.name, GUARDS, "not_run", case.label, "guard bands are off (memcheck watches the allocation bounds)")
            return
        with self.s.phase("checks"):
            damage = arena.guard_damage()
        if damage:
            what = damage[0].describe()
            more = f" (and {len(damage) - 1} more band(s))" if len(damage) > 1 else ""
            self.add(be.name, GUARDS, "fail", case.label, self.fail_msg(GUARDS, f"{case.label} (run {run})", f"it wrote outside a buffer: {what}{more}"), output=damage[0].buffer)
            arena.restore_guards()
        elif run == "A":
            self.add(be.name, GUARDS, "pass", case.label, "guard bands intact")

    def check_inputs(self, be: Backend, arena: Arena, bufs: dict[str, DeviceBuffer], before: dict[str, int], case: Case) -> bool:
        with self.s.phase("checks"):
            now = _hashes(arena, bufs, list(before))
            changed = [n for n, h in before.items() if now[n] != h]
        if changed:
            b = bufs[changed[0]]
            host = arena.download(b) if b.count <= self.s.fetch_budget else None
            detail = ""
            if host is not None:
                want = case.inputs.get(changed[0]) if changed[0] in case.inputs else case.isv
                diff = np.flatnonzero(host.reshape(-1).view(np.uint8) != np.ascontiguousarray(want).reshape(-1).view(np.uint8)) if want is not None else np.array([])
                if diff.size:
                    detail = f" ({diff.size} byte(s) changed, first at byte {int(diff[0])})"
            others = f' (and {", ".join(chr(34) + c + chr(34) for c in changed[1:])})' if len(changed) > 1 else ""
            self.add(be.name, INPUTS_UNMODIFIED, "fail", case.label, self.fail_msg(INPUTS_UNMODIFIED, case, f'input "{changed[0]}"{others} changed during the launch{detail}'), output=changed[0])
            return True
        self.add(be.name, INPUTS_UNMODIFIED, "pass", case.label, "inputs unmodified")
        return False

    def check_reference(self, be: Backend, case: Case, outs: dict[str, np.ndarray], nonfinite: dict[str, int], suffix: str = "",
                        null: list[str] | None = None) -> None:  # fmt: skip
        label = case.label + suffix.replace(" with its optional outputs NULL", ", optional pointers NULL")
        sampled = self.sampled_note(case)
        deltas = not suffix and bool(self.delta_params)
        if case.ref_mode is None:
            self.add(be.name, REFERENCE, "not_run", label, case.ref_reason or "no reference")
            if deltas:
                self.add(be.name, INOUT_DELTA, "not_run", label, case.ref_reason or "no reference")
            # NaN is never right, reference or not
            bad = [n for n, c in nonfinite.items() if c]
            if bad:
                self.add(be.name, FINITE, "fail", label, self.fail_msg(FINITE, label, f'output "{bad[0]}" has {nonfinite[bad[0]]} NaN/Inf element(s)'), output=bad[0])
            return
        try:
            ref = self.reference_of(case) if not null else self.reference_without(case, null)
        except ReferenceProblem as exc:
            self.add(be.name, REFERENCE, "fail", label, self.fail_msg(REFERENCE, label, f"the float64 reference cannot be evaluated: {exc}"))
            if deltas:
                self.add(be.name, INOUT_DELTA, "not_run", label, "the float64 reference cannot be evaluated")
            return
        if deltas:
            self.check_inout_delta(be, case, outs, ref)
        with self.s.phase("compare"):
            worst: tuple[str, Comparison] | None = None
            fail: tuple[str, Comparison | str] | None = None
            nan_fail: tuple[str, str] | None = None
            for n, got in outs.items():
                if n not in ref:
                    fail = fail or (n, f'the reference returns no "{n}" (it returns {", ".join(sorted(ref)) or "nothing"})')
                    continue
                want = np.asarray(ref[n])
                p = self.k.param(n)
                picked = case.select.get(n) if case.select else None
                if picked is not None:  # the reference computed the sampled elements only
                    got = np.take(got.reshape(case.shapes[n]), picked[1], axis=picked[0])
                if isinstance(p, TensorParam) and p.write_range is not None:
                    idx = write_index(p, case.env, self.s.slot_index)
                    got, want = got[idx], written_part(got, idx, want)
                integer = isinstance(p, TensorParam) and np_dtype(p.dtype).kind in "iu" and p.dtype != "bf16"
                cmp = compare(got, want, self.tol, integer=integer)
                if picked is not None and cmp.worst is not None and len(cmp.worst) > picked[0]:
                    at = list(cmp.worst)  # the position in the sample, as the output's own index
                    at[picked[0]] = int(picked[1][at[picked[0]]])
                    cmp = replace(cmp, worst=tuple(at))
                if cmp.status == "nonfinite":
                    nan_fail = nan_fail or (n, f'output "{n}" has {cmp.describe()}{sampled}')
                elif not cmp.ok:
                    fail = fail or (n, cmp)
                if worst is None or (cmp.rel_norm or 0) > (worst[1].rel_norm or 0):
                    worst = (n, cmp)
                if (case.rows is not None or picked is not None) and nonfinite.get(n) and np.isfinite(want).all() and cmp.status != "nonfinite":
                    where = "rows" if case.rows is not None else "elements"
                    nan_fail = nan_fail or (n, f'output "{n}" has {nonfinite[n]} NaN/Inf element(s) outside the sampled {where} where the reference {where} are finite')
        if nan_fail:
            self.add(be.name, FINITE, "fail", label, self.fail_msg(FINITE, label, nan_fail[1]), output=nan_fail[0])
        else:
            self.add(be.name, FINITE, "pass", label, "no NaN/Inf")
        nums = {}
        if worst is not None:
            c = worst[1]
            nums = {"rel_norm_err": _finite(c.rel_norm), "max_abs_err": _finite(c.max_abs), "max_rel_err": _finite(c.max_rel)}
        if fail:
            n, c = fail
            what = c if isinstance(c, str) else f'output "{n}" has {c.describe()} against the float64 reference{sampled}'
            if not isinstance(c, str):
                nums = {"rel_norm_err": _finite(c.rel_norm), "max_abs_err": _finite(c.max_abs), "max_rel_err": _finite(c.max_rel)}
            self.add(be.name, REFERENCE, "fail", label, self.fail_msg(REFERENCE, label, what), output=n, **nums)
        elif not nan_fail:
            self.add(be.name, REFERENCE, "pass", label, f"matches the float64 reference{sampled}", output=worst[0] if worst else None, **nums)

    def check_inout_delta(self, be: Backend, case: Case, outs: dict[str, np.ndarray], ref: dict[str, Any]) -> None:
        """The change of every float ``inout``/``accumulate`` buffer (``out - in``) against the reference's
        change (``ref - in``), relative to the size of that change (:func:`compare_delta`)."""
        sampled = self.sampled_note(case)
        nd = self.k.nondeterministic
        compared: list[str] = []
        with self.s.phase("compare"):
            for p in self.delta_params:
                got = outs.get(p.name)
                if got is None or p.name not in ref:
                    continue  # not fetched (over the fetch budget) or not returned: VERIFY_REFERENCE says so
                before = case.inputs[p.name]
                if case.rows is not None and batch_leading(p.shape, self.cs):
                    before = before[case.rows]
                picked = case.select.get(p.name) if case.select else None
                if picked is not None:
                    got = np.take(got.reshape(case.shapes[p.name]), picked[1], axis=picked[0])
                    before = np.take(before.reshape(case.shapes[p.name]), picked[1], axis=picked[0])
                want = np.asarray(ref[p.name], dtype=np.float64)
                if p.write_range is not None:
                    idx = write_index(p, case.env, self.s.slot_index)
                    got, before, want = got[idx], before[idx], written_part(got, idx, want)
                slack: np.ndarray | float = 0.0
                if nd is not None:
                    # atomics: the change may differ between runs by the declared tolerance, so it may here too
                    slack = nd.atol * float(np.nanmax(np.abs(want))) + nd.rtol * np.abs(want).reshape(got.shape) if want.size else 0.0
                cmp = compare_delta(got, before, want.reshape(got.shape) if want.size == got.size else want, DeltaTolerance.of(self.tol, p.dtype), slack)
                if cmp.status == "nonfinite":
                    self.add(be.name, INOUT_DELTA, "not_run", case.label, f'"{p.name}" has NaN/Inf where the reference is finite (VERIFY_NAN judges it)', output=p.name)
                    return
                if not cmp.ok:
                    what = cmp.detail if cmp.status == "shape" else (
                        f'the change of "{p.name}" (out - in) has relative error {cmp.rel_norm:.1e} against the reference\'s change '
                        f"({cmp.n_bad} of {cmp.n} element(s) outside the tolerance beyond the rounding floor, worst at "
                        f"{list(cmp.worst or ())}: {cmp.got:.6g} against {cmp.want:.6g}"
                        + (f"; {cmp.detail}" if cmp.detail else "") + f"){sampled}"
                    )  # fmt: skip
                    self.add(be.name, INOUT_DELTA, "fail", case.label, self.fail_msg(INOUT_DELTA, case, what), output=p.name,
                             rel_norm_err=_finite(cmp.rel_norm), max_abs_err=_finite(cmp.max_abs))  # fmt: skip
                    return
                compared.append(p.name)
        if compared:
            names = ", ".join(f'"{n}"' for n in compared)
            self.add(be.name, INOUT_DELTA, "pass", case.label, f"the change of {names} matches the reference's change{sampled}")

    def check_mask_zero(self, be: Backend, case: Case, outs: dict[str, np.ndarray]) -> None:
        p = self.mask_param
        if p is None or not p.mask.zeroes or case.valid is None:
            return
        skipped = ~case.valid if case.rows is None else ~case.valid[case.rows]
        if not skipped.any():
            if case.mask_variant == "mixed":
                self.add(be.name, MASK_ZERO, "not_run", case.label, "no skipped rows in this case")
            return
        for n in p.mask.zeroes:
            got = outs.get(n)
            if got is None:
                continue
            rows = got.reshape(got.shape[0], -1)[skipped] if got.ndim and got.shape[0] == skipped.size else None
            if rows is None:
                continue
            nz = np.flatnonzero(np.any(rows != 0, axis=1) | np.any(np.isnan(rows), axis=1))
            if nz.size:
                row_ids = np.flatnonzero(skipped) if case.rows is None else case.rows[skipped]
                first = int(row_ids[nz[0]])
                vals = np.abs(rows[nz[0]].astype(np.float64))
                # a row of NaN alone has no finite largest value: "nan" (np.nanmax would warn and say the same)
                mx = float(np.nanmax(vals)) if not np.isnan(vals).all() else float("nan")
                self.add(be.name, MASK_ZERO, "fail", case.label, self.fail_msg(
                    MASK_ZERO, case, f'output "{n}" is not zero on {nz.size} of {int(skipped.sum())} skipped row(s) '
                    f'(label {p.mask.skip_value}; first row {first}, max |value| {mx:.1e})'), output=n)  # fmt: skip
                return
        self.add(be.name, MASK_ZERO, "pass", case.label, "skipped rows are exact zeros")

    def check_all_skip(self, be: Backend, arena: Arena, bufs: dict[str, DeviceBuffer], case: Case) -> None:
        p = self.mask_param
        with self.s.phase("checks"):
            for n in p.mask.zeroes:
                if n in bufs:
                    nz = arena.count_nonzero(bufs[n])
                    if nz:
                        self.add(be.name, ALL_SKIP, "fail", case.label, self.fail_msg(ALL_SKIP, case, f'output "{n}" has {nz} non-zero element(s) although every row is skipped'), output=n)
                        return
            for n in self.written_names():
                nf = self.count_nonfinite(arena, bufs, case, n)
                if nf:
                    self.add(be.name, ALL_SKIP, "fail", case.label, self.fail_msg(ALL_SKIP, case, f'output "{n}" has {nf} NaN/Inf element(s) when every row is skipped'), output=n)
                    return
        self.add(be.name, ALL_SKIP, "pass", case.label, "all-skip batch: zeros and no NaN")

    def check_written(self, be: Backend, case: Case, pa: dict[str, int], pb: dict[str, int]) -> set[str]:
        unwritten = {n for n in pa if pa[n] and pb.get(n)}
        if unwritten:
            n = sorted(unwritten)[0]
            p = self.k.param(n)
            total = numel(case.shapes[n])
            if p.write_range is not None:
                total = numel(np.empty(case.shapes[n], dtype=np.bool_)[write_index(p, case.env, self.s.slot_index)].shape)
            self.add(be.name, WRITTEN, "fail", case.label, self.fail_msg(
                WRITTEN, case, f'output "{n}" has {min(pa[n], pb[n])} of {total} element(s) never written '
                "(they still hold the poison pattern after two runs)"), output=n)  # fmt: skip
        else:
            self.add(be.name, WRITTEN, "pass", case.label, "every output element written")
        return unwritten

    def check_determinism(self, be: Backend, arena: Arena, bufs: dict[str, DeviceBuffer], case: Case,
                          hashes_a: dict[str, int], outs_a: dict[str, np.ndarray], unwritten: set[str]) -> None:  # fmt: skip
        nd = self.k.nondeterministic
        with self.s.phase("checks"):
            names = [n for n in self.written_names() if n not in unwritten]
            after = _hashes(arena, bufs, names)
            differ = [n for n in names if after[n] != hashes_a[n]]
            partial = {p.name: p for p in self.partial if p.name in differ and p.name in outs_a}
            if partial:  # outside the write range each run keeps its own poison: compare the written part
                now = self.fetch(arena, bufs, case)
                for n, p in partial.items():
                    idx = write_index(p, case.env, self.s.slot_index)
                    width = outs_a[n].dtype.itemsize
                    if n in now and np.array_equal(now[n][idx].view(f"u{width}"), outs_a[n][idx].view(f"u{width}")):
                        differ.remove(n)
        if not differ:
            self.add(be.name, DETERMINISM, "pass", case.label, "two runs agree bit for bit")
            return
        if nd is None:
            self.add(be.name, DETERMINISM, "fail", case.label, self.fail_msg(
                DETERMINISM, case, f'two runs on identical inputs differ bitwise in output "{differ[0]}" '
                "and the kernel declares no [kernel.nondeterministic] tolerance"), output=differ[0])  # fmt: skip
            return
        with self.s.phase("transfer"):
            outs_b = self.fetch(arena, bufs, case)
        for n in differ:
            if n not in outs_a or n not in outs_b:
                continue
            ok, mx, nbad = within(outs_b[n], outs_a[n], nd.rtol, nd.atol)
            if not ok:
                self.add(be.name, DETERMINISM, "fail", case.label, self.fail_msg(
                    DETERMINISM, case, f'two runs differ in output "{n}" by up to {mx:.1e} ({nbad} element(s) beyond '
                    f"the declared rtol {nd.rtol:g} / atol {nd.atol:g})"), output=n, max_abs_err=mx)  # fmt: skip
                return
        self.add(be.name, DETERMINISM, "pass", case.label, f"two runs agree within the declared tolerance (rtol {nd.rtol:g}, atol {nd.atol:g})")

    def check_accumulate(self, be: Backend, arena: Arena, bufs: dict[str, DeviceBuffer], case: Case, outs_a: dict[str, np.ndarray]) -> None:
        nd = self.k.nondeterministic
        with self.s.phase("transfer"):
            outs_c = self.fetch(arena, bufs, case)
        for p in self.k.tensors:
            if p.role != "accumulate" or p.name not in outs_c or p.name not in outs_a:
                continue
            i1, i2 = case.inputs[p.name], case.init2[p.name]
            if case.rows is not None and batch_leading(p.shape, self.cs):
                i1, i2 = i1[case.rows], i2[case.rows]
            a = outs_a[p.name].astype(np.float64)
            c = outs_c[p.name].astype(np.float64)
            d_in = i2.astype(np.float64) - i1.astype(np.float64)
            d_out = c - a
            bound = 2 * F32_EPS * (np.abs(a) + np.abs(c) + np.abs(i1) + np.abs(i2)) + 1e-30
            if nd is not None:
                # atomics: the contribution itself may differ between the runs by the declared tolerance
                scale = float(np.nanmax(np.abs(np.concatenate([a.reshape(-1), c.reshape(-1)])))) if a.size else 0.0
                bound = bound + nd.atol * scale + nd.rtol * (np.abs(a) + np.abs(c))
            err = np.abs(d_out - d_in)
            err = np.where(np.isfinite(err), err, np.inf)
            bad = err > bound.reshape(err.shape)
            if bad.any():
                self.add(be.name, ACCUMULATE, "fail", case.label, self.fail_msg(
                    ACCUMULATE, case, f'"{p.name}" does not add to its previous contents: two runs from contents that differ by '
                    f"up to {float(np.abs(d_in).max()):.1e} give results that differ by up to {float(np.abs(d_out[np.isfinite(d_out)]).max() if np.isfinite(d_out).any() else np.nan):.1e} "
                    f"({int(bad.sum())} of {bad.size} element(s) off)"), output=p.name, max_abs_err=_finite(float(err.max())))  # fmt: skip
                return
        self.add(be.name, ACCUMULATE, "pass", case.label, "accumulate outputs add to their previous contents")

    # -- gradient check -----------------------------------------------------------------------------
    def gradcheck(self, variant: dict[str, int]) -> None:
        for size in GRADCHECK_SIZES:
            label = case_label(size, variant, {}, "gradcheck", cs=self.cs)
            env = make_env(self.cs, size, variant)
            if self.k.dims:
                bindings, _ = local_bindings(self.cs, self.k, env, self.s.wiring)
                if not bindings:
                    self.add(None, GRADCHECK, "not_run", label, "no launch binds the kernel's local dims")
                    return
                env.update(bindings[0].values)
            try:
                with self.s.phase("gradcheck"):
                    gc = call(self.grad, self.k.gradcheck, rng=self.s.factory.rng(self.k.name, "gradcheck", label), dims=dict(env))
            except ReferenceProblem as exc:
                self.add(None, GRADCHECK, "fail", label, self.fail_msg(GRADCHECK, label, f"the gradient-check case cannot be built: {exc}"))
                continue
            case = self.grad_case(gc, env, variant, label)
            if isinstance(case, str):
                self.add(None, GRADCHECK, "fail", label, self.fail_msg(GRADCHECK, label, case))
                continue
            with self.s.phase("gradcheck"):
                fds = self.finite_differences(gc, label)
            for be in self.s.backends.values():
                arena = Arena(be, self.s.job.guard_bytes)
                try:
                    bufs = self.alloc(arena, case)
                    self.prepare(arena, bufs, case, poison=0, init="init1", first=True)
                    self.launch(be, case, {n: b.ptr for n, b in bufs.items()}, "gradcheck")
                    self.check_guards(be, arena, case, "gradcheck")
                    outs = {n: arena.download(bufs[n]) for n in gc.grads if n in bufs}
                finally:
                    arena.free_all()
                self.compare_gradients(be, gc, outs, fds, label)

    def grad_case(self, gc: Any, env: dict[str, int], variant: dict[str, int], label: str) -> Case | str:
        shapes = {p.name: shape_of(p.shape, env, self.s.slot_index) for p in self.k.tensors}
        scalars: dict[str, int | float] = {}
        for p in self.k.params:
            if isinstance(p, ScalarParam):
                v = gc.inputs.get(p.name)
                if v is None:
                    v = scalar_value(p, env, self.s.slot_index, isv=self.host_isv)
                if v is None:
                    return f'scalar "{p.name}" has no value'
                scalars[p.name] = float(np.float32(v)) if p.dtype == "f32" else int(v)
        case = Case(label, int(env.get(runtime_dims(self.cs)[0], 0)) if runtime_dims(self.cs) else 0, env, variant, LocalBinding({}), "mixed", shapes, scalars)
        for p in self.k.tensors:
            if p.role == "out":
                continue
            if p.name not in gc.inputs:
                return f'the gradient-check case has no input "{p.name}"'
            a = np.asarray(gc.inputs[p.name])
            if a.size != numel(shapes[p.name]):
                return f'the gradient-check case gives "{p.name}" {a.size} element(s) where the contract shape {list(shapes[p.name])} has {numel(shapes[p.name])}'
            case.inputs[p.name] = a.reshape(shapes[p.name]).astype(np_dtype(p.dtype))
        if self.isv_param is not None:
            v = gc.inputs.get(self.isv_param.name)
            case.isv = (np.asarray(v) if v is not None else isv_perturbed(self.cs, self.s.factory.rng(self.k.name, "isv", label))).astype(np.float32)
        for n in gc.grads:
            if n not in shapes:
                return f'the gradient-check case names "{n}", which is not a tensor parameter'
        return case

    def finite_differences(self, gc: Any, label: str) -> dict[str, Any]:
        """Per primal: elementwise central differences (small) or (directions, their differences)."""
        out: dict[str, Any] = {}
        rng = self.s.factory.rng(self.k.name, "fd", label)
        for target in {t.primal for t in gc.grads.values()}:
            primal = np.asarray(gc.primals[target], dtype=np.float64)
            if primal.size <= GRAD_ELEMENTWISE_MAX:
                fd = np.empty(primal.size)
                for e in range(primal.size):
                    d = np.zeros(primal.size)
                    d[e] = 1.0
                    fd[e] = central_difference(gc.loss, gc.primals, target, d.reshape(primal.shape))
                out[target] = ("elementwise", fd.reshape(primal.shape))
            else:
                dirs = random_directions(rng, primal.shape, GRAD_DIRECTIONS)
                out[target] = ("directions", [(d, central_difference(gc.loss, gc.primals, target, d)) for d in dirs])
        return out

    def compare_gradients(self, be: Backend, gc: Any, outs: dict[str, np.ndarray], fds: dict[str, Any], label: str) -> None:
        worst = 0.0
        for name, target in gc.grads.items():
            if name not in outs:
                continue
            got = outs[name].astype(np.float64)
            if not np.isfinite(got).all():
                self.add(be.name, GRADCHECK, "fail", label, self.fail_msg(GRADCHECK, label, f'output "{name}" has NaN/Inf'), output=name)
                return
            g = target.reduced(got).reshape(np.shape(gc.primals[target.primal]))
            kind, data = fds[target.primal]
            if kind == "elementwise":
                fd = data
                scale = float(np.abs(fd).max())
                err = np.abs(g - fd)
                bound = GRAD_ATOL * scale + GRAD_RTOL * np.abs(fd) + 1e-12
                ratio = float((err / bound).max())
                worst = max(worst, ratio)
                if ratio > 1:
                    i = np.unravel_index(int(np.argmax(err / bound)), fd.shape)
                    self.add(be.name, GRADCHECK, "fail", label, self.fail_msg(
                        GRADCHECK, label, f'output "{name}" (gradient of "{target.primal}") is {g[i]:.6g} at {list(i)} where '
                        f"central differences give {fd[i]:.6g} (max abs error {float(err.max()):.1e})"), output=name, max_abs_err=float(err.max()))  # fmt: skip
                    return
            else:
                gnorm = sqrt_sumsq(np.asarray(g, dtype=np.float64).reshape(-1))
                for d, fd in data:
                    an = float(np.sum(g * d))
                    err = abs(an - fd)
                    bound = GRAD_RTOL * abs(fd) + GRAD_ATOL * gnorm + 1e-12
                    worst = max(worst, err / bound)
                    if err > bound:
                        self.add(be.name, GRADCHECK, "fail", label, self.fail_msg(
                            GRADCHECK, label, f'output "{name}" (gradient of "{target.primal}") projects to {an:.6g} on a random '
                            f"direction where central differences give {fd:.6g} (relative error {err / max(abs(fd), 1e-300):.1e})"),
                            output=name, max_abs_err=err)  # fmt: skip
                        return
        self.add(be.name, GRADCHECK, "pass", label, f"gradients match central differences (worst {worst:.2f} of the tolerance)")

    # -- properties ---------------------------------------------------------------------------------
    def property_size(self) -> DimCase | int | None:
        """The case the contract properties run at: the largest of the cases up to 4096 (by its largest value)."""
        all_cases = self.s.cases_for("kernel", self.k.name)
        sizes = [s for s in all_cases if 1 < scale_of(s) <= 4096 and not size_in_range(self.cs, s)]
        return max(sizes, key=scale_of) if sizes else (min(all_cases, key=scale_of) if all_cases else None)

    def first_binding(self, size: DimCase | int) -> LocalBinding | None:
        env0 = make_env(self.cs, size, {})
        bindings, _ = local_bindings(self.cs, self.k, env0, self.s.wiring)
        return bindings[0] if bindings else None

    def run_once(self, be: Backend, case: Case, run: str) -> tuple[Arena, dict[str, DeviceBuffer]]:
        arena = Arena(be, self.s.job.guard_bytes)
        bufs = self.alloc(arena, case)
        self.prepare(arena, bufs, case, poison=0, init="init1", first=True)
        self.launch(be, case, {n: b.ptr for n, b in bufs.items()}, run)
        self.check_guards(be, arena, case, run)
        return arena, bufs

    def unit_scale(self) -> None:
        props = [p for p in self.k.properties if p.kind == "unit_scale"]
        if not props:
            return
        size = self.property_size()
        lb = self.first_binding(size) if size else None
        for prop in props:
            inp, slot, outp = prop.get("input"), prop.get("slot"), prop.get("output")
            mags = [float(m) for m in (prop.get("magnitudes") or (1e-3, 5e3))]
            bound = float(prop.get("bound", 100.0))
            sl = self.cs.slot_map.get(str(slot))
            if lb is None or not isinstance(self.k.param(str(inp)), TensorParam) or not isinstance(self.k.param(str(outp)), TensorParam) or sl is None or self.isv_param is None:
                self.add(None, UNIT_SCALE, "not_run", "", f'the unit_scale property of "{self.k.name}" names an input, output or slot the kernel does not have')
                continue
            for m in mags:
                case = self.base_case(size, {}, lb, extra=f"|{inp}| ~ {m:g}")
                if isinstance(case, str):
                    self.add(None, UNIT_SCALE, "not_run", "", f"not run: {case}")
                    continue
                x = self.s.factory.rng(self.k.name, "unit", m).standard_normal(case.shapes[str(inp)]).astype(np.float32) * np.float32(m)
                case.inputs[str(inp)] = x
                case.isv = case.isv.copy()
                case.isv[list(sl.indices)] = np.float32(np.abs(x.astype(np.float64)).mean())
                for be in self.s.backends.values():
                    arena, bufs = self.run_once(be, case, "unit scale")
                    try:
                        out = arena.download(bufs[str(outp)]).astype(np.float64).reshape(-1)
                    finally:
                        arena.free_all()
                    big = float(np.max(np.abs(out))) if out.size else 0.0
                    if not np.isfinite(out).all() or big > bound:
                        self.add(be.name, UNIT_SCALE, "fail", case.label, self.fail_msg(
                            UNIT_SCALE, case, f'output "{outp}" is {big:.1e} for "{inp}" of magnitude {m:g} with ISV slot '
                            f'"{slot}" holding mean |{inp}| (bound {bound:g})'), output=str(outp), max_abs_err=_finite(big))  # fmt: skip
                    else:
                        self.add(be.name, UNIT_SCALE, "pass", case.label, f'output "{outp}" is {big:.2e} (bound {bound:g})', max_abs_err=big)

    def divisor_zero(self) -> None:
        if self.isv_param is None:
            return
        slots = []
        for r in self.k.isv_reads:
            sl = self.cs.slot_map.get(r.slot)
            if sl is not None and sl.role in MULTIPLICATIVE_ROLES and sl not in slots:
                slots.append(sl)
        if not slots:
            return
        sizes = [s for s in self.s.cases_for("kernel", self.k.name) if not size_in_range(self.cs, s) and scale_of(s) <= 4096]
        sizes = sorted({min(sizes, key=scale_of), max(sizes, key=scale_of)}, key=scale_of) if sizes else []
        for size in sizes:
            lb = self.first_binding(size)
            if lb is None:
                continue
            for sl in slots:
                case = self.base_case(size, {}, lb, extra=f"{sl.name} = 0")
                if isinstance(case, str):
                    continue
                case.isv = case.isv.copy()
                case.isv[list(sl.indices)] = 0
                for be in self.s.backends.values():
                    arena, bufs = self.run_once(be, case, "divisor zero")
                    try:
                        bad = [(n, self.count_nonfinite(arena, bufs, case, n)) for n in self.written_names()]
                    finally:
                        arena.free_all()
                    bad = [(n, c) for n, c in bad if c]
                    if bad:
                        self.add(be.name, DIVISOR_ZERO, "fail", case.label, self.fail_msg(
                            DIVISOR_ZERO, case, f'with ISV slot "{sl.name}" ({sl.role}) at 0, output "{bad[0][0]}" has '
                            f"{bad[0][1]} NaN/Inf element(s)"), output=bad[0][0])  # fmt: skip
                    else:
                        self.add(be.name, DIVISOR_ZERO, "pass", case.label, f'slot "{sl.name}" at 0 gives no NaN/Inf')


REFERENCE_MODES = ("not run", "sampled", "full")  # least thorough first


def least_thorough(a: str, b: str) -> str:
    """The less thorough of two reference modes (a case compared in full at one binding and sampled at
    another counts as sampled)."""
    return min(a, b, key=lambda m: REFERENCE_MODES.index(m) if m in REFERENCE_MODES else 0)


def seed_key(size: DimCase | int) -> int | str:
    """What seeds a case's data: the scalar size, or :attr:`DimCase.key`."""
    return size.key if isinstance(size, DimCase) else int(size)


def scale_of(size: DimCase | int) -> int:
    """A case's scale (its largest value) for picking the cases properties run at."""
    return size.size if isinstance(size, DimCase) else int(size)


def _hashes(arena: Arena, bufs: dict[str, DeviceBuffer], names: list[str]) -> dict[str, int]:
    """The device hashes of the named buffers, in one round trip (:meth:`Arena.hash_many`)."""
    return dict(zip(names, arena.hash_many([bufs[n] for n in names])))


def _finite(x: float | None) -> float | None:
    if x is None:
        return None
    return float(x) if np.isfinite(x) else None


def _rows_match(part: Any, full: np.ndarray, rows: np.ndarray) -> bool:
    if part is None:
        return False
    part = np.asarray(part, dtype=np.float64)
    try:
        want = full[rows].astype(np.float64)
    except (IndexError, TypeError):
        return False
    if part.size != want.size:
        return False
    part = part.reshape(want.shape)
    scale = float(np.nanmax(np.abs(want))) if want.size and np.isfinite(want).any() else 0.0
    return bool(np.allclose(part, want, rtol=1e-9, atol=1e-12 * max(scale, 1e-300), equal_nan=True))
