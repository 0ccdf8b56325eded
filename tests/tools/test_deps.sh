#!/bin/sh
# test_deps.sh -- tools/deps.sh and the make targets that call it.
#
# deps.sh runs against fake dpkg-query, id, apt-get and sudo (first on
# PATH) that say which packages are installed and who is running, and
# record any attempt to install.  Checked: with the library's packages
# present a non-root user passes the library's set silently and nothing is
# installed or sudo'd even though the benchmarks' packages are missing; the
# bench set then fails with the exact apt-get line for only what is
# missing; root gets apt-get for only what is missing.  Then the Makefile:
# demo and test ask for the library's set only, bench for its extras.  As
# root with setpriv, the real deps.sh also runs as a non-root user.
#
# Usage: BUILD=build tests/tools/test_deps.sh     (make test)
BUILD=${BUILD:-build}
DEPS=tools/deps.sh
pass=0
fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
expect() { if printf '%s\n' "$2" | grep -F -q -- "$3"; then ok; else ko "$1: no '$3' in: $2"; fi; }
expect_not() { if printf '%s\n' "$2" | grep -F -q -- "$3"; then ko "$1: '$3' in: $2"; else ok; fi; }
expect_status() { if [ "$2" = "$3" ]; then ok; else ko "$1: exit status $3, expected $2"; fi; }

T=$(mktemp -d /tmp/md_deps_XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT INT TERM
mkdir "$T/bin"
cat >"$T/bin/dpkg-query" <<'FAKE'
#!/bin/sh
for p; do :; done
case " $FAKE_INSTALLED " in *" $p "*) printf 'install ok installed' ;; *) exit 1 ;; esac
FAKE
cat >"$T/bin/id" <<'FAKE'
#!/bin/sh
echo "$FAKE_UID"
FAKE
for f in apt-get sudo; do
    printf '#!/bin/sh\necho "%s $*" >>"$FAKE_CALLS"\n' "$f" >"$T/bin/$f"
done
chmod +x "$T/bin/"*

LIB_PKGS="build-essential pkg-config libbson-dev libzstd-dev libsnappy-dev libpcre2-dev libstemmer-dev duktape-dev libcriterion-dev tzdata zlib1g-dev libreadline-dev libssl-dev openssl"
# deps UID INSTALLED SET...: run deps.sh with the fakes; output in $out, status in $st
deps() {
    uid=$1 inst=$2
    shift 2
    : >"$T/calls"
    out=$(PATH="$T/bin:$PATH" FAKE_UID=$uid FAKE_INSTALLED="$inst" FAKE_CALLS="$T/calls" \
        sh "$DEPS" "$@" 2>&1)
    st=$?
    calls=$(cat "$T/calls")
}

deps 1000 "$LIB_PKGS" lib
expect_status "non-root, library packages present" 0 $st
if [ -z "$out" ]; then ok; else ko "non-root, library packages present: printed '$out'"; fi
if [ -z "$calls" ]; then ok; else ko "non-root, library packages present: ran '$calls'"; fi
deps 1000 "$LIB_PKGS"
expect_status "the default set is the library's" 0 $st
deps 1000 "$LIB_PKGS" lib bench
expect_status "non-root, bench packages missing" 1 $st
expect "bench line" "$out" "sudo apt-get install -y liblmdb-dev libwiredtiger-dev gnuplot-nox"
if [ -z "$calls" ]; then ok; else ko "non-root never installs or sudoes: ran '$calls'"; fi
deps 1000 "$LIB_PKGS gnuplot-nox" lib plots
expect_status "plots present" 0 $st
deps 1000 "pkg-config libbson-dev" lib
expect_status "non-root, library packages missing" 1 $st
expect "library line" "$out" "sudo apt-get install -y build-essential libzstd-dev libsnappy-dev libpcre2-dev libstemmer-dev duktape-dev libcriterion-dev tzdata zlib1g-dev libreadline-dev"
expect_not "library line leaves out the benchmarks" "$out" "wiredtiger"
deps 0 "$LIB_PKGS" lib bench
expect "root installs only what is missing" "$calls" \
    "apt-get install -y -qq --no-install-recommends liblmdb-dev libwiredtiger-dev gnuplot-nox"
deps 0 "$LIB_PKGS" lib
if [ -z "$calls" ]; then ok; else ko "root with everything present: ran '$calls'"; fi
deps 1000 "" nosuchset
expect_status "unknown set" 2 $st
# the driver tests' clients are optional: reported to a user, installed by root
deps 1000 "$LIB_PKGS" lib drivers
expect_status "non-root, driver packages missing: still fine" 0 $st
expect "driver line" "$out" "sudo apt-get install -y python3-pymongo python3-gridfs python3-snappy python3-zstandard libmongoc-dev"
if [ -z "$calls" ]; then ok; else ko "non-root never installs the drivers: ran '$calls'"; fi
deps 1000 "pkg-config" lib drivers
expect_status "non-root, library packages missing beside the drivers" 1 $st
deps 0 "$LIB_PKGS python3-pymongo" drivers
expect "root installs the missing drivers" "$calls" \
    "apt-get install -y -qq --no-install-recommends python3-gridfs python3-snappy python3-zstandard libmongoc-dev"

# ---- which targets ask for which set ----------------------------------------------
# (make -n would still run test's recursive lines, so read the rules for
# demo and test, and dry-run only deps and bench)
out=$(make -n --no-print-directory BUILD="$BUILD" deps 2>&1)
expect "make deps checks the library's packages" "$out" "tools/deps.sh lib"
expect_not "make deps does not check the benchmarks'" "$out" "bench"
for t in demo test; do
    rule=$(grep "^$t:" Makefile)
    if [ "$rule" = "$t: deps" ]; then ok; else ko "make $t should depend on deps alone: $rule"; fi
done
out=$(make -n --no-print-directory BUILD="$BUILD" bench 2>&1 | grep 'deps\.sh')
expect "make bench checks its extras" "$out" "tools/deps.sh lib bench"

# ---- the real dpkg, as a user who cannot install anything -------------------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 &&
    PATH="$T/bin:$PATH" FAKE_UID=1000 FAKE_INSTALLED="" FAKE_CALLS=/dev/null true; then
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups sh "$DEPS" lib 2>&1)
    expect_status "real deps.sh lib as nobody" 0 $?
    if [ -z "$out" ]; then ok; else ko "real deps.sh lib as nobody printed: $out"; fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
