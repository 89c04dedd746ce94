"""wireup mutate: operators on small CUDA snippets, the tokenizer and scope rules, ids and diffs, the
selection, equivalence records, ``--list`` on every shipped kernel, and the whole pipeline on the
emulated backend with stand-in kernels (accounting, JSON, exit codes). ``nvcc`` tests compile every
mutant of two small kernels; the GPU run is tests/gpu/test_mutate_gpu.py."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from audit.api import load_project
from audit.cli import main
from audit.errors import UsageError
from audit.mutate import (
    OPERATORS,
    mutants_of_source,
    normalized_ptx,
    plan_mutants,
    run_mutation,
    select_mutants,
)
from audit.mutate._equivalent import DEFAULT_FILE, load_records, match_records, parse_records
from audit.cuda.tokens import TokenizeError, tokenize

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "mutate"


def changes(src: str, operator: str, symbol: str = "k") -> list[tuple[str, str]]:
    """(id, changed line of the mutant) for every mutant of ``operator``."""
    out = []
    for m in mutants_of_source(src, symbol, "k.cu", operators=[operator]):
        out.append((m.id, m.before_after[1]))
    return out


def kernel(body: str, params: str = "float* y, const float* x, int B, int cnt") -> str:
    return f'extern "C" __global__ void k({params}) {{\n{body}\n}}\n'


# ---------------------------------------------------------------------------------------------------
# one operator at a time


def test_aor_swaps_binary_arithmetic_only():
    src = kernel("    float* p = y + 1;\n    y[0] = -x[0] * x[1] / x[2];")
    assert changes(src, "aor") == [
        ("aor:2:18:0", "float* p = y - 1;"),
        ("aor:3:18:0", "y[0] = -x[0] / x[1] / x[2];"),
        ("aor:3:25:0", "y[0] = -x[0] * x[1] * x[2];"),
    ]  # the unary minus and the pointer declarator stay


def test_ror_swaps_comparisons_but_not_template_brackets():
    src = kernel("    if (B < cnt && B != 2) y[0] = reinterpret_cast<const float4*>(x)[0].x;\n    y[1] = f<3>(B) >= 1;")
    assert changes(src, "ror") == [
        ("ror:2:11:0", "if (B <= cnt && B != 2) y[0] = reinterpret_cast<const float4*>(x)[0].x;"),
        ("ror:2:22:0", "if (B < cnt && B == 2) y[0] = reinterpret_cast<const float4*>(x)[0].x;"),
        ("ror:3:20:0", "y[1] = f<3>(B) > 1;"),
    ]


def test_loop_moves_the_bound_inwards():
    src = kernel("    for (int i = 0; i < B * 2; ++i) y[i] = 0;\n    int h = 8;\n    while (h > 1) h >>= 1;")
    assert changes(src, "loop") == [
        ("loop:2:23:0", "for (int i = 0; i < (B * 2) - 1; ++i) y[i] = 0;"),
        ("loop:4:14:0", "while (h > 1 + 1) h >>= 1;"),
    ]


def test_guard_deletes_early_exits_and_unguards_bodies():
    src = kernel("    if (B <= 0) return;\n    if (cnt > 0) { y[0] = 1; continue; }\n    if (B > 4) y[1] = 2;\n    if (B > 5) y[2] = 3; else y[2] = 4;")
    got = changes(src, "guard")
    assert got == [("guard:2:5:0", ";"), ("guard:3:5:0", ";"), ("guard:4:5:0", "y[1] = 2;")]  # no mutant of the if with an else


def test_jump_removes_statements_but_not_no_ops():
    src = kernel("    for (int r = 0; r < B; ++r) {\n        if (r == 1) { y[r] = 0; continue; }\n        y[r] = 1;\n        continue;\n    }\n    return;")
    assert changes(src, "jump") == [("jump:3:33:0", "if (r == 1) { y[r] = 0; ; }")]  # the loop's last continue and the final return are no-ops


def test_accum_turns_accumulations_into_overwrites():
    src = kernel("    y[0] += x[0];\n    y[1] = fmaf(x[0], x[1], y[1]);\n    atomicAdd(y + 2, x[3]);")
    assert changes(src, "accum") == [
        ("accum:2:10:0", "y[0] = x[0];"),
        ("accum:3:12:0", "y[1] = (x[0]) * (x[1]);"),
        ("accum:4:5:0", "(*(y + 2) = (x[3]));"),
    ]


def test_sync_removes_barriers_and_waits():
    src = kernel("    __syncthreads();\n    cluster.sync();\n    sgemm::cp_async_wait<2>();\n    int n = __syncthreads_count(1);")
    assert changes(src, "sync") == [("sync:2:5:0", ";"), ("sync:3:13:0", ";"), ("sync:4:12:0", ";")]


def test_norm_drops_a_float_divisor_or_replaces_a_count_by_the_batch_size():
    src = kernel("    const float s = x[0];\n    y[0] = (x[1] - 1.0f) / (float)cnt;\n    y[1] = x[2] / s;\n    y[2] = B / 4;")
    assert changes(src, "norm") == [
        ("norm:3:26:0", "y[0] = (x[1] - 1.0f);"),
        ("norm:3:26:1", "y[0] = (x[1] - 1.0f) / (float)B;"),
        ("norm:4:17:0", "y[1] = x[2];"),
    ]  # B / 4 is an integer division, not a normaliser


def test_clamp_keeps_the_first_argument():
    assert changes(kernel("    y[0] = fmaxf(x[0], 1e-6f) + min(B, cnt);"), "clamp") == [
        ("clamp:2:12:0", "y[0] = (x[0]) + min(B, cnt);"),
        ("clamp:2:33:0", "y[0] = fmaxf(x[0], 1e-6f) + (B);"),
    ]


def test_const_scales_non_zero_float_literals_by_ten():
    assert changes(kernel("    y[0] = 2.0f * x[0] + 0.0f + 1e-6f + 3;"), "const") == [
        ("const:2:12:0", "y[0] = 20.0f * x[0] + 0.0f + 1e-6f + 3;"),
        ("const:2:12:1", "y[0] = 0.2f * x[0] + 0.0f + 1e-6f + 3;"),
        ("const:2:33:0", "y[0] = 2.0f * x[0] + 0.0f + 1e-5f + 3;"),
        ("const:2:33:1", "y[0] = 2.0f * x[0] + 0.0f + 1e-7f + 3;"),
    ]


def test_swap_exchanges_the_operands_of_whole_subtractions_and_divisions():
    src = kernel("    y[0] = (x[0] - x[1]) * 2;\n    y[1] = x[0] * x[1] - x[2];\n    y[2] = B ? x[3] / x[4] : 0;")
    assert changes(src, "swap") == [("swap:2:18:0", "y[0] = (x[1] - x[0]) * 2;"), ("swap:4:21:0", "y[2] = B ? x[4] / x[3] : 0;")]


def test_every_operator_has_an_id_purpose_and_example():
    assert [op.id for op in OPERATORS] == ["aor", "ror", "loop", "guard", "jump", "accum", "sync", "norm", "clamp", "const", "swap"]
    for op in OPERATORS:
        assert op.purpose.endswith(".") and op.example and "->" in op.example


# ---------------------------------------------------------------------------------------------------
# tokenizer and scope


def test_comments_strings_and_directives_are_never_mutated():
    src = (
        '#define TWICE(a) ((a) + (a))\n#pragma unroll 4\nextern "C" __global__ void k(float* y, int B) {\n'
        '    /* y[0] = B + 1; */ const char* s = "B < 1 + 2";  // B - 1\n    char c = \'+\';\n#pragma unroll\n'
        "    y[0] = B + 1;\n}\n"
    )
    ms = mutants_of_source(src, "k", "k.cu")
    assert [m.id for m in ms] == ["aor:7:14:0"]
    assert [t.text for t in tokenize(src) if t.kind == "string"] == ['"C"', '"B < 1 + 2"']


def test_tokenizer_keeps_positions_and_reports_unterminated_literals():
    toks = tokenize("a\n  += 1.5e-3f;")
    assert [(t.text, t.line, t.col) for t in toks] == [("a", 1, 1), ("+=", 2, 3), ("1.5e-3f", 2, 6), (";", 2, 13)]
    with pytest.raises(TokenizeError, match="unterminated string literal at line 2"):
        tokenize('x\n"abc\n')


def test_only_the_entry_and_what_it_reaches_in_the_same_file_are_mutated():
    src = (
        "__device__ int sq(int v) { return v * v; }\n__device__ int unused(int v) { return v + 1; }\n"
        "struct L { __device__ void load(int* p) { p[0] = 1 + 2; } };\n"
        'extern "C" __global__ void other(int* o) { o[0] = sq(1) + 5; }\n'
        'extern "C" __global__ void k(int* o) { L l; l.load(o); o[1] = sq(o[2]) - 3; }\n'
    )
    lines = sorted({m.line for m in mutants_of_source(src, "k", "k.cu")})
    assert lines == [1, 3, 5]  # sq, L::load and k itself; never unused() or the other kernel
    assert mutants_of_source(src, "missing", "k.cu") == []


# ---------------------------------------------------------------------------------------------------
# ids, diffs, determinism, selection


def test_ids_are_stable_and_the_diff_is_unified():
    src = (REPO / "kernels" / "strided_gather_kernel.cu").read_text()
    a = mutants_of_source(src, "strided_gather", "kernels/strided_gather_kernel.cu")
    b = mutants_of_source(src, "strided_gather", "kernels/strided_gather_kernel.cu")
    assert [m.id for m in a] == [m.id for m in b] and [m.diff for m in a] == [m.diff for m in b]
    assert all(re.fullmatch(r"[a-z]+:\d+:\d+:\d+", m.id) for m in a)
    assert len({m.mutated for m in a}) == len(a)  # no two mutants with the same text
    m = next(m for m in a if m.id == "ror:11:59:0")
    assert m.diff == (
        "--- a/kernels/strided_gather_kernel.cu\n+++ b/kernels/strided_gather_kernel.cu\n@@ -10,3 +10,3 @@\n"
        " strided_gather(const float* __restrict__ src, float* __restrict__ dst, int B, int row_stride, int col) {\n"
        "-    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B; b += gridDim.x * blockDim.x)\n"
        "+    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b <= B; b += gridDim.x * blockDim.x)\n"
        "         dst[b] = __ldg(src + (size_t)b * row_stride + col);\n"
    )


def test_selection_is_deterministic_capped_and_keeps_every_operator():
    cfg, cs = load_project(REPO)
    generated, _ = plan_mutants(cs, cfg, ["aux_trade_outcome_backward"])
    ms = generated["aux_trade_outcome_backward"]
    ops = {m.operator for m in ms}
    picked = select_mutants(ms, 20)
    assert len(picked) == 20 and picked == select_mutants(ms, 20)
    assert {m.operator for m in picked} == ops
    assert picked == [m for m in ms if m in picked]  # source order
    assert select_mutants(ms, None) == ms and select_mutants(ms, 10_000) == ms


def test_unknown_operator_and_kernel_are_usage_errors():
    cfg, cs = load_project(REPO)
    with pytest.raises(UsageError, match=r'--operators "xor" is not a mutation operator; the operators are "aor", "ror", '):
        plan_mutants(cs, cfg, ["strided_gather"], ["xor"])
    with pytest.raises(UsageError, match=r'"nope" is not a kernel of the contracts; the kernels are "aux_label_scale_ema_update"'):
        plan_mutants(cs, cfg, ["nope"])


@pytest.mark.parametrize("name", [k.name for k in load_project(REPO)[1].kernels])
def test_every_shipped_kernel_has_mutants(name):
    cfg, cs = load_project(REPO)
    generated, selected = plan_mutants(cs, cfg, [name])
    assert selected[name] == generated[name] and len(generated[name]) >= 5
    assert {m.operator for m in generated[name]} >= {"aor", "ror"}


def test_list_command_prints_every_mutant_without_gpu_or_compiler(capsys):
    assert main(["mutate", "--root", str(REPO), "strided_gather", "--list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "strided_gather: 9 mutant(s) in kernels/strided_gather_kernel.cu (aor 6, ror 1, loop 1, accum 1)"
    assert "  ror:11:59:0    kernels/strided_gather_kernel.cu:11  " in out and out.endswith("9 mutants.\n")
    assert main(["mutate", "--root", str(REPO), "--all", "--list", "--max-mutants", "12"]) == 0
    out = capsys.readouterr().out
    assert "aux_trade_outcome_backward: 12 of 279 mutant(s)" in out


def test_mutate_without_kernels_names_the_choices(capsys):
    assert main(["mutate", "--root", str(REPO)]) == 2
    assert capsys.readouterr().err.startswith('error: wireup mutate needs kernel names or --all; the kernels are "aux_label_scale_ema_update", ')


# ---------------------------------------------------------------------------------------------------
# equivalence records


def test_equivalence_records_need_their_keys():
    with pytest.raises(UsageError, match=r'^e.toml:1: equivalent\[0\] needs a non-empty string "reason"; the keys are "kernel", "id"'):
        parse_records('[[equivalent]]\nkernel = "k"\nid = "ror:1:1:0"\ncode = "x"\n', "e.toml")
    with pytest.raises(UsageError, match=r'^e.toml:1: equivalent\[0\] needs exactly one of "id" and "lines"'):
        parse_records('[[equivalent]]\nkernel = "k"\ncode = "x"\nreason = "r"\n', "e.toml")
    with pytest.raises(UsageError, match=r"^e.toml:1: equivalent\[0\] has id 'ror:1'; a mutant id reads"):
        parse_records('[[equivalent]]\nkernel = "k"\nid = "ror:1"\ncode = "x"\nreason = "r"\n', "e.toml")
    with pytest.raises(UsageError, match=r'^e.toml:1: unknown key "other"; the file holds only \[\[equivalent\]\] tables.'):
        parse_records('other = 1\n', "e.toml")


def test_equivalence_records_match_by_id_and_line_and_go_stale_when_the_source_changes():
    src = kernel("    y[0] = x[0] + 1;\n    y[1] = x[1] - 2;\n    y[2] = x[2] * 3;")
    ms = mutants_of_source(src, "k", "k.cu", "k", operators=["aor"])
    recs = parse_records(
        '[[equivalent]]\nkernel = "k"\nid = "aor:2:17:0"\ncode = "y[0] = x[0] + 1;"\nreason = "r1"\n'
        '[[equivalent]]\nkernel = "k"\nid = "aor:3:17:0"\ncode = "y[1] = x[1] + 2;"\nreason = "r2"\n'
        '[[equivalent]]\nkernel = "k"\nlines = [4, 4]\ncode = "y[2] = x[2] * 3;"\nreason = "r3"\n'
        '[[equivalent]]\nkernel = "k"\nid = "aor:9:1:0"\ncode = "nothing"\nreason = "r4"\n'
        '[[equivalent]]\nkernel = "other"\nid = "aor:9:1:0"\ncode = "nothing"\nreason = "r5"\n',
        "e.toml",
    )
    matched, stale = match_records("k", ms, recs)
    assert {i: r.reason for i, r in matched.items()} == {"aor:2:17:0": "r1", "aor:4:17:0": "r3"}
    assert stale == [
        'e.toml:6: equivalence record "aor:3:17:0" of kernel "k" quotes "y[1] = x[1] + 2;" but line 3 now reads "y[1] = x[1] - 2;"; '
        "the source changed, so the record is ignored until it is re-checked.",
        'e.toml:16: equivalence record "aor:9:1:0" of kernel "k" names no mutant of its current source; re-check it against `wireup mutate k --list`.',
    ]


def test_shipped_equivalence_records_are_current():
    cfg, cs = load_project(REPO)
    records = load_records(DEFAULT_FILE)
    assert records, "the shipped file holds the proven equivalents of the shipped kernels"
    kernels = sorted({r.kernel for r in records})
    generated, _ = plan_mutants(cs, cfg, kernels)
    for name in kernels:
        matched, stale = match_records(name, generated[name], records)
        assert stale == []
        assert matched


def test_normalized_ptx_ignores_line_info_comments_debug_sections_and_other_entries():
    a = (
        "//\n// Generated\n.version 9.0\n.visible .entry k(\n.param .u64 p\n)\n{\n\t.loc 1 3 5\n\tadd.s32 %r1, %r2, 1;\n}\n"
        ".visible .entry other(\n)\n{\n\tret;\n}\n"
        "\t.file 1 \"/tmp/a.cu\"\n\t.section .debug_str\n{\n.b8 95,90,78,51,52,95,73,78\n}\n"
    )
    b = a.replace(".loc 1 3 5", ".loc 1 3 9").replace("/tmp/a.cu", "/tmp/b.cu").replace("ret;", "exit;").replace("95,90", "1,2")
    assert normalized_ptx(a, "k") == normalized_ptx(b, "k")
    assert normalized_ptx(a, "k") != normalized_ptx(a.replace("%r2, 1", "%r2, 2"), "k")


# ---------------------------------------------------------------------------------------------------
# the pipeline on the emulated backend (stand-in kernels, no compiler, no GPU)


def _wrong(launch):
    out = launch.run_reference()
    launch.write_outputs({k: v * 1.5 for k, v in out.items()})


def test_pipeline_counts_caught_survivors_and_equivalents(tmp_path):
    eq = tmp_path / "eq.toml"
    eq.write_text(
        '[[equivalent]]\nkernel = "strided_gather"\nid = "loop:11:59:0"\n'
        'code = "for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B; b += gridDim.x * blockDim.x)"\nreason = "proof"\n'
    )
    survive = {"loop:11:59:0", "accum:11:66:0"}
    run = run_mutation(REPO, ["strided_gather"], equivalent_file=eq, stand_in=lambda m: {} if m.id in survive else {m.kernel: _wrong})
    (k,) = run.kernels
    assert (k.generated, k.selected, k.mutants, k.caught, k.equivalent, len(k.unclassified)) == (9, 9, 9, 7, 1, 1)
    assert k.by_check == {"VERIFY_REFERENCE": 7}
    assert k.score == pytest.approx(7 / 8)
    assert [o.mutant.id for o in k.unclassified] == ["accum:11:66:0"]
    assert run.exit_code == 1
    assert run.backend == "emulated" and run.settings["sizes"] is None  # the cases wireup verify plans for the kernel


def test_pipeline_json_is_what_the_report_reads(tmp_path, capsys):
    from audit.report.collect import _mutation_view

    sys.path.insert(0, str(DATA))
    try:
        code = main(["mutate", "--root", str(REPO), "strided_gather", "trade_outcome_label", "--stand-in", "stand_in:by_operator",
                     "--output-dir", str(tmp_path)])  # fmt: skip
    finally:
        sys.path.remove(str(DATA))
    assert code == 1  # the stand-in's loop mutant of trade_outcome_label has no equivalence record
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["kernel", "selected", "stillborn", "identical", "mutants", "caught", "equivalent", "survived", "score"]
    assert "strided_gather              9          0          0        9       7           1         1    88%" in out
    data = json.loads((tmp_path / "strided_gather.json").read_text())
    assert {"kernel", "mutants", "caught", "by_check", "survivors", "device", "date"} <= set(data)
    assert [(s["id"], s["equivalent"]) for s in data["survivors"]] == [("loop:11:59:0", False), ("accum:11:66:0", True)]
    assert data["survivors"][0]["reason"] == "missing check (or unproven equivalent)"
    assert data["survivors"][0]["diff"].startswith("--- a/kernels/strided_gather_kernel.cu\n")
    view = _mutation_view(tmp_path / "strided_gather.json")
    assert view.score == "7 of 8 caught (88%; 1 equivalent mutant not counted)" and view.by_check == [("VERIFY_REFERENCE", 7)]
    assert view.counted == 8  # the JSON's score: caught / (mutants - equivalent)
    assert [s.equivalent for s in view.survivors] == [False, True]


def test_json_is_deterministic_but_for_the_date(tmp_path):
    from audit.mutate import kernel_json

    runs = [run_mutation(REPO, ["trade_outcome_label"], stand_in=lambda m: {m.kernel: _wrong}) for _ in range(2)]
    a, b = (kernel_json(r.kernels[0], r) for r in runs)
    a.pop("date"), b.pop("date")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert runs[0].exit_code == 0


def test_no_gpu_is_one_sentence_and_exit_2(monkeypatch, capsys):
    from audit.runtime import _probe

    monkeypatch.setattr(_probe, "device_arch", lambda: (None, "no CUDA driver"))
    assert main(["mutate", "--root", str(REPO), "strided_gather"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "error: wireup mutate needs an NVIDIA GPU and PyCUDA or CuPy; none was found (no CUDA driver)."


# ---------------------------------------------------------------------------------------------------
# nvcc: every mutant of two small kernels compiles


@pytest.mark.nvcc
def test_every_mutant_of_the_small_kernels_compiles(tmp_path):
    from audit.config import with_overrides
    from audit.mutate import build_mutants

    cfg, cs = load_project(REPO)
    cfg = with_overrides(cfg, cache=str(tmp_path / "cache"))
    _, selected = plan_mutants(cs, cfg, ["strided_gather", "trade_outcome_label"])
    ms = [m for v in selected.values() for m in v]
    builds = build_mutants(cfg, cs, ms, cfg.arch, jobs=4)
    assert {k: b.status for k, b in builds.items() if b.status != "compiled"} == {}
    path = builds[ms[0].key].path
    assert path.parent == tmp_path / "cache" / "mutate" / "strided_gather" and path.read_text() == ms[0].mutated


@pytest.mark.nvcc
def test_compiled_pipeline_drops_identical_mutants_before_verifying(tmp_path, monkeypatch):
    """The real compile step, then the emulated backend (the reference stands in for every mutant)."""
    from audit import runtime
    from audit.config import with_overrides

    cfg, _ = load_project(REPO)
    cfg = with_overrides(cfg, cache=str(tmp_path / "cache"))
    monkeypatch.setattr(runtime, "gpu_target", lambda backends, c, cluster=None: (["emulated"], c.arch))
    run = run_mutation(REPO, ["aux_trade_outcome_loss_reduce"], operators=["aor"], config=cfg, sanitizers=(), slowdown=False)
    (k,) = run.kernels
    identical = [o.mutant.id for o in k.outcomes if o.status == "identical"]
    assert identical == ["aor:74:35:0"]  # b + 0 -> b - 0: the compiler proves it equivalent
    # the emulated backend catches nothing; five mutants of the label indexing read outside "labels" at a
    # small size, which OUT_OF_BOUNDS_ACCESS sees in their PTX (the 16-byte label loads one row off, say),
    # and six of the row indexing of a valid row read outside "logits": seen since the block run fills the
    # labels from their contract domain (a valid label takes add_row's path; unknown, it was stepped over)
    assert (k.selected, k.count("stillborn"), k.mutants, k.caught) == (24, 0, 23, 11)
    assert sorted(o.mutant.id for o in k.outcomes if o.status == "caught") == [
        "aor:26:31:0", "aor:32:30:0", "aor:62:53:0", "aor:68:34:0", "aor:68:38:0", "aor:69:57:0",
        "aor:75:35:0", "aor:76:35:0", "aor:77:35:0", "aor:80:31:0", "aor:80:86:0"]
    assert all(o.checks == ("OUT_OF_BOUNDS_ACCESS",) for o in k.outcomes if o.status == "caught")
    assert run.versions["nvcc"] and run.versions["arch"] == cfg.arch


@pytest.mark.nvcc
def test_build_only_fills_the_cache_a_gpu_run_then_finds(tmp_path):
    """``--build-only`` compiles exactly the mutants a run with the same selection compiles; a second
    pass (the GPU machine given that cache) starts no compiler."""
    from audit.config import with_overrides
    from audit.mutate import build_mutants, build_only

    cfg, cs = load_project(REPO)
    cfg = with_overrides(cfg, cache=str(tmp_path / "cache"))
    counts = build_only(REPO, ["strided_gather"], max_mutants=4, jobs=2, config=cfg)
    assert counts == {"compiled": 4}
    _, selected = plan_mutants(cs, cfg, ["strided_gather"], None, 4)
    events = []
    build_mutants(cfg, cs, selected["strided_gather"], cfg.arch, jobs=2, progress=events.append)
    assert [e["cached"] for e in events if e["event"] == "mutant_built"] == [True] * 4


@pytest.mark.nvcc
def test_build_only_archive_holds_exactly_the_entries_a_run_of_the_selection_finds(tmp_path):
    """``--build-only --archive FILE`` packs the cache entries of the selection's mutants and unmutated copy,
    named relative to the cache folder, and nothing else the cache holds; unpacked into an empty cache on
    another machine, the same selection's builds all come from it."""
    import tarfile

    from audit.compile import build_kernels
    from audit.config import with_overrides
    from audit.mutate import build_mutants, build_only
    from audit.mutate._build import build_original

    cfg, cs = load_project(REPO)
    first = with_overrides(cfg, cache=str(tmp_path / "here"))
    assert build_only(REPO, ["trade_outcome_label"], max_mutants=1, jobs=2, config=first) == {"compiled": 1}  # another entry
    archive = tmp_path / "out" / "builds.tgz"
    assert build_only(REPO, ["strided_gather"], max_mutants=3, jobs=2, config=first, archive=archive) == {"compiled": 3}
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "there", filter="data")
    assert names[-1] == "mutate-journal/static.builds.jsonl"  # the selection's static findings, made here
    names = names[:-1]
    entries = {n.split("/")[2] for n in names}
    assert all(n.startswith("build/" + cfg.arch + "/") for n in names) and len(entries) == 4  # 3 mutants + the unmutated copy
    assert names == sorted(names) and len(list((tmp_path / "here" / "build" / cfg.arch).iterdir())) == 6
    there = with_overrides(cfg, cache=str(tmp_path / "there"))
    _, selected = plan_mutants(cs, there, ["strided_gather"], None, 3)
    events = []
    builds = build_mutants(there, cs, selected["strided_gather"], there.arch, jobs=2, progress=events.append)
    assert [e["cached"] for e in events if e["event"] == "mutant_built"] == [True] * 3
    assert {k for b in builds.values() for k in b.keys} < entries
    original = build_original(there, cs, "strided_gather", selected["strided_gather"][0].original, there.arch)
    result = build_kernels(there, cs, arch=there.arch, jobs=1, sources=["strided_gather"], source_overrides={"strided_gather": original.path})
    assert result.kernel(cs.kernel("strided_gather"))[0].cached and set(original.keys) < entries
    # a run checks none of them statically again: every item's findings come from the archive's store (the
    # store's own file gone; the configuration, cache folder included, is the store's key, as on the GPU machine)
    from audit.mutate import _static
    from audit.mutate._run import _static_items

    builds = build_mutants(first, cs, selected["strided_gather"], first.arch, jobs=2)
    items = [it for m in selected["strided_gather"] for it in _static_items(m.key, m, builds[m.key])]
    items += _static_items("strided_gather", selected["strided_gather"][0], build_original(first, cs, "strided_gather", selected["strided_gather"][0].original, first.arch))
    journal = tmp_path / "here" / "mutate-journal"
    (journal / "static.jsonl").unlink()
    (journal / "static.builds.jsonl").write_bytes((tmp_path / "there" / "mutate-journal" / "static.builds.jsonl").read_bytes())
    assert len((journal / "static.builds.jsonl").read_text().splitlines()) == len(items) == 4

    def analysed(i):
        raise AssertionError("checked again")

    real = _static._check_item
    _static._check_item = analysed
    try:
        kept = _static.static_catches(first, cs, items, jobs=1)
    finally:
        _static._check_item = real
    assert kept == _static.static_catches(first, cs, items, jobs=1, cache=False)


def test_archive_needs_build_only_and_a_tar_name(capsys):
    assert main(["mutate", "--root", str(REPO), "strided_gather", "--archive", "b.txz"]) == 2
    assert capsys.readouterr().err.strip().endswith("--archive writes the builds of --build-only; give both, or neither.")
    assert main(["mutate", "--root", str(REPO), "strided_gather", "--build-only", "--archive", "b.zip"]) == 2
    assert capsys.readouterr().err.strip().endswith('--archive takes a file ending in .tar, .tar.gz, .tgz, .tar.xz or .txz, found "b.zip".')


@pytest.mark.nvcc
def test_build_only_cli_prints_what_it_built(capsys):
    assert main(["mutate", "--root", str(REPO), "strided_gather", "--max-mutants", "2", "--build-only", "--jobs", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "built 2 mutant(s) for sm_90 into the build cache: 2 compiled"
    assert re.fullmatch(r"ran the static checks on 3 build\(s\) in \d+\.\d s: 2 mutant\(s\) caught; the GPU run reads their findings from the build cache", out[1])
    assert main(["mutate", "--root", str(REPO), "strided_gather", "--max-mutants", "2", "--build-only", "--jobs", "2", "--no-static"]) == 0
    assert capsys.readouterr().out == "built 2 mutant(s) for sm_90 into the build cache: 2 compiled\n"
    assert main(["mutate", "--root", str(REPO), "strided_gather", "--no-static"]) == 2
    assert capsys.readouterr().err.strip().endswith("--no-static applies to --build-only (a GPU run checks its mutants statically first, or reads the findings --build-only kept); give it with --build-only.")


@pytest.mark.nvcc
def test_build_only_cli_prints_how_many_entries_it_archived(tmp_path, capsys):
    """The archive's line names its entries (two mutants and the unmutated copy) and where to unpack it."""
    import tarfile

    archive = tmp_path / "builds.tgz"
    assert main(["mutate", "--root", str(REPO), "strided_gather", "--max-mutants", "2", "--build-only", "--jobs", "2", "--archive", str(archive)]) == 0
    out = capsys.readouterr().out.splitlines()
    with tarfile.open(archive) as tar:
        entries = {n.split("/")[2] for n in tar.getnames() if n.startswith("build/")}
    assert len(entries) == 3
    assert out[2] == (f"wrote their 3 build cache entries (mutants and unmutated copies) to {archive} ({archive.stat().st_size / 1e6:.1f} MB): "
                      f"on the GPU machine, tar xf {archive} -C .wireup-cache")


def test_worker_counts_follow_the_cores_this_process_may_use(monkeypatch):
    from audit.mutate import _build, _run

    monkeypatch.setattr(_build.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert (_build.usable_cpus(), _run.default_workers(), _run.sanitizer_workers()) == (4, 1, 2)


# ---------------------------------------------------------------------------------------------------
# the baseline: the unmutated kernel, verified in the same call with the same settings


def wrong_baseline(kernel):
    """``--baseline-stand-in``: the unmutated kernel itself fails VERIFY_REFERENCE."""
    return {kernel: _wrong}


def test_a_passing_baseline_is_recorded_and_changes_nothing(tmp_path):
    run = run_mutation(REPO, ["strided_gather"], stand_in=lambda m: {m.kernel: _wrong})
    (k,) = run.kernels
    assert k.baseline == "pass" and k.scored and k.baseline_findings == []
    assert (k.mutants, k.caught, k.score, k.count("not_scored")) == (9, 9, 1.0, 0)
    assert run.exit_code == 0
    from audit.mutate import kernel_json

    data = kernel_json(k, run)
    assert (data["baseline"], data["baseline_findings"], data["not_scored"], data["score"]) == ("pass", [], 0, 1.0)


def test_a_failing_baseline_leaves_the_kernel_unscored(tmp_path):
    calls = []

    def baseline(name):
        calls.append(name)
        return {name: _wrong} if name == "strided_gather" else {}

    eq = tmp_path / "none.toml"
    run = run_mutation(REPO, ["strided_gather", "trade_outcome_label"], stand_in=lambda m: {} if m.operator == "loop" else {m.kernel: _wrong},
                       baseline_stand_in=baseline, equivalent_file=eq, sizes=(1, 37))  # fmt: skip
    assert calls == ["strided_gather", "trade_outcome_label"]
    bad, good = run.kernels
    assert bad.baseline == "fail" and not bad.scored
    assert bad.baseline_findings and all(f.startswith("VERIFY_REFERENCE: ") for f in bad.baseline_findings)
    assert {o.status for o in bad.outcomes} == {"not_scored"}
    assert (bad.mutants, bad.caught, bad.equivalent, len(bad.unclassified), bad.score, bad.count("not_scored")) == (0, 0, 0, 0, None, 9)
    assert bad.outcomes[0].detail == "not scored (the unmutated kernel fails these checks: VERIFY_REFERENCE)"
    # the other kernel is scored as usual: its loop mutant survives, unclassified
    assert good.baseline == "pass" and good.score == pytest.approx(11 / 12)
    assert run.exit_code == 1

    from audit.mutate import kernel_json, render_table

    data = kernel_json(bad, run)
    assert (data["baseline"], data["score"], data["mutants"], data["caught"], data["not_scored"]) == ("fail", None, 0, 0, 9)
    assert data["baseline_findings"][0].startswith("VERIFY_REFERENCE: ")
    assert data["survivors"] == []
    assert {r["status"] for r in data["results"]} == {"not_scored"}
    assert data["results"][0]["detail"] == "not scored (the unmutated kernel fails these checks: VERIFY_REFERENCE)"
    assert data["by_operator"]["aor"]["not_scored"] == 6
    assert kernel_json(good, run)["baseline"] == "pass"
    table = render_table(run)
    row = next(line for line in table.splitlines() if line.startswith("strided_gather"))
    assert row.split()[-2:] == ["not", "scored"] and row.split()[1:8] == ["9", "0", "0", "0", "0", "0", "0"]
    assert ("not scored: strided_gather: the unmutated kernel, verified with the same settings, fails VERIFY_REFERENCE, so a check "
            "catches every mutant trivially; its 9 verified mutant(s) are not scored.") in table
    total = next(line for line in table.splitlines() if line.startswith("total"))
    assert total.split()[-1] == "92%"  # 11 of 12: the unscored kernel counts nothing


def test_a_failing_baseline_on_the_command_line_exits_1_and_says_so(tmp_path, capsys):
    sys.path.insert(0, str(DATA))
    try:
        code = main(["mutate", "--root", str(REPO), "strided_gather", "--stand-in", "stand_in:by_operator",
                     "--baseline-stand-in", f"{__name__}:wrong_baseline", "--sizes", "1,37", "--output-dir", str(tmp_path)])  # fmt: skip
    finally:
        sys.path.remove(str(DATA))
    assert code == 1
    captured = capsys.readouterr()
    assert "baseline strided_gather/baseline  FAILS VERIFY_REFERENCE: not scored" in captured.err
    assert "not scored: strided_gather:" in captured.out
    data = json.loads((tmp_path / "strided_gather.json").read_text())
    assert (data["baseline"], data["score"], data["survivors"]) == ("fail", None, [])
    assert data["settings"]["sizes"] == [1, 37]


def test_a_baseline_that_wireup_cannot_verify_is_not_scored_either():
    from audit.mutate._run import _baseline
    from audit.runtime import VariantOutcome

    assert _baseline(VariantOutcome("k/baseline", error="Traceback ...\nboom")) == ("error", ["error: Traceback ..."])
    from audit.mutate._results import not_scored_reason

    assert not_scored_reason("error", ["error: x"]) == "not scored (wireup failed while verifying the unmutated kernel)"
    assert not_scored_reason("pass", []) == ""


def test_racecheck_runs_the_baseline_of_each_kernel_with_a_surviving_barrier_mutant(monkeypatch, tmp_path):
    """The racecheck pass (GPU only) checks the unmutated copy too: a hazard it reports itself would
    'catch' every surviving sync mutant, so it makes the baseline fail."""
    from types import SimpleNamespace

    from audit import runtime
    from audit.mutate._run import _sanitize

    cfg, cs = load_project(REPO)
    ms = [m for m in plan_mutants(cs, cfg, ["aux_label_scale_ema_update"], ["sync"])[1]["aux_label_scale_ema_update"]][:2]
    paths = {m.key: tmp_path / f"{m.file_stem}.cu" for m in ms}
    original = tmp_path / "original.cu"
    seen = []

    def fake_verify(root, kernels, source_overrides, sanitizer, sizes, **kw):
        seen.append((kernels[0], source_overrides[kernels[0]].name, sanitizer, tuple(sizes)))
        hazard = source_overrides[kernels[0]] in (original, paths[ms[0].key])
        f = SimpleNamespace(rule="SANITIZER_RACECHECK", message="a hazard", severity=SimpleNamespace(value="error"))
        return SimpleNamespace(result=SimpleNamespace(findings=[f] if hazard else []))

    monkeypatch.setattr(runtime, "verify", fake_verify)
    found, bases = _sanitize(cfg, "racecheck", ms, paths, {"aux_label_scale_ema_update": original}, ["pycuda"], 0, lambda ev: None)
    assert sorted(seen) == sorted([("aux_label_scale_ema_update", p.name, "racecheck", (37, 300)) for p in [original, *paths.values()]])
    assert found == {ms[0].key: (("SANITIZER_RACECHECK",), "a hazard")}
    assert bases == {"aux_label_scale_ema_update": [("SANITIZER_RACECHECK", "a hazard")]}


def test_a_sanitizer_pass_runs_the_lost_barriers_first(monkeypatch, tmp_path):
    """A pass cut short by a call's limit (racecheck of the trade-outcome backward, 7 December: no run ended
    in 388 s) has then judged the survivors likeliest to be caught: after the baseline, the sync mutants."""
    from types import SimpleNamespace

    from audit import runtime
    from audit.mutate._run import _sanitize

    cfg, cs = load_project(REPO)
    ms = plan_mutants(cs, cfg, ["aux_label_scale_ema_update"], ["sync", "guard"])[1]["aux_label_scale_ema_update"]
    assert [m.operator for m in ms[:4]] == ["guard", "sync", "guard", "sync"]
    paths = {m.key: tmp_path / f"{m.file_stem}.cu" for m in ms}
    original = tmp_path / "original.cu"
    seen = []

    def fake_verify(root, kernels, source_overrides, sanitizer, sizes, **kw):
        seen.append(source_overrides[kernels[0]].name)
        return SimpleNamespace(result=SimpleNamespace(findings=[]))

    monkeypatch.setattr(runtime, "verify", fake_verify)
    _sanitize(cfg, "racecheck", ms, paths, {"aux_label_scale_ema_update": original}, ["pycuda"], 0, lambda ev: None, workers=1)
    order = [m.operator for m in sorted(ms, key=lambda m: seen.index(paths[m.key].name))]
    assert seen[0] == original.name and order == sorted(order, key=lambda op: op != "sync") and "sync" in order and "guard" in order


def test_a_sanitizer_pass_runs_the_survivors_no_record_claims_before_the_claimed_ones(monkeypatch, tmp_path):
    """After the lost barriers, the survivors no equivalence record claims (those the score counts): the
    trade-outcome backward's racecheck takes ~150 s a run on the H100, and a pass cut short by a call's limit
    had spent it on claimed mutants (7 December)."""
    from types import SimpleNamespace

    from audit import runtime
    from audit.mutate._run import _sanitize

    cfg, cs = load_project(REPO)
    ms = plan_mutants(cs, cfg, ["aux_label_scale_ema_update"], ["sync", "guard"])[1]["aux_label_scale_ema_update"]
    paths = {m.key: tmp_path / f"{m.file_stem}.cu" for m in ms}
    seen = []

    def fake_verify(root, kernels, source_overrides, sanitizer, sizes, **kw):
        seen.append(source_overrides[kernels[0]].name)
        return SimpleNamespace(result=SimpleNamespace(findings=[]))

    monkeypatch.setattr(runtime, "verify", fake_verify)
    claimed = {ms[0].key, ms[1].key}  # a guard and a sync mutant
    _sanitize(cfg, "racecheck", ms, paths, {"aux_label_scale_ema_update": tmp_path / "original.cu"}, ["pycuda"], 0, lambda ev: None,
              workers=1, claimed=claimed)
    runs = [(m.operator == "sync", m.key in claimed) for m in sorted(ms, key=lambda m: seen.index(paths[m.key].name))]
    assert runs == sorted(runs, key=lambda r: (not r[0], r[1])) and len(set(runs)) == 4


def test_sanitizer_runs_are_journaled_and_a_cut_short_pass_resumes(monkeypatch, tmp_path):
    """A sanitizer pass cut short (a CUTLASS kernel under racecheck takes a minute a run) keeps each conclusive
    run in its journal: the next pass with the same builds and settings takes those and runs only the rest;
    another build (identity) runs again, and an inconclusive run is never kept."""
    from types import SimpleNamespace

    from audit import runtime
    from audit.mutate._run import _sanitize

    cfg, cs = load_project(REPO)
    ms = [m for m in plan_mutants(cs, cfg, ["aux_label_scale_ema_update"], ["sync", "guard"])[1]["aux_label_scale_ema_update"]][:3]
    assert len(ms) == 3
    ms.sort(key=lambda m: m.operator != "sync")  # the order the pass runs them in: lost barriers first
    paths = {m.key: tmp_path / f"{m.file_stem}.cu" for m in ms}
    original = tmp_path / "original.cu"
    base = "aux_label_scale_ema_update/baseline"
    idents = {base: "b0", **{m.key: f"m{i}" for i, m in enumerate(ms)}}
    seen: list[str] = []
    cut = {"after": 2}

    def fake_verify(root, kernels, source_overrides, sanitizer, sizes, **kw):
        name = source_overrides[kernels[0]].name
        if len(seen) == cut["after"]:
            raise KeyboardInterrupt  # the call's limit
        seen.append(name)
        if name == paths[ms[2].key].name:  # the instrumented run timed out: no verdict of the tool's own
            f = SimpleNamespace(rule="VERIFY_TIMEOUT", message="slow", severity=SimpleNamespace(value="error"))
        else:
            f = SimpleNamespace(rule="SANITIZER_RACECHECK", message="a hazard", severity=SimpleNamespace(value="error"))
        hazard = name == paths[ms[0].key].name or f.rule == "VERIFY_TIMEOUT"
        return SimpleNamespace(result=SimpleNamespace(findings=[f] if hazard else []))

    monkeypatch.setattr(runtime, "verify", fake_verify)
    journal = tmp_path / "k.sanitizers.jsonl"
    events: list[dict] = []
    args = (cfg, "racecheck", ms, paths, {"aux_label_scale_ema_update": original}, ["pycuda"], 0, events.append)
    try:
        _sanitize(*args, workers=1, journal=journal, identities=idents)
    except KeyboardInterrupt:
        pass
    assert seen == [original.name, paths[ms[0].key].name] and len(journal.read_text().splitlines()) == 2
    cut["after"] = 99
    seen.clear()
    found, bases = _sanitize(*args, workers=1, journal=journal, identities=idents)
    assert seen == [paths[ms[1].key].name, paths[ms[2].key].name]  # the two journaled runs were not run again
    assert found == {ms[0].key: (("SANITIZER_RACECHECK",), "a hazard")} and bases == {"aux_label_scale_ema_update": None}
    assert [e["verdict"] for e in events if e["variant"] == ms[0].key][-1] == "caught (from the journal)"
    assert len(journal.read_text().splitlines()) == 3  # the timed-out run is not kept
    seen.clear()
    _sanitize(*args, workers=1, journal=journal, identities=idents)
    assert seen == [paths[ms[2].key].name]
    seen.clear()
    _sanitize(*args, workers=1, journal=journal, identities={**idents, ms[1].key: "rebuilt"})  # another build of ms[1]
    assert seen == [paths[ms[1].key].name, paths[ms[2].key].name]
    seen.clear()
    import audit.mutate._run as mrun

    monkeypatch.setattr(mrun, "SANITIZER_PLAN", mrun.SANITIZER_PLAN + 1)  # what a run covers changed: nothing resumes
    _sanitize(*args, workers=1, journal=journal, identities=idents)
    assert seen == [original.name, *(paths[m.key].name for m in ms)]


def test_a_sanitizer_verdict_journaled_under_a_fuller_plan_stands(monkeypatch, tmp_path):
    """Plan 3 launches each case's inputs once (verify's repeats=False); plan 2 ran those launches and runs B
    and C besides. A plan-2 verdict in the journal is taken under plan 3 and says so; what no journal holds
    runs under plan 3, with repeats=False, and is kept under plan 3; without the fuller plan nothing resumes."""
    from audit import runtime
    import audit.mutate._run as mrun
    from audit.mutate._run import _sanitize

    cfg, cs = load_project(REPO)
    ms = [m for m in plan_mutants(cs, cfg, ["aux_label_scale_ema_update"], ["sync", "guard"])[1]["aux_label_scale_ema_update"]][:3]
    paths = {m.key: tmp_path / f"{m.file_stem}.cu" for m in ms}
    original = tmp_path / "original.cu"
    idents = {"aux_label_scale_ema_update/baseline": "b0", **{m.key: f"m{i}" for i, m in enumerate(ms)}}
    calls: list[tuple[str, object]] = []

    def fake_verify(root, kernels, source_overrides, sanitizer, sizes, **kw):
        name = source_overrides[kernels[0]].name
        calls.append((name, kw.get("repeats")))
        f = SimpleNamespace(rule="SANITIZER_RACECHECK", message="a hazard", severity=SimpleNamespace(value="error"))
        return SimpleNamespace(result=SimpleNamespace(findings=[f] if name == paths[ms[0].key].name else []))

    monkeypatch.setattr(runtime, "verify", fake_verify)
    journal, events = tmp_path / "k.sanitizers.jsonl", []
    run = lambda mutants: _sanitize(cfg, "racecheck", mutants, paths, {"aux_label_scale_ema_update": original}, ["pycuda"], 0,  # noqa: E731
                                    events.append, workers=1, journal=journal, identities=idents)  # fmt: skip
    monkeypatch.setattr(mrun, "SANITIZER_PLAN", 2)
    monkeypatch.setattr(mrun, "FULLER_PLANS", {})
    run(ms[:2])  # the baseline and two mutants, journaled under plan 2
    assert len(journal.read_text().splitlines()) == 3
    monkeypatch.setattr(mrun, "SANITIZER_PLAN", 3)
    monkeypatch.setattr(mrun, "FULLER_PLANS", {3: (2,)})
    calls.clear()
    found, bases = run(ms)
    assert calls == [(paths[ms[2].key].name, False)]  # only the unjournaled mutant ran, each case's inputs once
    assert found == {ms[0].key: (("SANITIZER_RACECHECK",), "a hazard")} and bases == {"aux_label_scale_ema_update": None}
    verdict = {e["variant"]: e["verdict"] for e in events if e.get("event") == "sanitizer"}
    assert verdict[ms[0].key] == "caught (from the journal, a run of the fuller plan 2)"
    assert verdict[ms[1].key] == "survived (from the journal, a run of the fuller plan 2)"
    assert verdict[ms[2].key] == "survived"
    # each run's wall seconds ride on its event (what a plan costs is measured from them); a journaled one has none
    secs = {e["variant"]: e.get("seconds") for e in events if e.get("event") == "sanitizer"}
    assert isinstance(secs[ms[2].key], float) and secs[ms[2].key] >= 0 and secs[ms[0].key] is None
    assert len(journal.read_text().splitlines()) == 4
    calls.clear()
    events.clear()
    run(ms)
    assert calls == [] and {e["variant"]: e["verdict"] for e in events if e.get("event") == "sanitizer"}[ms[2].key] == "survived (from the journal)"
    monkeypatch.setattr(mrun, "FULLER_PLANS", {})
    calls.clear()
    run(ms)
    assert sorted(calls) == sorted([(p.name, False) for p in [original, paths[ms[0].key], paths[ms[1].key]]])


def test_the_report_shows_an_unscored_kernel_as_not_scored(tmp_path):
    from audit.report.collect import _mutation_view

    run = run_mutation(REPO, ["strided_gather"], stand_in=lambda m: {m.kernel: _wrong}, baseline_stand_in=wrong_baseline, sizes=(1,))
    from audit.mutate import write_kernel_json

    path = write_kernel_json(run.kernels[0], run, tmp_path)
    view = _mutation_view(path)
    assert view.score == "not scored: the unmutated kernel fails its checks in that run (VERIFY_REFERENCE)"
    assert view.counted is None and view.survivors == []
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "baseline": "pass", "mutants": 0}))
    assert _mutation_view(path).score == "not scored (no mutant counts)"


# ---------------------------------------------------------------------------------------------------
# after the numeric checks: MUTATE_SLOWDOWN and the compute-sanitizer passes of the survivors


def _slow(launch):
    import time as _time

    _time.sleep(0.02)  # the reference's numbers, 20 ms late: far more work for the same results
    launch.write_outputs(launch.run_reference())


def test_a_survivor_far_slower_than_its_baseline_is_caught_by_mutate_slowdown(tmp_path):
    slow, same = "loop:11:59:0", "accum:11:66:0"
    stand_in = {slow: {"strided_gather": _slow}, same: {}}
    run = run_mutation(REPO, ["strided_gather"], stand_in=lambda m: stand_in.get(m.id, {m.kernel: _wrong}),
                       equivalent_file=tmp_path / "none.toml", sizes=(1, 37), slowdown=True)  # fmt: skip
    (k,) = run.kernels
    by_id = {o.mutant.id: o for o in k.outcomes}
    assert by_id[slow].status == "caught" and by_id[slow].checks == ("MUTATE_SLOWDOWN",)
    assert re.fullmatch(r"its launch at B=(1|37)( \(S=\d+\))? on emulated takes \d+(\.\d+)? ms, \d+ times the unmutated kernel's [\d.]+ (ms|us): "
                        r"the same results for far more work", by_id[slow].detail), by_id[slow].detail  # fmt: skip
    assert by_id[same].status == "survived"  # the same cost: no slowdown
    assert k.by_check == {"MUTATE_SLOWDOWN": 1, "VERIFY_REFERENCE": 7}
    assert run.settings["slowdown"] == {"ratio": 10.0, "seconds": 0.001, "passes": 3}
    # off by default without a GPU: emulated timings say nothing about kernels
    run = run_mutation(REPO, ["strided_gather"], stand_in=lambda m: stand_in.get(m.id, {m.kernel: _wrong}),
                       equivalent_file=tmp_path / "none.toml", sizes=(1,))  # fmt: skip
    assert {o.mutant.id: o.status for o in run.kernels[0].outcomes}[slow] == "survived" and run.settings["slowdown"] is None


def test_the_slowdown_passes_keep_each_suspects_outcome_and_a_resumed_run_takes_it(tmp_path, monkeypatch):
    """A resumed run does not time its suspects alone again (on the H100, 6 December: ~140 s a resume for 49
    suspects): each one's outcome is journaled under a key of its build and the run's settings."""
    from audit.mutate import _run
    from audit.runtime import VerdictJournal

    slow, same = "loop:11:59:0", "accum:11:66:0"
    calls = {"n": 0}

    def slow_launch(launch):
        calls["n"] += 1
        _slow(launch)

    stand_in = {slow: {"strided_gather": slow_launch}, same: {}}
    book = VerdictJournal(tmp_path / "k.sanitizers.jsonl")
    monkeypatch.setattr(_run, "_slowdown_journal", lambda *a, **kw: (book, {f"strided_gather/{slow}": "key-of-slow"}))

    def run():
        return run_mutation(REPO, ["strided_gather"], stand_in=lambda m: stand_in.get(m.id, {m.kernel: _wrong}),
                            equivalent_file=tmp_path / "none.toml", sizes=(1, 37), slowdown=True)  # fmt: skip

    first = {o.mutant.id: o for o in run().kernels[0].outcomes}
    assert first[slow].status == "caught" and first[slow].checks == ("MUTATE_SLOWDOWN",)
    done = book.load()
    assert done["key-of-slow"] == [("MUTATE_SLOWDOWN", first[slow].detail)]
    # each pass it was slower in, journaled as it ended (the first pass's message is the verdict's)
    assert [done.get(_run._pass_key("key-of-slow", n)) is not None for n in range(3)] == [True] * 3 and len(done) == 4
    assert done[_run._pass_key("key-of-slow", 0)] == [("MUTATE_SLOWDOWN", first[slow].detail)]
    launches = calls["n"]
    again = {o.mutant.id: o for o in run().kernels[0].outcomes}
    assert (again[slow].status, again[slow].checks, again[slow].detail) == ("caught", ("MUTATE_SLOWDOWN",), first[slow].detail)
    # the second run verified the mutant once (its numbers) and timed it alone in no pass
    assert calls["n"] - launches < launches / 2, (launches, calls["n"])
    # a suspect dropped in a pass is kept as not slower, and stays dropped
    book.remove()
    book.append("key-of-slow", f"strided_gather/{slow}", [])
    assert {o.mutant.id: o.status for o in run().kernels[0].outcomes}[slow] == "survived"
    # a run cut off after two passes (the header sets' call of 7 December kept nothing of ~475 s of timing):
    # the resumed run times the suspect in the third pass alone, and takes the first pass's message
    book.remove()
    for n in range(2):
        book.append(_run._pass_key("key-of-slow", n), f"strided_gather/{slow} pass {n + 1}", [("MUTATE_SLOWDOWN", first[slow].detail)])
    calls["n"] = 0
    resumed = {o.mutant.id: o for o in run().kernels[0].outcomes}
    assert (resumed[slow].status, resumed[slow].detail) == ("caught", first[slow].detail)
    one_pass = calls["n"]
    book.remove()
    calls["n"] = 0
    run()
    assert one_pass < calls["n"], (one_pass, calls["n"])  # fewer launches than all three passes'


def test_the_slowdown_suspects_are_timed_a_few_at_a_time(tmp_path, monkeypatch):
    """Each verification of the timing passes takes at most SLOWDOWN_CHUNK suspects (with their kernels'
    baselines before and after), so a call cut off keeps the chunks that ended."""
    from audit import runtime
    from audit.mutate import _run

    sizes_of_calls = []
    real = runtime.verify_many

    def spy(root, variants, **kw):
        sizes_of_calls.append(len([v for v in variants if "/baseline" not in v.id]))
        return real(root, variants, **kw)

    monkeypatch.setattr(runtime, "verify_many", spy)
    monkeypatch.setattr(_run, "SLOWDOWN_CHUNK", 1)
    slow = {"loop:11:59:0", "accum:11:66:0"}
    run_mutation(REPO, ["strided_gather"], stand_in=lambda m: {"strided_gather": _slow} if m.id in slow else {m.kernel: _wrong},
                 equivalent_file=tmp_path / "none.toml", sizes=(1, 37), slowdown=True)  # fmt: skip
    assert sizes_of_calls[1:] == [1] * 6  # two suspects, one per verification, three passes


def test_slower_needs_both_the_ratio_and_the_absolute_time():
    from types import SimpleNamespace

    from audit.mutate._run import slower

    def outcome(times):
        r = SimpleNamespace(subject="k", backend="pycuda", launch_seconds=times)
        return SimpleNamespace(outcome=SimpleNamespace(run=SimpleNamespace(results=[r])))

    base = outcome({"B=1": 10e-6, "B=4096": 40e-6})
    assert slower(outcome({"B=1": 900e-6, "B=4096": 41e-6}), base) == ""  # 90 times, but 0.9 ms: launch noise
    assert slower(outcome({"B=1": 11e-6, "B=4096": 390e-6}), base) == ""  # 0.35 ms more, under 10 times
    assert slower(outcome({"B=1": 10e-6, "B=4096": 10.04e-3}), base) == (
        "its launch at B=4096 on pycuda takes 10 ms, 251 times the unmutated kernel's 40 us: the same results for far more work"
    )
    assert slower(outcome({"B=65536": 1.0}), base) == ""  # no baseline time for that case


def test_slow_sizes_are_the_sizes_of_the_slow_cases():
    from types import SimpleNamespace

    from audit.mutate._run import slow_sizes

    def outcome(times):
        r = SimpleNamespace(subject="k", backend="pycuda", launch_seconds=times)
        return SimpleNamespace(outcome=SimpleNamespace(run=SimpleNamespace(results=[r])))

    base = outcome({"B=1": 10e-6, "B=300 (K=3)": 40e-6, "B=4096": 40e-6, "B=4,T=17": 10e-6})
    assert slow_sizes(outcome({"B=1": 10e-6, "B=300 (K=3)": 10e-3, "B=4096": 20e-3}), base) == (300, 4096)
    assert slow_sizes(outcome({"B=1": 11e-6}), base) == ()  # none slower
    assert slow_sizes(outcome({"B=300 (K=3)": 10e-3, "B=4,T=17": 5e-3}), base) == ()  # a case of two dims: the run's sizes


def _slow_at_37(launch):
    if launch.meta.label.startswith("B=37"):
        import time as _time

        _time.sleep(0.02)
    launch.write_outputs(launch.run_reference())


def test_a_suspect_is_timed_alone_at_the_sizes_it_was_slow_at(tmp_path, monkeypatch):
    """Timed alone, a suspect runs only the sizes of the cases it was slow in (its whole sweep again took
    ~8 s per suspect on the H100); where those sizes do not run its slow case, the run's sizes, in the
    same pass."""
    from audit import runtime
    from audit.mutate import _run

    calls = []
    real = runtime.verify_many

    def spy(root, variants, **kw):  # every call after the first (which verifies every mutant): the timings alone
        calls.append(tuple(kw["sizes"]))
        return real(root, variants, **kw)

    monkeypatch.setattr(runtime, "verify_many", spy)
    slow = "loop:11:59:0"

    def run():
        return run_mutation(REPO, ["strided_gather"], stand_in=lambda m: {"strided_gather": _slow_at_37} if m.id == slow else {m.kernel: _wrong},
                            equivalent_file=tmp_path / "none.toml", sizes=(1, 37), slowdown=True)  # fmt: skip

    (o,) = [o for o in run().kernels[0].outcomes if o.mutant.id == slow]
    assert o.status == "caught" and o.checks == ("MUTATE_SLOWDOWN",) and o.detail.startswith("its launch at B=37")
    assert calls == [(1, 37)] + [(37,)] * 3  # then three passes, each at B = 37 alone
    # sizes that do not run the slow case (here B = 1 for a mutant slow at 37): timed again at the run's sizes
    calls.clear()
    monkeypatch.setattr(_run, "slow_sizes", lambda mutant, baseline: (1,))
    (o,) = [o for o in run().kernels[0].outcomes if o.mutant.id == slow]
    assert o.status == "caught" and o.checks == ("MUTATE_SLOWDOWN",)
    assert calls == [(1, 37), (1,), (1, 37), (1, 37), (1, 37)]


def test_survivors_go_through_memcheck_then_racecheck_where_shared_memory_is_used(monkeypatch, tmp_path):
    """memcheck takes every numeric survivor; racecheck those memcheck left of kernels that use shared
    memory, and every lost barrier; a report on the unmutated copy makes the baseline fail."""
    from audit.mutate import _run

    calls = []

    def fake_sanitize(cfg, tool, mutants, paths, originals, backends, seed, progress, workers=4, **kw):
        calls.append((tool, sorted(m.id for m in mutants)))
        ids = sorted(m.id for m in mutants)
        found = {m.key: ((f"SANITIZER_{tool.upper()}",), f"{tool} report") for m in mutants if m.id == ids[0]}
        return found, {"trade_outcome_label": None}

    monkeypatch.setattr(_run, "_sanitize", fake_sanitize)
    monkeypatch.setattr(_run, "_uses_shared", lambda cfg, cs, kernel, arch: True)
    survive = {"loop", "accum", "guard"}
    run = run_mutation(REPO, ["trade_outcome_label"], stand_in=lambda m: {} if m.operator in survive else {m.kernel: _wrong},
                       equivalent_file=tmp_path / "none.toml", sizes=(1,), sanitizers=("memcheck", "racecheck"))  # fmt: skip
    (k,) = run.kernels
    survivors = sorted(o.mutant.id for o in k.outcomes if o.mutant.operator in survive)
    assert len(survivors) >= 3
    assert calls == [("memcheck", survivors), ("racecheck", survivors[1:])]
    statuses = {o.mutant.id: (o.status, o.checks) for o in k.outcomes}
    assert statuses[survivors[0]] == ("caught", ("SANITIZER_MEMCHECK",))
    assert statuses[survivors[1]] == ("caught", ("SANITIZER_RACECHECK",))
    assert all(statuses[i][0] == "survived" for i in survivors[2:])
    assert run.settings["sanitizers"] == {"memcheck": [1, 37, 300, 4096], "racecheck": [37, 300]}
    # racecheck sees shared memory only: a kernel without it sends no survivor there
    calls.clear()
    monkeypatch.setattr(_run, "_uses_shared", lambda cfg, cs, kernel, arch: False)
    run_mutation(REPO, ["trade_outcome_label"], stand_in=lambda m: {} if m.operator in survive else {m.kernel: _wrong},
                 equivalent_file=tmp_path / "none.toml", sizes=(1,), sanitizers=("memcheck", "racecheck"))  # fmt: skip
    assert calls == [("memcheck", survivors), ("racecheck", [])]
    # the perturbed schedules come last, whatever the order given, and take every survivor left
    calls.clear()
    run = run_mutation(REPO, ["trade_outcome_label"], stand_in=lambda m: {} if m.operator in survive else {m.kernel: _wrong},
                       equivalent_file=tmp_path / "none.toml", sizes=(1,), sanitizers=("perturb", "memcheck"))  # fmt: skip
    assert calls == [("memcheck", survivors), ("perturb", survivors[1:])]
    assert run.settings["sanitizers"] == {"memcheck": [1, 37, 300, 4096], "perturb": [1, 37, 300, 4096]}


def test_sanitizer_workers_sets_the_processes_of_a_pass_at_a_time(monkeypatch, tmp_path, capsys):
    """A sanitizer run's verdict is kept only when it ends: on the H100 (7 December) 8 racecheck runs of the
    trade-outcome backward side by side ran 388 s with none ended. --sanitizer-workers sets how many run at once."""
    from audit.mutate import _run

    seen = []
    monkeypatch.setattr(_run, "_sanitize", lambda cfg, tool, mutants, paths, originals, backends, seed, progress, workers=4, **kw: (seen.append(workers), ({}, {}))[1])
    monkeypatch.setattr(_run, "_uses_shared", lambda cfg, cs, kernel, arch: True)
    survive = {"loop", "accum", "guard"}

    def run(**kw):
        return run_mutation(REPO, ["trade_outcome_label"], stand_in=lambda m: {} if m.operator in survive else {m.kernel: _wrong},
                            equivalent_file=tmp_path / "none.toml", sizes=(1,), sanitizers=("memcheck", "racecheck"), **kw)  # fmt: skip

    run(sanitizer_processes=2)
    assert seen == [2, 2]
    seen.clear()
    run()
    assert seen == [_run.sanitizer_workers()] * 2
    with pytest.raises(UsageError, match=re.escape("--sanitizer-workers takes a positive number, found 0.")):
        run(sanitizer_processes=0)
    sys.path.insert(0, str(DATA))
    try:
        code = main(["mutate", "--root", str(REPO), "strided_gather", "--sanitizer-workers", "0", "--stand-in", "stand_in:by_operator", "--output-dir", str(tmp_path)])
    finally:
        sys.path.remove(str(DATA))
    assert code == 2
    assert "--sanitizer-workers takes a positive number, found 0." in capsys.readouterr().err


def test_a_sanitizer_report_on_the_unmutated_copy_leaves_the_kernel_unscored(monkeypatch, tmp_path):
    from audit.mutate import _run

    monkeypatch.setattr(_run, "_sanitize", lambda cfg, tool, mutants, *a, **kw: ({}, {"trade_outcome_label": [("SANITIZER_MEMCHECK", "a read past the end")]}))
    run = run_mutation(REPO, ["trade_outcome_label"], stand_in=lambda m: {}, equivalent_file=tmp_path / "none.toml", sizes=(1,), sanitizers=("memcheck",))
    (k,) = run.kernels
    assert (k.baseline, k.baseline_findings, k.score) == ("fail", ["SANITIZER_MEMCHECK: a read past the end"], None)


def test_sanitizers_argument_is_checked(capsys):
    with pytest.raises(UsageError, match=re.escape("""--sanitizers takes 'memcheck', 'racecheck', 'perturb' (or "none"), found "initcheck".""")):
        run_mutation(REPO, ["strided_gather"], stand_in=lambda m: {}, sanitizers=("initcheck",))


@pytest.mark.nvcc
def test_static_checks_catch_the_races_and_overruns_no_run_can_see(tmp_path, monkeypatch):
    """The survivors of the first H200 run that no GPU check could catch: a deleted single-thread guard
    around an ISV update (STORE_RACE on the PTX) and a loop bound one past a local array (LOCAL_ARRAY_BOUNDS
    on the source). Caught before any verification; the unmutated copies pass both checks."""
    from audit import runtime
    from audit.config import with_overrides

    cfg, _ = load_project(REPO)
    cfg = with_overrides(cfg, cache=str(tmp_path / "cache"))
    monkeypatch.setattr(runtime, "gpu_target", lambda backends, c, cluster=None: (["emulated"], c.arch))
    run = run_mutation(REPO, ["aux_heads_loss_ema_update", "aux_label_scale_ema_update"], operators=["guard", "ror"], config=cfg,
                       sanitizers=(), slowdown=False, sizes=(1,))  # fmt: skip
    heads, scale = run.kernels
    assert heads.baseline == "pass" and scale.baseline == "pass"
    got = {(k.kernel, o.mutant.id): (o.status, o.checks) for k in run.kernels for o in k.outcomes if o.checks and o.checks[0] in ("STORE_RACE", "LOCAL_ARRAY_BOUNDS")}
    # every thread of the block now also loads, blends and stores the one ISV slot: lost updates besides
    assert got[("aux_heads_loss_ema_update", "guard:76:5:0")] == ("caught", ("STORE_RACE", "GLOBAL_RMW_RACE"))
    assert got[("aux_heads_loss_ema_update", "ror:76:21:0")] == ("caught", ("STORE_RACE", "GLOBAL_RMW_RACE"))
    assert got[("aux_label_scale_ema_update", "guard:66:5:0")] == ("caught", ("STORE_RACE", "GLOBAL_RMW_RACE"))
    assert got[("aux_label_scale_ema_update", "ror:47:27:0")] == ("caught", ("LOCAL_ARRAY_BOUNDS",))
    assert got[("aux_label_scale_ema_update", "ror:52:27:0")] == ("caught", ("LOCAL_ARRAY_BOUNDS",))
    detail = next(o.detail for o in heads.outcomes if o.mutant.id == "guard:76:5:0")
    assert detail.startswith('Kernel "aux_heads_loss_ema_update" stores to global memory at an address that is the same for every thread of a block '
                             "(kernels/aux_heads_loss_ema_kernel.cu:77, st.global.f32 ")  # fmt: skip
    detail = next(o.detail for o in scale.outcomes if o.mutant.id == "ror:47:27:0")
    assert detail == ('kernels/aux_heads_loss_ema_kernel.cu:49: "v[u]" indexes the local array "v" of 8 elements (declared at line 45) '
                      "with u = 0 .. 8 (the loop at line 47): index 8 is out of bounds, undefined behaviour the compiler may hide.")  # fmt: skip
    assert run.settings["static_checks"] == ["LOCAL_ARRAY_BOUNDS", "LOCAL_UNINIT_READ", "SHARED_ARRAY_BOUNDS", "STORE_RACE",
                                             "SHARED_RMW_RACE", "CP_ASYNC_WAIT", "INDEX_OVERFLOW", "SHARED_BARRIER_MISSING",
                                             "OUT_OF_BOUNDS_ACCESS", "GLOBAL_RMW_RACE", "BLOCK_WRITE_OVERLAP", "SHARED_UNINIT_READ"]


@pytest.mark.nvcc
def test_local_uninit_read_catches_the_softmax_reads_past_k(tmp_path, monkeypatch, simt_repo):
    """The SIMT forward head's softmax keeps its AUX_K_MAX logits in a local array written only where k < K:
    a mutant whose later loop reads l[k] without that guard (or with k <= K) reads an uninitialised
    register, which nvcc may compile so that the run still matches the reference. Caught statically. (The
    subject is the chain before the CUTLASS kernels, tests/simt_chain.py, where that kernel is shipped.)"""
    from audit import runtime
    from audit.config import with_overrides

    cfg, _ = load_project(simt_repo)
    cfg = with_overrides(cfg, cache=str(tmp_path / "cache"))
    monkeypatch.setattr(runtime, "gpu_target", lambda backends, c, cluster=None: (["emulated"], c.arch))
    run = run_mutation(simt_repo, ["aux_trade_outcome_forward"], operators=["guard", "ror"], config=cfg, sanitizers=(), slowdown=False, sizes=(1,))
    (fwd,) = run.kernels
    assert fwd.baseline == "pass"
    got = {o.mutant.id for o in fwd.outcomes if o.checks[:1] == ("LOCAL_UNINIT_READ",) and o.status == "caught"}
    assert {"guard:48:9:0", "ror:48:15:0", "guard:55:9:0", "ror:55:15:0"} <= got
    # line 55's mutants also store prow[K], one past each row's K probabilities: the next row's first, which the
    # next block stores too where the rows meet at a block (BLOCK_WRITE_OVERLAP), past the buffer at the last row
    # (OUT_OF_BOUNDS_ACCESS)
    both = {o.mutant.id for o in fwd.outcomes if o.checks == ("LOCAL_UNINIT_READ", "BLOCK_WRITE_OVERLAP", "OUT_OF_BOUNDS_ACCESS")}
    assert {"guard:55:9:0", "ror:55:15:0"} <= both
    detail = next(o.detail for o in fwd.outcomes if o.mutant.id == "ror:55:15:0")
    assert detail == ('kernels/aux_trade_outcome_forward_kernel.cu:55: "l[k]" reads the local array "l" (8 elements, declared at line 35) '
                      "where k = 0 .. 7 (the loop at line 54) under k <= K, but its elements are written only where k < K (line 48): "
                      "the elements past that bound are uninitialised registers (undefined behaviour).")  # fmt: skip


def test_the_sanitizer_passes_run_at_the_sizes_of_wireup_verify_sanitizer():
    """(The verification passes run the cases `wireup verify` plans: tests/test_mutate_runtime.py; the scalar
    sizes are kept for the records made with them before 6 December 2026.)"""
    from audit.mutate._run import MEMCHECK_SIZES, MUTATE_SIZES
    from audit.runtime._plan import DEFAULT_SIZES
    from audit.runtime._verify import SANITIZER_SIZES

    assert MUTATE_SIZES == DEFAULT_SIZES and MEMCHECK_SIZES == SANITIZER_SIZES


def test_a_survivor_slow_only_while_sharing_the_gpu_is_not_caught(tmp_path):
    """The first timing runs with other workers on the GPU; a survivor that looked slow there is timed
    again alone, and only that timing decides (here it is slow on its first verification only)."""
    seen = {"fast": False, "calls": 0}

    def slow_once(launch):
        seen["calls"] += 1
        if not seen["fast"]:  # every launch of the first verification, none of the second
            import time as _time

            _time.sleep(0.02)
        launch.write_outputs(launch.run_reference())

    events = []

    def progress(ev):
        events.append(ev)
        if ev.get("event") == "variant_done" and ev.get("variant") == "strided_gather/loop:11:59:0":
            seen["fast"], seen["first"] = True, seen["calls"]

    run = run_mutation(REPO, ["strided_gather"], stand_in=lambda m: {"strided_gather": slow_once} if m.id == "loop:11:59:0" else {m.kernel: _wrong},
                       equivalent_file=tmp_path / "none.toml", sizes=(1,), slowdown=True, progress=progress)  # fmt: skip
    (o,) = [o for o in run.kernels[0].outcomes if o.mutant.id == "loop:11:59:0"]
    assert o.status == "survived" and seen["calls"] > seen["first"] > 0  # timed a second time, and fast then
    assert {"event": "slowdown", "variant": "strided_gather/loop:11:59:0", "message": "not slower when timed alone (pass 1 of 3)"} in events
    assert "slowdown" in run.timing


def test_a_survivor_slow_in_one_pass_alone_only_is_not_caught(tmp_path):
    """Timed alone within the run, a survivor can still share the GPU with another process: it must be
    slower than its baseline, verified before and after it, in each of the three passes. Here it is slow
    in its first verification and in the first pass alone, not in the second."""
    runs = {"n": 0}

    def slow_twice(launch):
        # each verification at B=1 starts with run A of its first S variant (the contract's S = 32)
        runs["n"] += launch.meta.label in ("B=1 (run A)", "B=1 (S=32) (run A)")
        if runs["n"] <= 2:  # its first two verifications: the shared one and the first pass alone
            import time as _time

            _time.sleep(0.02)
        launch.write_outputs(launch.run_reference())

    events = []
    run = run_mutation(REPO, ["strided_gather"], stand_in=lambda m: {"strided_gather": slow_twice} if m.id == "loop:11:59:0" else {m.kernel: _wrong},
                       equivalent_file=tmp_path / "none.toml", sizes=(1,), slowdown=True, progress=events.append)  # fmt: skip
    (o,) = [o for o in run.kernels[0].outcomes if o.mutant.id == "loop:11:59:0"]
    assert o.status == "survived"
    assert [e["message"] for e in events if e.get("event") == "slowdown"] == [
        "slower when timed alone (pass 1 of 3)", "not slower when timed alone (pass 2 of 3)"]  # each pass says how it went
    # ... and, before it, what it is about to be timed on (a run cut off in a chunk shows which suspects held it)
    assert [e["message"] for e in events if e.get("event") in ("timing", "slowdown")] == [
        "timed alone next (pass 1 of 3): 1 kernel(s) at 1", "slower when timed alone (pass 1 of 3)",
        "timed alone next (pass 2 of 3): 1 kernel(s) at 1", "not slower when timed alone (pass 2 of 3)"]  # fmt: skip
    assert runs["n"] == 3


def test_concurrent_sanitizer_runs_get_log_folders_of_their_own(tmp_path):
    from audit.config import with_overrides
    from audit.runtime._verify import sanitizer_log_dir

    cfg, _ = load_project(REPO)
    cfg = with_overrides(cfg, cache=str(tmp_path / "cache"))
    a, b = sanitizer_log_dir(cfg, "racecheck"), sanitizer_log_dir(cfg, "racecheck")
    assert a != b and a.is_dir() and b.is_dir() and a.parent == b.parent == tmp_path / "cache" / "runtime" / "sanitizer"
    assert a.name.startswith("racecheck-")


def test_a_sanitizer_run_is_identified_by_its_builds_and_contracts(tmp_path):
    """The journal identity of a sanitizer run: the build-cache keys of what it loads (source, includes,
    flags, toolchain) and the contract hashes of the kernels it judges."""
    import dataclasses

    from audit.mutate._build import MutantBuild
    from audit.mutate._run import BASELINE, _sanitizer_identities

    cfg, cs = load_project(REPO)
    ms = plan_mutants(cs, cfg, ["aux_label_scale_ema_update"], ["sync", "guard"])[1]["aux_label_scale_ema_update"][:2]
    b = {m.key: MutantBuild("compiled", tmp_path / f"{m.file_stem}.cu", ptx=tmp_path / f"key{i}" / "m.ptx") for i, m in enumerate(ms)}
    orig = {"aux_label_scale_ema_update": MutantBuild("compiled", tmp_path / "original.cu", ptx=tmp_path / "keyO" / "original.ptx")}
    ids = _sanitizer_identities(cs, b, orig, {"aux_label_scale_ema_update": ms})
    assert set(ids) == {ms[0].key, ms[1].key, f"aux_label_scale_ema_update/{BASELINE}"} and len(set(ids.values())) == 3
    assert '"key0"' in ids[ms[0].key] and '"keyO"' in ids[f"aux_label_scale_ema_update/{BASELINE}"]
    # another contract for the kernel: other identities
    k = cs.kernel("aux_label_scale_ema_update")
    other = dataclasses.replace(k, doc=(k.doc or "") + " changed")
    cs2 = dataclasses.replace(cs, kernels=tuple(other if x is k else x for x in cs.kernels))
    assert _sanitizer_identities(cs2, b, orig, {"aux_label_scale_ema_update": ms})[ms[0].key] != ids[ms[0].key]
    # the same contract, another domain on a buffer it reads (verify draws the input from it): other identities
    from audit.graph import Wiring
    from audit.model import Values

    bound: set[str] = set()
    for launches in Wiring.of(cs).launches.values():
        for ln in launches:
            if ln.kernel is not None and ln.kernel.name == k.name:
                bound |= {bd.buffer for p, bd in ln.bound() if p.role == "in" and p.values is None}
    name = sorted(bound)[0]
    bufs = tuple(dataclasses.replace(x, values=Values(min=0.0, max=1.0)) if x.name == name else x for x in cs.buffers)
    cs3 = dataclasses.replace(cs, buffers=bufs)
    assert _sanitizer_identities(cs3, b, orig, {"aux_label_scale_ema_update": ms})[ms[0].key] != ids[ms[0].key]


def test_a_stillborn_header_mutant_has_no_sanitizer_identity(tmp_path):
    """A header mutant that does not compile has a build with no overrides: no run loads it, and its key's
    kernel part is the header, which no contract names (a KeyError that ended an H100 header run of
    7 December after its verification)."""
    from audit.mutate._build import MutantBuild
    from audit.mutate._run import BASELINE, _sanitizer_identities

    cfg, cs = load_project(REPO)
    ms = plan_mutants(cs, cfg, ["sgemm_tile.cuh"], ["aor"])[1]["sgemm_tile.cuh"][:2]
    assert ms[0].is_header and len(ms[0].kernels) > 1
    copies = {k: tmp_path / "m1" / f"{k}.cu" for k in ms[1].kernels}
    b = {ms[0].key: MutantBuild("stillborn", tmp_path / "m0" / "sgemm_tile.cuh", "in kernel ...: error"),
         ms[1].key: MutantBuild("compiled", tmp_path / "m1" / "sgemm_tile.cuh", ptx=tmp_path / "k1" / "m.ptx", overrides=copies,
                                ptxs={k: tmp_path / f"k1{k}" / "m.ptx" for k in ms[1].kernels})}
    orig = {"sgemm_tile.cuh": MutantBuild("compiled", tmp_path / "o" / "sgemm_tile.cuh", ptx=tmp_path / "kO" / "o.ptx",
                                          overrides={k: tmp_path / "o" / f"{k}.cu" for k in ms[0].kernels})}
    ids = _sanitizer_identities(cs, b, orig, {"sgemm_tile.cuh": ms})
    assert set(ids) == {ms[1].key, f"sgemm_tile.cuh/{BASELINE}"}
    assert '"k1"' in ids[ms[1].key] and all(f'"k1{k}"' in ids[ms[1].key] for k in ms[1].kernels)  # its PTX folders
    # an identity without overrides judges the mutant's kernels, never the header's name
    b[ms[1].key] = MutantBuild("compiled", tmp_path / "m1" / "sgemm_tile.cuh", ptx=tmp_path / "k1" / "m.ptx")
    assert set(_sanitizer_identities(cs, b, orig, {"sgemm_tile.cuh": ms})) == {ms[1].key, f"sgemm_tile.cuh/{BASELINE}"}


def test_sibling_kernels_of_one_source_judge_the_lines_their_entries_reach():
    from audit.api import load_project
    from audit.mutate import sibling_kernels

    cfg, cs = load_project(REPO)
    _, sel = plan_mutants(cs, cfg, ["aux_heads_loss_ema_update", "aux_next_bar_forward", "aux_weight_grad_finish"])
    ema = sibling_kernels(cfg, cs, sel["aux_heads_loss_ema_update"])
    # the two EMA entries share their device helpers, not their bodies: 7 of the 17 mutants are in shared code
    assert len(ema) == 7 and set(ema.values()) == {("aux_label_scale_ema_update",)}
    lines = {m.line for m in sel["aux_heads_loss_ema_update"] if m.key in ema}
    own = {m.line for m in sel["aux_heads_loss_ema_update"] if m.key not in ema}
    assert lines and own and not lines & own
    # the two CUTLASS head entries are one template: most mutants are in code both run
    heads = sibling_kernels(cfg, cs, sel["aux_next_bar_forward"])
    assert len(heads) == 77 and set(heads.values()) == {("aux_trade_outcome_forward",)}
    # the finish kernel's file also holds the skinny partial's entry, but neither reaches the other's code
    assert sibling_kernels(cfg, cs, sel["aux_weight_grad_finish"]) == {}


def test_a_survivor_in_shared_code_is_caught_by_a_sibling_of_its_source():
    from audit.api import load_project
    from audit.mutate import sibling_kernels

    cfg, cs = load_project(REPO)
    _, sel = plan_mutants(cs, cfg, ["aux_heads_loss_ema_update"])
    shared = sorted(sibling_kernels(cfg, cs, sel["aux_heads_loss_ema_update"]))
    events = []
    # every mutant passes its own kernel; the sibling's emulation is wrong for the first shared-code mutant only
    run = run_mutation(REPO, ["aux_heads_loss_ema_update"], sizes=(1, 37),
                       stand_in=lambda m: {"aux_label_scale_ema_update": _wrong} if m.key == shared[0] else {},
                       progress=events.append)  # fmt: skip
    (k,) = run.kernels
    caught = [o for o in k.outcomes if o.status == "caught"]
    assert [o.mutant.key for o in caught] == [shared[0]]
    assert caught[0].checks == ("VERIFY_REFERENCE",)
    assert caught[0].detail.startswith("as aux_label_scale_ema_update (same source): ")
    assert k.caught == 1 and len(k.unclassified) + k.equivalent == len(sel["aux_heads_loss_ema_update"]) - 1
    ids = [ev["variant"] for ev in events if ev.get("event") == "variant_done" and str(ev["variant"]).endswith("/siblings")]
    # the siblings' unmutated copy, then only the survivors in shared code (the others have no sibling to ask)
    assert sorted(ids) == sorted(["aux_heads_loss_ema_update/baseline/siblings"] + [f"{key}/siblings" for key in shared])
    assert "siblings" in run.timing


def test_a_sibling_whose_unmutated_copy_fails_judges_nothing_with_that_check():
    from audit.api import load_project
    from audit.mutate import sibling_kernels

    cfg, cs = load_project(REPO)
    _, sel = plan_mutants(cs, cfg, ["aux_heads_loss_ema_update"])
    shared = sorted(sibling_kernels(cfg, cs, sel["aux_heads_loss_ema_update"]))
    run = run_mutation(REPO, ["aux_heads_loss_ema_update"], sizes=(1,),
                       stand_in=lambda m: {"aux_label_scale_ema_update": _wrong} if m.key == shared[0] else {},
                       baseline_stand_in=lambda name: {"aux_label_scale_ema_update": _wrong} if name == "aux_label_scale_ema_update" else {})  # fmt: skip
    (k,) = run.kernels
    assert k.baseline == "pass"  # its own unmutated copy passes: scored, and the sibling judged nothing
    assert k.caught == 0 and len(k.unclassified) + k.equivalent == len(sel["aux_heads_loss_ema_update"])


# the compute-sanitizer passes judge a survivor in shared code as its siblings too (the EMA pair: the
# heads-loss update shares ema_blend with the label-scale update, which uses shared memory; it does not)
EMA, EMA_SIB = "aux_heads_loss_ema_update", "aux_label_scale_ema_update"


def _sanitizer_fake(seen, report, cut=None):
    """A stand-in for ``audit.runtime.verify`` under compute-sanitizer: records (kernel, source copy's name)
    per kernel run; ``report(kernel, name)`` is the message the tool reports there, or None. With ``cut``
    ({"after": n}), the call after the n-th run is interrupted, as a call's limit cuts a pass short."""

    def fake_verify(root, kernels, source_overrides, sanitizer, sizes, **kw):
        if cut is not None and len(seen) >= cut["after"]:
            raise KeyboardInterrupt
        findings = []
        for k in kernels:
            name = source_overrides[k].name
            seen.append((k, name))
            if (message := report(k, name)) is not None:
                findings.append(SimpleNamespace(rule=f"SANITIZER_{sanitizer.upper()}", message=message, subject=k,
                                                severity=SimpleNamespace(value="error")))  # fmt: skip
        return SimpleNamespace(result=SimpleNamespace(findings=findings))

    return fake_verify


def _ema_shared(tmp_path, n):
    """The first ``n`` mutants of the heads-loss EMA update in code its sibling runs, their source copies,
    the kernel's unmutated copy, and their siblings."""
    from audit.mutate import sibling_kernels

    cfg, cs = load_project(REPO)
    ms = plan_mutants(cs, cfg, [EMA])[1][EMA]
    sibs = sibling_kernels(cfg, cs, ms)
    shared = [m for m in ms if m.key in sibs][:n]
    assert len(shared) == n and all(sibs[m.key] == (EMA_SIB,) for m in shared)
    return cfg, cs, shared, {m.key: tmp_path / f"{m.file_stem}.cu" for m in shared}, tmp_path / "original.cu", {m.key: sibs[m.key] for m in shared}


def test_a_survivor_is_caught_by_its_siblings_sanitizer_run_after_their_clean_unmutated_copy(monkeypatch, tmp_path):
    """memcheck runs a survivor in shared code for its own kernel and then as its siblings, built from the
    mutated source, after their unmutated copy (the kernel's own copy: one source file). Caught only there,
    the message names the sibling; a survivor its own run catches is not run as them."""
    from audit import runtime
    from audit.mutate._run import _sanitize

    cfg, _, shared, files, original, sibs = _ema_shared(tmp_path, 3)
    paths = {key: {EMA: p} for key, p in files.items()}  # as run_mutation hands them: kernel -> copy
    p0, p1, p2 = (files[m.key].name for m in shared)
    reports = {(EMA_SIB, p0): "Invalid __global__ read of size 4 bytes", (EMA, p1): "Invalid __global__ write of size 4 bytes"}
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(runtime, "verify", _sanitizer_fake(seen, lambda k, name: reports.get((k, name))))
    events: list[dict] = []
    found, bases = _sanitize(cfg, "memcheck", shared, paths, {EMA: {EMA: original}}, ["pycuda"], 0, events.append, workers=1, siblings=sibs)
    assert found == {
        shared[0].key: (("SANITIZER_MEMCHECK",), f"as {EMA_SIB} (same source): Invalid __global__ read of size 4 bytes"),
        shared[1].key: (("SANITIZER_MEMCHECK",), "Invalid __global__ write of size 4 bytes"),
    }
    assert bases == {EMA: None}  # the own baseline only
    # the unmutated copy for the kernel and as its sibling, each survivor for its kernel, then as the
    # sibling the two its own run left
    assert seen == [(EMA, original.name), (EMA_SIB, original.name), (EMA, p0), (EMA, p1), (EMA, p2), (EMA_SIB, p0), (EMA_SIB, p2)]
    assert [(e["variant"], e["message"]) for e in events if e["event"] == "sibling"] == [(shared[0].key, found[shared[0].key][1])]
    verdicts = {e["variant"]: e["verdict"] for e in events if e["event"] == "sanitizer"}
    assert verdicts[f"{EMA}/baseline/siblings"] == "pass" and verdicts[f"{shared[0].key}/siblings"] == "caught"


def test_a_sibling_whose_unmutated_copy_the_sanitizer_reports_judges_nothing(monkeypatch, tmp_path):
    """A racecheck report on the siblings' unmutated copy would 'catch' every survivor run as them: they
    judge none of the kernel's survivors under that tool, and the kernel's own baseline stays clean."""
    from audit import runtime
    from audit.mutate._run import _sanitize

    cfg, _, shared, paths, original, sibs = _ema_shared(tmp_path, 2)
    p0, p1 = (paths[m.key].name for m in shared)
    reports = {(EMA_SIB, original.name): "a hazard in shared memory", (EMA_SIB, p0): "a hazard in shared memory"}
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(runtime, "verify", _sanitizer_fake(seen, lambda k, name: reports.get((k, name))))
    events: list[dict] = []
    found, bases = _sanitize(cfg, "racecheck", shared, paths, {EMA: original}, ["pycuda"], 0, events.append, workers=1, siblings=sibs)
    assert found == {} and bases == {EMA: None}
    assert seen == [(EMA, original.name), (EMA_SIB, original.name), (EMA, p0), (EMA, p1)]  # no survivor ran as the sibling
    assert {"event": "note", "text": f"{EMA}: its siblings' unmutated copy fails SANITIZER_RACECHECK under compute-sanitizer racecheck "
                                     f"(as {EMA_SIB} (same source): a hazard in shared memory); they judge none of its survivors under racecheck"} in events  # fmt: skip


def test_sanitizer_runs_as_siblings_are_journaled_and_a_cut_short_pass_resumes(monkeypatch, tmp_path):
    """The siblings' unmutated copy and each survivor's run as its siblings are journaled like the others:
    a pass cut short takes them and runs only the rest; a run without an identity is run, never kept."""
    from audit import runtime
    from audit.mutate._run import _sanitize

    cfg, _, shared, paths, original, sibs = _ema_shared(tmp_path, 2)
    p0, p1 = (paths[m.key].name for m in shared)
    base = f"{EMA}/baseline"
    idents = {base: "b0", f"{base}/siblings": "b0s", **{m.key: f"m{i}" for i, m in enumerate(shared)},
              **{f"{m.key}/siblings": f"m{i}s" for i, m in enumerate(shared)}}  # fmt: skip
    seen: list[tuple[str, str]] = []
    cut = {"after": 5}
    monkeypatch.setattr(runtime, "verify", _sanitizer_fake(seen, lambda k, name: "a hazard" if (k, name) == (EMA_SIB, p0) else None, cut))
    journal = tmp_path / "k.sanitizers.jsonl"
    events: list[dict] = []
    args = (cfg, "racecheck", shared, paths, {EMA: original}, ["pycuda"], 0, events.append)
    with pytest.raises(KeyboardInterrupt):
        _sanitize(*args, workers=1, journal=journal, identities=idents, siblings=sibs)
    # both baselines, both survivors for their kernel, the first as its sibling; then the call's limit
    assert seen == [(EMA, original.name), (EMA_SIB, original.name), (EMA, p0), (EMA, p1), (EMA_SIB, p0)]
    assert len(journal.read_text().splitlines()) == 5
    cut["after"] = 99
    seen.clear()
    found, bases = _sanitize(*args, workers=1, journal=journal, identities=idents, siblings=sibs)
    assert seen == [(EMA_SIB, p1)]  # the five journaled runs were not run again
    assert found == {shared[0].key: (("SANITIZER_RACECHECK",), f"as {EMA_SIB} (same source): a hazard")} and bases == {EMA: None}
    assert [e["verdict"] for e in events if e.get("variant") == f"{shared[0].key}/siblings"][-1] == "caught (from the journal)"
    assert [e["verdict"] for e in events if e.get("variant") == f"{base}/siblings"][-1] == "pass (from the journal)"
    assert len(journal.read_text().splitlines()) == 6
    seen.clear()
    _sanitize(*args, workers=1, journal=journal, identities=idents, siblings=sibs)
    assert seen == []
    # a key without an identity runs and is not kept
    _sanitize(*args, workers=1, journal=journal, identities={k: v for k, v in idents.items() if k != f"{shared[1].key}/siblings"}, siblings=sibs)
    assert seen == [(EMA_SIB, p1)] and len(journal.read_text().splitlines()) == 6


def test_a_sanitizer_run_as_siblings_is_identified_by_its_build_and_the_siblings_contracts(tmp_path):
    from audit.evidence import kernel_inputs
    from audit.hashing import contract_hash
    from audit.mutate._build import MutantBuild
    from audit.mutate._run import BASELINE, _sanitizer_identities

    cfg, cs, shared, paths, original, sibs = _ema_shared(tmp_path, 2)
    b = {m.key: MutantBuild("compiled", paths[m.key], ptx=tmp_path / f"key{i}" / "m.ptx") for i, m in enumerate(shared)}
    orig = {EMA: MutantBuild("compiled", original, ptx=tmp_path / "keyO" / "original.ptx")}
    plain = _sanitizer_identities(cs, b, orig, {EMA: shared})
    ids = _sanitizer_identities(cs, b, orig, {EMA: shared}, sibs)
    assert set(ids) - set(plain) == {f"{EMA}/{BASELINE}/siblings", *(f"{m.key}/siblings" for m in shared)}
    assert all(ids[k] == v for k, v in plain.items())  # the own runs keep their identities
    sib = [contract_hash(cs.kernel(EMA_SIB)), kernel_inputs(cs, cs.kernel(EMA_SIB))]
    assert json.loads(ids[f"{shared[0].key}/siblings"]) == [["key0"], [sib]]
    assert json.loads(ids[f"{EMA}/{BASELINE}/siblings"]) == [["keyO"], [sib]]


def test_racecheck_runs_a_survivor_as_a_sibling_that_uses_shared_memory_even_where_its_kernel_does_not(monkeypatch, tmp_path):
    """The heads-loss EMA update uses no shared memory and has no barrier: racecheck takes none of its
    survivors for their own kernel, but runs those in code the label-scale update runs as that kernel."""
    from audit.mutate import _run

    shared = _ema_shared(tmp_path, 7)[2]  # every mutant of the kernel in code its sibling runs
    calls = []

    def fake_sanitize(cfg, tool, mutants, paths, originals, backends, seed, progress, workers=4, siblings=None, **kw):
        calls.append((tool, sorted(m.id for m in mutants), dict(siblings or {})))
        hit = {shared[0].key: (("SANITIZER_RACECHECK",), f"as {EMA_SIB} (same source): a hazard")} if tool == "racecheck" else {}
        return hit, {EMA: None} if mutants else {}

    monkeypatch.setattr(_run, "_sanitize", fake_sanitize)
    monkeypatch.setattr(_run, "_uses_shared", lambda cfg, cs, kernel, arch: kernel == EMA_SIB)
    run = run_mutation(REPO, [EMA], stand_in=lambda m: {}, equivalent_file=tmp_path / "none.toml", sizes=(1,), sanitizers=("memcheck", "racecheck"))
    (k,) = run.kernels
    everyone = sorted(o.mutant.id for o in k.outcomes)
    expected = {m.key: (EMA_SIB,) for m in shared}
    assert calls == [("memcheck", everyone, expected), ("racecheck", [], expected)]
    by_key = {o.mutant.key: o for o in k.outcomes}
    assert (by_key[shared[0].key].status, by_key[shared[0].key].checks) == ("caught", ("SANITIZER_RACECHECK",))
    assert by_key[shared[0].key].detail == f"as {EMA_SIB} (same source): a hazard"
    assert k.baseline == "pass" and k.caught == 1


def test_the_listing_marks_the_mutants_siblings_judge_too(capsys):
    assert main(["mutate", "--root", str(REPO), "aux_heads_loss_ema_update", "--list"]) == 0
    out = capsys.readouterr().out
    assert "; 7 in code aux_label_scale_ema_update run(s) too, judged by them where the kernel's own checks pass" in out.splitlines()[0]
    assert out.count("  [also aux_label_scale_ema_update]") == 7


@pytest.mark.nvcc
def test_a_mutant_identical_for_its_kernel_but_not_for_a_sibling_is_compiled(tmp_path):
    """The next-bar backward's store variant and its accumulating twin are one template body: two mutants of
    the store variant compile to its unmutated PTX but change the twin's, which judges them (siblings)."""
    from audit.config import with_overrides
    from audit.mutate import build_mutants

    cfg, cs = load_project(REPO)
    cfg = with_overrides(cfg, cache=str(tmp_path / "cache"))
    _, selected = plan_mutants(cs, cfg, ["aux_next_bar_backward_store"])
    ms = [m for m in selected["aux_next_bar_backward_store"] if m.id in ("aor:239:124:0", "aor:250:108:0", "ror:86:35:0")]
    assert len(ms) == 3
    builds = build_mutants(cfg, cs, ms, cfg.arch, jobs=2)
    # ror:86:35:0 leaves both entries' PTX as it was: identical still
    assert {m.id: builds[m.key].status for m in ms} == {"aor:239:124:0": "compiled", "aor:250:108:0": "compiled", "ror:86:35:0": "identical"}


# -- MUTATE_UNSTABLE: a survivor whose values fail under a sanitizer's timing -----------------------------------


def _value_fake(seen, fails):
    """A stand-in for ``runtime.verify`` under a sanitizer: the copies named in ``fails`` (file name -> rule)
    fail that check of verify with no report of the tool's own."""

    def fake_verify(root, kernels, source_overrides, sanitizer, sizes, **kw):
        name = source_overrides[kernels[0]].name
        seen.append(name)
        rule = fails.get(name)
        f = SimpleNamespace(rule=rule, message=f'Kernel "{kernels[0]}" fails {rule} at B=37: 3 of 111 elements differ.', subject=kernels[0],
                            severity=SimpleNamespace(value="error"))  # fmt: skip
        return SimpleNamespace(result=SimpleNamespace(findings=[f] if rule else []))

    return fake_verify


def test_a_survivor_whose_values_fail_under_the_tool_is_caught_by_mutate_unstable_and_journaled(monkeypatch, tmp_path):
    """memcheck reports nothing, but the mutant's outputs fail VERIFY_REFERENCE in the instrumented run while
    its unmutated copy passes the same run: caught by MUTATE_UNSTABLE (the message says why), kept in the
    journal and taken from it; a run past the watchdog (VERIFY_TIMEOUT) stays inconclusive and uncaught."""
    from audit import runtime
    from audit.mutate._run import _sanitize

    cfg, cs = load_project(REPO)
    ms = [m for m in plan_mutants(cs, cfg, ["aux_label_scale_ema_update"], ["guard"])[1]["aux_label_scale_ema_update"]][:3]
    assert len(ms) == 3
    paths = {m.key: tmp_path / f"{m.file_stem}.cu" for m in ms}
    original = tmp_path / "original.cu"
    idents = {"aux_label_scale_ema_update/baseline": "b0", **{m.key: f"m{i}" for i, m in enumerate(ms)}}
    seen: list[str] = []
    fails = {paths[ms[0].key].name: "VERIFY_REFERENCE", paths[ms[1].key].name: "VERIFY_TIMEOUT"}
    monkeypatch.setattr(runtime, "verify", _value_fake(seen, fails))
    journal, events = tmp_path / "k.sanitizers.jsonl", []
    args = (cfg, "memcheck", ms, paths, {"aux_label_scale_ema_update": original}, ["pycuda"], 0, events.append)
    found, bases = _sanitize(*args, workers=1, journal=journal, identities=idents)
    message = ('Kernel "aux_label_scale_ema_update" fails VERIFY_REFERENCE at B=37: 3 of 111 elements differ (under compute-sanitizer memcheck, '
               "whose run of the unmutated copy passes: the result depends on the timing of its threads or on memory it should not read)")
    assert found == {ms[0].key: (("MUTATE_UNSTABLE",), message)} and bases == {"aux_label_scale_ema_update": None}
    verdicts = {e["variant"]: e["verdict"] for e in events if e["event"] == "sanitizer"}
    assert verdicts[ms[0].key] == "caught by MUTATE_UNSTABLE where its unmutated copy passes this run"
    assert verdicts[ms[1].key] == "survived (inconclusive: VERIFY_TIMEOUT)" and verdicts[ms[2].key] == "survived"
    assert len(journal.read_text().splitlines()) == 3  # the baseline, ms[0] and ms[2]; not the timed-out run
    seen.clear()
    again, _ = _sanitize(*args, workers=1, journal=journal, identities=idents)
    assert again == found and seen == [paths[ms[1].key].name]


def test_mutate_unstable_judges_nothing_where_the_unmutated_copy_fails_values_under_the_tool(monkeypatch, tmp_path):
    """If the instrumented run changes the unmutated copy's values too, the tool itself is what the values
    follow: no survivor is caught by MUTATE_UNSTABLE, a note says so, and the baseline is not failed (its
    findings are verify's, not the tool's report)."""
    from audit import runtime
    from audit.mutate._run import _sanitize

    cfg, cs = load_project(REPO)
    ms = [m for m in plan_mutants(cs, cfg, ["aux_label_scale_ema_update"], ["guard"])[1]["aux_label_scale_ema_update"]][:2]
    paths = {m.key: tmp_path / f"{m.file_stem}.cu" for m in ms}
    original = tmp_path / "original.cu"
    seen: list[str] = []
    monkeypatch.setattr(runtime, "verify", _value_fake(seen, {original.name: "VERIFY_NAN", paths[ms[0].key].name: "VERIFY_REFERENCE"}))
    events: list[dict] = []
    found, bases = _sanitize(cfg, "memcheck", ms, paths, {"aux_label_scale_ema_update": original}, ["pycuda"], 0, events.append, workers=1)
    assert found == {} and bases == {"aux_label_scale_ema_update": None}
    assert {"event": "note", "text": "aux_label_scale_ema_update/baseline has findings of verify's checks under compute-sanitizer memcheck: MUTATE_UNSTABLE "
                                     "judges none of its 1 survivor run(s) that failed a value check so"} in events  # fmt: skip


def test_a_survivor_whose_values_fail_as_its_siblings_under_the_tool_is_caught_by_mutate_unstable(monkeypatch, tmp_path):
    """The same rule for a survivor run as its siblings: its values fail there, the siblings' unmutated copy
    passes the same run; the message names the sibling."""
    from audit import runtime
    from audit.mutate._run import _sanitize

    cfg, _, shared, files, original, sibs = _ema_shared(tmp_path, 1)
    p0 = files[shared[0].key].name
    seen: list[tuple[str, str]] = []

    def fake_verify(root, kernels, source_overrides, sanitizer, sizes, **kw):
        name = source_overrides[kernels[0]].name
        seen.append((kernels[0], name))
        bad = kernels[0] == EMA_SIB and name == p0
        f = SimpleNamespace(rule="VERIFY_MASK_ZERO", message="skipped rows are not zero.", subject=EMA_SIB, severity=SimpleNamespace(value="error"))
        return SimpleNamespace(result=SimpleNamespace(findings=[f] if bad else []))

    monkeypatch.setattr(runtime, "verify", fake_verify)
    found, _ = _sanitize(cfg, "memcheck", shared, files, {EMA: original}, ["pycuda"], 0, lambda ev: None, workers=1, siblings=sibs)
    assert found == {shared[0].key: (("MUTATE_UNSTABLE",), f"as {EMA_SIB} (same source): skipped rows are not zero (under compute-sanitizer memcheck, "
                                     "whose run of the unmutated copy passes: the result depends on the timing of its threads or on memory it should not read)")}  # fmt: skip


def test_mutate_unstable_refutes_an_equivalence_record():
    """Other values under a sanitizer's timing are values: a record claiming the mutant equivalent is refuted
    (MUTATE_SLOWDOWN, same values for more time, is not)."""
    from audit.mutate._equivalent import EquivalenceRecord, refuted_records

    r = EquivalenceRecord(kernel="k", id="guard:5:5:0", code="x", reason="y", file="equivalent.toml", line=5)
    assert len(refuted_records("k", {"guard:5:5:0": r}, {"guard:5:5:0": ["MUTATE_UNSTABLE"]})) == 1
    assert refuted_records("k", {"guard:5:5:0": r}, {"guard:5:5:0": ["MUTATE_SLOWDOWN"]}) == []


# -- plan 4: racecheck at B = 37 alone where it already spans more than one block ------------------------------


def test_racecheck_takes_the_first_size_alone_only_where_it_spans_more_than_one_block():
    """A ceil_div(B, 32) grid (the trade-outcome backward) has a full block and a tail at B = 37: 37 alone.
    Both sizes stay for a grid of one block (the EMA updates), for ceil_div(B, 128) (one tail block at 37),
    for a grid whose block count at 37 comes from another dim (the trunk forward's ceil_div(SH2, 64)
    factor: four blocks, one row block), for a run with any such kernel, and under the older plans."""
    from audit.mutate._run import RACE_SIZES, race_sizes

    _, cs = load_project(REPO)
    assert RACE_SIZES == (37, 300)
    assert race_sizes(cs, ["aux_trade_outcome_backward"]) == (37,) and race_sizes(cs, ["aux_trunk_backward"]) == (37,)
    for k in ("aux_label_scale_ema_update", "aux_next_bar_backward", "aux_trunk_forward", "strided_gather"):
        assert race_sizes(cs, [k]) == (37, 300), k
    assert race_sizes(cs, ["aux_trade_outcome_backward", "aux_trunk_forward"]) == (37, 300)
    assert race_sizes(cs, ["aux_trade_outcome_backward"], plan=3) == (37, 300)


def test_a_racecheck_run_at_37_alone_takes_a_plan_3_verdict_from_the_journal(monkeypatch, tmp_path):
    """The trade-outcome backward's racecheck runs at B = 37 alone under plan 4; a verdict journaled under
    plan 3 (B = 37 and 300) stands, and what no journal holds runs at 37 and is kept under plan 4."""
    from audit import runtime
    import audit.mutate._run as mrun
    from audit.mutate._run import _sanitize

    cfg, cs = load_project(REPO)
    k = "aux_trade_outcome_backward"
    ms = [m for m in plan_mutants(cs, cfg, [k], ["ror"])[1][k]][:2]
    paths = {m.key: tmp_path / f"{m.file_stem}.cu" for m in ms}
    original = tmp_path / "original.cu"
    idents = {f"{k}/baseline": "b0", **{m.key: f"m{i}" for i, m in enumerate(ms)}}
    calls: list[tuple[str, tuple[int, ...]]] = []

    def fake_verify(root, kernels, source_overrides, sanitizer, sizes, **kw):
        calls.append((source_overrides[kernels[0]].name, tuple(sizes)))
        return SimpleNamespace(result=SimpleNamespace(findings=[]))

    monkeypatch.setattr(runtime, "verify", fake_verify)
    journal, events = tmp_path / "k.sanitizers.jsonl", []
    run = lambda mutants: _sanitize(cfg, "racecheck", mutants, paths, {k: original}, ["pycuda"], 0, events.append,  # noqa: E731
                                    workers=1, journal=journal, identities=idents, cs=cs)  # fmt: skip
    monkeypatch.setattr(mrun, "SANITIZER_PLAN", 3)
    run(ms[:1])
    assert calls == [(original.name, (37, 300)), (paths[ms[0].key].name, (37, 300))]
    monkeypatch.setattr(mrun, "SANITIZER_PLAN", 4)
    calls.clear()
    run(ms)
    assert calls == [(paths[ms[1].key].name, (37,))]
    assert [e["verdict"] for e in events if e["variant"] == ms[0].key][-1] == "survived (from the journal, a run of the fuller plan 3)"
    calls.clear()
    run(ms)
    assert calls == []


@pytest.mark.nvcc
def test_the_perturbed_schedule_pass_runs_each_copy_rewritten_and_catches_values_that_follow_the_timing(monkeypatch, tmp_path):
    """The perturb pass verifies, with no compute-sanitizer, a rewritten copy of the unmutated kernel and of
    each survivor (half of each block's threads delayed at the start and after each barrier; `<stem>.perturb.cu` beside
    the copy, each compiled by nvcc here), at memcheck's sizes with repeats; a survivor whose values fail
    there while the unmutated copy passes is caught by MUTATE_UNSTABLE with a message that says how it ran."""
    from audit import runtime
    from audit.compile import build_kernels
    from audit.mutate._build import build_original, write_mutant
    from audit.mutate._run import _sanitize

    cfg, cs = load_project(REPO)
    k = "aux_trade_outcome_backward"
    ms = [m for m in plan_mutants(cs, cfg, [k], ["guard"])[1][k]][:2]
    paths = {m.key: write_mutant(cfg, m) for m in ms}
    original = build_original(cfg, cs, k, ms[0].original, cfg.arch).path
    seen: list[tuple[str, object, tuple[int, ...], object]] = []

    def fake_verify(root, kernels, source_overrides, sanitizer, sizes, **kw):
        src = source_overrides[kernels[0]]
        text = src.read_text()
        assert text.count("WIREUP_PERTURB();") == 8 and '#line 1 "' in text  # the entry and the kernel's 7 barriers
        built = build_kernels(cfg, cs, arch=cfg.arch, jobs=1, sources=kernels, source_overrides=dict(source_overrides))
        assert "nanosleep" in built.kernel(cs.kernel(k))[0].ptx.read_text()
        seen.append((src.name, sanitizer, tuple(sizes), kw.get("repeats")))
        bad = src.name == f"{ms[0].file_stem}.perturb.cu"
        f = SimpleNamespace(rule="VERIFY_REFERENCE", message="3 elements differ.", subject=k, severity=SimpleNamespace(value="error"))
        return SimpleNamespace(result=SimpleNamespace(findings=[f] if bad else []))

    monkeypatch.setattr(runtime, "verify", fake_verify)
    found, bases = _sanitize(cfg, "perturb", ms, paths, {k: original}, ["pycuda"], 0, lambda ev: None, workers=1, cs=cs)
    assert seen == [(f"{p.stem}.perturb.cu", None, (1, 37, 300, 4096), True) for p in [original, *paths.values()]]
    assert found == {ms[0].key: (("MUTATE_UNSTABLE",), "3 elements differ (with half of each block's threads delayed at its start and after each barrier, "
                                 "whose run of the unmutated copy passes: the result depends on the timing of its threads or on memory it should not read)")}  # fmt: skip
    assert bases == {k: None}


def test_perturbation_points_are_each_kernel_entry_and_each_barrier_statement():
    """Inside each __global__ definition's body (not a declaration's, not a __device__ function's), after each
    `__syncthreads();` (not `__syncthreads_or(x)`); comments and directives untouched."""
    from audit.mutate._perturb import perturbed_source

    src = ("// __global__ void c() { __syncthreads(); }\n"
           "template <int N> __global__ void __launch_bounds__(256, 2) k(float* p);\n"
           "__device__ void d() { __syncthreads(); }\n"
           "template <int N> __global__ void __launch_bounds__(256, 2) k(float* p) {\n"
           "  if (p) __syncthreads();\n  int x = __syncthreads_or(1);\n}\n")  # fmt: skip
    out = perturbed_source(src, "a.cu").split('#line 1 "a.cu"\n', 1)[1]
    assert out == ("// __global__ void c() { __syncthreads(); }\n"
                   "template <int N> __global__ void __launch_bounds__(256, 2) k(float* p);\n"
                   "__device__ void d() { __syncthreads(); WIREUP_PERTURB(); }\n"
                   "template <int N> __global__ void __launch_bounds__(256, 2) k(float* p) { WIREUP_PERTURB();\n"
                   "  if (p) __syncthreads(); WIREUP_PERTURB();\n  int x = __syncthreads_or(1);\n}\n")  # fmt: skip


def test_the_perturbed_schedule_reorders_every_two_threads_of_a_block_over_twenty_blocks():
    """Version 1 delayed the odd warps in even blocks and the even ones in odd blocks: warps 0 and 2 never ran
    in the other order, nor two lanes of one warp (the trade-outcome backward's fill of the skipped rows and
    its row loop meet in lanes of warp 0; four of its survivors went through the pass on the H200 on 7 December
    uncaught). The macro now splits each block on one bit of the thread index, chosen by the block: over 20
    blocks, for every two threads of a 1024-thread block, each runs delayed while the other does not."""
    import numpy as np

    from audit.mutate._perturb import _MACRO, PERTURB_BITS, PERTURB_VERSION

    assert PERTURB_VERSION == 2 and PERTURB_BITS == 10
    assert "if (((wireup_t_ >> ((wireup_b_ >> 1) % 10u)) ^ wireup_b_) & 1u) WIREUP_SLEEP();" in _MACRO  # the rule below
    t = np.arange(1024)
    first = np.zeros((1024, 1024), bool)
    for b in range(2 * PERTURB_BITS):
        delayed = (((t >> ((b >> 1) % PERTURB_BITS)) ^ b) & 1).astype(bool)
        first |= delayed[:, None] & ~delayed[None, :]  # [i, j]: i sleeps, j does not, in block b
    assert (first | np.eye(1024, dtype=bool)).all()
