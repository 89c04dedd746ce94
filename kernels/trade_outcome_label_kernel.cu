// Label producer (phase A2): trade-outcome class of each transition.
//
//   labels[b] = -1                        if trade_closed[b] == 0   (no trade closed: masked row)
//             =  0  (loss)                if r < -flat_threshold
//             =  2  (win)                 if r >  flat_threshold
//             =  1  (flat)                otherwise,                with r = realized_return[b]
//   trade_closed [B] (i32), realized_return [B], labels [B] (i32)
//   realized_return is not read where trade_closed == 0 (it is meaningless there). A NaN return on a
//   closed trade compares false both ways and is labelled flat.
//
// Launch: grid = (ceil_div(B, 256), 1, 1), block = (256, 1, 1); one thread per row, grid-stride.
namespace {
constexpr int kSkipLabel = -1;
constexpr int kLossLabel = 0;
constexpr int kFlatLabel = 1;
constexpr int kWinLabel = 2;
}  // namespace

extern "C" __global__ void __launch_bounds__(256)
trade_outcome_label(const int* __restrict__ trade_closed, const float* __restrict__ realized_return,
                    int* __restrict__ labels, int B, float flat_threshold) {
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B; b += gridDim.x * blockDim.x) {
        int label = kSkipLabel;
        if (__ldg(trade_closed + b) != 0) {
            const float r = __ldg(realized_return + b);
            label = r < -flat_threshold ? kLossLabel : (r > flat_threshold ? kWinLabel : kFlatLabel);
        }
        labels[b] = label;
    }
}
