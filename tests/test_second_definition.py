"""Two sources that each define a kernel of one name (two translation units; 3DGS's forward.cu and backward.cu
each define ``template <uint32_t C> __global__ void renderCUDA(...)`` and launch ``renderCUDA<NUM_CHANNELS>``):
`wireup init` scaffolded the first and skipped the second ("scaffolded from forward.cu; skipped here"), so the
backward kernel had no contract; with one for each, GEOMETRY_DRIFT compared every launch with both contracts.
Now the second definition gets its own contract (``render_bwd``) and a ``<<<>>>`` launch runs the contract its
own file defines or includes (docs/adopting.md, the sixteenth trial)."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.cli import main

FWD = """\
template <int C>
__global__ void render(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * C;
}
void run_fwd(const float* x, float* y, int n) {
    render<3><<<(n + 255) / 256, 256>>>(x, y, n);
}
"""

BWD = """\
template <int C>
__global__ void render(const float* dy, float* dx, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dx[i] = dy[i] * C;
}
void run_bwd(const float* dy, float* dx, int n) {
    render<3><<<(n + 127) / 128, BLOCK>>>(dy, dx, n);
}
"""


def _project(tmp_path: Path, block: str = "128") -> Path:
    (tmp_path / "wireup.toml").write_text("")
    (tmp_path / "fwd.cu").write_text(FWD)
    (tmp_path / "bwd.cu").write_text(BWD.replace("BLOCK", block))
    return tmp_path


def test_init_scaffolds_a_second_definition_under_its_own_name(tmp_path, capsys) -> None:
    root = _project(tmp_path)
    assert main(["init", "--root", str(root), str(root / "fwd.cu"), str(root / "bwd.cu")]) == 0
    captured = capsys.readouterr()
    assert 'wireup init: kernel "render" at bwd.cu:2 is another definition than fwd.cu:2\'s; scaffolded as "render_bwd".' in captured.err
    tables = captured.out.split("[[kernel]]")[1:]
    heads = [[line for line in t.splitlines() if line.startswith(("name =", "source =", "cpp_name =", "block ="))] for t in tables]
    assert heads == [
        ['name = "render"', 'source = "fwd.cu"', 'cpp_name = "render<3>"  # the instantiation launched at fwd.cu:7', "block = [256, 1, 1]  # from fwd.cu:7"],
        ['name = "render_bwd"', 'source = "bwd.cu"', 'cpp_name = "render<3>"  # the instantiation launched at bwd.cu:7', "block = [128, 1, 1]  # from bwd.cu:7"],
    ]


@pytest.mark.nvcc
@pytest.mark.parametrize("block, found", [
    ("128", []),
    ("64", ['bwd.cu:7: GEOMETRY_DRIFT Kernel "render_bwd" is launched here with block.x = "64" but its contract declares "128": the launch gives 64 and the contract 128; update the contract or the launch.']),
])  # fmt: skip
def test_each_launch_is_compared_with_the_contract_its_own_file_defines(tmp_path, capsys, block: str, found: list) -> None:
    root = _project(tmp_path)
    assert main(["init", "--root", str(root), str(root / "fwd.cu"), str(root / "bwd.cu"), "-o", str(root / "contracts" / "k.toml")]) == 0
    text = (root / "contracts" / "k.toml").read_text()
    text = text.replace('shape = ["TODO"]', 'shape = ["n"]').replace("  # TODO: out, inout or accumulate?", "")
    text = "\n".join(line.split("  # TODO")[0] if line.startswith("stage") else line for line in text.splitlines())
    (root / "contracts" / "k.toml").write_text(text)
    (root / "bwd.cu").write_text(BWD.replace("BLOCK", block))
    capsys.readouterr()
    main(["check", "--root", str(root), "--select", "GEOMETRY_DRIFT,UNAUDITED_KERNEL,NO_LAUNCHER"])
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if ": " in line and not line.startswith("wireup")] == found
