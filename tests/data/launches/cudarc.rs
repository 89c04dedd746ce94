// Host code in Rust (cudarc): the same three launches as the host functions of kernels.cu.
use cudarc::driver::{LaunchConfig, PushKernelArg};

pub fn launch_all(stream: &CudaStream, module: &CudaModule, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>,
                  logits: &CudaSlice<f32>, p: &mut CudaSlice<f32>, rows: usize, cols: usize) -> Result<()> {
    let scale = module.load_function("scale_rows")?;
    let n = rows as i32;
    let cfg = LaunchConfig { grid_dim: ((n as u32 + 127) / 128, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    let mut b = stream.launch_builder(&scale);
    b.arg(x).arg(y).arg(&n).arg(&0.5f32);
    unsafe { b.launch(cfg) }?;
    let softmax = module.load_function("row_softmax")?;
    let c = cols as i32;
    let smem_cfg = LaunchConfig { grid_dim: (n as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: (c as u32) * 4 };
    unsafe { softmax.launch(smem_cfg, (logits, &mut *p, n, c)) }?;
    let tile = module.load_function("tile_sum")?;
    let tcfg = LaunchConfig { grid_dim: ((c as u32 + 15) / 16, (n as u32 + 15) / 16, 1), block_dim: (16, 16, 1), shared_mem_bytes: 0 };
    unsafe { tile.launch(tcfg, (logits, &mut *y, n, c)) }?;
    Ok(())
}
