#!/usr/bin/env python3
"""
dev/test_ux.py — tests of what a user sees after a run: metrics.jsonl, scripts/plot.py, scripts/sweep.py.

  metrics   a short ./train_gpt_cpu run (2 layers, 32 channels, V=256, on periodic token shards written
            here) with -o DIR: every step line's loss, lr, norm, ms and tok/s, and every val loss line,
            equal the records of DIR/metrics.jsonl (parsed here with json; to the printed precision),
            and the two list the same steps; the run header record (git revision naming a commit of this
            repository, memory plan = the byte counts of a formula written here, config, flags) matches the
            printed header; "tokens" = step x B x T; "elapsed_s" and "mfu" match the step line's elapsed and
            % of peak; ETA = mean of the last 20 printed step times x steps left; evaluation steps show
            the val loss in the step line
  eval      from train_gpt.py's initial model, on the same shards and hyperparameters: train_gpt_cpu
            evaluates at the steps train_gpt.py does (every --val-every and after the last update), with
            the same val and step losses (to train_gpt.py's printed 4 decimals)
  early     --early-stop: at lr 0 (val loss constant) --early-stop 2 stops at the 3rd evaluation, exit 0,
            naming best step 0, with the best checkpoint in DIR/best; on a learning run, DIR/best/best.txt
            names the step of the lowest val loss in metrics.jsonl and holds exactly that checkpoint; a run
            stopped at step 5 and resumed (-y 1) restores the count and stops as an uninterrupted run does;
            without validation --early-stop is a one-line error (exit 2)
  profile   --profile 3: a table naming the ops, whose rows sum to within 30% of the profiled steps'
            printed step times
  plot      plot.py on that run and a second one (another lr): exit 0, nothing on stderr (matplotlib
            raised and warned nothing), a PNG (signature, IHDR 1300x850, > 30 KB) whose pixels hold
            lines of both runs' colours; its summary line's final loss is the file's; runs in directories
            of one name (x/run, y/run, and x/run again) are labelled x/run (1), y/run, x/run (2); a repeated step
            (as after a resume) takes the last record; a missing file and a malformed line are one-line
            errors
  sweep     sweep.py with 3 tiny trials: a table of 3 rows, the best lr is the one whose last val loss
            in its own metrics.jsonl is lowest, sweep.json lists 3 trials, sweep.png is a PNG; a trainer
            flag the sweep sets itself (-l) is a one-line error
Ends with "N passed, M failed" (non-zero exit on any failure).
"""
import glob
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
import train_gpt  # noqa: E402  (only its shard writer)
from testlib import check, end  # noqa: E402

PY = sys.executable
ENV = dict(os.environ, OMP_NUM_THREADS="1")  # tiny models; one thread avoids spin-waits on a shared machine


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=ENV)


def shard_tokens(n, offset):
    i = np.arange(offset, offset + n)
    return (((i * 7) % 61 + (i // 997) % 3) % 256).astype(np.uint16)


def write_shard(path, n, offset):
    train_gpt.write_binary_file(path, train_gpt.SHARD_MAGIC, train_gpt.SHARD_VERSION, {5: n, 6: 0, 7: 256, 8: 2},
                                [shard_tokens(n, offset)])


def write_llmc_shard(path, toks):
    """a token shard as llm.c's dev/data/data_common.py writes one: 256 int32 (20240520, version 1, count), uint16 tokens"""
    header = np.zeros(256, dtype="<i4")
    header[:3] = (20240520, 1, len(toks))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(toks, dtype="<u2").tobytes())


def png_info(path):
    """(width, height) from the IHDR chunk of a PNG, or None if the file is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def colour_pixels(path, rgb):
    """pixels within 40 (of 255) of colour rgb in each channel"""
    import matplotlib.image
    img = matplotlib.image.imread(path)[:, :, :3]
    return int(np.all(np.abs(img * 255 - np.array(rgb)) < 40, axis=2).sum())


STEP_RE = re.compile(r"^step\s+(\d+)/\d+ \| loss (\S+) \| lr (\S+) \| norm (\S+) \| (\S+) ms \| (\S+) tok/s")
VAL_RE = re.compile(r"^step\s+(\d+)/\d+ \| val loss (\S+)")
TAIL_RE = re.compile(r"\((\S+)% of peak\)(?: \| val loss (\S+))? \| elapsed (\S+) \| ETA (\S+)$")


def seconds(text):
    """ "42s", "3m07s", "2h05m", "3d04h" -> (seconds, resolution in seconds)"""
    m = re.fullmatch(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    d, h, mi, s = (int(x) if x else 0 for x in m.groups())
    return d * 86400 + h * 3600 + mi * 60 + s, (3600 if m.group(1) else 60 if m.group(2) else 1)


def memory_formula(L, NH, C, V, maxT, B, T):
    """bytes of the CPU trainer's parameters, gradients, AdamW moments and activations (fp32), counted here"""
    Vp = (V + 127) // 128 * 128
    params = Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C
    BT = B * T
    # per layer: ln1, qkv (3), atty, attproj, residual2, ln2, fch (4), fch_gelu (4), fcproj, residual3 = 18 C per token,
    # two layernorms' mean and rstd, the attention probabilities; then encoded, lnf, its mean and rstd, logits, losses
    acts = L * (18 * BT * C + 4 * BT + B * NH * T * T) + 2 * BT * C + 2 * BT + BT * Vp + BT
    act_grads = 14 * BT * C + BT  # one layer's activation gradients
    return {"parameters": 4 * params, "gradients": 4 * params, "optimizer": 8 * params, "activations": 4 * (acts + act_grads)}


def check_header(stdout, metrics_path, dims):
    with open(metrics_path) as f:
        first = json.loads(f.readline())
    h = first.get("header", {})
    rev = h.get("git_revision", "")
    printed = re.search(r"^precision (\S+) \| world size (\d+) \| git revision (\S+) \|", stdout, re.M)
    commit = rev.split("-")[0]
    known = rev == "unknown" or run(["git", "cat-file", "-e", commit + "^{commit}"]).returncode == 0
    check(printed is not None and printed.groups() == (h.get("precision"), str(h.get("world_size")), rev) and known
          and h.get("precision") == "fp32" and h.get("world_size") == 1,
          f"header record first: git revision {rev!r} (a commit of this repository: {known}), precision "
          f"{h.get('precision')}, world size {h.get('world_size')}, as printed")
    L, NH, C, V, B, T = dims
    want = memory_formula(L, NH, C, V, T, B, T)
    mem = h.get("memory", {})
    worst = max(abs(mem.get(k, -1) - v) for k, v in want.items())
    mib = re.search(r"^memory: parameters (\S+) MiB .* activations (\S+) MiB .* total (\S+) MiB", stdout, re.M)
    check(worst == 0 and mem.get("total") == sum(mem[k] for k in want) + mem.get("scratch", 0) and mib is not None
          and abs(float(mib.group(2)) - want["activations"] / 2**20) <= 0.05,
          f"header memory plan equals the formula (worst |diff| {worst} bytes; activations {mem.get('activations')} B, "
          f"printed {mib.group(2) if mib else None} MiB)")
    cfg = h.get("config", {})
    flags = h.get("flags", {})
    check(cfg.get("num_layers") == L and cfg.get("channels") == C and cfg.get("vocab_size") == V
          and h.get("num_params") == want["parameters"] // 4 and h.get("tokens_per_step") == B * T
          and flags.get("n-layer") == L and flags.get("lr") == float(flags.get("lr")) and isinstance(flags.get("train-data"), str),
          f"header config {cfg}, {h.get('num_params')} parameters, {h.get('tokens_per_step')} tokens per step, "
          f"{len(flags)} flags")
    return h


def check_progress(stdout, metrics_path, tokens_per_step, max_steps):
    tails, ms = {}, {}
    for line in stdout.splitlines():
        m = STEP_RE.match(line)
        if m:
            t = TAIL_RE.search(line)
            tails[int(m.group(1))] = t.groups() if t else None
            ms[int(m.group(1))] = float(m.group(5))
    records = {}
    with open(metrics_path) as f:
        for line in f:
            r = json.loads(line)
            if "loss" in r:
                records[r["step"]] = r
    check(len(tails) > 0 and all(tails.values()), f"every step line ends with elapsed and ETA ({len(tails)} lines)")
    bad_tokens = [s for s, r in records.items() if r.get("tokens") != s * tokens_per_step]
    check(not bad_tokens and records, f"step records: tokens = step x {tokens_per_step} at all {len(records)} steps "
          f"(wrong at {bad_tokens[:5]})")
    worst_eta, worst_elapsed, worst_mfu, elapsed_order = 0.0, 0.0, 0.0, True
    steps = sorted(tails)
    previous = -1.0
    for s in steps:
        mfu_pct, _, elapsed, eta = tails[s]
        recent = [ms[k] for k in steps if k <= s][-20:]
        want = sum(recent) / len(recent) / 1000 * (max_steps - s)
        got, unit = seconds(eta)
        worst_eta = max(worst_eta, abs(got - want) / unit)
        got, unit = seconds(elapsed)
        r = records.get(s, {})
        worst_elapsed = max(worst_elapsed, abs(got - r.get("elapsed_s", -1e9)) / unit)
        worst_mfu = max(worst_mfu, abs(float(mfu_pct) - 100 * r.get("mfu", -1e9)))
        elapsed_order = elapsed_order and r.get("elapsed_s", -1) >= previous
        previous = r.get("elapsed_s", -1)
    check(worst_eta <= 0.51, f"ETA = mean of the last 20 printed step times x steps left (worst error {worst_eta:.2f} "
          "of the printed unit, bound 0.5 + rounding)")
    check(worst_elapsed <= 0.51 and worst_mfu <= 0.0501 and elapsed_order,
          f"elapsed_s and mfu equal the step line's elapsed and % of peak (worst {worst_elapsed:.2f} units, "
          f"{worst_mfu:.3f} points), elapsed_s never decreases")
    return tails


def check_metrics(stdout, metrics_path):
    printed, printed_val = {}, {}
    for line in stdout.splitlines():
        m = STEP_RE.match(line)
        if m:
            printed[int(m.group(1))] = [float(x) for x in m.groups()[1:]]
        m = VAL_RE.match(line)
        if m:
            printed_val[int(m.group(1))] = float(m.group(2))
    logged, logged_val = {}, {}
    with open(metrics_path) as f:
        for line in f:
            r = json.loads(line)
            if "header" in r:
                continue
            if "val_loss" in r:
                logged_val[r["step"]] = r["val_loss"]
            else:
                logged[r["step"]] = [r["loss"], r["lr"], r["norm"], r["ms"], r["tok_s"]]
    check(len(printed) > 0 and sorted(printed) == sorted(logged) and sorted(printed_val) == sorted(logged_val),
          f"metrics.jsonl lists the printed steps: {len(logged)} step records, {len(logged_val)} val records "
          f"(printed {len(printed)} and {len(printed_val)})")
    # printed precision: loss %.6f, lr %.3e, norm %.4f, ms %.1f, tok/s %.0f; half a unit of the last digit
    worst = [0.0] * 5
    for s in set(printed) & set(logged):
        for k, (p, j) in enumerate(zip(printed[s], logged[s])):
            unit = [1e-6, abs(j) * 1e-3, 1e-4, 0.1, 1.0][k]
            worst[k] = max(worst[k], abs(p - j) / (0.5 * unit + 1e-12 * abs(j) + 1e-30))
    names = ["loss", "lr", "norm", "ms", "tok/s"]
    check(max(worst) <= 1.001, "step records equal the step lines to the printed precision (worst error in "
          "half-units of the last printed digit: " + ", ".join(f"{n} {w:.2f}" for n, w in zip(names, worst)) + ")")
    worst_val = max((abs(printed_val[s] - logged_val[s]) for s in set(printed_val) & set(logged_val)), default=1.0)
    check(worst_val <= 5.01e-7, f"val records equal the val loss lines (worst |diff| {worst_val:.1e}, bound 5e-7)")
    return logged, logged_val


def main():
    with tempfile.TemporaryDirectory() as tmp:
        return run_tests(tmp)


def run_tests(tmp):
    write_shard(os.path.join(tmp, "train_000.bin"), 20000, 0)
    write_shard(os.path.join(tmp, "val_000.bin"), 4000, 20000)
    os.mkdir(os.path.join(tmp, "llmc"))
    write_llmc_shard(os.path.join(tmp, "llmc", "train_000.bin"), shard_tokens(20000, 0))
    write_llmc_shard(os.path.join(tmp, "llmc", "val_000.bin"), shard_tokens(4000, 20000))
    model = ["--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--vocab-size", "256", "-b", "4", "-t", "32",
             "-i", os.path.join(tmp, "train_*.bin"), "-j", os.path.join(tmp, "val_*.bin"), "-s", "0", "-m", "2"]

    # ------------------------------------------------------------ metrics of a short run
    runs = {}
    for name, lr in (("run_a", "3e-3"), ("run_b", "1e-3")):
        out = os.path.join(tmp, name)
        r = run(["./train_gpt_cpu"] + model + ["-x", "40", "-u", "4", "-q", "0.1", "-v", "10", "-l", lr, "-o", out,
                                               "--early-stop", "100"])
        check(r.returncode == 0, f"train_gpt_cpu {name} (lr {lr}, 40 steps) exit {r.returncode} {r.stderr.strip()[-200:]}")
        runs[name] = (out, r.stdout)
    metrics_a = os.path.join(runs["run_a"][0], "metrics.jsonl")
    logged, logged_val = check_metrics(runs["run_a"][1], metrics_a)
    check_header(runs["run_a"][1], metrics_a, (2, 2, 32, 256, 4, 32))
    tails = check_progress(runs["run_a"][1], metrics_a, 4 * 32, 40)
    shown = {s - 1: float(t[1]) for s, t in tails.items() if t and t[1] is not None}
    worst = max((abs(shown[k] - logged_val[k]) for k in logged_val if k in shown), default=1.0)
    check(sorted(shown) + [40] == sorted(logged_val) and worst <= 5.01e-7, f"the step line after each evaluation shows its val "
          f"loss, the one after the last step (40) has its own line: {len(shown)} step lines, {len(logged_val)} val records "
          f"(steps {sorted(logged_val)}), worst |diff| {worst:.1e} (bound 5e-7)")

    # ------------------------------------------------------------ evaluation points, as train_gpt.py's
    # (and with more --val-batches than the data holds: both use all of it once, saying so; and on the same
    # tokens in llm.c's shard format: the same losses)
    init = os.path.join(tmp, "init.bin")
    first = None
    for val_batches, where in (("2", tmp), ("100000", tmp), ("2", os.path.join(tmp, "llmc"))):
        data = ["-b", "4", "-t", "32", "--val-batches", val_batches, "--lr", "3e-3", "--warmup", "2", "--final-lr-frac", "0.1",
                "--weight-decay", "0.1", "--grad-clip", "1", "--val-every", "3"]
        shards = ["--train-data", os.path.join(where, "train_*.bin"), "--val-data", os.path.join(where, "val_*.bin")]
        py = run([PY, "train_gpt.py", "--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--vocab-size", "256", "--steps", "7",
                  "--write-model", init] + shards + data)
        c = run(["./train_gpt_cpu", "-e", init, "-x", "7", "-s", "0", "--shuffle", "0", "-k", "cosine"] + shards + data)
        vals = [{int(m.group(1)): float(m.group(2)) for m in map(VAL_RE.match, x.stdout.splitlines()) if m} for x in (py, c)]
        losses = [[float(m.group(2)) for m in map(STEP_RE.match, x.stdout.splitlines()) if m] for x in (py, c)]
        using = [re.findall(r"^validation: --val-batches \d+, but .*: using (\d+)$", x.stdout, re.M) for x in (py, c)]
        worst = max([abs(vals[0][k] - vals[1][k]) for k in vals[0] if k in vals[1]] +
                    [abs(a - b) for a, b in zip(*losses)], default=1.0)
        capped = val_batches != "2"
        check(py.returncode == 0 and c.returncode == 0 and sorted(vals[0]) == sorted(vals[1]) == [0, 3, 6, 7]
              and len(losses[0]) == len(losses[1]) == 7 and worst <= 1.5e-4 and using[0] == using[1] and bool(using[0]) == capped,
              f"7 steps, --val-every 3, --val-batches {val_batches} from train_gpt.py's initial model{', llm.c shards' if where != tmp else ''}: "
              f"evaluations at steps {sorted(vals[1])} as train_gpt.py's {sorted(vals[0])} (want 0, 3, 6, 7: the last after the last "
              f"update), batches used {using[1] or val_batches} as train_gpt.py's {using[0] or val_batches}, val and step losses "
              f"within {worst:.1e} (bound 1.5e-4: train_gpt.py prints 4 decimals) {(py.stderr + c.stderr).strip()[-300:]}")
        if first is None:
            first = (vals, losses)
        elif where != tmp:
            check((vals, losses) == first, "llm.c's token shards: train_gpt.py and train_gpt_cpu print the val and step losses they "
                  "print on the same tokens in GTOK shards")

    # ------------------------------------------------------------ an llm.c shard's tokens are checked against the model
    bad = os.path.join(tmp, "llmc", "wide.bin")
    write_llmc_shard(bad, np.arange(300) % 290)
    for cmd in ([PY, "train_gpt.py", "--n-layer", "1", "--n-head", "1", "--n-embd", "8", "--vocab-size", "256", "--steps", "1"],
                ["./train_gpt_cpu", "--n-layer", "1", "--n-head", "1", "--n-embd", "8", "--vocab-size", "256", "-x", "1", "-s", "0"]):
        r = run(cmd + ["--train-data", bad, "-b", "1", "-t", "8"])
        want = f"{bad}: token 256 at position 256 is not below the model's vocabulary (an llm.c shard states none) of 256"
        # train_gpt_cpu reads it in its first step: a data error during the run, exit 66 (doc/reliability.md)
        check(r.returncode == (1 if cmd[0] == PY else 66) and want in r.stderr, f"{cmd[1] if cmd[0] == PY else cmd[0]}: an llm.c shard with token 256 and a 256-token model: exit "
              f"{r.returncode}, {r.stderr.strip()[-200:]!r}")
    # the same with --output-dir, twice: no step trained, so nothing is saved (a checkpoint of the initial weights would
    # make the same command, run again after fixing the data, refuse the directory as an earlier run's)
    out_dir = os.path.join(tmp, "bad_data_run")
    cmd = ["./train_gpt_cpu", "--n-layer", "1", "--n-head", "1", "--n-embd", "8", "--vocab-size", "256", "-x", "2", "-s", "0", "-v", "0",
           "--train-data", bad, "-b", "1", "-t", "8", "-o", out_dir]
    runs_bad = [run(cmd), run(cmd)]
    check(all(r.returncode == 66 and "nothing trained, nothing saved; fix the data and run again" in r.stdout for r in runs_bad)
          and not glob.glob(os.path.join(out_dir, "model_*")) and not glob.glob(os.path.join(out_dir, "done_*")),
          f"a bad shard in a fresh run's first step with -o: exit 66 twice, no checkpoint ({[r.returncode for r in runs_bad]}, "
          f"{sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else 'no directory'}, {runs_bad[1].stdout.strip()[-200:]!r})")

    # ------------------------------------------------------------ early stopping
    best_dir = os.path.join(runs["run_a"][0], "best")
    best_step = min(logged_val, key=lambda s: (logged_val[s], s))
    try:
        with open(os.path.join(best_dir, "best.txt")) as f:
            best_text = f.read()
    except OSError:
        best_text = ""
    m = re.fullmatch(r"step (\d+)\nval_loss (\S+)\n", best_text)
    files = sorted(os.listdir(best_dir)) if os.path.isdir(best_dir) else []
    want_files = sorted(["best.txt", f"done_{best_step:08d}.txt", f"model_{best_step:08d}.bin", f"state_{best_step:08d}_00000.bin"])
    check(m is not None and int(m.group(1)) == best_step and float(m.group(2)) == logged_val[best_step] and files == want_files,
          f"learning run: best/best.txt names step {m.group(1) if m else None}, the lowest val loss of metrics.jsonl is at "
          f"step {best_step} ({logged_val[best_step]:.6f}); best/ holds {files}")
    out = os.path.join(tmp, "flat")
    r = run(["./train_gpt_cpu"] + model + ["-x", "40", "-v", "2", "-l", "0", "-o", out, "--early-stop", "2"])
    vals = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))] if r.returncode == 0 else []
    val_steps = [v["step"] for v in vals if "val_loss" in v]
    last_line = [line for line in r.stdout.splitlines() if STEP_RE.match(line)][-1:]
    stop = re.search(r"^early stop: .* best (\S+) at step (\d+), checkpoint in (\S+)$", r.stdout, re.M)
    check(r.returncode == 0 and val_steps == [0, 2, 4] and stop is not None and stop.group(2) == "0"
          and stop.group(3) == os.path.join(out, "best") and os.path.exists(os.path.join(out, "best", "model_00000000.bin"))
          and last_line and STEP_RE.match(last_line[0]).group(1) == "4",
          f"lr 0, --early-stop 2: exit {r.returncode}, evaluations at steps {val_steps} (want 0, 2, 4), last step line "
          f"{STEP_RE.match(last_line[0]).group(1) if last_line else None}: {stop.group(0) if stop else r.stderr.strip()[-200:]}")
    out = os.path.join(tmp, "flat_resumed")  # stopped after 5 steps, then resumed: stops where an uninterrupted run would
    first = run(["./train_gpt_cpu"] + model + ["-x", "5", "-v", "2", "-l", "0", "-o", out, "-n", "5", "--early-stop", "3"])
    r = run(["./train_gpt_cpu"] + model + ["-x", "40", "-v", "2", "-l", "0", "-o", out, "-n", "5", "--early-stop", "3", "-y", "1"])
    whole = run(["./train_gpt_cpu"] + model + ["-x", "40", "-v", "2", "-l", "0", "--early-stop", "3"])
    ends = [re.findall(r"^early stop: .*", x.stdout, re.M) for x in (r, whole)]
    last_val = [[m.group(1) for m in map(VAL_RE.match, x.stdout.splitlines()) if m][-1:] for x in (r, whole)]
    restored = re.search(r"^resume: early stop: best val loss \S+ at step 0, 2 evaluation\(s\) since$", r.stdout, re.M)
    check(first.returncode == 0 and r.returncode == 0 and restored is not None and len(ends[0]) == 1 and
          ends[0][0] == ends[1][0].split(", checkpoint in")[0] + f", checkpoint in {os.path.join(out, 'best')}"
          and "at step 0" in ends[0][0] and "for 3 evaluations" in ends[0][0] and last_val[0] == last_val[1] == ["6"],
          f"--early-stop 3, stopped at step 5 and resumed: {restored.group(0) if restored else None}; last evaluation "
          f"at step {last_val[0]} (uninterrupted {last_val[1]}, want 6); "
          f"{ends[0][0] if ends[0] else r.stdout[-300:]} (uninterrupted: {ends[1][0] if ends[1] else None})")
    no_val = [a for i, a in enumerate(model) if a != "-j" and (i == 0 or model[i - 1] != "-j")]
    r = run(["./train_gpt_cpu"] + no_val + ["-x", "4", "--early-stop", "2"])
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and "--early-stop 2 needs validation" in lines[0],
          f"--early-stop without validation data: exit {r.returncode}: {r.stderr.strip()[-200:]}")

    # ------------------------------------------------------------ profile
    r = run(["./train_gpt_cpu", "--n-layer", "2", "--n-head", "4", "--n-embd", "64", "--vocab-size", "256", "-b", "4", "-t", "64",
             "--mock-data", "-x", "5", "-v", "0", "-s", "0", "--profile", "3"])
    rows = re.findall(r"^\| ([a-z][a-z ]+?) +\| +(\S+) \|", r.stdout, re.M)
    ops = {name: float(total) for name, total in rows if name != "op"}
    step_ms = [float(STEP_RE.match(line).group(5)) for line in r.stdout.splitlines() if STEP_RE.match(line)]
    profiled = sum(step_ms[1:4]) if len(step_ms) == 5 else float("nan")
    expected = {"encoder forward", "layernorm forward", "matmul qkv forward", "attention forward", "gelu forward",
                "classifier forward", "classifier backward", "matmul fc backward", "attention backward", "adamw", "grad norm"}
    ratio = sum(ops.values()) / profiled if profiled == profiled else 0.0
    check(r.returncode == 0 and expected <= set(ops) and abs(ratio - 1) <= 0.3,
          f"--profile 3: {len(ops)} ops (missing {sorted(expected - set(ops))}), rows sum to {sum(ops.values()):.2f} ms, "
          f"steps 2-4 printed {profiled:.2f} ms (ratio {ratio:.3f}, bound 1 +- 0.3)")

    # ------------------------------------------------------------ plot
    png = os.path.join(tmp, "curves.png")
    r = run([PY, "scripts/plot.py", runs["run_a"][0], os.path.join(runs["run_b"][0], "metrics.jsonl"), "-o", png,
             "--smooth", "5"])
    check(r.returncode == 0 and r.stderr == "", f"plot.py of two runs: exit {r.returncode}, stderr {r.stderr.strip()[-300:]!r}")
    size = os.path.getsize(png) if os.path.exists(png) else 0
    info = png_info(png) if size else None
    check(info == (1300, 850) and size > 30_000, f"{os.path.basename(png)}: PNG {info}, {size} bytes (want 1300x850, > 30 KB)")
    if info:
        blue, orange = colour_pixels(png, (31, 119, 180)), colour_pixels(png, (255, 127, 14))
        check(blue > 500 and orange > 500, f"the PNG draws both runs: {blue} pixels of run_a's blue, {orange} of run_b's orange")
    last = max(logged)
    m = re.search(r"^run_a: .*final loss (\S+) \(step (\d+)\)", r.stdout, re.M)
    check(m is not None and int(m.group(2)) == last and abs(float(m.group(1)) - logged[last][0]) <= 5e-7,
          f"plot.py's summary gives run_a's final loss {m.group(1) if m else None} at step {m.group(2) if m else None}; "
          f"the file says {logged[last][0]:.6f} at {last}")
    resumed = os.path.join(tmp, "resumed.jsonl")
    with open(os.path.join(runs["run_a"][0], "metrics.jsonl")) as f:
        text = f.read()
    with open(resumed, "w") as f:
        f.write(text + json.dumps({"step": last, "loss": 0.125, "lr": 1e-3, "norm": 1.0, "ms": 1.0, "tok_s": 128000.0}) + "\n")
    r = run([PY, "scripts/plot.py", resumed, "-o", os.path.join(tmp, "resumed.png"), "--names", "resumed", "--log"])
    check(r.returncode == 0 and f"final loss 0.125000 (step {last})" in r.stdout,
          f"a repeated step takes the last record (--log): {r.stdout.splitlines()[0] if r.stdout else r.stderr.strip()}")
    # a resume from step last - 2: the header's start_step drops the interrupted run's steps past it
    with open(resumed, "w") as f:
        f.write(text + json.dumps({"header": {"start_step": last - 2}}) + "\n" +
                json.dumps({"step": last - 1, "loss": 0.25, "lr": 1e-3, "norm": 1.0, "ms": 1.0, "tok_s": 128000.0}) + "\n" +
                '{"step": %d, "loss": 0.1' % last)  # and a last line cut short
    r = run([PY, "scripts/plot.py", resumed, "-o", os.path.join(tmp, "resumed.png")])
    check(r.returncode == 0 and f"final loss 0.250000 (step {last - 1})" in r.stdout and "last line is incomplete" in r.stderr,
          f"a resumed run's header drops the old steps past its start, an incomplete last line is skipped: "
          f"{r.stdout.splitlines()[0] if r.stdout else ''} {r.stderr.strip()[-120:]}")
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import plot as plot_module
    smooth = plot_module.moving_average([1.0, math.nan, 3.0, 5.0], 2)
    check(smooth[:2] == [1.0, 1.0] and smooth[2:] == [3.0, 4.0], f"--smooth skips a NaN loss in its window: {smooth}")
    # runs whose directories share a name: the shortest tail of their paths that tells them apart
    cases = [(["/o/a/run/metrics.jsonl", "/o/b/run/metrics.jsonl"], ["a/run", "b/run"]),
             (["/p/x/run/metrics.jsonl", "/q/y/x/run/metrics.jsonl"], ["p/x/run", "y/x/run"]),
             (["/o/run/metrics.jsonl", "/o/run/old.jsonl"], ["run/metrics.jsonl", "run/old.jsonl"]),
             (["/a/r1/metrics.jsonl", "/b/r2/metrics.jsonl"], ["r1", "r2"])]
    wrong = [(paths, plot_module.run_names(paths), want) for paths, want in cases if plot_module.run_names(paths) != want]
    check(not wrong, f"run names: the shortest distinguishing tail of the paths ({len(cases)} cases): {wrong or 'all as expected'}")
    same = []
    for parent in ("x", "y"):
        d = os.path.join(tmp, "same_name", parent, "run")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "metrics.jsonl"), "w") as f:
            f.write(text)
        same.append(d)
    r = run([PY, "scripts/plot.py", same[0], os.path.join(same[1], "metrics.jsonl"), same[0], "-o", os.path.join(tmp, "same.png")])
    labels = [line.split(": ")[0] for line in r.stdout.splitlines() if " steps | " in line]
    check(r.returncode == 0 and labels == ["x/run (1)", "y/run", "x/run (2)"],
          f"plot.py of x/run, y/run and x/run again: labels {labels} (want x/run (1), y/run, x/run (2)) {r.stderr.strip()[-150:]}")
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(text.splitlines()[0] + "\n{\"step\": 3, \"loss\": \n")
    badnum = os.path.join(tmp, "badnum.jsonl")
    with open(badnum, "w") as f:
        f.write('{"step": 1, "val_loss": "abc"}\n')
    for what, target, out, pattern in (
            ("missing file", os.path.join(tmp, "nowhere.jsonl"), "x.png", "nowhere.jsonl: cannot read"),
            ("malformed line", bad, "x.png", "bad.jsonl:2: not a JSON object"),
            ("a value that is not a number", badnum, "x.png", 'badnum.jsonl:1: "val_loss" is not a number'),
            ("an output that is not an image", resumed, "x.txt", "x.txt: expected a file name ending in .png, .pdf or .svg")):
        r = run([PY, "scripts/plot.py", target, "-o", os.path.join(tmp, out)])
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error:") and pattern in lines[0],
              f"plot.py, {what}: exit {r.returncode}: {r.stderr.strip()[-200:]}")

    # ------------------------------------------------------------ sweep
    sweep_dir, lrs = os.path.join(tmp, "sweep"), ["1e-3", "3e-3", "1e-2"]
    r = run([PY, "scripts/sweep.py", "--lrs", ",".join(lrs), "--out", sweep_dir, "--"] + model + ["-x", "12", "-v", "6"])
    check(r.returncode == 0, f"sweep.py, 3 trials: exit {r.returncode} {r.stderr.strip()[-300:]}")
    rows = [line for line in r.stdout.splitlines() if re.match(r"^\s*\d\.\d{3}e[+-]\d\d\s", line)]
    finals = {}
    for lr in lrs:
        with open(os.path.join(sweep_dir, f"lr_{float(lr)!r}", "metrics.jsonl")) as f:
            vals = [json.loads(line) for line in f]
        vals = [v for v in vals if "val_loss" in v]
        finals[float(lr)] = vals[-1]["val_loss"] if vals else float("inf")
    best = min(finals, key=finals.get)
    m = re.search(r"^best lr: (\S+)", r.stdout, re.M)
    check(len(rows) == 3 and m is not None and float(m.group(1)) == float(f"{best:.3e}"),
          f"sweep table has {len(rows)} rows, best lr {m.group(1) if m else None}; the trials' own metrics say {best:.3e} "
          f"(final val losses {', '.join(f'{k:.0e}: {v:.4f}' for k, v in finals.items())})")
    try:
        with open(os.path.join(sweep_dir, "sweep.json")) as f:
            record = json.load(f)
    except (OSError, ValueError):
        record = {}
    spng = os.path.join(sweep_dir, "sweep.png")
    info = png_info(spng) if os.path.exists(spng) else None
    check(len(record.get("trials", [])) == 3 and info is not None and os.path.getsize(spng) > 20_000,
          f"sweep.json lists {len(record.get('trials', []))} trials; sweep.png is a PNG {info}")
    r = run([PY, "scripts/sweep.py", "--lrs", "1e-3", "--out", sweep_dir, "--"] + model + ["-l", "1e-3"])
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(lines) == 1 and "trainer flag -l is set by the sweep" in lines[0],
          f"sweep.py with -l among the trainer flags: exit {r.returncode}: {r.stderr.strip()[-200:]}")
    # a rerun into the same --out with checkpoints (-n): the earlier trials' are removed, every trial trains again
    ck_dir = os.path.join(tmp, "sweep_ck")
    for attempt in (1, 2):
        r = run([PY, "scripts/sweep.py", "--lrs", "1e-3,3e-3", "--out", ck_dir, "--"] + model + ["-x", "4", "-v", "2", "-n", "2"])
    check(r.returncode == 0 and r.stdout.count("removing the earlier sweep's trial") == 2 and r.stdout.count(": ok, score") == 2,
          f"a sweep rerun into an --out whose trials have checkpoints: exit {r.returncode}: {(r.stdout + r.stderr).strip()[-300:]}")
    # a rerun into the same --out whose trials fail: no stale result of the first sweep; close rates apart, repeats once
    r = run([PY, "scripts/sweep.py", "--lrs", "1e-3,1.0001e-3,1e-3", "--out", sweep_dir, "--"] + model + ["--bogus-flag", "1"])
    try:
        with open(os.path.join(sweep_dir, "sweep.json")) as f:
            trials = json.load(f)["trials"]
    except (OSError, ValueError, KeyError):
        trials = []
    check(r.returncode == 1 and len(trials) == 2 and len({t["dir"] for t in trials}) == 2 and
          all(t["final_loss"] is None and t["status"].startswith("failed (exit 2") for t in trials),
          f"a failing rerun into the same --out: exit {r.returncode}, trials {[(t['dir'][-16:], t['final_loss'], t['status'][:14]) for t in trials]}")
    afile = os.path.join(tmp, "afile")
    open(afile, "w").close()
    r = run([PY, "scripts/sweep.py", "--lrs", "1e-3", "--out", afile, "--"] + model)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(lines) == 1 and "cannot create the directory" in lines[0],
          f"sweep.py --out a file: exit {r.returncode}: {r.stderr.strip()[-200:]}")
    # a Python without matplotlib (a stub package that fails to import): one line before any trial runs
    stub = os.path.join(tmp, "no_matplotlib", "matplotlib")
    os.makedirs(stub)
    with open(os.path.join(stub, "__init__.py"), "w") as f:
        f.write("raise ImportError('no matplotlib here')\n")
    env = dict(ENV, PYTHONPATH=os.path.dirname(stub))
    none_dir = os.path.join(tmp, "sweep_none")
    r = subprocess.run([PY, "scripts/sweep.py", "--lrs", "1e-3", "--out", none_dir, "--"] + model, capture_output=True, text=True,
                       cwd=ROOT, env=env)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(lines) == 1 and "matplotlib is not installed" in lines[0] and "trial" not in r.stdout,
          f"sweep.py without matplotlib: exit {r.returncode} before any trial: {r.stderr.strip()[-200:]}")
    return end()


if __name__ == "__main__":
    sys.exit(main())
