"""What a kernel's entry reaches (audit.cuda.scope, audit.cuda.headers): the code mutants may land in and the
source analyses read. Template libraries hand code to their templates as functors (``operator()``) named in
type aliases, so both must count, or a CUTLASS epilogue's activation is mutated nowhere."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from audit.api import load_project
from audit.cuda.headers import reached_functions
from audit.cuda.scope import Source
from audit.mutate import header_units
from audit.mutate._headers import header_mutants

FUNCTOR = """
template <typename T>
struct Elu {
    __device__ T operator()(T const& z) const { return z > T(0) ? z : T(expm1f(z)); }
};
struct Index {
    int base;
    __device__ int operator[](int i) const { return base + i; }
    __device__ bool operator==(Index const& o) const { return base == o.base; }
};
template <typename Op> struct Generic { Op op; };
"""


def _names(src: Source, entry: str) -> list[str]:
    return [f"{f.owner}::{f.name}" if f.owner else f.name for f in src.reachable_bodies(entry)]


def test_operators_are_functions_of_their_struct():
    src = Source.parse(FUNCTOR)
    assert [(f.name, f.owner) for f in src.functions] == [("operator()", "Elu"), ("operator[]", "Index"), ("operator==", "Index")]


@pytest.mark.parametrize(
    ("alias", "reached"),
    [
        ("using Op = Generic<Elu<float>>;", ["Elu::operator()"]),
        ("typedef Generic<Elu<float>> Op;", ["Elu::operator()"]),
        ("template <int N> using Op = Generic<Elu<float>>;", ["Elu::operator()"]),
        # an alias of an alias: followed to the end
        ("using Inner = Elu<float>;\nusing Op = Generic<Inner>;", ["Elu::operator()"]),
        # an alias naming nothing of this file reaches nothing
        ("using Op = Generic<float>;", []),
    ],
)
def test_a_type_alias_the_entry_names_reaches_what_it_names(alias: str, reached: list[str]):
    src = Source.parse(FUNCTOR + alias + '\nextern "C" __global__ void k(float* o) { Op g; o[0] = g.op(o[0]); }\n')
    assert _names(src, "k") == [*reached, "k"]


def test_an_alias_no_reached_code_names_reaches_nothing():
    src = Source.parse(FUNCTOR + "using Op = Generic<Elu<float>>;\n"
                       'extern "C" __global__ void k(float* o) { o[0] = 1.0f; }\n')  # fmt: skip
    assert _names(src, "k") == ["k"]


def test_an_alias_inside_a_function_and_a_struct_member_alias_are_followed():
    src = Source.parse(FUNCTOR + "struct Pair { using Vec = Generic<Index>; };\n"
                       'extern "C" __global__ void k(float* o) { using Local = Elu<float>; Local e; Pair::Vec v; o[0] = e(o[0]); }\n')  # fmt: skip
    assert _names(src, "k") == ["Elu::operator()", "Index::operator[]", "Index::operator==", "k"]


def _project(root: Path) -> Path:
    (root / "kernels").mkdir(parents=True)
    (root / "contracts" / "kernels").mkdir(parents=True)
    (root / "wireup.toml").write_text('arch = "sm_90"\n')
    (root / "kernels" / "act.cuh").write_text("#pragma once\n" + FUNCTOR)
    (root / "kernels" / "k.cu").write_text(textwrap.dedent("""\
        #include "act.cuh"
        using Epilogue = Generic<Elu<float>>;
        extern "C" __global__ void act(const float* x, float* y, int B) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            Epilogue e;
            if (i < B) y[i] = e.op(x[i]);
        }
        """))
    (root / "contracts" / "dims.toml").write_text('[dims]\nB = { min = 1, max = 4096 }\n')
    (root / "contracts" / "kernels" / "act.toml").write_text(textwrap.dedent("""\
        [[kernel]]
        name = "act"
        source = "kernels/k.cu"
        stage = "forward"
        grid = ["ceil_div(B, 256)", 1, 1]
        block = [256, 1, 1]
        params = [
          { name = "x", dtype = "f32", shape = ["B"], role = "in" },
          { name = "y", dtype = "f32", shape = ["B"], role = "out" },
          { name = "B", kind = "scalar", dtype = "i32", value = "B" },
        ]
        """))
    return root


def test_a_header_functor_named_through_a_kernel_alias_is_reached_and_mutated(tmp_path: Path):
    cfg, cs = load_project(_project(tmp_path / "p"))
    header = (tmp_path / "p" / "kernels" / "act.cuh").resolve()
    reached = reached_functions(cfg, cs, "act")
    src = reached[header][1]
    by_open = {f.open: f"{f.owner}::{f.name}" for f in src.functions}
    assert [by_open[a] for a, _ in reached[header][0]] == ["Elu::operator()"]  # not Index's operators
    unit = header_units(cfg, cs)["act.cuh"]
    muts = header_mutants(cfg, cs, unit)
    assert muts and all(m.is_header and m.kernels == ("act",) for m in muts)
    assert all(m.source == "kernels/act.cuh" for m in muts)
    assert "z >= T(0) ? z : T(expm1f(z))" in {m.mutated.splitlines()[m.line - 1].strip().split("return ")[-1].rstrip("; }") for m in muts}
