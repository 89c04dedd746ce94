"""Build rules: every kernel compiles, exports the entry its contract names, takes the contract's
parameters (the ABI) and fits its launches.

They read the ``build`` fact (:func:`audit.compile.facts.build_facts`): the cached nvcc/ptxas build of
every kernel source. Without nvcc they are reported as not run, never as passed. A kernel whose source
does not compile is reported once by COMPILE_ERROR and skipped by the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..findings import Severity
from ..model import DTYPES, Kernel, Loc, SourceFile
from ..shapes import value_at
from ._base import CheckContext, Hit, rule

if TYPE_CHECKING:
    from ..compile import BuildResult, EntryInfo, SourceBuild
    from ..cuda.cache import AnalysisCache

REGISTERS_PER_BLOCK = 65536  # every architecture from sm_50 to sm_120
# The most shared memory one block may use (static + dynamic, with the opt-in attribute), per arch.
SHARED_PER_BLOCK = {
    70: 98304, 72: 49152, 75: 65536, 80: 166912, 86: 101376, 87: 166912, 89: 101376,
    90: 232448, 100: 232448, 101: 232448, 103: 232448, 110: 232448, 120: 101376, 121: 101376,
}  # fmt: skip


class _CudaLine(SourceFile):
    """A location in a ``.cu`` file at a known line (compiler diagnostics), not a TOML key path."""

    __slots__ = ("_at",)

    def __init__(self, path: str, line: int | None):
        super().__init__(path, "")
        self._at = line

    def line(self, key_path: tuple) -> int | None:
        return self._at


def _build(ctx: CheckContext) -> BuildResult:
    return ctx.fact("build")


def _compiled(ctx: CheckContext) -> Iterator[tuple[Kernel, SourceBuild, EntryInfo | None]]:
    """(kernel, its source build, its entry) for every kernel whose source was built and compiled."""
    build = _build(ctx)
    for k in ctx.cs.kernels:
        sb = build.source_of(k)
        if sb is None or not sb.ok:
            continue
        yield k, sb, build.kernel(k)[1]


@rule("COMPILE_ERROR", "Every kernel source compiles with nvcc and ptxas for the configured architecture.", "build")
def check_compiles(ctx: CheckContext) -> Iterator[Hit]:
    build = _build(ctx)
    for k in ctx.cs.kernels:
        sb = build.source_of(k)
        if sb is None or sb.ok:
            continue
        diag = sb.first_error
        if diag is not None:
            text = diag.render().rstrip(".")
            loc = Loc(_CudaLine(diag.file, diag.line)) if diag.file and diag.line else k.loc.child("source")
        else:
            lines = [ln.strip() for ln in sb.log.splitlines() if ln.strip()]
            text = f"{sb.source}: " + (lines[0].rstrip(".") if lines else "nvcc failed without a message")
            loc = k.loc.child("source")
        yield Hit(f'Kernel "{k.name}" does not compile: {text}.', loc, k.name)


def _with_more_arguments(sb, cpp_name: str) -> str | None:
    """The name of a compiled instantiation whose template arguments begin with all of ``cpp_name``'s and go
    on (``g<128>`` -> ``g<128, 0>``: a default left out), the first by symbol; None where none does."""
    from ..compile import normalize_cpp

    want = normalize_cpp(cpp_name)
    if not want.endswith(">"):
        return None
    for symbol in sorted(sb.entries):
        demangled = sb.entries[symbol].demangled
        name = _function_of(demangled) if demangled else ""
        if normalize_cpp(name).startswith(want[:-1] + ","):
            return name
    return None


@rule("ENTRY_MISSING", "The entry (extern \"C\" symbol) or cpp_name each kernel contract names is in its compiled module.", "build")
def check_entries(ctx: CheckContext) -> Iterator[Hit]:
    for k, sb, entry in _compiled(ctx):
        if entry is not None:
            continue
        have = _entry_list(sb)
        if k.cpp_name:
            from ..compile import overloads_of

            named, agreeing = overloads_of(sb.entries, k.cpp_name, k.params)
            if len(named) > 1:
                shown = ", ".join(f'"{e.demangled}"' for e in named)
                left = agreeing or named
                which = (f"the contract's parameter types agree with {len(agreeing)} of them" if agreeing
                         else "the contract's parameter types agree with none of them")  # fmt: skip
                yield Hit(
                    f'Kernel "{k.name}" cpp_name "{k.cpp_name}" names {len(named)} overloads in the compiled module of "{sb.source}" '
                    f"({shown}) and {which}: give the one meant with its parameter list, "
                    f'cpp_name = "{_signature_of(left[0].demangled or "")}", or correct the parameters\' dtypes.',
                    k.loc.child("cpp_name"),
                    k.name,
                )
                continue
            hint = ""
            if any(s.startswith("_Z") and e.demangled is None for s, e in sb.entries.items()):
                hint = "; c++filt was not found, so mangled names could not be read"
            elif longer := _with_more_arguments(sb, k.cpp_name):
                hint = f'; "{longer}" is there: a compiled instantiation spells every template argument, the defaults too, so write cpp_name = "{longer}"'
            elif "<" in k.cpp_name:
                hint = "; a template kernel is compiled only for its explicit instantiations (template __global__ void f<T>(...);)"
            yield Hit(
                f'Kernel "{k.name}" cpp_name "{k.cpp_name}" matches no entry of the compiled module of "{sb.source}", {have}{hint}.',
                k.loc.child("cpp_name"),
                k.name,
            )
            continue
        symbol = k.entry or k.name
        hint = ""
        for e in sb.entries.values():
            if e.demangled and _function_of(e.demangled) == symbol:
                hint = f'; "{symbol}" is there as the C++ function "{e.demangled}": declare it extern "C", or give cpp_name = "{symbol}" instead of entry'
                break
        yield Hit(
            f'Kernel "{k.name}" entry "{symbol}" is not in the compiled module of "{sb.source}", {have}{hint}.',
            k.loc.child("entry"),
            k.name,
        )


@rule("ABI_MISMATCH", "Each compiled entry takes the contract's parameters in order, with matching sizes and classes (pointer, integer, float).", "build")
def check_abi(ctx: CheckContext) -> Iterator[Hit]:
    """Counts, order, size and class of parameters; see :mod:`audit.compile.abi` for what PTX can show
    (an 8-byte integer scalar and a pointer are both ``.u64`` and are treated as compatible)."""
    from ..compile.abi import compare_params

    for k, sb, entry in _compiled(ctx):
        if entry is None:
            continue
        names = _source_names(ctx, k, sb) if len(entry.params) != len(k.params) else None
        for problem in compare_params(k, entry.params, names):
            yield Hit(problem.message, problem.loc, k.name)


@rule("LAUNCH_RESOURCES", "Every launch fits the compiled kernel: registers x threads, static + dynamic shared memory and __launch_bounds__ within the architecture's per-block limits.", "build")
def check_launch_resources(ctx: CheckContext) -> Iterator[Hit]:
    build = _build(ctx)
    arch = build.arch
    shared_limit = SHARED_PER_BLOCK.get(_arch_number(arch))
    for k, sb, entry in _compiled(ctx):
        if entry is None:
            continue
        reported: set[str] = set()
        for where, env in _launch_points(ctx, k):
            block = [value_at(e, env) for e in k.block]
            if None in block:
                continue
            threads = block[0] * block[1] * block[2]
            if entry.required_threads and "req" not in reported:
                req = list(entry.required_threads) + [1] * (3 - len(entry.required_threads))
                if block != req:
                    reported.add("req")
                    yield Hit(
                        f'Kernel "{k.name}" is launched with block {block}{where} but was compiled for exactly {req} '
                        "(.reqntid); the launch would fail.",
                        k.loc.child("block"),
                        k.name,
                    )
            if entry.max_threads and threads > entry.max_threads and "max" not in reported:
                reported.add("max")
                yield Hit(
                    f'Kernel "{k.name}" is launched with {threads} threads per block{where} but was compiled for at most '
                    f"{entry.max_threads} (__launch_bounds__); the launch would fail.",
                    k.loc.child("block"),
                    k.name,
                )
            if entry.registers and "regs" not in reported:
                need = registers_per_block(entry.registers, threads)
                if need > REGISTERS_PER_BLOCK:
                    reported.add("regs")
                    yield Hit(
                        f'Kernel "{k.name}" uses {entry.registers} registers per thread, so a block of {threads} threads'
                        f"{where} needs {need} registers, more than the {REGISTERS_PER_BLOCK} available to one block on "
                        f'{arch}; the launch would fail with "too many resources requested for launch".',
                        k.loc.child("block"),
                        k.name,
                    )
            if shared_limit is not None and "smem" not in reported:
                dynamic = value_at(k.shared_bytes, env) if k.shared_bytes is not None else 0
                if dynamic is None:
                    continue
                total = entry.shared_static_bytes + dynamic
                if total > shared_limit:
                    reported.add("smem")
                    at = _at(ctx, k, env)
                    yield Hit(
                        f'Kernel "{k.name}" needs {entry.shared_static_bytes} bytes of static shared memory plus {dynamic} '
                        f"bytes dynamic{at}{where}: {total} bytes, more than the {shared_limit} available to one block "
                        f"on {arch}; the launch would fail.",
                        k.loc.child("shared_bytes") if k.shared_bytes is not None else k.loc,
                        k.name,
                    )


@rule("REGISTER_SPILLS", "Compiled kernels do not spill registers to local memory.", "build", Severity.WARNING)
def check_spills(ctx: CheckContext) -> Iterator[Hit]:
    for k, sb, entry in _compiled(ctx):
        if entry is None or not (entry.spill_stores or entry.spill_loads):
            continue
        yield Hit(
            f'Kernel "{k.name}" spills registers to local memory: {entry.spill_stores} bytes of spill stores and '
            f"{entry.spill_loads} bytes of spill loads at {entry.registers} registers per thread.",
            k.loc,
            k.name,
        )


def _project_sources(ctx: CheckContext) -> Iterator[tuple[Any, str, str, list[Any]]]:
    """Every kernel source and local header it includes, once, as ``(path, shown, kernel, include_dirs)``:
    ``shown`` is the path relative to the project root, ``kernel`` the first kernel that uses it. Files
    outside the project are not its code to judge and are left out."""
    for f, shown, kernels, dirs in _project_files(ctx):
        yield f, shown, kernels[0].name, dirs


def _project_files(ctx: CheckContext) -> Iterator[tuple[Any, str, list[Any], list[Any]]]:
    """:func:`_project_sources` with every kernel whose source is the file or includes it, in contract
    order (the first is the one findings are filed under)."""
    from pathlib import Path

    from ..hashing import include_closure

    cfg = ctx.config
    if cfg is None:
        return
    root = Path(ctx.cs.root).resolve()
    dirs = [cfg.path(d) for d in cfg.include_dirs]
    users: dict[Path, list[Any]] = {}
    closures: dict[str, list[Path]] = {}  # kernels share sources (ten entries of one file): each closure is read once
    for k in ctx.cs.kernels:
        if k.source not in closures:
            path = cfg.path(k.source)
            closures[k.source] = [path.resolve(), *include_closure(path, dirs)] if path.is_file() else []
        for f in closures[k.source]:
            users.setdefault(f, []).append(k)
    for f, kernels in sorted(users.items(), key=lambda kv: kv[0].as_posix()):
        try:
            shown = f.relative_to(root).as_posix()
        except ValueError:
            continue
        yield f, shown, kernels, dirs


def _analysis_cache(ctx: CheckContext) -> AnalysisCache | None:
    """The on-disk cache of the source/PTX analyses, beside the build cache (None without a configuration)."""
    from ..cuda.cache import AnalysisCache

    cfg = ctx.config
    return AnalysisCache(cfg.path(cfg.cache) / "analysis") if cfg is not None else None


@rule("LOCAL_ARRAY_BOUNDS", "No constant-bound loop of a kernel source indexes a fixed-size local or shared array out of its bounds (undefined behaviour the compiler hides).", "build")
def check_local_array_bounds(ctx: CheckContext) -> Iterator[Hit]:
    """Reads the kernel sources and the local headers they include; needs no compiler."""
    from ..cuda.static import kernel_instances, overrun_text, source_overruns

    cache = _analysis_cache(ctx)
    for f, shown, kernels, dirs in _project_files(ctx):
        for o in source_overruns(f, dirs, cache, kernel_instances(ctx.cs, ctx.wiring, kernels)):
            yield Hit(overrun_text(o), Loc(_CudaLine(shown, o.line)), kernels[0].name)


@rule("SHARED_ARRAY_BOUNDS", "No loop that starts at the thread index and steps by the block (or a constant-bound loop) indexes a shared array, a field of a shared struct or union, or an element reached through a pointer into one, out of the array's bounds.", "build")
def check_shared_array_bounds(ctx: CheckContext) -> Iterator[Hit]:
    """Reads the kernel sources and the local headers they include; needs no compiler (see
    :mod:`audit.cuda.sharedbounds`)."""
    from ..cuda.static import kernel_instances, overrun_text, source_shared_overruns

    cache = _analysis_cache(ctx)
    for f, shown, kernels, dirs in _project_files(ctx):
        for o in source_shared_overruns(f, dirs, cache, kernel_instances(ctx.cs, ctx.wiring, kernels)):
            yield Hit(overrun_text(o), Loc(_CudaLine(shown, o.line)), kernels[0].name)


@rule("LOCAL_UNINIT_READ", "No read of a fixed-size local array finds an element that was written only under a run-time guard the read lacks (an uninitialised register the compiler hides).", "build")
def check_local_uninit_reads(ctx: CheckContext) -> Iterator[Hit]:
    """Reads the kernel sources and the local headers they include; needs no compiler."""
    from ..cuda.static import overrun_text, source_uninit_reads

    cache = _analysis_cache(ctx)
    for f, shown, kernel, dirs in _project_sources(ctx):
        for r in source_uninit_reads(f, dirs, cache):
            yield Hit(overrun_text(r), Loc(_CudaLine(shown, r.line)), kernel)


def _defined_in(ctx: CheckContext, ptx: str, symbol: str, source: str) -> str:
    """The file the PTX analyses' lines of entry ``symbol`` are in: the kernel's source, or the local header
    that defines the kernel (a header-only kernel library), relative to the project root."""
    from pathlib import Path

    from ..cuda.static import ptx_finding_file

    return ptx_finding_file(ptx, symbol, source, Path(ctx.cs.root))


def _ptx_text(ctx: CheckContext, path: Any) -> str:
    """The PTX of a compiled source, read once per check (the entries of one source share one file)."""
    text = ctx.texts.get(path)
    if text is None:
        text = ctx.texts[path] = path.read_text(errors="replace")
    return text


def _ptx_hits(ctx: CheckContext, analyse: Callable[[Any, str, str, Any], Sequence[Any]]) -> Iterator[Hit]:
    """The findings of one PTX analysis over every compiled entry: ``analyse(kernel, ptx, symbol, cache)``
    returns findings with a ``line`` (in the file that defines the entry) and ``message(kernel, file)``;
    then a note for each kernel it could not read (:func:`_unread_notes`)."""
    yield from _analysed_hits(ctx, analyse)
    yield from _unread_notes(ctx)


def _unread_notes(ctx: CheckContext) -> Iterator[Hit]:
    """A note for each kernel a PTX rule did not read because its source did not compile or its entry is
    not in the module, where the rule that says so (COMPILE_ERROR, ENTRY_MISSING) is not selected in this
    run: a check of the PTX rules alone passed such a kernel in silence (llm.c trial, a stand-in header
    missing: exit 0, nothing said). Where that rule runs too, its finding says it, once."""
    selected = ctx.options.get("_selected")
    for k, (why, rule_id) in unread_kernels(ctx).items():
        if selected is not None and rule_id in selected:
            continue
        yield Hit(f'Kernel "{k.name}" was not analysed: {why} ({rule_id} says why), {UNREAD_TAIL}', k.loc.child("source"), k.name, Severity.NOTE)


#: the rules that say why a kernel was not built (the others of the category need its build)
BUILD_FAILURE_RULES = frozenset({"COMPILE_ERROR", "ENTRY_MISSING"})


def unread_kernels(ctx: CheckContext) -> dict[Kernel, tuple[str, str]]:
    """The kernels whose source was built but that no rule reading the build could read: kernel -> (why,
    the rule that reports it)."""
    build = _build(ctx)
    out: dict[Kernel, tuple[str, str]] = {}
    for k in ctx.cs.kernels:
        sb = build.source_of(k)
        if sb is None:
            continue
        if not sb.ok:
            out[k] = ("its source does not compile", "COMPILE_ERROR")
        elif build.kernel(k)[1] is None:
            out[k] = ("its entry is not in the compiled module", "ENTRY_MISSING")
    return out


#: the end of :func:`_unread_notes`' message, by which :func:`is_unread_note` knows one
UNREAD_TAIL = "so no finding here is no proof of none."


def is_unread_note(f: Any) -> bool:
    """Whether finding ``f`` is a PTX rule's note that it did not read ``f.subject`` at all (no suppression
    takes it: :func:`audit.rules._engine._suppress`)."""
    return f.severity is Severity.NOTE and f.message.endswith(UNREAD_TAIL) and f.message.startswith(f'Kernel "{f.subject}" was not analysed: ')


def _analysed_hits(ctx: CheckContext, analyse: Callable[[Any, str, str, Any], Sequence[Any]]) -> Iterator[Hit]:
    cache = _analysis_cache(ctx)
    for k, sb, entry in _compiled(ctx):
        if entry is None or sb.ptx is None or not sb.ptx.is_file():
            continue
        ptx = _ptx_text(ctx, sb.ptx)
        found = analyse(k, ptx, entry.symbol, cache)
        if not found:
            continue
        shown = _defined_in(ctx, ptx, entry.symbol, sb.source)
        for f in found:
            loc = Loc(_CudaLine(shown, f.line)) if f.line else k.loc.child("source")
            yield Hit(f.message(k.name, shown), loc, k.name)


#: what each block-simulator rule looks for, as its not-analysed note names it
_GAP_WHAT = {"races": "shared-memory accesses of two threads with no barrier between them",
             "bounds": "accesses outside its buffers and shared memory",
             "rmw": "non-atomic global read-modify-writes that race",
             "overlap": "global elements that two blocks store",
             "uninit": "reads of shared memory that no thread wrote"}


def _gap_hits(ctx: CheckContext, want: str) -> Iterator[Hit]:
    """A note for each compiled entry the block run of ``want`` ("races", "bounds", "rmw") did not take to
    every exit (it gave up, stopped or had no block): a check that was not run is reported as not run,
    never passed in silence."""
    from ..cuda.static import entry_block_gap

    cache = _analysis_cache(ctx)
    for k, sb, entry in _compiled(ctx):
        if entry is None or sb.ptx is None or not sb.ptx.is_file():
            continue
        gap = entry_block_gap(ctx.cs, ctx.wiring, k, _ptx_text(ctx, sb.ptx), want, entry.symbol, cache)
        if gap:
            yield Hit(f'Kernel "{k.name}" was not analysed to its end for {_GAP_WHAT[want]} ({gap}): what it does past '
                      "that point is not checked, so no finding there is no proof of none.", k.loc.child("source"), k.name,
                      Severity.NOTE)  # fmt: skip


@rule("STORE_RACE", "A non-atomic global store at an address that is the same for every thread (an ISV slot) is made by one thread of one block.", "build")
def check_store_races(ctx: CheckContext) -> Iterator[Hit]:
    """Reads each compiled entry's PTX: the address's dependence on the thread and block index, and the
    tid/ctaid == constant conditions that hold where the store runs (see :mod:`audit.cuda.races`)."""
    from ..cuda.static import entry_store_races

    yield from _ptx_hits(ctx, lambda k, ptx, symbol, cache: entry_store_races(ctx.cs, ctx.wiring, k, ptx, symbol, cache))


def _param_uses(ctx: CheckContext) -> Iterator[tuple[Kernel, Any]]:
    """(kernel, :class:`audit.cuda.paramuse.ParamUse` of its entry) for each compiled entry whose parameter
    count is the contract's (ABI_MISMATCH reports the others)."""
    from ..cuda.paramuse import ParamUse, param_uses

    def stored(value: Any) -> ParamUse | None:
        if value is None:
            return None
        names, read, written = value
        if not (isinstance(names, list) and isinstance(read, list) and (written is None or isinstance(written, list))):
            raise TypeError("not a parameter use")
        return ParamUse([str(n) for n in names], frozenset(map(str, read)), None if written is None else frozenset(map(str, written)))

    cache = _analysis_cache(ctx)
    for k, sb, entry in _compiled(ctx):
        if entry is None or sb.ptx is None or not sb.ptx.is_file():
            continue
        ptx = _ptx_text(ctx, sb.ptx)

        def compute(ptx: str = ptx, symbol: str = entry.symbol) -> list | None:
            try:
                use = param_uses(ptx, symbol)
            except ValueError:
                return None  # (ENTRY_MISSING's)
            return [use.names, sorted(use.read), None if use.stored is None else sorted(use.stored)]

        # kept beside the other analyses by the PTX text and the entry: a warm check reads it (462 ms of
        # parsing every entry's body otherwise)
        use = stored(cache.value("param-uses", [ptx, entry.symbol], lambda v: (stored(v), v)[1], compute) if cache is not None else compute())
        if use is not None and len(use.names) == len(k.params):
            yield k, use


@rule("OUTPUT_NEVER_WRITTEN", "An out or inout pointer parameter is written by some store, atomic or reduction of the compiled kernel (an address derived from it); a kernel whose writes cannot all be followed to a parameter is not judged.", "build")
def check_output_never_written(ctx: CheckContext) -> Iterator[Hit]:
    """Reads each compiled entry's PTX: the registers each parameter's value reaches, and the addresses of
    its global writes (see :mod:`audit.cuda.paramuse`)."""
    for k, use in _param_uses(ctx):
        if use.stored is None:
            continue
        for p, name in zip(k.params, use.names):
            if p.kind == "tensor" and p.writes and name not in use.stored:
                yield Hit(f'Kernel "{k.name}" never writes "{p.name}" (role "{p.role}"): no store, atomic or reduction '
                          "of its compiled code has an address derived from it, so every launch leaves it as it was; "
                          'write it, or give it role "in".', p.loc.child("role"), k.name)  # fmt: skip


@rule("PARAM_UNREAD", "Every parameter of a compiled kernel is read: nvcc drops a parameter nothing uses, so a value the host passes that changes nothing (a loss scale never applied) is found.", "build")
def check_param_unread(ctx: CheckContext) -> Iterator[Hit]:
    """Reads each compiled entry's PTX: a parameter its body never names (see :mod:`audit.cuda.paramuse`)."""
    for k, use in _param_uses(ctx):
        for p, name in zip(k.params, use.names):
            if name in use.read or p.kind == "isv":
                continue
            if p.kind == "scalar" and DTYPES.get(p.dtype, (0, "", "", "int"))[3] != "float":  # (bf16 is a float too)
                # an integer the grid already covers (a row count) is often passed and ignored: a warning
                yield Hit(f'Kernel "{k.name}" never reads its parameter "{p.name}": the compiled code has no use of it, so '
                          "the integer the host passes changes nothing (a size the grid covers is often left unread: "
                          "check that this one may be).", p.loc, k.name, Severity.WARNING)  # fmt: skip
                continue
            what = "value" if p.kind == "scalar" else "buffer"
            yield Hit(f'Kernel "{k.name}" never reads its parameter "{p.name}": the compiled code has no use of it, so '
                      f"the {what} the host passes changes nothing; use it, or drop it from the kernel and the contract.",
                      p.loc, k.name)  # fmt: skip


@rule("INDEX_OVERFLOW", "A global-memory offset computed in 32-bit arithmetic stays within its type at the largest dims the contracts allow.", "build")
def check_index_overflow(ctx: CheckContext) -> Iterator[Hit]:
    """Reads each compiled entry's PTX at the contracts' largest dims: the exact value of every 32-bit
    register that is widened into a global address (see :mod:`audit.cuda.indexwidth`)."""
    from ..cuda.static import entry_index_overflows

    yield from _ptx_hits(ctx, lambda k, ptx, symbol, cache: entry_index_overflows(ctx.cs, ctx.wiring, k, ptx, symbol, cache))


@rule("SHARED_RMW_RACE", "A shared-memory read-modify-write (s[i] += v) is made by one thread per element, or atomically.", "build")
def check_shared_races(ctx: CheckContext) -> Iterator[Hit]:
    """Reads each compiled entry's PTX with the block extent of its launches: which threads may run each
    ``ld.shared``/``st.shared`` pair, and each one's address per thread (see :mod:`audit.cuda.sharedraces`)."""
    from ..cuda.static import entry_shared_races

    yield from _ptx_hits(ctx, lambda k, ptx, symbol, cache: entry_shared_races(ctx.cs, ctx.wiring, k, ptx, symbol, cache))


@rule("SHARED_BARRIER_MISSING", "A shared-memory element one thread writes is read or overwritten by another only after a barrier (__syncthreads(), or __syncwarp() within a warp); an entry the block run cannot take to its end is a note saying so, never a silent pass.", "build")
def check_barrier_races(ctx: CheckContext) -> Iterator[Hit]:
    """Runs each compiled entry's block over its PTX at small valid sizes of the contracts: which thread
    touches which shared byte in which barrier interval (see :mod:`audit.cuda.barriers`)."""
    from ..cuda.static import entry_barrier_races

    yield from _ptx_hits(ctx, lambda k, ptx, symbol, cache: entry_barrier_races(ctx.cs, ctx.wiring, k, ptx, symbol, cache))
    yield from _gap_hits(ctx, "races")


@rule("SHARED_UNINIT_READ", "No thread reads shared memory (or updates it atomically) before some thread of its block has written it, at small valid sizes of the contracts; an entry the block run cannot follow to its end is a note saying so.", "build")
def check_shared_uninit_reads(ctx: CheckContext) -> Iterator[Hit]:
    """From the block run of SHARED_BARRIER_MISSING: the first write of every shared byte (its barrier
    interval and thread), and each read of a byte no thread had written before it (see
    :meth:`audit.cuda.blocksim._Block.found_uninit`)."""
    from ..cuda.static import entry_shared_uninit_reads

    yield from _ptx_hits(ctx, lambda k, ptx, symbol, cache: entry_shared_uninit_reads(ctx.cs, ctx.wiring, k, ptx, symbol, cache))
    yield from _gap_hits(ctx, "uninit")


@rule("OUT_OF_BOUNDS_ACCESS", "No thread reads or writes outside the buffer of a pointer parameter (its contract extent), a static shared array or the launch's dynamic shared memory, at small valid sizes of the contracts; an entry the block run cannot take to its end is a note saying so.", "build")
def check_out_of_bounds(ctx: CheckContext) -> Iterator[Hit]:
    """Runs each compiled entry's block over its PTX at small valid sizes of the contracts (the run of
    SHARED_BARRIER_MISSING) with every pointer parameter a buffer of its contract extent: which thread
    touches which byte of which buffer (see :mod:`audit.cuda.blockbounds`). A shared overrun on a line
    SHARED_ARRAY_BOUNDS reports is left to it, and an access before a buffer's start on a line whose offset
    INDEX_OVERFLOW reports wrapping, to that rule."""
    from ..cuda.static import _reported_at, entry_index_overflows, entry_out_of_bounds, kernel_instances, source_shared_overruns

    cache = _analysis_cache(ctx)
    lines: set[tuple[str, int | None]] | None = None

    def shared_lines() -> set[tuple[str, int | None]]:
        nonlocal lines
        if lines is None:
            lines = set()
            for f, shown, kernels, dirs in _project_files(ctx):
                for o in source_shared_overruns(f, dirs, cache, kernel_instances(ctx.cs, ctx.wiring, kernels)):
                    lines.add((shown, o.line))
        return lines

    def analyse(k: Kernel, ptx: str, symbol: str, cache: Any) -> list[Any]:
        found = entry_out_of_bounds(ctx.cs, ctx.wiring, k, ptx, symbol, cache)
        if any(o.memory in ("shared", "dynamic") for o in found):
            shown = _defined_in(ctx, ptx, symbol, _build(ctx).source_of(k).source)
            found = [o for o in found if not _reported_at(o, shown, shared_lines())]
        if any(o.memory == "global" and o.start < 0 for o in found):
            # an access before a buffer's start on a line whose 32-bit offset INDEX_OVERFLOW reports is that
            # wrap, seen at one size: one finding for one bug (the wrap names the dims and the fix)
            wraps = {w.line for w in entry_index_overflows(ctx.cs, ctx.wiring, k, ptx, symbol, cache) if w.line is not None}
            found = [o for o in found if not (o.memory == "global" and o.start < 0 and o.line in wraps)]
        return found

    yield from _ptx_hits(ctx, analyse)
    yield from _gap_hits(ctx, "bounds")


@rule("GLOBAL_RMW_RACE", "A non-atomic read-modify-write of a global element (y[i] += v) is made by one thread per element, or ordered by a barrier within a block; else it is an atomicAdd. An entry the block run cannot take to its end is a note saying so.", "build")
def check_global_rmw_races(ctx: CheckContext) -> Iterator[Hit]:
    """Runs each compiled entry's blocks over its PTX at small valid sizes of the contracts (the run of
    SHARED_BARRIER_MISSING and OUT_OF_BOUNDS_ACCESS, every block of a small grid, one more launch with every
    runtime dim at 2): which thread of which block loads, modifies and stores which element of which
    buffer in which barrier interval (see :mod:`audit.cuda.globalraces`)."""
    from ..cuda.static import entry_global_rmw_races

    yield from _ptx_hits(ctx, lambda k, ptx, symbol, cache: entry_global_rmw_races(ctx.cs, ctx.wiring, k, ptx, symbol, cache))
    yield from _gap_hits(ctx, "rmw")


@rule("BLOCK_WRITE_OVERLAP", "No global element is stored by two blocks of one launch with plain stores (their parts of an output overlap, and which value stays depends on the order the blocks run), at small valid sizes of the contracts; an entry the block run cannot take to its end is a note saying so.", "build")
def check_block_write_overlap(ctx: CheckContext) -> Iterator[Hit]:
    """Runs the blocks of OUT_OF_BOUNDS_ACCESS's run (block 0, the grid's last block, blocks of other paths)
    at the same launches: which block stores which byte of which buffer (see :mod:`audit.cuda.blockwrites`)."""
    from ..cuda.static import entry_block_writes

    yield from _ptx_hits(ctx, lambda k, ptx, symbol, cache: entry_block_writes(ctx.cs, ctx.wiring, k, ptx, symbol, cache))
    yield from _gap_hits(ctx, "overlap")


@rule("CP_ASYNC_WAIT", "Every cp.async copy is committed to a group before a cp.async.wait_group, and drained by a wait_group 0 (or wait_all) before the kernel exits; a thread touches the shared bytes of its own copy only after a wait_group completed the copy's group.", "build")
def check_async_copy_waits(ctx: CheckContext) -> Iterator[Hit]:
    """Reads each compiled entry's PTX: the copies each path has issued, committed and drained at every
    wait and exit (see :mod:`audit.cuda.cpasync`); and, from the block run of SHARED_BARRIER_MISSING, each
    thread's access of bytes its own copy may still be writing."""
    from ..cuda.static import entry_async_copy_hazards, entry_own_copy_hazards

    yield from _ptx_hits(ctx, lambda k, ptx, symbol, cache: [*entry_async_copy_hazards(k, ptx, symbol, cache),
                                                             *entry_own_copy_hazards(ctx.cs, ctx.wiring, k, ptx, symbol, cache)])


# ---------------------------------------------------------------------------------------------------------


def registers_per_block(registers: int, threads: int) -> int:
    """Registers a block occupies: each warp allocates in units of 256 (8 per thread), whole warps.

    >>> registers_per_block(134, 1024)
    139264
    """
    per_warp = -(-registers * 32 // 256) * 256
    return per_warp * -(-threads // 32)


def _arch_number(arch: str) -> int:
    digits = "".join(c for c in arch.split("_", 1)[-1] if c.isdigit())
    return int(digits) if digits else 0


def _launch_points(ctx: CheckContext, k: Kernel) -> Iterator[tuple[str, dict[str, int]]]:
    """(where, dim environment) of every launch of ``k``; its probe sizes where no schedule launches it. A
    size that breaks an assumption of ``k`` (``requires = ["e <= 64"]`` over runtime dims) is one the host
    never launches it at, and is left out (vllm's small-batch MoE kernel was judged at e = 4096)."""
    from ..model import assumed, assumptions

    runtime = set(ctx.cs.runtime_ranges)
    given = assumptions(k.requires, runtime)
    slots = ctx.cs.slot_indices
    found = False
    for sname, launch in ctx.wiring.launches_by_kernel.get(k.name, ()):  # indexed once, not a scan per kernel
        for env in launch.envs:
            found = True
            if not given or assumed(given, runtime, env, slots):
                yield f' in step {launch.step.index + 1} of schedule "{sname}"', env
    if not found:
        for env in ctx.wiring.envs:
            if not given or assumed(given, runtime, env, slots):
                yield "", env


def _at(ctx: CheckContext, k: Kernel, env: dict[str, int]) -> str:
    names = sorted(n for n in (k.shared_bytes.names if k.shared_bytes else ()) if n in ctx.cs.runtime_ranges)
    return (" at " + ", ".join(f"{n} = {env[n]}" for n in names if n in env)) if names else ""


def _entry_list(sb: SourceBuild) -> str:
    if not sb.entries:
        return "which has no __global__ entries"
    shown = [f'"{e.display_name}"' for _, e in sorted(sb.entries.items())]
    more = f" and {len(shown) - 8} more" if len(shown) > 8 else ""
    return "whose entries are " + ", ".join(shown[:8]) + more


def _signature_of(demangled: str) -> str:
    """``void ns::f<float>(float*, int)`` -> ``ns::f<float>(float*, int)``: the name with its parameters."""
    name = _function_of(demangled)
    at = demangled.find(name + "(")
    return demangled[at:] if at >= 0 else name


def _function_of(demangled: str) -> str:
    """``void ns::f<float>(float*)`` -> ``ns::f<float>``; ``f(int)`` -> ``f``."""
    head = demangled.split("(", 1)[0].strip()
    depth, start = 0, 0
    for i, c in enumerate(head):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == " " and depth == 0:
            start = i + 1  # what precedes the last top-level space is the return type
    return head[start:]


def _source_names(ctx: CheckContext, k: Kernel, sb: SourceBuild) -> list[str | None] | None:
    """Parameter names of the kernel's definition in its source or local headers (messages only)."""
    from pathlib import Path

    from ..compile.abi import function_name, source_param_names
    from ..hashing import include_closure
    from ..untrusted import SOURCE_LIMIT, read_regular

    cfg = ctx.config
    path = Path(sb.source) if sb.source != k.source else ctx.cs.root / k.source
    dirs = [cfg.path(d) for d in cfg.include_dirs] if cfg else []
    try:
        files = [path.resolve(), *[p for p in include_closure(path, dirs) if p != path.resolve()]]
        for f in files:
            names = source_param_names(read_regular(f, SOURCE_LIMIT).decode("utf-8", errors="replace"), function_name(k))
            if names is not None:
                return names
    except OSError:
        return None
    return None


@rule("SHARED_BYTES_MISSING", "A kernel whose compiled entry uses dynamic shared memory (extern __shared__) declares shared_bytes greater than 0 at every probed size.", "build")
def check_shared_bytes_missing(ctx: CheckContext) -> Iterator[Hit]:
    """Reads each compiled entry's PTX for the ``.extern .shared`` arrays it uses; a launch with no dynamic
    shared memory gives such an array 0 bytes, so every access leaves the block's shared memory."""
    from ..cuda.static import dynamic_shared_arrays, extern_shared_names
    from ..shapes import probe_envs, value_at

    declares: dict[Any, bool] = {}  # PTX file -> whether it declares any extern shared array (once per file)
    for k, sb, entry in _compiled(ctx):
        if entry is None or sb.ptx is None or not sb.ptx.is_file():
            continue
        if sb.ptx not in declares:
            declares[sb.ptx] = bool(extern_shared_names(_ptx_text(ctx, sb.ptx)))
        if not declares[sb.ptx]:
            continue
        arrays = dynamic_shared_arrays(_ptx_text(ctx, sb.ptx), entry.symbol)
        if not arrays:
            continue
        names = ", ".join(f'"{a}"' for a in arrays)
        if k.shared_bytes is None:
            yield Hit(
                f'Kernel "{k.name}" uses dynamic shared memory (extern __shared__ {names} in its compiled entry) but its '
                f"contract declares no shared_bytes, so every launch gives it 0 bytes; declare shared_bytes.",
                k.loc, k.name,
            )  # fmt: skip
            continue
        for env in probe_envs(ctx.cs):
            local = dict(env, **{d: 1 for d in k.dims if d not in env})
            if value_at(k.shared_bytes, local, ctx.cs.slot_indices) == 0:
                at = ", ".join(f"{n} = {local[n]}" for n in sorted(k.shared_bytes.names))
                yield Hit(
                    f'Kernel "{k.name}" uses dynamic shared memory (extern __shared__ {names}) but its shared_bytes '
                    f'"{k.shared_bytes}" is 0 at {at}.',
                    k.loc.child("shared_bytes"), k.name,
                )  # fmt: skip
                break
