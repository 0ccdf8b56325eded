#!/bin/sh
# test_dump.sh -- minidoc dump and restore (tools/dump.c, tools/restore.c).
#
# Round trips, compared byte for byte on the .bson files a second dump
# writes: a document holding every BSON type, a capped collection and
# indexes, mmapv1 -> btree -> mmapv1, in the directory form, with --gzip,
# and as an archive (file and a gzipped pipe through stdout/stdin).
# Restore reads the hand-written mongodump fixture (tests/tools/fixtures:
# a directory and an interleaved archive) with its options and indexes;
# --drop, --nsInclude, per-collection counts and the summary line;
# duplicates without --drop fail and are counted.  Bad input: a missing
# dump, an unwritable output directory, a database locked by another
# process, a truncated archive, a damaged document (CRC mismatch), a file
# that is not an archive: a message, a non-zero status, nothing restored
# wrongly.
#
# Usage: MINIDOC=build/minidoc tests/tools/test_dump.sh
MINIDOC=${MINIDOC:-build/minidoc}
FIX=$(cd "$(dirname "$0")" && pwd)/fixtures
OPTS='{"mmapv1": {"firstFileSize": 131072, "nsSize": 65536}}'
pass=0
fail=0
T=$(mktemp -d /tmp/md_dump_XXXXXX) || exit 1
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT INT TERM
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
expect() { if printf '%s\n' "$2" | grep -F -q -- "$3"; then ok; else ko "$1: no '$3' in: $2"; fi; }
expect_status() { if [ "$2" = "$3" ]; then ok; else ko "$1: exit status $3, expected $2"; fi; }
same() { if cmp -s "$2" "$3"; then ok; else ko "$1: $2 and $3 differ"; fi; }
md() { "$MINIDOC" --opts "$OPTS" "$@"; }

# ---- a database with every BSON type, a capped collection, indexes ----------------
md --dbpath "$T/src" --engine mmapv1 run >/dev/null <<'JSON'
{"insert": "all", "documents": [{"_id": 1, "double": 1.5, "string": "h\u00e9llo", "doc": {"a": 1}, "array": [1, "x"], "bin0": {"$binary": {"base64": "AQID", "subType": "00"}}, "uuid": {"$binary": {"base64": "AAECAwQFBgcICQoLDA0ODw==", "subType": "04"}}, "undef": {"$undefined": true}, "oid": {"$oid": "5f1d7a3e9b1e8a3c4d5e6f70"}, "bool": true, "date": {"$date": {"$numberLong": "-1000"}}, "null": null, "regex": {"$regularExpression": {"pattern": "^a", "options": "i"}}, "dbptr": {"$dbPointer": {"$ref": "c", "$id": {"$oid": "5f1d7a3e9b1e8a3c4d5e6f70"}}}, "code": {"$code": "f()"}, "symbol": {"$symbol": "sym"}, "codews": {"$code": "g()", "$scope": {"x": 1}}, "int32": {"$numberInt": "7"}, "ts": {"$timestamp": {"t": 5, "i": 6}}, "int64": {"$numberLong": "8"}, "dec": {"$numberDecimal": "1.10"}, "min": {"$minKey": 1}, "max": {"$maxKey": 1}, "nan": {"$numberDouble": "NaN"}, "negz": -0.0}, {"_id": 2, "double": 2.5, "string": "b"}]}
{"create": "cap", "capped": true, "size": 8192, "max": 5}
{"insert": "cap", "documents": [{"_id": 1}, {"_id": 2}, {"_id": 3}]}
{"insert": "c", "documents": [{"_id": 1, "a": 1, "b": 2}, {"_id": 2, "a": 2, "b": 1}, {"_id": 3, "a": 3}]}
{"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1", "unique": true}, {"key": {"b": -1, "a": 1}, "name": "b_a", "sparse": true}]}
{"create": "empty"}
JSON

md dump --dbpath "$T/src" --out "$T/d1" 2>"$T/err"
expect_status "dump" 0 $?
expect "dump counts" "$(cat "$T/err")" "done dumping test.all (2 documents)"
for f in all cap c empty; do
    [ -f "$T/d1/test/$f.bson" ] && [ -f "$T/d1/test/$f.metadata.json" ] && ok || ko "dump layout: $f"
done
expect "metadata options" "$(cat "$T/d1/test/cap.metadata.json")" '"capped" : true'
expect "metadata indexes" "$(cat "$T/d1/test/c.metadata.json")" '"name" : "b_a"'

# mmapv1 -> btree -> mmapv1, each dumped again: the same bytes
md restore --dbpath "$T/bt" --engine btree "$T/d1" 2>"$T/err"
expect_status "restore on btree" 0 $?
expect "restore counts" "$(cat "$T/err")" "finished restoring test.c (3 documents, 0 failures)"
expect "restore summary" "$(cat "$T/err")" "8 document(s) restored successfully. 0 document(s) failed to restore."
md dump --dbpath "$T/bt" --out "$T/d2" 2>/dev/null
md restore --dbpath "$T/mm" --engine mmapv1 "$T/d2" 2>/dev/null
md dump --dbpath "$T/mm" --out "$T/d3" 2>/dev/null
for f in all cap c empty; do
    same "mmapv1 -> btree: $f" "$T/d1/test/$f.bson" "$T/d2/test/$f.bson"
    same "btree -> mmapv1: $f" "$T/d1/test/$f.bson" "$T/d3/test/$f.bson"
    same "metadata survives: $f" "$T/d1/test/$f.metadata.json" "$T/d3/test/$f.metadata.json"
done
out=$(md --dbpath "$T/bt" run <<'JSON'
{"listCollections": 1, "filter": {"name": "cap"}}
{"insert": "c", "documents": [{"_id": 9, "a": 1}]}
JSON
)
expect "capped restored" "$out" '"capped" : true, "size" : 8192, "max" : 5'
expect "unique index restored" "$out" "E11000"

# --gzip, directory form
md dump --dbpath "$T/src" --out "$T/gz" --gzip 2>/dev/null
expect_status "dump --gzip" 0 $?
[ -f "$T/gz/test/c.bson.gz" ] && [ -f "$T/gz/test/c.metadata.json.gz" ] && ok || ko "gzip layout"
gzip -dc "$T/gz/test/all.bson.gz" >"$T/all.bson"
same "gzip content" "$T/d1/test/all.bson" "$T/all.bson"
md restore --dbpath "$T/bt2" --engine btree --gzip "$T/gz" 2>/dev/null
expect_status "restore --gzip" 0 $?
md dump --dbpath "$T/bt2" --out "$T/d4" 2>/dev/null
same "gzip round trip" "$T/d1/test/all.bson" "$T/d4/test/all.bson"

# archive: a file, then gzip through a pipe
md dump --dbpath "$T/src" --archive="$T/a.archive" 2>/dev/null
expect_status "dump --archive" 0 $?
magic=$(od -A n -t x1 -N 4 "$T/a.archive" | tr -d ' ')
expect "archive magic" "$magic" "6de29981"
md restore --dbpath "$T/bt3" --engine btree --archive="$T/a.archive" 2>/dev/null
expect_status "restore --archive" 0 $?
md dump --dbpath "$T/bt3" --out "$T/d5" 2>/dev/null
for f in all cap c; do same "archive round trip: $f" "$T/d1/test/$f.bson" "$T/d5/test/$f.bson"; done
md dump --dbpath "$T/src" --archive --gzip 2>/dev/null |
    md restore --dbpath "$T/mm2" --engine mmapv1 --archive --gzip 2>"$T/err"
expect_status "gzip archive pipe" 0 $?
expect "gzip archive pipe counts" "$(cat "$T/err")" "8 document(s) restored successfully"

# without --drop the documents are duplicates: counted as failures
md restore --dbpath "$T/bt3" --archive="$T/a.archive" 2>"$T/err"
expect_status "restore again without --drop" 1 $?
expect "duplicates counted" "$(cat "$T/err")" "0 document(s) restored successfully. 8 document(s) failed to restore."
expect "duplicate reported" "$(cat "$T/err")" "E11000"
md restore --dbpath "$T/bt3" --archive="$T/a.archive" --drop 2>"$T/err"
expect_status "restore --drop" 0 $?
expect "--drop restores all" "$(cat "$T/err")" "8 document(s) restored successfully. 0"

# --nsInclude
md restore --dbpath "$T/inc" "$T/d1" --nsInclude 'test.c*' 2>"$T/err"
expect_status "--nsInclude" 0 $?
out=$(md --dbpath "$T/inc" eval '{"listCollections": 1, "nameOnly": true}')
expect "--nsInclude takes c" "$out" '"name" : "c"'
expect "--nsInclude takes cap" "$out" '"name" : "cap"'
case "$out" in *'"all"'*) ko "--nsInclude left out all: $out" ;; *) ok ;; esac

# ---- the hand-written mongodump fixture -------------------------------------------
for form in dir archive; do
    if [ $form = dir ]; then
        md restore --dbpath "$T/fx$form" --engine mmapv1 "$FIX/dump" 2>"$T/err"
    else
        md restore --dbpath "$T/fx$form" --archive="$FIX/shop.archive" 2>"$T/err"
    fi
    expect_status "fixture $form" 0 $?
    expect "fixture $form counts" "$(cat "$T/err")" "finished restoring test.products (3 documents, 0 failures)"
    out=$(md --dbpath "$T/fx$form" run <<'JSON'
{"find": "products", "filter": {"sku": "B-2"}}
{"listIndexes": "products"}
{"listCollections": 1, "filter": {"name": "orders"}}
{"count": "orders"}
JSON
)
    expect "fixture $form document" "$out" '"qty" : 10000000000, "added" : { "$date" : "2020-01-01T00:00:00Z" }'
    expect "fixture $form index" "$out" '"unique" : true, "key" : { "sku" : 1 }, "name" : "sku_1"'
    expect "fixture $form compound index" "$out" '"key" : { "price" : -1, "qty" : 1 }'
    expect "fixture $form capped" "$out" '"capped" : true, "size" : 65536, "max" : 100'
    expect "fixture $form count" "$out" '{ "n" : 2, "ok" : 1.0 }'
done

# ---- bad input -----------------------------------------------------------------------
out=$(md restore --dbpath "$T/bad1" "$T/nosuch" 2>&1)
expect_status "missing dump" 1 $?
expect "missing dump message" "$out" "No such file or directory"
out=$(md dump --dbpath "$T/nosuchdb" 2>&1)
expect_status "dump of a missing database" 1 $?
expect "missing database message" "$out" "cannot open"
[ -e "$T/nosuchdb" ] && ko "dump created the missing database" || ok
mkdir "$T/ro" && chmod 555 "$T/ro"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$MINIDOC" dump --dbpath "$T/src" --out "$T/ro/x" 2>&1)
    st=$?
elif [ "$(id -u)" != 0 ]; then
    out=$(md dump --dbpath "$T/src" --out "$T/ro/x" 2>&1)
    st=$?
else
    out="cannot create directory (skipped: root without setpriv)"
    st=1
fi
expect_status "unwritable output" 1 $st
expect "unwritable output message" "$out" "cannot"
out=$(md dump --dbpath "$T/src" --out /dev/null/x 2>&1)
expect_status "output under a file" 1 $?
expect "output under a file message" "$out" "cannot create directory /dev/null/x/test"
out=$(md dump --dbpath "$T/src" --query '{"a": 1}' 2>&1)
expect_status "--query without --collection" 2 $?
out=$(md dump --dbpath "$T/src" --bogus 2>&1)
expect_status "unknown option" 2 $?

# a database held by another process
mkfifo "$T/fifo"
md --dbpath "$T/src" run <"$T/fifo" >/dev/null &
holder=$!
exec 9>"$T/fifo"
sleep 0.5
out=$(md dump --dbpath "$T/src" --out "$T/locked" 2>&1)
expect_status "locked database, dump" 1 $?
expect "locked database message" "$out" "DBPathInUse"
out=$(md restore --dbpath "$T/src" "$T/d1" 2>&1)
expect_status "locked database, restore" 1 $?
exec 9>&-
wait $holder

# damaged archives
head -c 300 "$T/a.archive" >"$T/trunc.archive"
out=$(md restore --dbpath "$T/bad2" --archive="$T/trunc.archive" 2>&1)
expect_status "truncated archive" 1 $?
expect "truncated archive message" "$out" "trunc.archive"
cp "$FIX/shop.archive" "$T/flip.archive"
# the price 9.99 of the first product: flip one byte of the double
off=$(grep -obUaP "price\x00" "$T/flip.archive" | head -1 | cut -d: -f1)
printf '\001' | dd of="$T/flip.archive" bs=1 seek=$((off + 7)) conv=notrunc 2>/dev/null
out=$(md restore --dbpath "$T/bad3" --archive="$T/flip.archive" 2>&1)
expect_status "damaged document" 1 $?
expect "CRC mismatch" "$out" "CRC mismatch for shop.products"
printf 'not an archive' >"$T/junk"
out=$(md restore --dbpath "$T/bad4" --archive="$T/junk" 2>&1)
expect_status "not an archive" 1 $?
expect "not an archive message" "$out" "is not a mongodump archive"
printf '\005\000\000\000' >"$T/bad4dump.bson"
mkdir -p "$T/bd/test" && cp "$T/bad4dump.bson" "$T/bd/test/c.bson"
out=$(md restore --dbpath "$T/bad5" "$T/bd" 2>&1)
expect_status "damaged .bson" 1 $?
expect "damaged .bson message" "$out" "c.bson"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
