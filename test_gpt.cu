/*
 * test_gpt.cu — checks the GPU trainer against a reference state written by train_gpt.py (PyTorch):
 * `test_gpt DIR [RECOMPUTE [STEPS]]` reads DIR/model.bin (initial weights) and DIR/reference.bin, builds the
 * model with recompute level RECOMPUTE (default 0), then compares, as relative L2 errors
 * ||ours - ref|| / ||ref||:
 *   the logits and the loss of one forward pass, the gradient of every parameter tensor, the loss before
 *   each of K AdamW steps on the same batch, and every parameter tensor after the K steps;
 * then determinism: the K steps run again from the same weights give bit-identical losses and weights;
 * then the gradients once more with the attention backward's atomic dQ mode (--deterministic 0), same bounds
 * (the fp32 build's attention ignores the flag, so there it repeats the deterministic path).
 * STEPS (1..K, default K) runs only the first STEPS of the K steps, both times; the weights after them are then not
 * compared (the reference has them after K), which the line says, counting neither a pass nor a failure. For the
 * race check (mk/sim_races.mk): two steps run every kernel of the training step at a third of the time.
 * Bounds:
 *   fp32 build (PRECISION=FP32): 1e-5 everywhere (TF32 is never on: llmc/cublas_common.cuh computes in
 *     fp32), step losses 1e-5 relative; final weights per tensor 5e-5 (test_gpt.c says why).
 *   bf16 build: logits and every gradient 3e-2 relative L2, the loss and the step losses 2e-2 absolute,
 *     the weights after K steps 3e-2 relative L2.
 *   Both: the weights whose gradient is exactly zero (the key bias; with T = 1 also the query and key
 *     thirds of qkvw and qkvb) are NOT compared after the K steps, nor counted in "all": AdamW turns their
 *     gradients' rounding noise into lr-sized updates on both sides (llmc/reference_state.h,
 *     check_final_weights). The line says so and counts neither as passed nor as failed.
 * Prints one line per comparison, the worst error, then "N passed, M failed"; exits non-zero on failure.
 */
#define TESTING
#include "train_gpt.cu"
#include "llmc/reference_state.h"

/* the update from the current gradients; returns the gradient norm before clipping */
static float gpt_update(GPT* m, const OptimizerConfig* oc, float lr, int t) {
    float norm = gpt_grad_norm(m);
    gpt_update_with_norm(m, oc, lr, t, norm);
    gpt_gather_params(m);
    return norm;
}

#if defined(PRECISION_FP32)
#define REL_BOUND 1e-5   /* logits, gradients, weights: relative L2 */
#define LOSS_BOUND 1e-5  /* loss and step losses: relative */
#define LOSS_RELATIVE 1
#define TENSOR_WEIGHTS_BOUND 5e-5 /* final weights per tensor; all together: REL_BOUND (see test_gpt.c) */
#else
#define REL_BOUND 3e-2
#define LOSS_BOUND 2e-2  /* absolute */
#define LOSS_RELATIVE 0
#define TENSOR_WEIGHTS_BOUND REL_BOUND
#endif

static CheckTally tally; /* mutable: every check below counts into it; tally_finish prints its "N passed, M failed" last */

static void check_bound(const char* what, const char* name, double err, double bound, const char* kind) {
    tally_check(&tally, what, name, kind, err, bound);
}
static void check_rel(const char* what, const char* name, double err) { check_bound(what, name, err, REL_BOUND, "rel L2"); }
static void check_loss(const char* what, const char* name, float ours, float ref) {
    double diff = fabs((double)ours - ref); /* relative (fp32 build), absolute where the reference loss is 0 (vocab 1) */
    double err = LOSS_RELATIVE && ref != 0.0f ? diff / fabs((double)ref) : diff;
    if (!(err == err)) err = INFINITY;
    check_bound(what, name, err, LOSS_BOUND, LOSS_RELATIVE ? "rel   " : "abs   ");
}

/* one forward and backward pass on the reference batch from the current weights; every parameter tensor's
 * gradient against the reference's */
static void check_grads(GPT* model, const ReferenceState* ref, const char* what) {
    gpt_zero_grad(model);
    gpt_forward(model, ref->inputs, ref->targets, ref->B, ref->T, 1.0f);
    gpt_backward(model, ref->inputs, ref->B, ref->T, 1);
    float* grads = (float*)malloc_check(model->num_params * sizeof(float));
    copy_to_host(grads, model->grads, model->num_params);
    size_t off = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        check_rel(what, GPT_PARAM_NAMES[i], rel_l2(grads + off, ref->grads + off, model->param_sizes[i]));
        off += model->param_sizes[i];
    }
    free(grads);
}

/* runs the first `steps` of the reference's K AdamW steps on its batch; step losses into losses */
static void run_steps(GPT* model, const ReferenceState* ref, int steps, float* losses, int print) {
    Schedule sched = {(ScheduleKind)ref->schedule_kind, ref->lr, ref->final_lr_frac, ref->warmup, ref->total_steps, ref->wsd_frac};
    OptimizerConfig oc = {ref->beta1, ref->beta2, ref->eps, ref->weight_decay, ref->grad_clip};
    for (int s = 0; s < steps; s++) {
        gpt_zero_grad(model);
        losses[s] = gpt_forward(model, ref->inputs, ref->targets, ref->B, ref->T, 1.0f);
        gpt_backward(model, ref->inputs, ref->B, ref->T, 1);
        float lr = schedule_lr(&sched, s);
        float norm = gpt_update(model, &oc, lr, s + 1);
        if (print) printf("         step %d: loss %.7f (ref %.7f) lr %.4e norm %.4f\n", s, losses[s], ref->step_losses[s], lr, norm);
    }
}

int main(int argc, char** argv) {
    if (argc < 2 || argc > 4 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s DIR [RECOMPUTE [STEPS]]   (DIR written by: python3 train_gpt.py --reference-out DIR ...)\n",
                argv[0]);
        return 2;
    }
    int recompute = 0;
    if (argc >= 3 && (strlen(argv[2]) != 1 || argv[2][0] < '0' || argv[2][0] > '2')) fatalf("RECOMPUTE must be 0, 1 or 2, not %s", argv[2]);
    if (argc >= 3) recompute = argv[2][0] - '0';
    cuda_device_count("test_gpt_cpu");
    char model_path[4096], ref_path[4096];
    snprintf(model_path, sizeof(model_path), "%s/model.bin", argv[1]);
    snprintf(ref_path, sizeof(ref_path), "%s/reference.bin", argv[1]);

    GPTConfig config;
    size_t num_params;
    float* init = model_file_read(model_path, &config, &num_params);
    ReferenceState ref;
    reference_state_read(&ref, ref_path);
    if (ref.num_params != num_params || ref.V != config.vocab_size || ref.Vp != config.padded_vocab_size)
        fatalf("%s does not belong to %s: %zu parameters, vocab %d/%d vs %zu, %d/%d", ref_path, model_path, ref.num_params, ref.V,
               ref.Vp, num_params, config.vocab_size, config.padded_vocab_size);
    int steps = ref.K;
    if (argc == 4) {
        char* end;
        long v = strtol(argv[3], &end, 10);
        if (*end != '\0' || end == argv[3] || v < 1 || v > ref.K) fatalf("STEPS must be 1..%d (the steps in %s), not %s", ref.K, ref_path, argv[3]);
        steps = (int)v;
    }
    GPT model;
    gpt_create(&model, &config, ref.B, ref.T, recompute, 1, 1337, NULL, 0);
    gpt_set_weights(&model, init, 0);
    const GPTConfig* c = &model.config;
    int B = ref.B, T = ref.T, V = c->vocab_size, Vp = c->padded_vocab_size;
    size_t BT = (size_t)B * T;
    printf("test_gpt (%s%s): %s | L=%d NH=%d C=%d V=%d (Vp=%d) maxT=%d | B=%d T=%d K=%d (%d run) | recompute %d | %zu parameters\n",
           FLOATX_NAME, model.master ? ", fp32 master weights" : "", argv[1], c->num_layers, c->num_heads, c->channels, V, Vp,
           c->max_seq_len, B, T, ref.K, steps, recompute, model.num_params);

    /* one forward pass (logits kept), then forward and backward */
    float loss = gpt_forward(&model, ref.inputs, ref.targets, B, T, 0.0f);
    float* all_logits = (float*)malloc_check(BT * Vp * sizeof(float));
    float* logits = (float*)malloc_check(BT * V * sizeof(float));
    copy_to_host(all_logits, model.a.logits, BT * Vp);
    for (size_t i = 0; i < BT; i++) memcpy(logits + i * V, all_logits + i * Vp, V * sizeof(float));
    check_rel("forward", "logits", rel_l2(logits, ref.logits, BT * V));
    check_loss("forward", "loss", loss, ref.loss);
    free(logits);
    free(all_logits);
    check_grads(&model, &ref, "grad");

    /* K (or STEPS) AdamW steps on the same batch */
    float* losses = (float*)malloc_check((size_t)steps * sizeof(float));
    run_steps(&model, &ref, steps, losses, 1);
    for (int s = 0; s < steps; s++) {
        char name[32];
        snprintf(name, sizeof(name), "%d", s);
        check_loss("step", name, losses[s], ref.step_losses[s]);
    }
    /* final weights, per tensor and all together; the zero-gradient ones not compared (check_final_weights) */
    float* params = (float*)malloc_check(model.num_params * sizeof(float));
    gpt_get_weights(&model, params);
    if (steps == ref.K)
        check_final_weights(&tally, params, ref.final_params, GPT_PARAM_NAMES, model.param_sizes, NUM_PARAM_TENSORS, c->num_layers,
                            c->channels, T, TENSOR_WEIGHTS_BOUND, REL_BOUND);
    else
        printf("%-8s %-10s not compared: the reference has them after %d steps, %d were run\n", "weights", "all", ref.K, steps);

    /* determinism: the same K steps again from the initial weights and fresh optimizer state */
    gpt_set_weights(&model, init, 0);
    cudaCheck(cudaMemset(model.adam_m, 0, model.num_params * sizeof(float)));
    cudaCheck(cudaMemset(model.adam_v, 0, model.num_params * sizeof(float)));
    float* losses2 = (float*)malloc_check((size_t)steps * sizeof(float));
    run_steps(&model, &ref, steps, losses2, 0);
    float* params2 = (float*)malloc_check(model.num_params * sizeof(float));
    gpt_get_weights(&model, params2);
    int same_losses = memcmp(losses, losses2, (size_t)steps * sizeof(float)) == 0;
    int same_weights = memcmp(params, params2, model.num_params * sizeof(float)) == 0;
    printf("%-8s %-10s %d step losses bit-identical in a second run  %s\n", "determ.", "losses", steps, same_losses ? "ok" : "FAIL");
    printf("%-8s %-10s %zu weights bit-identical in a second run  %s\n", "determ.", "weights", model.num_params,
           same_weights ? "ok" : "FAIL");
    tally.passed += same_losses + same_weights;
    tally.failed += !same_losses + !same_weights;

    /* the atomic dQ mode of the attention backward */
    gpt_set_weights(&model, init, 0);
    model.deterministic = 0;
    check_grads(&model, &ref, "grad dq0");

    free(losses);
    free(losses2);
    free(params);
    free(params2);
    free(init);
    reference_state_free(&ref);
    gpt_free(&model);
    return tally_finish(&tally);
}
