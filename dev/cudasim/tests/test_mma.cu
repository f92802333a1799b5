/*
 * dev/cudasim/tests/test_mma.cu — tests of llmc/mma.cuh in the simulator: ldmatrix fragments against the
 * PTX ISA layout (computed on the host from the definition), and mma.sync m16n8k16 fed by ldmatrix from
 * shared memory (tiles staged with cp.async) against a double-precision 16x8x16 product of the same
 * bf16 inputs plus C. Eight warps per block, each with its own random problem.
 */
#include "llmc/cuda_common.cuh"
#include "llmc/mma.cuh"
#include "dev/cudasim/tests/sim_test_util.h"

#include <math.h>

#define WARPS 8

/* ldmatrix fragments: one warp loads four 8x8 matrices M_i (row r of M_i at tile[i][r][0..7]) with every
 * variant; out[variant][reg][lane] */
__global__ void ldmatrix_kernel(uint32_t* out, const unsigned short* tiles) {
    __shared__ __align__(16) unsigned short tile[4][8][8];
    unsigned lane = threadIdx.x;
    for (int i = lane; i < 4 * 64; i += 32) (&tile[0][0][0])[i] = tiles[i];
    __syncthreads();
    const void* row = &tile[lane / 8][lane % 8][0]; /* lanes 8i..8i+7 point at the rows of M_i */
    uint32_t r[4];
    ldmatrix_x1(r, row);
    out[(0 * 4 + 0) * 32 + lane] = r[0];
    ldmatrix_x2(r, row);
    for (int k = 0; k < 2; k++) out[(1 * 4 + k) * 32 + lane] = r[k];
    ldmatrix_x4(r, row);
    for (int k = 0; k < 4; k++) out[(2 * 4 + k) * 32 + lane] = r[k];
    ldmatrix_x1_trans(r, row);
    out[(3 * 4 + 0) * 32 + lane] = r[0];
    ldmatrix_x2_trans(r, row);
    for (int k = 0; k < 2; k++) out[(4 * 4 + k) * 32 + lane] = r[k];
    ldmatrix_x4_trans(r, row);
    for (int k = 0; k < 4; k++) out[(5 * 4 + k) * 32 + lane] = r[k];
}

/* D = A B + C per warp. A is 16x16 row-major (a_colmajor: stored transposed, At[k][m]), B is 16x8 K x N
 * row-major (b_nk: stored as Bt[n][k]). Tiles go global -> shared by cp.async, fragments come from
 * ldmatrix (transposing variants for the transposed storage), D goes back in the C/D fragment layout. */
__global__ void mma_kernel(float* d_out, const __nv_bfloat16* a_in, const __nv_bfloat16* b_in, const float* c_in,
                           int a_colmajor, int b_nk) {
    __shared__ __align__(16) __nv_bfloat16 a_tile[WARPS][16 * 16];
    __shared__ __align__(16) __nv_bfloat16 b_tile[WARPS][16 * 8];
    unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const __nv_bfloat16* a_src = a_in + warp * 256;
    const __nv_bfloat16* b_src = b_in + warp * 128;
    /* 256 bf16 = 32 chunks of 16 bytes (one per lane); 128 bf16 = 16 chunks */
    cp_async_16(&a_tile[warp][lane * 8], a_src + lane * 8);
    if (lane < 16) cp_async_16(&b_tile[warp][lane * 8], b_src + lane * 8);
    cp_async_commit();
    cp_async_wait<0>();
    __syncwarp();
    uint32_t a[4], b[2];
    if (!a_colmajor) {
        ldmatrix_x4(a, &a_tile[warp][(lane % 16) * 16 + (lane / 16) * 8]);
    } else {
        /* M_i = At[8(i/2) .. +7][8(i%2) .. +7]; lanes 8i..8i+7 point at its rows */
        unsigned i = lane / 8, k = 8 * (i / 2) + lane % 8, m0 = 8 * (i % 2);
        ldmatrix_x4_trans(a, &a_tile[warp][k * 16 + m0]);
    }
    if (!b_nk) ldmatrix_x2_trans(b, &b_tile[warp][(lane % 16) * 8]);
    else ldmatrix_x2(b, &b_tile[warp][(lane % 8) * 16 + ((lane / 8) % 2) * 8]);
    const float* c_src = c_in + warp * 128;
    float c[4] = {c_src[g * 8 + 2 * t], c_src[g * 8 + 2 * t + 1], c_src[(g + 8) * 8 + 2 * t], c_src[(g + 8) * 8 + 2 * t + 1]};
    float d[4];
    mma_m16n8k16_bf16(d, a, b, c);
    float* d_dst = d_out + warp * 128;
    d_dst[g * 8 + 2 * t] = d[0];
    d_dst[g * 8 + 2 * t + 1] = d[1];
    d_dst[(g + 8) * 8 + 2 * t] = d[2];
    d_dst[(g + 8) * 8 + 2 * t + 1] = d[3];
}

static uint32_t rng_state = 12345u;
static float rand_uniform(void) { /* xorshift32 in [-1, 1) */
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 17; rng_state ^= rng_state << 5;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}

static void test_ldmatrix(TestCounts& tc) {
    unsigned short* tiles;
    uint32_t* out;
    cudaCheck(cudaMalloc(&tiles, 4 * 64 * sizeof(unsigned short)));
    cudaCheck(cudaMalloc(&out, 6 * 4 * 32 * sizeof(uint32_t)));
    for (int i = 0; i < 4 * 64; i++) tiles[i] = (unsigned short)(0x1000 + i * 7);
    launch_kernel(ldmatrix_kernel, 1, 32, 0, 0, out, tiles);
    const char* names[6] = {"ldmatrix_x1", "ldmatrix_x2", "ldmatrix_x4", "ldmatrix_x1_trans", "ldmatrix_x2_trans", "ldmatrix_x4_trans"};
    const int nums[6] = {1, 2, 4, 1, 2, 4};
    for (int v = 0; v < 6; v++) {
        int bad = 0;
        bool trans = v >= 3;
        for (int i = 0; i < nums[v]; i++) {
            for (int lane = 0; lane < 32; lane++) {
                /* PTX ISA: lane l holds row l/4, columns 2(l%4) and 2(l%4)+1 of M_i (of M_i^T with .trans) */
                int r = lane / 4, c = 2 * (lane % 4);
                unsigned short lo = trans ? tiles[i * 64 + c * 8 + r] : tiles[i * 64 + r * 8 + c];
                unsigned short hi = trans ? tiles[i * 64 + (c + 1) * 8 + r] : tiles[i * 64 + r * 8 + c + 1];
                if (out[(v * 4 + i) * 32 + lane] != ((uint32_t)lo | (uint32_t)hi << 16)) bad++;
            }
        }
        char what[128];
        snprintf(what, sizeof what, "%s fragments vs the PTX ISA layout (%d matrices x 32 lanes)", names[v], nums[v]);
        check(tc, bad == 0, what, bad);
    }
    cudaCheck(cudaFree(tiles));
    cudaCheck(cudaFree(out));
}

static void test_mma(TestCounts& tc, int a_colmajor, int b_nk) {
    __nv_bfloat16 *a, *b;
    float *c, *d;
    cudaCheck(cudaMalloc(&a, WARPS * 256 * sizeof(__nv_bfloat16)));
    cudaCheck(cudaMalloc(&b, WARPS * 128 * sizeof(__nv_bfloat16)));
    cudaCheck(cudaMalloc(&c, WARPS * 128 * sizeof(float)));
    cudaCheck(cudaMalloc(&d, WARPS * 128 * sizeof(float)));
    /* logical A[w][m][k], B[w][k][n] as floats (bf16-rounded), stored as the kernel expects */
    static float A[WARPS][16][16], B[WARPS][16][8];
    for (int w = 0; w < WARPS; w++) {
        for (int m = 0; m < 16; m++) for (int k = 0; k < 16; k++) {
            __nv_bfloat16 h = __float2bfloat16(rand_uniform() * 4.0f);
            A[w][m][k] = __bfloat162float(h);
            a[w * 256 + (a_colmajor ? k * 16 + m : m * 16 + k)] = h;
        }
        for (int k = 0; k < 16; k++) for (int n = 0; n < 8; n++) {
            __nv_bfloat16 h = __float2bfloat16(rand_uniform() * 4.0f);
            B[w][k][n] = __bfloat162float(h);
            b[w * 128 + (b_nk ? n * 16 + k : k * 8 + n)] = h;
        }
        for (int i = 0; i < 128; i++) c[w * 128 + i] = rand_uniform();
    }
    launch_kernel(mma_kernel, 2, WARPS * 32, 0, 0, d, a, b, c, a_colmajor, b_nk);
    double worst = 0, worst_ratio = 0;
    for (int w = 0; w < WARPS; w++) {
        for (int m = 0; m < 16; m++) for (int n = 0; n < 8; n++) {
            double ref = c[w * 128 + m * 8 + n], mag = fabs(ref);
            for (int k = 0; k < 16; k++) {
                ref += (double)A[w][m][k] * B[w][k][n];
                mag += fabs((double)A[w][m][k] * B[w][k][n]);
            }
            double err = fabs(d[w * 128 + m * 8 + n] - ref);
            worst = fmax(worst, err);
            worst_ratio = fmax(worst_ratio, err / (mag * 1.2e-7 * 17)); /* fp32 accumulation of 17 terms */
        }
    }
    char what[160];
    snprintf(what, sizeof what, "mma m16n8k16 bf16 via cp.async + %s A, %s B vs double, %d warps", a_colmajor ? "ldmatrix_x4_trans" : "ldmatrix_x4",
             b_nk ? "ldmatrix_x2" : "ldmatrix_x2_trans", WARPS);
    check(tc, worst_ratio <= 1.0, what, worst);
    cudaCheck(cudaFree(a));
    cudaCheck(cudaFree(b));
    cudaCheck(cudaFree(c));
    cudaCheck(cudaFree(d));
}

/* an ldmatrix row address that is not 16-byte aligned is reported */
__global__ void misaligned_ldmatrix_kernel(uint32_t* out) {
    __shared__ __align__(16) unsigned short tile[8 * 8 + 8];
    uint32_t r[1];
    ldmatrix_x1(r, &tile[1 + (threadIdx.x % 8) * 8]);
    out[threadIdx.x] = r[0];
}

/* lanes reaching ldmatrix, or mma, from two call sites (undefined for PTX .aligned instructions) */
__global__ void divergent_ldmatrix_kernel(uint32_t* out) {
    __shared__ __align__(16) unsigned short tile[8 * 8];
    for (int i = threadIdx.x; i < 64; i += 32) tile[i] = (unsigned short)i;
    __syncthreads();
    uint32_t r[1];
    if (threadIdx.x < 16) ldmatrix_x1(r, &tile[(threadIdx.x % 8) * 8]);
    else ldmatrix_x1(r, &tile[(threadIdx.x % 8) * 8]);
    out[threadIdx.x] = r[0];
}
__global__ void divergent_mma_kernel(uint32_t* out) {
    uint32_t a[4] = {0x3f803f80u, 0, 0, 0}, b[2] = {0x3f803f80u, 0};
    float c[4] = {}, d[4];
    if (threadIdx.x % 2) mma_m16n8k16_bf16(d, a, b, c);
    else mma_m16n8k16_bf16(d, a, b, c);
    out[threadIdx.x] = (uint32_t)d[0];
}

int main(void) {
    TestCounts tc;
    test_ldmatrix(tc);
    for (int a_colmajor = 0; a_colmajor < 2; a_colmajor++)
        for (int b_nk = 0; b_nk < 2; b_nk++) test_mma(tc, a_colmajor, b_nk);
#ifdef CUDASIM
    uint32_t* out;
    cudaCheck(cudaMalloc(&out, 32 * sizeof(uint32_t)));
    check_child_fails(tc, "misaligned ldmatrix row address is reported", "not 16-byte aligned",
                      [&] { launch_kernel(misaligned_ldmatrix_kernel, 1, 32, 0, 0, out); });
    check_child_fails(tc, "ldmatrix reached from two call sites is reported", "different call sites",
                      [&] { launch_kernel(divergent_ldmatrix_kernel, 1, 32, 0, 0, out); });
    check_child_fails(tc, "mma reached from two call sites is reported", "different call sites",
                      [&] { launch_kernel(divergent_mma_kernel, 1, 32, 0, 0, out); });
    cudaCheck(cudaFree(out));
#endif
    return finish(tc);
}
