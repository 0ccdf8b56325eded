/*
 * eng_registry.c -- the table of engines this build knows.  Each engine
 * module exports one `const eng_ops` and is listed here; nothing else in
 * engine/ or query/ names an engine.
 */
#include <string.h>

#include "eng.h"

extern const eng_ops mm_engine_ops;
extern const eng_ops eng_mem_ops;
extern const eng_ops bt_engine_ops;

static const eng_ops *const engines[] = {
    &mm_engine_ops,
    &eng_mem_ops,
    &bt_engine_ops,
    NULL,
};

const eng_ops *const *eng_engines(void)
{
    return engines;
}

const eng_ops *eng_find(const char *name)
{
    for (size_t i = 0; engines[i]; i++)
        if (strcmp(engines[i]->name, name) == 0)
            return engines[i];
    return NULL;
}

const eng_ops *eng_detect(const char *dir)
{
    for (size_t i = 0; engines[i]; i++)
        if (engines[i]->owns_dir && engines[i]->owns_dir(dir))
            return engines[i];
    return NULL;
}
