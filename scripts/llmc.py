#!/usr/bin/env python3
"""
scripts/llmc.py — llm.c interchange: our model files (doc/formats.md, GPTM) to and from llm.c's.

    python3 scripts/llmc.py import LLMC_MODEL.bin MODEL.bin    # gpt2_124M.bin, gpt2_124M_bf16.bin, or a checkpoint
    ./train_gpt_cpu -e MODEL.bin ...                           #   of llm.c's trainer (model_00005000.bin); then train
    python3 scripts/llmc.py export MODEL.bin LLMC_MODEL.bin [--bf16]   # for llm.c's tools (its evals, inference)

llm.c's model file (its train_gpt2.py write_model, train_gpt2.cu gpt2_write_to_checkpoint): 256 int32 words,
h[0] = 20240326, h[1] = version (3: fp32 weights, 5: bf16), h[2] max_seq_len, h[3] vocab_size V, h[4] n_layer,
h[5] n_head, h[6] n_embd, h[7] padded vocab size Vp; then the weights, no CRC, in the order of ours: wte (Vp, C),
wpe, and the per-layer tensors stacked over layers, weights (out, in) as torch.nn.Linear's (llm.c's GPT uses
nn.Linear), ln_f last. So a model moves between the formats tensor by tensor: only the header, the dtype and
wte's padded rows (V..Vp-1, never used: zero in ours, at our Vp, a multiple of 128) change. Import widens
bf16 to fp32 exactly; export to bf16 rounds to nearest even. Errors are one line naming the file, exit 1.
"""
import argparse
import math
import os
import sys

try:
    import numpy as np
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import train_gpt  # noqa: E402  (the model-file reader and writer, and GPTConfig)
    from train_gpt import FormatError, ConfigError  # noqa: E402
except ImportError as missing:
    sys.exit(f"error: scripts/llmc.py needs numpy and torch ({missing}): run it with /usr/bin/python3 (Debian's "
             "python3-numpy, python3-torch) or pip install numpy torch")

LLMC_MAGIC = 20240326
LLMC_VERSIONS = {3: np.dtype("<f4"), 5: np.dtype("<u2")}  # version: how a weight is stored (5: bf16 bits)
HEADER_BYTES = train_gpt.HEADER_BYTES  # llm.c's header is 256 int32 words too


def read_llmc(path):
    """(GPTConfig, {name: fp32 array of our file's shape}) from llm.c's model file at path, checked."""
    size, raw = train_gpt.read_raw_header(path, "llm.c model file")
    if len(raw) < HEADER_BYTES:
        raise FormatError(f"{path}: not an llm.c model file: {size} bytes, shorter than the {HEADER_BYTES}-byte header")
    h = np.frombuffer(raw, dtype="<i4")
    if h[0] != LLMC_MAGIC:
        known = train_gpt.MAGIC_HINTS.get(int(h[0]) & 0xFFFFFFFF)
        raise FormatError(f"{path}: not an llm.c model file: magic {int(h[0])}, expected {LLMC_MAGIC}{': ' + known if known else ''}")
    version = int(h[1])
    if version not in LLMC_VERSIONS:
        raise FormatError(f"{path}: llm.c model file version {version} is not supported (3: fp32, 5: bf16)")
    maxT, V, L, NH, C, Vp = (int(x) for x in h[2:8])
    try:
        cfg = train_gpt.GPTConfig(L, NH, C, V, maxT)
    except ConfigError as e:
        raise FormatError(f"{path}: llm.c model file: {e}") from None
    if Vp < V:
        raise FormatError(f"{path}: llm.c model file has padded vocab size {Vp}, below its vocab size {V}")
    shapes = [((Vp, C) if name == "wte" else shape) for name, shape in cfg.tensor_shapes()]
    n, dtype = sum(math.prod(s) for s in shapes), LLMC_VERSIONS[version]
    if size - HEADER_BYTES != n * dtype.itemsize:
        state = "truncated" if size - HEADER_BYTES < n * dtype.itemsize else "too long"
        raise FormatError(f"{path}: llm.c model file is {state}: its config (L {L}, NH {NH}, C {C}, V {V}, Vp {Vp}, maxT {maxT}) "
                          f"needs {n * dtype.itemsize} bytes of weights, the file has {size - HEADER_BYTES}")
    flat = np.memmap(path, dtype=dtype, mode="r", offset=HEADER_BYTES, shape=(n,))
    if version == 5:  # bf16 is the top half of an fp32
        flat = (flat.astype(np.uint32) << 16).view(np.float32)
    tensors, off = {}, 0
    for (name, shape), stored in zip(cfg.tensor_shapes(), shapes):
        t = np.asarray(flat[off:off + math.prod(stored)], dtype=np.float32).reshape(stored)
        off += math.prod(stored)
        if name == "wte":  # its V real rows, then zero rows up to our Vp
            t = np.concatenate([t[:V], np.zeros((shape[0] - V, C), np.float32)])
        if not np.isfinite(t).all():
            raise FormatError(f"{path}: llm.c model file: tensor {name} has a non-finite value")
        tensors[name] = t
    return cfg, tensors


def to_bf16_bits(x):
    """fp32 array -> bf16 bits (uint16), rounded to nearest even (x finite)"""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def write_llmc(path, cfg, tensors, bf16):
    """llm.c's model file of version 5 (bf16) or 3 (fp32) at path, atomically; Vp is ours (a multiple of 128)."""
    header = np.zeros(256, dtype="<i4")
    header[:8] = (LLMC_MAGIC, 5 if bf16 else 3, cfg.max_seq_len, cfg.vocab_size, cfg.n_layer, cfg.n_head, cfg.n_embd,
                  cfg.padded_vocab_size)
    with train_gpt.atomic_output(path) as f:
        f.write(header.tobytes())
        for name, _ in cfg.tensor_shapes():
            t = tensors[name]
            f.write(to_bf16_bits(t).tobytes() if bf16 else np.ascontiguousarray(t, dtype="<f4").tobytes())


def main():
    parser = argparse.ArgumentParser(description="convert model files between llm.c's format and ours")
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="llm.c's model file -> ours")
    imp.add_argument("src")
    imp.add_argument("dst")
    exp = sub.add_parser("export", help="ours -> llm.c's model file")
    exp.add_argument("src")
    exp.add_argument("dst")
    exp.add_argument("--bf16", action="store_true", help="write bf16 weights (llm.c's version 5; default fp32, version 3)")
    args = parser.parse_args()
    try:
        if args.command == "import":
            cfg, tensors = read_llmc(args.src)
            train_gpt.save_model_file(args.dst, cfg, tensors)
            print(f"wrote {args.dst}: {cfg}")
        else:
            cfg, tensors = train_gpt.load_model_file(args.src)
            write_llmc(args.dst, cfg, tensors, args.bf16)
            print(f"wrote {args.dst}: llm.c model file version {5 if args.bf16 else 3}, {cfg}")
    except (FormatError, ConfigError) as e:
        sys.exit(f"error: {e}")
    except OSError as e:
        sys.exit(f"error: {e.filename2 or e.filename or args.dst}: {e.strerror}")


if __name__ == "__main__":
    main()
