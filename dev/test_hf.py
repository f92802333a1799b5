#!/usr/bin/env python3
"""
dev/test_hf.py — tests of scripts/hf.py (Hugging Face export/import), against independent readers:

  round trip   model file -> export -> import -> the same file, byte for byte (two configs: V=300 padded
               to 384 with 2 layers and 3 heads; V=129 with 1 layer and 1 head)
  safetensors  the `safetensors` package reads the export; each tensor equals the model file's tensor
               mapped as doc/formats.md's table says (transposed Conv1D weights, wte without padded rows)
  transformers GPT2LMHeadModel.from_pretrained(export) gives the logits of train_gpt.py's GPT on the same
               tokens (both in float64; relative L2 bound 1e-10)
  import       a GPT2LMHeadModel made and saved by transformers (save_pretrained), and the same weights
               under OpenAI's unprefixed names with mask buffers and a tied lm_head, import to the same
               model file, whose train_gpt.py logits equal transformers' (1e-10)
  C side       ./train_gpt_cpu -e IMPORTED: its step-0 validation loss equals transformers' loss on the
               same tokens (relative 1e-5); ./sample_gpt_cpu --temperature 0 generates transformers'
               greedy tokens (argmax of transformers' logits, token by token)
  bad input    wrong model_type, unsupported activation, truncated/garbled safetensors, a missing tensor,
               a wrong shape, an untied lm_head, a missing directory: exit 1 with one "error:" line naming
               the file
Prints each comparison and its worst error; ends with "N passed, M failed" (non-zero exit on failure).
Needs numpy and torch; safetensors and transformers from PyPI (a missing one is a failure, not a skip).
"""
import json
import os
import shutil
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

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", OMP_NUM_THREADS="2")
HF = [sys.executable, os.path.join(ROOT, "scripts", "hf.py")]
PIP = "/usr/bin/python3 -m pip install --break-system-packages safetensors transformers==4.46.3"


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)


def why(r):
    """'' for a command that succeeded, else its exit status and the tail of its stderr"""
    return "" if r.returncode == 0 else f" -- exit {r.returncode}: {r.stderr.strip()[-300:]}"


def random_model(path, L, H, C, V, T, seed):
    """A model file with weights N(0, 0.1) (sharp enough that attention and logits are far from
    uniform), LayerNorm weights 1 + N(0, 0.1), zero padded rows. Written by train_gpt.py's writer."""
    cfg = train_gpt.GPTConfig(L, H, C, V, T)
    rng = np.random.default_rng(seed)
    t = {n: rng.normal(0.0, 0.1, s).astype(np.float32) for n, s in cfg.tensor_shapes()}
    for n in ("ln1w", "ln2w", "lnfw"):
        t[n] += 1.0
    t["wte"][V:] = 0.0
    train_gpt.save_model_file(path, cfg, t)


def our_logits(model_path, tokens):
    """train_gpt.py's GPT in float64 on tokens (B, T)."""
    cfg, t = train_gpt.load_model_file(model_path)
    model = train_gpt.GPT(cfg, {n: torch.from_numpy(np.array(a, np.float64)) for n, a in t.items()})
    with torch.no_grad():
        return model(torch.from_numpy(tokens).long())[0].numpy()


def hf_model(hf_dir):
    from transformers import GPT2LMHeadModel
    return GPT2LMHeadModel.from_pretrained(hf_dir).double().eval()


def hf_logits(model, tokens):
    with torch.no_grad():
        return model(torch.from_numpy(tokens).long()).logits.numpy()


def expected_hf_tensors(model_path):
    """doc/formats.md's table, written out here independently of scripts/hf.py."""
    cfg, t = train_gpt.load_model_file(model_path)
    out = {"transformer.wte.weight": t["wte"][:cfg.vocab_size], "transformer.wpe.weight": t["wpe"],
           "transformer.ln_f.weight": t["lnfw"], "transformer.ln_f.bias": t["lnfb"]}
    for i in range(cfg.n_layer):
        p = f"transformer.h.{i}."
        out.update({p + "ln_1.weight": t["ln1w"][i], p + "ln_1.bias": t["ln1b"][i],
                    p + "attn.c_attn.weight": t["qkvw"][i].T, p + "attn.c_attn.bias": t["qkvb"][i],
                    p + "attn.c_proj.weight": t["attprojw"][i].T, p + "attn.c_proj.bias": t["attprojb"][i],
                    p + "ln_2.weight": t["ln2w"][i], p + "ln_2.bias": t["ln2b"][i],
                    p + "mlp.c_fc.weight": t["fcw"][i].T, p + "mlp.c_fc.bias": t["fcb"][i],
                    p + "mlp.c_proj.weight": t["fcprojw"][i].T, p + "mlp.c_proj.bias": t["fcprojb"][i]})
    return out


def write_shard(path, tokens, vocab):
    toks = np.asarray(tokens, np.uint16)
    n = len(toks)
    train_gpt.write_binary_file(path, train_gpt.SHARD_MAGIC, train_gpt.SHARD_VERSION,
                                {5: n & 0xFFFFFFFF, 6: n >> 32, 7: vocab, 8: 2}, [toks])


def expect_error(what, cmd, pattern):
    r = run(cmd)
    lines = r.stderr.strip().splitlines()
    first = lines[0] if lines else ""
    ok = r.returncode == 1 and len(lines) == 1 and first.startswith("error:") and pattern in first
    check(ok, f"{what}: exit {r.returncode}: {first if ok else r.stderr.strip()[-400:]}")


def main():
    try:
        import safetensors.numpy
        import transformers
    except ImportError as e:
        check(False, f"independent readers missing ({e}); install them with: {PIP}")
        return end()
    print(f"independent readers: safetensors {safetensors.__version__}, transformers {transformers.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        return run_tests(tmp)


def run_tests(tmp):
    import safetensors.numpy
    from transformers import GPT2Config, GPT2LMHeadModel

    # ------------------------------------------------------------ export -> import round trips
    for name, (L, H, C, V, T) in {"L2_H3_C96_V300": (2, 3, 96, 300, 40), "L1_H1_C32_V129": (1, 1, 32, 129, 17),
                                  "L1_H2_C16_V50257": (1, 2, 16, 50257, 8)}.items():
        model = os.path.join(tmp, f"{name}.bin")
        export_dir, back = os.path.join(tmp, f"{name}_hf"), os.path.join(tmp, f"{name}_back.bin")
        random_model(model, L, H, C, V, T, seed=L * 1000 + V)
        r = run(HF + ["export", model, export_dir])
        if not check(r.returncode == 0, f"{name}: export{why(r)}"):
            continue
        with open(os.path.join(export_dir, "config.json")) as f:
            conf = json.load(f)
        want = {"model_type": "gpt2", "n_layer": L, "n_head": H, "n_embd": C, "vocab_size": V, "n_positions": T,
                "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
        eot = 50256 if V == 50257 else None  # <|endoftext|>; outside GPT-2's vocabulary none is known (V - 1 is a token)
        want.update(bos_token_id=eot, eos_token_id=eot)
        bad = {k: conf.get(k) for k, v in want.items() if conf.get(k) != v}
        check(not bad, f"{name}: config.json has {want}" + (f"; differs: {bad}" if bad else ""))
        st = safetensors.numpy.load_file(os.path.join(export_dir, "model.safetensors"))
        exp = expected_hf_tensors(model)
        worst = max((rel_l2(st[k], v) if st[k].shape == v.shape else np.inf for k, v in exp.items() if k in st), default=np.inf)
        check(set(st) == set(exp) and worst == 0.0 and all(a.dtype == np.float32 for a in st.values()),
              f"{name}: safetensors package reads {len(st)} fp32 tensors, names and values as formats.md maps "
              f"them (worst rel L2 {worst:.1e}, missing {sorted(set(exp) - set(st))[:3]}, extra {sorted(set(st) - set(exp))[:3]})")
        r = run(HF + ["import", export_dir, back])
        same = r.returncode == 0 and open(model, "rb").read() == open(back, "rb").read()
        check(same, f"{name}: export -> import gives a byte-identical model file ({os.path.getsize(model)} bytes)"
                    f"{why(r)}")
        tokens = np.random.default_rng(1).integers(0, V, size=(2, T))
        ours, theirs = our_logits(back, tokens), hf_logits(hf_model(export_dir), tokens)
        err = rel_l2(theirs, ours) if theirs.shape == ours.shape else np.inf
        check(err < 1e-10, f"{name}: transformers on the export vs train_gpt.py on the import, logits {tokens.shape} x {V}: "
                           f"rel L2 {err:.2e} (bound 1e-10, float64)")

    # ------------------------------------------------------------ import what transformers saved
    L, H, C, V, T = 2, 2, 64, 200, 32
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(n_layer=L, n_head=H, n_embd=C, vocab_size=V, n_positions=T, attn_pdrop=0.0,
                                    embd_pdrop=0.0, resid_pdrop=0.0)).eval()
    with torch.no_grad():  # sharper than the 0.02 init, so the comparison means something
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    hf_dir, imported = os.path.join(tmp, "hf_native"), os.path.join(tmp, "imported.bin")
    hf.save_pretrained(hf_dir, safe_serialization=True)
    r = run(HF + ["import", hf_dir, imported])
    check(r.returncode == 0, f"import of transformers' save_pretrained directory{why(r)}")
    tokens = np.random.default_rng(2).integers(0, V, size=(3, T))
    ref = hf_logits(hf.double(), tokens)
    err = rel_l2(our_logits(imported, tokens), ref)
    check(err < 1e-10, f"train_gpt.py on the import vs transformers, logits {tokens.shape} x {V}: rel L2 {err:.2e} (bound 1e-10)")

    # the same weights under OpenAI's names: no "transformer." prefix, mask buffers, a tied lm_head
    sd = {k[len("transformer."):] if k.startswith("transformer.") else k: v.float().numpy().copy()
          for k, v in hf.float().state_dict().items()}
    sd["lm_head.weight"] = sd["wte.weight"].copy()
    for i in range(L):
        sd[f"h.{i}.attn.bias"] = np.tril(np.ones((1, 1, T, T), bool if i == 0 else np.float32))  # BOOL: a dtype not read
        sd[f"h.{i}.attn.masked_bias"] = np.array(-1e4, np.float32)
    openai_dir, openai_bin = os.path.join(tmp, "openai"), os.path.join(tmp, "openai.bin")
    os.makedirs(openai_dir)
    shutil.copy(os.path.join(hf_dir, "config.json"), openai_dir)
    safetensors.numpy.save_file(sd, os.path.join(openai_dir, "model.safetensors"))
    r = run(HF + ["import", openai_dir, openai_bin])
    check(r.returncode == 0 and open(openai_bin, "rb").read() == open(imported, "rb").read(),
          f"OpenAI-style names, mask buffers and tied lm_head import to the same model file{why(r)}")

    # ------------------------------------------------------------ the C side on the imported model
    B = 2
    stream = np.random.default_rng(3).integers(0, V, size=B * T + 1)
    shard = os.path.join(tmp, "val_000.bin")
    write_shard(shard, stream, V)
    x, y = stream[:-1].reshape(B, T), stream[1:].reshape(B, T)
    logits = torch.from_numpy(hf_logits(hf, x))
    hf_loss = float(torch.nn.functional.cross_entropy(logits.reshape(-1, V), torch.from_numpy(y).reshape(-1)))
    r = run(["./train_gpt_cpu", "-e", imported, "-i", shard, "-j", shard, "-b", str(B), "-t", str(T), "-x", "1",
             "-v", "1", "-m", "1", "-s", "0", "--shuffle", "0"])
    val = [float(line.split("| val loss")[1]) for line in r.stdout.splitlines() if line.startswith("step") and
           "/1 | val loss" in line]
    err = abs(val[0] - hf_loss) / hf_loss if val else np.inf
    check(r.returncode == 0 and err < 1e-5, f"train_gpt_cpu -e imported: step-0 val loss {val[0] if val else None} vs "
                                            f"transformers {hf_loss:.6f}: rel {err:.1e} (bound 1e-5){why(r)}")
    n_new = T - 1
    ids = [0]  # the context sample_gpt_cpu starts from without a tokenizer
    for _ in range(n_new):  # greedy decoding by transformers' forward (its generate() needs torch.distributed)
        ids.append(int(hf_logits(hf, np.array([ids]))[0, -1].argmax()))
    greedy = ids[1:]
    r = run(["./sample_gpt_cpu", "-e", imported, "--ids", "--temperature", "0", "-g", str(n_new)])
    ours = [int(s) for s in r.stdout.split()] if r.returncode == 0 else []
    check(ours == greedy, f"sample_gpt_cpu --temperature 0 -g {n_new} on the import equals greedy decoding "
                          f"by transformers: {ours[:8]}... vs {greedy[:8]}...{why(r)}")

    # ------------------------------------------------------------ bad input
    def variant(name, config_edit=None, weights_edit=None, raw=None):
        d = os.path.join(tmp, name)
        shutil.copytree(hf_dir, d)
        if config_edit:
            with open(os.path.join(d, "config.json")) as f:
                c = json.load(f)
            config_edit(c)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(c, f)
        if weights_edit:
            w = safetensors.numpy.load_file(os.path.join(d, "model.safetensors"))
            weights_edit(w)
            safetensors.numpy.save_file(w, os.path.join(d, "model.safetensors"))
        if raw is not None:
            with open(os.path.join(d, "model.safetensors"), "wb") as f:
                f.write(raw)
        return d

    out = os.path.join(tmp, "bad.bin")
    st_bytes = open(os.path.join(hf_dir, "model.safetensors"), "rb").read()
    expect_error("model_type bert", HF + ["import", variant("bert", lambda c: c.update(model_type="bert")), out],
                 "config.json: model_type is 'bert'")
    expect_error("activation relu", HF + ["import", variant("relu", lambda c: c.update(activation_function="relu")), out],
                 "activation_function is 'relu'")
    expect_error("truncated safetensors", HF + ["import", variant("trunc", raw=st_bytes[:len(st_bytes) // 2]), out],
                 "model.safetensors: tensor")
    expect_error("huge header length", HF + ["import", variant("huge", raw=b"\xff" * 64), out],
                 "model.safetensors: not a safetensors file")
    expect_error("header not JSON", HF + ["import", variant("nojson", raw=(16).to_bytes(8, "little") + b"{not json at all" + b"\0" * 8), out],
                 "not valid JSON")
    expect_error("missing tensor", HF + ["import", variant("missing", weights_edit=lambda w: w.pop("transformer.h.1.mlp.c_fc.bias")), out],
                 "lacks tensor h.1.mlp.c_fc.bias")
    expect_error("wrong shape", HF + ["import", variant("shape", lambda c: c.update(n_embd=128, n_head=2)), out],
                 "has shape")
    expect_error("untied lm_head", HF + ["import", variant("untied", weights_edit=lambda w: w.update(
        {"lm_head.weight": w["transformer.wte.weight"] + 1})), out], "lm_head.weight differs")
    expect_error("layer_norm_epsilon a string", HF + ["import", variant("eps", lambda c: c.update(layer_norm_epsilon="abc")), out],
                 "layer_norm_epsilon is 'abc'")
    header = b'{"transformer.wte.weight":{"dtype":"F32","shape":[2,2],"data_offsets":["0","16"]}}'
    expect_error("safetensors offsets that are strings", HF + ["import", variant(
        "offsets", raw=len(header).to_bytes(8, "little") + header + b"\0" * 16), out], "data_offsets [begin, end] of integers")
    expect_error("missing directory", HF + ["import", os.path.join(tmp, "nowhere"), out], "nowhere/config.json: cannot read")
    expect_error("output in a missing directory (named, not its .tmp)", HF + ["import", hf_dir, os.path.join(tmp, "gone", "x.bin")],
                 "gone/x.bin: No such file or directory")
    taken = os.path.join(tmp, "taken")  # the output path is a directory: the rename fails after the whole write
    os.makedirs(taken)
    expect_error("output path is a directory (the error names it, not the .tmp file)", HF + ["import", hf_dir, taken],
                 r"taken: Is a directory")
    check(not os.path.exists(taken + ".tmp"), "a failed write leaves no .tmp file behind")
    expect_error("export of a non-model", HF + ["export", os.path.join(hf_dir, "config.json"), os.path.join(tmp, "x")],
                 "config.json: not a model file")
    return end()


if __name__ == "__main__":
    sys.exit(main())
