#!/usr/bin/env python3
"""
dev/test_llmc.py — tests of scripts/llmc.py (llm.c model files to and from ours). The llm.c files are written
and parsed here from llm.c's documented layout (256 int32: 20240326, version 3 fp32 / 5 bf16, maxT, V, L, NH,
C, Vp; the tensors in GPT-2 order, wte padded to Vp rows), not with the script's code:

  import       fp32 and bf16 files with a padded vocabulary of another size (320, a multiple of 64) and
               non-zero padded rows: every tensor of the imported model file equals the source (wte's V
               rows; the padded rows up to our 384 zero)
  export       fp32: the header words, and a payload equal to the model file's tensors in order; bf16: each
               weight is torch's float32 -> bfloat16 rounding
  round trip   model file -> export -> import: the same model file, byte for byte
  C side       ./train_gpt_cpu trains from an imported file (its step-1 loss equals the one from the
               original model file)
  bad input    another magic, version 4, a truncated file, a padded vocabulary below V: exit 1 with one
               "error:" line naming the file
Ends with "N passed, M failed" (non-zero exit on failure). Needs numpy and torch.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
import train_gpt  # noqa: E402
from testlib import check, end  # noqa: E402

LLMC = [sys.executable, os.path.join(ROOT, "scripts", "llmc.py")]
ORDER = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw",
         "fcprojb", "lnfw", "lnfb"]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="2"))


def shapes(L, C, V, maxT, Vp):
    """llm.c's tensor shapes, in its file order"""
    return dict(zip(ORDER, [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C), (L, C), (L, C),
                            (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]))


def write_llmc(path, version, dims, arrays):
    """dims = (maxT, V, L, NH, C, Vp); arrays in ORDER, fp32 (version 3) or bf16 bits as uint16 (version 5)"""
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2:8] = 20240326, version, dims
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for name in ORDER:
            f.write(np.ascontiguousarray(arrays[name]).tobytes())


def read_llmc(path):
    """(header words 0..7, flat payload bytes)"""
    raw = open(path, "rb").read()
    return [int(x) for x in np.frombuffer(raw[:1024], "<i4")[:8]], raw[1024:]


def main():
    L, NH, C, V, maxT = 2, 3, 48, 300, 40
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as tmp:
        # ---------------------------------------------------------------- import (fp32 and bf16, Vp 320)
        src = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes(L, C, V, maxT, 320).items()}
        bf16 = {n: torch.from_numpy(a).to(torch.bfloat16).view(torch.int16).numpy().view("<u2") for n, a in src.items()}
        widened = {n: (b.astype(np.uint32) << 16).view(np.float32) for n, b in bf16.items()}
        for version, arrays, want in ((3, src, src), (5, bf16, widened)):
            path, out = os.path.join(tmp, f"llmc_v{version}.bin"), os.path.join(tmp, f"imported_v{version}.bin")
            write_llmc(path, version, (maxT, V, L, NH, C, 320), arrays)
            r = run(LLMC + ["import", path, out])
            ok, worst = r.returncode == 0, "?"
            if ok:
                cfg, got = train_gpt.load_model_file(out)
                ok = (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size, cfg.max_seq_len, cfg.padded_vocab_size) == \
                    (L, NH, C, V, maxT, 384)
                diffs = [np.abs(got[n][:V] - want[n][:V]).max() if n == "wte" else np.abs(got[n] - want[n]).max() for n in ORDER]
                worst = max(diffs)
                ok = ok and worst == 0 and not got["wte"][V:].any()
            check(ok, f"import of an llm.c version {version} file (Vp 320, padded rows not zero): every tensor exact "
                      f"(worst |diff| {worst}), wte's rows {V}..383 zero {r.stderr.strip()[-200:]}")

        # ---------------------------------------------------------------- export (fp32 and bf16), round trip
        ours = os.path.join(tmp, "ref", "model.bin")
        r = run([sys.executable, "train_gpt.py", "--n-layer", str(L), "--n-head", str(NH), "--n-embd", str(C), "--vocab-size",
                 str(V), "--max-seq-len", str(maxT), "--reference-out", os.path.join(tmp, "ref"), "-b", "1", "-t", "8", "--steps", "1"])
        check(r.returncode == 0 and os.path.exists(ours), f"train_gpt.py wrote a model file {r.stderr.strip()[-200:]}")
        _, tensors = train_gpt.load_model_file(ours)
        flat = np.concatenate([tensors[n].ravel() for n in ORDER]).astype("<f4")
        for name, extra, version in (("fp32", [], 3), ("bf16", ["--bf16"], 5)):
            path = os.path.join(tmp, f"export_{name}.bin")
            r = run(LLMC + ["export", ours, path] + extra)
            header, payload = read_llmc(path) if r.returncode == 0 else ([], b"")
            want = flat.tobytes() if version == 3 else \
                torch.from_numpy(flat).to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
            check(header == [20240326, version, maxT, V, L, NH, C, 384] and payload == want,
                  f"export {name}: header {header}, payload {'equal' if payload == want else 'different'} "
                  f"({len(payload)} bytes) {r.stderr.strip()[-200:]}")
        back = os.path.join(tmp, "back.bin")
        r = run(LLMC + ["import", os.path.join(tmp, "export_fp32.bin"), back])
        same = r.returncode == 0 and open(back, "rb").read() == open(ours, "rb").read()
        check(same, f"model file -> export -> import: byte-identical {r.stderr.strip()[-200:]}")

        # ---------------------------------------------------------------- the C trainer from an imported file
        shard = os.path.join(tmp, "train.bin")
        toks = (np.arange(4000) * 7 % V).astype(np.uint16)
        train_gpt.write_binary_file(shard, train_gpt.SHARD_MAGIC, train_gpt.SHARD_VERSION, {5: len(toks), 6: 0, 7: V, 8: 2},
                                    [toks])
        losses = []
        for model in (ours, back):
            r = run(["./train_gpt_cpu", "-e", model, "-i", shard, "-b", "2", "-t", "16", "-x", "2", "-s", "0", "-v", "0"])
            losses.append(re.findall(r"^step +\d+/2 \| loss ([0-9.]+)", r.stdout, re.M))
        check(len(losses[0]) == 2 and losses[0] == losses[1],
              f"train_gpt_cpu from the imported file: losses {losses[1]} as from the original {losses[0]}")

        # ---------------------------------------------------------------- bad input
        good = os.path.join(tmp, "llmc_v3.bin")
        data = open(good, "rb").read()
        cases = [("another magic", np.int32(20240520).tobytes() + data[4:], "not an llm.c model file: magic 20240520"),
                 ("version 4", data[:4] + np.int32(4).tobytes() + data[8:], "llm.c model file version 4 is not supported"),
                 ("truncated", data[:-6], "llm.c model file is truncated"),
                 ("padded vocab below V", data[:28] + np.int32(200).tobytes() + data[32:], "padded vocab size 200, below")]
        for what, content, needle in cases:
            bad = os.path.join(tmp, "bad.bin")
            with open(bad, "wb") as f:
                f.write(content)
            r = run(LLMC + ["import", bad, os.path.join(tmp, "never.bin")])
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"error: {bad}: ") and needle in lines[0]
                  and not os.path.exists(os.path.join(tmp, "never.bin")), f"import, {what}: exit {r.returncode}, {lines}")
    return end()


if __name__ == "__main__":
    sys.exit(main())
