/* The autotune cache, for every family (DESIGN.md 5): which candidate won for a key, kept in
 * memory and in a cache file so that the next process does not tune again.
 *
 * A key names everything that changes the winner: the op, the backend, the device and its driver
 * (rudnn_autotune_key adds those three), the dtype, a shape bucket and the options that change
 * the kernel, e.g. "attention|cuda|NVIDIA H200|13000|bf16|b4h32q4096k4096d128v128|causal".
 *
 * File: RUDNN_AUTOTUNE_CACHE, else <cache dir>/autotune.txt (core/env.c: RUDNN_CACHE_DIR, else
 * $XDG_CACHE_HOME/rudnn, else $HOME/.cache/rudnn). A file that is corrupt, truncated, of another
 * format version or otherwise untrustworthy is ignored with a warning on stderr (once), never
 * trusted; writers take a lock and replace the file by write-then-rename, merging what other
 * processes wrote meanwhile, so concurrent processes never corrupt it. RUDNN_AUTOTUNE=off: no
 * lookup, no timing, no file; callers use their static choice. Thread-safe. */
#ifndef RUDNN_CORE_AUTOTUNE_H
#define RUDNN_CORE_AUTOTUNE_H

#include <stddef.h>

#include "rudnn/core.h"

#define RUDNN_AUTOTUNE_KEY_MAX 384
#define RUDNN_AUTOTUNE_NAME_MAX 64

/* 0 when RUDNN_AUTOTUNE=off (read once per process), else 1. */
int rudnn_autotune_enabled(void);

/* Writes "<op>|<backend>|<device name>|<driver>|<rest>" into key (cap bytes, at most
 * RUDNN_AUTOTUNE_KEY_MAX); '|' and control characters inside the parts are replaced by '_'. */
rudnn_status_t rudnn_autotune_key(char *key, size_t cap, const char *op, rudnn_context_t context,
                                  const char *rest);

/* 1 and the winner's candidate name in winner (cap bytes) when key is cached (memory, then the
 * file, read once per process and again after a store), else 0. */
int rudnn_autotune_lookup(const char *key, char *winner, size_t cap);

/* Records winner (and its time, for --tune-show) for key in memory and in the file. A failure to
 * write the file is a warning, not an error: the winner still holds in memory. */
void rudnn_autotune_store(const char *key, const char *winner, double ms);

/* Times each of count candidates (run(arg, i) enqueues candidate i on queue; a candidate whose
 * run fails is skipped, its status kept for the message): warm-up once, then reps timed runs
 * between queue events, median. Returns the index of the fastest in *best and its median ms in
 * *best_ms; fails (the last error) when none ran. */
rudnn_status_t rudnn_autotune_time(rudnn_queue_t queue, int count, rudnn_status_t (*run)(void *arg, int i),
                                   void *arg, int reps, int *best, double *best_ms);

/* For rudnn-bench --tune-show and tests: calls fn for every entry of the file (or memory, when
 * the file cannot be read), in key order. Returns the entry count, or -1 with *why set when
 * the file is missing or untrusted. */
int rudnn_autotune_each(void (*fn)(void *arg, const char *key, const char *winner, double ms), void *arg,
                        const char **why);

/* Tests: forget what memory holds (the next lookup reads the file again). */
void rudnn_autotune_reset(void);

/* Tests only: use path as the cache file from now on, instead of the environment's rule (NULL:
 * back to that rule; "": no file, memory only). Forgets memory like rudnn_autotune_reset and
 * re-arms the once-per-process warnings, so that each test sees its own file's warning. */
void rudnn_autotune_set_path_for_tests(const char *path);

#endif
