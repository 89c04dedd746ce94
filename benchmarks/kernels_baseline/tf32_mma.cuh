// TF32 tensor-core pieces shared by the 3xTF32 experiments in this folder (not shipped kernels).
#pragma once

namespace tf32 {

__device__ __forceinline__ unsigned rna(float v) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
    return r;
}

// v = hi + lo + O(2^-22 |v|) with hi, lo both TF32.
__device__ __forceinline__ void split(float v, unsigned& hi, unsigned& lo) {
    hi = rna(v);
    lo = rna(v - __uint_as_float(hi));
}

// d += a * b on one 16 x 8 x 8 tile (TF32 inputs, float32 accumulation in the tensor core's own rounding).
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace tf32
