#!/usr/bin/env python3
"""Exactness of ./tokenize and ./prepare_data against tiktoken's gpt2 encoding.

The reference is PyPI tiktoken, loaded offline from GPT-2's own files (GPT2_DIR, default
../shared/data/gpt2) with tiktoken's gpt2 split pattern. Texts compared:
  * the fortunes corpus (data/setup.sh --fetch-only), through ./tokenize and through ./prepare_data
    (every shard's header, CRC and tokens against the documents encoded by the reference);
  * a multilingual, adversarial text generated here from code points (seeded): every code point of
    Unicode in shuffled runs, CJK, Arabic, emoji, combining marks, digits within letters, runs of
    spaces, tabs, newlines and Unicode spaces, 's vs 'S, long single pieces;
  * source code: the project's C/C++/Python files and the Python standard library's *.py files;
  * invalid UTF-8, which tiktoken does not define: the reference is tiktoken's pattern run by PyPI
    `regex` on the bytes decoded with errors="surrogateescape" (each invalid byte a lone surrogate,
    class "other"), then tiktoken's BPE on each piece's bytes. That reference is itself checked
    against tiktoken on valid text (regex's Unicode tables are newer than tiktoken's 16.0, so the
    invalid-UTF-8 text uses only long-assigned characters).
Also: ./tokenize --text inverts --ids on all of the above, and regenerating data/gpt2_tokenizer.bin
and llmc/unicode_tables.h gives identical bytes. Ends with "N passed, M failed".
"""
import glob
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import zlib

import regex
import tiktoken
import tiktoken.load
from tiktoken_ext.openai_public import r50k_pat_str

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2_DIR = os.environ.get("GPT2_DIR", os.path.join(ROOT, "..", "shared", "data", "gpt2"))
for name in ("vocab.bpe", "encoder.json"):
    if not os.path.isfile(os.path.join(GPT2_DIR, name)):
        print(f"FAIL {os.path.join(GPT2_DIR, name)} not found: set GPT2_DIR to a directory with OpenAI's GPT-2 vocab.bpe and "
              f"encoder.json\n0 passed, 1 failed")
        sys.exit(1)
EOT = 50256
passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("PASS: " if ok else "FAIL: ") + what, flush=True)
    passed += bool(ok)
    failed += not ok


def reference():
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(os.path.join(GPT2_DIR, "vocab.bpe"),
                                                           os.path.join(GPT2_DIR, "encoder.json"))
    return tiktoken.Encoding("gpt2-offline", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOT})


ENC = reference()
PATTERN = regex.compile(r50k_pat_str)


def ref_encode(data):
    """tiktoken's ids for valid UTF-8; the surrogateescape reference for anything else."""
    try:
        return ENC.encode_ordinary(data.decode("utf-8"))
    except UnicodeDecodeError:
        return ref_encode_bytes(data)


def ref_encode_bytes(data):
    ids = []
    for m in PATTERN.finditer(data.decode("utf-8", "surrogateescape")):
        ids += ENC._encode_single_piece(m.group().encode("utf-8", "surrogateescape"))
    return ids


def run(args, stdin=None):
    return subprocess.run(args, input=stdin, capture_output=True, check=True, cwd=ROOT).stdout


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare_cli(name, data, tmp):
    path = os.path.join(tmp, "case.bin")
    with open(path, "wb") as f:
        f.write(data)
    ours = [int(x) for x in run(["./tokenize", "--ids", path]).split()]
    ref = ref_encode(data)
    i = first_diff(ours, ref)
    detail = "identical" if ours == ref else f"first difference at token {i}: ours {ours[i:i + 5]}, tiktoken {ref[i:i + 5]}"
    check(ours == ref, f"{name}: {len(data)} bytes, {len(ref)} tiktoken ids vs ./tokenize --ids: {detail}")
    back = run(["./tokenize", "--text"], stdin=" ".join(map(str, ours)).encode())
    check(back == data, f"{name}: ./tokenize --text restores all {len(data)} bytes "
                        f"({'exact' if back == data else f'differs at byte {first_diff(back, data)}'})")


def fortunes_dir():
    out = subprocess.run(["bash", "data/setup.sh", "--fetch-only"], capture_output=True, cwd=ROOT, text=True)
    if out.returncode != 0:
        sys.exit(f"error: cannot obtain the fortunes corpus: {out.stderr.strip()}")
    return os.path.join(ROOT, out.stdout.strip().splitlines()[-1])


def fortune_files(d):
    """The files prepare_data takes from a directory: sorted, no hidden, no links, no NUL in 8 KiB."""
    files = []
    for path in sorted(os.path.join(d, n) for n in os.listdir(d) if not n.startswith(".")):
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            if b"\0" in f.read(8192):
                continue
        files.append(path)
    return files


def split_documents(data, sep):
    """prepare_data's documents of a text file split by separator lines: a line ends at b"\\n" (a lone
    b"\\r" ends none), one b"\\r" before it is not part of the line; empty documents are dropped"""
    docs, cur = [], []
    pieces = data.split(b"\n")
    for i, piece in enumerate(pieces):
        if (piece[:-1] if piece.endswith(b"\r") else piece) == sep:
            docs.append(b"".join(cur))
            cur = []
        else:
            cur.append(piece + (b"\n" if i + 1 < len(pieces) else b""))
    docs.append(b"".join(cur))
    return [d for d in docs if d]


def read_shards(out_dir, split):
    tokens, sizes = [], []
    for path in sorted(glob.glob(os.path.join(out_dir, f"{split}_*.bin"))):
        with open(path, "rb") as f:
            blob = f.read()
        h = struct.unpack("<256I", blob[:1024])
        payload = blob[1024:]
        n = h[5] | (h[6] << 32)
        ok = (h[0] == 0x4B4F5447 and h[1] == 1 and h[2] == zlib.crc32(payload) and h[3] == len(payload)
              and n * 2 == len(payload) and h[7] == 50257 and h[8] == 2)
        if not ok:
            return None, path
        tokens += struct.unpack(f"<{n}H", payload)
        sizes.append(n)
    return tokens, sizes


def test_prepare_data_fortunes(src, tmp):
    shard_tokens, fraction = 100000, 0.02
    out_dir = os.path.join(tmp, "fortunes")
    subprocess.run(["./prepare_data", "--input", src, "--output-dir", out_dir, "--doc-separator", "%",
                    "--val-fraction", str(fraction), "--shard-tokens", str(shard_tokens), "--threads", "2"],
                   check=True, cwd=ROOT, capture_output=True)
    expect = {"train": [], "val": []}
    i = 0
    for path in fortune_files(src):
        with open(path, "rb") as f:
            data = f.read()
        for doc in split_documents(data, b"%"):
            split = "val" if math.floor((i + 1) * fraction) > math.floor(i * fraction) else "train"
            expect[split] += [EOT] + ref_encode(doc)
            i += 1
    for split in ("train", "val"):
        tokens, sizes = read_shards(out_dir, split)
        if tokens is None:
            check(False, f"prepare_data fortunes {split}: shard {sizes} has a bad header or CRC")
            continue
        ok_sizes = all(s == shard_tokens for s in sizes[:-1]) and 0 < sizes[-1] <= shard_tokens
        j = first_diff(tokens, expect[split])
        check(tokens == expect[split] and ok_sizes,
              f"prepare_data fortunes {split}: {len(tokens)} tokens in {len(sizes)} shards (headers and CRC ok) vs "
              f"{len(expect[split])} from tiktoken per document with <|endoftext|>, val = every 1/{fraction:g}th "
              f"document: {'identical' if tokens == expect[split] else f'first difference at {j}'}")
    return i


def multilingual_text():
    """Adversarial multilingual text from code points (seeded, reproducible)."""
    rng = random.Random(1234)
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    rng.shuffle(cps)
    atoms = ["'s", "'S", "'ll", "'LL", "'re", "'ve", "'d", "'m", "'t", "''s", " 's", "x's", "1's", "!'s",
             " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\t \n", "\u00a0", "\u3000", "\u2028",
             "\u0085", "\u200b", "\u1680", "\u205f", "\x1c", "\x1f", "\u180e",
             "hello", " world", "Hello", "über", " naïve", "123", " 4567", "x86_64", "3rd", "a1b2c3", "١٢٣", "٣x",
             "日本語", "中文字符", " 한국어", "العربية", " مرحبا", "😀", "👍🏽", "🇫🇷", "👩‍💻", "e\u0301", "a\u0308\u0308",
             "\u0915\u094d\u0937", "Ⅻ", "½", "²", "𝟘𝟙", "𐍈", "🀄", "!", "?!", "...", " ---", "(", ")", "$", "%", "<|endoftext|>"]
    parts = []
    for k in range(0, 300000, 3):           # a third of all code points, three at a time between atoms
        parts.append("".join(chr(c) for c in cps[k:k + 3]))
        parts.append(rng.choice(atoms))
    for _ in range(40000):
        parts.append(rng.choice(atoms))
    parts.append(" " * 1000 + "x" + "\n" * 700 + "\t" * 300 + "a" * 600 + " " + "é" * 400 + "1" * 500 + "!" * 500)
    parts.append("   \n\t ")                # white space at the very end
    return "".join(parts).encode("utf-8")


def source_code(limit=1200000):
    files = sorted(glob.glob(os.path.join(ROOT, "**", "*.[ch]"), recursive=True) +
                   glob.glob(os.path.join(ROOT, "**", "*.py"), recursive=True) +
                   glob.glob(os.path.join(ROOT, "**", "*.cu"), recursive=True))
    stdlib = os.path.dirname(os.__file__)
    files += sorted(glob.glob(os.path.join(stdlib, "*.py")))
    out = bytearray()
    for path in files:
        if len(out) >= limit or "/data/cache/" in path:
            continue
        with open(path, "rb") as f:
            out += f.read()
    return bytes(out)


def invalid_utf8_text():
    rng = random.Random(99)
    valid = "Hello wörld's 'S 日本 😀 مرحبا 123 \t\n  ".encode("utf-8")
    pieces = []
    for _ in range(3000):
        kind = rng.random()
        if kind < 0.3:
            pieces.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 20))))
        elif kind < 0.6:
            b = bytearray(valid)
            for _ in range(3):
                b[rng.randrange(len(b))] = rng.randrange(256)
            pieces.append(bytes(b))
        else:
            pieces.append(rng.choice([b"\x80", b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80",
                                      b"\xc0\xaf", b"\xf4\x90\x80\x80", b" \x80", b"a\xffb", b"1\xfe2", b"'\x80s"]))
    return b"".join(pieces)


def test_regeneration(tmp):
    out = os.path.join(tmp, "gpt2_tokenizer.bin")
    subprocess.run([sys.executable, "dev/gen_tokenizer.py", "--gpt2-dir", GPT2_DIR, "--out", out], check=True, cwd=ROOT)
    with open(out, "rb") as f, open(os.path.join(ROOT, "data", "gpt2_tokenizer.bin"), "rb") as g:
        a, b = f.read(), g.read()
    check(a == b, f"dev/gen_tokenizer.py regenerates data/gpt2_tokenizer.bin byte for byte ({len(b)} bytes)")
    out = os.path.join(tmp, "unicode_tables.h")
    subprocess.run([sys.executable, "dev/gen_unicode_tables.py", "--out", out], check=True, cwd=ROOT)
    with open(out, "rb") as f, open(os.path.join(ROOT, "llmc", "unicode_tables.h"), "rb") as g:
        a, b = f.read(), g.read()
    check(a == b, f"dev/gen_unicode_tables.py regenerates llmc/unicode_tables.h byte for byte ({len(b)} bytes)")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_regeneration(tmp)
        src = fortunes_dir()
        corpus = b"".join(open(p, "rb").read() for p in fortune_files(src))
        compare_cli("fortunes corpus (all files concatenated)", corpus, tmp)
        docs = test_prepare_data_fortunes(src, tmp)
        print(f"  ({docs} fortunes)")
        multi = multilingual_text()
        compare_cli("multilingual/adversarial text", multi, tmp)
        code = source_code()
        compare_cli("source code", code, tmp)
        # PyPI regex has its own (newer) Unicode tables, so this check avoids the all-code-point text
        sample = corpus[:300000] + code[:300000] + "日本語 العربية 😀 e\u0301 ١٢٣ ½\u3000\u00a0".encode("utf-8")
        ref_ok = ref_encode_bytes(sample) == ENC.encode_ordinary(sample.decode("utf-8"))
        check(ref_ok, f"the surrogateescape reference equals tiktoken on {len(sample)} bytes of valid text")
        compare_cli("invalid UTF-8 (random bytes, corrupted text)", invalid_utf8_text(), tmp)
    print(f"{passed} passed, {failed} failed")
    return failed != 0


if __name__ == "__main__":
    sys.exit(main())
