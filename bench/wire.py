#!/usr/bin/env python3
"""wire.py -- bench/peers' insert, get and inc workloads through pymongo
against `minidoc serve`, at 1, 8 and 64 client processes, on both engines,
beside the same operations embedded (minidoc's C API, measured by
build/bench/wire --systems embedded with the same sizes), and the protocol's
cost per operation: us/op(pymongo) - us/op(embedded).

The workloads are bench/wire.c's (see its header): D inserts of the 304-byte
document of bench/peers_doc.h (built here field by field in the same order,
_id an Int64; its BSON length is checked against the C one), then O random
find_one({_id: X}) and O random update_one({_id: X}, {$inc: {n: 1}}), with
the same xorshift64* sequences.  Each of the N processes (forked) has its
own MongoClient (maxPoolSize=1: one connection for the operations, plus
pymongo's monitor), connects and pings, builds its documents and keys, and
waits at a barrier; each process notes when it starts and ends its share of
a workload, and the workload's time runs from the earliest start to the
latest end, so starting processes, connecting and building documents are
not timed.  Each
connection count gets a fresh collection; afterwards it must hold D
documents with sum(n) = O.

Output: per engine, workload and process count the pymongo and embedded
ops/s, us/op (1e6 / ops/s of all processes), lat (N x us/op, the mean wait
of one client) and the overhead; then machine-readable lines
  `wire WORKLOAD ENGINE pymongo conns=N ops=N seconds=X ops_per_s=X
   us_per_op=X lat_us=X`
and bench/wire's embedded lines as it printed them.

  python3 bench/wire.py [--quick] [--docs N] [--ops N] [--conns 1,8,64]
                        [--engines mmapv1,btree] [--minidoc build/minidoc]
                        [--embedded build/bench/wire] [--opts JSON]

Defaults: 10000 documents and 10000 operations (about a minute on an idle
2-core machine); --quick: 3000.  pymongo's C extensions (Debian's
python3-bson-ext and python3-pymongo-ext) are used when installed, and the
output says whether they were.
"""
import argparse
import datetime
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import bson
    import pymongo
    from bson.int64 import Int64
except ImportError:
    sys.exit("wire.py: pymongo is not installed (make deps / tools/deps.sh bench installs "
             "python3-pymongo)")

DB = "bench"
ENGINES = ("mmapv1", "btree")
WORKLOADS = ("insert", "get", "inc")
M64 = (1 << 64) - 1
CITIES = ("Paris", "Berlin", "Madrid", "Rome", "Lisbon", "Vienna", "Prague", "Dublin")
TAGS = ("sports", "music", "books", "travel", "food", "games")
EPOCH = datetime.datetime(1970, 1, 1)


class Rng:
    """bench/peers_doc.h's xorshift64*."""

    def __init__(self, seed):
        self.st = (seed * 0x9E3779B97F4A7C15 + 1) & M64

    def below(self, n):
        st = self.st
        st ^= st >> 12
        st ^= (st << 25) & M64
        st ^= st >> 27
        self.st = st
        return (((st * 0x2545F4914F6CDD1D) & M64) >> 32) % n


def make_doc(i):
    """bench/peers_doc.h's make_doc: the same fields in the same order."""
    u = i & 0xFFFFFFFF
    return {
        "_id": Int64(i),
        "n": 0,
        "name": "user%07d" % i,
        "email": "user%07d@example.com" % i,
        "age": 18 + ((u * 2654435761) & 0xFFFFFFFF) % 60,
        "tags": [TAGS[u % 6], TAGS[(u // 6) % 6]],
        "address": {"street": "%d Rue de la Paix" % (u % 997 + 1),
                    "city": CITIES[((u * 40503) & 0xFFFFFFFF) % 8],
                    "zip": "75002", "country": "FR"},
        "created": EPOCH + datetime.timedelta(milliseconds=1500000000000 + i * 61000),
        "active": u % 3 != 0,
        "score": ((u * 7919) & 0xFFFFFFFF) % 10000 / 100.0,
        "bio": "Writes software, reads history.",
    }


def fail(msg):
    sys.exit("wire.py: " + msg)


# ---- the server ---------------------------------------------------------------------

class Server:
    def __init__(self, minidoc, engine, directory, opts):
        self.log = os.path.join(directory, "server.log")
        args = [minidoc, "serve", "--dbpath", os.path.join(directory, "data"), "--port", "0",
                "--engine", engine, "--logpath", self.log]
        if opts:
            args += ["--opts", opts]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        self.port = 0
        for _ in range(200):
            if self.proc.poll() is not None:
                fail("the server exited before listening: " + self.log_text())
            if os.path.exists(self.log):
                with open(self.log) as f:
                    m = re.search(r'"Waiting for connections".*"port" ?: ?(\d+)', f.read())
                if m:
                    self.port = int(m.group(1))
                    return
            time.sleep(0.05)
        self.proc.kill()
        self.proc.wait()
        fail("the server did not start listening within 10 s: " + self.log_text())

    def log_text(self):
        try:
            with open(self.log) as f:
                return f.read()[-2000:]
        except OSError:
            return "(no log)"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        if self.proc.wait(120) != 0:
            fail("the server did not shut down cleanly (exit %s): %s"
                 % (self.proc.returncode, self.log_text()))


def client(port, **kw):
    return pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=10000,
                               appname="bench-wire-py", **kw)


# ---- one pass of the three workloads with n processes --------------------------------

def worker(t, n, port, coll, docs, ops, barrier, stamps, errors):
    """Process t of n: its share of each workload after a barrier, its start
    and end times in stamps[(t * 3 + w) * 2] and the next slot."""

    def wait(k):
        if k > 0:
            stamps[(t * 3 + k - 1) * 2 + 1] = time.monotonic()
        barrier.wait(timeout=900)
        if k < 3:
            stamps[(t * 3 + k) * 2] = time.monotonic()

    try:
        c = client(port, maxPoolSize=1)
        c.admin.command("ping")
        col = c[DB][coll]
        mine = [make_doc(i) for i in range(t, docs, n)]
        lo, hi = ops * t // n, ops * (t + 1) // n
        rng = Rng(1000 + t)
        gets = [Int64(rng.below(docs)) for _ in range(lo, hi)]
        rng = Rng(2000 + t)
        incs = [Int64(rng.below(docs)) for _ in range(lo, hi)]
        inc = {"$inc": {"n": 1}}
        wait(0)
        for d in mine:
            col.insert_one(d)
        wait(1)
        for k in gets:
            d = col.find_one({"_id": k})
            if d is None or "n" not in d:
                raise RuntimeError("get: _id %d not found" % k)
        wait(2)
        for k in incs:
            if col.update_one({"_id": k}, inc).matched_count != 1:
                raise RuntimeError("inc: _id %d not found" % k)
        wait(3)
        c.close()
    except Exception as e:  # noqa: BLE001 -- reported by the parent, which stops the run
        errors.put("process %d: %s: %s" % (t, type(e).__name__, e))
        barrier.abort()


def run_level(port, n, docs, ops):
    coll = "c%d" % n
    c = client(port)
    c[DB].create_collection(coll)
    c.close()
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(n + 1)
    stamps = ctx.Array("d", n * len(WORKLOADS) * 2, lock=False)
    errors = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(t, n, port, coll, docs, ops, barrier, stamps,
                                              errors)) for t in range(n)]
    for p in procs:
        p.start()
    broken = False
    for k in range(len(WORKLOADS) + 1):
        try:
            barrier.wait(timeout=900)
        except Exception:  # noqa: BLE001 -- BrokenBarrierError: a worker failed
            broken = True
            break
    for p in procs:
        p.join()
    if broken or not errors.empty() or any(p.exitcode for p in procs):
        fail("pymongo %s: %s" % (coll, errors.get(timeout=5) if not errors.empty()
                                 else "a worker died"))
    # the check (untimed)
    c = client(port)
    got = total = 0
    for d in c[DB][coll].find({}, {"n": 1}):
        got += 1
        total += d.get("n", 0)
    c.close()
    if got != docs or total != ops:
        fail("pymongo %s: verification failed: %d documents (want %d), sum(n) %d (want %d)"
             % (coll, got, docs, total, ops))
    # a workload's time: from the earliest start to the latest end
    res = {}
    for w, name in enumerate(WORKLOADS):
        t0 = min(stamps[(t * 3 + w) * 2] for t in range(n))
        t1 = max(stamps[(t * 3 + w) * 2 + 1] for t in range(n))
        res[name] = (docs if name == "insert" else ops, t1 - t0)
    return res


# ---- the embedded baseline ------------------------------------------------------------

LINE = re.compile(r"^wire (\w+) (\w+) embedded conns=(\d+) ops=(\d+) seconds=([\d.]+) ")


def embedded_baseline(args):
    cmd = [args.embedded, "--systems", "embedded", "--docs", str(args.docs), "--ops",
           str(args.ops), "--conns", args.conns, "--engines", args.engines]
    if args.opts:
        cmd += ["--opts", args.opts]
    out = subprocess.run(cmd, stdout=subprocess.PIPE,
                         universal_newlines=True)
    if out.returncode != 0:
        fail("%s failed (exit %d)" % (" ".join(cmd), out.returncode))
    base, lines, doc_len = {}, [], None
    for line in out.stdout.splitlines():
        m = LINE.match(line)
        if m:
            w, e, n, ops, secs = m.groups()
            base[(e, w, int(n))] = (int(ops), float(secs))
            lines.append(line)
        m = re.search(r"docs=\d+ \((\d+) bytes\)", line)
        if m:
            doc_len = int(m.group(1))
    return base, lines, doc_len


def us_per_op(ops, secs):
    return 1e6 * secs / ops


def main():
    ap = argparse.ArgumentParser(description="pymongo against minidoc serve, beside the "
                                 "embedded C API")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--docs", type=int)
    ap.add_argument("--ops", type=int)
    ap.add_argument("--conns", default="1,8,64")
    ap.add_argument("--engines", default="mmapv1,btree")
    ap.add_argument("--minidoc", default=os.environ.get("MINIDOC", "build/minidoc"))
    ap.add_argument("--embedded", default="build/bench/wire")
    ap.add_argument("--opts")
    args = ap.parse_args()
    dflt = 3000 if args.quick else 10000
    args.docs = args.docs or dflt
    args.ops = args.ops or dflt
    try:
        conns = [int(x) for x in args.conns.split(",")]
    except ValueError:
        fail("--conns: a list of numbers, such as 1,8,64")
    engines = args.engines.split(",")
    if any(e not in ENGINES for e in engines) or any(n < 1 or n > 256 for n in conns) \
            or args.docs < 1 or args.ops < 1:
        ap.error("bad --engines, --conns, --docs or --ops")
    for prog in (args.minidoc, args.embedded):
        if not os.access(prog, os.X_OK):
            fail("%s is not there (make, then make bench)" % prog)

    base, base_lines, c_len = embedded_baseline(args)
    py_len = len(bson.BSON.encode(make_doc(12345)))
    if c_len != py_len:
        fail("the Python document is %d bytes, the C one %s" % (py_len, c_len))
    print("# wire.py: pymongo %s (C extensions: %s), Python %s, against `minidoc serve`; "
          "embedded: %s --systems embedded" % (pymongo.version, "yes" if pymongo.has_c() and
                                              bson.has_c() else "NO",
                                              sys.version.split()[0], args.embedded))
    print("# docs=%d (%d bytes) ops=%d per workload and process count, processes=%s, "
          "md_db_open options: %s" % (args.docs, py_len, args.ops, args.conns,
                                      args.opts or "the engines' defaults"))
    print("# each process: one MongoClient (maxPoolSize=1); us/op = 1e6 / (ops/s of all "
          "processes); lat = processes x us/op; overhead = us/op(pymongo) - us/op(embedded)")
    sys.stdout.flush()

    results = []
    start = time.monotonic()
    for engine in engines:
        tmp = tempfile.mkdtemp(prefix="wire-py-%s-" % engine)
        srv = None
        try:
            srv = Server(args.minidoc, engine, tmp, args.opts)
            print("\n# engine=%s" % engine)
            for n in conns:
                res = run_level(srv.port, n, args.docs, args.ops)
                for w in WORKLOADS:
                    ops, secs = res[w]
                    u = us_per_op(ops, secs)
                    results.append((w, engine, n, ops, secs, u))
                    print("%-6s %-6s conns=%-3d pymongo  %7d ops %7.3f s %9.0f ops/s %8.2f us/op "
                          "lat %8.2f us" % (engine, w, n, ops, secs, ops / secs, u, n * u))
                    b = base.get((engine, w, n))
                    if b:
                        ub = us_per_op(*b)
                        print("%-6s %-6s conns=%-3d embedded %7d ops %7.3f s %9.0f ops/s "
                              "%8.2f us/op lat %8.2f us" % (engine, w, n, b[0], b[1],
                                                            b[0] / b[1], ub, n * ub))
                        print("%-6s %-6s conns=%-3d overhead pymongo-embedded %.2f us/op "
                              "(%.1fx the embedded time)" % (engine, w, n, u - ub, u / ub))
                sys.stdout.flush()
                print("wire.py: %s conns=%d done" % (engine, n), file=sys.stderr)
            srv.stop()
            srv = None
        finally:
            if srv and srv.proc.poll() is None:
                srv.proc.kill()
                srv.proc.wait()
            shutil.rmtree(tmp, ignore_errors=True)
    print("\n# elapsed %.1f s (setup and checks included; the embedded baseline ran first)"
          % (time.monotonic() - start))
    print("# machine-readable")
    for w, engine, n, ops, secs, u in results:
        print("wire %s %s pymongo conns=%d ops=%d seconds=%.3f ops_per_s=%.0f us_per_op=%.2f "
              "lat_us=%.2f" % (w, engine, n, ops, secs, ops / secs, u, n * u))
    for line in base_lines:
        print(line)


if __name__ == "__main__":
    main()
