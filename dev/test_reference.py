#!/usr/bin/env python3
"""
Self-test of train_gpt.py, the PyTorch reference. Each check compares against something train_gpt.py did
not produce itself: a naive float64 numpy GPT-2 written here from doc/formats.md, central finite differences,
hand-computed learning rates, a hand-written AdamW/clipping loop, zlib.crc32 over the raw file bytes, and
token batches listed by hand. Prints what each check compared and its worst error, then "N passed, M failed".
Usage: /usr/bin/python3 dev/test_reference.py
"""
import math
import os
import re
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import train_gpt as tg  # noqa: E402

torch.set_num_threads(2)
RESULTS = {"passed": 0, "failed": 0}


def check(name, ok, detail):
    RESULTS["passed" if ok else "failed"] += 1
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")


def run_cli(*argv):
    """Runs train_gpt.py as the C tests and users do; returns (exit status, stdout, stderr)."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "train_gpt.py"), *map(str, argv)],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


# ----------------------------------------------------------------------------------------------------
# an independent, naive float64 GPT-2 (loops over batch, head, query and key), from doc/formats.md


def naive_forward(t, cfg, idx, targets):
    B, T = idx.shape
    C, NH, V = cfg.n_embd, cfg.n_head, cfg.vocab_size
    hd = C // NH

    def layernorm(x, w, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w + b

    x = t["wte"][idx] + t["wpe"][:T]
    for l in range(cfg.n_layer):
        qkv = layernorm(x, t["ln1w"][l], t["ln1b"][l]) @ t["qkvw"][l].T + t["qkvb"][l]
        att = np.zeros((B, T, C))
        for b in range(B):
            for h in range(NH):
                cols = slice(h * hd, (h + 1) * hd)
                for i in range(T):
                    q = qkv[b, i, :C][cols]
                    scores = np.array([q @ qkv[b, j, C:2 * C][cols] / math.sqrt(hd) for j in range(i + 1)])
                    w = np.exp(scores - scores.max())
                    w /= w.sum()
                    att[b, i, cols] = sum(w[j] * qkv[b, j, 2 * C:][cols] for j in range(i + 1))
        x = x + att @ t["attprojw"][l].T + t["attprojb"][l]
        a = layernorm(x, t["ln2w"][l], t["ln2b"][l]) @ t["fcw"][l].T + t["fcb"][l]
        g = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
        x = x + g @ t["fcprojw"][l].T + t["fcprojb"][l]
    logits = layernorm(x, t["lnfw"], t["lnfb"]) @ t["wte"][:V].T
    m = logits.max(-1, keepdims=True)
    logsumexp = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[..., 0]
    picked = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return logits, float((logsumexp - picked).mean())


def tiny_setup(seed=5, L=2, H=3, C=24, V=130, T=7, B=2, perturb=True):
    cfg = tg.GPTConfig(L, H, C, V, T + 2)
    g = torch.Generator().manual_seed(seed)
    init = tg.init_tensors(cfg, g, perturb)
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    return cfg, init, x, y


def test_forward_vs_naive(ctx):
    for perturb in (True, False):
        cfg, init, x, y = tiny_setup(perturb=perturb)
        model = tg.GPT(cfg, {n: v.double() for n, v in init.items()})
        logits, loss = model(x, y)
        ref_logits, ref_loss = naive_forward({n: v.double().numpy() for n, v in init.items()}, cfg, x.numpy(), y.numpy())
        err = np.abs(logits.detach().numpy() - ref_logits).max()
        check(f"forward (perturb={perturb}) vs naive float64 numpy GPT-2", err < 1e-10 and abs(loss.item() - ref_loss) < 1e-12,
              f"{cfg}, logits {logits.shape[-1]} columns, worst |dlogit| {err:.2e}, |dloss| {abs(loss.item() - ref_loss):.2e}")


def test_gradients_vs_finite_differences(ctx):
    """Fourth-order central differences of the float64 loss for 4 random elements of each tensor (for wte, rows that are
    both input tokens and predicted classes, so the embedding and the tied head both contribute)."""
    cfg, init, x, y = tiny_setup()
    model = tg.GPT(cfg, {n: v.double() for n, v in init.items()})
    _, loss = model(x, y)
    loss.backward()
    rng = np.random.default_rng(0)
    worst, worst_name = 0.0, ""
    h = 1e-3  # 4-point stencil: truncation ~h^4 = 1e-12, roundoff ~1e-16 * loss / h ~ 1e-12
    for name, p in model.named_parameters():
        flat = p.data.view(-1)
        if name == "wte":
            rows = rng.choice(np.unique(x.numpy()), 4)
            picks = rows * cfg.n_embd + rng.integers(0, cfg.n_embd, 4)
        else:
            picks = rng.integers(0, flat.numel(), 4)
        for i in picks:
            old = flat[i].item()
            f = {}
            with torch.no_grad():
                for k in (-2, -1, 1, 2):
                    flat[i] = old + k * h
                    f[k] = model(x, y)[1].item()
                flat[i] = old
            fd = (f[-2] - 8 * f[-1] + 8 * f[1] - f[2]) / (12 * h)
            err = abs(fd - p.grad.view(-1)[i].item()) / max(abs(fd), 1e-5)  # absolute below 1e-5
            if err > worst:
                worst, worst_name = err, name
    check("gradients vs central finite differences (float64)", worst < 1e-6,
          f"4 elements of each of the 16 tensors, worst relative error {worst:.2e} (in {worst_name})")
    pad = model.wte.grad[cfg.vocab_size:]
    check("padded wte rows get zero gradient", bool((pad == 0).all()) and pad.shape[0] == cfg.padded_vocab_size - cfg.vocab_size,
          f"{pad.shape[0]} padded rows, max |grad| {pad.abs().max().item():.1e}")


def test_schedule(ctx):
    """Learning rates computed by hand for max lr 1e-3, final fraction 0.1 (min 1e-4), warmup 2, 10 steps."""
    cases = [  # (schedule, step, wsd_frac, expected)
        ("cosine", 0, 0.2, 5e-4), ("cosine", 1, 0.2, 1e-3), ("cosine", 2, 0.2, 1e-3), ("cosine", 6, 0.2, 5.5e-4),
        ("cosine", 9, 0.2, 1e-4 + 0.5 * (1 - 0.9238795325112867) * 9e-4),  # cos(7 pi / 8) = -0.92387953...
        ("linear", 0, 0.2, 5e-4), ("linear", 6, 0.2, 5.5e-4), ("linear", 9, 0.2, 2.125e-4),
        ("constant", 0, 0.2, 5e-4), ("constant", 9, 0.2, 1e-3),
        ("wsd", 1, 0.3, 1e-3), ("wsd", 6, 0.3, 1e-3), ("wsd", 7, 0.3, 1e-3), ("wsd", 8, 0.3, 7e-4), ("wsd", 9, 0.3, 4e-4),
        ("wsd", 9, 0.05, 1e-3),  # floor(0.05 * 10) = 0 decay steps: constant
    ]
    worst = max(abs(tg.learning_rate(s, 10, 2, 1e-3, 0.1, sch, wf) - e) for sch, s, wf, e in cases)
    no_warmup = abs(tg.learning_rate(0, 10, 0, 1e-3, 0.1, "cosine", 0.2) - 1e-3)
    check("learning-rate schedules vs hand-computed values", worst < 1e-15 and no_warmup < 1e-15,
          f"{len(cases) + 1} (schedule, step) points, worst |dlr| {max(worst, no_warmup):.1e}")
    # the wsd decay length as llmc/schedule.h computes it from the float32 flag: 0.7 x 10 -> 7 steps (float32 0.7 is
    # 0.69999999); 0.33 x 29203 = 9636.99 -> 9636; 0.9 x 2M -> 1.8M (the margin must not add a step)
    d7 = [tg.learning_rate(s, 10, 0, 1.0, 0.0, "wsd", 0.7) for s in (3, 4)]
    n = 29203
    d9636 = [tg.learning_rate(s, n, 0, 1.0, 0.0, "wsd", 0.33) for s in (n - 9636, n - 9636 + 1)]
    big = [tg.learning_rate(s, 2000000, 0, 1.0, 0.0, "wsd", 0.9) for s in (200000, 200001)]
    check("wsd decay length from the float32 --wsd-frac, as the C trainers",
          d7 == [1.0, 1 - 1 / 7] and d9636 == [1.0, 1 - 1 / 9636] and big == [1.0, 1 - 1 / 1800000],
          f"0.7 x 10: {d7}; 0.33 x 29203: {d9636}; 0.9 x 2M: {big}")


def test_adamw_decay_only_on_matrices(ctx):
    """With zero gradients the Adam update is 0, so one step must scale exactly the 2-D tensors by 1 - lr*wd."""
    cfg, init, _, _ = tiny_setup()
    model = tg.GPT(cfg, {n: v.double() for n, v in init.items()})
    opt = tg.make_optimizer(model, 0.01, 0.5, 0.9, 0.95, 1e-8)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    worst = 0.0
    for name, p in model.named_parameters():
        factor = 1 - 0.01 * 0.5 if name in tg.DECAYED else 1.0
        worst = max(worst, (p.detach() - init[name].double() * factor).abs().max().item())
    check("AdamW weight decay on 2-D tensors only", worst < 1e-15,
          f"decayed {sorted(tg.DECAYED)}, worst |p - p0*(1 - lr*wd or 1)| {worst:.1e}")


def hand_adamw(cfg, init, x, y, ref):
    """The K steps of the reference, with AdamW, clipping and bias corrections written out by hand."""
    model = tg.GPT(cfg, {n: torch.from_numpy(np.array(v)).double() for n, v in init.items()})
    params = list(model.named_parameters())
    m = [torch.zeros_like(p) for _, p in params]
    v = [torch.zeros_like(p) for _, p in params]
    losses, clipped = [], 0
    for t in range(1, ref["K"] + 1):
        model.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        losses.append(loss.item())
        grads = [p.grad.detach().clone() for _, p in params]
        norm = math.sqrt(sum((g * g).sum().item() for g in grads))
        if ref["grad_clip"] > 0 and ref["grad_clip"] / (norm + 1e-6) < 1:
            grads = [g * (ref["grad_clip"] / (norm + 1e-6)) for g in grads]
            clipped += 1
        lr = tg.learning_rate(t - 1, ref["total_steps"], ref["warmup"], ref["lr"], ref["final_lr_frac"],
                              ref["schedule"], ref["wsd_frac"])
        b1, b2 = ref["beta1"], ref["beta2"]
        with torch.no_grad():
            for i, (name, p) in enumerate(params):
                p.mul_(1 - lr * (ref["weight_decay"] if name in tg.DECAYED else 0.0))
                m[i] = b1 * m[i] + (1 - b1) * grads[i]
                v[i] = b2 * v[i] + (1 - b2) * grads[i] ** 2
                p.sub_(lr * (m[i] / (1 - b1 ** t)) / ((v[i] / (1 - b2 ** t)).sqrt() + ref["eps"]))
    final = torch.cat([p.detach().reshape(-1) for _, p in params]).float().numpy()
    return np.array(losses), final, clipped


def test_reference_files(ctx):
    tmp = ctx["tmp"]
    out = os.path.join(tmp, "ref")
    args = ["--reference-out", out, "--n-layer", 2, "--n-head", 3, "--n-embd", 48, "--vocab-size", 300,
            "--seq-len", 13, "--batch-size", 2, "--steps", 6, "--seed", 7, "--grad-clip", 2.0, "--lr-schedule", "wsd",
            "--wsd-frac", 0.5]
    rc, stdout, stderr = run_cli(*args)
    check("reference mode runs", rc == 0, f"exit {rc}; {stderr.strip()[-200:]}")
    if rc != 0:
        return
    raw_model = open(os.path.join(out, "model.bin"), "rb").read()
    raw_ref = open(os.path.join(out, "reference.bin"), "rb").read()
    for label, raw, magic in [("model.bin", raw_model, 0x4D545047), ("reference.bin", raw_ref, 0x46455247)]:
        h = np.frombuffer(raw[:1024], dtype="<u4")
        ok = h[0] == magic and h[1] == 1 and h[2] == zlib.crc32(raw[1024:]) and h[3] + (int(h[4]) << 32) == len(raw) - 1024
        check(f"{label} header (raw bytes)", ok, f"magic 0x{h[0]:08x}, version {h[1]}, CRC 0x{h[2]:08x} vs zlib "
              f"0x{zlib.crc32(raw[1024:]):08x}, payload {h[3]} vs {len(raw) - 1024} bytes")

    cfg, init = tg.load_model_file(os.path.join(out, "model.bin"))
    ref = tg.load_reference_file(os.path.join(out, "reference.bin"))
    fields_ok = ((cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size, cfg.padded_vocab_size, cfg.max_seq_len) ==
                 (2, 3, 48, 300, 384, 13) and (ref["B"], ref["T"], ref["K"], ref["V"], ref["Vp"], ref["P"]) ==
                 (2, 13, 6, 300, 384, cfg.num_parameters()) and ref["schedule"] == "wsd" and ref["warmup"] == 2 and
                 ref["total_steps"] == 6 and ref["seed"] == 7 and ref["grad_clip"] == 2.0 and
                 ref["lr"] == np.float32(1e-3) and ref["beta2"] == np.float32(0.95) and ref["wsd_frac"] == 0.5)
    check("files parse back with the fields given", fields_ok, f"{cfg}; B={ref['B']} T={ref['T']} K={ref['K']} "
          f"P={ref['P']} schedule={ref['schedule']} clip={ref['grad_clip']}")
    pad = init["wte"][cfg.vocab_size:]
    lnw = init["ln1w"]
    check("initial weights: padded rows 0, perturbed LN and biases", bool((pad == 0).all()) and 0.03 < lnw.std() < 0.3
          and 0.005 < init["qkvb"].std() < 0.05 and 0.015 < init["qkvw"].std() < 0.025 and
          abs(init["fcprojw"].std() / (0.02 / math.sqrt(4)) - 1) < 0.1,
          f"std ln1w {lnw.std():.3f} (0.1), qkvb {init['qkvb'].std():.4f} (0.02), qkvw {init['qkvw'].std():.4f} "
          f"(0.02), fcprojw {init['fcprojw'].std():.4f} (0.02/sqrt(2L) = 0.01)")

    x = torch.from_numpy(ref["inputs"].astype(np.int64))
    y = torch.from_numpy(ref["targets"].astype(np.int64))
    logits, loss = naive_forward({n: v.astype(np.float64) for n, v in init.items()}, cfg, x.numpy(), y.numpy())
    err = np.abs(ref["logits"] - logits).max() / np.abs(logits).max()
    check("reference logits and loss vs naive numpy", err < 1e-6 and abs(ref["loss"][0] - loss) < 1e-6 * loss,
          f"worst relative |dlogit| {err:.1e}, loss {ref['loss'][0]:.6f} vs {loss:.6f}")

    model = tg.GPT(cfg, {n: torch.from_numpy(np.array(v)).double() for n, v in init.items()})
    model(x, y)[1].backward()
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy()
    gerr = np.abs(ref["grads"] - grads).max() / np.abs(grads).max()
    check("reference gradients vs float64 autograd of model.bin", gerr < 1e-6, f"{len(grads)} values, worst relative error {gerr:.1e}")

    losses, final, clipped = hand_adamw(cfg, init, x, y, ref)
    lerr = np.abs(ref["step_losses"] - losses).max()
    werr = np.abs(ref["final_weights"] - final).max()
    moved = np.abs(ref["final_weights"] - np.concatenate([v.reshape(-1) for v in init.values()])).max()
    check("K AdamW steps vs hand-written AdamW + clipping + schedule", lerr < 1e-5 and werr < 2e-6 and moved > 1e-3
          and 0 < clipped < ref["K"] and ref["step_losses"][0] == ref["loss"][0],
          f"worst |dloss| {lerr:.1e}, worst |dweight| {werr:.1e}, weights moved up to {moved:.3f}, "
          f"{clipped}/{ref['K']} steps clipped, losses {ref['step_losses'][0]:.4f} -> {ref['step_losses'][-1]:.4f}")

    rc2, _, _ = run_cli(*args[:1], out + "2", *args[2:])
    same = rc2 == 0 and all(open(os.path.join(out + "2", f), "rb").read() == r
                            for f, r in [("model.bin", raw_model), ("reference.bin", raw_ref)])
    check("reference output is reproducible for a seed", same, "second run byte-identical" if same else "files differ")

    rc3, _, stderr3 = run_cli(*args[:1], out + "f32", *args[2:], "--ref-dtype", "float32")
    ok3 = rc3 == 0
    if ok3:
        ref32 = tg.load_reference_file(os.path.join(out + "f32", "reference.bin"))
        e32 = np.abs(ref32["final_weights"] - ref["final_weights"]).max()
        ok3 = e32 < 1e-4
    check("--ref-dtype float32 agrees with float64", ok3, f"worst |dweight| {e32:.1e}" if rc3 == 0 else stderr3.strip())
    ctx["model_bytes"] = raw_model


def expect_format_error(label, path, fragment):
    try:
        tg.load_model_file(path)
        check(label, False, "was accepted")
    except tg.FormatError as e:
        msg = str(e)
        check(label, fragment in msg and path in msg and "\n" not in msg, msg)


def test_bad_model_files(ctx):
    tmp = ctx["tmp"]
    if "model_bytes" not in ctx:
        check("bad model files", False, "skipped: reference mode produced no model.bin")
        return
    raw = ctx["model_bytes"]
    def variant(name, data):
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def with_word(i, value):  # header words are outside the CRC
        h = np.frombuffer(raw[:1024], dtype="<u4").copy()
        h[i] = value
        return h.tobytes() + raw[1024:]

    flipped = bytearray(raw)
    flipped[5000] ^= 0x10
    expect_format_error("corrupt payload rejected", variant("flip.bin", bytes(flipped)), "corrupt: payload CRC-32")
    expect_format_error("truncated file rejected", variant("trunc.bin", raw[:-100]), "truncated")
    expect_format_error("short file rejected", variant("short.bin", raw[:500]), "shorter than the 1024-byte header")
    expect_format_error("wrong magic rejected", variant("magic.bin", with_word(0, 0x4B4F5447)), "not a model file: magic")
    expect_format_error("wrong version rejected", variant("version.bin", with_word(1, 2)), "version 2 is not supported")
    expect_format_error("inconsistent Vp rejected", variant("vp.bin", with_word(8, 256)), "padded_vocab_size 256")
    expect_format_error("inconsistent C/H rejected", variant("heads.bin", with_word(10, 5)), "not divisible")
    expect_format_error("wrong parameter count rejected", variant("count.bin", with_word(12, 12345)), "parameters")
    expect_format_error("bad dtype rejected", variant("dtype.bin", with_word(5, 3)), "dtype 3")

    h = np.frombuffer(raw[:1024], dtype="<u4").copy()  # fp32: a NaN as payload float 7 (wte[7]), the CRC made right
    payload = bytearray(raw[1024:])
    payload[28:32] = np.array([np.nan], dtype="<f4").tobytes()
    h[2] = zlib.crc32(bytes(payload))
    expect_format_error("a NaN with a right CRC rejected, as the C readers do", variant("nan.bin", h.tobytes() + bytes(payload)),
                        "holds a non-finite value nan at wte[7]")

    bad = os.path.join(tmp, "flip.bin")
    rc, out, err = run_cli("--train-data", os.path.join(tmp, "none_*.bin"), "--init", bad, "--steps", 1)
    lines = err.strip().splitlines()
    check("CLI reports a corrupt --init in one line, exit 1", rc == 1 and len(lines) == 1 and bad in lines[0] and
          lines[0].startswith("error: "), f"exit {rc}: {err.strip()}")


def test_cli_validation(ctx):
    cases = [
        (["--n-layer", 2, "--n-head", 5, "--n-embd", 64, "--vocab-size", 300], "not divisible by n_head 5"),
        (["--n-layer", 0, "--n-head", 4, "--n-embd", 64, "--vocab-size", 300], "n_layer must be a positive integer"),
        (["--n-layer", 1025, "--n-head", 1, "--n-embd", 8, "--vocab-size", 5], "n_layer = 1025 is not in [1, 1024]"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 5, "--max-seq-len", 1048577], "max_seq_len = 1048577 is not in"),
        (["--n-layer", 2, "--n-head", 4, "--n-embd", 64], "--vocab-size"),
        (["--n-layer", 2, "--n-head", 4, "--n-embd", 64, "--vocab-size", 300, "--seq-len", 40, "--max-seq-len", 20],
         "exceeds --max-seq-len 20"),
        (["--n-layer", 2, "--n-head", 4, "--n-embd", 64, "--vocab-size", 300, "--beta2", 1.0], "must be below 1 in float32, got 0.9 and 1.0"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 30, "--seed", -1], "--seed must be in [0, 2^31 - 1]"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 30, "--val-batches", 0], "--val-batches positive"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 30, "--device", "bogus"], "--device bogus: not cpu, cuda"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 30, "--device", "meta"], "--device meta: not cpu, cuda"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 30, "--lr", "1e39"], "--lr must be in [0, 1e+30] (as the C trainers)"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 30, "--final-lr-frac", "2"], "--final-lr-frac must be in [0, 1]"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 30, "--eps", 0], "--eps must be above 0"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 30, "--beta1", "0.999999999"], "must be below 1 in float32"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 30, "--eps", "1e-50"], "--eps must be above 0"),
        (["--n-layer", 1, "--n-head", 1, "--n-embd", 8, "--vocab-size", 30, "--write-model", "/nonexistent/m.bin"],
         "/nonexistent is not a writable directory"),
    ]
    for argv, fragment in cases:
        rc, _, err = run_cli("--reference-out", os.path.join(tempfile.gettempdir(), "never_written"), *argv)
        lines = err.strip().splitlines()
        check(f"CLI rejects bad sizes/flags ({fragment})", rc == 1 and len(lines) == 1 and fragment in lines[0],
              f"exit {rc}: {err.strip()}")
    # training checks the same ranges as the C trainers (a float32 overflow was a traceback inside torch)
    for flag, value in (("--lr", "1e40"), ("--weight-decay", "1e35"), ("--grad-clip", "1e40")):
        rc, _, err = run_cli("--train-data", os.path.join(tempfile.gettempdir(), "never_*.bin"), "--n-layer", 1, "--n-head", 1,
                             "--n-embd", 8, "--vocab-size", 30, flag, value)
        lines = err.strip().splitlines()
        check(f"training rejects {flag} {value} as the C trainers do", rc == 1 and len(lines) == 1 and
              f"{flag} must be in [0, 1e+30]" in lines[0], f"exit {rc}: {err.strip()[-300:]}")


def write_shard(path, tokens, vocab=1000, bytes_per_token=2):
    tokens = np.asarray(tokens, dtype="<u2")
    h = np.zeros(256, dtype="<u4")
    h[:9] = [0x4B4F5447, 1, zlib.crc32(tokens.tobytes()), 2 * len(tokens), 0, len(tokens), 0, vocab, bytes_per_token]
    with open(path, "wb") as f:
        f.write(h.tobytes() + tokens.tobytes())


def test_loader(ctx):
    tmp = ctx["tmp"]
    """Shards of 25, 10 and 5 tokens (token = 100*shard + index), B=2, T=4: batches need 9 tokens."""
    for k, n in enumerate([25, 10, 5]):
        write_shard(os.path.join(tmp, f"ld_{k}.bin"), 100 * k + np.arange(n))
    loader = tg.TokenLoader(os.path.join(tmp, "ld_*.bin"), 2, 4, 1000)
    starts = [0, 8, 16, 100, 0, 8]  # shard 0 at 0, 8, 16; 24+9 > 25 -> shard 1; 8+9 > 10 -> shard 2 too small -> wrap
    ok = True
    for s in starts:
        x, y = loader.next_batch()
        ok &= x.reshape(-1).tolist() == list(range(s, s + 8)) and y.reshape(-1).tolist() == list(range(s + 1, s + 9))
    check("token loader walks shards, skips short ones, wraps", ok, f"{len(starts)} batches vs hand-listed starts {starts}")

    write_shard(os.path.join(tmp, "big_0.bin"), [1, 2, 1500, 3], vocab=1000)
    try:
        tg.load_token_shard(os.path.join(tmp, "big_0.bin"))
        check("a shard token >= its vocab size is rejected", False, "was accepted")
    except tg.FormatError as e:
        check("a shard token >= its vocab size is rejected", "token 1500 at position 2 is not below" in str(e), str(e))
    write_shard(os.path.join(tmp, "wide_0.bin"), np.arange(50), bytes_per_token=4)
    write_shard(os.path.join(tmp, "vocab_0.bin"), np.arange(50), vocab=2000)
    for pattern, fragment in [("wide_*.bin", "4 bytes per token"), ("vocab_*.bin", "vocab size 2000")]:
        try:
            tg.TokenLoader(os.path.join(tmp, pattern), 2, 4, 1000)
            check(f"loader rejects {pattern}", False, "was accepted")
        except tg.FormatError as e:
            check(f"loader rejects {pattern}", fragment in str(e), str(e))


def test_training_mode(ctx):
    tmp = ctx["tmp"]
    rng = np.random.default_rng(1)
    write_shard(os.path.join(tmp, "tr_0.bin"), rng.integers(0, 200, 3000), vocab=200)
    init_path, out_path = os.path.join(tmp, "init.bin"), os.path.join(tmp, "trained.bin")
    rc, out, err = run_cli("--train-data", os.path.join(tmp, "tr_*.bin"), "--val-data", os.path.join(tmp, "tr_*.bin"),
                           "--val-every", 2, "--val-batches", 2, "--n-layer", 1, "--n-head", 2, "--n-embd", 32,
                           "--vocab-size", 200, "-b", 2, "-t", 16, "--steps", 4, "--write-model", init_path,
                           "--out-model", out_path)
    steps = re.findall(r"^step (\d+)/4 \| loss (\d+\.\d{6}) \| lr \S+ \| norm \S+", out, re.M)
    ok = rc == 0 and len(steps) == 4 and "val loss" in out
    detail = f"exit {rc}, {len(steps)} step lines; {err.strip()[-300:]}"
    if ok:
        cfg, init = tg.load_model_file(init_path)
        _, trained = tg.load_model_file(out_path)
        tokens, _ = tg.load_token_shard(os.path.join(tmp, "tr_0.bin"))
        x = torch.from_numpy(tokens[:32].astype(np.int64)).view(2, 16)
        y = torch.from_numpy(tokens[1:33].astype(np.int64)).view(2, 16)
        _, loss0 = naive_forward({n: v.astype(np.float64) for n, v in init.items()}, cfg, x.numpy(), y.numpy())
        moved = max(np.abs(trained[n] - init[n]).max() for n in init)
        ok = abs(float(steps[0][1]) - loss0) < 1e-4 and moved > 1e-4
        detail = f"step-1 loss {steps[0][1]} vs naive loss of --write-model on batch 0 {loss0:.4f}, weights moved {moved:.4f}"
    check("training mode: step lines, first loss, saved models", ok, detail)


def test_gen_references(ctx):
    """dev/gen_references.sh: every config's files load and agree, and the clipping mix is as documented."""
    out = os.path.join(ctx["tmp"], "refs")
    p = subprocess.run(["bash", os.path.join(ROOT, "dev", "gen_references.sh"), out], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHON": sys.executable})
    check("gen_references.sh runs", p.returncode == 0, f"exit {p.returncode}; {p.stderr.strip()[-200:]}")
    sections = {s.split(":")[0]: s for s in p.stdout.split("== ")[1:]}
    want = {"a": (1, 9), "b": (1, 9), "c": (0, 0), "d": (10, 10), "e": (1, 9), "f": (1, 9)}  # (min, max) clipped steps of 10
    for name in sorted(os.listdir(out)) if p.returncode == 0 else []:
        cfg, _ = tg.load_model_file(os.path.join(out, name, "model.bin"))
        ref = tg.load_reference_file(os.path.join(out, name, "reference.bin"))
        clipped = sections[name].count("(clipped)")
        lo, hi = want[name[0]]
        ok = ref["P"] == cfg.num_parameters() and ref["V"] == cfg.vocab_size and ref["T"] <= cfg.max_seq_len and \
            lo <= clipped <= hi and ref["step_losses"][-1] < ref["step_losses"][0]
        check(f"reference set {name}", ok, f"{cfg}, B={ref['B']} T={ref['T']} {ref['schedule']}, {clipped}/10 steps "
              f"clipped (want {lo}..{hi}), loss {ref['step_losses'][0]:.4f} -> {ref['step_losses'][-1]:.4f}")


TESTS = [test_forward_vs_naive, test_gradients_vs_finite_differences, test_schedule, test_adamw_decay_only_on_matrices,
         test_reference_files, test_bad_model_files, test_cli_validation, test_loader, test_training_mode,
         test_gen_references]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        ctx = {"tmp": tmp}  # shared by the tests: the temporary folder, model.bin's bytes for the corruption tests
        for test in TESTS:
            try:
                test(ctx)
            except Exception as e:  # a crash fails that test, and the others still run
                check(f"{test.__name__} ran without an exception", False, f"{type(e).__name__}: {e}")
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
