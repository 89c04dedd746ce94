"""A kernel whose contract names a template instantiation (``cpp_name = "k<256>"``, as LeetCUDA's
``layer_norm_f32_kernel<256>``): its entry is the template's definition, ``template <int NT> __global__ void
k(...)``, found by the function's name without its template arguments or namespaces (``Source.entry``,
:func:`audit.cuda.scope.function_name`). Until then every such kernel failed ``wireup mutate`` with exit 2
("... defines a function "k<256>" to mutate"), in its own ``.cu`` and in a header alike, and the source rules
that read the functions an entry reaches (FIXED_DIM_TAIL) read none of it (docs/adopting.md, "An eighth
trial"). Two instantiations of one template in one file run the same lines: each is the other's sibling."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from audit.api import load_project
from audit.cli import main
from audit.cuda.headers import entry_file, reached_lines
from audit.cuda.scope import Source, function_name
from audit.errors import UsageError
from audit.mutate import plan_mutants, resolve_names, sibling_kernels

TEMPLATE = """\
namespace ns {
template <int NT>
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * NT + threadIdx.x;
  if (i < n) y[i] = x[i] * 2.0f + 1.0f;
}
}  // namespace ns
"""
OTHER = """\
__global__ void other(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] - 3.0f;
}
"""
LAUNCH = """\
void launch(const float* x, float* y, int n) {
  ns::k<256><<<(n + 255) / 256, 256>>>(x, y, n);
  ns::k<128><<<(n + 127) / 128, 128>>>(x, y, n);
  other<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""


def _kernel(name: str, cpp_name: str, source: str, nt: int = 256) -> str:
    return textwrap.dedent(f"""\
        [[kernel]]
        name = "{name}"
        cpp_name = "{cpp_name}"
        source = "{source}"
        stage = "forward"
        grid = ["ceil_div(n, {nt})", 1, 1]
        block = [{nt}, 1, 1]
        params = [
          {{ name = "x", dtype = "f32", shape = ["n"], role = "in" }},
          {{ name = "y", dtype = "f32", shape = ["n"], role = "out" }},
          {{ name = "n", kind = "scalar", dtype = "i32", value = "n" }},
        ]
        """)


def _project(root: Path, in_header: bool = False, missing: bool = False) -> Path:
    """``ns::k<256>`` and ``ns::k<128>`` (one template) and ``other`` in ``src/k.cu``; with ``in_header``
    the template lives in ``src/k.cuh``, which ``src/k.cu`` includes; with ``missing``, a contract names a
    template no file defines."""
    (root / "src").mkdir(parents=True)
    (root / "contracts" / "kernels").mkdir(parents=True)
    (root / "wireup.toml").write_text('arch = "sm_90"\n')
    if in_header:
        (root / "src" / "k.cuh").write_text("#pragma once\n" + TEMPLATE)
        (root / "src" / "k.cu").write_text('#include "k.cuh"\n' + OTHER + LAUNCH)
    else:
        (root / "src" / "k.cu").write_text(TEMPLATE + OTHER + LAUNCH)
    (root / "contracts" / "dims.toml").write_text("[dims]\nn = { min = 1, max = 4096 }\n")
    (root / "contracts" / "kernels" / "k256.toml").write_text(_kernel("k256", "ns::k<256>", "src/k.cu", 256))
    (root / "contracts" / "kernels" / "k128.toml").write_text(_kernel("k128", "ns::k<128>", "src/k.cu", 128))
    (root / "contracts" / "kernels" / "other.toml").write_text(_kernel("other", "other", "src/k.cu"))
    if missing:
        (root / "contracts" / "kernels" / "ghost.toml").write_text(_kernel("ghost", "ghost<256>", "src/k.cu"))
    return root


def test_the_function_name_of_a_cpp_name_drops_its_template_arguments_and_namespaces():
    assert function_name("layer_norm_f32_kernel<256>") == "layer_norm_f32_kernel"
    assert function_name("ns::inner::tile<Pair<int, 2>, (N > 2)>") == "tile"
    assert function_name("Outer<a::b>::k<1>") == "k"
    assert function_name(" ns :: k < 3 > ") == "k"
    assert function_name("plain_extern_c") == "plain_extern_c"
    assert function_name("operator->") == "operator->"  # no balanced argument list: unchanged
    assert function_name("operator<<int>") == "operator<"
    src = Source.parse(TEMPLATE + OTHER)
    assert src.entry("ns::k<256>") is src.entry("k<128>") is src.entry("k")
    assert src.entry("ns::k<256>").is_global and src.entry("other<1>") is src.entry("other")
    assert src.entry("k2<256>") is None


def test_a_templated_cpp_name_in_its_own_source_lists_its_template_s_mutants(tmp_path: Path, capsys):
    root = _project(tmp_path / "p")
    cfg, cs = load_project(root)
    assert entry_file(cfg, cs, "k256") == (root / "src" / "k.cu").resolve()
    generated, _ = plan_mutants(cs, cfg, ["k256", "k128"])
    lines = {m.line for m in generated["k256"]}
    assert lines == {4, 5}  # the template's body, not "other"'s (lines 9-10)
    assert [m.id for m in generated["k256"]] == [m.id for m in generated["k128"]]  # one template, one body
    assert main(["mutate", "--root", str(root), "--list", "k256"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("k256: 10 mutant(s) in src/k.cu (aor 4, ror 1, guard 1, const 4); 10 in code k128 run(s) too")
    assert out.rstrip().endswith("10 mutants.")


def test_two_instantiations_of_one_template_are_each_other_s_siblings(tmp_path: Path):
    cfg, cs = load_project(_project(tmp_path / "p"))
    _, selected = plan_mutants(cs, cfg, ["k256", "k128", "other"])
    for me, sib in (("k256", "k128"), ("k128", "k256")):
        judged = sibling_kernels(cfg, cs, selected[me])
        assert set(judged) == {m.key for m in selected[me]} and set(judged.values()) == {(sib,)}
    assert sibling_kernels(cfg, cs, selected["other"]) == {}  # the template's instantiations do not run its lines
    path = (tmp_path / "p" / "src" / "k.cu").resolve()
    assert reached_lines(cfg, cs, "k256") == {path: [(3, 6)]} == reached_lines(cfg, cs, "k128")


def test_a_templated_cpp_name_defined_in_a_header_is_mutated_as_that_header_unit(tmp_path: Path):
    root = _project(tmp_path / "p", in_header=True)
    cfg, cs = load_project(root)
    assert entry_file(cfg, cs, "k256") == (root / "src" / "k.cuh").resolve()
    names, notes = resolve_names(cfg, cs, ["k256", "k128"])
    assert names == ["k.cuh"]
    assert notes[0] == ('Kernel "k256" is defined in the included header "src/k.cuh", not in its source "src/k.cu", '
                        'so its body is mutated as the header unit "k.cuh", judged by every kernel including it.')  # fmt: skip
    generated, _ = plan_mutants(cs, cfg, ["k.cuh"])
    assert len(generated["k.cuh"]) == 10 and {m.line for m in generated["k.cuh"]} == {5, 6}


def test_a_cpp_name_whose_template_no_file_defines_is_still_a_usage_error(tmp_path: Path):
    cfg, cs = load_project(_project(tmp_path / "p", missing=True))
    with pytest.raises(UsageError) as err:
        plan_mutants(cs, cfg, ["ghost"])
    assert str(err.value) == 'Kernel "ghost": neither its source "src/k.cu" nor any local header it includes defines a function "ghost<256>" to mutate.'
