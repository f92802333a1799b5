#!/usr/bin/env bash
# Generates the reference states the C/CUDA tests read: OUTDIR/<name>/model.bin and reference.bin
# (doc/formats.md), one per config below. Usage: dev/gen_references.sh OUTDIR
# The configs are chosen to be awkward (odd T, V not a multiple of 128, one head, B=1) and to cover
# every learning-rate schedule and every clipping case (some steps clipped, none, all), as printed
# in the "(clipped)" marks of each run. All six take a few seconds.
set -euo pipefail
if [ $# -ne 1 ]; then echo "usage: $0 OUTDIR" >&2; exit 2; fi
out=$1
PYTHON=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")/.." && pwd)

gen() {
    local name=$1; shift
    echo "== $name: $*"
    "$PYTHON" "$here/train_gpt.py" --reference-out "$out/$name" --steps 10 "$@"
}
# a: V a multiple of 128; cosine; clipping in some steps only
gen a_L2_H4_C64_T32_V512 --n-layer 2 --n-head 4 --n-embd 64 --seq-len 32 --batch-size 2 --vocab-size 512 \
    --seed 1 --lr-schedule cosine --grad-clip 1.6
# b: odd T, 3 heads, V=300 padded to 384; linear; clipping in some steps only
gen b_L2_H3_C96_T37_V300 --n-layer 2 --n-head 3 --n-embd 96 --seq-len 37 --batch-size 2 --vocab-size 300 \
    --seed 2 --lr-schedule linear --grad-clip 2.0
# c: one layer, one head, V=129 padded to 256, B=3; wsd with 3 decay steps; no clipping
gen c_L1_H1_C32_T16_V129 --n-layer 1 --n-head 1 --n-embd 32 --seq-len 16 --batch-size 3 --vocab-size 129 \
    --seed 3 --lr-schedule wsd --wsd-frac 0.3 --grad-clip 0
# d: three layers, B=1, V=1000 padded to 1024, wpe longer than T; constant lr, no warmup; every step clipped
gen d_L3_H2_C48_T64_V1000 --n-layer 3 --n-head 2 --n-embd 48 --seq-len 64 --max-seq-len 80 --batch-size 1 \
    --vocab-size 1000 --seed 4 --lr-schedule constant --warmup 0 --grad-clip 1.0
# e: head size 7 (8 heads, C=56; a head size not a multiple of 8, so the GPU flash attention copies element by element,
# odd heads at odd addresses), T=29, V=200 padded to 256; cosine; clipping in some steps only
gen e_L2_H8_C56_T29_V200 --n-layer 2 --n-head 8 --n-embd 56 --seq-len 29 --batch-size 2 --vocab-size 200 \
    --seed 5 --lr-schedule cosine --grad-clip 1.5
# f: channels 45 (no multiple of 8 nor 4: the GPU's layernorm, encoder and column sums work element by element, every
# row and layer slice at an odd address; flash attention unaligned), 3 heads of 15, T=19, V=97 padded to 128; linear;
# clipping in some steps only
gen f_L2_H3_C45_T19_V97 --n-layer 2 --n-head 3 --n-embd 45 --seq-len 19 --batch-size 2 --vocab-size 97 \
    --seed 6 --lr-schedule linear --grad-clip 1.7
