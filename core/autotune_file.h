/* The autotune cache's pieces below core/autotune.c: a sorted table of entries
 * (core/autotune_table.c) and the cache file (core/autotune_file.c). Not thread-safe by
 * themselves: core/autotune.c calls them under its mutex. They allocate with plain malloc, not
 * rudnn_host_malloc: running short there is no error (a lookup misses, a store stays in memory),
 * so rudnn/debug.h's fault walk does not count it, as for the OpenCL disk cache.
 *
 * File format, version 1 (text, one record a line, '\n' line ends):
 *   rudnn-autotune 1
 *   <key>\t<winner>\t<ms>                 one line per entry, keys sorted, each key once
 *   end <count> <checksum>                 count: entry lines; checksum: FNV-1a 64 (16 hex
 *                                          digits) of every byte before this line
 * <ms> is "<digits>.<6 digits>" (nanoseconds; no locale involved). Nothing may follow the
 * trailer. A file that breaks any rule is untrusted as a whole. */
#ifndef RUDNN_CORE_AUTOTUNE_FILE_H
#define RUDNN_CORE_AUTOTUNE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "autotune.h"

#define AT_FORMAT_NAME "rudnn-autotune"
#define AT_FORMAT_VERSION 1
/* Longest entry line, '\n' excluded: key, winner, two tabs and a time of at most 1e9 ms. */
#define AT_LINE_MAX (RUDNN_AUTOTUNE_KEY_MAX + RUDNN_AUTOTUNE_NAME_MAX + 32)
/* Largest file read: far above any real cache (about 1 KiB a line). */
#define AT_FILE_MAX ((size_t)16 << 20)
/* Times above this (about 11 days) are not kept. */
#define AT_MS_MAX 1e9

typedef struct at_entry {
    char key[RUDNN_AUTOTUNE_KEY_MAX];
    char winner[RUDNN_AUTOTUNE_NAME_MAX];
    double ms;
    int dirty; /* stored by this process and not yet in the file */
} at_entry_t;

typedef struct at_table {
    at_entry_t *v; /* sorted by key (strcmp) */
    size_t n, cap;
} at_table_t;

/* ---- core/autotune_table.c ---- */

/* 1 when s (key or winner) is 1..max-1 bytes without control characters (tab, newline, ...). */
int at_valid_text(const char *s, size_t max);
/* 1 when ms is finite and in [0, AT_MS_MAX]. */
int at_valid_ms(double ms);
at_entry_t *at_table_find(const at_table_t *t, const char *key);
/* Inserts or replaces key (the caller validated it). 0, or -1 when out of memory. */
int at_table_put(at_table_t *t, const char *key, const char *winner, double ms, int dirty);
void at_table_free(at_table_t *t);

/* ---- core/autotune_file.c ---- */

uint64_t at_fnv1a(uint64_t h, const void *data, size_t n);
#define AT_FNV_OFFSET 0xcbf29ce484222325ull

/* Reads the file at path into out (emptied first). 0: read and trusted; 1: no such file; -1:
 * unreadable or untrusted, why (cap bytes) says why, out empty; -2: out of memory (the file may
 * be fine: it must not be replaced). */
int at_file_read(const char *path, at_table_t *out, char *why, size_t cap);

/* Creates path's folder (mkdir -p, 0755) and takes an exclusive flock on "<path>.lock"; the
 * descriptor in *lock_fd. 0, or -1 with why. */
int at_file_lock(const char *path, int *lock_fd, char *why, size_t cap);
void at_file_unlock(int lock_fd);

/* Writes t as the file at path: "<path>.tmp.<pid>.<n>", fsync, rename over path. 0, or -1 with
 * why (the temporary file removed). Call it holding the lock. */
int at_file_write(const char *path, const at_table_t *t, char *why, size_t cap);

#endif
