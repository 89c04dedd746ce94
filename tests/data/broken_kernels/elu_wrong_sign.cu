// BROKEN FIXTURE for `wireup verify` (tests/gpu/test_verify_gpu.py): a copy of kernels/aux_trunk_kernel.cu with ONE change,
// the ELU derivative taken from the wrong sign test (h < 0 ? 1 : 1 + h); verify must report VERIFY_GRADCHECK for kernel "aux_trunk_backward".
// The change:
// -                dz = __ldg(dh_accum + rbase + j) * elu_grad_from_output(__ldg(h + rbase + j));
// +                dz = __ldg(dh_accum + rbase + j) * (__ldg(h + rbase + j) < 0.0f ? 1.0f : 1.0f + __ldg(h + rbase + j));
// Regenerate with: python3 tests/data/broken_kernels/make_fixtures.py
// Aux trunk: Linear(E -> SH2) -> ELU on the Q encoder's features, and its parameter-only backward.
//
// aux_trunk_forward
//   h_out[b, j] = ELU( sum_i x[b, i] * W[j, i] + b[j] ),   ELU(z) = z > 0 ? z : expm1(z)
//   x [B, E], W [SH2, E], b [SH2], h_out [B, SH2]   (row-major)
//   Launch: grid = (ceil_div(SH2, 64), ceil_div(B, 128), 1), block = (256, 1, 1).
//   Block (bx, by) computes the 128 x 64 tile h_out[by*128 .. +127, bx*64 .. +63]: an SGEMM x W^T with
//   k = i in slices of 16, double-buffered through shared memory; each thread owns an 8 x 4 register
//   tile (8 batch rows, 4 output features). Rows >= B and features >= SH2 are never written.
//
// aux_trunk_backward
//   dz[b, j]            = dh_accum[b, j] * ELU'(z[b, j]),  ELU'(z) = h > 0 ? 1 : 1 + h  with h = h[b, j]
//   db_partial[b, j]    = dz[b, j]
//   dW_partial[b, j, i] = dz[b, j] * x[b, i]      (only when dW_partial != NULL; the fused schedule
//                                                   passes NULL and reduces dz^T x with aux_weight_grad_partial)
//   dh_accum [B, SH2], h [B, SH2], x [B, E], dW_partial [B, SH2, E] (optional), db_partial [B, SH2]
//   There is deliberately no dx output: aux gradients never reach the Q encoder.
//   Launch: grid = (ceil_div(B, 8), 1, 1), block = (256, 1, 1); block x owns rows 8x .. 8x+7. Without
//   dW_partial the rows are one contiguous span, handled elementwise with float4 accesses; with it, each
//   row's dz is staged in shared memory (features in chunks of blockDim.x) for the outer product.
#include "aux_common.cuh"
#include "sgemm_tile.cuh"

namespace {

constexpr int kFwdThreads = 256;
constexpr int kFwdBM = 128;  // batch rows per block
constexpr int kFwdBN = 64;   // output features per block
constexpr int kFwdBK = 16;
constexpr int kFwdTM = 8;
constexpr int kFwdTN = 4;
static_assert((kFwdBM / kFwdTM) * (kFwdBN / kFwdTN) == kFwdThreads, "one register tile per thread");

constexpr int kBwdThreads = 256;
constexpr int kBwdRowsPerBlock = 8;

}  // namespace

extern "C" __global__ void __launch_bounds__(kFwdThreads)
aux_trunk_forward(const float* __restrict__ x, const float* __restrict__ W, const float* __restrict__ b,
                  float* __restrict__ h_out, int B, int E, int SH2) {
    __shared__ __align__(16) float As[2][kFwdBK][kFwdBM + 4];
    __shared__ __align__(16) float Bs[2][kFwdBK][kFwdBN + 4];

    const int row0 = blockIdx.y * kFwdBM;
    const int col0 = blockIdx.x * kFwdBN;
    const int tx = threadIdx.x % (kFwdBN / kFwdTN);
    const int ty = threadIdx.x / (kFwdBN / kFwdTN);
    const bool vec_k = (E % 4 == 0) && aligned16(x) && aligned16(W);

    sgemm::KContigLoader<kFwdBM, kFwdBK, kFwdThreads> la{x, E, B, E, row0, vec_k};
    sgemm::KContigLoader<kFwdBN, kFwdBK, kFwdThreads> lb{W, E, SH2, E, col0, vec_k};

    float acc[kFwdTM][kFwdTN];
    const int num_kt = (E + kFwdBK - 1) / kFwdBK;
    sgemm::mainloop<kFwdBK>(acc, la, lb, 0, num_kt, As, Bs, ty * kFwdTM, tx * kFwdTN);

    // Epilogue: bias + ELU, float4 stores where the row is aligned.
    const int j0 = col0 + tx * kFwdTN;
    float bias[kFwdTN];
#pragma unroll
    for (int c = 0; c < kFwdTN; ++c) bias[c] = j0 + c < SH2 ? __ldg(b + j0 + c) : 0.0f;
    const bool vec_out = (SH2 % 4 == 0) && aligned16(h_out);
#pragma unroll
    for (int r = 0; r < kFwdTM; ++r) {
        const int row = row0 + ty * kFwdTM + r;
        if (row >= B) break;
        float* out = h_out + (size_t)row * SH2;
        float v[kFwdTN];
#pragma unroll
        for (int c = 0; c < kFwdTN; ++c) v[c] = elu(acc[r][c] + bias[c]);
        if (vec_out && j0 < SH2) {
            *reinterpret_cast<float4*>(out + j0) = make_float4(v[0], v[1], v[2], v[3]);
        } else {
#pragma unroll
            for (int c = 0; c < kFwdTN; ++c)
                if (j0 + c < SH2) out[j0 + c] = v[c];
        }
    }
}

extern "C" __global__ void __launch_bounds__(kBwdThreads)
aux_trunk_backward(const float* __restrict__ dh_accum, const float* __restrict__ h, const float* __restrict__ x,
                   float* __restrict__ dW_partial, float* __restrict__ db_partial, int B, int E, int SH2) {
    __shared__ float dz_s[kBwdThreads];

    const int row0 = blockIdx.x * kBwdRowsPerBlock;
    if (row0 >= B) return;  // block-uniform
    const int rows = B - row0 < kBwdRowsPerBlock ? B - row0 : kBwdRowsPerBlock;
    const int tid = threadIdx.x;
    const int nt = blockDim.x;  // <= kBwdThreads by __launch_bounds__

    if (dW_partial == nullptr) {
        // db_partial = dh_accum * ELU'(h) over the contiguous span of this block's rows.
        const size_t base = (size_t)row0 * SH2;
        const int n = rows * SH2;
        if (SH2 % 4 == 0 && aligned16(dh_accum) && aligned16(h) && aligned16(db_partial)) {
            const float4* d4 = reinterpret_cast<const float4*>(dh_accum + base);
            const float4* h4 = reinterpret_cast<const float4*>(h + base);
            float4* o4 = reinterpret_cast<float4*>(db_partial + base);
            for (int e = tid; e < n / 4; e += nt) {
                const float4 d = __ldg(d4 + e);
                const float4 hv = __ldg(h4 + e);
                o4[e] = make_float4(d.x * elu_grad_from_output(hv.x), d.y * elu_grad_from_output(hv.y),
                                    d.z * elu_grad_from_output(hv.z), d.w * elu_grad_from_output(hv.w));
            }
        } else {
            for (int e = tid; e < n; e += nt)
                db_partial[base + e] = __ldg(dh_accum + base + e) * elu_grad_from_output(__ldg(h + base + e));
        }
        return;
    }

    for (int r = 0; r < rows; ++r) {
        const int row = row0 + r;
        const size_t rbase = (size_t)row * SH2;
        const float* xrow = x + (size_t)row * E;
        for (int j0 = 0; j0 < SH2; j0 += nt) {
            const int j = j0 + tid;
            float dz = 0.0f;
            if (j < SH2) {
                dz = __ldg(dh_accum + rbase + j) * (__ldg(h + rbase + j) < 0.0f ? 1.0f : 1.0f + __ldg(h + rbase + j));
                db_partial[rbase + j] = dz;
            }
            // Outer product of this chunk of dz with the whole x row: dW_partial[row, j0 .. j0+jn-1, :].
            dz_s[tid] = dz;
            __syncthreads();
            const int jn = SH2 - j0 < nt ? SH2 - j0 : nt;
            block_outer_product(dW_partial + (rbase + j0) * E, dz_s, xrow, jn, E);
            __syncthreads();  // dz_s is rewritten by the next chunk
        }
    }
}
