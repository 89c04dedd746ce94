"""Mutation testing of the kernels: does ``wireup verify`` catch a kernel that is subtly wrong?

``wireup mutate`` makes systematic, deterministic source mutations of a kernel's own ``.cu`` file
(inside its entry function and the functions of that file it reaches), compiles each mutant, verifies it
on the GPU for that kernel only, and reports which checks caught it. A shared header's mutants (in the
header functions the kernels including it reach, :mod:`audit.mutate._headers`) are compiled into, and
judged against, every kernel that includes the header; a kernel whose entry is defined in an included
header is mutated there, as that header's unit (:func:`resolve_names`). A surviving mutant is a missing
check or an equivalent mutant; proven equivalents are recorded in ``equivalent.toml``. See
docs/mutation.md.

Public face: :func:`mutants_of_source` and :func:`plan_mutants` (generation, no GPU),
:func:`build_mutants` and :func:`build_only` (compilation), :func:`run_mutation` (everything), :func:`reclassify` (the
recorded results with the current equivalence records, no GPU), the results
(:class:`MutationRun`, :class:`KernelMutation`, :class:`MutantOutcome`) and their printers.

>>> from audit.mutate import OPERATORS
>>> len(OPERATORS)
11
"""

from ._build import MutantBuild as MutantBuild, build_mutants as build_mutants, normalized_ptx as normalized_ptx
from ._equivalent import EquivalenceRecord as EquivalenceRecord, load_records as load_records
from ._mutants import Mutant as Mutant, mutants_of_source as mutants_of_source, select_mutants as select_mutants
from ._operators import OPERATOR_MAP as OPERATOR_MAP, OPERATORS as OPERATORS, Operator as Operator
from ._render import kernel_json as kernel_json, render_list as render_list, render_table as render_table, write_kernel_json as write_kernel_json
from ._results import KernelMutation as KernelMutation, MutantOutcome as MutantOutcome, MutationRun as MutationRun
from ._reclassify import reclassify as reclassify, reclassify_exit_code as reclassify_exit_code, render_reclassified as render_reclassified
from ._headers import HeaderUnit as HeaderUnit, header_mutants as header_mutants, header_units as header_units, unit_named as unit_named
from ._run import MUTATE_SIZES as MUTATE_SIZES, build_only as build_only, empty_reasons as empty_reasons, resolve_names as resolve_names, journal_path as journal_path, mutated_headers as mutated_headers, plan_mutants as plan_mutants, run_mutation as run_mutation
from ._siblings import sibling_kernels as sibling_kernels
