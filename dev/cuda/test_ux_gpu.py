#!/usr/bin/env python3
"""
dev/cuda/test_ux_gpu.py — what a user of the GPU trainer sees, on the simulated trainer ./train_gpt_sim (bf16).

  metrics   a short run (2 layers, 32 channels, V=256, periodic token shards written here) with -o DIR:
            DIR/metrics.jsonl parses; its first record is the run header: git revision naming a commit of
            this repository (or "unknown"), precision bf16 (+ fp32 master weights), world size 1, as printed;
            memory plan: parameters and gradients 2 bytes and the optimizer 12 bytes (m, v, master) per
            parameter of a count formula written here, activations = a byte formula of the trainer's
            tensors written here, total = the sum, and the one printed "memory:" line (no second
            "device memory:" line) shows those MiB; step records equal the printed step lines (loss, lr,
            norm, ms, tok/s to the printed precision; dev/test_ux.py's checks), tokens = step x B x T,
            elapsed/ETA/MFU as the step line's
  early     --early-stop 2 at lr 0 without master weights (val loss constant): the run stops after the 3rd evaluation (steps 0,
            2, 4), exit 0, naming best step 0, with the best checkpoint in DIR/best
  profile   --profile 2: a table naming the ops (encoder, layernorm, each matmul, attention, classifier,
            adamw, grad norm), whose rows sum to within 30% of the profiled steps' printed step times;
            without --profile no table; 2 ranks (./train_gpt_sim_dist under $MPIRUN, ZeRO-1): a "communication"
            row with L + 2 calls per step (each layer's bucket, the embeddings' bucket, the wait before the
            norm; the ZeRO-1 gather is queued after the timed step), the rows again within 30% of the step times
Ends with "N passed, M failed" (non-zero exit on any failure).
"""
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import test_ux as ux  # noqa: E402  (its shard writer, runner and step-line checks)
from testlib import check, end  # noqa: E402

TRAINER = "./train_gpt_sim"
DIST_TRAINER = "./train_gpt_sim_dist"
MPIRUN = os.environ.get("MPIRUN", "mpirun").split() + os.environ.get("MPIRUN_FLAGS", "--allow-run-as-root --oversubscribe").split()
ENV_THREADS = {"OMP_NUM_THREADS": "1"}


def num_params(L, C, V, maxT):
    Vp = (V + 127) // 128 * 128
    return Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C


def activation_bytes(L, NH, C, V, B, T):
    """bf16 activations and fp32 statistics of the GPU trainer, each tensor rounded up to 64 elements"""
    Vp = (V + 127) // 128 * 128
    BT = B * T
    r = lambda n: (n + 63) // 64 * 64  # noqa: E731
    bf16 = [BT * C, L * BT * C, L * BT * 3 * C, L * BT * C, L * BT * C, L * BT * C, L * BT * 4 * C, L * BT * 4 * C,
            L * BT * C, BT * C, BT * C, BT * Vp]  # encoded, ln1, qkv, atty, residual2, ln2, fch, fch_gelu, residual3, lnf, proj, logits
    fp32 = [L * BT, L * BT, L * NH * BT, L * BT, L * BT, BT, BT, BT]  # ln1/ln2 mean and rstd, logsumexps, lnf mean and rstd, losses
    grads = 10 * BT * C  # one layer's activation gradients (bf16)
    return 2 * sum(map(r, bf16)) + 4 * sum(map(r, fp32)) + 2 * grads


def check_header(stdout, metrics_path, dims):
    L, NH, C, V, B, T = dims
    with open(metrics_path) as f:
        h = json.loads(f.readline()).get("header", {})
    rev = h.get("git_revision", "")
    printed = re.search(r"^precision (.+?) \| world size (\d+) \| git revision (\S+) \|", stdout, re.M)
    known = rev == "unknown" or ux.run(["git", "cat-file", "-e", rev.split("-")[0] + "^{commit}"]).returncode == 0
    check(printed is not None and printed.groups() == (h.get("precision"), str(h.get("world_size")), rev) and known
             and h.get("precision") == "bf16 + fp32 master weights" and h.get("world_size") == 1,
             f"header record first: git revision {rev!r} (a commit of this repository: {known}), precision "
             f"{h.get('precision')!r}, world size {h.get('world_size')}, as printed")
    n = num_params(L, C, V, T)
    want = {"parameters": 2 * n, "gradients": 2 * n, "optimizer": 12 * n, "activations": activation_bytes(L, NH, C, V, B, T)}
    mem = h.get("memory", {})
    worst = max(abs(mem.get(k, -1) - v) for k, v in want.items())
    check(worst == 0 and h.get("num_params") == n and mem.get("total") == sum(want.values()) + mem.get("scratch", -1),
             f"header memory plan equals the formula (worst |diff| {worst} bytes; {n} parameters, activations "
             f"{mem.get('activations')} B, want {want['activations']} B; total = sum)")
    lines = re.findall(r"^(?:device )?memory: parameters (\S+) MiB .* activations (\S+) MiB .* total (\S+) MiB$", stdout, re.M)
    mib = [float(x) for x in lines[0]] if len(lines) == 1 else []
    want_mib = [want["parameters"] / 2**20, want["activations"] / 2**20, mem.get("total", 0) / 2**20]
    check(len(lines) == 1 and "device memory:" not in stdout and max(abs(a - b) for a, b in zip(mib, want_mib)) <= 0.05,
             f"one memory line, as the header record: printed {len(lines)} line(s) {mib}, want {[round(x, 2) for x in want_mib]} MiB")


def profile_table(stdout):
    """({op: total ms}, {op: calls per step}, the printed step times of steps 2-3 of a 4-step run) from --profile 2"""
    rows = re.findall(r"^\| ([a-z][a-z ]+?) +\| +(\S+) \| +\S+ \| +(\S+) \|", stdout, re.M)
    ops = {name: float(total) for name, total, _ in rows if name != "op"}
    calls = {name: float(n) for name, _, n in rows if name != "op"}
    step_ms = [float(ux.STEP_RE.match(line).group(5)) for line in stdout.splitlines() if ux.STEP_RE.match(line)]
    return ops, calls, sum(step_ms[1:3]) if len(step_ms) == 4 else float("nan")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        return run_tests(tmp)


def run_tests(tmp):
    ux.ENV.update(ENV_THREADS)
    ux.write_shard(os.path.join(tmp, "train_000.bin"), 20000, 0)
    ux.write_shard(os.path.join(tmp, "val_000.bin"), 4000, 20000)
    L, NH, C, V, B, T = 2, 2, 32, 256, 4, 32
    model = [TRAINER, "--n-layer", str(L), "--n-head", str(NH), "--n-embd", str(C), "--vocab-size", str(V), "-b", str(B),
             "-t", str(T), "-i", os.path.join(tmp, "train_*.bin"), "-j", os.path.join(tmp, "val_*.bin"), "-s", "0", "-m", "2"]

    # ------------------------------------------------------------ metrics of a short run
    out = os.path.join(tmp, "run")
    r = ux.run(model + ["-x", "12", "-u", "2", "-v", "4", "-l", "3e-3", "-o", out])
    check(r.returncode == 0, f"{TRAINER} (12 steps, -o) exit {r.returncode} {r.stderr.strip()[-200:]}")
    metrics = os.path.join(out, "metrics.jsonl")
    try:
        with open(metrics) as f:
            records = [json.loads(line) for line in f]
    except (OSError, ValueError) as e:
        records = []
        print(f"metrics.jsonl: {e}")
    check(len(records) > 1 and "header" in records[0] and all("header" not in x for x in records[1:]),
             f"metrics.jsonl parses: {len(records)} records, the header first and only there")
    if records:
        check_header(r.stdout, metrics, (L, NH, C, V, B, T))
        ux.check_metrics(r.stdout, metrics)
        ux.check_progress(r.stdout, metrics, B * T, 12)

    # ------------------------------------------------------------ early stopping
    out = os.path.join(tmp, "flat")
    # lr 0 keeps the weights only without fp32 master weights: with them the bf16 parameters are re-rounded from the
    # masters at every step (stochastic rounding), which moves the validation loss by a rounding's worth either way
    r = ux.run(model + ["-x", "40", "-v", "2", "-l", "0", "--master-weights", "0", "-o", out, "--early-stop", "2"])
    vals = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))] if r.returncode == 0 else []
    val_steps = [v["step"] for v in vals if "val_loss" in v]
    steps = [int(m.group(1)) for m in map(ux.STEP_RE.match, r.stdout.splitlines()) if m]
    stop = re.search(r"^early stop: .* best (\S+) at step (\d+), checkpoint in (\S+)$", r.stdout, re.M)
    best = os.path.join(out, "best")
    check(r.returncode == 0 and val_steps == [0, 2, 4] and stop is not None and stop.group(2) == "0"
             and stop.group(3) == best and os.path.exists(os.path.join(best, "model_00000000.bin"))
             and os.path.exists(os.path.join(best, "best.txt")) and steps[-1:] == [4],
             f"lr 0, --early-stop 2: exit {r.returncode}, evaluations at steps {val_steps} (want 0, 2, 4), last step line "
             f"{steps[-1:]}, best/ holds {sorted(os.listdir(best)) if os.path.isdir(best) else None}: "
             f"{stop.group(0) if stop else r.stderr.strip()[-200:]}")

    # ------------------------------------------------------------ profile
    profiled = [TRAINER, "--n-layer", "2", "--n-head", "4", "--n-embd", "64", "--vocab-size", "256", "-b", "4", "-t", "64",
                "--mock-data", "-x", "4", "-v", "0", "-s", "0"]
    r = ux.run(profiled + ["--profile", "2"])
    ops, calls, steps_ms = profile_table(r.stdout)
    expected = {"encoder forward", "layernorm forward", "matmul qkv forward", "attention forward", "matmul attn proj forward",
                "matmul fc forward", "matmul fc proj forward", "classifier forward", "classifier backward",
                "matmul fc proj backward", "matmul fc backward", "matmul attn proj backward", "attention backward",
                "matmul qkv backward", "layernorm backward", "encoder backward", "adamw", "grad norm"}
    ratio = sum(ops.values()) / steps_ms if steps_ms == steps_ms else 0.0
    check(r.returncode == 0 and expected <= set(ops) and "communication" not in ops and abs(ratio - 1) <= 0.3,
             f"--profile 2: {len(ops)} ops (missing {sorted(expected - set(ops))}), rows sum to {sum(ops.values()):.2f} ms, "
             f"steps 2-3 printed {steps_ms:.2f} ms (ratio {ratio:.3f}, bound 1 +- 0.3) {r.stderr.strip()[-200:]}")
    r = ux.run(MPIRUN + ["-np", "2", DIST_TRAINER] + profiled[1:] + ["-z", "1", "--profile", "2"])
    ops, calls, steps_ms = profile_table(r.stdout)
    ratio = sum(ops.values()) / steps_ms if steps_ms == steps_ms else 0.0
    check(r.returncode == 0 and expected <= set(ops) and calls.get("communication") == 2 + 2 and  # L = 2 layer buckets, the embeddings, the wait
              abs(ratio - 1) <= 0.3,
             f"2 ranks, --profile 2: communication {ops.get('communication')} ms in {calls.get('communication')} calls per "
             f"step (want 4), {len(ops)} ops (missing {sorted(expected - set(ops))}), rows sum to {sum(ops.values()):.2f} ms of "
             f"{steps_ms:.2f} ms (ratio {ratio:.3f}, bound 1 +- 0.3) {r.stderr.strip()[-200:]}")
    r = ux.run(profiled)
    check(r.returncode == 0 and "profile" not in r.stdout.replace("--profile", ""),
             f"without --profile: exit {r.returncode}, no profile table")
    return end()


if __name__ == "__main__":
    sys.exit(main())
