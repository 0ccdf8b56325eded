/*
 * files.c -- `minidoc files`: GridFS from the command line, as mongofiles.
 *
 *   minidoc --dbpath DIR files [--prefix fs] [--local PATH] [--type CT] [--replace]
 *           put NAME          store PATH (default: the file named NAME); "-" reads stdin
 *           get NAME          write the newest version to PATH (default NAME); "-": stdout
 *           list [PREFIX]     every file (whose name starts with PREFIX): name, tab, length
 *           search TEXT       every file whose name contains TEXT
 *           delete NAME       every version of NAME
 *
 * Messages follow mongofiles' ("added gridFile: NAME", "finished writing to:
 * PATH", "successfully deleted all instances of 'NAME' from GridFS").  A
 * damaged file (a missing chunk) fails the get with the reason and writes
 * nothing under PATH (the bytes go to PATH.partial first).  Exit status 0
 * on success, 1 on a failure, 2 on a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "minidoc.h"

static int files_usage(void)
{
    fprintf(stderr, "usage: minidoc --dbpath DIR files [--prefix NAME] [--local PATH] "
                    "[--type CONTENT-TYPE] [--replace]\n"
                    "               (put NAME | get NAME | list [PREFIX] | search TEXT | "
                    "delete NAME)\n");
    return 2;
}

static int fail(const char *what, const md_error *err)
{
    fprintf(stderr, "minidoc files: %s: %s\n", what, err->message);
    return 1;
}

static int do_put(md_gridfs *fs, const char *name, const char *local, const char *type,
                  bool replace)
{
    const char *path = local ? local : name;
    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    md_gridfs_file *up;
    md_error err;
    if (!in) {
        fprintf(stderr, "minidoc files: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (replace && md_gridfs_delete(fs, name, NULL, &err) != 0) {
        if (in != stdin)
            fclose(in);
        return fail("replace", &err);
    }
    bson_t *opts = type ? BCON_NEW("contentType", BCON_UTF8(type)) : NULL;
    int rc = md_gridfs_open_upload(fs, name, opts, &up, &err);
    bson_destroy(opts);
    if (rc) {
        if (in != stdin)
            fclose(in);
        return fail("put", &err);
    }
    char buf[65536];
    size_t n;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        rc = md_gridfs_write(up, buf, n, &err);
    bool rerr = ferror(in);
    if (in != stdin)
        fclose(in);
    if (rc || rerr) {
        md_gridfs_abort(up);
        if (rerr) {
            fprintf(stderr, "minidoc files: reading %s failed\n", path);
            return 1;
        }
        return fail("put", &err);
    }
    if ((rc = md_gridfs_close(up, NULL, &err)) != 0)
        return fail("put", &err);
    printf("added gridFile: %s\n", name);
    return 0;
}

static int do_get(md_gridfs *fs, const char *name, const char *local)
{
    const char *path = local ? local : name;
    bool to_stdout = strcmp(path, "-") == 0;
    md_gridfs_file *down;
    md_error err;
    if (md_gridfs_open_download(fs, name, -1, &down, &err) != 0)
        return fail("get", &err);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    FILE *out = to_stdout ? stdout : fopen(tmp, "wb");
    if (!out) {
        fprintf(stderr, "minidoc files: cannot write %s: %s\n", tmp, strerror(errno));
        md_gridfs_close(down, NULL, NULL);
        return 1;
    }
    char buf[65536];
    int64_t n;
    while ((n = md_gridfs_read(down, buf, sizeof buf, &err)) > 0)
        if (fwrite(buf, 1, (size_t)n, out) != (size_t)n)
            break;
    bool werr = ferror(out) || (!to_stdout && fclose(out) != 0);
    md_gridfs_close(down, NULL, NULL);
    if (n < 0 || werr) {
        if (!to_stdout)
            remove(tmp);
        if (werr) {
            fprintf(stderr, "minidoc files: writing %s failed\n", path);
            return 1;
        }
        return fail("get", &err);
    }
    if (!to_stdout) {
        if (rename(tmp, path) != 0) {
            fprintf(stderr, "minidoc files: cannot rename %s: %s\n", tmp, strerror(errno));
            remove(tmp);
            return 1;
        }
        fprintf(stderr, "finished writing to: %s\n", path);
    }
    return 0;
}

/* list (prefix) and search (substring): names and lengths in name order. */
static int do_list(md_gridfs *fs, const char *text, bool prefix)
{
    bson_t filter = BSON_INITIALIZER;
    if (text) {
        /* the text as a literal inside a regex */
        char *re = malloc(2 * strlen(text) + 2), *w = re;
        if (!re)
            return 1;
        if (prefix)
            *w++ = '^';
        for (const char *p = text; *p; p++) {
            if (strchr("\\^$.|?*+()[]{}", *p))
                *w++ = '\\';
            *w++ = *p;
        }
        *w = '\0';
        BSON_APPEND_REGEX(&filter, "filename", re, "");
        free(re);
    }
    bson_t *opts = BCON_NEW("sort", "{", "filename", BCON_INT32(1), "uploadDate", BCON_INT32(1),
                            "}");
    md_cursor *cur = md_gridfs_find(fs, &filter, opts);
    const bson_t *doc;
    md_error err;
    while (md_cursor_next(cur, &doc)) {
        bson_iter_t it;
        const char *name = bson_iter_init_find(&it, doc, "filename") && BSON_ITER_HOLDS_UTF8(&it)
                               ? bson_iter_utf8(&it, NULL)
                               : "";
        long long len = bson_iter_init_find(&it, doc, "length") && BSON_ITER_HOLDS_NUMBER(&it)
                            ? (long long)bson_iter_as_int64(&it)
                            : 0;
        printf("%s\t%lld\n", name, len);
    }
    int rc = md_cursor_error(cur, &err) ? fail("list", &err) : 0;
    md_cursor_destroy(cur);
    bson_destroy(opts);
    bson_destroy(&filter);
    return rc;
}

int files_main(md_db *db, int argc, char **argv)
{
    const char *prefix = "fs", *local = NULL, *type = NULL, *verb = NULL, *arg = NULL;
    bool replace = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--prefix") == 0 && has_value) {
            prefix = argv[++i];
        } else if ((strcmp(a, "--local") == 0 || strcmp(a, "-l") == 0) && has_value) {
            local = argv[++i];
        } else if ((strcmp(a, "--type") == 0 || strcmp(a, "-t") == 0) && has_value) {
            type = argv[++i];
        } else if (strcmp(a, "--replace") == 0 || strcmp(a, "-r") == 0) {
            replace = true;
        } else if (!verb) {
            verb = a;
        } else if (!arg) {
            arg = a;
        } else {
            fprintf(stderr, "minidoc files: unexpected argument '%s'\n", a);
            return files_usage();
        }
    }
    bool needs_arg = verb && (strcmp(verb, "put") == 0 || strcmp(verb, "get") == 0 ||
                              strcmp(verb, "delete") == 0 || strcmp(verb, "search") == 0);
    if (!verb || (needs_arg && !arg) ||
        (!needs_arg && strcmp(verb, "list") != 0))
        return files_usage();
    md_gridfs *fs;
    md_error err;
    if (md_gridfs_open(db, prefix, &fs, &err) != 0)
        return fail("opening the GridFS bucket", &err);
    int rc;
    if (strcmp(verb, "put") == 0) {
        rc = do_put(fs, arg, local, type, replace);
    } else if (strcmp(verb, "get") == 0) {
        rc = do_get(fs, arg, local);
    } else if (strcmp(verb, "delete") == 0) {
        int64_t n;
        rc = md_gridfs_delete(fs, arg, &n, &err) ? fail("delete", &err) : 0;
        if (!rc)
            printf("successfully deleted all instances of '%s' from GridFS\n", arg);
    } else {
        rc = do_list(fs, arg, strcmp(verb, "list") == 0);
    }
    md_gridfs_destroy(fs);
    return rc;
}
