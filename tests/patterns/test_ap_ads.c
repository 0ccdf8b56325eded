/*
 * test_ap_ads.c -- "Online Advertising" and "Online Gaming"
 * (patterns/ap_ads.c, ap_gaming.c) on every engine.  Ads: the zone's
 * best-eCPM group served at random, frequency capping for a day,
 * keyword scoring, deactivating a campaign everywhere.  Gaming: the
 * display data, picking up, moving between rooms, taking an item out of
 * a container, buying with the guarded debit and its rollback, and a
 * race of several players for one item that only one wins.
 */
#include "ap.h"
#include "pt_test_util.h"

#define DAY 86400000LL

static void zones(ptt_db *t)
{
    static const char *const kw_car[] = {"car", "luxury", "style"};
    static const char *const kw_perf[] = {"car", "performance"};
    ap_ad banner[] = {
        {"bmw:c201204_eclass_1", "banner12", 200, NULL, 0},
        {"mercedes:c201204_sclass_4", "banner23a", 250, NULL, 0},
        {"mercedes:c201204_sclass_4", "banner23b", 250, NULL, 0},
    };
    ap_ad search[] = {
        {"mercedes:c201204_sclass_4", "search1", 250, kw_car, 3},
        {"bmw:c201204_eclass_1", "search9", 200, kw_perf, 2},
    };
    md_error err;
    cr_assert_eq(ap_ads_create_indexes(t->db, &err), 0, "%s", err.message);
    cr_assert_eq(ap_ads_create_zone(t->db, "cnn", "banner", banner, 3, &err), 0);
    cr_assert_eq(ap_ads_create_zone(t->db, "cnn", "search", search, 2, &err), 0);
    cr_assert_eq(ap_ads_create_zone(t->db, "bbc", "banner", banner, 3, &err), 0);
}

Test(ap_ads, choose_cap_keywords_deactivate)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        zones(&t);
        /* stored sorted by ecpm desc */
        bson_t *r = PTT_OK(&t, "{\"find\": \"ad.zone\", \"filter\": {\"site_id\": \"cnn\", "
                               "\"zone_id\": \"banner\"}}");
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.ads.0.ecpm"), 250);
        cr_assert_eq(ptt_i64(r, "cursor.firstBatch.0.ads.2.ecpm"), 200);
        bson_destroy(r);
        /* design 1: a random ad of the best group, both over many draws */
        uint64_t rng = 7;
        int seen_a = 0, seen_b = 0;
        int64_t now = pt_now_ms();
        for (int i = 0; i < 40; i++) {
            char unit[64], campaign[64];
            cr_assert_eq(ap_ads_choose(t.db, "cnn", "banner", NULL, now, &rng, unit, campaign,
                                       &err), 0, "%s", err.message);
            seen_a += strcmp(unit, "banner23a") == 0;
            seen_b += strcmp(unit, "banner23b") == 0;
            cr_assert_str_eq(campaign, "mercedes:c201204_sclass_4");
        }
        cr_assert(seen_a > 0 && seen_b > 0 && seen_a + seen_b == 40);
        char unit[64], campaign[64];
        cr_assert_eq(ap_ads_choose(t.db, "cnn", "nozone", NULL, now, &rng, unit, NULL, &err),
                     MD_NOTFOUND);
        /* design 2: seen today -> capped; seen two days ago -> not */
        cr_assert_eq(ap_ads_log_impression(t.db, "cookie1", "mercedes:c201204_sclass_4",
                                           "banner23a", "cnn", "banner", now - 2 * DAY, &err),
                     0, "%s", err.message);
        cr_assert_eq(ap_ads_log_impression(t.db, "cookie1", "mercedes:c201204_sclass_4",
                                           "banner23b", "cnn", "banner", now - 3600000, &err), 0);
        for (int i = 0; i < 10; i++) {
            cr_assert_eq(ap_ads_choose(t.db, "cnn", "banner", "cookie1", now, &rng, unit,
                                       campaign, &err), 0);
            cr_assert_str_eq(unit, "banner23a");
        }
        cr_assert_eq(ap_ads_log_impression(t.db, "cookie1", "mercedes:c201204_sclass_4",
                                           "banner23a", "cnn", "banner", now, &err), 0);
        cr_assert_eq(ap_ads_choose(t.db, "cnn", "banner", "cookie1", now, &rng, unit, campaign,
                                   &err), 0);
        cr_assert_str_eq(unit, "banner12");
        cr_assert_eq(ptt_count(&t, AP_AD_USER, "{\"advertisers.mercedes.impressions.2."
                                               "ad_unit_id\": \"banner23a\"}"), 1);
        cr_assert_eq(ap_ads_log_impression(t.db, "cookie1", "bmw:c201204_eclass_1", "banner12",
                                           "cnn", "banner", now, &err), 0);
        cr_assert_eq(ap_ads_choose(t.db, "cnn", "banner", "cookie1", now, &rng, unit, campaign,
                                   &err), MD_NOTFOUND, "every ad capped");
        cr_assert_eq(ap_ads_log_impression(t.db, "c", "bad.advertiser:x", "u", "s", "z", now,
                                           &err), MD_EINVAL);
        /* design 3: 200 * log(3.1) beats 250 * log(1.1 + 1) for {car, performance} */
        const char *q1[] = {"car", "performance"}, *q2[] = {"car", "luxury"};
        cr_assert_eq(ap_ads_choose_keywords(t.db, "cnn", "search", NULL, q1, 2, now, &rng,
                                            unit, &err), 0);
        cr_assert_str_eq(unit, "search9");
        cr_assert_eq(ap_ads_choose_keywords(t.db, "cnn", "search", NULL, q2, 2, now, &rng,
                                            unit, &err), 0);
        cr_assert_str_eq(unit, "search1");
        /* the campaign ends: pulled from every zone */
        int64_t zones_mod = 0;
        cr_assert_eq(ap_ads_deactivate_campaign(t.db, "mercedes:c201204_sclass_4", &zones_mod,
                                                &err), 0, "%s", err.message);
        cr_assert_eq(zones_mod, 3);
        cr_assert_eq(ptt_count(&t, AP_AD_ZONE, "{\"ads.campaign_id\": "
                                               "\"mercedes:c201204_sclass_4\"}"), 0);
        cr_assert_eq(ap_ads_choose(t.db, "bbc", "banner", NULL, now, &rng, unit, NULL, &err), 0);
        cr_assert_str_eq(unit, "banner12");
        ap_plan p;
        bson_t *f = BCON_NEW("ads.campaign_id", "bmw:c201204_eclass_1");
        cr_assert_eq(ap_explain_find(t.db, AP_AD_ZONE, f, NULL, NULL, &p, &err), 0);
        cr_assert_str_eq(p.index, "ads.campaign_id_1");
        bson_destroy(f);
    }
}

static int64_t gold(ptt_db *t, const bson_oid_t *id)
{
    char oid[25];
    bson_oid_to_string(id, oid);
    bson_t *r = PTT_OK(t, "{\"find\": \"character\", \"filter\": {\"_id\": {\"$oid\": \"%s\"}}}",
                       oid);
    int64_t g = ptt_i64(r, "cursor.firstBatch.0.gold");
    bson_destroy(r);
    return g;
}

Test(ap_gaming, turns)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t tim, shop, scroll, backpack, potion;
        cr_assert_eq(ap_gaming_seed(t.db, &tim, &shop, &scroll, &backpack, &potion, &err), 0,
                     "%s", err.message);
        char buf[512];
        cr_assert_eq(ap_gaming_display(t.db, &tim, buf, sizeof buf, &err), 0);
        cr_assert_str_eq(buf, "head=+3 wizard's hat;body=wizard's robe;feet=old boots;"
                              "both=+2 quarterstaff");
        /* out of the backpack, once */
        cr_assert_eq(ap_gaming_move_to_active(t.db, &tim, &backpack, &potion, &err), 0, "%s",
                     err.message);
        cr_assert_eq(ap_gaming_move_to_active(t.db, &tim, &backpack, &potion, &err),
                     MD_NOTFOUND);
        char oid[25], q[256];
        bson_oid_to_string(&potion, oid);
        snprintf(q, sizeof q, "{\"inventory.id\": {\"$oid\": \"%s\"}}", oid);
        cr_assert_eq(ptt_count(&t, AP_GAME_CHARACTER, q), 1, "in the active inventory");
        cr_assert_eq(ptt_count(&t, AP_GAME_ITEM, q), 0, "out of the backpack item");
        snprintf(q, sizeof q, "{\"inventory.inventory.id\": {\"$oid\": \"%s\"}}", oid);
        cr_assert_eq(ptt_count(&t, AP_GAME_CHARACTER, q), 0, "out of the carried backpack");
        /* buy the scroll lying in maze-1 (price 50) */
        cr_assert_eq(gold(&t, &tim), 523);
        cr_assert_eq(ap_gaming_buy(t.db, &tim, &shop, &scroll, &err), 0, "%s", err.message);
        cr_assert_eq(gold(&t, &tim), 473);
        cr_assert_eq(gold(&t, &shop), 50);
        bson_oid_to_string(&scroll, oid);
        snprintf(q, sizeof q, "{\"_id\": \"maze-1\", \"inventory.id\": {\"$oid\": \"%s\"}}",
                 oid);
        cr_assert_eq(ptt_count(&t, AP_GAME_LOCATION, q), 0);
        snprintf(q, sizeof q, "{\"location.inventory.id\": {\"$oid\": \"%s\"}}", oid);
        cr_assert_eq(ptt_count(&t, AP_GAME_CHARACTER, q), 0);
        /* again: the item is gone (Conflict), the debit rolled back */
        cr_assert_eq(ap_gaming_buy(t.db, &tim, &shop, &scroll, &err), MD_NOTFOUND);
        cr_assert_eq(gold(&t, &tim), 473);
        cr_assert_eq(gold(&t, &shop), 50);
        /* too poor */
        bson_t *r = PTT_OK(&t, "{\"update\": \"character\", \"updates\": [{\"q\": {\"name\": "
                               "\"Tim\"}, \"u\": {\"$set\": {\"gold\": 10}}}]}");
        bson_destroy(r);
        cr_assert_eq(ap_gaming_buy(t.db, &tim, &shop, &scroll, &err), MD_NOTFOUND);
        cr_assert(strstr(err.message, "InsufficientFunds"), "%s", err.message);
        cr_assert_eq(gold(&t, &tim), 10);
        /* move north to maze-2 */
        cr_assert_eq(ap_gaming_move(t.db, &tim, "n", &err), 0, "%s", err.message);
        cr_assert_eq(ap_gaming_move(t.db, &tim, "up", &err), MD_NOTFOUND);
        bson_oid_to_string(&tim, oid);
        snprintf(q, sizeof q, "{\"_id\": {\"$oid\": \"%s\"}, \"location.id\": \"maze-2\", "
                              "\"location.players.id\": {\"$oid\": \"%s\"}}", oid, oid);
        cr_assert_eq(ptt_count(&t, AP_GAME_CHARACTER, q), 1);
        snprintf(q, sizeof q, "{\"players.id\": {\"$oid\": \"%s\"}}", oid);
        cr_assert_eq(ptt_count(&t, AP_GAME_LOCATION, q), 1);
        cr_assert_eq(ptt_count(&t, AP_GAME_LOCATION, "{\"_id\": \"maze-1\", \"players.name\": "
                                                     "\"Tim\"}"), 0);
    }
}

typedef struct racer {
    md_db *db;
    bson_oid_t who, item;
    int rc;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    md_error err;
    r->rc = ap_gaming_pick_up(r->db, &r->who, &r->item, &err);
    return NULL;
}

/* Several characters in maze-1 reach for the same scroll at once. */
Test(ap_gaming, one_winner_per_item)
{
    ptt_db t;
    PTT_FOR_EACH_ENGINE(t) {
        md_error err;
        bson_oid_t tim, shop, scroll, backpack, potion;
        cr_assert_eq(ap_gaming_seed(t.db, &tim, &shop, &scroll, &backpack, &potion, &err), 0);
        enum { N = 6 };
        racer rs[N];
        pthread_t th[N];
        char oid[25];
        bson_oid_to_string(&tim, oid);
        for (int i = 0; i < N; i++) {
            /* clones of Tim, standing in the same room */
            bson_oid_init(&rs[i].who, NULL);
            char id2[25];
            bson_oid_to_string(&rs[i].who, id2);
            bson_t *r = PTT_OK(&t, "{\"aggregate\": \"character\", \"pipeline\": [{\"$match\": "
                                   "{\"_id\": {\"$oid\": \"%s\"}}}, {\"$project\": {\"_id\": 0}}], "
                                   "\"cursor\": {}}", oid);
            bson_iter_t it;
            cr_assert(ptt_find(r, "cursor.firstBatch.0", &it));
            const uint8_t *d;
            uint32_t l;
            bson_t src, doc = BSON_INITIALIZER;
            bson_iter_document(&it, &l, &d);
            bson_init_static(&src, d, l);
            BSON_APPEND_OID(&doc, "_id", &rs[i].who);
            bson_concat(&doc, &src);
            cr_assert_eq(ap_insert(t.db, AP_GAME_CHARACTER, &doc, NULL, &err), 0, "%s",
                         err.message);
            bson_destroy(&doc);
            bson_destroy(r);
            rs[i].db = t.db;
            rs[i].item = scroll;
        }
        for (int i = 0; i < N; i++)
            cr_assert_eq(pthread_create(&th[i], NULL, race, &rs[i]), 0);
        int won = 0;
        for (int i = 0; i < N; i++) {
            pthread_join(th[i], NULL);
            cr_assert(rs[i].rc == 0 || rs[i].rc == MD_NOTFOUND, "rc %d", rs[i].rc);
            won += rs[i].rc == 0;
        }
        cr_assert_eq(won, 1, "[%s] %d players picked up the one scroll", t.engine, won);
        bson_oid_to_string(&scroll, oid);
        char q[128];
        snprintf(q, sizeof q, "{\"inventory.id\": {\"$oid\": \"%s\"}}", oid);
        cr_assert_eq(ptt_count(&t, AP_GAME_CHARACTER, q), 1);
    }
}
