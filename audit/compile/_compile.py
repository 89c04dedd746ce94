"""``build_kernels``: compile every kernel source once to PTX and a cubin, through a content cache.

Per distinct source the front end runs once (``nvcc -arch=<arch> -ptx``), then ``ptxas -arch=<arch>
-m64 -v`` assembles the cubin and reports registers, spills and shared memory per entry. A source not
named ``.cu`` (a header such as ``kernels.cuh`` that holds the kernels) is compiled as CUDA all the same
(``-x cu``). Sources compile in parallel (a thread pool; each job is a child process). Outputs live in
``<cache>/build/<arch>/<key>/`` where the key hashes the source's include closure (relative path and
bytes of the ``.cu`` file and every local header), the flags, the include folders, the configured
header packages (name, version and RECORD digest: :mod:`audit.compile._packages`), the nvcc version,
the architecture and this module's format version. An entry is written into a temporary folder and
renamed into place, so an interrupted build never leaves half an entry. A fully cached build starts no
process.

>>> result = build_kernels(cfg, cs, jobs=2)        # doctest: +SKIP
>>> result.compiled, result.cached                 # doctest: +SKIP
(11, 0)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EnvironmentProblem, UsageError
from ..hashing import files_hash, include_closure
from ..untrusted import resolve, source_refusal
from ._identity import NotACubin, code_hash, code_size
from ._packages import package_includes
from ._toolchain import NVCC_MISSING, find_demangler, find_nvcc, find_ptxas, nvcc_version, ptxas_options
from ._types import BuildResult, SourceBuild

if TYPE_CHECKING:
    from ..config import Config
    from ..model import ContractSet

BUILD_FORMAT = "wireup-build-3"  # bump when the cache layout, the parsers or the cubin bytes change
_ARCH = re.compile(r"sm_\d+[a-z]?")  # full match: "sm_90\n" is no architecture
_TIMEOUT_S = 900


def build_kernels(
    cfg: Config,
    cs: ContractSet,
    arch: str | None = None,
    jobs: int | None = None,
    force: bool = False,
    sources: Iterable[str] | None = None,
    source_overrides: Mapping[str, Path] | None = None,
    progress: Callable[[str], None] | None = None,
    on_compile: Callable[[int], None] | None = None,
) -> BuildResult:
    """Compile the kernel sources of ``cs`` (each distinct source once), using the build cache.

    ``sources`` restricts the build to the sources of the named kernels; ``source_overrides`` maps a
    kernel name to a replacement ``.cu`` compiled instead of the contract's source (same include folders,
    cached by its own content). ``progress`` receives one status line per source; ``on_compile`` the number
    of sources about to be compiled, once, before the first nvcc starts (not called when all are cached). Kernels whose source
    does not exist or lies outside the project root are skipped (the schema rules report them).
    Raises :class:`~audit.errors.EnvironmentProblem` where nvcc is missing.

    >>> r = build_kernels(cfg, cs, sources=["strided_gather"])      # doctest: +SKIP
    >>> list(r.sources)                                             # doctest: +SKIP
    ['kernels/strided_gather_kernel.cu']
    """
    started = time.perf_counter()
    arch = arch or cfg.arch
    if not _ARCH.fullmatch(arch):
        raise UsageError(f'Architecture "{arch}" is not a CUDA SM architecture; expected sm_<number>, e.g. "sm_90".')
    root = cs.root.resolve()
    kernels = _select(cs, sources)
    overrides = _overrides(cs, source_overrides)
    units: dict[str, Path] = {}  # key in result.sources -> file to compile
    own_folders: dict[str, Path] = {}  # an override's key -> the folder of the source it replaces
    for k in kernels:
        if k.name in overrides:
            units.setdefault(overrides[k.name][0], overrides[k.name][1])
            original = resolve(root / k.source)
            if original is not None:
                own_folders.setdefault(overrides[k.name][0], original.parent)
            continue
        if k.source in units:
            continue  # the entries of one source share its unit (and its checks below)
        path = resolve(root / k.source)
        # a source whose include closure is unsafe (a FIFO, /dev/zero, a computed include, a link loop)
        # is not given to nvcc, which would block on it; SOURCE_UNSAFE reports it
        if path is None:
            continue
        if path.is_file() and _inside(path, root) and source_refusal(path, [cfg.path(d) for d in cfg.include_dirs], root) is None:
            units.setdefault(k.source, path)

    nvcc = find_nvcc()
    if nvcc is None:
        raise EnvironmentProblem(NVCC_MISSING)
    cache_arch = cfg.path(cfg.cache) / "build" / arch
    if not force and committed_cache_files(cfg.path(cfg.cache), root):
        # entries a commit brought in are the project's word, not a build's: rebuild and replace them
        force = True
    version = nvcc_version(nvcc, cache_arch.parent)
    flags = effective_flags(cfg)
    include_dirs = [cfg.path(d) for d in cfg.include_dirs]
    include_args = [_relative_or_absolute(d, root) for d in include_dirs]
    packages = package_includes(cfg)
    extra = [BUILD_FORMAT, f"arch={arch}", f"nvcc={version}"]
    extra += [f"flag={f}" for f in flags] + [f"include={d}" for d in include_args] + [p.key() for p in packages]

    lock = threading.Lock()

    def report(line: str) -> None:
        if progress is not None:
            with lock:
                progress(line)

    built: dict[str, SourceBuild] = {}
    todo: list[tuple[str, Path, str, list[str]]] = []
    known = {resolve(d) or d for d in include_dirs}
    for name, path in units.items():
        t0 = time.perf_counter()
        # a replacement compiled from another folder (a mutant, its unmutated copy) still finds the headers
        # next to the source it replaces: that folder is searched after the include folders
        own = own_folders.get(name)
        more = [own] if own is not None and own not in known and own != path.parent else []
        more_args = [_relative_or_absolute(d, root) for d in more]
        key = files_hash(include_closure(path, [*include_dirs, *more]), root, extra + [f"include={d}" for d in more_args] + _language(path))
        hit = None if force else _load_entry(cache_arch / key, name)
        if hit is not None:
            hit.seconds = time.perf_counter() - t0
            built[name] = hit
            report(f"cached    {name}  {hit.seconds:.2f} s")
        else:
            todo.append((name, path, key, more_args))

    if todo:
        if on_compile is not None:
            on_compile(len(todo))
        tools = _Tools(nvcc, find_ptxas(nvcc), find_demangler(nvcc))
        job = _Job(tools, arch, flags, include_args, root, cache_arch, force, [str(p.folder) for p in packages])
        workers = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
        if workers == 1:
            for name, path, key, more_args in todo:
                built[name] = job.run(name, path, key, more_args)
                report(_status_line(built[name]))
        else:
            from concurrent.futures import ThreadPoolExecutor, as_completed

            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nvcc") as pool:
                futures = {pool.submit(job.run, name, path, key, more_args): name for name, path, key, more_args in todo}
                for fut in as_completed(futures):
                    sb = fut.result()
                    built[futures[fut]] = sb
                    report(_status_line(sb))

    ordered = {name: built[name] for name in units}
    return BuildResult(
        sources=ordered,
        arch=arch,
        flags=flags,
        nvcc_version=version,
        include_dirs=include_args,
        packages={p.distribution: p.version for p in packages},
        overrides={k: v[0] for k, v in overrides.items()},
        seconds=time.perf_counter() - started,
    )


def effective_flags(cfg: Config) -> list[str]:
    """``cfg.nvcc_flags`` plus ``-std=c++17`` unless the flags already choose a standard.

    >>> from audit.config import Config
    >>> effective_flags(Config(root=Path(".")))
    ['-O3', '-lineinfo', '-std=c++17']
    """
    flags = list(cfg.nvcc_flags)
    if not any(f.startswith(("-std", "--std")) for f in flags):
        flags.append("-std=c++17")
    return flags


def _status_line(sb: SourceBuild) -> str:
    verb = "compiled " if sb.ok else "FAILED   "
    return f"{verb} {sb.source}  {sb.seconds:.2f} s"


def _select(cs: ContractSet, names: Iterable[str] | None):
    if names is None:
        return list(cs.kernels)
    names = list(names)
    unknown = [n for n in names if n not in cs.kernel_map]
    if unknown:
        valid = ", ".join(f'"{k}"' for k in sorted(cs.kernel_map))
        raise UsageError(f'Unknown kernel "{unknown[0]}"; the contracts declare {valid}.')
    return [cs.kernel_map[n] for n in dict.fromkeys(names)]


def _overrides(cs: ContractSet, given: Mapping[str, Path] | None) -> dict[str, tuple[str, Path]]:
    out: dict[str, tuple[str, Path]] = {}
    for name, path in (given or {}).items():
        if name not in cs.kernel_map:
            valid = ", ".join(f'"{k}"' for k in sorted(cs.kernel_map))
            raise UsageError(f'A source override names kernel "{name}", which the contracts do not declare; they declare {valid}.')
        p = Path(path)
        if not p.is_file():
            raise UsageError(f'The source override for kernel "{name}" is "{p}", which does not exist.')
        out[name] = (str(path), p.resolve())
    return out


_PRAGMA_ONCE = "#pragma once in main file"


def _language(path: Path) -> list[str]:
    """The cache key's part for how nvcc is told the source's language: ``-x cu`` for a source not named
    ``.cu`` (nothing for a ``.cu``, so those keys stay as they were).

    >>> _language(Path("kernels/gemm.cuh")), _language(Path("kernels/gemm.cu"))
    (['language=cu'], [])
    """
    return [] if path.suffix == ".cu" else ["language=cu"]


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _relative_or_absolute(path: Path, root: Path) -> str:
    """Paths inside the root are passed relative (nvcc runs in the root), so diagnostics read
    ``kernels/x.cu(42)`` rather than an absolute path that differs between checkouts."""
    real = path.resolve()
    return real.relative_to(root).as_posix() if _inside(real, root) else str(real)


# -- the cache --------------------------------------------------------------------------------------------


def _load_entry(folder: Path, source: str) -> SourceBuild | None:
    """A complete cache entry, or None (missing, from another format, or damaged)."""
    try:
        meta = json.loads((folder / "build.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("format") != BUILD_FORMAT:
        return None
    try:
        sb = SourceBuild.from_meta(meta, folder, source)
    except (KeyError, TypeError, ValueError):
        return None
    if sb.ok and (sb.cubin is None or not _has_size(sb.cubin, sb.cubin_size)):
        return None
    return sb


def committed_cache_files(cache: Path, root: Path) -> bool:
    """Whether git tracks any file under ``cache`` in the repository holding ``root``.

    The cache is trusted because wireup wrote it; a pull request that commits a cache entry (a cubin and
    a build.json claiming a clean build, under the key its sources hash to) would otherwise pass the
    build rules without nvcc ever seeing the source. The git index lists tracked paths as plain bytes
    (index versions 2 and 3), so this reads it rather than start a process: a cached build starts none.
    """
    try:
        real = cache.resolve()
        real.relative_to(root)
    except (ValueError, OSError, RuntimeError):
        return False  # outside the root: the user's own folder (WIREUP_CACHE)
    top, index = _git_index(root)
    if index is None:
        return False
    try:
        rel = real.relative_to(top).as_posix()
        with index.open("rb") as fh:
            head = fh.read(8)
            if head[:4] != b"DIRC" or index.stat().st_size > 256 << 20:
                return False
            version = int.from_bytes(head[4:8], "big")
            data = fh.read()
    except (OSError, ValueError):
        return False
    if version >= 4:  # paths are prefix-compressed: ask git
        from ..errors import EnvironmentProblem
        from ..git import run_git

        try:
            out = run_git(top, "ls-files", "-z", "--", f":(literal){rel}")
        except EnvironmentProblem:
            return False
        return out.returncode == 0 and bool(out.stdout)
    return (rel.encode() + b"/") in data


def _git_index(root: Path) -> tuple[Path, Path | None]:
    """(top folder, index file) of the git work tree holding ``root``; (root, None) outside one."""
    for d in (root, *root.parents):
        dot = d / ".git"
        if dot.is_dir():
            return d, dot / "index" if (dot / "index").is_file() else None
        if dot.is_file():  # a linked work tree or submodule: "gitdir: <path>"
            try:
                line = dot.read_text(errors="replace").strip()
            except OSError:
                return d, None
            if line.startswith("gitdir:"):
                gitdir = (d / line[7:].strip()).resolve()
                return d, gitdir / "index" if (gitdir / "index").is_file() else None
            return d, None
    return root, None


def _has_size(path: Path, size: int | None) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False


class _Tools:
    def __init__(self, nvcc: Path, ptxas: Path, demangler: Path | None):
        self.nvcc, self.ptxas, self.demangler = nvcc, ptxas, demangler


class _Job:
    """Compiles one source into a fresh temporary folder and renames it into the cache."""

    def __init__(
        self, tools: _Tools, arch: str, flags: list[str], includes: list[str], root: Path, cache: Path, force: bool, system: list[str] | None = None
    ):
        self.tools, self.arch, self.flags, self.includes, self.system = tools, arch, flags, includes, system or []
        self.root, self.cache, self.force = root, cache, force
        self.ptxas_flags = ptxas_options(flags)

    def run(self, name: str, path: Path, key: str, more_includes: Sequence[str] = ()) -> SourceBuild:
        import shutil
        import tempfile

        from ._parse import normalize_ptx_files, parse_diagnostics, parse_ptx_entries, parse_ptxas_resources

        t0 = time.perf_counter()
        try:
            self.cache.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=self.cache))
        except OSError as exc:
            raise EnvironmentProblem(
                f'The build cache "{self.cache}" cannot be written ({exc.strerror}); set "cache" in wireup.toml to a writable folder.'
            ) from None
        try:
            stem = re.sub(r"[^\w.-]", "_", path.stem) or "module"
            ptx, cubin = tmp / f"{stem}.ptx", tmp / f"{stem}.cubin"
            src_arg = _relative_or_absolute(path, self.root)
            front = [str(self.tools.nvcc), f"-arch={self.arch}", "-ptx", *self.flags]
            front += [f"-I{d}" for d in (*self.includes, *more_includes)] + [a for d in self.system for a in ("-isystem", d)]
            front += ["-x", "cu"] if _language(path) else []  # nvcc picks the language by suffix: a .cuh is "unknown"
            front += [src_arg, "-o", str(ptx)]
            # cicc names internal-linkage symbols "_INTERNAL_<hash of the absolute source path>_...", so
            # the same source would give different cubins in two checkouts; naming the source by its
            # relative path keeps cubin hashes (and the evidence keyed by them) portable. The option is
            # cicc's own, not nvcc's: a toolkit that rejects it builds without it.
            rc, log = _run([*front, "-Xcicc", f"--orig_src_path_name={src_arg}"], self.root)
            if rc != 0 and "orig_src_path_name" in log:
                rc, log = _run(front, self.root)
            entries = {}
            resources: dict = {}
            if rc == 0:
                text = ptx.read_text()
                fixed = normalize_ptx_files(text, [str(self.root), os.path.realpath(self.root)])
                if fixed != text:
                    ptx.write_text(fixed)
                entries = parse_ptx_entries(fixed)
                back = [str(self.tools.ptxas), f"-arch={self.arch}", "-m64", "-v", *self.ptxas_flags, str(ptx), "-o", str(cubin)]
                rc, log2 = _run(back, self.root)
                # ptxas names its input by the temporary path; the cache folder is named by the key
                log += log2.replace(str(ptx), f"{stem}.ptx")
                resources = parse_ptxas_resources(log2)
            ok = rc == 0 and cubin.is_file()
            diagnostics = parse_diagnostics(log, self.root, name)
            if _language(path):  # the host compiler sees the header as the main file; that is our doing
                diagnostics = [d for d in diagnostics if _PRAGMA_ONCE not in d.message]
            entries = self._finish_entries(entries, resources)
            data = cubin.read_bytes() if ok else None
            code = size = None
            if data is not None:
                try:
                    code, size = code_hash(data), code_size(data)
                except NotACubin as exc:
                    ok, data = False, None
                    log += f"ptxas wrote {cubin.name}, which is not a cubin ({exc}).\n"
            sb = SourceBuild(
                source=name,
                ok=ok,
                cubin=cubin if ok else None,
                ptx=ptx if ptx.is_file() else None,
                log=log,
                diagnostics=diagnostics,
                entries=entries,
                cached=False,
                key=key,
                cubin_sha256=hashlib.sha256(data).hexdigest() if data is not None else None,
                cubin_size=len(data) if data is not None else None,
                code_sha256=code,
                code_size=size,
            )
            # a failure with no located diagnostic (a crash, a timeout, a missing host compiler) may
            # not repeat: it is reported but not cached
            cacheable = ok or any(d.file and d.line for d in diagnostics)
            if cacheable:
                meta = sb.to_meta()
                meta["format"] = BUILD_FORMAT
                (tmp / "build.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
                final = self._publish(tmp, self.cache / key)
                sb.cubin = final / cubin.name if ok else None
                sb.ptx = final / ptx.name if sb.ptx else None
            else:
                sb.ptx = sb.cubin = None
                shutil.rmtree(tmp, ignore_errors=True)
            sb.seconds = time.perf_counter() - t0
            return sb
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _finish_entries(self, entries: dict, resources: dict) -> dict:
        from dataclasses import replace

        mangled = [s for s in entries if s.startswith("_Z")]
        names = _demangle(self.tools.demangler, mangled) if mangled else {}
        out = {}
        for symbol in sorted(entries):
            r = resources.get(symbol, {})
            out[symbol] = replace(
                entries[symbol],
                demangled=names.get(symbol),
                registers=r.get("registers"),
                spill_stores=r.get("spill_stores") or 0,
                spill_loads=r.get("spill_loads") or 0,
                stack_frame=r.get("stack_frame") or 0,
                shared_static_bytes=r.get("shared_static_bytes") or 0,
                const_bytes=r.get("const_bytes"),
            )
        return out

    def _publish(self, tmp: Path, final: Path) -> Path:
        """Rename the finished folder into place; a concurrent build of the same key may have won."""
        import shutil
        import tempfile

        if final.exists() and (self.force or _load_entry(final, "") is None):
            trash = Path(tempfile.mkdtemp(prefix=".old-", dir=self.cache))
            try:
                os.replace(final, trash / "entry")
            except OSError:
                pass
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "build.json").is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # same key, same content: keep the winner
        return final


def _run(cmd: list[str], cwd: Path) -> tuple[int, str]:
    import subprocess

    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace", timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 124, f"{Path(cmd[0]).name} did not finish within {_TIMEOUT_S} s.\n"
    except OSError as exc:
        raise EnvironmentProblem(f"{cmd[0]} could not be started ({exc.strerror}); check the CUDA toolkit installation.") from None
    return proc.returncode, proc.stdout + proc.stderr


def _demangle(tool: Path | None, symbols: list[str]) -> dict[str, str]:
    """Mangled symbol -> C++ signature; empty where no demangler is installed."""
    if tool is None:
        return {}
    import subprocess

    try:
        proc = subprocess.run([str(tool), *symbols], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != len(symbols):
        return {}
    return {s: d.strip() for s, d in zip(symbols, lines) if d.strip() and d.strip() != s}


def ptx_entry_of(ptx: str, symbol: str, cpp_name: str | None, params: Sequence[Any] | None = None) -> str | None:
    """The symbol of the entry a kernel names in the PTX module ``ptx``: ``symbol`` where the module has
    it, else the entry its ``cpp_name`` names (the module's mangled entries demangled with the toolkit's
    demangler, as the build does); None where neither is found."""
    import dataclasses

    from ._parse import parse_ptx_entries
    from ._toolchain import find_demangler, find_nvcc
    from ._types import match_cpp_name

    entries = parse_ptx_entries(ptx)
    if symbol in entries or not cpp_name:
        return symbol if symbol in entries else None
    mangled = [e for e in entries if e.startswith("_Z")]
    nvcc = find_nvcc()
    names = _demangle(find_demangler(nvcc) if nvcc is not None else None, mangled) if mangled else {}
    found = match_cpp_name({s: dataclasses.replace(e, demangled=names.get(s)) for s, e in entries.items()}, cpp_name, params)
    return found.symbol if found is not None else None
