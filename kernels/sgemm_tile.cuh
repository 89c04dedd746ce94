// Register-blocked shared-memory SGEMM building blocks shared by the aux-heads kernels.
//
// A block computes a BM x BN tile of C = A * B^T-or-B over a reduction index k, BK values of k at a time.
// Each operand tile lives in shared memory "k-major" (s[k][row]) so that a thread's TM rows / TN columns
// of one k are contiguous and read as float4. Every thread owns a TM x TN register tile at rows
// tm0 .. tm0+TM-1 and columns tn0 .. tn0+TN-1 of the block tile.
//
// Loaders bring one BK slice of an operand from global memory into registers (`load`, issued one slice
// ahead so the global latency overlaps the FMAs of the current slice) and then into shared memory
// (`store`). Out-of-range rows, columns and k values read as zero, so every kernel built on these is
// bounds-safe for any B >= 1 and any run-time dims. float4 global accesses are used only when the
// caller established 16-byte alignment and a leading dimension that is a multiple of 4.
//
// All sizes are int except global offsets, which are size_t (B * SH2 * E exceeds 2^31).
#pragma once

#include "aux_common.cuh"

namespace sgemm {

__device__ __forceinline__ float4 zero4() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }

__device__ __forceinline__ float4 ldg4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }

// One BK slice of a row-major [nrows, K] matrix whose k index is contiguous (x[B, E], W[SH2, E]):
// ROWS rows starting at row0, stored transposed into s[k][row].
template <int ROWS, int BK, int NT>
struct KContigLoader {
    static constexpr int kF4PerRow = BK / 4;
    static constexpr int kPer = ROWS * BK / 4 / NT;  // float4 slots per thread
    static_assert(BK % 4 == 0 && (ROWS * BK / 4) % NT == 0, "tile must split evenly over the threads");

    const float* __restrict__ src;
    int ld;      // leading dimension (elements between rows)
    int nrows;   // valid rows
    int K;       // valid k
    int row0;
    bool vec;    // float4 path allowed: aligned base, ld % 4 == 0, K % 4 == 0
    float4 reg[kPer];

    __device__ __forceinline__ void load(int k0) {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
            const int f = threadIdx.x + p * NT;
            const int r = f / kF4PerRow;
            const int k = k0 + (f % kF4PerRow) * 4;
            const int grow = row0 + r;
            const float* rowp = src + (size_t)grow * ld;
            if (grow >= nrows) {
                reg[p] = zero4();
            } else if (vec) {
                reg[p] = k < K ? ldg4(rowp + k) : zero4();
            } else {
                reg[p].x = k + 0 < K ? __ldg(rowp + k + 0) : 0.0f;
                reg[p].y = k + 1 < K ? __ldg(rowp + k + 1) : 0.0f;
                reg[p].z = k + 2 < K ? __ldg(rowp + k + 2) : 0.0f;
                reg[p].w = k + 3 < K ? __ldg(rowp + k + 3) : 0.0f;
            }
        }
    }

    template <int LD>
    __device__ __forceinline__ void store(float (*s)[LD]) const {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
            const int f = threadIdx.x + p * NT;
            const int r = f / kF4PerRow;
            const int kk = (f % kF4PerRow) * 4;
            s[kk + 0][r] = reg[p].x;
            s[kk + 1][r] = reg[p].y;
            s[kk + 2][r] = reg[p].z;
            s[kk + 3][r] = reg[p].w;
        }
    }
};

// One BK slice of a row-major [K, ncols] matrix whose column index is contiguous (W1[H, SH2] read as
// k = j, column = i; dz[B, M] read as k = b): COLS columns starting at col0, stored as s[k][col].
template <int COLS, int BK, int NT>
struct NContigLoader {
    static constexpr int kF4PerRow = COLS / 4;
    static constexpr int kPer = COLS * BK / 4 / NT;
    static_assert(COLS % 4 == 0 && (COLS * BK / 4) % NT == 0, "tile must split evenly over the threads");

    const float* __restrict__ src;
    int ld;     // leading dimension
    int ncols;  // valid columns
    int K;      // valid k (rows of src)
    int col0;
    bool vec;   // float4 path allowed: aligned base, ld % 4 == 0, ncols % 4 == 0
    float4 reg[kPer];

    __device__ __forceinline__ void load(int k0) {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
            const int f = threadIdx.x + p * NT;
            const int k = k0 + f / kF4PerRow;
            const int c = col0 + (f % kF4PerRow) * 4;
            const float* rowp = src + (size_t)k * ld;
            if (k >= K) {
                reg[p] = zero4();
            } else if (vec) {
                reg[p] = c < ncols ? ldg4(rowp + c) : zero4();
            } else {
                reg[p].x = c + 0 < ncols ? __ldg(rowp + c + 0) : 0.0f;
                reg[p].y = c + 1 < ncols ? __ldg(rowp + c + 1) : 0.0f;
                reg[p].z = c + 2 < ncols ? __ldg(rowp + c + 2) : 0.0f;
                reg[p].w = c + 3 < ncols ? __ldg(rowp + c + 3) : 0.0f;
            }
        }
    }

    template <int LD>
    __device__ __forceinline__ void store(float (*s)[LD]) const {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
            const int f = threadIdx.x + p * NT;
            const int k = f / kF4PerRow;
            const int c = (f % kF4PerRow) * 4;
            *reinterpret_cast<float4*>(&s[k][c]) = reg[p];
        }
    }
};

// acc[i][j] += sum_k As[k][tm0 + i] * Bs[k][tn0 + j] over one BK slice.
template <int BK, int TM, int TN, int LDA, int LDB>
__device__ __forceinline__ void fma_slice(float (&acc)[TM][TN], const float (*As)[LDA], const float (*Bs)[LDB],
                                          int tm0, int tn0) {
    static_assert(TM % 4 == 0 && TN % 4 == 0, "register tile must be float4-aligned");
#pragma unroll
    for (int k = 0; k < BK; ++k) {
        float a[TM];
        float b[TN];
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&As[k][tm0 + i]);
            a[i + 0] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&Bs[k][tn0 + j]);
            b[j + 0] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i) {
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
}

// Double-buffered main loop over k slices [kt_begin, kt_end) (slice t covers k = t*BK .. t*BK+BK-1).
// One __syncthreads per slice: the next slice is stored into the other buffer after the FMAs on the
// current one, and the barrier that ends slice t both publishes slice t+1 and retires slice t.
// `active` (warp-uniform) lets warps whose register tile lies wholly out of range skip the FMAs while
// still taking part in loads and barriers. All threads of the block must call this with the same range.
template <int BK, int TM, int TN, int LDA, int LDB, class LoaderA, class LoaderB>
__device__ __forceinline__ void mainloop(float (&acc)[TM][TN], LoaderA& la, LoaderB& lb, int kt_begin, int kt_end,
                                         float (*As)[BK][LDA], float (*Bs)[BK][LDB], int tm0, int tn0,
                                         bool active = true) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    }
    if (kt_begin >= kt_end) return;

    la.load(kt_begin * BK);
    lb.load(kt_begin * BK);
    la.store(As[0]);
    lb.store(Bs[0]);
    __syncthreads();

    for (int kt = kt_begin; kt < kt_end; ++kt) {
        const int cur = (kt - kt_begin) & 1;
        const bool has_next = kt + 1 < kt_end;
        if (has_next) {
            la.load((kt + 1) * BK);
            lb.load((kt + 1) * BK);
        }
        if (active) fma_slice<BK, TM, TN, LDA, LDB>(acc, As[cur], Bs[cur], tm0, tn0);
        if (has_next) {
            la.store(As[cur ^ 1]);
            lb.store(Bs[cur ^ 1]);
        }
        __syncthreads();
    }
}

}  // namespace sgemm

// ---- asynchronous copies (sm_80+): global -> shared without a register round trip ----
namespace sgemm {

// 16-byte cp.async; src_bytes < 16 zero-fills the rest (src_bytes == 0: pure zero fill, nothing read).
__device__ __forceinline__ void cp_async16(float* smem_dst, const float* gmem_src, int src_bytes) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem_src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending)); }

// One BK slice of a row-major [K, ncols] matrix (column index contiguous) copied as-is into s[k][col]
// for COLS columns starting at col0: with cp.async when `vec`, else with plain loads and stores.
// Out-of-range rows / columns are zero-filled.
// `t` is the calling thread's index among the NT threads that share the copy.
template <int COLS, int BK, int NT, int LD>
__device__ __forceinline__ void copy_ncontig_slice(float (*s)[LD], const float* __restrict__ src, int ld, int ncols,
                                                   int K, int col0, int k0, bool vec, int t) {
    constexpr int kF4PerRow = COLS / 4;
    constexpr int kSlots = COLS * BK / 4;
    static_assert(COLS % 4 == 0 && LD % 4 == 0, "rows must stay 16-byte aligned");
#pragma unroll
    for (int f0 = 0; f0 < kSlots; f0 += NT) {
        const int f = f0 + t;
        if (kSlots % NT != 0 && f >= kSlots) break;
        const int k = f / kF4PerRow;
        const int c = (f % kF4PerRow) * 4;
        const int gk = k0 + k;
        const int gc = col0 + c;
        float* dst = &s[k][c];
        if (vec) {
            const bool in = gk < K && gc < ncols;
            cp_async16(dst, in ? src + (size_t)gk * ld + gc : src, in ? 16 : 0);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                dst[e] = (gk < K && gc + e < ncols) ? __ldg(src + (size_t)gk * ld + gc + e) : 0.0f;
        }
    }
}

}  // namespace sgemm
