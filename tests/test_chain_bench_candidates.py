"""benchmarks/gpu_chain_vs_torch.py ``--candidate``: an experimental kernel launched in place of a contract
kernel in the whole chain (same parameters), so one device run measures the step with it and checks its
outputs like the shipped ones."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRUNK = "kernels/aux_trunk_forward_cutlass.cu"
TRUNK_SPEC = f"aux_trunk_forward={TRUNK}:aux_trunk_forward_cutlass;grid=ceil_div(B, 128) * ceil_div(SH2, 64),1,1;block=128,1,1"
PARTIAL = "kernels/aux_weight_grad_partial_cutlass.cu"


@pytest.fixture()
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_chain_vs_torch

    return gpu_chain_vs_torch


def test_a_candidate_spec_names_kernel_source_entry_and_optional_geometry(bench):
    c = bench.Candidate.parse(TRUNK_SPEC)
    assert (c.kernel, c.source, c.entry) == ("aux_trunk_forward", TRUNK, "aux_trunk_forward_cutlass")
    assert [e.evaluate({"B": 65536, "SH2": 256}, {}) for e in c.grid] == [2048, 1, 1]
    assert [e.evaluate({}, {}) for e in c.block] == [128, 1, 1]
    plain = bench.Candidate.parse(f"aux_weight_grad_partial={PARTIAL}:aux_weight_grad_partial_cutlass")
    assert plain.grid is None and plain.block is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("aux_trunk_forward", "expected KERNEL=SOURCE:ENTRY[;grid=G0,G1,G2][;block=B0,B1,B2]"),
        (f"aux_trunk_forward={TRUNK}", "expected KERNEL=SOURCE:ENTRY"),
        (f"aux_trunk_forward={TRUNK}:e;grid=1,1", "'grid=1,1' is not grid=E0,E1,E2 or block=E0,E1,E2"),
        (f"aux_trunk_forward={TRUNK}:e;shared=0,0,0", "'shared=0,0,0' is not grid=E0,E1,E2"),
    ],
)
def test_a_bad_candidate_spec_is_one_line(bench, spec, message):
    with pytest.raises(ValueError, match=None) as info:
        bench.Candidate.parse(spec)
    assert message in str(info.value)


def test_the_candidate_replaces_source_entry_and_geometry_of_that_kernel_only(bench):
    from audit.load import load_contracts

    cs = load_contracts(REPO / "contracts", REPO)
    swapped = bench.with_candidates(cs, [bench.Candidate.parse(TRUNK_SPEC)])
    k = swapped.kernel_map["aux_trunk_forward"]
    assert (k.source, k.symbol, k.params) == (TRUNK, "aux_trunk_forward_cutlass", cs.kernel_map["aux_trunk_forward"].params)
    assert [k2 for k2 in swapped.kernels if k2.name != "aux_trunk_forward"] == [k2 for k2 in cs.kernels if k2.name != "aux_trunk_forward"]
    # every schedule launches it with the candidate's geometry
    csB = bench.contracts_at(swapped, 65536)
    ops = bench.build_plan(csB, bench.Wiring(csB), (bench.FORWARD, bench.FUSED), 1966)
    (trunk,) = [op for op in ops if op.name == "aux_trunk_forward"]
    assert (trunk.grid, trunk.block) == ((2048, 1, 1), (128, 1, 1))
    assert trunk.kernel.source == TRUNK
    with pytest.raises(ValueError, match="names no contract kernel: nope"):
        bench.with_candidates(cs, [bench.Candidate("nope", TRUNK, "e")])
    with pytest.raises(ValueError, match="no file benchmarks/none.cu"):
        bench.with_candidates(cs, [bench.Candidate("aux_trunk_forward", "benchmarks/none.cu", "e")])


def test_main_refuses_a_bad_candidate_before_touching_a_gpu(bench, capsys):
    assert bench.main(["--candidate", "aux_trunk_forward", "--cpu-check"]) == 2
    assert "gpu_chain_vs_torch: --candidate 'aux_trunk_forward': expected KERNEL=SOURCE:ENTRY" in capsys.readouterr().err


def test_only_a_cutlass_source_gets_the_cutlass_headers(bench, monkeypatch, tmp_path):
    import gpu_fwd_cutlass

    monkeypatch.setattr(gpu_fwd_cutlass, "cutlass_include", lambda: Path("/opt/cutlass/include"))
    shipped = bench.nvcc_command("kernels/aux_trunk_kernel.cu", tmp_path / "a.cubin")
    assert "-isystem" not in shipped and shipped[-3:] == ["-o", str(tmp_path / "a.cubin"), "kernels/aux_trunk_kernel.cu"]
    cand = bench.nvcc_command(TRUNK, tmp_path / "b.cubin")
    assert cand[cand.index("-isystem") + 1] == "/opt/cutlass/include"
    assert cand[cand.index("-isystem") - 2 : cand.index("-isystem")] == ["-I", "kernels"]
    # a round-to-nearest wrapper includes the shipped source through a quoted path: the headers too, its folder first
    rn = bench.nvcc_command("benchmarks/kernels_baseline/aux_trunk_forward_cutlass_rn.cu", tmp_path / "c.cubin")
    assert rn[rn.index("-isystem") - 2 : rn.index("-isystem") + 2] == ["-I", "benchmarks/kernels_baseline", "-isystem", "/opt/cutlass/include"]


@pytest.mark.nvcc
@pytest.mark.cutlass
@pytest.mark.skipif(importlib.util.find_spec("cutlass_library") is None, reason="the nvidia-cutlass wheel is not installed")
def test_the_chain_compiles_with_both_cutlass_candidates(bench, tmp_path):
    from audit.load import load_contracts

    cs = load_contracts(REPO / "contracts", REPO)
    swapped = bench.with_candidates(cs, [
        bench.Candidate.parse(TRUNK_SPEC),
        bench.Candidate.parse(f"aux_weight_grad_partial={PARTIAL}:aux_weight_grad_partial_cutlass"),
    ])  # fmt: skip
    only = dataclasses.replace(swapped, kernels=tuple(k for k in swapped.kernels if k.source in (TRUNK, PARTIAL)))
    cubins = bench.compile_cubins(only, tmp_path, jobs=2)
    assert sorted(cubins) == sorted([PARTIAL, TRUNK]) and all(p.stat().st_size > 0 for p in cubins.values())
    if shutil.which("cuobjdump"):
        syms = subprocess.run(["cuobjdump", "-symbols", str(cubins[TRUNK])], capture_output=True, text=True).stdout
        assert "aux_trunk_forward_cutlass" in syms


HEAD = "kernels/aux_head_forward_cutlass.cu"
SCRIPT = REPO / "tests" / "gpu" / "issue18_candidates.sh"


def _script_candidates() -> list[str]:
    """The ``--candidate`` specs of tests/gpu/issue18_candidates.sh, its shell variables (NAME=value lines) expanded."""
    import re

    text = SCRIPT.read_text()
    env = dict(re.findall(r"^([A-Z][A-Z0-9_]*)=(\S+)$", text, re.M))
    # ${VAR:+word} of a variable the caller did not set (RN: the split builds) expands to nothing
    env = {k: re.sub(r"\$\{\w+:\+[^}]*\}", "", v) for k, v in env.items()}

    def expand(spec: str) -> str:
        while "$" in spec:
            spec = re.sub(r"\$(\w+)", lambda m: env[m[1]], spec)
        return spec

    return [expand(spec) for spec in re.findall(r'--candidate "([^"]+)"', text)]


def test_the_device_script_launches_both_head_forward_candidates_at_their_geometry(bench, monkeypatch):
    from audit.load import load_contracts

    specs = _script_candidates()
    cands = [bench.Candidate.parse(s) for s in specs]
    assert [c.kernel for c in cands] == ["aux_trunk_forward", "aux_weight_grad_partial", "aux_trade_outcome_forward", "aux_next_bar_forward",
                                         "aux_next_bar_backward", "aux_trade_outcome_backward"]
    assert specs[0] == TRUNK_SPEC
    # the head specs are the benchmark's (its default tile, grid = ceil_div(B, TBM) of 256 threads)
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_head_fwd_cutlass as head_bench

    assert specs[2:4] == [head_bench.chain_spec(h) for h in head_bench.HEADS]
    cs = load_contracts(REPO / "contracts", REPO)
    swapped = bench.with_candidates(cs, cands)
    for c in cands[2:4]:
        k = swapped.kernel_map[c.kernel]
        assert (k.source, k.symbol, k.params) == (HEAD, c.entry, cs.kernel_map[c.kernel].params)
    csB = bench.contracts_at(swapped, 65536)
    ops = bench.build_plan(csB, bench.Wiring(csB), (bench.FORWARD, bench.FUSED), 1966)
    heads = {op.name: (op.grid, op.block, op.kernel.source) for op in ops if op.name in ("aux_trade_outcome_forward", "aux_next_bar_forward")}
    assert heads == {"aux_trade_outcome_forward": ((1024, 1, 1), (256, 1, 1), HEAD), "aux_next_bar_forward": ((1024, 1, 1), (256, 1, 1), HEAD)}
    assert head_bench.cutlass_geometry(65536) == ((1024, 1, 1), (256, 1, 1))  # what the kernel's header says for its defaults
    csS = bench.contracts_at(swapped, 37)
    small = [op for op in bench.build_plan(csS, bench.Wiring(csS), (bench.FORWARD,), 1) if op.kernel.source == HEAD]
    assert sorted((op.name, op.grid) for op in small) == [("aux_next_bar_forward", (1, 1, 1)), ("aux_trade_outcome_forward", (1, 1, 1))]


@pytest.mark.nvcc
@pytest.mark.cutlass
@pytest.mark.skipif(importlib.util.find_spec("cutlass_library") is None, reason="the nvidia-cutlass wheel is not installed")
def test_the_chain_compiles_both_head_candidates_into_one_cubin(bench, tmp_path):
    from audit.load import load_contracts

    cs = load_contracts(REPO / "contracts", REPO)
    swapped = bench.with_candidates(cs, [bench.Candidate.parse(s) for s in _script_candidates()[2:4]])
    only = dataclasses.replace(swapped, kernels=tuple(k for k in swapped.kernels if k.source == HEAD))
    assert len(only.kernels) == 2
    cubins = bench.compile_cubins(only, tmp_path, jobs=1)
    assert list(cubins) == [HEAD] and cubins[HEAD].stat().st_size > 0
    data = cubins[HEAD].read_bytes()
    assert b"aux_trade_outcome_forward_cutlass" in data and b"aux_next_bar_forward_cutlass" in data


NBBWD = "benchmarks/kernels_baseline/aux_next_bar_backward_cutlass.cu"


def test_the_device_script_launches_the_next_bar_backward_candidate_at_its_geometry(bench, monkeypatch):
    """Step D's spec is the benchmark's chain_spec (the source's default tile); both backward schedules (the fused
    one with NULL weight partials, the per-sample one with them) launch the candidate at grid ceil_div(B, 32) x 128
    threads, with the shipped kernel's parameters."""
    from audit.load import load_contracts

    spec = _script_candidates()[4]
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_nb_bwd_cutlass as nb_bench

    assert spec == nb_bench.chain_spec()
    cand = bench.Candidate.parse(spec)
    cs = load_contracts(REPO / "contracts", REPO)
    swapped = bench.with_candidates(cs, [cand])
    k = swapped.kernel_map["aux_next_bar_backward"]
    assert (k.source, k.symbol, k.params) == (NBBWD, "aux_next_bar_backward_cutlass", cs.kernel_map["aux_next_bar_backward"].params)
    for B, grid in ((65536, (2048, 1, 1)), (4103, (129, 1, 1)), (37, (2, 1, 1))):
        csB = bench.contracts_at(swapped, B)
        # the fused path launches aux_next_bar_backward_store (the accumulator's first writer), not this kernel
        for schedules in ((bench.FORWARD, bench.PARTIALS),):
            (op,) = [op for op in bench.build_plan(csB, bench.Wiring(csB), schedules, 1) if op.name == "aux_next_bar_backward"]
            assert (op.grid, op.block, op.kernel.source) == (grid, (128, 1, 1), NBBWD), (B, schedules)
    assert nb_bench.cutlass_geometry(65536) == ((2048, 1, 1), (128, 1, 1))  # what the kernel's header says for its defaults


def test_the_device_script_ends_inside_the_device_limit():
    """Each step's timeout default (``${CAP_X:-N}``, once per step) and the header's list of them agree, and they sum
    to <= 545 s, which with 5 s of kill grace per step ends inside the device's 590 s."""
    import re

    text = SCRIPT.read_text()
    header, body = text.split("\nset -u\n", 1)
    used = dict(re.findall(r'timeout -k 5 "\$\{CAP_([A-Z]):-(\d+)\}"', body))
    used.update(re.findall(r"cap=\$\{CAP_([A-Z]):-(\d+)\}", body))
    assert sorted(used) == ["A", "B", "C", "D", "E", "F"]
    assert dict(re.findall(r"cap \$\{CAP_([A-Z]):-(\d+)\} s", header)) == used
    assert sum(int(v) for v in used.values()) + 5 * len(used) <= 575
    assert "tests/gpu/test_nb_bwd_cutlass_gpu.py" in body and "benchmarks/gpu_nb_bwd_cutlass.py" in body
    step_c = body.split('"${CAP_C:-', 1)[1].split("\nnote ", 1)[0]
    assert "tests/gpu/test_to_bwd_fast_gpu.py" in step_c


@pytest.mark.nvcc
@pytest.mark.cutlass
@pytest.mark.skipif(importlib.util.find_spec("cutlass_library") is None, reason="the nvidia-cutlass wheel is not installed")
def test_the_chain_compiles_the_next_bar_backward_candidate(bench, tmp_path):
    from audit.load import load_contracts

    cs = load_contracts(REPO / "contracts", REPO)
    swapped = bench.with_candidates(cs, [bench.Candidate.parse(_script_candidates()[4])])
    only = dataclasses.replace(swapped, kernels=tuple(k for k in swapped.kernels if k.source == NBBWD))
    cubins = bench.compile_cubins(only, tmp_path, jobs=1)
    assert list(cubins) == [NBBWD] and b"aux_next_bar_backward_cutlass" in cubins[NBBWD].read_bytes()


TOBWD = "benchmarks/kernels_baseline/aux_trade_outcome_backward_fast.cu"


def test_the_device_script_launches_the_trade_outcome_backward_candidate_at_its_geometry(bench, monkeypatch):
    """Step D's spec is benchmarks/gpu_to_bwd.py's chain_spec; both backward schedules (the fused one with NULL weight
    partials, the per-sample one with them) launch the candidate at grid ceil_div(B, 32) x 256 threads, with the
    shipped kernel's parameters. Since 2c145f5 the contract ships its copy (kernels/aux_trade_outcome_backward_fast_kernel.cu,
    the same geometry): the swap changes the source and entry only."""
    from audit.load import load_contracts

    spec = _script_candidates()[5]
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_to_bwd as to_bench

    assert spec == to_bench.chain_spec()
    cand = bench.Candidate.parse(spec)
    cs = load_contracts(REPO / "contracts", REPO)
    swapped = bench.with_candidates(cs, [cand])
    k = swapped.kernel_map["aux_trade_outcome_backward"]
    assert (k.source, k.symbol, k.params) == (TOBWD, "aux_trade_outcome_backward_fast", cs.kernel_map["aux_trade_outcome_backward"].params)
    for B, grid in ((65536, (2048, 1, 1)), (4103, (129, 1, 1)), (37, (2, 1, 1))):
        csB = bench.contracts_at(swapped, B)
        for schedules in ((bench.FORWARD, bench.FUSED), (bench.FORWARD, bench.PARTIALS)):
            (op,) = [op for op in bench.build_plan(csB, bench.Wiring(csB), schedules, 1) if op.name == "aux_trade_outcome_backward"]
            assert (op.grid, op.block, op.kernel.source) == (grid, (256, 1, 1), TOBWD), (B, schedules)
    shipped = bench.contracts_at(cs, 65536)
    (op,) = [op for op in bench.build_plan(shipped, bench.Wiring(shipped), (bench.FORWARD, bench.FUSED), 1) if op.name == "aux_trade_outcome_backward"]
    assert (op.grid, op.kernel.source, op.kernel.symbol) == ((2048, 1, 1), "kernels/aux_trade_outcome_backward_fast_kernel.cu",
                                                             "aux_trade_outcome_backward")  # what the swap changes: source and entry
    assert to_bench.candidate_geometry(65536) == ((2048, 1, 1), (256, 1, 1))  # what the kernel's header says


@pytest.mark.nvcc
def test_the_chain_compiles_the_trade_outcome_backward_candidate(bench, tmp_path):
    from audit.load import load_contracts

    cs = load_contracts(REPO / "contracts", REPO)
    swapped = bench.with_candidates(cs, [bench.Candidate.parse(_script_candidates()[5])])
    only = dataclasses.replace(swapped, kernels=tuple(k for k in swapped.kernels if k.source == TOBWD))
    cubins = bench.compile_cubins(only, tmp_path, jobs=1)
    assert list(cubins) == [TOBWD] and b"aux_trade_outcome_backward_fast" in cubins[TOBWD].read_bytes()


SHIP_SCRIPT = REPO / "tests" / "gpu" / "issue18_ship.sh"


def _ship_steps() -> tuple[str, str, dict[str, list[str]]]:
    """tests/gpu/issue18_ship.sh: header, body, and each ``chain`` step's --candidate specs (variables expanded)."""
    import re

    text = SHIP_SCRIPT.read_text()
    header, body = text.split("\nset -u\n", 1)
    env = dict(re.findall(r'^([A-Z][A-Z0-9_]*)="([^"]+)"$', body, re.M))
    steps = {}
    for letter, rest in re.findall(r"^step ([A-Z]) && chain [A-Z] (.*)$", body, re.M):
        words = re.findall(r'"([^"]*)"|(\S+)', rest)
        specs = [q or w for q, w in words][3:]  # cap, sizes, json name, then the candidates
        steps[letter] = [re.sub(r"^\$(\w+)$", lambda m: env[m[1]], s) for s in specs]
    return header, body, steps


def test_the_ship_script_fits_the_device_limit():
    """Each step's cap as its header lists it; with 5 s of kill grace per step they end inside the device's 590 s."""
    import re

    header, body, steps = _ship_steps()
    caps = dict(re.findall(r'timeout -k 5 "\$\{CAP_([A-Z]):-(\d+)\}"', body))
    caps.update(re.findall(r'step ([A-Z]) && chain [A-Z] "\$\{CAP_[A-Z]:-(\d+)\}"', body))
    x = re.search(r"^X=\$\{CAP_X:-(\d+)\}$", body, re.M)[1]
    caps.update({letter: x for letter in steps if letter not in caps})
    assert sorted(caps) == ["B", "D", "H", "J", "K", "O", "P", "R", "T", "V"]
    listed = dict(re.findall(r"cap \$\{CAP_([A-Z]):-(\d+)\} s", header))
    assert listed == {"V": caps["V"], "D": caps["D"], "R": caps["R"], "X": x, "T": caps["T"]}
    assert caps["B"] == caps["D"]  # B is D with one candidate: D's cap
    default = re.search(r"STEPS=\$\{STEPS:-([A-Z]+)\}", body)[1]
    assert default == "VDRT"
    # the default run and the attribution run (STEPS=KJOPH) each end inside the device's 590 s
    for run in (default, "KJOPH"):
        assert sum(int(caps[c]) for c in run) + 5 * len(run) <= 580, run
    assert re.search(r'\[ "\$letter" = R \] && replays=100', body)
    assert "python3 -m audit verify --backend pycuda --backend cupy" in body
    assert "tests/gpu/test_to_bwd_fast_gpu.py" in body


def test_the_ship_script_swaps_in_the_simt_gemms_it_names(bench):
    """Step D runs the contracts as shipped; O, P and H swap in the SIMT kernels their header names, each a
    contract kernel's replacement whose source exists, at the geometry of the pre-CUTLASS contracts
    (tests/simt_chain.py)."""
    from audit.load import load_contracts

    _, _, steps = _ship_steps()
    kernels = {letter: sorted(bench.Candidate.parse(s).kernel for s in specs) for letter, specs in steps.items()}
    assert kernels == {
        "D": [],
        "R": [],
        "B": ["aux_next_bar_backward_store"],
        "K": ["aux_next_bar_forward", "aux_trade_outcome_forward", "aux_trunk_forward", "aux_weight_grad_partial"],
        "O": ["aux_trade_outcome_forward"],
        "P": ["aux_trade_outcome_forward", "aux_weight_grad_partial"],
        "J": ["aux_trade_outcome_forward"],
        "H": ["aux_next_bar_forward", "aux_trade_outcome_forward", "aux_weight_grad_partial"],
    }
    assert steps["J"] == [s for s in steps["K"] if s.startswith("aux_trade_outcome_forward=")]
    cs = load_contracts(REPO / "contracts", REPO)
    cands = [bench.Candidate.parse(s) for s in steps["H"]]
    swapped = bench.with_candidates(cs, cands)
    env = {"B": 65536, "SH2": 256, "E": 256, "H": 128, "N": 256, "M": 256, "P": 128}
    want = {  # the SIMT kernels' own launch geometry at B = 65536 (grid, block)
        "aux_trade_outcome_forward": ((2048, 1, 1), (128, 1, 1)),
        "aux_next_bar_forward": ((2048, 1, 1), (128, 1, 1)),
        "aux_weight_grad_partial": ((2, 2, 128), (256, 1, 1)),
    }
    for c in cands:
        k = swapped.kernel_map[c.kernel]
        assert (REPO / k.source).is_file() and k.source == c.source
        assert f"{c.entry}(" in (REPO / k.source).read_text()
        grid = tuple(e.evaluate(env, {}) for e in k.grid)
        block = tuple(e.evaluate(env, {}) for e in k.block)
        assert (grid, block) == want[c.kernel], c.kernel


def test_the_ship_script_k8_step_launches_the_shipped_cutlass_sources_staged_per_k8(bench):
    """Step K: each candidate is a benchmarks/kernels_baseline/*_k8.cu wrapper that sets AUX_CUTLASS_STAGE_K8 and
    includes the shipped source of that contract kernel, launched with the shipped entry and geometry (the head
    forwards with 8 warps of 32 x 32: block 256)."""
    import re

    from audit.load import load_contracts

    _, _, steps = _ship_steps()
    cs = load_contracts(REPO / "contracts", REPO)
    swapped = bench.with_candidates(cs, [bench.Candidate.parse(s) for s in steps["K"]])
    for spec in steps["K"]:
        c = bench.Candidate.parse(spec)
        shipped, k = cs.kernel_map[c.kernel], swapped.kernel_map[c.kernel]
        text = (REPO / c.source).read_text()
        assert c.source.startswith("benchmarks/kernels_baseline/") and c.source.endswith("_k8.cu")
        assert "#define AUX_CUTLASS_STAGE_K8 1" in text
        assert re.findall(r'#include "\.\./\.\./(kernels/[^"]+)"', text) == [shipped.source]
        assert k.symbol == shipped.entry and k.grid == shipped.grid and k.params == shipped.params
        if "head_forward" in c.source:
            assert "#define AUX_HEAD_CUTLASS_WM 32" in text
            assert [e.evaluate({}, {}) for e in k.block] == [256, 1, 1]
        else:
            assert k.block == shipped.block


@pytest.mark.nvcc
@pytest.mark.cutlass
@pytest.mark.skipif(importlib.util.find_spec("cutlass_library") is None, reason="the nvidia-cutlass wheel is not installed")
def test_the_ship_script_k8_builds_compile_without_spills_and_fit_their_launch(bench):
    """wireup check's build and code rules on the contracts with step K's candidates: they compile, their entries
    take the contract's parameters, each launch fits (the head forwards' 256 threads at 255 registers), nothing
    spills, and the static analyses (bounds, uninitialised reads, store and shared races, cp.async waits) find
    nothing: what shipping AUX_CUTLASS_STAGE_K8 would have to pass before a GPU sees it."""
    import dataclasses

    from audit.api import run_check
    from audit.load import load_contracts

    _, _, steps = _ship_steps()
    cs = load_contracts(REPO / "contracts", REPO)
    cands = [bench.Candidate.parse(s) for s in steps["K"]]
    swapped = bench.with_candidates(cs, cands)
    only = dataclasses.replace(swapped, kernels=tuple(k for k in swapped.kernels if k.name in {c.kernel for c in cands}))
    rules = ("COMPILE_ERROR", "ENTRY_MISSING", "ABI_MISMATCH", "LAUNCH_RESOURCES", "REGISTER_SPILLS", "LOCAL_ARRAY_BOUNDS",
             "SHARED_ARRAY_BOUNDS", "LOCAL_UNINIT_READ", "STORE_RACE", "SHARED_RMW_RACE", "CP_ASYNC_WAIT", "SHARED_BYTES_MISSING")
    run = run_check(REPO, select=rules, contracts=only, jobs=1)
    assert [f.message for f in run.result.findings] == [] and sorted(run.result.ran) == sorted(rules)


@pytest.mark.nvcc
def test_the_ship_script_simt_gemms_compile_with_the_contracts_parameters(bench, tmp_path):
    """Step H's kernels built and checked like shipped ones (wireup check's build rules on the swapped contracts):
    each entry exists and takes the contract kernel's parameters."""
    import dataclasses

    from audit.api import run_check
    from audit.load import load_contracts

    _, _, steps = _ship_steps()
    cs = load_contracts(REPO / "contracts", REPO)
    swapped = bench.with_candidates(cs, [bench.Candidate.parse(s) for s in steps["H"]])
    names = {bench.Candidate.parse(s).kernel for s in steps["H"]}
    only = dataclasses.replace(swapped, kernels=tuple(k for k in swapped.kernels if k.name in names))
    run = run_check(REPO, select=("COMPILE_ERROR", "ENTRY_MISSING", "ABI_MISMATCH", "LAUNCH_RESOURCES"), contracts=only, jobs=1)
    assert [f.message for f in run.result.findings] == []
