/*
 * ap.h -- the use cases of "MongoDB Applied Design Patterns" (Copeland,
 * 2013), as a library a reader can call, and the measurements that check
 * each chapter's claims on both engines.
 *
 * One module per use case (patterns/ap_<name>.c), written through the
 * public API only (include/minidoc.h), with the book's schema, its
 * operations (its Python translated: the same filters, updates, upserts,
 * multi, positional updates, $slice projections, sorts) and its indexes.
 * Where the book's code has an erratum ([sic] in
 * ../shared/reference/applied-patterns-digest.md) the module follows the
 * corrected form and says so.
 *
 * Two layers per use case, as in patterns.h:
 *
 *   operations   plain functions (ap_comments_post_embedded, ...) taking an
 *                md_db; 0 or a negative MD_* code with `err` filled;
 *                MD_NOTFOUND is a status (no such document, a guarded
 *                update that matched nothing: the book's
 *                "not updatedExisting").
 *   measurement  ap_usecase.measure: on a fresh database of one engine,
 *                runs the operations at the sizes the chapter talks about,
 *                records what it measured (ap_result rows: bytes written,
 *                moves, keys examined, ops per second) and decides each of
 *                the chapter's claims (holds or not, with the evidence).
 *                build/patterns (patterns/runner_ap.c) runs every use case
 *                on mmapv1 and btree and writes docs/patterns.md's part II.
 *
 *     ap_usecases[] (ap_registry.c) ---> ap_usecase
 *                                          |-- claims[] (the book's words)
 *                                          |-- measure(db, engine, quick, result)
 */
#ifndef AP_H
#define AP_H

#include <stdbool.h>
#include <stdint.h>

#include "minidoc.h"
#include "patterns.h"

/* ---- the measurement model ------------------------------------------------ */

#define AP_MAX_ROWS 64
#define AP_MAX_CLAIMS 6

/* One measured number: "post, embedded, 1000 comments: bytes written per
 * comment" = 51234 "B". */
typedef struct ap_row {
    char what[112];
    double value;
    char unit[16];
} ap_row;

/* A claim's outcome on one engine. */
typedef enum ap_verdict { AP_NOT_RUN = 0, AP_HOLDS, AP_FAILS } ap_verdict;

typedef struct ap_claim_result {
    ap_verdict verdict;
    char evidence[320];  /* the numbers that decided it */
} ap_claim_result;

/* What one use case measured on one engine. */
typedef struct ap_result {
    char engine[32];
    int nrows;
    ap_row rows[AP_MAX_ROWS];
    ap_claim_result claims[AP_MAX_CLAIMS];
    double seconds;      /* wall time of the measurement */
    int rc;              /* 0, or the error that stopped it */
    char error[256];
} ap_result;

/* Record a number (silently dropped past AP_MAX_ROWS). */
void ap_row_add(ap_result *r, double value, const char *unit, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Decide claim k: holds or not, and why. */
void ap_claim_set(ap_result *r, int k, bool holds, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One of the book's use cases. */
typedef struct ap_usecase {
    const char *name;       /* --scenario NAME, e.g. "ap_comments" */
    const char *title;      /* "CMS: Storing Comments" */
    const char *section;    /* the book's chapter and pages, "Ch.6 pp.111-120" */
    const char *demonstrates; /* one line: the schema decision it shows */
    int nclaims;
    const char *claims[AP_MAX_CLAIMS]; /* the chapter's claims, as tested */
    /* Measure on `db` (fresh, of engine `engine`); quick: the reduced sizes
     * of `build/patterns --quick` and the tests.  Fills r; 0 or an error. */
    int (*measure)(md_db *db, const char *engine, bool quick, ap_result *r, md_error *err);
} ap_usecase;

/* Every use case of the book, in its order; NULL-terminated. */
extern const ap_usecase *const ap_usecases[];

/* ---- helpers shared by the modules (ap_common.c) -------------------------- */

/* Nanoseconds of a monotonic clock. */
int64_t ap_now_ns(void);
/* update(filter, update, {upsert, multi}) on coll; *matched / *modified /
 * *upserted (each may be NULL) from the reply.  "updatedExisting", as the
 * book's safe=True result reports it, is matched > 0. */
int ap_update(md_db *db, const char *coll, const bson_t *filter, const bson_t *update,
              bool upsert, bool multi, int64_t *matched, int64_t *modified, bool *upserted,
              md_error *err);
/* insert(doc) on coll. */
int ap_insert(md_db *db, const char *coll, const bson_t *doc, md_error *err);
/* find(filter, opts) on coll: the number of documents in *n (may be NULL)
 * and, when first is not NULL, a copy of the first (always initialized). */
int ap_find(md_db *db, const char *coll, const bson_t *filter, const bson_t *opts, int64_t *n,
            bson_t *first, md_error *err);

/* What explain (executionStats) says about a find. */
typedef struct ap_plan {
    char index[96];        /* the winning plan's IXSCAN index name, "" for none */
    bool collscan;         /* a COLLSCAN in the winning plan */
    bool sort_in_memory;   /* a SORT stage in the winning plan */
    int64_t keys_examined, docs_examined, returned;
} ap_plan;
/* explain {find: coll, filter, sort, ...opts} at executionStats. */
int ap_explain_find(md_db *db, const char *coll, const bson_t *filter, const bson_t *sort,
                    ap_plan *plan, md_error *err);

/* The storage counters of the whole database (serverStatus + collStats):
 * moves, in-place updates, bytes written by document writes. */
typedef struct ap_counters {
    int64_t moves, in_place, bytes_written, updates;
} ap_counters;
int ap_counters_read(md_db *db, ap_counters *c, md_error *err);
/* The same counters of one collection (collStats <engine>.*). */
int ap_coll_counters_read(md_db *db, const char *coll, ap_counters *c, md_error *err);
/* b - a, field by field. */
ap_counters ap_counters_diff(const ap_counters *a, const ap_counters *b);

/* A document's BSON size by _id (MD_NOTFOUND if absent). */
int ap_doc_size(md_db *db, const char *coll, const bson_value_t *id, int64_t *size,
                md_error *err);

/* ---- Ch.5 Product Catalog (ap_catalog.c) ---------------------------------- */
extern const ap_usecase ap_usecase_catalog;
#define AP_CATALOG_PRODUCTS "products"
/* The chapter's four indexes: pricing.pct_savings; {type, details.genre,
 * details.issue_date: -1}; {type, details.actor, details.issue_date: -1};
 * {type, details.issue_date: -1, title}. */
int ap_catalog_create_indexes(md_db *db, md_error *err);
/* An album or a film: {sku, type, title, description, asin, shipping,
 * pricing: {list, retail, savings, pct_savings}, details: {...}}; genre /
 * actors: n strings; issue_ms: details.issue_date. */
int ap_catalog_add_album(md_db *db, const char *sku, const char *title, const char *artist,
                         const char *const *genres, int ngenres, int64_t issue_ms,
                         int32_t list, int32_t retail, md_error *err);
int ap_catalog_add_film(md_db *db, const char *sku, const char *title,
                        const char *const *actors, int nactors, int64_t issue_ms,
                        int32_t list, int32_t retail, md_error *err);
/* The chapter's queries; each returns a cursor the caller destroys (never
 * NULL; errors via md_cursor_error):
 *   discounted   find({pricing.pct_savings: {$gt: pct}}).sort({pricing.pct_savings: -1})
 *   by_genre     find({type: 'Audio Album', details.genre}).sort({details.issue_date: -1})
 *   by_actor     find({type: 'Film', details.actor}).sort({details.issue_date: -1})
 *   title_regex  find({type: 'Film', title: {$regex, $options}}).sort({details.issue_date: -1}) */
md_cursor *ap_catalog_discounted(md_db *db, int32_t pct);
md_cursor *ap_catalog_by_genre(md_db *db, const char *genre);
md_cursor *ap_catalog_by_actor(md_db *db, const char *actor);
md_cursor *ap_catalog_title_regex(md_db *db, const char *regex, const char *options);
/* The filter and sort of those queries, for explain (both initialized here). */
void ap_catalog_title_query(const char *regex, const char *options, bson_t *filter,
                            bson_t *sort);

/* ---- Ch.5 Category Hierarchy (ap_category.c) ------------------------------ */
extern const ap_usecase ap_usecase_category;
#define AP_CATEGORIES "categories"
/* slug (unique) and ancestors._id. */
int ap_category_create_indexes(md_db *db, md_error *err);
/* Insert {name, slug, parent} (parent NULL: a root), then build_ancestors;
 * the new ObjectId in *id. */
int ap_category_add(md_db *db, const char *name, const char *slug, const bson_oid_t *parent,
                    bson_oid_t *id, md_error *err);
/* find({slug}, {_id: 0, name: 1, ancestors.slug: 1, ancestors.name: 1}):
 * the breadcrumbs into *doc (always initialized); MD_NOTFOUND. */
int ap_category_read(md_db *db, const char *slug, bson_t *doc, md_error *err);
/* Re-parent node under new_parent: $set parent, then rebuild the ancestors
 * of the node and of every descendant (build_subgraph +
 * update_node_and_descendants).  *updated (may be NULL): documents written. */
int ap_category_reparent(md_db *db, const bson_oid_t *node, const bson_oid_t *new_parent,
                         int64_t *updated, md_error *err);
/* Rename: $set name, then {ancestors._id: id} $set ancestors.$.name, multi.
 * *descendants (may be NULL): the multi update's modified count. */
int ap_category_rename(md_db *db, const bson_oid_t *id, const char *name,
                       int64_t *descendants, md_error *err);

/* ---- Ch.6 CMS: Metadata and Asset Management (ap_cms.c) ------------------- */
extern const ap_usecase ap_usecase_cms;
#define AP_CMS_NODES "cms.nodes"
#define AP_CMS_BUCKET "cms.assets"
/* cms.nodes {metadata.parent_id, metadata.slug} unique, {metadata.tags},
 * {metadata.parent_id, metadata.published: -1}; cms.assets.files
 * {metadata.parent_id, metadata.slug} unique and {metadata.tags}. */
int ap_cms_create_indexes(md_db *db, md_error *err);
/* Insert a node {metadata: {nonce, parent_id, slug, type, title, created,
 * author: {id, name}, tags, published, detail: {publish_on, text}}};
 * published_ms < 0 leaves metadata.published out.  *nonce (may be NULL):
 * the node's first nonce. */
int ap_cms_create_node(md_db *db, const char *parent_id, const char *slug, const char *type,
                       const char *title, const char *author, const char *const *tags,
                       int ntags, const char *text, int64_t published_ms, bson_oid_t *nonce,
                       md_error *err);
/* update_text: {parent_id, slug, nonce} $set text and a new nonce (in
 * *new_nonce).  MD_NOTFOUND: the book's ConflictError (another edit won). */
int ap_cms_update_text(md_db *db, const char *parent_id, const char *slug,
                       const bson_oid_t *nonce, const char *text, bson_oid_t *new_nonce,
                       md_error *err);
/* $addToSet: {metadata.tags: {$each: tags}} (the book's top-level "tags" is
 * an erratum: the node keeps its tags in metadata). */
int ap_cms_add_tags(md_db *db, const char *parent_id, const char *slug,
                    const char *const *tags, int ntags, md_error *err);
/* upload_new_photo: a GridFS file in cms.assets with contentType
 * image/jpeg and metadata {nonce, type: photo, locked: now, parent_id,
 * slug, title, ...}, streamed chunk by chunk, then unlocked ($set
 * metadata.locked: null).  *id (may be NULL) gets the file's _id. */
int ap_cms_upload_photo(md_db *db, const char *parent_id, const char *slug, const char *title,
                        const void *data, size_t len, bson_oid_t *id, md_error *err);
/* update_photo_content: the unlocked file (or one locked more than 300 s
 * ago) is deleted with its chunks and uploaded again with the same
 * metadata.  MD_NOTFOUND: the book's FileDoesNotExist (none, or locked). */
int ap_cms_replace_photo(md_db *db, const char *parent_id, const char *slug, const void *data,
                         size_t len, md_error *err);
/* get_version({metadata.parent_id, metadata.slug}): the photo's bytes
 * (malloc'ed, free them). */
int ap_cms_read_photo(md_db *db, const char *parent_id, const char *slug, void **data,
                      size_t *len, md_error *err);
/* The recent blog feed: {metadata.parent_id, metadata.published: {$lt:
 * now}} sorted {metadata.published: -1}; a cursor (never NULL). */
md_cursor *ap_cms_blog_feed(md_db *db, const char *parent_id, int64_t now_ms);

/* ---- Ch.6 CMS: Storing Comments (ap_comments.c) --------------------------- */
extern const ap_usecase ap_usecase_comments;
#define AP_COMMENTS "comments"
#define AP_COMMENT_PAGES "comment_pages"
#define AP_COMMENT_NODES "cms.nodes"
#define AP_COMMENTS_PER_PAGE 100
#define AP_COMMENT_SLUG_MAX 512 /* a threaded slug: parent slugs + 9 bytes a level */
int ap_comments_create_indexes(md_db *db, md_error *err);
/* The discussion's node: {_id: node, metadata: {comments: []},
 * num_comment_pages: 0}. */
int ap_comments_create_node(md_db *db, const bson_oid_t *node, md_error *err);
/* Approach 1, one document per comment.  post: threaded (parent_slug NULL
 * for a top-level comment); the comment's slug goes to slug_out
 * (AP_COMMENT_SLUG_MAX bytes; may be NULL).  MD_EINVAL: the thread is too
 * deep for that. */
int ap_comments_post_doc(md_db *db, const bson_oid_t *node, const char *parent_slug,
                         const char *author, const char *text, int64_t posted_ms,
                         char *slug_out, md_error *err);
/* paginate: find({node_id}).sort({posted: 1} or {full_slug: 1}).skip.limit
 * into *n documents; the first's slug into first_slug (64 B, may be NULL). */
int ap_comments_page_doc(md_db *db, const bson_oid_t *node, bool threaded, int64_t skip,
                         int64_t limit, int64_t *n, char *first_slug, md_error *err);
/* direct link: find_one({node_id, slug}) into *comment (always initialized). */
int ap_comments_link_doc(md_db *db, const bson_oid_t *node, const char *slug, bson_t *comment,
                         md_error *err);
/* Approach 2, embedded: $push metadata.comments. */
int ap_comments_post_embedded(md_db *db, const bson_oid_t *node, const char *slug,
                              const char *author, const char *text, int64_t posted_ms,
                              md_error *err);
/* paginate: find_one({_id}, {metadata.comments: {$slice: [skip, limit]}});
 * the page's size in *n and its first slug in first_slug (may be NULL). */
int ap_comments_page_embedded(md_db *db, const bson_oid_t *node, int64_t skip, int64_t limit,
                              int64_t *n, char *first_slug, md_error *err);
/* direct link by position: $slice [position, 1] (the book's [position,
 * position] is an erratum). */
int ap_comments_link_embedded(md_db *db, const bson_oid_t *node, int64_t position,
                              bson_t *comment, md_error *err);
/* Approach 2, threaded: the reply's path of positions (path[0] among the
 * top-level replies, path[1] among its replies, ...; n = 0: a top-level
 * comment) becomes the dotted field metadata.replies.<p0>.replies...
 * .replies, and the comment {slug, posted, author, text, replies: []} is
 * $pushed there. */
int ap_comments_post_embedded_threaded(md_db *db, const bson_oid_t *node, const int *path,
                                       int n, const char *slug, const char *author,
                                       const char *text, int64_t posted_ms, md_error *err);
/* The threaded direct link: the node's replies walked along path in the
 * application (MD_NOTFOUND: no comment there); *comment always initialized. */
int ap_comments_link_embedded_threaded(md_db *db, const bson_oid_t *node, const int *path,
                                       int n, bson_t *comment, md_error *err);
/* Approach 3, hybrid pages of ~100: post_comment with the node's
 * num_comment_pages as the caller last read it (*num_pages, updated). */
int ap_comments_post_bucket(md_db *db, const bson_oid_t *node, int64_t *num_pages,
                            const char *slug, const char *author, const char *text,
                            int64_t posted_ms, md_error *err);
/* find_comments(skip, limit): pages sorted by page, skipped in the
 * application; *n comments, the first's slug in first_slug (may be NULL). */
int ap_comments_page_bucket(md_db *db, const bson_oid_t *node, int64_t skip, int64_t limit,
                            int64_t *n, char *first_slug, md_error *err);
/* direct link: find_one({node_id, comments.slug}, {comments: 1}), then the
 * scan in the application. */
int ap_comments_link_bucket(md_db *db, const bson_oid_t *node, const char *slug,
                            bson_t *comment, md_error *err);

/* ---- Ch.7 Online Advertising (ap_ads.c) ----------------------------------- */
extern const ap_usecase ap_usecase_ads;
#define AP_AD_ZONE "ad.zone"
#define AP_AD_USER "ad.user"
/* ad.zone {site_id, zone_id} and {ads.campaign_id}. */
int ap_ads_create_indexes(md_db *db, md_error *err);
typedef struct ap_ad {
    const char *campaign_id, *ad_unit_id;
    int32_t ecpm;
    const char *const *keywords; /* design 3; may be NULL */
    int nkeywords;
} ap_ad;
/* A zone {site_id, zone_id, ads: [...]} (the ads sorted by ecpm desc here). */
int ap_ads_create_zone(md_db *db, const char *site_id, const char *zone_id, const ap_ad *ads,
                       int n, md_error *err);
/* Design 1 and 2: the chosen ad's ad_unit_id and campaign into the
 * buffers (64 B each); MD_NOTFOUND: no zone, no ad, or every ad capped for
 * this user (user_id NULL: design 1).  rng: the random tie-break stream. */
int ap_ads_choose(md_db *db, const char *site_id, const char *zone_id, const char *user_id,
                  int64_t now_ms, uint64_t *rng, char *ad_unit, char *campaign,
                  md_error *err);
/* Design 3: the best ad by ecpm * log(1.1 + matching keywords), capped as
 * design 2. */
int ap_ads_choose_keywords(md_db *db, const char *site_id, const char *zone_id,
                           const char *user_id, const char *const *keywords, int nkeywords,
                           int64_t now_ms, uint64_t *rng, char *ad_unit, md_error *err);
/* The impression log the book implies: update({_id: user}, {$push:
 * {advertisers.<adv>.impressions: {date, campaign, ad_unit_id, site_id,
 * zone_id}}}, upsert). */
int ap_ads_log_impression(md_db *db, const char *user_id, const char *campaign_id,
                          const char *ad_unit_id, const char *site_id, const char *zone_id,
                          int64_t now_ms, md_error *err);
/* deactivate_campaign: {ads.campaign_id} $pull, multi; *zones modified. */
int ap_ads_deactivate_campaign(md_db *db, const char *campaign_id, int64_t *zones,
                               md_error *err);

/* ---- Ch.8 Social Networking (ap_social.c) --------------------------------- */
extern const ap_usecase ap_usecase_social;
#define AP_SOCIAL_USER "social.user"
#define AP_SOCIAL_POST "social.post"
#define AP_SOCIAL_WALL "social.wall"
#define AP_SOCIAL_NEWS "social.news"
#define AP_COMMENTS_SHOWN 3
/* wall and news: {user_id, month: -1}, {posts.id}, {posts.comments_shown}. */
int ap_social_create_indexes(md_db *db, md_error *err);
/* {_id: id, name, profile: {}, followers: {}, circles: {}, blocked: []}. */
int ap_social_create_user(md_db *db, const char *id, const char *name, md_error *err);
/* circle_user / uncircle_user (both sides of the graph). */
int ap_social_circle(md_db *db, const char *self, const char *self_name, const char *other,
                     const char *other_name, const char *circle, md_error *err);
int ap_social_uncircle(md_db *db, const char *self, const char *other, const char *circle,
                       md_error *err);
/* The month documents a user's wall and news need ({user_id, month,
 * posts: []}, upserted: the book never shows their creation). */
int ap_social_ensure_month(md_db *db, const char *user_id, const char *month, md_error *err);
/* post(user, dest_user, type, text, circles): social.post insert, the
 * recipient's wall, and the fan-out to the followers' (or circles')
 * news: one multi update {user_id: {$in}, month} $push.  *fanout (may be
 * NULL): news documents modified.  *post_id (may be NULL): the post. */
int ap_social_post(md_db *db, const char *user, const char *dest_user, const char *month,
                   const char *text, const char *const *circles, int ncircles,
                   int64_t *fanout, bson_oid_t *post_id, md_error *err);
/* comment: social.post $push comments; wall and news {posts.id} $push
 * posts.$.comments, $inc posts.$.comments_shown, multi (the book's
 * top-level "comments" and its upsert are errata). */
int ap_social_comment(md_db *db, const bson_oid_t *post_id, const char *by, const char *name,
                      const char *text, md_error *err);
/* truncate_extra_comments on news and wall: rounds of $pop -1 until no
 * post shows more than AP_COMMENTS_SHOWN; *modified (may be NULL). */
int ap_social_truncate_comments(md_db *db, int64_t *modified, md_error *err);
/* get_posts(collection, user, month or NULL): the posts, newest month
 * first and each month reversed; *n posts, the first's text (64 B). */
int ap_social_get_posts(md_db *db, const char *coll, const char *user, const char *month,
                        int64_t *n, char *first_text, md_error *err);

/* ---- Ch.9 Online Gaming (ap_gaming.c) ------------------------------------- */
extern const ap_usecase ap_usecase_gaming;
#define AP_GAME_CHARACTER "character"
#define AP_GAME_LOCATION "location"
#define AP_GAME_ITEM "item"
/* The book's world: rooms maze-1..3, items (a backpack with its potions,
 * a hat, a robe, boots, a quarterstaff, a scroll in maze-1), the
 * character Tim in maze-1 with 523 gold, and a shopkeeper. */
int ap_gaming_seed(md_db *db, bson_oid_t *tim, bson_oid_t *shopkeeper, bson_oid_t *scroll,
                   bson_oid_t *backpack, bson_oid_t *potion, md_error *err);
/* pick_up_item (the multi-player-safe version): MD_NOTFOUND is the book's
 * Conflict (the item is no longer in the room). */
int ap_gaming_pick_up(md_db *db, const bson_oid_t *character, const bson_oid_t *item,
                      md_error *err);
/* move_to_active_inventory: out of a container. MD_NOTFOUND: Conflict. */
int ap_gaming_move_to_active(md_db *db, const bson_oid_t *character,
                             const bson_oid_t *container, const bson_oid_t *item,
                             md_error *err);
/* move(character, direction): MD_NOTFOUND if there is no such exit. */
int ap_gaming_move(md_db *db, const bson_oid_t *character, const char *direction,
                   md_error *err);
/* buy: guarded debit, pick up (rolled back on failure), credit the
 * shopkeeper.  MD_NOTFOUND: InsufficientFunds or Conflict (gold restored). */
int ap_gaming_buy(md_db *db, const bson_oid_t *character, const bson_oid_t *shopkeeper,
                  const bson_oid_t *item, md_error *err);
/* The display data: armor by region and weapons by hand, described
 * ("+3 wizard's hat"), from the item index over the character's and the
 * room's inventories.  Writes e.g. "head=+3 wizard's hat;body=...;both=+2
 * quarterstaff" into buf. */
int ap_gaming_display(md_db *db, const bson_oid_t *character, char *buf, size_t size,
                      md_error *err);

#endif /* AP_H */
