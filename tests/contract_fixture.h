/* The fixture machinery shared by the contract suites of the convolution, pooling, interpolation,
 * ctc and grid_sample families (tests/test_<family>_contract.c): one buffer a tensor (plus an
 * optional workspace buffer) with every byte guarded, created once for the group; the rejection
 * check of a call (its status, a message naming the op, the argument and the rule, no byte of any
 * fixture buffer written); and the restore after a call wrote where it must not. Each suite keeps
 * its callspec, its calls and its cases; it describes its calls with a contract_family_t. */
#ifndef RUDNN_TESTS_CONTRACT_FIXTURE_H
#define RUDNN_TESTS_CONTRACT_FIXTURE_H

#include "common.h"

#define CONTRACT_MAX_TENSORS 8

/* ---- the fixture ------------------------------------------------------------------------------- */

typedef struct contract_fixture {
    rt_tensor_t t[CONTRACT_MAX_TENSORS];
    int count;                /* tensors in t */
    rudnn_buffer_t ws;        /* NULL: none */
    size_t ws_bytes;
    rt_guard_t guard;         /* the tensors' buffers (t's order), then the workspace's */
    void (*fill_inputs)(void); /* writes the inputs' values (the outputs keep the sentinel) */
} contract_fixture_t;

/* Creates count tensors (names[i], dtypes[i] (NULL: all F32), ranks[i] (NULL: all 4), dims[i],
 * offset 0, slack bytes after each), guards each buffer under its name, then (ws_bytes != 0) a
 * workspace buffer of ws_bytes guarded as "workspace", and calls fill_inputs. names must outlive f.
 * Fails the running program on error. */
void contract_fixture_setup(contract_fixture_t *f, int count, const char *const *names, const rudnn_dtype_t *dtypes,
                            const int *ranks, const int64_t *const *dims, size_t slack, size_t ws_bytes,
                            void (*fill_inputs)(void));

/* Frees what contract_fixture_setup made, then rt_group_teardown_second(state) (its result). */
int contract_fixture_teardown(contract_fixture_t *f, void **state);

/* After a call wrote to a fixture buffer: the queue synchronized, every tensor's buffer poisoned
 * again, the inputs filled again, every guarded buffer snapshot again. */
void contract_fixture_restore(contract_fixture_t *f);

/* ---- a rejected call ------------------------------------------------------------------------------ */

/* 1 when msg starts with "<op>:" and holds every needle given (a NULL needle is skipped). */
int contract_message_starts(const char *msg, const char *op, const char *n1, const char *n2, const char *n3);

/* The status and message of a rejected call: st must be want, else "<where>: returned <st>,
 * expected <want> (\"<msg>\")"; when it is, named must hold, else "<where>: message \"<msg>\" does
 * not name <op> / <n1> / <n2> / <n3>" (op_prefix: "... does not start with \"<op>:\" or name <n1> /
 * <n2> / <n3>"), a NULL needle written "-". */
void contract_check_rejection(const char *where, rudnn_status_t st, rudnn_status_t want, const char *msg, int named,
                              const char *op, int op_prefix, const char *n1, const char *n2, const char *n3);

/* Nothing written since rt_guard_begin(&f->guard): else "<where>: <call> wrote to <name>'s buffer"
 * for each buffer changed, then contract_fixture_restore. Returns 1 when a buffer changed. */
int contract_check_untouched(contract_fixture_t *f, const char *where, const char *call);

/* A family's calls, numbered 0 .. calls - 1 (a bitmask picks them). */
typedef struct contract_family {
    int calls;
    const char *const *ops; /* the op of each call: its message names it, failures show "[<op>]" */
    /* runs call which of spec; a query writes *bytes */
    rudnn_status_t (*call)(const void *spec, int which, size_t *bytes);
    /* the message names the op and the needles; NULL: contract_message_starts (op_prefix) or
     * rt_message_names */
    int (*names)(const char *msg, int which, const char *n1, const char *n2, const char *n3);
    int op_prefix;         /* the message must start with "<op>:" */
    size_t bytes_sentinel; /* nonzero: *bytes starts as this, and a rejected call must leave it so */
} contract_family_t;

/* Every call of fam in calls (a bitmask) made with spec: the guard begun, the call, then
 * contract_check_rejection (where "<what> [<op>]"), *bytes untouched ("<where>: a rejected query
 * wrote *bytes (<bytes>)", when fam->bytes_sentinel) and contract_check_untouched (call "a rejected
 * call (<status>)"). */
void contract_expect_reject(contract_fixture_t *f, const contract_family_t *fam, const void *spec, unsigned calls,
                            rudnn_status_t want, const char *n1, const char *n2, const char *n3, const char *what);

#endif
