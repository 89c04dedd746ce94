"""Pointer parameters a kernel tests against NULL (audit/cuda/nulltests.py), what `wireup init` scaffolds from
them (``optional = true``) and OPTIONAL_UNDECLARED, which warns where a contract leaves such a pointer given.

Found on foreign code (llm.c `dev/cuda`, 7 December 2026): `layernorm_forward_kernel3`..`6` store `mean` and
`rstd` only `if (... && mean != nullptr)`, `matmul_forward_kernel1`/`4` add `bias` only `if (bias != NULL)`;
`init` scaffolded every one of them as always given, so verify never ran the NULL path and the block runs never
took it (the twins, docs/build.md, need `optional` to run both ways)."""

from __future__ import annotations

import pytest

from audit.cuda.nulltests import null_tests, signature_names
from audit.cuda.scope import Source
from audit.scaffold import mark_null_tests, parse_kernels, scaffold_contract


def _tests(code: str, kernel: str = "k") -> list[tuple[str, int, str]]:
    src = Source.parse(code)
    return [(t.param, t.line, t.text) for t in null_tests({None: src}, None, src.entry(kernel))]


@pytest.mark.parametrize(
    "body, found",
    [
        ("if (m != nullptr) m[0] = 1.f;", [("m", 2, "m != nullptr")]),
        ("if (NULL == m) return;", [("m", 2, "NULL == m")]),
        ("if (m == 0) return;", [("m", 2, "m == 0")]),
        ("if (!m) return;", [("m", 2, "!m")]),
        ("if (m) m[0] = 1.f;", [("m", 2, "if (m)")]),
        ("float v = b ? b[0] : 0.f; m[0] = v;", [("b", 2, "b ? ... : ...")]),
        ("if (n > 0 && b) m[0] = b[0];", [("b", 2, "... && b")]),
        ("if (b && n > 0) m[0] = b[0];", [("b", 2, "b && ...")]),
        ("while (b) { m[0] = b[0]; break; }", [("b", 2, "while (b)")]),
    ],
)
def test_each_form_of_a_null_test_is_read(body: str, found: list) -> None:
    assert _tests("__global__ void k(float* m, const float* b, int n) {\n  " + body + " }") == found


@pytest.mark.parametrize(
    "body",
    [
        "m[0] = b[0];",  # used, never tested
        "if (!b[0]) m[0] = 1.f;",  # the value, not the pointer
        "if (n) m[0] = b[0];",  # a scalar
        "assert(b != nullptr); m[0] = b[0];",  # NULL traps: not a path the kernel takes
        "f(m, b); m[0] = 1.f;",  # passed on to a function this file does not define
        "struct S { const float* b; } s{b}; if (s.b) m[0] = 1.f;",  # a member of the same name
        "const float* q = b + n; if (q) m[0] = 1.f;",  # another pointer
        "float* m = nullptr; if (m) m[0] = 1.f;",  # a local that shadows the parameter
        "m[0] = (float)(b == b);",  # compared with itself, not NULL
    ],
)
def test_what_is_not_a_null_test_of_a_parameter(body: str) -> None:
    assert _tests("__global__ void k(float* m, const float* b, int n) {\n  " + body + " }") == []


def test_a_pointer_passed_on_to_a_device_function_is_followed_there() -> None:
    """The shipped next-bar backward's form: a thin ``__global__`` forwarding every parameter to a template."""
    code = (
        "template <bool kStore> __device__ void body(float* out, const float* x, float* opt_out, int n) {\n"
        "  out[0] = x[0];\n"
        "  if (opt_out != nullptr) opt_out[0] = x[0];\n"
        "}\n"
        "__device__ void other(float* a, float* opt) { if (opt) a[0] = 0.f; }\n"
        'extern "C" __global__ void k(float* y, const float* x, float* dy_opt, int n) {\n'
        "  body<true>(y, x, dy_opt, n);\n"
        "}\n"
    )
    src = Source.parse(code)
    got = null_tests({None: src}, None, src.entry("k"))
    assert [(t.param, t.index, t.line, t.text, t.function, t.local) for t in got] == [("dy_opt", 2, 3, "opt_out != nullptr", "body", "opt_out")]
    assert null_tests({None: src}, None, src.entry("k"), depth=0) == []


def test_signature_names() -> None:
    src = Source.parse("__global__ void k(const float* __restrict__ a, float b[4], int, int n = 3) { }")
    assert signature_names(src, src.entry("k")) == ["a", "b", None, "n"]


def test_the_shipped_kernels_null_tests_are_all_declared_optional(repo) -> None:
    """The chain's three backward kernels test their partial and gradient outputs (one through a device
    template); each of those parameters is optional in its contract, so OPTIONAL_UNDECLARED is quiet."""
    from audit.api import check
    from audit.config import load_config
    from audit.cuda.headers import entry_null_tests
    from audit.load import load_contracts

    cfg = load_config(repo)
    cs = load_contracts(cfg.contracts_dir, cfg.root)
    tested = {(k.name, t.param) for k in cs.kernels for t in entry_null_tests(cfg, cs, k.name)}
    assert {("aux_next_bar_backward", "dW1_partial"), ("aux_next_bar_backward", "dh_s2_aux_out"), ("aux_trunk_backward", "dW_partial"),
            ("aux_trade_outcome_backward", "dW2_partial")} <= tested  # fmt: skip
    for name, param in tested:
        assert next(p for p in cs.kernel(name).params if p.name == param).optional, (name, param)
    assert check(repo, select=["OPTIONAL_UNDECLARED"]).findings == []


LLMC_LIKE = """\
__global__ void layernorm_forward(float* __restrict__ out, float* __restrict__ mean, const float* __restrict__ inp,
                                  const float* __restrict__ bias, int N, int C) {
    int idx = blockIdx.x;
    if (idx >= N) return;
    if (threadIdx.x == 0 && mean != nullptr) mean[idx] = inp[idx * C];
    for (int c = threadIdx.x; c < C; c += blockDim.x) out[idx * C + c] = inp[idx * C + c] + (bias != NULL ? bias[c] : 0.f);
}
"""


def test_init_scaffolds_a_null_tested_pointer_optional_and_says_why() -> None:
    ks = parse_kernels(LLMC_LIKE)
    mark_null_tests(ks, LLMC_LIKE)
    text = scaffold_contract(ks[0], "ln.cu")
    lines = {line.split('"')[1]: line for line in text.splitlines() if line.startswith("  { name = ")}
    assert 'role = "out", optional = true },  # TODO: out, inout or accumulate?; the kernel tests "mean != nullptr" at line 5' in lines["mean"]
    assert 'role = "in", optional = true },  # the kernel tests "NULL != bias"' not in lines["bias"]
    assert 'role = "in", optional = true },  # the kernel tests "bias != NULL" at line 6: the host may pass NULL' in lines["bias"]
    assert "optional" not in lines["out"] and "optional" not in lines["inp"]


def test_init_writes_optional_for_the_tested_pointers(tmp_path, capsys) -> None:
    from audit.cli import main

    (tmp_path / "wireup.toml").write_text("")
    (tmp_path / "ln.cu").write_text(LLMC_LIKE)
    assert main(["init", "--root", str(tmp_path), str(tmp_path / "ln.cu")]) == 0
    out = capsys.readouterr().out
    assert out.count("optional = true") == 2
