/*
 * test_mm_journal.c -- the mmapv1 journal: section encode/decode and the
 * checks that reject torn, damaged or foreign sections (pure, in memory);
 * then, through the engine, a writer process killed with SIGKILL and
 * recovered at open: durable commits survive, a damaged last section is
 * dropped whole, replaying the same journal twice gives the same files,
 * nothing reaches a data file before its section, group commit and
 * syncdelay run on their own, the options are checked, and journal: false
 * makes validate say that the files cannot be vouched for.
 */
#include <time.h>

#include "test_mm_util.h"
#include "../engine/t_log.h"

/* ---- sections in memory -------------------------------------------------- */

typedef struct seen {
    int n;
    int32_t file[8];
    uint32_t ofs[8], len[8];
    uint8_t data[8][64];
} seen;

static int collect(void *ctx, int32_t file, uint32_t ofs, const uint8_t *data, uint32_t len)
{
    seen *s = ctx;
    cr_assert(s->n < 8 && len <= 64);
    s->file[s->n] = file;
    s->ofs[s->n] = ofs;
    s->len[s->n] = len;
    memcpy(s->data[s->n], data, len);
    s->n++;
    return 0;
}

static size_t sample_section(mm_jbuf *b, uint64_t seq)
{
    memset(b, 0, sizeof *b);
    mm_jbuf_reset(b);
    mm_jbuf_entry(b, 0, 0x2000, "hello", 5);
    mm_jbuf_entry(b, MM_NS_FILENO, 640, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    mm_jbuf_entry(b, 3, 0x7ff00000 - 4, "tail", 4);
    return mm_jsect_seal(b, seq, 0xfeedULL);
}

Test(mm_journal, crc32c_known_value)
{
    /* the standard check value of CRC-32C */
    cr_assert_eq(eng_crc32c(0, "123456789", 9), 0xe3069283u);
    cr_assert_eq(eng_crc32c(eng_crc32c(0, "1234", 4), "56789", 5), 0xe3069283u);
}

Test(mm_journal, section_roundtrip)
{
    mm_jbuf b;
    size_t padded = sample_section(&b, 42);
    cr_assert_eq(padded, MM_J_ALIGN);
    cr_assert_eq(padded % MM_J_ALIGN, 0);
    uint32_t len;
    memcpy(&len, b.p, 4);
    cr_assert_eq(len, MM_J_SECT_HDR + 3 * MM_J_ENTRY_HDR + 5 + 8 + 4 + MM_J_FOOTER);
    uint32_t nsno;
    memcpy(&nsno, b.p + MM_J_SECT_HDR + MM_J_ENTRY_HDR + 5 + 8, 4);
    cr_assert_eq(nsno, 0x7fffffffu, "the .ns file is fileNo 0x7fffffff");
    mm_jsect_info in;
    cr_assert_eq(mm_jsect_check(b.p, padded, 0xfeed, &in), 0);
    cr_assert_eq(in.seq, 42);
    cr_assert_eq(in.nentries, 3);
    cr_assert_eq(in.padded, padded);
    seen s = {0};
    cr_assert_eq(mm_jsect_apply(b.p, &in, collect, &s), 0);
    cr_assert_eq(s.n, 3);
    cr_assert_eq(s.file[0], 0);
    cr_assert_eq(s.ofs[0], 0x2000);
    cr_assert_eq(memcmp(s.data[0], "hello", 5), 0);
    cr_assert_eq(s.file[1], MM_NS_FILENO);
    cr_assert_eq(s.ofs[1], 640);
    cr_assert_eq(s.file[2], 3);
    cr_assert_eq(s.ofs[2], 0x7ff00000u - 4);
    cr_assert_eq(memcmp(s.data[2], "tail", 4), 0);
    mm_jbuf_free(&b);
}

Test(mm_journal, large_section_pads_to_8k)
{
    mm_jbuf b = {0};
    static uint8_t big[20000];
    memset(big, 0xab, sizeof big);
    mm_jbuf_reset(&b);
    mm_jbuf_entry(&b, 1, 8192, big, sizeof big);
    size_t padded = mm_jsect_seal(&b, 1, 7);
    cr_assert_eq(padded, 3 * MM_J_ALIGN);
    mm_jsect_info in;
    cr_assert_eq(mm_jsect_check(b.p, padded, 7, &in), 0);
    cr_assert_eq(in.nentries, 1);
    mm_jbuf_free(&b);
}

Test(mm_journal, every_damaged_byte_is_rejected)
{
    mm_jbuf b;
    size_t padded = sample_section(&b, 5);
    uint32_t len;
    memcpy(&len, b.p, 4);
    mm_jsect_info in;
    for (uint32_t i = 0; i < len; i++) {
        b.p[i] ^= 0x20;
        cr_assert_eq(mm_jsect_check(b.p, padded, 0xfeed, &in), MD_ECORRUPT,
                     "byte %u flipped but the section passed", i);
        b.p[i] ^= 0x20;
    }
    cr_assert_eq(mm_jsect_check(b.p, padded, 0xfeed, &in), 0);
    mm_jbuf_free(&b);
}

Test(mm_journal, torn_or_foreign_sections_are_rejected)
{
    mm_jbuf b;
    size_t padded = sample_section(&b, 5);
    mm_jsect_info in;
    /* torn: the file ends before the padded section does */
    cr_assert_eq(mm_jsect_check(b.p, padded - 1, 0xfeed, &in), MD_ECORRUPT);
    cr_assert_eq(mm_jsect_check(b.p, 10, 0xfeed, &in), MD_ECORRUPT);
    /* a section left by another journal file */
    cr_assert_eq(mm_jsect_check(b.p, padded, 0xbeef, &in), MD_ECORRUPT);
    /* torn write: the tail of the section never reached the disk */
    memset(b.p + 64, 0, padded - 64);
    cr_assert_eq(mm_jsect_check(b.p, padded, 0xfeed, &in), MD_ECORRUPT);
    /* never written: zeros */
    memset(b.p, 0, padded);
    cr_assert_eq(mm_jsect_check(b.p, padded, 0xfeed, &in), MD_ECORRUPT);
    cr_assert_eq(mm_jsect_padded_len(b.p), 0);
    mm_jbuf_free(&b);
}

Test(mm_journal, entries_must_fill_the_section_exactly)
{
    mm_jbuf b;
    size_t padded = sample_section(&b, 5);
    /* make the first entry claim more bytes, then fix the crc: the entry
     * walk itself must refuse it */
    uint32_t elen = 5000, len;
    memcpy(b.p + MM_J_SECT_HDR, &elen, 4);
    memcpy(&len, b.p, 4);
    uint32_t crc = eng_crc32c(0, b.p, len - MM_J_FOOTER + 4);
    memcpy(b.p + len - MM_J_FOOTER + 4, &crc, 4);
    mm_jsect_info in;
    cr_assert_eq(mm_jsect_check(b.p, padded, 0xfeed, &in), MD_ECORRUPT);
    mm_jbuf_free(&b);
}

Test(mm_journal, file_header_and_lsn)
{
    uint8_t *h = malloc(MM_J_FILE_HDR), l[MM_LSN_SIZE];
    uint64_t id, lsn;
    mm_jfile_header(h, 99, "/some/dir");
    cr_assert_eq(memcmp(h, "j\n", 2), 0);
    cr_assert_eq(mm_jfile_header_check(h, &id), 0);
    cr_assert_eq(id, 99);
    h[100] ^= 1;
    cr_assert_eq(mm_jfile_header_check(h, &id), MD_ECORRUPT);
    mm_lsn_encode(l, 12345);
    cr_assert_eq(mm_lsn_decode(l, &lsn), 0);
    cr_assert_eq(lsn, 12345);
    l[9] ^= 1;
    cr_assert_eq(mm_lsn_decode(l, &lsn), MD_ECORRUPT);
    free(h);
}

/* ---- through the engine --------------------------------------------------- */

static void jopts(bson_t *opts, bool journal, int interval, int syncdelay)
{
    bson_t sub;
    bson_init(opts);
    BSON_APPEND_DOCUMENT_BEGIN(opts, "mmapv1", &sub);
    BSON_APPEND_INT64(&sub, "firstFileSize", 65536);
    BSON_APPEND_INT64(&sub, "nsSize", 65536);
    BSON_APPEND_BOOL(&sub, "debugCheckViews", true);
    BSON_APPEND_BOOL(&sub, "journal", journal);
    BSON_APPEND_INT32(&sub, "journalCommitInterval", interval);
    BSON_APPEND_INT32(&sub, "syncdelay", syncdelay);
    bson_append_document_end(opts, &sub);
}

static void jopen(mmt *t, bool journal, int interval, int syncdelay)
{
    memset(t, 0, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/mmtest.XXXXXX");
    cr_assert(mkdtemp(t->dir));
    jopts(&t->opts, journal, interval, syncdelay);
    int rc = mmt_try_open(t);
    cr_assert_eq(rc, 0, "open: %s %s", md_strerror(rc), t->err.message);
}

static eng_rid durable_insert(mmt *t, eng_rs *rs, int id, int len)
{
    bson_t b;
    eng_rid rid;
    mmt_doc(&b, id, len);
    eng_txn *x = mmt_begin(t);
    cr_assert_eq(eng_rs_insert(rs, x, bson_get_data(&b), b.len, &rid, &t->err), 0);
    cr_assert_eq(eng_txn_commit(x, true, &t->err), 0, "%s", t->err.message);
    bson_destroy(&b);
    return rid;
}

/* In a child: create test.c and insert n documents {_id: i} of len bytes,
 * each commit durable when journal is on, then die by SIGKILL. */
static void crash_writer(mmt *t, int n, int len, bool journal)
{
    eng_rs_options o = {.alloc = ENG_ALLOC_POWEROF2};
    mmt_crash_writer(t, "test.c", &o, n, len, journal ? 1 : 0);
}

/* A journaled database whose writer child was SIGKILLed after n durable
 * inserts of len bytes; the directory is left as the crash left it. */
static void killed_writer(mmt *t, int n, int len)
{
    jopen(t, true, 500, 0);
    eng_close(t->e); /* the child owns the directory now */
    t->e = NULL;
    crash_writer(t, n, len, true);
}

/* Count the documents of test.c and check each is {_id: i} for 1..count. */
static int64_t count_docs(mmt *t, eng_rs **out)
{
    eng_rs *rs;
    eng_rs_cursor *c;
    eng_rid rid;
    const uint8_t *p;
    uint32_t len;
    int64_t n = 0;
    cr_assert_eq(eng_rs_open(t->e, "test.c", &rs, &t->err), 0, "%s", t->err.message);
    cr_assert_eq(eng_rs_cursor_open(rs, true, &c), 0);
    while (eng_rs_cursor_next(c, &rid, &p, &len) == 0) {
        n++;
        bson_t b;
        bson_iter_t it;
        cr_assert(bson_init_static(&b, p, len));
        cr_assert(bson_iter_init_find(&it, &b, "_id"));
        cr_assert_eq(bson_iter_int32(&it), n, "documents come back in insertion order");
    }
    eng_rs_cursor_close(c);
    eng_validate v;
    int nerr = mmt_validate(rs, &v);
    char *s = mmt_errors(&v);
    cr_assert_eq(nerr, 0, "validate: %s", s);
    bson_free(s);
    eng_validate_cleanup(&v);
    mmt_verify_clean(t);
    if (out)
        *out = rs;
    else
        eng_rs_close(rs);
    return n;
}

static int64_t dur_stat(mmt *t, const char *field)
{
    bson_t st;
    char path[64];
    bson_init(&st);
    mm_engine_ops.append_status(t->e, &st);
    snprintf(path, sizeof path, "mmapv1.dur.%s", field);
    int64_t v = mmt_bson_int(&st, path);
    bson_destroy(&st);
    return v;
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    cr_assert(a && b, "copy %s -> %s", from, to);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        cr_assert_eq(fwrite(buf, 1, n, b), n);
    fclose(a);
    fclose(b);
}

Test(mm_journal, durable_commits_survive_sigkill)
{
    mmt t;
    killed_writer(&t, 60, 300);
    char path[256];
    snprintf(path, sizeof path, "%s/journal/j._0", t.dir);
    cr_assert_eq(access(path, F_OK), 0, "the killed writer left its journal");
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    cr_assert_gt(dur_stat(&t, "sectionsReplayed"), 0);
    cr_assert_eq(count_docs(&t, NULL), 60);
    mmt_close(&t);
}

/* Offsets of every section of a journal file. */
static int sections_of(const char *path, off_t *at, int max)
{
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0);
    int n = 0;
    uint8_t h[MM_J_SECT_HDR];
    off_t ofs = MM_J_FILE_HDR;
    while (n < max && pread(fd, h, sizeof h, ofs) == (ssize_t)sizeof h) {
        size_t padded = mm_jsect_padded_len(h);
        if (!padded)
            break;
        at[n++] = ofs;
        ofs += (off_t)padded;
    }
    close(fd);
    return n;
}

Test(mm_journal, damaged_last_section_is_dropped_whole)
{
    mmt t;
    killed_writer(&t, 20, 200);
    char path[256];
    off_t at[64];
    snprintf(path, sizeof path, "%s/journal/j._0", t.dir);
    int n = sections_of(path, at, 64);
    cr_assert_geq(n, 21, "one section per durable commit (got %d)", n);
    /* flip a byte inside the last section's entries (the 20th insert) */
    int fd = open(path, O_RDWR);
    uint8_t c;
    cr_assert_eq(pread(fd, &c, 1, at[n - 1] + 100), 1);
    c ^= 0xff;
    cr_assert_eq(pwrite(fd, &c, 1, at[n - 1] + 100), 1);
    close(fd);
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    /* the data files may hold the 20th insert (applied after its section was
     * written, before the kill): the journal cannot take it away.  What must
     * hold: nothing torn, every earlier commit present. */
    int64_t got = count_docs(&t, NULL);
    cr_assert(got == 19 || got == 20, "got %lld documents", (long long)got);
    mmt_close(&t);
}

Test(mm_journal, damaged_middle_section_stops_replay_and_is_reported)
{
    /* sections after a damaged one are never applied, even when valid; as
     * a crash cannot produce that (each section is fdatasync'ed before the
     * next is written), it is media damage, and validate says the files
     * may be inconsistent */
    mmt t;
    killed_writer(&t, 10, 200);
    char path[256];
    off_t at[64];
    snprintf(path, sizeof path, "%s/journal/j._0", t.dir);
    int n = sections_of(path, at, 64);
    cr_assert_geq(n, 11);
    int fd = open(path, O_RDWR);
    uint8_t z[MM_J_SECT_HDR] = {0};
    cr_assert_eq(pwrite(fd, z, sizeof z, at[5]), (ssize_t)sizeof z);
    close(fd);
    t_log_begin();
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    char *log = t_log_end(), want[400];
    snprintf(want, sizeof want, "mmapv1: the journal is damaged before its end, in %s at offset %lld: "
             "replay stopped after section ", path, (long long)at[5]);
    cr_assert(strncmp(log, want, strlen(want)) == 0 && t_log_count(log, "") == 1 &&
                  strstr(log, "; the data files may be inconsistent\n"),
              "open says where the journal is damaged, once: %s", log);
    free(log);
    cr_assert_eq(dur_stat(&t, "sectionsReplayed"), 5);
    eng_rs *rs;
    eng_validate v;
    cr_assert_eq(eng_rs_open(t.e, "test.c", &rs, NULL), 0);
    cr_assert_geq(mmt_validate(rs, &v), 1);
    cr_assert(mmt_has_error(&v, "journal replay stopped at a damaged section"));
    eng_validate_cleanup(&v);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_journal, torn_tail_is_not_damage)
{
    /* a crash while a section is being written leaves it torn at the end
     * of the journal; its bytes never reached the data files (they are
     * applied only after the fdatasync) */
    mmt t;
    killed_writer(&t, 10, 200);
    char path[256];
    off_t at[64];
    snprintf(path, sizeof path, "%s/journal/j._0", t.dir);
    int n = sections_of(path, at, 64);
    uint8_t h[MM_J_SECT_HDR];
    uint64_t seq, file_id;
    int fd = open(path, O_RDWR);
    cr_assert_eq(pread(fd, h, sizeof h, at[n - 1]), (ssize_t)sizeof h);
    memcpy(&seq, h + 8, 8);
    memcpy(&file_id, h + 16, 8);
    static uint8_t rec[20000];
    memset(rec, 0x5a, sizeof rec);
    mm_jbuf b = {0};
    mm_jbuf_reset(&b);
    mm_jbuf_entry(&b, 0, 8192, rec, sizeof rec); /* would smash the file */
    size_t padded = mm_jsect_seal(&b, seq + 1, file_id);
    off_t end = at[n - 1] + (off_t)mm_jsect_padded_len(h);
    cr_assert_eq(pwrite(fd, b.p, padded / 2, end), (ssize_t)(padded / 2));
    close(fd);
    mm_jbuf_free(&b);
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    cr_assert_eq(dur_stat(&t, "sectionsReplayed"), n);
    cr_assert_eq(count_docs(&t, NULL), 10);
    mmt_close(&t);
}

Test(mm_journal, replay_is_idempotent)
{
    mmt t;
    char jdir[256], save[256], from[512], to[512];
    killed_writer(&t, 40, 500);
    /* keep the journal as the crash left it */
    snprintf(jdir, sizeof jdir, "%s/journal", t.dir);
    snprintf(save, sizeof save, "%s/saved", t.dir);
    cr_assert_eq(mkdir(save, 0755), 0);
    snprintf(from, sizeof from, "%s/j._0", jdir);
    snprintf(to, sizeof to, "%s/j._0", save);
    copy_file(from, to);
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    cr_assert_eq(count_docs(&t, NULL), 40);
    eng_close(t.e);
    t.e = NULL;
    uint8_t *first = malloc(65536);
    snprintf(from, sizeof from, "%s/test.0", t.dir);
    FILE *f = fopen(from, "rb");
    cr_assert_eq(fread(first, 1, 65536, f), 65536);
    fclose(f);
    /* replay the same sections again over files that already hold them,
     * from LSN 0 */
    snprintf(from, sizeof from, "%s/j._0", save);
    snprintf(to, sizeof to, "%s/j._0", jdir);
    copy_file(from, to);
    snprintf(to, sizeof to, "%s/lsn", jdir);
    unlink(to);
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    cr_assert_eq(dur_stat(&t, "sectionsReplayed"), 41);
    cr_assert_eq(count_docs(&t, NULL), 40);
    eng_close(t.e);
    t.e = NULL;
    uint8_t *second = malloc(65536);
    snprintf(from, sizeof from, "%s/test.0", t.dir);
    f = fopen(from, "rb");
    cr_assert_eq(fread(second, 1, 65536, f), 65536);
    fclose(f);
    cr_assert_eq(memcmp(first, second, 65536), 0, "a second replay changed test.0");
    free(first);
    free(second);
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    mmt_close(&t);
}

static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

Test(mm_journal, data_files_wait_for_the_journal)
{
    mmt t;
    jopen(&t, true, 500, 0);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    cr_assert_eq(eng_flush(t.e, true, NULL), 0);
    char path[256], marker[64];
    snprintf(path, sizeof path, "%s/test.0", t.dir);
    bool seen_unjournaled = false;
    /* the flush thread may write a section between the commit and the
     * look at the file: then try again (it cannot happen every time) */
    for (int attempt = 0; attempt < 5 && !seen_unjournaled; attempt++) {
        snprintf(marker, sizeof marker, "not-yet-journaled-%d-9f3a", attempt);
        bson_t b = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&b, "marker", marker);
        eng_rid rid;
        int64_t before = dur_stat(&t, "commits");
        eng_txn *x = mmt_begin(&t);
        cr_assert_eq(eng_rs_insert(rs, x, bson_get_data(&b), b.len, &rid, NULL), 0);
        mmt_commit(x);
        /* committed, not journaled: the file (unlike the private view) lacks it */
        bool in_file = file_contains(path, marker);
        const uint8_t *p;
        uint32_t len;
        cr_assert_eq(eng_rs_get(rs, rid, &p, &len), 0); /* the engine sees it */
        if (in_file)
            cr_assert_gt(dur_stat(&t, "commits"), before,
                         "bytes reached the data file before any section was written");
        else
            seen_unjournaled = true;
        cr_assert_eq(eng_flush(t.e, false, NULL), 0);
        cr_assert(file_contains(path, marker), "eng_flush applies the section");
        bson_destroy(&b);
    }
    cr_assert(seen_unjournaled);
    eng_rs_close(rs);
    mmt_close(&t);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

Test(mm_journal, group_commit_runs_on_its_own)
{
    mmt t;
    jopen(&t, true, 5, 0);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    int64_t before = dur_stat(&t, "commits");
    mmt_insert(&t, rs, 1, 100);
    mmt_insert(&t, rs, 2, 100);
    for (int i = 0; i < 400 && dur_stat(&t, "commits") == before; i++)
        sleep_ms(5);
    cr_assert_gt(dur_stat(&t, "commits"), before, "no section written by the thread");
    cr_assert_eq(dur_stat(&t, "earlyCommits"), 0);
    durable_insert(&t, rs, 3, 100);
    cr_assert_eq(dur_stat(&t, "earlyCommits"), 1);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_journal, syncdelay_flushes_and_recycles)
{
    mmt t;
    jopen(&t, true, 5, 1);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    mmt_insert(&t, rs, 1, 100);
    int64_t lsn0 = dur_stat(&t, "lsn");
    for (int i = 0; i < 300 && dur_stat(&t, "lsn") == lsn0; i++)
        sleep_ms(10);
    cr_assert_gt(dur_stat(&t, "lsn"), lsn0, "syncdelay did not flush");
    cr_assert_gt(dur_stat(&t, "journalFile"), 0, "the journal was not recycled");
    char path[256];
    snprintf(path, sizeof path, "%s/journal/j._0", t.dir);
    cr_assert_neq(access(path, F_OK), 0, "j._0 should be gone");
    eng_rs_close(rs);
    eng_close(t.e);
    t.e = NULL;
    snprintf(path, sizeof path, "%s/journal/j._1", t.dir);
    cr_assert_neq(access(path, F_OK), 0, "a clean close removes the journal");
    cr_assert_eq(mmt_try_open(&t), 0);
    cr_assert_eq(count_docs(&t, NULL), 1);
    mmt_close(&t);
}

Test(mm_journal, options_are_checked)
{
    const int bad[][2] = {{0, 60}, {501, 60}, {100, -1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mmt t;
        memset(&t, 0, sizeof t);
        snprintf(t.dir, sizeof t.dir, "/tmp/mmtest.XXXXXX");
        cr_assert(mkdtemp(t.dir));
        jopts(&t.opts, true, bad[i][0], bad[i][1]);
        cr_assert_eq(mmt_try_open(&t), MD_EINVAL);
        cr_assert_eq(t.err.code, MD_CODE_BAD_VALUE);
        mmt_close(&t);
    }
}

Test(mm_journal, no_journal_unclean_shutdown_is_reported)
{
    mmt t;
    jopen(&t, false, 100, 0);
    char path[256];
    snprintf(path, sizeof path, "%s/journal", t.dir);
    cr_assert_neq(access(path, F_OK), 0, "journal: false creates no journal");
    eng_close(t.e);
    t.e = NULL;
    crash_writer(&t, 30, 200, false);
    cr_assert_eq(mmt_try_open(&t), 0, "%s", t.err.message);
    eng_rs *rs;
    cr_assert_eq(eng_rs_open(t.e, "test.c", &rs, NULL), 0);
    eng_validate v;
    cr_assert_geq(mmt_validate(rs, &v), 1);
    cr_assert(mmt_has_error(&v, "not shut down cleanly"));
    eng_validate_cleanup(&v);
    eng_rs_close(rs);
    /* a clean close ends the suspicion */
    mmt_reopen(&t);
    cr_assert_eq(eng_rs_open(t.e, "test.c", &rs, NULL), 0);
    cr_assert_eq(mmt_validate(rs, &v), 0);
    eng_validate_cleanup(&v);
    eng_rs_close(rs);
    mmt_close(&t);
}

Test(mm_journal, private_view_remap_keeps_pending_commits)
{
    /* debugRemapOnGrow moves the private views with their unapplied
     * changes; eng_flush remaps them in place */
    mmt t;
    mmt_open_ex(&t, true);
    eng_rs *rs = mmt_coll(&t, "test.c", ENG_ALLOC_POWEROF2);
    for (int i = 1; i <= 300; i++)
        mmt_insert(&t, rs, i, 400); /* grows into several data files */
    cr_assert_gt(((mm_engine *)t.e)->nfiles, 1);
    cr_assert_eq(eng_flush(t.e, false, NULL), 0);
    for (int i = 301; i <= 320; i++)
        mmt_insert(&t, rs, i, 400);
    eng_rs_close(rs);
    mmt_reopen(&t);
    cr_assert_eq(count_docs(&t, NULL), 320);
    mmt_close(&t);
}
