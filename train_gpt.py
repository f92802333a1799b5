#!/usr/bin/env python3
"""
train_gpt.py — the PyTorch reference GPT-2 that every C/CUDA kernel of the project is checked against.

The model is pre-LayerNorm GPT-2 exactly as doc/formats.md describes it; its parameters are held in the
model file's own layout (16 tensors, per-layer tensors stacked over layers), so writing the model file,
reading it back and listing gradients "in the model file's tensor order" are all the same loop.

Two modes (run with --help for every flag):

  Reference state (the interface the C tests rely on):
    /usr/bin/python3 train_gpt.py --reference-out DIR --n-layer L --n-head H --n-embd C --vocab-size V \
        --seq-len T --batch-size B --steps K --seed S [optimizer and schedule flags]
  writes DIR/model.bin (fp32 initial weights) and DIR/reference.bin (doc/formats.md, GREF): random
  tokens, logits, loss, every gradient, the loss before each of K AdamW steps on that one batch, and
  the weights after them. The initial weights are drawn in fp32 from a seeded torch.Generator and
  written first; the reference is then computed from those exact values upcast to --ref-dtype
  (float64 by default), on --device (the CPU by default; on a GPU a d12 state takes seconds). The hyperparameters are rounded to float32 before use, because that is how
  reference.bin stores them, so a C trainer reading the header uses bit-identical values.
  --perturb (on by default in this mode; --no-perturb turns it off) sets LayerNorm weights to 1 + N(0, 0.1) and LayerNorm and
  Linear biases to N(0, 0.02), so that the bias and LayerNorm-parameter code paths see non-trivial values.
  Defaults: lr 1e-3, warmup 2, cosine to 0.1 x lr, weight decay 0.1, betas (0.9, 0.95), eps 1e-8, clip 1.0,
  K = 10. With them the weights move by ~1e-3..1e-2 and the small test configs (L <= 3, C <= 96) have
  gradient norms 1.1..2.6, so clip 1.0 clips every step; dev/gen_references.sh sets per-config clips so
  that some configs clip only some steps, one clips none and one clips all (each run prints "(clipped)").

  Training (to compare loss curves with the C trainer):
    python3 train_gpt.py --train-data "data/x/train_*.bin" [--val-data ...] [--init model.bin |
        --preset d12 | config flags] -b B -t T --steps N --lr ... --device cpu|cuda [--write-model PATH]
        [--out-model PATH]
  prints "step k/N | loss x.xxxxxx | lr ... | norm ..." per step. --write-model saves the initial model
  (for the C trainer to start from the same weights); --out-model saves the trained one.

Optimizer: torch.optim.AdamW with weight decay on the 2-D tensors only (wte, wpe, qkvw, attprojw, fcw,
fcprojw); global-norm clipping as torch.nn.utils.clip_grad_norm_ does, with the norm summed in float64
(train_step); learning rate from learning_rate().
Runs on torch 1.13 (CPU) and torch 2.x (CPU or CUDA).
"""
import argparse
import contextlib
import glob
import inspect
import math
import os
import sys
import time
import zlib

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as missing:
    sys.exit(f"error: {missing.name or missing} cannot be imported by {sys.executable}: pip install numpy torch, or run a Python "
             f"that has them (Debian: /usr/bin/python3 with python3-numpy and python3-torch)")

# ----------------------------------------------------------------------------------------------------
# file formats (doc/formats.md)

HEADER_WORDS = 256
HEADER_BYTES = 4 * HEADER_WORDS
MODEL_MAGIC, MODEL_VERSION = 0x4D545047, 1  # "GPTM"
SHARD_MAGIC, SHARD_VERSION = 0x4B4F5447, 1  # "GTOK"
LLMC_SHARD_MAGIC, LLMC_SHARD_VERSION, LLMC_LLAMA_SHARD_MAGIC = 20240520, 1, 20240801  # llm.c's token shards
REF_MAGIC, REF_VERSION = 0x46455247, 1  # "GREF"
DTYPE_FP32, DTYPE_BF16 = 1, 2
SCHEDULES = ["cosine", "linear", "constant", "wsd"]  # index = the code stored in reference.bin h[12]
TENSOR_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}  # the 2-D (per layer) weight matrices
PRESETS = {  # name: (n_layer, n_head, n_embd); all have V = 50257, max_seq_len = 1024
    "d6": (6, 6, 384), "d12": (12, 12, 768), "d24": (24, 16, 1024), "d36": (36, 20, 1280), "d48": (48, 25, 1600),
}


class FormatError(ValueError):
    """A file that is not what it claims to be; the message is one line naming the file and the problem."""


class ConfigError(ValueError):
    """Bad command-line values or model sizes; the message is one line."""


def padded_vocab(vocab_size):
    return (vocab_size + 127) // 128 * 128


class GPTConfig:
    def __init__(self, n_layer, n_head, n_embd, vocab_size, max_seq_len):
        # the C readers' limits (gpt_config_check, llmc/checkpoint.h): a file they would refuse is not written
        for name, v, most in [("n_layer", n_layer, 1024), ("n_head", n_head, 1 << 16), ("n_embd", n_embd, 1 << 17),
                              ("vocab_size", vocab_size, 1 << 24), ("max_seq_len", max_seq_len, 1 << 20)]:
            if not isinstance(v, int) or v <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {v}")
            if v > most:
                raise ConfigError(f"{name} = {v} is not in [1, {most}]")
        if n_embd % n_head != 0:
            raise ConfigError(f"n_embd {n_embd} is not divisible by n_head {n_head}")
        if vocab_size > 65536:
            raise ConfigError(f"vocab_size {vocab_size} does not fit the uint16 tokens of our shards")
        self.n_layer, self.n_head, self.n_embd = n_layer, n_head, n_embd
        self.vocab_size, self.max_seq_len = vocab_size, max_seq_len
        self.padded_vocab_size = padded_vocab(vocab_size)

    def tensor_shapes(self):
        """(name, shape) of the 16 tensors of the model file, in file order."""
        L, C, Vp, maxT = self.n_layer, self.n_embd, self.padded_vocab_size, self.max_seq_len
        shapes = [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
                  (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]
        return list(zip(TENSOR_NAMES, shapes))

    def num_parameters(self):
        return sum(math.prod(s) for _, s in self.tensor_shapes())

    def __repr__(self):
        return (f"GPTConfig(L={self.n_layer}, H={self.n_head}, C={self.n_embd}, V={self.vocab_size}, "
                f"Vp={self.padded_vocab_size}, maxT={self.max_seq_len}, params={self.num_parameters()})")


def f32_bits(x):
    return int(np.array(x, dtype=np.float32).view(np.int32))


def bits_f32(word):
    return float(np.array(word, dtype=np.int32).view(np.float32))


@contextlib.contextmanager
def atomic_output(path):
    """A binary file object on path.tmp: fsynced and renamed to path when the block ends, removed if it fails
    (so that a failed write leaves neither a half-written path nor a stray path.tmp)."""
    tmp = path + ".tmp"
    try:
        f = open(tmp, "wb")
    except OSError as e:  # name the file asked for (a missing or unwritable directory), not its .tmp
        raise type(e)(e.errno, e.strerror, path) from None
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def write_binary_file(path, magic, version, fields, chunks):
    """Writes header + payload to path atomically (atomic_output).
    fields: {word index: int}; chunks: iterable of numpy arrays (written as raw little-endian bytes).
    The payload is streamed; the header (with CRC and length) is written last, over a zero placeholder."""
    assert sys.byteorder == "little", "the file formats are little-endian"
    crc, nbytes = 0, 0
    with atomic_output(path) as f:
        f.write(bytes(HEADER_BYTES))
        for chunk in chunks:
            buf = memoryview(np.ascontiguousarray(chunk)).cast("B")
            crc = zlib.crc32(buf, crc)
            nbytes += len(buf)
            f.write(buf)
        h = np.zeros(HEADER_WORDS, dtype=np.int64)
        h[0], h[1], h[2], h[3], h[4] = magic, version, crc, nbytes & 0xFFFFFFFF, nbytes >> 32
        for i, v in fields.items():
            assert 5 <= i < HEADER_WORDS
            h[i] = v
        f.seek(0)
        f.write(h.astype(np.uint32).tobytes())  # uint32 so that words >= 2^31 (CRC, magic) keep their bits


def header_u64(h, lo):
    return int(h[lo]) | (int(h[lo + 1]) << 32)


def read_raw_header(path, kind):
    """(file size, its first HEADER_BYTES bytes or fewer); FormatError naming path and kind if it cannot be read"""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            return size, f.read(HEADER_BYTES)
    except OSError as e:
        raise FormatError(f"{path}: cannot read {kind}: {e.strerror}") from None


# what a file with another magic is, for the message when it was given as another kind (llmc/fileio.h's table)
MAGIC_HINTS = {
    0x4D545047: "it is a model file (GPTM, this project's format), for --init here, -e of train_gpt_cpu / train_gpt and sample_gpt",
    0x53545047: "it is a training state file (GPTS); its checkpoint's model file is the model_NNNNNNNN.bin beside it",
    0x4B4F5447: "it is a token shard (GTOK), training data for --train-data",
    0x45504247: "it is a tokenizer file (GBPE)",
    0x46455247: "it is a reference state (GREF), for test_gpt",
    20240326: "it is an llm.c model file: convert it with python3 scripts/llmc.py import FILE MODEL.bin",
    20240527: "it is an llm.c training state file (its weights are the llm.c model file beside it: scripts/llmc.py import)",
    20240328: "it is an llm.c tokenizer file",
    20240520: "it is an llm.c token shard, training data for --train-data",
    20240801: "it is an llm.c LLaMA-3 token shard (uint32 tokens), which this reader does not read",
}


def read_header(path, kind, magic, version):
    """Reads and checks the common header of path: magic, version and file length = 1024 + payload bytes.
    Returns the 256 words as an int64 array of their uint32 values; raises FormatError naming path."""
    size, raw = read_raw_header(path, kind)
    if len(raw) < HEADER_BYTES:
        raise FormatError(f"{path}: not a {kind}: {size} bytes, shorter than the {HEADER_BYTES}-byte header")
    h = np.frombuffer(raw, dtype="<u4").astype(np.int64)
    if h[0] != magic:
        hint = f": {MAGIC_HINTS[int(h[0])]}" if int(h[0]) in MAGIC_HINTS else ""
        raise FormatError(f"{path}: not a {kind}: magic 0x{int(h[0]):08x}, expected 0x{magic:08x}{hint}")
    if h[1] != version:
        raise FormatError(f"{path}: {kind} version {int(h[1])} is not supported (this reader reads version {version})")
    payload_bytes = header_u64(h, 3)
    if size - HEADER_BYTES != payload_bytes:
        state = "truncated" if size - HEADER_BYTES < payload_bytes else "too long"
        raise FormatError(f"{path}: {kind} is {state}: header says {payload_bytes} payload bytes, "
                          f"file has {size - HEADER_BYTES}")
    return h


def read_binary_file(path, kind, magic, version):
    """read_header, then the payload as a read-only uint8 memmap whose CRC-32 has been checked
    (streamed in 64 MiB pieces, so large files are never copied into memory whole)."""
    h = read_header(path, kind, magic, version)
    n = header_u64(h, 3)
    payload = np.memmap(path, dtype=np.uint8, mode="r", offset=HEADER_BYTES, shape=(n,)) if n else np.zeros(0, np.uint8)
    crc, step = 0, 64 << 20
    for off in range(0, n, step):
        crc = zlib.crc32(memoryview(payload[off:off + step]), crc)
    if crc != h[2]:
        raise FormatError(f"{path}: {kind} is corrupt: payload CRC-32 0x{crc:08x}, header says 0x{int(h[2]):08x}")
    return h, payload


def save_model_file(path, cfg, tensors):
    """tensors: {name: tensor or array of the file shape}; written as fp32."""
    n = cfg.num_parameters()
    fields = {5: DTYPE_FP32, 6: cfg.max_seq_len, 7: cfg.vocab_size, 8: cfg.padded_vocab_size, 9: cfg.n_layer,
              10: cfg.n_head, 11: cfg.n_embd, 12: n & 0xFFFFFFFF, 13: n >> 32}

    def chunks():
        for name, shape in cfg.tensor_shapes():
            t = tensors[name]
            t = t.detach().to("cpu", torch.float32).numpy() if torch.is_tensor(t) else np.asarray(t, np.float32)
            assert t.shape == tuple(shape), (name, t.shape, shape)
            yield t
    write_binary_file(path, MODEL_MAGIC, MODEL_VERSION, fields, chunks())


def load_model_file(path):
    """Reads and validates a model file; returns (GPTConfig, {name: fp32 numpy array of the file shape}).
    bf16 payloads are widened to fp32. Raises FormatError with a one-line message on any inconsistency."""
    kind = "model file"
    h, payload = read_binary_file(path, kind, MODEL_MAGIC, MODEL_VERSION)
    dtype = int(h[5])
    if dtype not in (DTYPE_FP32, DTYPE_BF16):
        raise FormatError(f"{path}: {kind} has dtype {dtype}, expected 1 (fp32) or 2 (bf16)")
    maxT, V, Vp, L, NH, C = (int(h[i]) for i in range(6, 12))
    for name, v in [("max_seq_len", maxT), ("vocab_size", V), ("n_layer", L), ("n_head", NH), ("n_embd", C)]:
        if v <= 0 or v >= 2**31:
            raise FormatError(f"{path}: {kind} has {name} {v}, expected a positive 31-bit integer")
    if Vp != padded_vocab(V):
        raise FormatError(f"{path}: {kind} has padded_vocab_size {Vp}, expected {padded_vocab(V)} "
                          f"(vocab_size {V} rounded up to a multiple of 128)")
    if C % NH != 0:
        raise FormatError(f"{path}: {kind} has n_embd {C} not divisible by n_head {NH}")
    try:
        cfg = GPTConfig(L, NH, C, V, maxT)
    except ConfigError as e:
        raise FormatError(f"{path}: {kind}: {e}") from None
    n = header_u64(h, 12)
    if n != cfg.num_parameters():
        raise FormatError(f"{path}: {kind} says {n} parameters, its sizes give {cfg.num_parameters()}")
    elem = 4 if dtype == DTYPE_FP32 else 2
    if len(payload) != n * elem:
        raise FormatError(f"{path}: {kind} payload is {len(payload)} bytes, {n} parameters of {elem} bytes "
                          f"need {n * elem}")
    if dtype == DTYPE_FP32:
        flat = payload.view("<f4")
    else:  # bf16 is the top half of an fp32
        flat = (payload.view("<u2").astype(np.uint32) << 16).view(np.float32)
    tensors, off = {}, 0
    for name, shape in cfg.tensor_shapes():
        k = math.prod(shape)
        tensors[name] = flat[off:off + k].reshape(shape)
        bad = np.flatnonzero(~np.isfinite(flat[off:off + k]))
        if bad.size:  # as the C readers: a NaN or inf would train on silently
            raise FormatError(f"{path}: {kind} holds a non-finite value {flat[off + bad[0]]} at {name}[{bad[0]}]")
        off += k
    return cfg, tensors


def load_reference_file(path):
    """Reads and validates reference.bin; returns a dict of its header fields and payload arrays."""
    kind = "reference state"
    h, payload = read_binary_file(path, kind, REF_MAGIC, REF_VERSION)
    B, T, K, V, Vp = (int(h[i]) for i in range(5, 10))
    for name, v in [("B", B), ("T", T), ("V", V)]:
        if v <= 0 or v >= 2**31:
            raise FormatError(f"{path}: {kind} has {name} {v}, expected a positive integer")
    if K >= 2**31:
        raise FormatError(f"{path}: {kind} has K {K}, expected a non-negative integer")
    if Vp != padded_vocab(V):
        raise FormatError(f"{path}: {kind} has Vp {Vp}, expected {padded_vocab(V)} for V {V}")
    P = header_u64(h, 10)
    if int(h[12]) >= len(SCHEDULES):
        raise FormatError(f"{path}: {kind} has schedule code {int(h[12])}, expected 0..{len(SCHEDULES) - 1}")
    sizes = [("inputs", "<i4", B * T), ("targets", "<i4", B * T), ("logits", "<f4", B * T * V), ("loss", "<f4", 1),
             ("grads", "<f4", P), ("step_losses", "<f4", K), ("final_weights", "<f4", P)]
    need = 4 * sum(n for _, _, n in sizes)
    if len(payload) != need:
        raise FormatError(f"{path}: {kind} payload is {len(payload)} bytes, its fields (B={B} T={T} K={K} V={V} "
                          f"P={P}) need {need}")
    ref = {"B": B, "T": T, "K": K, "V": V, "Vp": Vp, "P": P, "schedule": SCHEDULES[int(h[12])],
           "warmup": int(h[13]), "total_steps": int(h[14]), "lr": bits_f32(h[16]), "final_lr_frac": bits_f32(h[17]),
           "weight_decay": bits_f32(h[18]), "beta1": bits_f32(h[19]), "beta2": bits_f32(h[20]),
           "eps": bits_f32(h[21]), "grad_clip": bits_f32(h[22]), "wsd_frac": bits_f32(h[23]), "seed": int(h[24])}
    off = 0
    for name, dt, n in sizes:
        ref[name] = payload[off:off + 4 * n].view(dt)
        off += 4 * n
    ref["logits"] = ref["logits"].reshape(B, T, V)
    for name in ("inputs", "targets"):
        ref[name] = ref[name].reshape(B, T)
        if ref[name].min() < 0 or ref[name].max() >= V:
            raise FormatError(f"{path}: {kind} has {name} outside [0, {V})")
    return ref


def llmc_shard_info(path):
    """The token count of path if it is one of llm.c's GPT-2 token shards (256 int32 words: magic 20240520,
    version 1, token count; then uint16 tokens; no CRC, no vocabulary), checked; None if its magic is another."""
    size, raw = read_raw_header(path, "token shard")
    if len(raw) < HEADER_BYTES:
        return None
    magic, h = int(np.frombuffer(raw, dtype="<u4")[0]), np.frombuffer(raw, dtype="<i4")
    if magic == LLMC_LLAMA_SHARD_MAGIC:
        raise FormatError(f"{path}: an llm.c LLaMA-3 token shard (uint32 tokens): this reader reads GPT-2 shards (uint16 tokens)")
    if magic not in (LLMC_SHARD_MAGIC, SHARD_MAGIC):
        raise FormatError(f"{path}: not a token shard: magic 0x{magic:08x}, expected 0x{SHARD_MAGIC:08x} (GTOK) "
                          f"or {LLMC_SHARD_MAGIC} (llm.c's)")
    if magic != LLMC_SHARD_MAGIC:
        return None
    if h[1] != LLMC_SHARD_VERSION:
        raise FormatError(f"{path}: llm.c token shard version {int(h[1])} is not supported (this reader reads version "
                          f"{LLMC_SHARD_VERSION}: GPT-2, uint16 tokens)")
    n = int(h[2])
    if n < 0:
        raise FormatError(f"{path}: llm.c token shard header says {n} tokens")
    if size - HEADER_BYTES != 2 * n:
        state = "truncated" if size - HEADER_BYTES < 2 * n else "too long"
        raise FormatError(f"{path}: llm.c token shard is {state}: header says {n} tokens ({2 * n} bytes), file has "
                          f"{size - HEADER_BYTES} bytes after the header")
    return n


def token_shard_info(path, h=None):
    """Checks a token shard's header and fields without reading its payload; returns (token count, vocab).
    llm.c's shards state no vocabulary: vocab 0."""
    kind = "token shard"
    if h is None:
        n = llmc_shard_info(path)
        if n is not None:
            return n, 0
        h = read_header(path, kind, SHARD_MAGIC, SHARD_VERSION)
    n, vocab, bytes_per_token = header_u64(h, 5), int(h[7]), int(h[8])
    if bytes_per_token != 2:
        raise FormatError(f"{path}: {kind} has {bytes_per_token} bytes per token, expected 2")
    if vocab <= 0 or vocab > 65536:
        raise FormatError(f"{path}: {kind} has vocab size {vocab}, expected 1..65536")
    if header_u64(h, 3) != 2 * n:
        raise FormatError(f"{path}: {kind} says {n} tokens ({2 * n} bytes), payload has {header_u64(h, 3)} bytes")
    return n, vocab


def load_token_shard(path):
    """Reads and validates a token shard (CRC included); returns (tokens as a uint16 memmap, vocab size).
    An llm.c shard (no CRC, vocab 0): its tokens are checked by the caller against its model."""
    n = llmc_shard_info(path)
    if n is not None:
        return (np.memmap(path, dtype="<u2", mode="r", offset=HEADER_BYTES, shape=(n,)) if n else np.zeros(0, "<u2")), 0
    h, payload = read_binary_file(path, "token shard", SHARD_MAGIC, SHARD_VERSION)
    _, vocab = token_shard_info(path, h)
    tokens = payload.view("<u2")
    if len(tokens) and int(tokens.max()) >= vocab:
        at = int(np.argmax(tokens >= vocab))
        raise FormatError(f"{path}: token {int(tokens[at])} at position {at} is not below the shard's vocab size {vocab}")
    return tokens, vocab


# ----------------------------------------------------------------------------------------------------
# the model


class GPT(nn.Module):
    """GPT-2 with its parameters in the model file's layout: self.<name> for each of TENSOR_NAMES,
    registered in file order, so self.parameters() lists them in file order."""

    def __init__(self, cfg, tensors):
        super().__init__()
        self.cfg = cfg
        for name, shape in cfg.tensor_shapes():
            t = tensors[name] if torch.is_tensor(tensors[name]) else torch.from_numpy(np.array(tensors[name]))
            assert tuple(t.shape) == tuple(shape), (name, tuple(t.shape), shape)
            setattr(self, name, nn.Parameter(t.detach().clone()))

    def forward(self, idx, targets=None, exact_attention=True):
        """idx (B, T) int64 tokens -> logits (B, T, V) over the real vocabulary, and the mean cross-entropy
        against targets when given. exact_attention=False lets torch 2.x use its fused attention."""
        cfg = self.cfg
        B, T = idx.shape
        C, NH, L, V = cfg.n_embd, cfg.n_head, cfg.n_layer, cfg.vocab_size
        if T > cfg.max_seq_len:
            raise ConfigError(f"sequence length {T} exceeds the model's max_seq_len {cfg.max_seq_len}")
        x = self.wte[idx] + self.wpe[:T]
        for l in range(L):
            h = F.layer_norm(x, (C,), self.ln1w[l], self.ln1b[l], eps=1e-5)
            x = x + F.linear(attention(F.linear(h, self.qkvw[l], self.qkvb[l]), NH, exact_attention),
                             self.attprojw[l], self.attprojb[l])
            h = F.layer_norm(x, (C,), self.ln2w[l], self.ln2b[l], eps=1e-5)
            x = x + F.linear(gelu_tanh(F.linear(h, self.fcw[l], self.fcb[l])), self.fcprojw[l], self.fcprojb[l])
        x = F.layer_norm(x, (C,), self.lnfw, self.lnfb, eps=1e-5)
        logits = x @ self.wte[:V].t()  # tied head; the padded rows V..Vp-1 are never predicted
        loss = None if targets is None else F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T))
        return logits, loss

    def file_tensors(self):
        return {name: getattr(self, name) for name in TENSOR_NAMES}


def gelu_tanh(x):
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def attention(qkv, n_head, exact=True):
    """Causal multi-head self-attention. qkv (B, T, 3C): q, k, v each C wide; head h owns columns
    h*C/NH .. (h+1)*C/NH - 1 of each. out[b, t, head h] = sum_{s<=t} softmax_s(q_t.k_s / sqrt(hd)) v_s."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hd = C // n_head
    q, k, v = (z.reshape(B, T, n_head, hd).transpose(1, 2) for z in qkv.split(C, dim=-1))  # (B, NH, T, hd)
    if not exact and hasattr(F, "scaled_dot_product_attention"):
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        causal = torch.ones(T, T, dtype=torch.bool, device=qkv.device).tril()
        y = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v
    return y.transpose(1, 2).reshape(B, T, C)


def init_tensors(cfg, generator, perturb):
    """From-scratch fp32 weights: Linear weights, wte and wpe ~ N(0, 0.02); the residual projections
    (attprojw, fcprojw) ~ N(0, 0.02/sqrt(2L)); biases 0; LayerNorm weight 1, bias 0; padded wte rows 0.
    perturb: LayerNorm weights 1 + N(0, 0.1), LayerNorm and Linear biases N(0, 0.02) instead.
    Tensors are drawn from `generator` in file order (reproducible for a given seed)."""
    std_resid = 0.02 / math.sqrt(2 * cfg.n_layer)
    out = {}
    for name, shape in cfg.tensor_shapes():
        if name in DECAYED:
            t = torch.randn(shape, generator=generator) * (std_resid if name in ("attprojw", "fcprojw") else 0.02)
            if name == "wte":
                t[cfg.vocab_size:] = 0
        elif name.startswith("ln") and name.endswith("w"):
            t = torch.ones(shape) + (0.1 * torch.randn(shape, generator=generator) if perturb else 0)
        else:
            t = 0.02 * torch.randn(shape, generator=generator) if perturb else torch.zeros(shape)
        out[name] = t.float()
    return out


# ----------------------------------------------------------------------------------------------------
# optimizer, learning rate, clipping


def learning_rate(step, total, warmup, max_lr, final_frac, schedule, wsd_frac):
    """Learning rate of 0-based step `step` of `total` (see doc/formats.md and the module docstring)."""
    min_lr = max_lr * final_frac
    if step < warmup:
        return max_lr * (step + 1) / warmup
    if schedule == "constant":
        return max_lr
    if schedule == "wsd":
        # as llmc/schedule.h: the flag as a float32, plus the most its rounding moves frac x total (0.7 x 10 is 7)
        decay = math.floor(float(np.float32(wsd_frac)) * total + total * 2.0 ** -24)
        if decay == 0 or step < total - decay:
            return max_lr
        return min_lr + (1.0 - (step - (total - decay)) / decay) * (max_lr - min_lr)
    r = (step - warmup) / max(1, total - warmup)
    if schedule == "cosine":
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (max_lr - min_lr)
    if schedule == "linear":
        return min_lr + (1.0 - r) * (max_lr - min_lr)
    raise ConfigError(f"unknown learning-rate schedule {schedule!r}, expected one of {', '.join(SCHEDULES)}")


def make_optimizer(model, lr, weight_decay, beta1, beta2, eps, fused=False):
    """torch.optim.AdamW with weight decay on the 2-D weight matrices only (DECAYED), 0 on biases and LN."""
    decay = [p for n, p in model.named_parameters() if n in DECAYED]
    other = [p for n, p in model.named_parameters() if n not in DECAYED]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": other, "weight_decay": 0.0}]
    extra = {"fused": True} if fused else {"foreach": False}
    return torch.optim.AdamW(groups, lr=lr, betas=(beta1, beta2), eps=eps, **extra)


def train_step(model, optimizer, x, y, lr, grad_clip, autocast=None):
    """One AdamW update on batch (x, y): forward, backward, clip to global norm grad_clip (0 = off), step
    with learning rate lr. Returns (loss before the update, global gradient norm before clipping)."""
    optimizer.zero_grad(set_to_none=True)
    if autocast is None:
        _, loss = model(x, y)
    else:
        with autocast:
            _, loss = model(x, y, exact_attention=False)
    loss.backward()
    # the global norm summed in float64 (torch's fp32 norm of a CPU tensor of millions of elements is off by up to
    # 1e-3 relative: d12's wte), then clipped as clip_grad_norm_ does: scaled by clip / (norm + 1e-6) when below 1
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64) for g in grads]))
    if grad_clip > 0 and grad_clip / (norm.item() + 1e-6) < 1:
        for g in grads:
            g.mul_(grad_clip / (norm.item() + 1e-6))
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    return loss.item(), norm.item()


# ----------------------------------------------------------------------------------------------------
# reference-state mode


def write_reference(args, cfg):
    """Writes DIR/model.bin and DIR/reference.bin; see the module docstring."""
    os.makedirs(args.reference_out, exist_ok=True)
    B, T, K, V = args.batch_size, args.seq_len, args.steps, cfg.vocab_size
    if T > cfg.max_seq_len:
        raise ConfigError(f"--seq-len {T} exceeds --max-seq-len {cfg.max_seq_len}")
    g = torch.Generator().manual_seed(args.seed)
    init = init_tensors(cfg, g, args.perturb)
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    save_model_file(os.path.join(args.reference_out, "model.bin"), cfg, init)

    dtype = {"float64": torch.float64, "float32": torch.float32}[args.ref_dtype]
    device = torch.device(args.device)
    model = GPT(cfg, {n: t.to(dtype) for n, t in init.items()}).to(device)
    x, y = x.to(device), y.to(device)
    logits, loss = model(x, y)
    loss.backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    optimizer = make_optimizer(model, args.lr, args.weight_decay, args.beta1, args.beta2, args.eps)
    step_losses = []
    for s in range(K):
        lr = learning_rate(s, K, args.warmup, args.lr, args.final_lr_frac, args.lr_schedule, args.wsd_frac)
        step_loss, norm = train_step(model, optimizer, x, y, lr, args.grad_clip)
        clipped = args.grad_clip > 0 and norm > args.grad_clip
        print(f"step {s + 1}/{K} | loss {step_loss:.6f} | lr {lr:.4e} | norm {norm:.4f}{' (clipped)' if clipped else ''}")
        step_losses.append(step_loss)

    P = cfg.num_parameters()
    fields = {5: B, 6: T, 7: K, 8: V, 9: cfg.padded_vocab_size, 10: P & 0xFFFFFFFF, 11: P >> 32,
              12: SCHEDULES.index(args.lr_schedule), 13: args.warmup, 14: K,
              16: f32_bits(args.lr), 17: f32_bits(args.final_lr_frac), 18: f32_bits(args.weight_decay),
              19: f32_bits(args.beta1), 20: f32_bits(args.beta2), 21: f32_bits(args.eps),
              22: f32_bits(args.grad_clip), 23: f32_bits(args.wsd_frac), 24: args.seed}
    f32 = lambda t: t.detach().to(torch.float32).cpu().numpy()
    chunks = [x.to(torch.int32).cpu().numpy(), y.to(torch.int32).cpu().numpy(), f32(logits), f32(loss.reshape(1))]
    chunks += [f32(gr) for gr in grads]
    chunks += [np.array(step_losses, dtype=np.float32)]
    chunks += [f32(p) for p in model.parameters()]
    write_binary_file(os.path.join(args.reference_out, "reference.bin"), REF_MAGIC, REF_VERSION, fields, chunks)
    print(f"wrote {args.reference_out}/model.bin and reference.bin: {cfg}, B={B} T={T} K={K}, "
          f"loss {loss.item():.6f} -> {step_losses[-1] if K else loss.item():.6f}")


# ----------------------------------------------------------------------------------------------------
# training mode


class TokenLoader:
    """Reads batches sequentially through the shards matching a glob (sorted by name). At position p of the
    current shard: x = tokens[p : p+B*T], y = tokens[p+1 : p+B*T+1], then p += B*T; when fewer than B*T+1
    tokens remain the loader moves to the start of the next shard, wrapping after the last one.
    Every shard's header is checked up front; a shard's payload (and CRC) is read when the loader reaches it."""

    def __init__(self, pattern, B, T, vocab_size):
        self.paths = sorted(glob.glob(os.path.expanduser(pattern)))
        if not self.paths:
            raise ConfigError(f"no token shards match {pattern!r}")
        self.B, self.T, self.vocab_size = B, T, vocab_size
        self.counts = []
        for path in self.paths:
            n, shard_vocab = token_shard_info(path)
            if shard_vocab > vocab_size:
                raise FormatError(f"{path}: token shard has vocab size {shard_vocab}, the model only {vocab_size}")
            self.counts.append(n)
        if all(n < B * T + 1 for n in self.counts):
            raise ConfigError(f"no shard matching {pattern!r} holds B*T+1 = {B * T + 1} tokens")
        self.loaded, self.tokens = None, None
        self.reset()

    def reset(self):
        self.shard, self.pos = 0, 0

    def batches(self):
        """batches of B x T in one pass over the shards (a shard's last partial window is skipped)"""
        return sum((n - 1) // (self.B * self.T) for n in self.counts if n > 0)

    def next_batch(self):
        n = self.B * self.T
        while self.pos + n + 1 > self.counts[self.shard]:
            self.shard, self.pos = (self.shard + 1) % len(self.paths), 0
        if self.loaded != self.shard:
            self.tokens, shard_vocab = load_token_shard(self.paths[self.shard])
            if shard_vocab == 0 and len(self.tokens) and int(self.tokens.max()) >= self.vocab_size:
                at = int(np.argmax(self.tokens >= self.vocab_size))
                raise FormatError(f"{self.paths[self.shard]}: token {int(self.tokens[at])} at position {at} is not below the "
                                  f"model's vocabulary (an llm.c shard states none) of {self.vocab_size}")
            self.loaded = self.shard
        buf = torch.from_numpy(self.tokens[self.pos:self.pos + n + 1].astype(np.int64))
        self.pos += n
        return buf[:-1].view(self.B, self.T), buf[1:].view(self.B, self.T)


def train(args, cfg, init):
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    B, T, N = args.batch_size, args.seq_len, args.steps
    if T > cfg.max_seq_len:
        raise ConfigError(f"-t {T} exceeds the model's max_seq_len {cfg.max_seq_len}")
    train_loader = TokenLoader(args.train_data, B, T, cfg.vocab_size)
    val_loader = TokenLoader(args.val_data, B, T, cfg.vocab_size) if args.val_data else None
    val_batches = args.val_batches
    if val_loader and args.val_every > 0 and val_batches > val_loader.batches():
        # as the C trainers: read again from the start, the same batches would count twice
        val_batches = val_loader.batches()
        print(f"validation: --val-batches {args.val_batches}, but the validation data holds {val_batches} batches of "
              f"{B} x {T} tokens: using {val_batches}")
    model = GPT(cfg, init).to(device)
    if args.write_model:
        save_model_file(args.write_model, cfg, model.file_tensors())
        print(f"wrote the initial model to {args.write_model}")
    fused = device.type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters
    optimizer = make_optimizer(model, args.lr, args.weight_decay, args.beta1, args.beta2, args.eps, fused=fused)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if args.dtype == "bfloat16" else None
    print(f"{cfg}, B={B} T={T} steps={N} device={device} dtype={args.dtype}")
    for s in range(N):
        if val_loader and args.val_every > 0 and s % args.val_every == 0:
            print(f"step {s}/{N} | val loss {evaluate(model, val_loader, val_batches, device, autocast):.4f}")
        x, y = train_loader.next_batch()
        t0 = time.time()
        lr = learning_rate(s, N, args.warmup, args.lr, args.final_lr_frac, args.lr_schedule, args.wsd_frac)
        loss, norm = train_step(model, optimizer, x.to(device), y.to(device), lr, args.grad_clip, autocast)
        ms = 1000 * (time.time() - t0)
        print(f"step {s + 1}/{N} | loss {loss:.6f} | lr {lr:.4e} | norm {norm:.6f} | {ms:.1f} ms "
              f"| {B * T / (ms / 1000):.0f} tok/s")
    if val_loader and args.val_every > 0:
        print(f"step {N}/{N} | val loss {evaluate(model, val_loader, val_batches, device, autocast):.4f}")
    if args.out_model:
        save_model_file(args.out_model, cfg, model.file_tensors())
        print(f"wrote the trained model to {args.out_model}")


@torch.no_grad()
def evaluate(model, loader, batches, device, autocast):
    """Mean loss over the first `batches` batches of the loader."""
    loader.reset()
    total = 0.0
    for _ in range(batches):
        x, y = loader.next_batch()
        if autocast is None:
            _, loss = model(x.to(device), y.to(device))
        else:
            with autocast:
                _, loss = model(x.to(device), y.to(device), exact_attention=False)
        total += loss.item()
    return total / batches


# ----------------------------------------------------------------------------------------------------
# command line


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_argument_group("mode (one of)")
    mode.add_argument("--reference-out", metavar="DIR", help="write DIR/model.bin and DIR/reference.bin")
    mode.add_argument("--train-data", metavar="GLOB", help="train on these token shards")
    m = p.add_argument_group("model (a preset, a model file, or sizes; explicit sizes override a preset)")
    m.add_argument("--preset", choices=list(PRESETS), help="GPT-2 sizes, V=50257, maxT=1024")
    m.add_argument("--init", metavar="MODEL", help="training: start from this model file")
    m.add_argument("--n-layer", type=int)
    m.add_argument("--n-head", type=int)
    m.add_argument("--n-embd", type=int)
    m.add_argument("--vocab-size", type=int)
    m.add_argument("--max-seq-len", type=int, help="rows of wpe (default: --seq-len, or 1024 with a preset)")
    m.add_argument("--perturb", action="store_true", default=None,
                   help="LN weights 1+N(0,0.1), LN/Linear biases N(0,0.02) (default: on for references only)")
    m.add_argument("--no-perturb", dest="perturb", action="store_false", help="LN weights 1, biases 0")
    m.add_argument("--seed", type=int, default=1337)
    b = p.add_argument_group("batch")
    b.add_argument("-b", "--batch-size", type=int, default=None, help="B (default 2 for references, 4 for training)")
    b.add_argument("-t", "--seq-len", type=int, default=None, help="T (default 32 for references, 1024 for training)")
    b.add_argument("--steps", type=int, default=10, help="number of AdamW steps (K, or N in training)")
    o = p.add_argument_group("optimizer and schedule")
    o.add_argument("--lr", type=float, default=1e-3, help="max learning rate")
    o.add_argument("--warmup", type=int, default=2)
    o.add_argument("--lr-schedule", choices=SCHEDULES, default="cosine")
    o.add_argument("--final-lr-frac", type=float, default=0.1, help="min lr = lr * this")
    o.add_argument("--wsd-frac", type=float, default=0.2, help="wsd: fraction of the steps in the final decay")
    o.add_argument("--weight-decay", type=float, default=0.1, help="on 2-D tensors only")
    o.add_argument("--beta1", type=float, default=0.9)
    o.add_argument("--beta2", type=float, default=0.95)
    o.add_argument("--eps", type=float, default=1e-8)
    o.add_argument("--grad-clip", type=float, default=1.0, help="global L2 norm; 0 = off")
    r = p.add_argument_group("reference")
    r.add_argument("--ref-dtype", choices=["float64", "float32"], default="float64")
    r.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    t = p.add_argument_group("training")
    t.add_argument("--val-data", metavar="GLOB")
    t.add_argument("--val-every", type=int, default=0, help="evaluate every this many steps (0 = never)")
    t.add_argument("--val-batches", type=int, default=10)
    t.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (a reference state is computed there in --ref-dtype)")
    t.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="bfloat16 = autocast")
    t.add_argument("--write-model", metavar="PATH", help="save the initial model (before training)")
    t.add_argument("--out-model", metavar="PATH", help="save the model after training")
    return p


def resolve_config(args):
    """GPTConfig from --init, --preset and the size flags; returns (cfg, initial tensors or None)."""
    sizes = {"n_layer": args.n_layer, "n_head": args.n_head, "n_embd": args.n_embd,
             "vocab_size": args.vocab_size, "max_seq_len": args.max_seq_len}
    if args.init:
        if args.preset or any(v is not None for v in sizes.values()):
            raise ConfigError("--init takes the sizes from the model file; do not combine it with --preset or sizes")
        cfg, tensors = load_model_file(args.init)
        return cfg, {n: torch.from_numpy(np.array(t)) for n, t in tensors.items()}
    if args.preset:
        L, H, C = PRESETS[args.preset]
        preset = {"n_layer": L, "n_head": H, "n_embd": C, "vocab_size": 50257, "max_seq_len": 1024}
        sizes = {k: preset[k] if v is None else v for k, v in sizes.items()}
    if sizes["max_seq_len"] is None:
        sizes["max_seq_len"] = args.seq_len
    missing = [k for k, v in sizes.items() if v is None]
    if missing:
        raise ConfigError("model sizes missing: give --preset, --init or " +
                          ", ".join("--" + k.replace("_", "-") for k in missing))
    return GPTConfig(**sizes), None


def float32(x):
    """x rounded to float32, as a Python float (inf where it overflows)"""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        if bool(args.reference_out) == bool(args.train_data):
            raise ConfigError("give exactly one of --reference-out DIR and --train-data GLOB")
        reference = bool(args.reference_out)
        if args.batch_size is None:
            args.batch_size = 2 if reference else 4
        if args.seq_len is None:
            args.seq_len = 32 if reference else 1024
        if args.batch_size <= 0 or args.seq_len <= 0:
            raise ConfigError(f"batch size and sequence length must be positive, got {args.batch_size} and {args.seq_len}")
        if args.steps < (0 if reference else 1) or args.warmup < 0:
            raise ConfigError(f"--steps must be {'non-negative' if reference else 'positive'} and --warmup "
                              f"non-negative, got {args.steps} and {args.warmup}")
        # the C trainers' ranges, on the values as given; then as float32 (what reference.bin stores, and
        # what the C trainers compute with): finite, eps above 0, betas below 1
        hyper = ("lr", "final_lr_frac", "wsd_frac", "weight_decay", "beta1", "beta2", "eps", "grad_clip")
        for name in hyper:
            v, top = getattr(args, name), 1 if name in ("final_lr_frac", "wsd_frac", "beta1", "beta2") else 1e30
            if not 0 <= v <= top or not math.isfinite(float32(v)):
                raise ConfigError(f"--{name.replace('_', '-')} must be in [0, {top:g}] (as the C trainers), got {v}")
        if float32(args.eps) <= 0:
            raise ConfigError(f"--eps must be above 0 (a parameter with a zero gradient would be updated by 0/0), got {args.eps}"
                              f" (0 in float32)")
        if float32(args.beta1) >= 1 or float32(args.beta2) >= 1:
            raise ConfigError(f"--beta1 and --beta2 must be below 1 in float32, got {args.beta1} and {args.beta2}")
        if not 0 <= args.seed <= 2**31 - 1:
            raise ConfigError(f"--seed must be in [0, 2^31 - 1] (the C trainers' range), got {args.seed}")
        if args.val_every < 0 or args.val_batches < 1:
            raise ConfigError(f"--val-every must be non-negative and --val-batches positive, got {args.val_every} and "
                              f"{args.val_batches}")
        try:
            device = torch.device(args.device)
        except RuntimeError:
            device = None
        if device is None or device.type not in ("cpu", "cuda"):
            raise ConfigError(f"--device {args.device}: not cpu, cuda or cuda:N")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"--device {args.device}: this torch ({torch.__version__}) sees no CUDA GPU")
        if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
            raise ConfigError(f"--device {args.device}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
        for flag, path in (("--write-model", args.write_model), ("--out-model", args.out_model)):
            folder = os.path.dirname(os.path.abspath(path)) if path else None
            if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
                raise ConfigError(f"{flag} {path}: {folder} is not a writable directory (checked before training)")
        if reference and os.path.exists(args.reference_out) and not os.path.isdir(args.reference_out):
            raise ConfigError(f"--reference-out {args.reference_out}: exists and is not a directory")
        if reference:
            for name in hyper:
                setattr(args, name, float32(getattr(args, name)))
        if args.perturb is None:
            args.perturb = reference
        torch.set_num_threads(max(1, args.threads))
        cfg, init = resolve_config(args)
        if reference:
            if args.init:
                raise ConfigError("--reference-out draws its own weights; --init is for training")
            write_reference(args, cfg)
        else:
            if init is None:
                init = init_tensors(cfg, torch.Generator().manual_seed(args.seed), args.perturb)
            train(args, cfg, init)
    except (ConfigError, FormatError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (MemoryError, RuntimeError) as e:
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        if not isinstance(e, MemoryError) and "allocate" not in text:
            raise
        print(f"error: out of memory ({text}): the model or batch is too large for this machine", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
