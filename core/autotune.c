/* The autotune cache (core/autotune.h): the process's table in memory, loaded from the cache
 * file once and merged back into it under the file lock on every store. One mutex guards the
 * table and all file I/O, so ops/ may call in from any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autotune.h"
#include "autotune_file.h"
#include "internal.h"
#include "rudnn/autotune.h"

#define WHY_MAX 512

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static at_table_t mem;     /* this process's view; dirty entries are not in the file yet */
static int loaded;         /* the file was read into mem */
static int warned_read;    /* "ignored" warning printed (once per process) */
static int warned_write;   /* "not written" warning printed (once per process) */
static int test_path_set;  /* rudnn_autotune_set_path_for_tests */
static char test_path[4096];
static char env_path[4096];
static pthread_once_t env_warn_once = PTHREAD_ONCE_INIT;

static void warn_env_value(void)
{
    const char *v = rudnn_env()->autotune_unknown;
    if (v)
        fprintf(stderr, "rudnn: RUDNN_AUTOTUNE=%s is neither \"on\" nor \"off\"; autotuning stays on\n", v);
}

int rudnn_autotune_enabled(void)
{
    pthread_once(&env_warn_once, warn_env_value);
    return !rudnn_env()->autotune_off;
}

/* The file this process uses, or NULL for none (no cache folder known). Call under lock. */
static const char *cache_path(void)
{
    if (test_path_set)
        return test_path[0] ? test_path : NULL;
    const rudnn_env_t *env = rudnn_env();
    if (env->autotune_cache)
        return env->autotune_cache;
    if (!env->cache_dir)
        return NULL;
    if (!env_path[0] &&
        snprintf(env_path, sizeof env_path, "%s/autotune.txt", env->cache_dir) >= (int)sizeof env_path)
        return NULL;
    return env_path;
}

static void warn_ignored(const char *path, const char *why)
{
    if (warned_read)
        return;
    warned_read = 1;
    fprintf(stderr, "rudnn: autotune cache %s ignored: %s; it will be rewritten\n", path, why);
}

static void warn_not_written(const char *path, const char *why)
{
    if (warned_write)
        return;
    warned_write = 1;
    fprintf(stderr, "rudnn: autotune cache %s not written: %s; the winners hold for this process only\n",
            path, why);
}

/* Reads the file into mem once; what this process stored and did not write yet wins. */
static void load_locked(void)
{
    if (loaded)
        return;
    loaded = 1;
    const char *path = cache_path();
    if (!path)
        return;
    at_table_t file = {0};
    char why[WHY_MAX];
    int rc = at_file_read(path, &file, why, sizeof why);
    if (rc == -1)
        warn_ignored(path, why);
    for (size_t i = 0; i < file.n; i++)
        if (!at_table_find(&mem, file.v[i].key))
            at_table_put(&mem, file.v[i].key, file.v[i].winner, file.v[i].ms, 0);
    at_table_free(&file);
}

int rudnn_autotune_lookup(const char *key, char *winner, size_t cap)
{
    if (!winner || cap == 0 || !at_valid_text(key, RUDNN_AUTOTUNE_KEY_MAX) || !rudnn_autotune_enabled())
        return 0;
    pthread_mutex_lock(&lock);
    load_locked();
    const at_entry_t *e = at_table_find(&mem, key);
    int found = e && strlen(e->winner) < cap; /* never hand back a cut name */
    if (found)
        memcpy(winner, e->winner, strlen(e->winner) + 1);
    pthread_mutex_unlock(&lock);
    return found;
}

/* Merges mem's dirty entries into the file under its lock; mem becomes the merged table. */
static void write_locked(const char *path)
{
    char why[WHY_MAX];
    int lock_fd;
    if (at_file_lock(path, &lock_fd, why, sizeof why) != 0) {
        warn_not_written(path, why);
        return;
    }
    at_table_t merged = {0};
    int rc = at_file_read(path, &merged, why, sizeof why);
    if (rc == -1)
        warn_ignored(path, why); /* replaced below by a valid file */
    int ok = rc != -2; /* out of memory: the file may be good, leave it */
    for (size_t i = 0; i < mem.n; i++)
        if (mem.v[i].dirty && at_table_put(&merged, mem.v[i].key, mem.v[i].winner, mem.v[i].ms, 1) != 0)
            ok = 0;
    if (!ok) {
        at_file_unlock(lock_fd);
        at_table_free(&merged);
        warn_not_written(path, "out of memory");
        return;
    }
    int written = at_file_write(path, &merged, why, sizeof why) == 0;
    at_file_unlock(lock_fd);
    if (written)
        for (size_t i = 0; i < merged.n; i++)
            merged.v[i].dirty = 0;
    else
        warn_not_written(path, why);
    at_table_free(&mem);
    mem = merged;
}

void rudnn_autotune_store(const char *key, const char *winner, double ms)
{
    if (!at_valid_text(key, RUDNN_AUTOTUNE_KEY_MAX) || !at_valid_text(winner, RUDNN_AUTOTUNE_NAME_MAX) ||
        !at_valid_ms(ms) || !rudnn_autotune_enabled())
        return;
    pthread_mutex_lock(&lock);
    load_locked();
    if (at_table_put(&mem, key, winner, ms, 1) == 0) {
        const char *path = cache_path();
        if (path)
            write_locked(path);
    }
    pthread_mutex_unlock(&lock);
}

int rudnn_autotune_each(void (*fn)(void *arg, const char *key, const char *winner, double ms), void *arg,
                        const char **why)
{
    static _Thread_local char why_buf[WHY_MAX + 512];
    at_table_t copy = {0};
    int count = 0;
    pthread_mutex_lock(&lock);
    const char *path = cache_path();
    int rc = -1;
    if (!path)
        snprintf(why_buf, sizeof why_buf, "no cache file (no RUDNN_AUTOTUNE_CACHE, RUDNN_CACHE_DIR, "
                                          "XDG_CACHE_HOME or HOME)");
    else {
        char why[WHY_MAX];
        rc = at_file_read(path, &copy, why, sizeof why);
        if (rc != 0)
            snprintf(why_buf, sizeof why_buf, "%.400s: %s", path, rc == 1 ? "no such file" : why);
    }
    if (rc != 0) {
        /* fall back on what memory holds (entries stored while the file is unwritable) */
        at_table_free(&copy);
        for (size_t i = 0; i < mem.n; i++)
            at_table_put(&copy, mem.v[i].key, mem.v[i].winner, mem.v[i].ms, 0);
    }
    pthread_mutex_unlock(&lock);
    if (rc != 0 && copy.n == 0) {
        if (why)
            *why = why_buf;
        return -1;
    }
    if (why)
        *why = rc == 0 ? NULL : why_buf;
    for (size_t i = 0; i < copy.n; i++, count++)
        if (fn)
            fn(arg, copy.v[i].key, copy.v[i].winner, copy.v[i].ms);
    at_table_free(&copy);
    return count;
}

void rudnn_autotune_reset(void)
{
    pthread_mutex_lock(&lock);
    at_table_free(&mem);
    loaded = 0;
    pthread_mutex_unlock(&lock);
}

void rudnn_autotune_set_path_for_tests(const char *path)
{
    pthread_mutex_lock(&lock);
    at_table_free(&mem);
    loaded = 0;
    warned_read = warned_write = 0;
    test_path_set = path != NULL;
    rudnn_copy_str(test_path, sizeof test_path, path ? path : "");
    pthread_mutex_unlock(&lock);
}

/* ---- the key ---- */

/* Appends s to key at *n with '|' before it unless first; keep_bars: '|' is kept (the caller's
 * own separators in rest). -1 when it does not fit. */
static int append_part(char *key, size_t cap, size_t *n, const char *s, int first, int keep_bars)
{
    if (!first) {
        if (*n + 1 >= cap)
            return -1;
        key[(*n)++] = '|';
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*n + 1 >= cap)
            return -1;
        unsigned char c = *p;
        key[(*n)++] = (char)(c < 0x20 || c == 0x7f || (c == '|' && !keep_bars) ? '_' : c);
    }
    key[*n] = '\0';
    return 0;
}

rudnn_status_t rudnn_autotune_key(char *key, size_t cap, const char *op, rudnn_context_t context,
                                  const char *rest)
{
    if (!key || cap == 0 || !op || !*op || !context)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "autotune_key: %s",
                               !key || cap == 0 ? "key is NULL or empty" : !op || !*op ? "op is NULL or empty"
                                                                                       : "context is NULL");
    key[0] = '\0';
    rudnn_device_info_t info;
    rudnn_status_t st = rudnn_context_device_info(context, &info);
    if (st != RUDNN_STATUS_SUCCESS)
        return st;
    if (cap > RUDNN_AUTOTUNE_KEY_MAX)
        cap = RUDNN_AUTOTUNE_KEY_MAX;
    size_t n = 0;
    if (append_part(key, cap, &n, op, 1, 0) || append_part(key, cap, &n, info.backend, 0, 0) ||
        append_part(key, cap, &n, info.name, 0, 0) || append_part(key, cap, &n, info.driver, 0, 0) ||
        append_part(key, cap, &n, rest ? rest : "", 0, 1)) {
        key[0] = '\0';
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "autotune_key: the key for op '%s' on %s device '%s' is longer than %zu bytes",
                               op, info.backend, info.name, cap - 1);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* ---- the public inspection API (rudnn/autotune.h) ---- */

rudnn_status_t rudnn_autotune_cache_path(char *buf, size_t cap)
{
    rudnn_clear_error();
    if (!buf || cap == 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "autotune_cache_path: buf is NULL or cap is 0");
    buf[0] = '\0';
    pthread_mutex_lock(&lock);
    const char *path = cache_path();
    size_t n = path ? strlen(path) : 0;
    if (path && n < cap)
        memcpy(buf, path, n + 1);
    pthread_mutex_unlock(&lock);
    if (!path)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED,
                               "autotune_cache_path: no cache file (set RUDNN_AUTOTUNE_CACHE, "
                               "RUDNN_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    if (n >= cap)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "autotune_cache_path: the path needs %zu bytes, cap is %zu",
                               n + 1, cap);
    return RUDNN_STATUS_SUCCESS;
}

int rudnn_autotune_is_enabled(void) { return rudnn_autotune_enabled(); }

int rudnn_autotune_entries(rudnn_autotune_entry_fn fn, void *arg)
{
    rudnn_clear_error();
    const char *why = NULL;
    int n = rudnn_autotune_each(fn, arg, &why);
    if (why)
        rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "autotune_entries: %s", why);
    return n;
}
