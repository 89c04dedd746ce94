"""The kernel build (audit.compile), the build rules and ``wireup build``.

Parser and ABI tests run everywhere on checked-in snippets (tests/data/build/{ptx,ptxas,diagnostics});
tests marked ``nvcc`` compile the fixture project (tests/data/build/project, one small kernel per rule)
and a copy of the shipped kernels, each into a temporary cache, once per module.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from audit.api import check, load_project
from audit.compile import BuildResult, EntryInfo, PtxParam, build_kernels
from audit.compile import _compile as compile_mod
from audit.compile.abi import compare_params, source_param_names
from audit.compile._parse import normalize_ptx_files, parse_diagnostics, parse_ptx_entries, parse_ptxas_resources
from audit.compile._toolchain import NVCC_MISSING, parse_nvcc_version, ptxas_options
from audit.compile._types import match_cpp_name
from audit.cli import main
from audit.errors import EnvironmentProblem
from audit.load import load_contracts
from audit.rules.build import registers_per_block

DATA = Path(__file__).parent / "data" / "build"
REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------------------
# parsers (no nvcc)


def test_ptx_entries_give_ordered_params_with_sizes_and_classes():
    entries = parse_ptx_entries((DATA / "ptx" / "entries.ptx").read_text())
    assert sorted(entries) == ["_ZN2ns2tkILi4EEEvPi", "fixed_block", "mix", "none"]
    mix = entries["mix"]
    assert [(p.index, p.ptx_type, p.size, p.align) for p in mix.params] == [
        (0, "u64", 8, None),
        (1, "b8", 16, 8),  # a by-value struct
        (2, "b8", 2, 2),  # a __half
        (3, "u64", 8, None),
        (4, "f64", 8, None),
        (5, "u8", 1, None),
        (6, "u16", 2, None),
    ]
    assert mix.params[1].is_array and not mix.params[0].is_array
    assert mix.max_threads == 256 and mix.required_threads is None
    assert entries["none"].params == [] and entries["none"].max_threads is None
    assert entries["_ZN2ns2tkILi4EEEvPi"].max_threads == 64
    fixed = entries["fixed_block"]
    assert fixed.params[0] == PtxParam(0, "u64", 8, 4, True)
    assert fixed.params[1].ptx_type == "s32"
    assert fixed.required_threads == (128, 2, 1)


def test_ptxas_resources_cuda13_with_spills():
    r = parse_ptxas_resources((DATA / "ptxas" / "cuda13_sm90.log").read_text())
    assert r["heavy"]["registers"] == 134 and r["heavy"]["spill_stores"] == 0
    assert r["heavy_capped"] == {
        "registers": 32, "spill_stores": 900, "spill_loads": 1052, "stack_frame": 824,
        "shared_static_bytes": 0, "const_bytes": None,
    }  # fmt: skip
    assert r["small_block"]["registers"] == 8


def test_ptxas_resources_cuda13_shared_memory():
    r = parse_ptxas_resources((DATA / "ptxas" / "cuda13_smem.log").read_text())
    assert (r["aux_trunk_forward"]["registers"], r["aux_trunk_forward"]["shared_static_bytes"]) == (79, 25600)
    assert r["aux_trunk_backward"]["shared_static_bytes"] == 1024


def test_ptxas_resources_cuda12_constant_banks_and_device_functions():
    r = parse_ptxas_resources((DATA / "ptxas" / "cuda12_cmem.log").read_text())
    k = r["_Z6kernelPfi"]
    # the callee's frame (16 bytes, spills) is listed inside the entry but is not the entry's own
    assert (k["stack_frame"], k["spill_stores"], k["registers"]) == (8, 0, 10)
    assert (k["shared_static_bytes"], k["const_bytes"]) == (1024, 368)
    assert r["plain"]["const_bytes"] == 352 and r["plain"]["shared_static_bytes"] == 0
    assert "_Z6helperPf" not in r


def test_diagnostics_front_end_error_and_warning():
    d = parse_diagnostics((DATA / "diagnostics" / "front_end.log").read_text())
    assert [(x.file, x.line, x.severity) for x in d] == [("kernels/broken.cu", 4, "error"), ("kernels/broken.cu", 5, "warning")]
    assert d[0].render() == 'kernels/broken.cu:4: error: identifier "undefined_name" is undefined'


def test_diagnostics_missing_header_ptxas_and_nvcc_fatal(tmp_path):
    d = parse_diagnostics((DATA / "diagnostics" / "missing_header.log").read_text())
    assert d[0].render() == "kernels/noinc.cu:1: error: nothere.cuh: No such file or directory"
    d = parse_diagnostics((DATA / "diagnostics" / "ptxas.log").read_text(), ptx_source="kernels/bad.cu")
    assert len(d) == 2  # "Ptx assembly aborted" is noise
    assert d[0].render() == "kernels/bad.cu: error: ptxas: Unknown modifier '.instr' (line 6 of the generated PTX)"
    d = parse_diagnostics((DATA / "diagnostics" / "nvcc_fatal.log").read_text(), ptx_source="kernels/x.cu")
    assert d[0].render() == "kernels/x.cu: error: nvcc: Unsupported gpu architecture 'sm_99'"
    # absolute paths inside the root come back relative
    log = f"{tmp_path}/kernels/x.cu(3): error: expected a \";\""
    assert parse_diagnostics(log, tmp_path)[0].file == "kernels/x.cu"


def test_ptx_file_directives_lose_the_checkout_location():
    ptx = '\t.file\t1 "/w/repo/kernels/x.cu"\n\t.file\t2 "/usr/local/cuda/include/y.h", 1700000000, 1234\n'
    # an explicit timestamp (ptxas reads 0 or none as "look the file up") keeps file times out of the cubin
    assert normalize_ptx_files(ptx, ["/w/repo"]) == '\t.file\t1 "kernels/x.cu", 1, 0\n\t.file\t2 "/usr/local/cuda/include/y.h", 1, 0\n'


def test_nvcc_flags_that_belong_to_ptxas_are_forwarded():
    assert ptxas_options(["-O3", "-lineinfo", "-std=c++17"]) == ["--generate-line-info"]
    assert ptxas_options(["-G", "-Xptxas", "-dlcm=cg,-v", "-maxrregcount=64"]) == ["--device-debug", "-dlcm=cg", "-v", "--maxrregcount", "64"]
    assert parse_nvcc_version("Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n") == (
        "13.0.88 (cuda_13.0.r13.0/compiler.36424714_0)"
    )


def test_cpp_name_matches_the_demangled_signature_not_the_parameter_list():
    e1 = EntryInfo("_ZN2ns5scaleIfEEvPT_S1_i", "void ns::scale<float>(float*, float, int)", [])
    e2 = EntryInfo("_ZN2ns4plusEPf", "ns::plus(float*)", [])
    e3 = EntryInfo("_Z4callPFvN2ns5scaleEE", "call(void (*)(ns::scale))", [])
    entries = {e.symbol: e for e in (e1, e2, e3)}
    assert match_cpp_name(entries, "ns::scale<float>") is e1
    assert match_cpp_name(entries, "ns::scale< float >") is e1
    assert match_cpp_name(entries, "ns::scale<float>(float*, float, int)") is e1
    assert match_cpp_name(entries, "ns::scale<double>") is None
    assert match_cpp_name(entries, "ns::plus") is e2
    assert match_cpp_name(entries, "ns::scale") is None  # appears only inside call()'s parameters


def test_cpp_name_matches_a_kernel_of_an_unnamed_namespace():
    # apex's megatron softmax kernels are templates inside `namespace { }`: their entries demangle with
    # "(anonymous namespace)::", which the name the source uses (and the launch) does not carry
    e1 = EntryInfo("_ZN12_GLOBAL__N_14softIfLi11EEEvPT_i", "void (anonymous namespace)::soft<float, 11>(float*, int)", [])
    e2 = EntryInfo("_ZN12_GLOBAL__N_14softIfLi3EEEvPT_i", "void (anonymous namespace)::soft<float, 3>(float*, int)", [])
    entries = {e.symbol: e for e in (e1, e2)}
    assert match_cpp_name(entries, "soft<float, 11>") is e1
    assert match_cpp_name(entries, "soft<float, 3>") is e2
    assert match_cpp_name(entries, "(anonymous namespace)::soft<float, 3>") is e2
    assert match_cpp_name(entries, "soft<float, 3>(float*, int)") is e2
    assert match_cpp_name(entries, "soft<float, 4>") is None


def test_registers_are_allocated_per_warp_in_units_of_256():
    assert registers_per_block(64, 1024) == 65536
    assert registers_per_block(65, 1024) == 73728  # 65 rounds up to 72 per thread
    assert registers_per_block(134, 1024) == 139264
    assert registers_per_block(255, 33) == 2 * 8192


# ---------------------------------------------------------------------------------------------------------
# the ABI comparison (no nvcc): pinned messages

_ABI_CONTRACT = """
[dims]
B = { min = 1, max = 64 }

[[kernel]]
name = "k"
source = "kernels/k.cu"
stage = "forward"
grid = [1, 1, 1]
block = [256, 1, 1]
params = [
  { name = "x", dtype = "f32", shape = ["B"], role = "in" },
  { name = "W", dtype = "f32", shape = ["B"], role = "in" },
  { name = "y", dtype = "f32", shape = ["B"], role = "out" },
  { name = "B", kind = "scalar", dtype = "i32", value = "B" },
  { name = "stride", kind = "scalar", dtype = "i32", value = 4 },
  { name = "alpha", kind = "scalar", dtype = "f32", value = 0.5 },
  { name = "seed", kind = "scalar", dtype = "u64", value = 7 },
]
"""


def _abi_kernel():
    cs = load_contracts(Path("contracts"), Path("/nonexistent"), texts={"contracts/k.toml": _ABI_CONTRACT})
    return cs.kernel("k")


def _ptx(*types: str) -> list[PtxParam]:
    return [PtxParam(i, t, int(re.sub(r"\D", "", t)) // 8) for i, t in enumerate(types)]


FULL = ("u64", "u64", "u64", "u32", "u32", "f32", "u64")


def test_abi_matching_lists_have_no_problem_and_u64_scalar_is_compatible_with_pointers():
    k = _abi_kernel()
    assert compare_params(k, _ptx(*FULL)) == []
    assert compare_params(k, _ptx("b64", "u64", "s64", "s32", "b32", "b32", "s64")) == []


def test_abi_dropped_last_parameter():
    k = _abi_kernel()
    (p,) = compare_params(k, _ptx(*FULL[:6]))
    assert p.message == (
        'Kernel "k" parameter 7 "seed" is a scalar u64 (8 bytes) in the contract but the compiled entry '
        "takes 6 parameters and has none at position 7."
    )
    assert p.loc.key_text == "kernel[0].params[6]" and p.loc.line == 18


def test_abi_dropped_middle_parameter_named_by_the_source():
    k = _abi_kernel()
    compiled = _ptx("u64", "u64", "u64", "u32", "f32", "u64")
    # B and stride are both i32: without names either may be the missing one
    (p,) = compare_params(k, compiled)
    assert p.message == (
        'Kernel "k" declares 7 parameters but the compiled entry takes 6: one of parameters 4 "B", 5 "stride" is not in it.'
    )
    (p,) = compare_params(k, compiled, ["x", "W", "y", "B", "alpha", "seed"])
    assert p.message == (
        'Kernel "k" parameter 5 "stride" is a scalar i32 (4 bytes) in the contract but is not in the compiled entry, '
        "which takes 6 parameters where the contract declares 7."
    )


def test_abi_extra_parameter():
    k = _abi_kernel()
    (p,) = compare_params(k, _ptx("u64", "u64", "u64", "u32", "u32", "f32", "f64", "u64"))
    assert p.message == (
        'Kernel "k" declares 7 parameters but the compiled entry takes 8: its parameter 7, a .f64 (8 bytes), is not in the contract.'
    )
    (p,) = compare_params(k, _ptx("u64", "u64", "u64", "u32", "u32", "f32", "f32", "u64"))
    assert p.message == (
        'Kernel "k" declares 7 parameters but the compiled entry takes 8: one of its parameters 6, 7 is not in the contract.'
    )
    names = ["x", "W", "y", "B", "n_rows", "stride", "alpha", "seed"]
    (p,) = compare_params(k, _ptx("u64", "u64", "u64", "u32", "u32", "u32", "f32", "u64"), names)
    assert p.message == (
        'Kernel "k" declares 7 parameters but the compiled entry takes 8: its parameter 5 "n_rows", a .u32 (4 bytes), is not in the contract.'
    )


def test_abi_size_and_class_mismatch():
    k = _abi_kernel()
    problems = compare_params(k, _ptx("u64", "u64", "u32", "u32", "u32", "u32", "u64"))
    assert [p.message for p in problems] == [
        'Kernel "k" parameter 3 "y" is a pointer (8 bytes) in the contract but the compiled entry takes a .u32 (4 bytes) at position 3.',
        'Kernel "k" parameter 6 "alpha" is a scalar f32 (4 bytes) in the contract but the compiled entry takes a .u32 (4 bytes) at position 6.',
    ]


def test_abi_two_missing_parameters_report_the_first_difference():
    k = _abi_kernel()
    (p,) = compare_params(k, _ptx("u64", "u32", "u32", "f32", "u64"))
    assert p.message == (
        'Kernel "k" declares 7 parameters but the compiled entry takes 5; the first difference is parameter 2 "W": '
        "a pointer (8 bytes) in the contract, a .u32 (4 bytes) in the compiled entry."
    )


def test_source_param_names_reads_the_definition():
    src = (DATA / "project" / "kernels" / "scale_template.cu").read_text()
    assert source_param_names(src, "scale") == ["x", "a", "n"]
    src = (DATA / "abi" / "strided_gather_dropped.cu").read_text()
    assert source_param_names(src, "strided_gather") == ["src", "dst", "B", "col"]
    assert source_param_names("void f(int);", "f") is None
    assert source_param_names('extern "C" __global__ void k(float*, int n) {}', "k") == [None, "n"]


# ---------------------------------------------------------------------------------------------------------
# without nvcc


def _no_nvcc(monkeypatch):
    monkeypatch.setattr(compile_mod, "find_nvcc", lambda: None)


def test_missing_nvcc_is_an_environment_problem(monkeypatch, tmp_path, capsys):
    project = _copy_project(DATA / "project", tmp_path / "p", tmp_path / "cache")
    _no_nvcc(monkeypatch)
    cfg, cs = load_project(project)
    with pytest.raises(EnvironmentProblem, match=re.escape("`pip install nvidia-cuda-nvcc-cu12` and put its bin folder on PATH.")):
        build_kernels(cfg, cs)
    assert main(["build", "--root", str(project)]) == 2
    assert capsys.readouterr().err == f"error: {NVCC_MISSING}\n"
    result = check(project, select=["build"])
    # LOCAL_ARRAY_BOUNDS, SHARED_ARRAY_BOUNDS, LOCAL_UNINIT_READ, FIXED_DIM_TAIL, FIXED_DIM_ONE_CHUNK,
    # FIXED_DIM_BOUNDARY and OPTIONAL_UNDECLARED read the sources and need no compiler; the others are not
    # run, never passed
    assert result.ran == ["LOCAL_ARRAY_BOUNDS", "SHARED_ARRAY_BOUNDS", "LOCAL_UNINIT_READ", "FIXED_DIM_TAIL", "FIXED_DIM_ONE_CHUNK", "FIXED_DIM_BOUNDARY",
                          "OPTIONAL_UNDECLARED"] and {n.rule for n in result.not_run} == {
        "COMPILE_ERROR", "ENTRY_MISSING", "ABI_MISMATCH", "LAUNCH_RESOURCES", "REGISTER_SPILLS", "STORE_RACE", "SHARED_RMW_RACE", "SHARED_BYTES_MISSING",
        "CP_ASYNC_WAIT", "INDEX_OVERFLOW", "SHARED_BARRIER_MISSING", "SHARED_UNINIT_READ", "OUT_OF_BOUNDS_ACCESS", "GLOBAL_RMW_RACE",
        "BLOCK_WRITE_OVERLAP", "OUTPUT_NEVER_WRITTEN", "PARAM_UNREAD",
    }  # fmt: skip
    assert [f.rule for f in result.findings] == ["LOCAL_ARRAY_BOUNDS", "LOCAL_UNINIT_READ"]
    assert {n.reason for n in result.not_run} == {NVCC_MISSING}


# ---------------------------------------------------------------------------------------------------------
# with nvcc: the fixture project


def _copy_project(src: Path, dst: Path, cache: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".wireup-cache", "__pycache__"))
    # the configuration may only name a cache inside the root (one elsewhere is the user's: WIREUP_CACHE)
    with (dst / "wireup.toml").open("a") as fh:
        fh.write(f'cache = "{cache.relative_to(dst).as_posix()}"\n' if cache.is_relative_to(dst) else 'cache = "build-cache"\n')
    return dst


@pytest.fixture(scope="module")
def fixture_build(tmp_path_factory) -> tuple[Path, BuildResult]:
    base = tmp_path_factory.mktemp("fixture")
    project = _copy_project(DATA / "project", base / "project", base / "cache")
    cfg, cs = load_project(project)
    return project, build_kernels(cfg, cs, jobs=2)


def _findings(project: Path, rule: str):
    result = check(project, select=["build"])
    assert not result.not_run
    return [f for f in result.findings if f.rule == rule]


@pytest.mark.nvcc
def test_cpp_name_resolves_to_the_mangled_symbol(fixture_build):
    project, result = fixture_build
    cfg, cs = load_project(project)
    sb, entry = result.kernel(cs.kernel("scale_f32"))
    assert sb.ok and sb.source == "kernels/scale_template.cu"
    assert entry is not None and entry.symbol.startswith("_ZN7fixture5scaleIfEE")
    assert entry.demangled == "void fixture::scale<float>(float*, float, int)"
    assert [p.ptx_type for p in entry.params] == ["u64", "f32", "u32"]
    assert not [f for f in _findings(project, "ABI_MISMATCH") if f.subject == "scale_f32"]


@pytest.mark.nvcc
def test_entry_missing_for_an_uninstantiated_template(fixture_build):
    project, _ = fixture_build
    (f,) = _findings(project, "ENTRY_MISSING")
    assert (f.file, f.line, f.subject) == ("contracts/fixture.toml", 43, "scale_f64")
    assert f.message == (
        'Kernel "scale_f64" cpp_name "fixture::scale<double>" matches no entry of the compiled module of '
        '"kernels/scale_template.cu", whose entries are "void fixture::scale<float>(float*, float, int)"; '
        "a template kernel is compiled only for its explicit instantiations (template __global__ void f<T>(...);)."
    )


@pytest.mark.nvcc
def test_compile_error_quotes_the_first_error_at_its_line(fixture_build):
    project, result = fixture_build
    assert result.sources["kernels/broken.cu"].ok is False
    (f,) = _findings(project, "COMPILE_ERROR")
    assert (f.file, f.line, f.subject) == ("kernels/broken.cu", 7, "broken")
    assert f.message == 'Kernel "broken" does not compile: kernels/broken.cu:7: error: identifier "scale_factor" is undefined.'


@pytest.mark.nvcc
def test_launch_resources_registers_times_threads_and_launch_bounds(fixture_build):
    project, result = fixture_build
    found = {f.subject: f for f in _findings(project, "LAUNCH_RESOURCES")}
    assert sorted(found) == ["heavy", "small_block"]  # heavy_capped fits: 32 registers x 1024 threads
    heavy = found["heavy"]
    regs = result.sources["kernels/register_heavy.cu"].entries["heavy"].registers
    assert regs > 64
    assert heavy.message == (
        f'Kernel "heavy" uses {regs} registers per thread, so a block of 1024 threads in step 1 of schedule "fixture" '
        f"needs {registers_per_block(regs, 1024)} registers, more than the 65536 available to one block on sm_90; "
        'the launch would fail with "too many resources requested for launch".'
    )
    assert (heavy.file, heavy.key) == ("contracts/fixture.toml", "kernel[2].block")
    assert found["small_block"].message == (
        'Kernel "small_block" is launched with 256 threads per block in step 2 of schedule "fixture" but was compiled '
        "for at most 128 (__launch_bounds__); the launch would fail."
    )


@pytest.mark.nvcc
def test_register_spills_is_a_warning(fixture_build):
    project, result = fixture_build
    (f,) = _findings(project, "REGISTER_SPILLS")
    e = result.sources["kernels/register_heavy.cu"].entries["heavy_capped"]
    assert f.subject == "heavy_capped" and f.severity.value == "warning"
    assert e.spill_stores > 0 and e.registers <= 32
    assert f.message.startswith('Kernel "heavy_capped" spills registers to local memory: ')


@pytest.mark.nvcc
def test_store_race_finds_the_slot_every_lane_blends_and_not_the_one_thread_0_does(fixture_build):
    project, _ = fixture_build
    (f,) = _findings(project, "STORE_RACE")
    assert (f.file, f.line, f.subject) == ("kernels/ema_slots.cu", 12, "ema_every_lane")
    assert re.fullmatch(
        re.escape('Kernel "ema_every_lane" stores to global memory at an address that is the same for every thread of a block '
                  "(kernels/ema_slots.cu:12, st.global.f32 [") + r"%rd\d+\], %f\d+" + re.escape(") from more than one thread: a write "
                  "race; guard it so one thread stores (if (threadIdx.x == 0)), or use an atomic."),
        f.message,
    ), f.message  # fmt: skip


def test_local_array_bounds_finds_the_loop_one_quad_too_far_without_a_compiler(tmp_path, monkeypatch):
    project = _copy_project(DATA / "project", tmp_path / "p", tmp_path / "cache")
    _no_nvcc(monkeypatch)
    (f,) = [f for f in check(project, select=["LOCAL_ARRAY_BOUNDS"]).findings]
    assert (f.file, f.line, f.subject) == ("kernels/quads_overrun.cu", 11, "quads_overrun")
    assert f.message == (
        '"v[u]" indexes the local array "v" of 4 elements (declared at line 7) with u = 0 .. 4 (the loop at line 9): '
        "index 4 is out of bounds, undefined behaviour the compiler may hide."
    )
    # quads_ok.cu is the same kernel with the bound in place
    ok, bad = ((DATA / "project" / "kernels" / n).read_text().splitlines() for n in ("quads_ok.cu", "quads_overrun.cu"))
    assert [(a, b) for a, b in zip(ok, bad) if a != b][-1] == ("    for (int u = 0; u < kQuads; ++u) {", "    for (int u = 0; u <= kQuads; ++u) {")


def test_local_uninit_read_finds_the_logit_past_the_written_ones_without_a_compiler(tmp_path, monkeypatch):
    project = _copy_project(DATA / "project", tmp_path / "p", tmp_path / "cache")
    _no_nvcc(monkeypatch)
    (f,) = [f for f in check(project, select=["LOCAL_UNINIT_READ"]).findings]
    assert (f.file, f.line, f.subject) == ("kernels/uninit_read.cu", 19, "uninit_read")
    assert f.message == (
        '"l[k]" reads the local array "l" (8 elements, declared at line 8) where k = 0 .. 7 (the loop at line 18) '
        "under k <= K, but its elements are written only where k < K (line 16): the elements past that bound are "
        "uninitialised registers (undefined behaviour)."
    )
    # uninit_ok.cu is the same kernel with the read's guard matching the writes'
    ok, bad = ((DATA / "project" / "kernels" / n).read_text().splitlines() for n in ("uninit_ok.cu", "uninit_read.cu"))
    assert [(a, b) for a, b in zip(ok, bad) if a != b][-1] == ("        if (k < K) p[r * K + k] = l[k] / s;", "        if (k <= K) p[r * K + k] = l[k] / s;")


@pytest.mark.nvcc
def test_source_override_compiles_the_replacement(fixture_build):
    project, _ = fixture_build
    cfg, cs = load_project(project)
    override = DATA / "overrides" / "scale_broken.cu"
    result = build_kernels(cfg, cs, sources=["scale_f32"], source_overrides={"scale_f32": override})
    assert list(result.sources) == [str(override)]
    sb, entry = result.kernel(cs.kernel("scale_f32"))
    assert sb.source == str(override) and not sb.ok and entry is None
    err = sb.first_error
    assert (Path(err.file).name, err.line) == ("scale_broken.cu", 6) and 'identifier "missing_offset" is undefined' in err.message
    found = check(project, select=["COMPILE_ERROR"], options={"source_overrides": {"scale_f32": override}}).findings
    assert [(f.subject, Path(f.file).name, f.line) for f in found] == [("scale_f32", "scale_broken.cu", 6), ("broken", "broken.cu", 7)]


@pytest.mark.nvcc
def test_cli_build_prints_sources_table_and_summary(fixture_build, capsys):
    project, _ = fixture_build
    assert main(["build", "--root", str(project), "--kernel", "scale_f32,heavy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cached    kernels/scale_template.cu  ") and out[1].startswith("cached    kernels/register_heavy.cu  ")
    assert re.match(r"^kernel +entry +cubin B +regs +smem B +stack B +spill st/ld B$", out[3])
    assert re.match(r"^heavy +heavy +\d+ +\d+ +0 +0 +0/0$", out[5])
    assert re.match(r"^0 compiled, 2 cached in \d+\.\d\d s$", out[-1])
    assert main(["build", "--root", str(project), "--kernel", "broken"]) == 1
    cap = capsys.readouterr()
    assert 'error: kernels/broken.cu:7: error: identifier "scale_factor" is undefined' in cap.err
    assert "1 source does not compile: kernels/broken.cu" in cap.out


@pytest.mark.nvcc
def test_damaged_cache_entry_is_rebuilt_and_an_interrupted_build_leaves_nothing(fixture_build, tmp_path, monkeypatch):
    project, result = fixture_build
    cfg, cs = load_project(project)
    cache = tmp_path / "cache"
    shutil.copytree(cfg.path(cfg.cache), cache)
    from audit.config import with_overrides

    cfg = with_overrides(cfg, cache=str(cache))
    sb = result.sources["kernels/scale_template.cu"]
    (cache / "build" / "sm_90" / sb.key / sb.cubin.name).unlink()
    again = build_kernels(cfg, cs, sources=["scale_f32"])
    assert (again.compiled, again.sources["kernels/scale_template.cu"].cubin_sha256) == (1, sb.cubin_sha256)

    # interrupt the ptxas step of a build into an empty cache: no entry and no temporary folder remain
    calls = []
    real_run = compile_mod._run

    def interrupted(cmd, cwd):
        calls.append(Path(cmd[0]).name)
        if Path(cmd[0]).name == "ptxas":
            raise KeyboardInterrupt
        return real_run(cmd, cwd)

    monkeypatch.setattr(compile_mod, "_run", interrupted)
    fresh = with_overrides(cfg, cache=str(tmp_path / "fresh"))
    with pytest.raises(KeyboardInterrupt):
        build_kernels(fresh, cs, sources=["small_block"], jobs=1)
    assert calls == ["nvcc", "ptxas"]
    assert [p.name for p in (tmp_path / "fresh" / "build" / "sm_90").iterdir()] == []


# ---------------------------------------------------------------------------------------------------------
# with nvcc: the shipped kernels


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> tuple[Path, Path, BuildResult, float]:
    """A copy of the repository's contracts and kernels, built once into a module-wide cache (with the header
    packages of the repository's configuration: the CUTLASS kernels include the nvidia-cutlass wheel's)."""
    from audit.config import load_config

    base = tmp_path_factory.mktemp("shipped")
    project = base / "project"
    project.mkdir()
    shutil.copytree(REPO / "contracts", project / "contracts")
    shutil.copytree(REPO / "kernels", project / "kernels")
    cache = project / "build-cache"
    packages = ", ".join(f'"{d}" = "{f}"' for d, f in load_config(REPO).include_packages)
    (project / "wireup.toml").write_text(f"include_packages = {{ {packages} }}\n" 'cache = "build-cache"\n')
    cfg, cs = load_project(project)
    t0 = time.perf_counter()
    result = build_kernels(cfg, cs, jobs=2)
    return project, cache, result, time.perf_counter() - t0


@pytest.mark.nvcc
def test_shipped_kernels_compile_and_a_second_build_starts_no_process(shipped, monkeypatch):
    project, _, first, _ = shipped
    cfg, cs = load_project(project)
    sources = {k.source for k in cs.kernels}
    assert set(first.sources) == sources
    assert [s for s, sb in first.sources.items() if not sb.ok] == []
    assert first.compiled == len(sources) and first.cached == 0
    for k in cs.kernels:
        assert first.kernel(k)[1] is not None, k.name

    def no_process(*args, **kwargs):
        raise AssertionError(f"a cached build started a process: {args[:1]}")

    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    t0 = time.perf_counter()
    second = build_kernels(cfg, cs)
    elapsed = time.perf_counter() - t0
    assert (second.compiled, second.cached) == (0, len(sources))
    assert second.cubin_hashes == first.cubin_hashes
    assert elapsed < 1.0, f"a fully cached build took {elapsed:.3f} s"


@pytest.mark.nvcc
def test_cubin_hash_does_not_depend_on_the_checkout_location(shipped, tmp_path):
    project, _, first, _ = shipped
    elsewhere = tmp_path / "another" / "checkout"
    shutil.copytree(project, elsewhere, ignore=shutil.ignore_patterns("build-cache"))  # the same configuration, a cache of its own
    cfg, cs = load_project(elsewhere)
    again = build_kernels(cfg, cs, sources=["strided_gather"])
    src = cs.kernel("strided_gather").source
    assert again.compiled == 1
    assert again.sources[src].key == first.sources[src].key
    assert again.sources[src].cubin_sha256 == first.sources[src].cubin_sha256


@pytest.mark.nvcc
def test_dropping_a_parameter_from_a_kernel_is_an_abi_mismatch(shipped, tmp_path, capsys):
    project, _, _, _ = shipped
    copy = tmp_path / "project"
    shutil.copytree(project, copy)
    assert main(["check", "--root", str(copy), "--select", "ABI_MISMATCH,COMPILE_ERROR,ENTRY_MISSING"]) == 0
    capsys.readouterr()
    shutil.copy(DATA / "abi" / "strided_gather_dropped.cu", copy / "kernels" / "strided_gather_kernel.cu")
    assert main(["check", "--root", str(copy)]) == 1
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if " ABI_MISMATCH " in ln]
    assert len(lines) == 1
    assert re.match(r"^contracts/kernels/label_producers\.toml:\d+: ABI_MISMATCH ", lines[0])
    assert lines[0].endswith(
        'Kernel "strided_gather" parameter 4 "row_stride" is a scalar i32 (4 bytes) in the contract but is not in '
        "the compiled entry, which takes 4 parameters where the contract declares 5."
    )


@pytest.mark.nvcc
def test_a_header_named_as_a_kernel_source_is_compiled_as_cuda(tmp_path):
    # nvcc picks the language by suffix and refuses a .cuh ("Don't know what to do with"); the build says
    # -x cu, and the host compiler's "#pragma once in main file" (our doing, not the header's) is not reported
    (tmp_path / "wireup.toml").write_text('cache = "build-cache"\n')
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale.cuh").write_text(
        "#pragma once\n"
        'extern "C" __global__ void scale(const float* x, float* y, int n) {\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) y[i] = 2.0f * x[i];\n"
        "}\n"
    )
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "scale.toml").write_text(
        '[dims]\nn = { min = 1, max = 4096 }\n\n[[kernel]]\nname = "scale"\nsource = "kernels/scale.cuh"\nentry = "scale"\n'
        'stage = "forward"\nphase = ""\ngrid = ["ceil_div(n, 256)"]\nblock = [256]\ndoc = ""\nparams = [\n'
        '  { name = "x", dtype = "f32", shape = ["n"], role = "in" },\n'
        '  { name = "y", dtype = "f32", shape = ["n"], role = "out" },\n'
        '  { name = "n", kind = "scalar", dtype = "i32", value = "n" },\n]\n'
    )
    cfg, cs = load_project(tmp_path)
    result = build_kernels(cfg, cs, jobs=1)
    sb = result.sources["kernels/scale.cuh"]
    assert sb.ok, sb.log
    assert sb.diagnostics == []
    assert "scale" in sb.entries
    assert check(tmp_path, select=["build"]).findings == []


@pytest.mark.nvcc
def test_an_extern_array_named_shared_is_not_found_in_every_shared_memory_instruction(tmp_path: Path) -> None:
    """SHARED_BYTES_MISSING reads which entries use an ``extern __shared__`` array by its name in the PTX;
    llm.c names one ``shared``, which also stands in every ``ld.shared``/``st.shared`` of the other kernels
    (three false findings there)."""
    from audit.cuda.static import dynamic_shared_arrays

    src = tmp_path / "k.cu"
    src.write_text(
        'extern "C" __global__ void a(float* x) {\n    extern __shared__ float shared[];\n'
        "    shared[threadIdx.x] = x[threadIdx.x];\n    __syncthreads();\n"
        "    x[threadIdx.x] = shared[(threadIdx.x + 1) % blockDim.x];\n}\n"
        'extern "C" __global__ void b(float* x) {\n    __shared__ float tile[128];\n'
        "    tile[threadIdx.x] = x[threadIdx.x];\n    __syncthreads();\n    x[threadIdx.x] = tile[127 - threadIdx.x];\n}\n"
    )
    ptx = tmp_path / "k.ptx"
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-O3", str(src), "-o", str(ptx)], check=True, capture_output=True)
    text = ptx.read_text()
    assert "st.shared" in text.split(".entry b")[1]
    assert (dynamic_shared_arrays(text, "a"), dynamic_shared_arrays(text, "b")) == (["shared"], [])


def test_an_angle_include_found_in_an_include_folder_is_in_the_closure(tmp_path: Path) -> None:
    """``#include <cublas_v2.h>`` that nvcc finds in the project's include folder (a stand-in the project
    ships): part of the source's closure, so of its build key; ``<x.h>`` is not looked up next to the
    including file (nvcc does not), and a toolkit header is not found at all."""
    from audit.hashing import include_closure

    (tmp_path / "stub").mkdir()
    (tmp_path / "stub" / "cublas_v2.h").write_text("#pragma once\n")
    (tmp_path / "near.h").write_text("#pragma once\n")
    (tmp_path / "k.cu").write_text("#include <cublas_v2.h>\n#include <near.h>\n#include <cuda_fp16.h>\n")
    names = [p.relative_to(tmp_path).as_posix() for p in include_closure(tmp_path / "k.cu", [tmp_path / "stub"])]
    assert names == ["k.cu", "stub/cublas_v2.h"]


@pytest.mark.nvcc
def test_editing_an_angle_included_project_header_rebuilds_the_kernel(tmp_path: Path) -> None:
    """llm.c's common.h includes <cublas_v2.h>; a project that ships a stand-in for it in an include folder
    and fixes it must not get the cached COMPILE_ERROR of the old stand-in back."""
    (tmp_path / "wireup.toml").write_text('cache = "build-cache"\ninclude = ["stub"]\n')
    (tmp_path / "stub").mkdir()
    header = tmp_path / "stub" / "vendor_math.h"
    header.write_text("#pragma once\nthis is not C++;\n")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale.cu").write_text(
        "#include <vendor_math.h>\n"
        'extern "C" __global__ void scale(const float* x, float* y, int n) {\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) y[i] = 2.0f * x[i];\n"
        "}\n"
    )
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "scale.toml").write_text(
        '[dims]\nn = { min = 1, max = 4096 }\n\n[[kernel]]\nname = "scale"\nsource = "kernels/scale.cu"\nentry = "scale"\n'
        'stage = "forward"\nphase = ""\ngrid = ["ceil_div(n, 256)"]\nblock = [256]\ndoc = ""\nparams = [\n'
        '  { name = "x", dtype = "f32", shape = ["n"], role = "in" },\n'
        '  { name = "y", dtype = "f32", shape = ["n"], role = "out" },\n'
        '  { name = "n", kind = "scalar", dtype = "i32", value = "n" },\n]\n'
    )
    cfg, cs = load_project(tmp_path)
    assert not build_kernels(cfg, cs, jobs=1).sources["kernels/scale.cu"].ok
    header.write_text("#pragma once\ninline int vendor_version() { return 1; }\n")
    cfg, cs = load_project(tmp_path)
    sb = build_kernels(cfg, cs, jobs=1).sources["kernels/scale.cu"]
    assert sb.ok, sb.log


def test_cpp_name_matches_an_unsigned_template_argument_written_without_its_suffix():
    # cuda-samples' reduction: `template <class T, unsigned int blockSize, bool nIsPow2> __global__ void
    # reduce6(...)`, launched as reduce6<T, 256, false>; the entry demangles as reduce6<float, 256u, false>
    # (an unsigned long parameter as 128ul), and the name as the source writes it matched none
    e1 = EntryInfo("_Z7reduce6IfLj256ELb0EEvPT_S1_j", "void reduce6<float, 256u, false>(float*, float*, unsigned int)", [])
    e2 = EntryInfo("_Z7reduce6IfLj25ELb0EEvPT_S1_j", "void reduce6<float, 25u, false>(float*, float*, unsigned int)", [])
    e3 = EntryInfo("_Z4multIfLm256ELm128EEvPT_S1_j", "void mult<float, 256ul, 128ul>(float*, float*, unsigned int)", [])
    e4 = EntryInfo("_Z1gILi8EEvPf", "void g<8>(float*)", [])
    e5 = EntryInfo("_Z1gILj8EEvPf", "void g<8u>(float*)", [])
    entries = {e.symbol: e for e in (e1, e2, e3, e4, e5)}
    assert match_cpp_name(entries, "reduce6<float, 256, false>") is e1
    assert match_cpp_name(entries, "reduce6<float, 256u, false>") is e1
    assert match_cpp_name(entries, "reduce6<float, 25, false>") is e2
    assert match_cpp_name(entries, "reduce6<float, 256, true>") is None
    assert match_cpp_name(entries, "mult<float, 256, 128>") is e3
    assert match_cpp_name(entries, "mult<float, 256UL, 128>") is e3
    # where both an int and an unsigned instantiation exist, the name as written wins
    assert match_cpp_name(entries, "g<8>") is e4
    assert match_cpp_name(entries, "g<8u>") is e5


def test_entry_missing_names_the_instantiation_with_the_defaults_written_out():
    """``cpp_name = "tile<128>"`` of ``template <int T, int OFFSET = 0>``: the module has ``tile<128, 0>``
    (a compiled instantiation spells its defaults), which ENTRY_MISSING's hint names; ``tile<12>`` is no
    prefix of it, and a cpp_name without template arguments gets no such hint."""
    from types import SimpleNamespace

    from audit.compile import EntryInfo
    from audit.rules.build import _with_more_arguments

    entries = {
        "_Z4tileILi128ELi0EEvPfi": EntryInfo("_Z4tileILi128ELi0EEvPfi", "void tile<128, 0>(float*, int)", []),
        "_Z4tileILi64ELi4EEvPfi": EntryInfo("_Z4tileILi64ELi4EEvPfi", "void ns::tile<64, 4>(float*, int)", []),
    }
    sb = SimpleNamespace(entries=entries)
    assert _with_more_arguments(sb, "tile<128>") == "tile<128, 0>"
    assert _with_more_arguments(sb, "ns::tile< 64 >") == "ns::tile<64, 4>"
    assert _with_more_arguments(sb, "tile<12>") is None
    assert _with_more_arguments(sb, "tile") is None


def test_an_overloaded_cpp_name_takes_the_overload_whose_types_agree_with_the_contract():
    """DeepSpeed's kernels come in float and __half overloads of one name; the first by symbol (the __half
    one: "P6__half" sorts before "Pf") was taken silently, so a contract of the float kernel was checked
    against the half code and a seeded bug in the float one went unseen. Now the contract's dtypes pick the
    overload; where they pick none or several, no entry is taken (ENTRY_MISSING says which)."""
    from types import SimpleNamespace

    from audit.compile import overloads_of

    ef = EntryInfo("_Z5scalePfi", "scale(float*, int)", [])
    eh = EntryInfo("_Z5scaleP6__halfi", "scale(__half*, int)", [])
    ec = EntryInfo("_Z5scalePKfS0_i", "scale(float const*, float const*, int)", [])
    entries = {e.symbol: e for e in (ef, eh)}

    def params(*dtypes):  # the last is the scalar n, the others tensors
        return [SimpleNamespace(kind="tensor", dtype=d, shape=("N",)) for d in dtypes[:-1]] + [SimpleNamespace(kind="scalar", dtype=dtypes[-1])]

    assert match_cpp_name(entries, "scale", params("f32", "i32")) is ef
    assert match_cpp_name(entries, "scale", params("f16", "i32")) is eh
    assert match_cpp_name(entries, "scale", params("f64", "i32")) is None  # no overload takes double*
    assert match_cpp_name(entries, "scale") is None  # several, and nothing to choose by
    assert match_cpp_name(entries, "scale(float*, int)") is ef  # the parameter list chooses as before
    assert overloads_of(entries, "scale", params("f64", "i32")) == ([eh, ef], [])
    # a different parameter count decides too; a type that is no plain C type (T, float4) agrees with any
    both = {e.symbol: e for e in (ef, ec)}
    assert match_cpp_name(both, "scale", params("f32", "f32", "i32")) is ec
    et = EntryInfo("_Z5scaleP6float4i", "scale(float4*, int)", [])
    assert overloads_of({ef.symbol: ef, et.symbol: et}, "scale", params("f32", "i32"))[1] == [et, ef]  # by symbol


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the overloads needs nvcc on PATH")
def test_entry_missing_names_the_overloads_a_cpp_name_leaves_open(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "contracts").mkdir()
    (tmp_path / "k.cu").write_text(
        "#include <cuda_fp16.h>\n"
        "__global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }\n"
        "__global__ void scale(__half* x, int n) { int i = threadIdx.x; if (i < n) x[i] = __float2half(2.0f); }\n"
    )
    contract = ('[dims]\nN = { min = 1, max = 128 }\n[[kernel]]\nname = "scale_any"\nsource = "k.cu"\ncpp_name = "scale"\nstage = "other"\n'
                'grid = [1, 1, 1]\nblock = [128, 1, 1]\nparams = [\n  { name = "x", dtype = "DT", shape = ["N"], role = "inout" },\n'
                '  { name = "n", kind = "scalar", dtype = "i32", value = "N" },\n]\n')  # fmt: skip
    (tmp_path / "contracts" / "k.toml").write_text(contract.replace("DT", "f64"))
    assert main(["check", "--root", str(tmp_path), "--select", "ENTRY_MISSING"]) == 1
    (line,) = capsys.readouterr().out.splitlines()[:-1]
    assert line == (
        'contracts/k.toml:6: ENTRY_MISSING Kernel "scale_any" cpp_name "scale" names 2 overloads in the compiled module of "k.cu" '
        '("scale(__half*, int)", "scale(float*, int)") and the contract\'s parameter types agree with none of them: give the one '
        'meant with its parameter list, cpp_name = "scale(__half*, int)", or correct the parameters\' dtypes.'
    )
    (tmp_path / "contracts" / "k.toml").write_text(contract.replace("DT", "f32"))
    assert main(["check", "--root", str(tmp_path), "--select", "ENTRY_MISSING"]) == 0


_ASSUMING = """[dims]
e = { min = 1, max = 4096 }
[[kernel]]
name = "cnt"
stage = "other"
source = "k.cu"
cpp_name = "cnt"
grid = [1, 1, 1]
block = [32, 1, 1]
shared_bytes = "32 * e * 4"
requires = ["e <= LIMIT"]
params = [
  { name = "out", dtype = "i32", shape = [1], role = "out" },
  { name = "e", kind = "scalar", dtype = "i32", value = "e" },
]
"""


@pytest.mark.nvcc
def test_launch_resources_judges_the_sizes_a_kernel_assumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vllm's small-batch MoE kernel assumes at most 64 experts (``requires``; its host checks it): its
    dynamic shared memory (32 x e ints) was judged at e = 4096 and found past the block's limit."""
    from audit.cli import main

    (tmp_path / "wireup.toml").write_text("")
    (tmp_path / "k.cu").write_text('__global__ void cnt(int* out, int e) {\n  extern __shared__ int s[];\n'
                                   "  for (int i = 0; i < e; ++i) s[threadIdx.x * e + i] = 0;\n  __syncthreads();\n"
                                   "  if (threadIdx.x == 0) out[0] = s[0];\n}\n")
    (tmp_path / "contracts").mkdir()
    for limit, rc in (("64", 0), ("4096", 1)):
        (tmp_path / "contracts" / "k.toml").write_text(_ASSUMING.replace("LIMIT", limit))
        assert main(["check", "--root", str(tmp_path), "--select", "LAUNCH_RESOURCES"]) == rc
        out = capsys.readouterr().out
        assert ("LAUNCH_RESOURCES" in out) == (rc == 1) and ("at e = 4096" in out) == (rc == 1)


def test_a_cpp_name_with_a_standard_typedef_names_the_entry_and_the_launch() -> None:
    """vllm writes ``moe_align_block_size_kernel<int32_t>`` at its launches; the entry demangles as
    ``<int>``. Either spelling in the contract names the entry and matches the launch (before, ``<int32_t>``
    was ENTRY_MISSING and ``<int>`` matched no launch: no contract passed both)."""
    from audit.compile._types import match_cpp_name
    from audit.launchers import instantiation

    e = EntryInfo("_Z4fillIiEvPT_i", "void fill<int>(int*, int)", [])
    f = EntryInfo("_Z4fillImEvPT_i", "void fill<unsigned long>(unsigned long*, int)", [])
    entries = {e.symbol: e, f.symbol: f}
    assert match_cpp_name(entries, "fill<int32_t>") is e and match_cpp_name(entries, "fill<std::int32_t>") is e
    assert match_cpp_name(entries, "fill<size_t>") is f and match_cpp_name(entries, "fill<uint64_t>") is f
    assert match_cpp_name(entries, "fill<int16_t>") is None
    assert instantiation(("int32_t", "256")) == instantiation(("int", "(128 * 2)")) == ("int", "256")
    assert instantiation(("my_int32_t",)) == ("my_int32_t",)  # a name that only contains one is not it


_FNPTR_SRC = """template <typename T> __device__ __forceinline__ T twice(const T& x) { return x + x; }
template <typename T, T (*FN)(const T&)> __global__ void act(T* out, const T* in, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[blockIdx.x * n + i] = FN(in[blockIdx.x * n + i]);
}
void launch(float* o, const float* i, int n, int rows) { act<float, twice<float>><<<rows, 256>>>(o, i, n); }
"""


def test_a_function_template_argument_names_the_entry_by_the_function() -> None:
    """c++filt shows vllm's ``act_and_mul_kernel<float, silu_kernel<float>, true>`` as ``act_and_mul_kernel<float,
    &(float silu_kernel<float>(float const&)), true>``: the launch's spelling (with or without ``&``) names it."""
    from audit.compile._types import match_cpp_name
    from audit.launchers import _known_argument

    e = EntryInfo("_Z3actIfL_Z5twiceIfET_RKS0_EEvPS0_PS1_i", "void act<float, &(float twice<float>(float const&))>(float*, float const*, int)", [])
    g = EntryInfo("_Z3actIfL_Z4halfIfET_RKS0_EEvPS0_PS1_i", "void act<float, &(float half<float>(float const&))>(float*, float const*, int)", [])
    entries = {e.symbol: e, g.symbol: g}
    assert match_cpp_name(entries, "act<float, twice<float>>") is e and match_cpp_name(entries, "act<float, &twice<float>>") is e
    assert match_cpp_name(entries, "act<float, half<float>>") is g and match_cpp_name(entries, "act<float, thrice<float>>") is None
    assert _known_argument("twice<float>") and not _known_argument("twice<T>")


@pytest.mark.nvcc
def test_init_and_check_read_a_kernel_with_a_function_template_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vllm trial's ``act_and_mul_kernel``: ``wireup init`` wrote ``cpp_name = "act<TODO>"``, the launch's
    spelling was ENTRY_MISSING, so the kernel was analysed only by its mangled ``entry`` (and then matched no
    launch). Now init names the instantiation, the contract passes, and a seeded ``<=`` bound is found."""
    from audit.cli import main

    (tmp_path / "wireup.toml").write_text("")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cu").write_text(_FNPTR_SRC)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "src/k.cu", "-o", "contracts/k.toml"]) == 0
    text = (tmp_path / "contracts" / "k.toml").read_text()
    assert 'cpp_name = "act<float, twice<float>>"' in text
    filled = text.replace('["TODO"]', '["rows", "n"]').replace('grid = ["TODO", 1, 1]', 'grid = ["rows", 1, 1]')
    filled = filled.replace('stage = "other"  # TODO', 'stage = "other"  #').replace("[dims]\n", '[dims]\nrows = { min = 1, max = 64 }\n')
    filled = "\n".join(line.split("# TODO")[0] for line in filled.splitlines())
    (tmp_path / "contracts" / "k.toml").write_text(filled)
    capsys.readouterr()
    args = ["check", "--root", str(tmp_path), "--ignore", "EVIDENCE_MISSING", "--ignore", "DEAD_KERNEL"]
    assert main(args) == 0, capsys.readouterr().out
    (tmp_path / "src" / "k.cu").write_text(_FNPTR_SRC.replace("i < n;", "i <= n;"))
    capsys.readouterr()
    assert main(args) == 1
    out = capsys.readouterr().out
    assert 'OUT_OF_BOUNDS_ACCESS Kernel "act" reads past the end of "in"' in out


def test_a_const_template_argument_names_the_entry_whichever_side_const_is_on() -> None:
    """tiny-cuda-nn's ``reduce_sum(gradients + offset, ...)`` deduces ``T = const float``: the contract's
    ``block_reduce<const float, float>`` was ENTRY_MISSING against the entry ``block_reduce<float const, float>``."""
    from audit.compile._types import match_cpp_name

    e = EntryInfo("_Z2sqIKfEvjPT_Pf", "void sq<float const>(unsigned int, float const*, float*)", [])
    f = EntryInfo("_Z2sqIfEvjPT_Pf", "void sq<float>(unsigned int, float*, float*)", [])
    entries = {e.symbol: e, f.symbol: f}
    assert match_cpp_name(entries, "sq<const float>") is e and match_cpp_name(entries, "sq<float const>") is e
    assert match_cpp_name(entries, "sq<float>") is f
    assert match_cpp_name(entries, "sq<const float>(unsigned int, const float*, float*)") is e
