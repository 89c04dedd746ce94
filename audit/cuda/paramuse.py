"""Which parameters a compiled kernel entry reads, and which pointer parameters it can write through.

Read from the entry's PTX, needing no block run and no launch sizes:

* a parameter is **read** where its name appears in the entry's body at all (``ld.param``, or its address
  taken); nvcc drops every load of a parameter nothing uses, so a kernel that ignores its ``loss_scale``
  has no ``ld.param`` of it (tiny-cuda-nn trial: a seeded loss kernel that forgot to multiply by it);
* a pointer parameter is **written through** where a store, an atomic, a reduction or a ``wmma.store`` to
  global (or generic) memory takes an address derived from its value: the registers each parameter's
  ``ld.param`` reaches through arithmetic, moves, conversions and selects (never through a load: a pointer
  read from memory is another pointer).

Whether nothing writes through a parameter is only judged where every such write's address derives from
some parameter: a kernel that stores through a pointer it loaded (a table of pointers), calls a function
that is not inlined, or writes with a tensor map (``cp.async.bulk.tensor``) or a surface store is not
judged (``stored`` is None), never reported as writing nothing.

>>> ptx = '''.visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1, .param .f32 k_param_2)
... {
... ld.param.u64 %rd1, [k_param_0];
... ld.param.u64 %rd2, [k_param_1];
... cvta.to.global.u64 %rd3, %rd1;
... ld.global.f32 %f1, [%rd3];
... cvta.to.global.u64 %rd4, %rd2;
... st.global.f32 [%rd4], %f1;
... }'''
>>> use = param_uses(ptx, "k")
>>> use.names, sorted(use.read), sorted(use.stored)
(['k_param_0', 'k_param_1', 'k_param_2'], ['k_param_0', 'k_param_1'], ['k_param_1'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .races import _COMMENT, _REG, _entry_text, _param_order, _parse_body, _strip_comment

__all__ = ["ParamUse", "param_uses"]

#: the state spaces a write may name that are never a pointer parameter's global memory
_NOT_GLOBAL = ("shared", "local", "param", "const")
#: writes this analysis does not follow to an address (the kernel is then not judged)
_OPAQUE = re.compile(r"^(?:cp\.async\.bulk\.tensor|cp\.reduce\.async\.bulk\.tensor|sust|sured|tensormap|call|st\.async|multimem)\b")
#: a shared or local address: a write through it is no global write
_LOCAL_ADDRESS = re.compile(r"^cvta(?:\.to)?\.(?:shared|local)|%SP|%SPL")


@dataclass(frozen=True)
class ParamUse:
    """``names``: the entry's parameters in order; ``read``: those its body names; ``stored``: the pointer
    parameters some global write's address derives from, None where not every write could be followed."""

    names: list[str]
    read: frozenset[str]
    stored: frozenset[str] | None


def _write_address(inst) -> str | None:
    """The address operand of a write to memory that may be global, None for any other instruction."""
    parts = inst.opcode.split(".")
    head = parts[0]
    if any(p.startswith(_NOT_GLOBAL) for p in parts[1:]):
        return None
    if head in ("st", "red") and inst.operands:
        return inst.operands[0]
    if head == "atom" and len(inst.operands) > 1:
        return inst.operands[1]
    if head == "wmma" and "store" in parts and inst.operands:
        return inst.operands[0]
    return None


@lru_cache(maxsize=64)
def param_uses(ptx: str, entry: str) -> ParamUse:
    """What ``entry`` of the PTX module ``ptx`` does with its parameters (see the module's text). Raises
    ValueError where the module has no such entry."""
    text = _COMMENT.sub(_strip_comment, ptx)
    _params, _head, body = _entry_text(text, entry)
    names = _param_order(text, entry)
    words = set(re.findall(r"[\w$.]+", body))
    read = frozenset(n for n in names if n in words)
    insts, _labels = _parse_body(body)
    known = set(names)
    taint: dict[str, frozenset[str]] = {}
    local: set[str] = set()
    steps = []
    judged = True
    for inst in insts:
        if _OPAQUE.match(inst.opcode):
            judged = False
        dests = inst.dests()
        if not dests:
            continue
        ops = " ".join(inst.operands[1:])
        if inst.opcode.startswith("ld.param"):
            # a parameter's value (ld.param [k_param_1], or [k_param_1+8] of a struct passed by value)
            base = ops.strip("[] ").split("+")[0].strip()
            steps.append(("param", dests, frozenset({base} & known), ()))
        elif _LOCAL_ADDRESS.search(inst.opcode) or _LOCAL_ADDRESS.search(ops):
            steps.append(("local", dests, frozenset(), ()))
        elif inst.head in ("ld", "atom", "setp", "set"):
            continue  # a loaded value, an atomic's old value or a comparison carries no parameter's pointer
        elif inst.head == "mov" and any(w in known for w in re.findall(r"[\w$.]+", ops)):
            judged = False  # a parameter's address taken: what it reaches is not followed
        else:
            steps.append(("op", dests, frozenset(), inst.sources()))
    for _ in range(len(steps) + 1):  # a fixed point: values flow around loops
        changed = False
        for kind, dests, names_here, srcs in steps:
            if kind == "local":
                new_local = set(dests) - local
                if new_local:
                    local |= new_local
                    changed = True
                continue
            reach = names_here if kind == "param" else frozenset().union(*(taint.get(s, frozenset()) for s in srcs))
            if kind == "op" and any(s in local for s in srcs):
                for d in dests:
                    if d not in local:
                        local.add(d)
                        changed = True
            if not reach:
                continue
            for d in dests:
                old = taint.get(d, frozenset())
                if not reach <= old:
                    taint[d] = old | reach
                    changed = True
        if not changed:
            break
    stored: set[str] = set()
    for inst in insts:
        address = _write_address(inst)
        if address is None:
            continue
        regs = _REG.findall(address)
        if not regs:
            continue  # a module variable's address ([counter]): no parameter's buffer
        if all(r in local for r in regs) and "global" not in inst.opcode.split("."):
            continue  # a generic write to shared or local memory
        reach = frozenset().union(*(taint.get(r, frozenset()) for r in regs))
        if not reach:
            judged = False  # an address from memory, or a constant one: which buffer it is is not known
            continue
        stored |= reach
    return ParamUse(names, read, frozenset(stored) if judged else None)
