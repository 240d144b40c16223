/* Allocation-fault walk (tests/test_faults.c): one "op case" per public call that allocates.
 *
 * A family adds its cases in tests/faults/<family>.c as a table of fault_case_t and lists the
 * table in test_faults.c's family list. The walk counts the allocations a call makes (through
 * rudnn/debug.h), then for every N makes the Nth fail and checks: an error status (ALLOC_FAILED)
 * whose message names the op, outputs untouched, nothing left allocated, and the same call
 * succeeding right after with the reference result. */
#ifndef RUDNN_TESTS_FAULT_CASE_H
#define RUDNN_TESTS_FAULT_CASE_H

#include <stddef.h>
#include <stdint.h>

#include <rudnn/rudnn.h>

/* Where a case runs: a context and queue made for it (cold: programs and pool empty), or the
 * walk's shared context (programs built) with a fresh queue (empty pool). */
typedef struct fault_env {
    rudnn_context_t ctx;
    rudnn_queue_t queue;
    int variant; /* the case's variant */
} fault_env_t;

/* The states the walk puts a call in before counting and failing its allocations. */
enum {
    FAULT_COLD_CONTEXT = 1, /* new context and queue: program builds and pool blocks */
    FAULT_COLD_QUEUE = 2,   /* shared context, new queue: pool blocks */
    FAULT_WARM = 4,         /* shared context, queue warmed by one call: what is left once warm */
};

/* Handle value an output handle holds before the call; still there after a failed call. */
#define FAULT_NO_HANDLE ((void *)(uintptr_t)0x5e47)

typedef struct fault_case {
    const char *name;  /* the op; a failure's message must contain it */
    size_t state_size; /* bytes of the case's state, zeroed before setup */
    unsigned modes;    /* FAULT_* states the walk runs the case in */
    /* Makes inputs and outputs on env; returns a status (not SUCCESS: the setup failed;
     * NOT_SUPPORTED: the case cannot run on this backend, and is reported as skipped). */
    rudnn_status_t (*setup)(void *state, const fault_env_t *env);
    /* Fills the outputs with a sentinel and resets output handles to FAULT_NO_HANDLE. */
    rudnn_status_t (*prepare)(void *state);
    rudnn_status_t (*call)(void *state);
    /* After a failed call: 1 when every output still holds its sentinel (else why). */
    int (*unchanged)(void *state, char *why, size_t cap);
    /* After a successful call: the result's bytes (malloc'd; NULL and 0 for none), then what
     * the call made is released (undo) so that the next call starts from the same state. */
    rudnn_status_t (*result)(void *state, uint8_t **bytes, size_t *size);
    void (*undo)(void *state);
    void (*teardown)(void *state);
    const char *label; /* printed name when one op has several cases (NULL: name) */
    int variant;       /* passed to setup through fault_env_t.variant (e.g. a strategy) */
} fault_case_t;

typedef struct fault_family {
    const char *name;
    const fault_case_t *cases;
    size_t count;
} fault_family_t;

extern const fault_family_t fault_family_core;
extern const fault_family_t fault_family_norm;
extern const fault_family_t fault_family_moe;
extern const fault_family_t fault_family_attention;
extern const fault_family_t fault_family_ffn;
extern const fault_family_t fault_family_gated_delta;
extern const fault_family_t fault_family_paged_attention;
extern const fault_family_t fault_family_moe_train;
extern const fault_family_t fault_family_convolution;
extern const fault_family_t fault_family_pooling;
extern const fault_family_t fault_family_interpolation;
extern const fault_family_t fault_family_ctc;
extern const fault_family_t fault_family_grid_sample;

/* ---- helpers for the cases (fault_util.c) ---- */

/* A buffer of bytes on env, written from init (NULL: the sentinel byte). */
rudnn_status_t fault_buffer(const fault_env_t *env, size_t bytes, const void *init, rudnn_buffer_t *out);
/* An F32 buffer of n values v[i] = sin-ish pattern seeded by seed, and its [rank] tensor. */
rudnn_status_t fault_f32_tensor(const fault_env_t *env, int rank, const int64_t *dims, unsigned seed,
                                rudnn_tensor_t *t);
/* The same in dtype (F32, F16, BF16; rounded to nearest even). */
rudnn_status_t fault_float_tensor(const fault_env_t *env, rudnn_dtype_t dtype, int rank, const int64_t *dims,
                                  unsigned seed, rudnn_tensor_t *t);
/* An output tensor of dtype filled with the sentinel byte. */
rudnn_status_t fault_out_tensor(const fault_env_t *env, rudnn_dtype_t dtype, int rank, const int64_t *dims,
                                rudnn_tensor_t *t);
/* Rewrites the sentinel over the whole buffer of t. */
rudnn_status_t fault_fill_sentinel(const fault_env_t *env, const rudnn_tensor_t *t);
/* 1 when the whole buffer of t still holds the sentinel, else 0 with why (naming arg). */
int fault_is_sentinel(const fault_env_t *env, const rudnn_tensor_t *t, const char *arg, char *why, size_t cap);
/* Appends the bytes of tensor t (read on env's queue) to *bytes / *size (realloc'd). */
rudnn_status_t fault_append_tensor(const fault_env_t *env, const rudnn_tensor_t *t, uint8_t **bytes,
                                   size_t *size);
/* Destroys the buffer of t (if any) and clears t. */
void fault_drop_tensor(rudnn_tensor_t *t);

#define FAULT_SENTINEL 0xa5

#endif
