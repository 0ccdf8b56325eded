#!/bin/sh
# npm_deps.sh -- the Node.js clients the server's tests drive: npm's
# `mongodb` driver and `mongosh`, installed into $NPM_DIR (default
# build/npm) with the ordinary npm client.  Optional: without node and npm,
# or without the registry, it says so (make test then reports those tests
# as skipped) and succeeds; when both are already there it does nothing.
NPM_DIR=${NPM_DIR:-build/npm}
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "deps: npm or node is not installed: the Node.js driver and mongosh tests will be skipped"
    exit 0
fi
[ -d "$NPM_DIR/node_modules/mongodb" ] && [ -x "$NPM_DIR/node_modules/.bin/mongosh" ] && exit 0
mkdir -p "$NPM_DIR"
echo "deps: npm install mongodb@6 mongosh@2 into $NPM_DIR"
if ! (cd "$NPM_DIR" && npm install --no-audit --no-fund --loglevel=error mongodb@6 mongosh@2); then
    echo "deps: npm install failed: the Node.js driver and mongosh tests will be skipped"
fi
exit 0
