/*
 * q_geo_2d.c -- 2d indexes: MongoDB's GeoHash over legacy coordinate pairs.
 *
 * A 2d index has bits (1..32, default 26), min and max (default -180 and
 * 180).  A coordinate maps to an unsigned 32-bit cell number,
 * (v - min) * 2^32 / (max - min) (max itself moved just inside); the hash
 * interleaves x and y from their most significant bits (x first) into 64
 * bits, of which the first 2 * bits are kept (GeoHashConverter::hash,
 * GeoHash(x, y, bits)).  The key is the hash as BinData subtype 128 of its
 * 8 bytes big-endian, as GeoHash::appendHashMin writes it, so bounds look
 * like MongoDB's.  Errors as get2DKeys: 13067 empty, 13068 one element,
 * 13026 non-numbers, 13027 out of [min, max].
 *
 * A box is searched as the geohash cells of one level that meet it, each
 * cell a key interval (its prefix followed by anything); the level is the
 * finest at which the box needs at most 64 cells.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "q_geo.h"
#include "q_path.h"

static uint64_t interleave(uint32_t x, uint32_t y)
{
    uint64_t h = 0;
    for (int i = 0; i < 32; i++) {
        h |= (uint64_t)((x >> (31 - i)) & 1) << (63 - 2 * i);
        h |= (uint64_t)((y >> (31 - i)) & 1) << (62 - 2 * i);
    }
    return h;
}

static uint32_t scale(const q_geo_params *gp, double v)
{
    double err = ldexp(gp->max - gp->min, -gp->bits);
    if (v >= gp->max)
        v = gp->max - err / 2;
    double s = (v - gp->min) * (4294967296.0 / (gp->max - gp->min));
    return s <= 0 ? 0 : s >= 4294967295.0 ? 4294967295u : (uint32_t)s;
}

static uint64_t keep_bits(uint64_t h, int bits)
{
    return bits >= 32 ? h : h & ~((1ull << (64 - 2 * bits)) - 1);
}

int q_geo2d_hash(const q_geo_params *gp, double x, double y, uint64_t *h, md_error *err)
{
    if (!(x >= gp->min && x <= gp->max && y >= gp->min && y <= gp->max))
        return q_err(err, MD_EINVAL, 13027, "point not in interval of [ %g, %g ) :: caused by :: "
                     "{ 0: %g, 1: %g }", gp->min, gp->max, x, y);
    *h = keep_bits(interleave(scale(gp, x), scale(gp, y)), gp->bits);
    return 0;
}

void q_geo2d_key(uint64_t h, q_buf *out)
{
    uint8_t b[8];
    bson_t one = BSON_INITIALIZER;
    bson_iter_t v;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(h >> (56 - 8 * i));
    bson_append_binary(&one, "k", 1, BSON_SUBTYPE_USER, b, 8);
    bson_iter_init_find(&v, &one, "k");
    q_key_append_value(out, &v, false);
    bson_destroy(&one);
}

static void render_hash(q_buf *b, const char *pre, uint64_t h, const char *post)
{
    q_buf_printf(b, "%sBinData(128, %016llX)%s", pre, (unsigned long long)h, post);
}

static int cmp_range(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

void q_geo2d_box_ranges(const q_geo_params *gp, q_geo_pt lo, q_geo_pt hi, q_ival **iv,
                        size_t *n)
{
    lo.x = fmax(lo.x, gp->min), lo.y = fmax(lo.y, gp->min);
    hi.x = fmin(hi.x, gp->max), hi.y = fmin(hi.y, gp->max);
    *iv = NULL;
    *n = 0;
    if (lo.x > hi.x || lo.y > hi.y)
        return;
    uint32_t x0 = scale(gp, lo.x), x1 = scale(gp, hi.x), y0 = scale(gp, lo.y),
             y1 = scale(gp, hi.y);
    int level = gp->bits;
    while (level > 0) {
        uint64_t nx = (uint64_t)(x1 >> (32 - level)) - (x0 >> (32 - level)) + 1;
        uint64_t ny = (uint64_t)(y1 >> (32 - level)) - (y0 >> (32 - level)) + 1;
        if (nx <= 64 && ny <= 64 && nx * ny <= 64)
            break;
        level--;
    }
    size_t cap = 0, nr = 0;
    uint64_t(*r)[2] = NULL;
    uint32_t sh = 32 - (uint32_t)level;
    for (uint64_t cx = level ? x0 >> sh : 0; cx <= (level ? x1 >> sh : 0); cx++)
        for (uint64_t cy = level ? y0 >> sh : 0; cy <= (level ? y1 >> sh : 0); cy++) {
            uint64_t pre = level ? interleave((uint32_t)(cx << sh), (uint32_t)(cy << sh)) : 0;
            uint64_t mask = level ? (1ull << (64 - 2 * level)) - 1 : ~0ull;
            if (nr == cap) {
                cap = cap ? cap * 2 : 16;
                r = realloc(r, cap * sizeof *r);
                assert(r);
            }
            r[nr][0] = keep_bits(pre, gp->bits);
            r[nr++][1] = keep_bits(pre | mask, gp->bits);
        }
    /* cells next to each other on the curve make one interval */
    q_sort(r, nr, sizeof *r, cmp_range);
    for (size_t i = 0; i < nr;) {
        uint64_t a = r[i][0], b = r[i][1];
        for (i++; i < nr && b != ~0ull && r[i][0] <= b + 1; i++)
            b = r[i][1] > b ? r[i][1] : b;
        {
            *iv = realloc(*iv, (*n + 1) * sizeof **iv);
            assert(*iv);
            q_ival *x = &(*iv)[(*n)++];
            memset(x, 0, sizeof *x);
            q_buf_init(&x->lo), q_buf_init(&x->hi), q_buf_init(&x->los), q_buf_init(&x->his);
            q_geo2d_key(a, &x->lo);
            q_geo2d_key(b, &x->hi);
            x->lo_incl = x->hi_incl = true;
            x->point = a == b;
            render_hash(&x->los, "[", a, "");
            render_hash(&x->his, "", b, "]");
        }
    }
    free(r);
}
