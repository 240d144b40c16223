/* Plugin discovery and loading (dlopen), one plugin file per backend. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#ifndef RUDNN_PLUGIN_DIR
#define RUDNN_PLUGIN_DIR "/usr/local/lib/rudnn"
#endif

#define MAX_LOADED 16
#define PATH_MAX_LEN 4096

typedef struct loaded_plugin {
    char path[PATH_MAX_LEN];
    rudnn_host_services_t services; /* handed to the plugin; lives as long as it */
    const rudnn_backend_t *backend;
    int device_count;
} loaded_plugin_t;

/* Guarded by loader_lock. A plugin's init runs once per process, under the lock, so whatever it
 * sets up is visible to every thread that gets the backend from the loader afterwards. */
static loaded_plugin_t loaded[MAX_LOADED];
static int loaded_count;
static pthread_mutex_t loader_lock = PTHREAD_MUTEX_INITIALIZER;

const rudnn_host_services_t rudnn_host_services = {
    .struct_size = sizeof(rudnn_host_services_t),
    .set_error = rudnn_set_error,
    .cache_dir = NULL, /* filled per call in host_services() */
    .note_kernel = rudnn_note_kernel,
    .fail_allocation = rudnn_fault_allocation,
};

static rudnn_host_services_t services_with_env(void)
{
    rudnn_host_services_t s = rudnn_host_services;
    s.cache_dir = rudnn_env()->cache_dir;
    return s;
}

/* Appends to a bounded message buffer. */
static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= cap)
        return;
    va_list args;
    va_start(args, fmt);
    vsnprintf(buf + len, cap - len, fmt, args);
    va_end(args);
}

/* Folder holding librudnn.so itself, plus "/rudnn". */
static void self_plugin_dir(char *out, size_t cap)
{
    Dl_info info;
    out[0] = '\0';
    if (dladdr((void *)&self_plugin_dir, &info) && info.dli_fname) {
        snprintf(out, cap, "%s", info.dli_fname);
        char *slash = strrchr(out, '/');
        if (slash) {
            *slash = '\0';
            append(out, cap, "/rudnn");
        } else {
            out[0] = '\0';
        }
    }
}

/* Builds the colon-separated list of folders to search. */
static void search_dirs(const char *plugin_path, char *out, size_t cap)
{
    out[0] = '\0';
    if (plugin_path) {
        snprintf(out, cap, "%s", plugin_path);
        return;
    }
    const char *env_path = rudnn_env()->backend_path;
    if (env_path)
        append(out, cap, "%s:", env_path);
    append(out, cap, "%s", RUDNN_PLUGIN_DIR);
    char self[PATH_MAX_LEN];
    self_plugin_dir(self, sizeof self);
    if (self[0] && strcmp(self, RUDNN_PLUGIN_DIR) != 0)
        append(out, cap, ":%s", self);
}

void *rudnn_loader_open_library(const char *file_name, char *report, size_t cap)
{
    char dirs[PATH_MAX_LEN * 2];
    search_dirs(NULL, dirs, sizeof dirs);
    report[0] = '\0';
    char *save = NULL;
    for (char *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        if (!*dir)
            continue;
        char path[PATH_MAX_LEN];
        snprintf(path, sizeof path, "%s/%s", dir, file_name);
        const char *why = "not found";
        if (access(path, F_OK) == 0) {
            void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (handle)
                return handle;
            why = dlerror();
            why = why ? why : "dlopen failed";
        }
        append(report, cap, "%s%s: %s", report[0] ? "; " : "", path, why);
    }
    if (!report[0])
        append(report, cap, "no plugin folders");
    return NULL;
}

typedef enum { TRY_OK, TRY_NOT_FOUND, TRY_FAILED, TRY_ABI } try_result_t;

static try_result_t try_plugin(const char *name, const char *path, const rudnn_backend_t **out,
                               int *device_count, char *why, size_t why_cap)
{
    for (int i = 0; i < loaded_count; i++) {
        if (strcmp(loaded[i].path, path) == 0) {
            *out = loaded[i].backend;
            *device_count = loaded[i].device_count;
            return TRY_OK;
        }
    }
    if (access(path, F_OK) != 0) {
        snprintf(why, why_cap, "not found");
        return TRY_NOT_FOUND;
    }
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *err = dlerror();
        snprintf(why, why_cap, "dlopen failed (%s)", err ? err : "unknown error");
        return TRY_FAILED;
    }
    rudnn_backend_entry_fn entry;
    void *sym = dlsym(handle, RUDNN_BACKEND_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    if (!entry) {
        snprintf(why, why_cap, "no %s symbol: not a rudnn plugin", RUDNN_BACKEND_ENTRY_SYMBOL);
        dlclose(handle);
        return TRY_FAILED;
    }
    const rudnn_backend_t *backend = entry();
    if (!backend) {
        snprintf(why, why_cap, "entry returned NULL");
        dlclose(handle);
        return TRY_FAILED;
    }
    /* a struct that ends among the family tables is an older plugin: the families it lacks are
     * absent (core/family.c) */
    if (backend->abi_version != RUDNN_BACKEND_ABI_VERSION ||
        backend->struct_size < RUDNN_BACKEND_MIN_SIZE) {
        snprintf(why, why_cap,
                 "plugin ABI version %u (struct %u bytes), this librudnn needs ABI %u (at least %zu "
                 "bytes)",
                 backend->abi_version, backend->struct_size, RUDNN_BACKEND_ABI_VERSION,
                 (size_t)RUDNN_BACKEND_MIN_SIZE);
        dlclose(handle);
        return TRY_ABI;
    }
    if (!backend->name || strcmp(backend->name, name) != 0) {
        snprintf(why, why_cap, "plugin calls itself '%s', expected '%s'",
                 backend->name ? backend->name : "(null)", name);
        dlclose(handle);
        return TRY_FAILED;
    }
    /* The same file reached by another path string (a symlink, "dir/." or a second folder of the
     * search list): dlopen gave the handle it already had, and init must not run again, since it
     * resets the plugin's process-wide state (its device list) while other threads use it. */
    for (int i = 0; i < loaded_count; i++) {
        if (loaded[i].backend == backend) {
            dlclose(handle); /* the first dlopen keeps it loaded */
            *out = backend;
            *device_count = loaded[i].device_count;
            return TRY_OK;
        }
    }
    if (loaded_count >= MAX_LOADED) {
        snprintf(why, why_cap, "too many plugins loaded (%d)", MAX_LOADED);
        dlclose(handle);
        return TRY_FAILED;
    }
    rudnn_host_services_t *services = &loaded[loaded_count].services;
    *services = services_with_env();
    int count = 0;
    rudnn_clear_error();
    rudnn_status_t st = backend->init(services, &count);
    if (st != RUDNN_STATUS_SUCCESS) {
        snprintf(why, why_cap, "%s", rudnn_last_error()[0] ? rudnn_last_error() : rudnn_status_string(st));
        dlclose(handle);
        return TRY_FAILED;
    }
    if (count <= 0) {
        snprintf(why, why_cap, "runtime loaded but no device found");
        dlclose(handle);
        return TRY_FAILED;
    }
    rudnn_copy_str(loaded[loaded_count].path, PATH_MAX_LEN, path);
    loaded[loaded_count].backend = backend;
    loaded[loaded_count].device_count = count;
    loaded_count++;
    *out = backend;
    *device_count = count;
    return TRY_OK;
}

/* Tries every folder; on failure the thread error says what was tried and why.
 * *tried_path receives the last plugin file tried (or ""). */
static rudnn_status_t open_backend(const char *name, const char *plugin_path,
                                   const rudnn_backend_t **backend, int *device_count,
                                   char *tried_path, size_t tried_cap)
{
    char dirs[PATH_MAX_LEN * 2];
    char report[4096] = "";
    int abi_failure = 0;
    search_dirs(plugin_path, dirs, sizeof dirs);
    if (tried_path)
        tried_path[0] = '\0';

    char *save = NULL;
    for (char *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        if (!*dir)
            continue;
        char path[PATH_MAX_LEN];
        snprintf(path, sizeof path, "%s/librudnn-%s.so", dir, name);
        char why[1024];
        try_result_t r = try_plugin(name, path, backend, device_count, why, sizeof why);
        if (r == TRY_OK) {
            if (tried_path)
                rudnn_copy_str(tried_path, tried_cap, path);
            rudnn_clear_error();
            return RUDNN_STATUS_SUCCESS;
        }
        if (r != TRY_NOT_FOUND && tried_path)
            rudnn_copy_str(tried_path, tried_cap, path);
        abi_failure |= r == TRY_ABI;
        append(report, sizeof report, "%s%s: %s", report[0] ? "; " : "", path, why);
    }
    return rudnn_set_error(abi_failure ? RUDNN_STATUS_ABI_MISMATCH : RUDNN_STATUS_BACKEND_UNAVAILABLE,
                           "backend '%s' unavailable: tried %s", name,
                           report[0] ? report : "no plugin folders");
}

rudnn_status_t rudnn_loader_open(const char *name, const char *plugin_path,
                                 const rudnn_backend_t **backend, int *device_count)
{
    pthread_mutex_lock(&loader_lock);
    rudnn_status_t st = open_backend(name, plugin_path, backend, device_count, NULL, 0);
    pthread_mutex_unlock(&loader_lock);
    return st;
}

static const char *const known_backends[] = {"cuda", "hip", "opencl"};
#define KNOWN_COUNT (sizeof known_backends / sizeof known_backends[0])

rudnn_status_t rudnn_backend_probe(rudnn_backend_report_t *reports, size_t capacity, size_t *count)
{
    if (!count || (capacity && !reports))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "backend_probe: count is NULL, or reports is NULL with capacity %zu",
                               capacity);
    *count = KNOWN_COUNT;
    for (size_t i = 0; i < KNOWN_COUNT && i < capacity; i++) {
        rudnn_backend_report_t *r = &reports[i];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", known_backends[i]);
        const rudnn_backend_t *backend = NULL;
        int devices = 0;
        pthread_mutex_lock(&loader_lock);
        rudnn_status_t st = open_backend(known_backends[i], NULL, &backend, &devices,
                                         r->plugin_path, sizeof r->plugin_path);
        pthread_mutex_unlock(&loader_lock);
        r->loaded = st == RUDNN_STATUS_SUCCESS;
        r->device_count = r->loaded ? devices : 0;
        rudnn_copy_str(r->message, sizeof r->message, r->loaded ? "ok" : rudnn_last_error());
    }
    rudnn_clear_error();
    return RUDNN_STATUS_SUCCESS;
}

int rudnn_backend_name_known(const char *name)
{
    for (size_t i = 0; i < KNOWN_COUNT; i++)
        if (strcmp(name, known_backends[i]) == 0)
            return 1;
    return 0;
}
