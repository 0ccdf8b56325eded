#!/bin/sh
# test_install.sh -- `make install` into a staging directory, then the
# README's C API example built against it with pkg-config, as a user would.
#
# The example (the ```c block of README.md's "The C API" section), the lines
# that build it (those starting "cc app.c") and the output it prints ("It
# prints `...`") are all read from README.md, so the README cannot drift
# from what works.  Each build line runs exactly as written, with
# PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR pointing at the stage; the
# shared build must need libminidoc.so.0, the static one must not.  Also:
# the soname links, minidoc.pc's private dependencies (pkg-config --static
# against an install without the .so), the installed minidoc program, and
# `make uninstall` leaving nothing behind.
#
# Usage: MAKE=make BUILD=build tests/install/test_install.sh   (make test)
# SANFLAGS (e.g. -fsanitize=address) is added to cc for sanitizer builds.
MAKE=${MAKE:-make}
BUILD=${BUILD:-build}
README=${README:-README.md}
pass=0
fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
check() { if eval "$2"; then ok; else ko "$1"; fi; }

STAGE=$(mktemp -d /tmp/md_stage_XXXXXX) || exit 1
WORK=$(mktemp -d /tmp/md_app_XXXXXX) || exit 1
trap 'rm -rf "$STAGE" "$WORK"' EXIT INT TERM
P=$STAGE/usr/local
LIB=$P/lib

if ! $MAKE --no-print-directory -s BUILD="$BUILD" DESTDIR="$STAGE" PREFIX=/usr/local install \
        >"$WORK/install.log" 2>&1; then
    cat "$WORK/install.log"
    echo "FAIL: make install"
    echo "0 passed, 1 failed"
    exit 1
fi

# ---- what make install put where -------------------------------------------------
for f in lib/libminidoc.a lib/libminidoc.so.0.1.0 include/minidoc.h bin/minidoc \
         lib/pkgconfig/minidoc.pc lib/pkgconfig/minidoc-static.pc; do
    check "installed $f" "[ -f '$P/$f' ]"
done
check "libminidoc.so -> libminidoc.so.0" "[ \"\$(readlink '$LIB/libminidoc.so')\" = libminidoc.so.0 ]"
check "libminidoc.so.0 -> libminidoc.so.0.1.0" \
    "[ \"\$(readlink '$LIB/libminidoc.so.0')\" = libminidoc.so.0.1.0 ]"
check "soname libminidoc.so.0" \
    "readelf -d '$LIB/libminidoc.so.0.1.0' | grep -q 'SONAME.*\[libminidoc.so.0\]'"
check "the .so exports md_db_open" \
    "nm -D --defined-only '$LIB/libminidoc.so.0.1.0' | grep -q ' md_db_open\$'"
check "the .so hides the engines" \
    "! nm -D --defined-only '$LIB/libminidoc.so.0.1.0' | grep -q ' \(eng\|mm\|bt\|q\)_'"
check "minidoc.h includes nothing but libbson and libc" \
    "[ -z \"\$(grep '^#include' '$P/include/minidoc.h' | grep -v -e '<bson/bson.h>' -e '<std[a-z]*.h>')\" ]"
check "installed minidoc runs" "'$P/bin/minidoc' --help | grep -q 'usage: minidoc'"
for pc in minidoc minidoc-static; do
    check "$pc.pc has libbson" "grep -q '^Requires:.*libbson-1.0' '$LIB/pkgconfig/$pc.pc'"
done
check "minidoc.pc private requires" \
    "grep -q '^Requires.private: libzstd snappy libpcre2-8 duktape\$' '$LIB/pkgconfig/minidoc.pc'"
check "minidoc.pc private libs" "grep -q '^Libs.private: -pthread -lstemmer -lm\$' '$LIB/pkgconfig/minidoc.pc'"

# ---- the README's example ----------------------------------------------------------
section() { sed -n '/^## The C API/,/^## /p' "$README"; }
section | sed -n '/^```c$/,/^```$/p' | sed '1d;$d' >"$WORK/app.c"
builds=$(section | grep '^cc app\.c ')
want=$(section | sed -n 's/^It prints `\(.*\)`.*/\1/p' | head -n 1)
check "README has the example" "grep -q 'md_db_open' '$WORK/app.c'"
check "README has two build lines" "[ \"\$(printf '%s\n' \"\$builds\" | grep -c .)\" = 2 ]"
check "README says what it prints" "[ -n \"\$want\" ]"

# A sysroot holds the system's packages as well as ours: pkg-config prefixes
# every -I with PKG_CONFIG_SYSROOT_DIR, libbson's too, so give the stage
# the system's include directories of our dependencies.
for d in $(pkg-config --cflags-only-I libbson-1.0 libzstd snappy libpcre2-8 duktape | sed 's/-I//g'); do
    [ -e "$STAGE$d" ] || { mkdir -p "$(dirname "$STAGE$d")" && ln -s "$d" "$STAGE$d"; }
done

# cc, with the sanitizer's runtime when the library was built with one
cc() { command ${CC:-cc} $SANFLAGS "$@"; }
run_build() { # NAME LINE: run a build line in WORK as written
    (cd "$WORK" && export PKG_CONFIG_PATH="$LIB/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$STAGE" &&
        eval "$2") >"$WORK/$1.log" 2>&1 || { cat "$WORK/$1.log"; return 1; }
}
run_app() { # NAME: run the app on a fresh database, compare with the README
    out=$(cd "$WORK" && LD_LIBRARY_PATH="$LIB" ./app "$WORK/db-$1" 2>&1)
    if [ "$out" = "$want" ]; then ok; else ko "$1: app printed '$out', README says '$want'"; fi
}
needs_so() { readelf -d "$WORK/app" | grep -q 'NEEDED.*\[libminidoc.so.0\]'; }

printf '%s\n' "$builds" >"$WORK/builds"
while IFS= read -r b; do
    rm -f "$WORK/app"
    case "$b" in
    *minidoc-static*) name=static ;;
    *) name=shared ;;
    esac
    if run_build "$name" "$b"; then ok; else ko "$name build: $b"; continue; fi
    if [ $name = shared ]; then
        check "shared build needs libminidoc.so.0" needs_so
    else
        check "static build does not need libminidoc.so" "! needs_so"
    fi
    run_app "$name"
done <"$WORK/builds"

# minidoc.pc alone, --static, where only the archive is installed
mv "$LIB/libminidoc.so" "$WORK/so.link"
rm -f "$WORK/app"
if run_build pc-static 'cc app.c -o app $(pkg-config --static --cflags --libs minidoc)'; then
    ok
    check "pkg-config --static minidoc links the archive" "! needs_so"
    run_app pc-static
else
    ko "pkg-config --static --libs minidoc against libminidoc.a alone"
fi
mv "$WORK/so.link" "$LIB/libminidoc.so"

# ---- make uninstall ---------------------------------------------------------------
if $MAKE --no-print-directory -s BUILD="$BUILD" DESTDIR="$STAGE" PREFIX=/usr/local uninstall \
        >"$WORK/uninstall.log" 2>&1; then ok; else ko "make uninstall"; fi
left=$(find "$P" \( -type f -o -type l \) 2>/dev/null)
if [ -z "$left" ]; then ok; else ko "make uninstall left: $left"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
