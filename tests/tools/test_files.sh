#!/bin/sh
# test_files.sh -- `minidoc files` (tools/files.c), GridFS from the command
# line as mongofiles: put/get round trips byte for byte on mmapv1 and btree
# (empty, one byte, several chunks, every byte value), list and search,
# get to stdout, --replace, delete, and the failures: no such file, a
# damaged file (a chunk deleted) that must not leave a short file behind,
# a missing local file, usage errors.
#
# Usage: MINIDOC=build/minidoc tests/tools/test_files.sh
MINIDOC=${MINIDOC:-build/minidoc}
OPTS='{"mmapv1": {"firstFileSize": 131072, "nsSize": 65536}}'
pass=0
fail=0
DIR=$(mktemp -d /tmp/md_files_XXXXXX) || exit 1
trap 'rm -rf "$DIR"' EXIT INT TERM

ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
expect() {
    if printf '%s\n' "$2" | grep -F -q -- "$3"; then ok; else ko "$1: no '$3' in: $2"; fi
}
expect_status() {
    if [ "$2" = "$3" ]; then ok; else ko "$1: exit status $3, expected $2"; fi
}
same() {
    if cmp -s "$2" "$3"; then ok; else ko "$1: $2 and $3 differ"; fi
}

# inputs: empty, one byte, every byte value, and ~2.3 chunks of 256 KiB
: >"$DIR/empty"
printf 'x' >"$DIR/one"
awk 'BEGIN { for (i = 0; i < 256; i++) printf "%c", i }' >"$DIR/bytes" 2>/dev/null
head -c 600000 /dev/urandom >"$DIR/big"

for eng in mmapv1 btree; do
    db="$DIR/db_$eng"
    md() { "$MINIDOC" --dbpath "$db" --engine $eng --opts "$OPTS" "$@"; }
    for f in empty one bytes big; do
        out=$(md files --local "$DIR/$f" put "$f.bin")
        expect_status "$eng put $f" 0 $?
        expect "$eng put $f message" "$out" "added gridFile: $f.bin"
        md files --local "$DIR/$f.back" get "$f.bin" 2>/dev/null
        expect_status "$eng get $f" 0 $?
        same "$eng round trip $f" "$DIR/$f" "$DIR/$f.back"
    done
    out=$(md files list)
    expect "$eng list" "$out" "$(printf 'big.bin\t600000')"
    expect "$eng list empty" "$out" "$(printf 'empty.bin\t0')"
    out=$(md files list b)
    expect "$eng list prefix" "$out" "bytes.bin"
    if printf '%s\n' "$out" | grep -q one.bin; then ko "$eng list prefix shows one.bin"; else ok; fi
    out=$(md files search ig)
    expect "$eng search" "$out" "big.bin"
    md files --local - get one.bin >"$DIR/stdout.back" 2>/dev/null
    same "$eng get to stdout" "$DIR/one" "$DIR/stdout.back"
    # a second version, then --replace leaves one
    md files --local "$DIR/one" put bytes.bin >/dev/null
    md files --local "$DIR/bytes" --replace put bytes.bin >/dev/null
    out=$(md files list bytes)
    n=$(printf '%s\n' "$out" | grep -c bytes.bin)
    expect_status "$eng --replace keeps one version" 1 "$n"
    # a damaged file: its second chunk deleted
    md eval '{"delete": "fs.chunks", "deletes": [{"q": {"n": 1}, "limit": 0}]}' >/dev/null
    err=$(md files --local "$DIR/big.damaged" get big.bin 2>&1)
    expect_status "$eng damaged get fails" 1 $?
    expect "$eng damaged get reason" "$err" "ChunkIsMissing"
    if [ -e "$DIR/big.damaged" ] || [ -e "$DIR/big.damaged.partial" ]; then
        ko "$eng damaged get left a file"
    else ok; fi
    out=$(md files delete big.bin)
    expect "$eng delete" "$out" "successfully deleted all instances of 'big.bin'"
    err=$(md files get big.bin 2>&1)
    expect_status "$eng get deleted" 1 $?
    expect "$eng get deleted reason" "$err" "FileNotFound"
    out=$(md eval '{"count": "fs.chunks", "query": {"n": 2}}')
    expect "$eng delete removed the chunks" "$out" '"n" : 0'
done

db="$DIR/db_usage"
"$MINIDOC" --dbpath "$db" files >/dev/null 2>&1
expect_status "files without a verb" 2 $?
"$MINIDOC" --dbpath "$db" files put >/dev/null 2>&1
expect_status "put without a name" 2 $?
"$MINIDOC" --dbpath "$db" files frobnicate x >/dev/null 2>&1
expect_status "unknown verb" 2 $?
err=$("$MINIDOC" --dbpath "$db" files --local "$DIR/nope" put nope 2>&1)
expect_status "put of a missing local file" 1 $?
expect "put of a missing local file message" "$err" "cannot open"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
