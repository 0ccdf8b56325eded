/*
 * shell_api.js -- the shell's mongo API, in mongosh's shapes: db, its
 * collections (db.users, db.getCollection('a-b')), cursors printed 20
 * documents at a time with `it` for more, the shell commands (use, show,
 * it, help, exit), print/printjson, and the REPL's entry points that
 * tools/shell*.c call (__shell.run, __shell.incomplete, __shell.complete).
 *
 * Everything reaches the database through the host functions that
 * tools/shell.c defines:
 *
 *   __host_command(dbName, cmd)  the reply document of command cmd (a
 *                                listDatabases or dropDatabase goes to
 *                                the data directory, everything else to
 *                                the database's md_db_command)
 *   __host_print(text, stderr)   one line to stdout (or stderr)
 *   __host_exit(status)          leave the shell after this input
 *   __host_colors()              true when stdout is a terminal
 *
 * A command answered with ok: 0, or a write with writeErrors, throws a
 * MongoServerError (code, codeName) as mongosh does; insertMany's throws
 * a MongoBulkWriteError.  Integral numbers go to the database as int32
 * (js_opts.int32_numbers), as mongosh sends them.
 */
var __shell = (function (G) {
    var SHELL_BATCH = 20;
    var state = {db: null, cursor: null};
    var EXIT = {exit: true};

    function colors() {
        return __host_colors();
    }

    function out(text) {
        __host_print(String(text), false);
    }

    function serverError(r, name) {
        var e = new Error(r.errmsg || 'command failed');
        e.name = name || 'MongoServerError';
        if (r.code !== undefined)
            e.code = r.code;
        if (r.codeName !== undefined)
            e.codeName = r.codeName;
        return e;
    }

    function command(dbName, cmd) {
        var r = __host_command(dbName, cmd);
        if (!r.ok)
            throw serverError(r);
        return r;
    }

    /* A write command's reply: its first write error thrown. */
    function writeCommand(dbName, cmd, bulk) {
        var r = command(dbName, cmd);
        if (r.writeErrors && r.writeErrors.length)
            throw serverError(r.writeErrors[0], bulk ? 'MongoBulkWriteError' : null);
        if (r.writeConcernError)
            throw serverError(r.writeConcernError);
        return r;
    }

    function hidden(o, k, v) {
        Object.defineProperty(o, k, {value: v, enumerable: false, writable: true,
                                     configurable: true});
    }

    function isObject(v) {
        return v !== null && typeof v === 'object' && !Array.isArray(v);
    }

    function hasOperators(u) {
        var k = Object.keys(u);
        return k.length > 0 && k[0].charAt(0) === '$';
    }

    /* ---- cursors ----------------------------------------------------------- */

    /* A cursor over a find (kind 'find') or an aggregate ('aggregate'):
     * nothing runs until the first document is asked for. */
    function Cursor(coll, kind, spec) {
        hidden(this, '_coll', coll);
        hidden(this, '_kind', kind);
        hidden(this, '_spec', spec);
        hidden(this, '_id', null);
        hidden(this, '_buf', []);
        hidden(this, '_pos', 0);
        hidden(this, '_started', false);
        hidden(this, '_map', null);
    }

    Cursor.prototype._option = function (k, v) {
        if (this._started)
            throw new Error('Cursor is already initialized: ' + k + ' must come before' +
                            ' the first document');
        this._spec[k] = v;
        return this;
    };
    Cursor.prototype.sort = function (s) { return this._option('sort', s); };
    Cursor.prototype.limit = function (n) { return this._option('limit', n); };
    Cursor.prototype.skip = function (n) { return this._option('skip', n); };
    Cursor.prototype.batchSize = function (n) { return this._option('batchSize', n); };
    Cursor.prototype.projection = function (p) { return this._option('projection', p); };
    Cursor.prototype.hint = function (h) { return this._option('hint', h); };
    Cursor.prototype.maxTimeMS = function (n) { return this._option('maxTimeMS', n); };
    Cursor.prototype.comment = function (c) { return this._option('comment', c); };
    Cursor.prototype.pretty = function () { return this; };

    /* The command that opens the cursor. */
    Cursor.prototype._command = function () {
        var s = this._spec, c = this._coll, cmd;
        if (this._kind === 'aggregate') {
            cmd = {aggregate: c._name, pipeline: s.pipeline, cursor: {}};
            if (s.batchSize !== undefined)
                cmd.cursor.batchSize = s.batchSize;
            for (var k in s.options)
                if (k !== 'batchSize' && k !== 'cursor')
                    cmd[k] = s.options[k];
            return cmd;
        }
        cmd = {find: c._name, filter: s.filter || {}};
        var names = ['sort', 'projection', 'hint', 'skip', 'limit', 'batchSize', 'maxTimeMS',
                     'comment'];
        for (var i = 0; i < names.length; i++)
            if (s[names[i]] !== undefined)
                cmd[names[i]] = s[names[i]];
        if (cmd.limit < 0) {
            cmd.limit = -cmd.limit;
            cmd.singleBatch = true;
        }
        if (cmd.limit === 0)
            delete cmd.limit;
        return cmd;
    };

    Cursor.prototype._fill = function () {
        var r;
        if (!this._started) {
            this._started = true;
            r = command(this._coll._db._name, this._command());
            this._buf = r.cursor.firstBatch;
        } else if (this._id !== null && Number(this._id) !== 0) {
            var gm = {getMore: this._id, collection: this._coll._name};
            if (this._spec.batchSize)
                gm.batchSize = this._spec.batchSize;
            r = command(this._coll._db._name, gm);
            this._buf = r.cursor.nextBatch;
        } else {
            return;
        }
        this._id = r.cursor.id;
        this._pos = 0;
    };

    Cursor.prototype.hasNext = function () {
        while (this._pos >= this._buf.length) {
            if (this._started && (this._id === null || Number(this._id) === 0))
                return false;
            this._fill();
        }
        return true;
    };
    Cursor.prototype.next = function () {
        if (!this.hasNext())
            throw new Error('Cursor has no more documents');
        var d = this._buf[this._pos++];
        return this._map ? this._map(d) : d;
    };
    Cursor.prototype.tryNext = function () {
        return this.hasNext() ? this.next() : null;
    };
    Cursor.prototype.toArray = function () {
        var a = [];
        while (this.hasNext())
            a.push(this.next());
        return a;
    };
    Cursor.prototype.forEach = function (fn) {
        while (this.hasNext())
            fn(this.next());
    };
    Cursor.prototype.map = function (fn) {
        var prev = this._map;
        this._map = prev ? function (d) { return fn(prev(d)); } : fn;
        return this;
    };
    Cursor.prototype.itcount = function () {
        var n = 0;
        while (this.hasNext()) {
            this.next();
            n++;
        }
        return n;
    };
    Cursor.prototype.isExhausted = function () {
        return !this.hasNext();
    };
    Cursor.prototype.count = function () {
        var s = this._spec;
        return command(this._coll._db._name, {count: this._coll._name, query: s.filter || {}}).n;
    };
    Cursor.prototype.size = function () {
        var s = this._spec, cmd = {count: this._coll._name, query: s.filter || {}};
        if (s.skip)
            cmd.skip = s.skip;
        if (s.limit)
            cmd.limit = Math.abs(s.limit);
        return command(this._coll._db._name, cmd).n;
    };
    Cursor.prototype.explain = function (verbosity) {
        var inner = this._command();
        if (verbosity === true)
            verbosity = 'allPlansExecution';
        return command(this._coll._db._name,
                       {explain: inner, verbosity: verbosity || 'queryPlanner'});
    };
    Cursor.prototype.close = function () {
        if (this._id !== null && Number(this._id) !== 0)
            command(this._coll._db._name, {killCursors: this._coll._name, cursors: [this._id]});
        this._id = null;
        this._started = true;
        this._buf = [];
    };
    /* The REPL prints a cursor as its next 20 documents. */
    Cursor.prototype.__shellPrint = function () {
        var batch = [];
        while (batch.length < SHELL_BATCH && this.hasNext())
            batch.push(this.next());
        state.cursor = this;
        if (batch.length)
            out(__fmt.show(batch, colors()));
        if (this.hasNext())
            out('Type "it" for more');
        else
            state.cursor = null;
    };
    Cursor.prototype.__shellName = function () {
        return this._kind === 'aggregate' ? 'AggregationCursor' : 'Cursor';
    };

    /* ---- collections ----------------------------------------------------------------- */

    function Collection(db, name) {
        hidden(this, '_db', db);
        hidden(this, '_name', name);
    }
    var C = Collection.prototype;

    C.getName = function () { return this._name; };
    C.getFullName = function () { return this._db._name + '.' + this._name; };
    C.toString = function () { return this.getFullName(); };
    C.__shellName = function () { return this.getFullName(); };
    C.getDB = function () { return this._db; };
    C.getCollection = function (sub) { return this._db.getCollection(this._name + '.' + sub); };
    C._run = function (cmd) { return command(this._db._name, cmd); };

    C.find = function (filter, projection, options) {
        var spec = {filter: filter || {}};
        if (projection)
            spec.projection = projection;
        for (var k in options || {})
            spec[k] = options[k];
        return new Cursor(this, 'find', spec);
    };
    C.findOne = function (filter, projection, options) {
        var c = this.find(filter, projection, options);
        c._spec.limit = -1;
        return c.hasNext() ? c.next() : null;
    };

    /* doc with an _id first (a new ObjectId when it has none). */
    function withId(doc) {
        if (!isObject(doc))
            throw new TypeError('a document must be an object');
        if (doc._id !== undefined)
            return doc;
        var d = {_id: new ObjectId()};
        for (var k in doc)
            if (Object.prototype.hasOwnProperty.call(doc, k))
                d[k] = doc[k];
        return d;
    }

    C.insertOne = function (doc, options) {
        var d = withId(doc);
        var cmd = {insert: this._name, documents: [d]};
        if (options && options.writeConcern)
            cmd.writeConcern = options.writeConcern;
        writeCommand(this._db._name, cmd);
        return {acknowledged: true, insertedId: d._id};
    };
    C.insertMany = function (docs, options) {
        if (!Array.isArray(docs))
            throw new TypeError('insertMany takes an array of documents');
        var ds = [], ids = {};
        for (var i = 0; i < docs.length; i++) {
            ds.push(withId(docs[i]));
            ids[String(i)] = ds[i]._id;
        }
        var cmd = {insert: this._name, documents: ds,
                   ordered: !(options && options.ordered === false)};
        writeCommand(this._db._name, cmd, true);
        return {acknowledged: true, insertedIds: ids};
    };
    C.insert = function (docs) {
        return Array.isArray(docs) ? this.insertMany(docs) : this.insertOne(docs);
    };

    function updateResult(r) {
        var up = r.upserted && r.upserted.length ? r.upserted[0]._id : null;
        var nup = r.upserted ? r.upserted.length : 0;
        return {acknowledged: true, insertedId: up, matchedCount: r.n - nup,
                modifiedCount: r.nModified, upsertedCount: nup};
    }

    C._update = function (filter, update, options, multi) {
        var u = {q: filter || {}, u: update, multi: multi, upsert: !!(options && options.upsert)};
        var names = ['arrayFilters', 'collation', 'hint'];
        for (var i = 0; i < names.length; i++)
            if (options && options[names[i]] !== undefined)
                u[names[i]] = options[names[i]];
        return updateResult(writeCommand(this._db._name, {update: this._name, updates: [u]}));
    };
    C.updateOne = function (filter, update, options) {
        if (!isObject(update) || !hasOperators(update))
            throw new Error('Update document requires atomic operators');
        return this._update(filter, update, options, false);
    };
    C.updateMany = function (filter, update, options) {
        if (!isObject(update) || !hasOperators(update))
            throw new Error('Update document requires atomic operators');
        return this._update(filter, update, options, true);
    };
    C.replaceOne = function (filter, replacement, options) {
        if (!isObject(replacement) || hasOperators(replacement))
            throw new Error('Replacement document must not contain atomic operators');
        return this._update(filter, replacement, options, false);
    };

    C._delete = function (filter, limit, options) {
        var d = {q: filter || {}, limit: limit};
        if (options && options.collation)
            d.collation = options.collation;
        var r = writeCommand(this._db._name, {delete: this._name, deletes: [d]});
        return {acknowledged: true, deletedCount: r.n};
    };
    C.deleteOne = function (filter, options) { return this._delete(filter, 1, options); };
    C.deleteMany = function (filter, options) { return this._delete(filter, 0, options); };

    /* findAndModify with mongosh's option names (returnDocument: 'after',
     * or the legacy returnNewDocument: true). */
    C._findAndModify = function (filter, spec, options) {
        var o = options || {};
        var cmd = {findAndModify: this._name, query: filter || {}};
        for (var k in spec)
            cmd[k] = spec[k];
        if (o.sort)
            cmd.sort = o.sort;
        if (o.projection)
            cmd.fields = o.projection;
        if (o.upsert)
            cmd.upsert = true;
        if (o.returnDocument === 'after' || o.returnNewDocument)
            cmd['new'] = true;
        if (o.arrayFilters)
            cmd.arrayFilters = o.arrayFilters;
        var r = this._run(cmd);
        return r.value === undefined ? null : r.value;
    };
    C.findOneAndUpdate = function (filter, update, options) {
        if (!isObject(update) || !hasOperators(update))
            throw new Error('Update document requires atomic operators');
        return this._findAndModify(filter, {update: update}, options);
    };
    C.findOneAndReplace = function (filter, replacement, options) {
        if (!isObject(replacement) || hasOperators(replacement))
            throw new Error('Replacement document must not contain atomic operators');
        return this._findAndModify(filter, {update: replacement}, options);
    };
    C.findOneAndDelete = function (filter, options) {
        return this._findAndModify(filter, {remove: true}, options);
    };

    C.aggregate = function (pipeline, options) {
        if (!Array.isArray(pipeline)) {
            pipeline = Array.prototype.slice.call(arguments);
            options = {};
        }
        var o = options || {};
        if (o.explain)
            return this._run({aggregate: this._name, pipeline: pipeline, explain: true});
        var spec = {pipeline: pipeline, options: o};
        if (o.cursor && o.cursor.batchSize !== undefined)
            spec.batchSize = o.cursor.batchSize;
        else if (o.batchSize !== undefined)
            spec.batchSize = o.batchSize;
        return new Cursor(this, 'aggregate', spec);
    };

    /* mongosh's countDocuments: an aggregation that counts the matches. */
    C.countDocuments = function (filter, options) {
        var p = [{$match: filter || {}}];
        if (options && options.skip)
            p.push({$skip: options.skip});
        if (options && options.limit)
            p.push({$limit: options.limit});
        p.push({$group: {_id: 1, n: {$sum: 1}}});
        var a = this.aggregate(p).toArray();
        return a.length ? a[0].n : 0;
    };
    C.estimatedDocumentCount = function () {
        return this._run({count: this._name}).n;
    };
    C.count = function (filter, options) {
        var cmd = {count: this._name, query: filter || {}};
        for (var k in options || {})
            cmd[k] = options[k];
        return this._run(cmd).n;
    };
    C.distinct = function (key, filter, options) {
        var cmd = {distinct: this._name, key: key, query: filter || {}};
        for (var k in options || {})
            cmd[k] = options[k];
        return this._run(cmd).values;
    };

    /* The default index name: a_1_b_-1. */
    function indexName(keys) {
        var parts = [];
        for (var k in keys)
            parts.push(k + '_' + (typeof keys[k] === 'object' ? String(keys[k]) : keys[k]));
        return parts.join('_');
    }

    C.createIndexes = function (specs, options) {
        var idx = [], names = [];
        for (var i = 0; i < specs.length; i++) {
            var e = {key: specs[i]};
            var o = options || {};
            for (var k in o)
                e[k] = o[k];
            if (!e.name)
                e.name = indexName(specs[i]);
            idx.push(e);
            names.push(e.name);
        }
        this._run({createIndexes: this._name, indexes: idx});
        return names;
    };
    C.createIndex = function (keys, options) {
        return this.createIndexes([keys], options)[0];
    };
    C.ensureIndex = C.createIndex;
    C.getIndexes = function () {
        var r = this._run({listIndexes: this._name});
        var c = new Cursor(this, 'find', {});
        c._started = true;
        c._buf = r.cursor.firstBatch;
        c._id = r.cursor.id;
        return c.toArray();
    };
    C.getIndexKeys = function () {
        return this.getIndexes().map(function (i) { return i.key; });
    };
    C.dropIndex = function (index) {
        return this._run({dropIndexes: this._name, index: index});
    };
    C.dropIndexes = function (indexes) {
        return this._run({dropIndexes: this._name, index: indexes === undefined ? '*' : indexes});
    };
    C.stats = function (options) {
        var cmd = {collStats: this._name};
        if (typeof options === 'number')
            cmd.scale = options;
        else
            for (var k in options || {})
                cmd[k] = options[k];
        return this._run(cmd);
    };
    C.dataSize = function () { return this.stats().size; };
    C.storageSize = function () { return this.stats().storageSize; };
    C.totalIndexSize = function () { return this.stats().totalIndexSize; };
    C.validate = function (full) {
        return this._run({validate: this._name, full: !!full});
    };
    C.drop = function () {
        var r = __host_command(this._db._name, {drop: this._name});
        if (!r.ok && r.codeName !== 'NamespaceNotFound')
            throw serverError(r);
        return !!r.ok;
    };
    C.explain = function (verbosity) {
        var coll = this;
        return {
            find: function (filter, projection) {
                var c = coll.find(filter, projection);
                c.__shellPrint = function () {
                    out(__fmt.show(c.explain(verbosity), colors()));
                };
                return c;
            },
            aggregate: function (pipeline) {
                return coll.aggregate(pipeline, {explain: true});
            },
            count: function (filter) {
                return coll._run({explain: {count: coll._name, query: filter || {}},
                                  verbosity: verbosity || 'queryPlanner'});
            },
            distinct: function (key, filter) {
                return coll._run({explain: {distinct: coll._name, key: key, query: filter || {}},
                                  verbosity: verbosity || 'queryPlanner'});
            }
        };
    };
    C.help = function () {
        out(helpText.collection);
    };

    /* db.a.b is the collection a.b, as in mongosh. */
    function collectionProxy(coll) {
        return new Proxy(coll, {
            get: function (t, k) {
                if (typeof k !== 'string' || k in t || k.charAt(0) === '_')
                    return t[k];
                return t.getCollection(k);
            }
        });
    }

    /* ---- databases ------------------------------------------------------------------- */

    function Database(name) {
        hidden(this, '_name', name);
        hidden(this, '_colls', {});
    }
    var D = Database.prototype;

    D.getName = function () { return this._name; };
    D.toString = function () { return this._name; };
    D.__shellName = function () { return this._name; };
    D.getCollection = function (name) {
        if (typeof name !== 'string' || name === '')
            throw new Error('Collection names must be non-empty strings');
        if (!Object.prototype.hasOwnProperty.call(this._colls, name))
            this._colls[name] = collectionProxy(new Collection(this, name));
        return this._colls[name];
    };
    D.getSiblingDB = function (name) { return databaseProxy(name); };
    D.runCommand = function (cmd) {
        if (typeof cmd === 'string') {
            var c = {};
            c[cmd] = 1;
            cmd = c;
        }
        return command(this._name, cmd);
    };
    D.adminCommand = function (cmd) { return this.runCommand(cmd); };
    D.getCollectionInfos = function (filter) {
        var cmd = {listCollections: 1};
        if (filter)
            cmd.filter = filter;
        var r = command(this._name, cmd);
        var c = new Cursor(this.getCollection('$cmd'), 'find', {});
        c._started = true;
        c._buf = r.cursor.firstBatch;
        c._id = r.cursor.id;
        return c.toArray();
    };
    D.getCollectionNames = function () {
        return this.getCollectionInfos().map(function (i) { return i.name; }).sort();
    };
    D.createCollection = function (name, options) {
        var cmd = {create: name};
        for (var k in options || {})
            cmd[k] = options[k];
        return command(this._name, cmd);
    };
    D.dropDatabase = function () {
        return command(this._name, {dropDatabase: 1});
    };
    D.serverStatus = function () { return this.runCommand('serverStatus'); };
    D.version = function () { return this.runCommand('buildInfo').version; };
    D.help = function () {
        out(helpText.db);
    };

    function databaseProxy(name) {
        return new Proxy(new Database(name), {
            get: function (t, k) {
                if (typeof k !== 'string' || k in t || k.charAt(0) === '_')
                    return t[k];
                return t.getCollection(k);
            }
        });
    }

    /* ---- shell commands -------------------------------------------------------------- */

    var helpText = {
        shell: [
            'Shell commands:',
            '  use <db>                   switch to database <db> (a directory under --dbpath)',
            '  show dbs                   the databases that hold a collection, with sizes',
            '  show collections           the current database\'s collections',
            '  it                         the next 20 documents of the last cursor printed',
            '  db.help()                  the database methods',
            '  db.<coll>.help()           the collection methods',
            '  print(...), printjson(x)   print values',
            '  exit, quit()               leave the shell (Ctrl-D too)',
            '',
            'Types: ObjectId(), ISODate(), NumberLong(), NumberInt(), NumberDecimal(),',
            '       Timestamp(t, i), BinData(subtype, base64), /regex/flags'
        ].join('\n'),
        db: [
            'Database methods:',
            '  db.getName()  db.getCollectionNames()  db.getCollectionInfos(filter)',
            '  db.getCollection(name)  db.getSiblingDB(name)  db.createCollection(name, options)',
            '  db.runCommand(cmd)  db.adminCommand(cmd)  db.dropDatabase()  db.serverStatus()'
        ].join('\n'),
        collection: [
            'Collection methods:',
            '  find(filter, projection)  findOne(filter, projection)',
            '  insertOne(doc)  insertMany(docs)',
            '  updateOne(filter, update, options)  updateMany(filter, update, options)',
            '  replaceOne(filter, doc, options)  deleteOne(filter)  deleteMany(filter)',
            '  findOneAndUpdate(filter, update, options)  findOneAndReplace(...)',
            '  findOneAndDelete(filter, options)  aggregate(pipeline, options)',
            '  countDocuments(filter)  estimatedDocumentCount()  distinct(key, filter)',
            '  createIndex(keys, options)  getIndexes()  dropIndex(name)  dropIndexes()',
            '  stats()  validate()  drop()  explain(verbosity).find(...)',
            'Cursor methods:',
            '  sort(spec)  limit(n)  skip(n)  batchSize(n)  projection(p)  hint(h)',
            '  hasNext()  next()  toArray()  forEach(fn)  map(fn)  itcount()  explain()'
        ].join('\n')
    };

    function sizeText(n) {
        var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], u = 0;
        while (n >= 1024 && u < units.length - 1) {
            n /= 1024;
            u++;
        }
        return n.toFixed(2) + ' ' + units[u];
    }

    function pad(s, n) {
        while (s.length < n)
            s += ' ';
        return s;
    }

    function use(name) {
        if (!/^[^\/\\. "$*<>:|?]+$/.test(name) || name.length > 63)
            throw serverError({errmsg: 'Invalid database name: \'' + name + '\'', code: 73,
                               codeName: 'InvalidNamespace'});
        state.db = databaseProxy(name);
        G.db = state.db;
        out('switched to db ' + name);
    }

    function show(what) {
        if (what === 'dbs' || what === 'databases') {
            var dbs = command('admin', {listDatabases: 1}).databases, w = 0, i;
            for (i = 0; i < dbs.length; i++)
                w = Math.max(w, dbs[i].name.length);
            for (i = 0; i < dbs.length; i++)
                out(pad(dbs[i].name, w + 2) + sizeText(Number(dbs[i].sizeOnDisk)));
        } else if (what === 'collections' || what === 'tables') {
            var names = state.db.getCollectionNames();
            for (var j = 0; j < names.length; j++)
                out(names[j]);
        } else {
            throw new Error('show: unknown argument \'' + what + '\' (dbs, collections)');
        }
    }

    function it() {
        if (state.cursor)
            state.cursor.__shellPrint();
        else
            out('no cursor');
    }

    /* The shell command a line is (use, show, it, help, exit), or null. */
    function shellCommand(src) {
        var s = src.replace(/^\s+|[\s;]+$/g, '');
        var m = /^(use|show)\s+(\S+)$/.exec(s);
        if (m)
            return m[1] === 'use' ? function () { use(m[2]); } : function () { show(m[2]); };
        if (s === 'it')
            return it;
        if (s === 'help')
            return function () { out(helpText.shell); };
        if (s === 'exit' || s === 'quit')
            return function () { quit(0); };
        return null;
    }

    function quit(status) {
        __host_exit(status === undefined ? 0 : Number(status));
        throw EXIT;
    }

    function printResult(v) {
        if (v === undefined)
            return;
        if (v !== null && typeof v === 'object' && typeof v.__shellPrint === 'function')
            v.__shellPrint();
        else
            out(__fmt.show(v, colors()));
    }

    function printError(e) {
        var text;
        if (e instanceof Error)
            text = e.name + ': ' + e.message;
        else
            text = 'Uncaught ' + __fmt.show(e, false);
        __host_print(__fmt.red(text, __host_colors(true)), true);
    }

    /* ---- the REPL's entry points ----------------------------------------------------- */

    /* Run src ('repl' and 'eval' print its value, 'script' does not).
     * False when it threw (the error is printed). */
    function run(src, mode) {
        try {
            var cmd = shellCommand(src), v;
            if (cmd)
                v = cmd();
            else
                v = (0, eval)(src);
            if (mode !== 'script' && !cmd)
                printResult(v);
            return true;
        } catch (e) {
            if (e === EXIT)
                return true;
            printError(e);
            return false;
        }
    }

    /* src is an unfinished expression: more lines may complete it. */
    function incomplete(src) {
        if (shellCommand(src))
            return false;
        try {
            new Function(src);
            return false;
        } catch (e) {
            if (!(e instanceof SyntaxError) || !/end of input/.test(e.message) ||
                /unterminated string/.test(e.message))
                return false;
            /* "x = {a: 1}}" also ends in a parse error at the end */
            var depth = 0, q = null;
            for (var i = 0; i < src.length; i++) {
                var ch = src.charAt(i);
                if (q) {
                    if (ch === '\\')
                        i++;
                    else if (ch === q)
                        q = null;
                } else if (ch === '"' || ch === "'") {
                    q = ch;
                } else if ('([{'.indexOf(ch) >= 0) {
                    depth++;
                } else if (')]}'.indexOf(ch) >= 0 && --depth < 0) {
                    return false;
                }
            }
            return true;
        }
    }

    function methods(proto) {
        return Object.keys(proto).filter(function (k) {
            return k.charAt(0) !== '_' && typeof proto[k] === 'function';
        });
    }

    function startingWith(list, prefix, lead) {
        var r = [];
        for (var i = 0; i < list.length; i++)
            if (list[i].indexOf(prefix) === 0 && r.indexOf(lead + list[i]) < 0)
                r.push(lead + list[i]);
        return r.sort();
    }

    function names(f) {
        try {
            return f();
        } catch (e) {
            return [];
        }
    }

    /* Completions of the word that ends `line` (letters, digits, _, $, .):
     * each is the whole word as it would read completed. */
    function complete(line) {
        var word = /[A-Za-z0-9_$.]*$/.exec(line)[0];
        var before = line.substr(0, line.length - word.length);
        if (/^\s*show\s+$/.test(before))
            return startingWith(['collections', 'dbs', 'databases', 'tables'], word, '');
        if (/^\s*use\s+$/.test(before))
            return startingWith(names(function () {
                return command('admin', {listDatabases: 1, nameOnly: true}).databases
                    .map(function (d) { return d.name; });
            }), word, '');
        var parts = word.split('.');
        if (parts.length === 1 && /\)\s*$/.test(before))
            return [];
        if (parts[0] === '' && parts.length === 2 && /\)\s*$/.test(before))
            return startingWith(methods(Cursor.prototype), parts[1], '.');
        if (parts.length === 1)
            return startingWith(Object.keys(G).concat(['show', 'use', 'it', 'help', 'exit'])
                                    .filter(function (k) { return k.indexOf('__') !== 0; }),
                                word, '');
        if (parts[0] !== 'db')
            return [];
        if (parts.length === 2)
            return startingWith(methods(D).concat(names(function () {
                return state.db.getCollectionNames();
            })), parts[1], 'db.');
        var coll = parts.slice(1, parts.length - 1).join('.');
        return startingWith(methods(C), parts[parts.length - 1], 'db.' + coll + '.');
    }

    G.print = function () { out(__fmt.args(arguments, colors())); };
    G.printjson = function (x) { out(__fmt.show(x, colors(), true)); };
    /* MinKey() and MaxKey() as in mongosh (the values stay what the
     * engine's environment made them) */
    var minKey = G.MinKey, maxKey = G.MaxKey;
    G.MinKey = function MinKey() { return minKey; };
    G.MaxKey = function MaxKey() { return maxKey; };
    G.quit = quit;
    G.exit = quit;

    return {
        start: function (dbName) {
            state.db = databaseProxy(dbName);
            G.db = state.db;
        },
        dbName: function () { return state.db._name; },
        run: run,
        incomplete: incomplete,
        complete: complete
    };
})(this);
