#!/usr/bin/env bash
# Builds the kernel's own C maple tree (lib/maple_tree.c) in userspace with
# our benchmark driver, for the report's kernel section to run side by side
# with ours: target/kernel-c/kbench. See crates/maple-bench/kernel-c/.
#
# The kernel source comes from Debian's linux-source package (installed
# here with apt-get when run as root and missing; liburcu-dev too, for the
# tree's RCU calls). Only the few files the build needs are unpacked.
#
#   bash ci/kernel-c.sh            # build if possible; else say why, exit 0
#   bash ci/kernel-c.sh --strict   # fail if it cannot be built (CI)
#
# Environment: MAPLE_KERNEL_TARBALL=/path/linux-source-X.Y.tar.xz picks the
# source (default: the newest /usr/src/linux-source-*.tar.xz).
set -euo pipefail
cd "$(dirname "$0")/.."

strict=false
[[ "${1:-}" == "--strict" ]] && strict=true
out=target/kernel-c
package=linux-source-6.12

give_up() {
    echo "kernel-c: $*" >&2
    echo "kernel-c: the report's kernel section will quote the kernel's figures instead of measuring them" >&2
    if $strict; then exit 1; fi
    exit 0
}

need_install=()
tarball="${MAPLE_KERNEL_TARBALL:-}"
if [[ -z "$tarball" ]]; then
    tarball=$(ls /usr/src/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -n 1 || true)
    [[ -z "$tarball" ]] && need_install+=("$package")
fi
echo '#include <urcu.h>' | gcc -E -x c - >/dev/null 2>&1 || need_install+=(liburcu-dev)
if ((${#need_install[@]})); then
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
        give_up "needs ${need_install[*]} (Debian packages); install them, or set MAPLE_KERNEL_TARBALL"
    fi
    echo "kernel-c: installing ${need_install[*]}" >&2
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_install[@]}" >/dev/null 2>&1 \
        || give_up "apt-get install ${need_install[*]} failed"
    [[ -z "$tarball" ]] && tarball=$(ls /usr/src/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -n 1 || true)
fi
[[ -f "$tarball" ]] || give_up "no kernel source tarball found"

# The files the build reads (found with gcc -M): the userspace shims and
# headers under tools/, the tree itself, and four kernel headers. (x86-64
# only: the shims' barriers come from tools/arch/x86.)
top=$(basename "$tarball" .tar.xz)
src="$out/$top"
files=(
    "$top/tools/include/*" "$top/tools/arch/x86/include/*" "$top/tools/testing/shared/*"
    "$top/tools/lib/slab.c" "$top/lib/maple_tree.c" "$top/include/linux/gfp_types.h"
    "$top/include/linux/kconfig.h" "$top/include/linux/maple_tree.h" "$top/include/linux/xarray.h"
)
stamp="$src/.unpacked"
if [[ "$(cat "$stamp" 2>/dev/null)" != "${files[*]}" || "$tarball" -nt "$stamp" ]]; then
    echo "kernel-c: unpacking the maple tree from $tarball" >&2
    rm -rf "$src"
    mkdir -p "$out"
    tar -xJf "$tarball" -C "$out" --wildcards "${files[@]}" || give_up "could not unpack $tarball"
    echo "${files[*]}" >"$stamp"
fi

# Built where the shims expect a test program to live (their headers
# include kernel files by relative paths), with the generated headers the
# shims' makefile would write.
dir="$src/tools/testing/kbench"
mkdir -p "$dir/generated"
cp "$src/tools/testing/shared/autoconf.h" "$dir/generated/autoconf.h"
echo "#define XA_CHUNK_SHIFT 6" >"$dir/generated/map-shift.h"
echo "#define CONFIG_64BIT 1" >"$dir/generated/bit-length.h"
cp crates/maple-bench/kernel-c/kbench.c crates/maple-bench/kernel-c/kcache.c "$dir/"
# kconfig.h first, as the kernel's own build forces it: without it the tree's
# header would pick its 32-bit layout (32-slot, 512-byte nodes on x86-64).
cflags=(-O2 -g -include ../../../include/linux/kconfig.h -I../shared -I. -I../../include -I../../../lib -D_LGPL_SOURCE -w)
(
    cd "$dir" &&
        gcc "${cflags[@]}" -c kbench.c -o kbench.o &&
        gcc "${cflags[@]}" -c kcache.c -o kcache.o &&
        gcc "${cflags[@]}" -c ../../lib/slab.c -o slab.o &&
        gcc -o kbench kbench.o kcache.o slab.o -lpthread -lurcu
) || give_up "the build failed (see above)"
cp "$dir/kbench" "$out/kbench"
# A smoke run of every loop: each must print a positive time.
for b in slot-store node-store gap-walk load for-each prev next fork dup lookup:1000 gap:4:1000 nodes-random; do
    ns=$("$out/kbench" "$b" 1000) || give_up "kbench $b failed"
    awk -v ns="$ns" 'BEGIN { exit !(ns > 0) }' || give_up "kbench $b printed '$ns'"
done
echo "kernel-c: built $out/kbench from $top" >&2
