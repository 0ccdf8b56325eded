/*
 * ap_registry.c -- ap_usecases[], the use cases of "MongoDB Applied Design
 * Patterns" in the book's order.  build/patterns (runner_ap.c), its report
 * and the tests walk it, so a use case appears everywhere once it is
 * listed here.
 */
#include "ap.h"

const ap_usecase *const ap_usecases[] = {
    /* Part I: design rules */
    &ap_usecase_embed,        /* ch.1 */
    &ap_usecase_polymorphic,  /* ch.2 */
    &ap_usecase_txn,          /* ch.3 */
    /* Part II: use cases */
    &ap_usecase_logs,         /* ch.4 */
    &ap_usecase_preagg,       /* ch.4 */
    &ap_usecase_hieragg,      /* ch.4 */
    &ap_usecase_catalog,      /* ch.5 */
    &ap_usecase_category,     /* ch.5 */
    &ap_usecase_inventory,    /* ch.5 (the 2.6 edition's) */
    &ap_usecase_cms,          /* ch.6 */
    &ap_usecase_comments,     /* ch.6 */
    &ap_usecase_ads,          /* ch.7 */
    &ap_usecase_social,       /* ch.8 */
    &ap_usecase_gaming,       /* ch.9 */
    NULL,
};
