/*
 * test_gpt.c — checks the CPU trainer against a reference state written by
 * train_gpt.py (PyTorch): `./test_gpt_cpu DIR` reads DIR/model.bin (initial
 * weights) and DIR/reference.bin, then compares, as relative L2 errors
 * ||ours - ref|| / ||ref||:
 *   the logits and the loss of one forward pass, the gradient of every parameter
 *   tensor, the loss before each of K AdamW steps on the same batch, and every
 *   parameter tensor after the K steps.
 * Each bound is 1e-5 (fp32 against fp32); the final weights are held to it all together, and
 * per tensor to 5e-5 (TENSOR_WEIGHTS_BOUND explains why); the weights whose gradient is exactly
 * zero are not compared after the steps (check_final_weights in llmc/reference_state.h says why).
 * Prints one line per comparison, then the worst error, then "N passed, M failed"; exits non-zero
 * on any failure.
 */
#define TESTING
#include "train_gpt.c"
#include "llmc/reference_state.h"

#define BOUND 1e-5
/* Final weights, one tensor at a time: fp32 itself is not accurate to 1e-5 here. AdamW divides each
 * gradient by its own running RMS, so after K steps a tensor whose weights are small next to
 * lr-sized updates (the residual projections, init std 0.02/sqrt(2L)) carries the gradients'
 * relative rounding error amplified: PyTorch's own fp32 run (--ref-dtype float32) differs from the
 * float64 reference by 1.24e-5 in attprojw for L=6 C=192 T=33 V=2048 seed 6. The spec's 1e-5 bound
 * applies to all final weights together ("weights all"); each tensor is held to 5e-5. */
#define TENSOR_WEIGHTS_BOUND 5e-5

static CheckTally tally; /* mutable: every check below counts into it; tally_finish prints its "N passed, M failed" last */

static void check_bound(const char* what, const char* name, double err, double bound) {
    tally_check(&tally, what, name, "rel L2", err, bound);
}
static void check(const char* what, const char* name, double err) { check_bound(what, name, err, BOUND); }

int main(int argc, char** argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s DIR   (DIR written by: python3 train_gpt.py --reference-out DIR ...)\n", argv[0]);
        return 2;
    }
    char model_path[4096], ref_path[4096];
    snprintf(model_path, sizeof(model_path), "%s/model.bin", argv[1]);
    snprintf(ref_path, sizeof(ref_path), "%s/reference.bin", argv[1]);

    GPT model;
    gpt_load(&model, model_path);
    ReferenceState ref;
    reference_state_read(&ref, ref_path);
    const GPTConfig* c = &model.config;
    if (ref.num_params != model.num_params || ref.V != c->vocab_size || ref.Vp != c->padded_vocab_size)
        fatalf("%s does not belong to %s: %zu parameters, vocab %d/%d vs %zu, %d/%d", ref_path, model_path, ref.num_params, ref.V,
               ref.Vp, model.num_params, c->vocab_size, c->padded_vocab_size);
    int B = ref.B, T = ref.T, V = c->vocab_size, Vp = c->padded_vocab_size;
    size_t BT = (size_t)B * T;
    printf("test_gpt_cpu: %s | L=%d NH=%d C=%d V=%d (Vp=%d) maxT=%d | B=%d T=%d K=%d | %zu parameters\n", argv[1], c->num_layers,
           c->num_heads, c->channels, V, Vp, c->max_seq_len, B, T, ref.K, model.num_params);
    gpt_alloc_activations(&model, B, T);

    /* one forward and backward pass */
    float loss = gpt_forward(&model, ref.inputs, ref.targets, B, T);
    float* logits = (float*)malloc_check(BT * V * sizeof(float));
    for (size_t i = 0; i < BT; i++) memcpy(logits + i * V, model.a.logits + i * Vp, V * sizeof(float));
    check("forward", "logits", rel_l2(logits, ref.logits, BT * V));
    check("forward", "loss", rel_l2(&loss, &ref.loss, 1));
    free(logits);
    gpt_zero_grad(&model);
    gpt_backward(&model, ref.inputs, ref.targets, B, T, 1.0f);
    size_t off = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        check("grad", GPT_PARAM_NAMES[i], rel_l2(model.grads + off, ref.grads + off, model.param_sizes[i]));
        off += model.param_sizes[i];
    }

    /* K AdamW steps on the same batch */
    Schedule sched = {(ScheduleKind)ref.schedule_kind, ref.lr, ref.final_lr_frac, ref.warmup, ref.total_steps, ref.wsd_frac};
    OptimizerConfig oc = {ref.beta1, ref.beta2, ref.eps, ref.weight_decay, ref.grad_clip};
    for (int s = 0; s < ref.K; s++) {
        gpt_zero_grad(&model);
        float step_loss = gpt_forward(&model, ref.inputs, ref.targets, B, T);
        gpt_backward(&model, ref.inputs, ref.targets, B, T, 1.0f);
        float lr = schedule_lr(&sched, s);
        float norm = gpt_update(&model, &oc, lr, s + 1);
        char name[32];
        snprintf(name, sizeof(name), "%d", s);
        printf("         step %d: loss %.7f (ref %.7f) lr %.4e norm %.4f\n", s, step_loss, ref.step_losses[s], lr, norm);
        check("step", name, rel_l2(&step_loss, &ref.step_losses[s], 1));
    }
    /* final weights, per tensor and all together; the zero-gradient ones (the key bias, which adds q.bk
     * to every score of a query row, which the softmax cancels; at T = 1 the query and key thirds of qkvw
     * and qkvb) are not compared: AdamW turns their rounding noise into lr-sized updates in both programs */
    check_final_weights(&tally, model.params, ref.final_params, GPT_PARAM_NAMES, model.param_sizes, NUM_PARAM_TENSORS, c->num_layers,
                        c->channels, T, TENSOR_WEIGHTS_BOUND, BOUND);

    reference_state_free(&ref);
    gpt_free(&model);
    return tally_finish(&tally);
}
