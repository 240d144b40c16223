/* rudnn-bench --tune-show: the autotune cache file as a table, one line per entry, the key split
 * into its parts (op, backend, device, driver, the rest). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rudnn/rudnn.h"
#include "tune.h"

enum { COL_OP, COL_BACKEND, COL_DEVICE, COL_DRIVER, COL_REST, COL_WINNER, COL_MS, COLS };
static const char *const headings[COLS] = {"op", "backend", "device", "driver", "shape/options", "winner", "ms"};

typedef struct row {
    char *cell[COLS];
} row_t;

typedef struct rows {
    row_t *v;
    int n, cap;
} rows_t;

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d) {
        fputs("rudnn-bench: out of host memory\n", stderr);
        exit(1);
    }
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* The key's first four '|' end op, backend, device and driver; the rest keeps its own '|'. */
static void add_row(void *arg, const char *key, const char *winner, double ms)
{
    rows_t *rows = arg;
    if (rows->n == rows->cap) {
        rows->cap = rows->cap ? rows->cap * 2 : 32;
        rows->v = realloc(rows->v, (size_t)rows->cap * sizeof *rows->v);
        if (!rows->v) {
            fputs("rudnn-bench: out of host memory\n", stderr);
            exit(1);
        }
    }
    row_t *r = &rows->v[rows->n++];
    const char *p = key;
    for (int c = COL_OP; c < COL_REST; c++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        r->cell[c] = dup_n(p, n);
        p += n + (bar ? 1 : 0);
    }
    r->cell[COL_REST] = dup_n(p, strlen(p));
    r->cell[COL_WINNER] = dup_n(winner, strlen(winner));
    char ms_text[32];
    snprintf(ms_text, sizeof ms_text, "%.3f", ms);
    r->cell[COL_MS] = dup_n(ms_text, strlen(ms_text));
}

static void print_line(const char *const *cells, const int *width)
{
    for (int c = 0; c < COLS; c++) {
        if (c == COL_MS)
            printf("%*s", width[c], cells[c]);
        else
            printf("%-*s  ", width[c], cells[c]);
    }
    putchar('\n');
}

int bench_tune_show(void)
{
    char path[4096];
    rudnn_status_t st = rudnn_autotune_cache_path(path, sizeof path);
    if (st != RUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "rudnn-bench: %s\n", rudnn_last_error());
        return 1;
    }
    printf("autotune cache: %s%s\n", path, rudnn_autotune_is_enabled() ? "" : " (RUDNN_AUTOTUNE=off: not used)");
    rows_t rows = {0};
    int n = rudnn_autotune_entries(add_row, &rows);
    if (n < 0) {
        printf("no entries: %s\n", rudnn_last_error());
        return 0;
    }
    if (rudnn_last_error()[0])
        printf("(%s)\n", rudnn_last_error());
    int width[COLS];
    for (int c = 0; c < COLS; c++)
        width[c] = (int)strlen(headings[c]);
    for (int i = 0; i < rows.n; i++)
        for (int c = 0; c < COLS; c++)
            if ((int)strlen(rows.v[i].cell[c]) > width[c])
                width[c] = (int)strlen(rows.v[i].cell[c]);
    print_line(headings, width);
    for (int i = 0; i < rows.n; i++) {
        print_line((const char *const *)rows.v[i].cell, width);
        for (int c = 0; c < COLS; c++)
            free(rows.v[i].cell[c]);
    }
    printf("%d entr%s\n", n, n == 1 ? "y" : "ies");
    free(rows.v);
    return 0;
}
