#!/bin/sh
# test_auth.sh -- `minidoc serve --auth` and its TLS modes with real clients,
# on the loopback address, each phase on a fresh data directory:
#
#   1. --auth: tests/server/test_auth.py (pymongo: the localhost exception,
#      13 without a user, SCRAM-SHA-256 logins, 18 for a wrong password,
#      roles, system.users' contents), mongosh with a user and with a wrong
#      password, libmongoc with a user; the startup log says access control
#      is on (and not the "not enabled" warning)
#   2. --auth --tlsMode requireTLS with a self-signed certificate made here
#      by the openssl command: test_auth.py again, every client with
#      tls=True and the certificate as its CA (plus tlsAllowInvalidCertificates,
#      and a plain connection refused), mongosh and libmongoc over TLS
#   3. --tlsMode preferTLS without --auth: plain and TLS clients both served,
#      and the "Access control is not enabled" warning is logged
#   4. --tlsMode disabled: a TLS client is refused, with a log line
#   5. --tlsCAFile: a client certificate is required and verified
#   6. bad TLS options: a clear error and exit status 1 (or 2 for usage)
#
# A client that is not installed is a SKIP line, as in test_drivers.sh.
# Usage: MINIDOC=build/minidoc [NPM_DIR=build/npm] tests/server/test_auth.sh
MINIDOC=${MINIDOC:-build/minidoc}
BUILD=${BUILD:-build}
NPM_DIR=${NPM_DIR:-$BUILD/npm}
MONGOC_EXAMPLE=${MONGOC_EXAMPLE:-$BUILD/tests/server/mongoc_example}
HERE=$(cd "$(dirname "$0")" && pwd)
pass=0
fail=0
T=$(mktemp -d /tmp/md_auth_XXXXXX) || exit 1
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT INT TERM
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
skipped() { echo "SKIP: $1"; }
has() { if grep -q "$2" "$T/server.log"; then ok; else ko "$1: no $2 in the log"; fi; }
hasnt() { if grep -q "$2" "$T/server.log"; then ko "$1: $2 in the log"; else ok; fi; }

. "$HERE/serve_lib.sh"
SH="$NPM_DIR/node_modules/.bin/mongosh"
[ -x "$SH" ] && command -v node >/dev/null 2>&1 || SH=

pymongo_suite() { # PHASE [ENV...]
    phase=$1
    shift
    if [ -z "$PY" ]; then
        skipped "$phase: pymongo is not installed (make deps installs python3-pymongo)"
        return
    fi
    if out=$(env MINIDOC_PORT="$PORT" "$@" "$PY" "$HERE/test_auth.py" -v 2>&1); then
        ok
    else
        ko "$phase: pymongo test_auth.py:
$out"
    fi
}

# mongosh PHASE URI WANT [ARGS...]: its output must contain WANT
mongosh_run() {
    phase=$1 uri=$2 want=$3
    shift 3
    if [ -z "$SH" ]; then
        skipped "$phase: mongosh is not in $NPM_DIR (make deps installs it)"
        return
    fi
    out=$("$SH" "$uri" --quiet --norc "$@" --eval "
        db.getSiblingDB('shauth').t.insertOne({_id: 1});
        print('count=' + db.getSiblingDB('shauth').t.countDocuments({}));
        print('user=' + db.runCommand({connectionStatus: 1}).authInfo.authenticatedUsers[0].user);
    " 2>&1)
    case "$out" in *"$want"*) ok ;; *) ko "$phase: mongosh: no $want in: $out" ;; esac
}

mongoc_run() { # PHASE URI
    if [ -x "$MONGOC_EXAMPLE" ]; then
        if out=$("$MONGOC_EXAMPLE" "$2" mongoc_auth 2>&1); then ok; else ko "$1: libmongoc: $out"; fi
    else
        skipped "$1: libmongoc example not built (make deps installs libmongoc-dev)"
    fi
}

# ---- 1. --auth -----------------------------------------------------------------------
if start_server "$T/d1" --auth; then
    has "auth" '"Access control is enabled'
    hasnt "auth" '"id":22120,'
    pymongo_suite "auth"
    # test_auth.py made root with this password (it needs %-escapes in a URI)
    ROOT_URI="mongodb://root:r00t%20pw%3A%40%2F%3F@127.0.0.1:$PORT"
    mongosh_run "auth" "$ROOT_URI/admin?authMechanism=SCRAM-SHA-256" "user=root"
    mongosh_run "auth, wrong password" "mongodb://root:nope@127.0.0.1:$PORT/admin" \
        "Authentication failed"
    mongoc_run "auth" "$ROOT_URI/?authSource=admin&authMechanism=SCRAM-SHA-256"
    stop_server "auth"
else
    ko "auth: the server did not start: $(cat "$T/server.log")"
fi

# ---- the certificates ----------------------------------------------------------------
if ! command -v openssl >/dev/null 2>&1; then
    skipped "TLS: no openssl command (make deps installs openssl)"
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
fi
cert() { # NAME CN: a self-signed certificate and key, NAME.pem holding both
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$2" \
        -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
        -keyout "$T/$1.key" -out "$T/$1.crt" >/dev/null 2>&1 &&
        cat "$T/$1.crt" "$T/$1.key" >"$T/$1.pem"
}
if ! cert server localhost || ! cert client minidoc-test-client; then
    ko "TLS: openssl could not make the test certificates"
fi

# ---- 2. --auth over TLS only ----------------------------------------------------------
if start_server "$T/d2" --auth --tlsMode requireTLS --tlsCertificateKeyFile "$T/server.pem"; then
    has "requireTLS" '"ssl" : "on"'
    pymongo_suite "requireTLS" MINIDOC_TLS_CA="$T/server.crt" MINIDOC_TLS_MODE=requireTLS
    has "requireTLS" '"id":23256,'
    ROOT_URI="mongodb://root:r00t%20pw%3A%40%2F%3F@127.0.0.1:$PORT"
    mongosh_run "requireTLS" "$ROOT_URI/admin?tls=true&tlsCAFile=$T/server.crt" "user=root"
    mongoc_run "requireTLS" "$ROOT_URI/?authSource=admin&tls=true&tlsCAFile=$T/server.crt"
    stop_server "requireTLS"
else
    ko "requireTLS: the server did not start: $(cat "$T/server.log")"
fi

# py PHASE CODE: run a pymongo snippet (PORT, CA, CLIENT set), expect "ok" printed
py() {
    [ -n "$PY" ] || { skipped "$1: pymongo is not installed"; return; }
    out=$(PORT=$PORT CA="$T/server.crt" CLIENT="$T/client.pem" "$PY" -c "
import os, warnings
warnings.simplefilter('ignore')
import pymongo
from pymongo import errors
P = int(os.environ['PORT']); CA = os.environ['CA']; CLIENT = os.environ['CLIENT']
def c(**kw):
    return pymongo.MongoClient('127.0.0.1', P, serverSelectionTimeoutMS=1500, **kw)
def refused(cl):
    try:
        cl.admin.command('ping')
        return False
    except errors.ServerSelectionTimeoutError:
        return True
$2
" 2>&1)
    case "$out" in ok) ok ;; *) ko "$1: $out" ;; esac
}

# ---- 3. preferTLS: both kinds -----------------------------------------------------------
if start_server "$T/d3" --tlsMode preferTLS --tlsCertificateKeyFile "$T/server.pem"; then
    has "preferTLS" '"id":22120,'
    py "preferTLS" "
c(tls=True, tlsCAFile=CA).t.t.insert_one({'_id': 1})
assert c().t.t.find_one() == {'_id': 1}
assert c(tls=True, tlsAllowInvalidCertificates=True).t.t.count_documents({}) == 1
print('ok')"
    stop_server "preferTLS"
else
    ko "preferTLS: the server did not start: $(cat "$T/server.log")"
fi

# ---- 4. disabled: a TLS client is refused ------------------------------------------------
if start_server "$T/d4"; then
    py "disabled" "
assert refused(c(tls=True, tlsCAFile=CA))
assert c().admin.command('ping')['ok'] == 1.0
print('ok')"
    has "disabled" '"id":23255,'
    stop_server "disabled"
fi

# ---- 5. client certificates -------------------------------------------------------------
if start_server "$T/d5" --tlsMode requireTLS --tlsCertificateKeyFile "$T/server.pem" \
    --tlsCAFile "$T/client.crt"; then
    py "tlsCAFile" "
assert refused(c(tls=True, tlsCAFile=CA))
assert c(tls=True, tlsCAFile=CA, tlsCertificateKeyFile=CLIENT).admin.command('ping')['ok'] == 1.0
print('ok')"
    has "tlsCAFile" 'TLS handshake failed'
    stop_server "tlsCAFile"
else
    ko "tlsCAFile: the server did not start: $(cat "$T/server.log")"
fi

# ---- 6. bad options ---------------------------------------------------------------------
"$MINIDOC" serve --dbpath "$T/d6" --port 0 --tlsMode requireTLS \
    --tlsCertificateKeyFile "$T/nonexistent.pem" >"$T/bad.log" 2>&1
st=$?
if [ "$st" = 1 ] && grep -q "cannot read the certificate" "$T/bad.log"; then ok; else
    ko "a missing certificate file: status $st: $(cat "$T/bad.log")"; fi
"$MINIDOC" serve --dbpath "$T/d6" --port 0 --tlsMode requireTLS >"$T/bad.log" 2>&1
st=$?
if [ "$st" = 1 ] && grep -q "need --tlsCertificateKeyFile" "$T/bad.log"; then ok; else
    ko "requireTLS without a certificate: status $st: $(cat "$T/bad.log")"; fi
"$MINIDOC" serve --dbpath "$T/d6" --port 0 --tlsMode sometimes >"$T/bad.log" 2>&1
st=$?
if [ "$st" = 2 ] && grep -q "bad value 'sometimes' for --tlsMode" "$T/bad.log"; then ok; else
    ko "a bad --tlsMode: status $st: $(cat "$T/bad.log")"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
