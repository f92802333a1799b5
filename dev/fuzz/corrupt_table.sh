#!/usr/bin/env bash
# Prints the markdown table of doc/reliability.md: each corrupted input, made here by patching a
# good file with Python (CRC repaired where the case is about a later check), and the first line
# ./train_gpt_cpu prints to stderr for it, with its exit status.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here" || exit 1
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" dev/fuzz/write_shard.py "$tmp/shard.bin" 128 2000
small=(--n-layer 1 --n-head 2 --n-embd 8 --vocab-size 128 -t 4 -b 2 -s 0 -v 0)
./train_gpt_cpu "${small[@]}" -i "$tmp/shard.bin" -x 2 -o "$tmp/good" -n 2 >/dev/null
# patch SRC DST OFFSET FORMAT VALUE [fixcrc] [seal]: DST = SRC with struct FORMAT VALUE at OFFSET; "cut N" truncates;
# fixcrc recomputes the payload CRC, seal a training state's header CRC (word 255)
patch() {
    "$PYTHON" - "$@" <<'PY'
import struct, sys, zlib
src, dst, off, fmt, val = sys.argv[1:6]
data = bytearray(open(src, "rb").read())
if fmt == "cut":
    data = data[:int(val)]
elif fmt == "append":
    data += b"\0" * int(val)
else:
    struct.pack_into(fmt, data, int(off), float(val) if fmt.endswith("f") else int(val, 0))
if "fixcrc" in sys.argv[6:]:
    struct.pack_into("<I", data, 8, zlib.crc32(bytes(data[1024:])))
if "seal" in sys.argv[6:]:
    struct.pack_into("<I", data, 1020, zlib.crc32(bytes(data[:1020])))
open(dst, "wb").write(bytes(data))
PY
}
row() { # row WHAT CMD...
    local what=$1
    shift
    "$@" >/dev/null 2>"$tmp/err"
    local rc=$?
    printf '| %s | %s | `%s` |\n' "$what" "$rc" "$(grep -m1 -E '^error' "$tmp/err" | sed "s|$tmp/||g; s/|/\\\\|/g")"
}
m=$tmp/good/model_00000002.bin
s=$tmp/good/state_00000002_00000.bin
run=(./train_gpt_cpu "${small[@]}" -i "$tmp/shard.bin" -x 3)
runm=(./train_gpt_cpu -t 4 -b 2 -s 0 -v 0 -i "$tmp/shard.bin" -x 3)
echo "| corrupted input | exit | message |"
echo "|---|---|---|"
patch "$m" "$tmp/m_trunc.bin" 0 cut 3000;                 row "model file truncated" "${runm[@]}" -e "$tmp/m_trunc.bin"
patch "$m" "$tmp/m_short.bin" 0 cut 100;                  row "model file shorter than the header" "${runm[@]}" -e "$tmp/m_short.bin"
patch "$m" "$tmp/m_long.bin" 0 append 7;                  row "model file with trailing bytes" "${runm[@]}" -e "$tmp/m_long.bin"
patch "$m" "$tmp/m_magic.bin" 0 '<I' 0x12345678;          row "model file wrong magic" "${runm[@]}" -e "$tmp/m_magic.bin"
patch "$m" "$tmp/m_version.bin" 4 '<i' 9;                 row "model file wrong version" "${runm[@]}" -e "$tmp/m_version.bin"
patch "$m" "$tmp/m_dtype.bin" 20 '<i' 7;                  row "model file unknown dtype" "${runm[@]}" -e "$tmp/m_dtype.bin"
patch "$m" "$tmp/m_heads.bin" 40 '<i' 3;                  row "model file n_head does not divide n_embd" "${runm[@]}" -e "$tmp/m_heads.bin"
patch "$m" "$tmp/m_layers.bin" 36 '<i' 2;                 row "model file n_layer disagrees with the payload size" "${runm[@]}" -e "$tmp/m_layers.bin"
patch "$m" "$tmp/m_count.bin" 48 '<i' 5;                  row "model file parameter count wrong" "${runm[@]}" -e "$tmp/m_count.bin"
patch "$m" "$tmp/m_crc.bin" 3000 '<B' 0x55;               row "model file payload byte flipped" "${runm[@]}" -e "$tmp/m_crc.bin"
patch "$m" "$tmp/m_nan.bin" 2048 '<f' nan fixcrc;         row "model file with a NaN weight (CRC valid)" "${runm[@]}" -e "$tmp/m_nan.bin"
patch "$m" "$tmp/m_inf.bin" 2048 '<f' inf fixcrc;         row "model file with an inf weight (CRC valid)" "${runm[@]}" -e "$tmp/m_inf.bin"
for case in "trunc cut 5000" "crc 6000 <B 0x55" "nan 2048 <f nan fixcrc seal" "header 104 <i 7" "rank 24 <i 3 seal" "sched 144 <i 9 seal" \
    "health 192 <i 99 seal"; do
    set -- $case
    name=$1
    shift
    if [ "$1" = cut ]; then patch "$s" "$tmp/s_$name.bin" 0 cut "$2"; else patch "$s" "$tmp/s_$name.bin" "$@"; fi
    mkdir -p "$tmp/ck_$name"
    cp "$m" "$tmp/good/done_00000002.txt" "$tmp/ck_$name/"
    cp "$tmp/s_$name.bin" "$tmp/ck_$name/state_00000002_00000.bin"
    "${run[@]}" -o "$tmp/ck_$name" -y 1 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    msg=$(cat "$tmp/out" "$tmp/err" | grep -m1 -E '^(error|resume: skipping)' | sed "s|$tmp/||g")
    printf '| state file (in a checkpoint, -y 1): %s | %s | `%s` |\n' "$name" "$rc" "$msg"
done
mkdir -p "$tmp/ck_marker"
cp "$m" "$s" "$tmp/ck_marker/"
printf 'step 7\nworld 1\n' >"$tmp/ck_marker/done_00000002.txt"
"${run[@]}" -o "$tmp/ck_marker" -y 1 >"$tmp/out" 2>"$tmp/err"
printf '| done marker names another step | %s | `%s` |\n' $? "$(grep -m1 'resume: skipping' "$tmp/out" | sed "s|$tmp/||g")"
sh=$tmp/shard.bin
patch "$sh" "$tmp/t_magic.bin" 0 '<I' 0x58585858;          row "token shard wrong magic" "${run[@]}" -i "$tmp/t_magic.bin"
patch "$sh" "$tmp/t_trunc.bin" 0 cut 2000;                 row "token shard truncated" "${run[@]}" -i "$tmp/t_trunc.bin"
patch "$sh" "$tmp/t_bpt.bin" 32 '<i' 4;                    row "token shard 4 bytes per token" "${run[@]}" -i "$tmp/t_bpt.bin"
patch "$sh" "$tmp/t_tok.bin" 1030 '<H' 500 fixcrc;         row "token shard token >= its vocab (CRC valid)" "${run[@]}" -i "$tmp/t_tok.bin"
patch "$sh" "$tmp/t_count.bin" 24 '<I' 0x80000000;         row "token shard count 2^63+N (2N wraps)" "${run[@]}" -i "$tmp/t_count.bin"
patch "$sh" "$tmp/t_crc.bin" 1500 '<B' 0x55;               row "token shard payload byte flipped" "${run[@]}" -i "$tmp/t_crc.bin"
row "token shard too short for one batch" ./train_gpt_cpu "${small[@]}" -t 4 -b 600 -i "$tmp/shard.bin" -x 1
patch "$m" "$tmp/tok_magic.bin" 0 '<I' 0x45504247;         row "a model file with a tokenizer's magic" "${run[@]}" --tokenizer "$tmp/tok_magic.bin" -s 1 --prompt hi
row "flag with a bad value" "${run[@]}" --lr 1e-3x
row "unknown flag" "${run[@]}" --keep-lst 3
row "--on-save-error with a bad value" "${run[@]}" --on-save-error maybe
row "--spike-window out of range" "${run[@]}" --spike-window 100
