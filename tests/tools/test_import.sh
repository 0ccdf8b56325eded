#!/bin/sh
# test_import.sh -- minidoc import and export (tools/import.c, export.c).
#
# Round trips: a document holding every BSON type exported as canonical
# JSON, imported on the other engine and exported again gives the same
# bytes (mmapv1 -> btree and btree -> mmapv1); --jsonArray and --pretty
# read back; CSV with quotes, commas, newlines and numbers imported and
# exported gives the input back; TSV; --columnsHaveTypes; dotted fields.
# Modes insert, upsert (--upsertFields) and merge; --drop; --batchSize;
# --stopOnError; export's --query, --fields, --sort, --limit, --skip.
# Malformed input (truncated JSON, bad UTF-8, a 17 MB document, text that
# is not JSON, a bad CSV quote, a value that does not convert) is
# reported with its line number, the rest is imported, and nothing
# imported before is lost.  No progress line when stderr is not a
# terminal; one under a pseudo-terminal (script).  Bad input to both
# tools: missing files, unwritable output, a locked database, usage.
#
# Usage: MINIDOC=build/minidoc tests/tools/test_import.sh
MINIDOC=${MINIDOC:-build/minidoc}
OPTS='{"mmapv1": {"firstFileSize": 131072, "nsSize": 65536}}'
pass=0
fail=0
T=$(mktemp -d /tmp/md_import_XXXXXX) || exit 1
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT INT TERM
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
expect() { if printf '%s\n' "$2" | grep -F -q -- "$3"; then ok; else ko "$1: no '$3' in: $2"; fi; }
expect_not() { if printf '%s\n' "$2" | grep -F -q -- "$3"; then ko "$1: '$3' in: $2"; else ok; fi; }
expect_status() { if [ "$2" = "$3" ]; then ok; else ko "$1: exit status $3, expected $2"; fi; }
same() { if cmp -s "$2" "$3"; then ok; else ko "$1: $2 and $3 differ: $(diff "$2" "$3" | head -5)"; fi; }
md() { "$MINIDOC" --opts "$OPTS" "$@"; }

ALL='{"insert": "all", "documents": [{"_id": 1, "double": 1.5, "string": "h\u00e9llo \"q\" \\ \n", "doc": {"a": 1, "b": {"c": [1, {"d": 2}]}}, "array": [1, "x", [], {}], "bin0": {"$binary": {"base64": "AQID", "subType": "00"}}, "uuid": {"$binary": {"base64": "AAECAwQFBgcICQoLDA0ODw==", "subType": "04"}}, "undef": {"$undefined": true}, "oid": {"$oid": "5f1d7a3e9b1e8a3c4d5e6f70"}, "bool": true, "date": {"$date": {"$numberLong": "-1000"}}, "null": null, "regex": {"$regularExpression": {"pattern": "^a", "options": "i"}}, "dbptr": {"$dbPointer": {"$ref": "c", "$id": {"$oid": "5f1d7a3e9b1e8a3c4d5e6f70"}}}, "code": {"$code": "f()"}, "symbol": {"$symbol": "sym"}, "codews": {"$code": "g()", "$scope": {"x": 1}}, "int32": {"$numberInt": "7"}, "ts": {"$timestamp": {"t": 5, "i": 6}}, "int64": {"$numberLong": "8"}, "dec": {"$numberDecimal": "1.10"}, "min": {"$minKey": 1}, "max": {"$maxKey": 1}, "nan": {"$numberDouble": "NaN"}, "inf": {"$numberDouble": "-Infinity"}, "negz": -0.0, "big": 1e300}, {"_id": {"$oid": "5f1d7a3e9b1e8a3c4d5e6f71"}, "double": 2.3}]}'

# ---- every BSON type, canonical JSON, across engines ---------------------------------
for pair in "mmapv1 btree" "btree mmapv1"; do
    set -- $pair
    md --dbpath "$T/$1-src" --engine "$1" eval "$ALL" >/dev/null
    md export --dbpath "$T/$1-src" -c all --jsonFormat canonical --out "$T/$1.json" 2>"$T/err"
    expect_status "export $1" 0 $?
    expect "export count $1" "$(cat "$T/err")" "exported 2 records"
    md import --dbpath "$T/$1-to-$2" --engine "$2" -c all --file "$T/$1.json" 2>"$T/err"
    expect_status "import on $2" 0 $?
    expect "import summary $2" "$(cat "$T/err")" "2 document(s) imported successfully. 0 document(s) failed to import."
    md export --dbpath "$T/$1-to-$2" -c all --jsonFormat canonical --out "$T/$1-$2.json" 2>/dev/null
    same "every type $1 -> $2" "$T/$1.json" "$T/$1-$2.json"
    # --jsonArray --pretty reads back the same
    md export --dbpath "$T/$1-src" -c all --jsonFormat canonical --jsonArray --pretty --out "$T/$1-arr.json" 2>/dev/null
    md import --dbpath "$T/$1-arr" --engine "$2" -c all --jsonArray --file "$T/$1-arr.json" 2>/dev/null
    expect_status "import --jsonArray on $2" 0 $?
    md export --dbpath "$T/$1-arr" -c all --jsonFormat canonical --out "$T/$1-arr2.json" 2>/dev/null
    same "jsonArray pretty $1 -> $2" "$T/$1.json" "$T/$1-arr2.json"
done
out=$(md export --dbpath "$T/mmapv1-src" -c all --query '{"_id": {"$oid": "5f1d7a3e9b1e8a3c4d5e6f71"}}' 2>/dev/null)
expect "relaxed export, shortest doubles" "$out" '{"_id":{"$oid":"5f1d7a3e9b1e8a3c4d5e6f71"},"double":2.3}'
out=$(md export --dbpath "$T/mmapv1-src" -c all --jsonArray 2>/dev/null | head -c 1)
expect "jsonArray starts with [" "$out" "["

# ---- CSV: quoting, numbers, round trip --------------------------------------------------
cat >"$T/in.csv" <<'CSV'
name,age,note,addr.city,addr.zip
"Smith, John",42,"He said ""hi""",Paris,75001
plain,-7,"two
lines",,0
"  padded  ",3.25,x,Oslo,123456789012
CSV
md import --dbpath "$T/csv" -c people --type csv --headerline --file "$T/in.csv" 2>"$T/err"
expect_status "csv import" 0 $?
expect "csv summary" "$(cat "$T/err")" "3 document(s) imported successfully. 0 document(s) failed to import."
out=$(md export --dbpath "$T/csv" -c people --fields name,age,addr --sort '{"age": 1}' 2>/dev/null)
expect "csv types and dotted fields" "$out" '"name":"plain","age":-7,"addr":{"city":"","zip":0}'
expect "csv int64 and quotes" "$out" '"name":"  padded  ","age":3.25,"addr":{"city":"Oslo","zip":123456789012}'
md export --dbpath "$T/csv" -c people --type csv --fields name,age,note,addr.city,addr.zip --out "$T/out.csv" 2>/dev/null
same "csv round trip" "$T/in.csv" "$T/out.csv"
md export --dbpath "$T/csv" -c people --type csv --fields name --noHeaderLine --sort '{"age": -1}' --limit 1 --skip 1 --out "$T/one.csv" 2>/dev/null
expect "csv --noHeaderLine --sort --skip --limit" "$(cat "$T/one.csv")" '"  padded  "'
printf 'k\tv\n1\ta b\n2\t"q"\n' >"$T/in.tsv"
md import --dbpath "$T/csv" -c tsv --type tsv --headerline "$T/in.tsv" 2>/dev/null
out=$(md export --dbpath "$T/csv" -c tsv --fields k,v --sort '{"k": 1}' 2>/dev/null)
expect "tsv" "$out" '"k":2,"v":"\"q\""'
printf '1,007,2020-02-03,true,0aff,1.10,5,2.5\nzz,1,2020-02-03,true,00,1,1,1\n' >"$T/typed.csv"
md import --dbpath "$T/csv" -c typed --type csv --columnsHaveTypes \
    --fields 'a.int32(),b.string(),c.date(2006-01-02),d.boolean(),e.binary(hex),f.decimal(),g.int64(),h.double()' \
    --file "$T/typed.csv" 2>"$T/err"
expect_status "typed column that does not convert" 1 $?
expect "typed error line" "$(cat "$T/err")" "line 2: column 'a': could not parse 'zz' as int32"
out=$(md export --dbpath "$T/csv" -c typed --jsonFormat canonical --fields a,b,c,d,e,f,g,h 2>/dev/null)
expect "columnsHaveTypes" "$out" '"a":{"$numberInt":"1"},"b":"007","c":{"$date":{"$numberLong":"1580688000000"}},"d":true,"e":{"$binary":{"base64":"Cv8=","subType":"00"}},"f":{"$numberDecimal":"1.10"},"g":{"$numberLong":"5"},"h":{"$numberDouble":"2.5"}'
# a zone offset is exactly +hh:mm / -hh:mm; a shorter one at the end of the
# value was read past its end (found by tests/fuzz/fuzz_import.c)
printf '2021-03-04T05:06:07+02:00\n2021-03-04T05:06:07+02:0\n2021-03-04T05:06:07+ 2:-1\n2021-03-04T05:06:07Z\n' >"$T/tz.csv"
md import --dbpath "$T/csv" -c tz --type csv --columnsHaveTypes \
    --fields 'd.date(2006-01-02T15:04:05Z07:00)' --file "$T/tz.csv" 2>"$T/err"
expect_status "short zone offsets" 1 $?
expect "short zone offset" "$(cat "$T/err")" "line 2: column 'd': could not parse '2021-03-04T05:06:07+02:0'"
expect "spaced zone offset" "$(cat "$T/err")" "line 3: column 'd': could not parse '2021-03-04T05:06:07+ 2:-1'"
out=$(md export --dbpath "$T/csv" -c tz --jsonFormat canonical --fields d --sort '{"d": 1}' 2>/dev/null)
expect "zone offset +02:00" "$out" '"d":{"$date":{"$numberLong":"1614827167000"}}'
expect "zone Z" "$out" '"d":{"$date":{"$numberLong":"1614834367000"}}'
printf 'a,b\n"unclosed,1\n' >"$T/badq.csv"
out=$(md import --dbpath "$T/csv" -c badq --type csv --headerline "$T/badq.csv" 2>&1)
expect_status "bad csv quote" 1 $?
expect "bad csv quote line" "$out" "line 2: unexpected end of input inside a quoted field"

# ---- modes ----------------------------------------------------------------------------------
printf '{"_id": 1, "a": 1, "b": 1}\n{"_id": 2, "a": 2}\n' | md import --dbpath "$T/m" -c m 2>/dev/null
printf '{"_id": 1, "a": 10}\n{"_id": 3, "a": 3}\n' | md import --dbpath "$T/m" -c m --mode merge 2>/dev/null
expect_status "merge" 0 $?
out=$(md export --dbpath "$T/m" -c m --sort '{"_id": 1}' 2>/dev/null)
expect "merge keeps other fields" "$out" '{"_id":1,"a":10,"b":1}'
expect "merge upserts" "$out" '{"_id":3,"a":3}'
printf '{"_id": 1, "a": 100}\n' | md import --dbpath "$T/m" -c m --mode upsert 2>/dev/null
out=$(md export --dbpath "$T/m" -c m --query '{"_id": 1}' 2>/dev/null)
expect "upsert replaces" "$out" '{"_id":1,"a":100}'
printf '{"a": 2, "x": "up"}\n' | md import --dbpath "$T/m" -c m --upsertFields a 2>/dev/null
out=$(md export --dbpath "$T/m" -c m --query '{"a": 2}' 2>/dev/null)
expect "--upsertFields" "$out" '{"_id":2,"a":2,"x":"up"}'
printf '{"_id": 1}\n' | md import --dbpath "$T/m" -c m 2>"$T/err"
expect_status "insert of a duplicate" 1 $?
expect "duplicate line" "$(cat "$T/err")" "line 1: E11000 duplicate key error"
printf '{"_id": 9}\n' | md import --dbpath "$T/m" -c m --drop 2>/dev/null
out=$(md --dbpath "$T/m" eval '{"count": "m"}')
expect "--drop" "$out" '"n" : 1,'
i=0
while [ $i -lt 25 ]; do printf '{"_id": %d}\n' $i; i=$((i + 1)); done >"$T/25.json"
md import --dbpath "$T/m" -c b --batchSize 4 "$T/25.json" 2>"$T/err"
expect "--batchSize" "$(cat "$T/err")" "25 document(s) imported successfully"
out=$(md --dbpath "$T/m" eval '{"count": "b"}')
expect "--batchSize count" "$out" '"n" : 25,'

# ---- malformed input: line numbers, the rest goes on, nothing lost -----------------------------
{
    printf '{"_id": 1}\n{"_id": 2,\n "s": "two lines"}\n{"_id": 3, "s": "\377\376"}\n{"_id": 4, "a":\n'
    printf 'not json at all\n{"_id": 5}\n'
    head -c 17825792 /dev/zero | tr '\0' x | { printf '{"_id": 6, "big": "'; cat; printf '"}\n'; }
    printf '{"_id": 7}\n{"_id": 8, "t": '
} >"$T/mal.json"
md import --dbpath "$T/mal" -c c --batchSize 1 "$T/mal.json" 2>"$T/err"
expect_status "malformed input" 1 $?
err=$(cat "$T/err")
expect "bad UTF-8 line" "$err" "line 4: invalid JSON: invalid UTF-8 in a string"
expect "truncated document line" "$err" "line 5: unexpected end of input inside a document"
expect "not JSON line" "$err" "line 6: expected a document"
expect "17 MB document line" "$err" "line 8: document is larger than the maximum size 16777216"
expect "truncated at the end" "$err" "line 10: unexpected end of input"
expect "malformed summary" "$err" "4 document(s) imported successfully. 5 document(s) failed to import."
out=$(md export --dbpath "$T/mal" -c c --sort '{"_id": 1}' --fields _id 2>/dev/null | tr -d '\n')
expect "what parsed is there" "$out" '{"_id":1}{"_id":2}{"_id":5}{"_id":7}'
md import --dbpath "$T/mal" -c c2 --stopOnError "$T/mal.json" 2>"$T/err"
expect_status "--stopOnError" 1 $?
expect "--stopOnError summary" "$(cat "$T/err")" "2 document(s) imported successfully. 1 document(s) failed to import."
out=$(md --dbpath "$T/mal" eval '{"count": "c2"}')
expect "--stopOnError keeps the documents before" "$out" '"n" : 2,'
printf '[{"_id": 1}, {"_id": 2}' >"$T/open.json"
out=$(md import --dbpath "$T/mal" -c arr --jsonArray "$T/open.json" 2>&1)
expect_status "unclosed array" 1 $?
expect "unclosed array message" "$out" "the array is not closed"
expect "unclosed array keeps" "$out" "2 document(s) imported successfully"

# ---- progress: none when piped, a line on a terminal ------------------------------------------------
md import --dbpath "$T/p" -c c "$T/25.json" 2>"$T/err"
if grep -q "docs/s" "$T/err"; then ko "progress when stderr is not a terminal"; else ok; fi
if command -v script >/dev/null; then
    out=$(script -qec "$MINIDOC import --dbpath $T/p2 -c c $T/25.json" /dev/null 2>&1)
    expect "progress on a terminal" "$out" "docs/s"
fi

# ---- bad input -----------------------------------------------------------------------------------------
out=$(md import --dbpath "$T/b" -c c "$T/nosuch.json" 2>&1)
expect_status "import of a missing file" 1 $?
expect "missing file message" "$out" "nosuch.json: No such file or directory"
[ -e "$T/b" ] && ko "a missing input created the database" || ok
out=$(md export --dbpath "$T/m" -c m --out /dev/null/x.json 2>&1)
expect_status "export to an unwritable path" 1 $?
expect "unwritable message" "$out" "cannot write /dev/null/x.json"
out=$(md export --dbpath "$T/nosuchdb" -c m 2>&1)
expect_status "export of a missing database" 1 $?
out=$(md export --dbpath "$T/m" -c m --type csv 2>&1)
expect_status "csv export without fields" 2 $?
expect "csv export without fields message" "$out" "CSV mode requires a field list"
out=$(md import --dbpath "$T/m" -c m --type csv "$T/in.csv" 2>&1)
expect_status "csv import without fields" 2 $?
out=$(md import --dbpath "$T/m" -c m --type xml "$T/in.csv" 2>&1)
expect_status "unknown type" 2 $?
out=$(md export --dbpath "$T/m" -c m --query '{bad' 2>&1)
expect_status "bad --query" 2 $?
mkfifo "$T/fifo"
md --dbpath "$T/m" run <"$T/fifo" >/dev/null &
holder=$!
exec 9>"$T/fifo"
sleep 0.5
out=$(md import --dbpath "$T/m" -c m "$T/25.json" 2>&1)
expect_status "import into a locked database" 1 $?
expect "locked message" "$out" "DBPathInUse"
out=$(md export --dbpath "$T/m" -c m 2>&1)
expect_status "export of a locked database" 1 $?
exec 9>&-
wait $holder
out=$(md --dbpath "$T/m" eval '{"count": "m"}')
expect "nothing damaged" "$out" '"n" : 1,'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
