"""The code identity GPU evidence is keyed by: the same code wherever and whenever it was built.

``tests/data/build/cubins/`` holds three cubins of ``kernels/strided_gather_kernel.cu``, built with the same
nvcc 13.0.88 and flags (``-O3 -lineinfo -std=c++17``, sm_90) by the build before evidence format 2:
``checkout_a`` and ``checkout_b`` in two clones at different paths (their bytes differ: the line table
records each source file's modification time), ``toolkit_elsewhere`` through the toolkit reached by
another path (its line table names the CUDA headers by that path, so every later section moves). Their
code hashes are equal; a byte changed in the code or its attributes changes it, one in the line table
does not. Tests marked ``nvcc`` build the same sources in two folders, and clone this repository to
another path and ask ``wireup check --require-evidence`` and ``wireup audit`` there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from audit.api import load_project
from audit.cli import main
from audit.compile import NotACubin, build_kernels, code_hash, code_size
from audit.compile._identity import is_descriptive

REPO = Path(__file__).resolve().parents[1]
CUBINS = REPO / "tests" / "data" / "build" / "cubins"
STRIDED_GATHER_CODE = "abf02a95f91863c51301717ed611fa03a4c508202fc737ad546b4d85e84914f9"


def sections(data: bytes) -> dict[str, tuple[int, int]]:
    """Section name -> (file offset, size), read independently of audit.compile._identity."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = heads[shstrndx][4]
    out = {}
    for h in heads:
        end = data.index(b"\0", names_at + h[0])
        out[data[names_at + h[0] : end].decode()] = (h[4], h[5])
    return out


def flipped(data: bytes, section: str, at: int = 0) -> bytes:
    off, size = sections(data)[section]
    assert at < size
    b = bytearray(data)
    b[off + at] ^= 0x01
    return bytes(b)


def test_the_same_code_built_in_two_checkouts_and_through_two_toolkit_paths_has_one_identity():
    blobs = {p.stem.split(".")[1]: p.read_bytes() for p in sorted(CUBINS.glob("strided_gather.*.cubin"))}
    assert sorted(blobs) == ["checkout_a", "checkout_b", "toolkit_elsewhere"]
    assert len({hashlib.sha256(b).hexdigest() for b in blobs.values()}) == 3  # three different files...
    assert {code_hash(b) for b in blobs.values()} == {STRIDED_GATHER_CODE}  # ...one code
    # the third one's line table is shorter, so the sections after it sit at other offsets
    offsets = {name: sections(b)[".nv.info.strided_gather"][0] for name, b in blobs.items()}
    assert offsets["checkout_a"] == offsets["checkout_b"] != offsets["toolkit_elsewhere"]


def test_the_code_size_counts_what_the_code_hash_takes_whole():
    """The report shows code_size, not the file's size, which follows the length of the paths in the line
    tables (a CUTLASS source's cubin built in a worktree at another path was 128 bytes longer)."""
    blobs = {p.stem.split(".")[1]: p.read_bytes() for p in sorted(CUBINS.glob("strided_gather.*.cubin"))}
    assert {code_size(b) for b in blobs.values()} == {2897}  # three different files, one code size
    data = blobs["checkout_a"]
    assert sections(data)[".text.strided_gather"][1] < code_size(data) < len(data)
    # it counts bytes, whatever they hold: a changed byte of code or of a line table leaves it as it is
    assert code_size(flipped(data, ".debug_line", 0)) == code_size(flipped(data, ".text.strided_gather", 0)) == 2897
    with pytest.raises(NotACubin):
        code_size(b"not an ELF image" * 8)


@pytest.mark.parametrize("section", [".text.strided_gather", ".nv.info.strided_gather", ".nv.constant0.strided_gather", ".symtab", ".nv.info"])
def test_a_byte_of_the_code_or_its_attributes_changes_the_identity(section):
    data = (CUBINS / "strided_gather.checkout_a.cubin").read_bytes()
    assert code_hash(flipped(data, section, 16)) != STRIDED_GATHER_CODE


@pytest.mark.parametrize("section", [".debug_line", ".debug_str", ".debug_frame", ".nv_debug_ptx_txt", ".nv_debug_line_sass", ".note.nv.tkinfo", ".rela.debug_line"])
def test_a_byte_of_debug_information_or_toolchain_notes_does_not(section):
    data = (CUBINS / "strided_gather.checkout_a.cubin").read_bytes()
    assert is_descriptive(section)
    assert code_hash(flipped(data, section, 0)) == STRIDED_GATHER_CODE


def test_the_architecture_in_the_elf_flags_is_part_of_the_identity():
    data = bytearray((CUBINS / "strided_gather.checkout_a.cubin").read_bytes())
    data[0x30] ^= 0x01  # e_flags carries the SM version
    assert code_hash(bytes(data)) != STRIDED_GATHER_CODE


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a 64-bit little-endian ELF image"),
        (b"\x7fELF\x01\x01" + bytes(80), "not a 64-bit little-endian ELF image"),
        ((CUBINS / "strided_gather.checkout_a.cubin").read_bytes()[:3000], "a truncated ELF image"),
    ],
)
def test_what_is_not_a_cubin_is_refused(data, message):
    with pytest.raises(NotACubin, match=re.escape(message)):
        code_hash(data)


# ---------------------------------------------------------------------------------------------------------
# with nvcc


def _copy_as_a_fresh_checkout(dst: Path, mtime: int) -> None:
    """The sources the build reads, with new file times (as ``git clone`` gives them)."""
    (dst / "contracts").mkdir(parents=True)
    shutil.copytree(REPO / "contracts", dst / "contracts", dirs_exist_ok=True, copy_function=shutil.copyfile)
    shutil.copytree(REPO / "kernels", dst / "kernels", copy_function=shutil.copyfile)
    shutil.copyfile(REPO / "pyproject.toml", dst / "pyproject.toml")
    for p in dst.rglob("*"):
        os.utime(p, (mtime, mtime))


@pytest.mark.nvcc
def test_the_same_sources_built_in_two_folders_have_one_code_identity(tmp_path):
    results = []
    for where, mtime in (("a", 1_700_000_000), ("b/deeper/checkout", 1_800_000_000)):
        root = tmp_path / where
        _copy_as_a_fresh_checkout(root, mtime)
        cfg, cs = load_project(root)
        results.append(build_kernels(cfg, cs, jobs=2, sources=["strided_gather", "aux_trunk_backward", "aux_heads_loss_ema_update"]))
    a, b = results
    assert a.compiled == b.compiled == 3
    assert a.code_hashes == b.code_hashes and len(a.code_hashes) == 3
    assert a.code_hashes["kernels/strided_gather_kernel.cu"] == STRIDED_GATHER_CODE  # as the checked-in cubins
    # the PTX names files relative to the root with a fixed time and size: the cubins are equal byte for byte
    assert a.cubin_hashes == b.cubin_hashes
    ptx = a.sources["kernels/aux_trunk_kernel.cu"].ptx.read_text()
    files = re.findall(r"^\s*\.file\s+\d+\s+(.*)$", ptx, re.MULTILINE)
    assert '"kernels/aux_trunk_kernel.cu", 1, 0' in files and all(f.endswith(", 1, 0") for f in files)


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=120).stdout


@pytest.mark.nvcc
def test_check_and_audit_agree_on_the_committed_evidence_in_a_clone_at_another_path(tmp_path, capsys, monkeypatch):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    clone = tmp_path / "elsewhere" / "clone"
    _git("clone", "--quiet", "--no-hardlinks", str(REPO), str(clone), cwd=tmp_path)
    import audit.commands.audit as audit_cmd

    monkeypatch.setattr(audit_cmd, "gpu_available", lambda: "no GPU here")
    rc = main(["check", "--root", str(clone), "--require-evidence", "--select", "evidence", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    flagged = {f["subject"] for f in doc["findings"] if f["rule"].startswith("EVIDENCE_")}
    stale = {f["subject"] for f in doc["findings"] if f["rule"] == "EVIDENCE_STALE"}
    cfg, cs = load_project(clone)
    kernels = {k.name for k in cs.kernels}

    main(["audit", "--root", str(clone), "--no-verify", "--check"])
    err = capsys.readouterr().err
    summary = re.search(r"using recorded evidence \((\d+) of (\d+) kernels verified.*?, (\d+) stale", err)
    assert summary is not None, err
    verified, total, audit_stale = map(int, summary.groups())
    assert total == len(kernels)
    assert verified == len(kernels - flagged)  # the kernels check accepts are the ones audit calls verified
    assert audit_stale == len(stale & kernels)
    assert rc == (0 if not flagged else 1)
    assert "compiled code not compared" not in err  # nvcc built the clone: the code was compared


@pytest.mark.nvcc
def test_records_written_from_one_checkouts_build_cover_another_checkouts_build(tmp_path):
    """What a GPU run on one machine writes (here: an emulated run given this machine's real build) is
    accepted by a checkout at another path with other file times that builds the sources itself."""
    from audit.evidence import freshness, load_records
    from audit.runtime import verify
    from audit.runtime._evidence import write_evidence

    src = REPO / "tests" / "data" / "generality"
    roots = []
    for where, mtime in (("gpu-machine/repo", 1_700_000_000), ("ci/checkout", 1_800_000_000)):
        root = tmp_path / where
        shutil.copytree(src, root, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"), copy_function=shutil.copyfile)
        for p in root.rglob("*"):
            os.utime(p, (mtime, mtime))
        roots.append(root)
    gpu, ci = roots
    cfg, cs = load_project(gpu)
    out = verify(gpu, emulated={}, sizes=(1,), chain_sizes=(37,), evidence_dir=tmp_path / "scratch")
    out.run.build = build_kernels(cfg, cs)
    write_evidence(out.run, cs, cfg, ci / "evidence")  # committed, then checked out elsewhere
    cfg2, cs2 = load_project(ci)
    records = load_records(cfg2.path(cfg2.evidence))
    assert records and all(r.code_hashes and r.code_hash_version == "wireup-code-1" for r in records)
    here = build_kernels(cfg2, cs2)
    assert here.code_hashes == out.run.build.code_hashes
    status = freshness(cs2, cfg2, records, here)
    assert {f.status for f in status.values()} == {"verified"} and all(f.code_compared for f in status.values())
