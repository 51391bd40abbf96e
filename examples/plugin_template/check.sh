#!/usr/bin/env bash
# The install round trip, end to end:
#   1. install an arbiter build tree into <work>/prefix;
#   2. build this plugin template against that install (find_package, arbiter_add_plugin);
#   3. load it with the installed `arbiter` through ARBITER_PLUGIN_PATH and run its kernel,
#      checked against the reference plugin -- without rebuilding arbiter;
#   4. compile examples/c_gemm_rmsnorm.c against the install via pkg-config and run it;
#   5. move the whole install elsewhere and check that both the `arbiter` program and
#      libarbiter still find their own plugins (the install is relocatable).
#
# usage: examples/plugin_template/check.sh <arbiter-build-dir> [work-dir]
# Honours CMAKE, CC and CXX. Exits non-zero on the first failure.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 <arbiter-build-dir> [work-dir]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
examples=$(dirname "$here")
cmake=${CMAKE:-cmake}
cc=${CC:-cc}
if [[ $# -eq 2 ]]; then
  mkdir -p "$2"
  work=$(cd "$2" && pwd)
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/arbiter-template-check.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
prefix=$work/prefix
moved=$work/relocated/prefix
rm -rf "${work:?}/prefix" "${work:?}/relocated" "${work:?}/template-build" "${work:?}/plugins" "${work:?}/bin"
unset ARBITER_PLUGIN_PATH

step() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

step "install $build into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log" >&2; fail "cmake --install"; }
[[ -x $prefix/bin/arbiter ]] || fail "no bin/arbiter in the install"

step "build the template plugin against the install"
"$cmake" -S "$here" -B "$work/template-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  ${CXX:+-DCMAKE_CXX_COMPILER="$CXX"} >"$work/template-configure.log" ||
  { cat "$work/template-configure.log" >&2; fail "configuring the template"; }
"$cmake" --build "$work/template-build" ||
  fail "building the template"
mkdir -p "$work/plugins"
cp "$work/template-build/arbiter_template.so" "$work/plugins/"
if command -v nm >/dev/null && command -v readelf >/dev/null; then
  exported=$(nm -D --defined-only "$work/plugins/arbiter_template.so" | awk '{print $3}')
  [[ $exported == arbiter_plugin_entry ]] || fail "the plugin exports more than arbiter_plugin_entry: $exported"
  # (output captured first: `grep -q` closing a pipe early would fail it under pipefail)
  needed=$(readelf -d "$work/plugins/arbiter_template.so")
  ! grep -q 'NEEDED.*libarbiter' <<<"$needed" || fail "the plugin links libarbiter"
  echo "arbiter_template.so exports only arbiter_plugin_entry and does not link libarbiter"
fi

step "ARBITER_PLUGIN_PATH=$work/plugins arbiter plugins"
ARBITER_PLUGIN_PATH=$work/plugins "$prefix/bin/arbiter" plugins | tee "$work/plugins.txt"
grep -Eq '^template 1\.0\.0 ' "$work/plugins.txt" || fail "the template plugin is not listed as loaded"
grep -q 'template\.softmax_scalar' "$work/plugins.txt" || fail "template.softmax_scalar is not listed"

step "arbiter run softmax f32 rows=4 cols=100 --kernel=template.softmax_scalar"
ARBITER_PLUGIN_PATH=$work/plugins "$prefix/bin/arbiter" run softmax f32 rows=4 cols=100 \
  --kernel=template.softmax_scalar --samples=5 || fail "arbiter run with the template kernel"
if ARBITER_PLUGIN_PATH=$work/plugins "$prefix/bin/arbiter" run softmax f16 rows=4 cols=100 \
  --kernel=template.softmax_scalar --samples=5 >"$work/refused.txt" 2>&1; then
  fail "the template kernel accepted an f16 problem"
fi
grep -q 'f32 only' "$work/refused.txt" || { cat "$work/refused.txt" >&2; fail "no 'f32 only' reason for an f16 problem"; }
echo "f16 refused as expected: $(tail -n 1 "$work/refused.txt")"

step "compile examples/c_gemm_rmsnorm.c via pkg-config"
pc=$(find "$prefix" -name arbiter.pc -print -quit)
[[ -n $pc ]] || fail "no arbiter.pc in the install"
export PKG_CONFIG_PATH=${pc%/*}
libdir=$(realpath "$(pkg-config --variable=libdir arbiter)")
echo "pkg-config: $(pkg-config --cflags --libs arbiter)"
mkdir -p "$work/bin"
# shellcheck disable=SC2046  # pkg-config output is meant to be split
"$cc" -std=c11 -Wall -Wextra -Werror -o "$work/bin/c_gemm_rmsnorm" "$examples/c_gemm_rmsnorm.c" \
  $(pkg-config --cflags --libs arbiter) -Wl,-rpath,"$libdir" -lm || fail "compiling the C example"
"$work/bin/c_gemm_rmsnorm" || fail "the C example against the install"

step "move the install to $moved"
mkdir -p "$(dirname "$moved")"
mv "$prefix" "$moved"
"$moved/bin/arbiter" plugins | tee "$work/plugins-moved.txt"
grep -Eq '^reference [0-9]' "$work/plugins-moved.txt" || fail "the moved arbiter lost its reference plugin"
grep -qF "  $moved/" "$work/plugins-moved.txt" || fail "the moved arbiter loads no plugin from its own folder"
! grep -qF "  $prefix/" "$work/plugins-moved.txt" || fail "the moved arbiter loads plugins from the old prefix"
# libarbiter too: the old rpath is gone, so the library comes from the moved prefix and
# must find its plugins next to itself (the gemm needs one).
export LD_LIBRARY_PATH=$moved/${libdir#"$prefix"/}
resolved=$(ldd "$work/bin/c_gemm_rmsnorm")
grep -qF "$LD_LIBRARY_PATH/libarbiter.so" <<<"$resolved" ||
  fail "the C example does not resolve libarbiter from the moved prefix"
"$work/bin/c_gemm_rmsnorm" >"$work/c-moved.txt" ||
  { cat "$work/c-moved.txt" >&2; fail "the C example against the moved install"; }
grep -Eq '^kernel: +[a-z]' "$work/c-moved.txt" || fail "the C example's explain names no kernel after the move"
echo "the C example runs against the moved libarbiter"

step "PASS: install, out-of-tree plugin, pkg-config and relocation"
