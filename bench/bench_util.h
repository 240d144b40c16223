/* What the benchmark binaries share: JSON string output and host allocation that cannot fail. */
#ifndef RUDNN_BENCH_UTIL_H
#define RUDNN_BENCH_UTIL_H

#include <stddef.h>

/* Prints s as a JSON string literal (quotes, escapes) on stdout. */
void bench_json_string(const char *s);

/* malloc that exits with "<prog>: out of host memory" instead of returning NULL (0 bytes: 1). */
void *bench_xmalloc(const char *prog, size_t bytes);

#endif
