#!/bin/sh
# test_drivers.sh -- real MongoDB clients against `minidoc serve`, on btree
# and on mmapv1, all on the loopback address:
#
#   pymongo     tests/server/test_pymongo.py (python3-pymongo, python3-gridfs;
#               python3-snappy and python3-zstandard for those compressors)
#   libmongoc   build/tests/server/mongoc_example (libmongoc-dev)
#   Node.js     tests/server/test_node.js with npm's `mongodb` driver, and
#               `mongosh --eval` (both installed by make deps into $NPM_DIR)
#
# Each client that is not installed is reported with a SKIP line saying what
# installs it (make deps), never silently left out.  After the clients, the
# server gets SIGTERM: it must log its shutdown and exit 0, and the CLI must
# then open the database the clients wrote and find their documents (the
# engines were flushed and closed).  The server's log must be JSON lines.
#
# Usage: MINIDOC=build/minidoc [MONGOC_EXAMPLE=...] [NPM_DIR=build/npm] \
#            tests/server/test_drivers.sh
# Prints one line per failure or skip and a final "N passed, M failed".
MINIDOC=${MINIDOC:-build/minidoc}
BUILD=${BUILD:-build}
NPM_DIR=${NPM_DIR:-$BUILD/npm}
MONGOC_EXAMPLE=${MONGOC_EXAMPLE:-$BUILD/tests/server/mongoc_example}
pass=0
fail=0
skip=0
T=$(mktemp -d /tmp/md_drivers_XXXXXX) || exit 1
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT INT TERM
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
skipped() { skip=$((skip + 1)); echo "SKIP: $1"; }

. "$(dirname "$0")/serve_lib.sh"

serve() { # ENGINE DIR
    start_server "$2" --engine "$1" \
        --opts '{"mmapv1": {"firstFileSize": 1048576, "nsSize": 1048576}}'
}

stop_checked() { # ENGINE: stop_server, then its shutdown line and JSON log
    stop_server "$1"
    if grep -q '"msg":"Shutting down"' "$T/server.log"; then ok; else ko "$1: no shutdown line"; fi
    bad=$(grep -v '^{"t":{"\$date":"[^"]*"},"s":"[IWEF]","c":"[A-Z]*","id":[0-9]*,"ctx":"[^"]*","msg":' \
        "$T/server.log" | head -3)
    if [ -z "$bad" ]; then ok; else ko "$1: log lines not in MongoDB's shape: $bad"; fi
}

for engine in btree mmapv1; do
    DATA="$T/data-$engine"
    if ! serve "$engine" "$DATA"; then
        ko "$engine: the server did not start: $(cat "$T/server.log")"
        continue
    fi
    export MINIDOC_PORT=$PORT MINIDOC_ENGINE=$engine

    if [ -n "$PY" ]; then
        if out=$(cd "$T" && "$PY" "$OLDPWD/tests/server/test_pymongo.py" -v 2>&1); then
            ok
            printf '%s\n' "$out" | grep '^SKIP' | sed "s/^/$engine: /"
            # unittest's own skips (aggregate before the server has it) are said too
            n=$(printf '%s\n' "$out" | sed -n 's/.*skipped=\([0-9]*\).*/\1/p')
            [ -n "$n" ] && echo "SKIP: $engine: $n pymongo test(s) skipped: $(printf '%s\n' "$out" |
                sed -n "s/.*skipped '\(.*\)'$/\1/p" | sort -u | tr '\n' ' ')"
        else
            ko "$engine: pymongo suite:
$out"
        fi
    else
        skipped "$engine: pymongo is not installed (make deps installs python3-pymongo)"
    fi

    if [ -n "$MONGOC_EXAMPLE" ] && [ -x "$MONGOC_EXAMPLE" ]; then
        for comp in zstd snappy zlib; do
            if out=$("$MONGOC_EXAMPLE" "mongodb://127.0.0.1:$PORT/?compressors=$comp" \
                "mongoc_$engine" 2>&1); then ok; else ko "$engine: libmongoc ($comp): $out"; fi
        done
    else
        skipped "$engine: libmongoc example not built (make deps installs libmongoc-dev)"
    fi

    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        skipped "$engine: node or npm is not installed: no Node.js driver or mongosh test"
    elif [ ! -d "$NPM_DIR/node_modules/mongodb" ]; then
        skipped "$engine: the npm mongodb driver is not in $NPM_DIR (make deps installs it)"
    else
        if out=$(NODE_PATH="$NPM_DIR/node_modules" node tests/server/test_node.js 2>&1); then
            ok
        else
            ko "$engine: Node.js driver: $out"
        fi
        SH="$NPM_DIR/node_modules/.bin/mongosh"
        if [ -x "$SH" ]; then
            out=$("$SH" --quiet --nodb --norc --eval "
                const c = connect('mongodb://127.0.0.1:$PORT/shtest');
                c.t.drop();
                c.t.insertMany([{_id: 1, a: 'x'}, {_id: 2, a: 'y'}]);
                c.t.updateOne({_id: 2}, {\$set: {a: 'z'}});
                print('found=' + c.t.find({a: 'z'}).toArray().length);
                print('n=' + c.runCommand({count: 't'}).n);
                try { c.t.insertOne({_id: 1}); } catch (e) { print('code=' + e.code); }
            " 2>&1)
            for want in found=1 n=2 code=11000; do
                case "$out" in *"$want"*) ok ;; *) ko "$engine: mongosh: no $want in: $out" ;; esac
            done
        else
            skipped "$engine: mongosh is not in $NPM_DIR (make deps installs it)"
        fi
    fi

    stop_checked "$engine"
    # the data the clients wrote survives the shutdown: read it back with the CLI
    if [ -n "$PY" ]; then
        out=$("$MINIDOC" --dbpath "$DATA/pytest_$engine" --dbname "pytest_$engine" \
            eval '{"count": "queue"}' 2>&1)
        case "$out" in *'"n" : 400'*) ok ;; *) ko "$engine: after shutdown, queue count: $out" ;; esac
    fi
done

echo "drivers: $skip clients skipped"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
