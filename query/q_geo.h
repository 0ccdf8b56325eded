/*
 * q_geo.h -- private to query/: geospatial indexes and operators.
 *
 *   q_geo.c       geometries: GeoJSON and legacy coordinate pairs parsed and
 *                 validated as MongoDB 3.6 does, distances (flat and on the
 *                 sphere), containment and intersection; the matcher's geo
 *                 predicates ($geoWithin $geoIntersects $near $nearSphere)
 *   q_geo_s2.c    S2 cell ids (cube faces, Hilbert curve) and coverings:
 *                 the keys of a 2dsphere (version 3) index and the key
 *                 intervals of a query region
 *   q_geo_2d.c    MongoDB's GeoHash: the keys of a 2d index (bits, min,
 *                 max) and the key intervals of a box
 *   q_geo_near.c  $near / $nearSphere: the search in growing rings over the
 *                 geo index, results sorted by distance; the index choice
 *
 * A geometry (q_geo) is a small tree: points, lines and polygons hold
 * their vertices in pts (a polygon's loops one after another, loop i
 * ending before loop_end[i], the closing vertex dropped); Multi* and
 * GeometryCollection hold kids.  Coordinates are x = longitude, y =
 * latitude for GeoJSON (spherical), x, y as given for legacy shapes.
 */
#ifndef Q_GEO_H
#define Q_GEO_H

#include "q_int.h"

#define Q_GEO_EARTH_M 6378100.0 /* kRadiusOfEarthInMeters */
#define Q_CODE_GEO_KEYS 16755   /* "Can't extract geo keys" */

enum q_geo_type {
    QG_POINT = 1, QG_LINE, QG_POLYGON, QG_MPOINT, QG_MLINE, QG_MPOLYGON, QG_COLLECTION,
    QG_BOX,           /* legacy $box: pts[0] lower left, pts[1] upper right */
    QG_CENTER,        /* legacy $center: pts[0], radius (flat) */
    QG_CENTER_SPHERE, /* $centerSphere: pts[0], radius in radians */
    QG_LPOLYGON,      /* legacy $polygon: one flat loop */
};

typedef struct q_geo_pt {
    double x, y;
} q_geo_pt;

typedef struct q_geo {
    int type;
    bool flat;     /* a legacy coordinate pair or shape (flat CRS) */
    q_geo_pt *pts;
    size_t npts;
    size_t *loop_end; /* QG_POLYGON */
    size_t nloops;
    double radius;
    struct q_geo **kids;
    size_t nkids;
} q_geo;

void q_geo_free(q_geo *g);

/* A legacy pair: an array or document whose first two values are numbers
 * (more are ignored).  False for anything else. */
bool q_geo_legacy_point(const bson_iter_t *it, q_geo_pt *out);
/*
 * The geometry a document holds at a geo path: GeoJSON ({type,
 * coordinates}) validated as a 2dsphere index does (coordinates in range,
 * rings closed, no duplicate vertices or crossing edges, holes inside the
 * shell), or a legacy pair (flat).  0 with *out, or MD_EINVAL with the
 * reason in err (code Q_CODE_GEO_KEYS's wording without the prefix).
 */
int q_geo_parse(const bson_iter_t *it, q_geo **out, md_error *err);
/* GeoJSON only ($geometry arguments): 0, or BadValue in err. */
int q_geo_parse_geojson(const bson_iter_t *it, q_geo **out, md_error *err);

/* ---- geometry on the sphere and the plane ------------------------------------- */
typedef struct q_geo_vec {
    double x, y, z;
} q_geo_vec;
q_geo_vec q_geo_vec_of(q_geo_pt p); /* lng/lat degrees -> unit vector */
double q_geo_angle(q_geo_vec a, q_geo_vec b); /* radians */
/* Distance from point p to geometry g: on the sphere in radians, or flat. */
double q_geo_distance(q_geo_pt p, const q_geo *g, bool sphere);
/* Does g lie within region (a polygon, multipolygon, box, center,
 * centerSphere or legacy polygon)? */
bool q_geo_within(const q_geo *g, const q_geo *region);
/* Do a and b intersect (on the sphere)? */
bool q_geo_intersects(const q_geo *a, const q_geo *b);
/* A bounding cap of g on the sphere: center and angle (radians). */
void q_geo_cap(const q_geo *g, q_geo_vec *center, double *angle);
/* A bounding box of g in its own coordinates. */
void q_geo_bbox(const q_geo *g, q_geo_pt *lo, q_geo_pt *hi);

/* ---- the matcher's predicates ---------------------------------------------------- */
enum { QGP_WITHIN = 1, QGP_INTERSECTS, QGP_NEAR };
typedef struct q_geo_pred {
    int op;
    q_geo *region;     /* WITHIN / INTERSECTS */
    q_geo_pt center;   /* NEAR */
    bool sphere;       /* NEAR: $nearSphere or a GeoJSON point */
    bool geojson;      /* NEAR: a GeoJSON point: distances in meters */
    bool near_sphere;  /* $nearSphere */
    double min_dist, max_dist; /* NEAR, in the query's units */
    char *path;        /* the field (set by the matcher), owned */
} q_geo_pred;
/* Parse the operator document of `path` that holds a geo operator
 * ($geoWithin, $within, $geoIntersects, $near, $nearSphere and their
 * $maxDistance / $minDistance); 0 with *out, or BadValue. */
int q_geo_pred_parse(const bson_iter_t *ops, q_geo_pred **out, md_error *err);
void q_geo_pred_free(q_geo_pred *p);
/* Does the value at `it` satisfy p?  (NEAR: its distance is in range.) */
bool q_geo_pred_match(const q_geo_pred *p, const bson_iter_t *it);
/* The distance of the value at it for NEAR p (query units), or -1 when it
 * holds no geometry. */
double q_geo_pred_distance(const q_geo_pred *p, const bson_iter_t *it);
/* Does the operator document hold a geo operator? (q_match.c) */
bool q_geo_is_op(const char *op);
/* The matcher's near predicate (q_match.c: a top-level leaf), or NULL. */
const q_geo_pred *q_matcher_near(const q_matcher *m);

/* ---- indexes ---------------------------------------------------------------------- */
enum { Q_GEO_NONE = 0, Q_GEO_2D = 1, Q_GEO_2DSPHERE = 2 };
/* "2d" / "2dsphere" -> Q_GEO_*, else 0. */
int q_geo_index_kind(const char *type);
/* createIndexes: check a key pattern holding a geo field and the spec's
 * geo options (bits, min, max, 2dsphereIndexVersion, finestIndexedLevel,
 * coarsestIndexedLevel, maxCellsInCovering); CannotCreateIndex or
 * MongoDB's own codes. */
int q_geo_check_spec(const bson_t *key, const bson_t *opts, md_error *err);
bool q_geo_is_option(const char *name);
/* Index parameters read from the spec (q_index_new). */
typedef struct q_geo_params {
    int kind;
    char field[128];   /* the geo field */
    int bits;          /* 2d */
    double min, max;   /* 2d */
    int finest, coarsest, max_cells; /* 2dsphere */
} q_geo_params;
void q_geo_params_init(q_geo_params *gp, const bson_t *spec);
/* Copy the geo options of index spec opts into spec (createIndexes), with
 * 2dsphereIndexVersion: 3 when a 2dsphere index does not name one. */
void q_geo_spec_append(const bson_t *key, const bson_t *opts, bson_t *spec);
/* The keys of doc in geo index ix (q_index_doc_keys). */
int q_geo_doc_keys(const q_index *ix, const bson_t *doc, q_keyset *out, md_error *err);

/* 2d (q_geo_2d.c) */
int q_geo2d_hash(const q_geo_params *gp, double x, double y, uint64_t *h, md_error *err);
void q_geo2d_key(uint64_t h, q_buf *out);
/* Key intervals [lo, hi] (encoded) covering the box; explain strings too. */
void q_geo2d_box_ranges(const q_geo_params *gp, q_geo_pt lo, q_geo_pt hi, q_ival **iv,
                        size_t *n);

/* 2dsphere (q_geo_s2.c) */
uint64_t q_s2_cell_of(q_geo_vec p, int level);
/* The covering of g (cells that meet g, between coarsest and finest, at
 * most max_cells as the coverer allows; a point: its leaf cell): ids into
 * *ids (malloc'ed). */
void q_s2_cover_geo(const q_geo *g, const q_geo_params *gp, uint64_t **ids, size_t *n);
/* Key intervals of the cap (center, angle): every cell key the index can
 * hold for a geometry that meets the cap. */
void q_s2_cap_ranges(q_geo_vec c, double angle, const q_geo_params *gp, q_ival **iv, size_t *n);
/* The same for the cells that meet geometry g ($geometry of $geoWithin /
 * $geoIntersects). */
void q_s2_geo_ranges(const q_geo *g, const q_geo_params *gp, q_ival **iv, size_t *n);
void q_s2_key(uint64_t id, q_buf *out);

/* The smallest distance (p's units) of the geometries doc holds at path,
 * or -1 when it holds none. */
double q_geo_doc_distance(const q_geo_pred *p, const char *path, const bson_t *doc);
/* The same, and the location value that has it (the $geoNear stage's
 * includeLocs): a copy into *loc the caller bson_value_destroy()s, or
 * BSON_TYPE_EOD when the document holds none. */
double q_geo_doc_nearest(const q_geo_pred *p, const char *path, const bson_t *doc,
                         bson_value_t *loc);
/* Key intervals of geo index ix: for a NEAR p, the region within r (p's
 * units) of its center; else p's region.  False when ix cannot serve. */
bool q_geo_region_ivals(const q_index *ix, const q_geo_pred *p, double r, q_ival **iv,
                        size_t *n);
/* Planner hooks (q_plan.c): intervals of geo index ix for filter; false
 * when the filter has no geo predicate the index serves. */
bool q_geo_bounds(const q_index *ix, const bson_t *filter, q_plan *p);
/* The near stage (q_cursor.c): when filter holds $near / $nearSphere,
 * run it: *docs (copies, sorted by distance, skip + limit of them when
 * limit > 0) and 0; Q_GEO_NOT_NEAR (1) when the query is not a near query. */
#define Q_GEO_NOT_NEAR 1
int q_geo_near_run(md_db *db, q_coll *c, const q_matcher *m, int64_t want, bson_t ***docs,
                   size_t *n, int64_t *keys, int64_t *nexamined, md_error *err);
/* The index a near query must use, or the error MongoDB gives. */
int q_geo_near_index(q_coll *c, const q_geo_pred *p, const char *path, q_index **out,
                     md_error *err);
/* q_plan_enumerate's hook: for a near query, the one plan (the geo index,
 * geo_near set, bounds of its $maxDistance); Q_GEO_NOT_NEAR otherwise. */
int q_geo_near_plan(q_coll *c, const bson_t *filter, q_plan **out, size_t *n, md_error *err);

#endif /* Q_GEO_H */
