"""Verification of a schedule: the whole chain end to end, its CUDA-graph replay, its equivalent twin.

At each chain size (default B = 37 and 4096) the schedule runs eagerly on the device (after the
schedules it is declared ``after``, on shared buffers) exactly as the wiring says: zero steps as memsets,
views as reinterpretations of one allocation, NULL bindings as null pointers, scalars from the launch
``args`` or the contract; an ``isv(SLOT)`` scalar is the slot's value read from the device just before
its launch. External inputs and parameters get seeded data, the ISV its reset values, every other buffer
poison. The same steps run on the host through the float64 references (the reference chain), and every
buffer the chain writes is compared: losses and parameter gradients first.

Then each ``graph_capture`` schedule is captured once into a CUDA graph (an ``isv(SLOT)`` scalar frozen
at the value the host reads at capture) and replayed at ``REPLAY_STATES`` fresh states, as a training
loop replays it step after step: before each replay the inputs and every ISV slot change in place (same
device pointers), and the replay must equal an eager run at that same new state (bitwise, or within the
chain tolerance where a launched kernel declares nondeterminism).
A schedule with ``equivalent_to`` runs from inputs identical to its twin's, and their loss and gradient
buffers must agree within the chain tolerance.

>>> results = ScheduleVerifier(session, cs.schedule_map["aux_heads_backward"]).run()   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cases import as_case, bind_local_dims
from ..model import DTYPES, IsvParam, Kernel, Schedule, ScalarParam, TensorParam
from ._backend import Backend, DeviceError
from ._compare import Tolerance, compare
from ._inputs import isv_perturbed, isv_reset, resolve_domain
from ._memory import Arena, DeviceBuffer
from ._plan import (
    batch_leading, case_label, host_read_of, make_env, np_dtype, numel, scalar_value, shape_of, size_in_range, write_index, written_part,
)  # fmt: skip
from ._reference import ReferenceProblem, call
from ..verify_checks import CHAIN, EQUIVALENCE, GRAPH_REPLAY, GUARDS, LAUNCH, UNTOUCHED, VerifyCheck
from ._results import SubjectResult
from ._session import LaunchFailure, Session

CHAIN_RTOL = 1e-4  # float32 chains against float64: errors compound over a dozen launches
CHAIN_ATOL = 1e-4
REPLAY_STATES = 2  # fresh states one captured graph is replayed at (a training loop replays it every step)
CHAIN_BUDGET = 1 << 28  # float64 elements of the reference chain's buffers (2 GiB)
_PRIORITY = {"loss": 0, "gradient": 1}


@dataclass
class PlanStep:
    schedule: str
    index: int
    zero: str | None = None
    kernel: Kernel | None = None
    env: dict[str, int] = field(default_factory=dict)
    # param -> (buffer, view shape, offset in elements: a view at an offset is a slice of the flat buffer)
    bindings: dict[str, tuple[str, tuple[int, ...], int] | None] = field(default_factory=dict)
    scalars: dict[str, int | float] = field(default_factory=dict)
    host_reads: dict[str, int] = field(default_factory=dict)  # scalar -> ISV index it reads on the host (isv(SLOT))

    @property
    def label(self) -> str:
        what = f'zero "{self.zero}"' if self.zero else f'"{self.kernel.name}"'
        return f'step {self.index} of "{self.schedule}" ({what})'


class ScheduleVerifier:
    """See the module docstring."""

    def __init__(self, session: Session, schedule: Schedule):
        self.s = session
        self.cs = session.cs
        self.sched = schedule
        self.results = {name: SubjectResult(schedule.name, "schedule", name) for name in session.backends}
        declared = schedule.tolerance  # a schedule may loosen it, with a reason (fast-math tanh, say)
        self.tol = Tolerance.of(declared.rtol, declared.atol) if declared else Tolerance.of(CHAIN_RTOL, CHAIN_ATOL)
        self.isv_name = self.cs.isv.buffer if self.cs.isv else "isv"
        self.envs_run: list[dict[str, int]] = []
        self.ref_modes: dict[str, str] = {}  # case label -> how the chain was compared with its reference

    # -- records ------------------------------------------------------------------------------------
    def add(self, backend: str | None, check: VerifyCheck, verdict: str, case: str, message: str, **nums: Any) -> None:
        for name, r in self.results.items():
            if backend is None or name == backend:
                r.add(check, verdict, case, message, **nums)

    def fail_msg(self, check: VerifyCheck, label: str, what: str, name: str | None = None) -> str:
        return check.failure("schedule", name or self.sched.name, what, at=label)

    def run(self) -> list[SubjectResult]:
        try:
            for size in self.s.cases_for("schedule", self.sched.name):
                label = case_label(size, {}, {}, cs=self.cs)
                why = size_in_range(self.cs, size)
                if why:
                    self.add(None, CHAIN, "not_run", label, f"not run at {label}: {why}")
                    continue
                for r in self.results.values():
                    r.sizes.append(label)
                    r.cases.append(as_case(self.cs, size).as_dict())
                    r.references.append("not run")
                self.envs_run.append(make_env(self.cs, size))
                self.verify_size(size, label)
                for r in self.results.values():
                    r.references[-1] = self.ref_modes.get(label, "not run")
        except LaunchFailure as exc:
            self.record_coverage()
            be = getattr(exc, "backend", None)
            msg = LAUNCH.failure("schedule", self.sched.name, str(exc))
            for name in self.results:
                if be is None or name == be:
                    self.add(name, LAUNCH, "fail", getattr(exc, "case", ""), msg)
            if exc.sticky:
                exc.results = list(self.results.values())  # type: ignore[attr-defined]
                raise
        self.record_coverage()
        return list(self.results.values())

    def record_coverage(self) -> None:
        """Tail coverage of the launch geometry of every kernel the schedule launches, over its cases."""
        from ..search.coverage import kernel_sites, launch_envs, tail_verdicts

        tails: list[dict[str, Any]] = []
        seen: set[str] = set()
        for st in self.sched.launches:
            k = self.cs.kernel_map.get(st.launch or "")
            if k is None or k.name in seen:
                continue
            seen.add(k.name)
            at = launch_envs(self.cs, k, self.s.wiring)
            envs = [e for env in self.envs_run for e in at(env)]
            tails += [v.to_dict() for v in tail_verdicts(self.cs, k, self.s.wiring, kernel_sites(self.cs, k, self.s.wiring), envs)]
        for r in self.results.values():
            r.tails = [dict(t) for t in tails]

    # -- plan ---------------------------------------------------------------------------------------
    def order(self, name: str) -> list[Schedule]:
        """``name`` after every schedule it is declared (transitively) after, dependencies first."""
        scheds = self.cs.schedule_map
        out: list[str] = []

        def visit(n: str, stack: tuple[str, ...]) -> None:
            if n in out or n in stack or n not in scheds:
                return
            for dep in scheds[n].after:
                visit(dep, (*stack, n))
            out.append(n)

        visit(name, ())
        return [scheds[n] for n in out]

    def plan(self, name: str, env: dict[str, int]) -> tuple[list[PlanStep], str]:
        """Resolved steps of ``name`` and its predecessors at ``env``, or a reason they cannot be."""
        steps: list[PlanStep] = []
        slots = self.s.slot_index
        for sched in self.order(name):
            for step in sched.steps:
                if step.zero:
                    steps.append(PlanStep(sched.name, step.index, zero=step.zero))
                    continue
                k = self.cs.kernel_map.get(step.launch or "")
                if k is None:
                    return [], f'step {step.index} of "{sched.name}" launches the unknown kernel "{step.launch}"'
                ps = PlanStep(sched.name, step.index, kernel=k)
                pairs = []
                for p in k.tensors:
                    b = step.binding(p.name)
                    if b is None or b.is_null:
                        ps.bindings[p.name] = None
                        continue
                    buf = self.cs.buffer_map.get(b.buffer or "")
                    if buf is None:
                        return [], f'step {step.index} of "{sched.name}" binds the unknown buffer "{b.buffer}"'
                    target = b.view if b.view is not None else buf.shape
                    pairs.append((p.name, p.shape, target))
                    offset = int(b.offset.evaluate(env, slots)) if b.offset is not None else 0
                    ps.bindings[p.name] = (buf.name, shape_of(target, env, slots), offset)
                envs, problems = bind_local_dims(k.dims, pairs, dict(step.dims), [dict(env)])
                ps.env = envs[0]
                if problems:
                    return [], f'step {step.index} of "{sched.name}": {problems[0]}'
                for p in k.params:
                    if isinstance(p, ScalarParam):
                        hr = host_read_of(p, step)
                        if hr is not None:
                            if hr.slot not in slots:
                                return [], f'step {step.index} of "{sched.name}": scalar "{p.name}" reads the unknown ISV slot "{hr.slot}"'
                            ps.host_reads[p.name] = slots[hr.slot]
                            ps.scalars[p.name] = 0.0  # read from the device at launch (eager) or at capture
                            continue
                        try:
                            v = scalar_value(p, ps.env, slots, step)
                        except KeyError as exc:
                            return [], f'step {step.index} of "{sched.name}": scalar "{p.name}" uses the unbound {exc}'
                        if v is None:
                            return [], f'step {step.index} of "{sched.name}": scalar "{p.name}" has no value'
                        ps.scalars[p.name] = float(np.float32(v)) if p.dtype == "f32" else v
                steps.append(ps)
        return steps, ""

    def buffers_of(self, steps: list[PlanStep]) -> tuple[list[str], list[str], bool]:
        """(every buffer touched, the buffers written, whether the ISV is used)."""
        touched: dict[str, None] = {}
        written: dict[str, None] = {}
        isv = False
        for st in steps:
            if st.zero:
                touched.setdefault(st.zero, None)
                written.setdefault(st.zero, None)
                continue
            isv = isv or bool(st.host_reads)
            for p in st.kernel.params:
                if isinstance(p, IsvParam):
                    isv = True
                    if st.kernel.isv_writes:
                        written.setdefault(self.isv_name, None)
            for pname, b in st.bindings.items():
                if b is None:
                    continue
                touched.setdefault(b[0], None)
                if st.kernel.param(pname).role != "in":
                    written.setdefault(b[0], None)
        return list(touched), list(written), isv

    # -- data ---------------------------------------------------------------------------------------
    def initial_data(self, names: list[str], env: dict[str, int], salt: str) -> dict[str, np.ndarray]:
        out = {}
        f = self.s.factory
        for n in names:
            b = self.cs.buffer_map.get(n)
            if b is None or not b.is_external:
                continue
            shape = shape_of(b.shape, env)
            probe = TensorParam(b.name, b.dtype, b.shape, "in", values=b.values)
            dom = resolve_domain(probe, b, shape, env)
            out[n] = f.tensor("buffer:" + n, b.dtype, shape, dom, batch_leading(b.shape, self.cs), salt)
        return out

    # -- one size -----------------------------------------------------------------------------------
    def verify_size(self, size: int, label: str) -> None:
        env = make_env(self.cs, size)
        steps, why = self.plan(self.sched.name, env)
        if why:
            self.add(None, CHAIN, "not_run", label, f"not run: {why}")
            return
        touched, written, uses_isv = self.buffers_of(steps)
        shapes = {n: shape_of(self.cs.buffer_map[n].shape, env) for n in touched}
        total = sum(numel(s) for s in shapes.values())
        big = total > CHAIN_BUDGET
        nbytes = sum(numel(shapes[n]) * np_dtype(self.cs.buffer_map[n].dtype).itemsize for n in touched)
        with self.s.phase("input_generation"):
            data = self.initial_data(touched, env, "")
            isv0 = isv_reset(self.cs, self.s.factory.rng("chain-isv", label)) if uses_isv else None
        if big:
            # the device run, graph replay and equivalence still run; only the float64 chain is skipped
            ref_store, ref_why = None, f"the reference chain needs {total:.2e} float64 elements at {label} (budget {CHAIN_BUDGET:.2e})"
        else:
            ref_store, ref_why = self.reference_chain(steps, shapes, data, isv0)
        snapshots: dict[str, dict[str, np.ndarray]] = {}
        for be in self.s.backends.values():
            free = be.free_memory()
            if free is not None and nbytes > 0.85 * free:
                self.add(be.name, CHAIN, "not_run", label, f"not run at {label}: needs {nbytes / 2**30:.1f} GiB of device memory, {free / 2**30:.1f} GiB free")
                continue
            arena = Arena(be, self.s.job.guard_bytes)
            try:
                bufs = self.alloc(arena, touched, shapes, uses_isv)
                rows = self.sample_rows(shapes, label)
                self.load(arena, bufs, data, isv0)
                self.eager(be, arena, bufs, steps, label, check_guards=True)
                got = self.fetch(arena, bufs, written, rows)
                snapshots[be.name] = got
                if ref_store is not None:
                    self.ref_modes[label] = "sampled" if any(rows.get(n) is not None for n in got) else "full"
                self.compare_chain(be, label, got, ref_store, ref_why, rows, steps)
                if any(s.graph_capture for s in self.order(self.sched.name)):
                    self.graph_replay(be, arena, bufs, steps, written, env, label, uses_isv)
            finally:
                arena.free_all()
        if self.sched.equivalent_to:
            self.equivalence(size, env, label, snapshots)

    def alloc(self, arena: Arena, names: list[str], shapes: dict[str, tuple[int, ...]], uses_isv: bool) -> dict[str, DeviceBuffer]:
        bufs = {}
        for n in names:
            b = self.cs.buffer_map[n]
            bufs[n] = arena.alloc(n, np_dtype(b.dtype), shapes[n], bf16=b.dtype == "bf16")
        if uses_isv:
            bufs[self.isv_name] = arena.alloc(self.isv_name, np_dtype(self.cs.isv.dtype if self.cs.isv else "f32"), (self.s.isv_dim,))
        return bufs

    def load(self, arena: Arena, bufs: dict[str, DeviceBuffer], data: dict[str, np.ndarray], isv: np.ndarray | None) -> None:
        with self.s.phase("transfer"):
            for n, b in bufs.items():
                if n == self.isv_name and isv is not None:
                    arena.upload(b, isv)
                elif n in data:
                    arena.upload(b, data[n])
                else:
                    arena.poison(b, 0)

    def pointers(self, st: PlanStep, bufs: dict[str, DeviceBuffer]) -> dict[str, int]:
        ptrs = {p: (bufs[b[0]].ptr + b[2] * bufs[b[0]].dtype.itemsize if b is not None else 0) for p, b in st.bindings.items()}
        for p in st.kernel.params:
            if isinstance(p, IsvParam) and self.isv_name in bufs:
                ptrs[p.name] = bufs[self.isv_name].ptr
        return ptrs

    def view_spans(self, st: PlanStep, bufs: dict[str, DeviceBuffer]) -> dict[str, list[tuple[int, int, str]]]:
        """Buffers the step writes only through views that are slices of them: buffer -> the element spans
        ``[start, stop)`` it may write, with the parameter of each (a whole-buffer write drops the buffer)."""
        spans: dict[str, list[tuple[int, int, str]]] = {}
        whole: set[str] = set()
        for pname, b in st.bindings.items():
            if b is None or not st.kernel.param(pname).writes or b[0] not in bufs:
                continue
            if b[2] == 0 and numel(b[1]) >= bufs[b[0]].count:
                whole.add(b[0])
            else:
                spans.setdefault(b[0], []).append((b[2], b[2] + numel(b[1]), pname))
        return {n: v for n, v in spans.items() if n not in whole}

    def check_views(self, be: Backend, bufs: dict[str, DeviceBuffer], st: PlanStep, spans: dict[str, list[tuple[int, int, str]]],
                    before: dict[str, np.ndarray], label: str) -> bool:  # fmt: skip
        """False (after recording a VERIFY_UNTOUCHED failure) when the launch changed its flat buffer outside
        the views it was given: a kernel writing past its slice clobbers the neighbouring weights."""
        for n, got in before.items():
            b = bufs[n]
            with self.s.phase("transfer"):
                after = be.d2h(b.ptr, b.nbytes)
            allowed = np.zeros(b.nbytes, dtype=bool)
            for lo, hi, _ in spans[n]:
                allowed[lo * b.dtype.itemsize : hi * b.dtype.itemsize] = True
            changed = np.flatnonzero((after != got) & ~allowed)
            if changed.size:
                first = int(changed[0]) // b.dtype.itemsize
                views = ", ".join(f'"{p}" [{lo}, {hi})' for lo, hi, p in spans[n])
                self.add(be.name, UNTOUCHED, "fail", label, UNTOUCHED.failure("kernel", st.kernel.name,
                    f'it wrote outside its views of buffer "{n}" ({views}): {len({int(i) // b.dtype.itemsize for i in changed})} element(s) '
                    f"changed, first at element {first}", at=f'{label} in schedule "{self.sched.name}" ({st.label})'), output=n)  # fmt: skip
                return False
        return True

    def eager(self, be: Backend, arena: Arena, bufs: dict[str, DeviceBuffer], steps: list[PlanStep], label: str, check_guards: bool) -> None:
        damaged = False
        watched = view_failed = False
        too_large: set[str] = set()
        for st in steps:
            if st.zero:
                be.memset8(bufs[st.zero].ptr, 0, bufs[st.zero].nbytes)
                continue
            ref, _ = self.s.reference(st.kernel)
            spans = self.view_spans(st, bufs) if check_guards else {}
            before = {}
            with self.s.phase("transfer"):
                for n in spans:
                    if bufs[n].count <= max(self.s.fetch_budget, self.s.reference_budget):
                        before[n] = be.d2h(bufs[n].ptr, bufs[n].nbytes)
                    elif n not in too_large:
                        too_large.add(n)
                        self.add(be.name, UNTOUCHED, "not_run", label, f'buffer "{n}" ({bufs[n].count} elements) is over the fetch budget: the writes outside its views are not compared at {label}', output=n)
            try:
                scalars = self.host_scalars(st, self.read_isv(be, bufs)) if st.host_reads else st.scalars
                self.s.launch(be, st.kernel, st.env, self.pointers(st, bufs), scalars, f"{st.label} at {label}", ref)
            except LaunchFailure as exc:
                exc.backend = be.name  # type: ignore[attr-defined]
                exc.case = label  # type: ignore[attr-defined]
                raise
            if before and not view_failed:
                watched = True
                view_failed = not self.check_views(be, bufs, st, spans, before, label)
            if check_guards and arena.guard:
                with self.s.phase("checks"):
                    damage = arena.guard_damage()
                if damage:
                    damaged = True
                    self.add(be.name, GUARDS, "fail", label, GUARDS.failure("kernel", st.kernel.name, f"it wrote outside a buffer: {damage[0].describe()}", at=f'{label} in schedule "{self.sched.name}" ({st.label})'), output=damage[0].buffer)
                    arena.restore_guards()
        if check_guards and arena.guard and not damaged:
            self.add(be.name, GUARDS, "pass", label, "guard bands intact after every launch")
        if watched and not view_failed:
            unchecked = f' (not compared: {", ".join(sorted(too_large))})' if too_large else ""
            self.add(be.name, UNTOUCHED, "pass", label, f"every launch wrote only inside the views it was given of its flat buffers{unchecked}")

    def read_isv(self, be: Backend, bufs: dict[str, DeviceBuffer]) -> np.ndarray:
        """The ISV as the host reads it now (a device-to-host copy, as a training loop's host read is)."""
        b = bufs[self.isv_name]
        with self.s.phase("transfer"):
            return be.d2h(b.ptr, b.nbytes).view(b.dtype).copy()

    def host_scalars(self, st: PlanStep, isv: np.ndarray) -> dict[str, int | float]:
        """The step's scalars with each ``isv(SLOT)`` host read taken from ``isv``."""
        out = dict(st.scalars)
        for name, index in st.host_reads.items():
            v = float(isv[index])
            out[name] = v if DTYPES[st.kernel.param(name).dtype][3] == "float" else int(v)
        return out

    def sample_rows(self, shapes: dict[str, tuple[int, ...]], label: str) -> dict[str, np.ndarray | None]:
        out: dict[str, np.ndarray | None] = {}
        rng = self.s.factory.rng(self.sched.name, "rows", label)
        for n, shp in shapes.items():
            if numel(shp) <= self.s.fetch_budget or not batch_leading(self.cs.buffer_map[n].shape, self.cs):
                out[n] = None
                continue
            B = shp[0]
            rows = {0, B - 1} | set(rng.choice(B, size=min(32, B), replace=False).tolist())
            out[n] = np.array(sorted(rows), dtype=np.int64)
        return out

    def fetch(self, arena: Arena, bufs: dict[str, DeviceBuffer], names: list[str], rows: dict[str, np.ndarray | None]) -> dict[str, np.ndarray]:
        out = {}
        with self.s.phase("transfer"):
            for n in names:
                b = bufs[n]
                r = rows.get(n)
                if r is not None:
                    out[n] = arena.download_rows(b, r)
                elif b.count <= max(self.s.fetch_budget, self.s.reference_budget):
                    out[n] = arena.download(b).copy()
        return out

    # -- the float64 reference chain ----------------------------------------------------------------
    def reference_chain(self, steps: list[PlanStep], shapes: dict[str, tuple[int, ...]], data: dict[str, np.ndarray],
                        isv: np.ndarray | None) -> tuple[dict[str, np.ndarray] | None, str]:  # fmt: skip
        store = _Store(self.cs, shapes)
        for n, a in data.items():
            store.put(n, a)
        if isv is not None:
            store[self.isv_name] = isv.astype(np.float64)
        # schedules this one runs after (the forward pass) are shared by every later schedule: reuse their
        # reference state instead of recomputing it per schedule
        cache = self.s.__dict__.setdefault("_chain_prefix_cache", {})
        names = list(dict.fromkeys(st.schedule for st in steps))
        size_key = tuple(sorted((k, v) for k, v in shapes.items()))
        start = 0
        for i in range(len(names) - 1, 0, -1):
            hit = cache.get((tuple(names[:i]), size_key))
            if hit is not None:
                store.arrays.update(hit)
                start = sum(1 for st in steps if st.schedule in names[:i])
                break
        with self.s.phase("reference"):
            for i, st in enumerate(steps):
                if i < start:
                    continue
                if i > 0 and st.schedule != steps[i - 1].schedule and len(names) > 1:
                    prefix = tuple(dict.fromkeys(x.schedule for x in steps[:i]))
                    cache[(prefix, size_key)] = dict(store.arrays)
                if st.zero:
                    store.zero(st.zero)
                    continue
                k = st.kernel
                ref, why = self.s.reference(k)
                if ref is None:
                    return None, f"{st.label}: {why}"
                kwargs: dict[str, Any] = {}
                for p in k.params:
                    if isinstance(p, TensorParam):
                        b = st.bindings.get(p.name)
                        if b is not None and (p.role != "out" or k.alias_of(p.name)):  # an aliased output is its partner's array
                            kwargs[p.name] = store.view(b)
                    elif isinstance(p, ScalarParam) and p.name in st.host_reads:
                        # the host reads the float32 slot as the chain left it before this launch
                        kwargs[p.name] = float(np.float32(store[self.isv_name][st.host_reads[p.name]]))
                    elif isinstance(p, ScalarParam):
                        kwargs[p.name] = st.scalars[p.name]
                    elif isinstance(p, IsvParam):
                        kwargs[p.name] = store[self.isv_name]
                kwargs["include_optional"] = all(st.bindings.get(p.name) is not None for p in k.tensors if p.optional)
                try:
                    res = call(ref, k.reference, **kwargs)
                except ReferenceProblem as exc:
                    return None, f"{st.label}: {exc}"
                for p in k.params:
                    if isinstance(p, TensorParam) and p.role != "in":
                        b = st.bindings.get(p.name)
                        if b is None:
                            continue
                        if p.name not in res:
                            return None, f'{st.label}: the reference returns no "{p.name}"'
                        store.put_view(b, np.asarray(res[p.name]), write_index(p, st.env, self.s.slot_index))
                    elif isinstance(p, IsvParam) and p.name in res:
                        store[self.isv_name] = np.asarray(res[p.name], dtype=np.float64).reshape(-1)
        return store.arrays, ""

    def compare_chain(self, be: Backend, label: str, got: dict[str, np.ndarray], ref: dict[str, np.ndarray] | None, why: str,
                      rows: dict[str, np.ndarray | None], steps: list[PlanStep]) -> None:  # fmt: skip
        if ref is None:
            self.add(be.name, CHAIN, "not_run", label, f"not run: {why}" if "budget" in why else f"not run: the reference chain cannot be built: {why}")
            return
        writer = {}
        for st in steps:
            if st.kernel is not None:
                for pname, b in st.bindings.items():
                    if b is not None and st.kernel.param(pname).role != "in":
                        writer[b[0]] = st
                if st.kernel.isv_writes:
                    writer[self.isv_name] = st
        order = sorted(got, key=lambda n: (_PRIORITY.get(self.cs.buffer_map[n].kind if n in self.cs.buffer_map else "", 9), n))
        worst = None
        with self.s.phase("compare"):
            for n in order:
                want = ref[n]
                r = rows.get(n)
                if r is not None:
                    want = want[r]
                cmp = compare(got[n], want, self.tol)
                if worst is None or (cmp.rel_norm or 0) > (worst[1].rel_norm or 0):
                    worst = (n, cmp)
                if not cmp.ok:
                    kind = self.cs.buffer_map[n].kind if n in self.cs.buffer_map else "ISV"
                    by = f', last written by "{writer[n].kernel.name}" at {writer[n].label.split(" (")[0]}' if n in writer else ""
                    sampled = f" (on {len(r)} sampled rows)" if r is not None else ""
                    self.add(be.name, CHAIN, "fail", label, self.fail_msg(
                        CHAIN, label, f'buffer "{n}" ({kind}{by}) has {cmp.describe()} against the float64 reference chain{sampled}'),
                        output=n, rel_norm_err=_fin(cmp.rel_norm), max_abs_err=_fin(cmp.max_abs))  # fmt: skip
                    return
        nums = {"rel_norm_err": _fin(worst[1].rel_norm), "max_abs_err": _fin(worst[1].max_abs)} if worst else {}
        self.add(be.name, CHAIN, "pass", label, f"{len(got)} written buffer(s) match the float64 reference chain", output=worst[0] if worst else None, **nums)

    # -- graph capture ------------------------------------------------------------------------------
    def capture(self, be: Backend, bufs: dict[str, DeviceBuffer], steps: list[PlanStep], label: str) -> list[Any]:
        """One CUDA graph per schedule in order; an ``isv(SLOT)`` scalar takes the slot's value as the host
        reads it just before the capture, and the graph keeps that value for every replay."""
        graphs = []
        try:
            for sched in self.order(self.sched.name):
                part = [st for st in steps if st.schedule == sched.name]
                isv_now = self.read_isv(be, bufs) if any(st.host_reads for st in part) else None
                be.begin_capture()
                try:
                    for st in part:
                        if st.zero:
                            be.memset8(bufs[st.zero].ptr, 0, bufs[st.zero].nbytes, capture=True)
                        else:
                            ref, _ = self.s.reference(st.kernel)
                            scalars = self.host_scalars(st, isv_now) if st.host_reads else st.scalars
                            self.s.enqueue(be, st.kernel, st.env, self.pointers(st, bufs), scalars, f"{st.label} at {label} (captured)", ref)
                finally:
                    graph = be.end_capture()
                graphs.append(graph)
        except BaseException:
            _close(graphs)
            raise
        return graphs

    def graph_replay(self, be: Backend, arena: Arena, bufs: dict[str, DeviceBuffer], steps: list[PlanStep], written: list[str],
                     env: dict[str, int], label: str, uses_isv: bool) -> None:  # fmt: skip
        """Capture once, then replay at REPLAY_STATES fresh states, as a training loop replays one graph
        step after step: before each replay every input buffer and ISV slot the chain reads takes new
        values (same device pointers), every other buffer is poisoned, and the replay must equal an eager
        run at that same new state. A schedule declared ``recapture = "every_step"`` is captured anew at
        each state instead (its host reads then see that state, as they do in its training loop)."""
        names = [n for n in written if n in bufs]
        if uses_isv and self.isv_name in bufs and self.isv_name not in names:
            names.append(self.isv_name)
        nondet = any(st.kernel is not None and st.kernel.nondeterministic is not None for st in steps)
        rows = self.sample_rows({n: bufs[n].shape for n in names}, label + "replay")
        recapture = self.sched.recapture == "every_step"
        graphs: list[Any] = []
        try:
            graphs = self.capture(be, bufs, steps, label)
            for k in range(REPLAY_STATES):
                # replay 0 keeps the seeds the single-replay check always used
                salt = "replay" if k == 0 else f"replay-{k}"
                data_k = self.initial_data([n for n in bufs if n in self.cs.buffer_map], env, salt)
                isv_k = isv_perturbed(self.cs, self.s.factory.rng(self.sched.name, "isv-replay", label, *((k,) if k else ()))) if uses_isv else None
                at = label if k == 0 else f"{label}, replay {k + 1} of {REPLAY_STATES}"
                if recapture:  # captured anew at each step's state, as the contract says the training loop does
                    _close(graphs)
                    graphs = []
                    self.load(arena, bufs, data_k, isv_k)
                    graphs = self.capture(be, bufs, steps, at)
                if not self.replay_state(be, arena, bufs, steps, graphs, names, rows, nondet, data_k, isv_k, label, at):
                    return
        except (DeviceError, LaunchFailure) as exc:
            sticky = getattr(exc, "sticky", False)
            self.add(be.name, GRAPH_REPLAY, "fail", label, self.fail_msg(GRAPH_REPLAY, label, f"capturing or replaying the CUDA graph failed ({exc})"))
            if sticky:
                raise LaunchFailure(f"graph replay at {label} failed ({exc})", True) from None
            return
        finally:
            _close(graphs)
        if nondet:
            self.add(be.name, GRAPH_REPLAY, "pass", label, f"graph replay equals eager within the chain tolerance at {REPLAY_STATES} fresh states (nondeterministic kernels)")
        else:
            self.add(be.name, GRAPH_REPLAY, "pass", label, f"graph replay equals eager bit for bit at {REPLAY_STATES} fresh states (inputs and ISV changed between replays)")

    def replay_state(self, be: Backend, arena: Arena, bufs: dict[str, DeviceBuffer], steps: list[PlanStep], graphs: list[Any],
                     names: list[str], rows: dict[str, np.ndarray | None], nondet: bool, data: dict[str, np.ndarray],
                     isv: np.ndarray | None, label: str, at: str) -> bool:  # fmt: skip
        """One replay at the state (``data``, ``isv``) against an eager run at it; False after a failure is recorded."""
        self.load(arena, bufs, data, isv)
        self.s.emit({"event": "launch", "subject": self.s.current, "backend": be.name, "what": f"graph replay of {self.sched.name} at {at}"})
        with self.s.phase("graph"):
            for g in graphs:
                g.replay()
            be.synchronize()
        damage = arena.guard_damage() if arena.guard else []
        if damage:
            self.add(be.name, GUARDS, "fail", label, GUARDS.failure("schedule", self.sched.name, damage[0].describe(), at=f"{at} (graph replay)"), output=damage[0].buffer)
            arena.restore_guards()
        with self.s.phase("checks"):
            h_replay = dict(zip(names, arena.hash_many([bufs[n] for n in names])))
        got_replay = self.fetch(arena, bufs, names, rows) if nondet else {}
        self.load(arena, bufs, data, isv)
        self.eager(be, arena, bufs, steps, at + " (eager, new inputs)", check_guards=False)
        with self.s.phase("checks"):
            h_eager = dict(zip(names, arena.hash_many([bufs[n] for n in names])))
        differ = [n for n in names if h_replay[n] != h_eager[n]]
        if not differ:
            return True
        if nondet:
            got_eager = self.fetch(arena, bufs, differ, rows)
            for n in differ:
                if n in got_replay and n in got_eager:
                    cmp = compare(got_replay[n], got_eager[n].astype(np.float64), self.tol)
                    if not cmp.ok:
                        self.add(be.name, GRAPH_REPLAY, "fail", label, self.fail_msg(
                            GRAPH_REPLAY, at, f'after changing inputs and ISV in place, the replayed graph gives buffer "{n}" '
                            f"with {cmp.describe()} against an eager run on the same inputs"), output=n)  # fmt: skip
                        return False
            return True
        self.add(be.name, GRAPH_REPLAY, "fail", label, self.fail_msg(
            GRAPH_REPLAY, at, f'after changing inputs and ISV in place, the replayed graph and an eager run on the same inputs '
            f'differ bitwise in buffer "{differ[0]}"' + (f" (and {len(differ) - 1} more)" if len(differ) > 1 else "")), output=differ[0])  # fmt: skip
        return False

    # -- equivalence --------------------------------------------------------------------------------
    def equivalence(self, size: int, env: dict[str, int], label: str, mine: dict[str, dict[str, np.ndarray]]) -> None:
        other = self.cs.schedule_map.get(self.sched.equivalent_to or "")
        if other is None:
            self.add(None, EQUIVALENCE, "not_run", label, f'equivalent_to names the unknown schedule "{self.sched.equivalent_to}"')
            return
        steps, why = self.plan(other.name, env)
        if why:
            self.add(None, EQUIVALENCE, "not_run", label, f'not run: schedule "{other.name}": {why}')
            return
        touched, written, uses_isv = self.buffers_of(steps)
        my_steps, _ = self.plan(self.sched.name, env)
        _, my_written, _ = self.buffers_of(my_steps)
        common = [n for n in written if n in my_written and n in self.cs.buffer_map and self.cs.buffer_map[n].kind in ("loss", "gradient")]
        if not common:
            self.add(None, EQUIVALENCE, "not_run", label, f'schedules "{self.sched.name}" and "{other.name}" write no common loss or gradient buffer')
            return
        shapes = {n: shape_of(self.cs.buffer_map[n].shape, env) for n in touched}
        data = self.initial_data(touched, env, "")
        isv0 = isv_reset(self.cs, self.s.factory.rng("chain-isv", label)) if uses_isv else None
        for be in self.s.backends.values():
            if be.name not in mine:
                continue
            arena = Arena(be, self.s.job.guard_bytes)
            try:
                bufs = self.alloc(arena, touched, shapes, uses_isv)
                self.load(arena, bufs, data, isv0)
                self.eager(be, arena, bufs, steps, f"{label} (equivalent schedule {other.name})", check_guards=True)
                theirs = self.fetch(arena, bufs, common, {})
            finally:
                arena.free_all()
            for n in common:
                if n not in mine[be.name]:
                    continue
                cmp = compare(mine[be.name][n], theirs[n].astype(np.float64), self.tol)
                if not cmp.ok:
                    self.add(be.name, EQUIVALENCE, "fail", label, self.fail_msg(
                        EQUIVALENCE, label, f'buffer "{n}" differs from schedule "{other.name}" (declared equivalent) with {cmp.describe()}'),
                        output=n, rel_norm_err=_fin(cmp.rel_norm), max_abs_err=_fin(cmp.max_abs))  # fmt: skip
                    break
            else:
                self.add(be.name, EQUIVALENCE, "pass", label, f'{len(common)} loss/gradient buffer(s) equal schedule "{other.name}" within the chain tolerance')


class _Store:
    """The reference chain's buffers (float64 / int64), created on first use: a buffer read before any
    write reads as NaN (floats) so the comparison shows it, and nothing is allocated twice."""

    def __init__(self, cs: Any, shapes: dict[str, tuple[int, ...]]):
        self.cs = cs
        self.shapes = shapes
        self.arrays: dict[str, np.ndarray] = {}

    def _int(self, n: str) -> bool:
        b = self.cs.buffer_map.get(n)
        return b is not None and np_dtype(b.dtype).kind in "iu" and b.dtype != "bf16"

    def __getitem__(self, n: str) -> np.ndarray:
        if n not in self.arrays:
            shp = self.shapes[n]
            self.arrays[n] = np.full(shp, -(2**62), np.int64) if self._int(n) else np.full(shp, np.nan)
        return self.arrays[n]

    def __setitem__(self, n: str, a: np.ndarray) -> None:
        self.arrays[n] = a

    def put(self, n: str, a: np.ndarray) -> None:
        shp = self.shapes.get(n, a.shape)
        if self._int(n):
            a = np.rint(a).astype(np.int64) if a.dtype.kind == "f" else a.astype(np.int64, copy=False)
        else:
            a = a.astype(np.float64, copy=False)
        self.arrays[n] = a.reshape(shp)

    def view(self, b: tuple[str, tuple[int, ...], int]) -> np.ndarray:
        """What a binding gives a parameter: the buffer reshaped, or a slice of it at an offset (a numpy view)."""
        flat = self[b[0]].reshape(-1)
        return flat[b[2] : b[2] + numel(b[1])].reshape(b[1])

    def put_view(self, b: tuple[str, tuple[int, ...], int], a: np.ndarray, index: tuple[slice, ...] | None = None) -> None:
        """Store a reference result through a binding: a whole buffer, a view at an offset (the rest of the
        flat buffer kept), and of a partly written parameter only its ``index`` (the rest kept)."""
        if b[2] == 0 and index is None and numel(b[1]) == numel(self.shapes.get(b[0], a.shape)):
            self.put(b[0], a)
            return
        full = self[b[0]].copy()  # a fresh array: earlier results that share the old one stay as they were
        part = full.reshape(-1)[b[2] : b[2] + numel(b[1])].reshape(b[1])
        value = written_part(part, index, a) if index is not None else a.reshape(b[1])
        if self._int(b[0]):
            value = np.rint(value).astype(np.int64) if value.dtype.kind == "f" else value.astype(np.int64, copy=False)
        if index is not None:
            part[index] = value
        else:
            part[...] = value
        self.arrays[b[0]] = full

    def zero(self, n: str) -> None:
        self.arrays[n] = np.zeros(self.shapes[n], np.int64 if self._int(n) else np.float64)


def _close(graphs: list[Any]) -> None:
    for g in graphs:
        try:
            g.close()
        except Exception:  # noqa: BLE001 - closing after a device fault may fail too; the fault is what counts
            pass


def _fin(x: float | None) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None
