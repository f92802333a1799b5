/*
 * dev/cuda/bench_flash_attention.cu — GPU benchmark of llmc/flash_attention.cuh (bf16, causal), against a
 * baseline measured in the same run:
 *   materialised: cuBLAS strided-batched GEMM S = QKᵀ (fp32, the full T x T per head), a causal softmax kernel
 *                 writing P (bf16), and a second GEMM O = PV — the forward llm.c runs without cuDNN.
 * and, where the forward and the backward's kernels give each warp two row blocks of 16 queries or keys (FA_FWD_MT:
 * head dims up to 128; FA_KV_MT, FA_DQ_MT: up to 64), the same with one row block per warp (MT = 1), so the gain
 * of sharing each fragment read from shared memory is measured, not assumed.
 * TFLOP/s use the causal count for every method: forward 4·T²·d·NH·B/2, backward 2.5x that.
 * The flash output is also compared with the materialised one (max |difference|) as a sanity check.
 * GPU only: make bench-flash-attention (builds for the present GPU and runs).
 * Usage: bench_flash_attention [B T REPEATS]   (default: B = 8 at T = 1024, 2048, 4096, 20 repeats at T <= 1024 and 5
 *        above, then d = 64 at B = 64, T = 1024; the simulator's smoke run, make sim-test-benchmarks, takes 1 70 1)
 */
#include "llmc/cuda_utils.cuh"
#include "llmc/cublas_common.cuh"
#include "llmc/flash_attention.cuh"
#include "dev/cuda/lab.cuh"

#include <math.h>
#include <vector>

/* P[row][t2] = softmax_{t2<=t}(scale·S[row][t2]) as bf16, zero above the diagonal; row = (b·NH + h)·T + t;
 * one warp per row, lanes striding over t2 (max, sum, then write) */
__global__ void causal_softmax_kernel(__nv_bfloat16* P, const float* S, long rows, int T, float scale) {
    long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    int lane = threadIdx.x % 32, t = (int)(row % T);
    const float* s = S + row * T;
    float mx = -INFINITY, sum = 0.0f;
    for (int t2 = lane; t2 <= t; t2 += 32) mx = fmaxf(mx, s[t2] * scale);
    mx = warp_max(mx);
    for (int t2 = lane; t2 <= t; t2 += 32) sum += expf(s[t2] * scale - mx);
    float inv = 1.0f / warp_sum(sum);
    for (int t2 = lane; t2 < T; t2 += 32) P[row * T + t2] = __float2bfloat16(t2 <= t ? expf(s[t2] * scale - mx) * inv : 0.0f);
}

/* forward with materialised S and P: per batch b, one strided-batched GEMM over the NH heads for each product */
static void materialised_forward(cublasHandle_t handle, __nv_bfloat16* out, float* S, __nv_bfloat16* P, const __nv_bfloat16* qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    float one = 1.0f, zero = 0.0f;
    for (int b = 0; b < B; b++) {
        const __nv_bfloat16* base = qkv + (long)b * T * 3 * C;
        /* column-major: Sᵀ (T x T, per head) = K Qᵀ, i.e. row-major S[t][t2] = q_t·k_t2 */
        cublasCheck(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, &one, base + C, CUDA_R_16BF, 3 * C, hs, base, CUDA_R_16BF, 3 * C,
                                               hs, &zero, S + (long)b * NH * T * T, CUDA_R_32F, T, (long long)T * T, NH, CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT));
    }
    long rows = (long)B * NH * T;
    launch_kernel(causal_softmax_kernel, dim3(ceil_div(rows, 8)), dim3(256), 0, 0, P, (const float*)S, rows, T, 1.0f / sqrtf((float)hs));
    for (int b = 0; b < B; b++) {
        /* column-major: Oᵀ (hs x T, ld C) = Vᵀ Pᵀ */
        cublasCheck(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, &one, qkv + (long)b * T * 3 * C + 2 * C, CUDA_R_16BF, 3 * C, hs,
                                               P + (long)b * NH * T * T, CUDA_R_16BF, T, (long long)T * T, &zero, out + (long)b * T * C, CUDA_R_16BF, C, hs,
                                               NH, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

static void bench_shape(cublasHandle_t handle, int B, int NH, int hs, int T, int reps) {
    int C = NH * hs;
    long nqkv = (long)B * T * 3 * C, nout = (long)B * T * C;
    __nv_bfloat16* qkv = device_uniform<__nv_bfloat16>(nqkv, 1u, 2.0f);
    __nv_bfloat16* dout = device_uniform<__nv_bfloat16>(nout, 2u, 1.0f);
    __nv_bfloat16 *dqkv = device_alloc<__nv_bfloat16>(nqkv), *out = device_alloc<__nv_bfloat16>(nout), *out_ref = device_alloc<__nv_bfloat16>(nout);
    __nv_bfloat16* P = device_alloc<__nv_bfloat16>((size_t)B * NH * T * T);
    float *lse = device_alloc<float>((size_t)B * NH * T), *S = device_alloc<float>((size_t)B * NH * T * T);
    float* scratch = device_alloc<float>(flash_attention_scratch_bytes(B, T, C, NH) / sizeof(float));

    double fwd_flops = 4.0 * T * T * hs * NH * B / 2, bwd_flops = 2.5 * fwd_flops;
    float fwd = time_ms(reps, [&] { flash_attention_forward(out, lse, qkv, B, T, C, NH, 0); });
    float bwd_atomic = time_ms(reps, [&] { flash_attention_backward(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, 0, 0); });
    float bwd_det = time_ms(reps, [&] { flash_attention_backward(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, 1, 0); });
    float fwd_mt1 = -1.0f, bwd_atomic_mt1 = -1.0f, bwd_det_mt1 = -1.0f;
    if (fa_padded_dim(hs) == 128) fwd_mt1 = time_ms(reps, [&] { fa_forward_bf16<128, 1>(out, lse, qkv, B, T, C, NH, 0); });
    if (fa_padded_dim(hs) == 64) {
        fwd_mt1 = time_ms(reps, [&] { fa_forward_bf16<64, 1>(out, lse, qkv, B, T, C, NH, 0); });
        bwd_atomic_mt1 = time_ms(reps, [&] { fa_backward_bf16<64, 1, 1>(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, 0, 0); });
        bwd_det_mt1 = time_ms(reps, [&] { fa_backward_bf16<64, 1, 1>(dqkv, scratch, dout, out, qkv, lse, B, T, C, NH, 1, 0); });
    }
    float mat_fwd = time_ms(reps, [&] { materialised_forward(handle, out_ref, S, P, qkv, B, T, C, NH); });
    /* sanity: flash vs materialised outputs */
    materialised_forward(handle, out_ref, S, P, qkv, B, T, C, NH);
    std::vector<float> a = host_copy(out, nout), r = host_copy(out_ref, nout);
    float max_diff = 0.0f;
    for (long i = 0; i < nout; i++) max_diff = fmaxf(max_diff, fabsf(a[i] - r[i]));

    auto tf = [](double flops, float ms) { return flops / (ms * 1e-3) / 1e12; };
    printf("B=%d NH=%d d=%d T=%d\n", B, NH, hs, T);
    printf("  flash forward               %8.3f ms %7.1f TFLOP/s\n", fwd, tf(fwd_flops, fwd));
    if (fwd_mt1 > 0)
        printf("  flash forward, MT = 1       %8.3f ms %7.1f TFLOP/s (MT = 2 is %.2fx)\n", fwd_mt1, tf(fwd_flops, fwd_mt1), fwd_mt1 / fwd);
    printf("  flash backward (atomic dq)  %8.3f ms %7.1f TFLOP/s\n", bwd_atomic, tf(bwd_flops, bwd_atomic));
    printf("  flash backward (determin.)  %8.3f ms %7.1f TFLOP/s\n", bwd_det, tf(bwd_flops, bwd_det));
    if (bwd_atomic_mt1 > 0)
        printf("  flash backward (atomic), MT = 1 %6.3f ms %7.1f TFLOP/s (MT = %d is %.2fx)\n", bwd_atomic_mt1, tf(bwd_flops, bwd_atomic_mt1), FA_KV_MT(64),
               bwd_atomic_mt1 / bwd_atomic);
    if (bwd_det_mt1 > 0)
        printf("  flash backward (det.), MT = 1 %6.3f ms %7.1f TFLOP/s (MT = %d is %.2fx)\n", bwd_det_mt1, tf(bwd_flops, bwd_det_mt1), FA_DQ_MT(64),
               bwd_det_mt1 / bwd_det);
    printf("  flash forward + backward    %8.3f ms %7.1f TFLOP/s\n", fwd + bwd_atomic, tf(fwd_flops + bwd_flops, fwd + bwd_atomic));
    printf("  materialised forward (cuBLAS + softmax) %8.3f ms %7.1f TFLOP/s (flash is %.1fx)\n", mat_fwd, tf(fwd_flops, mat_fwd), mat_fwd / fwd);
    printf("  max |flash out - materialised out| = %.3g\n", max_diff);
    device_free(qkv, dqkv, dout, out, out_ref, lse, scratch, S, P);
}

int main(int argc, char** argv) {
    if (argc != 1 && argc != 4) {
        fprintf(stderr, "usage: %s [B T REPEATS]\n", argv[0]);
        return 2;
    }
    int B = argc == 4 ? atoi(argv[1]) : 8, T = argc == 4 ? atoi(argv[2]) : 0, reps = argc == 4 ? atoi(argv[3]) : 0;
    if (argc == 4 && (B <= 0 || T <= 0 || reps <= 0)) {
        fprintf(stderr, "error: B, T and REPEATS must be positive\n");
        return 2;
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s\n", prop.name);
    cublasHandle_t handle;
    cublasCheck(cublasCreate(&handle));
    for (int hs : {64, 128}) {
        if (argc == 4) bench_shape(handle, B, 12, hs, T, reps);
        else
            for (int t : {1024, 2048, 4096}) bench_shape(handle, B, 12, hs, t, t <= 1024 ? 20 : 5);
    }
    if (argc != 4) bench_shape(handle, 64, 12, 64, 1024, 10); /* a d12 training step's shape (B = 64): the grid fills the GPU */
    cublasCheck(cublasDestroy(handle));
    return 0;
}
