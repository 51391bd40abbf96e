#!/usr/bin/env bash
# Seed corpora for the fuzz targets, made from the project's own files rather than copies of
# them, one folder per target under the given folder (emptied first):
#   problem_text  every problem line of the suites, manifests, tuning-table examples and
#                 docs/problem-syntax.md's table, plus tools/fuzz/corpus/problem_text/
#   config        configs/*.toml and every ```toml block of docs/config-reference.md
#   table         the ```toml blocks of docs/table-format.md, plus tools/fuzz/corpus/table/
#   suite         bench/suites/*.toml and the ```toml block of bench/suites/README.md
#   manifest      plugins/generated/kernels/*.toml and tests/fixtures/generated_*/*.toml
#   tools/fuzz/make_corpus.sh <out-folder>
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: make_corpus.sh <out-folder>}
rm -rf "$out"
mkdir -p "$out"/{problem_text,config,table,suite,manifest}

# Each ```toml block of a markdown file into <folder>/<file>-<n>.toml.
toml_blocks() {
  local markdown=$1 folder=$2
  awk -v prefix="$folder/$(basename "$markdown" .md)-" '
    /^```toml/ { n++; file = prefix n ".toml"; inside = 1; next }
    /^```/ && inside { inside = 0; close(file); next }
    inside { print > file }' "$markdown"
}

# problem_text: one line a file, named by its content's hash (as libFuzzer names its own).
{
  grep -ho '^problem = "[^"]*"' "$root"/bench/suites/*.toml | sed 's/^problem = "\(.*\)"$/\1/'
  grep -ho '^problem = "[^"]*"' "$root"/plugins/generated/kernels/*.toml | sed 's/^problem = "\(.*\)"$/\1/'
  grep -ho '^key = "[^"]*"' "$root"/docs/table-format.md | sed 's/^key = "\(.*\)"$/\1/'
  grep -o '^| `[a-z]* [^`]*` | `[^`]*` |' "$root"/docs/problem-syntax.md | tr '|' '\n' | sed -n 's/^ *`\(.*\)` *$/\1/p'
} | sort -u | while IFS= read -r line; do
  printf '%s' "$line" > "$out/problem_text/$(printf '%s' "$line" | sha1sum | cut -c1-40)"
done
cp "$root"/tools/fuzz/corpus/problem_text/* "$out/problem_text/"

cp "$root"/configs/*.toml "$out/config/"
toml_blocks "$root/docs/config-reference.md" "$out/config"

toml_blocks "$root/docs/table-format.md" "$out/table"
cp "$root"/tools/fuzz/corpus/table/* "$out/table/"

cp "$root"/bench/suites/*.toml "$out/suite/"
toml_blocks "$root/bench/suites/README.md" "$out/suite"

cp "$root"/plugins/generated/kernels/*.toml "$out/manifest/"
for folder in "$root"/tests/fixtures/generated_*; do
  for manifest in "$folder"/*.toml; do cp "$manifest" "$out/manifest/$(basename "$folder")-$(basename "$manifest")"; done
done

for target in problem_text config table suite manifest; do
  echo "make_corpus: $target: $(find "$out/$target" -type f | wc -l) seeds"
done
