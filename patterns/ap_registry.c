/*
 * ap_registry.c -- ap_usecases[], the use cases of "MongoDB Applied Design
 * Patterns" in the book's order.  build/patterns (runner_ap.c), its report
 * and the tests walk it, so a use case appears everywhere once it is
 * listed here.
 */
#include "ap.h"

const ap_usecase *const ap_usecases[] = {
    /* Ch.5 */
    &ap_usecase_catalog,
    &ap_usecase_category,
    /* Ch.6 */
    &ap_usecase_cms,
    &ap_usecase_comments,
    /* Ch.7 */
    &ap_usecase_ads,
    /* Ch.8 */
    &ap_usecase_social,
    /* Ch.9 */
    &ap_usecase_gaming,
    NULL,
};
