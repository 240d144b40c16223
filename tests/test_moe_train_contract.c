/* Contract tests of the MoE training family (include/rudnn/moe_train.h, ops/moe_train.c: the router ops
 * rudnn_moe_selected_router_weights and rudnn_moe_selected_router_backward, and rudnn_moe_combine_backward
 * and rudnn_moe_dispatch_backward), on the default backend:
 * every rejected call returns the status of its rule (BAD_PARAM for NULL arguments, option values
 * and overlapping outputs, BAD_SHAPE for ranks and dims, BAD_DTYPE, DEVICE_MISMATCH, NOT_SUPPORTED
 * for a strided view), a message that names the op and the argument, and writes nothing: every
 * buffer involved (on both contexts) is read back byte for byte after the rejected call. A valid
 * call after a rejected one succeeds with rudnn_last_error() == "" (NOT_SUPPORTED naming the op is
 * accepted on a backend other than opencl, whose plugin may lack the family's kernels; the
 * rejections above come first on every backend).
 *
 * The fixture: logits F32 [4, 8], indices I32 [4, 2] (distinct experts), weights, grad_weights F32
 * [4, 2], grad_logits F32 [4, 8]; logits and grad_logits F16 [4, 8]; U32 and I64 indices [4, 2];
 * the same F32 set on a second context. Each buffer has 512 spare bytes so views of other shapes,
 * dtypes and offsets fit (logits [1, 100] with 65 selected experts among them).
 * For the backward of combine and dispatch each set also routes its logits (softmax top-2) and dispatches
 * an F32 input [4, H] (H = 6): expert_output, grad_expert_output, grad_rows F32 [8, 6], grad_output,
 * grad_input F32 [4, 6], combine's grad_weights F32 [4, 2]; set a also dispatches its input's bytes read as
 * F16 (rows of another dtype than the tensors). Their messages must name the argument as a whole word
 * (expert_output is not found inside grad_expert_output).
 *
 * Usage: test_moe_train_contract [glob] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/moe_train.h>

#include "common.h"

#define T 4
#define E 8
#define K 2
#define SLACK 512

#define H 6

#define OPW "moe_selected_router_weights"
#define OPB "moe_selected_router_backward"
#define OPC "moe_combine_backward"
#define OPD "moe_dispatch_backward"

/* ---- fixture -------------------------------------------------------------------- */

typedef struct set {
    rt_tensor_t logits, idx, w, gw, gl;
    /* combine and dispatch backward: the input x, expert_output, grad_output, grad_expert_output, combine's
     * grad_weights, grad_rows, grad_input */
    rt_tensor_t x, eo, go, ge, cgw, gr, gi;
    rudnn_routing_plan_t plan;
    rudnn_dispatched_t disp;
} set_t;

typedef struct fx {
    set_t a, b; /* b: on the second context */
    rt_tensor_t logits16, gl16, idx_u32, idx_i64;
    rudnn_dispatched_t disp16; /* a's plan, x's bytes read as F16 [4, 6] */
    rt_guard_t guard; /* every buffer, read back around each rejected call */
    rt_log_t log;
    int on_opencl;
} fx_t;

static const int64_t dims_logits[2] = {T, E};
static const int64_t dims_k[2] = {T, K};
static const int64_t dims_rows[2] = {T * K, H}; /* expert_output, grad_expert_output, grad_rows */
static const int64_t dims_tok[2] = {T, H};      /* the input, grad_output, grad_input */

static void upload_indices(const rt_tensor_t *t)
{
    uint8_t raw[T * K * 8];
    for (int i = 0; i < T * K; i++) {
        const int64_t v = (i * 3 + i / K) % E; /* distinct within a row */
        if (t->t.dtype == RUDNN_I64)
            memcpy(raw + 8 * i, &v, 8);
        else {
            const int32_t v32 = (int32_t)v;
            memcpy(raw + 4 * i, &v32, 4);
        }
    }
    rt_assert_status(rudnn_tensor_write(rt_queue, &t->t, raw, rudnn_tensor_bytes(&t->t)), RUDNN_STATUS_SUCCESS);
}

/* Makes a set on rt_ctx / rt_queue (the caller binds the second context for b). */
static void make_set(set_t *s, uint64_t seed)
{
    rt_rng_t rng;
    rt_rng_seed(&rng, seed);
    rt_tensor_create(&s->logits, RUDNN_F32, 2, dims_logits, 0, SLACK);
    rt_tensor_create(&s->idx, RUDNN_I32, 2, dims_k, 0, SLACK);
    rt_tensor_create(&s->w, RUDNN_F32, 2, dims_k, 0, SLACK);
    rt_tensor_create(&s->gw, RUDNN_F32, 2, dims_k, 0, SLACK);
    rt_tensor_create(&s->gl, RUDNN_F32, 2, dims_logits, 0, SLACK);
    rt_tensor_fill_uniform(&s->logits, &rng, -3.0, 3.0);
    rt_tensor_fill_uniform(&s->gw, &rng, -1.0, 1.0);
    upload_indices(&s->idx);
    rt_tensor_create(&s->x, RUDNN_F32, 2, dims_tok, 0, SLACK);
    rt_tensor_create(&s->eo, RUDNN_F32, 2, dims_rows, 0, SLACK);
    rt_tensor_create(&s->go, RUDNN_F32, 2, dims_tok, 0, SLACK);
    rt_tensor_create(&s->ge, RUDNN_F32, 2, dims_rows, 0, SLACK);
    rt_tensor_create(&s->cgw, RUDNN_F32, 2, dims_k, 0, SLACK);
    rt_tensor_create(&s->gr, RUDNN_F32, 2, dims_rows, 0, SLACK);
    rt_tensor_create(&s->gi, RUDNN_F32, 2, dims_tok, 0, SLACK);
    rt_tensor_fill_uniform(&s->x, &rng, -1.0, 1.0);
    rt_tensor_fill_uniform(&s->eo, &rng, -1.0, 1.0);
    rt_tensor_fill_uniform(&s->go, &rng, -1.0, 1.0);
    rt_tensor_fill_uniform(&s->gr, &rng, -1.0, 1.0);
    const rudnn_routing_options_t ro = {K, 1};
    rt_assert_status(rudnn_moe_route(rt_queue, &s->logits.t, &ro, &s->plan), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_moe_dispatch(rt_queue, s->plan, &s->x.t, &s->disp), RUDNN_STATUS_SUCCESS);
}

static void free_set(set_t *s)
{
    rudnn_dispatched_destroy(s->disp);
    rudnn_routing_plan_destroy(s->plan);
    rt_tensor_t *all[] = {&s->logits, &s->idx, &s->w, &s->gw, &s->gl, &s->x,  &s->eo,
                          &s->go,     &s->ge,  &s->cgw, &s->gr, &s->gi};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_tensor_destroy(all[i]);
}

static void track_set(fx_t *f, const set_t *s, rudnn_queue_t q)
{
    const rt_tensor_t *all[] = {&s->logits, &s->idx, &s->w, &s->gw, &s->gl, &s->x,  &s->eo,
                                &s->go,     &s->ge,  &s->cgw, &s->gr, &s->gi};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_guard_track(&f->guard, q, all[i], NULL);
}

static int fx_setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    *state = f;
    make_set(&f->a, 1);
    rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
    make_set(&f->b, 2);
    rt_unbind(saved);
    rt_rng_t rng;
    rt_rng_seed(&rng, 3);
    rt_tensor_create(&f->logits16, RUDNN_F16, 2, dims_logits, 0, SLACK);
    rt_tensor_create(&f->gl16, RUDNN_F16, 2, dims_logits, 0, SLACK);
    rt_tensor_create(&f->idx_u32, RUDNN_U32, 2, dims_k, 0, SLACK);
    rt_tensor_create(&f->idx_i64, RUDNN_I64, 2, dims_k, 0, SLACK);
    rt_tensor_fill_uniform(&f->logits16, &rng, -3.0, 3.0);
    upload_indices(&f->idx_u32);
    upload_indices(&f->idx_i64);
    const rudnn_tensor_t x16 = rt_tensor_desc(&f->a.x, RUDNN_F16, 2, dims_tok, 0);
    rt_assert_status(rudnn_moe_dispatch(rt_queue, f->a.plan, &x16, &f->disp16), RUDNN_STATUS_SUCCESS);
    rudnn_device_info_t info;
    f->on_opencl = rudnn_context_device_info(rt_ctx, &info) == RUDNN_STATUS_SUCCESS &&
                   strcmp(info.backend, "opencl") == 0;
    rudnn_queue_synchronize(rt_queue);
    rudnn_queue_synchronize(rt_queue2);
    track_set(f, &f->a, rt_queue);
    track_set(f, &f->b, rt_queue2);
    rt_guard_track(&f->guard, rt_queue, &f->logits16, NULL);
    rt_guard_track(&f->guard, rt_queue, &f->gl16, NULL);
    rt_guard_track(&f->guard, rt_queue, &f->idx_u32, NULL);
    rt_guard_track(&f->guard, rt_queue, &f->idx_i64, NULL);
    /* the dispatched object's own arrays are inputs too */
    rudnn_tensor_t views[3];
    rt_assert_status(rudnn_dispatched_positions(f->a.disp, &views[0]), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_routing_plan_weights(f->a.plan, &views[1]), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_dispatched_tokens(f->a.disp, &views[2]), RUDNN_STATUS_SUCCESS);
    for (int i = 0; i < 3; i++)
        rt_guard_track_buffer(&f->guard, rt_queue, views[i].buffer, views[i].offset + rudnn_tensor_bytes(&views[i]),
                              NULL);
    return 0;
}

static int fx_teardown(void **state)
{
    fx_t *f = *state;
    if (!f)
        return 0;
    rt_guard_free(&f->guard);
    rudnn_dispatched_destroy(f->disp16);
    free_set(&f->a);
    free_set(&f->b);
    rt_tensor_destroy(&f->logits16);
    rt_tensor_destroy(&f->gl16);
    rt_tensor_destroy(&f->idx_u32);
    rt_tensor_destroy(&f->idx_i64);
    free(f);
    return 0;
}

static void fx_finish(fx_t *f) { rt_log_finish(&f->log, "check(s)"); }

/* ---- checking one rejected call ------------------------------------------------------------- */

/* 1 when msg holds needle; with whole, only as a whole word (no letter, digit or '_' either side). */
static int mentions(const char *msg, const char *needle, int whole)
{
    const size_t n = strlen(needle);
    for (const char *p = strstr(msg, needle); p; p = strstr(p + 1, needle)) {
        const char before = p == msg ? ' ' : p[-1], after = p[n];
        const int word_before = before == '_' || (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z') ||
                                (before >= '0' && before <= '9');
        const int word_after = after == '_' || (after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z') ||
                               (after >= '0' && after <= '9');
        if (!whole || (!word_before && !word_after))
            return 1;
    }
    return 0;
}

/* Checks status (want), that the message names op and each non-NULL needle (whole: as whole words), and
 * that no tracked buffer changed since rt_guard_begin. */
static void check_reject_impl(fx_t *f, rudnn_status_t st, rudnn_status_t want, const char *op, const char *n1,
                              const char *n2, const char *what, int whole)
{
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", rudnn_last_error() ? rudnn_last_error() : "(null)");
    int bad = 0;
    if (st != want) {
        rt_logf(&f->log, "  %s, %s: returned %s, expected %s; message \"%s\"\n", op, what, rudnn_status_string(st),
                rudnn_status_string(want), msg);
        bad = 1;
    }
    const char *needles[3] = {op, n1, n2};
    for (int i = 0; i < 3; i++) {
        if (needles[i] && !mentions(msg, needles[i], whole)) {
            rt_logf(&f->log, "  %s, %s: message \"%s\" does not mention \"%s\"\n", op, what, msg, needles[i]);
            bad = 1;
        }
    }
    const int changed = rt_guard_changed(&f->guard);
    if (changed) {
        rt_logf(&f->log, "  %s, %s: %d buffer(s) were written by a rejected call\n", op, what, changed);
        bad = 1;
    }
    f->log.failures += bad;
}

static void check_reject(fx_t *f, rudnn_status_t st, rudnn_status_t want, const char *op, const char *n1,
                         const char *n2, const char *what)
{
    check_reject_impl(f, st, want, op, n1, n2, what, 0);
}

#define REJECT(f, want, op, n1, n2, what, call)                                                                \
    do {                                                                                                       \
        rt_guard_begin(&(f)->guard);                                                                           \
        rudnn_status_t st_ = (call);                                                                           \
        check_reject(f, st_, want, op, n1, n2, what);                                                          \
    } while (0)

/* The same, the needles as whole words. */
#define REJECT_WORDS(f, want, op, n1, n2, what, call)                                                          \
    do {                                                                                                       \
        rt_guard_begin(&(f)->guard);                                                                           \
        rudnn_status_t st_ = (call);                                                                           \
        check_reject_impl(f, st_, want, op, n1, n2, what, 1);                                                  \
    } while (0)

static rudnn_router_weight_options_t opts_ok(void)
{
    rudnn_router_weight_options_t o = {RUDNN_ROUTER_SOFTMAX, 1, 1.0f};
    return o;
}

/* The argument tuple of both ops, starting from fixture a; each test changes one member. */
typedef struct args {
    rudnn_queue_t q;
    const rudnn_tensor_t *logits, *idx, *w, *gw, *gl;
    const rudnn_router_weight_options_t *o;
} args_t;

static args_t args_ok(fx_t *f, const rudnn_router_weight_options_t *o)
{
    args_t a = {rt_queue, &f->a.logits.t, &f->a.idx.t, &f->a.w.t, &f->a.gw.t, &f->a.gl.t, o};
    return a;
}

static void reject_w(fx_t *f, args_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    REJECT(f, want, OPW, n1, n2, what, rudnn_moe_selected_router_weights(a.q, a.logits, a.idx, a.o, a.w));
}

static void reject_b(fx_t *f, args_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    REJECT(f, want, OPB, n1, n2, what, rudnn_moe_selected_router_backward(a.q, a.logits, a.idx, a.gw, a.o, a.gl));
}

/* Both ops with the same arguments (a rule of their shared inputs). */
static void reject_both(fx_t *f, args_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    reject_w(f, a, want, n1, n2, what);
    reject_b(f, a, want, n1, n2, what);
}

/* ---- the shared inputs ------------------------------------------------------------------------ */

static void test_null_arguments(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    args_t a = args_ok(f, &ok);
    a.q = NULL;
    reject_both(f, a, RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue");
    a = args_ok(f, &ok);
    a.logits = NULL;
    reject_both(f, a, RUDNN_STATUS_BAD_PARAM, "logits", NULL, "NULL logits");
    a = args_ok(f, &ok);
    a.idx = NULL;
    reject_both(f, a, RUDNN_STATUS_BAD_PARAM, "indices", NULL, "NULL indices");
    a = args_ok(f, &ok);
    a.o = NULL;
    reject_both(f, a, RUDNN_STATUS_BAD_PARAM, "options", NULL, "NULL options");
    a = args_ok(f, &ok);
    a.w = NULL;
    reject_w(f, a, RUDNN_STATUS_BAD_PARAM, "weights", NULL, "NULL weights");
    a = args_ok(f, &ok);
    a.gw = NULL;
    reject_b(f, a, RUDNN_STATUS_BAD_PARAM, "grad_weights", NULL, "NULL grad_weights");
    a = args_ok(f, &ok);
    a.gl = NULL;
    reject_b(f, a, RUDNN_STATUS_BAD_PARAM, "grad_logits", NULL, "NULL grad_logits");
    /* a descriptor without a buffer */
    rudnn_tensor_t nobuf = f->a.logits.t;
    nobuf.buffer = NULL;
    a = args_ok(f, &ok);
    a.logits = &nobuf;
    reject_both(f, a, RUDNN_STATUS_BAD_PARAM, "logits", NULL, "logits without a buffer");
    fx_finish(f);
}

static void test_logits(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    args_t a = args_ok(f, &ok);

    /* dtype: index and quantized dtypes are not logits */
    static const rudnn_dtype_t bad_dtypes[] = {RUDNN_I32, RUDNN_U32, RUDNN_I64, RUDNN_I8};
    for (size_t i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++) {
        rudnn_tensor_t l = rt_tensor_desc(&f->a.logits, bad_dtypes[i], 2, dims_logits, 0);
        char what[64];
        snprintf(what, sizeof what, "logits %s", rudnn_dtype_name(bad_dtypes[i]));
        a.logits = &l;
        reject_both(f, a, RUDNN_STATUS_BAD_DTYPE, "logits", rudnn_dtype_name(bad_dtypes[i]), what);
    }

    /* rank */
    static const int64_t r1[1] = {T * E}, r3[3] = {2, 2, E}, r4[4] = {1, 2, 2, E};
    rudnn_tensor_t l1 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 1, r1, 0);
    rudnn_tensor_t l3 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 3, r3, 0);
    rudnn_tensor_t l4 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 4, r4, 0);
    a.logits = &l1;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits rank 1");
    a.logits = &l3;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits rank 3");
    a.logits = &l4;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits rank 4");

    /* E = 0, with T tokens and with none (an empty call is checked like any other) */
    static const int64_t e0[2] = {T, 0}, t0e0[2] = {0, 0}, t0k[2] = {0, K};
    rudnn_tensor_t le0 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, e0, 0);
    rudnn_tensor_t lt0e0 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, t0e0, 0);
    rudnn_tensor_t it0 = rt_tensor_desc(&f->a.idx, RUDNN_I32, 2, t0k, 0);
    rudnn_tensor_t wt0 = rt_tensor_desc(&f->a.w, RUDNN_F32, 2, t0k, 0);
    rudnn_tensor_t gwt0 = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, t0k, 0);
    rudnn_tensor_t glt0 = rt_tensor_desc(&f->a.gl, RUDNN_F32, 2, t0e0, 0);
    rudnn_tensor_t gle0 = rt_tensor_desc(&f->a.gl, RUDNN_F32, 2, e0, 0);
    a = args_ok(f, &ok);
    a.logits = &le0, a.gl = &gle0;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits [4, 0]");
    a.logits = &lt0e0, a.idx = &it0, a.w = &wt0, a.gw = &gwt0, a.gl = &glt0;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits [0, 0]");

    /* a strided (padded rows) view: valid, but the ops take contiguous tensors */
    static const int64_t half[2] = {T / 2, E};
    rudnn_tensor_t pad = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, half, 0);
    pad.dims[0] = T, pad.strides[0] = E + 4;
    a = args_ok(f, &ok);
    a.logits = &pad;
    reject_both(f, a, RUDNN_STATUS_NOT_SUPPORTED, "logits", NULL, "logits with padded rows");

    /* another context */
    a = args_ok(f, &ok);
    a.logits = &f->b.logits.t;
    reject_both(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "logits", NULL, "logits on another context");
    fx_finish(f);
}

static void test_indices(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    args_t a = args_ok(f, &ok);

    /* rank */
    static const int64_t r1[1] = {T * K}, r3[3] = {T, K, 1};
    rudnn_tensor_t i1 = rt_tensor_desc(&f->a.idx, RUDNN_I32, 1, r1, 0);
    rudnn_tensor_t i3 = rt_tensor_desc(&f->a.idx, RUDNN_I32, 3, r3, 0);
    a.idx = &i1;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "indices", NULL, "indices rank 1");
    a.idx = &i3;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "indices", NULL, "indices rank 3");

    /* dims[0] != T (the outputs keep their valid [T, k] and [T, E]) */
    static const int64_t t3[2] = {T - 1, K}, t5[2] = {T + 1, K};
    rudnn_tensor_t it3 = rt_tensor_desc(&f->a.idx, RUDNN_I32, 2, t3, 0);
    rudnn_tensor_t it5 = rt_tensor_desc(&f->a.idx, RUDNN_I32, 2, t5, 0);
    a.idx = &it3;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "indices", NULL, "indices [3, 2] for 4 tokens");
    a.idx = &it5;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "indices", NULL, "indices [5, 2] for 4 tokens");

    /* dtype: float and 8-bit indices */
    static const rudnn_dtype_t bad_dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16, RUDNN_I8};
    for (size_t i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++) {
        rudnn_tensor_t v = rt_tensor_desc(&f->a.idx, bad_dtypes[i], 2, dims_k, 0);
        char what[64];
        snprintf(what, sizeof what, "indices %s", rudnn_dtype_name(bad_dtypes[i]));
        a.idx = &v;
        reject_both(f, a, RUDNN_STATUS_BAD_DTYPE, "indices", rudnn_dtype_name(bad_dtypes[i]), what);
    }

    /* k = 0 (outputs [4, 0], so only k is wrong), and with no tokens either */
    static const int64_t k0[2] = {T, 0}, t0k0[2] = {0, 0}, t0e[2] = {0, E};
    rudnn_tensor_t ik0 = rt_tensor_desc(&f->a.idx, RUDNN_I32, 2, k0, 0);
    rudnn_tensor_t wk0 = rt_tensor_desc(&f->a.w, RUDNN_F32, 2, k0, 0);
    rudnn_tensor_t gwk0 = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, k0, 0);
    a = args_ok(f, &ok);
    a.idx = &ik0, a.w = &wk0, a.gw = &gwk0;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "indices", NULL, "k = 0");
    rudnn_tensor_t lt0 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, t0e, 0);
    rudnn_tensor_t glt0 = rt_tensor_desc(&f->a.gl, RUDNN_F32, 2, t0e, 0);
    rudnn_tensor_t it0k0 = rt_tensor_desc(&f->a.idx, RUDNN_I32, 2, t0k0, 0);
    rudnn_tensor_t wt0k0 = rt_tensor_desc(&f->a.w, RUDNN_F32, 2, t0k0, 0);
    rudnn_tensor_t gwt0k0 = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, t0k0, 0);
    a.logits = &lt0, a.gl = &glt0, a.idx = &it0k0, a.w = &wt0k0, a.gw = &gwt0k0;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "indices", NULL, "k = 0 with T = 0");

    /* k > E (9 of 8), and k > 64 with E = 100 (65 of 100); outputs shaped to match k */
    static const int64_t k9[2] = {T, E + 1}, l100[2] = {1, 100}, k65[2] = {1, 65};
    rudnn_tensor_t ik9 = rt_tensor_desc(&f->a.idx, RUDNN_I32, 2, k9, 0);
    rudnn_tensor_t wk9 = rt_tensor_desc(&f->a.w, RUDNN_F32, 2, k9, 0);
    rudnn_tensor_t gwk9 = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, k9, 0);
    a = args_ok(f, &ok);
    a.idx = &ik9, a.w = &wk9, a.gw = &gwk9;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "indices", NULL, "k = 9 with 8 experts");
    rudnn_tensor_t ll = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, l100, 0);
    rudnn_tensor_t gll = rt_tensor_desc(&f->a.gl, RUDNN_F32, 2, l100, 0);
    rudnn_tensor_t ik65 = rt_tensor_desc(&f->a.idx, RUDNN_I32, 2, k65, 0);
    rudnn_tensor_t wk65 = rt_tensor_desc(&f->a.w, RUDNN_F32, 2, k65, 0);
    rudnn_tensor_t gwk65 = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, k65, 0);
    a.logits = &ll, a.gl = &gll, a.idx = &ik65, a.w = &wk65, a.gw = &gwk65;
    reject_both(f, a, RUDNN_STATUS_BAD_SHAPE, "indices", "64", "k = 65 with 100 experts");

    /* another context */
    a = args_ok(f, &ok);
    a.idx = &f->b.idx.t;
    reject_both(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "indices", NULL, "indices on another context");
    fx_finish(f);
}

static void test_options(void **state)
{
    fx_t *f = *state;
    static const int scorings[] = {7, -1, 2};
    for (size_t i = 0; i < sizeof scorings / sizeof scorings[0]; i++) {
        rudnn_router_weight_options_t o = opts_ok();
        o.scoring = (rudnn_router_scoring_t)scorings[i];
        char what[64];
        snprintf(what, sizeof what, "scoring = %d", scorings[i]);
        reject_both(f, args_ok(f, &o), RUDNN_STATUS_BAD_PARAM, "scoring", NULL, what);
    }
    static const float scales[] = {0.0f, -0.0f, -1.0f, NAN, INFINITY, -INFINITY};
    static const char *const names[] = {"0", "-0", "-1", "NaN", "inf", "-inf"};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++)
        for (int sigmoid = 0; sigmoid < 2; sigmoid++) {
            rudnn_router_weight_options_t o = opts_ok();
            o.scale = scales[i];
            o.scoring = sigmoid ? RUDNN_ROUTER_SIGMOID : RUDNN_ROUTER_SOFTMAX;
            char what[64];
            snprintf(what, sizeof what, "scale = %s (%s)", names[i], sigmoid ? "sigmoid" : "softmax");
            reject_both(f, args_ok(f, &o), RUDNN_STATUS_BAD_PARAM, "scale", NULL, what);
        }
    fx_finish(f);
}

/* ---- the outputs ------------------------------------------------------------------------------ */

static void test_weights_output(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    args_t a = args_ok(f, &ok);
    static const rudnn_dtype_t bad_dtypes[] = {RUDNN_F16, RUDNN_BF16, RUDNN_I32};
    for (size_t i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++) {
        rudnn_tensor_t w = rt_tensor_desc(&f->a.w, bad_dtypes[i], 2, dims_k, 0);
        char what[64];
        snprintf(what, sizeof what, "weights %s", rudnn_dtype_name(bad_dtypes[i]));
        a.w = &w;
        reject_w(f, a, RUDNN_STATUS_BAD_DTYPE, "weights", rudnn_dtype_name(bad_dtypes[i]), what);
    }
    /* weights in the logits dtype is still wrong when the logits are F16 */
    a = args_ok(f, &ok);
    a.logits = &f->logits16.t;
    rudnn_tensor_t w16 = rt_tensor_desc(&f->a.w, RUDNN_F16, 2, dims_k, 0);
    a.w = &w16;
    reject_w(f, a, RUDNN_STATUS_BAD_DTYPE, "weights", "f16", "weights f16 with f16 logits");

    static const int64_t s1[1] = {T * K}, s43[2] = {T, K + 1}, s41[2] = {T, K - 1}, s52[2] = {T + 1, K},
                         s32[2] = {T - 1, K}, s3[3] = {T, K, 1};
    const struct {
        int rank;
        const int64_t *dims;
        const char *what;
    } shapes[] = {{1, s1, "weights [8]"},       {2, s43, "weights [4, 3]"}, {2, s41, "weights [4, 1]"},
                  {2, s52, "weights [5, 2]"},   {2, s32, "weights [3, 2]"}, {3, s3, "weights [4, 2, 1]"}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        rudnn_tensor_t w = rt_tensor_desc(&f->a.w, RUDNN_F32, shapes[i].rank, shapes[i].dims, 0);
        a = args_ok(f, &ok);
        a.w = &w;
        reject_w(f, a, RUDNN_STATUS_BAD_SHAPE, "weights", NULL, shapes[i].what);
    }

    /* overlapping an input: on the indices (exactly their bytes: I32 [4, 2] and F32 [4, 2]), inside
     * the logits (4 bytes in), over the end of the logits */
    rudnn_tensor_t on_idx = rt_tensor_desc(&f->a.idx, RUDNN_F32, 2, dims_k, 0);
    rudnn_tensor_t in_logits = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, dims_k, 4);
    rudnn_tensor_t end_logits = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, dims_k, (T * E - 1) * 4);
    a = args_ok(f, &ok);
    a.w = &on_idx;
    reject_w(f, a, RUDNN_STATUS_BAD_PARAM, "weights", "indices", "weights on the indices' bytes");
    a.w = &in_logits;
    reject_w(f, a, RUDNN_STATUS_BAD_PARAM, "weights", "logits", "weights inside the logits");
    a.w = &end_logits;
    reject_w(f, a, RUDNN_STATUS_BAD_PARAM, "weights", "logits", "weights over the logits' last element");

    /* a strided view */
    static const int64_t half[2] = {T / 2, K};
    rudnn_tensor_t pad = rt_tensor_desc(&f->a.w, RUDNN_F32, 2, half, 0);
    pad.dims[0] = T, pad.strides[0] = K + 1;
    a = args_ok(f, &ok);
    a.w = &pad;
    reject_w(f, a, RUDNN_STATUS_NOT_SUPPORTED, "weights", NULL, "weights with padded rows");

    a = args_ok(f, &ok);
    a.w = &f->b.w.t;
    reject_w(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "weights", NULL, "weights on another context");
    fx_finish(f);
}

static void test_grad_weights(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    args_t a = args_ok(f, &ok);
    static const rudnn_dtype_t bad_dtypes[] = {RUDNN_F16, RUDNN_BF16, RUDNN_I32};
    for (size_t i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++) {
        rudnn_tensor_t g = rt_tensor_desc(&f->a.gw, bad_dtypes[i], 2, dims_k, 0);
        char what[64];
        snprintf(what, sizeof what, "grad_weights %s", rudnn_dtype_name(bad_dtypes[i]));
        a.gw = &g;
        reject_b(f, a, RUDNN_STATUS_BAD_DTYPE, "grad_weights", rudnn_dtype_name(bad_dtypes[i]), what);
    }
    static const int64_t s1[1] = {T * K}, s43[2] = {T, K + 1}, s52[2] = {T + 1, K};
    const struct {
        int rank;
        const int64_t *dims;
        const char *what;
    } shapes[] = {{1, s1, "grad_weights [8]"}, {2, s43, "grad_weights [4, 3]"}, {2, s52, "grad_weights [5, 2]"}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        rudnn_tensor_t g = rt_tensor_desc(&f->a.gw, RUDNN_F32, shapes[i].rank, shapes[i].dims, 0);
        a = args_ok(f, &ok);
        a.gw = &g;
        reject_b(f, a, RUDNN_STATUS_BAD_SHAPE, "grad_weights", NULL, shapes[i].what);
    }
    a = args_ok(f, &ok);
    a.gw = &f->b.gw.t;
    reject_b(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "grad_weights", NULL, "grad_weights on another context");
    fx_finish(f);
}

static void test_grad_logits(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    args_t a = args_ok(f, &ok);

    /* dtype: the logits' dtype, nothing else */
    static const rudnn_dtype_t bad_dtypes[] = {RUDNN_F16, RUDNN_BF16, RUDNN_I32};
    for (size_t i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++) {
        rudnn_tensor_t g = rt_tensor_desc(&f->a.gl, bad_dtypes[i], 2, dims_logits, 0);
        char what[64];
        snprintf(what, sizeof what, "grad_logits %s with f32 logits", rudnn_dtype_name(bad_dtypes[i]));
        a.gl = &g;
        reject_b(f, a, RUDNN_STATUS_BAD_DTYPE, "grad_logits", rudnn_dtype_name(bad_dtypes[i]), what);
    }
    a = args_ok(f, &ok);
    a.logits = &f->logits16.t; /* grad_logits stays F32 */
    reject_b(f, a, RUDNN_STATUS_BAD_DTYPE, "grad_logits", "f32", "grad_logits f32 with f16 logits");
    rudnn_tensor_t gbf = rt_tensor_desc(&f->gl16, RUDNN_BF16, 2, dims_logits, 0);
    a.gl = &gbf;
    reject_b(f, a, RUDNN_STATUS_BAD_DTYPE, "grad_logits", "bf16", "grad_logits bf16 with f16 logits");

    /* shape */
    static const int64_t s1[1] = {T * E}, s47[2] = {T, E - 1}, s49[2] = {T, E + 1}, s38[2] = {T - 1, E},
                         s58[2] = {T + 1, E}, s3[3] = {T, E, 1};
    const struct {
        int rank;
        const int64_t *dims;
        const char *what;
    } shapes[] = {{1, s1, "grad_logits [32]"},  {2, s47, "grad_logits [4, 7]"}, {2, s49, "grad_logits [4, 9]"},
                  {2, s38, "grad_logits [3, 8]"}, {2, s58, "grad_logits [5, 8]"}, {3, s3, "grad_logits [4, 8, 1]"}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        rudnn_tensor_t g = rt_tensor_desc(&f->a.gl, RUDNN_F32, shapes[i].rank, shapes[i].dims, 0);
        a = args_ok(f, &ok);
        a.gl = &g;
        reject_b(f, a, RUDNN_STATUS_BAD_SHAPE, "grad_logits", NULL, shapes[i].what);
    }

    /* overlapping an input: exactly the logits (in place is not allowed either), inside the
     * logits, over the grad_weights, over the indices */
    rudnn_tensor_t in_logits = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, dims_logits, 8);
    rudnn_tensor_t on_gw = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, dims_logits, 0);
    rudnn_tensor_t on_idx = rt_tensor_desc(&f->a.idx, RUDNN_F32, 2, dims_logits, 4);
    a = args_ok(f, &ok);
    a.gl = &f->a.logits.t;
    reject_b(f, a, RUDNN_STATUS_BAD_PARAM, "grad_logits", "logits", "grad_logits in place of the logits");
    a.gl = &in_logits;
    reject_b(f, a, RUDNN_STATUS_BAD_PARAM, "grad_logits", "logits", "grad_logits inside the logits");
    a.gl = &on_gw;
    reject_b(f, a, RUDNN_STATUS_BAD_PARAM, "grad_logits", "grad_weights", "grad_logits over the grad_weights");
    a.gl = &on_idx;
    reject_b(f, a, RUDNN_STATUS_BAD_PARAM, "grad_logits", "indices", "grad_logits over the indices");

    /* a strided view */
    static const int64_t half[2] = {T / 2, E};
    rudnn_tensor_t pad = rt_tensor_desc(&f->a.gl, RUDNN_F32, 2, half, 0);
    pad.dims[0] = T, pad.strides[0] = E + 2;
    a = args_ok(f, &ok);
    a.gl = &pad;
    reject_b(f, a, RUDNN_STATUS_NOT_SUPPORTED, "grad_logits", NULL, "grad_logits with padded rows");

    a = args_ok(f, &ok);
    a.gl = &f->b.gl.t;
    reject_b(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "grad_logits", NULL, "grad_logits on another context");
    fx_finish(f);
}

/* ---- combine and dispatch backward ------------------------------------------------------------ */

/* The arguments of both ops, starting from set a; each test changes one member. */
typedef struct rargs {
    rudnn_queue_t q;
    rudnn_dispatched_t d;
    const rudnn_tensor_t *eo, *go, *ge, *cgw, *gr, *gi;
    rudnn_combine_grad_strategy_t strategy;
} rargs_t;

static rargs_t rargs_ok(fx_t *f)
{
    rargs_t a = {rt_queue,    f->a.disp,   &f->a.eo.t, &f->a.go.t, &f->a.ge.t, &f->a.cgw.t,
                 &f->a.gr.t, &f->a.gi.t, RUDNN_COMBINE_GRAD_SERIAL};
    return a;
}

/* combine_backward with both strategies (a.strategy ignored), or with a.strategy alone (one) */
static void reject_c(fx_t *f, rargs_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    for (int s = 0; s < 2; s++) {
        char w[160];
        snprintf(w, sizeof w, "%s (%s)", what, s ? "plane" : "serial");
        REJECT_WORDS(f, want, OPC, n1, n2, w,
                     rudnn_moe_combine_backward(a.q, a.d, a.eo, a.go,
                                                s ? RUDNN_COMBINE_GRAD_PLANE : RUDNN_COMBINE_GRAD_SERIAL, a.ge,
                                                a.cgw));
    }
}

static void reject_c_strategy(fx_t *f, rargs_t a, rudnn_status_t want, const char *n1, const char *what)
{
    REJECT_WORDS(f, want, OPC, n1, NULL, what, rudnn_moe_combine_backward(a.q, a.d, a.eo, a.go, a.strategy, a.ge,
                                                                          a.cgw));
}

static void reject_d(fx_t *f, rargs_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    REJECT_WORDS(f, want, OPD, n1, n2, what, rudnn_moe_dispatch_backward(a.q, a.d, a.gr, a.gi));
}

static void reject_cd(fx_t *f, rargs_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    reject_c(f, a, want, n1, n2, what);
    reject_d(f, a, want, n1, n2, what);
}

/* The member of a named arg (NULL: none of that name). */
static const rudnn_tensor_t **rarg(rargs_t *a, const char *name)
{
    if (!strcmp(name, "expert_output"))
        return &a->eo;
    if (!strcmp(name, "grad_output"))
        return &a->go;
    if (!strcmp(name, "grad_expert_output"))
        return &a->ge;
    if (!strcmp(name, "grad_weights"))
        return &a->cgw;
    if (!strcmp(name, "grad_rows"))
        return &a->gr;
    if (!strcmp(name, "grad_input"))
        return &a->gi;
    return NULL;
}

/* Rejects with a replaced, the op of arg name's. */
static void reject_arg(fx_t *f, rargs_t a, const char *name, rudnn_status_t want, const char *n2, const char *what)
{
    if (!strcmp(name, "grad_rows") || !strcmp(name, "grad_input"))
        reject_d(f, a, want, name, n2, what);
    else
        reject_c(f, a, want, name, n2, what);
}

static const char *const rows_args[6] = {"expert_output", "grad_output", "grad_expert_output", "grad_weights",
                                         "grad_rows",     "grad_input"};

static const rt_tensor_t *set_arg(const set_t *s, const char *name)
{
    const rt_tensor_t *all[6] = {&s->eo, &s->go, &s->ge, &s->cgw, &s->gr, &s->gi};
    for (int i = 0; i < 6; i++)
        if (!strcmp(name, rows_args[i]))
            return all[i];
    return NULL;
}

static void test_rows_null(void **state)
{
    fx_t *f = *state;
    rargs_t a = rargs_ok(f);
    a.q = NULL;
    reject_cd(f, a, RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue");
    a = rargs_ok(f);
    a.d = NULL;
    reject_cd(f, a, RUDNN_STATUS_BAD_PARAM, "dispatched", NULL, "NULL dispatched");
    for (int i = 0; i < 6; i++) {
        char what[64];
        snprintf(what, sizeof what, "NULL %s", rows_args[i]);
        a = rargs_ok(f);
        *rarg(&a, rows_args[i]) = NULL;
        reject_arg(f, a, rows_args[i], RUDNN_STATUS_BAD_PARAM, NULL, what);
        /* a descriptor without a buffer */
        rudnn_tensor_t nobuf = set_arg(&f->a, rows_args[i])->t;
        nobuf.buffer = NULL;
        snprintf(what, sizeof what, "%s without a buffer", rows_args[i]);
        a = rargs_ok(f);
        *rarg(&a, rows_args[i]) = &nobuf;
        reject_arg(f, a, rows_args[i], RUDNN_STATUS_BAD_PARAM, NULL, what);
    }
    fx_finish(f);
}

static void test_rows_context(void **state)
{
    fx_t *f = *state;
    rargs_t a = rargs_ok(f);
    a.d = f->b.disp; /* every tensor on the queue's context */
    reject_cd(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "dispatched", NULL, "dispatched on another context");
    for (int i = 0; i < 6; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s on another context", rows_args[i]);
        a = rargs_ok(f);
        *rarg(&a, rows_args[i]) = &set_arg(&f->b, rows_args[i])->t;
        reject_arg(f, a, rows_args[i], RUDNN_STATUS_DEVICE_MISMATCH, NULL, what);
    }
    fx_finish(f);
}

static void test_rows_dtype(void **state)
{
    fx_t *f = *state;
    /* the rows tensors: the dispatched dtype (f32) and nothing else */
    static const rudnn_dtype_t bad_rows[] = {RUDNN_F16, RUDNN_BF16, RUDNN_I32};
    for (int i = 0; i < 6; i++) {
        if (!strcmp(rows_args[i], "grad_weights"))
            continue;
        const rt_tensor_t *base = set_arg(&f->a, rows_args[i]);
        for (size_t d = 0; d < sizeof bad_rows / sizeof bad_rows[0]; d++) {
            rudnn_tensor_t v = rt_tensor_desc(base, bad_rows[d], 2, base->t.dims, 0);
            char what[96];
            snprintf(what, sizeof what, "%s %s with f32 rows", rows_args[i], rudnn_dtype_name(bad_rows[d]));
            rargs_t a = rargs_ok(f);
            *rarg(&a, rows_args[i]) = &v;
            reject_arg(f, a, rows_args[i], RUDNN_STATUS_BAD_DTYPE, rudnn_dtype_name(bad_rows[d]), what);
        }
    }
    /* f16 dispatched rows: each f32 tensor in turn among f16 ones */
    rudnn_tensor_t h[6];
    for (int i = 0; i < 6; i++) {
        const rt_tensor_t *base = set_arg(&f->a, rows_args[i]);
        h[i] = rt_tensor_desc(base, strcmp(rows_args[i], "grad_weights") ? RUDNN_F16 : RUDNN_F32, 2, base->t.dims, 0);
    }
    for (int i = 0; i < 6; i++) {
        if (!strcmp(rows_args[i], "grad_weights"))
            continue;
        rargs_t a = rargs_ok(f);
        a.d = f->disp16;
        for (int j = 0; j < 6; j++)
            *rarg(&a, rows_args[j]) = &h[j];
        *rarg(&a, rows_args[i]) = &set_arg(&f->a, rows_args[i])->t;
        char what[96];
        snprintf(what, sizeof what, "%s f32 with f16 rows", rows_args[i]);
        reject_arg(f, a, rows_args[i], RUDNN_STATUS_BAD_DTYPE, "f32", what);
    }
    /* grad_weights: f32 whatever the rows and weights dtypes */
    static const rudnn_dtype_t bad_gw[] = {RUDNN_F16, RUDNN_BF16, RUDNN_I32};
    for (size_t d = 0; d < sizeof bad_gw / sizeof bad_gw[0]; d++) {
        rudnn_tensor_t g = rt_tensor_desc(&f->a.cgw, bad_gw[d], 2, dims_k, 0);
        char what[96];
        snprintf(what, sizeof what, "grad_weights %s", rudnn_dtype_name(bad_gw[d]));
        rargs_t a = rargs_ok(f);
        a.cgw = &g;
        reject_c(f, a, RUDNN_STATUS_BAD_DTYPE, "grad_weights", rudnn_dtype_name(bad_gw[d]), what);
        snprintf(what, sizeof what, "grad_weights %s with f16 rows", rudnn_dtype_name(bad_gw[d]));
        a.d = f->disp16, a.eo = &h[0], a.go = &h[1], a.ge = &h[2];
        reject_c(f, a, RUDNN_STATUS_BAD_DTYPE, "grad_weights", rudnn_dtype_name(bad_gw[d]), what);
    }
    fx_finish(f);
}

static void test_rows_shapes(void **state)
{
    fx_t *f = *state;
    const struct {
        const char *arg;
        int rank;
        int64_t d0, d1;
    } shapes[] = {
        {"expert_output", 2, T * K, H + 1}, {"expert_output", 2, T * K, H - 1}, {"expert_output", 2, T * K + 1, H},
        {"expert_output", 2, T * K - 1, H}, {"expert_output", 2, T, H},         {"expert_output", 1, T * K * H, 0},
        {"expert_output", 3, T * K, H},     {"grad_output", 2, T, H + 1},       {"grad_output", 2, T, H - 1},
        {"grad_output", 2, T + 1, H},       {"grad_output", 2, T - 1, H},       {"grad_output", 2, T * K, H},
        {"grad_output", 1, T * H, 0},       {"grad_output", 3, T, H},           {"grad_expert_output", 2, T * K, H + 1},
        {"grad_expert_output", 2, T * K - 1, H}, {"grad_expert_output", 2, T, H}, {"grad_expert_output", 3, T * K, H},
        {"grad_weights", 2, T, K + 1},      {"grad_weights", 2, T, K - 1},      {"grad_weights", 2, T + 1, K},
        {"grad_weights", 2, T - 1, K},      {"grad_weights", 2, T * K, 1},      {"grad_weights", 1, T * K, 0},
        {"grad_weights", 3, T, K},          {"grad_rows", 2, T * K, H + 1},     {"grad_rows", 2, T * K + 1, H},
        {"grad_rows", 2, T, H},             {"grad_rows", 1, T * K * H, 0},     {"grad_input", 2, T, H + 1},
        {"grad_input", 2, T, H - 1},        {"grad_input", 2, T + 1, H},        {"grad_input", 2, T - 1, H},
        {"grad_input", 2, T * K, H},        {"grad_input", 3, T, H},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        /* rank 3 appends a 1 */
        const int64_t dims[3] = {shapes[i].d0, shapes[i].d1, 1};
        rudnn_tensor_t v = rt_tensor_desc(set_arg(&f->a, shapes[i].arg), RUDNN_F32, shapes[i].rank, dims, 0);
        char what[96], s[64];
        snprintf(what, sizeof what, "%s %s", shapes[i].arg, rt_dims_str(shapes[i].rank, dims, s, sizeof s));
        rargs_t a = rargs_ok(f);
        *rarg(&a, shapes[i].arg) = &v;
        reject_arg(f, a, shapes[i].arg, RUDNN_STATUS_BAD_SHAPE, NULL, what);
    }
    /* strided (padded rows) views: valid, but the ops take contiguous tensors */
    for (int i = 0; i < 6; i++) {
        const rt_tensor_t *base = set_arg(&f->a, rows_args[i]);
        const int64_t half[2] = {base->t.dims[0] / 2, base->t.dims[1]};
        rudnn_tensor_t pad = rt_tensor_desc(base, RUDNN_F32, 2, half, 0);
        pad.dims[0] = base->t.dims[0], pad.strides[0] = base->t.dims[1] + 1;
        char what[96];
        snprintf(what, sizeof what, "%s with padded rows", rows_args[i]);
        rargs_t a = rargs_ok(f);
        *rarg(&a, rows_args[i]) = &pad;
        reject_arg(f, a, rows_args[i], RUDNN_STATUS_NOT_SUPPORTED, NULL, what);
    }
    fx_finish(f);
}

static void test_rows_strategy(void **state)
{
    fx_t *f = *state;
    static const int bad[] = {2, -1, 7};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rargs_t a = rargs_ok(f);
        a.strategy = (rudnn_combine_grad_strategy_t)bad[i];
        char what[64];
        snprintf(what, sizeof what, "strategy = %d", bad[i]);
        reject_c_strategy(f, a, RUDNN_STATUS_BAD_PARAM, "strategy", what);
    }
    fx_finish(f);
}

/* Each output over each input and over the other output: at its offset, 4 bytes into it, from its last
 * element on; and an output that is the input's own descriptor (in place). */
static void test_rows_overlap(void **state)
{
    fx_t *f = *state;
    const struct {
        const char *out, *in;
    } pairs[] = {
        {"grad_expert_output", "expert_output"}, {"grad_expert_output", "grad_output"},
        {"grad_weights", "expert_output"},       {"grad_weights", "grad_output"},
        {"grad_expert_output", "grad_weights"},  {"grad_weights", "grad_expert_output"},
        {"grad_input", "grad_rows"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const rt_tensor_t *out = set_arg(&f->a, pairs[i].out), *in = set_arg(&f->a, pairs[i].in);
        const size_t in_bytes = rudnn_tensor_bytes(&in->t);
        /* at the input's offset, 4 bytes in, on the input's last element (the inputs start at byte 0) */
        const size_t offsets[3] = {0, 4, in_bytes - 4};
        for (int v = 0; v < 3; v++) {
            rudnn_tensor_t o = rt_tensor_desc(in, RUDNN_F32, out->t.rank, out->t.dims, offsets[v]);
            char what[128];
            snprintf(what, sizeof what, "%s %s %s", pairs[i].out,
                     v == 0 ? "at the offset of" : v == 1 ? "4 bytes into" : "on the last element of",
                     pairs[i].in);
            rargs_t a = rargs_ok(f);
            *rarg(&a, pairs[i].out) = &o;
            reject_arg(f, a, pairs[i].out, RUDNN_STATUS_BAD_PARAM, pairs[i].in, what);
        }
    }
    /* exactly in place: the input's own descriptor as the output (same dtype and shape) */
    rargs_t a = rargs_ok(f);
    a.ge = &f->a.eo.t;
    reject_c(f, a, RUDNN_STATUS_BAD_PARAM, "grad_expert_output", "expert_output", "grad_expert_output in place");
    a = rargs_ok(f);
    rudnn_tensor_t gi_on_gr = rt_tensor_desc(&f->a.gr, RUDNN_F32, 2, dims_tok, 0);
    a.gi = &gi_on_gr;
    reject_d(f, a, RUDNN_STATUS_BAD_PARAM, "grad_input", "grad_rows", "grad_input over grad_rows' first rows");
    fx_finish(f);
}

/* No tokens: checked like any other call (a wrong shape rejected, writing nothing); a valid one
 * succeeds. */
static void test_rows_empty(void **state)
{
    fx_t *f = *state;
    static const int64_t t0e[2] = {0, E}, t0h[2] = {0, H}, t0k[2] = {0, K}, t0k1[2] = {0, K + 1},
                         t0h1[2] = {0, H + 1};
    rudnn_tensor_t l0 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, t0e, 0);
    rudnn_tensor_t x0 = rt_tensor_desc(&f->a.x, RUDNN_F32, 2, t0h, 0);
    rudnn_routing_plan_t plan = NULL;
    rudnn_dispatched_t disp = NULL;
    const rudnn_routing_options_t ro = {K, 1};
    rt_assert_status(rudnn_moe_route(rt_queue, &l0, &ro, &plan), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_moe_dispatch(rt_queue, plan, &x0, &disp), RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t eo = rt_tensor_desc(&f->a.eo, RUDNN_F32, 2, t0h, 0);
    rudnn_tensor_t go = rt_tensor_desc(&f->a.go, RUDNN_F32, 2, t0h, 0);
    rudnn_tensor_t ge = rt_tensor_desc(&f->a.ge, RUDNN_F32, 2, t0h, 0);
    rudnn_tensor_t gw = rt_tensor_desc(&f->a.cgw, RUDNN_F32, 2, t0k, 0);
    rudnn_tensor_t gr = rt_tensor_desc(&f->a.gr, RUDNN_F32, 2, t0h, 0);
    rudnn_tensor_t gi = rt_tensor_desc(&f->a.gi, RUDNN_F32, 2, t0h, 0);
    rudnn_tensor_t gw_bad = rt_tensor_desc(&f->a.cgw, RUDNN_F32, 2, t0k1, 0);
    rudnn_tensor_t gi_bad = rt_tensor_desc(&f->a.gi, RUDNN_F32, 2, t0h1, 0);
    rudnn_tensor_t gi_f16 = rt_tensor_desc(&f->a.gi, RUDNN_F16, 2, t0h, 0);
    rargs_t a = {rt_queue, disp, &eo, &go, &ge, &gw, &gr, &gi, RUDNN_COMBINE_GRAD_SERIAL};
    rargs_t b = a;
    b.cgw = &gw_bad;
    reject_c(f, b, RUDNN_STATUS_BAD_SHAPE, "grad_weights", NULL, "grad_weights [0, 3] with no tokens");
    b = a;
    b.gi = &gi_bad;
    reject_d(f, b, RUDNN_STATUS_BAD_SHAPE, "grad_input", NULL, "grad_input [0, 7] with no tokens");
    b = a;
    b.gi = &gi_f16;
    reject_d(f, b, RUDNN_STATUS_BAD_DTYPE, "grad_input", "f16", "grad_input f16 with no tokens");
    b = a;
    b.strategy = (rudnn_combine_grad_strategy_t)2;
    reject_c_strategy(f, b, RUDNN_STATUS_BAD_PARAM, "strategy", "strategy = 2 with no tokens");
    /* the valid empty calls: success, nothing written */
    for (int s = 0; s < 3; s++) {
        rt_guard_begin(&f->guard);
        const rudnn_combine_grad_strategy_t strategy = s ? RUDNN_COMBINE_GRAD_PLANE : RUDNN_COMBINE_GRAD_SERIAL;
        const rudnn_status_t st = s < 2 ? rudnn_moe_combine_backward(rt_queue, disp, &eo, &go, strategy, &ge, &gw)
                                        : rudnn_moe_dispatch_backward(rt_queue, disp, &gr, &gi);
        const char *name = s < 2 ? OPC : OPD;
        const int unsupported_ok = !f->on_opencl && st == RUDNN_STATUS_NOT_SUPPORTED &&
                                   strstr(rudnn_last_error(), name);
        if (!unsupported_ok && (st != RUDNN_STATUS_SUCCESS || strcmp(rudnn_last_error(), "") != 0)) {
            rt_logf(&f->log, "  %s with no tokens: returned %s, last error \"%s\"\n", name, rudnn_status_string(st),
                    rudnn_last_error());
            f->log.failures++;
        }
        if (rt_guard_changed(&f->guard)) {
            rt_logf(&f->log, "  %s with no tokens wrote to a buffer\n", name);
            f->log.failures++;
        }
    }
    rudnn_dispatched_destroy(disp);
    rudnn_routing_plan_destroy(plan);
    fx_finish(f);
}

/* ---- valid calls ---------------------------------------------------------------------------- */

/* A valid call after a rejected one: SUCCESS and an empty error (each index dtype, F16 logits, both
 * scorings); on a backend without the family's kernels NOT_SUPPORTED naming the op. */
static void test_success_clears_error(void **state)
{
    fx_t *f = *state;
    const rudnn_tensor_t *idxs[3] = {&f->a.idx.t, &f->idx_u32.t, &f->idx_i64.t};
    for (int i = 0; i < 3; i++)
        for (int variant = 0; variant < 4; variant++) {
            rudnn_router_weight_options_t o = opts_ok(), bad = opts_ok();
            o.scoring = variant & 1 ? RUDNN_ROUTER_SIGMOID : RUDNN_ROUTER_SOFTMAX;
            o.renormalize = variant >> 1;
            o.scale = 2.5f;
            bad.scale = -1.0f;
            const int f16 = variant == 3;
            const rudnn_tensor_t *L = f16 ? &f->logits16.t : &f->a.logits.t, *G = f16 ? &f->gl16.t : &f->a.gl.t;
            for (int op = 0; op < 2; op++) {
                const char *name = op ? OPB : OPW;
                (void)rudnn_moe_selected_router_weights(rt_queue, L, idxs[i], &bad, &f->a.w.t); /* sets the error */
                const rudnn_status_t st =
                    op ? rudnn_moe_selected_router_backward(rt_queue, L, idxs[i], &f->a.gw.t, &o, G)
                       : rudnn_moe_selected_router_weights(rt_queue, L, idxs[i], &o, &f->a.w.t);
                const int unsupported_ok = !f->on_opencl && st == RUDNN_STATUS_NOT_SUPPORTED &&
                                           strstr(rudnn_last_error(), name);
                if (!unsupported_ok && (st != RUDNN_STATUS_SUCCESS || strcmp(rudnn_last_error(), "") != 0)) {
                    rt_logf(&f->log, "  %s (indices %s, %s logits, variant %d): valid call after a failed one "
                            "returned %s, last error \"%s\"\n", name, rudnn_dtype_name(idxs[i]->dtype),
                            rudnn_dtype_name(L->dtype), variant, rudnn_status_string(st), rudnn_last_error());
                    f->log.failures++;
                }
                rudnn_queue_synchronize(rt_queue);
            }
        }
    fx_finish(f);
}

/* A valid call of each new op after a rejected one: SUCCESS and an empty error (both strategies, f32 and
 * f16 rows); on a backend without the family's kernels NOT_SUPPORTED naming the op. */
static void test_rows_success_clears_error(void **state)
{
    fx_t *f = *state;
    const rudnn_tensor_t h_eo = rt_tensor_desc(&f->a.eo, RUDNN_F16, 2, dims_rows, 0),
                         h_go = rt_tensor_desc(&f->a.go, RUDNN_F16, 2, dims_tok, 0),
                         h_ge = rt_tensor_desc(&f->a.ge, RUDNN_F16, 2, dims_rows, 0),
                         h_gr = rt_tensor_desc(&f->a.gr, RUDNN_F16, 2, dims_rows, 0),
                         h_gi = rt_tensor_desc(&f->a.gi, RUDNN_F16, 2, dims_tok, 0);
    for (int f16 = 0; f16 < 2; f16++)
        for (int op = 0; op < 3; op++) {
            rargs_t a = rargs_ok(f);
            if (f16)
                a.d = f->disp16, a.eo = &h_eo, a.go = &h_go, a.ge = &h_ge, a.gr = &h_gr, a.gi = &h_gi;
            const char *name = op < 2 ? OPC : OPD;
            (void)rudnn_moe_combine_backward(rt_queue, a.d, a.eo, a.go, (rudnn_combine_grad_strategy_t)-1, a.ge,
                                             a.cgw); /* sets the error */
            const rudnn_status_t st =
                op < 2 ? rudnn_moe_combine_backward(rt_queue, a.d, a.eo, a.go,
                                                    op ? RUDNN_COMBINE_GRAD_PLANE : RUDNN_COMBINE_GRAD_SERIAL, a.ge,
                                                    a.cgw)
                       : rudnn_moe_dispatch_backward(rt_queue, a.d, a.gr, a.gi);
            const int unsupported_ok = !f->on_opencl && st == RUDNN_STATUS_NOT_SUPPORTED &&
                                       strstr(rudnn_last_error(), name);
            if (!unsupported_ok && (st != RUDNN_STATUS_SUCCESS || strcmp(rudnn_last_error(), "") != 0)) {
                rt_logf(&f->log, "  %s (%s rows, call %d): valid call after a failed one returned %s, last error "
                        "\"%s\"\n", name, f16 ? "f16" : "f32", op, rudnn_status_string(st), rudnn_last_error());
                f->log.failures++;
            }
            rudnn_queue_synchronize(rt_queue);
        }
    fx_finish(f);
}

/* ---- main ---------------------------------------------------------------------------------------- */

#define TC(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TC(test_null_arguments), TC(test_logits),       TC(test_indices),        TC(test_options),
        TC(test_weights_output), TC(test_grad_weights), TC(test_grad_logits), TC(test_success_clears_error),
        TC(test_rows_null),      TC(test_rows_context), TC(test_rows_dtype),  TC(test_rows_shapes),
        TC(test_rows_strategy),  TC(test_rows_overlap), TC(test_rows_empty),  TC(test_rows_success_clears_error),
    };
    return rt_run_with_second_context("moe_train-contract", tests, argc, argv);
}
