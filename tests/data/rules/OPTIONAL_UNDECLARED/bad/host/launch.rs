// Host side of the fixture chain: the kernels it fetches from the compiled module and launches.
const MODULE: &[u8] = include_bytes!("../kernels/chain.cubin");

pub fn kernels(dev: &Device) -> Kernels {
    let module = dev.load_module(MODULE);
    Kernels {
        make_label: module.get_function("make_label"),
        forward: module.get_function("forward"),
        loss: module.get_function("loss"),
        backward: module.get_function("backward"),
        reduce: module.get_function("reduce"),
        weight_reduce: module.get_function("weight_reduce"),
    }
}
