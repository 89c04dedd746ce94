"""Synthetic wireup projects of any size, for the scaling benchmark.

A project of N kernels (N a multiple of 10) is N / 10 *modules* of ten kernels each, shaped like the
shipped aux-heads chain: a producer that writes an ISV scale slot, a forward chain with fan-in (a kernel
reads two earlier activations, and the first forward kernel of module m reads the last activation of
module m - 1, so one data path runs through the whole project), a fan-out (one activation read by two
kernels), a hidden layer saved for backward, a masked loss that writes a loss EMA slot, a backward
kernel with per-sample weight partials and a ``+=`` accumulator, a shape-generic reduce launched twice
with views, and a statistics kernel that writes a group of ISV slots. Modules are grouped ten to a pair
of schedules (forward, then backward ``after`` it; each forward ``after`` the previous one), so schedules
stay ~100 launches long and their number grows with N. The ISV has exactly N slots (10 per module: a
scale, an EMA and a group of 8). Five invariants (three paths, two no-paths) span the whole graph.
The kernels of a schedule group share one stub ``.cu`` file whose entry points match the contracts'
parameters (100 kernels a file).

The generated project passes ``wireup check --select schema,wiring,isv,invariants`` with no finding, so
every rule does its full work. ``write_layout_pair`` writes two ISV layouts of N and N + 1 slots (the
second a tail append of the first) for ``wireup layout diff OLD NEW``.

    python benchmarks/synth_contracts.py 1000 /tmp/synth1000     # then: wireup check --root /tmp/synth1000
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

KERNELS_PER_MODULE = 10
SLOTS_PER_MODULE = 10
MODULES_PER_SCHEDULE = 10


def _m(m: int) -> str:
    return f"m{m:05d}"


def _inline(d: dict) -> str:
    parts = []
    for k, v in d.items():
        parts.append(f"{k} = {_value(v)}")
    return "{ " + ", ".join(parts) + " }"


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return _inline(v)
    raise TypeError(v)


def _t(name: str, dtype: str, shape: list, role: str, **kw: object) -> dict:
    return {"name": name, "dtype": dtype, "shape": shape, "role": role, **kw}


def _s(name: str, dtype: str, value: object) -> dict:
    return {"name": name, "kind": "scalar", "dtype": dtype, "value": value}


ISV = {"name": "isv", "kind": "isv"}
GRID_B = ["ceil_div(B, 256)", 1, 1]
BLOCK = [256, 1, 1]


def module_kernels(m: int) -> list[dict]:
    """The ten kernel tables of module ``m`` (name, stage, geometry, ISV access, params)."""
    p = _m(m)
    B = "B"
    return [
        dict(name=f"{p}_produce", stage="producer", phase="A1", grid=GRID_B, block=BLOCK,
             isv_writes=[f"{p}_SCALE"], doc="a0 = x / mean|x|; isv[scale] tracks mean|x|.",
             params=[_t("x", "f32", [B, "D"], "in"), _t("a0", "f32", [B, "D"], "out"), ISV,
                     _s("slot", "i32", f"slot({p}_SCALE)"), _s("B", "i32", "B")]),
        dict(name=f"{p}_mix1", stage="forward", phase="B", grid=GRID_B, block=BLOCK, doc="a1 = a0 + prev.",
             params=[_t("a0", "f32", [B, "D"], "in"), _t("prev", "f32", [B, "D"], "in"),
                     _t("a1", "f32", [B, "D"], "out"), _s("B", "i32", "B")]),
        dict(name=f"{p}_mix2", stage="forward", phase="B", grid=GRID_B, block=BLOCK,
             isv_reads=[f"{p}_SCALE"], doc="a2 = a1 * a0 / isv[scale].",
             params=[_t("a1", "f32", [B, "D"], "in"), _t("a0", "f32", [B, "D"], "in"),
                     _t("a2", "f32", [B, "D"], "out"), ISV, _s("slot", "i32", f"slot({p}_SCALE)"),
                     _s("B", "i32", "B")]),
        dict(name=f"{p}_mix3", stage="forward", phase="B", grid=GRID_B, block=BLOCK, doc="a3 = tanh(a2).",
             params=[_t("a2", "f32", [B, "D"], "in"), _t("a3", "f32", [B, "D"], "out"), _s("B", "i32", "B")]),
        dict(name=f"{p}_hidden", stage="forward", phase="B", grid=["ceil_div(H, 64)", "ceil_div(B, 128)", 1],
             block=BLOCK, doc="h = ELU(a3 W^T + b).",
             params=[_t("a3", "f32", [B, "D"], "in"), _t("W", "f32", ["H", "D"], "in"),
                     _t("b", "f32", ["H"], "in"), _t("h", "f32", [B, "H"], "out", saved=True),
                     _s("B", "i32", "B"), _s("D", "i32", "D"), _s("H", "i32", "H")]),
        dict(name=f"{p}_loss", stage="loss", phase="A4", grid=[1, 1, 1], block=[1024, 1, 1],
             isv_writes=[f"{p}_LOSS_EMA"], doc="loss = masked mean of h; count = valid rows.",
             params=[_t("h", "f32", [B, "H"], "in"),
                     _t("labels", "i32", [B], "in", mask={"skip_value": -1}, values={"min": 0, "max": "H - 1"}),
                     _t("loss", "f32", [1], "out"), _t("count", "i32", [1], "out"), ISV,
                     _s("ema_slot", "i32", f"slot({p}_LOSS_EMA)"), _s("B", "i32", "B"), _s("H", "i32", "H")]),
        dict(name=f"{p}_backward", stage="backward", phase="A5", grid=["ceil_div(B, 8)", 1, 1], block=BLOCK,
             doc="dz = mask * ELU'(h) / count; dW_partial[b] = dz[b] a3[b]^T; dh += dz.",
             params=[_t("h", "f32", [B, "H"], "in"), _t("a3", "f32", [B, "D"], "in"),
                     _t("labels", "i32", [B], "in", mask={"skip_value": -1, "zeroes": ["dW_partial", "db_partial"]}),
                     _t("count", "i32", [1], "in"),
                     _t("dW_partial", "f32", [B, "H", "D"], "out", partial_of=f"{p}_W", optional=True),
                     _t("db_partial", "f32", [B, "H"], "out", partial_of=f"{p}_b"),
                     _t("dh", "f32", [B, "H"], "accumulate"),
                     _s("alpha", "f32", 1.0), _s("B", "i32", "B"), _s("D", "i32", "D"), _s("H", "i32", "H")]),
        dict(name=f"{p}_reduce", stage="reduce", phase="B", dims=["N"],
             grid=["ceil_div(N, 256)", "min(ceil_div(B, 64), 256)", 1], block=BLOCK,
             nondeterministic={"rtol": 1e-5, "atol": 1e-7, "reason": "atomicAdd order"},
             doc="grad[n] += sum_b partial[b, n].",
             params=[_t("partial", "f32", [B, "N"], "in"), _t("grad", "f32", ["N"], "accumulate"),
                     _s("B", "i32", "B"), _s("N", "i32", "N")]),
        dict(name=f"{p}_widen", stage="forward", phase="B", grid=GRID_B, block=BLOCK, doc="w = [a2, a2^2].",
             params=[_t("a2", "f32", [B, "D"], "in"), _t("w", "f32", [B, "D2"], "out"), _s("B", "i32", "B")]),
        dict(name=f"{p}_stats", stage="other", phase="B", grid=GRID_B, block=BLOCK,
             isv_reads=[f"{p}_LOSS_EMA"], isv_writes=[f"{p}_STATS"],
             doc="a4 = w[:, :D] - w[:, D:] * isv[loss_ema]; isv[stats .. +8] track column means.",
             params=[_t("w", "f32", [B, "D2"], "in"), _t("loss", "f32", [1], "in"), _t("a4", "f32", [B, "D"], "out"),
                     ISV, _s("ema_slot", "i32", f"slot({p}_LOSS_EMA)"), _s("stats_slot", "i32", f"slot({p}_STATS)"),
                     _s("B", "i32", "B")]),
    ]


def module_buffers(m: int) -> list[dict]:
    p = _m(m)
    return [
        dict(name=f"{p}_x", dtype="f32", shape=["B", "D"], kind="input", values={"scale": 1.0}),
        dict(name=f"{p}_labels", dtype="i32", shape=["B"], kind="input", values={"min": 0, "max": "H - 1"}),
        dict(name=f"{p}_W", dtype="f32", shape=["H", "D"], kind="parameter"),
        dict(name=f"{p}_b", dtype="f32", shape=["H"], kind="parameter"),
        *[dict(name=f"{p}_a{i}", dtype="f32", shape=["B", "D"], kind="activation") for i in range(5)],
        dict(name=f"{p}_w", dtype="f32", shape=["B", "D2"], kind="activation"),
        dict(name=f"{p}_h", dtype="f32", shape=["B", "H"], kind="activation"),
        dict(name=f"{p}_loss", dtype="f32", shape=[1], kind="loss"),
        dict(name=f"{p}_count", dtype="i32", shape=[1], kind="scratch"),
        dict(name=f"{p}_dh", dtype="f32", shape=["B", "H"], kind="accumulator"),
        dict(name=f"{p}_dW_partial", dtype="f32", shape=["B", "H", "D"], kind="partial"),
        dict(name=f"{p}_db_partial", dtype="f32", shape=["B", "H"], kind="partial"),
        dict(name=f"{p}_dW", dtype="f32", shape=["H", "D"], kind="gradient", grad_of=f"{p}_W"),
        dict(name=f"{p}_db", dtype="f32", shape=["H"], kind="gradient", grad_of=f"{p}_b"),
    ]


def forward_steps(m: int) -> list[dict]:
    p = _m(m)
    prev = f"{_m(m - 1)}_a4" if m > 0 else f"{p}_x"  # the chain through every module
    return [
        {"launch": f"{p}_produce", "bind": {"x": f"{p}_x", "a0": f"{p}_a0"}},
        {"launch": f"{p}_mix1", "bind": {"a0": f"{p}_a0", "prev": prev, "a1": f"{p}_a1"}},
        {"launch": f"{p}_mix2", "bind": {"a1": f"{p}_a1", "a0": f"{p}_a0", "a2": f"{p}_a2"}},
        {"launch": f"{p}_mix3", "bind": {"a2": f"{p}_a2", "a3": f"{p}_a3"}},
        {"launch": f"{p}_hidden", "bind": {"a3": f"{p}_a3", "W": f"{p}_W", "b": f"{p}_b", "h": f"{p}_h"}},
        {"launch": f"{p}_loss", "bind": {"h": f"{p}_h", "labels": f"{p}_labels", "loss": f"{p}_loss", "count": f"{p}_count"}},
        {"launch": f"{p}_widen", "bind": {"a2": f"{p}_a2", "w": f"{p}_w"}},
        {"launch": f"{p}_stats", "bind": {"w": f"{p}_w", "loss": f"{p}_loss", "a4": f"{p}_a4"}},
    ]


def backward_steps(m: int) -> list[dict]:
    p = _m(m)
    return [
        {"zero": f"{p}_dh"},
        {"zero": f"{p}_dW"},
        {"zero": f"{p}_db"},
        {"launch": f"{p}_backward", "bind": {
            "h": f"{p}_h", "a3": f"{p}_a3", "labels": f"{p}_labels", "count": f"{p}_count",
            "dW_partial": f"{p}_dW_partial", "db_partial": f"{p}_db_partial", "dh": f"{p}_dh"}},
        {"launch": f"{p}_reduce", "bind": {
            "partial": {"buffer": f"{p}_dW_partial", "view": ["B", "H * D"]},
            "grad": {"buffer": f"{p}_dW", "view": ["H * D"]}}},
        {"launch": f"{p}_reduce", "bind": {"partial": f"{p}_db_partial", "grad": f"{p}_db"}},
    ]


def isv_toml(modules: int, extra_tail: bool = False) -> str:
    """The ``[isv]`` table: 10 slots per module (scale, EMA, a group of 8), plus one tail slot if asked."""
    total = modules * SLOTS_PER_MODULE + (1 if extra_tail else 0)
    out = ["[isv]", 'buffer = "isv"', 'dtype = "f32"', f"total_dim = {total}", 'reset_events = ["ColdStart", "FoldReset"]', ""]
    for m in range(modules):
        p = _m(m)
        base = m * SLOTS_PER_MODULE
        out += ["[[isv.slot]]", f"index = {base}", f'name = "{p}_SCALE"', 'role = "scale"',
                "reset = { ColdStart = 1.0, FoldReset = 1.0 }", ""]
        out += ["[[isv.slot]]", f"index = {base + 1}", f'name = "{p}_LOSS_EMA"', 'role = "ema"',
                "reset = { ColdStart = 0.0, FoldReset = 0.0 }", ""]
        out += ["[[isv.slot]]", f"index = {base + 2}", "count = 8", f'name = "{p}_STATS"', 'role = "ema"',
                "reset = { ColdStart = 0.0, FoldReset = 0.0 }", ""]
    if extra_tail:
        out += ["[[isv.slot]]", f"index = {total - 1}", 'name = "TAIL_APPENDED_SCALE"', 'role = "scale"',
                "reset = { ColdStart = 1.0, FoldReset = 1.0 }", ""]
    return "\n".join(out)


def _table(header: str, d: dict) -> list[str]:
    lines = [header]
    for k, v in d.items():
        lines.append(f"{k} = {_value(v)}")
    lines.append("")
    return lines


def _source(m: int) -> str:
    """The stub source of module ``m``: one file per schedule group (100 kernels), so a cold build of
    10,000 kernels is 100 nvcc runs rather than 1,000."""
    return f"kernels/g{m // MODULES_PER_SCHEDULE:04d}.cu"


def _stub_cu(kernels: list[dict]) -> str:
    ctype = {"f32": "float", "i32": "int"}
    out = ["// Generated stub kernels (benchmarks/synth_contracts.py): signatures only.", ""]
    for k in kernels:
        args = []
        for prm in k["params"]:
            if prm.get("kind") == "isv":
                args.append("float* __restrict__ isv")
            elif prm.get("kind") == "scalar":
                args.append(f"{ctype[prm['dtype']]} {prm['name']}")
            else:
                const = "const " if prm["role"] == "in" else ""
                args.append(f"{const}{ctype[prm['dtype']]}* __restrict__ {prm['name']}")
        out.append(f'extern "C" __global__ void {k["name"]}({", ".join(args)}) {{}}')
    return "\n".join(out) + "\n"


def write_project(n_kernels: int, root: Path) -> dict[str, int]:
    """Write a project of ``n_kernels`` kernels under ``root``; returns what it holds."""
    if n_kernels % KERNELS_PER_MODULE or n_kernels <= 0:
        raise ValueError(f"the kernel count must be a positive multiple of {KERNELS_PER_MODULE}, found {n_kernels}")
    modules = n_kernels // KERNELS_PER_MODULE
    (root / "contracts" / "modules").mkdir(parents=True, exist_ok=True)
    (root / "kernels").mkdir(parents=True, exist_ok=True)
    (root / "wireup.toml").write_text(
        'contracts = "contracts"\nkernels = "kernels"\nreports = "reports"\narch = "sm_90"\n'
        'report = "reports/synthetic-audit.md"\ngenerated = {}\n'
    )
    (root / "contracts" / "dims.toml").write_text(
        "[dims]\n"
        'B = { min = 1, max = 65536, doc = "batch rows" }\n'
        'D = { value = 64, doc = "feature width" }\n'
        'H = { value = 32, doc = "hidden width" }\n'
        'D2 = "D * 2"\n'
    )
    (root / "contracts" / "isv.toml").write_text(isv_toml(modules))
    n_buffers = 1
    stubs: dict[str, list[dict]] = {}
    shared = _table("[[buffer]]", dict(name="q_dx", dtype="f32", shape=["B", "D"], kind="gradient", external=True,
                                        doc="gradient owned by another subsystem; no aux path may reach it"))
    (root / "contracts" / "buffers.toml").write_text("\n".join(shared))
    for m in range(modules):
        lines = [f"# module {m}: generated by benchmarks/synth_contracts.py", ""]
        bufs = module_buffers(m)
        n_buffers += len(bufs)
        for b in bufs:
            lines += _table("[[buffer]]", b)
        kernels = module_kernels(m)
        for k in kernels:
            lines += _table("[[kernel]]", {"name": k["name"], "source": _source(m), **{kk: vv for kk, vv in k.items() if kk != "name"}})
        (root / "contracts" / "modules" / f"{_m(m)}.toml").write_text("\n".join(lines))
        stubs.setdefault(_source(m), []).extend(kernels)
    for source, kernels in stubs.items():
        (root / source).write_text(_stub_cu(kernels))
    sched = ["# generated by benchmarks/synth_contracts.py", ""]
    groups = (modules + MODULES_PER_SCHEDULE - 1) // MODULES_PER_SCHEDULE
    for g in range(groups):
        ms = range(g * MODULES_PER_SCHEDULE, min(modules, (g + 1) * MODULES_PER_SCHEDULE))
        head = {"name": f"fwd_{g:04d}", "stream": "main", "graph_capture": True}
        if g > 0:
            head["after"] = [f"fwd_{g - 1:04d}"]
        sched += _table("[[schedule]]", head)
        for m in ms:
            for step in forward_steps(m):
                sched += _table("[[schedule.step]]", step)
        sched += _table("[[schedule]]", {"name": f"bwd_{g:04d}", "stream": "main", "graph_capture": True, "after": [f"fwd_{g:04d}"]})
        for m in ms:
            for step in backward_steps(m):
                sched += _table("[[schedule.step]]", step)
    (root / "contracts" / "schedules.toml").write_text("\n".join(sched))
    first, last = _m(0), _m(modules - 1)
    mid = _m(modules // 2)
    inv = []
    inv += _table("[[invariant]]", dict(name="chain_reaches_the_end", kind="path", from_=[f"{first}_produce"], to=[f"kernel:{last}_loss"]))
    inv += _table("[[invariant]]", dict(name="first_scale_feeds_last_stats", kind="path", from_=[f"slot:{first}_SCALE"], to=[f"{last}_a4"]))
    inv += _table("[[invariant]]", dict(name="middle_backward_trains_its_weights", kind="path", from_=[f"{mid}_backward"], to=[f"{mid}_dW"]))
    inv += _table("[[invariant]]", dict(name="backward_never_reaches_q", kind="no_path", from_=[f"{first}_backward", f"{mid}_backward", f"{last}_backward"], to=["q_dx"]))
    inv += _table("[[invariant]]", dict(name="backward_never_feeds_the_forward", kind="no_path", from_=[f"{last}_backward"], to=[f"{first}_a0"]))
    (root / "contracts" / "invariants.toml").write_text("\n".join(inv).replace("from_ =", "from ="))
    return {"kernels": modules * KERNELS_PER_MODULE, "modules": modules, "buffers": n_buffers,
            "isv_slots": modules * SLOTS_PER_MODULE, "schedules": 2 * groups, "invariants": 5,
            "launches": modules * 11, "zero_steps": modules * 3, "contract_files": modules + 5,
            "kernel_sources": len(stubs)}


#: The edits :func:`edit_project` makes (the variants of an edited check in scaling.py and
#: check_instructions.py): what each changes, from nothing a rule reads to a value nearly every rule reads.
EDITS = {
    "comment": "a comment line appended to contracts/dims.toml (no value changes)",
    "doc": "the doc string of one kernel in the middle module's file changed (a value no rule reads)",
    "dim": "the range of the runtime dim B in contracts/dims.toml changed (its max lowered by one; every shape reads B)",
}


def edit_project(root: Path, kind: str, i: int) -> Path:
    """Edit the synthetic project at ``root`` in the way ``kind`` of :data:`EDITS` names, differently for
    each run number ``i``; the edited file."""
    contracts = root / "contracts"
    if kind == "comment":
        path = contracts / "dims.toml"
        path.write_text(path.read_text(encoding="utf-8") + f"# edit {i}\n", encoding="utf-8")
    elif kind == "doc":
        modules = sorted((contracts / "modules").glob("m*.toml"))
        path = modules[len(modules) // 2]
        text = path.read_text(encoding="utf-8")
        start = text.index('\ndoc = "') + len('\ndoc = "')
        end = text.index('"', start)
        path.write_text(text[:start] + f"edit {i}: " + text[start:end].split(": ", 1)[-1] + text[end:], encoding="utf-8")
    elif kind == "dim":  # a value never given before (an edit undone is recognised by the check cache)
        path = contracts / "dims.toml"
        text = path.read_text(encoding="utf-8")
        m = re.search(r"^B = \{ min = 1, max = (\d+)", text, re.MULTILINE)
        assert m is not None, "the synthetic dims.toml declares B's range first"
        path.write_text(text[: m.start(1)] + str(int(m.group(1)) - 1) + text[m.end(1) :], encoding="utf-8")
    else:
        raise ValueError(f"unknown edit {kind!r}; expected one of {', '.join(EDITS)}")
    return path


def write_layout_pair(n_kernels: int, folder: Path) -> tuple[Path, Path]:
    """Two ISV layout files for ``wireup layout diff OLD NEW``: N slots, and N + 1 by a tail append."""
    modules = n_kernels // KERNELS_PER_MODULE
    folder.mkdir(parents=True, exist_ok=True)
    old, new = folder / "isv_old.toml", folder / "isv_new.toml"
    old.write_text(isv_toml(modules))
    new.write_text(isv_toml(modules, extra_tail=True))
    return old, new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write a synthetic wireup project of N kernels.")
    ap.add_argument("n", type=int, help="number of kernels (a multiple of 10)")
    ap.add_argument("root", type=Path, help="folder to write it into")
    args = ap.parse_args(argv)
    print(write_project(args.n, args.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
