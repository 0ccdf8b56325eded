/*
 * q_arena.c -- per-thread memory for the temporary objects of one
 * operation (a parsed update's tree, its paths and its copy of the update
 * document): a bump allocator over 4 KB chunks.  Objects are never freed
 * one by one; q_arena_release() ends them all at once, and its chunks go
 * back to the calling thread's spare list (at most Q_ARENA_SPARES kept), so
 * that an operation repeated in steady state allocates nothing.  A request
 * larger than a chunk gets a chunk of its own, freed on release.
 *
 * Spare chunks are freed when their thread exits (a pthread key's
 * destructor).
 */
#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "q.h"

#define Q_ARENA_CHUNK 4096
#define Q_ARENA_SPARES 8
#define Q_ARENA_ALIGN 16

struct q_arena_chunk {
    struct q_arena_chunk *next;
    size_t cap, used;
    _Alignas(Q_ARENA_ALIGN) uint8_t data[];
};

static __thread struct q_arena_chunk *spares;
static __thread int nspares;
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

/* At thread exit (the key's destructor runs in the exiting thread): the
 * thread's variables are forgotten first, so that a later destructor
 * releasing an arena starts a new list, which this frees again. */
static void spares_free(void *head)
{
    spares = NULL;
    nspares = 0;
    for (struct q_arena_chunk *c = head, *next; c; c = next) {
        next = c->next;
        bson_free(c);
    }
}

static void spare_key_make(void)
{
    pthread_key_create(&spare_key, spares_free);
}

static struct q_arena_chunk *chunk_get(size_t need)
{
    struct q_arena_chunk *c;
    if (need <= Q_ARENA_CHUNK && spares) {
        c = spares;
        spares = c->next;
        nspares--;
        pthread_setspecific(spare_key, spares);
    } else {
        size_t cap = need > Q_ARENA_CHUNK ? need : Q_ARENA_CHUNK;
        c = bson_aligned_alloc(Q_ARENA_ALIGN, sizeof *c + cap);
        c->cap = cap;
    }
    c->used = 0;
    c->next = NULL;
    return c;
}

/* Bytes to skip from c's free space for `align`. */
static size_t pad_for(const struct q_arena_chunk *c, size_t align)
{
    uintptr_t at = (uintptr_t)(c->data + c->used);
    return (size_t)((align - at % align) % align);
}

void *q_arena_alloc_aligned(q_arena *a, size_t n, size_t align)
{
    assert(a && align && (align & (align - 1)) == 0);
    if (align < Q_ARENA_ALIGN)
        align = Q_ARENA_ALIGN;
    n = (n + Q_ARENA_ALIGN - 1) & ~(size_t)(Q_ARENA_ALIGN - 1);
    if (n == 0)
        n = Q_ARENA_ALIGN;
    struct q_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n + pad_for(c, align)) {
        c = chunk_get(n + align);
        c->next = a->head;
        a->head = c;
    }
    c->used += pad_for(c, align);
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void *q_arena_alloc(q_arena *a, size_t n)
{
    return q_arena_alloc_aligned(a, n, Q_ARENA_ALIGN);
}

char *q_arena_strdup(q_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = q_arena_alloc(a, n);
    memcpy(p, s, n);
    return p;
}

void q_arena_release(q_arena *a)
{
    if (!a)
        return;
    pthread_once(&spare_once, spare_key_make);
    for (struct q_arena_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        if (c->cap == Q_ARENA_CHUNK && nspares < Q_ARENA_SPARES) {
            c->next = spares;
            spares = c;
            nspares++;
        } else {
            bson_free(c);
        }
    }
    pthread_setspecific(spare_key, spares);
    a->head = NULL;
}
