/*
 * registry.c -- pt_patterns[], the book's chapters in order.  The runner,
 * the report and the tests walk it, so a pattern appears everywhere once it
 * is listed here.  (Kept apart from patterns.c so that a pattern's tests
 * can link its own file and patterns.c without every other pattern.)
 */
#include "patterns.h"

const pt_pattern *const pt_patterns[] = {
    /* 5.1 */
    &pt_pattern_queue,
    /* 5.2 */
    &pt_pattern_topics,
    /* 5.3 */
    &pt_pattern_metadata,
    /* 5.4 */
    &pt_pattern_matpath,
    /* 5.5 */
    &pt_pattern_cart_reservation,
    /* 5.6 */
    &pt_pattern_cart_no_reservation,
    /* 5.7 */
    &pt_pattern_theater,
    /* 5.8 */
    &pt_pattern_account,
    /* 5.9 */
    &pt_pattern_timeseries,
    /* 5.10 */
    &pt_pattern_slice_cache,
    /* 5.11 */
    &pt_pattern_i18n,
    NULL,
};
