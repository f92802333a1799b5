#!/usr/bin/env python3
"""
scripts/hf.py — Hugging Face interchange: our model files (doc/formats.md, GPTM) to and from a directory
in the layout of transformers' GPT2LMHeadModel (config.json + model.safetensors).

    python3 scripts/hf.py export MODEL.bin HF_DIR     # writes HF_DIR/config.json, HF_DIR/model.safetensors
    python3 scripts/hf.py import HF_DIR MODEL.bin     # e.g. a downloaded gpt2 directory, then fine-tune:
    ./train_gpt_cpu -e MODEL.bin ...                  #   or ./sample_gpt_cpu -e MODEL.bin

Layout (transformers' names; "h.i" is layer i; Conv1D weights are stored (in, out), i.e. transposed
against our (out, in)):
    transformer.wte.weight (V, C)            wte, the first V rows (our padded rows V..Vp-1 are dropped on
                                             export and re-added as zeros on import)
    transformer.wpe.weight (maxT, C)         wpe
    transformer.h.i.ln_1.weight/.bias        ln1w[i], ln1b[i]
    transformer.h.i.attn.c_attn.weight (C, 3C), .bias    qkvw[i]ᵀ, qkvb[i]
    transformer.h.i.attn.c_proj.weight (C, C), .bias     attprojw[i]ᵀ, attprojb[i]
    transformer.h.i.ln_2.weight/.bias        ln2w[i], ln2b[i]
    transformer.h.i.mlp.c_fc.weight (C, 4C), .bias       fcw[i]ᵀ, fcb[i]
    transformer.h.i.mlp.c_proj.weight (4C, C), .bias     fcprojw[i]ᵀ, fcprojb[i]
    transformer.ln_f.weight/.bias            lnfw, lnfb
lm_head.weight is tied to wte: export omits it, as transformers' save_pretrained does. Import also
accepts names without the "transformer." prefix (OpenAI's gpt2 upload), ignores the attention-mask
buffers (attn.bias, attn.masked_bias) of old checkpoints, accepts lm_head.weight only if it equals wte,
and widens F16/BF16/F64 tensors to fp32. Sharded checkpoints (model.safetensors.index.json) are read too.

safetensors is read and written here (the format: an 8-byte little-endian header length N, N bytes of
JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the raw
little-endian tensor bytes, offsets relative to the end of the header), so neither the safetensors nor the
transformers package is needed (model files are read and written by train_gpt.py, so numpy and torch are).
Errors are one line naming the file and the problem, with exit status 1.
"""
import argparse
import json
import math
import os
import struct
import sys

try:
    import numpy as np
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import train_gpt  # noqa: E402  (the model-file reader and writer, and GPTConfig)
    from train_gpt import FormatError, ConfigError  # noqa: E402
except ImportError as missing:
    sys.exit(f"error: scripts/hf.py needs numpy and torch ({missing}): run it with /usr/bin/python3 (Debian's "
             "python3-numpy, python3-torch) or pip install numpy torch")

SAFETENSORS_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"), "BF16": np.dtype("<u2")}
MASK_BUFFERS = (".attn.bias", ".attn.masked_bias")
# per layer: HF name -> (our tensor, transposed)
LAYER_TENSORS = [("ln_1.weight", "ln1w", False), ("ln_1.bias", "ln1b", False),
                 ("attn.c_attn.weight", "qkvw", True), ("attn.c_attn.bias", "qkvb", False),
                 ("attn.c_proj.weight", "attprojw", True), ("attn.c_proj.bias", "attprojb", False),
                 ("ln_2.weight", "ln2w", False), ("ln_2.bias", "ln2b", False),
                 ("mlp.c_fc.weight", "fcw", True), ("mlp.c_fc.bias", "fcb", False),
                 ("mlp.c_proj.weight", "fcprojw", True), ("mlp.c_proj.bias", "fcprojb", False)]


# ----------------------------------------------------------------------------------------------------
# safetensors

def safetensors_write(path, tensors):
    """tensors: list of (name, fp32 array), written in this order, contiguous; atomically (train_gpt.atomic_output)."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, t in tensors:
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # pad so the data starts 8-byte aligned
    with train_gpt.atomic_output(path) as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, t in tensors:
            f.write(np.ascontiguousarray(t, dtype="<f4").tobytes())


def safetensors_read(path):
    """Returns {name: fp32 array}; checks the header's structure, dtypes, shapes and offsets."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                raise FormatError(f"{path}: not a safetensors file: {size} bytes, shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", raw)
            if n > size - 8 or n > 100 << 20:
                raise FormatError(f"{path}: not a safetensors file: header length {n} but the file has {size} bytes")
            text = f.read(n)
    except OSError as e:
        raise FormatError(f"{path}: cannot read: {e.strerror}") from None
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: safetensors header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: safetensors header is not a JSON object")
    data_start, data_bytes = 8 + n, size - 8 - n
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=data_start, shape=(data_bytes,)) if data_bytes else b""
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, offsets = (info.get(k) for k in ("dtype", "shape", "data_offsets")) if isinstance(info, dict) else (None,) * 3
        if not (isinstance(dtype, str) and isinstance(shape, list) and all(is_int(d) for d in shape) and
                isinstance(offsets, list) and len(offsets) == 2 and all(is_int(o) for o in offsets)):
            raise FormatError(f"{path}: tensor {name}: header entry {info!r} needs a dtype string, a shape of integers "
                              "and data_offsets [begin, end] of integers")
        begin, end = offsets
        if name.endswith(MASK_BUFFERS):  # old checkpoints' attention-mask buffers (often BOOL or U8): never read
            continue
        if dtype not in SAFETENSORS_DTYPES:
            raise FormatError(f"{path}: tensor {name} has dtype {dtype}; supported: {', '.join(SAFETENSORS_DTYPES)}")
        dt = SAFETENSORS_DTYPES[dtype]
        if min(shape, default=0) < 0 or not 0 <= begin <= end <= data_bytes or end - begin != math.prod(shape) * dt.itemsize:
            raise FormatError(f"{path}: tensor {name}: shape {shape} of {dtype} does not fit data_offsets "
                              f"[{begin}, {end}] in {data_bytes} data bytes")
        t = np.frombuffer(data[begin:end], dtype=dt).reshape(shape)
        if dtype == "BF16":  # the top half of an fp32
            t = (t.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = t.astype(np.float32)
    return tensors


# ----------------------------------------------------------------------------------------------------
# export

def hf_config(cfg):
    """config.json of transformers' GPT2LMHeadModel for our model (no dropout: ours trains without it). The
    bos/eos ids are <|endoftext|>'s (50256) for GPT-2's vocabulary; another vocabulary has no known one (null)."""
    eot = 50256 if cfg.vocab_size == 50257 else None
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": cfg.vocab_size, "n_positions": cfg.max_seq_len, "n_ctx": cfg.max_seq_len,
        "n_embd": cfg.n_embd, "n_layer": cfg.n_layer, "n_head": cfg.n_head, "n_inner": None,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "initializer_range": 0.02,
        "attn_pdrop": 0.0, "embd_pdrop": 0.0, "resid_pdrop": 0.0,
        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True, "bos_token_id": eot, "eos_token_id": eot,
        "torch_dtype": "float32", "use_cache": True,
    }


def export_model(model_path, out_dir):
    cfg, t = train_gpt.load_model_file(model_path)
    V = cfg.vocab_size
    if np.any(t["wte"][V:]):
        print(f"warning: {model_path}: padded rows {V}..{cfg.padded_vocab_size - 1} of wte are not zero; "
              f"dropped (they never reach the logits)", file=sys.stderr)
    tensors = [("transformer.wte.weight", t["wte"][:V]), ("transformer.wpe.weight", t["wpe"])]
    for i in range(cfg.n_layer):
        for hf_name, ours, transposed in LAYER_TENSORS:
            tensors.append((f"transformer.h.{i}.{hf_name}", t[ours][i].T if transposed else t[ours][i]))
    tensors += [("transformer.ln_f.weight", t["lnfw"]), ("transformer.ln_f.bias", t["lnfb"])]
    os.makedirs(out_dir, exist_ok=True)
    safetensors_write(os.path.join(out_dir, "model.safetensors"), tensors)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(hf_config(cfg), f, indent=2)
        f.write("\n")
    print(f"exported {model_path} ({cfg}) to {out_dir}/config.json and model.safetensors")


# ----------------------------------------------------------------------------------------------------
# import

def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def read_hf_config(path):
    """GPTConfig from a GPT-2 config.json; rejects settings our model does not compute."""
    try:
        with open(path) as f:
            c = json.load(f)
    except OSError as e:
        raise FormatError(f"{path}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise FormatError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(c, dict) or c.get("model_type") != "gpt2":
        raise FormatError(f"{path}: model_type is {c.get('model_type') if isinstance(c, dict) else None!r}, expected 'gpt2'")
    needs = [("activation_function", c.get("activation_function", "gelu_new") in ("gelu_new", "gelu_pytorch_tanh"),
              "gelu_new (the tanh approximation)"),
             ("layer_norm_epsilon", is_number(c.get("layer_norm_epsilon", 1e-5)) and
              abs(float(c.get("layer_norm_epsilon", 1e-5)) - 1e-5) < 1e-12, "1e-05"),
             ("n_inner", c.get("n_inner") in (None, 4 * c.get("n_embd", 0)), "null or 4 * n_embd"),
             ("scale_attn_weights", c.get("scale_attn_weights", True) is True, "true"),
             ("scale_attn_by_inverse_layer_idx", c.get("scale_attn_by_inverse_layer_idx", False) is False, "false"),
             ("tie_word_embeddings", c.get("tie_word_embeddings", True) is True, "true (lm_head = wte)")]
    for name, ok, expected in needs:
        if not ok:
            raise FormatError(f"{path}: {name} is {c.get(name)!r}; our model needs {expected}")
    try:
        return train_gpt.GPTConfig(c["n_layer"], c["n_head"], c["n_embd"], c["vocab_size"], c.get("n_positions", c.get("n_ctx")))
    except KeyError as e:
        raise FormatError(f"{path}: lacks {e.args[0]}") from None
    except ConfigError as e:
        raise FormatError(f"{path}: {e}") from None


def read_hf_weights(hf_dir):
    """{name: fp32 array} from model.safetensors, or from the shards of model.safetensors.index.json."""
    single, index = os.path.join(hf_dir, "model.safetensors"), os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.exists(single):
        return single, safetensors_read(single)
    if not os.path.exists(index):
        raise FormatError(f"{hf_dir}: has neither model.safetensors nor model.safetensors.index.json")
    try:
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    except (OSError, ValueError, KeyError, AttributeError) as e:
        raise FormatError(f"{index}: not a safetensors index with a weight_map: {e}") from None
    tensors = {}
    for shard in shards:
        tensors.update(safetensors_read(os.path.join(hf_dir, shard)))
    return index, tensors


def import_model(hf_dir, model_path):
    cfg = read_hf_config(os.path.join(hf_dir, "config.json"))
    source, raw = read_hf_weights(hf_dir)
    weights = {(name[len("transformer."):] if name.startswith("transformer.") else name): t for name, t in raw.items()}
    L, C, V, Vp, maxT = cfg.n_layer, cfg.n_embd, cfg.vocab_size, cfg.padded_vocab_size, cfg.max_seq_len
    shapes = {"wte.weight": (V, C), "wpe.weight": (maxT, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    layer_shapes = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C), "attn.c_attn.bias": (3 * C,),
                    "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,), "ln_2.weight": (C,), "ln_2.bias": (C,),
                    "mlp.c_fc.weight": (C, 4 * C), "mlp.c_fc.bias": (4 * C,), "mlp.c_proj.weight": (4 * C, C),
                    "mlp.c_proj.bias": (C,)}
    for i in range(L):
        shapes.update({f"h.{i}.{k}": s for k, s in layer_shapes.items()})
    for name, shape in shapes.items():
        if name not in weights:
            raise FormatError(f"{source}: lacks tensor {name} (or transformer.{name}) for {cfg}")
        if weights[name].shape != shape:
            raise FormatError(f"{source}: tensor {name} has shape {list(weights[name].shape)}, config.json needs {list(shape)}")
    head = weights.pop("lm_head.weight", None)
    if head is not None and not np.array_equal(head, weights["wte.weight"]):
        raise FormatError(f"{source}: lm_head.weight differs from wte.weight; our model ties them")
    unknown = sorted(set(weights) - set(shapes))
    if unknown:
        raise FormatError(f"{source}: unexpected tensor {unknown[0]} ({len(unknown)} unexpected in all)")
    t = {"wte": np.zeros((Vp, C), np.float32), "wpe": weights["wpe.weight"],
         "lnfw": weights["ln_f.weight"], "lnfb": weights["ln_f.bias"]}
    t["wte"][:V] = weights["wte.weight"]
    for hf_name, ours, transposed in LAYER_TENSORS:
        t[ours] = np.stack([weights[f"h.{i}.{hf_name}"].T if transposed else weights[f"h.{i}.{hf_name}"] for i in range(L)])
    train_gpt.save_model_file(model_path, cfg, t)
    print(f"imported {hf_dir} ({cfg}) to {model_path}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="model file -> Hugging Face directory")
    e.add_argument("model", help="our model file (GPTM)")
    e.add_argument("out_dir", help="directory for config.json and model.safetensors")
    i = sub.add_parser("import", help="Hugging Face directory -> model file")
    i.add_argument("hf_dir", help="directory with config.json and model.safetensors")
    i.add_argument("model", help="model file to write (GPTM, fp32)")
    args = p.parse_args(argv)
    try:
        if args.command == "export":
            export_model(args.model, args.out_dir)
        else:
            import_model(args.hf_dir, args.model)
    except (FormatError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"error: {err.filename2 or err.filename}: {err.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
