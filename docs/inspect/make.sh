#!/bin/sh
# docs/inspect/make.sh -- redraws the README's inspect pictures:
# mmapv1.svg (a collection after deletes and a growing update that moved
# a document), mmapv1-diff.svg (before and after that update) and
# btree.svg (a table of depth 2 with an overflow value, after deletes).
# Usage: MINIDOC=build/minidoc docs/inspect/make.sh
set -e
MINIDOC=${MINIDOC:-build/minidoc}
OUT=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/md_pictures_XXXXXX)
trap 'rm -rf "$T"' EXIT
OPTS='{"mmapv1": {"firstFileSize": 131072, "nsSize": 65536}}'
i=0
while [ $i -lt 80 ]; do
    printf '{"insert": "c", "documents": [{"_id": %d, "s": "%0*d"}]}\n' $i $((i * 37 % 300 + 1)) 0
    i=$((i + 1))
done >"$T/fill.jsonl"
printf '%s\n' '{"delete": "c", "deletes": [{"q": {"_id": {"$in": [3, 10, 17, 40, 41, 42, 60]}}, "limit": 0}]}' \
    '{"createIndexes": "c", "indexes": [{"key": {"s": 1}, "name": "s_1"}]}' >>"$T/fill.jsonl"
"$MINIDOC" --dbpath "$T/before" --engine mmapv1 --opts "$OPTS" run <"$T/fill.jsonl" >/dev/null
cp -r "$T/before" "$T/after"
"$MINIDOC" --dbpath "$T/after" eval '{"update": "c", "updates": [{"q": {"_id": 5}, "u": {"$set": {"s": "a growing update: the document no longer fits its record and moves to a new one at the end"}}}]}' >/dev/null
"$MINIDOC" inspect --dbpath "$T/after" --out "$OUT/mmapv1.svg"
"$MINIDOC" inspect --diff "$T/before" "$T/after" --out "$OUT/mmapv1-diff.svg"
{
    i=0
    while [ $i -lt 2000 ]; do
        printf '{"_id": %d, "s": "%0*d"}\n' $i $((i % 9 * 40 + 60)) 0
        i=$((i + 1))
    done
    printf '{"_id": "big", "s": "%0*d"}\n' 20000 0
} >"$T/bt.json"
"$MINIDOC" import --dbpath "$T/bt" --engine btree -c c "$T/bt.json" 2>/dev/null
"$MINIDOC" --dbpath "$T/bt" eval '{"delete": "c", "deletes": [{"q": {"_id": {"$lt": 700}}, "limit": 0}]}' >/dev/null
"$MINIDOC" inspect --dbpath "$T/bt" --out "$OUT/btree.svg"
