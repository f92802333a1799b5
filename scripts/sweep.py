#!/usr/bin/env python3
r"""
scripts/sweep.py — learning-rate sweep: short trainings over a grid of learning rates (or chosen by
Optuna), a table of each trial's final losses, the best learning rate, and a plot.

    python3 scripts/sweep.py --lrs 3e-4,1e-3,3e-3 --out out/sweep -- \
        -i 'data/fortunes/train_*.bin' -j 'data/fortunes/val_*.bin' --n-layer 4 --n-head 4 --n-embd 128 \
        -b 16 -t 64 -x 100 -v 25 -m 5 -s 0
    python3 scripts/sweep.py --optuna 8 --lr-range 1e-4,1e-2 --out out/sweep -- ...   (needs `pip install optuna`)

Everything after `--` goes to the trainer (--trainer, default ./train_gpt_cpu), which each trial runs with
`-l LR -o OUT/lr_LR` added (so those two flags may not be among them; LR as Python writes the float, so
distinct learning rates get distinct directories, and a grid's repeats run once); its output goes to
OUT/lr_LR/train.log (an earlier sweep's trial there — metrics, log, checkpoints, best model — is removed first,
so that a rerun trains afresh instead of the trainer refusing a directory with another run's checkpoints). A trial's score is its last
validation loss (its last training loss when the run validates never); a trial that fails, ends in NaN
or writes no step records scores +inf and is marked in the table. Writes
OUT/sweep.json (every trial) and OUT/sweep.png (score against learning rate, and each trial's loss curve).
Errors are one line (exit 1); the exit status is 1 also when every trial failed.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot import MetricsError, read_metrics, require_matplotlib  # noqa: E402

RESERVED = {"-l", "--lr", "-o", "--output-dir"}
CHECKPOINT_FILE = r"(model_\d{8}\.bin|state_\d{8}_\d{5}\.bin|done_\d{8}\.txt)(\.tmp)?"  # doc/formats.md


class SweepError(ValueError):
    """Bad arguments; the message is one line."""


def run_trial(trainer, trainer_args, lr, out_dir):
    """Trains once with learning rate lr into out_dir/lr_<lr>; returns the trial's record."""
    trial_dir = os.path.join(out_dir, f"lr_{lr!r}")
    os.makedirs(trial_dir, exist_ok=True)
    metrics = os.path.join(trial_dir, "metrics.jsonl")
    # an earlier sweep's trial: a trial that fails before writing its own metrics must not show them, and the
    # trainer refuses a new run over another run's checkpoints
    old = [n for n in os.listdir(trial_dir) if n in ("metrics.jsonl", "train.log", "best") or re.fullmatch(CHECKPOINT_FILE, n)]
    if old:
        print(f"trial lr {lr:.3e}: removing the earlier sweep's trial in {trial_dir} ({len(old)} entries)", flush=True)
    for name in old:
        path = os.path.join(trial_dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    cmd = [trainer] + trainer_args + ["-l", repr(lr), "-o", trial_dir]
    log_path = os.path.join(trial_dir, "train.log")
    with open(log_path, "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    trial = {"lr": lr, "dir": trial_dir, "returncode": rc, "final_loss": math.nan, "final_val_loss": math.nan,
             "best_val_loss": math.nan, "steps": 0}
    try:
        m = read_metrics(metrics)
    except MetricsError:
        m = {"steps": {}, "val": {}}
    if m["steps"]:
        trial["steps"] = max(m["steps"])
        trial["final_loss"] = float(m["steps"][trial["steps"]]["loss"])
    if m["val"]:
        trial["final_val_loss"] = m["val"][max(m["val"])]
        trial["best_val_loss"] = min(m["val"].values())
    score = trial["final_val_loss"] if m["val"] else trial["final_loss"]
    trial["score"] = score if rc == 0 and math.isfinite(score) else math.inf
    if trial["score"] < math.inf:
        trial["status"] = "ok"
    elif rc:
        trial["status"] = f"failed (exit {rc}, see {log_path})"
    else:
        trial["status"] = "diverged" if m["steps"] else f"no step records (see {log_path})"
    print(f"trial lr {lr:.3e}: {trial['status']}, score {trial['score']:.6f}", flush=True)
    return trial


def table(trials):
    lines = [f"{'lr':>10}  {'final loss':>10}  {'final val':>10}  {'best val':>10}  status"]
    for t in sorted(trials, key=lambda t: t["lr"]):
        lines.append(f"{t['lr']:10.3e}  {t['final_loss']:10.6f}  {t['final_val_loss']:10.6f}  {t['best_val_loss']:10.6f}  "
                     f"{t['status']}")
    return "\n".join(lines)


def plot_sweep(trials, best, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_score, ax_curves) = plt.subplots(1, 2, figsize=(13, 5))
    done = sorted((t for t in trials if t["score"] < math.inf), key=lambda t: t["lr"])
    ax_score.plot([t["lr"] for t in done], [t["score"] for t in done], "o-")
    if best:
        ax_score.plot([best["lr"]], [best["score"]], "r*", ms=14, label=f"best lr {best['lr']:.3e}")
        ax_score.legend()
    failed = [t for t in trials if t["score"] == math.inf]
    for t in failed:
        ax_score.axvline(t["lr"], color="gray", ls=":", lw=1)
    ax_score.set(xscale="log", xlabel="learning rate", ylabel="final loss (validation if any)",
                 title=f"{len(trials)} trials" + (f" ({len(failed)} failed: dotted)" if failed else ""))
    for t in sorted(trials, key=lambda t: t["lr"]):
        try:
            m = read_metrics(os.path.join(t["dir"], "metrics.jsonl"))
        except MetricsError:
            continue
        curve = m["val"] or {s: r["loss"] for s, r in m["steps"].items()}
        ax_curves.plot(list(curve), list(curve.values()), "o-" if m["val"] else "-", ms=3, label=f"lr {t['lr']:.3e}")
    ax_curves.set(xlabel="step", ylabel="validation loss" if any(t["final_val_loss"] == t["final_val_loss"] for t in trials)
                  else "training loss", title="loss curves")
    for ax in (ax_score, ax_curves):
        ax.grid(True, alpha=0.3)
    if ax_curves.has_data():
        ax_curves.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_floats(text, flag):
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SweepError(f"{flag}: expected comma-separated numbers, got '{text}'") from None
    if not values or any(not (math.isfinite(v) and v > 0) for v in values):
        raise SweepError(f"{flag}: expected positive finite numbers, got '{text}'")
    return values


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    own, trainer_args = argv[:split], argv[split + 1:]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                usage="%(prog)s (--lrs A,B,C | --optuna N) --out DIR [--trainer BIN] [options] -- TRAINER_FLAGS...")
    p.add_argument("--lrs", help="comma-separated learning rates (a grid)")
    p.add_argument("--optuna", type=int, metavar="N", help="N trials chosen by Optuna's TPE sampler instead of a grid")
    p.add_argument("--lr-range", default="1e-4,1e-2", help="Optuna: log-uniform range LO,HI (default 1e-4,1e-2)")
    p.add_argument("--seed", type=int, default=0, help="Optuna sampler seed (default 0)")
    p.add_argument("--out", required=True, help="directory for the trials, sweep.json and sweep.png")
    p.add_argument("--trainer", default="./train_gpt_cpu", help="trainer binary (default ./train_gpt_cpu)")
    args = p.parse_args(own)
    try:
        if (args.lrs is None) == (args.optuna is None):
            raise SweepError("give exactly one of --lrs A,B,C and --optuna N")
        if not trainer_args:
            raise SweepError("no trainer flags: give them after -- (data, model, steps), e.g. -- -i 'data/x/train_*.bin' ...")
        clash = sorted(RESERVED.intersection(a.split("=")[0] for a in trainer_args))
        if clash:
            raise SweepError(f"trainer flag {clash[0]} is set by the sweep for each trial; remove it")
        if not os.access(args.trainer, os.X_OK):
            raise SweepError(f"{args.trainer}: not an executable trainer (build it with make, or give --trainer)")
        try:
            require_matplotlib()  # sweep.png comes last: say it before the trials run, not after
        except MetricsError as e:
            raise SweepError(str(e)) from None
        try:
            os.makedirs(args.out, exist_ok=True)
        except OSError as e:
            raise SweepError(f"--out {args.out}: cannot create the directory: {e.strerror}") from None
        trials = []
        if args.lrs is not None:
            for lr in dict.fromkeys(parse_floats(args.lrs, "--lrs")):
                trials.append(run_trial(args.trainer, trainer_args, lr, args.out))
        else:
            lo, hi = (parse_floats(args.lr_range, "--lr-range") + [0, 0])[:2]
            if args.optuna < 1 or not lo < hi:
                raise SweepError(f"--optuna needs N >= 1 and --lr-range LO,HI with LO < HI, got {args.optuna} and {args.lr_range}")
            try:
                import optuna
            except ImportError:
                raise SweepError("--optuna: the optuna package is not installed (pip install optuna), or use --lrs") from None
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=args.seed))

            def objective(trial):
                result = run_trial(args.trainer, trainer_args, trial.suggest_float("lr", lo, hi, log=True), args.out)
                trials.append(result)
                return result["score"]
            study.optimize(objective, n_trials=args.optuna)
    except SweepError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    ok = [t for t in trials if t["score"] < math.inf]
    best = min(ok, key=lambda t: t["score"]) if ok else None
    print(table(trials))
    if best:
        print(f"best lr: {best['lr']:.3e} (final {'val ' if best['final_val_loss'] == best['final_val_loss'] else ''}"
              f"loss {best['score']:.6f})")
    else:
        print("best lr: none (every trial failed)")
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump({"trainer_args": trainer_args, "best_lr": best["lr"] if best else None,
                   "trials": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in t.items()}
                              for t in trials]}, f, indent=1)
    plot_sweep(trials, best, os.path.join(args.out, "sweep.png"))
    print(f"wrote {os.path.join(args.out, 'sweep.json')} and sweep.png")
    return 0 if best else 1


if __name__ == "__main__":
    sys.exit(main())
