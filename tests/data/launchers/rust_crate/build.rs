// Compiles every kernel to a cubin in OUT_DIR; src/gpu_aux_heads.rs loads them.
use std::{env, path::PathBuf, process::Command};

const KERNELS: &[&str] = &[
    "kernels/scale_rows_kernel.cu",
    "kernels/dead_kernel.cu",  // phase A: compiled, launcher lands in phase B
    "kernels/rogue_kernel.cu",
];

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    for src in KERNELS {
        println!("cargo:rerun-if-changed={src}");
        let stem = PathBuf::from(src).file_stem().unwrap().to_owned();
        let status = Command::new("nvcc")
            .args(["-cubin", "-arch=sm_90", "-O3", "-o"])
            .arg(out.join(stem).with_extension("cubin"))
            .arg(src)
            .status()
            .expect("nvcc on PATH");
        assert!(status.success(), "nvcc failed on {src}");
    }
}
