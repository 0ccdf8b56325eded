// test_node.js -- the Node.js driver (npm `mongodb`) against `minidoc serve`:
// the same operations as test_pymongo.py's core: CRUD, a cursor with
// getMore, a bulk write, a duplicate key (code 11000), indexes, zlib
// compression.  Run by tests/server/test_drivers.sh with MINIDOC_PORT set
// and NODE_PATH pointing at the npm install; prints "node: N passed, M failed".
const { MongoClient } = require("mongodb");
const port = process.env.MINIDOC_PORT;
let pass = 0, fail = 0;
function check(name, cond, detail) {
  if (cond) pass++;
  else { fail++; console.log("FAIL: node: " + name + (detail ? ": " + detail : "")); }
}
(async () => {
  const client = new MongoClient(`mongodb://127.0.0.1:${port}/?compressors=zlib`,
                                 { serverSelectionTimeoutMS: 5000 });
  try {
    await client.connect();
    const db = client.db("nodetest_" + (process.env.MINIDOC_ENGINE || "x"));
    const c = db.collection("t");
    await c.drop().catch(() => {});
    const ins = await c.insertMany([...Array(500).keys()].map(i => ({ _id: i, v: i % 10 })));
    check("insertMany", ins.insertedCount === 500, JSON.stringify(ins));
    const docs = await c.find({ v: 3 }).batchSize(7).toArray();
    check("find with getMore", docs.length === 50, docs.length);
    const up = await c.updateMany({ v: 3 }, { $inc: { v: 100 } });
    check("updateMany", up.modifiedCount === 50, JSON.stringify(up));
    const one = await c.findOne({ _id: 3 });
    check("findOne", one && one.v === 103, JSON.stringify(one));
    const del = await c.deleteMany({ v: { $gte: 100 } });
    check("deleteMany", del.deletedCount === 50, JSON.stringify(del));
    const bulk = await c.bulkWrite([
      { insertOne: { document: { _id: 1000 } } },
      { updateOne: { filter: { _id: 0 }, update: { $set: { b: 1 } } } },
      { deleteOne: { filter: { _id: 1 } } },
    ]);
    check("bulkWrite", bulk.insertedCount === 1 && bulk.modifiedCount === 1 &&
          bulk.deletedCount === 1, JSON.stringify(bulk));
    try {
      await c.insertOne({ _id: 0 });
      check("duplicate key", false, "no error");
    } catch (e) {
      check("duplicate key", e.code === 11000, e.message);
    }
    await c.createIndex({ v: 1 }, { name: "v_1" });
    const idx = await c.indexes();
    check("indexes", idx.map(i => i.name).sort().join() === "_id_,v_1", JSON.stringify(idx));
    const fam = await c.findOneAndUpdate({ _id: 2 }, { $set: { f: 1 } },
                                         { returnDocument: "after" });
    const famDoc = fam && fam.value !== undefined ? fam.value : fam;
    check("findOneAndUpdate", famDoc && famDoc.f === 1, JSON.stringify(fam));
    const names = (await client.db("admin").admin().listDatabases()).databases.map(d => d.name);
    check("listDatabases", names.includes(db.databaseName), names.join());
    await db.dropDatabase();
  } catch (e) {
    check("no exception", false, e.stack);
  } finally {
    await client.close();
  }
  console.log(`node: ${pass} passed, ${fail} failed`);
  process.exit(fail ? 1 : 0);
})();
