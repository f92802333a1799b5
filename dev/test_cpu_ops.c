/*
 * dev/test_cpu_ops.c — tests of llmc/cpu_ops.h and llmc/cpu_matmul.h.
 *
 * References are written here, independently, in double precision with straightforward loops:
 *   - each forward op against its naive double reference, on awkward shapes (BT=37, C=96, NH=3,
 *     OC=300, V=300 with Vp=384, ...);
 *   - each backward op against central finite differences of the double reference forward of
 *     loss = Σ dout·forward(inputs) (small shapes), with the gradient buffers pre-filled with
 *     random values to check that backward ops accumulate (+=);
 *   - the matmul, for every code path the CPU has (avx512, avx2, scalar; a path the CPU lacks is
 *     reported as skipped), in all three layouts on many shapes (1x1, primes, sizes around the
 *     tile and cache-block edges), against naive double loops;
 *   - determinism: global_norm_squared, encoder_backward and sgemm give identical bits with 1
 *     and 2 threads; AdamW against the torch.optim.AdamW formulas in double; a bad target is a
 *     clean fatal error.
 * Errors are normwise: max|got - ref| / max|ref|. Last line: "N passed, M failed".
 */
#include <stdio.h>
#include <math.h>
#include <sys/wait.h>
#include "llmc/cpu_ops.h"

static int passed, failed;

static void report(const char* what, double err, double tol) {
    int ok = err <= tol; /* NaN fails */
    printf("%-62s worst rel err %.2e (tol %.0e) %s\n", what, err, tol, ok ? "ok" : "FAIL");
    if (ok) passed++;
    else failed++;
}

/* max|got - ref| / max|ref| */
static double rel_err(const float* got, const double* ref, size_t n) {
    double worst = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= worst)) worst = d; /* keeps NaN */
        if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
    }
    return worst / scale;
}

static unsigned long long rng_state = 88172645463325252ull;
static double uniform(void) { /* [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static float* rand_floats(size_t n, double amplitude) {
    float* x = (float*)malloc_check(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(amplitude * uniform());
    return x;
}
static double* to_double(const float* x, size_t n) {
    double* d = (double*)malloc_check(n * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}
static float* copy_floats(const float* x, size_t n) {
    float* y = (float*)malloc_check(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

/* ----------------------------------------------------------------------------
 * naive double references of the forward ops */
static void ref_encoder(double* out, const int* inp, const double* wte, const double* wpe, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                out[(b * T + t) * C + c] = wte[inp[b * T + t] * C + c] + wpe[t * C + c];
}
static void ref_layernorm(double* out, double* mean, double* rstd, const double* x, const double* w, const double* b,
                          int BT, int C) {
    for (int i = 0; i < BT; i++) {
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++) m += x[i * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[i * C + c] - m) * (x[i * C + c] - m);
        double s = 1.0 / sqrt(v / C + 1e-5);
        for (int c = 0; c < C; c++) out[i * C + c] = (x[i * C + c] - m) * s * w[c] + b[c];
        if (mean) mean[i] = m;
        if (rstd) rstd[i] = s;
    }
}
/* out[i,o] = Σ_c x[i,c]·w[o,c] + bias[o] */
static void ref_matmul(double* out, const double* x, const double* w, const double* bias, int BT, int C, int OC) {
    for (int i = 0; i < BT; i++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int c = 0; c < C; c++) s += x[(long)i * C + c] * w[(long)o * C + c];
            out[(long)i * OC + o] = s;
        }
}
static void ref_attention(double* out, double* att, const double* qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    double* row = (double*)malloc_check(T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double mx = -1e300, sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    double dot = 0.0;
                    for (int i = 0; i < hs; i++)
                        dot += qkv[(b * T + t) * 3 * C + h * hs + i] * qkv[(b * T + t2) * 3 * C + C + h * hs + i];
                    row[t2] = dot / sqrt((double)hs);
                    if (row[t2] > mx) mx = row[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) sum += exp(row[t2] - mx);
                for (int t2 = 0; t2 <= t; t2++) row[t2] = exp(row[t2] - mx) / sum;
                if (att)
                    for (int t2 = 0; t2 < T; t2++) att[((b * NH + h) * T + t) * T + t2] = t2 <= t ? row[t2] : 0.0;
                for (int i = 0; i < hs; i++) {
                    double s = 0.0;
                    for (int t2 = 0; t2 <= t; t2++) s += row[t2] * qkv[(b * T + t2) * 3 * C + 2 * C + h * hs + i];
                    out[(b * T + t) * C + h * hs + i] = s;
                }
            }
    free(row);
}
static double ref_gelu(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
static void ref_crossentropy(double* losses, const double* logits, const int* targets, int BT, int V, int Vp) {
    for (int i = 0; i < BT; i++) {
        double mx = -1e300, sum = 0.0;
        for (int j = 0; j < V; j++)
            if (logits[i * Vp + j] > mx) mx = logits[i * Vp + j];
        for (int j = 0; j < V; j++) sum += exp(logits[i * Vp + j] - mx);
        losses[i] = log(sum) + mx - logits[i * Vp + targets[i]];
    }
}

/* ----------------------------------------------------------------------------
 * finite differences: an op's reference forward as loss = Σ dout·forward(inputs) over double
 * inputs held in `ctx`; fd_grad perturbs each element of one input by ±h */
typedef double (*LossFn)(void* ctx);
static void fd_grad(double* grad, double* x, size_t n, LossFn loss, void* ctx) {
    const double h = 1e-5;
    for (size_t i = 0; i < n; i++) {
        double saved = x[i];
        x[i] = saved + h;
        double up = loss(ctx);
        x[i] = saved - h;
        double down = loss(ctx);
        x[i] = saved;
        grad[i] = (up - down) / (2.0 * h);
    }
}
static double dot_d(const double* a, const double* b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
/* checks got (an accumulated gradient that started at `initial`) against initial + fd */
static void report_grad(const char* what, const float* got, const float* initial, const double* fd, size_t n,
                        double tol) {
    double* want = (double*)malloc_check(n * sizeof(double));
    for (size_t i = 0; i < n; i++) want[i] = (initial ? initial[i] : 0.0) + fd[i];
    report(what, rel_err(got, want, n), tol);
    free(want);
}

/* ----------------------------------------------------------------------------
 * encoder */
typedef struct { const int* inp; double *wte, *wpe, *dout, *out; int B, T, C; } EncoderCtx;
static double encoder_loss(void* p) {
    EncoderCtx* e = (EncoderCtx*)p;
    ref_encoder(e->out, e->inp, e->wte, e->wpe, e->B, e->T, e->C);
    return dot_d(e->dout, e->out, (size_t)e->B * e->T * e->C);
}
static void test_encoder(void) {
    int B = 3, T = 13, C = 96, V = 7; /* few token ids: rows of dwte collect from many tokens */
    int* inp = (int*)malloc_check(B * T * sizeof(int));
    for (int i = 0; i < B * T; i++) inp[i] = (int)((uniform() + 1.0) * 0.5 * V) % V;
    float *wte = rand_floats(V * C, 1), *wpe = rand_floats(T * C, 1), *out = rand_floats(B * T * C, 1);
    encoder_forward(out, inp, wte, wpe, B, T, C);
    EncoderCtx e = {inp, to_double(wte, V * C), to_double(wpe, T * C), NULL, (double*)malloc_check(B * T * C * 8), B, T, C};
    ref_encoder(e.out, inp, e.wte, e.wpe, B, T, C);
    report("encoder_forward B=3 T=13 C=96", rel_err(out, e.out, B * T * C), 1e-7);

    float* dout = rand_floats(B * T * C, 1);
    e.dout = to_double(dout, B * T * C);
    float *dwte0 = rand_floats(V * C, 1), *dwpe0 = rand_floats(T * C, 1);
    float *dwte = copy_floats(dwte0, V * C), *dwpe = copy_floats(dwpe0, T * C);
    encoder_backward(dwte, dwpe, dout, inp, B, T, C);
    double *g_wte = (double*)malloc_check(V * C * 8), *g_wpe = (double*)malloc_check(T * C * 8);
    fd_grad(g_wte, e.wte, V * C, encoder_loss, &e);
    fd_grad(g_wpe, e.wpe, T * C, encoder_loss, &e);
    report_grad("encoder_backward dwte vs finite differences", dwte, dwte0, g_wte, V * C, 1e-6);
    report_grad("encoder_backward dwpe vs finite differences", dwpe, dwpe0, g_wpe, T * C, 1e-6);

    /* deterministic: identical bits with 1 and 2 threads */
    float *w1 = copy_floats(dwte0, V * C), *p1 = copy_floats(dwpe0, T * C);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    encoder_backward(w1, p1, dout, inp, B, T, C);
    omp_set_num_threads(threads > 1 ? threads : 2);
    int same = !memcmp(w1, dwte, V * C * sizeof(float)) && !memcmp(p1, dwpe, T * C * sizeof(float));
    omp_set_num_threads(threads);
    report("encoder_backward identical bits with 1 and 2 threads", same ? 0.0 : 1.0, 0.0);
    free(inp), free(wte), free(wpe), free(out), free(dout), free(dwte0), free(dwpe0), free(dwte), free(dwpe);
    free(w1), free(p1), free(e.wte), free(e.wpe), free(e.dout), free(e.out), free(g_wte), free(g_wpe);
}

/* ----------------------------------------------------------------------------
 * layernorm */
typedef struct { double *x, *w, *b, *dout, *out; int BT, C; } LayernormCtx;
static double layernorm_loss(void* p) {
    LayernormCtx* l = (LayernormCtx*)p;
    ref_layernorm(l->out, NULL, NULL, l->x, l->w, l->b, l->BT, l->C);
    return dot_d(l->dout, l->out, (size_t)l->BT * l->C);
}
static void test_layernorm(void) {
    {
        int BT = 37, C = 96;
        float *x = rand_floats(BT * C, 3), *w = rand_floats(C, 1), *b = rand_floats(C, 1);
        for (int i = 0; i < BT * C; i++) x[i] += 2.0f; /* a mean far from 0 */
        float *out = rand_floats(BT * C, 1), *mean = rand_floats(BT, 1), *rstd = rand_floats(BT, 1);
        layernorm_forward(out, mean, rstd, x, w, b, BT, C);
        double *xd = to_double(x, BT * C), *wd = to_double(w, C), *bd = to_double(b, C);
        double *ro = (double*)malloc_check(BT * C * 8), *rm = (double*)malloc_check(BT * 8), *rr = (double*)malloc_check(BT * 8);
        ref_layernorm(ro, rm, rr, xd, wd, bd, BT, C);
        report("layernorm_forward out BT=37 C=96", rel_err(out, ro, BT * C), 1e-6);
        report("layernorm_forward mean", rel_err(mean, rm, BT), 1e-6);
        report("layernorm_forward rstd", rel_err(rstd, rr, BT), 1e-6);
        free(x), free(w), free(b), free(out), free(mean), free(rstd), free(xd), free(wd), free(bd), free(ro), free(rm), free(rr);
    }
    int BT = 7, C = 24;
    float *x = rand_floats(BT * C, 2), *w = rand_floats(C, 1), *b = rand_floats(C, 1), *dout = rand_floats(BT * C, 1);
    float *out = (float*)malloc_check(BT * C * 4), *mean = (float*)malloc_check(BT * 4), *rstd = (float*)malloc_check(BT * 4);
    layernorm_forward(out, mean, rstd, x, w, b, BT, C);
    float *dx0 = rand_floats(BT * C, 1), *dw0 = rand_floats(C, 1), *db0 = rand_floats(C, 1);
    float *dx = copy_floats(dx0, BT * C), *dw = copy_floats(dw0, C), *db = copy_floats(db0, C);
    layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, BT, C);
    LayernormCtx l = {to_double(x, BT * C), to_double(w, C), to_double(b, C), to_double(dout, BT * C),
                      (double*)malloc_check(BT * C * 8), BT, C};
    double *gx = (double*)malloc_check(BT * C * 8), *gw = (double*)malloc_check(C * 8), *gb = (double*)malloc_check(C * 8);
    fd_grad(gx, l.x, BT * C, layernorm_loss, &l);
    fd_grad(gw, l.w, C, layernorm_loss, &l);
    fd_grad(gb, l.b, C, layernorm_loss, &l);
    report_grad("layernorm_backward dinp vs finite differences BT=7 C=24", dx, dx0, gx, BT * C, 1e-5);
    report_grad("layernorm_backward dweight vs finite differences", dw, dw0, gw, C, 1e-5);
    report_grad("layernorm_backward dbias vs finite differences", db, db0, gb, C, 1e-5);
    free(x), free(w), free(b), free(dout), free(out), free(mean), free(rstd), free(dx0), free(dw0), free(db0);
    free(dx), free(dw), free(db), free(l.x), free(l.w), free(l.b), free(l.dout), free(l.out), free(gx), free(gw), free(gb);
}

/* ----------------------------------------------------------------------------
 * matmul: the ops (forward with/without bias, backward with/without dinp and dbias) on awkward
 * shapes, and sgemm on many shapes in every layout, for each code path */
typedef struct { double *x, *w, *b, *dout, *out; int BT, C, OC; } MatmulCtx;
static double matmul_loss(void* p) {
    MatmulCtx* m = (MatmulCtx*)p;
    ref_matmul(m->out, m->x, m->w, m->b, m->BT, m->C, m->OC);
    return dot_d(m->dout, m->out, (size_t)m->BT * m->OC);
}
static void test_matmul_ops(void) {
    int BT = 37, C = 96, OC = 300;
    float *x = rand_floats(BT * C, 1), *w = rand_floats(OC * C, 1), *b = rand_floats(OC, 1);
    float* out = rand_floats(BT * OC, 1);
    double *xd = to_double(x, BT * C), *wd = to_double(w, OC * C), *bd = to_double(b, OC);
    double* ref = (double*)malloc_check(BT * OC * 8);
    matmul_forward(out, x, w, b, BT, C, OC);
    ref_matmul(ref, xd, wd, bd, BT, C, OC);
    report("matmul_forward with bias BT=37 C=96 OC=300", rel_err(out, ref, BT * OC), 1e-6);
    matmul_forward(out, x, w, NULL, BT, C, OC);
    ref_matmul(ref, xd, wd, NULL, BT, C, OC);
    report("matmul_forward without bias", rel_err(out, ref, BT * OC), 1e-6);
    free(x), free(w), free(b), free(out), free(xd), free(wd), free(bd), free(ref);

    BT = 5, C = 7, OC = 9;
    x = rand_floats(BT * C, 1), w = rand_floats(OC * C, 1), b = rand_floats(OC, 1);
    float* dout = rand_floats(BT * OC, 1);
    float *dx0 = rand_floats(BT * C, 1), *dw0 = rand_floats(OC * C, 1), *db0 = rand_floats(OC, 1);
    float *dx = copy_floats(dx0, BT * C), *dw = copy_floats(dw0, OC * C), *db = copy_floats(db0, OC);
    matmul_backward(dx, dw, db, dout, x, w, BT, C, OC);
    MatmulCtx m = {to_double(x, BT * C), to_double(w, OC * C), to_double(b, OC), to_double(dout, BT * OC),
                   (double*)malloc_check(BT * OC * 8), BT, C, OC};
    double *gx = (double*)malloc_check(BT * C * 8), *gw = (double*)malloc_check(OC * C * 8), *gb = (double*)malloc_check(OC * 8);
    fd_grad(gx, m.x, BT * C, matmul_loss, &m);
    fd_grad(gw, m.w, OC * C, matmul_loss, &m);
    fd_grad(gb, m.b, OC, matmul_loss, &m);
    report_grad("matmul_backward dinp vs finite differences BT=5 C=7 OC=9", dx, dx0, gx, BT * C, 1e-6);
    report_grad("matmul_backward dweight vs finite differences", dw, dw0, gw, OC * C, 1e-6);
    report_grad("matmul_backward dbias vs finite differences", db, db0, gb, OC, 1e-6);
    float* dw2 = copy_floats(dw0, OC * C);
    matmul_backward(NULL, dw2, NULL, dout, x, w, BT, C, OC);
    report_grad("matmul_backward with dinp and dbias NULL: dweight", dw2, dw0, gw, OC * C, 1e-6);
    free(x), free(w), free(b), free(dout), free(dx0), free(dw0), free(db0), free(dx), free(dw), free(db), free(dw2);
    free(m.x), free(m.w), free(m.b), free(m.dout), free(m.out), free(gx), free(gw), free(gb);
}

/* One sgemm layout on one shape against naive double loops: C = (acc ? C0 : 0) + A·B (+ bias).
 * layout 0: A[M,K] · B[N,K]ᵀ (forward), 1: A[M,K] · B[K,N] (dinp), 2: A[K,M]ᵀ · B[K,N] (dweight).
 * Returns the normwise error. */
static double sgemm_error(int layout, int M, int N, int K, int accumulate, int with_bias) {
    float *A = rand_floats((size_t)M * K, 1), *B = rand_floats((size_t)N * K, 1), *C = rand_floats((size_t)M * N, 1);
    float* bias = with_bias ? rand_floats(N, 1) : NULL;
    double* ref = (double*)malloc_check((size_t)M * N * 8);
    long rsa = layout == 2 ? 1 : K, csa = layout == 2 ? M : 1, rsb = layout == 0 ? 1 : N, csb = layout == 0 ? K : 1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = (accumulate ? C[(long)i * N + j] : 0.0) + (bias ? bias[j] : 0.0);
            for (int k = 0; k < K; k++) s += (double)A[i * rsa + k * csa] * B[k * rsb + j * csb];
            ref[(long)i * N + j] = s;
        }
    sgemm(M, N, K, A, rsa, csa, B, rsb, csb, C, N, accumulate, bias);
    double err = rel_err(C, ref, (size_t)M * N);
    free(A), free(B), free(C), free(bias), free(ref);
    return err;
}
static void test_sgemm_paths(void) {
    static const int shapes[][3] = {
        {1, 1, 1},    {1, 1, 7},     {2, 3, 1},     {7, 5, 3},     {8, 48, 384},  {9, 49, 385},
        {7, 47, 383}, {16, 96, 16},  {17, 97, 13},  {15, 95, 11},  {37, 53, 97},  {6, 16, 256},
        {5, 15, 257}, {13, 17, 255}, {4, 8, 9},     {3, 9, 10},    {257, 33, 20}, {289, 17, 30},
        {11, 3100, 5}, {33, 4200, 3}, {64, 200, 800}, {101, 103, 107},
    };
    const char* layout_names[] = {"A.B^T", "A.B", "A^T.B"};
    for (int isa = CPU_ISA_AVX512; isa >= CPU_ISA_SCALAR; isa--) {
        if (!cpu_isa_supported(isa)) {
            printf("sgemm %s path: SKIPPED, this CPU does not support it (not counted)\n", cpu_isa_name(isa));
            continue;
        }
        cpu_matmul_force_isa(isa);
        for (int layout = 0; layout < 3; layout++) {
            double worst = 0.0;
            for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
                for (int variant = 0; variant < 2; variant++) { /* overwrite + bias, accumulate */
                    double e = sgemm_error(layout, shapes[s][0], shapes[s][1], shapes[s][2], variant, !variant);
                    if (!(e <= worst)) worst = e;
                }
            char what[128];
            snprintf(what, sizeof(what), "sgemm %-6s %-5s %zu shapes, =+bias and +=", cpu_isa_name(isa),
                     layout_names[layout], sizeof(shapes) / sizeof(shapes[0]));
            report(what, worst, 4e-6);
        }
        char what[128];
        snprintf(what, sizeof(what), "sgemm %-6s K=0: C = bias, and C unchanged when accumulating", cpu_isa_name(isa));
        report(what, fmax(sgemm_error(0, 3, 5, 0, 0, 1), sgemm_error(1, 3, 5, 0, 1, 0)), 0.0);
    }
    cpu_matmul_force_isa(CPU_ISA_AUTO);

    /* identical bits with 1 and 2 threads (different thread grids, same sums) */
    int M = 100, N = 300, K = 70, threads = omp_get_max_threads();
    float *A = rand_floats(M * K, 1), *B = rand_floats(K * N, 1), *C1 = rand_floats(M * N, 1);
    float* C2 = copy_floats(C1, M * N);
    omp_set_num_threads(1);
    sgemm(M, N, K, A, 1, M, B, N, 1, C1, N, 1, NULL);
    omp_set_num_threads(threads > 1 ? threads : 2);
    sgemm(M, N, K, A, 1, M, B, N, 1, C2, N, 1, NULL);
    omp_set_num_threads(threads);
    report("sgemm identical bits with 1 and 2 threads", memcmp(C1, C2, M * N * sizeof(float)) ? 1.0 : 0.0, 0.0);
    free(A), free(B), free(C1), free(C2);
}

/* ----------------------------------------------------------------------------
 * attention */
typedef struct { double *qkv, *dout, *out; int B, T, C, NH; } AttentionCtx;
static double attention_loss(void* p) {
    AttentionCtx* a = (AttentionCtx*)p;
    ref_attention(a->out, NULL, a->qkv, a->B, a->T, a->C, a->NH);
    return dot_d(a->dout, a->out, (size_t)a->B * a->T * a->C);
}
static void test_attention(void) {
    {
        int B = 2, T = 37, C = 96, NH = 3;
        float *qkv = rand_floats(B * T * 3 * C, 1), *out = rand_floats(B * T * C, 1), *att = rand_floats(B * NH * T * T, 1);
        attention_forward(out, att, qkv, B, T, C, NH);
        double *qd = to_double(qkv, B * T * 3 * C), *ro = (double*)malloc_check(B * T * C * 8);
        double* ra = (double*)malloc_check(B * NH * T * T * 8);
        ref_attention(ro, ra, qd, B, T, C, NH);
        for (int i = 0; i < B * NH * T; i++) /* above the diagonal is don't-care */
            for (int t2 = i % T + 1; t2 < T; t2++) ra[i * T + t2] = att[i * T + t2];
        report("attention_forward out B=2 T=37 C=96 NH=3", rel_err(out, ro, B * T * C), 1e-6);
        report("attention_forward att (on and below the diagonal)", rel_err(att, ra, B * NH * T * T), 1e-6);
        free(qkv), free(out), free(att), free(qd), free(ro), free(ra);
    }
    int B = 2, T = 5, C = 12, NH = 3; /* hs = 4 */
    float *qkv = rand_floats(B * T * 3 * C, 1.5), *out = (float*)malloc_check(B * T * C * 4);
    float *att = (float*)malloc_check(B * NH * T * T * 4), *dout = rand_floats(B * T * C, 1);
    attention_forward(out, att, qkv, B, T, C, NH);
    float* dqkv0 = rand_floats(B * T * 3 * C, 1);
    float* dqkv = copy_floats(dqkv0, B * T * 3 * C);
    attention_backward(dqkv, dout, qkv, att, B, T, C, NH);
    AttentionCtx a = {to_double(qkv, B * T * 3 * C), to_double(dout, B * T * C), (double*)malloc_check(B * T * C * 8), B, T, C, NH};
    double* g = (double*)malloc_check(B * T * 3 * C * 8);
    fd_grad(g, a.qkv, B * T * 3 * C, attention_loss, &a);
    report_grad("attention_backward dqkv vs finite differences B=2 T=5 NH=3", dqkv, dqkv0, g, B * T * 3 * C, 1e-5);
    free(qkv), free(out), free(att), free(dout), free(dqkv0), free(dqkv), free(a.qkv), free(a.dout), free(a.out), free(g);
}

/* ----------------------------------------------------------------------------
 * gelu and residual (elementwise: the finite difference of element i only moves output i) */
static void test_elementwise(void) {
    size_t N = 10007;
    float *x = rand_floats(N, 6), *out = rand_floats(N, 1), *dout = rand_floats(N, 1);
    double* ref = (double*)malloc_check(N * 8);
    gelu_forward(out, x, N);
    for (size_t i = 0; i < N; i++) ref[i] = ref_gelu(x[i]);
    report("gelu_forward N=10007, x in [-6,6]", rel_err(out, ref, N), 1e-6);
    float *dx0 = rand_floats(N, 1), *dx = copy_floats(dx0, N);
    gelu_backward(dx, x, dout, N);
    const double h = 1e-5;
    for (size_t i = 0; i < N; i++) ref[i] = dout[i] * (ref_gelu((double)x[i] + h) - ref_gelu((double)x[i] - h)) / (2 * h);
    report_grad("gelu_backward vs finite differences", dx, dx0, ref, N, 1e-6);
    /* large magnitudes: exp(2u) saturates; gelu(x) -> x and gelu'(x) -> 1 above, both -> 0 below */
    enum { NL = 18 };
    float big[NL] = {8, 9.95f, 10, 12, 20, 87, 100, 1e3f, 1e4f}, big_out[NL], big_dx[NL] = {0}, ones[NL];
    double big_ref[NL], big_dref[NL];
    for (int i = 0; i < NL / 2; i++) big[NL / 2 + i] = -big[i];
    for (int i = 0; i < NL; i++) {
        ones[i] = 1.0f;
        big_ref[i] = ref_gelu(big[i]);
        double hb = 1e-6 * fabs(big[i]);
        big_dref[i] = (ref_gelu(big[i] + hb) - ref_gelu(big[i] - hb)) / (2 * hb);
    }
    gelu_forward(big_out, big, NL);
    gelu_backward(big_dx, big, ones, NL);
    double worst_out = 0.0, worst_dx = 0.0; /* each element's error relative to max(|ref|, 1); NaN kept */
    for (int i = 0; i < NL; i++) {
        double eo = fabs(big_out[i] - big_ref[i]) / fmax(fabs(big_ref[i]), 1.0), ed = fabs(big_dx[i] - big_dref[i]);
        if (!(eo <= worst_out)) worst_out = eo;
        if (!(ed <= worst_dx)) worst_dx = ed;
    }
    report("gelu_forward at +-8, 9.95, 10, 12, 20, 87, 100, 1e3, 1e4 (-> x or 0)", worst_out, 1e-6);
    report("gelu_backward at the same points (-> 1 or 0)", worst_dx, 1e-5);

    float* b = rand_floats(N, 1);
    residual_forward(out, x, b, N);
    for (size_t i = 0; i < N; i++) ref[i] = (double)x[i] + b[i];
    report("residual_forward", rel_err(out, ref, N), 1e-7);
    free(x), free(out), free(dout), free(ref), free(dx0), free(dx), free(b);
}

/* ----------------------------------------------------------------------------
 * crossentropy */
typedef struct { double *logits, *dlosses, *losses; const int* targets; int BT, V, Vp; } CrossentropyCtx;
static double crossentropy_loss(void* p) {
    CrossentropyCtx* c = (CrossentropyCtx*)p;
    ref_crossentropy(c->losses, c->logits, c->targets, c->BT, c->V, c->Vp);
    return dot_d(c->dlosses, c->losses, c->BT);
}
static void test_crossentropy(void) {
    {
        int BT = 37, V = 300, Vp = 384;
        float* logits = rand_floats(BT * Vp, 8);
        int* targets = (int*)malloc_check(BT * sizeof(int));
        for (int i = 0; i < BT; i++) targets[i] = (int)((uniform() + 1.0) * 0.5 * V) % V;
        targets[0] = 0, targets[1] = V - 1;
        float* losses = rand_floats(BT, 1);
        double *ld = to_double(logits, BT * Vp), *ref = (double*)malloc_check(BT * 8);
        crossentropy_forward(losses, logits, targets, BT, V, Vp);
        ref_crossentropy(ref, ld, targets, BT, V, Vp);
        report("crossentropy_forward BT=37 V=300 Vp=384", rel_err(losses, ref, BT), 1e-6);
        free(logits), free(targets), free(losses), free(ld), free(ref);
    }
    int BT = 4, V = 11, Vp = 16;
    float *logits = rand_floats(BT * Vp, 3), *dlosses = rand_floats(BT, 1);
    int targets[4] = {0, 10, 3, 3};
    CrossentropyCtx c = {to_double(logits, BT * Vp), to_double(dlosses, BT), (double*)malloc_check(BT * 8), targets, BT, V, Vp};
    double* g = (double*)malloc_check(BT * Vp * 8);
    fd_grad(g, c.logits, BT * Vp, crossentropy_loss, &c); /* the padded columns come out 0 */
    float* d = rand_floats(BT * Vp, 1);
    crossentropy_backward(d, logits, targets, dlosses, BT, V, Vp);
    report_grad("crossentropy_backward vs finite differences (overwrites)", d, NULL, g, BT * Vp, 1e-6);
    float* inplace = copy_floats(logits, BT * Vp);
    crossentropy_backward(inplace, inplace, targets, dlosses, BT, V, Vp);
    report_grad("crossentropy_backward in place (dlogits == logits)", inplace, NULL, g, BT * Vp, 1e-6);
    free(logits), free(dlosses), free(c.logits), free(c.dlosses), free(c.losses), free(g), free(d), free(inplace);
}

/* a target outside [0, V) must end the program with a one-line error and exit status 1 */
static void test_bad_target(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) fatalf("fork failed");
    if (pid == 0) {
        omp_set_num_threads(1);
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        float logits[2 * 8] = {0}, losses[2];
        int targets[2] = {1, 5}; /* V = 5 */
        crossentropy_forward(losses, logits, targets, 2, 5, 8);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 1;
    report("crossentropy_forward target >= V exits with status 1", ok ? 0.0 : 1.0, 0.0);
}

/* ----------------------------------------------------------------------------
 * global norm, AdamW */
static void test_norm_and_adamw(void) {
    size_t n = 1000003;
    float* g = rand_floats(n, 2);
    double ref = 0.0;
    for (size_t i = 0; i < n; i++) ref += (double)g[i] * g[i];
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    double one = global_norm_squared(g, n);
    omp_set_num_threads(threads > 1 ? threads : 2);
    double two = global_norm_squared(g, n);
    omp_set_num_threads(threads);
    report("global_norm_squared n=1000003 vs double sum", fabs(two - ref) / ref, 1e-12);
    report("global_norm_squared identical bits with 1 and 2 threads", memcmp(&one, &two, sizeof(one)) ? 1.0 : 0.0, 0.0);
    free(g);

    /* AdamW: each vector instance (n = 1001 leaves a scalar tail) against the double reference,
     * and identical bits across instances (no FMA contraction anywhere) */
    n = 1001;
    float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, scale = 0.5f;
    float* p0 = rand_floats(n, 1);
    float* grads[3];
    for (int t = 0; t < 3; t++) {
        grads[t] = rand_floats(n, 1);
        for (size_t i = 0; i < n; i += 97) grads[t][i] = 0.0f; /* v = 0: eps decides */
    }
    double *pd = to_double(p0, n), *md = (double*)calloc_check(n, 8), *vd = (double*)calloc_check(n, 8);
    for (int t = 1; t <= 3; t++)
        for (size_t i = 0; i < n; i++) {
            double gi = (double)grads[t - 1][i] * scale;
            pd[i] -= (double)lr * wd * pd[i];
            md[i] = (double)b1 * md[i] + (1.0 - b1) * gi;
            vd[i] = (double)b2 * vd[i] + (1.0 - b2) * gi * gi;
            double mhat = md[i] / (1.0 - pow(b1, t)), vhat = vd[i] / (1.0 - pow(b2, t));
            pd[i] -= lr * mhat / (sqrt(vhat) + eps);
        }
    float* first = NULL;
    for (int isa = CPU_ISA_AVX512; isa >= CPU_ISA_SCALAR; isa--) {
        if (!cpu_isa_supported(isa)) {
            printf("adamw_update %s path: SKIPPED, this CPU does not support it (not counted)\n", cpu_isa_name(isa));
            continue;
        }
        cpu_matmul_force_isa(isa);
        float *p = copy_floats(p0, n), *m = (float*)calloc_check(n, 4), *v = (float*)calloc_check(n, 4);
        for (int t = 1; t <= 3; t++) adamw_update(p, grads[t - 1], m, v, n, lr, b1, b2, eps, wd, scale, t);
        char what[128];
        snprintf(what, sizeof(what), "adamw_update %s 3 steps: params vs double torch formula", cpu_isa_name(isa));
        report(what, rel_err(p, pd, n), 1e-6);
        snprintf(what, sizeof(what), "adamw_update %s 3 steps: m, v", cpu_isa_name(isa));
        report(what, fmax(rel_err(m, md, n), rel_err(v, vd, n)), 1e-6);
        if (first) {
            snprintf(what, sizeof(what), "adamw_update %s params bits identical to the first path", cpu_isa_name(isa));
            report(what, memcmp(first, p, n * sizeof(float)) ? 1.0 : 0.0, 0.0);
            free(p);
        } else {
            first = p;
        }
        free(m), free(v);
    }
    cpu_matmul_force_isa(CPU_ISA_AUTO);
    free(first), free(p0), free(pd), free(md), free(vd);
    for (int t = 0; t < 3; t++) free(grads[t]);
}

int main(void) {
    test_bad_target();
    printf("threads %d, sgemm default path %s\n", omp_get_max_threads(), cpu_isa_name(cpu_matmul_isa()));
    test_encoder();
    test_layernorm();
    test_matmul_ops();
    test_sgemm_paths();
    test_attention();
    test_elementwise();
    test_crossentropy();
    test_norm_and_adamw();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
