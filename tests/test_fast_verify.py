"""The host-side fast paths of wireup verify keep every verdict and every number (issue 15).

* ``compare`` / ``compare_delta``: the chunked pass test of a large float output answers "pass" with the
  very numbers of the full rule, and hands everything else (NaN, Inf, one element off by tolerance + one
  ulp, a norm over, an all-zero output, a zero reference) to the full rule;
* the input streams: float batch tensors drawn only as far as the cases need are the first rows of the
  one draw at the largest batch, whatever order the sizes come in;
* guard bands: a changed byte is found on either side of a small buffer (one copy) and a large one;
* sampled rows: one copy per run of consecutive rows, the same bytes as one copy per row;
* end to end: the emulated verification of kernels whose outputs take the fast paths gives the same
  records (verdicts, messages, numbers) with the fast paths off, on a correct kernel and on broken ones.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from audit.runtime import _backend
from audit.runtime import _compare as C
from audit.runtime import verify
from audit.runtime._compare import DeltaTolerance, Tolerance, compare, compare_delta
from audit.runtime._emulated import EmulatedBackend
from audit.runtime._inputs import Domain, InputFactory
from audit.runtime._memory import Arena, row_runs

N = 3 * C.CHUNK + 1234  # over FAST_MIN, several chunks and a short last one


def same(a, b) -> bool:
    """Every field equal (NaN equal to NaN)."""
    return repr(dataclasses.astuple(a)) == repr(dataclasses.astuple(b))


def full_rule(out, ref, tol=Tolerance()):
    return C._compare_full(np.asarray(out), np.asarray(ref).reshape(np.shape(out)), tol, False)


def full_delta(out, before, ref, tol=DeltaTolerance(), slack=0.0):
    saved = C.FAST_MIN
    C.FAST_MIN = 1 << 62
    try:
        return compare_delta(out, before, ref, tol, slack)
    finally:
        C.FAST_MIN = saved


def test_fast_path_is_taken_and_agrees_with_the_full_rule_on_a_pass(monkeypatch):
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(N)
    out = (ref * (1 + 2e-7 * rng.standard_normal(N))).astype(np.float32)
    calls = []
    real = C._fast_pass
    monkeypatch.setattr(C, "_fast_pass", lambda *a: calls.append(1) or real(*a))
    got = compare(out, ref)
    assert calls and got.status == "pass"
    assert same(got, full_rule(out, ref))  # every field, bit for bit


@pytest.mark.parametrize("seed", range(12))
def test_fast_and_full_rule_agree_on_random_outputs_near_the_bounds(seed):
    rng = np.random.default_rng(seed)
    shape = [(N,), (N // 7, 7), (3, N // 3)][seed % 3]
    ref = rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3)
    ref.reshape(-1)[rng.choice(ref.size, 50, replace=False)] = 0.0  # exact zeros: the 1e-300 floor of max_rel
    ref.reshape(-1)[:5] = [1e-310, -1e-310, 5e-324, 1e-200, -1e-200]  # subnormal and tiny references
    noise = 10.0 ** rng.uniform(-8, -4)
    out = ref * (1 + noise * rng.standard_normal(shape))
    out = out.astype(np.float32 if seed % 2 else np.float64)
    tol = [Tolerance(), Tolerance.of(1e-4, 1e-4), Tolerance.of(3e-6, 1e-6)][seed % 3]
    assert same(compare(out, ref, tol), full_rule(out, ref, tol))


def boundary_case():
    rng = np.random.default_rng(3)
    ref = rng.standard_normal(N)
    out = ref.copy()  # float64 output: the element can sit exactly on the bound
    tol = Tolerance()
    bound = tol.atol * float(np.abs(ref).max()) + tol.rtol_elem * abs(ref[N - 7])
    return ref, out, tol, bound


def test_one_element_exactly_on_the_bound_passes_and_one_ulp_over_fails():
    ref, out, tol, bound = boundary_case()
    out[N - 7] = ref[N - 7] + bound
    # the difference as the rule computes it may round: nudge until it is on the bound exactly
    while abs(out[N - 7] - ref[N - 7]) > bound:
        out[N - 7] = np.nextafter(out[N - 7], -np.inf)
    on = compare(out, ref, tol)
    assert on.ok and same(on, full_rule(out, ref, tol))
    out[N - 7] = np.nextafter(out[N - 7], np.inf)
    while abs(out[N - 7] - ref[N - 7]) <= bound:
        out[N - 7] = np.nextafter(out[N - 7], np.inf)
    over = compare(out, ref, tol)
    assert over.status == "mismatch" and over.n_bad == 1 and over.worst == (N - 7,)
    assert same(over, full_rule(out, ref, tol))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", [0, C.CHUNK - 1, C.CHUNK, N - 1])
def test_a_nonfinite_output_in_any_chunk_is_caught(bad, where):
    ref = np.linspace(-2.0, 3.0, N)
    out = ref.astype(np.float32)
    out[where] = bad
    got = compare(out, ref)
    assert got.status == "nonfinite" and got.worst == (where,)
    assert same(got, full_rule(out, ref))


def test_a_nonfinite_reference_must_still_be_reproduced():
    ref = np.linspace(-2.0, 3.0, N)
    ref[C.CHUNK + 5] = np.nan
    out = ref.astype(np.float32)
    assert compare(out, ref).ok
    out[C.CHUNK + 5] = 1.0
    got = compare(out, ref)
    assert got.status == "mismatch" and got.worst == (C.CHUNK + 5,)


def test_a_norm_over_the_tolerance_fails_though_every_element_is_inside():
    ref = np.ones(N)
    out = (ref * (1 + 5e-5)).astype(np.float64)  # each element within 1e-4, the norm 5e-5 > 1e-5
    got = compare(out, ref)
    assert got.status == "mismatch" and got.n_bad == 0 and same(got, full_rule(out, ref))


def test_all_zero_output_and_zero_reference_keep_their_verdicts():
    ref = np.linspace(1.0, 2.0, N)
    assert compare(np.zeros(N, np.float32), ref).status == "trivial"
    assert compare(np.zeros(N, np.float32), ref, Tolerance(rtol=1.5, atol=0.4, rtol_elem=0.4)).status == "trivial"
    zero = np.zeros(N)
    zero[::3] = -0.0
    assert same(compare(np.zeros(N, np.float32), zero), full_rule(np.zeros(N, np.float32), zero))
    assert compare(np.zeros(N, np.float32), zero).ok
    for k, v in ((N - 1, 1e-3), (C.CHUNK, 2e-30), (0, np.nan)):
        out = np.zeros(N, np.float32)
        out[k] = v
        got = compare(out, zero)
        assert got.status == ("nonfinite" if v != v else "mismatch") and got.worst == (k,)
        assert same(got, full_rule(out, zero))
    out = np.zeros(N, np.float32)
    out[7] = 1e-31  # within the zero floor
    assert compare(out, zero).ok


def test_compare_is_deterministic():
    rng = np.random.default_rng(5)
    ref = rng.standard_normal(N)
    out = (ref * (1 + 1e-6 * rng.standard_normal(N))).astype(np.float32)
    assert len({compare(out, ref) for _ in range(3)}) == 1


# -- compare_delta -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_fast_and_full_delta_agree(seed):
    rng = np.random.default_rng(100 + seed)
    before = rng.standard_normal(N).astype(np.float32)
    change = 10.0 ** rng.uniform(-5, -2) * rng.standard_normal(N)
    ref = before.astype(np.float64) + change
    out = (ref + change * 10.0 ** rng.uniform(-7, -3) * rng.standard_normal(N)).astype(np.float32)
    slack = 0.0 if seed % 2 else 1e-9 * np.abs(ref)
    tol = DeltaTolerance.of(Tolerance.of(10.0 ** rng.uniform(-6, -4), None))
    fast = compare_delta(out, before, ref, tol, slack)
    assert same(fast, full_delta(out, before, ref, tol, slack))


def test_delta_one_element_off_and_nan_are_caught():
    rng = np.random.default_rng(9)
    before = rng.standard_normal(N).astype(np.float32)
    ref = before.astype(np.float64) - 1e-3 * rng.standard_normal(N)
    out = ref.astype(np.float32)
    assert compare_delta(out, before, ref).ok
    wrong = out.copy()
    wrong[C.CHUNK + 1] = before[C.CHUNK + 1]  # this element's update is missing
    got = compare_delta(wrong, before, ref)
    assert got.status == "mismatch" and got.worst == (C.CHUNK + 1,)
    assert same(got, full_delta(wrong, before, ref))
    wrong[C.CHUNK + 1] = np.nan
    assert compare_delta(wrong, before, ref).status == "nonfinite"
    # one element off by 2% of the largest change: the norm stays inside, the elementwise bound does not
    change = ref - before
    k = N - 3
    wrong = out.copy()
    wrong[k] = np.float32(ref[k] + 0.02 * float(np.abs(change).max()))
    got = compare_delta(wrong, before, ref)
    assert got.status == "mismatch" and got.n_bad == 1 and got.worst == (k,) and got.rel_norm < DeltaTolerance().rtol
    assert same(got, full_delta(wrong, before, ref))


# -- input streams -----------------------------------------------------------------------------------


DOMAINS = [Domain(scale=1.0), Domain(scale=0.0625), Domain(lo=-3.0, hi=2.0)]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("domain", DOMAINS, ids=["normal", "scaled", "uniform"])
@pytest.mark.parametrize("tail", [(), (5,), (3, 7)])
def test_streamed_rows_are_the_rows_of_one_draw_at_the_largest_batch(dtype, domain, tail):
    rows = 4103
    whole = InputFactory(11, max_rows=rows)._draw(("x", dtype, tail, domain.key(), "s"), dtype, (rows, *tail), domain)
    for order in ([1, 37, 64, 65, 300, 4096, 4103], [4103, 37, 1], [300, 4103, 65]):
        f = InputFactory(11, max_rows=rows)
        for n in order:
            got = f.tensor("x", dtype, (n, *tail), domain, batch=True, salt="s")
            assert got.dtype == whole.dtype and got.shape == (n, *tail)
            assert np.array_equal(got, whole[:n])
        assert f.generated_elements == rows * int(np.prod(tail, dtype=np.int64))  # every row drawn once


def test_a_variant_run_at_small_cases_only_draws_small():
    f = InputFactory(0, max_rows=65536)
    f.tensor("h_s2", "f32", (37, 253), Domain(scale=1.0), batch=True)
    assert f.generated_elements == 37 * 253


def test_edge_values_and_integers_are_still_drawn_at_the_largest_batch():
    f = InputFactory(0, max_rows=1000)
    small = f.tensor("r", "f32", (10,), Domain(scale=1.0, include=(0.5,)), batch=True)
    big = f.tensor("r", "f32", (1000,), Domain(scale=1.0, include=(0.5,)), batch=True)
    assert np.array_equal(small, big[:10]) and f.generated_elements == 1000


# -- guard bands and sampled rows --------------------------------------------------------------------


@pytest.mark.parametrize("nbytes", [0, 4, 4096, 16 << 10, (16 << 10) + 4, 1 << 20])
@pytest.mark.parametrize("side", ["before", "after"])
def test_guard_damage_is_found_on_each_side_of_small_and_large_buffers(nbytes, side):
    be = EmulatedBackend()
    arena = Arena(be, guard_bytes=4096)
    other = arena.alloc("other", np.float32, (3,))
    buf = arena.alloc("x", np.uint8, (nbytes,))
    assert arena.guard_damage() == []
    at = buf.ptr - 1 if side == "before" else buf.ptr + nbytes + 10
    be.h2d(at, np.array([be.d2h(at, 1)[0] ^ 0xFF], np.uint8))
    damage = arena.guard_damage()
    assert [(d.buffer, d.side, d.count) for d in damage] == [("x", side, 1)]
    assert damage[0].offset == (-1 if side == "before" else nbytes + 10)
    arena.restore_guards()
    assert arena.guard_damage() == [] and other.nbytes == 12


def test_sampled_rows_come_back_in_one_copy_per_run():
    be = EmulatedBackend()
    arena = Arena(be)
    data = np.arange(300 * 6, dtype=np.float32).reshape(300, 6)
    buf = arena.alloc("h", np.float32, (300, 6))
    arena.upload(buf, data)
    rows = np.array([0, 31, 32, 63, 64, 65, 200, 299])
    copies = []
    real = be.d2h
    be.d2h = lambda p, n: copies.append(n) or real(p, n)
    got = arena.download_rows(buf, rows)
    assert np.array_equal(got, data[rows])
    assert len(copies) == len(row_runs(rows)) == 5
    assert row_runs(np.array([5, 3, 4])) == [(0, 1), (1, 3)]  # unsorted rows still come back in their order
    assert np.array_equal(arena.download_rows(buf, np.array([5, 3, 4])), data[[5, 3, 4]])


# -- end to end --------------------------------------------------------------------------------------


def h_out_one_off(launch):
    res = launch.run_reference()
    h = res["h_out"]
    h[-1, -1] += 1e-3 * max(1.0, float(np.abs(h).max()))  # one element, the last of the last chunk
    launch.write_outputs(res)


def h_out_nan(launch):
    res = launch.run_reference()
    res["h_out"][-1, 3] = np.nan
    launch.write_outputs(res)


def dh_accum_update_dropped(launch):
    res = launch.run_reference()
    res["dh_s2_aux_accum"][-1] = launch.tensor("dh_s2_aux_accum")[-1]  # the last row's += is lost
    launch.write_outputs(res)


def records(outcome):
    out = []
    for r in sorted(outcome.run.results, key=lambda r: (r.subject, r.backend)):
        for c in r.checks:
            d = dataclasses.asdict(c) if dataclasses.is_dataclass(c) else dict(vars(c))
            out.append((r.subject, r.verdict, tuple(sorted((k, repr(v)) for k, v in d.items()))))
    return out


@pytest.mark.parametrize(
    ("kernel", "bug", "rule"),
    [
        ("aux_trunk_forward", None, None),
        ("aux_trunk_forward", h_out_one_off, "VERIFY_REFERENCE"),
        ("aux_trunk_forward", h_out_nan, "VERIFY_NAN"),
        ("aux_next_bar_backward", dh_accum_update_dropped, "VERIFY_INOUT_DELTA"),
    ],
    ids=["pass", "one_off", "nan", "delta"],
)
def test_verify_records_are_the_same_with_the_fast_paths_off(request, monkeypatch, kernel, bug, rule):
    root = request.config.rootpath
    kw = dict(kernels=[kernel], emulated={kernel: bug} if bug else {}, sizes=(300,), chain_sizes=(37,), evidence=False)
    fast = verify(root, **kw)
    monkeypatch.setattr(C, "FAST_MIN", 1 << 62)
    slow = verify(root, **kw)
    assert records(fast) == records(slow)
    found = {f.rule for f in fast.result.findings}
    if rule is None:
        assert all(r.verdict == "pass" for r in fast.run.results)
    else:
        assert rule in found


# -- hashes of several buffers in one round trip -----------------------------------------------------


class _HelperDevice(_backend.DeviceBackend, EmulatedBackend):
    """A GPU backend's helper plumbing over emulated memory: the "helper kernels" compute on the host what
    the helper cubin computes on the device, and every round trip is counted."""

    _device_errors = (ZeroDivisionError,)

    def __init__(self):
        EmulatedBackend.__init__(self)
        self._helpers = {"hash": "hash"}
        self.round_trips = 0

    def _run_helper(self, fn, args, n):
        self.round_trips += 1
        return self._host_helper(fn, args, n)

    def _run_helpers(self, jobs):
        self.round_trips += 1
        return [self._host_helper(*j) for j in jobs]

    def _host_helper(self, fn, args, n):
        assert fn == "hash" and int(args[1]) == n
        words = EmulatedBackend.d2h(self, int(args[0]), 4 * n).view(np.uint32)
        return _backend.hash_words(words, int(args[2]))


def test_hash_many_equals_each_hash_in_one_round_trip():
    dev = _HelperDevice()
    host = EmulatedBackend()  # the host fallback every hash must equal
    spans_dev, spans_host = [], []
    rng = np.random.default_rng(4)
    for nbytes, offset in ((4096, 0), (4099, 0), (7, 0), (3, 0), (0, 0), (64, 2), (1 << 16, 0)):
        data = rng.integers(0, 256, nbytes + offset + 1, dtype=np.uint8)
        for be, spans in ((dev, spans_dev), (host, spans_host)):
            p = be.alloc(data.size)
            be.h2d(p, data)
            spans.append((p + offset, nbytes))
    want = [host.hash(p, n) if n else 0 for p, n in spans_host]
    dev.round_trips = 0
    assert dev.hash_many(spans_dev) == want
    assert dev.round_trips == 1  # the aligned spans of at least a word (4096, 4099, 7, 65536) in one go
    assert [dev.hash(p, n) if n else 0 for p, n in spans_dev] == want
    dev.round_trips = 0
    assert dev.hash_many(spans_dev[:1]) == want[:1] and dev.round_trips == 1


def test_arena_hash_many_on_the_emulated_backend():
    be = EmulatedBackend()
    arena = Arena(be)
    a = arena.alloc("a", np.float32, (37, 5))
    b = arena.alloc("b", np.int32, (0,))
    arena.upload(a, np.arange(185, dtype=np.float32).reshape(37, 5))
    assert arena.hash_many([a, b]) == [arena.hash(a), 0]


def test_arena_counts_of_several_buffers_equal_each_count():
    arena = Arena(EmulatedBackend())
    f32 = arena.alloc("f32", np.float32, (37, 5))
    i16 = arena.alloc("i16", np.int16, (9,))
    empty = arena.alloc("e", np.float32, (0,))
    arena.poison(f32, 1)
    arena.poison(i16, 0)
    part = np.ones((10, 5), np.float32)
    part[2, 2] = np.nan
    be = arena.backend
    be.h2d(f32.ptr, part)  # the first 10 rows written, one NaN among them; the rest keeps the NaN poison
    bufs = [f32, i16, empty]
    assert arena.count_poison_many(bufs, 1) == [arena.count_poison(b, 1) for b in bufs] == [27 * 5, 0, 0]
    assert arena.count_poison_many(bufs, 0) == [0, 9, 0]
    assert arena.count_nonfinite_many(bufs) == [arena.count_nonfinite(b) for b in bufs] == [27 * 5 + 1, 0, 0]


def test_the_norms_do_not_use_blas():
    """A threaded BLAS ddot splits a sum by the thread count, so the comparisons' norms go through numpy's own
    loop (sqrt_sumsq): the same arrays give the same rel_norm whatever threads the process's BLAS has."""
    import ast

    from audit.runtime import _compare

    tree = ast.parse(Path(_compare.__file__).read_text())
    calls = {f"{n.func.value.id}.{n.func.attr}" for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)}  # fmt: skip
    assert not calls & {"np.dot", "np.vdot", "np.inner", "np.matmul", "np.linalg"}
    x = np.arange(1.0, 5.0)
    assert _compare.sqrt_sumsq(x) == float(np.sqrt(30.0))


def test_a_comparison_gives_the_same_numbers_whatever_blas_threads_the_process_has():
    import subprocess
    import sys

    code = ("import numpy as np; from audit.runtime._compare import compare, compare_delta\n"
            "r = np.random.default_rng(0).standard_normal(1 << 20); o = (r * (1 + 1e-7 * np.sin(r))).astype(np.float32)\n"
            "c = compare(o, r); d = compare_delta(o, np.zeros_like(r), r)\n"
            "print(repr((c.rel_norm, c.max_abs, d.rel_norm)))")  # fmt: skip
    import os

    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "OPENBLAS_NUM_THREADS": t, "OMP_NUM_THREADS": t}).stdout for t in ("1", "2")}  # fmt: skip
    assert len(outs) == 1, outs
