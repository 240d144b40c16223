/* The work one thread of tests/test_threads.c does: rounds of every op of the families, on the
 * thread's own queue and buffers, each result checked against the FP64 references of
 * tests/reference/ (as test_norm.c and test_moe.c compare). Nothing here uses cmocka's assertions,
 * which may only fail from the thread that runs the test: problems go to the thread's log, which
 * the test checks once the threads have joined.
 *
 * A family adds its ops here: one tw_<family>_round that makes its own inputs, runs each op on
 * t->queue, checks it and returns 0 when it logged a failure; test_threads.c calls it in
 * run_rounds (and in the first-use scenario, if the family has lazily built state). */
#ifndef RUDNN_TESTS_THREADS_WORK_H
#define RUDNN_TESTS_THREADS_WORK_H

#include <pthread.h>

#include "common.h"

/* One thread's queue, data type, random stream and log. label names the thread and round in
 * the log lines. */
typedef struct tw_thread {
    rudnn_context_t ctx;
    rudnn_queue_t queue;
    rudnn_dtype_t dtype;
    rt_rng_t rng;
    rt_log_t *log;
    char label[64];
} tw_thread_t;

/* Logs a failed call (st not want) with the thread's label; returns st == want. */
int tw_status(tw_thread_t *t, const char *what, rudnn_status_t st, rudnn_status_t want);
#define tw_ok(t, what, st) tw_status((t), (what), (st), RUDNN_STATUS_SUCCESS)

/* A device tensor in a buffer of its own (made on t->ctx). */
typedef struct tw_tensor {
    rudnn_buffer_t buf;
    rudnn_tensor_t t;
} tw_tensor_t;

int tw_tensor_create(tw_thread_t *t, tw_tensor_t *x, rudnn_dtype_t dtype, int rank, int64_t d0, int64_t d1);
void tw_tensor_destroy(tw_tensor_t *x);
/* Writes values (already representable in the tensor's dtype) / reads the tensor as floats. */
int tw_put(tw_thread_t *t, const tw_tensor_t *x, const float *values);
int tw_get(tw_thread_t *t, const rudnn_tensor_t *x, float *values);

/* The MoE shapes of a round: H and I multiples of 8, so that the CUDA matrix kernels can run. */
enum { TW_TOKENS = 10, TW_EXPERTS = 6, TW_TOP_K = 2, TW_HIDDEN = 32, TW_INTER = 24 };

/* SwiGLU expert weights on one context (gate [E, I, H], up [E, I, H], down [E, H, I] in dtype)
 * with their host values, and the experts object over them. */
typedef struct tw_experts {
    rudnn_dtype_t dtype;
    tw_tensor_t gate, up, down;
    float *host_gate, *host_up, *host_down;
    rudnn_swiglu_experts_t experts;
} tw_experts_t;

/* Makes the weights from t->rng on t->ctx (uploaded through t->queue) in t->dtype. */
int tw_experts_create(tw_thread_t *t, tw_experts_t *x);
void tw_experts_destroy(tw_experts_t *x);
/* Up to cap names of x's expert kernels of strategy s; returns how many there are. */
int tw_kernels_of(const tw_experts_t *x, rudnn_moe_strategy_t s, const char **names, int cap);

/* layer_norm, rms_norm, softmax_last_axis and add_rms_norm on fresh data in t->dtype. */
int tw_norm_round(tw_thread_t *t);

/* rms_norm on the first rows[j] rows of fresh data of [rows[n - 1], TW_GRID_COLS] in t->dtype,
 * j = 0 .. n - 1 (rows increasing) without waiting in between, then the output checked: one
 * kernel whose local size does not depend on the rows and whose grid does. */
enum { TW_GRID_COLS = 72 };
int tw_rms_norm_grids(tw_thread_t *t, const int64_t *rows, int n);

/* route, dispatch, the experts of x (forward_dispatched with strategy) and combine on fresh data
 * in x's dtype. When before_forward is not NULL the thread waits on it just before the forward,
 * so that every thread's forward starts at once (a first use). */
int tw_moe_round(tw_thread_t *t, const tw_experts_t *x, rudnn_moe_strategy_t strategy,
                 pthread_barrier_t *before_forward);

/* attention (causal, GQA 2, lse) with every strategy the backend lists and Autotune, on fresh data
 * in t->dtype, then rudnn_attention_backward from the last forward's out and lse (skipped where
 * its workspace query answers NOT_SUPPORTED); a backend without attention kernels has nothing to
 * run. */
int tw_attention_round(tw_thread_t *t);

/* paged attention (a host plan, a device plan on t->queue, an append, plain and split calls) on
 * fresh data in t->dtype against the FP64 reference; a backend without its kernels skips it. */
int tw_paged_attention_round(tw_thread_t *t);

/* The rounds below make fresh data in t->dtype, poison every output before each call (so that an
 * element a call leaves unwritten fails) and check each result against the family's FP64
 * reference within the error bound of its numeric suite's header comment (tests/test_<family>.c).
 * A backend without the family (NOT_SUPPORTED from its kernel list, its workspace query or, for
 * pooling and interpolation, which have neither, from the first forward) has nothing to run. */

/* convolution (2D, stride 2, padding 1, bias): forward, data backward and weight backward (with
 * dbias), each with every strategy the backend lists for the direction and Autotune (threads
 * racing on the autotune cache). */
int tw_convolution_round(tw_thread_t *t);

/* pooling: MAX forward (2D, window 3, stride 2, padding 1) with indices, then its backward. */
int tw_pooling_round(tw_thread_t *t);

/* interpolation: bilinear forward (5 x 4 -> 9 x 7) and its backward. */
int tw_interpolation_round(tw_thread_t *t);

/* ctc: the loss with its gradient (grad_loss given), I32 or I64 targets and the workspace from the
 * queue's pool or a buffer of the queried size, each drawn per round. */
int tw_ctc_round(tw_thread_t *t);

/* grid_sample: bilinear forward (2D, zeros padding) and its backward with dx and dgrid, the
 * workspace from the pool or a buffer of the queried size, drawn per round. */
int tw_grid_sample_round(tw_thread_t *t);

#endif
