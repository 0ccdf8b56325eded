/*
 * q_idhack.c -- the _id fast path, MongoDB's IDHACK.  A query that is
 * exactly {_id: <value>} has one possible answer: the record the _id index
 * maps the value's key to.  It is found with one point lookup
 * (eng_ss_find) and one record read, with no plan enumeration, interval
 * list, matcher or cursor; the key is encoded on the stack.
 *
 * find (both front ends), update, delete and findAndModify use it, in the
 * write path inside the write's own transaction (q_write.c), so that the
 * lookup and the write see the same state.  A value the _id index cannot
 * answer exactly (an array, a regex, null, an operator document, MinKey,
 * MaxKey, undefined) takes the general path, as isSimpleIdQuery decides in
 * MongoDB; so does a collection without an "_id_" index.
 */
#include <string.h>

#include "q_int.h"

static bool is_operator_doc(const bson_iter_t *it)
{
    bson_iter_t sub;
    return BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &sub) && bson_iter_next(&sub) &&
           bson_iter_key(&sub)[0] == '$';
}

bool q_idhack_query(const bson_t *filter, bson_iter_t *id)
{
    bson_iter_t it;
    if (!filter || !bson_iter_init(&it, filter) || !bson_iter_next(&it) ||
        strcmp(bson_iter_key(&it), "_id") != 0)
        return false;
    bson_iter_t val = it;
    if (it.next_off != filter->len - 1)
        return false; /* a second field (the terminator is not next) */
    switch (bson_iter_type(&val)) {
    case BSON_TYPE_ARRAY: case BSON_TYPE_REGEX: case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED: case BSON_TYPE_MINKEY: case BSON_TYPE_MAXKEY:
        return false;
    default:
        if (is_operator_doc(&val))
            return false;
        if (id)
            *id = val;
        return true;
    }
}

q_index *q_idhack_index(md_db *db, q_coll *c)
{
    if (db->no_fast)
        return NULL;
    q_index *ix = c->nidx > 0 && strcmp(c->idx[0]->name, "_id_") == 0 ? c->idx[0]
                                                                       : q_index_find(c, "_id_");
    return ix && !ix->hashed && !ix->partial ? ix : NULL;
}

int q_idhack_rid(md_db *db, q_index *ix, const bson_iter_t *id, eng_rid *rid)
{
    uint8_t space[128];
    q_buf key;
    q_buf_init_fixed(&key, space, sizeof space);
    q_key_append_value(&key, id, false);
    int rc = eng_ss_find(ix->ss, key.data, (uint32_t)key.len, rid);
    q_buf_cleanup(&key);
    if (rc == 0) /* IDHACK's keysExamined and docsExamined: 1 each when found */
        Q_COUNT(db->m.scanned, 1);
    return rc;
}

int q_idhack_get(md_db *db, q_coll *c, q_index *ix, const bson_iter_t *id, eng_rid *rid,
                 bson_t *view, md_error *err)
{
    const uint8_t *data;
    uint32_t len;
    int rc = q_idhack_rid(db, ix, id, rid);
    if (rc == 0) {
        Q_COUNT(db->m.scanned_objects, 1);
        rc = eng_rs_get(c->rs, *rid, &data, &len);
    }
    if (rc == MD_NOTFOUND)
        return rc;
    if (rc)
        return q_read_error(rc, err);
    /* engines without a record checksum may hold damaged BSON: it must not
     * reach the caller (mmapv1's mm_int.h, "Damage detection") */
    if ((!db->ops->checked_reads && !eng_bson_well_formed(data, len)) ||
        !bson_init_static(view, data, len)) {
        md_error e;
        md_error_clear(&e);
        rc = ENG_CORRUPT(&e, "record %lld of %s is not a well-formed BSON document",
                         (long long)*rid, c->ns);
        eng_note_error(rc, &e);
        return q_read_error(rc, err);
    }
    return 0;
}
