#!/bin/sh
# deps.sh [SET...] -- make sure the Debian packages a make target needs are
# installed.  Sets (default: lib):
#
#   lib     the library, the CLI (zlib1g-dev: dump and restore --gzip;
#           libreadline-dev: the shell's line editing),
#           the demo and the tests: what `make`,
#           `make demo`, `make test`, `make install` and `make crash` need
#           (tzdata: the Olson time zones of the date expressions;
#           libssl-dev: the server's SCRAM-SHA-256 and TLS; openssl: the
#           TLS test's self-signed certificates)
#   bench   the benchmarks' extras: liblmdb-dev and libwiredtiger-dev
#           (bench/peers runs the real LMDB and WiredTiger), gnuplot-nox
#           (bench/mms draws its plots), libmongoc-dev (bench/wire) and
#           python3-pymongo with its C extensions python3-bson-ext and
#           python3-pymongo-ext (bench/wire.py: without them pymongo encodes
#           BSON in pure Python, not what its users run)
#   plots   gnuplot-nox, for `make patterns`' docs/patterns/*.png
#   fuzz    clang and its fuzzer runtime, for `make fuzz`
#   drivers the MongoDB clients the server's tests drive (make deps):
#           python3-pymongo, python3-gridfs, python3-snappy,
#           python3-zstandard (pymongo's compressors) and libmongoc-dev.
#           Optional: a user who cannot install them is told the apt-get
#           line and deps.sh still succeeds (make test then reports those
#           tests as skipped)
#
# When everything is there it does nothing and exits 0, whoever runs it.
# Otherwise, as root, it installs what is missing with apt-get; as anyone
# else it prints the exact apt-get line to run and fails (it never calls
# sudo).  On a system without dpkg it cannot check and says so.
set -e
LIB_PKGS="build-essential pkg-config libbson-dev libzstd-dev libsnappy-dev libpcre2-dev libstemmer-dev duktape-dev libcriterion-dev tzdata zlib1g-dev libreadline-dev libssl-dev openssl"
BENCH_PKGS="liblmdb-dev libwiredtiger-dev gnuplot-nox libmongoc-dev python3-pymongo python3-bson-ext python3-pymongo-ext"
PLOT_PKGS="gnuplot-nox"
FUZZ_PKGS="clang libclang-rt-dev"
DRIVER_PKGS="python3-pymongo python3-gridfs python3-snappy python3-zstandard libmongoc-dev"

[ $# -gt 0 ] || set -- lib
want=""
optional=""
for set in "$@"; do
    case "$set" in
    lib) want="$want $LIB_PKGS" ;;
    bench) want="$want $BENCH_PKGS" ;;
    plots) want="$want $PLOT_PKGS" ;;
    fuzz) want="$want $FUZZ_PKGS" ;;
    drivers) optional="$optional $DRIVER_PKGS" ;;
    *)
        echo "deps: unknown package set '$set' (lib, bench, plots, fuzz or drivers)" >&2
        exit 2
        ;;
    esac
done

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: no dpkg-query, cannot check packages; make sure these are installed:$want$optional" >&2
    exit 0
fi
missing=""
for p in $want; do
    case " $missing " in *" $p "*) continue ;; esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
missing_opt=""
for p in $optional; do
    case " $missing $missing_opt " in *" $p "*) continue ;; esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_opt="$missing_opt $p"
done
if [ -z "$missing" ] && [ -n "$missing_opt" ] && [ "$(id -u)" != 0 ]; then
    echo "deps: optional packages for the driver tests are missing (those tests will be skipped). Run:"
    echo "  sudo apt-get install -y$missing_opt"
    exit 0
fi
missing="$missing$missing_opt"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing
else
    echo "deps: missing Debian packages. Run:"
    echo "  sudo apt-get install -y$missing"
    exit 1
fi
