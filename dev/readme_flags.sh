#!/usr/bin/env bash
# README.md's flag table is the trainer's --help-markdown output, between the markers
# <!-- flags:begin --> and <!-- flags:end -->.
#   dev/readme_flags.sh update   rewrites the table in README.md
#   dev/readme_flags.sh check    checks that each row has 5 cells and compares, printing "1 passed, 0 failed" or "0 passed, 1 failed"
set -eu
cd "$(dirname "$0")/.."
mode=${1:?usage: readme_flags.sh update|check}
table=$(./train_gpt_cpu --help-markdown)
current=$(sed -n '/<!-- flags:begin -->/,/<!-- flags:end -->/p' README.md | sed '1d;$d')
if [ "$mode" = update ]; then
    tmp=$(mktemp)
    TABLE=$table awk '
        /<!-- flags:begin -->/ { print; print ENVIRON["TABLE"]; skip = 1; next }
        /<!-- flags:end -->/ { skip = 0 }
        !skip { print }' README.md >"$tmp"
    mv "$tmp" README.md
    echo "README.md: flag table updated"
elif bad_rows=$(sed 's/\\|//g' <<<"$table" | awk -F'|' 'NF != 7' | head -3) && [ -n "$bad_rows" ]; then
    echo "--help-markdown rows that are not 5 cells (an unescaped '|' in a cell): $bad_rows"
    echo "0 passed, 1 failed"
    exit 1
elif [ "$table" = "$current" ]; then
    echo "README.md flag table matches ./train_gpt_cpu --help-markdown"
    echo "1 passed, 0 failed"
else
    echo "README.md flag table differs from ./train_gpt_cpu --help-markdown: run make readme-flags"
    diff <(echo "$current") <(echo "$table") | head -20
    echo "0 passed, 1 failed"
    exit 1
fi
