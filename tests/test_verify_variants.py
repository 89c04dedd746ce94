"""Dims variants of fixed dims (``[kernel.verify] dims``) and their ``variant_cases`` cap, on the
emulated backend: the shipped head forwards are verified at H = 129 and SH2 = 253 as well as at the
production 128 / 256, so a bug only the scalar tail paths of aux_head_forward.cuh reach is caught."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audit.load import load_contracts
from audit.runtime import verify
from audit.runtime._backend import DeviceError


@pytest.fixture(scope="module")
def repo_root(request):
    return request.config.rootpath


def wrong_when_h_is_no_multiple_of_4(launch):
    """The class of the surviving header mutants: a tail path (H % 4 != 0) that drops the last unit."""
    res = launch.run_reference()
    if launch.scalar("H") % 4:
        res["h1_out"] = np.array(res["h1_out"], copy=True)
        res["h1_out"][:, -1] = 0.0
    launch.write_outputs(res)


def test_the_shipped_head_forward_declares_a_tail_variant(repo_root):
    cs = load_contracts(repo_root / "contracts", repo_root)
    spec = cs.kernel_map["aux_next_bar_forward"].verify
    assert dict(spec.dims) == {"H": (128, 129, 100), "SH2": (256, 253)}
    assert spec.variant_cases == 3


def test_a_bug_only_a_fixed_dim_tail_reaches_is_caught_by_the_variant(repo_root):
    out = verify(repo_root, kernels=["aux_next_bar_forward"], emulated={"aux_next_bar_forward": wrong_when_h_is_no_multiple_of_4},
                 evidence=False)  # fmt: skip
    bad = [f for f in out.result.findings if f.rule == "VERIFY_REFERENCE"]
    assert bad, [f.message for f in out.result.findings]
    assert all("H=129" in f.message for f in bad), [f.message for f in bad]
    assert out.result.exit_code == 1


def test_later_variants_run_only_three_cases(repo_root):
    out = verify(repo_root, kernels=["aux_next_bar_forward"], emulated={}, evidence=False)
    r = out.run.results[0]
    assert r.verdict == "pass", [c for c in r.checks if c.verdict == "fail"]
    labels = {c.case for c in r.checks if c.check == "reference" and c.verdict == "pass"}
    at_129 = {lab for lab in labels if "H=129" in lab}
    at_prod = {lab for lab in labels if "(H=128, SH2=256)" in lab}
    assert at_129 and len({lab.split(" ")[0] for lab in at_129}) <= 3, sorted(at_129)
    assert len({lab.split(" ")[0] for lab in at_prod}) > 3, sorted(at_prod)
    assert any("variant_cases = 3" in n for n in r.notes)


def test_capped_variants_skip_the_numeric_stress_cases(repo_root):
    out = verify(repo_root, kernels=["aux_trade_outcome_forward"], emulated={}, evidence=False)
    r = out.run.results[0]
    stress = {c.case for c in r.checks if "stress" in c.case}
    assert stress, "the first variant runs stress cases"
    assert all("(K=3, H=128, SH2=256, stress" in lab for lab in stress), sorted(stress)
    assert {c.case for c in r.checks if "K=8" in c.case}, "the later variants still run"
    assert any("numeric stress cases ran at the first dims variant only" in n for n in r.notes)


def wrong_when_the_scalar_rest_runs_twice(launch):
    """A head forward whose scalar rest after the 4-wide steps (H % 4 of 2 or 3: the rest loop runs more
    than once) drops its last unit: the class of aor:264:88:0 of 6 December, an index slip in a tail loop
    that only ever ran at jj = 0 because the listed H values (128, 257) leave a rest of 0 or 1."""
    res = launch.run_reference()
    if launch.scalar("H") % 4 >= 2:
        res["h1_out"] = np.array(res["h1_out"], copy=True)
        res["h1_out"][:, -1] = 0.0
    launch.write_outputs(res)


def test_the_search_adds_the_unlisted_neighbours_of_the_listed_values(repo_root):
    from audit.runtime._plan import dims_neighbours, dims_variants

    cs = load_contracts(repo_root / "contracts", repo_root)
    k = cs.kernel_map["aux_trade_outcome_backward"]
    assert dims_neighbours(k) == [("K", 2), ("K", 4), ("K", 5), ("K", 6), ("K", 7), ("H", 129), ("H", 130), ("H", 131), ("H", 256),
                                  ("SH2", 257), ("SH2", 258), ("SH2", 259)]  # fmt: skip
    variants = dims_variants(k, cs)
    assert len(variants) == 3 * 2 * 3 + 12
    # one dim at a time, the others at their first listed (production) value
    assert variants[18:20] == [{"K": 2, "H": 128, "SH2": 256}, {"K": 4, "H": 128, "SH2": 256}]
    assert {"K": 3, "H": 130, "SH2": 256} in variants
    # a dim with one listed value has no range to search
    assert dims_neighbours(cs.kernel_map["aux_trunk_backward"]) == [("E", 254), ("E", 255)]


def test_a_bug_only_an_unlisted_residue_reaches_is_caught_by_a_neighbour(repo_root):
    out = verify(repo_root, kernels=["aux_next_bar_forward"], emulated={"aux_next_bar_forward": wrong_when_the_scalar_rest_runs_twice},
                 evidence=False)  # fmt: skip
    bad = [f for f in out.result.findings if f.rule == "VERIFY_REFERENCE"]
    assert bad, [f.message for f in out.result.findings]
    # H = [128, 129, 100] lists no value with a rest of 2 or 3: only the neighbours 102 and 103 show it
    assert {("H=102" in f.message) or ("H=103" in f.message) for f in bad} == {True}, [f.message for f in bad]
    r = out.run.results[0]
    assert "the search added dims variants at the neighbours of the listed values inside their range (v - 1, v + 1, v + 2, v + 3; " \
           "one dim at a time): H = 101, 102, 103, 127; SH2 = 254, 255" in r.notes, r.notes  # fmt: skip


def test_neighbours_false_keeps_to_the_listed_values_and_stays_out_of_the_hash():
    from audit.errors import ContractError
    from audit.hashing import contract_hash
    from audit.runtime._plan import dims_neighbours, dims_variants

    base = _KERNEL + "dims = { H = [4, 8] }\n"
    a = load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": base})
    b = load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": base + "neighbours = false\n"})
    assert dims_neighbours(a.kernel_map["k"]) == [("H", 5), ("H", 6), ("H", 7)]
    assert dims_neighbours(b.kernel_map["k"]) == []
    assert dims_variants(b.kernel_map["k"], b) == [{"H": 4}, {"H": 8}]
    assert contract_hash(a.kernel_map["k"]) == contract_hash(b.kernel_map["k"])
    with pytest.raises(ContractError) as info:
        load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": base + 'neighbours = "no"\n'})
    (problem,) = info.value.problems
    assert (problem.path, problem.line, problem.key) == ("contracts/k.toml", 15, "kernel[0].verify.neighbours")
    assert "boolean" in problem.message and '"no"' in problem.message, problem.message


def test_a_sanitizer_run_caps_the_later_variants_of_its_given_sizes(repo_root):
    """Under a sanitizer the sizes are given (1, 37, 300, 4096), not planned; the dims variants after the first
    still run only variant_cases of them (an instrumented launch costs 10-100 plain ones)."""
    out = verify(repo_root, kernels=["aux_next_bar_forward"], emulated={}, evidence=False, sanitizer="memcheck")
    r = out.run.results[0]
    assert r.verdict == "pass", [c for c in r.checks if c.verdict == "fail"]
    sizes = lambda tag: {c.case.split(" ")[0] for c in r.checks if c.check == "reference" and tag in c.case}  # noqa: E731
    assert sizes("(H=128, SH2=256)") == {"B=1", "B=37", "B=300", "B=4096"}
    assert sizes("(H=129, SH2=256)") == sizes("(H=102, SH2=256)") == {"B=1", "B=37", "B=300"}
    assert "dims variants after the first ran at 3 case(s) of the 4 sizes of the memcheck run: its smallest and its smallest of at least " \
           "16 rows (variant_cases = 3)" in r.notes, r.notes  # fmt: skip


def hard_codes_the_production_stride(launch):
    """A gather that ignores its row_stride argument and uses the production S = 32: every check at S = 32
    passes; only another value of S shows it."""
    src = np.asarray(launch.tensor("src")).reshape(-1)
    b = launch.scalar("B")
    launch.tensor("dst")[:b] = src[np.arange(b) * 32 + launch.scalar("col")][:b]


FIXED_ONE_VALUE = ('Kernel "strided_gather" takes the fixed dim S as its argument "row_stride" and ran at S = 32 only: its code for other values '
                   "of S never ran, and a kernel that ignores the argument (using 32 where it should read row_stride) passes; list a second value "
                   "it takes in [kernel.verify] dims = { S = [32, 33] }, and the search adds the values around them.")  # fmt: skip


def _edited_root(repo_root, tmp_path, contract, edit):
    """A copy of the shipped contracts and kernels with contracts/kernels/<contract> edited."""
    import shutil

    root = tmp_path / "repo"
    skip = shutil.ignore_patterns(".git", ".venv", ".wireup-cache", ".carry", ".whl", "reports", "benchmarks", "docs", "tests", "*.egg-info")
    shutil.copytree(repo_root, root, ignore=skip)
    toml = root / "contracts" / "kernels" / contract
    toml.write_text(edit(toml.read_text()))
    return root


def _skinny_with(line):
    """An edit of aux_param_grad_reduce.toml adding ``line`` to the skinny partial's [kernel.verify]."""

    def edit(text):
        skinny = text.index('name = "aux_weight_grad_partial_skinny"')
        return text[:skinny] + text[skinny:].replace("variant_cases = 3\n", f"variant_cases = 3\n{line}\n", 1)

    return edit


SHIPPED_S = "dims = { S = [32, 1, 7, 64] }\nvariant_cases = 3\n"  # strided_gather's, the first kernel of the file


def test_a_fixed_dim_argument_verified_at_one_value_is_reported(repo_root, tmp_path):
    # the shipped strided_gather without its S values: row_stride is verified at S = 32 only
    assert SHIPPED_S in (repo_root / "contracts" / "kernels" / "label_producers.toml").read_text()
    root = _edited_root(repo_root, tmp_path, "label_producers.toml", lambda text: text.replace(SHIPPED_S, "", 1))
    out = verify(root, kernels=["strided_gather"], emulated={"strided_gather": hard_codes_the_production_stride}, evidence=False, sizes=[37])
    one = [f for f in out.result.findings if f.rule == "VERIFY_FIXED_DIM_ONE_VALUE"]
    assert [(f.message, f.severity.value, f.location) for f in one] == [(FIXED_ONE_VALUE, "warning", "contracts/kernels/label_producers.toml:21")]
    assert out.result.exit_code == 0  # the hard-coded stride passes at S = 32: the warning is all there is
    assert not [f for f in out.result.findings if f.severity.value == "error"]
    strict = verify(root, kernels=["strided_gather"], emulated={}, evidence=False, sizes=[37], strict=True)
    assert [f.severity.value for f in strict.result.findings if f.rule == "VERIFY_FIXED_DIM_ONE_VALUE"] == ["error"]
    assert strict.result.exit_code == 1


def test_the_shipped_values_of_the_fixed_dim_catch_the_hard_coded_one(repo_root):
    out = verify(repo_root, kernels=["strided_gather"], emulated={"strided_gather": hard_codes_the_production_stride}, evidence=False, sizes=[37])
    assert not [f for f in out.result.findings if f.rule == "VERIFY_FIXED_DIM_ONE_VALUE"]
    # S = 1, the second listed value, reads past src at its first size: the emulated launch fails there
    bad = [f.message for f in out.result.findings if f.severity.value == "error"]
    assert out.result.exit_code == 1 and any("VERIFY_LAUNCH_ERROR: launch strided_gather B=37 (S=1)" in m for m in bad), bad


def _labels(launch) -> np.ndarray:
    return np.asarray(launch.tensor("labels")).reshape(-1)


def _crowded_blocks(launch) -> list[int]:
    """The 32-row blocks of the launch with at least 4 valid rows and a skipped one."""
    lab = _labels(launch)
    k = launch.scalar("K")
    valid = (lab >= 0) & (lab < k)
    out = []
    for b0 in range(0, lab.size, 32):
        v = valid[b0 : b0 + 32]
        if v.sum() >= 4 and not v.all():
            out.append(b0)
    return out


def fill_slips_at_k8_in_crowded_blocks(launch):
    """A trade-outcome backward whose skipped-row fill slips (leaves a skipped row's db2_partial unwritten)
    in a block with four or more valid rows, only at K = 8: the class of the survivors aor:77:30:0 and
    aor:78:31:0 of 6 December (a block's row bits mis-computed), which only the K = 8 variant at a crowded
    block showed, and only by chance at B = 65536."""
    res = launch.run_reference()
    launch.write_outputs(res)
    if launch.scalar("K") != 8:
        return
    lab = _labels(launch)
    db2 = launch.tensor("db2_partial")
    for b0 in _crowded_blocks(launch):
        r = b0 + int(np.flatnonzero(~((lab[b0 : b0 + 32] >= 0) & (lab[b0 : b0 + 32] < 8)))[0])
        db2[r, :] = np.float32("nan")


def faults_misaligned_in_crowded_blocks(launch):
    """A float4 fill of the skipped rows with no alignment check, reached only in blocks with valid and
    skipped rows (the survivor guard:72:5:0): misaligned pointers fault there."""
    ptr = int(launch.args[launch._param_index("db1_partial")].value)
    if ptr % 16 and _crowded_blocks(launch):
        raise DeviceError("misaligned address", sticky=True, code="CUDA_ERROR_MISALIGNED_ADDRESS")
    launch.default()


@pytest.fixture(scope="module")
def small_batch_root(repo_root, tmp_path_factory):
    """The repository with B up to 300: the trade-outcome backward's planned sweep (1, 4, 5, 32, 33, 37, 256,
    257, 300) without the large sizes an emulated run cannot afford here, its dims variants capped as shipped."""
    import shutil

    root = tmp_path_factory.mktemp("b300") / "repo"
    skip = shutil.ignore_patterns(".git", ".venv", ".wireup-cache", ".carry", ".whl", "reports", "benchmarks", "docs", "tests", "*.egg-info")
    shutil.copytree(repo_root, root, ignore=skip)
    dims = root / "contracts" / "dims.toml"
    text = dims.read_text()
    assert text.count("B   = { min = 1, max = 65536,") == 1
    dims.write_text(text.replace("B   = { min = 1, max = 65536,", "B   = { min = 1, max = 300,"))
    return root


def test_capped_variants_run_the_smallest_case_and_the_smallest_of_a_block(small_batch_root):
    out = verify(small_batch_root, kernels=["aux_trade_outcome_backward"], emulated={}, evidence=False)
    r = out.run.results[0]
    assert r.verdict == "pass", [c for c in r.checks if c.verdict == "fail"]
    at_k8 = {c.case.split(" ")[0] for c in r.checks if c.check == "reference" and "(K=8, H=257, SH2=261" in c.case}
    assert at_k8 == {"B=1", "B=32", "B=33"}, sorted(at_k8)
    assert any("dims variants after the first ran at 3 case(s) of the sweep's 12: its smallest and its smallest of at least 16 rows" in n
               for n in r.notes), r.notes  # fmt: skip
    # the mask and alignment stress at every variant, the numeric stress at the first only
    stress = {c.case for c in r.checks if "(K=8, H=257, SH2=261" in c.case and "stress" in c.case}
    assert stress == {"B=32 (K=8, H=257, SH2=261, stress labels one-valid)", "B=32 (K=8, H=257, SH2=261, stress labels half-valid)",
                      "B=32 (K=8, H=257, SH2=261, stress labels half-valid), pointers misaligned"}, sorted(stress)  # fmt: skip
    assert {c.case for c in r.checks if c.case == "B=32 (K=8, H=257, SH2=261), pointers misaligned"}


def test_a_fill_slip_only_a_crowded_block_at_a_variant_shows_is_caught_by_the_half_valid_case(small_batch_root):
    out = verify(small_batch_root, kernels=["aux_trade_outcome_backward"], emulated={"aux_trade_outcome_backward": fill_slips_at_k8_in_crowded_blocks},
                 evidence=False)  # fmt: skip
    r = out.run.results[0]
    failed = {c.case for c in r.checks if c.verdict == "fail"}
    assert failed and all("K=8" in case for case in failed), sorted(failed)
    assert any("half-valid" in case for case in failed), sorted(failed)
    assert out.result.exit_code == 1


def test_an_unchecked_vector_fill_faults_at_the_half_valid_misaligned_run(small_batch_root):
    out = verify(small_batch_root, kernels=["aux_trade_outcome_backward"], emulated={"aux_trade_outcome_backward": faults_misaligned_in_crowded_blocks},
                 evidence=False)  # fmt: skip
    f = next(f for f in out.result.findings if f.rule == "VERIFY_LAUNCH_ERROR")
    assert "stress labels half-valid) (run E, pointers misaligned)" in f.message and "CUDA_ERROR_MISALIGNED_ADDRESS" in f.message, f.message


_KERNEL = """[dims]
B = { min = 1, max = 8 }
H = { value = 4 }

[[kernel]]
name = "k"
source = "kernels/k.cu"
stage = "forward"
grid = [1, 1, 1]
block = [32, 1, 1]
params = [{ name = "x", dtype = "f32", shape = ["B", "H"], role = "in" }]

[kernel.verify]
"""


@pytest.mark.parametrize(
    ("verify", "line", "message"),
    [
        ("dims = { H = [4, 5] }\nvariant_cases = 0\n", 15, "expected a positive number of cases, found 0."),
        ("variant_cases = 2\n", 14, 'expected "variant_cases" only next to "dims" or "bindings" (it caps the cases of the dims variants after the first and of the extra bindings), found neither.'),
        ('dims = { H = [4, 5] }\nvariant_cases = "3"\n', 15, None),
    ],
)
def test_bad_variant_cases_name_file_key_and_line(verify, line, message):
    from audit.errors import ContractError

    with pytest.raises(ContractError) as info:
        load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": _KERNEL + verify})
    (problem,) = info.value.problems
    assert (problem.path, problem.line, problem.key) == ("contracts/k.toml", line, "kernel[0].verify.variant_cases")
    if message is not None:
        assert problem.message == message
    else:
        assert "integer" in problem.message and '"3"' in problem.message


def test_variant_cases_stays_out_of_the_contract_hash():
    from audit.hashing import contract_hash

    texts = {"contracts/k.toml": _KERNEL + "dims = { H = [4, 5] }\n"}
    a = load_contracts(Path("contracts"), Path("."), texts=texts)
    b = load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": texts["contracts/k.toml"] + "variant_cases = 1\n"})
    assert b.kernel_map["k"].verify.variant_cases == 1
    assert contract_hash(a.kernel_map["k"]) == contract_hash(b.kernel_map["k"])


# --- [kernel.verify] bindings: local-dim values no launch binds -------------------------------------------


def wrong_when_n_is_no_multiple_of_4(launch):
    """A shape-generic reduction whose scalar path (N % 4 != 0) drops the last column: the schedules
    launch it at N = 256 and 128 only, so only an extra binding reaches that path."""
    res = launch.run_reference()
    if launch.scalar("N") % 4:
        res["ws"] = np.array(res["ws"], copy=True)
        res["ws"][:, :, -1] = 0.0
    launch.write_outputs(res)


def test_the_shipped_weight_reduce_declares_bindings_off_its_launch_shapes(repo_root):
    cs = load_contracts(repo_root / "contracts", repo_root)
    spec = cs.kernel_map["aux_weight_grad_partial_skinny"].verify  # the SIMT partial, launched at M = 1
    assert [dict(b) for b in spec.bindings] == [{"M": 8, "N": 129, "P": 5}, {"M": 9, "N": 100, "P": 3}, {"M": 130, "N": 129, "P": 7},
                                                {"M": 4, "N": 100, "P": 40}]
    assert spec.variant_cases == 3
    # the CUTLASS partial (launched at M = 256, 128): the same, and both instantiations' partial tiles in both directions
    spec = cs.kernel_map["aux_weight_grad_partial"].verify
    assert [dict(b) for b in spec.bindings] == [{"M": 8, "N": 129, "P": 5}, {"M": 9, "N": 100, "P": 3}, {"M": 130, "N": 129, "P": 7},
                                                {"M": 4, "N": 100, "P": 40}, {"M": 132, "N": 260, "P": 7}]
    assert spec.variant_cases == 3


def test_a_bug_only_an_extra_binding_reaches_is_caught_there(repo_root):
    out = verify(repo_root, kernels=["aux_weight_grad_partial_skinny"], emulated={"aux_weight_grad_partial_skinny": wrong_when_n_is_no_multiple_of_4},
                 evidence=False)  # fmt: skip
    bad = [f for f in out.result.findings if f.rule == "VERIFY_REFERENCE"]
    assert bad, [f.message for f in out.result.findings]
    assert all("N=129" in f.message for f in bad), [f.message for f in bad]
    # the same kernel passes at the launches' own shapes: the bindings are what finds it
    r = out.run.results[0]
    at_launches = [c for c in r.checks if c.check == "reference" and ("N=256" in c.case or "N=128" in c.case)]
    assert at_launches and not [c.case for c in at_launches if c.verdict == "fail"]


def wrong_when_n_leaves_a_rest_of_2_or_3(launch):
    """A shape-generic reduction whose scalar rest after 4-wide column steps drops its last column only when
    it runs more than once (N % 4 of 2 or 3): the skinny partial's launches (N = 128) and listed bindings
    (N = 129, 100) never reach it; the search's neighbours N = 102 and 103 do."""
    res = launch.run_reference()
    if launch.scalar("N") % 4 >= 2:
        res["ws"] = np.array(res["ws"], copy=True)
        res["ws"][:, :, -1] = 0.0
    launch.write_outputs(res)


def test_the_search_adds_bindings_at_the_neighbours_of_the_listed_ones(repo_root, tmp_path):
    from audit.cases import binding_neighbours

    k = load_contracts(repo_root / "contracts", repo_root).kernel_map["aux_weight_grad_partial_skinny"]
    near = binding_neighbours(k)
    assert [b for b in near if b["N"] not in (129, 100)] == [{"M": 9, "N": 101, "P": 3}, {"M": 9, "N": 102, "P": 3}, {"M": 9, "N": 103, "P": 3},
                                                            {"M": 8, "N": 128, "P": 5}]  # fmt: skip
    assert len(near) == 17 and all(b not in [dict(x) for x in k.verify.bindings] for b in near)
    out = verify(repo_root, kernels=["aux_weight_grad_partial_skinny"], emulated={"aux_weight_grad_partial_skinny": wrong_when_n_leaves_a_rest_of_2_or_3},
                 evidence=False)  # fmt: skip
    (bad,) = [f for f in out.result.findings if f.rule == "VERIFY_REFERENCE"]
    assert "N=102" in bad.message and "N=103" in bad.message, bad.message
    r = out.run.results[0]
    failed = {c.case.split(" (")[1] for c in r.checks if c.check == "reference" and c.verdict == "fail"}
    assert failed == {"M=9, N=102, P=3)", "M=9, N=103, P=3)"}, failed
    assert any(n.startswith("the search added 17 bindings at the neighbours of the listed bindings' values") for n in r.notes), r.notes
    # without the search (neighbours = false) the same kernel passes every check
    root = _edited_root(repo_root, tmp_path, "aux_param_grad_reduce.toml", _skinny_with("neighbours = false"))
    assert binding_neighbours(load_contracts(root / "contracts", root).kernel_map["aux_weight_grad_partial_skinny"]) == []
    out = verify(root, kernels=["aux_weight_grad_partial_skinny"], emulated={"aux_weight_grad_partial_skinny": wrong_when_n_leaves_a_rest_of_2_or_3},
                 evidence=False)  # fmt: skip
    assert out.result.exit_code == 0 and not [f for f in out.result.findings if f.rule == "VERIFY_REFERENCE"]


def test_extra_bindings_run_only_the_smallest_cases_and_say_so(repo_root):
    out = verify(repo_root, kernels=["aux_weight_grad_partial_skinny"], emulated={}, evidence=False)
    r = out.run.results[0]
    assert r.verdict == "pass", [c for c in r.checks if c.verdict == "fail"]
    at_binding = {c.case.split(" ")[0] for c in r.checks if c.check == "reference" and "N=129" in c.case}
    assert 1 <= len(at_binding) <= 3, sorted(at_binding)
    assert any("extra bindings ran at 3 case(s) of the sweep's" in n for n in r.notes)
    # the skinny partial's launches all bind N = 128 and M < 128: no grid division varies, so it has no tail site
    assert r.tails == []
    # the CUTLASS partial's launches bind M = 256 and 128 (full row tiles only): the bindings' M = 130 and 132
    # run the partial last one
    r = verify(repo_root, kernels=["aux_weight_grad_partial"], emulated={}, evidence=False).run.results[0]
    assert r.verdict == "pass" and any("extra bindings ran at 3 case(s) of the sweep's" in n for n in r.notes)
    (tile,) = [t for t in r.tails if t["expr"] == "ceil_div(M, 128)"]
    assert tile["covered"] and tile["exact"] and tile["tail"]


def test_binding_cases_caps_the_bindings_on_their_own(repo_root, tmp_path):
    """variant_cases caps the skinny partial's bindings at 3 cases; binding_cases = 4 beside it takes that over."""
    root = _edited_root(repo_root, tmp_path, "aux_param_grad_reduce.toml", _skinny_with("binding_cases = 4"))
    assert load_contracts(root / "contracts", root).kernel_map["aux_weight_grad_partial_skinny"].verify.binding_cases == 4
    r = verify(root, kernels=["aux_weight_grad_partial_skinny"], emulated={}, evidence=False).run.results[0]
    assert r.verdict == "pass", [c for c in r.checks if c.verdict == "fail"]
    at_binding = {c.case.split(" ")[0] for c in r.checks if c.check == "reference" and "N=129" in c.case}
    assert len(at_binding) == 4, sorted(at_binding)
    assert "the extra bindings ran at 4 case(s) of the sweep's 12: its smallest and its smallest of at least 16 rows (binding_cases = 4)" in r.notes, r.notes


def test_the_shipped_masked_partial_caps_its_k_variants_and_not_its_bindings(repo_root):
    spec = load_contracts(repo_root / "contracts", repo_root).kernel_map["aux_weight_grad_partial_masked"].verify
    assert (spec.variant_cases, spec.binding_cases, dict(spec.dims)) == (3, 12, {"K": (3, 8, 1)})


_LOCAL = """[dims]
B = { min = 1, max = 8 }

[[kernel]]
name = "k"
source = "kernels/k.cu"
stage = "reduce"
dims = ["M", "N"]
grid = [1, 1, 1]
block = [32, 1, 1]
params = [{ name = "x", dtype = "f32", shape = ["M", "N"], role = "in" }]

[kernel.verify]
"""


@pytest.mark.parametrize(
    ("verify", "key", "message"),
    [
        ("bindings = [{ M = 8, Q = 3 }]\n", "kernel[0].verify.bindings[0]",
         'binding "M=8,Q=3": "Q" is not a local dim of the kernel; its local dims are "M", "N".'),
        ('bindings = ["M=8"]\n', "kernel[0].verify.bindings[0]", 'binding "M=8" does not bind "N"; a binding gives every local dim one value.'),
        ("bindings = [{ M = 0, N = 3 }]\n", "kernel[0].verify.bindings[0]", 'binding "M=0,N=3": M = 0 is not a positive size.'),
        ('bindings = ["M=x"]\n', "kernel[0].verify.bindings[0]", 'case "M=x": "M=x" is not an assignment NAME=VALUE with an integer value.'),
        ("binding_cases = 2\n", "kernel[0].verify.binding_cases", 'expected "binding_cases" only next to "bindings" (it caps the cases of the extra bindings), found none.'),
        ("binding_cases = 0\nbindings = [{ M = 8, N = 3 }]\n", "kernel[0].verify.binding_cases", "expected a positive number of cases, found 0."),
    ],
)
def test_bad_bindings_name_file_key_and_line(verify, key, message):
    from audit.errors import ContractError

    with pytest.raises(ContractError) as info:
        load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": _LOCAL + verify})
    (problem,) = info.value.problems
    assert (problem.path, problem.line, problem.key, problem.message) == ("contracts/k.toml", 14, key, message)


def test_bindings_need_local_dims_and_stay_out_of_the_hash():
    from audit.errors import ContractError
    from audit.hashing import contract_hash

    with pytest.raises(ContractError) as info:
        load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": _KERNEL + "bindings = [{ H = 5 }]\n"})
    (problem,) = info.value.problems
    assert (problem.line, problem.key) == (14, "kernel[0].verify.bindings")
    assert problem.message == 'expected "bindings" only in a kernel with local dims (dims = ["M", "N"]), found a kernel without them.'
    a = load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": _LOCAL})
    b = load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": _LOCAL + "bindings = [{ M = 8, N = 3 }]\n"})
    assert b.kernel_map["k"].verify.bindings == ((("M", 8), ("N", 3)),)
    assert contract_hash(a.kernel_map["k"]) == contract_hash(b.kernel_map["k"])
    c = load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": _LOCAL + "bindings = [{ M = 8, N = 3 }]\nbinding_cases = 2\n"})
    assert c.kernel_map["k"].verify.binding_cases == 2
    assert contract_hash(a.kernel_map["k"]) == contract_hash(c.kernel_map["k"])


def test_fixed_dim_tail_judges_local_dims_by_the_launches_and_the_bindings(repo_root):
    """Without its bindings, aux_weight_grad_partial_skinny's N is 128 at every launch: its N % 4 test hides
    the scalar path, and FIXED_DIM_TAIL says so with a binding to add; with them the rule is quiet."""
    from audit.api import check
    from audit.config import load_config

    rel = "contracts/kernels/aux_param_grad_reduce.toml"
    text = (repo_root / rel).read_text()
    skinny = text.index('name = "aux_weight_grad_partial_skinny"')
    first = next(ln for ln in text[skinny:].splitlines(keepends=True) if ln.startswith("bindings = ["))  # the skinny partial's
    stripped = text[:skinny] + text[skinny:].replace(first + "variant_cases = 3\n", "", 1)
    assert stripped != text
    texts = {p.relative_to(repo_root).as_posix(): p.read_text() for p in (repo_root / "contracts").rglob("*.toml")}
    texts[rel] = stripped
    cs = load_contracts(repo_root / "contracts", repo_root, texts=texts)
    cfg = load_config(repo_root)
    lines = [f.message for f in check(repo_root, select=["FIXED_DIM_TAIL"], config=cfg, contracts=cs).findings]
    src = (repo_root / "kernels/aux_weight_grad_split_kernel.cu").read_text().splitlines()
    at = next(i for i, ln in enumerate(src, 1) if "N % 4" in ln and not ln.lstrip().startswith("//"))  # the first test, not a comment
    assert lines == [
        f'Kernel "aux_weight_grad_partial_skinny" passes its local dim N as "N", and kernels/aux_weight_grad_split_kernel.cu:{at} has "N % 4": '
        "every verified N (128, from the schedules' launches and [kernel.verify] bindings) is a multiple of 4, so the code for "
        # P moves with B (WGP): the suggested binding takes its launch value at B's low end
        "the other values never runs; if the kernel takes other shapes, verify one too: [kernel.verify] bindings = [{ M = 1, N = 129, P = 1 }]."
    ]
    shipped = load_contracts(repo_root / "contracts", repo_root)
    assert check(repo_root, select=["FIXED_DIM_TAIL"], config=cfg, contracts=shipped).findings == []
