/* rudnn-bench's autotune modes: --tune-show (tune_show.c) and --tune attention
 * (tune_attention.c, built only with the attention family). */
#ifndef RUDNN_BENCH_TUNE_H
#define RUDNN_BENCH_TUNE_H

/* Prints the autotune cache as a table on stdout; the exit status. */
int bench_tune_show(void);

/* Sweeps attention shapes with RUDNN_ATTENTION_AUTOTUNE on the given backend (NULL: the
 * environment's) and device (-1: the default), filling the cache; quick: small shapes for
 * CPU/PoCL. Returns the exit status. */
int bench_tune_attention(const char *backend, int device, int quick);

#endif
