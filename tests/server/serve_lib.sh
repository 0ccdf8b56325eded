# serve_lib.sh -- sourced by tests/server/test_drivers.sh and test_auth.sh:
# a python3 with pymongo, and `minidoc serve` started in the background and
# stopped with SIGTERM.  The caller sets MINIDOC and T (its temporary
# directory) and defines ok and ko (one passed / one failed check).

# PY: a python3 that has pymongo (Debian's, or whatever python3 comes first
# on PATH), empty when none does.
PY=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import pymongo' 2>/dev/null; then
        PY=$p
        break
    fi
done
SERVER_PID=

# start_server DIR ARGS...: serve DIR on a free port (PORT, read from the
# "Waiting for connections" log line), the log in $T/server.log; false
# when it did not come up within 10 s.
start_server() {
    dir=$1
    shift
    : >"$T/server.log"
    "$MINIDOC" serve --dbpath "$dir" --port 0 "$@" >"$T/server.log" 2>&1 &
    SERVER_PID=$!
    PORT=
    i=0
    while [ $i -lt 100 ] && [ -z "$PORT" ]; do
        PORT=$(sed -n 's/.*"Waiting for connections".*"port" : \([0-9]*\).*/\1/p' "$T/server.log")
        [ -n "$PORT" ] || sleep 0.1
        i=$((i + 1))
    done
    [ -n "$PORT" ]
}

# stop_server PHASE: SIGTERM, and the server must exit 0.
stop_server() {
    kill -TERM "$SERVER_PID"
    wait "$SERVER_PID"
    st=$?
    SERVER_PID=
    if [ "$st" = 0 ]; then ok; else ko "$1: server exit status $st after SIGTERM"; fi
}
