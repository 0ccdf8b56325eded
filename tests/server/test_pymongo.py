"""test_pymongo.py -- pymongo (Debian's python3-pymongo) against `minidoc serve`.

Run by tests/server/test_drivers.sh, which starts the server and passes its
port in MINIDOC_PORT (and the engine in MINIDOC_ENGINE, for the messages).
Covers: CRUD, bulk writes, cursors that need getMore (and killCursors when
closed early), indexes, findAndModify, aggregation when the server has it,
errors with their codes (DuplicateKeyError 11000, BadValue, CommandNotFound,
the refusals of transactions, through pymongo's session API too, of
replication and of sharding), messages up to maxMessageSizeBytes, listDatabases and
dropDatabase, each compressor pymongo can use (the server's own counters
must show the compressed bytes), GridFS through pymongo's gridfs module, and
the Little Book's Queue pattern with several client processes.
"""
import multiprocessing
import os
import sys
import unittest
import warnings

warnings.simplefilter("ignore", DeprecationWarning)
import pymongo  # noqa: E402
from pymongo import errors  # noqa: E402

PORT = int(os.environ.get("MINIDOC_PORT", "27017"))
DB = "pytest_" + os.environ.get("MINIDOC_ENGINE", "x")


def client(**kw):
    kw.setdefault("serverSelectionTimeoutMS", 5000)
    return pymongo.MongoClient("127.0.0.1", PORT, **kw)


class Crud(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = client()
        cls.db = cls.c[DB]

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def setUp(self):
        self.db.drop_collection("t")
        self.t = self.db.t

    def test_handshake(self):
        hello = self.c.admin.command("isMaster")
        self.assertTrue(hello["ismaster"])
        self.assertEqual(hello["maxWireVersion"], 13)
        self.assertEqual(hello["maxMessageSizeBytes"], 48000000)
        self.assertEqual(hello["maxBsonObjectSize"], 16 * 1024 * 1024)
        self.assertEqual(hello["logicalSessionTimeoutMinutes"], 30)
        self.assertEqual(self.c.admin.command("ping")["ok"], 1.0)
        self.assertIn("version", self.c.server_info())
        self.assertIn("you", self.c.admin.command("whatsmyuri"))
        self.assertIn("system", self.c.admin.command("hostInfo"))
        self.assertIn("log", self.c.admin.command("getLog", "global"))

    def test_insert_find_update_delete(self):
        r = self.t.insert_one({"_id": 1, "name": "ann", "n": 1})
        self.assertEqual(r.inserted_id, 1)
        r = self.t.insert_many([{"_id": i, "n": i} for i in range(2, 12)])
        self.assertEqual(len(r.inserted_ids), 10)
        self.assertEqual(self.t.find_one({"_id": 1})["name"], "ann")
        self.assertEqual(self.t.find().count(), 11)  # the count command
        if self._has_aggregate():
            self.assertEqual(self.t.count_documents({}), 11)
        r = self.t.update_one({"_id": 1}, {"$inc": {"n": 5}, "$set": {"k": "v"}})
        self.assertEqual((r.matched_count, r.modified_count), (1, 1))
        self.assertEqual(self.t.find_one({"_id": 1}), {"_id": 1, "name": "ann", "n": 6, "k": "v"})
        r = self.t.update_many({"n": {"$gte": 5}}, {"$set": {"big": True}})
        self.assertEqual(r.matched_count, 8)
        r = self.t.replace_one({"_id": 2}, {"x": "replaced"})
        self.assertEqual(self.t.find_one({"_id": 2}), {"_id": 2, "x": "replaced"})
        r = self.t.update_one({"_id": 99}, {"$set": {"up": 1}}, upsert=True)
        self.assertEqual(r.upserted_id, 99)
        r = self.t.delete_many({"big": True})
        self.assertEqual(r.deleted_count, 8)
        r = self.t.delete_one({"_id": 2})
        self.assertEqual(r.deleted_count, 1)
        self.assertEqual(sorted(d["_id"] for d in self.t.find()), [3, 4, 99])
        found = list(self.t.find({"_id": {"$in": [3, 4]}}, {"n": 1, "_id": 0}).sort("n", -1))
        self.assertEqual(found, [{"n": 4}, {"n": 3}])

    def _has_aggregate(self):
        try:
            self.db.command("aggregate", "t", pipeline=[], cursor={})
            return True
        except errors.OperationFailure as e:
            if e.code == 59:
                return False
            raise

    def test_cursor_getmore_and_kill(self):
        self.t.insert_many([{"_id": i, "pad": "x" * 100} for i in range(1000)])
        cur = self.t.find().sort("_id", 1).batch_size(50)
        ids = [d["_id"] for d in cur]
        self.assertEqual(ids, list(range(1000)))
        cur = self.t.find().batch_size(10)
        next(cur)
        self.assertNotEqual(cur.cursor_id, 0)
        cur.close()  # killCursors
        self.assertEqual(len(list(self.t.find(limit=25).batch_size(7))), 25)

    def test_bulk_write(self):
        ops = [pymongo.InsertOne({"_id": i, "v": 0}) for i in range(100)]
        ops += [pymongo.UpdateOne({"_id": i}, {"$inc": {"v": 1}}) for i in range(0, 100, 2)]
        ops += [pymongo.DeleteOne({"_id": i}) for i in range(0, 100, 10)]
        ops += [pymongo.ReplaceOne({"_id": 1}, {"v": 42})]
        r = self.t.bulk_write(ops)
        self.assertEqual(r.inserted_count, 100)
        self.assertEqual(r.modified_count, 51)
        self.assertEqual(r.deleted_count, 10)
        self.assertEqual(self.t.find_one({"_id": 1})["v"], 42)
        # unordered with a duplicate: the others still go in
        ops = [pymongo.InsertOne({"_id": 500}), pymongo.InsertOne({"_id": 1}),
               pymongo.InsertOne({"_id": 501})]
        with self.assertRaises(errors.BulkWriteError) as cm:
            self.t.bulk_write(ops, ordered=False)
        details = cm.exception.details
        self.assertEqual(details["nInserted"], 2)
        self.assertEqual(details["writeErrors"][0]["code"], 11000)
        self.assertEqual(details["writeErrors"][0]["index"], 1)
        # a large batch split by the driver into several messages
        self.t.insert_many([{"pad": "y" * 1000} for _ in range(20000)])
        self.assertEqual(self.t.find({"pad": {"$exists": True}}).count(), 20000)

    def test_indexes(self):
        self.t.create_index([("email", 1)], unique=True)
        self.t.create_index([("a", 1), ("b", -1)], name="ab")
        names = sorted(i["name"] for i in self.t.list_indexes())
        self.assertEqual(names, ["_id_", "ab", "email_1"])
        self.t.insert_one({"email": "a@x"})
        with self.assertRaises(errors.DuplicateKeyError) as cm:
            self.t.insert_one({"email": "a@x"})
        self.assertEqual(cm.exception.code, 11000)
        self.assertIn("E11000 duplicate key error", str(cm.exception))
        self.t.drop_index("ab")
        self.assertEqual(len(list(self.t.list_indexes())), 2)
        plan = self.t.find({"email": "a@x"}).explain()
        self.assertIn("IXSCAN", str(plan))

    def test_find_and_modify(self):
        self.t.insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": 2}])
        doc = self.t.find_one_and_update({"_id": 1}, {"$inc": {"n": 10}},
                                         return_document=pymongo.ReturnDocument.AFTER)
        self.assertEqual(doc["n"], 11)
        doc = self.t.find_one_and_delete({"_id": 2})
        self.assertEqual(doc["n"], 2)
        doc = self.t.find_one_and_replace({"_id": 3}, {"r": 1}, upsert=True,
                                          return_document=pymongo.ReturnDocument.AFTER)
        self.assertEqual(doc, {"_id": 3, "r": 1})

    def test_aggregate_when_available(self):
        self.t.insert_many([{"k": i % 3, "v": i} for i in range(30)])
        if not self._has_aggregate():
            self.skipTest("the server has no aggregate command yet (CommandNotFound)")
        got = {d["_id"]: d["s"] for d in self.t.aggregate(
            [{"$group": {"_id": "$k", "s": {"$sum": "$v"}}}])}
        self.assertEqual(got, {0: 135, 1: 145, 2: 155})

    def test_errors_have_codes(self):
        with self.assertRaises(errors.OperationFailure) as cm:
            list(self.t.find({"a": {"$nosuch": 1}}))
        self.assertEqual(cm.exception.code, 2)
        with self.assertRaises(errors.OperationFailure) as cm:
            self.db.command("noSuchCommand")
        self.assertEqual(cm.exception.code, 59)
        with self.assertRaises(errors.OperationFailure) as cm:
            self.c.admin.command("replSetGetStatus")
        self.assertEqual(cm.exception.code, 76)
        with self.assertRaises(errors.OperationFailure) as cm:
            self.db.command({"insert": "t", "documents": [{}], "txnNumber": 1})
        self.assertEqual(cm.exception.code, 20)
        with self.assertRaises(errors.OperationFailure) as cm:
            self.db.command("shardCollection", DB + ".t")
        self.assertEqual(cm.exception.code, 59)

    def test_standalone_refusals(self):
        """Replication, transactions and sharding: a standalone mongod's answers."""
        from pymongo.read_concern import ReadConcern
        with self.assertRaises(errors.OperationFailure) as cm:
            self.c.admin.command("replSetInitiate")
        self.assertEqual(cm.exception.code, 76)
        self.assertIn("not started with the replSet option", str(cm.exception))
        # a transaction through pymongo's own session API
        with self.c.start_session() as s:
            s.start_transaction()
            with self.assertRaises(errors.OperationFailure) as cm:
                self.t.insert_one({"_id": "in-txn"}, session=s)
            self.assertEqual(cm.exception.code, 20)
            self.assertIn("Transaction numbers are only allowed on a replica set member "
                          "or mongos", str(cm.exception))
        self.assertIsNone(self.t.find_one({"_id": "in-txn"}))
        with self.assertRaises(errors.OperationFailure) as cm:
            self.c.admin.command("commitTransaction")
        self.assertEqual(cm.exception.code, 20)
        with self.assertRaises(errors.OperationFailure) as cm:
            self.t.with_options(read_concern=ReadConcern("linearizable")).find_one()
        self.assertEqual(cm.exception.code, 123)
        for cmd in ("enableSharding", "addShard", "isdbgrid"):
            with self.assertRaises(errors.OperationFailure) as cm:
                self.c.admin.command(cmd, DB)
            self.assertEqual(cm.exception.code, 59)
        # sessions without transactions work (minidoc ignores lsid)
        with self.c.start_session() as s:
            self.t.insert_one({"_id": "in-session"}, session=s)
            self.assertEqual(self.t.find_one({"_id": "in-session"}, session=s)["_id"],
                             "in-session")
        self.assertIn("id", self.c.admin.command("startSession"))

    def test_messages_up_to_the_limit(self):
        """52 MB in one insert_many: pymongo cuts it into messages of at most
        maxMessageSizeBytes (48,000,000), and the server takes each whole."""
        big = "z" * (4 * 1024 * 1024)
        r = self.t.insert_many([{"_id": i, "pad": big} for i in range(13)])
        self.assertEqual(len(r.inserted_ids), 13)
        self.assertEqual(self.t.find({}, {"_id": 1}).count(), 13)
        self.assertEqual(len(self.t.find_one({"_id": 12})["pad"]), len(big))

    def test_databases(self):
        other = self.c[DB + "_other"]
        other.c.insert_one({"x": 1})
        self.assertIn(DB + "_other", self.c.list_database_names())
        full = self.c.admin.command("listDatabases")
        entry = [d for d in full["databases"] if d["name"] == DB + "_other"][0]
        self.assertGreater(entry["sizeOnDisk"], 0)
        self.c.drop_database(DB + "_other")
        self.assertNotIn(DB + "_other", self.c.list_database_names())
        self.assertEqual(other.c.find_one(), None)

    def test_gridfs(self):
        import gridfs
        fs = gridfs.GridFS(self.db)
        data = os.urandom(1024 * 1024 + 17)
        fid = fs.put(data, filename="blob.bin")
        self.assertEqual(fs.get(fid).read(), data)
        self.assertEqual(fs.get_last_version("blob.bin").length, len(data))
        self.assertEqual(self.db.fs.chunks.find({"files_id": fid}).count(), 5)
        fs.delete(fid)
        self.assertFalse(fs.exists(fid))


def compressor_available(name):
    try:
        if name == "snappy":
            import snappy  # noqa: F401
        elif name == "zstd":
            import zstandard  # noqa: F401
        return True
    except ImportError:
        return False


class Compression(unittest.TestCase):
    def test_each_compressor(self):
        for name in ("zlib", "snappy", "zstd"):
            with self.subTest(name):
                if not compressor_available(name):
                    print("SKIP: pymongo cannot use %s here (python module missing)" % name,
                          file=sys.stderr)
                    continue
                plain = client()
                before = plain.admin.command("serverStatus")["network"]["compression"][name]
                c = client(compressors=name)
                t = c[DB].comp
                t.drop()
                t.insert_many([{"i": i, "pad": "z" * 200} for i in range(500)])
                self.assertEqual(len(list(t.find())), 500)
                c.close()
                after = plain.admin.command("serverStatus")["network"]["compression"][name]
                plain.close()
                self.assertGreater(after["decompressor"]["bytesIn"],
                                   before["decompressor"]["bytesIn"])
                self.assertGreater(after["compressor"]["bytesIn"],
                                   before["compressor"]["bytesIn"])
                # the replies shrank
                grew_in = after["compressor"]["bytesIn"] - before["compressor"]["bytesIn"]
                grew_out = after["compressor"]["bytesOut"] - before["compressor"]["bytesOut"]
                self.assertLess(grew_out, grew_in)


def queue_worker(wid, n_out):
    c = client()
    jobs = c[DB].queue
    took = 0
    while True:
        doc = jobs.find_one_and_update({"state": "new"},
                                       {"$set": {"state": "taken", "worker": wid}})
        if doc is None:
            break
        took += 1
    n_out.put((wid, took))
    c.close()


class Queue(unittest.TestCase):
    def test_queue_several_processes(self):
        c = client()
        jobs = c[DB].queue
        jobs.drop()
        jobs.create_index([("state", 1)])
        n = 400
        jobs.insert_many([{"_id": i, "state": "new"} for i in range(n)])
        out = multiprocessing.Queue()
        procs = [multiprocessing.Process(target=queue_worker, args=(w, out)) for w in range(4)]
        for p in procs:
            p.start()
        counts = dict(out.get(timeout=120) for _ in procs)
        for p in procs:
            p.join()
        self.assertEqual(sum(counts.values()), n)
        self.assertEqual(jobs.find({"state": "new"}).count(), 0)
        # every job taken once, by the worker that says it took it
        per = {}
        for d in jobs.find():
            per[d["worker"]] = per.get(d["worker"], 0) + 1
        self.assertEqual(per, {w: k for w, k in counts.items() if k})
        c.close()


if __name__ == "__main__":
    unittest.main(verbosity=1, warnings="ignore")
