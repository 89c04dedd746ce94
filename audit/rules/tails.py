"""The static prediction of tail coverage: launch-geometry tails no runtime value can reach.

For every ``ceil_div(a, b)``, ``a // b`` and ``a % b`` in a kernel's grid, block or ``shared_bytes``
whose ``a`` depends on a runtime dim, both sides (``a % b == 0`` and ``!= 0``) should be reachable by
some value of the runtime dims, or ``wireup verify`` can never run the partial last block, warp or tile
(it reports VERIFY_TAIL_UNCOVERED). When only a fixed dim hides a side (``B * T * 32`` with ``T = 64``
is always a multiple of 512), the contracts most likely fix a dim that varies in production, at the value
of one test: this rule says so before any GPU run. A side no dims can reach (``ceil_div(B * 512, 512)``)
is no tail and is not reported.

>>> [r.id for r in REGISTRY.values() if r.id == "TAIL_UNREACHABLE"]
['TAIL_UNREACHABLE']
"""

from __future__ import annotations

from collections.abc import Iterator

from ..cases import DimCase, make_env
from ..findings import Severity
from ..search.coverage import kernel_sites, launch_envs, tail_verdicts
from ._base import REGISTRY, CheckContext, Hit, rule


@rule("TAIL_UNREACHABLE", "Every ceil_div, // and % of a launch's geometry that depends on a runtime dim can run both with a remainder and without one at some value of the runtime dims.", "wiring", Severity.WARNING)
def check_tail_unreachable(ctx: CheckContext) -> Iterator[Hit]:
    cs, wiring = ctx.cs, ctx.wiring
    runtime = [d for d in cs.dim_map.values() if d.kind == "runtime" and d.min is not None]
    if not runtime:
        return
    # the prediction starts from every runtime dim at its smallest value (the search moves one dim at a time
    # from there) and the first values of the dims the kernel's [kernel.verify] dims varies: the culprits
    # are fixed dims, the same in every variant
    base = {d.name: max(d.min or 1, 1) for d in runtime}
    for k in cs.kernels:
        sites = kernel_sites(cs, k, wiring)
        if not sites:
            continue
        variant = {name: values[0] for name, values in k.verify.dims if values}
        envs = launch_envs(cs, k, wiring)(make_env(cs, DimCase.of(base), variant))
        for v in tail_verdicts(cs, k, wiring, sites, envs, what="case"):
            if not v.covered and v.culprits:  # a side runtime values reach is verify's to cover
                yield Hit(f'Kernel "{k.name}" {v.site.field} "{v.site.text}": {v.message}', k.loc.child(v.site.field), k.name)


assert "TAIL_UNREACHABLE" in REGISTRY
