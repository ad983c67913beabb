#!/usr/bin/env bash
# Packs the build dependencies a GPU machine may lack (PCRE2 and utf8proc: headers, static
# libraries and pkg-config files) from this machine's Debian packages into DIR, so that
# `JET_GPU_DEPS=DIR tests/gpu/run.sh` can build there. The lent H200 image has neither.
#
#   tests/gpu/pack_deps.sh DIR
set -euo pipefail

dir=${1:?usage: tests/gpu/pack_deps.sh DIR}
multiarch=$(gcc -print-multiarch)
mkdir -p "$dir/include" "$dir/lib/pkgconfig"
cp /usr/include/pcre2.h /usr/include/utf8proc.h "$dir/include/"
cp "/usr/lib/$multiarch/libpcre2-8.a" "/usr/lib/$multiarch/libutf8proc.a" "$dir/lib/"
# Only the static libraries are packed, so the linker takes them: nothing to install at run time.
for spec in "libpcre2-8 pcre2-8" "libutf8proc utf8proc"; do
  read -r module lib <<<"$spec"
  cat >"$dir/lib/pkgconfig/$module.pc" <<EOF
prefix=\${pcfiledir}/../..
Name: $module
Description: $module (packed by tests/gpu/pack_deps.sh)
Version: $(pkg-config --modversion "$module")
Cflags: -I\${prefix}/include
Libs: -L\${prefix}/lib -l$lib
EOF
done
echo "packed PCRE2 and utf8proc into $dir"
