"""Numeric stress cases (issue 16 item 2): the flow analysis of audit/search/values.py, the plan, the
contract's opt-out, and the stress fixture (tests/data/stress_softmax) on the emulated backend.

The fixture is a row softmax; its emulated buggy copy forgets to subtract the row max (right below
~88.7, NaN past float32 exp overflow): the normal cases pass it, a stress case fails it, the correct
kernel passes every case. The GPU version (the real CUDA kernels) is tests/gpu/test_stress_gpu.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audit.errors import ContractError
from audit.load import load_contracts
from audit.runtime import verify
from audit.runtime.report import summary_table
from audit.search.values import StressCase, apply_stress, math_uses, stress_plan

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "data" / "stress_softmax"
SOFTMAX = (FIXTURE / "kernels" / "softmax.cu").read_text()
NOMAX = (FIXTURE / "buggy" / "softmax_nomax.cu").read_text()


@pytest.fixture
def softmax(tmp_path: Path) -> Path:
    dst = tmp_path / "stress_softmax"
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def softmax_without_max(launch) -> None:
    """The fixture's bug in Python, in float32 as the GPU computes it: exp of the raw logits."""
    x = launch.tensor("logits").astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        launch.tensor("probs")[...] = e / e.sum(axis=1, keepdims=True, dtype=np.float32)


def direct(text: str, entry: str) -> list[tuple[str, str, int]]:
    return sorted((u.param, u.op, u.line) for u in math_uses(text, entry) if u.direct)


# -- the flow analysis -------------------------------------------------------------------------------------


def test_the_softmax_logits_reach_exp_directly_and_the_divisor_only_through_exp() -> None:
    uses = {(u.param, u.op, u.line): u.direct for u in math_uses(SOFTMAX, "stress_softmax")}
    assert uses[("logits", "exp", 12)] and uses[("logits", "exp", 13)]
    assert uses[("logits", "div", 13)] is False  # s = sum of expf(...): a call, so indirect
    assert direct(NOMAX, "stress_softmax") == [("logits", "exp", 10), ("logits", "exp", 11)]


@pytest.mark.parametrize(("body", "want"), [
    ("float v = x[i] * 2.0f; y[i] = expf(v);", []),  # a product: indirect
    ("float v = x[i]; float w = v - 3.0f; y[i] = expf(w);", [("x", "exp", 1)]),  # through two locals
    ("y[i] = 1.0f / __ldg(x + i);", [("x", "div", 1)]),  # a divisor through a pass-through load
    ("y[i] = x[i] / 2.0f;", []),  # the numerator is no divisor
    ("y[i] = logf(x[i]) + sqrtf(x[i]);", [("x", "log", 1), ("x", "root", 1)]),
    ("y[i] = expf(y[(int)x[i]]);", []),  # x is only an index here
    ("float s = 0.0f; for (int k = 0; k < 4; ++k) s += x[k]; y[i] = 1.0f / s;", [("x", "div", 1)]),
    ("helper(x, y);", []),  # a helper defined nowhere it can be read is not followed
])  # fmt: skip
def test_flow_rules(body: str, want: list) -> None:
    src = f'extern "C" __global__ void k(const float* x, float* y, int i) {{ {body} }}'
    # the index i flows too (pointer arithmetic is addition); the plan only stresses tensor inputs
    assert [u for u in direct(src, "k") if u[0] == "x"] == want


def test_a_helper_of_the_same_file_is_followed() -> None:
    src = ("__device__ float lse(const float* row, int K) { float s = 0.0f; for (int k = 0; k < K; ++k) s += expf(row[k]); return logf(s); }\n"
           'extern "C" __global__ void k(const float* logits, float* out, int K) { out[0] = lse(logits + 4, K); }')  # fmt: skip
    assert direct(src, "k") == [("logits", "exp", 1)]


HEADER = """#pragma once
__device__ __forceinline__ float softplus(float z) { return z > 20.0f ? z : log1pf(expf(z)); }
__device__ __forceinline__ float safe_div(float a, float b) { return a / b; }
"""


def test_a_helper_of_an_included_header_is_followed_and_named_by_its_file() -> None:
    """``softplus(x[i] + b)`` with softplus in a header: before, only the source's own functions were
    followed and x went unstressed; now the header's functions are, and the use names the header."""
    src = ('#include "act.cuh"\n'
           'extern "C" __global__ void k(const float* x, const float* d, float* y, int i) { y[i] = softplus(x[i] + 1.0f) + safe_div(1.0f, d[i]); }')  # fmt: skip
    assert direct(src, "k") == []  # no header given: nothing reaches a math function in this file
    uses = sorted((u.param, u.op, u.line, u.file) for u in math_uses(src, "k", [("kernels/act.cuh", HEADER)]) if u.direct and u.param != "i")
    assert uses == [("d", "div", 3, "kernels/act.cuh"), ("x", "exp", 2, "kernels/act.cuh")]
    # the source's own function of the same name wins over the header's
    own = src.replace('extern "C"', "__device__ float softplus(float z) { return z; }\nextern \"C\"")
    assert [u for u in math_uses(own, "k", [("kernels/act.cuh", HEADER)]) if u.direct and u.param == "x"] == []


def test_the_plan_names_the_header_of_a_use(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from audit.search.values import stress_headers

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "act.cuh").write_text(HEADER)
    (tmp_path / "kernels" / "k.cu").write_text(
        '#include "act.cuh"\nextern "C" __global__ void k(const float* x, float* y, int n) { y[0] = softplus(x[0]); }\n'
    )
    cfg = SimpleNamespace(root=tmp_path, include_dirs=[], path=lambda d: tmp_path / d)
    headers = stress_headers(cfg, tmp_path / "kernels" / "k.cu")
    assert headers == [("kernels/act.cuh", HEADER)]
    kernel = SimpleNamespace(symbol="k", tensors=[SimpleNamespace(name="x", role="in", dtype="f32"), SimpleNamespace(name="y", role="out", dtype="f32")])
    plan = stress_plan(kernel, (tmp_path / "kernels" / "k.cu").read_text(), {"x": ("scale", None, None, True)}, {}, headers)
    assert plan.lines("k") == ['stress cases of "k": input "x": exp+100, exp-100, exp±100, zeros (exp at line 2 of kernels/act.cuh)']


def test_the_shipped_kernels_that_get_stress_cases() -> None:
    """Which shipped inputs reach exp or a divisor directly (docs/verification.md lists them)."""
    loss = (REPO / "kernels" / "aux_trade_outcome_loss_reduce_kernel.cu").read_text()
    fwd = (REPO / "kernels" / "aux_head_forward_cutlass.cu").read_text()
    simt = (REPO / "benchmarks" / "kernels_baseline" / "aux_trade_outcome_forward_kernel.cu").read_text()  # shipped until 5 December 2026
    assert [u[:2] for u in direct(loss, "aux_trade_outcome_loss_reduce")] == [("logits", "exp")]
    # b2 as a divisor is the analysis being flow-insensitive: l[k] holds b2 + logit, then exp of it, and
    # prow[k] = l[k] / sum reads the later value (a near-zero b2 is an ordinary bias; the case is harmless)
    assert [u[:2] for u in direct(fwd, "aux_trade_outcome_forward_cutlass")] == [("b2", "div"), ("b2", "exp")]
    assert [u[:2] for u in direct(simt, "aux_trade_outcome_forward")] == [("b2", "div"), ("b2", "exp")]


def test_the_shipped_chain_stresses_two_inputs() -> None:
    """Every shipped kernel's plan (default domains: unbounded float inputs; the local headers' helpers
    followed too): only the trade-outcome logits (loss reduce) and the output bias b2 (forward) reach exp
    or a divisor directly."""
    from audit.config import load_config
    from audit.search.values import stress_headers

    cs = load_contracts(REPO / "contracts")
    cfg = load_config(REPO)
    stressed = {}
    for k in cs.kernels:
        domains = {p.name: ("scale", None, None, True) for p in k.tensors}
        plan = stress_plan(k, (REPO / k.source).read_text(), domains, {}, stress_headers(cfg, REPO / k.source))
        if plan.cases:
            stressed[k.name] = sorted({(c.param, c.kind) for c in plan.cases})
    assert stressed == {
        "aux_trade_outcome_forward": [("b2", "exp+100"), ("b2", "exp-100"), ("b2", "exp±100"), ("b2", "near-zero"), ("b2", "zeros")],
        "aux_trade_outcome_loss_reduce": [("logits", "exp+100"), ("logits", "exp-100"), ("logits", "exp±100"), ("logits", "zeros")],
    }


# -- the plan and the values -------------------------------------------------------------------------------


def test_the_plan_stays_inside_the_domain_and_says_what_it_left_out() -> None:
    cs = load_contracts(FIXTURE / "contracts")
    k = cs.kernel("stress_softmax")
    plan = stress_plan(k, SOFTMAX, {"logits": ("scale", None, None, True)}, {})
    assert [c.kind for c in plan.cases] == ["exp+100", "exp-100", "exp±100", "zeros"]
    assert plan.lines("stress_softmax") == ['stress cases of "stress_softmax": input "logits": exp+100, exp-100, exp±100, zeros (exp at lines 12, 13)']
    capped = stress_plan(k, SOFTMAX, {"logits": ("range", -5.0, 10.0, True)}, {})
    assert [c.kind for c in capped.cases] == ["zeros"]
    positive = stress_plan(k, SOFTMAX, {"logits": ("range", 1.0, 500.0, True)}, {})
    assert [c.kind for c in positive.cases] == ["exp+100"]
    small = stress_plan(k, SOFTMAX, {"logits": ("range", 1.0, 10.0, True)}, {})
    assert small.cases == () and small.skipped == ('input "logits" (exp at lines 12, 13): its domain [1, 10] stays inside float32 exp range; not stressed',)
    out = stress_plan(k, SOFTMAX, {"logits": ("scale", None, None, True)}, {"logits": "logits are bounded by a tanh upstream"})
    assert out.cases == () and out.skipped == ('input "logits" (exp at lines 12, 13) opts out: logits are bounded by a tanh upstream',)


def test_stress_values() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    up = apply_stress(StressCase("x", "exp+100", ""), x, rng)
    assert up.dtype == np.float32 and np.allclose(up, x + 100)
    spread = apply_stress(StressCase("x", "exp±100", ""), x, rng)
    assert (np.abs(spread) > 88.72).mean() > 0.95 and (spread > 0).any() and (spread < 0).any()
    clipped = apply_stress(StressCase("x", "exp+100", "", lo=-1.0, hi=95.0), x, rng)
    assert clipped.max() == np.float32(95.0)
    z = apply_stress(StressCase("x", "zeros", ""), x, rng)
    assert (z == 0).sum() >= 50 and np.signbit(z[z == 0]).any() and ((z != 0) & (np.abs(z) < 1e-38)).any()
    nz = apply_stress(StressCase("x", "near-zero", "", signed=False), x, rng)
    assert ((nz > 0) & (nz < 1e-29)).sum() == 128 and not ((nz < 0) & (nz > -1e-29)).any()


# -- the contract's opt-out --------------------------------------------------------------------------------


def test_opting_out_needs_a_reason(softmax: Path) -> None:
    path = softmax / "contracts" / "softmax.toml"
    text = path.read_text()
    line = '  { name = "logits", dtype = "f32", shape = ["B", "K"], role = "in" },'
    assert text.count(line) == 1
    path.write_text(text.replace(line, line[:-3] + ', values = { scale = 1.0, stress = false } },'))
    with pytest.raises(ContractError) as err:
        load_contracts(softmax / "contracts")
    assert str(err.value) == (
        'contracts/softmax.toml:30: kernel[0].params[0].values.stress: expected a "stress_reason" (a string saying why '
        'parameter "logits" is not stressed) next to stress = false, found none.')  # fmt: skip
    run = subprocess.run([sys.executable, "-m", "audit", "check", "--root", str(softmax)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr + run.stdout
    path.write_text(text.replace(line, line[:-3] + ', values = { scale = 1.0, stress_reason = "why" } },'))
    with pytest.raises(ContractError, match='values.stress_reason: expected "stress_reason" only next to stress = false, found it with stress on.'):
        load_contracts(softmax / "contracts")


# -- the fixture through verify ----------------------------------------------------------------------------


def test_the_correct_softmax_passes_every_stress_case(softmax: Path) -> None:
    out = verify(softmax, emulated={}, kernels=["stress_softmax"], sizes=(1, 37), evidence=False)
    assert out.result.exit_code == 0, [f.message for f in out.result.findings]
    [r] = out.run.results
    labels = {o.case for o in r.checks if "stress" in o.case}
    assert labels == {f"B=37 (stress logits {k})" for k in ("exp+100", "exp-100", "exp±100", "zeros")}
    assert 'stress cases of "stress_softmax": input "logits": exp+100, exp-100, exp±100, zeros (exp at lines 12, 13)' in r.notes
    # the text output of wireup verify lists it
    assert 'note: stress cases of "stress_softmax": input "logits": exp+100, exp-100, exp±100, zeros (exp at lines 12, 13)\n' in summary_table(out)


def test_the_softmax_without_max_passes_the_normal_cases_and_fails_a_stress_case(softmax: Path) -> None:
    out = verify(softmax, emulated={"stress_softmax": softmax_without_max}, kernels=["stress_softmax"], sizes=(1, 37), evidence=False)
    [r] = out.run.results
    failed = sorted({(o.check, o.case) for o in r.checks if o.verdict == "fail"})
    assert failed and all("stress logits" in case for _, case in failed), failed
    assert ("finite", "B=37 (stress logits exp+100)") in failed
    assert out.result.exit_code == 1
    msgs = [f.message for f in out.result.findings if f.rule == "VERIFY_NAN"]
    assert msgs and msgs[0].startswith('Kernel "stress_softmax" fails VERIFY_NAN at B=37 (stress logits exp+100): output "probs" has ')


def test_without_the_stress_cases_the_bug_passes(softmax: Path) -> None:
    path = softmax / "contracts" / "softmax.toml"
    line = '  { name = "logits", dtype = "f32", shape = ["B", "K"], role = "in" },'
    path.write_text(path.read_text().replace(line, line[:-3] + ', values = { scale = 1.0, stress = false, stress_reason = "the control of the test" } },'))
    out = verify(softmax, emulated={"stress_softmax": softmax_without_max}, kernels=["stress_softmax"], sizes=(1, 37), evidence=False)
    assert out.result.exit_code == 0, [f.message for f in out.result.findings]
    [r] = out.run.results
    assert not any("stress" in o.case for o in r.checks)
    assert 'stress cases of "stress_softmax": input "logits" (exp at lines 12, 13) opts out: the control of the test' in r.notes


def test_the_opt_out_survives_a_dump_and_reload(softmax: Path) -> None:
    from audit.serialize import dump_contracts

    path = softmax / "contracts" / "softmax.toml"
    line = '  { name = "logits", dtype = "f32", shape = ["B", "K"], role = "in" },'
    path.write_text(path.read_text().replace(line, line[:-3] + ', values = { scale = 1.0, stress = false, stress_reason = "bounded upstream" } },'))
    cs = load_contracts(softmax / "contracts")
    assert cs.kernel("stress_softmax").param("logits").values.stress_reason == "bounded upstream"
    texts = {f"contracts/{name}": text for name, text in dump_contracts(cs).items()}
    assert load_contracts(softmax / "contracts", cs.root, texts=texts) == cs


# -- a templated entry (cpp_name) --------------------------------------------------------------------------

_TEMPLATED = """\
namespace ns {
template <int NT>
__global__ void k(const float* __restrict__ logits, float* __restrict__ probs, int n) {
    int i = blockIdx.x * NT + threadIdx.x;
    if (i < n) probs[i] = expf(logits[i]);
}
}  // namespace ns
"""

_TEMPLATED_TOML = """\
[dims]
n = { min = 1, max = 4096 }

[[kernel]]
name = "k256"
source = "k.cu"
cpp_name = "ns::k<256>"
stage = "forward"
reference = "x:y"
dims = ["n"]
grid = ["ceil_div(n, 256)", 1, 1]
block = [256, 1, 1]
params = [
  { name = "logits", dtype = "f32", shape = ["n"], role = "in" },
  { name = "probs", dtype = "f32", shape = ["n"], role = "out" },
  { name = "n", kind = "scalar", dtype = "i32", value = "n" },
]
"""


def test_a_templated_entry_named_by_cpp_name_is_stressed(tmp_path: Path) -> None:
    """A contract naming its entry by cpp_name (``entry`` is None then) is planned from the template's
    definition: before, the plan looked up the entry None, found nothing and stressed nothing, silently."""
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text(_TEMPLATED_TOML)
    k = load_contracts(tmp_path / "contracts").kernel("k256")
    assert k.entry is None and k.cpp_name == "ns::k<256>"
    plan = stress_plan(k, _TEMPLATED, {"logits": ("scale", None, None, True)}, {})
    assert [c.kind for c in plan.cases] == ["exp+100", "exp-100", "exp±100", "zeros"]
    assert plan.lines("k256") == ['stress cases of "k256": input "logits": exp+100, exp-100, exp±100, zeros (exp at line 5)']


def test_an_entry_its_source_does_not_define_is_said_not_stressed() -> None:
    """A source without the entry's definition (a kernel defined in a header the .cu includes) is no
    kernel without math: the plan says nothing was stressed, and why."""
    k = load_contracts(FIXTURE / "contracts").kernel("stress_softmax")
    plan = stress_plan(k, "__global__ void other(float* x) { x[0] = expf(x[0]); }\n", {"logits": ("scale", None, None, True)}, {})
    assert plan.cases == ()
    assert plan.skipped == ('the source defines no function "stress_softmax" (the entry); nothing stressed',)
