"""The kernel build: nvcc -> PTX -> ptxas -> cubin, cached by content, with per-entry ABI and resources.

``build_kernels`` compiles each distinct kernel source once and returns a :class:`BuildResult`; the
build rules (COMPILE_ERROR, ENTRY_MISSING, ABI_MISMATCH, LAUNCH_RESOURCES, REGISTER_SPILLS) read it
through the ``build`` fact (:func:`audit.compile.facts.build_facts`), ``wireup build`` prints it, and the
GPU runner loads the cubins it points at. :func:`code_hash` identifies the code of a cubin (debug
information and toolchain notes left out), the key GPU evidence is recorded under. See ``docs/build.md``.

>>> from audit.compile import build_kernels
>>> result = build_kernels(cfg, cs, arch="sm_90", jobs=2)          # doctest: +SKIP
>>> sb, entry = result.kernel(cs.kernel("aux_trunk_forward"))      # doctest: +SKIP
>>> entry.symbol, entry.registers, sb.cubin_size                   # doctest: +SKIP
('aux_trunk_forward', 79, 28760)
"""

from ._compile import build_kernels as build_kernels, committed_cache_files as committed_cache_files, effective_flags as effective_flags, ptx_entry_of as ptx_entry_of
from ._identity import CODE_HASH_VERSION as CODE_HASH_VERSION, NotACubin as NotACubin, code_hash as code_hash, code_size as code_size
from ._toolchain import NVCC_MISSING as NVCC_MISSING, find_nvcc as find_nvcc
from ._types import (
    BuildResult as BuildResult,
    Diagnostic as Diagnostic,
    EntryInfo as EntryInfo,
    PtxParam as PtxParam,
    SourceBuild as SourceBuild,
    builtin_spelling as builtin_spelling,
    normalize_cpp as normalize_cpp,
    overloads_of as overloads_of,
)
