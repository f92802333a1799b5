#!/usr/bin/env bash
# data/setup.sh — the default corpus, with no internet beyond the Debian archive.
#
# Fetches Debian's fortune cookie files (packages `fortunes` and `fortunes-min`: about 2.6 MB of
# English prose and verse, ~15,000 fortunes, ~716K GPT-2 tokens) WITHOUT root:
#   apt-get download fortunes fortunes-min   (into data/cache/)
#   dpkg-deb -x ...                          (into data/cache/fortunes/)
# If apt-get download fails (no apt lists, offline) it falls back to an installed copy in
# /usr/share/games/fortunes (sudo apt-get install fortunes), and otherwise stops with an error.
# Then it builds ./prepare_data and writes data/fortunes/{train,val}_NNNNNN.bin: one document per
# fortune (the files separate them with lines holding a single '%'), 2% of the fortunes for val.
#
# Usage: data/setup.sh [--fetch-only]     (prints the corpus directory on its last line)
# The tokenizer (data/gpt2_tokenizer.bin) is committed; dev/gen_tokenizer.py regenerates it.
set -euo pipefail
case "${1:-}" in
"" | --fetch-only) [ $# -le 1 ] || { echo "error: data/setup.sh takes at most one argument, --fetch-only" >&2; exit 2; } ;;
-h | --help) echo "usage: data/setup.sh [--fetch-only]"; exit 0 ;;
*) echo "error: data/setup.sh: unknown argument '$1' (usage: data/setup.sh [--fetch-only])" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

cache=data/cache
src="$cache/fortunes/usr/share/games/fortunes"
if [ ! -f "$src/fortunes" ]; then
    mkdir -p "$cache"
    if (cd "$cache" && apt-get download fortunes fortunes-min >/dev/null 2>&1); then
        unpacked=""
        for deb in "$cache"/fortunes_*.deb "$cache"/fortunes-min_*.deb; do
            dpkg-deb -x "$deb" "$cache/fortunes"
            unpacked="$unpacked$(basename "$deb") "
        done
        echo "setup: unpacked ${unpacked}into $cache/fortunes" >&2
    elif [ -f /usr/share/games/fortunes/fortunes ]; then
        echo "setup: 'apt-get download fortunes fortunes-min' failed; using the installed /usr/share/games/fortunes" >&2
        src=/usr/share/games/fortunes
    else
        echo "error: cannot obtain the fortunes corpus: 'apt-get download fortunes fortunes-min' failed" \
             "(run 'apt-get update' first?) and /usr/share/games/fortunes is not installed" \
             "(sudo apt-get install fortunes fortunes-min)" >&2
        exit 1
    fi
fi
if [ "${1:-}" = "--fetch-only" ]; then
    echo "$src"
    exit 0
fi

make --no-print-directory prepare_data >&2
./prepare_data --input "$src" --output-dir data/fortunes --doc-separator % --val-fraction 0.02

# the token count of every shard is header word 5 (low 32 bits; these shards are small)
total=0
for shard in data/fortunes/train_*.bin data/fortunes/val_*.bin; do
    n=$(od -An -t u4 -j 20 -N 4 "$shard" | tr -d ' ')
    total=$((total + n))
done
if [ "$total" -lt 500000 ]; then
    echo "error: data/fortunes has only $total tokens, expected at least 500000" >&2
    exit 1
fi
echo "setup: data/fortunes holds $total tokens" >&2
echo "$src"
