#!/usr/bin/env bash
# Builds sdk/python/runtime/python.wasm, the CPython runtime module of Python handlers (issue 31):
# CPython 3.11.2 from Debian's source package, built for wasm32-wasi with Debian's clang-14,
# lld-14, wasi-libc and libclang-rt-14-dev-wasm32 (installed by .ci/install-toolchains), as a
# WASI reactor whose exports are groupstate's ABI v1 and v2 (glue.c), with the standard library
# subset of frozen.txt frozen into it. No WASI SDK, nothing from outside Debian.
#
#   sdk/python/runtime/build.sh            (or: make python-runtime)
#
# Work directory: $GS_PYTHON_WORK (default /var/tmp/groupstate-python). It keeps the source
# tarball and configure's config.cache, so a rebuild skips the download and most of configure;
# everything else is rebuilt from a fresh copy of the source every time. Delete the directory
# to start from nothing. The path is fixed on purpose: it is mapped out of the objects with
# -ffile-prefix-map, and a fixed path keeps what is left (if anything) the same between builds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${GS_PYTHON_WORK:-/var/tmp/groupstate-python}
out=${1:-$here/python.wasm}
version=3.11.2
orig=python3.11_${version}.orig.tar.gz
# The upstream tarball inside every Debian revision of python3.11 3.11.2 (bookworm and its
# security updates share it); checked so that a different source never builds silently.
orig_sha256=2411c74bda5bbcfcddaf4531f66d1adc73f247f529aee981b029513aefdbf849
CC_BIN=${CC_BIN:-clang-14}
jobs=${JOBS:-$(nproc)}

mkdir -p "$work"
cd "$work"
t0=$(date +%s)
export CONFIG_SITE="$work/config.site"
export PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$work/pkgconfig"
export CC="$CC_BIN --target=wasm32-wasi --sysroot=$work/sysroot"
export AR=llvm-ar-14 RANLIB=llvm-ranlib-14
export CFLAGS="-ffile-prefix-map=$work/src/=" CFLAGS_NODIST=
export SOURCE_DATE_EPOCH=0
t1=$t0 t2=$t0 t3=$t0

# GS_PYTHON_LINK_ONLY=1: only step 4, against the objects of the last build (to work on glue.c).
if [ -z "${GS_PYTHON_LINK_ONLY:-}" ]; then

# 1. The source: Debian's source package (deb-src must be enabled; .ci/install-toolchains does).
if [ ! -f "$orig" ]; then
  apt-get source --download-only --tar-only "python3.11" >/dev/null 2>&1 || true
  if [ ! -f "$orig" ]; then
    echo "build.sh: could not fetch $orig with apt-get source (enable deb-src for bookworm)" >&2
    exit 1
  fi
fi
echo "$orig_sha256  $orig" | sha256sum -c --quiet -

rm -rf src
mkdir src
tar -xzf "$orig" -C src --strip-components=1
cd src
for p in "$here"/patches/*.patch; do
  patch -s -p1 <"$p"
done

# 2. The frozen standard library: regenerate Python/frozen.c and Makefile.pre.in's lists.
GROUPSTATE_FROZEN="$here/frozen.txt" /usr/bin/python3.11 Tools/scripts/freeze_modules.py >/dev/null

# 3. A clean sysroot: with --sysroot=/usr clang also searches the host's /usr/include, and
# configure then finds headers (zlib, uuid, lzma) that have no wasm32 libraries behind them.
rm -rf "$work/sysroot" && mkdir -p "$work/sysroot/lib"
ln -s /usr/include/wasm32-wasi "$work/sysroot/include"
ln -s /usr/lib/wasm32-wasi "$work/sysroot/lib/wasm32-wasi"
mkdir -p "$work/pkgconfig"

# clock_nanosleep off: otherwise time.sleep subscribes to an absolute-time clock, which the
# host (wazero) refuses with ENOTSUP.
cat Tools/wasm/config.site-wasm32-wasi - >"$work/config.site" <<'SITE'
ac_cv_func_clock_nanosleep=no
ac_cv_lib_rt_clock_nanosleep=no
SITE

t1=$(date +%s)
./configure --cache-file="$work/config.cache" --host=wasm32-unknown-wasi \
  --build=x86_64-pc-linux-gnu --with-build-python=/usr/bin/python3.11 >"$work/configure.log" 2>&1 \
  || { tail -30 "$work/configure.log"; exit 1; }
t2=$(date +%s)
make -j"$jobs" libpython3.11.a Modules/_decimal/libmpdec/libmpdec.a Modules/expat/libexpat.a >"$work/make.log" 2>&1 \
  || { tail -40 "$work/make.log"; exit 1; }
t3=$(date +%s)
else
  cd src
fi

# 4. The module: CPython's objects with glue.c instead of Programs/python.o, as a reactor.
# The libraries CPython's own link of python.wasm uses (the extension modules' and WASI's).
printf 'gs-print-libs:\n\t@echo $(LIBS) $(MODLIBS) $(SYSLIBS)\n' >"$work/print-libs.mk"
libs=$(make -s -f Makefile -f "$work/print-libs.mk" gs-print-libs)
# The groupstate package and the sources importer (bootstrap.py) compiled to bytecode
# (freeze_sdk.py), which glue.c includes: an instance then runs them without compiling text.
mkdir -p "$work/gen"
PYTHONHASHSEED=0 /usr/bin/python3.11 -S -s "$here/freeze_sdk.py" "$here/../groupstate" "$here/bootstrap.py" "$work/gen/gs_frozen_sdk.h"
$CC -O2 -g0 -Wall -Werror -ffile-prefix-map="$here/=" -I"$work/gen" -I. -IInclude -IInclude/internal -c "$here/glue.c" -o glue.o
$CC_BIN --target=wasm32-wasi --sysroot="$work/sysroot" -mexec-model=reactor \
  -Wl,--stack-first -z stack-size=1048576 \
  -Wl,--strip-all -Wl,--export=gs_abi_version \
  -o "$work/python.wasm" glue.o libpython3.11.a $libs
cp "$work/python.wasm" "$out"
t4=$(date +%s)
echo "build.sh: $out, $(stat -c %s "$out") bytes; configure $((t2-t1)) s, make $((t3-t2)) s, link $((t4-t3)) s, total $((t4-t0)) s"
