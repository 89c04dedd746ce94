"""The loader's fast path for plain tensor parameters builds exactly what the checked path builds, and
leaves every parameter with a problem (or a mask, a value domain, an unusual value) to the checked path."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from audit import load
from audit.errors import ContractError

REPO = Path(__file__).resolve().parents[1]
FOLDERS = sorted({p.parent for p in REPO.glob("**/contracts/*.toml") if ".venv" not in p.parts and ".wireup-cache" not in p.parts})


def snapshot(folder: Path, root: Path, fast: bool, monkeypatch: pytest.MonkeyPatch, texts: dict[str, str] | None = None):
    """Everything the loader gives: the model (repr, every parameter's location) or its problems."""
    if not fast:
        monkeypatch.setattr(load, "_plain_tensor_param", lambda t, loc: None)
    try:
        cs = load.load_contracts(folder, root, texts=texts)
    except ContractError as exc:
        out = ("problems", [p.render() for p in exc.problems])
    else:
        locs = [(p.loc.file, p.loc.key, p.loc.line) for k in cs.kernels for p in k.params]
        out = ("model", repr((cs.dims, cs.buffers, cs.kernels, cs.schedules, cs.invariants, cs.isv)), locs)
    monkeypatch.undo()
    return out


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_contract_folder_loads_the_same_with_and_without_the_fast_path(folder: Path, monkeypatch):
    root = folder.parent
    assert snapshot(folder, root, True, monkeypatch) == snapshot(folder, root, False, monkeypatch)


def test_the_fast_path_is_taken_for_plain_tensor_parameters(monkeypatch):
    taken = []
    real = load._plain_tensor_param
    monkeypatch.setattr(load, "_plain_tensor_param", lambda t, loc: taken.append(r := real(t, loc)) or r)
    load.load_contracts(REPO / "contracts", REPO)
    assert sum(r is not None for r in taken) > 0.5 * len(taken)


PARAM_VARIANTS = [
    'name = "x", dtype = "f32", shape = ["B", 4], role = "in"',
    'name = "x", kind = "tensor", dtype = "f32", shape = ["B", 4.0], role = "in"',
    'name = "x", dtype = "f32", shape = ["B", true], role = "in"',
    'name = "x", dtype = "f33", shape = ["B"], role = "in"',
    'name = "x", dtype = "f32", shape = ["B"], role = "sideways"',
    'name = "x", dtype = "f32", shape = "B", role = "in"',
    'name = "x", dtype = "f32", shape = ["slot(s)"], role = "in"',
    'name = "x", dtype = "f32", shape = ["B +"], role = "in"',
    'name = "x", dtype = "f32", shape = [], role = "in"',
    'name = "", dtype = "f32", shape = ["B"], role = "in"',
    'name = 3, dtype = "f32", shape = ["B"], role = "in"',
    'name = "x", dtype = "f32", shape = ["B"], role = "in", saved = 1',
    'name = "x", dtype = "f32", shape = ["B"], role = "in", saved = true, optional = true, partial_of = "w", doc = "d"',
    'name = "x", dtype = "f32", shape = ["B"], role = "in", partial_of = 4',
    'name = "x", dtype = "f32", shape = ["B"], role = "in", doc = 1',
    'name = "x", dtype = "f32", shape = ["B"], role = "in", colour = "red"',
    'name = "x", kind = "scalar", dtype = "f32", value = 1.5',
    'name = "x", kind = "isv"',
    'name = "x", kind = "other", dtype = "f32", shape = ["B"], role = "in"',
    'name = "x", dtype = "i32", shape = ["B"], role = "in", mask = { skip_value = -1 }',
    'name = "x", dtype = "f32", shape = ["B"], role = "in", values = { min = 0.0, max = 1.0 }',
    'dtype = "f32", shape = ["B"], role = "in"',
]


@pytest.mark.parametrize("param", PARAM_VARIANTS)
def test_each_parameter_variant_loads_alike(param: str, monkeypatch):
    text = ('[dims]\nB = { min = 1, max = 64 }\n\n[[kernel]]\nname = "k"\nsource = "k.cu"\n'
            'stage = "forward"\ngrid = [1, 1, 1]\nblock = [32, 1, 1]\n'
            f"params = [\n  {{ {param} }},\n]\n")
    texts = {"contracts/k.toml": text}
    assert snapshot(REPO / "contracts", REPO, True, monkeypatch, texts) == snapshot(REPO / "contracts", REPO, False, monkeypatch, texts)


def test_a_synthetic_project_loads_alike(tmp_path, monkeypatch):
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "synth_contracts.py"), "100", str(tmp_path / "p")],
                   check=True, capture_output=True)
    folder = tmp_path / "p" / "contracts"
    assert snapshot(folder, tmp_path / "p", True, monkeypatch) == snapshot(folder, tmp_path / "p", False, monkeypatch)
