"""A generated corpus of hostile project trees, and a runner that puts a static command through one.

Each case is a function that turns a copy of a small, valid project (one kernel, one schedule, a
four-slot ISV, committed to git) into a hostile one: huge numbers, deep nesting, symbolic-link loops and
special files as sources, huge generated sets, markup in every string that reaches a rendered output,
project settings that try to run programs or templates or to write outside the root, git arguments
that look like options, and forged cache and evidence files. The cases are classes of attack, not
copies of one report's trees; :data:`CASES` maps a case's name to ``(class, builder)``.

:func:`run_static` runs one ``wireup`` command in a forked child (the parent has already imported
wireup, so a run costs a fork, not an interpreter start), with stdout and stderr in files, a HOME of its
own and a wall-clock limit after which the child's process group is killed.

    root = make_tree(tmp_path / "case", "isv_total_2_70")
    outcome = run_static(root, ["check"], timeout=20)
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BASE_TOML = """\
# A one-kernel chain; every hostile case changes it.
[dims]
B = { min = 1, max = 1024, doc = "rows" }
N = 16

[[buffer]]
name = "x"
dtype = "f32"
shape = ["B", "N"]
kind = "input"
doc = "the input"

[[buffer]]
name = "y"
dtype = "f32"
shape = ["B", "N"]
kind = "activation"

[[kernel]]
name = "scale"
source = "kernels/scale.cu"
stage = "forward"
grid = ["ceil_div(B, 256)", 1, 1]
block = [256, 1, 1]
isv_reads = ["SCALE_EMA"]
params = [
  { name = "x", dtype = "f32", shape = ["B", "N"], role = "in" },
  { name = "y", dtype = "f32", shape = ["B", "N"], role = "out" },
  { name = "B", kind = "scalar", dtype = "i32", value = "B" },
  { name = "isv", kind = "isv" },
]

[[schedule]]
name = "main"

[[schedule.step]]
launch = "scale"
bind = { x = "x", y = "y" }

[isv]
total_dim = 4
reset_events = ["FoldReset"]

[[isv.slot]]
index = 0
name = "SCALE_EMA"
role = "scale"
reset = { FoldReset = 1.0 }
"""

BASE_KERNEL = '// scale: y = x * isv[SCALE_EMA]\nextern "C" __global__ void scale() {}\n'

#: Markup that must never reach a rendered output raw (HTML, Markdown links, Mermaid and DOT syntax).
MARKUP = '<img src=x onerror=alert(1)> <svg onload=alert(2)> [click](javascript:alert(3)) "]-->X[" \\" ; } | `'

Builder = Callable[[Path, Path], None]
CASES: dict[str, tuple[str, Builder]] = {}


def case(cls: str, name: str | None = None):
    def register(fn: Builder) -> Builder:
        CASES[name or fn.__name__] = (cls, fn)
        return fn

    return register


def _chain(root: Path) -> Path:
    return root / "contracts" / "chain.toml"


def _edit(root: Path, old: str, new: str) -> None:
    p = _chain(root)
    text = p.read_text()
    assert old in text, old
    p.write_text(text.replace(old, new, 1))


def _append(root: Path, text: str) -> None:
    with _chain(root).open("a") as fh:
        fh.write(text)


def _config(root: Path, text: str) -> None:
    (root / "wireup.toml").write_text(text)


def _mkfifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


# --- huge numbers ---------------------------------------------------------------------------------------


@case("huge numbers")
def isv_total_2_70(root: Path, outside: Path) -> None:
    _edit(root, "total_dim = 4", f"total_dim = {2**62}")  # TOML integers stop at 2^63 - 1
    _append(root, "\n[[isv.slot]]\nindex = 5\ncount = 3\nname = \"BIG\"\nrole = \"ema\"\nreset = { FoldReset = 0.0 }\n")


@case("huge numbers")
def isv_total_1e9(root: Path, outside: Path) -> None:
    _edit(root, "total_dim = 4", "total_dim = 1000000000")


@case("huge numbers")
def isv_slot_count_1e12(root: Path, outside: Path) -> None:
    _edit(root, "total_dim = 4", "total_dim = 1000000000000")
    _edit(root, 'index = 0\nname = "SCALE_EMA"', 'index = 0\ncount = 1000000000000\nname = "SCALE_EMA"')


@case("huge numbers")
def toml_int_5000_digits(root: Path, outside: Path) -> None:
    _edit(root, "N = 16", "N = " + "9" * 5000)


@case("huge numbers")
def hex_5000_digits_in_expression(root: Path, outside: Path) -> None:
    _edit(root, "N = 16", 'N = "0x' + "f" * 5000 + '"')


@case("huge numbers")
def decimal_5000_digits_in_expression(root: Path, outside: Path) -> None:
    _edit(root, "N = 16", 'N = "' + "7" * 5000 + ' + 1"')


@case("huge numbers")
def squaring_derived_dims(root: Path, outside: Path) -> None:
    lines = ["D0 = 3"] + [f'D{i} = "D{i - 1} * D{i - 1}"' for i in range(1, 41)]
    _edit(root, "N = 16", "N = \"D40\"\n" + "\n".join(lines))


@case("huge numbers")
def huge_fixed_dim_in_a_shape(root: Path, outside: Path) -> None:
    _edit(root, "N = 16", f"N = {2**62}")


@case("huge numbers")
def huge_runtime_dim_range(root: Path, outside: Path) -> None:
    _edit(root, 'B = { min = 1, max = 1024, doc = "rows" }', f'B = {{ min = 1, max = {2**62} }}')


@case("huge numbers")
def huge_launch_geometry(root: Path, outside: Path) -> None:
    _edit(root, "block = [256, 1, 1]", f"block = [{2**62}, {2**62}, {2**62}]")


@case("huge numbers")
def huge_verify_dims_and_batch(root: Path, outside: Path) -> None:
    _edit(root, 'isv_reads = ["SCALE_EMA"]', f'isv_reads = ["SCALE_EMA"]\nverify = {{ dims = {{ B = [{2**62}, {2**40}] }}, max_batch = {2**62} }}')


@case("huge numbers")
def nan_and_inf_floats(root: Path, outside: Path) -> None:
    _edit(root, "reset = { FoldReset = 1.0 }", "reset = { FoldReset = nan }")
    _edit(root, 'kind = "input"', 'kind = "input"\nvalues = { min = -inf, max = inf, scale = nan }')
    _edit(root, 'isv_reads = ["SCALE_EMA"]', 'isv_reads = ["SCALE_EMA"]\nnondeterministic = { rtol = inf, reason = "x" }')


@case("huge numbers")
def negative_and_zero_sizes(root: Path, outside: Path) -> None:
    _edit(root, "total_dim = 4", "total_dim = -9223372036854775808")
    _edit(root, "N = 16", "N = 0")


# --- deep nesting -----------------------------------------------------------------------------------------


@case("deep nesting")
def contract_folders_1100_deep(root: Path, outside: Path) -> None:
    deep = root / "contracts"
    # a path this deep exceeds PATH_MAX as one string: build it one chdir at a time
    here = os.getcwd()
    try:
        os.chdir(deep)
        for _ in range(1100):
            os.mkdir("d")
            os.chdir("d")
        Path("deep.toml").write_text("[dims]\nDEEP = 1\n")
    finally:
        os.chdir(here)


@case("deep nesting")
def dotted_keys_3000_deep(root: Path, outside: Path) -> None:
    (root / "contracts" / "dotted.toml").write_text("[dims]\n" + ".".join(["a"] * 3000) + " = 1\n")


@case("deep nesting")
def arrays_3000_deep(root: Path, outside: Path) -> None:
    (root / "contracts" / "arrays.toml").write_text("[dims]\nA = " + "[" * 3000 + "]" * 3000 + "\n")


@case("deep nesting")
def expression_parentheses_3000_deep(root: Path, outside: Path) -> None:
    _edit(root, "N = 16", 'N = "' + "(" * 3000 + "1" + ")" * 3000 + '"')


@case("deep nesting")
def unary_minus_5000_deep(root: Path, outside: Path) -> None:
    _edit(root, "N = 16", 'N = "' + "-" * 5000 + '16"')


# --- huge generated sets ----------------------------------------------------------------------------------


@case("huge sets")
def derived_dims_3000_in_reverse_order(root: Path, outside: Path) -> None:
    lines = [f'R{i} = "R{i + 1} + 1"' for i in range(3000)] + ["R3000 = 1"]
    _edit(root, "N = 16", 'N = "R0"\n' + "\n".join(lines))


@case("huge sets")
def slots_5000(root: Path, outside: Path) -> None:
    _edit(root, "total_dim = 4", "total_dim = 5004")
    _append(root, "".join(f'\n[[isv.slot]]\nindex = {4 + i}\nname = "S{i}"\nrole = "ema"\nreset = {{ FoldReset = 0.0 }}\n' for i in range(5000)))


@case("huge sets")
def kernels_2000_in_one_schedule(root: Path, outside: Path) -> None:
    body = []
    for i in range(2000):
        body.append(f'[[kernel]]\nname = "k{i}"\nsource = "kernels/scale.cu"\nstage = "forward"\ngrid = [1, 1, 1]\nblock = [32, 1, 1]\n'
                    f'params = [{{ name = "x", dtype = "f32", shape = ["B", "N"], role = "in" }}]\n')  # fmt: skip
    body.append('[[schedule]]\nname = "wide"\n' + "".join(f'[[schedule.step]]\nlaunch = "k{i}"\nbind = {{ x = "x" }}\n' for i in range(2000)))
    (root / "contracts" / "many.toml").write_text("\n".join(body))


@case("huge sets")
def contract_files_all_empty(root: Path, outside: Path) -> None:
    _chain(root).write_text("")
    (root / "contracts" / "more.toml").write_text("# nothing here\n")


# --- special files, symbolic links and paths --------------------------------------------------------------


@case("special files")
def kernel_source_is_a_fifo(root: Path, outside: Path) -> None:
    (root / "kernels" / "scale.cu").unlink()
    _mkfifo(root / "kernels" / "scale.cu")


@case("special files")
def kernel_includes_a_fifo(root: Path, outside: Path) -> None:
    _mkfifo(root / "kernels" / "pipe.cuh")
    (root / "kernels" / "scale.cu").write_text('#include "pipe.cuh"\n' + BASE_KERNEL)


@case("special files")
def kernel_includes_dev_zero(root: Path, outside: Path) -> None:
    (root / "kernels" / "scale.cu").write_text('#include "/dev/zero"\n#include "../../../../../../../../dev/zero"\n' + BASE_KERNEL)


@case("special files")
def kernel_source_is_a_symlink_loop(root: Path, outside: Path) -> None:
    (root / "kernels" / "scale.cu").unlink()
    (root / "kernels" / "scale.cu").symlink_to("loop.cu")
    (root / "kernels" / "loop.cu").symlink_to("scale.cu")


@case("special files")
def kernel_source_is_a_symlink_to_dev_zero(root: Path, outside: Path) -> None:
    (root / "kernels" / "scale.cu").unlink()
    (root / "kernels" / "scale.cu").symlink_to("/dev/zero")


@case("special files")
def kernel_source_is_a_folder(root: Path, outside: Path) -> None:
    (root / "kernels" / "scale.cu").unlink()
    (root / "kernels" / "scale.cu").mkdir()


@case("special files")
def kernel_source_holds_nul_bytes(root: Path, outside: Path) -> None:
    (root / "kernels" / "scale.cu").write_bytes(b"// \x00\x00\x00\n" + BASE_KERNEL.encode() + b"\x00\xff\xfe")


@case("special files")
def kernel_source_is_huge(root: Path, outside: Path) -> None:
    (root / "kernels" / "scale.cu").write_bytes(BASE_KERNEL.encode() + b"//" + b"x" * (40 << 20) + b"\n")


@case("special files")
def kernel_source_path_has_nul_and_options(root: Path, outside: Path) -> None:
    _edit(root, 'source = "kernels/scale.cu"', 'source = "-o/tmp/x\\u0000.cu"')


@case("special files")
def contracts_folder_is_a_symlink_loop(root: Path, outside: Path) -> None:
    shutil.rmtree(root / "contracts")
    (root / "contracts").symlink_to("contracts")


@case("special files")
def contracts_folder_holds_a_symlink_loop(root: Path, outside: Path) -> None:
    (root / "contracts" / "again").symlink_to(".")


@case("special files")
def contract_file_is_a_fifo(root: Path, outside: Path) -> None:
    _mkfifo(root / "contracts" / "pipe.toml")


@case("special files")
def contract_file_is_a_symlink_out_of_the_root(root: Path, outside: Path) -> None:
    (outside / "secret.toml").write_text("[dims]\nSECRET = 7\n")
    (root / "contracts" / "secret.toml").symlink_to(outside / "secret.toml")


@case("special files")
def contract_file_is_huge(root: Path, outside: Path) -> None:
    (root / "contracts" / "huge.toml").write_text("# " + "x" * (40 << 20) + "\n")


@case("special files")
def config_file_is_a_fifo(root: Path, outside: Path) -> None:
    _mkfifo(root / "wireup.toml")


@case("special files")
def evidence_folder_is_a_symlink_out_of_the_root(root: Path, outside: Path) -> None:
    (outside / "ev" / "kernels").mkdir(parents=True)
    (root / "reports" / "evidence").rmdir()
    (root / "reports" / "evidence").symlink_to(outside / "ev")




# --- launcher globs ---------------------------------------------------------------------------------------


@case("launchers")
def launcher_glob_leaves_the_root(root: Path, outside: Path) -> None:
    (outside / "launch.rs").write_text("fn main() {}\n")
    _config(root, 'launchers = ["../outside/*.rs", "/etc/*"]\n')


@case("launchers")
def launcher_glob_walks_the_filesystem(root: Path, outside: Path) -> None:
    _config(root, 'launchers = ["**/../../../../../../**/*.rs"]\n')


@case("launchers")
def launcher_folder_is_a_symlink_out_of_the_root(root: Path, outside: Path) -> None:
    (outside / "src").mkdir()
    (outside / "src" / "launch.rs").write_text("fn main() {}\n")
    (root / "src").symlink_to(outside / "src")
    _config(root, 'launchers = ["src/**/*.rs"]\n')


@case("launchers")
def launcher_is_a_fifo(root: Path, outside: Path) -> None:
    _mkfifo(root / "src" / "launch.rs")
    _config(root, 'launchers = ["src/*.rs"]\n')


@case("launchers")
def launcher_glob_in_a_symlink_loop(root: Path, outside: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "again").symlink_to(".")
    _config(root, 'launchers = ["src/**/*.rs"]\n')


# --- project settings that run programs, templates or write outside --------------------------------------


def _marker_script(root: Path, outside: Path) -> Path:
    script = root / "tools" / "cc.sh"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!/bin/sh\necho ran > '{outside / 'RAN'}'\nexit 1\n")
    script.chmod(0o755)
    return script


@case("project programs")
def nvcc_host_compiler_from_config(root: Path, outside: Path) -> None:
    _marker_script(root, outside)
    _config(root, 'nvcc_flags = ["-O3", "-ccbin", "tools/cc.sh"]\n')


@case("project programs")
def nvcc_host_compiler_joined_form(root: Path, outside: Path) -> None:
    _marker_script(root, outside)
    _config(root, 'nvcc_flags = ["--compiler-bindir=tools/cc.sh", "-Xcompiler", "-fplugin=tools/x.so"]\n')


@case("project programs")
def nvcc_output_folders_from_config(root: Path, outside: Path) -> None:
    _config(root, f'nvcc_flags = ["--keep", "--keep-dir", "{outside}", "-odir", "{outside}", "-o", "{outside}/x"]\n')


@case("project programs")
def nvcc_options_file_from_config(root: Path, outside: Path) -> None:
    (root / "opts.txt").write_text(f"-ccbin tools/cc.sh --keep-dir {outside}\n")
    _marker_script(root, outside)
    _config(root, 'nvcc_flags = ["--options-file", "opts.txt", "-optf=opts.txt"]\n')


@case("project programs")
def cache_folder_outside_the_root(root: Path, outside: Path) -> None:
    _config(root, f'cache = "{outside / "cache"}"\n')


@case("project programs")
def cache_folder_leaves_through_dotdot(root: Path, outside: Path) -> None:
    _config(root, 'cache = "../outside/cache"\n')


def _templates(root: Path, body: str) -> None:
    (root / "tpl").mkdir(exist_ok=True)
    (root / "tpl" / "report.md.j2").write_text(body)
    _config(root, 'templates = "tpl"\n')


@case("project templates")
def template_runs_code(root: Path, outside: Path) -> None:
    marker = outside / "RAN"
    _templates(root, "{{ ''.__class__.__mro__[1].__subclasses__() }}"
                     "{{ cycler.__init__.__globals__.os.system('touch " + str(marker) + "') }}"
                     "{{ lipsum.__globals__['os'].popen('touch " + str(marker) + "').read() }}")  # fmt: skip


@case("project templates")
def template_runtime_error(root: Path, outside: Path) -> None:
    _templates(root, "{{ 1 / 0 }} {{ report.no_such.attribute.deeper }}")


@case("project templates")
def template_syntax_error(root: Path, outside: Path) -> None:
    _templates(root, "{% for x in %}")


@case("project templates")
def template_includes_a_file_outside(root: Path, outside: Path) -> None:
    (outside / "secret.txt").write_text("SECRET")
    _templates(root, '{% include "../../outside/secret.txt" %}{% include "/etc/passwd" %}')


@case("project templates")
def template_loops_forever(root: Path, outside: Path) -> None:
    _templates(root, "{% for i in range(10**12) %}{{ i }}{% endfor %}")


@case("project templates")
def template_builds_a_huge_string(root: Path, outside: Path) -> None:
    _templates(root, "{{ 'x' * 10**12 }}{{ 'y' * (10**9) }}")


@case("project templates")
def template_is_a_fifo(root: Path, outside: Path) -> None:
    (root / "tpl").mkdir()
    _mkfifo(root / "tpl" / "report.md.j2")
    _config(root, 'templates = "tpl"\n')


@case("project programs")
def report_path_outside_the_root(root: Path, outside: Path) -> None:
    _config(root, f'report = "{outside / "report.md"}"\nreports = "../outside"\n')


@case("project programs")
def generated_paths_outside_the_root(root: Path, outside: Path) -> None:
    _config(root, f'[generated]\ncuda = "{outside / "x.cuh"}"\n')


@case("project programs")
def report_path_is_a_symlink_out_of_the_root(root: Path, outside: Path) -> None:
    (root / "reports" / "dqn-wire-up-audit.md").symlink_to(outside / "report.md")


# --- markup in every rendered string ----------------------------------------------------------------------


@case("markup")
def markup_in_names_and_docs(root: Path, outside: Path) -> None:
    m = MARKUP.replace("\\", "\\\\").replace('"', '\\"')
    text = _chain(root).read_text()
    text = text.replace('doc = "rows"', f'doc = "{m}"').replace('doc = "the input"', f'doc = "{m}"')
    text = text.replace('name = "main"', f'name = "main {m}"\ndoc = "{m}"')
    text = text.replace('name = "y"', f'name = "y{m}"').replace('y = "y"', f'y = "y{m}"')
    text = text.replace('name = "SCALE_EMA"', f'name = "SCALE_EMA"\ndoc = "{m}"')
    _chain(root).write_text(text)
    _append(root, f'\n[[invariant]]\nname = "{m}"\nkind = "no_path"\nfrom = ["{m}"]\nto = ["scale"]\nreason = "{m}"\n')


@case("markup")
def markup_in_kernel_name_and_source_path(root: Path, outside: Path) -> None:
    m = "k<img src=x onerror=alert(1)>`|]"
    _edit(root, 'name = "scale"', f'name = "{m}"')
    _edit(root, 'launch = "scale"', f'launch = "{m}"')
    _edit(root, 'source = "kernels/scale.cu"', 'source = "kernels/<svg onload=alert(1)>.cu"')
    (root / "kernels" / "<svg onload=alert(1)>.cu").write_text(BASE_KERNEL)


def _record(subject: str, **fields: object) -> dict:
    rec = {
        "subject": subject, "kind": "kernel", "backend": "pycuda", "verdict": "pass", "source_hash": "0" * 64,
        "contract_hash": "0" * 64, "cubin_hashes": {}, "build_flags": [], "arch": "sm_90", "device": {}, "versions": {},
        "seed": 0, "sizes": [], "checks": [], "date": "2026-01-01", "duration_s": 1.0, "format": 1,
    }  # fmt: skip
    rec.update(fields)
    return rec


@case("markup")
def markup_in_evidence_records(root: Path, outside: Path) -> None:
    import json

    m = MARKUP
    rec = _record("scale", backend=m, verdict=m, arch=m, date=m, sizes=[m], build_flags=[m], device={"name": m, m: m},
                  versions={m: m}, cubin_hashes={m: m}, checks=[{"name": m, "verdict": "fail", "detail": m, "size": m}])  # fmt: skip
    folder = root / "reports" / "evidence" / "kernels"
    folder.mkdir(parents=True)
    (folder / "scale.pycuda.json").write_text(json.dumps(rec))
    (folder / "other.pycuda.json").write_text(json.dumps(_record(m, backend=m)))


@case("wrong types")
def evidence_fields_of_the_wrong_type(root: Path, outside: Path) -> None:
    import json

    folder = root / "reports" / "evidence" / "kernels"
    folder.mkdir(parents=True)
    weird = [None, 7, -1, 1e308, [1, [2]], {"a": {"b": 1}}, True, "x"]
    for i, w in enumerate(weird):
        for key in _record("scale"):
            (folder / f"scale.b{i}{key}.json").write_text(json.dumps({**_record("scale"), key: w}))
        (folder / f"scale.c{i}.json").write_text(json.dumps(_record("scale", checks=[w, {"name": w, "verdict": w, "max_abs_err": w}])))
    (folder / "list.json").write_text("[1, 2, 3]")
    (folder / "deep.json").write_text("[" * 100000 + "]" * 100000)
    (folder / "huge_int.json").write_text(json.dumps(_record("scale"))[:-1] + ', "seed": ' + "9" * 5000 + "}")
    (folder / "nan.json").write_text(json.dumps(_record("scale", duration_s=float("nan"))))
    (folder / "bad.json").write_bytes(b"\xff\xfe{")


@case("special files")
def evidence_record_is_a_fifo(root: Path, outside: Path) -> None:
    _mkfifo(root / "reports" / "evidence" / "kernels" / "scale.pycuda.json")


@case("wrong types")
def build_cache_entries_of_the_wrong_type(root: Path, outside: Path) -> None:
    import json

    for i, w in enumerate([None, 7, "x", [1], {"a": 1}, True]):
        d = root / ".wireup-cache" / "build" / "sm_90" / f"{i:064x}"
        d.mkdir(parents=True)
        (d / "build.json").write_text(json.dumps({"format": "wireup-build-2", "ok": w, "source": w, "entries": w, "cubin": w, "cubin_size": w, "log": w, "diagnostics": w}))


@case("wrong types")
def forged_build_cache_entry(root: Path, outside: Path) -> None:
    import json

    d = root / ".wireup-cache" / "build" / "sm_90" / ("0" * 64)
    d.mkdir(parents=True)
    (d / "scale.cubin").write_bytes(b"\x7fELF forged")
    (d / "build.json").write_text(json.dumps({"format": "wireup-build-2", "ok": True, "source": "kernels/scale.cu", "cubin": "scale.cubin", "cubin_size": 15, "entries": {}, "log": "", "diagnostics": []}))
    _git(root, "add", "-f", "--", ".wireup-cache")
    _git(root, "commit", "-qm", "a build-cache entry, committed")


@case("wrong types")
def unknown_property_kinds_and_keys(root: Path, outside: Path) -> None:
    _edit(root, 'isv_reads = ["SCALE_EMA"]', 'isv_reads = ["SCALE_EMA"]\nproperty = [{ kind = "always_passes", bogus = 1 }, { kind = "unit_scale", input = "x", nope = true }]')


@case("wrong types")
def config_values_of_the_wrong_type(root: Path, outside: Path) -> None:
    _config(root, 'contracts = 7\nnvcc_flags = "-ccbin x"\n')


@case("wrong types")
def config_is_not_toml(root: Path, outside: Path) -> None:
    (root / "wireup.toml").write_bytes(b'contracts = "contracts"\nx = """\n\xff\n')


# --- git arguments that look like options -----------------------------------------------------------------


@case("git options")
def contract_file_named_like_an_option(root: Path, outside: Path) -> None:
    (root / "contracts" / "--output=x.toml").write_text("[dims]\nOPT = 1\n")
    (root / "contracts" / "-c core.pager=touch RAN.toml").write_text("[dims]\nOPT2 = 1\n")
    _git(root, "add", "-A", "--", ".")
    _git(root, "commit", "-qm", "option-like names")


@case("git options")
def contracts_folder_named_like_an_option(root: Path, outside: Path) -> None:
    (root / "contracts").rename(root / "--exec=touch RAN")
    _config(root, 'contracts = "--exec=touch RAN"\n')
    _git(root, "add", "-A", "--", ".")
    _git(root, "commit", "-qm", "option-like folder")


@case("git options")
def hostile_history(root: Path, outside: Path) -> None:
    """The committed revision itself is hostile; layout diff reads it through git."""
    (root / "contracts" / "dotted.toml").write_text("[isv]\n" + ".".join(["a"] * 3000) + " = 1\n")
    _edit(root, "total_dim = 4", f"total_dim = {'9' * 5000}")
    _git(root, "add", "-A", "--", ".")
    _git(root, "commit", "-qm", "hostile history")
    (root / "contracts" / "dotted.toml").unlink()
    _edit(root, f"total_dim = {'9' * 5000}", "total_dim = 4")


# --- building trees and running commands ------------------------------------------------------------------

_GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}  # fmt: skip


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env={**os.environ, **_GIT_ENV})


def make_base(folder: Path) -> Path:
    """The valid project every case starts from, committed to a git repository."""
    root = folder / "proj"
    (root / "contracts").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "reports" / "evidence").mkdir(parents=True)
    _chain(root).write_text(BASE_TOML)
    (root / "kernels" / "scale.cu").write_text(BASE_KERNEL)
    (root / ".gitignore").write_text(".wireup-cache/\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    return root


def make_tree(folder: Path, name: str, base: Path | None = None) -> tuple[Path, Path]:
    """``folder/proj`` (a copy of ``base``, made hostile by case ``name``) and ``folder/outside``."""
    folder.mkdir(parents=True)
    outside = folder / "outside"
    outside.mkdir()
    (folder / "home").mkdir()
    root = folder / "proj"
    if base is None:
        make_base(folder)
    else:
        shutil.copytree(base, root, symlinks=True)
    CASES[name][1](root, outside)
    return root, outside


def remove_tree(folder: Path) -> None:
    """Delete ``folder`` without recursion (``shutil.rmtree`` recurses and fails on the 1,100-deep case)."""
    stack = [str(folder)]
    while stack:
        here = stack[-1]
        try:
            entries = list(os.scandir(here))
        except FileNotFoundError:
            stack.pop()
            continue
        subdirs = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        for e in entries:
            if not e.is_dir(follow_symlinks=False):
                os.unlink(e.path)
        if subdirs:
            stack.extend(subdirs)
        else:
            os.rmdir(here)
            stack.pop()


def snapshot(folder: Path, skip: Path) -> dict[str, tuple[int, int, float]]:
    """Path -> (mode, size, mtime) of everything under ``folder`` except ``skip`` (no links followed)."""
    out = {}
    stack = [str(folder)]
    while stack:
        here = stack.pop()
        for e in os.scandir(here):
            if e.path == str(skip):
                continue
            st = e.stat(follow_symlinks=False)
            # a folder's own mtime moves with any entry made and removed in it (the runner's output files)
            if stat.S_ISDIR(st.st_mode):
                out[e.path] = (st.st_mode, 0, 0.0)
                stack.append(e.path)
            else:
                out[e.path] = (st.st_mode, st.st_size, st.st_mtime)
    return out


@dataclass
class Outcome:
    argv: list[str]
    code: int | None  # None: killed at the time limit
    stdout: str
    stderr: str
    seconds: float


def run_static(root: Path, argv: list[str], timeout: float, home: Path | None = None) -> Outcome:
    """``wireup ARGV --root ROOT`` in a forked child, killed (with its process group) after ``timeout``."""
    return run_static_many(root, [argv], timeout, home)[0]


def run_static_many(root: Path, argvs: list[list[str]], timeout: float, home: Path | None = None) -> list[Outcome]:
    """Each of ``argvs`` as :func:`run_static`, all at once (each in a forked child of its own)."""
    running = [_spawn(root, argv, i, home) for i, argv in enumerate(argvs)]
    return [_reap(child, timeout) for child in running]


def _spawn(root: Path, argv: list[str], index: int, home: Path | None) -> tuple:
    from audit.cli import main

    if argv[0] == "layout":
        full = ["layout", argv[1], "--root", str(root), *argv[2:]]
    else:
        full = [argv[0], "--root", str(root), *argv[1:]]
    tag = f"{os.getpid()}-{index}"
    out_path, err_path = root.parent / f".out-{tag}", root.parent / f".err-{tag}"
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 70
        try:
            os.setpgid(0, 0)
            os.chdir(root)
            os.environ["HOME"] = str(home or root.parent / "home")
            os.environ["XDG_CACHE_HOME"] = str(home or root.parent / "home")
            os.environ.pop("WIREUP_CACHE", None)
            fo, fe = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fo, 1)
            os.dup2(fe, 2)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            try:
                code = main(full)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 - what the interpreter would print
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    return pid, full, out_path, err_path, t0


def _reap(child: tuple, timeout: float) -> Outcome:
    pid, full, out_path, err_path, t0 = child
    deadline = t0 + timeout
    code: int | None = None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.perf_counter() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            break
        time.sleep(0.005)
    seconds = time.perf_counter() - t0
    out = out_path.read_text(errors="replace") if out_path.exists() else ""
    err = err_path.read_text(errors="replace") if err_path.exists() else ""
    out_path.unlink(missing_ok=True)
    err_path.unlink(missing_ok=True)
    return Outcome(full, code, out, err, seconds)


#: Every static command, as run over each tree (``graph`` alternates between its two formats).
STATIC_COMMANDS = (
    ["check"],
    ["graph"],
    ["layout", "fingerprint"],
    ["layout", "diff", "--against", "HEAD"],
    ["report"],
)
