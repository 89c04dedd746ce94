"""``wireup init``: scaffold contracts for the ``__global__`` kernels of existing CUDA sources.

    wireup init kernels/aux_trunk_kernel.cu                      # prints the contract
    wireup init kernels/aux_trunk_kernel.cu -o contracts/kernels/aux_trunk.toml

Parameters, their order, kinds and dtypes come from the signatures; shapes, grid and integer scalar
values are left as "TODO" (an undeclared dim, so ``wireup check`` fails until they are filled in).
Integer scalars named like a dim the project already declares get that dim. Several sources make one
file (one ``[dims]`` table; a kernel two sources declare is scaffolded once, from its definition; two
sources that each define a kernel of one name get a contract each, the second named after its file,
``render_bwd`` for ``bwd.cu``). An output inside the
project's contracts folder may name folders that do not exist yet (they are created). Exit 0 written, 1
when a file holds no ``__global__`` function, 2 for unreadable input or an existing output without --force.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ExitCode, UsageError
from ._common import root_of

NAME = "init"
HELP = "scaffold contracts for the __global__ kernels of CUDA sources (shapes left as TODO)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sources", nargs="+", metavar="FILE.cu", help="CUDA sources to read")
    p.add_argument("--output", "-o", metavar="FILE", help="write the contracts to FILE (default: print them)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.add_argument("--host", action="append", default=[], metavar="FILE",
                   help="host code that launches the kernels (.cu/.cpp <<<>>> or cuLaunchKernel, Rust cudarc, Python CuPy); "
                   "the sources themselves are always read for launches")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..config import load_config
    from ..errors import ContractError
    from ..load import load_contracts
    from ..scaffold import CKernel, mark_null_tests, name_overload, parse_kernels, scaffold_sources, second_definition_name

    cfg = load_config(root_of(args))
    if root_of(args) is None and cfg.source == "defaults":
        # the scaffold names its sources relative to the root: a guessed root (an enclosing repository,
        # say) would write paths the project never meant
        raise UsageError(
            f'No wireup.toml or [tool.wireup] was found, so wireup init would take "{cfg.root}" (the nearest folder '
            "with a .git, a pyproject.toml or a wireup.toml) as the project root and name sources relative to it; "
            "pass --root DIR, or create DIR/wireup.toml first."
        )
    known_dims: tuple[str, ...] = ()
    existing: dict[str, str] = {}
    try:  # contracts that do not load yet must not stop a scaffold
        cs = load_contracts(cfg.contracts_dir, cfg.root)
        known_dims = tuple(cs.dim_map)
        existing = {k.name: str(k.loc) for k in cs.kernels}
    except ContractError:
        pass
    from ..cuda.launches import find_launches, language_of, rust_helpers
    from ..launchers import included_constants

    def relative(path: Path) -> str | None:
        try:
            return path.resolve().relative_to(cfg.root).as_posix()
        except ValueError:
            return None

    launches = []
    host_texts = []
    for host in args.host:
        try:
            host_texts.append((host, Path(host).read_text(encoding="utf-8", errors="replace")))
        except OSError as exc:
            raise UsageError(f'--host "{host}" cannot be read ({exc.strerror or exc}).') from None
    # a Rust code base's own wrappers of cudarc (get_or_load_func, func.builder()), from every --host file
    rust = rust_helpers([text for host, text in host_texts if language_of(host) == "rust"])
    for host, host_text in host_texts:
        launches += find_launches(host_text, language_of(host), relative(Path(host)) or Path(host).as_posix(),
                                  included_constants(host_text, Path(host), cfg.root, include_dirs=[cfg.path(d) for d in cfg.include_dirs]), rust)
    read: list[tuple[str, list[CKernel], str]] = []  # (source as contracts name it, its kernels, its text)
    src_of: dict[str, str] = {}  # that name -> the path given on the command line
    empty = []
    for src in args.sources:
        path = Path(src)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f'"{src}" cannot be read ({getattr(exc, "strerror", None) or exc}).') from None
        rel = relative(path)
        if rel is None:
            rel = path.as_posix()
            print(f'wireup init: "{src}" is outside the project root "{cfg.root}"; contracts name sources inside it, so move it or fix "source".', file=sys.stderr)
        kernels = parse_kernels(text)
        mark_null_tests(kernels, text)  # optional pointers: those the kernels' bodies test against NULL
        kernels = sorted(kernels + _through_macros(path, text, kernels, cfg, src), key=lambda k: k.line)
        if not kernels:
            empty.append(src)
            continue
        read.append((rel, kernels, text))
        src_of[rel] = src
    # one [[kernel]] table per name (two would not load): from the source that defines the kernel, where
    # another only declares it (a header's prototype), else from the first
    # (by contract name: an overload defined in another source than the name's first gets its own)
    chosen: dict[str, tuple[str, CKernel]] = {}
    for rel, kernels, _ in read:
        for k in kernels:
            same = [c for _, c in chosen.values() if c.name == k.name]
            if name_overload(k, same, set(chosen)):
                chosen[k.contract_name] = (rel, k)  # type: ignore[index]
                continue
            key = k.contract_name or k.name
            if key in chosen and k.defined and chosen[key][1].defined and chosen[key][0] != rel:
                # a second definition in another source: another translation unit's kernel of that name
                # (3DGS's forward and backward renderCUDA<3u>), compiled from its own file: its own contract
                k.contract_name = second_definition_name(k, rel, {*chosen, *existing})
                chosen[k.contract_name] = (rel, k)
                print(f'wireup init: kernel "{k.name}" at {rel}:{k.line} is another definition than {chosen[key][0]}:{chosen[key][1].line}\'s; '
                      f'scaffolded as "{k.contract_name}".', file=sys.stderr)  # fmt: skip
                continue
            if key not in chosen or (k.defined and not chosen[key][1].defined):
                chosen[key] = (rel, k)
    units = []
    for rel, kernels, text in read:
        for k in kernels:
            first = chosen[k.contract_name or k.name]
            if first[0] != rel:
                print(f'wireup init: kernel "{k.name}" at {rel}:{k.line} is scaffolded from {first[0]}:{first[1].line}; skipped here.', file=sys.stderr)
        kernels = [k for k in kernels if chosen[k.contract_name or k.name][0] == rel]
        for k in kernels:
            name = k.contract_name or k.name
            if name in existing:
                print(f'wireup init: kernel "{name}" already has a contract ({existing[name]}); scaffolding it anyway.', file=sys.stderr)
        if kernels:
            own = find_launches(text, language_of(rel), rel, included_constants(text, Path(src_of[rel]), cfg.root, include_dirs=[cfg.path(d) for d in cfg.include_dirs]))
            units.append((kernels, rel, own + _macro_launches(Path(src_of[rel]), own, cfg, rel) + launches))
            print(f"wireup init: {rel}: {len(kernels)} kernel(s): {', '.join(k.contract_name or k.name for k in kernels)}.", file=sys.stderr)
    for src in empty:
        print(f'wireup init: "{src}" declares no __global__ function.', file=sys.stderr)
    if not units:
        return ExitCode.FINDINGS
    text = scaffold_sources(units, known_dims)  # one file, one [dims] table for every source
    if args.output and args.output != "-":  # "-": standard output, as without --output
        out = Path(args.output)
        if out.is_file() and not args.force:  # a device or FIFO (-o /dev/stdout) is written through
            raise UsageError(f'"{args.output}" exists; pass --force to overwrite it or choose another --output.')
        from ..output import write_output

        # the project's contracts folder (contracts/ of the walk-through) is created; a missing folder
        # anywhere else stays a usage error, as for every --output
        write_output(out, text, explicit=True, root=cfg.root, make_parents=_inside(out, cfg.contracts_dir, cfg.root))
        print(f"wireup init: wrote {args.output}; fill in every TODO, then run wireup check.", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return ExitCode.FINDINGS if empty else ExitCode.CLEAN


def _through_macros(path, text: str, found, cfg, src: str) -> list:
    """The kernels ``path`` declares through a macro (a ``#define`` of the file or of a local header it
    includes whose body declares a ``__global__`` function) and ``found`` lacks, read from nvcc's
    preprocessor output; where nvcc is missing or fails, a line says so and none are added."""
    from ..compile import find_nvcc
    from ..hashing import include_closure
    from ..scaffold import declares_macro_kernels, macro_kernels

    dirs = [cfg.path(d) for d in cfg.include_dirs]
    texts = [text]
    for header in include_closure(path, dirs)[1:]:
        try:
            texts.append(header.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    if not declares_macro_kernels(texts):
        return []
    nvcc = find_nvcc()
    if nvcc is None:
        print(f'wireup init: "{src}" declares kernels through a macro; nvcc (not found) expands them, so they are not scaffolded.', file=sys.stderr)
        return []
    kernels, why = macro_kernels(path, dirs, nvcc)
    if why:
        print(f'wireup init: "{src}" declares kernels through a macro, but {why}; they are not scaffolded.', file=sys.stderr)
    known = {k.name for k in found}
    new = [k for k in kernels if k.name not in known]
    if new:
        print(f'wireup init: {src}: {len(new)} kernel(s) declared through macros, read from nvcc -E (each at the line of its macro call).', file=sys.stderr)
    return new


def _macro_launches(path, sites: list, cfg, rel: str) -> list:
    """The launches ``path``'s macros make where ``sites`` has one whose kernel name a macro pastes together
    (LeetCUDA's ``elementwise_add_##packed_type##_kernel<<<grid, block>>>`` in ``#define TORCH_BINDING_...``):
    read from nvcc's preprocessor output, each with its own kernel name and geometry, at the line of the macro
    call that expands to it. None where no launch is pasted; a line says why where nvcc is missing or fails."""
    from ..launchers import macro_launches

    expanded, why = macro_launches(cfg, path, rel, sites)  # nothing where no launch is pasted
    if why:
        print(f'wireup init: "{rel}" launches kernels from macros, but {why}; their geometry is not read.', file=sys.stderr)
        return []
    if expanded:
        print(f"wireup init: {rel}: {len(expanded)} launch(es) made by macros, read from nvcc -E (each at the line of its macro call).", file=sys.stderr)
    return expanded


def _inside(path, folder, root) -> bool:
    """Whether ``path`` lies in ``folder`` and ``folder`` in ``root`` (through symbolic links)."""
    import os
    from pathlib import Path

    real, real_folder = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return real.is_relative_to(real_folder) and real_folder.is_relative_to(os.path.realpath(root))
