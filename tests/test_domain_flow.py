"""Domains flow along the chain at run time (issue 16): a reader of a buffer is verified on the values the
buffer, or the kernel that writes it, declares, including the special values its own contract leaves out.

The fixture is a copy of the shipped project in which the trade-outcome backward's ``labels`` domain no
longer includes the out-of-range label 3 (the reader's contract as it stood before DOMAIN_MISMATCH), and
the label producer's output declares that it may emit 3. A backward that counts a label >= K as the last
class (where the loss and the reference skip it) passes when only the reader's own domain is drawn, and
fails once the producer's declaration reaches it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from audit.runtime import verify

REPO = Path(__file__).resolve().parents[1]
READER = '{ min = 0, max = "K - 1", include = [3] }, mask = { skip_value = -1, zeroes'
PRODUCER = '{ name = "labels", dtype = "i32", shape = ["B"], role = "out" }'


def _project(tmp_path: Path, producer_declares: bool) -> Path:
    root = tmp_path / "p"
    for part in ("contracts", "kernels"):
        shutil.copytree(REPO / part, root / part)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    t = root / "contracts" / "kernels" / "aux_trade_outcome.toml"
    text = t.read_text()
    assert READER in text
    t.write_text(text.replace(READER, '{ min = 0, max = "K - 1" }, mask = { skip_value = -1, zeroes'))
    if producer_declares:
        p = root / "contracts" / "kernels" / "label_producers.toml"
        text = p.read_text()
        assert PRODUCER in text
        p.write_text(text.replace(PRODUCER, PRODUCER[:-2] + ', values = { choices = [-1, 0, 1, 2, 3], weights = [0.9, 0.03, 0.03, 0.03, 0.01] } }'))
    return root


def counts_out_of_range_labels(launch):
    labels = launch.tensor("labels").astype(np.int64)
    k = int(launch.scalar("K"))
    launch.write_outputs(launch.run_reference(labels=np.where(labels >= k, k - 1, labels)))


def _run(root: Path):
    return verify(root, kernels=["aux_trade_outcome_backward"], emulated={"aux_trade_outcome_backward": counts_out_of_range_labels},
                  evidence=False, sizes=(37, 300))  # fmt: skip


@pytest.mark.parametrize("declares", [False, True], ids=["reader-only", "producer-declares-3"])
def test_a_value_the_producer_declares_reaches_every_reader(tmp_path, declares):
    out = _run(_project(tmp_path, declares))
    rules = {f.rule for f in out.result.findings if f.severity.value == "error"}
    notes = [n for r in out.run.results for n in r.notes]
    if not declares:
        assert rules == set(), [f.message for f in out.result.findings]  # the bug hides: no reader draws 3
        assert not any("also draws" in n for n in notes)
    else:
        assert "VERIFY_REFERENCE" in rules, [f.message for f in out.result.findings]
        assert 'input "labels" also draws 3: output "labels" of kernel "trade_outcome_label" declares it may hold them and the kernel\'s own domain leaves them out' in notes


def test_a_reader_without_a_domain_draws_the_producers(tmp_path):
    root = _project(tmp_path, True)
    t = root / "contracts" / "kernels" / "aux_trade_outcome.toml"
    t.write_text(t.read_text().replace('values = { min = 0, max = "K - 1" }, mask = { skip_value = -1, zeroes', 'mask = { skip_value = -1, zeroes'))
    out = _run(root)
    notes = [n for r in out.run.results for n in r.notes]
    assert 'input "labels" is drawn from the domain declared on output "labels" of kernel "trade_outcome_label" (the kernel\'s contract gives it none)' in notes
    assert "VERIFY_REFERENCE" in {f.rule for f in out.result.findings}
