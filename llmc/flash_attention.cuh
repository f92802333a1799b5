/*
 * llmc/flash_attention.cuh — causal flash attention, forward and backward, hand-written on the tensor cores
 * (mma.sync m16n8k16 bf16 and ldmatrix through llmc/mma.cuh; no cuDNN), plus an fp32 path for the fp32 build.
 *
 * Math (s = 1/sqrt(hs), causal: key t2 <= query t):
 *   p[t,t2] = softmax_{t2<=t}(s·q_t·k_t2),  out_t = Σ_{t2<=t} p[t,t2]·v_t2,  lse_t = log Σ_{t2<=t} exp(s·q_t·k_t2)
 *   backward, with D_t = dout_t·out_t (= Σ_t2 p·(dout_t·v_t2); the fp32 path computes it so) and p recomputed as
 *   exp(s·q_t·k_t2 − lse_t):
 *   dpre[t,t2] = p[t,t2]·(dout_t·v_t2 − D_t),  dq_t = s·Σ_t2 dpre·k_t2,  dk_t2 = s·Σ_t dpre·q_t,  dv_t2 = Σ_t p·dout_t
 * Memory is O(B·NH·T): only lse (and D, dq's fp32 accumulator in the backward's scratch) are stored, never p.
 *
 * Interface (both overloads exist; a trainer calls them with floatX* and gets its precision's path):
 *   flash_attention_forward(out, lse, qkv, B, T, C, NH, stream)
 *       qkv [B,T,3C]: q at columns [0,C), k at [C,2C), v at [2C,3C); head h owns columns h·hs..h·hs+hs-1 of each
 *       (the layout of the qkv matmul's output, as llmc/cpu_ops.h). out [B,T,C]: head h
 *       at columns h·hs.. (the layout the projection matmul reads). lse [B,NH,T] fp32, natural log. Overwrites.
 *   flash_attention_backward(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, deterministic, stream)
 *       dqkv [B,T,3C] is OVERWRITTEN (every element written, dq|dk|dv as qkv). dout, out [B,T,C]. scratch: device
 *       memory of flash_attention_scratch_bytes(B, T, C, NH) bytes, float aligned (scalar accesses), contents not kept.
 *       deterministic = 0: dq accumulated with fp32 atomics (one pass over the K/V tiles, fastest; the order of the
 *       atomic adds varies run to run); 1: dq computed by a separate pass in a fixed order, bit-identical run to
 *       run. The fp32 path is always deterministic (no atomics) and ignores the flag.
 *   Requirements (checked, one-line error and exit 1 otherwise): NH > 0, C % NH == 0, hs = C/NH at most 256, B, T >= 0,
 *   B, NH and ceil(T/64) at most 65535 (grid dimensions); pointers aligned to their element. Any T (tiles are masked and zero-filled). Any hs: a multiple of 8 with 16-byte
 *   aligned buffers at full speed (16-byte cp.async copies); others (e.g. 12, or odd; or buffers at any address, as a
 *   layer's slice of a model whose channels are no multiple of 8) staged and stored element by element (the
 *   kernels' ALIGNED = false instances), as a head's columns then do not start on 16 bytes.
 *
 * bf16 path, decomposition (FA_BLOCK = 64, 4 warps per block, each warp owns 16 rows of the block's 64; at HD <= 64
 * every kernel gives each warp 32 rows of 128, and the forward at HD = 128 too: FA_FWD_MT, FA_KV_MT, FA_DQ_MT):
 *   head dims are padded (zeros in shared memory) to HD ∈ {32, 64, 128, 256}; shared tiles are 64 x HD bf16 with a
 *   row stride of HD + 8 elements, so the 8 rows of every ldmatrix fall in different banks.
 *   grids (h, b, tile) (fa_grid: the tile index slowest, so every head's longest tiles are dispatched first).
 *   forward:      block (h, b, query tile), longest tiles first. Q tile -> registers (A fragments; at HD = 256, and
 *                 HD = 128 with 32 rows a warp, read from shared memory per k-chunk instead); K/V tiles of 64 keys
 *                 double-buffered in shared memory by cp.async (at HD = 128 worked in halves of 32 keys), only
 *                 tiles 0..diagonal visited, and in the
 *                 diagonal tile each warp skips the 8-key column tiles past its last row; scores are tested
 *                 against the causal and T masks only in sub-tiles that may need it (fa_with_mask; interior ones compile
 *                 without the tests). S = QKᵀ (mma),
 *                 online softmax in fp32 with fast_exp2f (s·log2 e applied in the exponent's FMA), row max over the 4
 *                 lanes of a row (shfl_xor 1, 2), O rescaled only when a row's max passes its reference by
 *                 FA_RESCALE_SLACK; P goes from C fragments straight to bf16 A fragments; O += PV, row sums += P·1
 *                 (an mma against ones).
 *   backward:     (1) delta kernel: D = rowsum(dout∘out), and zeroes the dq accumulator (atomic mode);
 *                 (2) K/V kernel, block (h, b, K/V tile): K, V read by ldmatrix from shared memory, dK, dV in fp32
 *                 registers; loops over the query tiles from the diagonal on (Q, dO, lse, D double-buffered for
 *                 HD <= 128; at 32 keys a warp each tile is worked in two halves of 32 queries), recomputes Pᵀ = exp2(K Qᵀ·s·log2 e − lse·log2 e), dV += Pᵀ dO, dPᵀ = V dOᵀ,
 *                 dSᵀ = Pᵀ∘(dPᵀ − D), dK += dSᵀ Q; atomic mode: dSᵀ goes to shared memory and each warp adds
 *                 dS K for 16 queries into the fp32 accumulator with atomicAdd, then a kernel scales it into dqkv;
 *                 (3, deterministic mode) dQ kernel, block (h, b, query tile), the forward's structure (K/V tiles
 *                 worked in halves of 32 keys): dQ += dS K.
 * fp32 path: same blocks of rows but 8 warps, one row each; K/V (or Q/dO) tiles of 32 rows staged in shared memory,
 *   lane j scores row j of the tile, and each lane accumulates head dims lane, lane+32, ... (no tensor cores). Its
 *   D = Σ p·dp / Σ p is summed in double from the same p and dp the dS kernels recompute (a pass over the keys, as
 *   the dq kernel's) and dp − D formed in double, so dS cancels as exactly as the math allows.
 * Precision limit (bf16 path, as FlashAttention-2's formula): D = rowsum(dout∘out) carries out's bf16 rounding (and
 *   P's, rounded to bf16 for the PV mma), and dS = P∘(dP − D) amplifies it by 1/(1 − p_max) in a row where one key
 *   takes nearly all the probability: such rows' dq and dk are off by ~2⁻⁹·|dout|·|v| absolute, which is a large
 *   relative error when they are most of the tensor (B = NH = 1 at T = 2 or 3 with p_max ~0.99: 0.4 relative L2 seen,
 *   against 1e-2 at B = 2, NH = 3 from T = 17 on, and on every reference state). Exact D would cost a second pass over
 *   QKᵀ and dO·Vᵀ (~+40% backward). With a saturated softmax (scores ~1e5, P one-hot; a reference state taken after
 *   one step at lr 10 without clipping) the fp32 build's gradients below attention differed from PyTorch's by up to
 *   15% when D was rowsum(dout∘out); ordinary states are well within the test bounds.
 * No global state.
 */
#ifndef LLMC_FLASH_ATTENTION_CUH
#define LLMC_FLASH_ATTENTION_CUH

#include "llmc/cuda_utils.cuh"
#include "llmc/mma.cuh"

#define FA_BLOCK 64   /* query rows per block, keys per K/V tile (bf16 path) */
#define FA_THREADS 128 /* 4 warps x 16 rows */
#define FA32_ROWS 8   /* fp32 path: rows per block, one per warp */
#define FA32_TILE 32  /* fp32 path: rows of a staged tile, one per lane */
#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f
#define FA_RESCALE_SLACK 8.0f /* forward: how far (log2 units) a row's maximum may pass its reference before O is rescaled */
/* __launch_bounds__'s minimum blocks per SM of the forward and K/V backward kernels. HD >= 128: their shared memory
 * (>= 87 KiB) leaves room for at most two blocks an SM, so 255 registers a thread (two blocks' worth) cost no
 * occupancy, and 1 lets ptxas use them all (without it ptxas spilled in the K/V kernel at HD = 128 on sm_90, in the
 * forward at HD = 128 on sm_80, and held the K/V kernel at HD = 256 to 168 registers on sm_80). 0: no hint, as the
 * one-argument form (no .minnctapersm in the PTX). */
#define FA_MIN_BLOCKS(HD) ((HD) >= 128 ? 1 : 0)
/* full unrolling of the fragment loops, so register arrays stay in registers (the simulator has no unroll pragma) */
#if defined(CUDASIM)
#define FA_UNROLL
#else
#define FA_UNROLL _Pragma("unroll")
#endif

/* ---------------------------------------------------------------------------------------------------------------
 * bf16 path: warp-level building blocks. `tile` is a shared 64 x HD bf16 tile with row stride HD + 8. */

/* Stages rows row0..row0+ROWS-1 (64 by default, 64·MT for a kernel's MT row blocks) of one head's slice into `tile`
 * by cp.async: row r from src + (row0 + r)·row_stride, columns [0, hs); columns hs..HD-1 and rows >= T are
 * zero-filled (cp_async_16_zfill: no branch per chunk). All threads of the block call it; thread i copies the
 * 16-byte chunk i % (HD/8) of rows i / (HD/8), + 128/(HD/8), ... (a fixed column: no per-chunk division; passes
 * counted from 0, so the unrolled loop has no exit tests; a stepped source pointer instead made ptxas spill in the
 * K/V backward at HD = 128). ALIGNED false (fa_aligned: hs not a multiple of 8, or buffers not
 * 16-byte aligned; a head's columns do not start on 16 bytes): each chunk is copied element by element with plain
 * loads and stores. The kernels take ALIGNED as a template parameter, so that the fast path's code is as without it (a
 * run-time test here made ptxas spill in the K/V backward). */
template <int HD, bool ALIGNED, int ROWS = FA_BLOCK>
__device__ inline void fa_load_tile(__nv_bfloat16* tile, const __nv_bfloat16* src, long row_stride, int row0, int T, int hs) {
    constexpr int chunks = HD / 8, rows_per_pass = FA_THREADS / chunks;
    static_assert(FA_THREADS % chunks == 0 && ROWS % rows_per_pass == 0, "fa_load_tile: whole rows per pass");
    int c = (threadIdx.x % chunks) * 8, r0 = threadIdx.x / chunks;
    int rows_in = c < hs ? T - row0 : 0; /* rows r < rows_in hold data */
FA_UNROLL
    for (int pass = 0; pass < ROWS / rows_per_pass; pass++) {
        int r = r0 + pass * rows_per_pass;
        __nv_bfloat16* dst = tile + r * (HD + 8) + c;
        const __nv_bfloat16* from = src + (long)(row0 + r) * row_stride + c;
        if (ALIGNED) cp_async_16_zfill(dst, from, r < rows_in);
        else
            for (int i = 0; i < 8; i++) dst[i] = r < rows_in && c + i < hs ? from[i] : __float2bfloat16(0.0f);
    }
}

/* a = the A fragment of rows row0..row0+15, columns 16kk..16kk+15 of `tile` (ldmatrix_x4: lanes 0-15 point at
 * rows 0-15 of columns 16kk..+7, lanes 16-31 at columns 16kk+8..+15) */
template <int HD>
__device__ inline void fa_load_a_chunk(uint32_t a[4], const __nv_bfloat16* tile, int row0, int kk) {
    int lane = threadIdx.x % 32;
    ldmatrix_x4(a, tile + (row0 + lane % 16) * (HD + 8) + 16 * kk + 8 * (lane / 16));
}

/* acc[n][0..3] = 0 for n < N: N C fragments */
template <int N>
__device__ __forceinline__ void fa_zero(float acc[N][4]) {
FA_UNROLL
    for (int n = 0; n < N; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

/* a[kk] for every k-chunk: the warp's 16 rows of `tile` as A fragments in registers */
template <int HD>
__device__ inline void fa_load_a(uint32_t a[HD / 16][4], const __nv_bfloat16* tile, int row0) {
    FA_UNROLL
    for (int kk = 0; kk < HD / 16; kk++) fa_load_a_chunk<HD>(a[kk], tile, row0, kk);
}

/* acc[m] = the 16 x 8·NJ product A_m·tileᵀ as NJ 16x8 C fragments (acc[m][j] = columns 8j..8j+7, i.e. tile rows
 * 8j..8j+7; NJ = 8: 64 columns), for the MT row blocks m of a warp. A_m (16 x HD) is a_regs[m] (registers, A_IN_SMEM false) or rows
 * a_row0 + 16m..+15 of the shared a_tile, read one k-chunk at a time (A_IN_SMEM true: saves HD/4 registers per row
 * block). Column tiles j >= n_tiles are zero, not computed. B fragments by ldmatrix_x4: matrix i = tile rows
 * 8j..8j+7, columns 16kk + 8i, giving b for k-chunks kk, kk+1; each b serves all MT row blocks (shared-memory
 * bytes per mma: 256 / MT). A caller with one row block passes &acc and &a_regs of its [8][4] and [HD/16][4]. */
#define FA_A_IN_SMEM(HD) ((HD) > 128) /* forward and dQ kernels: Q (dO) fragments stay in registers up to HD = 128 (at MT = 1) */
template <int HD, bool A_IN_SMEM, int MT, int NJ = 8>
__device__ inline void fa_mma_abt(float acc[MT][NJ][4], const uint32_t a_regs[MT][HD / 16][4], const __nv_bfloat16* a_tile, int a_row0,
                                  const __nv_bfloat16* tile, int n_tiles) {
    int lane = threadIdx.x % 32;
FA_UNROLL
    for (int m = 0; m < MT; m++) fa_zero<NJ>(acc[m]);
FA_UNROLL
    for (int kk = 0; kk < HD / 16; kk += 2) {
        uint32_t a[MT][2][4];
FA_UNROLL
        for (int m = 0; m < MT; m++)
FA_UNROLL
            for (int c = 0; c < 2; c++) {
                if (A_IN_SMEM) fa_load_a_chunk<HD>(a[m][c], a_tile, a_row0 + 16 * m, kk + c);
                else for (int r = 0; r < 4; r++) a[m][c][r] = a_regs[m][kk + c][r];
            }
FA_UNROLL
        for (int j = 0; j < NJ; j++) {
            if (j < n_tiles) {
                uint32_t b[4];
                ldmatrix_x4(b, tile + (8 * j + lane % 8) * (HD + 8) + 16 * kk + 8 * (lane / 8));
FA_UNROLL
                for (int m = 0; m < MT; m++) {
                    mma_m16n8k16_bf16(acc[m][j], a[m][0], b, acc[m][j]);
                    mma_m16n8k16_bf16(acc[m][j], a[m][1], b + 2, acc[m][j]);
                }
            }
        }
    }
}

/* acc[m] (16 x HD as C fragments, acc[m][n] = columns 8n..8n+7) += P_m·tile for the MT row blocks m of a warp,
 * P_m 16 x 16·KC in registers as A fragments (p[m][kc] = columns 16kc..16kc+15). k-chunks kc >= k_chunks are skipped
 * (their P must be zero in every row block). B fragments by ldmatrix_x4_trans: lanes 0-15 point at tile rows
 * 16kc + 0..15 of columns 8n, lanes 16-31 of columns 8n + 8; each serves all MT row blocks. */
template <int HD, int MT, int KC = 4>
__device__ inline void fa_mma_ab(float acc[MT][HD / 8][4], const uint32_t p[MT][KC][4], const __nv_bfloat16* tile, int k_chunks) {
    int lane = threadIdx.x % 32;
FA_UNROLL
    for (int kc = 0; kc < KC; kc++) {
        if (kc < k_chunks) {
FA_UNROLL
            for (int n = 0; n < HD / 8; n += 2) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, tile + (16 * kc + lane % 16) * (HD + 8) + 8 * n + 8 * (lane / 16));
FA_UNROLL
                for (int m = 0; m < MT; m++) {
                    mma_m16n8k16_bf16(acc[m][n], p[m][kc], b, acc[m][n]);
                    mma_m16n8k16_bf16(acc[m][n + 1], p[m][kc], b + 2, acc[m][n + 1]);
                }
            }
        }
    }
}

/* the bf16 A fragments of a 16 x 8·NJ matrix held as NJ 16x8 C fragments: k-chunk kc = column tiles 2kc, 2kc+1
 * (a C fragment's c[0..1] / c[2..3] are exactly the A fragment's rows g / g+8 at columns 2t, 2t+1) */
template <int NJ = 8>
__device__ inline void fa_c_to_a(uint32_t a[NJ / 2][4], const float c[NJ][4]) {
FA_UNROLL
    for (int kc = 0; kc < NJ / 2; kc++) {
        a[kc][0] = pack_bf16x2(__float2bfloat16(c[2 * kc][0]), __float2bfloat16(c[2 * kc][1]));
        a[kc][1] = pack_bf16x2(__float2bfloat16(c[2 * kc][2]), __float2bfloat16(c[2 * kc][3]));
        a[kc][2] = pack_bf16x2(__float2bfloat16(c[2 * kc + 1][0]), __float2bfloat16(c[2 * kc + 1][1]));
        a[kc][3] = pack_bf16x2(__float2bfloat16(c[2 * kc + 1][2]), __float2bfloat16(c[2 * kc + 1][3]));
    }
}

/* calls f(row, col, x0, x1) for each pair of elements a lane holds in a warp's 16 x HD C fragments acc (acc[n] =
 * columns 8n..8n+7): x0, x1 at rows row0 + g + 8r (those < T), columns col = 8n + 2t and col + 1 (those with col < hs;
 * when hs is odd, col + 1 = hs is past the head for col = hs - 1: f must not write it) */
template <int HD, typename F>
__device__ __forceinline__ void fa_for_each_pair(const float acc[HD / 8][4], int row0, int T, int hs, F f) {
    int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, cols = hs - 2 * t; /* col < hs: 8n < cols, a constant's test */
FA_UNROLL
    for (int r = 0; r < 2; r++) {
        int row = row0 + g + 8 * r;
        if (row >= T) continue;
FA_UNROLL
        for (int n = 0; n < HD / 8; n++)
            if (8 * n < cols) f(row, 8 * n + 2 * t, acc[n][2 * r], acc[n][2 * r + 1]);
    }
}

/* the inverse of fa_load_a on a 16 x 16·k_chunks matrix: writes the A fragments a (a[kc] = columns 16kc..16kc+15;
 * a[kc][i] = row g + 8(i&1), columns 16kc + 8(i>>1) + 2t, +1; kc < k_chunks <= 4) to rows row0..row0+15, columns
 * 0..16·k_chunks-1 of the shared bf16 matrix dst (row stride `stride`), one 4-byte store per register */
__device__ inline void fa_store_a(__nv_bfloat16* dst, int stride, const uint32_t a[4][4], int row0, int k_chunks) {
    int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
FA_UNROLL
    for (int kc = 0; kc < k_chunks; kc++)
FA_UNROLL
        for (int i = 0; i < 4; i++) *(uint32_t*)(dst + (row0 + g + 8 * (i & 1)) * stride + 16 * kc + 8 * (i >> 1) + 2 * t) = a[kc][i];
}

/* writes a warp's 16 x HD C fragments, times `scale`, to rows row0 + 0..15 (those < T), columns [0, hs) of
 * dst + row·row_stride, as bf16 pairs (ALIGNED false: one element at a time, as an odd hs puts odd heads' columns
 * at odd addresses) */
template <int HD, bool ALIGNED>
__device__ inline void fa_store_rows(__nv_bfloat16* dst, long row_stride, const float acc[HD / 8][4], float scale, int row0, int T, int hs) {
    fa_for_each_pair<HD>(acc, row0, T, hs, [&](int row, int col, float x0, float x1) {
        __nv_bfloat16* to = dst + row * row_stride + col;
        if (ALIGNED) *(__nv_bfloat162*)to = __floats2bfloat162_rn(x0 * scale, x1 * scale);
        else {
            to[0] = __float2bfloat16(x0 * scale);
            if (col + 1 < hs) to[1] = __float2bfloat16(x1 * scale);
        }
    });
}

/* number of 8-key column tiles of the K/V tile at k0 that hold a key <= the warp's last row (warp_row0 + rows - 1,
 * at least k0) and < T */
__device__ inline int fa_key_tiles(int warp_row0, int rows, int k0, int T) {
    return min(min(8, (warp_row0 + rows - 1 - k0) / 8 + 1), (T - k0 + 7) / 8);
}

/* f(kh, n_tiles) for each sub-tile of KS keys (k0 + kh .., kh = 0, KS, ..) of the K/V tile at k0 that holds a key
 * the warp's rows (warp_row0 .. warp_row0 + rows - 1) see, below T; n_tiles = its 8-key column tiles holding one */
template <int KS, typename F>
__device__ __forceinline__ void fa_key_subtiles(int k0, int warp_row0, int rows, int T, F f) {
    for (int kh = 0; kh < FA_BLOCK; kh += KS) {
        int n_tiles = min(KS / 8, fa_key_tiles(warp_row0, rows, k0 + kh, T));
        if (k0 + kh >= warp_row0 + rows || n_tiles <= 0) break;
        f(kh, n_tiles);
    }
}

/* 2^x: fast_exp2f (FAST), else exp2f */
template <bool FAST>
__device__ __forceinline__ float fa_exp2(float x) {
    return FAST ? fast_exp2f(x) : exp2f(x);
}

/* f(FaMask<true>()) if some score of the warp's 16 x 64 tile may be masked (causality, or a query or key >= T),
 * else f(FaMask<false>()): f tests `mask.on`, a constant, so the per-element tests compile away on interior
 * tiles (most of a long sequence's) */
template <bool ON>
struct FaMask {
    static constexpr bool on = ON;
};
template <typename F>
__device__ __forceinline__ void fa_with_mask(bool masked, F f) {
    if (masked) f(FaMask<true>());
    else f(FaMask<false>());
}

/* masks a warp's MT row blocks of 16 x 8·NJ scores held as C fragments (s[m][j][2r + e]: row 16m + g + 8r, column
 * 8j + 2t + e): an element becomes -INFINITY (so its exp2 is 0) where its column is >= limit(m, r). One compare and
 * one select an element: the columns are constants, the limit is per row. */
template <int MT, int NJ, typename Limit>
__device__ __forceinline__ void fa_mask(float s[MT][NJ][4], Limit limit) {
    int t = threadIdx.x % 4;
FA_UNROLL
    for (int m = 0; m < MT; m++)
FA_UNROLL
        for (int r = 0; r < 2; r++) {
            int lim = limit(m, r) - 2 * t;
FA_UNROLL
            for (int j = 0; j < NJ; j++)
FA_UNROLL
                for (int e = 0; e < 2; e++)
                    if (8 * j + e >= lim) s[m][j][2 * r + e] = -INFINITY;
        }
}

/* closes the cp.async group of the loads issued so far, waits until at most `pending` groups are still in flight,
 * then a barrier: the tiles of the older groups are ready for every warp */
template <int pending>
__device__ __forceinline__ void fa_tiles_ready() {
    cp_async_commit();
    cp_async_wait<pending>();
    __syncthreads();
}

/* stages the K and V tiles of keys row0..row0+63 of the head slice at `base` (k at base + C, v at base + 2C) */
template <int HD, bool ALIGNED>
__device__ inline void fa_load_kv(__nv_bfloat16* k_tile, __nv_bfloat16* v_tile, const __nv_bfloat16* base, int C, int row0, int T, int hs) {
    fa_load_tile<HD, ALIGNED>(k_tile, base + C, 3L * C, row0, T, hs);
    fa_load_tile<HD, ALIGNED>(v_tile, base + 2 * C, 3L * C, row0, T, hs);
}

/* The key loop of the forward and dQ kernels (a block of queries, warp rows warp_row0..warp_row0 + rows - 1):
 * K/V tiles it = 0..n_kv-1 (keys 64·it..) double-buffered in kv_smem (K[2] then V[2], 64 x HD tiles): tile it + 1
 * is staged by cp.async while tile it is used. The caller's loads still uncommitted (its Q tiles) join tile 0's
 * group; first() runs once they are in shared memory (the fragments a warp keeps in registers: read before the
 * loop, not tested for in it). body(k0, k_tile, v_tile) runs on the warps with rows < T and a row >= k0 (one that
 * sees a key of the tile; fa_key_subtiles splits it); barriers between tiles (the buffer just read is the next
 * prefetch target). */
template <int HD, bool ALIGNED, typename First, typename Body>
__device__ __forceinline__ void fa_key_loop(__nv_bfloat16* kv_smem, const __nv_bfloat16* base, int C, int n_kv, int warp_row0, int rows, int T, int hs,
                                            First first, Body body) {
    constexpr int tile_elems = FA_BLOCK * (HD + 8);
    __nv_bfloat16* k_tiles = kv_smem;
    __nv_bfloat16* v_tiles = kv_smem + 2 * tile_elems;
    fa_load_kv<HD, ALIGNED>(k_tiles, v_tiles, base, C, 0, T, hs);
    fa_tiles_ready<0>();
    first();
    for (int it = 0; it < n_kv; it++) {
        int buf = it & 1, k0 = it * FA_BLOCK;
        if (it + 1 < n_kv) fa_load_kv<HD, ALIGNED>(k_tiles + (buf ^ 1) * tile_elems, v_tiles + (buf ^ 1) * tile_elems, base, C, k0 + FA_BLOCK, T, hs);
        fa_tiles_ready<1>();
        if (warp_row0 < T && k0 < warp_row0 + rows) body(k0, k_tiles + buf * tile_elems, v_tiles + buf * tile_elems);
        __syncthreads();
    }
}

/* ---------------------------------------------------------------------------------------------------------------
 * bf16 forward. Each warp owns MT row blocks of 16 queries (32 at MT = 2: every K or V fragment read from shared
 * memory then feeds two mma, halving the shared-memory bytes per mma); a block holds 64·MT queries. Each K/V tile
 * is worked in sub-tiles of KS keys (KS = 32 at HD = 128, so MT x the 16 x 128 output and the score tiles fit in
 * registers, Q fragments then read from shared memory). Grid fa_grid (NH, B, ceil(T/(64·MT))), 128 threads, dynamic smem
 * MT + 4 tiles (MT Q tiles, K[2], V[2]). */
#define FA_FWD_MT(HD) ((HD) <= 128 ? 2 : 1) /* the forward's row blocks per warp: 2 where the registers allow */
#define FA_KS(HD, MT) ((MT) == 1 || (HD) <= 64 ? FA_BLOCK : 32) /* the forward's keys per sub-tile */
template <int HD, int MT, bool ALIGNED>
__global__ void __launch_bounds__(FA_THREADS, FA_MIN_BLOCKS(HD)) flash_attention_forward_kernel(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int T, int C, int NH) {
    constexpr int KS = FA_KS(HD, MT), NJ = KS / 8;
    constexpr bool a_in_smem = FA_A_IN_SMEM(HD) || MT * HD > 128; /* Q fragments: registers up to MT·HD = 128 */
    DYNAMIC_SMEM(__nv_bfloat16, smem);
    __nv_bfloat16* q_tile = smem; /* 64·MT rows, then K[2], V[2] */
    int hs = C / NH, q_block = gridDim.z - 1 - blockIdx.z, h = blockIdx.x, b = blockIdx.y;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int q0 = q_block * FA_BLOCK * MT, warp_row0 = q0 + 16 * MT * warp;
    int n_kv = min(MT * (q_block + 1), (T + FA_BLOCK - 1) / FA_BLOCK); /* key tiles up to the block's last query */
    long row_stride = 3L * C;
    const __nv_bfloat16* base = qkv + (long)b * T * row_stride + h * hs;
    float scale_log2 = FA_LOG2E / sqrtf((float)hs);

    fa_load_tile<HD, ALIGNED, FA_BLOCK * MT>(q_tile, base, row_stride, q0, T, hs);
    uint32_t q_frag[MT][HD / 16][4]; /* used when !a_in_smem */
    float o[MT][HD / 8][4];
FA_UNROLL
    for (int m = 0; m < MT; m++) fa_zero<HD / 8>(o[m]);
    /* row_max[m][r]: row 16m + g + 8r of the warp, log2 units. row_sum[m]: a C fragment of a 16 x 8 tile each of whose
     * columns is Σ P of its row so far (row_sum[m][2r], [2r + 1]: row 16m + g + 8r), summed as P·1 on the tensor
     * cores (one mma per 16 keys instead of an add per score) from the bf16 P that O sums */
    float row_max[MT][2], row_sum[MT][4];
    const uint32_t ones[2] = {0x3F803F80u, 0x3F803F80u}; /* a B fragment of bf16 ones (0x3F80 = 1.0) */
FA_UNROLL
    for (int m = 0; m < MT; m++) {
        row_max[m][0] = row_max[m][1] = -INFINITY;
        fa_zero<1>(&row_sum[m]);
    }
    fa_key_loop<HD, ALIGNED>(smem + MT * FA_BLOCK * (HD + 8), base, C, n_kv, warp_row0, 16 * MT, T, hs, [&]() {
        if (!a_in_smem)
FA_UNROLL
            for (int m = 0; m < MT; m++) fa_load_a<HD>(q_frag[m], q_tile, 16 * (MT * warp + m));
    }, [&](int k0, const __nv_bfloat16* k_tile, const __nv_bfloat16* v_tile) {
        fa_key_subtiles<KS>(k0, warp_row0, 16 * MT, T, [&](int kh, int tiles_seen) { /* keys ks0 .. ks0 + KS - 1 */
            int ks0 = k0 + kh;
            /* an interior sub-tile (every key <= the warp's first row, < T) sees all NJ column tiles: a constant there,
             * so the mma loops' tile tests and the mask compile away */
            fa_with_mask(ks0 + KS - 1 > warp_row0 || ks0 + KS > T, [&](auto mask) {
                int n_tiles = mask.on ? tiles_seen : NJ;
                float s[MT][NJ][4];
                fa_mma_abt<HD, a_in_smem, MT, NJ>(s, q_frag, q_tile, 16 * MT * warp, k_tile + kh * (HD + 8), n_tiles);
                /* a sub-tile that may hold masked scores: keys ks0 + c with c < min(row + 1, T) - ks0 seen (the column
                 * tiles j >= n_tiles, not computed, lie past that) */
                if (mask.on) fa_mask<MT, NJ>(s, [&](int m, int r) { return min(warp_row0 + 16 * m + g + 8 * r + 1, T) - ks0; });
                /* the new row maxima; O and the sums are rescaled to them only when one exceeds its row's reference
                 * by more than FA_RESCALE_SLACK (some row of the warp: the test is the warp's), so most tiles skip the
                 * rescale; P up to 2^FA_RESCALE_SLACK is exact in the end, as O and the sums share the reference */
                float mx[MT][2];
                bool grow = false;
FA_UNROLL
                for (int m = 0; m < MT; m++)
FA_UNROLL
                    for (int r = 0; r < 2; r++) {
                        float x = -INFINITY; /* of the unscaled scores: the scale is positive, so scaling keeps the maximum */
FA_UNROLL
                        for (int j = 0; j < NJ; j++) x = fmaxf(x, fmaxf(s[m][j][2 * r], s[m][j][2 * r + 1]));
                        x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, 1));
                        x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, 2));
                        mx[m][r] = fmaxf(row_max[m][r], x * scale_log2);
                        grow |= mx[m][r] > row_max[m][r] + FA_RESCALE_SLACK;
                    }
                if (__any_sync(FULL_MASK, grow))
FA_UNROLL
                    for (int m = 0; m < MT; m++)
FA_UNROLL
                        for (int r = 0; r < 2; r++) {
                            /* a row with no key yet keeps -INFINITY: its correction is 0 (everything 0, not NaN) */
                            float correction = fast_exp2f(row_max[m][r] - (mx[m][r] == -INFINITY ? 0.0f : mx[m][r]));
                            row_max[m][r] = mx[m][r];
                            row_sum[m][2 * r] *= correction;
                            row_sum[m][2 * r + 1] *= correction;
FA_UNROLL
                            for (int n = 0; n < HD / 8; n++) {
                                o[m][n][2 * r] *= correction;
                                o[m][n][2 * r + 1] *= correction;
                            }
                        }
FA_UNROLL
                for (int m = 0; m < MT; m++)
FA_UNROLL
                    for (int r = 0; r < 2; r++) {
                        float ref = row_max[m][r] == -INFINITY ? 0.0f : row_max[m][r];
FA_UNROLL
                        for (int j = 0; j < NJ; j++) {
                            s[m][j][2 * r] = fast_exp2f(fmaf(s[m][j][2 * r], scale_log2, -ref));
                            s[m][j][2 * r + 1] = fast_exp2f(fmaf(s[m][j][2 * r + 1], scale_log2, -ref));
                        }
                    }
                uint32_t p[MT][NJ / 2][4];
FA_UNROLL
                for (int m = 0; m < MT; m++) {
                    fa_c_to_a<NJ>(p[m], s[m]);
FA_UNROLL
                    for (int kc = 0; kc < NJ / 2; kc++)
                        if (kc < (n_tiles + 1) / 2) mma_m16n8k16_bf16(row_sum[m], p[m][kc], ones, row_sum[m]);
                }
                fa_mma_ab<HD, MT, NJ / 2>(o, p, v_tile + kh * (HD + 8), (n_tiles + 1) / 2);
            });
        });
    });
    if (warp_row0 >= T) return;
FA_UNROLL
    for (int m = 0; m < MT; m++) {
        float inv[2];
FA_UNROLL
        for (int r = 0; r < 2; r++) {
            float sum = row_sum[m][2 * r];
            inv[r] = 1.0f / sum;
            int row = warp_row0 + 16 * m + g + 8 * r;
            if (t == 0 && row < T) lse[((long)b * NH + h) * T + row] = (row_max[m][r] + log2f(sum)) * FA_LN2;
        }
FA_UNROLL
        for (int n = 0; n < HD / 8; n++) {
            o[m][n][0] *= inv[0];
            o[m][n][1] *= inv[0];
            o[m][n][2] *= inv[1];
            o[m][n][3] *= inv[1];
        }
        fa_store_rows<HD, ALIGNED>(out + (long)b * T * C + h * hs, C, o[m], 1.0f, warp_row0 + 16 * m, T, hs);
    }
}

/* ---------------------------------------------------------------------------------------------------------------
 * bf16 backward: delta[b,h,t] = Σ_i dout[b,t,h·hs+i]·out[b,t,h·hs+i], and (dq_accum non-null) zeroes
 * dq_accum[b,t,h·hs..h·hs+hs-1]. One warp per (b, t, h), lanes over the head dims, fixed-order warp sum. */
__global__ void flash_attention_delta_kernel(float* delta, float* dq_accum, const __nv_bfloat16* dout, const __nv_bfloat16* out, int B, int T, int C, int NH) {
    long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= (long)B * T * NH) return;
    int lane = threadIdx.x % 32, hs = C / NH, h = row % NH;
    long bt = row / NH;
    const __nv_bfloat16* d = dout + bt * C + h * hs;
    const __nv_bfloat16* o = out + bt * C + h * hs;
    float sum = 0.0f;
    for (int i = lane; i < hs; i += 32) {
        sum += (float)d[i] * (float)o[i];
        if (dq_accum) dq_accum[bt * C + h * hs + i] = 0.0f;
    }
    sum = warp_sum(sum);
    long b = bt / T, t = bt % T;
    if (lane == 0) delta[(b * NH + h) * T + t] = sum;
}

/* bf16 backward, K/V kernel. Each warp owns MT row blocks of 16 keys (FA_KV_MT: 2 at HD <= 64, so every Q or dO
 * fragment read from shared memory feeds MT mma); a block holds 64·MT keys, grid fa_grid (NH, B, ceil(T/(64·MT))), 128
 * threads. Query tiles of 64 from the block's first key on, each worked in sub-tiles of QS = 64/MT queries (the
 * registers hold MT x (dK, dV) and MT x two 16 x QS score tiles); a warp skips a sub-tile whose queries all precede
 * its keys. Shared: K, V (64·MT rows each), STAGES x (Q, dO tiles), STAGES x (lse·log2 e, delta) for 64 queries,
 * then (atomic mode) the dSᵀ tile (64·MT keys x 64 queries, stride 72). dq_accum null: dK, dV only (deterministic
 * mode). */
#define FA_KV_MT(HD) ((HD) <= 64 ? 2 : 1)
template <int HD, int MT>
struct FaBackwardSmem {
    static constexpr int mt = MT;
    static constexpr int keys = FA_BLOCK * mt; /* keys per block */
    static constexpr int qs = FA_BLOCK / mt;   /* queries per sub-tile */
    static constexpr int stages = HD <= 128 ? 2 : 1;
    static constexpr int tile_elems = FA_BLOCK * (HD + 8);
    static constexpr int ds_stride = FA_BLOCK + 8;
    /* shared bytes of the deterministic mode; the atomic mode's dSᵀ tile comes last, so it adds ds_bytes (without it, at
     * HD = 64 and 128 keys a block, two blocks fit in an A100's shared memory) */
    static constexpr size_t bytes = (size_t)(2 * mt + 2 * stages) * tile_elems * 2 + (size_t)stages * 2 * FA_BLOCK * 4;
    static constexpr size_t ds_bytes = (size_t)keys * ds_stride * 2;
    /* HD >= 128: exp2f, and one copy of the score loop (masked): with fast_exp2f, or with an unmasked copy too,
     * ptxas spills at 255 registers */
    static constexpr bool lean = HD < 128;
};

template <int HD, int MT, bool ALIGNED>
__global__ void __launch_bounds__(FA_THREADS, FA_MIN_BLOCKS(HD)) flash_attention_backward_kv_kernel(__nv_bfloat16* dqkv, float* dq_accum, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                                                                           const float* lse, const float* delta, int T, int C, int NH) {
    typedef FaBackwardSmem<HD, MT> L;
    constexpr int QS = L::qs;
    DYNAMIC_SMEM(__nv_bfloat16, smem);
    __nv_bfloat16* k_tile = smem;                                             /* 64·MT rows */
    __nv_bfloat16* v_tile = smem + MT * L::tile_elems;                        /* 64·MT rows */
    __nv_bfloat16* q_tiles = smem + 2 * MT * L::tile_elems;                   /* stages buffers */
    __nv_bfloat16* do_tiles = smem + (2 * MT + L::stages) * L::tile_elems;    /* stages buffers */
    float* lse_s = (float*)(smem + (2 * MT + 2 * L::stages) * L::tile_elems); /* [stages][64], times log2 e */
    float* delta_s = lse_s + L::stages * FA_BLOCK;                             /* [stages][64] */
    __nv_bfloat16* ds_tile = (__nv_bfloat16*)(delta_s + L::stages * FA_BLOCK); /* dSᵀ[key][query], atomic mode only */
    int hs = C / NH, kv_block = blockIdx.z, h = blockIdx.x, b = blockIdx.y;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int k0 = kv_block * L::keys, warp_key0 = k0 + 16 * MT * warp, n_q = (T + FA_BLOCK - 1) / FA_BLOCK - k0 / FA_BLOCK;
    long row_stride = 3L * C;
    const __nv_bfloat16* base = qkv + (long)b * T * row_stride + h * hs;
    const __nv_bfloat16* dout_base = dout + (long)b * T * C + h * hs;
    const float* lse_row = lse + ((long)b * NH + h) * T;
    const float* delta_row = delta + ((long)b * NH + h) * T;
    float scale = 1.0f / sqrtf((float)hs), scale_log2 = scale * FA_LOG2E;

    /* stages query tile `it` (rows k0 + 64·it ..) into buffer `stage` */
    auto load_query_tile = [&](int it, int stage) {
        int m0 = k0 + it * FA_BLOCK;
        fa_load_tile<HD, ALIGNED>(q_tiles + stage * L::tile_elems, base, row_stride, m0, T, hs);
        fa_load_tile<HD, ALIGNED>(do_tiles + stage * L::tile_elems, dout_base, C, m0, T, hs);
        int i = threadIdx.x % FA_BLOCK;
        bool in = m0 + i < T;
        if (threadIdx.x < FA_BLOCK) lse_s[stage * FA_BLOCK + i] = in ? lse_row[m0 + i] * FA_LOG2E : 0.0f;
        else delta_s[stage * FA_BLOCK + i] = in ? delta_row[m0 + i] : 0.0f;
    };
    /* one 64-row tile at a time: K and V as single 64·MT-row loads made ptxas spill more at HD = 64 on sm_80 */
FA_UNROLL
    for (int m = 0; m < MT; m++) fa_load_kv<HD, ALIGNED>(k_tile + m * L::tile_elems, v_tile + m * L::tile_elems, base, C, k0 + m * FA_BLOCK, T, hs);
    load_query_tile(0, 0);
    cp_async_commit();

    float dk[MT][HD / 8][4], dv[MT][HD / 8][4];
FA_UNROLL
    for (int m = 0; m < MT; m++) {
        fa_zero<HD / 8>(dk[m]);
        fa_zero<HD / 8>(dv[m]);
    }
    for (int it = 0; it < n_q; it++) {
        int stage = it % L::stages, m0 = k0 + it * FA_BLOCK;
        if (L::stages == 1 && it > 0) load_query_tile(it, 0);
        if (L::stages == 2 && it + 1 < n_q) load_query_tile(it + 1, (it + 1) & 1);
        fa_tiles_ready<L::stages - 1>();
        const __nv_bfloat16* q_tile = q_tiles + stage * L::tile_elems;
        const __nv_bfloat16* do_tile = do_tiles + stage * L::tile_elems;
        const float* lse_t = lse_s + stage * FA_BLOCK;
        const float* delta_t = delta_s + stage * FA_BLOCK;
        for (int qo = 0; qo < FA_BLOCK; qo += QS) { /* the sub-tile of queries m0 + qo .. m0 + qo + QS - 1 */
            if (warp_key0 < T && m0 + qo + QS - 1 >= warp_key0) {
                float p[MT][8][4], ds[MT][8][4]; /* column tiles j < QS/8 used */
                fa_mma_abt<HD, true, MT>(p, NULL, k_tile, 16 * MT * warp, q_tile + qo * (HD + 8), QS / 8);   /* Sᵀ: rows = keys, columns = queries */
                fa_mma_abt<HD, true, MT>(ds, NULL, v_tile, 16 * MT * warp, do_tile + qo * (HD + 8), QS / 8); /* dPᵀ */
                /* only causality is masked: key row 16m + g + 8r sees the columns 8j + 2t + e >= first; queries >= T have
                 * zero Q and dO rows and lse = D = 0 there, so their p = 1 adds nothing to dV, dK or (their dS being 0) dQ */
                fa_with_mask(!L::lean || m0 + qo < warp_key0 + 16 * MT - 1, [&](auto mask) {
FA_UNROLL
                    for (int m = 0; m < MT; m++)
FA_UNROLL
                        for (int r = 0; r < 2; r++) {
                            int first = warp_key0 + 16 * m + g + 8 * r - m0 - qo;
FA_UNROLL
                            for (int j = 0; j < QS / 8; j++)
FA_UNROLL
                                for (int e = 0; e < 2; e++) {
                                    int i = 2 * r + e, qi = qo + 8 * j + 2 * t + e;
                                    p[m][j][i] = (!mask.on || qi - qo >= first) ? fa_exp2<L::lean>(p[m][j][i] * scale_log2 - lse_t[qi]) : 0.0f;
                                    ds[m][j][i] = p[m][j][i] * (ds[m][j][i] - delta_t[qi]);
                                }
                        }
                });
                uint32_t a[MT][4][4]; /* k-chunks kc < QS/16 used */
FA_UNROLL
                for (int m = 0; m < MT; m++) fa_c_to_a(a[m], p[m]);
                fa_mma_ab<HD, MT>(dv, a, do_tile + qo * (HD + 8), QS / 16);
FA_UNROLL
                for (int m = 0; m < MT; m++) {
                    fa_c_to_a(a[m], ds[m]);
                    if (dq_accum) fa_store_a(ds_tile + qo, L::ds_stride, a[m], 16 * (MT * warp + m), QS / 16); /* dSᵀ from the bf16 fragments */
                }
                fa_mma_ab<HD, MT>(dk, a, q_tile + qo * (HD + 8), QS / 16);
            } else if (dq_accum) { /* keys past T, or all after these queries: their dS entries are zero */
                for (int i = lane; i < 16 * MT * QS / 2; i += 32)
                    *(uint32_t*)(ds_tile + (16 * MT * warp + i / (QS / 2)) * L::ds_stride + qo + 2 * (i % (QS / 2))) = 0u;
            }
        }
        if (dq_accum) {
            __syncthreads(); /* dSᵀ complete */
            int warp_q0 = m0 + 16 * warp;
            if (warp_q0 < T) {
                float dq[HD / 8][4];
                fa_zero<HD / 8>(dq);
FA_UNROLL
                for (int c = 0; c < MT; c++) { /* keys k0 + 64c ..: none after the warp's queries unless c·64 < m0 - k0 + 64 */
                    int kc0 = k0 + c * FA_BLOCK;
                    if (kc0 > m0) continue;
                    /* A = dS rows warp_q0..+15 (queries) x 64 keys, read transposed from dSᵀ: matrix i covers keys
                     * kc0 + 16kc + 8(i/2).., queries 16w + 8(i%2).. (ldmatrix_x4_trans) */
                    uint32_t a[4][4];
FA_UNROLL
                    for (int kc = 0; kc < 4; kc++) {
                        int i = lane / 8;
                        ldmatrix_x4_trans(a[kc], ds_tile + (c * FA_BLOCK + 16 * kc + 8 * (i / 2) + lane % 8) * L::ds_stride + 16 * warp + 8 * (i % 2));
                    }
                    /* diagonal chunk: keys past the warp's rows have dS = 0 */
                    fa_mma_ab<HD, 1>(&dq, &a, k_tile + c * L::tile_elems, kc0 == m0 ? warp + 1 : 4);
                }
                float* dq_base = dq_accum + (long)b * T * C + h * hs;
                fa_for_each_pair<HD>(dq, warp_q0, T, hs, [&](int row, int col, float x0, float x1) {
                    atomicAdd(dq_base + (long)row * C + col, x0);
                    if (ALIGNED || col + 1 < hs) atomicAdd(dq_base + (long)row * C + col + 1, x1);
                });
            }
        }
        __syncthreads(); /* buffers read in this iteration are overwritten next */
    }
    if (warp_key0 >= T) return;
    __nv_bfloat16* dbase = dqkv + (long)b * T * row_stride + h * hs;
FA_UNROLL
    for (int m = 0; m < MT; m++) {
        fa_store_rows<HD, ALIGNED>(dbase + C, row_stride, dk[m], scale, warp_key0 + 16 * m, T, hs);
        fa_store_rows<HD, ALIGNED>(dbase + 2 * C, row_stride, dv[m], 1.0f, warp_key0 + 16 * m, T, hs);
    }
}

/* bf16 backward, dQ kernel of the deterministic mode: the forward's decomposition (MT row blocks of 16 queries per
 * warp, blocks of 64·MT queries, grid fa_grid (NH, B, ceil(T/(64·MT))); K/V tiles double-buffered, worked in sub-tiles of
 * FA_DQ_KS keys); per sub-tile P = exp2(Q Kᵀ·s·log2 e − lse·log2 e), dS = P∘(dO Vᵀ − D), dQ += dS K; dqkv's q part =
 * s·dQ. Q and dO fragments in registers at MT = 1 (HD <= 128), else read from shared memory per k-chunk (the
 * registers hold MT x dQ). Shared: MT x (Q, dO) tiles, K[2], V[2]. */
/* the dQ kernel's row blocks per warp: 2 up to HD = 64 (at HD = 128 its MT x (Q, dO) tiles would take 139 KiB of
 * shared memory, one block an SM, and ptxas spills) */
#define FA_DQ_MT(HD) ((HD) <= 64 ? 2 : 1)
/* the dQ kernel's keys per sub-tile: 32, so that the two score tiles of an interior sub-tile, worked without the
 * column-tile tests, fit in registers beside MT x dQ (with 64, ptxas spilled at HD = 64 and 128); at MT = 2 the
 * Q and dO fragments are then read from shared memory once per 32 keys, not 64 */
#define FA_DQ_KS 32
template <int HD, int MT, bool ALIGNED>
__global__ void __launch_bounds__(FA_THREADS) flash_attention_backward_q_kernel(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv, const float* lse,
                                                                          const float* delta, int T, int C, int NH) {
    constexpr int KS = FA_DQ_KS, NJ = KS / 8;
    constexpr bool a_in_smem = FA_A_IN_SMEM(HD) || MT > 1;
    DYNAMIC_SMEM(__nv_bfloat16, smem);
    __nv_bfloat16* q_tile = smem;                             /* 64·MT rows */
    __nv_bfloat16* do_tile = smem + MT * FA_BLOCK * (HD + 8); /* 64·MT rows, then K[2], V[2] */
    int hs = C / NH, q_block = gridDim.z - 1 - blockIdx.z, h = blockIdx.x, b = blockIdx.y;
    int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
    int q0 = q_block * FA_BLOCK * MT, warp_row0 = q0 + 16 * MT * warp;
    int n_kv = min(MT * (q_block + 1), (T + FA_BLOCK - 1) / FA_BLOCK);
    long row_stride = 3L * C;
    const __nv_bfloat16* base = qkv + (long)b * T * row_stride + h * hs;
    float scale = 1.0f / sqrtf((float)hs), scale_log2 = scale * FA_LOG2E;

    fa_load_tile<HD, ALIGNED, FA_BLOCK * MT>(q_tile, base, row_stride, q0, T, hs);
    fa_load_tile<HD, ALIGNED, FA_BLOCK * MT>(do_tile, dout + (long)b * T * C + h * hs, C, q0, T, hs);
    float row_lse[MT][2], row_delta[MT][2]; /* rows 16m + g, 16m + g + 8 of the warp */
FA_UNROLL
    for (int m = 0; m < MT; m++)
FA_UNROLL
        for (int r = 0; r < 2; r++) {
            int row = warp_row0 + 16 * m + g + 8 * r;
            row_lse[m][r] = row < T ? lse[((long)b * NH + h) * T + row] * FA_LOG2E : 0.0f;
            row_delta[m][r] = row < T ? delta[((long)b * NH + h) * T + row] : 0.0f;
        }
    uint32_t q_frag[MT][HD / 16][4], do_frag[MT][HD / 16][4]; /* used when !a_in_smem */
    float dq[MT][HD / 8][4];
FA_UNROLL
    for (int m = 0; m < MT; m++) fa_zero<HD / 8>(dq[m]);
    fa_key_loop<HD, ALIGNED>(smem + 2 * MT * FA_BLOCK * (HD + 8), base, C, n_kv, warp_row0, 16 * MT, T, hs, [&]() {
        if (!a_in_smem)
FA_UNROLL
            for (int m = 0; m < MT; m++) {
                fa_load_a<HD>(q_frag[m], q_tile, 16 * (MT * warp + m));
                fa_load_a<HD>(do_frag[m], do_tile, 16 * (MT * warp + m));
            }
    }, [&](int k0, const __nv_bfloat16* k_tile, const __nv_bfloat16* v_tile) {
        fa_key_subtiles<KS>(k0, warp_row0, 16 * MT, T, [&](int kh, int tiles_seen) {
            int ks0 = k0 + kh;
            /* an interior sub-tile sees all NJ column tiles, a constant there (as in the forward) */
            fa_with_mask(ks0 + KS - 1 > warp_row0 || ks0 + KS > T, [&](auto mask) {
                int n_tiles = mask.on ? tiles_seen : NJ;
                float s[MT][NJ][4], ds[MT][NJ][4];
                fa_mma_abt<HD, a_in_smem, MT, NJ>(s, q_frag, q_tile, 16 * MT * warp, k_tile + kh * (HD + 8), n_tiles);
                fa_mma_abt<HD, a_in_smem, MT, NJ>(ds, do_frag, do_tile, 16 * MT * warp, v_tile + kh * (HD + 8), n_tiles);
                if (mask.on) fa_mask<MT, NJ>(s, [&](int m, int r) { return min(warp_row0 + 16 * m + g + 8 * r + 1, T) - ks0; });
FA_UNROLL
                for (int m = 0; m < MT; m++)
FA_UNROLL
                    for (int j = 0; j < NJ; j++)
FA_UNROLL
                        for (int i = 0; i < 4; i++) {
                            float p = fast_exp2f(s[m][j][i] * scale_log2 - row_lse[m][i / 2]);
                            ds[m][j][i] = p * (ds[m][j][i] - row_delta[m][i / 2]);
                        }
                uint32_t a[MT][NJ / 2][4];
FA_UNROLL
                for (int m = 0; m < MT; m++) fa_c_to_a<NJ>(a[m], ds[m]);
                fa_mma_ab<HD, MT, NJ / 2>(dq, a, k_tile + kh * (HD + 8), (n_tiles + 1) / 2);
            });
        });
    });
    if (warp_row0 >= T) return;
FA_UNROLL
    for (int m = 0; m < MT; m++) fa_store_rows<HD, ALIGNED>(dqkv + (long)b * T * row_stride + h * hs, row_stride, dq[m], scale, warp_row0 + 16 * m, T, hs);
}

/* atomic mode: dqkv[b,t,c] = scale·dq_accum[b,t,c] for c < C (the q part); one thread per element */
__global__ void flash_attention_dq_convert_kernel(__nv_bfloat16* dqkv, const float* dq_accum, long BT, int C, float scale) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= BT * C) return;
    long bt = i / C;
    dqkv[bt * 3 * C + i % C] = __float2bfloat16(dq_accum[i] * scale);
}

/* ---------------------------------------------------------------------------------------------------------------
 * fp32 path. Blocks of FA32_ROWS rows of one (b, h), one warp per row; tiles of FA32_TILE rows of two head
 * slices are staged in shared memory with row stride hs + 1 (lane j reading row j's element i: no bank
 * conflicts). Each lane keeps head dims lane, lane + 32, ... of its accumulators (hs <= 256: 8 per lane). */

/* stages rows row0..row0+31 (< T) of two head slices (src_a, src_b, row strides stride_a, stride_b) into
 * tile_a, tile_b; rows >= T are zeros. All threads of the block call it. */
__device__ inline void fa32_stage(float* tile_a, float* tile_b, const float* src_a, long stride_a, const float* src_b, long stride_b, int row0,
                                  int T, int hs) {
    for (int idx = threadIdx.x; idx < FA32_TILE * hs; idx += blockDim.x) {
        int r = idx / hs, i = idx % hs;
        bool in = row0 + r < T;
        tile_a[r * (hs + 1) + i] = in ? src_a[(long)(row0 + r) * stride_a + i] : 0.0f;
        tile_b[r * (hs + 1) + i] = in ? src_b[(long)(row0 + r) * stride_b + i] : 0.0f;
    }
}

__device__ inline float fa32_dot(const float* x, const float* y, int hs) {
    float sum = 0.0f;
    for (int i = 0; i < hs; i++) sum += x[i] * y[i];
    return sum;
}

/* acc[i] (dim lane + 32i) += Σ_j w_j·tile[j][lane + 32i], w_j held by lane j */
__device__ inline void fa32_accumulate(float acc[8], float w, const float* tile, int hs) {
    int lane = threadIdx.x % 32;
    for (int j = 0; j < FA32_TILE; j++) {
        float wj = __shfl_sync(FULL_MASK, w, j);
FA_UNROLL
        for (int i = 0; i < 8; i++)
            if (lane + 32 * i < hs) acc[i] += wj * tile[j * (hs + 1) + lane + 32 * i];
    }
}

/* shared: the block's own rows of two head slices (own[2][FA32_ROWS][hs]), then two staged tiles [FA32_TILE][hs + 1] */
static inline size_t fa32_smem_bytes(int hs) { return sizeof(float) * (2 * FA32_ROWS * hs + 2 * FA32_TILE * (hs + 1)); }

/* copies row `row` of a head slice (src, row stride `stride`; zeros if row >= T) to the calling warp's own row of
 * slice `which` (0 or 1) and returns that row; each warp its own row */
__device__ inline float* fa32_own_row(float* smem, int which, const float* src, long stride, int row, int T, int hs) {
    float* own = smem + (which * FA32_ROWS + threadIdx.x / 32) * hs;
    for (int i = threadIdx.x % 32; i < hs; i += 32) own[i] = row < T ? src[(long)row * stride + i] : 0.0f;
    return own;
}

/* dst[lane + 32i] = acc[i]·scale for the head dims < hs the lane holds */
__device__ inline void fa32_store_row(float* dst, const float acc[8], float scale, int hs) {
    int lane = threadIdx.x % 32;
    for (int i = 0; i < 8; i++)
        if (lane + 32 * i < hs) dst[lane + 32 * i] = acc[i] * scale;
}

/* The key loop of the fp32 forward and dQ kernels (block (x, h, b): queries t0 = 8x .. t0 + 7, warp w owns t0 + w):
 * copies the warp's q row to its own row of slice 0, then stages the K/V tiles of FA32_TILE keys from key 0 to the
 * block's last row < T into the two staged tiles; body(key0, q_own, k_tile, v_tile) runs on every warp between
 * barriers. */
template <typename Body>
__device__ inline void fa32_key_loop(float* smem, const float* qkv, int T, int C, int hs, Body body) {
    long row_stride = 3L * C;
    const float* base = qkv + (long)blockIdx.z * T * row_stride + blockIdx.y * hs;
    int t0 = blockIdx.x * FA32_ROWS;
    const float* q_own = fa32_own_row(smem, 0, base, row_stride, t0 + threadIdx.x / 32, T, hs);
    float* k_tile = smem + 2 * FA32_ROWS * hs;
    float* v_tile = k_tile + FA32_TILE * (hs + 1);
    int last_key = min(T - 1, t0 + FA32_ROWS - 1);
    for (int key0 = 0; key0 <= last_key; key0 += FA32_TILE) {
        __syncthreads();
        fa32_stage(k_tile, v_tile, base + C, row_stride, base + 2 * C, row_stride, key0, T, hs);
        __syncthreads();
        body(key0, q_own, (const float*)k_tile, (const float*)v_tile);
    }
}

/* forward: warp w owns query t = t0 + w; online softmax over key tiles 0..(t0+7)/32, lane j scores key j */
__global__ void flash_attention_forward_fp32_kernel(float* out, float* lse, const float* qkv, int T, int C, int NH) {
    DYNAMIC_SMEM(float, smem);
    int hs = C / NH, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x % 32, row = blockIdx.x * FA32_ROWS + threadIdx.x / 32;
    float scale = 1.0f / sqrtf((float)hs);
    float o[8] = {0, 0, 0, 0, 0, 0, 0, 0}, row_max = -INFINITY, row_sum = 0.0f;
    fa32_key_loop(smem, qkv, T, C, hs, [&](int key0, const float* q_own, const float* k_tile, const float* v_tile) {
        int key = key0 + lane;
        float s = (row < T && key <= row) ? fa32_dot(q_own, k_tile + lane * (hs + 1), hs) * scale : -INFINITY;
        float mx = fmaxf(row_max, warp_max(s)), ref = mx == -INFINITY ? 0.0f : mx;
        float correction = expf(row_max - ref), p = expf(s - ref);
        row_sum = row_sum * correction + warp_sum(p);
        for (int i = 0; i < 8; i++) o[i] *= correction;
        fa32_accumulate(o, p, v_tile, hs);
        row_max = mx;
    });
    if (row >= T) return;
    float* orow = out + ((long)b * T + row) * C + h * hs;
    for (int i = 0; i < 8; i++)
        if (lane + 32 * i < hs) orow[lane + 32 * i] = o[i] / row_sum;
    if (lane == 0) lse[((long)b * NH + h) * T + row] = row_max + logf(row_sum);
}

/* for one (query, key) pair of the fp32 backward: p = exp(q·k·scale − lse) (returned) and dp = dout·v. The one place
 * the delta, dq and dk/dv kernels get them, so D = Σp·dp / Σp and the dS = p·(dp − D) they form use bit-identical
 * p and dp (the exact cancellation of dp − D relies on it) */
__device__ inline float fa32_p_dp(float* dp, const float* q, const float* k, const float* dout, const float* v, int hs, float scale, float lse) {
    *dp = fa32_dot(dout, v, hs);
    return expf(fa32_dot(q, k, hs) * scale - lse);
}

/* backward D (fp32 path): D_t = Σ_{s<=t} p_ts·dp_ts / Σ_{s<=t} p_ts, p_ts = exp(q_t·k_s·scale − lse_t), dp_ts =
 * dout_t·v_s, summed in double from the very p and dp the dq and dk, dv kernels recompute, and kept as two floats
 * (delta[r] + delta[R + r], R = B·NH·T rows: a double's precision in float-aligned scratch); those kernels form
 * dp − D in double. So dS = p·(dp − D) cancels as exactly as the math allows where one key takes nearly all the
 * probability (then dp − D ≈ (1 − p_max)·(dp − dp')): rowsum(dout∘out), or D rounded to fp32, or p summing to 1 only
 * to rounding, is an error there that 1/(1 − p_max) amplifies (1e-5 missed at T = 2). Warp w owns query t = t0 + w,
 * lane j key j of each tile; fixed-order sums. */
__global__ void flash_attention_delta_fp32_kernel(float* delta, const float* dout, const float* qkv, const float* lse, int B, int T, int C, int NH) {
    DYNAMIC_SMEM(float, smem);
    int hs = C / NH, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x % 32, row = blockIdx.x * FA32_ROWS + threadIdx.x / 32;
    float scale = 1.0f / sqrtf((float)hs);
    float* do_own = fa32_own_row(smem, 1, dout + (long)b * T * C + h * hs, C, row, T, hs);
    float row_lse = row < T ? lse[((long)b * NH + h) * T + row] : 0.0f;
    double pdp = 0.0, psum = 0.0;
    fa32_key_loop(smem, qkv, T, C, hs, [&](int key0, const float* q_own, const float* k_tile, const float* v_tile) {
        int key = key0 + lane;
        if (row < T && key <= row) {
            float dp, p = fa32_p_dp(&dp, q_own, k_tile + lane * (hs + 1), do_own, v_tile + lane * (hs + 1), hs, scale, row_lse);
            pdp += (double)p * dp;
            psum += p;
        }
    });
    pdp = warp_sum(pdp);
    psum = warp_sum(psum);
    if (row < T && lane == 0) {
        long r = ((long)b * NH + h) * T + row, R = (long)B * NH * T;
        double d = pdp / psum;
        delta[r] = (float)d;
        delta[R + r] = (float)(d - (double)(float)d);
    }
}

/* dp − D in double, D = delta_hi + delta_lo (flash_attention_delta_fp32_kernel's two floats) */
__device__ inline float fa32_dp_minus_delta(float dp, float delta_hi, float delta_lo) {
    return (float)((double)dp - ((double)delta_hi + (double)delta_lo));
}

/* backward dq: warp w owns query t = t0 + w; per key tile lane j recomputes p, dp = dout_t·v_j, ds = p(dp − D_t) */
__global__ void flash_attention_backward_q_fp32_kernel(float* dqkv, const float* dout, const float* qkv, const float* lse, const float* delta, int T, int C, int NH) {
    DYNAMIC_SMEM(float, smem);
    int hs = C / NH, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x % 32, row = blockIdx.x * FA32_ROWS + threadIdx.x / 32;
    float scale = 1.0f / sqrtf((float)hs);
    float* do_own = fa32_own_row(smem, 1, dout + (long)b * T * C + h * hs, C, row, T, hs);
    long r = ((long)b * NH + h) * T + row, R = (long)gridDim.z * NH * T;
    float row_lse = row < T ? lse[r] : 0.0f, delta_hi = row < T ? delta[r] : 0.0f, delta_lo = row < T ? delta[R + r] : 0.0f;
    float dq[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    fa32_key_loop(smem, qkv, T, C, hs, [&](int key0, const float* q_own, const float* k_tile, const float* v_tile) {
        int key = key0 + lane;
        float ds = 0.0f;
        if (row < T && key <= row) {
            float dp, p = fa32_p_dp(&dp, q_own, k_tile + lane * (hs + 1), do_own, v_tile + lane * (hs + 1), hs, scale, row_lse);
            ds = p * fa32_dp_minus_delta(dp, delta_hi, delta_lo);
        }
        fa32_accumulate(dq, ds, k_tile, hs);
    });
    if (row < T) fa32_store_row(dqkv + ((long)b * T + row) * 3 * C + h * hs, dq, scale, hs);
}

/* backward dk, dv: warp w owns key t2 = t0 + w; query tiles from the one holding t0 to T-1, staged with their
 * lse and D; lane j recomputes p and ds for query j of the tile */
__global__ void flash_attention_backward_kv_fp32_kernel(float* dqkv, const float* dout, const float* qkv, const float* lse, const float* delta, int T, int C,
                                                        int NH) {
    DYNAMIC_SMEM(float, smem);
    __shared__ float lse_s[FA32_TILE], delta_s[2][FA32_TILE];
    int hs = C / NH, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x % 32;
    int t0 = blockIdx.x * FA32_ROWS, key = t0 + threadIdx.x / 32;
    long row_stride = 3L * C;
    const float* base = qkv + (long)b * T * row_stride + h * hs;
    float scale = 1.0f / sqrtf((float)hs);
    float* q_tile = smem + 2 * FA32_ROWS * hs;
    float* do_tile = q_tile + FA32_TILE * (hs + 1);
    const float* lse_row = lse + ((long)b * NH + h) * T;
    const float* delta_row = delta + ((long)b * NH + h) * T;
    long R = (long)gridDim.z * NH * T; /* delta_row[R + t]: D's low part */
    float* k_own = fa32_own_row(smem, 0, base + C, row_stride, key, T, hs);
    float* v_own = fa32_own_row(smem, 1, base + 2 * C, row_stride, key, T, hs);
    float dk[8] = {0, 0, 0, 0, 0, 0, 0, 0}, dv[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int m0 = t0 / FA32_TILE * FA32_TILE; m0 < T; m0 += FA32_TILE) {
        __syncthreads();
        fa32_stage(q_tile, do_tile, base, row_stride, dout + (long)b * T * C + h * hs, C, m0, T, hs);
        if (threadIdx.x < FA32_TILE) {
            bool in = m0 + (int)threadIdx.x < T;
            lse_s[threadIdx.x] = in ? lse_row[m0 + threadIdx.x] : 0.0f;
            delta_s[0][threadIdx.x] = in ? delta_row[m0 + threadIdx.x] : 0.0f;
            delta_s[1][threadIdx.x] = in ? delta_row[R + m0 + threadIdx.x] : 0.0f;
        }
        __syncthreads();
        int query = m0 + lane;
        float p = 0.0f, ds = 0.0f;
        if (key < T && query >= key && query < T) {
            float dp;
            p = fa32_p_dp(&dp, q_tile + lane * (hs + 1), k_own, do_tile + lane * (hs + 1), v_own, hs, scale, lse_s[lane]);
            ds = p * fa32_dp_minus_delta(dp, delta_s[0][lane], delta_s[1][lane]);
        }
        fa32_accumulate(dk, ds, q_tile, hs);
        fa32_accumulate(dv, p, do_tile, hs);
    }
    if (key >= T) return;
    float* drow = dqkv + ((long)b * T + key) * row_stride + h * hs;
    fa32_store_row(drow + C, dk, scale, hs);
    fa32_store_row(drow + 2 * C, dv, 1.0f, hs);
}

/* ---------------------------------------------------------------------------------------------------------------
 * host side */

/* whether the kernels take C channels in NH heads: C a positive multiple of NH, the head dim C/NH at most 256 (what
 * a trainer checks when it builds a model) */
static inline int flash_attention_supported(int C, int NH) { return NH > 0 && C > 0 && C % NH == 0 && C / NH <= 256; }

/* checks the shape (and the alignment cp.async needs); one line naming the problem and exit 1 otherwise */
static inline void flash_attention_check(const char* op, int B, int T, int C, int NH, const void* p0, const void* p1, const void* p2, size_t align) {
    const char* problem = NULL;
    if (B < 0 || T < 0 || NH <= 0 || C <= 0 || C % NH != 0) problem = "needs B, T >= 0 and C a positive multiple of NH > 0";
    else if (!flash_attention_supported(C, NH)) problem = "needs the head dim C/NH to be at most 256";
    else if (B > 65535 || NH > 65535 || (T + FA_BLOCK - 1) / FA_BLOCK > 65535)
        problem = "needs B, NH and ceil(T/64) at most 65535 (the grids' y and z dimensions)";
    else if ((uintptr_t)p0 % align || (uintptr_t)p1 % align || (uintptr_t)p2 % align) problem = "needs buffers aligned to their element size";
    if (!problem) return;
    fprintf(stderr, "error: %s: B=%d T=%d C=%d NH=%d: %s\n", op, B, T, C, NH, problem);
    exit(1);
}

/* whether the bf16 kernels' ALIGNED instances (16-byte copies and pair stores) take head size hs and the buffers ptrs */
template <typename... P>
static inline bool fa_aligned(int hs, const P*... ptrs) {
    return hs % 8 == 0 && (((uintptr_t)ptrs % 16 == 0) && ...);
}

/* the padded head dim HD of the bf16 kernels for hs */
static inline int fa_padded_dim(int hs) { return hs <= 32 ? 32 : hs <= 64 ? 64 : hs <= 128 ? 128 : 256; }

/* the bf16 kernels' grid of `tiles` row blocks for each of NH heads and B sequences: (NH, B, tiles). The tile index
 * is the slowest dimension, and each kernel maps blockIdx.z 0 to its longest tile (the forward and dQ kernels the
 * last queries, the K/V kernel the first keys), so a GPU, which dispatches blocks x fastest, starts every head's
 * longest tiles first and the short ones fill the tail (longest-first list scheduling, not per head) */
static inline dim3 fa_grid(int tiles, int NH, int B) { return dim3(NH, B, tiles); }

/* launches kernel over grid x 128 threads with `smem` bytes of dynamic shared memory (raising the limit past 48 KiB) */
template <typename... P, typename... A>
static inline void fa_launch(void (*kernel)(P...), dim3 grid, size_t smem, cudaStream_t stream, A... args) {
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    launch_kernel(kernel, grid, dim3(FA_THREADS), smem, stream, args...);
}

/* bytes of scratch flash_attention_backward needs: D [B,NH,T] and dq's fp32 accumulator [B,T,C] (bf16 path); the
 * fp32 path's D in two floats, 2·B·NH·T, fits as NH <= C */
static inline size_t flash_attention_scratch_bytes(int B, int T, int C, int NH) {
    return sizeof(float) * ((size_t)B * NH * T + (size_t)B * T * C);
}

/* dynamic shared memory of the bf16 forward and dQ kernels at padded head dim HD with MT row blocks a warp */
template <int HD, int MT>
static constexpr size_t fa_forward_smem() { return (size_t)(MT + 4) * FA_BLOCK * (HD + 8) * sizeof(__nv_bfloat16); }
template <int HD, int MT>
static constexpr size_t fa_dq_smem() { return (size_t)(2 * MT + 4) * FA_BLOCK * (HD + 8) * sizeof(__nv_bfloat16); }

/* the most dynamic shared memory one block of the bf16 kernels at padded head dim HD asks for */
template <int HD>
static constexpr size_t fa_smem_max_bf16() {
    typedef FaBackwardSmem<HD, FA_KV_MT(HD)> L;
    size_t fwd = fa_forward_smem<HD, FA_FWD_MT(HD)>(), dq = fa_dq_smem<HD, FA_DQ_MT(HD)>(), kv = L::bytes + L::ds_bytes;
    return fwd > dq ? (fwd > kv ? fwd : kv) : (dq > kv ? dq : kv);
}

/* The most dynamic shared memory a block of flash attention asks for at head dim C/NH (bf16 kernels, or the
 * fp32 build's when fp32 is set): a trainer compares it with the device's opt-in maximum before any launch
 * (H100/H200 232448 bytes take every head dim; an A100's 166912 up to 128; sm_86/89's 101376 up to 64). */
static inline size_t flash_attention_smem_bytes(int C, int NH, int fp32) {
    if (fp32) return fa32_smem_bytes(C / NH);
    switch (fa_padded_dim(C / NH)) {
    case 32: return fa_smem_max_bf16<32>();
    case 64: return fa_smem_max_bf16<64>();
    case 128: return fa_smem_max_bf16<128>();
    default: return fa_smem_max_bf16<256>();
    }
}

/* the forward at padded head dim HD with MT row blocks per warp (the benchmark also times MT = 1 against the default);
 * ALIGNED: fa_aligned (a head dim C/NH that is a multiple of 8, 16-byte aligned buffers) */
template <int HD, int MT = FA_FWD_MT(HD), bool ALIGNED = true>
static inline void fa_forward_bf16(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
    size_t smem = fa_forward_smem<HD, MT>();
    fa_launch(flash_attention_forward_kernel<HD, MT, ALIGNED>, fa_grid((T + MT * FA_BLOCK - 1) / (MT * FA_BLOCK), NH, B), smem, stream, out, lse, qkv, T, C, NH);
}

/* the whole bf16 backward (flash_attention_backward after its checks) at padded head dim HD: delta (and the dq
 * accumulator's zeroing), the K/V kernel with KV_MT row blocks of keys per warp, then the dQ kernel with MT row
 * blocks of queries per warp (deterministic) or the accumulator's conversion (atomic mode). The benchmark also times
 * KV_MT = MT = 1 against the defaults. */
template <int HD, int KV_MT = FA_KV_MT(HD), int MT = FA_DQ_MT(HD), bool ALIGNED = true>
static inline void fa_backward_bf16(__nv_bfloat16* dqkv, float* scratch, const __nv_bfloat16* dout, const __nv_bfloat16* out, const __nv_bfloat16* qkv,
                                    const float* lse, int B, int T, int C, int NH, int deterministic, cudaStream_t stream) {
    float* delta = scratch;
    float* dq_accum = deterministic ? NULL : scratch + (size_t)B * NH * T;
    long rows = (long)B * T * NH;
    launch_kernel(flash_attention_delta_kernel, dim3(ceil_div(rows, 4)), dim3(128), 0, stream, delta, dq_accum, dout, out, B, T, C, NH);
    typedef FaBackwardSmem<HD, KV_MT> L;
    fa_launch(flash_attention_backward_kv_kernel<HD, KV_MT, ALIGNED>, fa_grid((T + L::keys - 1) / L::keys, NH, B), L::bytes + (dq_accum ? L::ds_bytes : 0), stream, dqkv, dq_accum, dout, qkv, lse, (const float*)delta, T, C, NH);
    if (!dq_accum) {
        size_t smem = fa_dq_smem<HD, MT>();
        fa_launch(flash_attention_backward_q_kernel<HD, MT, ALIGNED>, fa_grid((T + MT * FA_BLOCK - 1) / (MT * FA_BLOCK), NH, B), smem, stream, dqkv, dout, qkv, lse,
                  (const float*)delta, T, C, NH);
    } else {
        launch_kernel(flash_attention_dq_convert_kernel, dim3(ceil_div((long)B * T * C, 256)), dim3(256), 0, stream, dqkv, (const float*)dq_accum, (long)B * T, C,
                      1.0f / sqrtf((float)(C / NH)));
    }
}

/* the bf16 forward at the padded head dim of C/NH, ALIGNED as fa_forward_bf16 */
template <bool ALIGNED>
static inline void fa_forward_dispatch(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
    switch (fa_padded_dim(C / NH)) {
    case 32: fa_forward_bf16<32, FA_FWD_MT(32), ALIGNED>(out, lse, qkv, B, T, C, NH, stream); break;
    case 64: fa_forward_bf16<64, FA_FWD_MT(64), ALIGNED>(out, lse, qkv, B, T, C, NH, stream); break;
    case 128: fa_forward_bf16<128, FA_FWD_MT(128), ALIGNED>(out, lse, qkv, B, T, C, NH, stream); break;
    default: fa_forward_bf16<256, FA_FWD_MT(256), ALIGNED>(out, lse, qkv, B, T, C, NH, stream); break;
    }
}

/* the bf16 backward at the padded head dim of C/NH, ALIGNED as fa_forward_bf16 */
template <bool ALIGNED>
static inline void fa_backward_dispatch(__nv_bfloat16* dqkv, float* scratch, const __nv_bfloat16* dout, const __nv_bfloat16* out, const __nv_bfloat16* qkv,
                                        const float* lse, int B, int T, int C, int NH, int deterministic, cudaStream_t stream) {
    switch (fa_padded_dim(C / NH)) {
    case 32: fa_backward_bf16<32, FA_KV_MT(32), FA_DQ_MT(32), ALIGNED>(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, deterministic, stream); break;
    case 64: fa_backward_bf16<64, FA_KV_MT(64), FA_DQ_MT(64), ALIGNED>(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, deterministic, stream); break;
    case 128: fa_backward_bf16<128, FA_KV_MT(128), FA_DQ_MT(128), ALIGNED>(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, deterministic, stream); break;
    default: fa_backward_bf16<256, FA_KV_MT(256), FA_DQ_MT(256), ALIGNED>(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, deterministic, stream); break;
    }
}

static inline void flash_attention_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
    flash_attention_check("flash_attention_forward", B, T, C, NH, out, qkv, qkv, sizeof(__nv_bfloat16));
    if ((long)B * T == 0) return;
    if (fa_aligned(C / NH, out, qkv)) fa_forward_dispatch<true>(out, lse, qkv, B, T, C, NH, stream);
    else fa_forward_dispatch<false>(out, lse, qkv, B, T, C, NH, stream);
}

static inline void flash_attention_backward(__nv_bfloat16* dqkv, float* scratch, const __nv_bfloat16* dout, const __nv_bfloat16* out, const __nv_bfloat16* qkv,
                                            const float* lse, int B, int T, int C, int NH, int deterministic, cudaStream_t stream) {
    flash_attention_check("flash_attention_backward", B, T, C, NH, dqkv, dout, qkv, sizeof(__nv_bfloat16));
    if ((long)B * T == 0) return;
    if (fa_aligned(C / NH, dqkv, dout, out, qkv)) fa_backward_dispatch<true>(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, deterministic, stream);
    else fa_backward_dispatch<false>(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, deterministic, stream);
}

static inline void flash_attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
    flash_attention_check("flash_attention_forward", B, T, C, NH, out, qkv, qkv, 4);
    if ((long)B * T == 0) return;
    dim3 grid((T + FA32_ROWS - 1) / FA32_ROWS, NH, B), block(32 * FA32_ROWS);
    size_t smem = fa32_smem_bytes(C / NH);
    cudaCheck(cudaFuncSetAttribute(flash_attention_forward_fp32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    launch_kernel(flash_attention_forward_fp32_kernel, grid, block, smem, stream, out, lse, qkv, T, C, NH);
}

static inline void flash_attention_backward(float* dqkv, float* scratch, const float* dout, const float* out, const float* qkv, const float* lse, int B, int T, int C,
                                            int NH, int deterministic, cudaStream_t stream) {
    flash_attention_check("flash_attention_backward", B, T, C, NH, dqkv, dout, qkv, 4);
    if ((long)B * T == 0) return;
    float* delta = scratch;
    dim3 grid((T + FA32_ROWS - 1) / FA32_ROWS, NH, B), block(32 * FA32_ROWS);
    size_t smem = fa32_smem_bytes(C / NH);
    cudaCheck(cudaFuncSetAttribute(flash_attention_delta_fp32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    launch_kernel(flash_attention_delta_fp32_kernel, grid, block, smem, stream, delta, dout, qkv, lse, B, T, C, NH);
    cudaCheck(cudaFuncSetAttribute(flash_attention_backward_q_fp32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaCheck(cudaFuncSetAttribute(flash_attention_backward_kv_fp32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    launch_kernel(flash_attention_backward_q_fp32_kernel, grid, block, smem, stream, dqkv, dout, qkv, lse, (const float*)delta, T, C, NH);
    launch_kernel(flash_attention_backward_kv_fp32_kernel, grid, block, smem, stream, dqkv, dout, qkv, lse, (const float*)delta, T, C, NH);
}

#endif /* LLMC_FLASH_ATTENTION_CUH */
