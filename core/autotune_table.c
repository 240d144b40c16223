/* The autotune cache's in-memory table: entries sorted by key (see autotune_file.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autotune_file.h"
#include "internal.h"

int at_valid_text(const char *s, size_t max)
{
    if (!s)
        return 0;
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, n++)
        if (*p < 0x20 || *p == 0x7f || n + 1 >= max)
            return 0;
    return n > 0;
}

int at_valid_ms(double ms) { return isfinite(ms) && ms >= 0.0 && ms <= AT_MS_MAX; }

/* Index of key, or of where it would go (*found 0). */
static size_t search(const at_table_t *t, const char *key, int *found)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->v[mid].key, key);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

at_entry_t *at_table_find(const at_table_t *t, const char *key)
{
    int found;
    size_t i = search(t, key, &found);
    return found ? &t->v[i] : NULL;
}

int at_table_put(at_table_t *t, const char *key, const char *winner, double ms, int dirty)
{
    int found;
    size_t i = search(t, key, &found);
    if (!found) {
        if (t->n == t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 16;
            at_entry_t *v = malloc(cap * sizeof *v);
            if (!v)
                return -1;
            if (t->n)
                memcpy(v, t->v, t->n * sizeof *v);
            free(t->v);
            t->v = v;
            t->cap = cap;
        }
        memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof *t->v);
        t->n++;
        rudnn_copy_str(t->v[i].key, sizeof t->v[i].key, key);
    }
    rudnn_copy_str(t->v[i].winner, sizeof t->v[i].winner, winner);
    t->v[i].ms = ms;
    t->v[i].dirty = dirty;
    return 0;
}

void at_table_free(at_table_t *t)
{
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}
