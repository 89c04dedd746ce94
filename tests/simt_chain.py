"""The shipped chain as it was before its CUTLASS kernels (5 December 2026): the trunk forward, both head
forwards and the wide weight-gradient partials on their SIMT kernels, as a project tree of its own.

Many tests pin analyses of those SIMT kernels: the uninitialised softmax reads of the trade-outcome forward,
the lane race of ``aux_head_forward.cuh``, its header mutants judged by both head forwards, the mutation
counts and equivalence records, static-rule fixtures. The kernels still exist (the SIMT trunk forward and
partial in their shipped files, the head forwards and their header in ``benchmarks/kernels_baseline/`` as the
benchmarks' baselines), so those tests run on this tree instead of losing their subject:

- ``contracts/``, ``kernels/``, ``audit/references``, ``reports/`` and ``pyproject.toml`` copied from the
  repository, without the CUTLASS sources and headers and without ``include_packages`` (no wheel needed);
- the H200 mutation records of the SIMT kernels (``tests/data/simt_chain/mutation/``, moved out of
  ``reports/mutation/`` when the CUTLASS kernels took their contract names) copied into ``reports/mutation/``;
- ``aux_trade_outcome_forward_kernel.cu``, ``aux_next_bar_forward_kernel.cu`` and ``aux_head_forward.cuh``
  copied from ``benchmarks/kernels_baseline/`` into ``kernels/``;
- the contracts of ``aux_trunk_forward``, both head forwards and ``aux_weight_grad_partial`` replaced by
  their text before the change (below, verbatim), the ``aux_weight_grad_partial_skinny`` contract removed
  and its launches made ``aux_weight_grad_partial`` launches again.

Everything else (schedules, buffers, the other kernels) is the repository's, so the tree follows it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "benchmarks" / "kernels_baseline"
MUTATION_RECORDS = Path(__file__).resolve().parent / "data" / "simt_chain" / "mutation"
SIMT_FILES = ("aux_trade_outcome_forward_kernel.cu", "aux_next_bar_forward_kernel.cu", "aux_head_forward.cuh")
CUTLASS_FILES = ("aux_trunk_forward_cutlass.cu", "aux_head_forward_cutlass.cu", "aux_weight_grad_partial_cutlass.cu",
                 "cutlass_elu.cuh", "cutlass_fast_f32_rn.cuh")
SKINNY = "aux_weight_grad_partial_skinny"

# (contract file, kernel) -> its [[kernel]] table before the CUTLASS kernels shipped
SIMT_CONTRACTS: dict[tuple[str, str], str] = {
    ("aux_trunk.toml", "aux_trunk_forward"): r"""[[kernel]]
name = "aux_trunk_forward"
source = "kernels/aux_trunk_kernel.cu"
entry = "aux_trunk_forward"
stage = "forward"
phase = "B"
reference = "audit.references.dqn_aux:aux_trunk_forward"
grid = ["ceil_div(SH2, 64)", "ceil_div(B, 128)", 1]
block = [256, 1, 1]
doc = "h = ELU(x @ W^T + b), a 128-row x 64-feature tile per block."
params = [
  { name = "x", dtype = "f32", shape = ["B", "E"], role = "in" },
  { name = "W", dtype = "f32", shape = ["SH2", "E"], role = "in" },
  { name = "b", dtype = "f32", shape = ["SH2"], role = "in" },
  { name = "h_out", dtype = "f32", shape = ["B", "SH2"], role = "out", saved = true },
  { name = "B", kind = "scalar", dtype = "i32", value = "B" },
  { name = "E", kind = "scalar", dtype = "i32", value = "E" },
  { name = "SH2", kind = "scalar", dtype = "i32", value = "SH2" },
]

[kernel.verify]
rowwise = true
# E = 253 and SH2 = 253: the scalar loads and stores taken when a width is no multiple of 4
dims = { E = [256, 253], SH2 = [256, 253] }
variant_cases = 3
""",
    ("aux_trade_outcome.toml", "aux_trade_outcome_forward"): r"""[[kernel]]
name = "aux_trade_outcome_forward"
source = "kernels/aux_trade_outcome_forward_kernel.cu"
entry = "aux_trade_outcome_forward"
stage = "forward"
phase = "A3"
reference = "audit.references.dqn_aux:aux_trade_outcome_forward"
grid = ["ceil_div(B, 32)", 1, 1]
block = [128, 1, 1]
doc = "h1 = ELU(h_s2 @ W1^T + b1); logits = h1 @ W2^T + b2; probs = softmax(logits). h1 and probs are saved for backward."
params = [
  { name = "h_s2", dtype = "f32", shape = ["B", "SH2"], role = "in" },
  { name = "W1", dtype = "f32", shape = ["H", "SH2"], role = "in" },
  { name = "b1", dtype = "f32", shape = ["H"], role = "in" },
  { name = "W2", dtype = "f32", shape = ["K", "H"], role = "in" },
  # two class biases of 50 put two logits of every row near 50: a softmax that does not subtract the row max
  # (or adds it) overflows expf there, which O(1) test logits never show. The two stay close (their rows
  # differ by O(1)), so the probabilities keep varying: one bias of 60 against -60 saturated every row at
  # p = 1 and let a dropped normaliser pass (H200 mutation run, 2026-12-02)
  { name = "b2", dtype = "f32", shape = ["K"], role = "in", values = { include = [50.0, 50.0] } },
  { name = "h1_out", dtype = "f32", shape = ["B", "H"], role = "out", saved = true },
  { name = "logits", dtype = "f32", shape = ["B", "K"], role = "out" },
  { name = "probs", dtype = "f32", shape = ["B", "K"], role = "out", saved = true },
  { name = "B", kind = "scalar", dtype = "i32", value = "B" },
  { name = "SH2", kind = "scalar", dtype = "i32", value = "SH2" },
  { name = "H", kind = "scalar", dtype = "i32", value = "H" },
  { name = "K", kind = "scalar", dtype = "i32", value = "K" },
]

[kernel.verify]
rowwise = true
# K = 3 (production) first, at the full sweep; K = 1 and 8 (= AUX_K_MAX: the ends of its K range) and H = 129 (no multiple of the
# tile widths or of 4: the scalar tails of aux_head_forward.cuh) and SH2 = 253 (its scalar k loads) at the
# sweep's 3 smallest cases
dims = { K = [3, 1, 8], H = [128, 129], SH2 = [256, 253] }
variant_cases = 3
""",
    ("aux_next_bar.toml", "aux_next_bar_forward"): r"""[[kernel]]
name = "aux_next_bar_forward"
source = "kernels/aux_next_bar_forward_kernel.cu"
entry = "aux_next_bar_forward"
stage = "forward"
phase = "B"
reference = "audit.references.dqn_aux:aux_next_bar_forward"
grid = ["ceil_div(B, 32)", 1, 1]
block = [128, 1, 1]
doc = "h1 = ELU(h_s2 @ W1^T + b1); pred = h1 @ W2^T + b2 (one output). h1 is saved for backward."
params = [
  { name = "h_s2", dtype = "f32", shape = ["B", "SH2"], role = "in" },
  { name = "W1", dtype = "f32", shape = ["H", "SH2"], role = "in" },
  { name = "b1", dtype = "f32", shape = ["H"], role = "in" },
  { name = "W2", dtype = "f32", shape = ["KNB", "H"], role = "in" },
  { name = "b2", dtype = "f32", shape = ["KNB"], role = "in" },
  { name = "h1_out", dtype = "f32", shape = ["B", "H"], role = "out", saved = true },
  { name = "pred", dtype = "f32", shape = ["B"], role = "out", saved = true },
  { name = "B", kind = "scalar", dtype = "i32", value = "B" },
  { name = "SH2", kind = "scalar", dtype = "i32", value = "SH2" },
  { name = "H", kind = "scalar", dtype = "i32", value = "H" },
]

[kernel.verify]
rowwise = true
# H and SH2 at a second value that is no multiple of the tile widths or of 4: the scalar tail paths
# and the partial hidden chunk of aux_head_forward.cuh only run there (the kernel takes both at run time);
# H = 100 takes the float4 path with a partial chunk (j0 = H is reached by no lane at H = 128)
dims = { H = [128, 129, 100], SH2 = [256, 253] }
variant_cases = 3
""",
    ("aux_param_grad_reduce.toml", "aux_weight_grad_partial"): r"""[[kernel]]
name = "aux_weight_grad_partial"
source = "kernels/aux_weight_grad_split_kernel.cu"
entry = "aux_weight_grad_partial"
stage = "reduce"
phase = "B"
reference = "audit.references.dqn_aux:aux_weight_grad_partial"
dims = ["M", "N", "P"]
grid = ["ceil_div(N, 128)", "ceil_div(M, 128)", "P"]
block = [256, 1, 1]
doc = "Fused path, first half: per batch chunk p, ws[p] = dz[chunk]^T x[chunk] and wsb[p] = column sums of dz[chunk]."
params = [
  { name = "dz", dtype = "f32", shape = ["B", "M"], role = "in" },
  { name = "x", dtype = "f32", shape = ["B", "N"], role = "in" },
  { name = "ws", dtype = "f32", shape = ["P", "M", "N"], role = "out" },
  { name = "wsb", dtype = "f32", shape = ["P", "M"], role = "out" },
  { name = "B", kind = "scalar", dtype = "i32", value = "B" },
  { name = "M", kind = "scalar", dtype = "i32", value = "M" },
  { name = "N", kind = "scalar", dtype = "i32", value = "N" },
  { name = "P", kind = "scalar", dtype = "i32", value = "P" },
]

[kernel.verify]
# The launches bind M to 256, 128, 3 and 1, N to 256 and 128 and P to WGP (16 at B = 256, 64 .. 128 above):
# every tile is full, N % 4 == 0 and no chunk is empty there. These bindings run the partial tiles (M = 130,
# N = 129: a second, 2-row tile and the scalar loads), the skinny path's edge (M = 8) and its partial column
# group (N = 100), and P above B / 8 (uneven and, at small B, empty chunks).
bindings = [{ M = 8, N = 129, P = 5 }, { M = 9, N = 100, P = 3 }, { M = 130, N = 129, P = 7 }, { M = 4, N = 100, P = 40 }]
variant_cases = 3
""",
}


def _kernel_span(text: str, name: str) -> tuple[int, int]:
    """Where the [[kernel]] table of ``name`` starts and ends (before the next table header or at the end)."""
    start = text.index(f'[[kernel]]\nname = "{name}"\n')
    nxt = re.compile(r"^\[\[kernel\]\]$", re.M).search(text, start + 1)
    return start, (nxt.start() if nxt else len(text))


def simt_chain(root: Path, repo: Path = REPO) -> Path:
    """Build the SIMT chain's tree at ``root`` (which must not exist) from ``repo``; returns ``root``."""
    for part in ("contracts", "kernels", "audit/references", "reports"):
        shutil.copytree(repo / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    text = (repo / "pyproject.toml").read_text()
    text, n = re.subn(r"^include_packages = .*\n", "", text, flags=re.M)
    assert n == 1, "pyproject.toml: [tool.wireup] include_packages not found"
    (root / "pyproject.toml").write_text(text)
    for name in CUTLASS_FILES:
        (root / "kernels" / name).unlink()
    for name in SIMT_FILES:
        shutil.copy(repo / "benchmarks" / "kernels_baseline" / name, root / "kernels" / name)
    for record in sorted(MUTATION_RECORDS.glob("*.json")):
        shutil.copy(record, root / "reports" / "mutation" / record.name)
    for (toml, kernel), table in SIMT_CONTRACTS.items():
        path = root / "contracts" / "kernels" / toml
        t = path.read_text()
        a, b = _kernel_span(t, kernel)
        t = t[:a] + table + ("\n" if b < len(t) else "") + t[b:]
        if kernel == "aux_weight_grad_partial":
            a, b = _kernel_span(t, SKINNY)
            t = t[:a] + t[b:]
        path.write_text(t)
    sched = root / "contracts" / "schedules.toml"
    t = sched.read_text()
    assert f'launch = "{SKINNY}"' in t
    sched.write_text(t.replace(f'launch = "{SKINNY}"', 'launch = "aux_weight_grad_partial"'))
    # the shipped suppressions accept what the CUTLASS forwards do (contracts/suppressions.toml): the SIMT
    # forwards that replace them do not do it, so those entries would suppress nothing here
    (root / "contracts" / "suppressions.toml").unlink()
    return root
