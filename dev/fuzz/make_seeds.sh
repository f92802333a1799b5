#!/usr/bin/env bash
# Writes the seed corpora dev/fuzz/corpus/<harness>/ (committed; rerun with `make fuzz-seeds`).
# Binary seeds start with the repair byte 0 (dev/fuzz/fuzz_common.h). The model and state seeds
# come from a tiny ./train_gpt_cpu run; the shard and tokenizer seeds from Python writers that
# follow doc/formats.md.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
PYTHON=${PYTHON:-/usr/bin/python3}
out=dev/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out"
mkdir -p "$out"/{model,state,shard,tokenizer,flags,corpus}
prefix() { { printf '\x00'; cat "$1"; } >"$2"; }

"$PYTHON" dev/fuzz/write_shard.py "$tmp/shard.bin" 128 100
prefix "$tmp/shard.bin" "$out/shard/small_shard"
# regression: a token count of 2^63 + 50 whose doubled payload size wraps to the real 100 bytes
"$PYTHON" - "$tmp/shard.bin" "$out/shard/count_overflow" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read()[:1024 + 100])
struct.pack_into("<IIII", data, 12, 100, 0, 50, 0x80000000)
open(sys.argv[2], "wb").write(b"\x02" + bytes(data))
PY
# llm.c's format: 256 int32 (20240520, 1, count), uint16 tokens
"$PYTHON" - "$out/shard/llmc_shard" <<'PY'
import struct, sys
tokens = [(7 * i) % 50257 for i in range(100)]
open(sys.argv[1], "wb").write(b"\x00" + struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)) + struct.pack(f"<{len(tokens)}H", *tokens))
PY
./train_gpt_cpu --n-layer 1 --n-head 2 --n-embd 8 --vocab-size 128 -t 4 -b 2 -i "$tmp/shard.bin" -x 1 -s 0 -v 0 \
    -o "$tmp/ckpt" -n 1 >/dev/null
prefix "$tmp/ckpt/model_00000001.bin" "$out/model/tiny_model"
prefix "$tmp/ckpt/state_00000001_00000.bin" "$out/state/tiny_state"

"$PYTHON" - "$tmp/tok.bin" <<'PY'
import struct, sys, zlib
tokens = [bytes([b]) for b in range(256)] + [b"he", b"ll", b"llo", b" w", b"<|endoftext|>"]
merges = [(ord("h"), ord("e"), 256), (ord("l"), ord("l"), 257), (257, ord("o"), 258), (ord(" "), ord("w"), 259)]
payload = b"".join(struct.pack("<H", len(t)) + t for t in tokens) + b"".join(struct.pack("<3i", *m) for m in merges)
h = [0] * 256
h[0], h[1], h[2], h[3] = 0x45504247, 1, zlib.crc32(payload), len(payload)
h[5], h[6], h[7] = len(tokens), len(tokens) - 1, len(merges)
open(sys.argv[1], "wb").write(struct.pack("<256I", *h) + payload)
PY
prefix "$tmp/tok.bin" "$out/tokenizer/tiny_tokenizer"

printf -- '--n-layer\n2\n--n-head=4\n-b\n8\n--lr\n3e-4\n-k\nwsd\n--mock-data\n' >"$out/flags/typical"
printf -- '--max-step\n3\n' >"$out/flags/typo"
printf -- '-x=5\n--spike-zscore\n4.5\n--keep-last\n3\n--on-save-error\ncontinue\n--mock-data\n1\n' >"$out/flags/reliability"
printf '{"text": "Hello \\u00e9 \\"world\\"\\n", "id": 3, "meta": {"a": [1, 2.5e3, true, null]}}\n{"id": 4, "text": "\\ud83d\\ude00"}\n' >"$out/corpus/lines.jsonl"
printf 'First document.\nIt has two lines.\n---\nSecond document, caf\xc3\xa9.\n\n---\n' >"$out/corpus/text_with_separator"
echo "seed corpora written to $out: $(find "$out" -type f | wc -l) files"
