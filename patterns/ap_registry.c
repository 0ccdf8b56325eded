/*
 * ap_registry.c -- ap_usecases[], the use cases of "MongoDB Applied Design
 * Patterns" in the book's order.  build/patterns, the report and the tests
 * walk it, so a use case appears everywhere once it is listed here.
 */
#include "ap.h"

const ap_usecase *const ap_usecases[] = {
    /* Part I */
    &ap_usecase_embed,        /* ch.1 */
    &ap_usecase_polymorphic,  /* ch.2 */
    &ap_usecase_txn,          /* ch.3 */
    /* Part II */
    &ap_usecase_logs,         /* ch.4 */
    &ap_usecase_preagg,       /* ch.4 */
    &ap_usecase_hieragg,      /* ch.4 */
    &ap_usecase_inventory,    /* ch.5 (2.6) */
    NULL,
};
