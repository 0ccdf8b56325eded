/*
 * srv_scram.c -- SCRAM-SHA-256 (RFC 5802 with RFC 7677's hash), as MongoDB
 * runs it in saslStart / saslContinue; pure functions over strings, with
 * OpenSSL's PBKDF2, HMAC and SHA-256.
 *
 *   client                                    server (srv_scram)
 *   client-first  "n,,n=user,r=<cnonce>"  -->  srv_scram_start: user name
 *                                              (caller looks up its credential)
 *                 <--  "r=<cnonce><snonce>,s=<salt>,i=<n>"  srv_scram_server_first
 *   client-final  "c=biws,r=<nonce>,p=<proof>"  -->  srv_scram_server_final:
 *                 <--  "v=<server signature>"       the proof checked
 *
 * The keys (RFC 5802 section 3):
 *
 *   SaltedPassword  = PBKDF2-HMAC-SHA-256(password, salt, i)
 *   ClientKey       = HMAC(SaltedPassword, "Client Key")
 *   StoredKey       = SHA-256(ClientKey)        stored in system.users
 *   ServerKey       = HMAC(SaltedPassword, "Server Key")   stored too
 *   AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
 *   ClientSignature = HMAC(StoredKey, AuthMessage)
 *   ClientProof     = ClientKey XOR ClientSignature           sent by the client
 *   ServerSignature = HMAC(ServerKey, AuthMessage)            sent back as v=
 *
 * The server never holds the password: it recovers ClientKey as ClientProof
 * XOR ClientSignature and checks SHA-256(ClientKey) == StoredKey.
 *
 * SASLprep (RFC 4013) is not implemented: createUser and updateUser accept
 * only passwords of printable ASCII (0x20-0x7e), for which SASLprep is the
 * identity, so what a driver sends after its own SASLprep is the password
 * as stored (srv_scram_password_check).  Channel binding is refused (gs2
 * header "p="), as MongoDB refuses it.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

static int fail(srv_perr *e, int code, const char *msg)
{
    if (e) {
        e->code = code;
        snprintf(e->message, sizeof e->message, "%s", msg);
    }
    return code;
}

/* ---- base64 ------------------------------------------------------------------------- */

size_t srv_b64_encode(const uint8_t *in, size_t n, char *out)
{
    return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

/* Strict: length a multiple of 4, padding only at the end.  Returns the
 * decoded length, or -1. */
long srv_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
    if (n % 4 != 0 || n / 4 * 3 > cap)
        return -1;
    if (n == 0)
        return 0;
    size_t pad = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] == '=') {
            if (i < n - 2)
                return -1;
            pad++;
        } else if (pad)
            return -1;
    }
    int r = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
    if (r < 0)
        return -1;
    return (long)r - (long)pad;
}

/* ---- the keys ----------------------------------------------------------------------- */

int srv_scram_salted_password(const char *pwd, const uint8_t *salt, size_t salt_len, int iters,
                              uint8_t out[SRV_SCRAM_HASH])
{
    return PKCS5_PBKDF2_HMAC(pwd, (int)strlen(pwd), salt, (int)salt_len, iters, EVP_sha256(),
                             SRV_SCRAM_HASH, out) == 1 ? 0 : -1;
}

static void hmac(const uint8_t *key, size_t kn, const void *d, size_t n, uint8_t out[32])
{
    unsigned int len = SRV_SCRAM_HASH;
    HMAC(EVP_sha256(), key, (int)kn, d, n, out, &len);
}

void srv_scram_keys(const uint8_t salted[SRV_SCRAM_HASH], uint8_t client_key[SRV_SCRAM_HASH],
                    uint8_t stored_key[SRV_SCRAM_HASH], uint8_t server_key[SRV_SCRAM_HASH])
{
    uint8_t ck[SRV_SCRAM_HASH];
    hmac(salted, SRV_SCRAM_HASH, "Client Key", 10, ck);
    if (client_key)
        memcpy(client_key, ck, sizeof ck);
    SHA256(ck, sizeof ck, stored_key);
    hmac(salted, SRV_SCRAM_HASH, "Server Key", 10, server_key);
    OPENSSL_cleanse(ck, sizeof ck);
}

int srv_scram_password_check(const char *pwd, srv_perr *e)
{
    if (!pwd[0])
        return fail(e, MD_CODE_BAD_VALUE, "Password cannot be empty");
    for (const unsigned char *p = (const unsigned char *)pwd; *p; p++)
        if (*p < 0x20 || *p > 0x7e)
            return fail(e, MD_CODE_BAD_VALUE,
                        "minidoc serve accepts only passwords of printable ASCII characters "
                        "(SASLprep of other characters is not implemented)");
    return 0;
}

int srv_scram_cred_make(const char *pwd, const uint8_t *salt, size_t salt_len, int iters,
                        srv_scram_cred *out)
{
    uint8_t salted[SRV_SCRAM_HASH];
    memset(out, 0, sizeof *out);
    if (salt_len > sizeof out->salt)
        return -1;
    if (salt)
        memcpy(out->salt, salt, salt_len);
    else if (RAND_bytes(out->salt, (int)salt_len) != 1)
        return -1;
    out->salt_len = salt_len;
    out->iterations = iters;
    if (srv_scram_salted_password(pwd, out->salt, salt_len, iters, salted))
        return -1;
    srv_scram_keys(salted, NULL, out->stored_key, out->server_key);
    OPENSSL_cleanse(salted, sizeof salted);
    return 0;
}

void srv_scram_client_proof(const uint8_t salted[SRV_SCRAM_HASH], const char *auth_msg,
                            uint8_t proof[SRV_SCRAM_HASH], uint8_t server_sig[SRV_SCRAM_HASH])
{
    uint8_t ck[SRV_SCRAM_HASH], sk[SRV_SCRAM_HASH], srvk[SRV_SCRAM_HASH], sig[SRV_SCRAM_HASH];
    srv_scram_keys(salted, ck, sk, srvk);
    hmac(sk, sizeof sk, auth_msg, strlen(auth_msg), sig);
    for (int i = 0; i < SRV_SCRAM_HASH; i++)
        proof[i] = ck[i] ^ sig[i];
    hmac(srvk, sizeof srvk, auth_msg, strlen(auth_msg), server_sig);
}

/* ---- the server's conversation ------------------------------------------------------ */

/* The value of attribute `a` ("r=...") at *p up to the next comma; moves *p
 * past it.  NULL when the attribute is not there. */
static char *attr(const char **p, const char *end, char a)
{
    const char *s = *p;
    if (end - s < 2 || s[0] != a || s[1] != '=')
        return NULL;
    s += 2;
    const char *c = memchr(s, ',', (size_t)(end - s));
    if (!c)
        c = end;
    char *v = strndup(s, (size_t)(c - s));
    *p = c < end ? c + 1 : end;
    return v;
}

/* saslname: "=2C" is ',' and "=3D" is '='; any other '=' is an error. */
static char *unescape_name(const char *s)
{
    char *out = malloc(strlen(s) + 1), *o = out;
    if (!out)
        return NULL;
    while (*s) {
        if (*s == '=') {
            if (!strncmp(s, "=2C", 3))
                *o++ = ',';
            else if (!strncmp(s, "=3D", 3))
                *o++ = '=';
            else {
                free(out);
                return NULL;
            }
            s += 3;
        } else
            *o++ = *s++;
    }
    *o = '\0';
    return out;
}

static bool has_nul(const char *m, size_t n)
{
    return memchr(m, '\0', n) != NULL;
}

int srv_scram_start(srv_scram *s, const char *msg, size_t n, char **user, srv_perr *e)
{
    memset(s, 0, sizeof *s);
    *user = NULL;
    const char *p = msg, *end = msg + n;
    if (n < 3 || has_nul(msg, n))
        return fail(e, MD_CODE_BAD_VALUE, "Invalid SCRAM client-first message: too short");
    if (p[0] == 'p')
        return fail(e, MD_CODE_BAD_VALUE, "Server does not support channel binding");
    if ((p[0] != 'n' && p[0] != 'y') || p[1] != ',')
        return fail(e, MD_CODE_BAD_VALUE, "Incorrect SCRAM client message prefix");
    /* the authzid: none, or the user itself (checked below) */
    const char *c = memchr(p + 2, ',', (size_t)(end - p - 2));
    if (!c)
        return fail(e, MD_CODE_BAD_VALUE,
                    "Incorrect number of arguments for first SCRAM client message");
    char *authzid = c > p + 2 ? strndup(p + 2, (size_t)(c - p - 2)) : NULL;
    s->gs2 = strndup(msg, (size_t)(c + 1 - msg));
    p = c + 1;
    s->client_first_bare = strndup(p, (size_t)(end - p));
    if (p < end && *p == 'm') {
        free(authzid);
        return fail(e, MD_CODE_BAD_VALUE, "SCRAM mandatory extensions are not supported");
    }
    char *name = attr(&p, end, 'n');
    char *nonce = name ? attr(&p, end, 'r') : NULL;
    int rc = 0;
    if (!name || !nonce || !nonce[0] || strchr(nonce, ','))
        rc = fail(e, MD_CODE_BAD_VALUE,
                  "Invalid SCRAM client-first message: expected n=<user>,r=<nonce>");
    else if (!(*user = unescape_name(name)) || !(*user)[0])
        rc = fail(e, MD_CODE_BAD_VALUE, "Invalid SCRAM user name");
    else if (authzid && (strncmp(authzid, "a=", 2) || strcmp(authzid + 2, name)))
        rc = fail(e, MD_CODE_BAD_VALUE,
                  "SCRAM authorization identity must match the authentication identity");
    free(authzid);
    free(name);
    if (rc) {
        free(nonce);
        free(*user);
        *user = NULL;
        return rc;
    }
    s->nonce = nonce;
    s->step = 1;
    return 0;
}

int srv_scram_server_first(srv_scram *s, const srv_scram_cred *cred, const char *server_nonce,
                           char **out, srv_perr *e)
{
    char snonce[64], salt[128];
    if (s->step != 1)
        return fail(e, 17, "SCRAM conversation out of order");
    if (!server_nonce) {
        uint8_t r[24];
        if (RAND_bytes(r, sizeof r) != 1)
            return fail(e, MD_CODE_INTERNAL_ERROR, "no random bytes for the SCRAM nonce");
        srv_b64_encode(r, sizeof r, snonce);
        server_nonce = snonce;
    }
    s->cred = *cred;
    srv_b64_encode(cred->salt, cred->salt_len, salt);
    size_t len = strlen(s->nonce) + strlen(server_nonce) + strlen(salt) + 32;
    char *combined = malloc(strlen(s->nonce) + strlen(server_nonce) + 1);
    s->server_first = malloc(len);
    if (!combined || !s->server_first) {
        free(combined);
        return fail(e, MD_CODE_INTERNAL_ERROR, "out of memory");
    }
    sprintf(combined, "%s%s", s->nonce, server_nonce);
    free(s->nonce);
    s->nonce = combined;
    snprintf(s->server_first, len, "r=%s,s=%s,i=%d", s->nonce, salt, cred->iterations);
    *out = strdup(s->server_first);
    s->step = 2;
    return *out ? 0 : fail(e, MD_CODE_INTERNAL_ERROR, "out of memory");
}

int srv_scram_server_final(srv_scram *s, const char *msg, size_t n, char **out, srv_perr *e)
{
    const char *p = msg, *end = msg + n;
    char gs2[128];
    int rc = 0;
    *out = NULL;
    if (s->step != 2)
        return fail(e, 17, "SCRAM conversation out of order");
    if (has_nul(msg, n))
        return fail(e, MD_CODE_BAD_VALUE, "Invalid SCRAM client-final message");
    const char *pp = NULL;
    for (const char *q = msg; q + 3 <= end; q++)
        if ((q == msg || q[-1] == ',') && !strncmp(q, "p=", 2))
            pp = q;
    char *cb = attr(&p, end, 'c'), *nonce = cb ? attr(&p, end, 'r') : NULL;
    char *proof = pp ? strndup(pp + 2, (size_t)(end - pp - 2)) : NULL;
    uint8_t got[SRV_SCRAM_HASH + 4];
    if (strlen(s->gs2) * 4 / 3 + 4 >= sizeof gs2)
        rc = fail(e, MD_CODE_BAD_VALUE, "SCRAM gs2 header too long");
    else
        srv_b64_encode((const uint8_t *)s->gs2, strlen(s->gs2), gs2);
    if (rc) {
    } else if (!cb || !nonce || !proof || !pp || p > pp)
        rc = fail(e, MD_CODE_BAD_VALUE,
                  "Incorrect number of arguments for final SCRAM client message");
    else if (strcmp(cb, gs2) != 0)
        rc = fail(e, MD_CODE_BAD_VALUE, "SCRAM channel binding data does not match the "
                  "client-first message's gs2 header");
    else if (strcmp(nonce, s->nonce) != 0)
        rc = fail(e, MD_CODE_BAD_VALUE, "Unmatched SCRAM nonce received from client");
    else if (srv_b64_decode(proof, strlen(proof), got, sizeof got) != SRV_SCRAM_HASH)
        rc = fail(e, MD_CODE_BAD_VALUE, "Invalid SCRAM proof");
    free(cb);
    free(nonce);
    free(proof);
    if (rc)
        return rc;
    /* AuthMessage: client-first-bare,server-first,client-final-without-proof */
    size_t wl = (size_t)(pp - 1 - msg);
    size_t al = strlen(s->client_first_bare) + strlen(s->server_first) + wl + 3;
    char *auth = malloc(al);
    if (!auth)
        return fail(e, MD_CODE_INTERNAL_ERROR, "out of memory");
    snprintf(auth, al, "%s,%s,%.*s", s->client_first_bare, s->server_first, (int)wl, msg);
    uint8_t sig[SRV_SCRAM_HASH], ck[SRV_SCRAM_HASH], sk[SRV_SCRAM_HASH];
    hmac(s->cred.stored_key, SRV_SCRAM_HASH, auth, strlen(auth), sig);
    for (int i = 0; i < SRV_SCRAM_HASH; i++)
        ck[i] = got[i] ^ sig[i];
    SHA256(ck, sizeof ck, sk);
    OPENSSL_cleanse(ck, sizeof ck);
    if (CRYPTO_memcmp(sk, s->cred.stored_key, SRV_SCRAM_HASH) != 0) {
        free(auth);
        s->step = 4;
        return fail(e, 18, "Authentication failed.");
    }
    uint8_t ssig[SRV_SCRAM_HASH];
    char v[64];
    hmac(s->cred.server_key, SRV_SCRAM_HASH, auth, strlen(auth), ssig);
    free(auth);
    srv_b64_encode(ssig, sizeof ssig, v);
    if (!(*out = malloc(strlen(v) + 3)))
        return fail(e, MD_CODE_INTERNAL_ERROR, "out of memory");
    sprintf(*out, "v=%s", v);
    s->step = 3;
    return 0;
}

void srv_scram_cleanup(srv_scram *s)
{
    free(s->gs2);
    free(s->client_first_bare);
    free(s->server_first);
    free(s->nonce);
    OPENSSL_cleanse(&s->cred, sizeof s->cred);
    memset(s, 0, sizeof *s);
}
