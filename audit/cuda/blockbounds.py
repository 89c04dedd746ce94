"""Reads and writes outside a kernel's buffers, found by running its block over the PTX
(OUT_OF_BOUNDS_ACCESS).

An off-by-one ``for (i = tid; i <= n; i += blockDim.x) y[i] = ...``, a tail block reading past the end of
a row when ``T`` is not a multiple of the block (``x[row * C + tid]`` with ``tid`` up to ``blockDim.x > C``),
``i <= C`` over an ``extern __shared__`` array of ``C`` floats: the thread touches memory that is not its
buffer's. On a GPU the access usually lands in another allocation (or in the block's own shared memory)
and nothing faults; ``wireup verify`` finds it with guard bands around every buffer. This finds it in the
PTX, on the CPU, before merge.

It is the same run as SHARED_BARRIER_MISSING (:mod:`audit.cuda.barriers`; the engine is
:mod:`audit.cuda.blocksim`): every thread of block ``(0, 0, 0)`` and of the grid's last block run over the
entry's PTX with concrete integers, at the same small valid launches (each runtime dim at its least value
and at 131 -- a prime, so a tile of any width leaves a tail -- clamped to its range, the kernel's
``requires`` met; where neither value of some dim is odd, a third launch at the largest prime in its range
up to 131; then the contract's verify bindings at the least sizes, and its verify cases of values up to
1024), and, for the bounds, up to two more
blocks of each launch: the first and last block of each path thread 0 takes that neither of those takes,
then the last block of block 0's path (one run of thread 0 of every block tells the paths apart; an empty
batch chunk in the middle of the grid is such a block). What it adds:

* **Pointer parameters are buffers.** Each non-optional tensor parameter and the ISV pointer gets a
  disjoint synthetic *global* region: its base is ``(2 i + 1) << 40`` for parameter ``i`` (non-null,
  aligned to anything a kernel tests, ``2^40`` bytes apart on both sides), its extent the contract's at
  the launch: ``numel(shape) * dtype size`` for a tensor (a view of a buffer, at an offset or not, has the
  parameter's element count: what the kernel is given), ``total_dim * 4`` bytes for the ISV. An extent
  that does not evaluate leaves that parameter unchecked. An ``optional`` parameter is ``NULL`` where its
  launch binds ``NULL`` or no schedule launches the kernel (its ``if (p)`` tests known); bound to a buffer
  it has no known address (not checked, and what runs under ``if (p)`` is stepped over). Pointer arithmetic keeps (region, offset) because an address
  is a plain 64-bit integer: ``add``, ``mad.wide``, ``cvta.to.global`` and generic addressing all carry it.
* **Global accesses are checked**: ``ld.global``/``ldu``/``st.global``/``atom.global``/``red.global``, a
  generic ``ld``/``st``/``atom`` at a global address, the global source of ``cp.async`` (only its
  ``src-size`` bytes: ``cp.async ... [dst], [src], 16, 0`` reads nothing; an ``ignore-src`` predicate that
  holds reads nothing) and of a non-tensor ``cp.async.bulk``. An access whose bytes are not all inside
  its region -- past the end, before the start, or straddling the end -- is a finding. A write of a
  parameter with a ``write_range`` outside that range (a padding column of ``[B, P]`` past ``V``) is one
  too: those elements belong to someone else.
* **Shared accesses are checked** in the same run: each static ``.shared`` array has its own synthetic
  region (``2^24`` bytes apart in the 32-bit shared window), so an index past its declared size is seen
  however far it runs, not only when it happens to leave the block's allocation; the dynamic (``extern``)
  region is checked against the contract's ``shared_bytes`` at the launch, and not at all where the
  contract gives none (SHARED_BYTES_MISSING's case) or it does not evaluate. ``cp.async`` destinations,
  ``ldmatrix``/``stmatrix`` rows (16 bytes at the address of each of lanes ``0 .. 8 * num - 1``) and ``wmma``
  tiles (rows x columns at ``stride`` elements, global or shared) count.
  *One rule, two memories*: the root cause and the fix are the same (an index past a bound), the run is
  the same, the message names the memory. SHARED_ARRAY_BOUNDS (the source-level check of thread-strided
  and constant-bound loops over constant-size shared arrays) explains its overruns with the loop that
  drives them; a shared overrun on a line it reports is left to it, not reported twice.
* **It goes on where the race analysis stops.** Bounds need no ordering: ``cp.async`` (a global read and
  a shared write), its ``commit``/``wait``, ``ldmatrix``, ``mbarrier``, ``wgmma``, ``fence``, named and
  partial barriers, ``bar.arrive``, ordered (``.acquire``/``.relaxed``) accesses and calls (whose callee's
  accesses are not seen, its results unknown) are run through. A branch on an unknown value around a
  barrier sends its threads to the post-dominator as any other (registers written on the way unknown);
  one around an exit, or an exit under an unknown condition, leaves the threads that may have exited
  running but *unsure*: their accesses are not reported. An indirect branch, a loop on a value loaded
  from shared or volatile memory or an atomic (a spin on a flag), and the step limit still stop the run;
  what was found before stands.

Only *definite* accesses are findings: made by a thread whose guard predicate is known to hold, at an
address known exactly (an index loaded from memory is unknown, and so is everything under a branch on
loaded data). Reported: the first per (line, buffer), with the thread and block, the element and the
extent, the dims, and whether it reads or writes.

>>> launch = BlockLaunch(((2, 131), (1, 1 << 40 | 1 << 41)), (256, 1, 1), (1, 1, 1), None, "n = 131",  # doctest: +SKIP
...                      ((1, "y", 524, 4, "shape [n], f32", None),))
>>> find_out_of_bounds(ptx, "affine", [launch])[0].message("affine", "kernels/affine.cu")          # doctest: +SKIP
'Kernel "affine" writes past the end of "y" (kernels/affine.cu:4, st.global.f32 [%rd6], %f3): ...'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .races import finding_place

#: a buffer of an entry's launch: (parameter position, name, extent in bytes or -1 where not known, element
#: bytes, what the message says of its extent, write range or None); a write range is (elements after one
#: index of its axis, the axis's length, start, stop, its text)
Buffer = tuple[int, str, int, int, str, "tuple[int, int, int, int, str] | None"]


def buffer_base(position: int) -> int:
    """The synthetic address of the buffer of parameter ``position``: apart from every other by 2^41,
    so that an offset of up to 2^40 bytes either way still names its buffer.

    >>> hex(buffer_base(0)), hex(buffer_base(2))
    ('0x10000000000', '0x50000000000')
    """
    return (2 * position + 1) << 40


@dataclass(frozen=True)
class OutOfBounds:
    """One access outside its buffer (or a write outside a parameter's write range). ``memory`` is
    ``"global"`` (a parameter's buffer), ``"range"`` (a write outside the parameter's ``write_range``),
    ``"shared"`` (a static shared array) or ``"dynamic"`` (the ``extern`` shared memory); ``access`` is
    ``"read"``, ``"write"`` or ``"atomic"``; ``start`` and ``width`` the access's first byte (from the
    buffer's start, negative before it) and size; ``element`` the buffer's element size in bytes (0 where
    not known: the message counts bytes)."""

    entry: str
    line: int | None  # in the kernel's own file (an inlined helper: where it is inlined)
    file_index: int | None
    origin: str | None  # "helper.cuh:12" where the access is inlined from another file
    instruction: str
    memory: str
    name: str  # the parameter, or the shared array's C name
    access: str
    start: int
    width: int
    extent: int  # bytes
    element: int
    threads: tuple[int, ...]  # threadIdx (x, y, z), then blockIdx (x, y, z)
    launch: str  # the dims: "n = 131"
    detail: str  # "shape [n], f32" / 'shared_bytes "C * 4"' / "axis 1 [0, V) = [0, 129), index 130"

    def element_text(self) -> str:
        """``y[131]``, ``y[130..133]`` (a vector access), or ``bytes 520..535 of "y"``."""
        size = self.element
        name = self.name
        if size and self.start % size == 0 and self.width % size == 0:
            first, last = self.start // size, (self.start + self.width) // size - 1
            return f"{name}[{first}]" if first == last else f"{name}[{first}..{last}]"
        return f'bytes {self.start}..{self.start + self.width - 1} of "{name}"'

    def message(self, kernel: str, source: str) -> str:
        """One sentence for the finding; ``source`` is the path shown for the kernel's file."""
        where = finding_place(source, self.line, self.origin)
        t = self.threads
        who = f"threadIdx ({t[0]}, {t[1]}, {t[2]}) of blockIdx ({t[3]}, {t[4]}, {t[5]})"
        verb = {"read": "reads", "write": "writes", "atomic": "atomically updates"}[self.access]
        element = self.element_text()
        if self.memory == "range":
            return (f'Kernel "{kernel}" {verb} "{self.name}" outside its write_range ({where}, {self.instruction}): at '
                    f"{self.launch}, {who} {verb} {element} ({self.detail}), an element the kernel must leave as it "
                    f"was; keep the write inside the range, or widen the contract's write_range.")
        place = ("before the start of" if self.start < 0 else "across the end of" if self.start < self.extent
                 else "past the end of")
        if self.memory == "global":
            target = f'"{self.name}"'
            count = self.extent // self.element if self.element and self.extent % self.element == 0 else None
            size = (f"{count} element{'s' if count != 1 else ''}" if count is not None
                    else f"{self.extent} byte{'s' if self.extent != 1 else ''}")
            holds = f'"{self.name}" holds {size} ({self.detail})'
            effect = ("so it reads another allocation's data, or faults" if self.access == "read"
                      else "so it corrupts another allocation, or faults")
            fix = "bound the index by the buffer's extent (or correct the contract's shape)"
        elif self.memory == "shared":
            target = f'shared array "{self.name}"'
            holds = f'"{self.name}" holds {self.extent} bytes'
            effect = "so it touches another shared array or leaves the block's allocation (memcheck sees nothing inside it)"
            fix = "bound the index by the array's size"
        else:
            target = f'dynamic shared memory ("{self.name}")'
            holds = f"the launch gives {self.extent} bytes of dynamic shared memory ({self.detail})"
            effect = "so it leaves the block's allocation or touches what lies after it"
            fix = "bound the index by what shared_bytes allocates (or allocate more)"
        return (f'Kernel "{kernel}" {verb} {place} {target} ({where}, {self.instruction}): at {self.launch}, {who} '
                f"{verb} {element}, but {holds}, {effect}; {fix}.")


@dataclass(frozen=True)
class BoundsAnalysis:
    """The out-of-bounds accesses of one entry at one launch, and whether the run reached every exit
    (``reason`` says why not)."""

    accesses: tuple[OutOfBounds, ...]
    complete: bool
    reason: str
    #: the stores two of its blocks made to one global element (BLOCK_WRITE_OVERLAP, :mod:`audit.cuda.blockwrites`)
    overlaps: tuple[Any, ...] = ()
    #: the PTX instructions (their index) of the accesses the run checked for some thread, and why each
    #: other access it met or stepped over went unchecked (:func:`audit.cuda.blocksim.block_findings` takes
    #: the launches together: one no launch checked is a gap of the analysis)
    ran: frozenset[int] = frozenset()
    unfollowed: tuple[tuple[int, str, int], ...] = ()  # (access, why, the branch that stepped over it or -1)
    decided: frozenset[int] = frozenset()  # the branches a run decided for every thread that met them
