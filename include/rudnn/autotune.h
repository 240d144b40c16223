/* Inspecting the autotune cache (not an operator family).
 *
 * Ops with an Autotune strategy (e.g. RUDNN_ATTENTION_AUTOTUNE) time their candidate kernels the
 * first time a (op, backend, device, driver, dtype, shape bucket, options) key is seen, and keep
 * the winner in a cache file shared by every process of the user, so that later processes do not
 * time again. The file is RUDNN_AUTOTUNE_CACHE, else $RUDNN_CACHE_DIR/autotune.txt, else
 * $XDG_CACHE_HOME/rudnn/autotune.txt, else $HOME/.cache/rudnn/autotune.txt (the environment is
 * read once per process). RUDNN_AUTOTUNE=off turns autotuning off: ops use their static choice
 * and neither read nor write the file. A file that is corrupt, truncated or of another format
 * version is ignored (one warning on stderr) and replaced on the next store. `rudnn-bench
 * --tune-show` prints the file; `rudnn-bench --tune <family>` fills it ahead of time.
 * All three calls are thread-safe. */
#ifndef RUDNN_AUTOTUNE_H
#define RUDNN_AUTOTUNE_H

#include <stddef.h>

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the path of the cache file this process uses into buf (cap bytes). NOT_SUPPORTED when
 * there is none (no variable of the rule above is set), BAD_PARAM when it does not fit. */
RUDNN_API rudnn_status_t rudnn_autotune_cache_path(char *buf, size_t cap);

/* 1 unless RUDNN_AUTOTUNE=off. */
RUDNN_API int rudnn_autotune_is_enabled(void);

/* One cache entry: key is "<op>|<backend>|<device name>|<driver>|<rest>" (rest: the op's own
 * '|'-separated parts, e.g. "bf16|b4h32q4096k4096d128v128|causal"), winner the candidate kernel
 * ("attention.flash_unit"), ms its median time when it was tuned. */
typedef void (*rudnn_autotune_entry_fn)(void *arg, const char *key, const char *winner, double ms);

/* Calls fn for every entry of the cache file, in key order, and returns their count. When the
 * file is missing or untrusted, the entries this process holds in memory instead (their count;
 * rudnn_last_error() says why the file was not used), or -1 when it holds none. */
RUDNN_API int rudnn_autotune_entries(rudnn_autotune_entry_fn fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif
