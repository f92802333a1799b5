#!/usr/bin/env python3
"""
scripts/plot.py — training curves of one or more runs, side by side, from their metrics.jsonl files.

    python3 scripts/plot.py out/run_a out/run_b/metrics.jsonl -o curves.png [--names a,b] [--log] [--smooth 20]

Each argument is a metrics.jsonl written by the trainers (llmc/logger.h), or a directory holding one;
a run is named after its directory unless --names says otherwise: runs whose directories share a name
take the shortest tail of their paths that tells them apart (out/a/run and out/b/run: a/run, b/run),
files of one directory add the file name, and a file given twice its count (run (1), run (2)). The PNG has four panels:
    loss vs step      training loss (thin; with --smooth N, a moving average over N steps on top) and
                      validation loss (dots), one colour per run
    loss vs tokens    the same against tokens seen: the step records' "tokens"; in files without it,
                      step × tokens per step, where tokens per step is tok_s × ms / 1000 of the step
                      records (as the trainer computes tok_s)
    learning rate     vs step
    throughput        tok/s vs step
--log puts the loss axes on a log scale. After a resume a file holds the interrupted run's records past
the resume point too: a run-header record ({"header": {..., "start_step": S}}) starts a run at step S,
so the records before it of steps after S are dropped (and a step written twice keeps its last
record). A last line without its newline (a run still writing, or killed) is skipped with a note.
The script prints one summary line per run (steps, final training loss, best and final validation
loss, median tok/s). Errors are one line naming the file (exit 1). Uses matplotlib's Agg backend (no
display needed); -o names a .png, .pdf or .svg file.
"""
import argparse
import json
import math
import os
import sys


class MetricsError(ValueError):
    """A metrics file that cannot be read; the message is one line naming the file."""


def metrics_path(arg):
    return os.path.join(arg, "metrics.jsonl") if os.path.isdir(arg) else arg


def run_names(paths):
    """Each metrics file's run name: its directory's name, or, where other runs' directories share that
    name, the shortest tail of its directory's path that no other directory's path ends with (out/a/run,
    out/b/run: a/run, b/run); files in one directory add the file name (run/old.jsonl), and a file given
    more than once is numbered (run (1), run (2))."""
    full = [os.path.abspath(p) for p in paths]
    dirs = [os.path.dirname(p).split(os.sep)[1:] or [""] for p in full]
    names = []
    for i, d in enumerate(dirs):
        others = [o for o in dirs if o != d]
        k = 1
        while k < len(d) and any(o[-k:] == d[-k:] for o in others):
            k += 1
        name = "/".join(d[-k:]) or "/"
        if any(dirs[j] == d and full[j] != full[i] for j in range(len(full))):
            name += "/" + os.path.basename(full[i])
        names.append(name)
    for i, p in enumerate(full):
        if full.count(p) > 1:
            names[i] += f" ({full[:i + 1].count(p)})"
    return names


NUMBER_FIELDS = ("loss", "lr", "norm", "ms", "tok_s", "tokens", "elapsed_s", "mfu", "val_loss")


def read_metrics(path):
    """Returns {"steps": {step: record}, "val": {step: val_loss}} from a metrics.jsonl; later records
    of a step replace earlier ones, and a run header's start_step S drops the earlier records past S.
    JSON null (a non-finite value) reads as NaN."""
    steps, val = {}, {}
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        raise MetricsError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise MetricsError(f"{path}: not a text file") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if number == len(lines) and not line.endswith("\n"):
                print(f"note: {path}:{number}: the last line is incomplete (a run still writing, or killed): skipped",
                      file=sys.stderr)
                break
            raise MetricsError(f"{path}:{number}: not a JSON object: {e}") from None
        if isinstance(rec, dict) and isinstance(rec.get("header"), dict):
            start = rec["header"].get("start_step")
            if isinstance(start, int):  # a (resumed) run starts after step `start`
                steps = {k: v for k, v in steps.items() if k <= start}
                val = {k: v for k, v in val.items() if k <= start}
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("step"), int):
            raise MetricsError(f"{path}:{number}: a record needs an integer \"step\": {line.strip()[:80]}")
        for k in NUMBER_FIELDS:
            if k in rec and rec[k] is not None and (isinstance(rec[k], bool) or not isinstance(rec[k], (int, float))):
                raise MetricsError(f"{path}:{number}: \"{k}\" is not a number: {line.strip()[:80]}")
        rec = {k: (math.nan if v is None else v) for k, v in rec.items()}
        if "val_loss" in rec:
            val[rec["step"]] = float(rec["val_loss"])
        elif all(k in rec for k in ("loss", "lr", "norm", "ms", "tok_s")):
            steps[rec["step"]] = rec
        else:
            raise MetricsError(f"{path}:{number}: neither a step record (loss, lr, norm, ms, tok_s) nor a "
                               f"validation record (val_loss): {line.strip()[:80]}")
    if not steps and not val:
        raise MetricsError(f"{path}: holds no records")
    return {"steps": dict(sorted(steps.items())), "val": dict(sorted(val.items()))}


def tokens_per_step(run):
    """tok_s × ms / 1000 of the step records (their median, rounded); None without step records.
    For files written before step records had "tokens"."""
    estimates = sorted(r["tok_s"] * r["ms"] / 1000.0 for r in run["steps"].values()
                       if math.isfinite(r["tok_s"]) and math.isfinite(r["ms"]))
    return round(estimates[len(estimates) // 2]) if estimates else None


def summary(name, run):
    """One line: steps, final training loss, best and final validation loss, median tok/s."""
    steps, val = run["steps"], run["val"]
    parts = []
    if steps:
        last = max(steps)
        rates = sorted(r["tok_s"] for r in steps.values())
        parts += [f"{len(steps)} steps", f"final loss {steps[last]['loss']:.6f} (step {last})",
                  f"median {rates[len(rates) // 2]:.0f} tok/s"]
    if val:
        best = min(val, key=lambda s: (math.isnan(val[s]), val[s]))
        last = max(val)
        parts += [f"best val loss {val[best]:.6f} (step {best})", f"final val loss {val[last]:.6f} (step {last})"]
    return f"{name}: " + " | ".join(parts)


def moving_average(values, n):
    """mean of the finite ones among the last min(n, i+1) values at each i (NaN if none is)"""
    out, total, count = [], 0.0, 0
    for i, v in enumerate(values):
        if math.isfinite(v):
            total, count = total + v, count + 1
        if i >= n and math.isfinite(values[i - n]):
            total, count = total - values[i - n], count - 1
        out.append(total / count if count else math.nan)
    return out


def plot(runs, out_path, log_scale=False, smooth=0):
    """runs: list of (name, metrics); writes a 2x2-panel PNG to out_path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    (ax_step, ax_tok), (ax_lr, ax_rate) = axes
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    any_tokens = False
    for i, (name, run) in enumerate(runs):
        color = colors[i % len(colors)]
        steps, val = run["steps"], run["val"]
        tps = tokens_per_step(run)
        xs = list(steps)
        losses = [steps[s]["loss"] for s in xs]
        exact = bool(xs) and all("tokens" in steps[s] for s in xs)
        if exact:  # the val records lie between steps: tokens per step from the last step record
            tps = steps[xs[-1]]["tokens"] / xs[-1] if xs[-1] > 0 else tps
        for ax, scale in ((ax_step, 1), (ax_tok, tps)):
            if scale is None:
                continue
            at = [steps[x]["tokens"] for x in xs] if exact and ax is ax_tok else [x * scale for x in xs]
            if xs:
                thin = smooth > 1
                ax.plot(at, losses, color=color, lw=0.8 if thin else 1.5,
                        alpha=0.35 if thin else 1.0, label=None if thin else f"{name} train")
                if thin:
                    ax.plot(at, moving_average(losses, smooth), color=color, lw=1.5,
                            label=f"{name} train (mean of {smooth})")
            if val:
                ax.plot([s * scale for s in val], list(val.values()), "o--", color=color, ms=4, lw=1,
                        label=f"{name} val")
        any_tokens = any_tokens or tps is not None
        if xs:
            ax_lr.plot(xs, [steps[s]["lr"] for s in xs], color=color, label=name)
            ax_rate.plot(xs, [steps[s]["tok_s"] for s in xs], color=color, lw=1, label=name)
    ax_step.set(title="loss", xlabel="step", ylabel="cross-entropy loss")
    ax_tok.set(title="loss vs tokens seen", xlabel="tokens", ylabel="cross-entropy loss")
    ax_lr.set(title="learning rate", xlabel="step", ylabel="lr")
    ax_rate.set(title="throughput", xlabel="step", ylabel="tokens / s")
    if not any_tokens:
        ax_tok.text(0.5, 0.5, "no step records: tokens unknown", ha="center", va="center", transform=ax_tok.transAxes)
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize=8)
    if log_scale:
        ax_step.set_yscale("log")
        ax_tok.set_yscale("log")
    ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    fig.suptitle(", ".join(name for name, _ in runs))
    fig.tight_layout()
    fig.savefig(out_path, dpi=100)
    plt.close(fig)


def require_matplotlib():
    """MetricsError saying what to install when this Python lacks matplotlib (checked before any work)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MetricsError(f"matplotlib is not installed for {sys.executable}: pip install matplotlib, or run "
                           "/usr/bin/python3 with Debian's python3-matplotlib") from None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("metrics", nargs="+", help="metrics.jsonl files, or directories holding one")
    p.add_argument("-o", "--output", default="metrics.png", help="PNG to write (default metrics.png)")
    p.add_argument("--names", help="comma-separated run names, one per metrics file (default: directory names, "
                                   "with as much of their paths as tells them apart)")
    p.add_argument("--log", action="store_true", help="log-scale loss axes")
    p.add_argument("--smooth", type=int, default=0, help="also draw a moving average of the training loss over N steps")
    args = p.parse_args(argv)
    try:
        paths = [metrics_path(m) for m in args.metrics]
        names = args.names.split(",") if args.names else run_names(paths)
        if len(names) != len(paths):
            raise MetricsError(f"--names gives {len(names)} names for {len(paths)} metrics files")
        if args.smooth < 0:
            raise MetricsError(f"--smooth must be non-negative, got {args.smooth}")
        if os.path.splitext(args.output)[1].lower() not in (".png", ".pdf", ".svg"):
            raise MetricsError(f"-o {args.output}: expected a file name ending in .png, .pdf or .svg")
        require_matplotlib()
        runs = [(name, read_metrics(path)) for name, path in zip(names, paths)]
    except MetricsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for name, run in runs:
        print(summary(name, run))
    try:
        plot(runs, args.output, args.log, args.smooth)
    except OSError as e:
        print(f"error: {args.output}: cannot write: {e.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
