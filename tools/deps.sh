#!/bin/sh
# deps.sh -- make sure the Debian packages minidoc builds with are installed.
# As root it installs what is missing with apt-get; otherwise it prints the
# exact apt-get line to run and fails.  libwiredtiger-dev and gnuplot-nox
# are for the benchmarks (bench/peers runs the real WiredTiger; bench/mms
# draws its plots with gnuplot).
set -e
PKGS="build-essential pkg-config libbson-dev libzstd-dev libsnappy-dev liblmdb-dev libcriterion-dev libpcre2-dev libwiredtiger-dev gnuplot-nox"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
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
