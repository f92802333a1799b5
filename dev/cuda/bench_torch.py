#!/usr/bin/env python3
"""PyTorch's own figures on this card, the baselines the device check sets our kernels against.

  matmul NAME M=.. N=.. K=..: X ms, Y TFLOP/s      bf16 torch.matmul (cuBLAS/cuBLASLt) of a d12 step's shapes
                                                   (B=64, T=1024) and a large square one: the matmul ceiling
  copy: X GB, Y TB/s                               a device-to-device copy: the memory ceiling
  sdpa B=.. NH=.. d=.. T=.. BACKEND: forward X TFLOP/s, forward + backward Y TFLOP/s
                                                   causal scaled_dot_product_attention in bf16 with one back end
                                                   (flash, cudnn, efficient) at bench_flash_attention's shapes,
                                                   or why that back end is not there
TFLOP/s count the causal half for attention (forward 4·T²·d·NH·B/2, backward 2.5x that), as our benchmark does.
Usage: bench_torch.py [--device cuda|cpu] [--small]   (--small: tiny shapes, for a check of the script itself)
"""
import argparse
import time

import torch


def timed(fn, device, reps):
    """Median milliseconds of fn() over reps runs, after one warm-up run."""
    fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - t0))
    return sorted(times)[len(times) // 2]


def sdpa_backends():
    """(name, context manager factory) for each attention back end this torch can pin, else (name, reason)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return [(name, f"not available: torch {torch.__version__} has no torch.nn.attention") for name in ("flash", "cudnn", "efficient")]
    out = []
    for name, attr in (("flash", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION")):
        backend = getattr(SDPBackend, attr, None)
        out.append((name, (lambda b=backend: sdpa_kernel(b)) if backend is not None else f"not available: no SDPBackend.{attr}"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--small", action="store_true", help="tiny shapes, one repeat")
    args = ap.parse_args()
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: bench_torch.py: this torch sees no GPU (use --device cpu for a check of the script)")
    name = torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"
    print(f"torch {torch.__version__}, device {name}", flush=True)
    reps = 1 if args.small else 20
    B, T, C, Vp = (2, 16, 64, 128) if args.small else (64, 1024, 768, 50304)
    big = 256 if args.small else 8192
    shapes = [("qkv", B * T, 3 * C, C), ("attn proj", B * T, C, C), ("fc", B * T, 4 * C, C), ("fc proj", B * T, C, 4 * C),
              ("classifier", B * T, Vp, C), ("square", big, big, big)]
    for what, M, N, K in shapes:
        a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
        ms = timed(lambda: a @ b, dev, reps)
        print(f"matmul {what} M={M} N={N} K={K}: {ms:.3f} ms, {2.0 * M * N * K / ms * 1e-9:.1f} TFLOP/s", flush=True)
        del a, b
    n = (1 << 20) if args.small else (1 << 30)
    src = torch.empty(n, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src), dev, reps)
    print(f"copy: {n / 1e9:.3f} GB, {2 * n / ms * 1e-9:.2f} TB/s (read + write)", flush=True)
    del src, dst
    attention = [(8, 12, d, t) for d in (64, 128) for t in (1024, 2048, 4096)] + [(64, 12, 64, 1024)]
    if args.small:
        attention = [(1, 2, 64, 64)]
    backends = sdpa_backends()
    for Bq, NH, d, t in attention:
        key = f"B={Bq} NH={NH} d={d} T={t}"
        fwd_flops = 4.0 * t * t * d * NH * Bq / 2
        if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
            print(f"sdpa {key} all: not available: torch {torch.__version__} has no scaled_dot_product_attention")
            continue
        q, k, v = (torch.randn(Bq, NH, t, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        grad = torch.randn(Bq, NH, t, d, device=dev, dtype=torch.bfloat16)
        for backend, context in backends:
            if isinstance(context, str):
                print(f"sdpa {key} {backend}: {context}")
                continue

            def forward():
                with context():
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

            def forward_only():
                with torch.no_grad():
                    forward()

            def forward_backward():
                q.grad = k.grad = v.grad = None  # written, not accumulated: no extra add in the timing
                forward().backward(grad)

            try:
                fwd = timed(forward_only, dev, reps)
                both = timed(forward_backward, dev, reps)
            except RuntimeError as err:
                print(f"sdpa {key} {backend}: not available: {(str(err).splitlines() or ['?'])[0][:120]}")
                continue
            print(f"sdpa {key} {backend}: forward {fwd_flops / fwd * 1e-9:.1f} TFLOP/s, "
                  f"forward + backward {3.5 * fwd_flops / both * 1e-9:.1f} TFLOP/s", flush=True)
        del q, k, v, grad
    print("benchmark done")


if __name__ == "__main__":
    main()
