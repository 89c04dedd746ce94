// Next-bar head backward: normalised MSE back through Linear -> ELU -> Linear, SAXPY into the trunk.
//
//   s                      = max(isv[label_scale_slot], 1e-6)            (ISV slot AUX_LABEL_SCALE_EMA)
//   d_pred[b]              = 2 * (pred[b] - label[b] / s) / B
//   db2_partial[b, 0]      = d_pred[b]
//   dW2_partial[b, 0, j]   = d_pred[b] * h1[b, j]                                  (optional)
//   dz1[b, j]              = d_pred[b] * W2[0, j] * ELU'(h1[b, j]),  ELU' = h1 > 0 ? 1 : 1 + h1
//   db1_partial[b, j]      = dz1[b, j]
//   dW1_partial[b, j, i]   = dz1[b, j] * h_s2[b, i]                                (optional)
//   dh[b, i]               = sum_j dz1[b, j] * W1[j, i]                            (SGEMM dz1 @ W1)
//   dh_s2_aux_out[b, i]    = dh[b, i]                                               (optional)
//   dh_s2_aux_accum[b, i] += saxpy_alpha * dh[b, i]
//   h_s2 [B, SH2], h1 [B, H], pred [B], label [B], isv [ISV_TOTAL_DIM], W1 [H, SH2], W2 [KNB = 1, H],
//   dW1_partial [B, H, SH2] (NULL-able), db1_partial [B, H], dW2_partial [B, 1, H] (NULL-able),
//   db2_partial [B, 1], dh_s2_aux_out [B, SH2] (NULL-able: the fused path needs only the accumulator),
//   dh_s2_aux_accum [B, SH2]
// No mask: every row has a label. An ISV slot index outside [0, ISV_TOTAL_DIM) makes s = NaN, which
// poisons every output (and the accumulator) visibly instead of reading out of bounds.
//
// Launch: grid = (ceil_div(SH2, 128), ceil_div(B, 128), 1), block = (256, 1, 1).
// Block (bx, by) computes dh for rows by*128 .. +127 and trunk units bx*128 .. +127 as an SGEMM over
// k = j in slices of 8; dz1 is formed on the fly while loading each slice (no [B, H] scratch), and the
// blocks with bx == 0 also write the row-wide outputs db1/dW2/db2 of their rows. Each thread owns an
// 8 x 8 register tile: 8 consecutive rows, and units tx*4 .. +3 and 64 + tx*4 .. +3 of the block's 128 (two
// float4 halves 64 apart, so the 16 threads of a row read 256 contiguous bytes of the W1 slice per half, with
// no shared-memory bank conflict, and store 256 contiguous bytes of dh per half). dW1_partial, when requested,
// is written by each block for its rows and units.
#include "aux_common.cuh"
#include "sgemm_tile.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kBM = 128;  // batch rows per block
constexpr int kBN = 128;  // trunk units i per block
constexpr int kBK = 8;    // hidden units j per slice
constexpr int kTM = 8;    // rows per thread
constexpr int kTN = 8;    // units per thread: two float4 halves kBN / 2 apart
constexpr int kHalf = kBN / 2;
static_assert((kBM / kTM) * (kBN / kTN) == kThreads, "one register tile per thread");

// Loads one slice of dz1 = d_pred * W2[0, :] * ELU'(h1) for the block's rows, transposed into s[j][row].
// With write_rows, also writes db1_partial and dW2_partial for the (row, j) pairs it forms.
struct Dz1Loader {
    static constexpr int kF4PerRow = kBK / 4;
    static constexpr int kPer = kBM * kBK / 4 / kThreads;
    static_assert((kBM * kBK / 4) % kThreads == 0, "slice must split evenly over the threads");

    const float* __restrict__ h1;
    const float* __restrict__ W2;
    const float* d_pred_s;  // shared: d_pred of the block's rows
    float* __restrict__ db1_partial;
    float* __restrict__ dW2_partial;  // NULL-able
    int B;
    int H;
    int row0;
    bool vec;         // float4 path: H % 4 == 0 and every row pointer 16-byte aligned
    bool write_rows;  // this block writes the row-wide outputs (column block 0)
    float4 reg[kPer];

    __device__ __forceinline__ void load(int k0) {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
            const int f = threadIdx.x + p * kThreads;
            const int r = f / kF4PerRow;
            const int j = k0 + (f % kF4PerRow) * 4;
            const int row = row0 + r;
            float dz[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (row < B && j < H) {
                const float dp = d_pred_s[r];
                const size_t o = (size_t)row * H + j;
                float h[4], w[4], dw2[4];
                if (vec) {
                    const float4 hv = sgemm::ldg4(h1 + o);
                    const float4 wv = sgemm::ldg4(W2 + j);
                    h[0] = hv.x; h[1] = hv.y; h[2] = hv.z; h[3] = hv.w;
                    w[0] = wv.x; w[1] = wv.y; w[2] = wv.z; w[3] = wv.w;
                } else {
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        h[c] = j + c < H ? __ldg(h1 + o + c) : 0.0f;
                        w[c] = j + c < H ? __ldg(W2 + j + c) : 0.0f;
                    }
                }
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    dz[c] = dp * w[c] * elu_grad_from_output(h[c]);
                    dw2[c] = dp * h[c];
                }
                if (write_rows) {
                    if (vec) {
                        *reinterpret_cast<float4*>(db1_partial + o) = make_float4(dz[0], dz[1], dz[2], dz[3]);
                        if (dW2_partial != nullptr)
                            *reinterpret_cast<float4*>(dW2_partial + o) = make_float4(dw2[0], dw2[1], dw2[2], dw2[3]);
                    } else {
#pragma unroll
                        for (int c = 0; c < 4; ++c) {
                            if (j + c < H) {
                                db1_partial[o + c] = dz[c];
                                if (dW2_partial != nullptr) dW2_partial[o + c] = dw2[c];
                            }
                        }
                    }
                }
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    if (j + c >= H) dz[c] = 0.0f;
            }
            reg[p] = make_float4(dz[0], dz[1], dz[2], dz[3]);
        }
    }

    template <int LD>
    __device__ __forceinline__ void store(float (*s)[LD]) const {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
            const int f = threadIdx.x + p * kThreads;
            const int r = f / kF4PerRow;
            const int kk = (f % kF4PerRow) * 4;
            s[kk + 0][r] = reg[p].x;
            s[kk + 1][r] = reg[p].y;
            s[kk + 2][r] = reg[p].z;
            s[kk + 3][r] = reg[p].w;
        }
    }
};

// acc[r][c] += sum_k As[k][tm0 + r] * Bs[k][tn0 + (c / 4) * kHalf + c % 4] over one slice.
template <int LDA, int LDB>
__device__ __forceinline__ void fma_slice(float (&acc)[kTM][kTN], const float (*As)[LDA], const float (*Bs)[LDB],
                                          int tm0, int tn0) {
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
        const float4 a0 = *reinterpret_cast<const float4*>(&As[k][tm0]);
        const float4 a1 = *reinterpret_cast<const float4*>(&As[k][tm0 + 4]);
        const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][tn0]);
        const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][tn0 + kHalf]);
        const float a[kTM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float b[kTN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int r = 0; r < kTM; ++r) {
#pragma unroll
            for (int c = 0; c < kTN; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
        }
    }
}

// sgemm::mainloop's double buffering (one barrier per slice) with the split register tile.
template <int LDA, int LDB, class LoaderA, class LoaderB>
__device__ __forceinline__ void mainloop(float (&acc)[kTM][kTN], LoaderA& la, LoaderB& lb, int num_kt,
                                         float (*As)[kBK][LDA], float (*Bs)[kBK][LDB], int tm0, int tn0) {
#pragma unroll
    for (int r = 0; r < kTM; ++r) {
#pragma unroll
        for (int c = 0; c < kTN; ++c) acc[r][c] = 0.0f;
    }
    la.load(0);
    lb.load(0);
    la.store(As[0]);
    lb.store(Bs[0]);
    __syncthreads();
    for (int kt = 0; kt < num_kt; ++kt) {
        const int cur = kt & 1;
        const bool has_next = kt + 1 < num_kt;
        if (has_next) {
            la.load((kt + 1) * kBK);
            lb.load((kt + 1) * kBK);
        }
        fma_slice(acc, As[cur], Bs[cur], tm0, tn0);
        if (has_next) {
            la.store(As[cur ^ 1]);
            lb.store(Bs[cur ^ 1]);
        }
        __syncthreads();
    }
}

}  // namespace

// kStore: the accumulator's first writer (dh_s2_aux_accum = saxpy_alpha * dh, never read), so the fused path
// needs no memset of it and reads no zeros; otherwise dh_s2_aux_accum += saxpy_alpha * dh.
template <bool kStore>
__device__ __forceinline__ void next_bar_backward(const float* __restrict__ h_s2, const float* __restrict__ h1,
                                                  const float* __restrict__ pred, const float* __restrict__ label,
                                                  const float* __restrict__ isv, int label_scale_slot,
                                                  const float* __restrict__ W1, const float* __restrict__ W2,
                                                  float* __restrict__ dW1_partial, float* __restrict__ db1_partial,
                                                  float* __restrict__ dW2_partial, float* __restrict__ db2_partial,
                                                  float* __restrict__ dh_s2_aux_out, float* __restrict__ dh_s2_aux_accum,
                                                  float saxpy_alpha, int B, int SH2, int H) {
    __shared__ __align__(16) float As[2][kBK][kBM + 4];
    __shared__ __align__(16) float Bs[2][kBK][kBN + 4];
    __shared__ float d_pred_s[kBM];

    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * kBM;
    const int col0 = blockIdx.x * kBN;
    const bool write_rows = blockIdx.x == 0;

    if (tid < kBM) {
        const int row = row0 + tid;
        float dp = 0.0f;
        if (row < B) {
            const float s = aux_label_scale(isv, label_scale_slot);
            const float r = __ldg(pred + row) - __ldg(label + row) / s;
            dp = 2.0f * r / (float)B;
            if (write_rows) db2_partial[row] = dp;
        }
        d_pred_s[tid] = dp;
    }
    __syncthreads();

    const int tx = tid % (kHalf / 4);
    const int ty = tid / (kHalf / 4);
    const bool vec_h = (H % 4 == 0) && aligned16(h1) && aligned16(W2) && aligned16(db1_partial) &&
                       (dW2_partial == nullptr || aligned16(dW2_partial));
    const bool vec_w1 = (SH2 % 4 == 0) && aligned16(W1);
    Dz1Loader la{h1, W2, d_pred_s, db1_partial, dW2_partial, B, H, row0, vec_h, write_rows};
    sgemm::NContigLoader<kBN, kBK, kThreads> lb{W1, SH2, SH2, H, col0, vec_w1};

    float acc[kTM][kTN];
    mainloop(acc, la, lb, (H + kBK - 1) / kBK, As, Bs, ty * kTM, tx * 4);

    // Epilogue: dh_s2_aux_out = dh (unless NULL); dh_s2_aux_accum += saxpy_alpha * dh (kStore: 0 + saxpy_alpha * dh,
    // the same fmaf with a zero addend, so the bits equal those of a memset accumulator's first update).
    const bool vec_out = (SH2 % 4 == 0) && aligned16(dh_s2_aux_out) && aligned16(dh_s2_aux_accum);
#pragma unroll
    for (int r = 0; r < kTM; ++r) {
        const int row = row0 + ty * kTM + r;
        if (row >= B) break;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int i0 = col0 + half * kHalf + tx * 4;
            const float* v = &acc[r][half * 4];
            const size_t o = (size_t)row * SH2 + i0;
            if (vec_out && i0 < SH2) {
                if (dh_s2_aux_out != nullptr)
                    *reinterpret_cast<float4*>(dh_s2_aux_out + o) = make_float4(v[0], v[1], v[2], v[3]);
                float4 a = kStore ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : *reinterpret_cast<const float4*>(dh_s2_aux_accum + o);
                a.x = fmaf(saxpy_alpha, v[0], a.x);
                a.y = fmaf(saxpy_alpha, v[1], a.y);
                a.z = fmaf(saxpy_alpha, v[2], a.z);
                a.w = fmaf(saxpy_alpha, v[3], a.w);
                *reinterpret_cast<float4*>(dh_s2_aux_accum + o) = a;
            } else {
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    if (i0 + c < SH2) {
                        if (dh_s2_aux_out != nullptr) dh_s2_aux_out[o + c] = v[c];
                        dh_s2_aux_accum[o + c] = fmaf(saxpy_alpha, v[c], kStore ? 0.0f : dh_s2_aux_accum[o + c]);
                    }
                }
            }
        }
    }

    if (dW1_partial == nullptr) return;
    // dW1_partial[b, j, i] = dz1[b, j] * h_s2[b, i] for this block's rows and units i in [col0, col0 + 64).
    const int rows = B - row0 < kBM ? B - row0 : kBM;
    const int cols = SH2 - col0 < kBN ? SH2 - col0 : kBN;
    if ((SH2 % 4 == 0) && aligned16(dW1_partial) && aligned16(h_s2)) {
        const int c4 = (cols + 3) / 4;  // cols is a multiple of 4 here
        const int per_row = H * c4;
        for (int e = tid; e < rows * per_row; e += blockDim.x) {
            const int r = e / per_row;
            const int rem = e - r * per_row;
            const int j = rem / c4;
            const int i = col0 + (rem - j * c4) * 4;
            const int row = row0 + r;
            const float hv = __ldg(h1 + (size_t)row * H + j);
            const float dz = d_pred_s[r] * __ldg(W2 + j) * elu_grad_from_output(hv);
            const float4 xv = sgemm::ldg4(h_s2 + (size_t)row * SH2 + i);
            *reinterpret_cast<float4*>(dW1_partial + ((size_t)row * H + j) * SH2 + i) =
                make_float4(dz * xv.x, dz * xv.y, dz * xv.z, dz * xv.w);
        }
    } else {
        const int per_row = H * cols;
        for (int e = tid; e < rows * per_row; e += blockDim.x) {
            const int r = e / per_row;
            const int rem = e - r * per_row;
            const int j = rem / cols;
            const int i = col0 + (rem - j * cols);
            const int row = row0 + r;
            const float hv = __ldg(h1 + (size_t)row * H + j);
            const float dz = d_pred_s[r] * __ldg(W2 + j) * elu_grad_from_output(hv);
            dW1_partial[((size_t)row * H + j) * SH2 + i] = dz * __ldg(h_s2 + (size_t)row * SH2 + i);
        }
    }
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
aux_next_bar_backward(const float* __restrict__ h_s2, const float* __restrict__ h1, const float* __restrict__ pred,
                      const float* __restrict__ label, const float* __restrict__ isv, int label_scale_slot,
                      const float* __restrict__ W1, const float* __restrict__ W2, float* __restrict__ dW1_partial,
                      float* __restrict__ db1_partial, float* __restrict__ dW2_partial,
                      float* __restrict__ db2_partial, float* __restrict__ dh_s2_aux_out,
                      float* __restrict__ dh_s2_aux_accum, float saxpy_alpha, int B, int SH2, int H) {
    next_bar_backward<false>(h_s2, h1, pred, label, isv, label_scale_slot, W1, W2, dW1_partial, db1_partial, dW2_partial,
                             db2_partial, dh_s2_aux_out, dh_s2_aux_accum, saxpy_alpha, B, SH2, H);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
aux_next_bar_backward_store(const float* __restrict__ h_s2, const float* __restrict__ h1, const float* __restrict__ pred,
                            const float* __restrict__ label, const float* __restrict__ isv, int label_scale_slot,
                            const float* __restrict__ W1, const float* __restrict__ W2, float* __restrict__ dW1_partial,
                            float* __restrict__ db1_partial, float* __restrict__ dW2_partial,
                            float* __restrict__ db2_partial, float* __restrict__ dh_s2_aux_out,
                            float* __restrict__ dh_s2_aux_accum, float saxpy_alpha, int B, int SH2, int H) {
    next_bar_backward<true>(h_s2, h1, pred, label, isv, label_scale_slot, W1, W2, dW1_partial, db1_partial, dW2_partial,
                            db2_partial, dh_s2_aux_out, dh_s2_aux_accum, saxpy_alpha, B, SH2, H);
}
