"""Launcher rules: every contracted kernel is launched by host code, and host code launches or builds no
kernel that a contract does not cover. They run only where ``launchers`` globs are configured; the scan
is :mod:`audit.launchers`.

``NO_LAUNCHER`` is a warning by default: teams land a kernel (with its contract and GPU evidence) before
its launcher, as the reference user's phase A did ("dead code — no launcher"); escalate it in CI once
launchers are expected. ``UNAUDITED_KERNEL`` is an error: host code running a kernel nobody contracted is
what the tool exists to catch.

``GEOMETRY_DRIFT`` compares each launch site's grid, block and shared memory with the contract: host
variables passed as integer arguments stand for their parameters' values, dim names for themselves; an
expression with any other host name is not compared (its value is unknown, never probed). A launch with
explicit template arguments is compared only with the contract whose ``cpp_name`` names that
instantiation, and the scan counts it as a launch of that contract only (an instantiation no contract
names, its arguments all known, is unaudited; docs/contracts.md, "Launchers").
"""

from __future__ import annotations

from collections.abc import Iterator

from ..findings import Severity
from ..model import Loc, SourceFile
from ._base import CheckContext, Hit, rule


class HostLine(SourceFile):
    """A host source position for a finding's location (host files are not TOML: the line is given)."""

    __slots__ = ("_fixed",)

    def __init__(self, path: str, line: int):
        super().__init__(path, "")
        self._fixed = line

    def line(self, key_path: tuple) -> int | None:
        return self._fixed


def _globs(ctx: CheckContext) -> str:
    """The host sources the scan read, as NO_LAUNCHER names them: the launcher globs, or (none set) the
    kernels' own files, which it then reads instead."""
    if ctx.config and ctx.config.launchers:
        return ", ".join(ctx.config.launchers)
    return "the kernels' own sources: no launcher globs are set"


@rule("NO_LAUNCHER", "Every contracted kernel is launched by host code: its entry symbol appears in a host source the launcher globs name.", "launchers", Severity.WARNING)
def check_no_launcher(ctx: CheckContext) -> Iterator[Hit]:
    scan = ctx.fact("launchers")
    for k in ctx.cs.kernel_map.values():
        if scan.launched(k.name):
            continue
        other = [r for r in scan.references.get(k.name, []) if r.kind in ("build", "load")]
        tail = ""
        if other:
            r = other[0]
            tail = f'; its source is only {"compiled" if r.kind == "build" else "loaded"} ({r.file}:{r.line})'
        if scan.unresolved:
            # a launch whose kernel name the scan cannot read may be this kernel's: say so, never assume
            shown = ", ".join(f"{s.file}:{s.line} ({s.kernel})" for s in scan.unresolved[:3])
            more = f" and {len(scan.unresolved) - 3} more" if len(scan.unresolved) > 3 else ""
            tail += f"; unless one of the launches whose kernel name the scan cannot resolve runs it: {shown}{more}"
        yield Hit(
            f'Kernel "{k.name}" is dead code — no launcher: no host source ({_globs(ctx)}) names its entry "{k.symbol}"{tail}.',
            k.loc, k.name,
        )  # fmt: skip


@rule("UNAUDITED_KERNEL", "Host code launches, loads or builds only kernels that a contract covers.", "launchers")
def check_unaudited(ctx: CheckContext) -> Iterator[Hit]:
    scan = ctx.fact("launchers")
    for r in scan.unaudited:
        where = Loc(HostLine(r.file, r.line))
        if r.kind == "launch" and r.call == "<<<>>>" and r.name_kind == "pattern":
            yield Hit(
                f'Host code launches, in a macro, the kernels whose names it pastes together, "{r.text}" ("*" for '
                f"the macro's parameters), but no contract declares a kernel whose entry matches it; add a [[kernel]] "
                f"contract for the instantiations its uses run (wireup init scaffolds them) or remove the launch.",
                where, r.text,
            )  # fmt: skip
        elif r.kind == "launch" and _launch_call(r.call) and "<" in r.text:
            how = "with <<<...>>>" if r.call == "<<<>>>" else f"through {r.call}"
            yield Hit(
                f'Host code launches kernel "{r.text}" {how}, but no contract\'s cpp_name names that '
                f'instantiation; add a [[kernel]] contract with cpp_name = "{r.text}" or remove the launch.',
                where, r.text,
            )  # fmt: skip
        elif r.kind == "launch" and _launch_call(r.call):
            how = "with <<<...>>>" if r.call == "<<<>>>" else f"through {r.call}"
            yield Hit(
                f'Host code launches kernel "{r.text}" {how}, but no contract declares a kernel with that name; '
                f"add a [[kernel]] contract for it (wireup init scaffolds one) or remove the launch.",
                where, r.text,
            )  # fmt: skip
        elif r.kind == "launch" and r.name_kind == "pattern":
            yield Hit(
                f'Host code launches a kernel whose name it builds at run time, "{r.text}" ("*" for the parts only the '
                f"run time knows), but no contract declares a kernel whose entry matches it; add a [[kernel]] contract "
                f"for the instantiations it runs (wireup init scaffolds them) or remove the launch.",
                where, r.text,
            )  # fmt: skip
        elif r.kind == "launch":
            via = f" through {r.call}" if r.call else ""
            yield Hit(
                f'Host code fetches kernel "{r.text}"{via}, but no contract declares a kernel with that entry; '
                f"add a [[kernel]] contract for it (wireup init scaffolds one) or remove the reference.",
                where, r.text,
            )  # fmt: skip
        else:
            what = "builds" if r.kind == "build" else "loads"
            yield Hit(
                f'Host code {what} "{r.text}", but no contract covers a kernel in that source; add contracts for its '
                f"kernels (wireup init scaffolds them) or remove it from the build.",
                where, r.text,
            )  # fmt: skip


def _launch_call(call: str) -> bool:
    """Whether a reference's call launches (``<<<>>>``, ``cuLaunchKernel``, the runtime's ``cudaLaunch*``, a
    launcher function ``f()`` that launches what it is passed) rather than fetches a kernel by name."""
    return call in ("<<<>>>", "cuLaunchKernel") or call.startswith("cudaLaunch") or call.endswith("()")


#: values given to names a comparison has no probe value for (kernel-local dims bound per launch)
_LOCAL_PROBES = (1, 7, 300, 4103)


def _host_in_contract_terms(k, site, host: str) -> tuple[object | None, str]:
    """A host geometry expression rewritten over the contract's dims: each host variable passed as an
    integer scalar argument is replaced by that parameter's contract value. (Expr, "") or (None, why)."""
    from ..cuda.launches import to_dim_expr
    from ..dims import ExprError, parse_expr
    import re

    from ..model import HostRead, ScalarParam

    placeholders: dict[str, str] = {}
    values: dict[str, str] = {}
    for p, arg in zip(k.params, site.args or ()):
        # a host read (isv(SLOT)) has no dim expression: a host variable passed for it stays unknown
        if isinstance(p, ScalarParam) and p.dtype[0] in "iu" and p.value is not None and not isinstance(p.value, (float, HostRead)):
            if re.search(r"[A-Za-z_]", arg):
                placeholders[arg] = f"wireup_arg_{p.name}"
                values[f"wireup_arg_{p.name}"] = f"({p.value})"
    text, why = to_dim_expr(host, placeholders)
    if text is None:
        return None, why
    text = re.sub(r"wireup_arg_[A-Za-z0-9_]+", lambda m: values[m.group(0)], text)
    try:
        return parse_expr(text), ""
    except ExprError as exc:
        return None, str(exc)


def _first_difference(ctx: CheckContext, k, a, b) -> tuple[dict[str, int], int, int] | None:
    """The first probe environment where the dim expressions ``a`` and ``b`` differ, with both values; an
    environment that breaks an assumption of ``k`` (``requires = ["RN % 256 == 0"]`` over runtime dims) is
    a size the host never launches it at, and is passed over (How_to_optimize_in_GPU's trial named
    RN = 16777473 for such a contract)."""
    from ..model import assumed, assumptions
    from ..shapes import probe_envs, value_at

    envs = probe_envs(ctx.cs)[:12] or [{}]
    slots = ctx.cs.slot_indices
    runtime = set(ctx.cs.runtime_ranges)
    if assumptions(k.requires, runtime):
        envs = [env for env in probe_envs(ctx.cs) if assumed(k.requires, runtime, env, slots)][:12] or envs
    for env in envs:
        extra = sorted((set(a.names) | set(b.names)) - set(env))
        for probe in _LOCAL_PROBES if extra else (None,):
            full = dict(env, **{n: probe for n in extra}) if extra else env
            va, vb = value_at(a, full, slots), value_at(b, full, slots)
            if va is None or vb is None:
                continue
            if va != vb:
                return {n: full[n] for n in sorted(set(a.names) | set(b.names))}, va, vb
    return None


def _launched_kernels(ctx: CheckContext):
    """site -> the contracts a launch site may run: those whose entry or C++ function it names (every one a
    run-time name pattern matches, ``kernel_name::<T>("affine")`` -> each contracted ``affine_*``; none for
    a name the scan could not resolve); a launch with explicit template arguments only the contract whose
    ``cpp_name`` names that instantiation (none where none does, or an argument is not known)."""
    from ..launchers import TemplateHeads, Visibility, contract_instantiation, launch_name

    heads = TemplateHeads(ctx.cs.root)  # defaults a launch's or a cpp_name's template arguments leave out
    cfg = ctx.config
    visible = Visibility(ctx.cs.root.resolve(), [cfg.path(d) for d in cfg.include_dirs] if cfg is not None else [])
    by_name: dict[str, list] = {}  # the names a launch site may use for a kernel, each kernel once per name
    for k in ctx.cs.kernel_map.values():
        for name in dict.fromkeys((k.symbol, launch_name(k))):
            by_name.setdefault(name, []).append(k)

    def kernels_of(site) -> list:
        if site.name_kind == "pattern":
            kernels = list({id(k): k for name, ks in by_name.items() if site.names_kernel(name) for k in ks}.values())
        else:
            kernels = by_name.get(site.kernel, []) if site.name_kind == "exact" else []
        if site.template_args is not None:
            kernels = [k for k in kernels if contract_instantiation(k, heads) == heads.launches(k, site.template_args)]
        return visible.narrow(site.file, site.style, kernels)

    return kernels_of


@rule("GEOMETRY_DRIFT", "Host code launches each contracted kernel with the grid, block and dynamic shared memory its contract declares.", "launchers")
def check_geometry_drift(ctx: CheckContext) -> Iterator[Hit]:
    scan = ctx.fact("launchers")
    from ..dims import parse_expr

    kernels_of = _launched_kernels(ctx)
    said: set[tuple[str, int, str]] = set()  # a macro call's launches share its line: one message for identical ones
    for site in scan.launch_sites:
        if site.pasted:
            continue  # a macro's launch of the kernels it pastes the names of: its arguments decide the geometry
        for k in kernels_of(site):
            contract = {
                **{f"grid.{ax}": e for ax, e in zip("xyz", k.grid)},
                **{f"block.{ax}": e for ax, e in zip("xyz", k.block)},
                "shared_bytes": k.shared_bytes if k.shared_bytes is not None else parse_expr(0),
            }
            host = {}
            if site.grid:
                host.update({f"grid.{ax}": e for ax, e in zip("xyz", site.grid)})
            if site.block:
                host.update({f"block.{ax}": e for ax, e in zip("xyz", site.block)})
            if site.shared is not None:
                host["shared_bytes"] = site.shared
            known = set(ctx.cs.dim_map) | set(k.dims)
            for key, text in host.items():
                expr, _why = _host_in_contract_terms(k, site, text)
                if expr is None:
                    continue  # a host expression the reader cannot translate is not compared
                if not expr.names <= known | contract[key].names:
                    # a host variable that is no kernel argument and no dim (``batch`` in ``const int B =
                    # batch``) has no value the contract gives: any probe value for it would be made up
                    continue
                diff = _first_difference(ctx, k, contract[key], expr)
                if diff is None:
                    continue
                env, contract_value, host_value = diff
                at = ", ".join(f"{n} = {v}" for n, v in env.items())
                at = f" at {at}" if at else ""
                message = (f'Kernel "{k.name}" is launched here with {key} = "{text}" but its contract declares '
                           f'"{contract[key]}"{at}: the launch gives {host_value} and the contract {contract_value}; '
                           f"update the contract or the launch.")  # fmt: skip
                if (site.file, site.line, message) in said:
                    continue
                said.add((site.file, site.line, message))
                yield Hit(message, Loc(HostLine(site.file, site.line)), k.name)


def _host_name(arg: str) -> str | None:
    """The variable a launch argument passes, where it is one: ``dst``, ``&dst``, ``n_cols as i32``,
    ``(int)n``, ``self.eps`` -> ``eps``; None for an expression."""
    import re

    text = " ".join(arg.split())
    text = re.sub(r"\s+as\s+\w+$", "", text)
    text = re.sub(r"^\(\s*(?:const\s+)?\w+\s*\*?\s*\)\s*", "", text)
    text = text.lstrip("&*").removeprefix("mut ").strip()
    text = re.sub(r"^(?:self|this)\s*(?:\.|->)\s*", "", text)
    return text if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text) else None


@rule("LAUNCH_ARG_ORDER", "Host code passes each argument at its parameter's position: no launch passes a variable named after one parameter of the kernel in the place of another (swapped arguments).", "launchers")
def check_launch_arg_order(ctx: CheckContext) -> Iterator[Hit]:
    scan = ctx.fact("launchers")
    kernels_of = _launched_kernels(ctx)
    for site in scan.launch_sites:
        if not site.args:
            continue
        for k in kernels_of(site):
            names = [p.name for p in k.params]
            if len(site.args) != len(names):
                continue  # another overload or an argument the reader mis-counted: positions say nothing
            misplaced = []
            for i, arg in enumerate(site.args):
                host = _host_name(arg)
                if host is None or host == names[i] or host not in names:
                    continue
                misplaced.append(f'"{" ".join(arg.split())}" as parameter {i + 1} ("{names[i]}")')
            if misplaced:
                each = "it is" if len(misplaced) == 1 else "each is"
                yield Hit(
                    f'Kernel "{k.name}" is launched here with {" and ".join(misplaced)}: {each} named after another '
                    f"parameter of its contract, so the arguments look swapped; pass them in the contract's order or "
                    f"rename the host variables.",
                    Loc(HostLine(site.file, site.line)), k.name,
                )  # fmt: skip
