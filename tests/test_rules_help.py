"""``wireup rules ID``: a rule explained by its fixture pair, and the generated docs/rules.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.cli import main
from audit.rules import iter_rules
from audit.rules.examples import EXAMPLES, collect_examples, render_examples_json, render_rules_doc

REPO = Path(__file__).resolve().parents[1]


def test_packaged_examples_and_docs_are_fresh() -> None:
    examples = collect_examples(REPO / "tests" / "data" / "rules")
    hint = "run `python -m audit.rules.examples` and commit"
    assert EXAMPLES.read_text(encoding="utf-8") == render_examples_json(examples), hint
    assert (REPO / "docs" / "rules.md").read_text(encoding="utf-8") == render_rules_doc(examples), hint


def test_every_static_rule_has_an_example() -> None:
    examples = collect_examples(REPO / "tests" / "data" / "rules")
    static = {r.id for r in iter_rules() if r.category != "verify" and r.replaced_by is None}
    assert static == set(examples)
    for rule_id, ex in examples.items():
        assert ex["change"] and ex["findings"], rule_id


def test_rules_id_explains_the_rule_with_its_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "STORE_RACE"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("STORE_RACE (build, error)\n  A non-atomic global store")
    assert "-    if (blockIdx.x == 0 && threadIdx.x == 0) isv[slot] = (1.0f - alpha) * isv[slot] + alpha;" in out
    assert "+    isv[slot] = (1.0f - alpha) * isv[slot] + alpha;" in out
    assert "finds:\n  kernels/chain.cu:8: STORE_RACE Kernel \"make_label\"" in out
    assert out.endswith("More: docs/rules.md#store_race\n")


def test_unknown_rule_id_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "ABI_MISMACH"]) == 2
    assert capsys.readouterr().err.strip() == 'error: Unknown rule "ABI_MISMACH"; did you mean ABI_MISMATCH, ALIAS_MISMATCH, DOMAIN_MISMATCH?'
