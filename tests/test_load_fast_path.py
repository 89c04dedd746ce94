"""The loader's fast paths for plain tensor and scalar parameters, buffers and launch steps build exactly
what the checked path builds, and leave every table with a problem (or a mask, a value domain, a view, an
unusual value) to the checked path."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from audit import load
from audit.errors import ContractError

REPO = Path(__file__).resolve().parents[1]
FAST_PATHS = ("_plain_tensor_param", "_plain_scalar_param", "_plain_buffer", "_plain_step", "_plain_kernel")
FOLDERS = sorted({p.parent for p in REPO.glob("**/contracts/*.toml") if ".venv" not in p.parts and ".wireup-cache" not in p.parts})


def snapshot(folder: Path, root: Path, fast: bool, monkeypatch: pytest.MonkeyPatch, texts: dict[str, str] | None = None):
    """Everything the loader gives: the model (repr, every parameter's location) or its problems."""
    if not fast:
        for name in FAST_PATHS:
            monkeypatch.setattr(load, name, lambda *a: None)
    try:
        cs = load.load_contracts(folder, root, texts=texts)
    except ContractError as exc:
        out = ("problems", [p.render() for p in exc.problems])
    else:
        objs = [p for k in cs.kernels for p in (k, *k.params, *k.isv_reads)] + list(cs.buffers)
        objs += [x for s in cs.schedules for st in s.steps for x in (st, *(b for _, b in st.bind))]
        locs = [(type(o).__name__, o.loc.file, o.loc.key, o.loc.line) for o in objs]
        out = ("model", repr((cs.dims, cs.buffers, cs.kernels, cs.schedules, cs.invariants, cs.isv)), locs)
    monkeypatch.undo()
    return out


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_contract_folder_loads_the_same_with_and_without_the_fast_path(folder: Path, monkeypatch):
    root = folder.parent
    assert snapshot(folder, root, True, monkeypatch) == snapshot(folder, root, False, monkeypatch)


@pytest.mark.parametrize("name", FAST_PATHS)
def test_each_fast_path_is_taken_for_most_of_a_synthetic_project(name: str, tmp_path, monkeypatch):
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "synth_contracts.py"), "20", str(tmp_path / "p")],
                   check=True, capture_output=True)
    taken = []
    real = getattr(load, name)
    monkeypatch.setattr(load, name, lambda *a: taken.append(r := real(*a)) or r)
    load.load_contracts(tmp_path / "p" / "contracts", tmp_path / "p")
    assert taken and sum(r is not None for r in taken) > 0.5 * len(taken)


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


PARAM_VARIANTS += [
    'name = "n", kind = "scalar", dtype = "i32", value = "B"',
    'name = "n", kind = "scalar", dtype = "i32", value = 7',
    'name = "n", kind = "scalar", dtype = "i32", value = -7, doc = "minus"',
    'name = "n", kind = "scalar", dtype = "i32"',
    'name = "n", kind = "scalar", dtype = "i32", value = true',
    'name = "n", kind = "scalar", dtype = "i32", value = 1.0',
    'name = "n", kind = "scalar", dtype = "i32", value = 4611686018427387905',
    'name = "n", kind = "scalar", dtype = "f32", value = 2',
    'name = "n", kind = "scalar", dtype = "f32", value = "B * 2"',
    'name = "n", kind = "scalar", dtype = "i32", value = "slot(s)"',
    'name = "n", kind = "scalar", dtype = "i32", value = " isv(S)"',
    'name = "n", kind = "scalar", dtype = "i32", value = "isv(S"',
    'name = "n", kind = "scalar", dtype = "i32", value = "B +"',
    'name = "n", kind = "scalar", dtype = "i33", value = "B"',
    'name = "n", kind = "scalar", dtype = "i32", value = "B", doc = 2',
    'name = "n", kind = "scalar", dtype = "i32", value = "B", shape = ["B"]',
    'kind = "scalar", dtype = "i32", value = "B"',
    'name = 5, kind = "scalar", dtype = "i32", value = "B"',
    'name = "n", kind = "scalar", value = "B"',
    'name = "n", kind = "scalar", dtype = "i32", value = []',
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


BUFFER_VARIANTS = [
    'name = "b", dtype = "f32", shape = ["B", 4]',
    'name = "b", dtype = "f32", shape = ["B", 4], kind = "parameter", external = true, grad_of = "w", doc = "d"',
    'name = "b", dtype = "f32", shape = ["B", 4.0]',
    'name = "b", dtype = "f32", shape = ["B", false]',
    'name = "b", dtype = "f32", shape = ["slot(s)"]',
    'name = "b", dtype = "f32", shape = ["B +"]',
    'name = "b", dtype = "f32", shape = "B"',
    'name = "b", dtype = "f32"',
    'name = "b", dtype = "f32", shape = ["B"], kind = "weird"',
    'name = "b", dtype = "f32", shape = ["B"], kind = 1',
    'name = "b", dtype = "f32", shape = ["B"], external = "yes"',
    'name = "b", dtype = "f32", shape = ["B"], grad_of = 3',
    'name = "b", dtype = "f32", shape = ["B"], doc = []',
    'name = "b", dtype = "q8", shape = ["B"]',
    'name = "b", dtype = "f32", shape = ["B"], colour = "red"',
    'name = "b", dtype = "f32", shape = ["B"], values = { scale = 1.0 }',
    'dtype = "f32", shape = ["B"]',
    'name = "b", dtype = "f32", shape = [4611686018427387905]',
]

STEP_VARIANTS = [
    'launch = "k", bind = { x = "b" }',
    'launch = "k", bind = { x = "NULL" }',
    'launch = "k"',
    'launch = "k", bind = {}',
    'launch = "k", bind = { x = 3 }',
    'launch = "k", bind = { x = { buffer = "b", view = ["B"] } }',
    'launch = "k", bind = "x"',
    'launch = 3, bind = { x = "b" }',
    'zero = "b"',
    'launch = "k", zero = "b"',
    'bind = { x = "b" }',
    'launch = "k", bind = { x = "b" }, dims = { M = "B" }',
    'launch = "k", bind = { x = "b" }, args = { n = 3 }',
    'launch = "k", bind = { x = "b" }, colour = "red"',
]


@pytest.mark.parametrize("buffer", BUFFER_VARIANTS)
def test_each_buffer_variant_loads_alike(buffer: str, monkeypatch):
    texts = {"contracts/b.toml": f"buffer = [{{ {buffer} }}]\n\n[dims]\nB = {{ min = 1, max = 64 }}\n"}
    assert snapshot(REPO / "contracts", REPO, True, monkeypatch, texts) == snapshot(REPO / "contracts", REPO, False, monkeypatch, texts)


@pytest.mark.parametrize("step", STEP_VARIANTS)
def test_each_step_variant_loads_alike(step: str, monkeypatch):
    text = f'[dims]\nB = {{ min = 1, max = 64 }}\n\n[[schedule]]\nname = "s"\nstep = [{{ launch = "k" }}, {{ {step} }}]\n'
    texts = {"contracts/s.toml": text}
    assert snapshot(REPO / "contracts", REPO, True, monkeypatch, texts) == snapshot(REPO / "contracts", REPO, False, monkeypatch, texts)


KERNEL_VARIANTS = [
    'name = "k", source = "k.cu", stage = "forward", grid = ["ceil_div(B, 256)", 1, 1], block = [256, 1, 1], params = []',
    'name = "k", source = "k.cu", stage = "forward", grid = "B", block = 256, params = [], phase = "p", doc = "d", entry = "e"',
    'name = "k", source = "k.cu", stage = "forward", grid = ["B"], block = [32, 2], params = [], shared_bytes = "B * 4"',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], dims = ["M", "N"]',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], dims = "M"',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], isv_reads = ["S", "T"], isv_writes = ["U"]',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], isv_reads = "S"',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], isv_writes = "U"',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], isv_reads = [{ slot = "S", previous_step = true }]',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], entry = ""',
    'name = "", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [{ name = "x", dtype = "f32", shape = ["B"], role = "in", colour = "red" }]',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [{ name = "x", dtype = "f32", shape = ["B"], role = "sideways" }, { name = "n", kind = "scalar", dtype = "i32", value = "B" }]',
    'name = "k", source = "k.cu", stage = "forward", grid = [1.0, 1, 1], block = [32, 1, 1], params = []',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1, 1], block = [32, 1, 1], params = []',
    'name = "k", source = "k.cu", stage = "forward", grid = [], block = [32, 1, 1], params = []',
    'name = "k", source = "k.cu", stage = "forward", grid = [true, 1, 1], block = [32, 1, 1], params = []',
    'name = "k", source = "k.cu", stage = "forward", grid = ["slot(s)", 1, 1], block = [32, 1, 1], params = []',
    'name = "k", source = "k.cu", stage = "forward", block = [32, 1, 1], params = []',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1]',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = {}',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], param = []',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], param = [3]',
    'name = "k", source = "k.cu", stage = "sideways", grid = [1, 1, 1], block = [32, 1, 1], params = []',
    'name = "k", source = 3, stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = []',
    'name = 3, source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = []',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], phase = 2',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], doc = false',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], entry = 1',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], shared_bytes = 1.5',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], shared_bytes = "slot(s)"',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], dims = [1]',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], isv_writes = [1]',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], cpp_name = "ns::k"',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], requires = ["B <= 64"]',
    'name = "k", source = "k.cu", stage = "forward", grid = [1, 1, 1], block = [32, 1, 1], params = [], colour = "red"',
]


@pytest.mark.parametrize("kernel", KERNEL_VARIANTS)
def test_each_kernel_variant_loads_alike(kernel: str, monkeypatch):
    texts = {"contracts/k.toml": f"kernel = [{{ {kernel} }}]\n\n[dims]\nB = {{ min = 1, max = 64 }}\n"}
    assert snapshot(REPO / "contracts", REPO, True, monkeypatch, texts) == snapshot(REPO / "contracts", REPO, False, monkeypatch, texts)


def _findings(root: Path, fast: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The static check's JSON and text output on the project at ``root``, its model loaded with or without
    the fast paths (no parsed-file cache: every file is loaded by the path under test)."""
    from audit import api
    from audit.config import load_config
    from audit.printers import render

    if not fast:
        for name in FAST_PATHS:
            monkeypatch.setattr(load, name, lambda *a: None)
    cfg = load_config(root)
    cs = load.load_contracts(cfg.contracts_dir, cfg.root)
    monkeypatch.undo()
    result = api.run_check(root, select=["schema", "wiring", "isv", "invariants"], config=cfg, contracts=cs).result
    return render(result, "json"), render(result, "text")


def test_the_shipped_check_finds_the_same_with_and_without_the_fast_paths(monkeypatch):
    assert _findings(REPO, True, monkeypatch) == _findings(REPO, False, monkeypatch)


def test_a_synthetic_project_with_mistakes_finds_the_same_with_and_without_the_fast_paths(tmp_path, monkeypatch):
    root = tmp_path / "p"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "synth_contracts.py"), "30", str(root)], check=True, capture_output=True)
    module = root / "contracts" / "modules" / "m00001.toml"
    text = module.read_text(encoding="utf-8")
    text = text.replace('shape = ["B", "D"], role = "in"', 'shape = ["B", "H"], role = "in"', 1)  # a shape mismatch
    text = text.replace('kind = "scalar", dtype = "i32", value = "B"', 'kind = "scalar", dtype = "i32", value = "B * Q"', 1)  # an unknown dim
    module.write_text(text, encoding="utf-8")
    schedules = root / "contracts" / "schedules.toml"
    schedules.write_text(schedules.read_text(encoding="utf-8").replace('x = "m00002_x"', 'x = "m00002_nothing"', 1), encoding="utf-8")
    fast, slow = _findings(root, True, monkeypatch), _findings(root, False, monkeypatch)
    assert fast == slow
    rules = {f["rule"] for f in __import__("json").loads(fast[0])["findings"]}
    assert {"SHAPE_MISMATCH", "UNKNOWN_DIM", "UNKNOWN_BUFFER"} <= rules
