"""test_auth.py -- pymongo against `minidoc serve --auth`, optionally over TLS.

Run by tests/server/test_auth.sh on a server with a fresh data directory:
MINIDOC_PORT is its port; MINIDOC_TLS_CA, when set, is the CA file every
client verifies the server's certificate with (tls=True), and
MINIDOC_TLS_MODE the server's --tlsMode.  Covers: the localhost exception
(the first user, on admin, from 127.0.0.1; closed once it exists),
Unauthorized (13) without a user, SCRAM-SHA-256 logins (named and
negotiated through saslSupportedMechs, speculative in hello),
AuthenticationFailed (18) for a wrong password or an unknown user, the
built-in roles (read cannot write, readWrite cannot drop the database,
neither reaches another database), what system.users holds (salted keys,
no password), updateUser and dropUser, a user name that needs SCRAM's
escapes, and a non-ASCII password refused with BadValue (2).
"""
import base64
import os
import unittest
import urllib.parse
import warnings

warnings.simplefilter("ignore", DeprecationWarning)
import pymongo  # noqa: E402
from pymongo import errors  # noqa: E402

PORT = int(os.environ.get("MINIDOC_PORT", "27017"))
TLS_CA = os.environ.get("MINIDOC_TLS_CA")
TLS_MODE = os.environ.get("MINIDOC_TLS_MODE", "disabled")
ROOT_PW = "r00t pw:@/?"  # needs escaping in a URI


def client(**kw):
    kw.setdefault("serverSelectionTimeoutMS", 5000)
    if TLS_CA and "tls" not in kw:
        kw.update(tls=True, tlsCAFile=TLS_CA)
    return pymongo.MongoClient("127.0.0.1", PORT, **kw)


def as_user(user, pwd, source="admin", **kw):
    return client(username=user, password=pwd, authSource=source, **kw)


class Auth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        anon = client()
        # the localhost exception: the first user, on admin, without a login
        try:
            anon.test.command("createUser", "early", pwd="pw", roles=["read"])
            raise AssertionError("createUser on a database other than admin was allowed")
        except errors.OperationFailure as e:
            assert e.code == 13, e.details
        anon.admin.command("createUser", "root", pwd=ROOT_PW, roles=["root"])
        anon.close()
        cls.root = as_user("root", ROOT_PW, authMechanism="SCRAM-SHA-256")
        cls.root.admin.command("ping")

    @classmethod
    def tearDownClass(cls):
        cls.root.close()

    def test_localhost_exception_closed(self):
        anon = client()
        with self.assertRaises(errors.OperationFailure) as ctx:
            anon.admin.command("createUser", "second", pwd="pw", roles=["root"])
        self.assertEqual(ctx.exception.code, 13)
        anon.close()

    def test_unauthenticated_gets_13(self):
        anon = client()
        self.assertEqual(anon.admin.command("ping")["ok"], 1.0)
        self.assertTrue(anon.admin.command("hello")["isWritablePrimary"])
        for op in (lambda: anon.test.t.find_one(),
                   lambda: anon.test.t.insert_one({"x": 1}),
                   lambda: anon.list_database_names(),
                   lambda: anon.admin.command("serverStatus")):
            with self.assertRaises(errors.OperationFailure) as ctx:
                op()
            self.assertEqual(ctx.exception.code, 13)
            self.assertIn("requires authentication", str(ctx.exception))
        anon.close()

    def test_root_reads_and_writes(self):
        t = self.root.authtest.t
        t.drop()
        t.insert_many([{"_id": i} for i in range(5)])
        self.assertEqual(t.count_documents({}), 5)
        self.assertIn("authtest", self.root.list_database_names())
        status = self.root.admin.command("connectionStatus")["authInfo"]
        self.assertEqual(status["authenticatedUsers"], [{"user": "root", "db": "admin"}])

    def test_negotiated_mechanism_and_uri(self):
        # no authMechanism: the driver asks hello for saslSupportedMechs
        hello = client().admin.command("hello", saslSupportedMechs="admin.root")
        self.assertEqual(hello["saslSupportedMechs"], ["SCRAM-SHA-256"])
        c = as_user("root", ROOT_PW)
        self.assertEqual(c.admin.command("ping")["ok"], 1.0)
        c.close()
        uri = "mongodb://root:%s@127.0.0.1:%d/?authSource=admin&authMechanism=SCRAM-SHA-256" % (
            urllib.parse.quote_plus(ROOT_PW), PORT)
        kw = {"tls": True, "tlsCAFile": TLS_CA} if TLS_CA else {}
        c = pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000, **kw)
        self.assertEqual(c.authtest.t.estimated_document_count() >= 0, True)
        c.close()

    def test_wrong_password_and_unknown_user_get_18(self):
        for user, pwd in (("root", "not it"), ("nobody", "pw")):
            c = as_user(user, pwd, authMechanism="SCRAM-SHA-256")
            with self.assertRaises(errors.OperationFailure) as ctx:
                c.admin.command("ping")
            self.assertEqual(ctx.exception.code, 18, ctx.exception.details)
            self.assertIn("Authentication failed", str(ctx.exception))
            c.close()

    def test_users_stored_salted_and_hashed(self):
        self.root.admin.command("createUser", "stored", pwd="plain text pw", roles=[])
        doc = self.root.admin["system.users"].find_one({"_id": "admin.stored"})
        self.assertEqual(doc["user"], "stored")
        self.assertEqual(doc["db"], "admin")
        self.assertEqual(doc["roles"], [])
        cred = doc["credentials"]["SCRAM-SHA-256"]
        self.assertEqual(cred["iterationCount"], 15000)
        self.assertEqual(len(base64.b64decode(cred["salt"])), 28)
        self.assertEqual(len(base64.b64decode(cred["storedKey"])), 32)
        self.assertEqual(len(base64.b64decode(cred["serverKey"])), 32)
        self.assertNotIn("plain text pw", repr(doc))
        self.assertNotIn("pwd", doc)
        info = self.root.admin.command("usersInfo", "stored")["users"][0]
        self.assertEqual(info["mechanisms"], ["SCRAM-SHA-256"])
        self.assertNotIn("credentials", info)
        with self.assertRaises(errors.OperationFailure) as ctx:
            self.root.admin.command("createUser", "stored", pwd="x", roles=[])
        self.assertEqual(ctx.exception.code, 51003)
        self.root.admin.command("dropUser", "stored")

    def test_roles(self):
        db = self.root.rolesdb
        db.t.drop()
        db.t.insert_one({"_id": 1})
        db.command("createUser", "reader", pwd="rpw", roles=["read"])
        db.command("createUser", "writer", pwd="wpw", roles=[{"role": "readWrite", "db": "rolesdb"}])
        reader = as_user("reader", "rpw", source="rolesdb")
        writer = as_user("writer", "wpw", source="rolesdb")
        self.assertEqual(reader.rolesdb.t.find_one(), {"_id": 1})
        with self.assertRaises(errors.OperationFailure) as ctx:
            reader.rolesdb.t.insert_one({"_id": 2})
        self.assertEqual(ctx.exception.code, 13)
        self.assertIn("not authorized on rolesdb", str(ctx.exception))
        writer.rolesdb.t.insert_one({"_id": 2})
        writer.rolesdb.t.create_index("x")
        self.assertEqual(reader.rolesdb.t.count_documents({}), 2)
        for c in (reader, writer):
            with self.assertRaises(errors.OperationFailure) as ctx:
                c.otherdb.t.find_one()
            self.assertEqual(ctx.exception.code, 13)
        with self.assertRaises(errors.OperationFailure) as ctx:
            writer.drop_database("rolesdb")
        self.assertEqual(ctx.exception.code, 13)
        # new roles reach the open connection
        db.command("updateUser", "reader", roles=["readWrite"])
        reader.rolesdb.t.insert_one({"_id": 3})
        reader.close()
        writer.close()
        db.command("dropAllUsersFromDatabase")

    def test_update_and_drop_user(self):
        db = self.root.updb
        db.command("createUser", "u", pwd="old pw", roles=["readWrite"])
        as_user("u", "old pw", source="updb").updb.command("ping")
        db.command("updateUser", "u", pwd="new pw")
        with self.assertRaises(errors.OperationFailure) as ctx:
            as_user("u", "old pw", source="updb").updb.command("ping")
        self.assertEqual(ctx.exception.code, 18)
        c = as_user("u", "new pw", source="updb")
        c.updb.t.insert_one({})
        db.command("dropUser", "u")
        with self.assertRaises(errors.OperationFailure) as ctx:
            c.updb.t.insert_one({})
        self.assertEqual(ctx.exception.code, 13)
        c.close()
        with self.assertRaises(errors.OperationFailure) as ctx:
            db.command("dropUser", "u")
        self.assertEqual(ctx.exception.code, 11)

    def test_name_with_scram_escapes(self):
        self.root.admin.command("createUser", "a,b=c", pwd="pw", roles=["readAnyDatabase"])
        c = as_user("a,b=c", "pw", authMechanism="SCRAM-SHA-256")
        self.assertEqual(c.authtest.t.count_documents({}) >= 0, True)
        c.close()
        self.root.admin.command("dropUser", "a,b=c")

    def test_non_ascii_password_refused(self):
        with self.assertRaises(errors.OperationFailure) as ctx:
            self.root.admin.command("createUser", "intl", pwd="p\u00e4ss", roles=[])
        self.assertEqual(ctx.exception.code, 2)
        self.assertIn("SASLprep", str(ctx.exception))


@unittest.skipUnless(TLS_CA, "no TLS (MINIDOC_TLS_CA unset)")
class Tls(unittest.TestCase):
    def test_build_info_says_openssl(self):
        c = as_user("root", ROOT_PW)
        self.assertIn("OpenSSL", c.admin.command("buildInfo")["openssl"]["running"])
        c.close()

    def test_allow_invalid_certificates(self):
        c = as_user("root", ROOT_PW, tls=True, tlsAllowInvalidCertificates=True)
        self.assertEqual(c.admin.command("ping")["ok"], 1.0)
        c.close()

    def test_unverified_certificate_refused(self):
        # no CA: the self-signed chain does not verify
        c = as_user("root", ROOT_PW, tls=True, serverSelectionTimeoutMS=1500)
        with self.assertRaises(errors.ServerSelectionTimeoutError):
            c.admin.command("ping")
        c.close()

    def test_plain_connection(self):
        c = as_user("root", ROOT_PW, tls=False, serverSelectionTimeoutMS=1500)
        if TLS_MODE == "requireTLS":
            with self.assertRaises(errors.ServerSelectionTimeoutError):
                c.admin.command("ping")
        else:
            self.assertEqual(c.admin.command("ping")["ok"], 1.0)
        c.close()


if __name__ == "__main__":
    unittest.main()
