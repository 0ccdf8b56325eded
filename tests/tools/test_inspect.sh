#!/bin/sh
# test_inspect.sh -- minidoc inspect (tools/inspect*.c).
#
# The SVG of a known small database is checked structurally against what
# the engine itself reports: on mmapv1 the record, extent and deleted
# record groups of a collection equal validate's nrecords, extentCount
# and deletedCount; on btree the leaf, internal and overflow page groups
# of a table's file equal collStats' btree.pages.  --text reports the
# move of a growing update, and --diff before/after outlines exactly that
# document as moved.  inspect changes no byte of the files (checksums
# before and after) and works beside a process holding the database.  A
# damaged file (an extent header, a btree page) is drawn up to the damage,
# marked, with exit status 3.  Bad input: a missing directory, one with no
# data files, an unwritable output, usage errors.
#
# Usage: MINIDOC=build/minidoc tests/tools/test_inspect.sh
MINIDOC=${MINIDOC:-build/minidoc}
OPTS='{"mmapv1": {"firstFileSize": 131072, "nsSize": 65536}}'
pass=0
fail=0
T=$(mktemp -d /tmp/md_inspect_XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT INT TERM
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
expect() { if printf '%s\n' "$2" | grep -F -q -- "$3"; then ok; else ko "$1: no '$3' in: $2"; fi; }
expect_status() { if [ "$2" = "$3" ]; then ok; else ko "$1: exit status $3, expected $2"; fi; }
expect_eq() { if [ "$2" = "$3" ]; then ok; else ko "$1: $2, expected $3"; fi; }
md() { "$MINIDOC" --opts "$OPTS" "$@"; }
# field NAME JSON: the first number after "NAME" :
field() { printf '%s\n' "$2" | sed -n "s/.*\"$1\" : \([0-9]*\).*/\1/p" | head -1; }
# groups SVG KIND OWNER: region groups of KIND whose title names OWNER
groups() { grep -c "^<g class=\"$2\"[^>]*><title>$3: $2 at" "$1"; }
# in_file SVG FILE KIND: region groups of KIND inside FILE's map
in_file() {
    sed -n "/^<g class=\"file\" data-name=\"$2\">/,/^<\/g><!--file-->/p" "$1" | grep -c "^<g class=\"$3\""
}
sums() { (cd "$1" && find . -type f -exec md5sum {} + | sort); }

# ---- mmapv1: a collection with moves and deleted records -------------------------------
i=0
while [ $i -lt 60 ]; do
    printf '{"insert": "c", "documents": [{"_id": %d, "s": "%0*d"}]}\n' $i $((i * 7 % 200 + 1)) 0
    i=$((i + 1))
done >"$T/fill.jsonl"
cat >>"$T/fill.jsonl" <<'JSON'
{"delete": "c", "deletes": [{"q": {"_id": {"$in": [3, 10, 17, 40]}}, "limit": 0}]}
{"createIndexes": "c", "indexes": [{"key": {"s": 1}, "name": "s_1"}]}
{"insert": "other", "documents": [{"_id": 1}]}
JSON
md --dbpath "$T/mm" --engine mmapv1 run <"$T/fill.jsonl" >/dev/null
cp -r "$T/mm" "$T/before"
md --dbpath "$T/mm" eval '{"update": "c", "updates": [{"q": {"_id": 5}, "u": {"$set": {"s": "grown far past its padding, grown far past its padding, grown far past its padding, grown far past its padding, grown far past its padding"}}}]}' >/dev/null
v=$(md --dbpath "$T/mm" eval '{"validate": "c", "full": true}')
before=$(sums "$T/mm")
md inspect --dbpath "$T/mm" >"$T/mm.svg"
expect_status "inspect mmapv1" 0 $?
expect_eq "sums unchanged" "$(sums "$T/mm")" "$before"
head -c 5 "$T/mm.svg" | grep -q "<?xml" && ok || ko "SVG header"
expect_eq "groups balance" "$(grep -o '<g ' "$T/mm.svg" | wc -l)" "$(grep -o '</g>' "$T/mm.svg" | wc -l)"
expect_eq "records = validate nrecords" "$(groups "$T/mm.svg" record test.c)" "$(field nrecords "$v")"
expect_eq "extents = validate extentCount" "$(groups "$T/mm.svg" extent test.c)" "$(field extentCount "$v")"
expect_eq "deleted = validate deletedCount" "$(groups "$T/mm.svg" deleted test.c)" "$(field deletedCount "$v")"
expect_eq "other's record" "$(groups "$T/mm.svg" record test.other)" 1
[ "$(groups "$T/mm.svg" bucket 'test.c.$s_1')" -ge 1 ] && ok || ko "index buckets drawn"
txt=$(md inspect --dbpath "$T/mm" --text)
expect "text: moves" "$txt" "(in place 0, moves 1)"
expect "text: buckets" "$txt" "deleted records per bucket:"
expect "text: fill" "$txt" "fill "
d=$(md inspect --diff "$T/before" "$T/mm" --text)
expect "diff: one moved" "$d" "documents at a new place: 1"
md inspect --diff "$T/before" "$T/mm" --out "$T/diff.svg"
expect_status "diff svg" 0 $?
expect_eq "diff: the moved record outlined" "$(grep -c '^<g class="record moved"' "$T/diff.svg")" 1
expect "diff: the moved one is _id 5" "$(grep '^<g class="record moved"' "$T/diff.svg")" "test.c: record"
expect_eq "diff: both sides drawn" "$(grep -c '^<g class="file" data-name="test.0">' "$T/diff.svg")" 2

# beside a process that holds the database: no lock taken, nothing written
mkfifo "$T/fifo"
md --dbpath "$T/before" run <"$T/fifo" >/dev/null &
holder=$!
exec 9>"$T/fifo"
sleep 0.5
s1=$(sums "$T/before")
md inspect --dbpath "$T/before" --text >/dev/null
expect_status "inspect beside the owner" 0 $?
expect_eq "nothing written beside the owner" "$(sums "$T/before")" "$s1"
exec 9>&-
wait $holder

# a damaged extent header: drawn up to it, marked, status 3
cp -r "$T/mm" "$T/bad"
off=$(grep '^<g class="extent"' "$T/mm.svg" | grep 'test.c: extent' | head -1 | sed 's/.*data-off="\([0-9]*\)".*/\1/')
printf 'XXXX' | dd of="$T/bad/test.0" bs=1 seek="$off" conv=notrunc 2>/dev/null
md inspect --dbpath "$T/bad" >"$T/bad.svg" 2>"$T/err"
expect_status "damaged extent" 3 $?
expect "damage reported" "$(cat "$T/err")" "damaged region"
[ "$(grep -c '^<g class="damage"' "$T/bad.svg")" -ge 1 ] && ok || ko "damage drawn"
expect "damage named" "$(grep '^<g class="damage"' "$T/bad.svg")" "test.c: extent at 0:0x"
expect_eq "the rest still drawn" "$(groups "$T/bad.svg" record test.other)" 1
expect "damage in text" "$(md inspect --dbpath "$T/bad" --text 2>/dev/null)" "DAMAGE in test.0"

# ---- btree: pages against collStats -----------------------------------------------------------
{
    i=0
    while [ $i -lt 1200 ]; do
        printf '{"_id": %d, "s": "%0*d"}\n' $i $((i % 9 * 40 + 60)) 0
        i=$((i + 1))
    done
    printf '{"_id": "big", "s": "%0*d"}\n' 20000 0
} >"$T/bt.json"
md import --dbpath "$T/bt" --engine btree -c c "$T/bt.json" 2>/dev/null
cs=$(md --dbpath "$T/bt" eval '{"collStats": "c"}')
file=$(cd "$T/bt" && ls test.c-*.bt)
before=$(sums "$T/bt")
md inspect --dbpath "$T/bt" >"$T/bt.svg"
expect_status "inspect btree" 0 $?
expect_eq "btree sums unchanged" "$(sums "$T/bt")" "$before"
expect_eq "leaf pages = collStats" "$(in_file "$T/bt.svg" "$file" leaf)" "$(field leaf "$cs")"
expect_eq "internal pages = collStats" "$(in_file "$T/bt.svg" "$file" internal)" "$(field internal "$cs")"
expect_eq "overflow blocks = collStats" "$(in_file "$T/bt.svg" "$file" overflow)" "$(field overflow "$cs")"
[ "$(field internal "$cs")" -ge 1 ] && ok || ko "the btree test wants a tree of depth 2: $cs"
txt=$(md inspect --dbpath "$T/bt" --text)
expect "btree text: depth" "$txt" "depth 2, pages per level from the root: 1 $(field leaf "$cs")"
expect "btree text: checkpoint" "$txt" "checkpoint "
expect "btree text: leaf fill" "$txt" "leaf fill "
cp -r "$T/bt" "$T/btbad"
off=$(sed -n "/^<g class=\"file\" data-name=\"$file\">/,/^<\/g><!--file-->/p" "$T/bt.svg" | grep '^<g class="leaf"' | sed -n 2p | sed 's/.*data-off="\([0-9]*\)".*/\1/')
printf 'XXXXXXXX' | dd of="$T/btbad/$file" bs=1 seek=$((off + 100)) conv=notrunc 2>/dev/null
md inspect --dbpath "$T/btbad" >"$T/btbad.svg" 2>/dev/null
expect_status "damaged btree page" 3 $?
expect "btree damage named" "$(grep '^<g class="damage"' "$T/btbad.svg")" "checksum mismatch"
expect_eq "the other leaves still drawn" "$(in_file "$T/btbad.svg" "$file" leaf)" $(($(field leaf "$cs") - 1))
if command -v rsvg-convert >/dev/null; then
    md inspect --dbpath "$T/bt" --png "$T/bt.png"
    expect_status "--png" 0 $?
    expect "PNG written" "$(od -A n -c -N 4 "$T/bt.png")" "P   N   G"
fi

# ---- bad input --------------------------------------------------------------------------------------
out=$(md inspect --dbpath "$T/nosuch" 2>&1)
expect_status "missing directory" 1 $?
expect "missing directory message" "$out" "No such file or directory"
mkdir "$T/empty"
out=$(md inspect --dbpath "$T/empty" 2>&1)
expect_status "no data files" 1 $?
expect "no data files message" "$out" "no minidoc data files"
out=$(md inspect --dbpath "$T/mm" --out /dev/null/x.svg 2>&1)
expect_status "unwritable output" 1 $?
expect "unwritable output message" "$out" "cannot write /dev/null/x.svg"
out=$(md inspect --diff "$T/mm" 2>&1)
expect_status "--diff with one directory" 2 $?
out=$(md inspect --dbpath "$T/mm" --bogus 2>&1)
expect_status "unknown option" 2 $?
printf 'garbage' >"$T/empty/minidoc.turtle"
out=$(md inspect --dbpath "$T/empty" 2>&1)
expect_status "damaged turtle" 1 $?
expect "damaged turtle message" "$out" "minidoc.turtle is damaged"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
