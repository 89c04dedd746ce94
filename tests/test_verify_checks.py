"""The one catalogue of verify checks (audit/verify_checks.py): the verify rules are its entries, an
unknown check is an error, and the runtime names checks only through it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from audit.runtime import CheckRecord, SubjectResult
from audit.verify_checks import (
    ANCHORS, CHAIN, CHECKS, GRADCHECK, GUARDS, LAUNCH, REFERENCE, SANITIZER_CHECKS, UnknownCheck, check_for_rule, check_named,
)  # fmt: skip

AUDIT = Path(__file__).resolve().parents[1] / "audit"


def test_every_verify_rule_is_one_check_of_the_catalogue_with_its_purpose():
    from audit.rules import verify as verify_rules

    # the coverage rules (tail coverage, never compared) judge the run's coverage facts, not a check of a case
    checks = [r for r in verify_rules.rules() if r.id not in verify_rules.COVERAGE_RULES]
    assert [(r.id, r.purpose, r.category) for r in checks] == [(c.rule, c.purpose, "verify") for c in CHECKS]
    assert len({c.name for c in CHECKS}) == len({c.rule for c in CHECKS}) == len(CHECKS) == 23
    assert all(check_named(c.name) is c and check_for_rule(c.rule) is c for c in CHECKS)
    assert {t: c.rule for t, c in SANITIZER_CHECKS.items()} == {
        "memcheck": "SANITIZER_MEMCHECK", "racecheck": "SANITIZER_RACECHECK", "initcheck": "SANITIZER_INITCHECK", "synccheck": "SANITIZER_SYNCCHECK",
    }  # fmt: skip
    assert ANCHORS == {"kernel": (REFERENCE, GRADCHECK), "schedule": (CHAIN,)}


def test_an_unknown_check_is_an_error_not_a_reference_failure():
    with pytest.raises(UnknownCheck, match=r'^"refrence" is not a verify check; the checks are "reference", "written", "guards", '):
        check_named("refrence")
    with pytest.raises(UnknownCheck, match=r'^"VERIFY_NOTHING" is the rule of no verify check\.$'):
        check_for_rule("VERIFY_NOTHING")
    # a record with an unknown check cannot be made, neither here nor from a worker's JSON line
    with pytest.raises(UnknownCheck, match='"refrence" is not a verify check'):
        CheckRecord("refrence", "fail", "strided_gather", "kernel", "emulated")
    good = CheckRecord("guards", "fail", "strided_gather", "kernel", "emulated").to_dict()
    assert CheckRecord.from_dict(good).rule == "VERIFY_OUT_OF_BOUNDS"
    with pytest.raises(UnknownCheck):
        CheckRecord.from_dict({**good, "check": "no_such_check"})
    # results are recorded through catalogue entries only
    r = SubjectResult("strided_gather", "kernel", "emulated")
    assert r.add(GUARDS, "pass", "B=1").check == "guards"
    with pytest.raises(TypeError, match="takes a check of audit.verify_checks, not 'guards'"):
        r.add("guards", "pass", "B=1")  # type: ignore[arg-type]


def test_failure_sentences_keep_their_shape():
    assert GUARDS.failure("kernel", "k", "it wrote outside a buffer: x", at="B=37 (run A)") == (
        'Kernel "k" fails VERIFY_OUT_OF_BOUNDS at B=37 (run A): it wrote outside a buffer: x.'
    )
    assert LAUNCH.failure("schedule", "s", "launch k failed (CUDA_ERROR_X: y)") == 'Schedule "s" fails VERIFY_LAUNCH_ERROR: launch k failed (CUDA_ERROR_X: y).'


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module that is not a docstring, with its line (f-string parts too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_the_runtime_and_mutate_name_checks_and_their_rules_only_through_the_catalogue():
    names = {c.name for c in CHECKS}
    rules = {c.rule for c in CHECKS}
    found = []
    for path in sorted([*(AUDIT / "runtime").glob("*.py"), *(AUDIT / "mutate").glob("*.py"), AUDIT / "rules" / "verify.py"]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            # r.add("reference", ...), self.add(be.name, "guards", ...): a check named by a bare string
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add":
                for arg in node.args[:2]:
                    if isinstance(arg, ast.Constant) and arg.value in names:
                        found.append(f"{path.name}:{node.lineno} add({arg.value!r})")
        for line, text in _code_strings(path):
            if text in rules or any(f"fails {r}" in text for r in rules):
                found.append(f"{path.name}:{line} {text!r}")
    assert found == []


def test_the_catalogue_imports_nothing_of_the_runtime_nor_a_gpu_package():
    code = (
        "import sys, audit.verify_checks, audit.rules.verify\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('audit.runtime', 'audit.mutate', 'pycuda', 'cupy')))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=AUDIT.parent)
    assert out.stdout.strip() == "[]"
