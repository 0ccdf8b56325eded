/*
 * ap_ads.c -- "Online Advertising Networks" (Applied Design Patterns, ch.7
 * pp.121-128), designs 1-3: a zone document lists its ads by eCPM; a
 * request reads it with one indexed find_one and decides in the
 * application; frequency capping reads the user's profile by _id and
 * skips ad units the user saw in the last day; keyword targeting scores
 * ecpm * log(1.1 + matching keywords).
 *
 *   ad.zone {site_id, zone_id, ads: [{campaign_id, ad_unit_id, ecpm,
 *            keywords?}]}                         ads sorted by ecpm desc
 *   ad.user {_id: cookie, advertisers: {<adv>: {impressions: [{date,
 *            campaign, ad_unit_id, site_id, zone_id}], clicks: [...]}}}
 *
 * Errata followed in their corrected form: the profile is read by _id (the
 * book's find_one({'user_id': ...}) names a field the schema does not
 * have), ad_is_acceptable looks in user['advertisers'][adv] and compares
 * event['date'] and event['ad_unit_id'] (the book's 'timestamp' and
 * 'detail' are not in its schema), and deactivate_campaign's "' $pull'"
 * and set literal are {$pull: {ads: {campaign_id}}}.  The book never shows
 * the impression log; ap_ads_log_impression is the $push it implies.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ap.h"

#define DAY_MS 86400000LL

int ap_ads_create_indexes(md_db *db, md_error *err)
{
    bson_t *k = BCON_NEW("site_id", BCON_INT32(1), "zone_id", BCON_INT32(1));
    int rc = pt_ensure_index(db, AP_AD_ZONE, k, NULL, err);
    bson_destroy(k);
    if (rc)
        return rc;
    k = BCON_NEW("ads.campaign_id", BCON_INT32(1));
    rc = pt_ensure_index(db, AP_AD_ZONE, k, NULL, err);
    bson_destroy(k);
    return rc;
}

int ap_ads_create_zone(md_db *db, const char *site_id, const char *zone_id, const ap_ad *ads,
                       int n, md_error *err)
{
    int order[256];
    if (n > 256)
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE, "at most 256 ads per zone");
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++) /* stable: by ecpm desc */
        for (int j = i; j > 0 && ads[order[j - 1]].ecpm < ads[order[j]].ecpm; j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    bson_t doc = BSON_INITIALIZER, arr, ad, kw;
    BSON_APPEND_UTF8(&doc, "site_id", site_id);
    BSON_APPEND_UTF8(&doc, "zone_id", zone_id);
    BSON_APPEND_ARRAY_BEGIN(&doc, "ads", &arr);
    for (int i = 0; i < n; i++) {
        const ap_ad *a = &ads[order[i]];
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &ad);
        BSON_APPEND_UTF8(&ad, "campaign_id", a->campaign_id);
        BSON_APPEND_UTF8(&ad, "ad_unit_id", a->ad_unit_id);
        if (a->keywords) {
            BSON_APPEND_ARRAY_BEGIN(&ad, "keywords", &kw);
            for (int k = 0; k < a->nkeywords; k++) {
                snprintf(key, sizeof key, "%d", k);
                BSON_APPEND_UTF8(&kw, key, a->keywords[k]);
            }
            bson_append_array_end(&ad, &kw);
        }
        BSON_APPEND_INT32(&ad, "ecpm", a->ecpm);
        bson_append_document_end(&arr, &ad);
    }
    bson_append_array_end(&doc, &arr);
    int rc = ap_insert(db, AP_AD_ZONE, &doc, NULL, err);
    bson_destroy(&doc);
    return rc;
}

/* An ad of the zone document as the application sees it. */
typedef struct zad {
    char campaign[64], unit[64];
    int32_t ecpm;
    double score;
    bson_iter_t keywords; /* valid while the zone document lives */
    bool has_keywords;
} zad;

#define MAX_ADS 256

/* find_one({site_id, zone_id}) and its ads; MD_NOTFOUND: no zone. */
static int read_zone(md_db *db, const char *site_id, const char *zone_id, bson_t *zone,
                     zad *ads, int *n, md_error *err)
{
    bson_t *filter = BCON_NEW("site_id", BCON_UTF8(site_id), "zone_id", BCON_UTF8(zone_id));
    int rc = pt_find_one(db, AP_AD_ZONE, filter, NULL, zone, err);
    bson_destroy(filter);
    *n = 0;
    bson_iter_t it, arr, f;
    if (rc == 0 && bson_iter_init_find(&it, zone, "ads") && bson_iter_recurse(&it, &arr))
        while (bson_iter_next(&arr) && *n < MAX_ADS) {
            zad *a = &ads[*n];
            memset(a, 0, sizeof *a);
            if (!BSON_ITER_HOLDS_DOCUMENT(&arr) || !bson_iter_recurse(&arr, &f))
                continue;
            while (bson_iter_next(&f)) {
                const char *k = bson_iter_key(&f);
                if (strcmp(k, "campaign_id") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                    snprintf(a->campaign, sizeof a->campaign, "%s", bson_iter_utf8(&f, NULL));
                else if (strcmp(k, "ad_unit_id") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                    snprintf(a->unit, sizeof a->unit, "%s", bson_iter_utf8(&f, NULL));
                else if (strcmp(k, "ecpm") == 0 && BSON_ITER_HOLDS_NUMBER(&f))
                    a->ecpm = (int32_t)bson_iter_as_int64(&f);
                else if (strcmp(k, "keywords") == 0 && BSON_ITER_HOLDS_ARRAY(&f)) {
                    a->keywords = f;
                    a->has_keywords = true;
                }
            }
            a->score = a->ecpm;
            (*n)++;
        }
    return rc;
}

/* ad_is_acceptable: false if the user saw this ad unit in the last day.
 * `user` is the profile (or empty: an unknown user accepts anything). */
static bool ad_is_acceptable(const zad *ad, const bson_t *user, int64_t now_ms)
{
    char adv[64], path[160];
    const char *colon = strchr(ad->campaign, ':');
    size_t len = colon ? (size_t)(colon - ad->campaign) : strlen(ad->campaign);
    snprintf(adv, sizeof adv, "%.*s", (int)len, ad->campaign);
    snprintf(path, sizeof path, "advertisers.%s.impressions", adv);
    bson_iter_t it, imp, ev;
    if (!bson_iter_init(&it, user) || !bson_iter_find_descendant(&it, path, &imp) ||
        !bson_iter_recurse(&imp, &ev))
        return true;
    /* Events are in time order: walk them newest first (reversed()),
     * keeping the ones inside the threshold. */
    bson_iter_t start = ev;
    int count = 0;
    while (bson_iter_next(&ev))
        count++;
    int64_t threshold = now_ms - DAY_MS;
    for (int i = count - 1; i >= 0; i--) {
        bson_iter_t e = start, f;
        for (int k = 0; k <= i; k++)
            bson_iter_next(&e);
        if (!BSON_ITER_HOLDS_DOCUMENT(&e) || !bson_iter_recurse(&e, &f))
            continue;
        int64_t date = INT64_MIN;
        bool same = false;
        while (bson_iter_next(&f)) {
            if (strcmp(bson_iter_key(&f), "date") == 0 && BSON_ITER_HOLDS_DATE_TIME(&f))
                date = bson_iter_date_time(&f);
            else if (strcmp(bson_iter_key(&f), "ad_unit_id") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                same = strcmp(bson_iter_utf8(&f, NULL), ad->unit) == 0;
        }
        if (date < threshold)
            break;
        if (same)
            return false;
    }
    return true;
}

/* ad_iterator: groups of equal score, best first, each shuffled. */
static void shuffle_groups(zad *ads, int n, uint64_t *rng)
{
    for (int i = 1; i < n; i++) /* stable by score desc */
        for (int j = i; j > 0 && ads[j - 1].score < ads[j].score; j--) {
            zad x = ads[j];
            ads[j] = ads[j - 1];
            ads[j - 1] = x;
        }
    for (int g = 0; g < n;) {
        int e = g + 1;
        while (e < n && ads[e].score == ads[g].score)
            e++;
        for (int i = e - 1; i > g; i--) {
            int j = g + (int)(pt_rand_next(rng) % (uint64_t)(i - g + 1));
            zad x = ads[i];
            ads[i] = ads[j];
            ads[j] = x;
        }
        g = e;
    }
}

static int read_user(md_db *db, const char *user_id, bson_t *user, md_error *err)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(user_id));
    int rc = pt_find_one(db, AP_AD_USER, filter, NULL, user, err);
    bson_destroy(filter);
    return rc;
}

static int choose(md_db *db, const char *site_id, const char *zone_id, const char *user_id,
                  const char *const *keywords, int nkeywords, int64_t now_ms, uint64_t *rng,
                  char *ad_unit, char *campaign, md_error *err)
{
    static __thread zad ads[MAX_ADS];
    bson_t zone, user;
    int n = 0;
    int rc = read_zone(db, site_id, zone_id, &zone, ads, &n, err);
    bson_init(&user);
    if (rc == 0 && n == 0)
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "no ad for the zone");
    if (rc == 0 && keywords)
        for (int i = 0; i < n; i++) {
            int matching = 0;
            if (ads[i].has_keywords) {
                bson_iter_t kw = ads[i].keywords, e;
                bson_iter_recurse(&kw, &e);
                while (bson_iter_next(&e))
                    for (int k = 0; k < nkeywords; k++)
                        if (BSON_ITER_HOLDS_UTF8(&e) &&
                            strcmp(bson_iter_utf8(&e, NULL), keywords[k]) == 0) {
                            matching++;
                            break;
                        }
            }
            ads[i].score = ads[i].ecpm * log(1.1 + matching);
        }
    if (rc == 0) {
        shuffle_groups(ads, n, rng);
        if (user_id) {
            bson_destroy(&user);
            rc = read_user(db, user_id, &user, err);
            if (rc == MD_NOTFOUND) { /* unknown user: any ad */
                bson_destroy(&user);
                bson_init(&user);
                rc = 0;
            }
        }
    }
    if (rc == 0) {
        rc = md_error_set(err, MD_NOTFOUND, MD_CODE_NO_SUCH_KEY, "every ad is capped");
        for (int i = 0; i < n; i++)
            if (ad_is_acceptable(&ads[i], &user, now_ms)) {
                snprintf(ad_unit, 64, "%s", ads[i].unit);
                if (campaign)
                    snprintf(campaign, 64, "%s", ads[i].campaign);
                rc = 0;
                break;
            }
    }
    bson_destroy(&user);
    bson_destroy(&zone);
    return rc;
}

int ap_ads_choose(md_db *db, const char *site_id, const char *zone_id, const char *user_id,
                  int64_t now_ms, uint64_t *rng, char *ad_unit, char *campaign,
                  md_error *err)
{
    return choose(db, site_id, zone_id, user_id, NULL, 0, now_ms, rng, ad_unit, campaign, err);
}

int ap_ads_choose_keywords(md_db *db, const char *site_id, const char *zone_id,
                           const char *user_id, const char *const *keywords, int nkeywords,
                           int64_t now_ms, uint64_t *rng, char *ad_unit, md_error *err)
{
    return choose(db, site_id, zone_id, user_id, keywords, nkeywords, now_ms, rng, ad_unit,
                  NULL, err);
}

int ap_ads_log_impression(md_db *db, const char *user_id, const char *campaign_id,
                          const char *ad_unit_id, const char *site_id, const char *zone_id,
                          int64_t now_ms, md_error *err)
{
    char adv[64], path[160];
    const char *colon = strchr(campaign_id, ':');
    size_t len = colon ? (size_t)(colon - campaign_id) : strlen(campaign_id);
    if (len == 0 || len >= sizeof adv || memchr(campaign_id, '.', len) ||
        campaign_id[0] == '$')
        return md_error_set(err, MD_EINVAL, MD_CODE_BAD_VALUE,
                            "the advertiser of campaign '%s' is not a field name", campaign_id);
    snprintf(adv, sizeof adv, "%.*s", (int)len, campaign_id);
    snprintf(path, sizeof path, "advertisers.%s.impressions", adv);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(user_id));
    bson_t *update = BCON_NEW("$push", "{", path, "{", "date", BCON_DATE_TIME(now_ms),
                              "campaign", BCON_UTF8(colon ? colon + 1 : campaign_id),
                              "ad_unit_id", BCON_UTF8(ad_unit_id), "site_id",
                              BCON_UTF8(site_id), "zone_id", BCON_UTF8(zone_id), "}", "}");
    int rc = ap_update(db, AP_AD_USER, filter, update, true, false, NULL, NULL, NULL, NULL, err);
    bson_destroy(update);
    bson_destroy(filter);
    return rc;
}

int ap_ads_deactivate_campaign(md_db *db, const char *campaign_id, int64_t *zones,
                               md_error *err)
{
    bson_t *filter = BCON_NEW("ads.campaign_id", BCON_UTF8(campaign_id));
    bson_t *update = BCON_NEW("$pull", "{", "ads", "{", "campaign_id", BCON_UTF8(campaign_id),
                              "}", "}");
    int rc = ap_update(db, AP_AD_ZONE, filter, update, false, true, NULL, NULL, zones, NULL, err);
    bson_destroy(update);
    bson_destroy(filter);
    return rc;
}

/* ---- the measurement ----------------------------------------------------------- */

static int ads_measure(md_db *db, const ap_args *args, ap_result *r, md_error *err)
{
    const char *engine = args->engine;
    bool quick = args->quick;
    static const char *const kw_car[] = {"car", "luxury", "style"};
    static const char *const kw_perf[] = {"car", "performance"};
    ap_ad banner[] = {
        {"mercedes:c201204_sclass_4", "banner23a", 250, NULL, 0},
        {"mercedes:c201204_sclass_4", "banner23b", 250, NULL, 0},
        {"bmw:c201204_eclass_1", "banner12", 200, NULL, 0},
        {"audi:c201204_a4", "banner7", 150, NULL, 0},
    };
    ap_ad search[] = {
        {"mercedes:c201204_sclass_4", "search1", 250, kw_car, 3},
        {"mercedes:c201204_sclass_4", "search2", 250, kw_car, 3},
        {"bmw:c201204_eclass_1", "search1", 200, kw_perf, 2},
    };
    int users = quick ? 200 : 1000, per_user = quick ? 20 : 30;
    int rc = ap_ads_create_indexes(db, err);
    if (rc || (rc = ap_ads_create_zone(db, "cnn", "banner", banner, 4, err)) ||
        (rc = ap_ads_create_zone(db, "cnn", "search", search, 3, err)))
        return rc;
    /* Other sites' zones, so the zone lookup has something to skip. */
    for (int i = 0; i < 200 && rc == 0; i++) {
        char site[32];
        snprintf(site, sizeof site, "site%03d", i);
        rc = ap_ads_create_zone(db, site, "banner", banner, 4, err);
    }
    if (rc)
        return rc;
    ap_plan zone;
    bson_t *f = BCON_NEW("site_id", "cnn", "zone_id", "banner");
    rc = ap_explain_find(db, AP_AD_ZONE, f, NULL, NULL, &zone, err);
    bson_destroy(f);
    if (rc)
        return rc;
    ap_row_add(r, (double)zone.docs_examined, "docs", "zone lookup: documents examined (index %s)",
               zone.index);

    /* Serving with frequency capping: choose, then log the impression. */
    uint64_t rng = 42;
    int64_t now = pt_now_ms(), served = 0, capped_out = 0;
    ap_counters c0, c1;
    if ((rc = ap_counters_read(db, &c0, err)) != 0)
        return rc;
    double t_choose = 0, t_log = 0;
    for (int k = 0; k < per_user && rc == 0; k++)
        for (int u = 0; u < users && rc == 0; u++) {
            char user[32], unit[64], campaign[64];
            snprintf(user, sizeof user, "cookie%05d", u);
            double t = ap_now_s();
            rc = ap_ads_choose(db, "cnn", "banner", user, now + k * 60000, &rng, unit, campaign,
                               err);
            t_choose += ap_now_s() - t;
            if (rc == MD_NOTFOUND) {
                capped_out++;
                rc = 0;
                continue;
            }
            t = ap_now_s();
            if (rc == 0)
                rc = ap_ads_log_impression(db, user, campaign, unit, "cnn", "banner",
                                           now + k * 60000, err);
            t_log += ap_now_s() - t;
            served++;
        }
    if (rc || (rc = ap_counters_read(db, &c1, err)) != 0)
        return rc;
    ap_counters d = ap_counters_diff(&c0, &c1);
    int64_t requests = (int64_t)users * per_user;
    ap_row_add(r, (double)requests, "", "ad requests (%d users x %d, one a minute each)", users,
               per_user);
    ap_row_add(r, (double)served, "", "ads served (4 ad units: each user capped after 4)");
    ap_row_add(r, requests / (t_choose > 0 ? t_choose : 1e-9), "req/s",
               "choose_ad with frequency capping");
    ap_row_add(r, served / (t_log > 0 ? t_log : 1e-9), "upd/s",
               "impression log updates ($push, upsert)");
    ap_row_add(r, served ? (double)d.bytes_written / served : 0, "B",
               "bytes written per impression");
    ap_row_add(r, (double)d.moves, "", "profile document moves");

    /* Keyword targeting. */
    const char *q[] = {"performance", "car"};
    char unit[64];
    rc = ap_ads_choose_keywords(db, "cnn", "search", NULL, q, 2, now, &rng, unit, err);
    if (rc)
        return rc;
    bool bmw = strcmp(unit, "search1") == 0; /* bmw's: 200*log(3.1) > 250*log(2.1) */

    ap_claim_set(r, 0, zone.docs_examined == 1 && strcmp(zone.index, "site_id_1_zone_id_1") == 0,
                 "the zone lookup examines %lld document through %s; the rest is "
                 "application code", (long long)zone.docs_examined, zone.index);
    ap_claim_set(r, 1, served == (int64_t)users * 4 && capped_out == requests - served,
                 "%lld of %lld requests served: each user saw each of the 4 ad units once a "
                 "day, the rest found every ad capped",
                 (long long)served, (long long)requests);
    ap_claim_set(r, 2, bmw,
                 "query {performance, car}: chose %s (bmw 200 x log(3.1) = %.0f beats "
                 "mercedes 250 x log(2.1) = %.0f)",
                 unit, 200 * log(3.1), 250 * log(2.1));
    (void)engine;
    return 0;
}

const ap_usecase ap_usecase_ads = {
    .name = "ap_ads",
    .chapter = "Ch.7 Online Advertising Networks",
    .title = "Ad Serving",
    .pages = "pp.121-128",
    .demonstrates = "one indexed zone read per request, choice in the application; "
                    "frequency capping from an embedded per-user impression log",
    .nclaims = 3,
    .claims = {
        {"Choosing an ad is one indexed find_one on (site_id, zone_id) plus application code",
         NULL},
        {"Frequency capping: an ad unit the user saw in the last day is not served again", NULL},
        {"Keyword targeting: ads scored ecpm x log(1.1 + matching keywords) in the application",
         NULL},
    },
    .measure = ads_measure,
};
