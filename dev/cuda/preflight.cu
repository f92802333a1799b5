/*
 * dev/cuda/preflight.cu — the device check's first step: does a CUDA program built here with cuBLASLt (and
 * NCCL, when built with -DUSE_NCCL) run on this GPU? In a few seconds it prints
 *   gpu: NAME | sm_XY | SMs | memory GiB | driver API | runtime
 *   cublaslt: VERSION | a 64x96x128 matmul through llmc/matmul.cuh (cuBLASLt), max |GPU - CPU| = E | the same with
 *             its input one element past 16-byte alignment (cublasGemmEx), max |GPU - CPU| = E
 *   nccl: VERSION      (or "nccl: not built in")
 * and "preflight ok"; a failed call exits 1 naming it (file:line), a wrong product exits 1 with the error.
 * Built by make build/gpu/preflight (nvcc, the GPU present) or build/cudasim/preflight (the simulator).
 */
#include "llmc/cuda_utils.cuh"
#include "llmc/cublas_common.cuh"
#include "llmc/matmul.cuh"
#include "llmc/distributed.cuh"

#include <math.h>
#include <vector>

int main(void) {
    int driver = 0, runtime = 0;
    cudaCheck(cudaDriverGetVersion(&driver));
    cudaCheck(cudaRuntimeGetVersion(&runtime));
    cuda_device_count("nothing: the preflight needs a GPU");
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("gpu: %s | sm_%d%d | %d SMs | %.1f GiB | driver API %d.%d | runtime %d.%d\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, (double)prop.totalGlobalMem / (1 << 30), driver / 1000, driver % 1000 / 10, runtime / 1000,
           runtime % 1000 / 10);

    /* out (BT x OC) = inp (BT x C) · weightᵀ (OC x C) + bias, small integers so that every build rounds the same; twice:
     * inp 16-byte aligned (cuBLASLt) and one element past that (cublasGemmEx, the path of unaligned matrices) */
    const int BT = 64, C = 128, OC = 96;
    std::vector<floatX> inp(BT * C), weight(OC * C), bias(OC), out(BT * OC);
    for (int i = 0; i < BT * C; i++) inp[i] = (floatX)(float)(i % 7 - 3);
    for (int i = 0; i < OC * C; i++) weight[i] = (floatX)(float)(i % 5 - 2);
    for (int i = 0; i < OC; i++) bias[i] = (floatX)(float)(i % 3);
    floatX *d_inp, *d_weight, *d_bias, *d_out;
    cudaCheck(cudaMalloc(&d_inp, (inp.size() + 1) * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_weight, weight.size() * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_bias, bias.size() * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_out, out.size() * sizeof(floatX)));
    cudaCheck(cudaMemcpy(d_weight, weight.data(), weight.size() * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_bias, bias.data(), bias.size() * sizeof(floatX), cudaMemcpyHostToDevice));
    BlasContext blas;
    blas_create(&blas, 0);
    printf("cublaslt: %zu", (size_t)cublasLtGetVersion());
    for (int shift = 0; shift <= 1; shift++) {
        cudaCheck(cudaMemcpy(d_inp + shift, inp.data(), inp.size() * sizeof(floatX), cudaMemcpyHostToDevice));
        long fallbacks = blas.gemm_fallbacks;
        matmul_forward(&blas, d_out, NULL, d_inp + shift, d_weight, d_bias, BT, C, OC);
        cudaCheck(cudaMemcpy(out.data(), d_out, out.size() * sizeof(floatX), cudaMemcpyDeviceToHost));
        float max_diff = 0.0f;
        for (int r = 0; r < BT; r++)
            for (int o = 0; o < OC; o++) {
                float ref = (float)bias[o];
                for (int c = 0; c < C; c++) ref += (float)inp[r * C + c] * (float)weight[o * C + c];
                max_diff = fmaxf(max_diff, fabsf((float)out[r * OC + o] - ref));
            }
        /* the sums are integers of at most 770 in magnitude: exact in fp32, and in bf16 within half a unit of 512..1024;
         * the unaligned product adds the bias to the product rounded to bf16 first: one more half unit */
        const float bound = sizeof(floatX) == 2 ? 2.0f * (1 + shift) : 0.0f;
        const char* path = shift ? "cublasGemmEx" : "cuBLASLt";
        printf(" | a %dx%dx%d matmul through llmc/matmul.cuh (%s), max |GPU - CPU| = %g", BT, OC, C, path, max_diff);
        if (!(max_diff <= bound)) {
            fprintf(stderr, "\nerror: preflight: the %s product differs from the CPU's by %g (bound %g)\n", path, max_diff, bound);
            return 1;
        }
        if (blas.gemm_fallbacks - fallbacks != shift) {
            fprintf(stderr, "\nerror: preflight: the %s product took %ld cublasGemmEx calls, expected %d\n", path, blas.gemm_fallbacks - fallbacks,
                    shift);
            return 1;
        }
    }
    printf("\n");
    blas_destroy(&blas);
    cudaCheck(cudaFree(d_inp));
    cudaCheck(cudaFree(d_weight));
    cudaCheck(cudaFree(d_bias));
    cudaCheck(cudaFree(d_out));
#if defined(USE_NCCL)
    int nccl = 0;
    ncclCheck(ncclGetVersion(&nccl));
    printf("nccl: %d\n", nccl);
#else
    printf("nccl: not built in\n");
#endif
    printf("preflight ok\n");
    return 0;
}
