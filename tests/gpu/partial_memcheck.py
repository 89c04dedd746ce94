"""The CUTLASS wide partial (kernels/aux_weight_grad_partial_cutlass.cu) under compute-sanitizer memcheck at chosen
(B, M, N, P), one sanitizer process per configuration, with the report's block/thread counts and first lines.

    python3 tests/gpu/partial_memcheck.py CUBIN[:ENTRY] B,M,N,P [B,M,N,P ...]

`wireup verify --sanitizer memcheck` runs the contract's bindings together; this separates them (empty chunks
K = 0, M/N edges, K residues, the 1-float and 16-byte instantiations). Buffers are plain cudaMalloc
allocations of exactly the contract's shapes (no memory pool), so memcheck sees their bounds.
"""
import collections
import re
import subprocess
import sys


def launch(cubin: str, entry: str, B: int, M: int, N: int, P: int) -> None:
    import cupy as cp

    cp.cuda.set_allocator(None)
    rng = cp.random.default_rng(0)
    dz = rng.standard_normal((B, M), dtype=cp.float32)
    x = rng.standard_normal((B, N), dtype=cp.float32)
    ws = cp.full((P, M, N), cp.nan, dtype=cp.float32)
    wsb = cp.full((P, M), cp.nan, dtype=cp.float32)
    k = cp.RawModule(path=cubin).get_function(entry)
    k(((N + 127) // 128, (M + 127) // 128, P), (256,), (dz, x, ws, wsb, cp.int32(B), cp.int32(M), cp.int32(N), cp.int32(P)))
    cp.cuda.Device().synchronize()
    # the result against float64 (a wrong result with a clean memcheck is still wrong)
    d, xx = dz.get().astype("float64"), x.get().astype("float64")
    worst = 0.0
    for p in range(P):
        b0, b1 = B * p // P, B * (p + 1) // P
        want = d[b0:b1].T @ xx[b0:b1]
        got = ws[p].get()
        worst = max(worst, float(abs(got - want).max()) if want.size else 0.0)
    print(f"result: max abs err {worst:.3g}")


def main(argv: list[str]) -> int:
    cubin, _, entry = argv[0].partition(":")
    entry = entry or "aux_weight_grad_partial_cutlass"
    for cfg in argv[1:]:
        B, M, N, P = (int(v) for v in cfg.split(","))
        cmd = ["compute-sanitizer", "--tool", "memcheck", "--print-limit", "100000", "--error-exitcode", "9",
               sys.executable, __file__, "--one", cubin, entry, cfg]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
            out = p.stdout
        except subprocess.TimeoutExpired as exc:
            print(f"B,M,N,P={cfg}: timed out"); out = exc.stdout or ""
            continue
        blocks = collections.Counter(re.findall(r"in block \((\d+,\d+,\d+)\)", out))
        summary = [ln.strip() for ln in out.splitlines() if "ERROR SUMMARY" in ln]
        result = [ln for ln in out.splitlines() if ln.startswith("result:")]
        print(f"B,M,N,P={cfg}: rc={p.returncode} {summary[-1] if summary else '(no summary)'}; {result[-1] if result else 'no result'};"
              f" reports by block {dict(sorted(blocks.items()))}")
        lines = out.splitlines()
        for i, ln in enumerate(lines):
            if "Invalid" in ln:
                print("    " + " | ".join(s.replace("=========", "").strip() for s in lines[i:i + 5]))
                break
        if p.returncode not in (0, 9):
            print("    stderr:", p.stderr.strip()[-300:])
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        c, e, cfg = sys.argv[2:5]
        launch(c, e, *(int(v) for v in cfg.split(",")))
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
