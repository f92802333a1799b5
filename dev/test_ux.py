#!/usr/bin/env python3
"""
dev/test_ux.py — tests of what a user sees after a run: metrics.jsonl, scripts/plot.py, scripts/sweep.py.

  metrics   a short ./train_gpt_cpu run (2 layers, 32 channels, V=256, on periodic token shards written
            here) with -o DIR: every step line's loss, lr, norm, ms and tok/s, and every val loss line,
            equal the records of DIR/metrics.jsonl (parsed here with json; to the printed precision),
            and the two list the same steps
  plot      plot.py on that run and a second one (another lr): exit 0, nothing on stderr (matplotlib
            raised and warned nothing), a PNG (signature, IHDR 1300x850, > 30 KB) whose pixels hold
            lines of both runs' colours; its summary line's final loss is the file's; a repeated step
            (as after a resume) takes the last record; a missing file and a malformed line are one-line
            errors
  sweep     sweep.py with 3 tiny trials: a table of 3 rows, the best lr is the one whose last val loss
            in its own metrics.jsonl is lowest, sweep.json lists 3 trials, sweep.png is a PNG; a trainer
            flag the sweep sets itself (-l) is a one-line error
Ends with "N passed, M failed" (non-zero exit on any failure).
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
import train_gpt  # noqa: E402  (only its shard writer)

PY = sys.executable
ENV = dict(os.environ, OMP_NUM_THREADS="1")  # tiny models; one thread avoids spin-waits on a shared machine
passed, failed = 0, 0


def check(ok, what):
    global passed, failed
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if ok:
        passed += 1
    else:
        failed += 1
    return ok


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=ENV)


def write_shard(path, n, offset):
    i = np.arange(offset, offset + n)
    toks = (((i * 7) % 61 + (i // 997) % 3) % 256).astype(np.uint16)
    train_gpt.write_binary_file(path, train_gpt.SHARD_MAGIC, train_gpt.SHARD_VERSION, {5: n, 6: 0, 7: 256, 8: 2}, [toks])


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
    tmp = tempfile.mkdtemp()
    try:
        return run_tests(tmp)
    finally:
        shutil.rmtree(tmp)


def run_tests(tmp):
    write_shard(os.path.join(tmp, "train_000.bin"), 20000, 0)
    write_shard(os.path.join(tmp, "val_000.bin"), 4000, 20000)
    model = ["--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--vocab-size", "256", "-b", "4", "-t", "32",
             "-i", os.path.join(tmp, "train_*.bin"), "-j", os.path.join(tmp, "val_*.bin"), "-s", "0", "-m", "2"]

    # ------------------------------------------------------------ metrics of a short run
    runs = {}
    for name, lr in (("run_a", "3e-3"), ("run_b", "1e-3")):
        out = os.path.join(tmp, name)
        r = run(["./train_gpt_cpu"] + model + ["-x", "40", "-u", "4", "-q", "0.1", "-v", "10", "-l", lr, "-o", out])
        check(r.returncode == 0, f"train_gpt_cpu {name} (lr {lr}, 40 steps) exit {r.returncode} {r.stderr.strip()[-200:]}")
        runs[name] = (out, r.stdout)
    logged, _ = check_metrics(runs["run_a"][1], os.path.join(runs["run_a"][0], "metrics.jsonl"))

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
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(text.splitlines()[0] + "\n{\"step\": 3, \"loss\": \n")
    for what, target, pattern in (("missing file", os.path.join(tmp, "nowhere.jsonl"), "nowhere.jsonl: cannot read"),
                                  ("malformed line", bad, "bad.jsonl:2: not a JSON object")):
        r = run([PY, "scripts/plot.py", target, "-o", os.path.join(tmp, "x.png")])
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
        with open(os.path.join(sweep_dir, f"lr_{float(lr):.3e}", "metrics.jsonl")) as f:
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
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
