#!/bin/sh
# test_shell.sh -- `minidoc shell` (tools/shell*.c) end to end.
#
# --eval runs for every method of the shell's API, with the printed
# output checked exactly (piped: no colours): find with sort, limit, skip
# and projection, findOne, insertOne, insertMany, updateOne, updateMany,
# replaceOne, deleteOne, deleteMany, findOneAndUpdate, aggregate,
# countDocuments, distinct, createIndex, getIndexes, dropIndex, stats(),
# explain(), db.runCommand, db.getCollectionNames(), show collections,
# show dbs, use, it, help; the types as mongosh prints them; errors as
# MongoServerError with a non-zero exit.  A script file runs, a failing
# one exits 1 and stops there; piped stdin is a session.  Then an
# interactive session under a pseudo-terminal (script(1) from util-linux)
# checks the prompt, the continuation prompt of a multi-line entry, tab
# completion of a collection name and of a method, colours, use's prompt
# and the history file.  Both engines are used.
#
# Usage: MINIDOC=build/minidoc tests/tools/test_shell.sh
# Prints one line per failure and a final "N passed, M failed".
MINIDOC=${MINIDOC:-build/minidoc}
OPTS='{"mmapv1": {"firstFileSize": 131072, "nsSize": 65536}}'
pass=0
fail=0
DIR=$(mktemp -d /tmp/md_shell_XXXXXX) || exit 1
trap 'rm -rf "$DIR"' EXIT INT TERM

ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
# expect NAME TEXT PATTERN: TEXT contains PATTERN (fixed string)
expect() {
    if printf '%s\n' "$2" | grep -F -q -- "$3"; then ok; else ko "$1: no '$3' in: $2"; fi
}
expect_not() {
    if printf '%s\n' "$2" | grep -F -q -- "$3"; then ko "$1: '$3' in: $2"; else ok; fi
}
# same NAME GOT WANT: exactly equal
same() {
    if [ "$2" = "$3" ]; then ok; else ko "$1: got
$2
--- expected
$3"; fi
}
expect_status() {
    if [ "$2" = "$3" ]; then ok; else ko "$1: exit status $3, expected $2"; fi
}

if [ ! -x "$MINIDOC" ]; then
    echo "FAIL: $MINIDOC is not an executable (build it with make)"
    echo "0 passed, 1 failed"
    exit 1
fi

# sh JS: the shell's --eval on the btree data directory
sh_eval() { "$MINIDOC" shell --dbpath "$DIR/bt" --eval "$1" 2>&1; }

# ---- writes ----------------------------------------------------------------------------
same insertOne "$(sh_eval 'db.c.insertOne({_id: 1, a: 1, s: "one"})')" \
    "{ acknowledged: true, insertedId: 1 }"
same insertMany "$(sh_eval 'db.c.insertMany([{_id: 2, a: 2, s: "two"}, {_id: 3, a: 3, s: "three"}, {_id: 4, a: 4, g: "x"}, {_id: 5, a: 5, g: "x"}])')" \
"{ acknowledged: true, insertedIds: { '0': 2, '1': 3, '2': 4, '3': 5 } }"
out=$(sh_eval 'db.ids.insertOne({v: 1}).insertedId instanceof ObjectId')
same "insertOne makes an ObjectId _id" "$out" "true"
same "integral numbers are int32" "$(sh_eval 'db.c.aggregate([{$match: {_id: 1}}, {$project: {_id: 0, t: {$type: "$a"}}}])')" "[ { t: 'int' } ]"
same updateOne "$(sh_eval 'db.c.updateOne({_id: 1}, {$set: {b: true}})')" \
"{
  acknowledged: true,
  insertedId: null,
  matchedCount: 1,
  modifiedCount: 1,
  upsertedCount: 0
}"
out=$(sh_eval 'db.c.updateMany({g: "x"}, {$inc: {a: 10}})')
expect updateMany "$out" "matchedCount: 2,"
expect updateMany "$out" "modifiedCount: 2,"
out=$(sh_eval 'db.c.updateOne({_id: 9}, {$set: {a: 9}}, {upsert: true})')
expect "updateOne upsert" "$out" "insertedId: 9,"
expect "updateOne upsert" "$out" "upsertedCount: 1"
same "updateOne needs operators" "$(sh_eval 'db.c.updateOne({_id: 1}, {a: 1})')" \
    "Error: Update document requires atomic operators"
out=$(sh_eval 'db.c.replaceOne({_id: 9}, {a: 90, r: 1})')
expect replaceOne "$out" "modifiedCount: 1,"
same "replaceOne result" "$(sh_eval 'db.c.findOne({_id: 9})')" "{ _id: 9, a: 90, r: 1 }"
same findOneAndUpdate "$(sh_eval 'db.c.findOneAndUpdate({_id: 9}, {$inc: {a: 1}}, {returnDocument: "after", projection: {r: 0}})')" \
    "{ _id: 9, a: 91 }"
same "findOneAndUpdate before" "$(sh_eval 'db.c.findOneAndUpdate({_id: 9}, {$inc: {a: 1}})')" \
    "{ _id: 9, a: 91, r: 1 }"
same "findOneAndUpdate none" "$(sh_eval 'db.c.findOneAndUpdate({_id: 99}, {$inc: {a: 1}})')" "null"
same deleteOne "$(sh_eval 'db.c.deleteOne({_id: 9})')" "{ acknowledged: true, deletedCount: 1 }"
sh_eval 'db.d.insertMany([{k: 1}, {k: 1}, {k: 2}])' >/dev/null
same deleteMany "$(sh_eval 'db.d.deleteMany({k: 1})')" "{ acknowledged: true, deletedCount: 2 }"

# ---- reads -----------------------------------------------------------------------------
same find "$(sh_eval 'db.c.find({a: {$gt: 1}}, {_id: 1, a: 1}).sort({a: -1}).limit(2)')" \
    "[ { _id: 5, a: 15 }, { _id: 4, a: 14 } ]"
same "find skip" "$(sh_eval 'db.c.find({}, {a: 1}).sort({_id: 1}).skip(3).limit(1).toArray()')" \
    "[ { _id: 4, a: 14 } ]"
same findOne "$(sh_eval 'db.c.findOne({s: "two"})')" "{ _id: 2, a: 2, s: 'two' }"
same "findOne none" "$(sh_eval 'db.c.findOne({s: "none"})')" "null"
same "cursor methods" "$(sh_eval 'var c = db.c.find().sort({_id: 1}); [c.hasNext(), c.next()._id, c.itcount()]')" \
    "[ true, 1, 4 ]"
same "cursor map" "$(sh_eval 'db.c.find({_id: {$lt: 3}}).sort({_id: 1}).map(function (d) { return d.s; }).toArray()')" \
    "[ 'one', 'two' ]"
same aggregate "$(sh_eval 'db.c.aggregate([{$match: {g: "x"}}, {$group: {_id: "$g", total: {$sum: "$a"}}}])')" \
    "[ { _id: 'x', total: 29 } ]"
same countDocuments "$(sh_eval 'db.c.countDocuments({a: {$gte: 3}})')" "3"
same "countDocuments skip" "$(sh_eval 'db.c.countDocuments({}, {skip: 1, limit: 2})')" "2"
same distinct "$(sh_eval 'db.c.distinct("g")')" "[ 'x' ]"
same "distinct filter" "$(sh_eval 'db.c.distinct("s", {a: {$lt: 3}})')" "[ 'one', 'two' ]"

# ---- indexes, stats, explain, commands ---------------------------------------------------
same createIndex "$(sh_eval 'db.c.createIndex({a: 1, s: -1})')" "a_1_s_-1"
same "createIndex named" "$(sh_eval 'db.c.createIndex({g: 1}, {name: "by_g", sparse: true})')" "by_g"
same getIndexes "$(sh_eval 'db.c.getIndexes()')" \
"[
  { v: 2, key: { _id: 1 }, name: '_id_', ns: 'test.c' },
  { v: 2, key: { a: 1, s: -1 }, name: 'a_1_s_-1', ns: 'test.c' },
  { v: 2, key: { g: 1 }, name: 'by_g', ns: 'test.c', sparse: true }
]"
same dropIndex "$(sh_eval 'db.c.dropIndex("by_g")')" "{ nIndexesWas: 3, ok: 1 }"
same "dropIndex unknown" "$(sh_eval 'db.c.dropIndex("nope")'; echo "rc=$?")" \
    "MongoServerError: index not found with name [nope]
rc=1"
same stats "$(sh_eval 'var s = db.c.stats(); [s.ns, s.count, s.nindexes, typeof s.size]')" \
    "[ 'test.c', 5, 2, 'number' ]"
out=$(sh_eval 'db.c.find({a: 2}).explain()')
expect explain "$out" "queryPlanner: {"
expect explain "$out" "indexName: 'a_1_s_-1'"
expect "explain collection" "$(sh_eval 'db.c.explain().find({a: 2})')" "stage: 'IXSCAN'"
same runCommand "$(sh_eval 'db.runCommand({count: "c", query: {g: "x"}})')" "{ n: 2, ok: 1 }"
same "runCommand string" "$(sh_eval 'db.runCommand("ping")')" "{ ok: 1 }"
same "runCommand error" "$(sh_eval 'db.runCommand({nosuch: 1})'; echo "rc=$?")" \
    "MongoServerError: no such command: 'nosuch'
rc=1"
same "error fields" "$(sh_eval 'try { db.c.insertOne({_id: 1}) } catch (e) { [e.name, e.code] }')" \
    "[ 'MongoServerError', 11000 ]"
same "command error fields" "$(sh_eval 'try { db.c.dropIndex("nope") } catch (e) { [e.name, e.code, e.codeName] }')" \
    "[ 'MongoServerError', 27, 'IndexNotFound' ]"
same getCollectionNames "$(sh_eval 'db.getCollectionNames()')" "[ 'c', 'd', 'ids' ]"
same "show collections" "$(sh_eval 'show collections')" "c
d
ids"
out=$(sh_eval 'show dbs')
expect "show dbs" "$out" "test  "
expect "show dbs" "$out" "KiB"
same use "$(sh_eval 'use other')" "switched to db other"
same "use bad name" "$(sh_eval 'use a.b'; echo "rc=$?")" \
    "MongoServerError: Invalid database name: 'a.b'
rc=1"
same "db.x.y" "$(sh_eval 'db.x.y.getFullName() + " " + db.getCollection("a-b").getName()')" \
    "test.x.y a-b"
same "completions" "$(sh_eval 'JSON.stringify([__shell.complete("db.c.find({}).so"), __shell.complete("show c"), __shell.complete("db.c.insertM"), __shell.complete("db.getCollectionN"), __shell.complete("Obj")])')" \
    '[[".sort"],["collections"],["db.c.insertMany"],["db.getCollectionNames"],["ObjectId"]]'
expect help "$(sh_eval 'help')" "show collections"
expect "collection help" "$(sh_eval 'db.c.help()')" "findOneAndUpdate"

same "keys" "$(sh_eval '({"a.b": 1, "x y": "s\n", $k: 1, _id: 2})')" \
    "{ 'a.b': 1, 'x y': 's\\n', '\$k': 1, _id: 2 }"
# numbers right-aligned in columns, other values left-aligned (Node's rule)
same "string columns" "$(sh_eval '["a", "bb", "c", "dddd", "e", "f", "g", "hh"]')" \
"[
  'a', 'bb',
  'c', 'dddd',
  'e', 'f',
  'g', 'hh'
]"

# ---- the types, printed as mongosh prints them ---------------------------------------------
same types "$(sh_eval '[ObjectId("5f1d7c3e9b1e8a2b3c4d5e6f"), ISODate("2020-01-02T03:04:05.678Z"), NumberLong(5), NumberInt(7), NumberDecimal("1.50"), Timestamp(1, 2)]')" \
"[
  ObjectId('5f1d7c3e9b1e8a2b3c4d5e6f'),
  ISODate('2020-01-02T03:04:05.678Z'),
  Long('5'),
  Int32(7),
  Decimal128('1.50'),
  Timestamp({ t: 1, i: 2 })
]"
same "BinData and regex" "$(sh_eval '[BinData(0, "AQID"), BinData(4, "ASNFZ4mrze8BI0VniavN7w=="), /a+b/i, null, undefined, "it'"'"'s", -0, MinKey(), MaxKey()]')" \
"[
  Binary.createFromBase64('AQID', 0),
  UUID('01234567-89ab-cdef-0123-456789abcdef'),
  /a+b/i,
  null,
  undefined,
  \"it's\",
  -0,
  MinKey(),
  MaxKey()
]"
# the types go to the database and come back as themselves
sh_eval 'db.t.insertOne({_id: 1, o: ObjectId("5f1d7c3e9b1e8a2b3c4d5e6f"), d: ISODate("2020-01-02"), l: NumberLong("9007199254740993"), dec: NumberDecimal("0.1"), ts: Timestamp(5, 6), b: BinData(0, "AQID"), r: /x/m, big: 3000000000, f: 1.5})' >/dev/null
same "types round trip" "$(sh_eval 'db.t.findOne()')" \
"{
  _id: 1,
  o: ObjectId('5f1d7c3e9b1e8a2b3c4d5e6f'),
  d: ISODate('2020-01-02T00:00:00.000Z'),
  l: Long('9007199254740993'),
  dec: Decimal128('0.1'),
  ts: Timestamp({ t: 5, i: 6 }),
  b: Binary.createFromBase64('AQID', 0),
  r: /x/m,
  big: 3000000000,
  f: 1.5
}"
same "the type filter" "$(sh_eval 'db.t.countDocuments({l: {$type: "long"}, big: {$type: "double"}, ts: {$type: "timestamp"}})')" "1"
same "nested layout" "$(sh_eval '({a: {b: {c: {d: 1}}}, e: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]})')" \
"{
  a: { b: { c: { d: 1 } } },
  e: [
    1, 2, 3, 4,  5,
    6, 7, 8, 9, 10
  ]
}"

# ---- cursors in batches of 20, it ---------------------------------------------------------
sh_eval 'for (var i = 0; i < 25; i++) db.n.insertOne({_id: i})' >/dev/null
out=$(printf 'db.n.find().sort({_id: 1})\nit\nit\n' | "$MINIDOC" shell --dbpath "$DIR/bt" 2>&1)
expect "batch of 20" "$out" "{ _id: 19 }"
expect_not "batch of 20" "$(printf '%s\n' "$out" | sed -n '1,/Type "it" for more/p')" "{ _id: 20 }"
expect "it" "$out" 'Type "it" for more
[ { _id: 20 }, { _id: 21 }, { _id: 22 }, { _id: 23 }, { _id: 24 } ]'
expect "it when done" "$out" "{ _id: 24 } ]
no cursor"

# ---- scripts --------------------------------------------------------------------------------
cat >"$DIR/ok.js" <<'EOF'
// a script: nothing is printed but what it prints
db.s.insertMany([{_id: 1, v: 'a'}, {_id: 2, v: 'b'}]);
function total() {
    var n = 0;
    db.s.find().forEach(function (d) { n++; });
    return n;
}
print('documents:', total());
printjson(db.s.findOne({_id: 2}));
db.s.countDocuments({});
EOF
out=$("$MINIDOC" shell --dbpath "$DIR/bt" "$DIR/ok.js" 2>&1)
rc=$?
expect_status "script" 0 $rc
same "script output (printjson expands)" "$out" "documents: 2
{
  _id: 2,
  v: 'b'
}"
cat >"$DIR/bad.js" <<'EOF'
print('before');
db.s.insertOne({_id: 1});
print('after');
EOF
out=$("$MINIDOC" shell --dbpath "$DIR/bt" "$DIR/bad.js" 2>"$DIR/err")
rc=$?
expect_status "failing script" 1 $rc
same "failing script stops" "$out" "before"
expect "failing script error" "$(cat "$DIR/err")" "MongoServerError: E11000 duplicate key error"
printf 'var x = (\n' >"$DIR/syntax.js"
"$MINIDOC" shell --dbpath "$DIR/bt" "$DIR/syntax.js" 2>"$DIR/err"
expect_status "syntax error" 1 $?
expect "syntax error message" "$(cat "$DIR/err")" "SyntaxError"
"$MINIDOC" shell --dbpath "$DIR/bt" --eval 'throw new Error("boom")' 2>"$DIR/err"
expect_status "eval throws" 1 $?
same "eval throws message" "$(cat "$DIR/err")" "Error: boom"
"$MINIDOC" shell --dbpath "$DIR/bt" --eval 'quit(4)'
expect_status "quit status" 4 $?
"$MINIDOC" shell --dbpath "$DIR/bt" "$DIR/missing.js" 2>"$DIR/err"
expect_status "missing script" 1 $?
expect "missing script message" "$(cat "$DIR/err")" "cannot read $DIR/missing.js"
"$MINIDOC" shell --dbpath "$DIR/bt" --bogus 2>/dev/null
expect_status "bad option" 2 $?
: >"$DIR/file"
"$MINIDOC" shell --dbpath "$DIR/file" --eval '1' 2>"$DIR/err"
expect_status "dbpath is a file" 1 $?
expect "dbpath is a file message" "$(cat "$DIR/err")" "cannot use $DIR/file as the data directory"
"$MINIDOC" shell --dbpath "$DIR/bt" --dbname 'a b' --eval '1' 2>/dev/null
expect_status "bad dbname" 2 $?

# piped stdin: a session (multi-line entries too); 1 if an entry failed
out=$(printf 'var f = function (x) {\n  return x * 2;\n}\nf(21)\nnosuch\nuse other\ndb.getName()\ndb.o.insertOne({_id: 1})\n' |
    "$MINIDOC" shell --dbpath "$DIR/bt" 2>&1)
rc=$?
same "piped session" "$out" "42
ReferenceError: identifier 'nosuch' undefined
switched to db other
other
{ acknowledged: true, insertedId: 1 }"
expect_status "piped session status" 1 $rc

# the data directory is the server's layout: one directory per database
[ -d "$DIR/bt/test" ] && [ -d "$DIR/bt/other" ] && ok || ko "one directory per database"

# a database the CLI made in DIR/NAME with --dbname NAME is the shell's `use NAME`
mkdir -p "$DIR/cli"
"$MINIDOC" --dbpath "$DIR/cli/shop" --dbname shop --engine mmapv1 --opts "$OPTS" \
    eval '{"insert": "c", "documents": [{"_id": 1, "v": "from the CLI"}]}' >/dev/null
same "a CLI database" "$("$MINIDOC" shell --dbpath "$DIR/cli" --eval 'use shop' --eval 'db.c.findOne()' 2>&1)" \
    "switched to db shop
{ _id: 1, v: 'from the CLI' }"

# ---- mmapv1 ---------------------------------------------------------------------------------
out=$("$MINIDOC" shell --dbpath "$DIR/mm" --engine mmapv1 --opts "$OPTS" \
    --eval 'db.m.insertMany([{_id: 1, s: "x"}, {_id: 2, s: "y"}]); db.m.updateOne({_id: 1}, {$set: {s: "a much longer string that moves the record"}}); [db.m.findOne({_id: 1}).s, db.m.stats().nindexes]' 2>&1)
same "mmapv1" "$out" "[ 'a much longer string that moves the record', 1 ]"
[ -f "$DIR/mm/test/test.ns" ] && ok || ko "mmapv1 files under DIR/test"

# ---- an interactive session under a pseudo-terminal ----------------------------------------
if command -v script >/dev/null 2>&1; then
    # typed ahead: readline reads it from the terminal as if typed; \t is TAB
    printf 'db.c.find({_id: 2},\n{s: 1})\ndb.ca\t.countDoc\t({a: 1})\nuse other\nexit\n' >"$DIR/keys"
    out=$(MINIDOC_SHELL_HISTORY="$DIR/hist" TERM=xterm timeout 20 \
        script -qfec "$MINIDOC shell --dbpath $DIR/bt" /dev/null <"$DIR/keys" 2>&1 | tr -d '\r')
    sh_eval 'db.cars.insertOne({_id: 1})' >/dev/null
    out=$(MINIDOC_SHELL_HISTORY="$DIR/hist" TERM=xterm timeout 20 \
        script -qfec "$MINIDOC shell --dbpath $DIR/bt" /dev/null <"$DIR/keys" 2>&1 | tr -d '\r')
    plain=$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g')
    expect "pty banner" "$plain" 'Type "help" for help'
    expect "pty prompt" "$plain" "test> db.c.find({_id: 2},"
    expect "pty continuation prompt" "$plain" "... {s: 1})"
    expect "pty colours" "$out" "[ { _id: $(printf '\033[33m')2$(printf '\033[39m'), s: $(printf '\033[32m')'two'$(printf '\033[39m') } ]"
    expect "pty completion" "$plain" "test> db.cars.countDocuments({a: 1})"
    expect "pty completed command ran" "$plain" "$(printf '\n0\n')"
    expect "pty use prompt" "$plain" "other> exit"
    same "history file" "$(tail -5 "$DIR/hist")" "db.c.find({_id: 2},
{s: 1})
db.cars.countDocuments({a: 1})
use other
exit"
    # the same input piped has no prompt and no colours
    out=$(printf 'db.c.findOne({_id: 2})\n' | "$MINIDOC" shell --dbpath "$DIR/bt" 2>&1)
    same "piped has no colours" "$out" "{ _id: 2, a: 2, s: 'two' }"
else
    echo "SKIP: no script(1): the pseudo-terminal session is not run"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
