/*
 * fuzz_update.c -- libFuzzer harness for the update applier
 * (query/q_update.c, q_update_array.c, q_update_fast.c).
 *
 * The input is up to four documents (fuzz_util.h: JSON lines or BSON back
 * to back): the update, the target document, a filter whose match gives
 * the positional "$" its array offset, as the update command's does, and
 * a document whose values are the arrayFilters.  The update is parsed
 * (q_update_new_af) and applied as an update and as an upsert's insert.
 * Two cross-checks abort when they fail:
 *   - the damages q_update_apply reports for a same-size result, patched
 *     into a copy of the old document, give the new document;
 *   - when the in-place shortcut (q_update_inplace) takes the update, its
 *     patched result equals q_update_apply's and "changed" agrees.
 * Seeds: tests/fuzz/corpus/update/.
 */
#include "fuzz_util.h"
#include "q.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_damages(const bson_t *old, const bson_t *nd, const q_damages *dmg)
{
    if (dmg->n == 0 || nd->len != old->len)
        return;
    uint8_t *p = malloc(old->len);
    memcpy(p, bson_get_data(old), old->len);
    q_damages_patch(dmg, bson_get_data(nd), p);
    if (memcmp(p, bson_get_data(nd), nd->len) != 0) {
        fprintf(stderr, "q_update_apply: its damages do not give the new document\n");
        abort();
    }
    free(p);
}

/* The in-place shortcut against the general way (which gave nd). */
static void check_inplace(const q_update *u, const bson_t *old, int rc, const bson_t *nd,
                          bool changed)
{
    q_buf src;
    q_damages dmg;
    bool ch = false;
    q_buf_init(&src);
    q_damages_init(&dmg);
    if (q_update_inplace(u, old, &src, &dmg, &ch) == 0) {
        uint8_t *p = malloc(old->len);
        memcpy(p, bson_get_data(old), old->len);
        q_damages_patch(&dmg, src.data, p);
        if (rc != 0 || ch != changed || (changed && memcmp(p, bson_get_data(nd), old->len))) {
            fprintf(stderr, "in place: rc %d changed %d/%d, results %s\n", rc, ch, changed,
                    rc == 0 && changed && memcmp(p, bson_get_data(nd), old->len) ? "differ"
                                                                                  : "agree");
            abort();
        }
        free(p);
    }
    q_damages_cleanup(&dmg);
    q_buf_cleanup(&src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bson_t d[4], af, *afp = NULL;
    q_update *u = NULL;
    if (size > (1u << 20))
        return 0;
    int n = fz_docs(data, size, d, 4);
    char pos[64] = "";
    if (n >= 3) {
        q_matcher *m;
        if (q_matcher_new(&d[2], &m, NULL) == 0) {
            q_matcher_set_js_limit(m, 50);
            q_matcher_matches_pos(m, &d[1], pos, sizeof pos);
            q_matcher_take_error(NULL);
            q_matcher_destroy(m);
        }
    }
    bson_init(&af);
    if (n >= 4) {
        bson_iter_t it;
        int k = 0;
        bson_iter_init(&it, &d[3]);
        while (bson_iter_next(&it)) {
            char key[16];
            snprintf(key, sizeof key, "%d", k++);
            bson_append_iter(&af, key, -1, &it);
        }
        afp = &af;
    }
    if (n >= 1 && q_update_new_af(&d[0], afp, &u, NULL) == 0) {
        const bson_t *target = n >= 2 ? &d[1] : &d[0];
        for (int ins = 0; ins < 2; ins++) {
            bson_t nd;
            bool changed = false;
            q_damages dmg;
            q_damages_init(&dmg);
            int rc = q_update_apply_pos(u, target, pos, ins, &nd, &changed, &dmg, NULL);
            if (rc == 0 && changed)
                check_damages(target, &nd, &dmg);
            if (!ins && !pos[0])
                check_inplace(u, target, rc, &nd, changed);
            q_damages_cleanup(&dmg);
            bson_destroy(&nd);
        }
        q_update_affects(u, "a.b");
        q_update_destroy(u);
    }
    bson_destroy(&af);
    for (int k = 0; k < 4; k++)
        bson_destroy(&d[k]);
    return 0;
}
