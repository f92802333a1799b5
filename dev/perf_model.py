#!/usr/bin/env python3
"""Roofline floors for one training micro-step of the GPU trainer, op by op.

For each op of train_gpt.cu (the names of its --profile table) this counts the floating-point
operations and the fewest bytes the op's kernels must move through device memory (each kernel reading
each of its inputs once and writing each output once; activations and parameters in bf16, statistics and
optimizer state in fp32), and turns them into a floor time: max(flops / matrix rate, bytes / memory
bandwidth). Kernels that run apart from the matmuls (the classifier's softmax, the bias and LayerNorm
parameter gradients' column sums, the attention backward's delta) are ops of their own: their bytes do not
hide under a matmul's flops (the --profile table times them inside an op: the softmax in "classifier
forward", the qkv and fc bias gradients in their "matmul ... backward", the projections' in "layernorm backward",
the delta in "attention backward"). The sum
is the step time this implementation cannot beat; its MFU (the trainer's 6N + 6·L·C·T flops per token
against the datasheet peak) is the most this configuration can show. Compare the floors with the trainer's
`--profile` table to see which op is furthest from its floor.

Defaults: GPT-2 124M (d12), B=64, T=1024, the trainer's defaults (-r 0, --deterministic 1), on an H100 SXM
(--gpu h100) or an H200 (--gpu h200), with the ceilings this workplace measured on such a machine (CARDS: bf16
matrix product and device copy; the device tool's notes, not this project's code; --matmul-tflops and
--bandwidth-tbs override them), the datasheet's 989 TFLOP/s bf16 dense peak for MFU, and a 250 TFLOP/s goal
for the flash attention. Usage: python3 dev/perf_model.py [--gpu h100] [--depth 12] [--batch 64] [--seq 1024] ...
A --gpu other than h100|h200 exits 2 with one line. --profile-floors prints instead one line per row of the
trainer's --profile table, "<row name><TAB><floor ms>", each op's floor added to the row that times it
(PROFILE_ROWS), for scripts that put the floors beside a profile.
"""
import argparse
import sys

# card: (name, measured bf16 matmul TFLOP/s, measured device copy TB/s, datasheet bf16 dense peak TFLOP/s)
CARDS = {
    "h100": ("H100 SXM", 800.0, 3.0, 989.0),
    "h200": ("H200", 788.0, 4.3, 989.0),
}

# the --profile row that times each op whose kernels run inside another's bracket in train_gpt.cu: (row, share)
PROFILE_ROWS = {
    "classifier softmax": (("classifier forward", 1.0),),
    "matmul bias gradients": (("matmul qkv backward", 3 / 7), ("matmul fc backward", 4 / 7)),  # widths 3C and 4C
    "attention delta": (("attention backward", 1.0),),
    "gelu forward (recompute)": (("gelu forward", 1.0),),
    "layernorm forward (recompute)": (("layernorm forward", 1.0),),
}


def model_ops(L, C, H, V, B, T, recompute, deterministic):
    """Yields (op name, flops, bytes, kind) for one micro-step (forward, backward) and one optimizer step."""
    Vp = (V + 127) // 128 * 128
    N = B * T                       # tokens
    a = 2                           # bytes per activation / parameter (bf16)
    P = 12 * L * C * C + 13 * L * C + Vp * C + T * C + 2 * C  # parameters (max_seq_len = T)
    mm = lambda m, n, k: 2.0 * m * n * k  # noqa: E731
    att_fwd = 2.0 * B * T * T * C   # causal: 4·T²·d·H·B / 2
    # forward
    yield "encoder forward", 0, N * C * a * 2, "mem"
    yield "layernorm forward", 0, L * 2 * (4 * N * C * a + 8 * N), "mem"  # residual add + layernorm, 2 per layer
    yield "matmul qkv forward", L * mm(N, 3 * C, C), L * (N * C + 3 * C * C + 3 * N * C) * a, "mm"
    yield "attention forward", L * att_fwd, L * (4 * N * C * a + 4 * N * H), "att"
    yield "matmul attn proj forward", L * mm(N, C, C), L * (2 * N * C + C * C) * a, "mm"
    yield "matmul fc forward", L * mm(N, 4 * C, C), L * (N * C + 4 * C * C + 2 * 4 * N * C) * a, "mm"
    yield "matmul fc proj forward", L * mm(N, C, 4 * C), L * (4 * N * C + 4 * C * C + N * C) * a, "mm"
    yield "classifier forward", mm(N, Vp, C), (N * C + Vp * C + N * Vp) * a, "mm"
    # the fused softmax / loss / gradient kernel reads the logits and writes their gradient in place
    yield "classifier softmax", 0, 2 * N * Vp * a + 8 * N, "mem"
    yield "classifier backward", 2 * mm(N, Vp, C), (2 * N * Vp + 2 * N * C + 3 * Vp * C) * a, "mm"
    if recompute >= 1:
        yield "gelu forward (recompute)", 0, L * 2 * 4 * N * C * a, "mem"
    if recompute >= 2:
        yield "layernorm forward (recompute)", 0, L * 2 * (2 * N * C * a + 8 * N), "mem"
    # each matmul backward: dinp = dout·W (read dout, W; write dinp), dW += doutᵀ·inp (read dout, inp; W read+write)
    for name, k, n in (("matmul fc proj backward", 4 * C, C), ("matmul fc backward", C, 4 * C),
                       ("matmul attn proj backward", C, C), ("matmul qkv backward", C, 3 * C)):
        yield name, L * 2 * mm(N, n, k), L * (2 * N * n + 2 * N * k + 3 * n * k) * a, "mm"
    # dbias = column sums of the qkv and fc matmuls' dout (widths 3C, 4C), a pass of their own (the two projections'
    # are summed by the layernorm backward that writes their dout, the residual gradient)
    yield "matmul bias gradients", 0, L * 7 * N * C * a, "mem"
    # delta = rowsum(dout∘out); the atomic dQ mode (--deterministic 0) also zeroes an fp32 dQ accumulator and
    # converts it to bf16 after the K/V kernel
    yield "attention delta", 0, L * (2 * N * C * a + 4 * N * H + (0 if deterministic else 3 * 4 * N * C + N * C * a)), "mem"
    yield "attention backward", L * 2.5 * att_fwd, L * (8 * N * C * a + 4 * N * H), "att"
    # dout, inp, residual grad read+write; the column sums (weight, bias, the bias below) kept by the same kernel
    yield "layernorm backward", 0, L * 2 * (4 * N * C * a + 8 * N), "mem"
    yield "encoder backward", 0, (N * C + T * C + N * C) * a, "mem"
    # optimizer: bf16 param and grad, fp32 master, m, v read; param, master, m, v written; grads zeroed
    yield "adamw", 0, P * (2 + 2 + 3 * 4 + 2 + 3 * 4) + P * 2, "mem"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h100", help="the card whose ceilings to use: h100|h200")
    ap.add_argument("--depth", type=int, default=12, help="layers; channels 64·depth, heads depth (GPT-2 d12 = 124M)")
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--recompute", type=int, default=0, help="-r of the trainer: 0 off, 1 GELU, 2 GELU and layernorm")
    ap.add_argument("--deterministic", type=int, default=1, help="--deterministic of the trainer (0: atomic dQ)")
    ap.add_argument("--matmul-tflops", type=float, help="bf16 matrix rate (default: the card's measured one)")
    ap.add_argument("--attention-tflops", type=float, default=250.0, help="flash-attention rate (the goal)")
    ap.add_argument("--bandwidth-tbs", type=float, help="device memory bandwidth, TB/s (default: the card's measured copy)")
    ap.add_argument("--peak-tflops", type=float, help="bf16 peak for MFU (default: the card's datasheet one)")
    ap.add_argument("--profile-floors", action="store_true", help="print only '<--profile row>\\t<floor ms>' lines")
    args = ap.parse_args()
    if args.gpu not in CARDS:
        print(f"error: --gpu: bad value '{args.gpu}': expected {'|'.join(CARDS)}", file=sys.stderr)
        sys.exit(2)
    card, matmul_tflops, bandwidth_tbs, peak_tflops = CARDS[args.gpu]
    if args.matmul_tflops is None:
        args.matmul_tflops = matmul_tflops
    if args.bandwidth_tbs is None:
        args.bandwidth_tbs = bandwidth_tbs
    if args.peak_tflops is None:
        args.peak_tflops = peak_tflops
    L, C, H, V, B, T = args.depth, 64 * args.depth, args.depth, args.vocab, args.batch, args.seq
    rate = {"mm": args.matmul_tflops * 1e12, "att": args.attention_tflops * 1e12, "mem": float("inf")}
    rows, total = [], 0.0
    for name, flops, nbytes, kind in model_ops(L, C, H, V, B, T, args.recompute, args.deterministic):
        t = max(flops / rate[kind], nbytes / (args.bandwidth_tbs * 1e12))
        bound = "memory" if nbytes / (args.bandwidth_tbs * 1e12) >= flops / rate[kind] else "compute"
        rows.append((name, flops / 1e12, nbytes / 1e9, t * 1e3, bound))
        total += t
    if args.profile_floors:
        floors = {}
        for name, _, _, ms, _ in rows:
            for row, share in PROFILE_ROWS.get(name, ((name, 1.0),)):
                floors[row] = floors.get(row, 0.0) + share * ms
        for row, ms in floors.items():
            print(f"{row}\t{ms:.3f}")
        return
    Vp = (V + 127) // 128 * 128
    params = 12 * L * C * C + 13 * L * C + Vp * C + T * C + 2 * C
    flops_per_token = 6 * params + 6 * L * C * T
    print(f"d{L}: L={L} C={C} H={H} V={V} (padded {Vp}) B={B} T={T}, {params / 1e6:.1f}M parameters, "
          f"{flops_per_token / 1e9:.3f} GFLOP per token (6N + 6LCT)")
    print(f"ceilings ({card}): matmul {args.matmul_tflops:.0f} TFLOP/s, attention {args.attention_tflops:.0f} TFLOP/s, "
          f"memory {args.bandwidth_tbs:.1f} TB/s; MFU against {args.peak_tflops:.0f} TFLOP/s")
    print(f"{'op':<34}{'TFLOP':>9}{'GB':>9}{'floor ms':>10}  bound")
    for name, tf, gb, ms, bound in rows:
        print(f"{name:<34}{tf:>9.3f}{gb:>9.2f}{ms:>10.3f}  {bound}")
    tokens = B * T
    print(f"{'total':<34}{sum(r[1] for r in rows):>9.3f}{sum(r[2] for r in rows):>9.2f}{total * 1e3:>10.3f}")
    print(f"floor: {tokens / total:,.0f} tok/s, MFU at most {100 * flops_per_token * tokens / total / (args.peak_tflops * 1e12):.1f}%")


if __name__ == "__main__":
    main()
