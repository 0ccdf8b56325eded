/*
 * t_geo.h -- the geo tests' brute-force side: a seeded random number in a
 * range, the haversine angle between two (lng, lat) points in degrees, and
 * points sorted by distance (ties by id), which is the order $near and
 * $geoNear must return.
 */
#ifndef T_GEO_H
#define T_GEO_H

#include <math.h>

static inline double rnd(unsigned *s, double lo, double hi)
{
    *s = *s * 1103515245u + 12345u;
    return lo + (hi - lo) * ((*s >> 8) & 0xFFFFFF) / 16777216.0;
}

/* The angle in radians between (lng1, lat1) and (lng2, lat2), given in degrees. */
static inline double hav(double lng1, double lat1, double lng2, double lat2)
{
    double r = M_PI / 180, dl = (lat2 - lat1) * r, dg = (lng2 - lng1) * r;
    double a = sin(dl / 2) * sin(dl / 2) + cos(lat1 * r) * cos(lat2 * r) * sin(dg / 2) * sin(dg / 2);
    return 2 * atan2(sqrt(a), sqrt(1 - a));
}

typedef struct pt {
    int id;
    double x, y, d;
} pt;

static inline int cmp_pt(const void *a, const void *b)
{
    const pt *x = a, *y = b;
    return x->d < y->d ? -1 : x->d > y->d ? 1 : x->id - y->id;
}

#endif
