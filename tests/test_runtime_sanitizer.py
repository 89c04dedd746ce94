"""compute-sanitizer reports become per-kernel records (audit/runtime/_sanitizer.py)."""

from __future__ import annotations

from audit.runtime._sanitizer import attribute, base_name, describe, parse_blocks, sanitizer_command

MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at strided_gather+0x130 in /tmp/w/kernels/strided_gather_kernel.cu:12
=========     by thread (37,0,0) in block (0,0,0)
=========     Address 0x7f0a3e000094 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f0a3e000000 of size 148 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2f0f1f] in libcuda.so.1
=========
========= Invalid __global__ read of size 4 bytes
=========     at void gen::scale_rows<float, (int)4>(const float *, float *, const float *, int, long long, unsigned int, double)+0x1d0 in generality.cu:27
=========     by thread (5,0,0) in block (2,0,0)
=========     Address 0x10 is out of bounds
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to "unspecified launch failure" on CUDA API call to cuStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 3 errors
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at aux_label_scale_ema_update+0x2a0 in aux_heads_loss_ema_kernel.cu:60
=========     and Read access at aux_label_scale_ema_update+0x2d0 in aux_heads_loss_ema_kernel.cu:64 [1016 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

KERNELS = {
    "strided_gather": ["strided_gather", "", "", "strided_gather"],
    "scale_rows": ["_ZN3gen10scale_rowsIfLi4EEEvPKT_PS1_PKfixjd",
                   "void gen::scale_rows<float, 4>(float const*, float*, float const*, int, long long, unsigned int, double)",
                   "gen::scale_rows<float, 4>", "scale_rows"],  # fmt: skip
    "aux_label_scale_ema_update": ["aux_label_scale_ema_update"],
}


def test_memcheck_blocks_are_attributed_to_kernels_including_mangled_templates():
    reps = parse_blocks(MEMCHECK)
    assert [r.header for r in reps] == ["Invalid __global__ write of size 4 bytes", "Invalid __global__ read of size 4 bytes"]
    by = attribute(reps, KERNELS)
    assert set(by) == {"strided_gather", "scale_rows"}
    text = describe("memcheck", by["strided_gather"])
    assert text == (
        'compute-sanitizer memcheck reports "Invalid __global__ write of size 4 bytes" at '
        "/tmp/w/kernels/strided_gather_kernel.cu:12 (by thread (37,0,0) in block (0,0,0); Address 0x7f0a3e000094 is out "
        "of bounds, is 1 bytes after the nearest allocation at 0x7f0a3e000000 of size 148 bytes)"
    )


# a fault in a device function inlined into the entry (a CUTLASS copy): the "at" line names the copy, the device
# frames under it name its callers and, last, the kernel entry (the H100 mutation run of 5 December had this
# report unattributed: "an error in no known kernel")
INLINED = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at cutlass::arch::cp_async_zfill<(int)4, (cutlass::arch::CacheOperation::Kind)0>::cp_async_zfill(void *, const void *, bool)+0x1b70 in /site/cutlass/arch/memory_sm80.h:171
=========     by thread (137,0,0) in block (0,0,0)
=========     Address 0x7f2b1c0a0400 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2b1c000000 of size 656384 bytes
=========     Device Frame:cutlass::gemm::threadblock::MmaMultistage<...>::copy_tiles_and_advance(int)+0x1b70 in /site/cutlass/gemm/threadblock/mma_multistage.h:250
=========     Device Frame:aux_weight_grad_partial_cutlass+0x1b70 in /w/kernels/aux_weight_grad_partial_cutlass.cu:160
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2f0f1f] in libcuda.so.1
=========
========= ERROR SUMMARY: 1 error
"""


def test_a_fault_inlined_into_a_kernel_is_that_kernels():
    (rep,) = parse_blocks(INLINED)
    assert rep.frames[-1] == "aux_weight_grad_partial_cutlass" and rep.where == "/site/cutlass/arch/memory_sm80.h:171"
    by = attribute([rep], {"aux_weight_grad_partial": ["aux_weight_grad_partial_cutlass"], **KERNELS})
    assert set(by) == {"aux_weight_grad_partial"}
    assert describe("memcheck", by["aux_weight_grad_partial"]) == (
        'compute-sanitizer memcheck reports "Invalid __global__ read of size 4 bytes" at /site/cutlass/arch/memory_sm80.h:171 '
        "(by thread (137,0,0) in block (0,0,0); Address 0x7f2b1c0a0400 is out of bounds, is 1 bytes after the nearest "
        "allocation at 0x7f2b1c000000 of size 656384 bytes)"
    )
    # without its frames the same report is no known kernel's
    assert set(attribute([parse_blocks(INLINED.replace("Device Frame:", "Other:"))[0]], KERNELS)) == {""}


def test_racecheck_hazards_name_the_kernel():
    by = attribute(parse_blocks(RACECHECK), KERNELS)
    (rep,) = by["aux_label_scale_ema_update"]
    assert rep.header.startswith("Race reported between Write access")
    assert rep.where == "aux_heads_loss_ema_kernel.cu:60"


def test_unknown_functions_are_kept_apart():
    by = attribute(parse_blocks(MEMCHECK), {"other": ["other"]})
    assert set(by) == {""}


def test_clean_log_has_no_reports():
    assert parse_blocks("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n") == []


def test_base_names():
    assert base_name("void gen::scale_rows<float, (int)4>(const float *, int)") == "scale_rows"
    assert base_name("gen::scale_rows<float, 4>") == "scale_rows"
    assert base_name("strided_gather") == "strided_gather"


def test_command_line():
    cmd = sanitizer_command("racecheck", "/usr/local/cuda/bin/compute-sanitizer", __import__("pathlib").Path("/tmp/log"))
    assert cmd[:5] == ["/usr/local/cuda/bin/compute-sanitizer", "--tool", "racecheck", "--error-exitcode", "86"]
    assert "--log-file" in cmd
