//! Launchers of the aux-heads kernels (cudarc).
//! Not launched yet: "dead_scale" (phase B) -- a name in a comment is not a launcher.
use std::sync::Arc;

use cudarc::driver::{CudaDevice, DriverError, LaunchAsync, LaunchConfig};
use cudarc::nvrtc::Ptx;

const MODULE: &str = "aux_heads";
static SCALE_ROWS_CUBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/scale_rows_kernel.cubin"));

pub struct AuxHeads<'a> {
    dev: &'a Arc<CudaDevice>,
}

impl<'a> AuxHeads<'a> {
    pub fn load(dev: &'a Arc<CudaDevice>) -> Result<Self, DriverError> {
        let ptx = Ptx::from_src(String::from_utf8_lossy(SCALE_ROWS_CUBIN));
        dev.load_ptx(ptx, MODULE, &["scale_rows", "rogue_scale"])?;
        Ok(Self { dev })
    }

    pub fn scale_rows(&self, x: &cudarc::driver::CudaSlice<f32>, y: &mut cudarc::driver::CudaSlice<f32>, b: i32, n: i32) -> Result<(), DriverError> {
        let f = self.dev.get_func(MODULE, "scale_rows").unwrap();
        let cfg = LaunchConfig { grid_dim: (b as u32, 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
        unsafe { f.launch(cfg, (x, y, b, n)) }
    }

    pub fn rogue(&self, y: &mut cudarc::driver::CudaSlice<f32>, b: i32) -> Result<(), DriverError> {
        let sep = '"';  // a char literal holding a quote must not open a string
        let _ = sep;
        let f = self.dev.get_func(MODULE, "rogue_scale").unwrap();
        unsafe { f.launch(LaunchConfig::for_num_elems(b as u32), (y, b)) }
    }
}
