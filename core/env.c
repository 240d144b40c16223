/* The one place environment variables are read, once per process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static rudnn_env_t env;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static char cache_dir_buf[4096];

static const char *nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static void read_env(void)
{
    env.backend = nonempty("RUDNN_BACKEND");
    env.backend_path = nonempty("RUDNN_BACKEND_PATH");
    env.autotune_cache = nonempty("RUDNN_AUTOTUNE_CACHE");
    /* "off" turns autotuning off; anything else keeps it on (core/autotune.c warns once about a
     * value that is neither "on" nor "off") */
    const char *tune = nonempty("RUDNN_AUTOTUNE");
    env.autotune_off = tune && strcmp(tune, "off") == 0;
    env.autotune_unknown = tune && strcmp(tune, "off") != 0 && strcmp(tune, "on") != 0 ? tune : NULL;
    env.device = -1;
    const char *dev = nonempty("RUDNN_DEVICE");
    if (dev) {
        char *end = NULL;
        long v = strtol(dev, &end, 10);
        if (*end == '\0' && v >= 0 && v < 1 << 20)
            env.device = (int)v;
        else
            env.device_set_invalid = 1;
    }
    /* testing aid: fail the nth allocation of the process (and every later one) */
    const char *fault = nonempty("RUDNN_FAULT_ALLOC");
    if (fault) {
        char *end = NULL;
        unsigned long long v = strtoull(fault, &end, 10);
        if (*end == '\0')
            env.fault_alloc = v;
    }
    /* testing aid: force the segments of the chunked gated delta rule's state pass */
    const char *segs = nonempty("RUDNN_GDR_SEGMENTS");
    if (segs) {
        char *end = NULL;
        long v = strtol(segs, &end, 10);
        if (*end == '\0' && v >= 1 && v <= 64)
            env.gdr_segments = (int)v;
    }
    /* read by the first context_create, before any allocation of the process */
    rudnn_fault_arm_from_env(env.fault_alloc);
    const char *cache = nonempty("RUDNN_CACHE_DIR");
    const char *xdg = nonempty("XDG_CACHE_HOME");
    const char *home = nonempty("HOME");
    if (cache)
        snprintf(cache_dir_buf, sizeof cache_dir_buf, "%s", cache);
    else if (xdg)
        snprintf(cache_dir_buf, sizeof cache_dir_buf, "%s/rudnn", xdg);
    else if (home)
        snprintf(cache_dir_buf, sizeof cache_dir_buf, "%s/.cache/rudnn", home);
    env.cache_dir = cache_dir_buf[0] ? cache_dir_buf : NULL;
}

const rudnn_env_t *rudnn_env(void)
{
    pthread_once(&env_once, read_env);
    return &env;
}
