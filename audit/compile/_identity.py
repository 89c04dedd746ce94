"""The *code hash* of a cubin: what the GPU runs, without what only a debugger reads.

Two cubins built from the same source with the same flags, toolkit and architecture can differ in bytes
that never reach the GPU's instruction stream: the ``-lineinfo`` line table names the toolkit's header
folder and each source file's modification time, and every offset after it in the file shifts with
their lengths. GPU evidence must survive a clone at another path (and a checkout at another time), so it
is keyed by a hash over the parts of the ELF image that define the loaded code, each section taken by
name rather than by file offset:

- the ELF header's type, machine, ABI and flags (the SM architecture lives in ``e_flags``);
- each program header's type, flags, sizes and alignment (not its file offset);
- every section's name, type, flags, address, link, info, alignment, entry size and bytes -- the SASS
  (``.text.<kernel>``), the kernel attributes (``.nv.info.*``: parameters, registers, stack, barriers),
  constant banks, shared and local memory, symbols, relocations of the code;

and, for the sections that only describe the code for tools, nothing but their name and type:
``.debug_*``, ``.nv_debug_*`` (line tables, the embedded PTX text, frame info), the relocations that
patch them, and ``.note.nv.tkinfo`` (the assembler's version and command line, recorded apart as the
nvcc version and the flags).

>>> code_hash(Path("kernels/x.cubin").read_bytes())     # doctest: +SKIP
'5c0e...'
"""

from __future__ import annotations

import hashlib
import struct

CODE_HASH_VERSION = "wireup-code-1"  # bump when what the hash covers changes: records name it

_DESCRIPTIVE_PREFIXES = (".debug_", ".nv_debug_", ".rel.debug_", ".rela.debug_", ".rel.nv_debug_", ".rela.nv_debug_")
_DESCRIPTIVE_NAMES = frozenset({".note.nv.tkinfo", ".rel.note.nv.tkinfo", ".rela.note.nv.tkinfo"})
_SHT_NOBITS = 8


class NotACubin(ValueError):
    """The bytes are not a 64-bit little-endian ELF image (not something ptxas wrote)."""


def is_descriptive(section: str) -> bool:
    """Whether a section only describes the code (debug information, toolchain notes).

    >>> is_descriptive(".debug_line"), is_descriptive(".nv_debug_ptx_txt"), is_descriptive(".text.k")
    (True, True, False)
    """
    return section.startswith(_DESCRIPTIVE_PREFIXES) or section in _DESCRIPTIVE_NAMES


def code_hash(data: bytes) -> str:
    """sha256 over the canonical form of the code in a cubin (see the module docstring).

    Raises :class:`NotACubin` for bytes that are not a 64-bit little-endian ELF image.
    """
    h = hashlib.sha256(CODE_HASH_VERSION.encode() + b"\0")
    for part in _canonical_parts(data):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def code_size(data: bytes) -> int:
    """Bytes of the sections the code hash takes whole (the SASS, kernel attributes, constants, symbols and
    relocations of the code; not the debug sections, the toolchain note or memory that has no bytes in the
    file): the size of what the GPU loads, the same in every checkout, unlike the file's size, which
    follows the length of the source paths in the line tables.

    Raises :class:`NotACubin` for bytes that are not a 64-bit little-endian ELF image.
    """
    total = 0
    for part in _canonical_parts(data):
        if part.startswith(b"section\0"):
            name_end = part.index(b"\0", 8)
            sh_type, _flags, _addr, _link, _info, _align, _entsize, sh_size = struct.unpack_from("<IQQIIQQQ", part, name_end + 1)
            if sh_type != _SHT_NOBITS:
                total += sh_size
    return total


def _canonical_parts(data: bytes):
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise NotACubin("not a 64-bit little-endian ELF image")
    try:
        (e_type, e_machine, e_version, _entry, e_phoff, e_shoff, e_flags, _ehsize,
         e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", data, 16)  # fmt: skip
        yield b"elf" + data[7:9] + struct.pack("<HHII", e_type, e_machine, e_version, e_flags)
        for i in range(e_phnum):
            p_type, p_flags, _off, p_vaddr, p_paddr, p_filesz, p_memsz, p_align = struct.unpack_from(
                "<IIQQQQQQ", data, e_phoff + i * e_phentsize
            )
            yield b"phdr" + struct.pack("<IIQQQQQ", p_type, p_flags, p_vaddr, p_paddr, p_filesz, p_memsz, p_align)
        headers = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
        names_at = headers[e_shstrndx][4] if e_shnum else 0
        names = [_cstring(data, names_at + h[0]) for h in headers]
    except struct.error:
        raise NotACubin("a truncated ELF image") from None
    for name, (_n, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info, sh_align, sh_entsize) in zip(names, headers):
        if is_descriptive(name.decode("latin-1")):
            yield b"section-described-only\0" + name + struct.pack("<I", sh_type)
            continue
        head = struct.pack("<IQQIIQQQ", sh_type, sh_flags, sh_addr, sh_link, sh_info, sh_align, sh_entsize, sh_size)
        body = b"" if sh_type == _SHT_NOBITS else data[sh_offset : sh_offset + sh_size]
        if len(body) != (0 if sh_type == _SHT_NOBITS else sh_size):
            raise NotACubin("a truncated ELF image")
        yield b"section\0" + name + b"\0" + head + body


def _cstring(data: bytes, at: int) -> bytes:
    end = data.find(b"\0", at)
    if end < 0:
        raise NotACubin("a section name without its terminating NUL")
    return data[at:end]
