/*
 * llmc/mma.cuh — tensor-core and asynchronous-copy wrappers (sm_80+): mma.sync m16n8k16 bf16, ldmatrix,
 * cp.async. Under nvcc each is one inline PTX instruction; with -DCUDASIM each is a warp rendezvous
 * (dev/cudasim) that moves the same elements between the same lanes as the PTX ISA's fragment layouts.
 *
 * Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), with
 * g = lane / 4 (groupID) and t = lane % 4 (threadID_in_group); a bf16x2 register holds its lower-indexed
 * element in the low 16 bits:
 *   A (16x16, row-major), a[4]: a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..2t+1],
 *                               a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9]
 *   B (16x8, K x N),      b[2]: b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]
 *   C, D (16x8 fp32),     c[4]: c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1]
 * ldmatrix.m8n8 (.b16): lanes 8i..8i+7 give the row addresses (16 contiguous bytes, 16-byte aligned) of
 * matrix i (i < 1, 2 or 4 for x1, x2, x4); register r[i] of lane l holds M_i[l/4][2(l%4)..2(l%4)+1], or with
 * .trans M_i[2(l%4)][l/4] (low half) and M_i[2(l%4)+1][l/4] (high half). So ldmatrix_x4 on a 16x16
 * row-major tile (lanes 0-15 pointing at rows 0-15 of columns 0-7, lanes 16-31 at rows 0-15 of columns
 * 8-15) yields the A fragment, and ldmatrix_x2_trans on a row-major 16x8 K x N tile yields B.
 * cp.async: cp_async_16 copies 16 bytes global -> shared (both 16-byte aligned), cp_async_16_zfill(smem, gmem,
 * full) the same when `full`, else writes 16 zero bytes and reads nothing (gmem need not point at memory then:
 * the source size operand is 0); a GPU completes them asynchronously, so the data may be read only after cp_async_commit() and cp_async_wait<N>() (at most N
 * groups still pending) and a barrier if other threads read it. The simulator copies at issue, or, deferred,
 * at the wait (see dev/cudasim/cudasim.h).
 */
#ifndef LLMC_MMA_CUH
#define LLMC_MMA_CUH

#include "llmc/cuda_common.cuh"
#include <stdint.h>

/* two bf16 in one register: lo in bits 0-15, hi in bits 16-31 */
__device__ __forceinline__ uint32_t pack_bf16x2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return (uint32_t)__bfloat16_as_ushort(lo) | ((uint32_t)__bfloat16_as_ushort(hi) << 16);
}

#if !defined(CUDASIM)

/* d = A * B + c over one 16x8x16 tile, fp32 accumulate; all 32 lanes of the warp call it */
__device__ __forceinline__ void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

__device__ __forceinline__ unsigned smem_address(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

/* ldmatrix: every lane passes its row address (lanes beyond 8 x matrices pass anything valid) */
__device__ __forceinline__ void ldmatrix_x1(uint32_t r[1], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_address(row)));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t r[2], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_address(row)));
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t r[1], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_address(row)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t r[2], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_address(row)));
}

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_address(smem)), "l"(gmem));
}
__device__ __forceinline__ void cp_async_16_zfill(void* smem, const void* gmem, bool full) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)), "l"(gmem), "r"(full ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

#else /* CUDASIM */

namespace cudasim {

struct MmaIn {
    uint32_t a[4], b[2];
    float c[4];
};
inline float bf16_lo(uint32_t r) { return __bfloat162float(__ushort_as_bfloat16((unsigned short)(r & 0xffffu))); }
inline float bf16_hi(uint32_t r) { return __bfloat162float(__ushort_as_bfloat16((unsigned short)(r >> 16))); }

/* gathers A and B from the 32 lanes' fragments, then D[m][n] = C[m][n] + sum_k A[m][k] B[k][n] in fp32
 * (each bf16 product is exact in fp32; the sum runs k = 0..15) */
inline void mma_fn(const Warp& wp) {
    float A[16][16], B[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const MmaIn* in = (const MmaIn*)wp.in[lane];
        int g = lane / 4, t = lane % 4;
        for (int r = 0; r < 4; r++) {
            int row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
            A[row][col] = bf16_lo(in->a[r]);
            A[row][col + 1] = bf16_hi(in->a[r]);
        }
        for (int r = 0; r < 2; r++) {
            B[2 * t + 8 * r][g] = bf16_lo(in->b[r]);
            B[2 * t + 8 * r + 1][g] = bf16_hi(in->b[r]);
        }
    }
    for (int lane = 0; lane < 32; lane++) {
        const MmaIn* in = (const MmaIn*)wp.in[lane];
        float* d = (float*)wp.out[lane];
        int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; i++) {
            int m = g + 8 * (i >> 1), n = 2 * t + (i & 1);
            float acc = in->c[i];
            for (int k = 0; k < 16; k++) acc += A[m][k] * B[k][n];
            d[i] = acc;
        }
    }
}

/* ldmatrix over `num` 8x8 b16 matrices; in = the lane's row address, out = its `num` registers */
template <int num, bool trans>
inline void ldmatrix_fn(const Warp& wp) {
    for (int lane = 0; lane < 32; lane++) {
        uint32_t* r = (uint32_t*)wp.out[lane];
        int g = lane / 4, t = lane % 4;
        for (int i = 0; i < num; i++) {
            unsigned short e[2];
            for (int h = 0; h < 2; h++) {
                int row = trans ? 2 * t + h : g, col = trans ? g : 2 * t + h;
                const char* p = *(const char* const*)wp.in[8 * i + row];
                if ((uintptr_t)p % 16 != 0)
                    fail("%s (%s:%d): lane %d's row address %p is not 16-byte aligned", wp.op, wp.file, wp.line, 8 * i + row, (const void*)p);
                memcpy(&e[h], p + 2 * col, 2);
            }
            r[i] = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
        }
    }
}

template <int num, bool trans>
inline void ldmatrix(const char* op, uint32_t* r, const void* row, const char* file, int line) {
    race_row_read(row, num);
    warp_collective(op, 0xffffffffu, ldmatrix_fn<num, trans>, &row, r, file, line, true);
}

} /* namespace cudasim */

inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4], CUDASIM_SITE) {
    cudasim::MmaIn in;
    memcpy(in.a, a, sizeof in.a);
    memcpy(in.b, b, sizeof in.b);
    memcpy(in.c, c, sizeof in.c);
    float out[4];
    cudasim::warp_collective("mma_m16n8k16_bf16", 0xffffffffu, cudasim::mma_fn, &in, out, cudasim_file, cudasim_line, true);
    memcpy(d, out, sizeof out);
}
inline void ldmatrix_x1(uint32_t r[1], const void* row, CUDASIM_SITE) { cudasim::ldmatrix<1, false>("ldmatrix_x1", r, row, cudasim_file, cudasim_line); }
inline void ldmatrix_x2(uint32_t r[2], const void* row, CUDASIM_SITE) { cudasim::ldmatrix<2, false>("ldmatrix_x2", r, row, cudasim_file, cudasim_line); }
inline void ldmatrix_x4(uint32_t r[4], const void* row, CUDASIM_SITE) { cudasim::ldmatrix<4, false>("ldmatrix_x4", r, row, cudasim_file, cudasim_line); }
inline void ldmatrix_x1_trans(uint32_t r[1], const void* row, CUDASIM_SITE) { cudasim::ldmatrix<1, true>("ldmatrix_x1_trans", r, row, cudasim_file, cudasim_line); }
inline void ldmatrix_x2_trans(uint32_t r[2], const void* row, CUDASIM_SITE) { cudasim::ldmatrix<2, true>("ldmatrix_x2_trans", r, row, cudasim_file, cudasim_line); }
inline void ldmatrix_x4_trans(uint32_t r[4], const void* row, CUDASIM_SITE) { cudasim::ldmatrix<4, true>("ldmatrix_x4_trans", r, row, cudasim_file, cudasim_line); }

/* the copy happens at issue, or with CUDASIM_CP_ASYNC=deferred (default under CUDASIM_SCHEDULE=reverse|shuffle)
 * at the cp_async_wait that completes its group, the destination holding NaN bytes until then (dev/cudasim) */
inline void cp_async_16(void* smem, const void* gmem, CUDASIM_SITE) {
    if ((uintptr_t)smem % 16 || (uintptr_t)gmem % 16) cudasim::fail("cp_async_16: addresses %p <- %p are not 16-byte aligned", smem, gmem);
    cudasim::cp_async_issue(smem, gmem, cudasim_file, cudasim_line);
}
/* not full: a copy of 16 zero bytes, deferred as any other (gmem is not read) */
inline void cp_async_16_zfill(void* smem, const void* gmem, bool full, CUDASIM_SITE) {
    static const unsigned char zeros[16] = {0};
    if ((uintptr_t)smem % 16 || (full && (uintptr_t)gmem % 16)) cudasim::fail("cp_async_16_zfill: addresses %p <- %p are not 16-byte aligned", smem, gmem);
    cudasim::cp_async_issue(smem, full ? gmem : (const void*)zeros, cudasim_file, cudasim_line);
}
inline void cp_async_commit() { cudasim::cp_async_commit_group(); }
template <int N>
inline void cp_async_wait() {
    static_assert(N >= 0, "cp_async_wait<N>: N groups may stay pending");
    cudasim::cp_async_wait_groups((unsigned)N);
}

#endif /* CUDASIM */

#endif /* LLMC_MMA_CUH */
