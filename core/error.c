/* Status names and the thread-local detail message. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define RUDNN_ERROR_MAX 2048

static _Thread_local char last_error[RUDNN_ERROR_MAX];
static _Thread_local const char *last_kernel;

const char *rudnn_status_string(rudnn_status_t status)
{
    switch (status) {
    case RUDNN_STATUS_SUCCESS: return "RUDNN_STATUS_SUCCESS";
    case RUDNN_STATUS_BAD_PARAM: return "RUDNN_STATUS_BAD_PARAM";
    case RUDNN_STATUS_BAD_SHAPE: return "RUDNN_STATUS_BAD_SHAPE";
    case RUDNN_STATUS_BAD_DTYPE: return "RUDNN_STATUS_BAD_DTYPE";
    case RUDNN_STATUS_DEVICE_MISMATCH: return "RUDNN_STATUS_DEVICE_MISMATCH";
    case RUDNN_STATUS_OUT_OF_BOUNDS: return "RUDNN_STATUS_OUT_OF_BOUNDS";
    case RUDNN_STATUS_NOT_SUPPORTED: return "RUDNN_STATUS_NOT_SUPPORTED";
    case RUDNN_STATUS_ALLOC_FAILED: return "RUDNN_STATUS_ALLOC_FAILED";
    case RUDNN_STATUS_BACKEND_UNAVAILABLE: return "RUDNN_STATUS_BACKEND_UNAVAILABLE";
    case RUDNN_STATUS_ABI_MISMATCH: return "RUDNN_STATUS_ABI_MISMATCH";
    case RUDNN_STATUS_UNKNOWN_BACKEND: return "RUDNN_STATUS_UNKNOWN_BACKEND";
    case RUDNN_STATUS_DEVICE_ERROR: return "RUDNN_STATUS_DEVICE_ERROR";
    case RUDNN_STATUS_INTERNAL: return "RUDNN_STATUS_INTERNAL";
    }
    return "RUDNN_STATUS_UNKNOWN";
}

const char *rudnn_last_error(void) { return last_error; }

const char *rudnn_last_kernel(void) { return last_kernel ? last_kernel : ""; }

void rudnn_note_kernel(const char *name) { last_kernel = name; }

void rudnn_clear_error(void) { last_error[0] = '\0'; }

rudnn_status_t rudnn_set_error_v(rudnn_status_t status, const char *fmt, va_list args)
{
    vsnprintf(last_error, sizeof last_error, fmt, args);
    return status;
}

rudnn_status_t rudnn_set_error(rudnn_status_t status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    rudnn_set_error_v(status, fmt, args);
    va_end(args);
    return status;
}

void rudnn_error_prefix(const char *op)
{
    size_t n = strlen(op);
    if (strncmp(last_error, op, n) == 0 && last_error[n] == ':')
        return;
    size_t len = strlen(last_error);
    if (n + 2 + len >= sizeof last_error)
        len = sizeof last_error - n - 3;
    memmove(last_error + n + 2, last_error, len);
    memcpy(last_error, op, n);
    last_error[n] = ':';
    last_error[n + 1] = ' ';
    last_error[n + 2 + len] = '\0';
}

void rudnn_copy_str(char *dst, size_t cap, const char *src)
{
    if (!cap)
        return;
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}
