/*
 * test_srv_scram.c -- srv_scram.c against RFC 7677's SCRAM-SHA-256 example
 * (user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096
 * iterations): the salted password, the client proof and the server
 * signature must be the RFC's, and the server's side of the conversation,
 * given the RFC's nonces, must accept the RFC's client-final and answer
 * with the RFC's server-final.  Then what the server must refuse: a wrong
 * proof, malformed messages, channel binding, a changed nonce, and
 * passwords outside printable ASCII.
 *
 * The RFC prints neither SaltedPassword nor the stored keys; the values
 * below were computed apart from minidoc, with Python's hashlib.pbkdf2_hmac
 * and hmac.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

#define RFC_SALT "W22ZaJ0SNY7soEsUEjb6gQ=="
#define RFC_CLIENT_FIRST "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
#define RFC_SERVER_NONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
#define RFC_SERVER_FIRST                                                                  \
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
#define RFC_FINAL_NO_PROOF "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
#define RFC_PROOF "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
#define RFC_SERVER_FINAL "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

static void hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

static void b64(const uint8_t *b, size_t n, char *out)
{
    srv_b64_encode(b, n, out);
}

static void rfc_cred(srv_scram_cred *c)
{
    uint8_t salt[32];
    long n = srv_b64_decode(RFC_SALT, strlen(RFC_SALT), salt, sizeof salt);
    cr_assert_eq(n, 16);
    cr_assert_eq(srv_scram_cred_make("pencil", salt, (size_t)n, 4096, c), 0);
}

Test(srv_scram, rfc7677_salted_password_proof_and_signature)
{
    uint8_t salt[32], salted[SRV_SCRAM_HASH], proof[SRV_SCRAM_HASH], sig[SRV_SCRAM_HASH];
    char h[2 * SRV_SCRAM_HASH + 1], s[64];
    long n = srv_b64_decode(RFC_SALT, strlen(RFC_SALT), salt, sizeof salt);
    cr_assert_eq(n, 16);
    cr_assert_eq(srv_scram_salted_password("pencil", salt, (size_t)n, 4096, salted), 0);
    hex(salted, sizeof salted, h);
    cr_assert_str_eq(h, "c4a49510323ab4f952cac1fa99441939e78ea74d6be81ddf7096e87513dc615d");

    const char *auth = "n=user,r=rOprNGfwEbeRWgbNEkqO," RFC_SERVER_FIRST "," RFC_FINAL_NO_PROOF;
    srv_scram_client_proof(salted, auth, proof, sig);
    b64(proof, sizeof proof, s);
    cr_assert_str_eq(s, RFC_PROOF);
    b64(sig, sizeof sig, s);
    cr_assert_str_eq(s, RFC_SERVER_FINAL + 2);

    uint8_t ck[SRV_SCRAM_HASH], stored[SRV_SCRAM_HASH], server[SRV_SCRAM_HASH];
    srv_scram_keys(salted, ck, stored, server);
    b64(stored, sizeof stored, s);
    cr_assert_str_eq(s, "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=");
    b64(server, sizeof server, s);
    cr_assert_str_eq(s, "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=");
}

/* The server's side, fed the RFC's messages, answers the RFC's. */
Test(srv_scram, rfc7677_conversation)
{
    srv_scram s;
    srv_scram_cred cred;
    srv_perr e;
    char *user, *first, *final;
    rfc_cred(&cred);
    cr_assert_eq(srv_scram_start(&s, RFC_CLIENT_FIRST, strlen(RFC_CLIENT_FIRST), &user, &e), 0,
                 "%s", e.message);
    cr_assert_str_eq(user, "user");
    cr_assert_eq(srv_scram_server_first(&s, &cred, RFC_SERVER_NONCE, &first, &e), 0);
    cr_assert_str_eq(first, RFC_SERVER_FIRST);
    const char *cf = RFC_FINAL_NO_PROOF ",p=" RFC_PROOF;
    cr_assert_eq(srv_scram_server_final(&s, cf, strlen(cf), &final, &e), 0, "%s", e.message);
    cr_assert_str_eq(final, RFC_SERVER_FINAL);
    free(user);
    free(first);
    free(final);
    srv_scram_cleanup(&s);
}

/* A wrong password's proof is AuthenticationFailed; so is a replayed
 * proof against a new server nonce (the nonce check comes first). */
Test(srv_scram, wrong_proof_fails)
{
    srv_scram s;
    srv_scram_cred cred;
    srv_perr e;
    char *user, *first, *final;
    uint8_t salt[32], salted[SRV_SCRAM_HASH], proof[SRV_SCRAM_HASH], sig[SRV_SCRAM_HASH];
    char p64[64], cf[512], auth[512];
    rfc_cred(&cred);
    long n = srv_b64_decode(RFC_SALT, strlen(RFC_SALT), salt, sizeof salt);
    srv_scram_salted_password("pencil!", salt, (size_t)n, 4096, salted);
    snprintf(auth, sizeof auth, "n=user,r=rOprNGfwEbeRWgbNEkqO,%s,%s", RFC_SERVER_FIRST,
             RFC_FINAL_NO_PROOF);
    srv_scram_client_proof(salted, auth, proof, sig);
    b64(proof, sizeof proof, p64);
    snprintf(cf, sizeof cf, "%s,p=%s", RFC_FINAL_NO_PROOF, p64);
    srv_scram_start(&s, RFC_CLIENT_FIRST, strlen(RFC_CLIENT_FIRST), &user, &e);
    srv_scram_server_first(&s, &cred, RFC_SERVER_NONCE, &first, &e);
    cr_assert_eq(srv_scram_server_final(&s, cf, strlen(cf), &final, &e), 18);
    cr_assert_null(final);
    cr_assert_str_eq(e.message, "Authentication failed.");
    free(user);
    free(first);
    srv_scram_cleanup(&s);

    /* the RFC's right proof, but the server chose another nonce */
    srv_scram_start(&s, RFC_CLIENT_FIRST, strlen(RFC_CLIENT_FIRST), &user, &e);
    cr_assert_eq(srv_scram_server_first(&s, &cred, NULL, &first, &e), 0);
    cr_assert(strncmp(first, "r=rOprNGfwEbeRWgbNEkqO", 22) == 0);
    cr_assert(strstr(first, RFC_SERVER_NONCE) == NULL);
    const char *rfc = RFC_FINAL_NO_PROOF ",p=" RFC_PROOF;
    cr_assert_eq(srv_scram_server_final(&s, rfc, strlen(rfc), &final, &e), 2);
    cr_assert(strstr(e.message, "nonce"), "%s", e.message);
    free(user);
    free(first);
    srv_scram_cleanup(&s);
}

Test(srv_scram, client_first_refusals)
{
    static const struct {
        const char *msg;
        const char *why;
    } bad[] = {
        {"", "too short"},
        {"p=tls-unique,,n=user,r=abc", "channel binding"},
        {"x,,n=user,r=abc", "prefix"},
        {"n,,r=abc", "expected n="},
        {"n,,n=user", "expected n="},
        {"n,,n=user,r=", "expected n="},
        {"n,,n=us=4Ser,r=abc", "user name"},
        {"n,,n=,r=abc", "user name"},
        {"n,a=other,n=user,r=abc", "authorization identity"},
        {"n,,m=ext,n=user,r=abc", "mandatory extensions"},
        {"n,,n=user", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srv_scram s;
        srv_perr e;
        char *user;
        cr_assert_eq(srv_scram_start(&s, bad[i].msg, strlen(bad[i].msg), &user, &e), 2, "%s",
                     bad[i].msg);
        cr_assert_null(user);
        if (bad[i].why)
            cr_assert(strstr(e.message, bad[i].why), "%s: %s", bad[i].msg, e.message);
        srv_scram_cleanup(&s);
    }
    /* a NUL inside the message */
    srv_scram s;
    srv_perr e;
    char *user;
    cr_assert_eq(srv_scram_start(&s, "n,,n=u\0x,r=abc", 14, &user, &e), 2);
    srv_scram_cleanup(&s);
    /* the message ends right after the gs2 header: nothing past it is read
     * (a payload is not NUL-terminated; found by tests/fuzz/fuzz_scram.c) */
    cr_assert_eq(srv_scram_start(&s, "n,,m=ext,n=user,r=abc", 3, &user, &e), 2);
    cr_assert(strstr(e.message, "expected n="), "%s", e.message);
    srv_scram_cleanup(&s);
    /* escapes, and an authzid equal to the user */
    const char *m = "n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=abc";
    cr_assert_eq(srv_scram_start(&s, m, strlen(m), &user, &e), 0, "%s", e.message);
    cr_assert_str_eq(user, "a,b=c");
    free(user);
    srv_scram_cleanup(&s);
}

Test(srv_scram, client_final_refusals)
{
    static const char *const bad[] = {
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=" RFC_PROOF, /* no c= */
        "c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=" RFC_PROOF,
        "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=" RFC_PROOF,
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=abc",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=" RFC_PROOF "AAAA",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzb=apWIk4jUhN+Ute9"
        "ytag9zjfMHgsqmmiz7AndVQ=",
    };
    srv_scram_cred cred;
    rfc_cred(&cred);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srv_scram s;
        srv_perr e;
        char *user, *first, *final;
        srv_scram_start(&s, RFC_CLIENT_FIRST, strlen(RFC_CLIENT_FIRST), &user, &e);
        srv_scram_server_first(&s, &cred, RFC_SERVER_NONCE, &first, &e);
        cr_assert_eq(srv_scram_server_final(&s, bad[i], strlen(bad[i]), &final, &e), 2, "%s",
                     bad[i]);
        cr_assert_null(final);
        free(user);
        free(first);
        srv_scram_cleanup(&s);
    }
    /* out of order: a client-final before anything */
    srv_scram s = {0};
    srv_perr e;
    char *final;
    const char *cf = RFC_FINAL_NO_PROOF ",p=" RFC_PROOF;
    cr_assert_eq(srv_scram_server_final(&s, cf, strlen(cf), &final, &e), 17);
}

Test(srv_scram, base64_is_strict)
{
    uint8_t out[16];
    cr_assert_eq(srv_b64_decode("", 0, out, sizeof out), 0);
    cr_assert_eq(srv_b64_decode("YQ==", 4, out, sizeof out), 1);
    cr_assert_eq(out[0], 'a');
    cr_assert_eq(srv_b64_decode("YWI=", 4, out, sizeof out), 2);
    cr_assert_eq(srv_b64_decode("YWJj", 4, out, sizeof out), 3);
    cr_assert_eq(srv_b64_decode("YWJ", 3, out, sizeof out), -1);
    cr_assert_eq(srv_b64_decode("Y=Jj", 4, out, sizeof out), -1);
    cr_assert_eq(srv_b64_decode("YW!j", 4, out, sizeof out), -1);
    cr_assert_eq(srv_b64_decode("YWJjYWJjYWJjYWJjYWJjYWJj", 24, out, sizeof out), -1); /* cap */
    char s[16];
    srv_b64_encode((const uint8_t *)"ab", 2, s);
    cr_assert_str_eq(s, "YWI=");
}

Test(srv_scram, passwords_printable_ascii_only)
{
    srv_perr e;
    cr_assert_eq(srv_scram_password_check("pencil", &e), 0);
    cr_assert_eq(srv_scram_password_check("with space ~!", &e), 0);
    cr_assert_eq(srv_scram_password_check("", &e), 2);
    cr_assert_str_eq(e.message, "Password cannot be empty");
    cr_assert_eq(srv_scram_password_check("caf\xc3\xa9", &e), 2);
    cr_assert(strstr(e.message, "SASLprep"), "%s", e.message);
    cr_assert_eq(srv_scram_password_check("tab\there", &e), 2);
}

/* Two credentials from one password differ by their random salts. */
Test(srv_scram, random_salts)
{
    srv_scram_cred a, b;
    cr_assert_eq(srv_scram_cred_make("pw", NULL, SRV_SCRAM_SALT, 4096, &a), 0);
    cr_assert_eq(srv_scram_cred_make("pw", NULL, SRV_SCRAM_SALT, 4096, &b), 0);
    cr_assert_eq(a.salt_len, 28);
    cr_assert_neq(memcmp(a.salt, b.salt, 28), 0);
    cr_assert_neq(memcmp(a.stored_key, b.stored_key, SRV_SCRAM_HASH), 0);
}
