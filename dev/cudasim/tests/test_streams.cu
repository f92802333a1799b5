/*
 * dev/cudasim/tests/test_streams.cu — tests of the simulator's stream modes (CUDASIM_STREAMS, cudasim_runtime.h).
 *
 * Each case is a small stream program whose result (one float) the host reads; planted ordering bugs (a
 * missing cudaStreamWaitEvent, a pinned host buffer rewritten before its copy ran, a legacy-stream copy that
 * does not wait for a non-blocking stream) must give the stale or overwritten value in at least one deferred
 * order, and the correct programs the right value in every mode. The expected values follow from CUDA's
 * ordering rules and each mode's documented order, not from running the simulator. Every case runs in a
 * child process of this program (`test_streams --case NAME`) under each mode. Also: a bad CUDASIM_STREAMS
 * value is an error; and the test programs named on the command line pass under both deferred orders.
 * Ends with "N passed, M failed".
 */
#include "llmc/cuda_common.cuh"
#include "dev/cudasim/tests/sim_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x[0] = v (one thread) */
__global__ void fill_kernel(float* x, float v) { x[0] = v; }
/* dst[0] = src[0] (one thread) */
__global__ void copy_kernel(float* dst, const float* src) { dst[0] = src[0]; }

static void fill(float* x, float v, cudaStream_t s) { launch_kernel(fill_kernel, 1, 1, 0, s, x, v); }

/* x = 1, y = 0 on the device, everything done */
static void start(float** x, float** y) {
    cudaCheck(cudaMalloc(x, sizeof(float)));
    cudaCheck(cudaMalloc(y, sizeof(float)));
    fill(*x, 1.0f, 0);
    fill(*y, 0.0f, 0);
    cudaCheck(cudaDeviceSynchronize());
}

static cudaStream_t stream(unsigned flags) {
    cudaStream_t s;
    cudaCheck(cudaStreamCreateWithFlags(&s, flags));
    return s;
}

/* The cases: each returns what the host reads (device memory is host memory in the simulator, so a
 * direct read shows what has run so far). */
static float run_case(const char* name) {
    float *x, *y;
    start(&x, &y);
    cudaStream_t a = stream(cudaStreamNonBlocking), b = stream(cudaStreamNonBlocking);
    cudaEvent_t e;
    cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    if (strcmp(name, "raw-missing-wait") == 0 || strcmp(name, "raw-event-wait") == 0) {
        fill(x, 2.0f, a); /* producer on a */
        cudaCheck(cudaEventRecord(e, a));
        if (strcmp(name, "raw-event-wait") == 0) cudaCheck(cudaStreamWaitEvent(b, e, 0));
        launch_kernel(copy_kernel, 1, 1, 0, b, y, (const float*)x); /* consumer on b */
        cudaCheck(cudaStreamSynchronize(b));
        return *y;
    }
    if (strcmp(name, "war-missing-wait") == 0 || strcmp(name, "war-event-wait") == 0) {
        launch_kernel(copy_kernel, 1, 1, 0, a, y, (const float*)x); /* reader on a */
        cudaCheck(cudaEventRecord(e, a));
        if (strcmp(name, "war-event-wait") == 0) cudaCheck(cudaStreamWaitEvent(b, e, 0));
        fill(x, 2.0f, b); /* overwrite on b */
        cudaCheck(cudaStreamSynchronize(a));
        return *y;
    }
    if (strcmp(name, "h2d-pinned-rewritten") == 0 || strcmp(name, "h2d-pageable-rewritten") == 0) {
        float* h;
        if (strcmp(name, "h2d-pinned-rewritten") == 0) cudaCheck(cudaMallocHost(&h, sizeof(float)));
        else h = (float*)malloc(sizeof(float));
        *h = 5.0f;
        cudaCheck(cudaMemcpyAsync(y, h, sizeof(float), cudaMemcpyHostToDevice, a));
        *h = 6.0f; /* before the stream is synchronised */
        cudaCheck(cudaStreamSynchronize(a));
        return *y;
    }
    if (strcmp(name, "d2h-pageable-no-sync") == 0) {
        float h = 0.0f;
        fill(y, 7.0f, a);
        cudaCheck(cudaMemcpyAsync(&h, y, sizeof(float), cudaMemcpyDeviceToHost, a)); /* returns when done */
        return h;
    }
    if (strcmp(name, "legacy-after-blocking") == 0 || strcmp(name, "legacy-after-nonblocking") == 0) {
        cudaStream_t s = strcmp(name, "legacy-after-blocking") == 0 ? stream(cudaStreamDefault) : a;
        float h = 0.0f;
        fill(y, 8.0f, s);
        cudaCheck(cudaMemcpy(&h, y, sizeof(float), cudaMemcpyDeviceToHost)); /* the legacy default stream */
        return h;
    }
    if (strcmp(name, "event-sync-partial") == 0) {
        fill(y, 2.0f, a);
        cudaCheck(cudaEventRecord(e, a));
        fill(y, 3.0f, a);
        cudaCheck(cudaEventSynchronize(e));
        return *y;
    }
    if (strcmp(name, "device-sync") == 0) {
        fill(x, 2.0f, a);
        fill(y, 3.0f, b);
        cudaCheck(cudaDeviceSynchronize());
        return *x + *y;
    }
    fprintf(stderr, "error: test_streams: unknown case %s\n", name);
    exit(2);
}

/* expected results per mode: sync, deferred, deferred:others-first */
typedef struct {
    const char* name;
    float expect[3];
    const char* why;
} Case;
static const Case kCases[] = {
    {"raw-missing-wait", {2, 1, 2}, "consumer without a wait: stale when its stream runs first (deferred)"},
    {"raw-event-wait", {2, 2, 2}, "consumer after cudaStreamWaitEvent: the producer's value in every order"},
    {"war-missing-wait", {1, 1, 2}, "overwrite without a wait: comes first when other streams run first"},
    {"war-event-wait", {1, 1, 1}, "overwrite after cudaStreamWaitEvent: the reader's value in every order"},
    {"h2d-pinned-rewritten", {5, 6, 6}, "copy from pinned memory reads it when it runs"},
    {"h2d-pageable-rewritten", {5, 5, 5}, "copy from pageable memory is staged at the call"},
    {"d2h-pageable-no-sync", {7, 7, 7}, "copy to pageable memory returns when done"},
    {"legacy-after-blocking", {8, 8, 8}, "cudaMemcpy waits for a blocking stream's earlier work"},
    {"legacy-after-nonblocking", {8, 0, 8}, "cudaMemcpy does not wait for a non-blocking stream"},
    {"event-sync-partial", {3, 2, 2}, "cudaEventSynchronize runs the stream up to the record only"},
    {"device-sync", {5, 5, 5}, "cudaDeviceSynchronize runs every stream"},
};
static const char* kModes[3] = {"sync", "deferred", "deferred:others-first"};

/* runs `self --case name` under CUDASIM_STREAMS=mode: its exit status, the float it printed (-1 if none)
 * in *value and its output in text */
static int run_child_case(const char* self, const char* mode, const char* name, float* value, char* text, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "CUDASIM_STREAMS='%s' CUDASIM_THREADS=1 '%s' --case '%s' 2>&1", mode, self, name);
    fflush(stdout);
    FILE* p = popen(cmd, "r");
    if (!p) {
        perror("popen");
        exit(1);
    }
    size_t len = fread(text, 1, cap - 1, p);
    text[len] = 0;
    int status = pclose(p);
    const char* at = strstr(text, "result ");
    *value = at ? strtof(at + 7, NULL) : -1.0f;
    return status;
}

/* usage: test_streams [test program...]: the cases, then the programs (shell commands) under
 * CUDASIM_STREAMS=deferred and deferred:others-first */
int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "--case") == 0) {
        printf("result %g\n", (double)run_case(argv[2]));
        return 0;
    }
    TestCounts tc;
    char text[4096], what[512];
    for (const Case& c : kCases) {
        for (int m = 0; m < 3; m++) {
            float got;
            int status = run_child_case(argv[0], kModes[m], c.name, &got, text, sizeof(text));
            snprintf(what, sizeof(what), "%s, %s: %g (expected %g): %s", c.name, kModes[m], (double)got, (double)c.expect[m], c.why);
            if (status != 0) printf("      child: %.300s\n", text);
            check(tc, status == 0 && got == c.expect[m], what, fabs(got - c.expect[m]));
        }
    }
    check_child_fails(tc, "a bad CUDASIM_STREAMS value is reported", "CUDASIM_STREAMS=bogus: expected", [] {
        setenv("CUDASIM_STREAMS", "bogus", 1);
        run_case("device-sync");
    });
    for (int i = 1; i < argc; i++) {
        check_program_under(tc, argv[i], "CUDASIM_STREAMS=deferred");
        check_program_under(tc, argv[i], "CUDASIM_STREAMS=deferred:others-first");
    }
    return finish(tc);
}
