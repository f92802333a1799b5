#!/usr/bin/env python3
"""
dev/test_random_configs.py — randomized-configuration differential test of the trainers.

1. Draws --count model and optimizer configurations from a seed (a fresh one each run unless --seed or
   $SEED gives it; printed first, with the command that reproduces the run). For each, train_gpt.py
   writes a float64 reference state (K = 3..5 AdamW steps), then ./test_gpt_cpu, ./test_gpt_sim_fp32 and
   ./test_gpt_sim (bf16) check it with their usual bounds (test_gpt.c, test_gpt.cu). Drawn: layers 1..3,
   heads 1..4, head dim from HEAD_DIMS (C = heads x head dim, often not a multiple of 32 or 64), vocab
   2..700 (tiny ones and ones near multiples of 128 more often), T 1..48, max_seq_len T..T+16, B 1..3,
   every lr schedule in turn, warmup 0..K, clipping off or at a drawn norm, weight decay, lr, betas.
   One configuration in four has a head dim that is not a multiple of 8 (ODD_HEAD_DIMS, heads 1..4 or 8): the
   GPU trainer's flash attention then copies element by element, and where the channels are no multiple of 8 its
   layernorm, encoder and column sums take one element per access (llmc/cuda_utils.cuh, pack_width).
   REGRESSION_CASES are fixed configurations checked the same way every run. A test program's failing
   checks count as passed only when its precision's limit explains them (LIMITS): every one is a gradient
   or (fp32) final-weights check within 4x (fp32) or 2x (bf16) of PyTorch's own error in that precision
   against the float64 reference; the output names each such check.
2. The documented limits, each at its boundary (largest refused, smallest accepted value), on
   train_gpt.py, ./train_gpt_cpu and ./train_gpt_sim (bf16; the fp32 build shares gpt_create):
   n_embd divisible by n_head (all); head dim at most 256, any channels and head dim below (GPU trainer,
   llmc/flash_attention.cuh); T <= max_seq_len (all); vocab <= 65536 (train_gpt.py, the flag table).
   A refusal is a non-zero exit below 128 whose stderr's first line starts with "error:" and names the
   problem; an acceptance is exit 0 (one training step on mock data, or a reference state).
Prints one line per check (a test program's line adds its own counts, a crash or a missing result line
counts one failure), the worst error of each test program as a fraction of its bound and the
configuration it came from, and ends with "N passed, M failed". Run from the repository root:
make test-random-configs [SEED=s] [RANDOM_CONFIGS=k].
"""
import argparse
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time

SCHEDULES = ["cosine", "linear", "constant", "wsd"]
HEAD_DIMS = [8, 16, 24, 32, 40, 64, 72, 128]
ODD_HEAD_DIMS = [3, 5, 7, 12, 20, 36]  # not 1, 2: at C = 2 LayerNorm backward cancels, fp32 grads reach 0.9 of 1e-5
MAX_CHANNELS = 256  # keeps the simulated bf16 test of the largest draw near 20 s on 2 cores
TIMEOUT_S = 600     # one program; a hang fails the check instead of stopping the test
CHECKERS = [("test_gpt_cpu", "./test_gpt_cpu"), ("test_gpt_sim_fp32", "./test_gpt_sim_fp32"), ("test_gpt_sim", "./test_gpt_sim")]
GPU_REFUSAL = "head size [0-9]+ .*above flash attention's 256"

# Fixed configurations (train_gpt.py flags), checked on every run.
REGRESSION_CASES = [
    # The weights with an exactly zero gradient: AdamW turns their rounding noise into lr-sized updates, so
    # they were over their bounds. T = 1 (seed 2, draws 6 and 28): the query and key thirds of qkvw and qkvb
    # (each query sees only its own key) moved by up to 1e-3 relative in the fp32 GPU trainer, over the 5e-5
    # per-tensor and 1e-5 all-weights bounds. Seed 4242, draw 22: the key bias moved by 1.6e-3 (bound 1e-3)
    # in the fp32 GPU trainer, 6.9e-4 in the CPU one. test_gpt.c and test_gpt.cu no longer compare them
    # (llmc/reference_state.h, check_final_weights); their gradients are still compared.
    {"--n-layer": 1, "--n-head": 1, "--n-embd": 16, "--vocab-size": 27, "--seq-len": 1, "--max-seq-len": 1,
     "--batch-size": 1, "--steps": 4, "--seed": 770481, "--lr-schedule": "wsd", "--warmup": 1, "--final-lr-frac": 0.0,
     "--wsd-frac": 0.331, "--grad-clip": 0, "--weight-decay": 0.0, "--lr": 0.00189, "--beta1": 0.9, "--beta2": 0.99},
    {"--n-layer": 1, "--n-head": 2, "--n-embd": 128, "--vocab-size": 5, "--seq-len": 1, "--max-seq-len": 1,
     "--batch-size": 1, "--steps": 3, "--seed": 836705, "--lr-schedule": "linear", "--warmup": 0, "--final-lr-frac": 0.616,
     "--wsd-frac": 0.327, "--grad-clip": 3.391, "--weight-decay": 0.452, "--lr": 0.000831, "--beta1": 0.9, "--beta2": 0.999},
    {"--n-layer": 1, "--n-head": 4, "--n-embd": 256, "--vocab-size": 535, "--seq-len": 15, "--max-seq-len": 15,
     "--batch-size": 3, "--steps": 3, "--seed": 648116, "--lr-schedule": "wsd", "--warmup": 0, "--final-lr-frac": 0.0,
     "--wsd-frac": 0.26, "--grad-clip": 0, "--weight-decay": 0.1, "--lr": 0.00102, "--beta1": 0.9, "--beta2": 0.99},
    # T past one block of the GPU attention kernels (128 queries or keys at head dim 64, 32 rows a warp): the
    # block-crossing forward and backward checked inside the whole model; the drawn configurations keep T <= 48.
    {"--n-layer": 1, "--n-head": 2, "--n-embd": 128, "--vocab-size": 333, "--seq-len": 150, "--max-seq-len": 160,
     "--batch-size": 1, "--steps": 3, "--seed": 7, "--lr-schedule": "cosine", "--warmup": 1, "--final-lr-frac": 0.1,
     "--wsd-frac": 0.3, "--grad-clip": 1.0, "--weight-decay": 0.1, "--lr": 0.001, "--beta1": 0.9, "--beta2": 0.95},
    # vocabulary 1: every loss is exactly 0; the fp32 GPU test's relative loss check divided 0 by 0 (NaN, a FAIL)
    {"--n-layer": 1, "--n-head": 2, "--n-embd": 32, "--vocab-size": 1, "--seq-len": 8, "--max-seq-len": 8,
     "--batch-size": 2, "--steps": 3, "--seed": 1, "--lr-schedule": "cosine", "--warmup": 0, "--final-lr-frac": 0.1,
     "--wsd-frac": 0.2, "--grad-clip": 1.0, "--weight-decay": 0.0, "--lr": 0.001, "--beta1": 0.9, "--beta2": 0.95},
]


class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def ok(self, text):
        print(f"ok    {text}", flush=True)
        self.passed += 1

    def bad(self, text):
        print(f"FAIL  {text}", flush=True)
        self.failed += 1


def draw_config(rng, index):
    """One configuration as train_gpt.py's --reference-out flags (a dict, flag -> value)."""
    L = rng.randint(1, 3)
    if rng.random() < 0.25:
        hd = rng.choice(ODD_HEAD_DIMS)
        NH = rng.choice([n for n in (1, 2, 3, 4, 8) if n * hd <= MAX_CHANNELS])  # 8: channels the GPU trainer takes
    else:
        hd = rng.choice(HEAD_DIMS)
        NH = rng.randint(1, max(1, min(4, MAX_CHANNELS // hd)))
    kind = rng.random()
    if kind < 0.2:
        V = rng.choice([2, 3, 4, 5])
    elif kind < 0.3:
        V = rng.choice([127, 128, 129, 255, 257, 640])
    else:
        V = rng.randint(2, 700)
    T = rng.choice([1, 48]) if rng.random() < 0.2 else rng.randint(1, 48)
    K = rng.randint(3, 5)
    return {
        "--n-layer": L, "--n-head": NH, "--n-embd": NH * hd, "--vocab-size": V,
        "--seq-len": T, "--max-seq-len": T + (0 if rng.random() < 0.5 else rng.randint(1, 16)),
        "--batch-size": rng.randint(1, 3), "--steps": K, "--seed": rng.randint(1, 10**6),
        "--lr-schedule": SCHEDULES[index % len(SCHEDULES)], "--warmup": rng.randint(0, K),
        "--final-lr-frac": rng.choice([0.0, 0.1, round(rng.uniform(0, 1), 3)]),
        "--wsd-frac": round(rng.uniform(0.1, 0.7), 3),
        "--grad-clip": 0 if rng.random() < 0.3 else round(10 ** rng.uniform(-0.5, 0.7), 3),
        "--weight-decay": rng.choice([0.0, 0.1, round(rng.uniform(0, 0.5), 3)]),
        "--lr": float(f"{10 ** rng.uniform(-3.5, -2.82):.3g}"),  # 3e-4..1.5e-3: bf16 drifts to 0.9 of its bound at 2e-3
        "--beta1": rng.choice([0.9, 0.8]), "--beta2": rng.choice([0.95, 0.99, 0.999]),
    }


def describe(cfg):
    hd = cfg["--n-embd"] // cfg["--n-head"]
    return (f"L={cfg['--n-layer']} NH={cfg['--n-head']} hd={hd} C={cfg['--n-embd']} V={cfg['--vocab-size']} "
            f"T={cfg['--seq-len']} maxT={cfg['--max-seq-len']} B={cfg['--batch-size']} K={cfg['--steps']} "
            f"{cfg['--lr-schedule']} warmup={cfg['--warmup']} lr={cfg['--lr']} clip={cfg['--grad-clip']} "
            f"wd={cfg['--weight-decay']} betas={cfg['--beta1']},{cfg['--beta2']} seed={cfg['--seed']}")


def gpu_supports(cfg):
    hd = cfg["--n-embd"] // cfg["--n-head"]
    return hd <= 256


def start(cmd, env=None):
    """cmd started with its output captured: (cmd, process or the OSError that stopped it), for finish()"""
    try:
        return cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    except OSError as e:
        return cmd, e


def finish(started):
    """(exit status, stdout, stderr) of a started command; a signal is 128 + its number, a timeout 124."""
    _, proc = started
    if isinstance(proc, OSError):
        return 127, "", f"cannot run: {proc}"
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return 124, out, err + f"timed out after {TIMEOUT_S} s"
    return (proc.returncode if proc.returncode >= 0 else 128 - proc.returncode), out, err


def run(cmd, env=None):
    return finish(start(cmd, env))


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else "(no output)"


def check_refused(tally, name, pattern, cmd, result=None):
    """cmd (or its result, from finish()) refused with a one-line error matching pattern"""
    rc, _, err = result or run(cmd)
    first = err.splitlines()[0] if err.strip() else ""
    if 0 < rc < 128 and first.startswith("error:") and re.search(pattern, first) and len(err.strip().splitlines()) == 1:
        tally.ok(f"{name}: refused, exit {rc}: {first}")
    else:
        tally.bad(f"{name}: expected a one-line 'error:' matching /{pattern}/ and an exit in 1..127; exit {rc}, "
                  f"stderr: {err.strip()[:300]}   command: {shlex.join(cmd)}")


def check_accepted(tally, name, cmd):
    rc, out, err = run(cmd)
    if rc == 0:
        tally.ok(f"{name}: accepted")
    else:
        tally.bad(f"{name}: expected exit 0, got {rc}: {last_line(err or out)}   command: {shlex.join(cmd)}")


FP32_PROGRAMS = ("test_gpt_cpu", "test_gpt_sim_fp32")
# A failing check is the precision's limit, not the trainer's, when PyTorch's own computation in that
# precision misses the float64 reference by as much (within the factor): {precision: (checks, factor)}
#   fp32: gradients and final weights, against PyTorch's fp32 reference state (--ref-dtype float32)
#   bf16: gradients, against PyTorch's gradients under bf16 autocast (torch.autocast on the CPU)
# Such a gradient is a sum over positions of terms that nearly cancel, e.g. with a vocabulary of 2 near
# initialisation, where every position's p0 - [target = 0] is about +-1/2, so each term's rounding
# outweighs the sum (seeds 386247323, 20261130); such weights have a gradient that is rounding noise next
# to its other entries, which AdamW's first steps (sign(g) x lr) make lr-sized.
LIMITS = {"fp32": ("weights|grad( dq0)?", 4), "bf16": ("grad( dq0)?", 2)}
# lines "grad NAME ERROR" and (fp32) "weights NAME ERROR" per tensor (qkvw and qkvb also by thirds, as the
# tests name them) and for all of them (NAME "all"): relative L2 error of PyTorch's values against the float64 reference state in DIR;
# argv: DIR, then fp32 DIR_FP32 (its --ref-dtype float32 twin) or bf16 (gradients under bf16 autocast)
PYTORCH_ERRORS = r"""
import os
import sys
import numpy as np
import torch
sys.path.insert(0, ".")
import train_gpt as tg
d, precision = sys.argv[1:3]
ref = tg.load_reference_file(os.path.join(d, "reference.bin"))
cfg, init = tg.load_model_file(os.path.join(d, "model.bin"))
if precision == "fp32":
    other = tg.load_reference_file(os.path.join(sys.argv[3], "reference.bin"))
    pairs = [("grad", ref["grads"], other["grads"]), ("weights", ref["final_weights"], other["final_weights"])]
else:
    B, T = ref["B"], ref["T"]
    x, y = (torch.from_numpy(ref[k].astype(np.int64)).view(B, T) for k in ("inputs", "targets"))
    model = tg.GPT(cfg, {n: torch.from_numpy(np.array(t)) for n, t in init.items()})
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, loss = model(x, y)
    loss.backward()
    pairs = [("grad", ref["grads"], torch.cat([p.grad.detach().double().flatten() for p in model.parameters()]).numpy())]
def rel(x, y):
    return np.linalg.norm(x - y) / np.linalg.norm(x)
for kind, a, b in pairs:
    a, b, off = a.astype(np.float64), b.astype(np.float64), 0
    print(kind, "all", rel(a, b))
    for name, shape in cfg.tensor_shapes():
        n = int(np.prod(shape))
        x, y = a[off:off + n], b[off:off + n]
        print(kind, name, rel(x, y))
        if name in ("qkvw", "qkvb"):
            x, y = x.reshape(cfg.n_layer, 3, -1), y.reshape(cfg.n_layer, 3, -1)
            for part in range(3):
                print(kind, name + "." + "qkv"[part], rel(x[:, part], y[:, part]))
        off += n
"""
_pytorch_errors = {}


def precision_limited(precision, gen, directory, out):
    """The failing checks of a test program's output, one line each, if every one is a check that LIMITS
    lets the precision excuse and its error is within the factor of PyTorch's own error there; else []."""
    checks, factor = LIMITS[precision]
    failing = [line for line in out.splitlines() if line.endswith("FAIL")]
    parsed = [re.match(rf"^(?P<check>{checks})\s+(?P<name>\S+)\s+rel L2 (?P<err>[0-9.e+-]+) \(bound (?P<bound>[0-9.e+-]+)\)\s+FAIL$",
                       line) for line in failing]
    if not failing or not all(parsed):
        return []
    if (directory, precision) not in _pytorch_errors:
        cmd, rc = [gen[0], "-c", PYTORCH_ERRORS, directory, precision], 0
        if precision == "fp32":
            rc, _, _ = run(gen[:3] + [directory + "_fp32"] + gen[4:] + ["--ref-dtype", "float32"])
            cmd.append(directory + "_fp32")
        rc2, table, _ = run(cmd)
        _pytorch_errors[directory, precision] = dict(((w[0], w[1]), float(w[2])) for w in map(str.split, table.splitlines())) \
            if rc == rc2 == 0 else {}
    errors = _pytorch_errors[directory, precision]
    lines = []
    for m in parsed:
        key, err = (m["check"].split()[0], m["name"]), float(m["err"])
        if key not in errors or err > factor * errors[key]:
            return []
        lines.append(f"{m['check']} {m['name']}: {err:.3e} (bound {m['bound']}), PyTorch {precision} {errors[key]:.3e}")
    return lines


def check_config(tally, worst, python, cfg, directory, reproduce):
    """Reference state for cfg in directory, then every checker on it; worst[checker] keeps the largest
    'fraction of its bound' seen, with the configuration."""
    gen = [python, "train_gpt.py", "--reference-out", directory] + [str(x) for kv in cfg.items() for x in kv]
    rc, out, err = run(gen)
    if rc != 0:
        tally.bad(f"train_gpt.py exit {rc}: {last_line(err or out)}\n      {shlex.join(gen)}\n      {reproduce}")
        return
    tally.ok(f"train_gpt.py: reference state, {out.count('(clipped)')} of {cfg['--steps']} steps clipped")
    # the three run side by side, one thread each (the simulator runs on one)
    started = [(name, start([binary, directory], dict(os.environ, OMP_NUM_THREADS="1"))) for name, binary in CHECKERS]
    for name, proc in started:
        cmd = proc[0]
        rc, out, err = finish(proc)
        if name != "test_gpt_cpu" and not gpu_supports(cfg):
            check_refused(tally, f"{name} refuses head size {cfg['--n-embd'] // cfg['--n-head']}", GPU_REFUSAL, cmd, (rc, out, err))
            continue
        precision = "fp32" if name in FP32_PROGRAMS else "bf16"
        found = re.findall(r"^([0-9]+) passed, ([0-9]+) failed$", out, re.M)
        fraction = re.findall(r"^worst relative error ([0-9.e+-]+) \((.*), ([0-9.]+) of its bound\)$", out, re.M)
        if fraction:
            f = float(fraction[-1][2])
            if f > worst.get(name, (-1.0,))[0]:
                worst[name] = (f, f"{fraction[-1][0]} in {fraction[-1][1]}", describe(cfg))
        passed, failed = (int(found[-1][0]), int(found[-1][1])) if found else (0, 0)
        if rc == 0 and found and failed == 0:
            worst_text = f"{fraction[-1][0]} ({fraction[-1][2]} of its bound)" if fraction else "not printed"
            print(f"ok    {name}: {passed} passed, worst {worst_text}", flush=True)
        elif rc == 1 and found and precision_limited(precision, gen, directory, out):
            print(f"ok    {name}: {passed + failed} passed, of them {failed} check(s) over the bound but within "
                  f"{LIMITS[precision][1]}x of PyTorch's own {precision} error there ({precision}'s limit, not the trainer's):\n      " +
                  "\n      ".join(precision_limited(precision, gen, directory, out)), flush=True)
            passed, failed = passed + failed, 0
        else:
            failing = [line for line in out.splitlines() if "FAIL" in line][:8]
            print(f"FAIL  {name}: exit {rc}, {passed} passed, {failed} failed{'' if found else ' (no result line)'}: "
                  f"{last_line(err) if err.strip() else ''}\n      " + "\n      ".join(failing) +
                  f"\n      reproduce: {shlex.join(gen)} && {shlex.join(cmd)}\n      or: {reproduce}", flush=True)
            failed = max(failed, 1)
        tally.passed += passed
        tally.failed += failed


def check_limits(tally, python, tmp):
    """The documented limits at their boundaries, on train_gpt.py and both trainers."""
    step = ["--mock-data", "1", "-x", "1", "-v", "0", "-s", "0", "-b", "1"]
    trainers = ["./train_gpt_cpu", "./train_gpt_sim"]

    def model(L, NH, C, V, T, maxT=None):
        return ["--n-layer", str(L), "--n-head", str(NH), "--n-embd", str(C), "--vocab-size", str(V), "-t", str(T)] + \
               (["--max-seq-len", str(maxT)] if maxT else [])

    def reference(name, L, NH, C, V, T, maxT):
        return [python, "train_gpt.py", "--reference-out", os.path.join(tmp, "limit_" + name), "--n-layer", str(L),
                "--n-head", str(NH), "--n-embd", str(C), "--vocab-size", str(V), "--seq-len", str(T),
                "--max-seq-len", str(maxT), "--batch-size", "1", "--steps", "1"]

    # n_embd divisible by n_head: 47 / 3 refused, 48 / 3 accepted, everywhere
    for t in trainers:
        check_refused(tally, f"{t} n_embd 47, n_head 3", "not divisible by n_head", [t] + model(1, 3, 47, 64, 8) + step)
        check_accepted(tally, f"{t} n_embd 48, n_head 3", [t] + model(1, 3, 48, 64, 8) + step)
    check_refused(tally, "train_gpt.py n_embd 47, n_head 3", "not divisible by n_head", reference("c47", 1, 3, 47, 64, 8, 8))
    check_accepted(tally, "train_gpt.py n_embd 48, n_head 3", reference("c48", 1, 3, 48, 64, 8, 8))
    # GPU: any channels (36 and 45 no multiple of 8, 40 and 48: head dims 12, 15, 5 and 12, any head dim is taken),
    # head dim at most 256 (264 refused, 256 accepted; both multiples of 8). The CPU trainer takes them all.
    for NH, C, fits in [(3, 36, True), (3, 45, True), (8, 40, True), (4, 48, True), (8, 56, True), (1, 256, True), (1, 264, False)]:
        name = f"./train_gpt_sim head dim {C // NH} (n_embd {C}, n_head {NH})"
        if fits:
            check_accepted(tally, name, ["./train_gpt_sim"] + model(1, NH, C, 64, 8) + step)
        else:
            check_refused(tally, name, GPU_REFUSAL, ["./train_gpt_sim"] + model(1, NH, C, 64, 8) + step)
            check_accepted(tally, f"./train_gpt_cpu head dim {C // NH} (n_embd {C}, n_head {NH})",
                           ["./train_gpt_cpu"] + model(1, NH, C, 64, 8) + step)
    # T <= max_seq_len: 17 > 16 refused, 16 accepted, everywhere
    for t in trainers:
        check_refused(tally, f"{t} T 17, max_seq_len 16", "17.*16", [t] + model(1, 2, 16, 64, 17, 16) + step)
        check_accepted(tally, f"{t} T 16, max_seq_len 16", [t] + model(1, 2, 16, 64, 16, 16) + step)
    check_refused(tally, "train_gpt.py T 17, max_seq_len 16", "17.*16", reference("t17", 1, 2, 16, 64, 17, 16))
    check_accepted(tally, "train_gpt.py T 16, max_seq_len 16", reference("t16", 1, 2, 16, 64, 16, 16))
    # vocab <= 65536 (uint16 tokens): 65537 refused, 65536 accepted, everywhere
    for t in trainers:
        check_refused(tally, f"{t} vocab 65537", "vocab-size.*65537", [t] + model(1, 1, 8, 65537, 4) + step)
        check_accepted(tally, f"{t} vocab 65536", [t] + model(1, 1, 8, 65536, 4) + step)
    check_refused(tally, "train_gpt.py vocab 65537", "vocab_size 65537", reference("v65537", 1, 1, 8, 65537, 4, 4))
    check_accepted(tally, "train_gpt.py vocab 65536", reference("v65536", 1, 1, 8, 65536, 4, 4))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=int(os.environ["SEED"]) if os.environ.get("SEED") else None,
                   help="seed of the draws (default: $SEED, else a fresh one)")
    p.add_argument("--count", type=int, default=int(os.environ.get("RANDOM_CONFIGS", "20")), help="configurations to draw")
    p.add_argument("--python", default=os.environ.get("PYTHON", "/usr/bin/python3"), help="the Python that runs train_gpt.py")
    args = p.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randint(1, 2**31 - 1)
    reproduce = f"make test-random-configs SEED={seed} RANDOM_CONFIGS={args.count}"
    print(f"seed {seed}, {args.count} configurations (reproduce: {reproduce})", flush=True)
    rng = random.Random(seed)
    configs = [("drawn", draw_config(rng, i + seed)) for i in range(args.count)]
    configs += [("regression", dict(c)) for c in REGRESSION_CASES]
    tally = Tally()
    worst = {}
    run_began = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for i, (kind, cfg) in enumerate(configs):
            print(f"== config {i + 1}/{len(configs)} ({kind}{'' if gpu_supports(cfg) else ', CPU only'}): {describe(cfg)}",
                  flush=True)
            began = time.time()
            check_config(tally, worst, args.python, cfg, os.path.join(tmp, f"config{i}"), reproduce)
            print(f"   ({time.time() - began:.1f} s)", flush=True)
        print(f"== documented limits at their boundaries ({time.time() - run_began:.0f} s so far)", flush=True)
        check_limits(tally, args.python, tmp)
    print(f"== worst error of each test program, as a fraction of its bound ({time.time() - run_began:.0f} s in all)")
    for name, _ in CHECKERS:
        if name in worst:
            f, what, cfg = worst[name]
            print(f"{name:<18} {f:.2f} of its bound ({what}) at {cfg}")
    print(f"{tally.passed} passed, {tally.failed} failed")
    return 0 if tally.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
