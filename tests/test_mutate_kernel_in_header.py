"""A kernel defined in an included header: its contract's ``source`` is a small ``.cu`` that only includes
the header where the ``__global__`` function lives (a layout of foreign projects: every kernel in
``src/kernels/*.cuh``). Its body is mutated where it is defined, as that header's unit; the header is named
by its file name or its path; and a name with no mutants says why (docs/mutation.md, "Kernels defined in a
header")."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from audit.api import load_project
from audit.cli import main
from audit.cuda.headers import entry_file, reached_functions
from audit.errors import UsageError
from audit.mutate import empty_reasons, mutated_headers, plan_mutants, resolve_names

HEADER = """\
#pragma once
#include "consts.cuh"
__device__ float twice(float v) { return v * kTwo; }
__global__ void scale(const float* x, float* y, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = twice(x[i]) / (float)k + 1.0f;
}
"""
SHIFT = """\
#include "kernels/consts.cuh"
__global__ void shift(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + kTwo;
}
"""


def _kernel(name: str, source: str, scalars: str = "") -> str:
    return textwrap.dedent(f"""\
        [[kernel]]
        name = "{name}"
        cpp_name = "{name}"
        source = "{source}"
        stage = "forward"
        grid = ["ceil_div(n, 256)", 1, 1]
        block = [256, 1, 1]
        params = [
          {{ name = "x", dtype = "f32", shape = ["n"], role = "in" }},
          {{ name = "y", dtype = "f32", shape = ["n"], role = "out" }},
          {{ name = "n", kind = "scalar", dtype = "i32", value = "n" }},{scalars}
        ]
        """)


def _project(root: Path, ghost: bool = False) -> Path:
    """C++ kernels (``cpp_name``, as such projects write them): ``scale`` lives in ``src/kernels/naive.cuh`` (with a device helper), which ``src/naive.cu`` includes;
    ``shift`` lives in its own ``src/shift.cu``; both include ``consts.cuh``, which holds a constant only.
    With ``ghost``, a kernel whose entry no file defines includes it too."""
    (root / "src" / "kernels").mkdir(parents=True)
    (root / "contracts" / "kernels").mkdir(parents=True)
    (root / "wireup.toml").write_text('arch = "sm_90"\n')
    (root / "src" / "kernels" / "naive.cuh").write_text(HEADER)
    (root / "src" / "kernels" / "consts.cuh").write_text("#pragma once\nconstexpr float kTwo = 2.0f;\n")
    (root / "src" / "naive.cu").write_text('#include "kernels/naive.cuh"\n')
    (root / "src" / "shift.cu").write_text(SHIFT)
    (root / "contracts" / "dims.toml").write_text("[dims]\nn = { min = 1, max = 4096 }\n")
    k = '\n  { name = "k", kind = "scalar", dtype = "i32", value = "7" },'
    (root / "contracts" / "kernels" / "scale.toml").write_text(_kernel("scale", "src/naive.cu", k))
    (root / "contracts" / "kernels" / "shift.toml").write_text(_kernel("shift", "src/shift.cu"))
    if ghost:
        (root / "src" / "ghost.cu").write_text('#include "kernels/consts.cuh"\n')
        (root / "contracts" / "kernels" / "ghost.toml").write_text(_kernel("ghost", "src/ghost.cu"))
    return root


@pytest.fixture
def project(tmp_path: Path):
    return load_project(_project(tmp_path / "p"))


def test_the_entry_of_a_kernel_written_in_a_header_is_found_there_and_reaches_from_there(project, tmp_path: Path):
    cfg, cs = project
    header = (tmp_path / "p" / "src" / "kernels" / "naive.cuh").resolve()
    assert entry_file(cfg, cs, "scale") == header
    assert entry_file(cfg, cs, "shift") == (tmp_path / "p" / "src" / "shift.cu").resolve()
    src = reached_functions(cfg, cs, "scale")[header][1]
    by_open = {f.open: f.name for f in src.functions}
    assert [by_open[a] for a, _ in reached_functions(cfg, cs, "scale")[header][0]] == ["twice", "scale"]
    assert mutated_headers(cfg, cs) == ["naive.cuh"]  # consts.cuh holds no code: left out


def test_a_kernel_defined_in_a_header_is_mutated_there_as_the_header_unit(project):
    cfg, cs = project
    names, notes = resolve_names(cfg, cs, ["scale", "naive.cuh", "src/kernels/naive.cuh", "shift"])
    assert names == ["naive.cuh", "shift"]  # one place per mutated line: no mutant is listed twice
    assert notes == ['Kernel "scale" is defined in the included header "src/kernels/naive.cuh", not in its source "src/naive.cu", '
                     'so its body is mutated as the header unit "naive.cuh", judged by every kernel including it.']  # fmt: skip
    generated, _ = plan_mutants(cs, cfg, ["scale"])
    (ms,) = generated.values()
    assert list(generated) == ["naive.cuh"] and ms
    assert all(m.kernel == "naive.cuh" and m.source == "src/kernels/naive.cuh" and m.kernels == ("scale",) for m in ms)
    changed = {(m.line, m.operator) for m in ms}
    assert (3, "aor") in changed  # the device helper: v * kTwo
    assert {(5, "aor"), (6, "ror"), (6, "guard"), (6, "norm"), (6, "const")} <= changed  # the entry's own body
    # the entry's parameters count as a kernel's own do: the divisor k may become the batch size n
    assert "if (i < n) y[i] = twice(x[i]) / (float)n + 1.0f;" in {m.mutated.splitlines()[5].strip() for m in ms}
    # the header by its file name, by its path from the root and by the kernel: the same mutants
    for name in ("naive.cuh", "src/kernels/naive.cuh"):
        assert [m.key for m in plan_mutants(cs, cfg, [name])[0]["naive.cuh"]] == [m.key for m in ms]


def test_list_names_the_header_for_the_kernel_and_by_its_path(tmp_path: Path, capsys):
    root = str(_project(tmp_path / "p"))
    assert main(["mutate", "--root", root, "scale", "--list"]) == 0
    by_kernel = capsys.readouterr()
    assert by_kernel.out.startswith("naive.cuh: ") and "in src/kernels/naive.cuh (" in by_kernel.out
    assert "each judged against 1 including kernel(s): scale" in by_kernel.out
    assert 'Kernel "scale" is defined in the included header "src/kernels/naive.cuh"' in by_kernel.err
    assert main(["mutate", "--root", root, "src/kernels/naive.cuh", "--list"]) == 0
    assert capsys.readouterr().out == by_kernel.out
    assert main(["mutate", "--root", root, "--all", "--list"]) == 0
    listed = capsys.readouterr().out
    assert [line.split(":")[0] for line in listed.splitlines() if not line.startswith(" ")][:2] == ["naive.cuh", "shift"]


def test_no_name_reports_zero_mutants_without_saying_why(tmp_path: Path, capsys):
    root = str(_project(tmp_path / "p"))
    assert main(["mutate", "--root", root, "src/kernels/consts.cuh", "--list"]) == 0
    assert capsys.readouterr().out == ("consts.cuh: 0 mutants: none of its including kernels (scale, shift) reaches a function of it "
                                       "(it holds no code they run).\n0 mutants.\n")  # fmt: skip
    cfg, cs = load_project(Path(root))
    generated, _ = plan_mutants(cs, cfg, ["shift"], ["sync"])
    assert empty_reasons(cfg, cs, generated, ["sync"]) == {"shift": 'no mutation of the operators sync applies in the functions its entry reaches in "src/shift.cu".'}


def test_a_kernel_whose_entry_no_file_defines_is_an_error_and_its_headers_say_so(tmp_path: Path, capsys):
    cfg, cs = load_project(_project(tmp_path / "p", ghost=True))
    assert entry_file(cfg, cs, "ghost") is None
    with pytest.raises(UsageError, match=r'^Kernel "ghost": neither its source "src/ghost.cu" nor any local header it includes defines a function "ghost" to mutate\.$'):
        plan_mutants(cs, cfg, ["ghost"])
    generated, _ = plan_mutants(cs, cfg, ["consts.cuh"])
    assert empty_reasons(cfg, cs, generated) == {"consts.cuh": "no file of ghost's include closure defines its entry, so what it runs was not looked at, "
                                                               "and no other including kernel reaches a function of it."}  # fmt: skip


def test_an_unknown_header_path_names_the_kernels_and_headers(project):
    cfg, cs = project
    with pytest.raises(UsageError, match=r'^"src/kernels/nope.cuh" is not a kernel of the contracts; the kernels are "scale", "shift", '
                                         r'and the included headers "consts.cuh", "naive.cuh"\.$'):  # fmt: skip
        plan_mutants(cs, cfg, ["src/kernels/nope.cuh"])


def _wrong(launch):
    out = launch.run_reference()
    launch.write_outputs({k: v * 1.5 for k, v in out.items()})


def test_a_run_of_the_kernel_records_the_header_judged_by_the_kernel(tmp_path: Path):
    """Emulated stand-ins: the run named by the kernel verifies the header's mutants with it, and its
    record is the header's (one record per mutated line, whichever name the run was given)."""
    from audit.mutate import kernel_json, run_mutation

    root = _project(tmp_path / "p")
    (root / "wireup.toml").write_text('arch = "sm_90"\nreference_paths = ["refs"]\n')
    (root / "refs").mkdir()
    (root / "refs" / "scale_refs.py").write_text("import numpy as np\n\n\ndef scale(*, x, **_):\n"
                                                 "    return {'y': 2.0 * np.asarray(x, dtype=np.float64) / 7 + 1.0}\n")  # fmt: skip
    contract = root / "contracts" / "kernels" / "scale.toml"
    contract.write_text(contract.read_text().replace('stage = "forward"\n', 'stage = "forward"\nreference = "scale_refs:scale"\n', 1))
    run = run_mutation(root, ["scale"], operators=["ror", "const"], max_mutants=2, sizes=(37,), equivalent_file=tmp_path / "none.toml",
                       stand_in=lambda m: {"scale": _wrong} if m.operator == "const" else {})  # fmt: skip
    (k,) = run.kernels
    assert (k.kernel, k.source, k.judged_by, k.baseline) == ("naive.cuh", "src/kernels/naive.cuh", ["scale"], "pass")
    assert [(o.mutant.operator, o.status) for o in k.outcomes] == [("ror", "survived"), ("const", "caught")]
    data = kernel_json(k, run)
    assert data["header"] is True and data["kernel"] == "naive.cuh" and data["judged_by"] == ["scale"]


@pytest.mark.nvcc
def test_build_only_compiles_the_header_mutants_of_a_kernel_defined_in_it(tmp_path: Path):
    from audit.mutate import build_only

    root = _project(tmp_path / "p")
    counts = build_only(root, ["scale"], ["ror", "guard"], jobs=2)
    assert sum(counts.values()) == 2 and counts.get("stillborn", 0) == 0
    cfg, _ = load_project(root)
    copies = cfg.path(cfg.cache) / "mutate" / "naive.cuh"
    assert (copies / "original" / "naive.cu").read_text() == '#include "kernels/naive.cuh"\n'


@pytest.mark.nvcc
def test_mutants_of_a_source_outside_the_include_folders_find_the_headers_next_to_it(tmp_path: Path):
    """``src/shift.cu`` includes ``"kernels/consts.cuh"`` relative to its own folder, which no include
    folder names (llm.c dev/cuda's ``#include "common.h"``): its mutants, compiled from the cache, still
    find it (the replaced source's folder is searched after the include folders)."""
    from audit.mutate import build_only

    root = _project(tmp_path / "p")
    assert build_only(root, ["shift"], ["ror", "guard"], jobs=2) == {"compiled": 2}

