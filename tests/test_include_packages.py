"""``include_packages``: header folders of installed Python distributions (CUTLASS's), in the build.

Configuration errors and resolution run everywhere on a fake distribution written into a temporary
site folder; tests marked ``nvcc`` compile against it; tests marked ``cutlass`` compile against the real
``nvidia-cutlass`` headers and skip where that wheel is not installed (the ``dev`` and ``chain`` extras install it).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest
from shipped_notes import assert_clean_but_known_notes

from audit.api import check, load_project
from audit.cli import main
from audit.compile import CODE_HASH_VERSION, build_kernels
from audit.compile import _compile as compile_mod
from audit.compile._packages import package_includes
from audit.config import load_config
from audit.errors import EnvironmentProblem, UsageError
from audit.evidence import CodeIdentity, EvidenceRecord, _Current, _mismatch
from audit.untrusted import source_refusal

CUTLASS = importlib.util.find_spec("cutlass_library") is not None
needs_cutlass = pytest.mark.skipif(not CUTLASS, reason="the nvidia-cutlass wheel is not installed (pip install -e \".[dev]\" installs it)")

HEADER = """#pragma once
namespace fakehdr {
__device__ __forceinline__ float twice(float v) { return 2.0f * v; }
}
"""

KERNEL = """#include <fakehdr/twice.h>
extern "C" __global__ void twice_all(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = fakehdr::twice(x[i]);
}
"""

CONTRACT = """[dims]
N = { min = 1, max = 4096, doc = "elements" }

[[kernel]]
name = "twice_all"
source = "kernels/twice.cu"
stage = "other"
grid = ["ceil_div(N, 256)", 1, 1]
block = [256, 1, 1]
params = [
  { name = "x", dtype = "f32", shape = ["N"], role = "inout" },
  { name = "n", kind = "scalar", dtype = "i32", value = "N" },
]
"""


def _fake_distribution(site: Path, name: str = "fakehdr", version: str = "1.2", header: str = HEADER) -> Path:
    """A distribution as pip installs one: ``<name>-<version>.dist-info`` with METADATA and RECORD,
    and its files (a header under ``fakehdr/include``)."""
    inc = site / name / "include" / "fakehdr"
    inc.mkdir(parents=True, exist_ok=True)
    (inc / "twice.h").write_text(header)
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    digest = hashlib.sha256(header.encode()).hexdigest()
    (info / "RECORD").write_text(f"{name}/include/fakehdr/twice.h,sha256={digest},{len(header)}\n{info.name}/METADATA,,\n")
    return site


@pytest.fixture
def site(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def _project(root: Path, packages: str | None = 'include_packages = { "fakehdr" = "fakehdr/include" }\n') -> Path:
    (root / "contracts").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "contracts" / "twice.toml").write_text(CONTRACT)
    (root / "kernels" / "twice.cu").write_text(KERNEL)
    (root / "wireup.toml").write_text((packages or "") + 'cache = "build-cache"\n')
    return root


# ---------------------------------------------------------------------------------------------------------
# the configuration key


def test_include_packages_are_read_and_sorted(tmp_path: Path) -> None:
    (tmp_path / "wireup.toml").write_text('include_packages = { "zeta-hdr" = "z/include", "nvidia-cutlass" = "cutlass_library/source/include" }\n')
    cfg = load_config(tmp_path)
    assert cfg.include_packages == (("nvidia-cutlass", "cutlass_library/source/include"), ("zeta-hdr", "z/include"))


def test_no_include_packages_by_default(tmp_path: Path, repo: Path) -> None:
    (tmp_path / "wireup.toml").write_text('arch = "sm_90"\n')
    assert load_config(tmp_path).include_packages == ()
    # the repository's own chain names the CUTLASS wheel (its tensor-core kernels include its headers)
    assert load_config(repo).include_packages == (("nvidia-cutlass", "cutlass_library/source/include"),)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"cutlass"', 'wireup.toml: key "include_packages" must be a dict, found str \'cutlass\'.'),
        ('{ "nvidia cutlass" = "x" }', 'wireup.toml: key "include_packages" names "nvidia cutlass", which is not a Python distribution name (letters, digits, ".", "_" and "-").'),
        ('{ "nvidia-cutlass" = 3 }', 'wireup.toml: key "include_packages" gives "nvidia-cutlass" the value 3; expected a folder inside the installed distribution, e.g. "cutlass_library/source/include".'),
        ('{ "nvidia-cutlass" = "/usr/include" }', 'wireup.toml: key "include_packages" gives "nvidia-cutlass" the folder "/usr/include", which leaves the distribution (absolute or through ".."); expected a folder inside it.'),
        ('{ "nvidia-cutlass" = "cutlass_library/../../.." }', 'wireup.toml: key "include_packages" gives "nvidia-cutlass" the folder "cutlass_library/../../..", which leaves the distribution (absolute or through ".."); expected a folder inside it.'),
    ],
)
def test_bad_include_packages_are_one_sentence_at_their_line(tmp_path: Path, capsys, value: str, message: str) -> None:
    (tmp_path / "wireup.toml").write_text(f'kernels = "kernels"\ninclude_packages = {value}\n')
    with pytest.raises(UsageError) as info:
        load_config(tmp_path)
    assert str(info.value).endswith(message)
    assert info.value.line == 2
    assert main(["check", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# ---------------------------------------------------------------------------------------------------------
# resolution in the running Python


def test_a_package_resolves_to_its_folder_version_and_record(site: Path, tmp_path: Path) -> None:
    _fake_distribution(site)
    cfg = load_config(_project(tmp_path / "p"))
    (pkg,) = package_includes(cfg)
    assert (pkg.distribution, pkg.version, pkg.relative) == ("fakehdr", "1.2", "fakehdr/include")
    assert pkg.folder == (site / "fakehdr" / "include").resolve()
    digest = hashlib.sha256(HEADER.encode()).hexdigest()
    assert pkg.record == hashlib.sha256(f"fakehdr/include/fakehdr/twice.h,sha256={digest}".encode()).hexdigest()
    assert pkg.key() == f"package=fakehdr==1.2:fakehdr/include:record={pkg.record}"
    assert pkg.describe() == "fakehdr 1.2 (fakehdr/include)"


def test_the_key_follows_the_headers_rows_of_record_only(site: Path, tmp_path: Path) -> None:
    """Two installs of one wheel differ in RECORD outside the headers (byte-compiled files, INSTALLER,
    REQUESTED, direct_url.json): the key must not, or a build cache carried to a GPU host misses."""
    _fake_distribution(site)
    cfg = load_config(_project(tmp_path / "p", 'include_packages = { "fakehdr" = "./fakehdr/include/" }\n'))
    first = package_includes(cfg)[0].record
    record = site / "fakehdr-1.2.dist-info" / "RECORD"
    record.write_text(record.read_text() + "fakehdr-1.2.dist-info/INSTALLER,,\nfakehdr/__pycache__/x.pyc,,\nfakehdr/includes.txt,,\n")
    assert package_includes(cfg)[0].record == first != ""
    record.write_text(record.read_text().replace("sha256=", "sha256=0"))  # another header
    assert package_includes(cfg)[0].record != first
    record.write_text("fakehdr-1.2.dist-info/METADATA,,\n")  # no row under the folder
    assert package_includes(cfg)[0].record == ""


def test_a_missing_distribution_is_an_environment_problem(site: Path, tmp_path: Path) -> None:
    cfg = load_config(_project(tmp_path / "p", 'include_packages = { "wireup-no-such-dist" = "inc" }\n'))
    with pytest.raises(EnvironmentProblem) as info:
        package_includes(cfg)
    assert str(info.value).startswith(
        'wireup.toml include_packages."wireup-no-such-dist" asks for the headers of the Python distribution "wireup-no-such-dist", '
        "which is not installed in this Python ("
    )
    assert str(info.value).endswith("); install it (pip install wireup-no-such-dist) or remove the entry.")


def test_a_missing_folder_is_an_environment_problem(site: Path, tmp_path: Path) -> None:
    _fake_distribution(site)
    cfg = load_config(_project(tmp_path / "p", 'include_packages = { "fakehdr" = "fakehdr/headers" }\n'))
    with pytest.raises(EnvironmentProblem) as info:
        package_includes(cfg)
    assert str(info.value) == (
        'wireup.toml include_packages."fakehdr" names the folder "fakehdr/headers", which the installed "fakehdr" 1.2 does not have '
        f'(looked for "{site / "fakehdr" / "headers"}"); expected the folder of its headers.'
    )


def test_a_folder_linked_out_of_the_distribution_is_refused(site: Path, tmp_path: Path) -> None:
    _fake_distribution(site)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, site / "fakehdr" / "linked")
    cfg = load_config(_project(tmp_path / "p", 'include_packages = { "fakehdr" = "fakehdr/linked" }\n'))
    with pytest.raises(EnvironmentProblem) as info:
        package_includes(cfg)
    assert f'resolves to "{outside.resolve()}", outside the installed distribution' in str(info.value)


def test_a_quoted_include_that_climbs_out_of_the_system_folders_is_refused(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    src = tmp_path / "kernels" / "k.cu"
    src.write_text('#include "cutlass/../../../../secret/fifo.h"\n')
    assert source_refusal(src, [tmp_path / "kernels"], tmp_path) == (
        'includes "cutlass/../../../../secret/fifo.h", which is no local header and climbs out through ".."'
    )
    src.write_text('#include "cutlass/gemm/device/gemm.h"\n#include <cute/tensor.hpp>\n')
    assert source_refusal(src, [tmp_path / "kernels"], tmp_path) is None


# ---------------------------------------------------------------------------------------------------------
# the evidence: package versions recorded and quoted


def _record(**versions: str) -> EvidenceRecord:
    return EvidenceRecord(
        subject="twice_all", kind="kernel", backend="pycuda", source_hash="s", contract_hash="c", verdict="pass",
        build_flags=["-O3"], arch="sm_90", code_hashes={"kernels/twice.cu": "old"}, code_hash_version=CODE_HASH_VERSION, versions={"nvcc": "13.0", **versions},
    )  # fmt: skip


def test_a_code_change_quotes_the_package_versions_that_moved() -> None:
    cur = _Current("s", "c", ("kernels/twice.cu",))
    ident = CodeIdentity(("-O3",), "sm_90", {"kernels/twice.cu": "new"}, "13.0", packages={"nvidia-cutlass": "4.2.0.0"})
    why = _mismatch(_record(**{"nvidia-cutlass": "4.1.0.0"}), cur, ident)
    assert why.endswith("; nvidia-cutlass 4.1.0.0 then, 4.2.0.0 now")
    assert _mismatch(_record(), cur, ident).endswith("; nvidia-cutlass not recorded then, 4.2.0.0 now")
    same = _mismatch(_record(**{"nvidia-cutlass": "4.2.0.0"}), cur, ident)
    assert same.startswith('the code built from "kernels/twice.cu" differs') and "nvidia-cutlass" not in same


def test_evidence_records_the_package_versions_of_the_build() -> None:
    from types import SimpleNamespace

    from audit.runtime._evidence import tool_versions

    build = SimpleNamespace(nvcc_version="13.0", packages={"nvidia-cutlass": "4.2.0.0", "nvcc": "spoofed"})
    versions = tool_versions("pycuda", None, build)
    assert versions["nvidia-cutlass"] == "4.2.0.0" and versions["nvcc"] == "13.0"  # a package never hides a tool
    assert "nvidia-cutlass" not in tool_versions("pycuda", None, SimpleNamespace(nvcc_version="13.0"))


# ---------------------------------------------------------------------------------------------------------
# the build (nvcc)


@pytest.mark.nvcc
def test_a_kernel_builds_against_package_headers_and_the_key_follows_the_record(site: Path, tmp_path: Path, monkeypatch) -> None:
    _fake_distribution(site)
    project = _project(tmp_path / "p")
    commands: list[list[str]] = []
    real_run = compile_mod._run
    monkeypatch.setattr(compile_mod, "_run", lambda argv, cwd: (commands.append(list(argv)), real_run(argv, cwd))[1])
    cfg, cs = load_project(project)
    first = build_kernels(cfg, cs)
    (sb,) = first.sources.values()
    assert sb.ok, sb.log
    assert first.packages == {"fakehdr": "1.2"}
    front = commands[0]
    system = (site / "fakehdr" / "include").resolve()
    assert front[front.index("-isystem") + 1] == str(system)
    assert front.index("-isystem") > front.index("-Ikernels")  # the project's own folders first
    # unchanged: from the cache; the installer's RECORD changes (a reinstall, an upgrade): rebuilt
    assert build_kernels(cfg, cs).cached == 1
    record = site / "fakehdr-1.2.dist-info" / "RECORD"
    record.write_text(record.read_text() + "fakehdr/include/fakehdr/extra.h,,\n")
    assert build_kernels(cfg, cs).compiled == 1
    # the build rules see the entry and its ABI like any other
    result = check(project, select=["build"])
    assert not result.not_run and result.findings == []


@pytest.mark.nvcc
def test_without_include_packages_the_package_header_is_not_found(site: Path, tmp_path: Path) -> None:
    _fake_distribution(site)
    project = _project(tmp_path / "p", packages=None)
    result = check(project, select=["build"])
    (finding,) = [f for f in result.findings if f.rule == "COMPILE_ERROR"]
    assert "fakehdr/twice.h" in finding.message


@pytest.mark.nvcc
def test_build_and_check_without_the_distribution(tmp_path: Path, capsys) -> None:
    project = _project(tmp_path / "p", 'include_packages = { "wireup-no-such-dist" = "inc" }\n')
    assert main(["build", "--root", str(project)]) == 2
    err = capsys.readouterr().err
    assert 'asks for the headers of the Python distribution "wireup-no-such-dist"' in err and "Traceback" not in err
    result = check(project, select=["build"])  # the build rules are not run, and say why; nothing "passes"
    assert result.not_run and all("wireup-no-such-dist" in nr.reason for nr in result.not_run)


@pytest.mark.nvcc
def test_projects_without_packages_keep_their_build_keys(tmp_path: Path, monkeypatch) -> None:
    """The key's inputs gain nothing when include_packages is empty: existing caches stay valid."""
    seen: list[list[str]] = []
    real = compile_mod.files_hash
    monkeypatch.setattr(compile_mod, "files_hash", lambda paths, root, extra=(): (seen.append(list(extra)), real(paths, root, extra))[1])
    project = _project(tmp_path / "p", packages=None)
    cfg, cs = load_project(project)
    build_kernels(cfg, cs)
    assert seen and not any(e.startswith("package=") for e in seen[0])
    assert seen[0][0] == compile_mod.BUILD_FORMAT and seen[0][-1] == "include=kernels"


# ---------------------------------------------------------------------------------------------------------
# the real CUTLASS headers


CUTLASS_KERNEL = """// 3xTF32 operand split with CUTLASS's own converter: big = tf32(v), small = tf32(v - big)
#include <cutlass/numeric_conversion.h>
#include <cutlass/tfloat32.h>
extern "C" __global__ void split3x(const float* __restrict__ x, float* __restrict__ big, float* __restrict__ small, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    cutlass::NumericConverterFastF32<cutlass::FloatRoundStyle::round_toward_zero> split;
    auto parts = split(x[i]);
    big[i] = float(parts[0]);
    small[i] = float(parts[1]);
}
"""

CUTLASS_CONTRACT = """[dims]
N = { min = 1, max = 4096, doc = "elements" }

[[kernel]]
name = "split3x"
source = "kernels/split3x.cu"
stage = "other"
grid = ["ceil_div(N, 256)", 1, 1]
block = [256, 1, 1]
params = [
  { name = "x", dtype = "f32", shape = ["N"], role = "in" },
  { name = "big", dtype = "f32", shape = ["N"], role = "out" },
  { name = "small", dtype = "f32", shape = ["N"], role = "out" },
  { name = "n", kind = "scalar", dtype = "i32", value = "N" },
]
"""


@pytest.mark.nvcc
@pytest.mark.cutlass
@needs_cutlass
def test_a_kernel_builds_against_the_cutlass_wheel(tmp_path: Path) -> None:
    from importlib import metadata

    root = tmp_path / "p"
    (root / "contracts").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "contracts" / "split.toml").write_text(CUTLASS_CONTRACT)
    (root / "kernels" / "split3x.cu").write_text(CUTLASS_KERNEL)
    (root / "wireup.toml").write_text('include_packages = { "nvidia-cutlass" = "cutlass_library/source/include" }\ncache = "build-cache"\n')
    cfg, cs = load_project(root)
    result = build_kernels(cfg, cs)
    (sb,) = result.sources.values()
    assert sb.ok, sb.log
    assert result.packages == {"nvidia-cutlass": metadata.version("nvidia-cutlass")}
    assert "split3x" in sb.entries
    checked = check(root, select=["build"])
    assert not checked.not_run and checked.findings == []
    # the source rules judge the project's file, never CUTLASS's headers
    checked = check(root)
    assert all(not (f.file or "").startswith(("cutlass", "/")) for f in checked.findings)
    shutil.rmtree(root / "build-cache")


def test_source_unsafe_reports_a_quoted_climb_out_of_the_system_folders(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", packages=None)
    (project / "kernels" / "twice.cu").write_text('#include "fakehdr/../../../etc/hosts"\n' + KERNEL)
    result = check(project, select=["SOURCE_UNSAFE"])
    (finding,) = result.findings
    assert finding.message == (
        'Kernel "twice_all" source "kernels/twice.cu" includes "fakehdr/../../../etc/hosts", which is no local header and '
        'climbs out through ".."; it is neither compiled nor analysed.'
    )


@pytest.mark.nvcc
@pytest.mark.cutlass
@needs_cutlass
def test_the_shipped_chain_with_its_cutlass_kernels_passes_every_static_rule(repo: Path) -> None:
    """The shipped trunk forward, both head forwards and the wide weight-gradient partial are the CUTLASS
    kernels (the headers through include_packages), the next-bar head's one-row partial the SIMT skinny path:
    the build, the ABI and resource checks and the source analyses (bounds, races, uninitialised reads on
    the CUTLASS kernels' own code) find nothing to report."""
    cfg, cs = load_project(repo)
    assert cfg.include_packages == (("nvidia-cutlass", "cutlass_library/source/include"),)
    geometry = {k.name: (k.source, k.entry, [str(g) for g in k.grid], [str(b) for b in k.block]) for k in cs.kernels}
    assert geometry["aux_trunk_forward"] == ("kernels/aux_trunk_forward_cutlass.cu", "aux_trunk_forward_cutlass",
                                             ["ceil_div(B, 128) * ceil_div(SH2, 64)", "1", "1"], ["128", "1", "1"])  # fmt: skip
    for head in ("aux_trade_outcome_forward", "aux_next_bar_forward"):
        assert geometry[head] == ("kernels/aux_head_forward_cutlass.cu", f"{head}_cutlass", ["ceil_div(B, 64)", "1", "1"], ["256", "1", "1"])
    assert geometry["aux_weight_grad_partial"][:2] == ("kernels/aux_weight_grad_partial_cutlass.cu", "aux_weight_grad_partial_cutlass")
    assert geometry["aux_weight_grad_partial_skinny"][:2] == ("kernels/aux_weight_grad_split_kernel.cu", "aux_weight_grad_partial")
    skinny = [s.bind for sch in cs.schedules for s in sch.steps if s.launch == "aux_weight_grad_partial_skinny"]
    assert [dict(b)["dz"].buffer for b in skinny] == ["nb_db2_partial"]  # M = KNB = 1
    result = check(repo, ignore=["evidence", "launchers", "GENERATED_STALE"])
    assert_clean_but_known_notes(result)
    assert not [nr for nr in result.not_run if nr.rule not in ("NO_LAUNCHER", "UNAUDITED_KERNEL", "GEOMETRY_DRIFT")]


@pytest.mark.nvcc
def test_the_shipped_chain_without_the_cutlass_wheel_says_so_in_one_sentence(repo: Path, monkeypatch, capsys) -> None:
    """wireup imports nothing of the wheel: without it, check still runs every rule that needs no build, and
    the build rules are reported not run with one sentence naming the key and the missing distribution."""
    from importlib import metadata

    real = metadata.distribution

    def without_cutlass(name: str):
        if name == "nvidia-cutlass":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "distribution", without_cutlass)
    assert main(["check", "--root", str(repo), "--select", "build", "--jobs", "1"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    (reason,) = {line.split(": ", 2)[2] for line in captured.out.splitlines() if line.startswith("not run: ")}
    assert reason.startswith('pyproject.toml [tool.wireup] include_packages."nvidia-cutlass" asks for the headers of the Python '
                             'distribution "nvidia-cutlass", which is not installed in this Python (')  # fmt: skip
    assert reason.endswith("); install it (pip install nvidia-cutlass) or remove the entry.") and reason.count(". ") == 0, reason
    assert "COMPILE_ERROR" in captured.out and "ABI_MISMATCH" in captured.out


@pytest.mark.nvcc
@pytest.mark.cutlass
@needs_cutlass
def test_the_shipped_chain_with_the_next_bar_backward_candidate_passes_every_static_rule(tmp_path: Path, repo: Path) -> None:
    """The next-bar head backward swapped for its CUTLASS candidate (contract pointed at it with the candidate's
    geometry, include_packages set): the build, the ABI and resource checks (no spill) and the source analyses
    (bounds, races, uninitialised reads on the candidate's own code, both schedules: NULL and non-NULL weight
    partials) find nothing to report."""
    root = tmp_path / "p"
    for part in ("contracts", "kernels", "audit/references", "reports"):
        shutil.copytree(repo / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(repo / "pyproject.toml", root / "pyproject.toml")
    shutil.copy(repo / "benchmarks" / "kernels_baseline" / "aux_next_bar_backward_cutlass.cu", root / "kernels" / "aux_next_bar_backward_cutlass.cu")
    text = (root / "pyproject.toml").read_text()  # include_packages is set; cutlass_fast_f32_rn.cuh ships in kernels/
    (root / "pyproject.toml").write_text(text.replace("[tool.wireup]\n", '[tool.wireup]\ncache = "build-cache"\n', 1))
    path = root / "contracts" / "kernels" / "aux_next_bar.toml"
    t = path.read_text()
    old = ('source = "kernels/aux_next_bar_backward_kernel.cu"\nentry = "aux_next_bar_backward"\nstage = "backward"\n'
           'phase = "B"\nreference = "audit.references.dqn_aux:aux_next_bar_backward"\n'
           'gradcheck = "audit.references.dqn_aux:aux_next_bar_backward_gradcheck"\n'
           'grid = ["ceil_div(SH2, 128)", "ceil_div(B, 128)", 1]\nblock = [256, 1, 1]\n')
    assert t.count(old) == 1
    new = old.replace("kernels/aux_next_bar_backward_kernel.cu", "kernels/aux_next_bar_backward_cutlass.cu")
    new = new.replace('entry = "aux_next_bar_backward"', 'entry = "aux_next_bar_backward_cutlass"')
    new = new.replace('grid = ["ceil_div(SH2, 128)", "ceil_div(B, 128)", 1]\nblock = [256, 1, 1]', 'grid = ["ceil_div(B, 32)", 1, 1]\nblock = [128, 1, 1]')
    path.write_text(t.replace(old, new))
    # its MmaMultistage reads the last stage's rows past B unwritten, as the shipped CUTLASS forwards' do (their
    # [[suppress]] entries); found once the block runs took its weight partials given (its branch on them around a
    # barrier had given them up: a note, before the evening of 7 December 2026)
    with (root / "contracts" / "suppressions.toml").open("a") as f:
        f.write('\n[[suppress]]\nrule = "SHARED_UNINIT_READ"\nkernel = "aux_next_bar_backward"\n'
                'matching = "inlined from memory_sm75.h:132, ldmatrix"\n'
                'reason = "CUTLASS MmaMultistage (kNone) leaves the last stage\'s tile rows past B unwritten; they reach only '
                'accumulator rows past B, which the predicated epilogue never stores"\n')
    result = check(root, ignore=["evidence", "launchers", "GENERATED_STALE"])
    assert_clean_but_known_notes(result)
    assert [f.rule for f, _ in result.suppressed if f.subject == "aux_next_bar_backward"] == ["SHARED_UNINIT_READ"]
    assert not [nr for nr in result.not_run if nr.rule not in ("NO_LAUNCHER", "UNAUDITED_KERNEL", "GEOMETRY_DRIFT")]
