"""FIXED_DIM_ONE_CHUNK's source analysis: chunk loops whose step is a constant expression or a multiple
of the block's x extent, and only the code an entry reaches (the fixture pair pins the message)."""

from __future__ import annotations

from pathlib import Path

from audit.api import load_project
from audit.cuda.fixedtails import fixed_dim_tails
from audit.cuda.headers import reached_lines

REPO = Path(__file__).resolve().parents[1]

def _loops(src: str, constants: dict[str, int] | None = None) -> list[tuple[str, int, bool]]:
    return [(h.name, h.divisor, h.per_block) for h in fixed_dim_tails(src, None, constants or {}) if h.loop]


def test_constant_expression_steps():
    src = "for (int i0 = 0; i0 < S; i0 += 4 * kQ) {}\nfor (int j = 0; j < H; j += (kA + 1) * 2) {}"
    assert _loops(src, {"kQ": 64, "kA": 3}) == [("S", 256, False), ("H", 8, False)]


def test_block_extent_steps_and_aliases():
    src = ("const int nt = blockDim.x;\nfor (int j0 = 0; j0 < H; j0 += nt) {}\n"
           "for (int i0 = 0; i0 < S; i0 += 2 * blockDim.x) {}\n")  # fmt: skip
    assert _loops(src) == [("H", 1, True), ("S", 2, True)]


def test_steps_that_are_no_fixed_chunk_are_ignored():
    src = ("const int nt = blockDim.x;\n"
           "for (int j0 = 0; j0 < H; j0 += nt + 1) {}\n"        # a block extent plus a constant
           "for (int j0 = 0; j0 < H; j0 += step) {}\n"          # an unknown value
           "for (int j0 = 0; j0 < H; j0 += nt * blockDim.x) {}\n"  # two block factors
           "for (int j = tid; j < H; j += 64) {}\n"             # a thread-strided loop, not from 0
           "for (int j0 = 0; j0 < H; j0 += 1) {}\n")             # fmt: skip
    assert _loops(src) == []


def test_only_the_code_an_entry_reaches_counts(simt_repo: Path):
    """aux_trunk_kernel.cu holds the trunk's SIMT forward and its backward: the backward's hidden-unit loop (line
    118, chunks of the block) is not the forward's. The subject is the chain before the CUTLASS kernels
    (tests/simt_chain.py), where both entries of the file have contracts."""
    cfg, cs = load_project(simt_repo)
    src = (simt_repo / "kernels/aux_trunk_kernel.cu").resolve()
    fwd = {p.resolve(): v for p, v in reached_lines(cfg, cs, "aux_trunk_forward").items()}[src]
    bwd = {p.resolve(): v for p, v in reached_lines(cfg, cs, "aux_trunk_backward").items()}[src]
    text = src.read_text().splitlines()
    line = next(i + 1 for i, t in enumerate(text) if "for (int j0 = 0; j0 < SH2; j0 += nt)" in t)
    assert any(a <= line <= b for a, b in bwd)
    assert not any(a <= line <= b for a, b in fwd)


def _compares(src: str, constants: dict[str, int] | None = None) -> list[tuple[str, str, int]]:
    return [(h.name, h.compare, h.divisor) for h in fixed_dim_tails(src, None, constants or {}) if h.compare]


def test_comparisons_with_constants():
    src = "if (K >= 1 && K <= kMax) {}\nif (8 > M) {}\nwhile (N != 4) {}"
    assert _compares(src, {"kMax": 8}) == [("K", ">=", 1), ("K", "<=", 8), ("M", "<", 8), ("N", "!=", 4)]


def test_comparisons_inside_larger_expressions_are_ignored():
    src = ("for (int k = 0; k < K; ++k) {}\n"   # a loop bound: the other side is a variable
           "if (K * 4 <= 32) {}\nif (32 >= K + 1) {}\nif (s.K < 3) {}\nif (K < f(3)) {}\nif (!K == 0) {}\n")  # fmt: skip
    assert _compares(src) == []


def test_reached_lines_through_the_analysis_cache(tmp_path):
    """Cached, the entry's reached lines equal the uncached ones; a damaged entry is recomputed."""
    from audit.cuda.cache import AnalysisCache
    from audit.hashing import include_closure
    from audit.rules.tails import _reached

    cfg, cs = load_project(REPO)
    k = cs.kernel("aux_trunk_backward")
    path = cfg.path(k.source)
    dirs = [cfg.path(d) for d in cfg.include_dirs]
    files = [path.resolve(), *(h for h in include_closure(path, dirs) if h != path.resolve())]
    root = Path(cs.root).resolve()
    plain = _reached(cfg, cs, k, files, root, None)
    cache = AnalysisCache(tmp_path / "analysis")
    assert _reached(cfg, cs, k, files, root, cache) == plain and cache.misses == 1
    assert _reached(cfg, cs, k, files, root, cache) == plain and cache.hits == 1
    for entry in (tmp_path / "analysis" / "reached").glob("*.json"):
        entry.write_text('{"format": "x", "value": {"kernels/aux_trunk_kernel.cu": [["a", 1]]}}')
    assert _reached(cfg, cs, k, files, root, cache) == plain
