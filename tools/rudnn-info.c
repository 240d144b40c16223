/* rudnn-info: what a program gets by default, which backends load, why the others do not, and
 * what each device offers.
 *
 *   rudnn-info            human-readable report
 *   rudnn-info --json     one JSON object per line: the default context ("kind":"default"), then
 *                         one per backend, then one per device
 *
 * The default context is what rudnn_context_create(&ctx, NULL) gives in this environment
 * (RUDNN_BACKEND, RUDNN_DEVICE, RUDNN_BACKEND_PATH): rudnn-info calls exactly that, so a value
 * that makes every program fail (RUDNN_BACKEND=nonsense, a backend that does not load here, a
 * device it lacks) fails here with the same status and message.
 *
 * Exits 0 when a context created with NULL options works; 1 when it does not (that includes a
 * machine where no backend loads), when the probe fails, or when a loaded backend cannot open
 * one of its devices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rudnn/rudnn.h"

#define MAX_BACKENDS 8

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; ++p) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

static double gib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

static const char *yes_no(int v)
{
    return v ? "yes" : "no";
}

static void print_device_text(const rudnn_device_info_t *d)
{
    printf("  device %d: %s\n", d->index, d->name);
    printf("    driver                 %s\n", d->driver);
    printf("    global memory          %.2f GiB (%llu bytes)\n", gib(d->global_memory_bytes),
           (unsigned long long)d->global_memory_bytes);
    printf("    compute units          %d\n", d->compute_units);
    if (d->plane_width_min == d->plane_width_max)
        printf("    plane width            %d\n", d->plane_width_min);
    else
        printf("    plane widths           %d..%d\n", d->plane_width_min, d->plane_width_max);
    printf("    shared memory / group  %llu bytes (%.1f KiB)\n",
           (unsigned long long)d->shared_memory_per_group, (double)d->shared_memory_per_group / 1024.0);
    printf("    max group size         %d\n", d->max_group_size);
    printf("    fp16 matrix units      %s\n", yes_no(d->has_fp16_matrix));
    printf("    bf16 matrix units      %s\n", yes_no(d->has_bf16_matrix));
    printf("    native fp16            %s\n", yes_no(d->has_native_fp16));
    if (d->compute_capability)
        printf("    compute capability     %d\n", d->compute_capability);
    else
        printf("    compute capability     n/a\n");
}

static void print_device_json(const rudnn_device_info_t *d)
{
    printf("{\"kind\":\"device\",\"backend\":");
    json_string(stdout, d->backend);
    printf(",\"index\":%d,\"name\":", d->index);
    json_string(stdout, d->name);
    printf(",\"driver\":");
    json_string(stdout, d->driver);
    printf(",\"global_memory_bytes\":%llu,\"global_memory_gib\":%.3f,\"compute_units\":%d,"
           "\"plane_width_min\":%d,\"plane_width_max\":%d,\"shared_memory_per_group\":%llu,"
           "\"max_group_size\":%d,\"has_fp16_matrix\":%s,\"has_bf16_matrix\":%s,"
           "\"has_native_fp16\":%s,\"compute_capability\":%d}\n",
           (unsigned long long)d->global_memory_bytes, gib(d->global_memory_bytes),
           d->compute_units, d->plane_width_min, d->plane_width_max,
           (unsigned long long)d->shared_memory_per_group, d->max_group_size,
           d->has_fp16_matrix ? "true" : "false", d->has_bf16_matrix ? "true" : "false",
           d->has_native_fp16 ? "true" : "false", d->compute_capability);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rudnn-info [--json]\n"
               "Says what rudnn_context_create with NULL options gets here (RUDNN_BACKEND,\n"
               "RUDNN_DEVICE), probes the cuda, hip and opencl backends and describes every device.\n"
               "Plugin folders: RUDNN_BACKEND_PATH (searched first), then the installed ones.\n"
               "Exits 1 when a context created with NULL options fails.\n");
}

/* The raw value of an environment variable, for display only: the library reads and interprets
 * it (core/env.c; unset and empty are the same). */
static const char *env_value(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static void json_string_or_null(FILE *f, const char *s)
{
    if (s)
        json_string(f, s);
    else
        fputs("null", f);
}

/* What a program that passes NULL options gets: the one call, rudnn_context_create(&ctx, NULL).
 * Returns its status; on failure message receives rudnn_last_error(). */
static rudnn_status_t report_default(int json, char *message, size_t cap)
{
    const char *backend_env = env_value("RUDNN_BACKEND");
    const char *device_env = env_value("RUDNN_DEVICE");
    rudnn_context_t ctx = NULL;
    rudnn_status_t st = rudnn_context_create(&ctx, NULL);
    rudnn_device_info_t info;
    memset(&info, 0, sizeof info);
    message[0] = '\0';
    if (st == RUDNN_STATUS_SUCCESS) {
        st = rudnn_context_device_info(ctx, &info);
        rudnn_context_destroy(ctx);
    }
    if (st != RUDNN_STATUS_SUCCESS)
        snprintf(message, cap, "%s", rudnn_last_error());

    if (json) {
        printf("{\"kind\":\"default\",\"rudnn_backend\":");
        json_string_or_null(stdout, backend_env);
        printf(",\"rudnn_device\":");
        json_string_or_null(stdout, device_env);
        if (st == RUDNN_STATUS_SUCCESS) {
            printf(",\"ok\":true,\"backend\":");
            json_string(stdout, info.backend);
            printf(",\"index\":%d,\"name\":", info.index);
            json_string(stdout, info.name);
        } else {
            printf(",\"ok\":false,\"error\":");
            json_string(stdout, rudnn_status_string(st));
            printf(",\"message\":");
            json_string(stdout, message);
        }
        printf("}\n");
        return st;
    }
    printf("default context (rudnn_context_create with NULL options):\n");
    printf("  RUDNN_BACKEND  %s\n", backend_env ? backend_env : "(unset)");
    printf("  RUDNN_DEVICE   %s\n", device_env ? device_env : "(unset)");
    if (st == RUDNN_STATUS_SUCCESS)
        printf("  gets           %s device %d: %s\n", info.backend, info.index, info.name);
    else
        printf("  gets           nothing: %s: %s\n", rudnn_status_string(st), message);
    return st;
}

int main(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "rudnn-info: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }

    if (!json)
        printf("rudnn %s\n\n", rudnn_version());
    static char default_message[4096];
    rudnn_status_t default_st = report_default(json, default_message, sizeof default_message);

    rudnn_backend_report_t reports[MAX_BACKENDS];
    memset(reports, 0, sizeof reports);
    size_t count = 0;
    rudnn_status_t st = rudnn_backend_probe(reports, MAX_BACKENDS, &count);
    if (st != RUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "rudnn-info: rudnn_backend_probe failed: %s: %s\n",
                rudnn_status_string(st), rudnn_last_error());
        return 1;
    }
    if (count > MAX_BACKENDS)
        count = MAX_BACKENDS;

    if (!json)
        printf("\nbackends:\n");
    int loaded = 0;
    for (size_t i = 0; i < count; ++i) {
        const rudnn_backend_report_t *r = &reports[i];
        if (r->loaded)
            ++loaded;
        if (json) {
            printf("{\"kind\":\"backend\",\"backend\":");
            json_string(stdout, r->name);
            printf(",\"loaded\":%s,\"device_count\":%d,\"plugin_path\":",
                   r->loaded ? "true" : "false", r->device_count);
            json_string(stdout, r->plugin_path);
            printf(",\"message\":");
            json_string(stdout, r->message);
            printf("}\n");
        } else {
            printf("  %-7s %s", r->name, r->loaded ? "loaded" : "not loaded");
            if (r->loaded)
                printf(", %d device%s", r->device_count, r->device_count == 1 ? "" : "s");
            printf("\n");
            printf("          plugin: %s\n", r->plugin_path[0] ? r->plugin_path : "(none found)");
            if (!r->loaded)
                printf("          reason: %s\n", r->message);
        }
    }

    int failures = 0;
    for (size_t i = 0; i < count; ++i) {
        const rudnn_backend_report_t *r = &reports[i];
        if (!r->loaded)
            continue;
        if (!json)
            printf("\n%s devices:\n", r->name);
        if (r->device_count <= 0 && !json)
            printf("  (none)\n");
        for (int dev = 0; dev < r->device_count; ++dev) {
            rudnn_context_options_t opts;
            memset(&opts, 0, sizeof opts);
            opts.backend = r->name;
            opts.device = dev;
            opts.plugin_path = NULL;
            rudnn_context_t ctx = NULL;
            st = rudnn_context_create(&ctx, &opts);
            if (st != RUDNN_STATUS_SUCCESS) {
                ++failures;
                if (json) {
                    printf("{\"kind\":\"device\",\"backend\":");
                    json_string(stdout, r->name);
                    printf(",\"index\":%d,\"error\":", dev);
                    json_string(stdout, rudnn_status_string(st));
                    printf(",\"message\":");
                    json_string(stdout, rudnn_last_error());
                    printf("}\n");
                } else {
                    printf("  device %d: context creation failed: %s: %s\n", dev,
                           rudnn_status_string(st), rudnn_last_error());
                }
                continue;
            }
            rudnn_device_info_t info;
            memset(&info, 0, sizeof info);
            st = rudnn_context_device_info(ctx, &info);
            if (st != RUDNN_STATUS_SUCCESS) {
                ++failures;
                fprintf(stderr, "rudnn-info: %s device %d: rudnn_context_device_info failed: %s: %s\n",
                        r->name, dev, rudnn_status_string(st), rudnn_last_error());
            } else if (json) {
                print_device_json(&info);
            } else {
                print_device_text(&info);
            }
            rudnn_context_destroy(ctx);
        }
    }

    if (loaded == 0) {
        if (json) {
            printf("{\"kind\":\"summary\",\"loaded_backends\":0,\"message\":"
                   "\"no backend loaded; set RUDNN_BACKEND_PATH to a folder holding librudnn-<name>.so\"}\n");
        } else {
            printf("\nno backend loaded: rudnn cannot run any operator on this machine.\n"
                   "Set RUDNN_BACKEND_PATH to a folder holding librudnn-<name>.so, or install a "
                   "runtime (an OpenCL driver such as PoCL works everywhere).\n");
        }
    }
    fflush(stdout);
    if (default_st != RUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "rudnn-info: rudnn_context_create with NULL options fails here: %s: %s\n",
                rudnn_status_string(default_st), default_message);
        return 1;
    }
    return failures ? 1 : 0;
}
