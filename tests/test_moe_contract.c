/* Contract tests of the MoE family (include/rudnn/moe.h, ops/moe.c), on the
 * default backend: every rejected call returns the status of its rule
 * (BAD_PARAM, BAD_SHAPE, BAD_DTYPE, DEVICE_MISMATCH, NOT_SUPPORTED), a
 * message that names the op called, the argument and the rule, and writes
 * nothing: every buffer involved (on both contexts) is read back byte for byte
 * after the rejected call, and the object a creating call would return
 * (plan, dispatched, experts) keeps the caller's value. A successful call
 * leaves rudnn_last_error() == "".
 *
 * The fixture is F32: logits [4, 8], bias [8], input [4, 12], gate and up
 * [8, 10, 12], down [8, 12, 10], expert_output [8, 12] (T * top_k rows with
 * top_k 2), output [4, 12], a workspace of the size asked for; each buffer has
 * 512 spare bytes so views of other shapes, dtypes and offsets fit. The same
 * set exists on a second context for DEVICE_MISMATCH, and F16 weights, a
 * [2, 2048] logits tensor, and dispatched objects with hidden 13, with 6
 * experts and with top_k 1 serve the shape rules. forward_grouped takes rows [6, 12] F32,
 * expert_token_nums I64 [8] (written before each call) and an expert_output [6, 12].
 *
 * Usage: test_moe_contract [glob] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define T 4
#define E 8
#define H 12
#define I 10
#define K 2
#define SLACK 512
#define R 6 /* rows of forward_grouped */

#define PLAN_SENTINEL ((rudnn_routing_plan_t)(uintptr_t)0x5eed0)
#define DISP_SENTINEL ((rudnn_dispatched_t)(uintptr_t)0x5eed1)
#define EXPERTS_SENTINEL ((rudnn_swiglu_experts_t)(uintptr_t)0x5eed2)

/* ---- fixture -------------------------------------------------------------------- */

typedef struct set {
    rt_tensor_t logits, bias, input, gate, up, down, eo, out;
    rudnn_buffer_t ws;
    size_t ws_bytes;
    rudnn_routing_plan_t plan;
    rudnn_dispatched_t disp;
    rudnn_swiglu_experts_t ex;
} set_t;

typedef struct fx {
    set_t a, b; /* b: on the second context */
    rt_tensor_t wide, gate16, up16, down16;
    rt_tensor_t grows, gnums, gout; /* forward_grouped: rows [R, H], expert_token_nums I64 [E], [R, H] */
    rudnn_routing_plan_t plan_e6, plan_k1;
    rudnn_dispatched_t disp_h13, disp_e6, disp_k1;
    rudnn_swiglu_experts_t ex16;
    rt_guard_t guard; /* every buffer, read back around each rejected call */
    rt_log_t log;
} fx_t;

static void track(fx_t *f, const rt_tensor_t *t, rudnn_queue_t q) { rt_guard_track(&f->guard, q, t, NULL); }

static const int64_t dims_logits[2] = {T, E};
static const int64_t dims_bias[1] = {E};
static const int64_t dims_input[2] = {T, H};
static const int64_t dims_gate[3] = {E, I, H};
static const int64_t dims_down[3] = {E, H, I};
static const int64_t dims_eo[2] = {T * K, H};

static void fixture_fail(fx_t *f, const char *what, rudnn_status_t st)
{
    /* reported by the tests that need the object (need()) */
    rt_logf(&f->log, "  fixture: %s returned %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
}

/* Makes a set on rt_ctx / rt_queue (the caller swaps them for the second context). */
static void make_set(fx_t *f, set_t *s, uint64_t seed)
{
    rt_rng_t rng;
    rt_rng_seed(&rng, seed);
    rt_tensor_create(&s->logits, RUDNN_F32, 2, dims_logits, 0, SLACK);
    rt_tensor_create(&s->bias, RUDNN_F32, 1, dims_bias, 0, SLACK);
    rt_tensor_create(&s->input, RUDNN_F32, 2, dims_input, 0, SLACK);
    rt_tensor_create(&s->gate, RUDNN_F32, 3, dims_gate, 0, SLACK);
    rt_tensor_create(&s->up, RUDNN_F32, 3, dims_gate, 0, SLACK);
    rt_tensor_create(&s->down, RUDNN_F32, 3, dims_down, 0, SLACK);
    rt_tensor_create(&s->eo, RUDNN_F32, 2, dims_eo, 0, SLACK);
    rt_tensor_create(&s->out, RUDNN_F32, 2, dims_input, 0, SLACK);
    rt_tensor_fill_uniform(&s->logits, &rng, -3.0, 3.0);
    rt_tensor_fill_uniform(&s->bias, &rng, -0.5, 0.5);
    rt_tensor_fill_uniform(&s->input, &rng, -2.0, 2.0);
    rt_tensor_fill_uniform(&s->gate, &rng, -0.4, 0.4);
    rt_tensor_fill_uniform(&s->up, &rng, -0.4, 0.4);
    rt_tensor_fill_uniform(&s->down, &rng, -0.4, 0.4);
    rudnn_status_t st = rudnn_swiglu_experts_create(rt_ctx, &s->gate.t, &s->up.t, &s->down.t, &s->ex);
    if (st) {
        fixture_fail(f, "swiglu_experts_create", st);
        s->ex = NULL;
    } else if ((st = rudnn_swiglu_experts_workspace_size(s->ex, T * K, RUDNN_MOE_SCALAR, &s->ws_bytes))) {
        fixture_fail(f, "swiglu_experts_workspace_size", st);
    }
    st = rudnn_buffer_create(rt_ctx, s->ws_bytes + SLACK, &s->ws);
    if (st) {
        fixture_fail(f, "buffer_create (workspace)", st);
        s->ws = NULL;
    }
    rudnn_routing_options_t o = {K, 1};
    st = rudnn_moe_route(rt_queue, &s->logits.t, &o, &s->plan);
    if (st) {
        fixture_fail(f, "moe_route", st);
        s->plan = NULL;
        return;
    }
    st = rudnn_moe_dispatch(rt_queue, s->plan, &s->input.t, &s->disp);
    if (st) {
        fixture_fail(f, "moe_dispatch", st);
        s->disp = NULL;
    }
}

static void free_set(set_t *s)
{
    rudnn_dispatched_destroy(s->disp);
    rudnn_routing_plan_destroy(s->plan);
    rudnn_swiglu_experts_destroy(s->ex);
    if (s->ws)
        rudnn_buffer_destroy(s->ws);
    rt_tensor_t *all[] = {&s->logits, &s->bias, &s->input, &s->gate, &s->up, &s->down, &s->eo, &s->out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_tensor_destroy(all[i]);
}

static void track_set(fx_t *f, set_t *s, rudnn_queue_t q)
{
    rt_tensor_t *all[] = {&s->logits, &s->bias, &s->input, &s->gate, &s->up, &s->down, &s->eo, &s->out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        track(f, all[i], q);
    if (s->ws)
        rt_guard_track_buffer(&f->guard, q, s->ws, s->ws_bytes + SLACK, NULL);
}

static int fx_setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    *state = f;
    make_set(f, &f->a, 1);
    rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
    make_set(f, &f->b, 2);
    rt_unbind(saved);

    static const int64_t wide[2] = {2, 2048};
    rt_tensor_create(&f->wide, RUDNN_F32, 2, wide, 0, SLACK);
    rt_rng_t rng;
    rt_rng_seed(&rng, 3);
    rt_tensor_fill_uniform(&f->wide, &rng, -1.0, 1.0);
    rt_tensor_create(&f->gate16, RUDNN_F16, 3, dims_gate, 0, SLACK);
    rt_tensor_create(&f->up16, RUDNN_F16, 3, dims_gate, 0, SLACK);
    rt_tensor_create(&f->down16, RUDNN_F16, 3, dims_down, 0, SLACK);
    rt_tensor_fill_uniform(&f->gate16, &rng, -0.4, 0.4);
    rt_tensor_fill_uniform(&f->up16, &rng, -0.4, 0.4);
    rt_tensor_fill_uniform(&f->down16, &rng, -0.4, 0.4);
    static const int64_t dims_rows[2] = {R, H}, dims_nums[1] = {E};
    rt_tensor_create(&f->grows, RUDNN_F32, 2, dims_rows, 0, SLACK);
    rt_tensor_create(&f->gnums, RUDNN_I64, 1, dims_nums, 0, SLACK);
    rt_tensor_create(&f->gout, RUDNN_F32, 2, dims_rows, 0, SLACK);
    rt_tensor_fill_uniform(&f->grows, &rng, -2.0, 2.0);
    rudnn_status_t st = rudnn_swiglu_experts_create(rt_ctx, &f->gate16.t, &f->up16.t, &f->down16.t, &f->ex16);
    if (st) {
        fixture_fail(f, "swiglu_experts_create (f16)", st);
        f->ex16 = NULL;
    }
    if (f->a.plan) {
        static const int64_t h13[2] = {T, H + 1};
        rudnn_tensor_t in13 = rt_tensor_desc(&f->a.input, RUDNN_F32, 2, h13, 0);
        if ((st = rudnn_moe_dispatch(rt_queue, f->a.plan, &in13, &f->disp_h13))) {
            fixture_fail(f, "moe_dispatch (hidden 13)", st);
            f->disp_h13 = NULL;
        }
        static const int64_t e6[2] = {T, 6};
        rudnn_tensor_t l6 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, e6, 0);
        rudnn_routing_options_t o = {K, 0};
        if ((st = rudnn_moe_route(rt_queue, &l6, &o, &f->plan_e6))) {
            fixture_fail(f, "moe_route (6 experts)", st);
            f->plan_e6 = NULL;
        } else if ((st = rudnn_moe_dispatch(rt_queue, f->plan_e6, &f->a.input.t, &f->disp_e6))) {
            fixture_fail(f, "moe_dispatch (6 experts)", st);
            f->disp_e6 = NULL;
        }
        rudnn_routing_options_t o1 = {1, 0};
        if ((st = rudnn_moe_route(rt_queue, &f->a.logits.t, &o1, &f->plan_k1))) {
            fixture_fail(f, "moe_route (top_k 1)", st);
            f->plan_k1 = NULL;
        } else if ((st = rudnn_moe_dispatch(rt_queue, f->plan_k1, &f->a.input.t, &f->disp_k1))) {
            fixture_fail(f, "moe_dispatch (top_k 1)", st);
            f->disp_k1 = NULL;
        }
    }
    rudnn_queue_synchronize(rt_queue);
    rudnn_queue_synchronize(rt_queue2);
    track_set(f, &f->a, rt_queue);
    track_set(f, &f->b, rt_queue2);
    track(f, &f->wide, rt_queue);
    track(f, &f->gate16, rt_queue);
    track(f, &f->up16, rt_queue);
    track(f, &f->down16, rt_queue);
    track(f, &f->grows, rt_queue);
    track(f, &f->gnums, rt_queue);
    track(f, &f->gout, rt_queue);
    return 0;
}

static int fx_teardown(void **state)
{
    fx_t *f = *state;
    if (!f)
        return 0;
    rt_guard_free(&f->guard);
    rudnn_dispatched_destroy(f->disp_h13);
    rudnn_dispatched_destroy(f->disp_e6);
    rudnn_dispatched_destroy(f->disp_k1);
    rudnn_routing_plan_destroy(f->plan_e6);
    rudnn_routing_plan_destroy(f->plan_k1);
    rudnn_swiglu_experts_destroy(f->ex16);
    free_set(&f->a);
    free_set(&f->b);
    rt_tensor_destroy(&f->wide);
    rt_tensor_destroy(&f->gate16);
    rt_tensor_destroy(&f->up16);
    rt_tensor_destroy(&f->down16);
    rt_tensor_destroy(&f->grows);
    rt_tensor_destroy(&f->gnums);
    rt_tensor_destroy(&f->gout);
    free(f);
    return 0;
}

static void fx_finish(fx_t *f) { rt_log_finish(&f->log, "check(s)"); }

/* The fixture objects a test needs; 0 (and a logged failure) when missing,
 * e.g. before the backend has MoE kernels. */
static int need(fx_t *f, const void *object, const char *what)
{
    if (object)
        return 1;
    rt_logf(&f->log, "  fixture: no %s (see the fixture failures above); test skipped its checks\n", what);
    f->log.failures++;
    return 0;
}

/* ---- checking one rejected call ------------------------------------------------------------- */

/* Checks status (want), that the message names op and each non-NULL needle,
 * and that no tracked buffer changed since rt_guard_begin. */
static void check_reject(fx_t *f, rudnn_status_t st, rudnn_status_t want, const char *op, const char *n1,
                         const char *n2, const char *what)
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
        if (needles[i] && !strstr(msg, needles[i])) {
            rt_logf(&f->log, "  %s, %s: message \"%s\" does not mention \"%s\"\n", op, what, msg, needles[i]);
            bad = 1;
        }
    }
    int changed = rt_guard_changed(&f->guard);
    if (changed) {
        rt_logf(&f->log, "  %s, %s: %d buffer(s) were written by a rejected call\n", op, what, changed);
        bad = 1;
    }
    f->log.failures += bad;
}

#define REJECT(f, want, op, n1, n2, what, call)                                                                \
    do {                                                                                                       \
        rt_guard_begin(&(f)->guard);                                                                           \
        rudnn_status_t st_ = (call);                                                                           \
        check_reject(f, st_, want, op, n1, n2, what);                                                          \
    } while (0)

static void check_untouched(fx_t *f, int same, const char *op, const char *what, const char *object)
{
    if (!same) {
        rt_logf(&f->log, "  %s, %s: the %s out-argument was written by a rejected call\n", op, what, object);
        f->log.failures++;
    }
}

static void reject_route(fx_t *f, rudnn_queue_t q, const rudnn_tensor_t *logits, const rudnn_routing_options_t *o,
                         rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    rudnn_routing_plan_t p = PLAN_SENTINEL;
    REJECT(f, want, "moe_route", n1, n2, what, rudnn_moe_route(q, logits, o, &p));
    check_untouched(f, p == PLAN_SENTINEL, "moe_route", what, "plan");
}

static void reject_grouped(fx_t *f, rudnn_queue_t q, const rudnn_tensor_t *logits, const rudnn_tensor_t *bias,
                           const rudnn_grouped_routing_options_t *o, rudnn_status_t want, const char *n1,
                           const char *n2, const char *what)
{
    rudnn_routing_plan_t p = PLAN_SENTINEL;
    REJECT(f, want, "moe_route_sigmoid_grouped", n1, n2, what, rudnn_moe_route_sigmoid_grouped(q, logits, bias, o, &p));
    check_untouched(f, p == PLAN_SENTINEL, "moe_route_sigmoid_grouped", what, "plan");
}

static void reject_dispatch(fx_t *f, rudnn_queue_t q, rudnn_routing_plan_t plan, const rudnn_tensor_t *input,
                            rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    rudnn_dispatched_t d = DISP_SENTINEL;
    REJECT(f, want, "moe_dispatch", n1, n2, what, rudnn_moe_dispatch(q, plan, input, &d));
    check_untouched(f, d == DISP_SENTINEL, "moe_dispatch", what, "dispatched");
}

static void reject_create(fx_t *f, rudnn_context_t ctx, const rudnn_tensor_t *g, const rudnn_tensor_t *u,
                          const rudnn_tensor_t *d, rudnn_status_t want, const char *n1, const char *n2,
                          const char *what)
{
    rudnn_swiglu_experts_t x = EXPERTS_SENTINEL;
    REJECT(f, want, "swiglu_experts_create", n1, n2, what, rudnn_swiglu_experts_create(ctx, g, u, d, &x));
    check_untouched(f, x == EXPERTS_SENTINEL, "swiglu_experts_create", what, "experts");
}

/* ---- routing -------------------------------------------------------------------------------- */

static void test_route_softmax(void **state)
{
    fx_t *f = *state;
    const rudnn_tensor_t *L = &f->a.logits.t;
    rudnn_routing_options_t ok = {K, 1};
    reject_route(f, NULL, L, &ok, RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue");
    reject_route(f, rt_queue, NULL, &ok, RUDNN_STATUS_BAD_PARAM, "logits", NULL, "NULL logits");
    reject_route(f, rt_queue, L, NULL, RUDNN_STATUS_BAD_PARAM, "options", NULL, "NULL options");
    REJECT(f, RUDNN_STATUS_BAD_PARAM, "moe_route", "plan", NULL, "NULL plan", rudnn_moe_route(rt_queue, L, &ok, NULL));

    static const int top_ks[] = {0, -1, E + 1, 1000};
    for (size_t i = 0; i < 4; i++) {
        rudnn_routing_options_t o = {top_ks[i], 0};
        char what[64];
        snprintf(what, sizeof what, "top_k = %d with %d experts", top_ks[i], E);
        reject_route(f, rt_queue, L, &o, RUDNN_STATUS_BAD_PARAM, "top_k", NULL, what);
    }

    /* logits rank and shape */
    static const int64_t r1[1] = {T * E}, r3[3] = {2, 2, E}, e0[2] = {T, 0};
    rudnn_tensor_t l1 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 1, r1, 0);
    rudnn_tensor_t l3 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 3, r3, 0);
    rudnn_tensor_t le0 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, e0, 0);
    reject_route(f, rt_queue, &l1, &ok, RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits rank 1");
    reject_route(f, rt_queue, &l3, &ok, RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits rank 3");
    reject_route(f, rt_queue, &le0, &ok, RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits with 0 experts");

    /* logits dtype */
    static const rudnn_dtype_t bad_dtypes[] = {RUDNN_I8, RUDNN_U32, RUDNN_I32};
    for (size_t i = 0; i < 3; i++) {
        rudnn_tensor_t l = rt_tensor_desc(&f->a.logits, bad_dtypes[i], 2, dims_logits, 0);
        char what[64];
        snprintf(what, sizeof what, "logits %s", rudnn_dtype_name(bad_dtypes[i]));
        reject_route(f, rt_queue, &l, &ok, RUDNN_STATUS_BAD_DTYPE, "logits", rudnn_dtype_name(bad_dtypes[i]), what);
    }

    /* logits of the other context */
    reject_route(f, rt_queue, &f->b.logits.t, &ok, RUDNN_STATUS_DEVICE_MISMATCH, "logits", NULL,
                 "logits on another context");
    fx_finish(f);
}

static rudnn_grouped_routing_options_t grouped_ok(void)
{
    rudnn_grouped_routing_options_t o = {2, 2, 1, 1, 1, 1.0f}; /* E 8: 2 groups of 4 */
    return o;
}

static void test_route_grouped(void **state)
{
    fx_t *f = *state;
    const rudnn_tensor_t *L = &f->a.logits.t, *B = &f->a.bias.t;
    rudnn_grouped_routing_options_t o = grouped_ok();
    reject_grouped(f, NULL, L, B, &o, RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue");
    reject_grouped(f, rt_queue, NULL, B, &o, RUDNN_STATUS_BAD_PARAM, "logits", NULL, "NULL logits");
    reject_grouped(f, rt_queue, L, B, NULL, RUDNN_STATUS_BAD_PARAM, "options", NULL, "NULL options");
    REJECT(f, RUDNN_STATUS_BAD_PARAM, "moe_route_sigmoid_grouped", "plan", NULL, "NULL plan",
           rudnn_moe_route_sigmoid_grouped(rt_queue, L, B, &o, NULL));

    /* E > 1024 (also with a groups count that divides it) */
    static const int64_t e1025[2] = {2, 1025}, e2048[2] = {1, 2048};
    rudnn_tensor_t l1025 = rt_tensor_desc(&f->wide, RUDNN_F32, 2, e1025, 0);
    rudnn_tensor_t l2048 = rt_tensor_desc(&f->wide, RUDNN_F32, 2, e2048, 0);
    o = grouped_ok();
    o.groups = 1;
    o.group_top_two = 0;
    reject_grouped(f, rt_queue, &l1025, NULL, &o, RUDNN_STATUS_BAD_SHAPE, "1025", "1024", "1025 experts");
    o = grouped_ok();
    o.groups = 128;
    o.selected_groups = 4;
    reject_grouped(f, rt_queue, &l2048, NULL, &o, RUDNN_STATUS_BAD_SHAPE, "2048", "1024",
                   "2048 experts in 128 groups");

    /* groups */
    static const int bad_groups[] = {0, -1, 129};
    for (size_t i = 0; i < 3; i++) {
        o = grouped_ok();
        o.groups = bad_groups[i];
        char what[64];
        snprintf(what, sizeof what, "groups = %d", bad_groups[i]);
        reject_grouped(f, rt_queue, L, B, &o, RUDNN_STATUS_BAD_PARAM, "groups", "128", what);
    }
    o = grouped_ok();
    o.groups = 3;
    reject_grouped(f, rt_queue, L, B, &o, RUDNN_STATUS_BAD_PARAM, "groups", "divisible", "8 experts, 3 groups");

    /* selected_groups */
    static const int bad_sel[] = {0, -2, 3};
    for (size_t i = 0; i < 3; i++) {
        o = grouped_ok();
        o.selected_groups = bad_sel[i];
        char what[64];
        snprintf(what, sizeof what, "selected_groups = %d of 2", bad_sel[i]);
        reject_grouped(f, rt_queue, L, B, &o, RUDNN_STATUS_BAD_PARAM, "selected_groups", NULL, what);
    }

    /* top_k */
    static const int bad_k[] = {0, -1, 65};
    for (size_t i = 0; i < 3; i++) {
        o = grouped_ok();
        o.top_k = bad_k[i];
        char what[64];
        snprintf(what, sizeof what, "top_k = %d", bad_k[i]);
        reject_grouped(f, rt_queue, L, B, &o, RUDNN_STATUS_BAD_PARAM, "top_k", "64", what);
    }
    o = grouped_ok(); /* 1 group of 4 experts selected */
    o.top_k = 5;
    reject_grouped(f, rt_queue, L, B, &o, RUDNN_STATUS_BAD_PARAM, "top_k", "selected groups",
                   "top_k 5 > 4 experts in the selected group");
    o = grouped_ok();
    o.groups = 4;
    o.selected_groups = 2;
    o.top_k = 5;
    reject_grouped(f, rt_queue, L, B, &o, RUDNN_STATUS_BAD_PARAM, "top_k", "selected groups",
                   "top_k 5 > 2 groups x 2 experts");

    /* group_top_two with one expert per group */
    o = grouped_ok();
    o.groups = 8;
    o.selected_groups = 2;
    o.top_k = 2;
    o.group_top_two = 1;
    reject_grouped(f, rt_queue, L, B, &o, RUDNN_STATUS_BAD_PARAM, "group_top_two", "2",
                   "group_top_two with 1 expert per group");

    /* scale */
    static const float bad_scale[] = {0.0f, -0.0f, -1.0f, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < 6; i++) {
        o = grouped_ok();
        o.scale = bad_scale[i];
        char what[64];
        snprintf(what, sizeof what, "scale = %g", (double)bad_scale[i]);
        reject_grouped(f, rt_queue, L, B, &o, RUDNN_STATUS_BAD_PARAM, "scale", "finite", what);
    }

    /* bias: shape, dtype, context */
    static const int64_t b7[1] = {E - 1}, b9[1] = {E + 1}, b1e[2] = {1, E};
    rudnn_tensor_t bias7 = rt_tensor_desc(&f->a.bias, RUDNN_F32, 1, b7, 0);
    rudnn_tensor_t bias9 = rt_tensor_desc(&f->a.bias, RUDNN_F32, 1, b9, 0);
    rudnn_tensor_t bias1e = rt_tensor_desc(&f->a.bias, RUDNN_F32, 2, b1e, 0);
    rudnn_tensor_t bias16 = rt_tensor_desc(&f->a.bias, RUDNN_F16, 1, dims_bias, 0);
    rudnn_tensor_t biasbf = rt_tensor_desc(&f->a.bias, RUDNN_BF16, 1, dims_bias, 0);
    o = grouped_ok();
    reject_grouped(f, rt_queue, L, &bias7, &o, RUDNN_STATUS_BAD_SHAPE, "bias", NULL, "bias [7] for 8 experts");
    reject_grouped(f, rt_queue, L, &bias9, &o, RUDNN_STATUS_BAD_SHAPE, "bias", NULL, "bias [9] for 8 experts");
    reject_grouped(f, rt_queue, L, &bias1e, &o, RUDNN_STATUS_BAD_SHAPE, "bias", NULL, "bias [1, 8]");
    reject_grouped(f, rt_queue, L, &bias16, &o, RUDNN_STATUS_BAD_DTYPE, "bias", "f32", "bias f16");
    reject_grouped(f, rt_queue, L, &biasbf, &o, RUDNN_STATUS_BAD_DTYPE, "bias", "f32", "bias bf16");
    reject_grouped(f, rt_queue, L, &f->b.bias.t, &o, RUDNN_STATUS_DEVICE_MISMATCH, "bias", NULL,
                   "bias on another context");

    /* logits rank, dtype, context */
    static const int64_t r1[1] = {T * E};
    rudnn_tensor_t l1 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 1, r1, 0);
    rudnn_tensor_t li8 = rt_tensor_desc(&f->a.logits, RUDNN_I8, 2, dims_logits, 0);
    rudnn_tensor_t lu32 = rt_tensor_desc(&f->a.logits, RUDNN_U32, 2, dims_logits, 0);
    reject_grouped(f, rt_queue, &l1, B, &o, RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits rank 1");
    reject_grouped(f, rt_queue, &li8, B, &o, RUDNN_STATUS_BAD_DTYPE, "logits", "i8", "logits i8");
    reject_grouped(f, rt_queue, &lu32, B, &o, RUDNN_STATUS_BAD_DTYPE, "logits", "u32", "logits u32");
    reject_grouped(f, rt_queue, &f->b.logits.t, B, &o, RUDNN_STATUS_DEVICE_MISMATCH, "logits", NULL,
                   "logits on another context");
    fx_finish(f);
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static void test_dispatch(void **state)
{
    fx_t *f = *state;
    if (!need(f, f->a.plan, "plan") || !need(f, f->b.plan, "plan on the second context")) {
        fx_finish(f);
        return;
    }
    rudnn_routing_plan_t P = f->a.plan;
    const rudnn_tensor_t *X = &f->a.input.t;
    reject_dispatch(f, NULL, P, X, RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue");
    reject_dispatch(f, rt_queue, NULL, X, RUDNN_STATUS_BAD_PARAM, "plan", NULL, "NULL plan");
    reject_dispatch(f, rt_queue, P, NULL, RUDNN_STATUS_BAD_PARAM, "input", NULL, "NULL input");
    REJECT(f, RUDNN_STATUS_BAD_PARAM, "moe_dispatch", "dispatched", NULL, "NULL dispatched",
           rudnn_moe_dispatch(rt_queue, P, X, NULL));
    reject_dispatch(f, rt_queue, f->b.plan, X, RUDNN_STATUS_DEVICE_MISMATCH, "plan", NULL,
                    "plan made on another context");
    reject_dispatch(f, rt_queue, P, &f->b.input.t, RUDNN_STATUS_DEVICE_MISMATCH, "input", NULL,
                    "input on another context");
    static const int64_t t3[2] = {T - 1, H}, t5[2] = {T + 1, H}, h0[2] = {T, 0}, r1[1] = {T * H},
                         r3[3] = {T, 3, 4};
    rudnn_tensor_t x3 = rt_tensor_desc(&f->a.input, RUDNN_F32, 2, t3, 0);
    rudnn_tensor_t x5 = rt_tensor_desc(&f->a.input, RUDNN_F32, 2, t5, 0);
    rudnn_tensor_t xh0 = rt_tensor_desc(&f->a.input, RUDNN_F32, 2, h0, 0);
    rudnn_tensor_t xr1 = rt_tensor_desc(&f->a.input, RUDNN_F32, 1, r1, 0);
    rudnn_tensor_t xr3 = rt_tensor_desc(&f->a.input, RUDNN_F32, 3, r3, 0);
    reject_dispatch(f, rt_queue, P, &x3, RUDNN_STATUS_BAD_SHAPE, "input", NULL, "input with 3 tokens, plan 4");
    reject_dispatch(f, rt_queue, P, &x5, RUDNN_STATUS_BAD_SHAPE, "input", NULL, "input with 5 tokens, plan 4");
    reject_dispatch(f, rt_queue, P, &xh0, RUDNN_STATUS_BAD_SHAPE, "input", NULL, "input hidden 0");
    reject_dispatch(f, rt_queue, P, &xr1, RUDNN_STATUS_BAD_SHAPE, "input", NULL, "input rank 1");
    reject_dispatch(f, rt_queue, P, &xr3, RUDNN_STATUS_BAD_SHAPE, "input", NULL, "input rank 3");
    static const rudnn_dtype_t bad[] = {RUDNN_U32, RUDNN_I8, RUDNN_I32};
    for (size_t i = 0; i < 3; i++) {
        rudnn_tensor_t x = rt_tensor_desc(&f->a.input, bad[i], 2, dims_input, 0);
        char what[64];
        snprintf(what, sizeof what, "input %s", rudnn_dtype_name(bad[i]));
        reject_dispatch(f, rt_queue, P, &x, RUDNN_STATUS_BAD_DTYPE, "input", rudnn_dtype_name(bad[i]), what);
    }
    fx_finish(f);
}

/* ---- experts ----------------------------------------------------------------------------------- */

static void test_experts_create(void **state)
{
    fx_t *f = *state;
    const rudnn_tensor_t *G = &f->a.gate.t, *U = &f->a.up.t, *D = &f->a.down.t;
    reject_create(f, NULL, G, U, D, RUDNN_STATUS_BAD_PARAM, "context", NULL, "NULL context");
    reject_create(f, rt_ctx, NULL, U, D, RUDNN_STATUS_BAD_PARAM, "gate", NULL, "NULL gate");
    reject_create(f, rt_ctx, G, NULL, D, RUDNN_STATUS_BAD_PARAM, "up", NULL, "NULL up");
    reject_create(f, rt_ctx, G, U, NULL, RUDNN_STATUS_BAD_PARAM, "down", NULL, "NULL down");
    REJECT(f, RUDNN_STATUS_BAD_PARAM, "swiglu_experts_create", "experts", NULL, "NULL experts",
           rudnn_swiglu_experts_create(rt_ctx, G, U, D, NULL));

    /* down not [E, H, I] */
    static const int64_t d_eih[3] = {E, I, H}, d_e1[3] = {E - 1, H, I}, d_h1[3] = {E, H + 1, I},
                         d_i1[3] = {E, H, I + 1};
    const int64_t *bad_down[] = {d_eih, d_e1, d_h1, d_i1};
    const char *bad_down_what[] = {"down [E, I, H] (gate's layout)", "down with E - 1 experts",
                                   "down with H + 1 rows", "down with I + 1 columns"};
    for (size_t i = 0; i < 4; i++) {
        rudnn_tensor_t d = rt_tensor_desc(&f->a.down, RUDNN_F32, 3, bad_down[i], 0);
        reject_create(f, rt_ctx, G, U, &d, RUDNN_STATUS_BAD_SHAPE, "down", NULL, bad_down_what[i]);
    }
    /* up != gate */
    static const int64_t u_i1[3] = {E, I + 1, H}, u_e1[3] = {E + 1, I, H}, u_h1[3] = {E, I, H - 1};
    const int64_t *bad_up[] = {u_i1, u_e1, u_h1};
    for (size_t i = 0; i < 3; i++) {
        rudnn_tensor_t u = rt_tensor_desc(&f->a.up, RUDNN_F32, 3, bad_up[i], 0);
        char s[64], what[96];
        snprintf(what, sizeof what, "up %s, gate [8, 10, 12]", rt_dims_str(3, bad_up[i], s, sizeof s));
        reject_create(f, rt_ctx, G, &u, D, RUDNN_STATUS_BAD_SHAPE, "up", NULL, what);
    }
    /* mixed dtypes */
    reject_create(f, rt_ctx, G, &f->up16.t, D, RUDNN_STATUS_BAD_DTYPE, "up", NULL, "gate f32, up f16");
    reject_create(f, rt_ctx, G, U, &f->down16.t, RUDNN_STATUS_BAD_DTYPE, "down", NULL, "gate f32, down f16");
    reject_create(f, rt_ctx, &f->gate16.t, &f->up16.t, D, RUDNN_STATUS_BAD_DTYPE, "down", NULL,
                  "gate, up f16, down f32");
    rudnn_tensor_t dbf = rt_tensor_desc(&f->down16, RUDNN_BF16, 3, dims_down, 0);
    reject_create(f, rt_ctx, &f->gate16.t, &f->up16.t, &dbf, RUDNN_STATUS_BAD_DTYPE, "down", NULL,
                  "gate, up f16, down bf16");
    /* gate rank, zero dims, non-float dtypes */
    static const int64_t g2[2] = {E * I, H}, g0[3] = {E, 0, H};
    rudnn_tensor_t gr2 = rt_tensor_desc(&f->a.gate, RUDNN_F32, 2, g2, 0);
    rudnn_tensor_t ur2 = rt_tensor_desc(&f->a.up, RUDNN_F32, 2, g2, 0);
    reject_create(f, rt_ctx, &gr2, &ur2, D, RUDNN_STATUS_BAD_SHAPE, "gate", NULL, "gate rank 2");
    rudnn_tensor_t gz = rt_tensor_desc(&f->a.gate, RUDNN_F32, 3, g0, 0);
    rudnn_tensor_t uz = rt_tensor_desc(&f->a.up, RUDNN_F32, 3, g0, 0);
    static const int64_t dz[3] = {E, H, 0};
    rudnn_tensor_t dzv = rt_tensor_desc(&f->a.down, RUDNN_F32, 3, dz, 0);
    reject_create(f, rt_ctx, &gz, &uz, &dzv, RUDNN_STATUS_BAD_SHAPE, "gate", NULL, "inter 0");
    static const rudnn_dtype_t bad[] = {RUDNN_U32, RUDNN_I8};
    for (size_t i = 0; i < 2; i++) {
        rudnn_tensor_t g = rt_tensor_desc(&f->a.gate, bad[i], 3, dims_gate, 0);
        rudnn_tensor_t u = rt_tensor_desc(&f->a.up, bad[i], 3, dims_gate, 0);
        rudnn_tensor_t d = rt_tensor_desc(&f->a.down, bad[i], 3, dims_down, 0);
        char what[64];
        snprintf(what, sizeof what, "weights %s", rudnn_dtype_name(bad[i]));
        reject_create(f, rt_ctx, &g, &u, &d, RUDNN_STATUS_BAD_DTYPE, "gate", rudnn_dtype_name(bad[i]), what);
    }
    /* contexts */
    reject_create(f, rt_ctx, &f->b.gate.t, U, D, RUDNN_STATUS_DEVICE_MISMATCH, "gate", NULL,
                  "gate on another context");
    reject_create(f, rt_ctx, G, &f->b.up.t, D, RUDNN_STATUS_DEVICE_MISMATCH, "up", NULL, "up on another context");
    reject_create(f, rt_ctx, G, U, &f->b.down.t, RUDNN_STATUS_DEVICE_MISMATCH, "down", NULL,
                  "down on another context");
    reject_create(f, rt_ctx2, G, U, D, RUDNN_STATUS_DEVICE_MISMATCH, "gate", NULL,
                  "weights of the first context, created on the second");
    fx_finish(f);
}

static void test_forward_dispatched(void **state)
{
    fx_t *f = *state;
    if (!need(f, f->a.disp, "dispatched tokens") || !need(f, f->b.disp, "dispatched tokens (second context)") ||
        !need(f, f->a.ex, "experts") || !need(f, f->b.ex, "experts (second context)") ||
        !need(f, f->disp_h13, "dispatched tokens of hidden 13") ||
        !need(f, f->disp_e6, "dispatched tokens of 6 experts") || !need(f, f->ex16, "f16 experts")) {
        fx_finish(f);
        return;
    }
    const char *op = "swiglu_experts_forward_dispatched";
    rudnn_swiglu_experts_t X = f->a.ex;
    rudnn_dispatched_t D = f->a.disp;
    const rudnn_tensor_t *EO = &f->a.eo.t;
    rudnn_moe_strategy_t S = RUDNN_MOE_SCALAR;
#define FD(want, n1, n2, what, q, x, d, s, ws, wsb, eo)                                                        \
    REJECT(f, want, op, n1, n2, what, rudnn_swiglu_experts_forward_dispatched(q, x, d, s, ws, wsb, eo))
    FD(RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue", NULL, X, D, S, NULL, 0, EO);
    FD(RUDNN_STATUS_BAD_PARAM, "experts", NULL, "NULL experts", rt_queue, NULL, D, S, NULL, 0, EO);
    FD(RUDNN_STATUS_BAD_PARAM, "dispatched", NULL, "NULL dispatched", rt_queue, X, NULL, S, NULL, 0, EO);
    FD(RUDNN_STATUS_BAD_PARAM, "expert_output", NULL, "NULL expert_output", rt_queue, X, D, S, NULL, 0, NULL);
    FD(RUDNN_STATUS_DEVICE_MISMATCH, "experts", NULL, "experts of another context", rt_queue, f->b.ex, D, S, NULL,
       0, EO);
    FD(RUDNN_STATUS_DEVICE_MISMATCH, "dispatched", NULL, "dispatched tokens of another context", rt_queue, X,
       f->b.disp, S, NULL, 0, EO);
    FD(RUDNN_STATUS_DEVICE_MISMATCH, "expert_output", NULL, "expert_output on another context", rt_queue, X, D, S,
       NULL, 0, &f->b.eo.t);
    /* experts vs dispatched */
    FD(RUDNN_STATUS_BAD_SHAPE, "experts", "8", "routing over 6 experts, weights of 8", rt_queue, X, f->disp_e6, S,
       NULL, 0, EO);
    static const int64_t eo13[2] = {T * K, H + 1};
    rudnn_tensor_t eo_h13 = rt_tensor_desc(&f->a.eo, RUDNN_F32, 2, eo13, 0);
    FD(RUDNN_STATUS_BAD_SHAPE, "hidden", "13", "dispatched hidden 13, weights 12", rt_queue, X, f->disp_h13, S,
       NULL, 0, &eo_h13);
    rudnn_tensor_t eo16 = rt_tensor_desc(&f->a.eo, RUDNN_F16, 2, dims_eo, 0);
    FD(RUDNN_STATUS_BAD_DTYPE, "f16", "f32", "f32 dispatched tokens, f16 weights", rt_queue, f->ex16, D, S, NULL,
       0, &eo16);
    /* expert_output shape and dtype */
    static const int64_t r9[2] = {T * K + 1, H}, r7[2] = {T * K - 1, H}, c13[2] = {T * K, H + 1},
                         flat[1] = {T * K * H}, r3[3] = {T, K, H};
    rudnn_tensor_t e9 = rt_tensor_desc(&f->a.eo, RUDNN_F32, 2, r9, 0);
    rudnn_tensor_t e7 = rt_tensor_desc(&f->a.eo, RUDNN_F32, 2, r7, 0);
    rudnn_tensor_t ec13 = rt_tensor_desc(&f->a.eo, RUDNN_F32, 2, c13, 0);
    rudnn_tensor_t eflat = rt_tensor_desc(&f->a.eo, RUDNN_F32, 1, flat, 0);
    rudnn_tensor_t er3 = rt_tensor_desc(&f->a.eo, RUDNN_F32, 3, r3, 0);
    FD(RUDNN_STATUS_BAD_SHAPE, "expert_output", NULL, "expert_output [9, 12]", rt_queue, X, D, S, NULL, 0, &e9);
    FD(RUDNN_STATUS_BAD_SHAPE, "expert_output", NULL, "expert_output [7, 12]", rt_queue, X, D, S, NULL, 0, &e7);
    FD(RUDNN_STATUS_BAD_SHAPE, "expert_output", NULL, "expert_output [8, 13]", rt_queue, X, D, S, NULL, 0, &ec13);
    FD(RUDNN_STATUS_BAD_SHAPE, "expert_output", NULL, "expert_output [96]", rt_queue, X, D, S, NULL, 0, &eflat);
    FD(RUDNN_STATUS_BAD_SHAPE, "expert_output", NULL, "expert_output [4, 2, 12]", rt_queue, X, D, S, NULL, 0, &er3);
    rudnn_tensor_t ebf = rt_tensor_desc(&f->a.eo, RUDNN_BF16, 2, dims_eo, 0);
    FD(RUDNN_STATUS_BAD_DTYPE, "expert_output", "bf16", "expert_output bf16", rt_queue, X, D, S, NULL, 0, &ebf);
    FD(RUDNN_STATUS_BAD_DTYPE, "expert_output", "f16", "expert_output f16", rt_queue, X, D, S, NULL, 0, &eo16);
    /* strategy */
    FD(RUDNN_STATUS_BAD_PARAM, "strategy", "3", "strategy 3", rt_queue, X, D, (rudnn_moe_strategy_t)3, NULL, 0, EO);
    FD(RUDNN_STATUS_BAD_PARAM, "strategy", "-1", "strategy -1", rt_queue, X, D, (rudnn_moe_strategy_t)-1, NULL, 0,
       EO);
    FD(RUDNN_STATUS_NOT_SUPPORTED, "TensorCore", "f32", "TensorCore with f32 weights", rt_queue, X, D,
       RUDNN_MOE_TENSOR_CORE, NULL, 0, EO);
    /* workspace */
    size_t need_bytes = f->a.ws_bytes;
    if (need_bytes > 0)
        FD(RUDNN_STATUS_BAD_PARAM, "workspace", NULL, "workspace one byte too small", rt_queue, X, D, S, f->a.ws,
           need_bytes - 1, EO);
    FD(RUDNN_STATUS_BAD_PARAM, "workspace", NULL, "workspace of 0 bytes", rt_queue, X, D, S, f->a.ws, 0, EO);
    FD(RUDNN_STATUS_BAD_PARAM, "workspace", NULL, "workspace_bytes larger than the buffer", rt_queue, X, D, S,
       f->a.ws, need_bytes + SLACK + 1, EO);
    FD(RUDNN_STATUS_DEVICE_MISMATCH, "workspace", NULL, "workspace on another context", rt_queue, X, D, S, f->b.ws,
       need_bytes, EO);
    /* writes over the weights every row reads (fuzz_moe found both accepted) */
    rudnn_tensor_t eo_gate = rt_tensor_desc(&f->a.gate, RUDNN_F32, 2, dims_eo, 4);
    FD(RUDNN_STATUS_BAD_PARAM, "expert_output", "gate", "expert_output partly over the gate weights", rt_queue, X,
       D, S, NULL, 0, &eo_gate);
    rudnn_tensor_t eo_down = rt_tensor_desc(&f->a.down, RUDNN_F32, 2, dims_eo, 0);
    FD(RUDNN_STATUS_BAD_PARAM, "expert_output", "down", "expert_output at the start of the down weights", rt_queue,
       X, D, S, NULL, 0, &eo_down);
    FD(RUDNN_STATUS_BAD_PARAM, "workspace", "up", "workspace over the up weights", rt_queue, X, D, S,
       f->a.up.buffer, need_bytes, EO);
#undef FD
    fx_finish(f);
}

/* ---- experts on grouped rows ------------------------------------------------------------------- */

/* Writes expert_token_nums (E values) before a call. */
static void set_nums(const rt_tensor_t *nums, const int64_t *v)
{
    rt_assert_status(rudnn_tensor_write(rt_queue, &nums->t, v, E * sizeof(int64_t)), RUDNN_STATUS_SUCCESS);
}

static void test_forward_grouped(void **state)
{
    fx_t *f = *state;
    if (!need(f, f->a.ex, "experts") || !need(f, f->b.ex, "experts (second context)") ||
        !need(f, f->a.ws, "workspace") || !need(f, f->b.ws, "workspace (second context)")) {
        fx_finish(f);
        return;
    }
    const char *op = "swiglu_experts_forward_grouped";
    rudnn_swiglu_experts_t X = f->a.ex;
    const rudnn_tensor_t *RW = &f->grows.t, *NM = &f->gnums.t, *OUT = &f->gout.t;
    rudnn_moe_strategy_t S = RUDNN_MOE_SCALAR;
    static const int64_t ok_counts[E] = {1, 0, 2, 0, 0, 1, 0, 1}; /* sum 5 < R */
    set_nums(&f->gnums, ok_counts);
#define FG(want, n1, n2, what, q, x, rows, nums, tot, s, ws, wsb, out)                                         \
    REJECT(f, want, op, n1, n2, what, rudnn_swiglu_experts_forward_grouped(q, x, rows, nums, tot, s, ws, wsb, out))
    /* NULL arguments */
    FG(RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue", NULL, X, RW, NM, 0, S, NULL, 0, OUT);
    FG(RUDNN_STATUS_BAD_PARAM, "experts", NULL, "NULL experts", rt_queue, NULL, RW, NM, 0, S, NULL, 0, OUT);
    FG(RUDNN_STATUS_BAD_PARAM, "rows", NULL, "NULL rows", rt_queue, X, NULL, NM, 0, S, NULL, 0, OUT);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_token_nums", NULL, "NULL expert_token_nums", rt_queue, X, RW, NULL, 0, S,
       NULL, 0, OUT);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_output", NULL, "NULL expert_output", rt_queue, X, RW, NM, 0, S, NULL, 0,
       NULL);
    /* contexts */
    static const int64_t b_rows[2] = {T, H}, one_e[1] = {E};
    rudnn_tensor_t nums_b = rt_tensor_desc(&f->b.bias, RUDNN_I64, 1, one_e, 0);
    rudnn_tensor_t out_b = rt_tensor_desc(&f->b.eo, RUDNN_F32, 2, b_rows, 0);
    rudnn_tensor_t rows4 = rt_tensor_desc(&f->grows, RUDNN_F32, 2, b_rows, 0);
    FG(RUDNN_STATUS_DEVICE_MISMATCH, "experts", NULL, "experts of another context", rt_queue, f->b.ex, RW, NM, 0, S,
       NULL, 0, OUT);
    FG(RUDNN_STATUS_DEVICE_MISMATCH, "rows", NULL, "rows on another context", rt_queue, X, &f->b.input.t, NM, 0, S,
       NULL, 0, OUT);
    FG(RUDNN_STATUS_DEVICE_MISMATCH, "expert_token_nums", NULL, "expert_token_nums on another context", rt_queue, X,
       RW, &nums_b, 0, S, NULL, 0, OUT);
    FG(RUDNN_STATUS_DEVICE_MISMATCH, "expert_output", NULL, "expert_output on another context", rt_queue, X, &rows4,
       NM, 0, S, NULL, 0, &out_b);
    FG(RUDNN_STATUS_DEVICE_MISMATCH, "workspace", NULL, "workspace on another context", rt_queue, X, RW, NM, 0, S,
       f->b.ws, f->b.ws_bytes, OUT);
    /* rows and expert_output: shape and dtype */
    static const int64_t h13[2] = {R, H + 1}, r3[3] = {1, R, H}, r7[2] = {R + 1, H}, r5[2] = {R - 1, H};
    rudnn_tensor_t rows_h13 = rt_tensor_desc(&f->grows, RUDNN_F32, 2, h13, 0);
    rudnn_tensor_t out_h13 = rt_tensor_desc(&f->gout, RUDNN_F32, 2, h13, 0);
    rudnn_tensor_t rows_r3 = rt_tensor_desc(&f->grows, RUDNN_F32, 3, r3, 0);
    rudnn_tensor_t rows16 = rt_tensor_desc(&f->grows, RUDNN_F16, 2, (int64_t[]){R, H}, 0);
    rudnn_tensor_t out16 = rt_tensor_desc(&f->gout, RUDNN_F16, 2, (int64_t[]){R, H}, 0);
    rudnn_tensor_t out_bf = rt_tensor_desc(&f->gout, RUDNN_BF16, 2, (int64_t[]){R, H}, 0);
    rudnn_tensor_t out7 = rt_tensor_desc(&f->gout, RUDNN_F32, 2, r7, 0);
    rudnn_tensor_t out5 = rt_tensor_desc(&f->gout, RUDNN_F32, 2, r5, 0);
    FG(RUDNN_STATUS_BAD_SHAPE, "rows", "12", "rows of hidden 13, weights 12", rt_queue, X, &rows_h13, NM, 0, S,
       NULL, 0, &out_h13);
    FG(RUDNN_STATUS_BAD_SHAPE, "rows", NULL, "rows of rank 3", rt_queue, X, &rows_r3, NM, 0, S, NULL, 0, OUT);
    FG(RUDNN_STATUS_BAD_DTYPE, "rows", "f16", "f16 rows, f32 weights", rt_queue, X, &rows16, NM, 0, S, NULL, 0,
       &out16);
    FG(RUDNN_STATUS_BAD_DTYPE, "rows", "f32", "f32 rows, f16 weights", rt_queue, f->ex16, RW, NM, 0, S, NULL, 0,
       &out16);
    FG(RUDNN_STATUS_BAD_DTYPE, "expert_output", "f16", "expert_output f16", rt_queue, X, RW, NM, 0, S, NULL, 0,
       &out16);
    FG(RUDNN_STATUS_BAD_DTYPE, "expert_output", "bf16", "expert_output bf16", rt_queue, X, RW, NM, 0, S, NULL, 0,
       &out_bf);
    FG(RUDNN_STATUS_BAD_SHAPE, "expert_output", NULL, "expert_output [7, 12] for rows [6, 12]", rt_queue, X, RW,
       NM, 0, S, NULL, 0, &out7);
    FG(RUDNN_STATUS_BAD_SHAPE, "expert_output", NULL, "expert_output [5, 12] for rows [6, 12]", rt_queue, X, RW,
       NM, 0, S, NULL, 0, &out5);
    /* expert_token_nums: dtype and length */
    rudnn_tensor_t nums_i32 = rt_tensor_desc(&f->gnums, RUDNN_I32, 1, one_e, 0);
    rudnn_tensor_t nums_u32 = rt_tensor_desc(&f->gnums, RUDNN_U32, 1, one_e, 0);
    rudnn_tensor_t nums_f32 = rt_tensor_desc(&f->gnums, RUDNN_F32, 1, one_e, 0);
    rudnn_tensor_t nums7 = rt_tensor_desc(&f->gnums, RUDNN_I64, 1, (int64_t[]){E - 1}, 0);
    rudnn_tensor_t nums9 = rt_tensor_desc(&f->gnums, RUDNN_I64, 1, (int64_t[]){E + 1}, 0);
    rudnn_tensor_t nums2d = rt_tensor_desc(&f->gnums, RUDNN_I64, 2, (int64_t[]){2, E / 2}, 0);
    FG(RUDNN_STATUS_BAD_DTYPE, "expert_token_nums", "i32", "expert_token_nums i32", rt_queue, X, RW, &nums_i32, 0,
       S, NULL, 0, OUT);
    FG(RUDNN_STATUS_BAD_DTYPE, "expert_token_nums", "u32", "expert_token_nums u32", rt_queue, X, RW, &nums_u32, 0,
       S, NULL, 0, OUT);
    FG(RUDNN_STATUS_BAD_DTYPE, "expert_token_nums", "f32", "expert_token_nums f32", rt_queue, X, RW, &nums_f32, 0,
       S, NULL, 0, OUT);
    FG(RUDNN_STATUS_BAD_SHAPE, "expert_token_nums", "8", "expert_token_nums [7] for 8 experts", rt_queue, X, RW,
       &nums7, 0, S, NULL, 0, OUT);
    FG(RUDNN_STATUS_BAD_SHAPE, "expert_token_nums", "8", "expert_token_nums [9] for 8 experts", rt_queue, X, RW,
       &nums9, 0, S, NULL, 0, OUT);
    FG(RUDNN_STATUS_BAD_SHAPE, "expert_token_nums", "8", "expert_token_nums [2, 4]", rt_queue, X, RW, &nums2d, 0,
       S, NULL, 0, OUT);
    /* expert_token_nums: values (read to the host) */
    static const int64_t negative[E] = {1, -1, 2, 0, 0, 0, 0, 0}, over[E] = {1, 2, 0, 3, 0, 0, 0, 1},
                         huge[E] = {1, INT64_MAX, INT64_MAX, 0, 0, 0, 0, 0},
                         decreasing[E] = {1, 3, 2, 4, 4, 4, 5, 5}, neg_first[E] = {-1, 0, 1, 1, 1, 1, 1, 1},
                         totals_over[E] = {1, 2, 3, 3, 3, 4, 5, 7};
    set_nums(&f->gnums, negative);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_token_nums[1]", "-1", "a negative count", rt_queue, X, RW, NM, 0, S, NULL, 0,
       OUT);
    set_nums(&f->gnums, over);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_token_nums", "6 rows", "counts summing to 7 > R = 6", rt_queue, X, RW, NM,
       0, S, NULL, 0, OUT);
    set_nums(&f->gnums, huge);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_token_nums", "6 rows", "counts of INT64_MAX (a sum past int64)", rt_queue,
       X, RW, NM, 0, S, NULL, 0, OUT);
    set_nums(&f->gnums, decreasing);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_token_nums[2]", "decrease", "decreasing running totals", rt_queue, X, RW, NM,
       1, S, NULL, 0, OUT);
    set_nums(&f->gnums, neg_first);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_token_nums[0]", "-1", "a negative first running total", rt_queue, X, RW, NM,
       1, S, NULL, 0, OUT);
    set_nums(&f->gnums, totals_over);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_token_nums", "6 rows", "running totals reaching 7 > R = 6", rt_queue, X, RW,
       NM, 1, S, NULL, 0, OUT);
    set_nums(&f->gnums, ok_counts);
    /* as totals, ok_counts decrease at once (0 after 1) */
    FG(RUDNN_STATUS_BAD_PARAM, "expert_token_nums[1]", "decrease", "counts passed as running totals", rt_queue, X,
       RW, NM, 1, S, NULL, 0, OUT);
    /* overlaps: expert_output with rows (also in place), with expert_token_nums, with the weights */
    rudnn_tensor_t out_on_rows = rt_tensor_desc(&f->grows, RUDNN_F32, 2, (int64_t[]){R, H}, 4 * sizeof(float));
    FG(RUDNN_STATUS_BAD_PARAM, "expert_output", "rows", "expert_output partly over rows", rt_queue, X, RW, NM, 0, S,
       NULL, 0, &out_on_rows);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_output", "rows", "expert_output = rows (in place)", rt_queue, X, RW, NM, 0, S,
       NULL, 0, RW);
    rudnn_tensor_t out_on_nums = rt_tensor_desc(&f->gnums, RUDNN_F32, 2, (int64_t[]){R, H}, 0);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_output", "expert_token_nums", "expert_output over expert_token_nums",
       rt_queue, X, RW, NM, 0, S, NULL, 0, &out_on_nums);
    rudnn_tensor_t out_on_gate = rt_tensor_desc(&f->a.gate, RUDNN_F32, 2, (int64_t[]){R, H}, 8);
    FG(RUDNN_STATUS_BAD_PARAM, "expert_output", "gate", "expert_output over the gate weights", rt_queue, X, RW, NM,
       0, S, NULL, 0, &out_on_gate);
    /* strategy */
    FG(RUDNN_STATUS_BAD_PARAM, "strategy", "3", "strategy 3", rt_queue, X, RW, NM, 0, (rudnn_moe_strategy_t)3, NULL,
       0, OUT);
    FG(RUDNN_STATUS_NOT_SUPPORTED, "TensorCore", "f32", "TensorCore with f32 weights", rt_queue, X, RW, NM, 0,
       RUDNN_MOE_TENSOR_CORE, NULL, 0, OUT);
    /* workspace: sized for the sum (5 rows), not R */
    size_t need_bytes = 0;
    rudnn_status_t st = rudnn_swiglu_experts_workspace_size(X, 5, S, &need_bytes);
    if (st != RUDNN_STATUS_SUCCESS || need_bytes == 0 || need_bytes > f->a.ws_bytes) {
        rt_logf(&f->log, "  %s: workspace_size(5 rows) returned %s, %zu bytes (fixture workspace %zu)\n", op,
                rudnn_status_string(st), need_bytes, f->a.ws_bytes);
        f->log.failures++;
    } else {
        FG(RUDNN_STATUS_BAD_PARAM, "workspace", NULL, "workspace one byte short of the sum's", rt_queue, X, RW, NM,
           0, S, f->a.ws, need_bytes - 1, OUT);
        FG(RUDNN_STATUS_BAD_PARAM, "workspace", NULL, "workspace_bytes larger than the buffer", rt_queue, X, RW, NM,
           0, S, f->a.ws, f->a.ws_bytes + SLACK + 1, OUT);
        FG(RUDNN_STATUS_BAD_PARAM, "rows", "workspace", "workspace over rows", rt_queue, X, RW, NM, 0, S,
           f->grows.buffer, need_bytes, OUT);
        FG(RUDNN_STATUS_BAD_PARAM, "expert_output", "workspace", "workspace over expert_output", rt_queue, X, RW,
           NM, 0, S, f->gout.buffer, need_bytes, OUT);
        FG(RUDNN_STATUS_BAD_PARAM, "workspace", "up", "workspace over the up weights", rt_queue, X, RW, NM, 0, S,
           f->a.up.buffer, need_bytes, OUT);
        /* exactly that size runs, as counts and as the same rows' running totals */
        static const int64_t ok_totals[E] = {1, 1, 3, 3, 3, 4, 4, 5};
        for (int totals = 0; totals < 2; totals++) {
            set_nums(&f->gnums, totals ? ok_totals : ok_counts);
            rt_tensor_poison(&f->gout);
            st = rudnn_swiglu_experts_forward_grouped(rt_queue, X, RW, NM, totals, S, f->a.ws, need_bytes, OUT);
            if (st != RUDNN_STATUS_SUCCESS || strcmp(rudnn_last_error(), "") != 0) {
                rt_logf(&f->log, "  %s: valid call (%s, workspace of the sum's size) returned %s: \"%s\"\n", op,
                        totals ? "totals" : "counts", rudnn_status_string(st), rudnn_last_error());
                f->log.failures++;
            }
            rudnn_queue_synchronize(rt_queue);
        }
    }
#undef FG
    fx_finish(f);
}

/* ---- combine ------------------------------------------------------------------------------------ */

static void test_combine(void **state)
{
    fx_t *f = *state;
    if (!need(f, f->a.disp, "dispatched tokens") || !need(f, f->b.disp, "dispatched tokens (second context)") ||
        !need(f, f->disp_k1, "dispatched tokens with top_k 1")) {
        fx_finish(f);
        return;
    }
    const char *op = "moe_combine";
    rudnn_dispatched_t D = f->a.disp;
    const rudnn_tensor_t *EO = &f->a.eo.t, *O = &f->a.out.t;
#define CB(want, n1, n2, what, q, d, eo, out) REJECT(f, want, op, n1, n2, what, rudnn_moe_combine(q, d, eo, out))
    CB(RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue", NULL, D, EO, O);
    CB(RUDNN_STATUS_BAD_PARAM, "dispatched", NULL, "NULL dispatched", rt_queue, NULL, EO, O);
    CB(RUDNN_STATUS_BAD_PARAM, "expert_output", NULL, "NULL expert_output", rt_queue, D, NULL, O);
    CB(RUDNN_STATUS_BAD_PARAM, "output", NULL, "NULL output", rt_queue, D, EO, NULL);
    CB(RUDNN_STATUS_DEVICE_MISMATCH, "dispatched", NULL, "dispatched tokens of another context", rt_queue, f->b.disp,
       EO, O);
    CB(RUDNN_STATUS_DEVICE_MISMATCH, "expert_output", NULL, "expert_output on another context", rt_queue, D,
       &f->b.eo.t, O);
    CB(RUDNN_STATUS_DEVICE_MISMATCH, "output", NULL, "output on another context", rt_queue, D, EO, &f->b.out.t);
    static const int64_t r9[2] = {T * K + 1, H}, c13[2] = {T * K, H + 1};
    rudnn_tensor_t e9 = rt_tensor_desc(&f->a.eo, RUDNN_F32, 2, r9, 0);
    rudnn_tensor_t ec13 = rt_tensor_desc(&f->a.eo, RUDNN_F32, 2, c13, 0);
    rudnn_tensor_t e16 = rt_tensor_desc(&f->a.eo, RUDNN_F16, 2, dims_eo, 0);
    CB(RUDNN_STATUS_BAD_SHAPE, "expert_output", NULL, "expert_output [9, 12]", rt_queue, D, &e9, O);
    CB(RUDNN_STATUS_BAD_SHAPE, "expert_output", NULL, "expert_output [8, 13]", rt_queue, D, &ec13, O);
    CB(RUDNN_STATUS_BAD_DTYPE, "expert_output", "f16", "expert_output f16", rt_queue, D, &e16, O);
    static const int64_t t5[2] = {T + 1, H}, t3[2] = {T - 1, H}, h13[2] = {T, H + 1}, r3[3] = {T, H, 1},
                         flat[1] = {T * H};
    rudnn_tensor_t o5 = rt_tensor_desc(&f->a.out, RUDNN_F32, 2, t5, 0);
    rudnn_tensor_t o3 = rt_tensor_desc(&f->a.out, RUDNN_F32, 2, t3, 0);
    rudnn_tensor_t o13 = rt_tensor_desc(&f->a.out, RUDNN_F32, 2, h13, 0);
    rudnn_tensor_t or3 = rt_tensor_desc(&f->a.out, RUDNN_F32, 3, r3, 0);
    rudnn_tensor_t oflat = rt_tensor_desc(&f->a.out, RUDNN_F32, 1, flat, 0);
    rudnn_tensor_t obf = rt_tensor_desc(&f->a.out, RUDNN_BF16, 2, dims_input, 0);
    CB(RUDNN_STATUS_BAD_SHAPE, "output", NULL, "output [5, 12]", rt_queue, D, EO, &o5);
    CB(RUDNN_STATUS_BAD_SHAPE, "output", NULL, "output [3, 12]", rt_queue, D, EO, &o3);
    CB(RUDNN_STATUS_BAD_SHAPE, "output", NULL, "output [4, 13]", rt_queue, D, EO, &o13);
    CB(RUDNN_STATUS_BAD_SHAPE, "output", NULL, "output [4, 12, 1]", rt_queue, D, EO, &or3);
    CB(RUDNN_STATUS_BAD_SHAPE, "output", NULL, "output [48]", rt_queue, D, EO, &oflat);
    CB(RUDNN_STATUS_BAD_DTYPE, "output", "bf16", "output bf16", rt_queue, D, EO, &obf);
    /* output overlapping expert_output: partially, and exactly (top_k 1: same shape) */
    rudnn_tensor_t o_in_eo = rt_tensor_desc(&f->a.eo, RUDNN_F32, 2, dims_input, 4 * H);
    CB(RUDNN_STATUS_BAD_PARAM, "output", "expert_output", "output inside expert_output", rt_queue, D, EO, &o_in_eo);
    static const int64_t k1dims[2] = {T, H};
    rudnn_tensor_t eo_k1 = rt_tensor_desc(&f->a.eo, RUDNN_F32, 2, k1dims, 0);
    CB(RUDNN_STATUS_BAD_PARAM, "output", "expert_output", "output == expert_output (top_k 1)", rt_queue, f->disp_k1,
       &eo_k1, &eo_k1);
#undef CB
    fx_finish(f);
}

/* ---- one-call forms ------------------------------------------------------------------------------ */

static void test_forward_one_call(void **state)
{
    fx_t *f = *state;
    if (!need(f, f->a.ex, "experts") || !need(f, f->b.ex, "experts (second context)") ||
        !need(f, f->ex16, "f16 experts")) {
        fx_finish(f);
        return;
    }
    rudnn_swiglu_experts_t X = f->a.ex;
    const rudnn_tensor_t *IN = &f->a.input.t, *L = &f->a.logits.t, *B = &f->a.bias.t, *O = &f->a.out.t;
    rudnn_routing_options_t so = {K, 1};
    rudnn_grouped_routing_options_t go = grouped_ok();
    rudnn_moe_strategy_t S = RUDNN_MOE_SCALAR;
    const char *op1 = "swiglu_experts_forward", *op2 = "swiglu_experts_forward_sigmoid_grouped";
    /* both forms get the same bad arguments */
#define BOTH(want, n1, n2, what, q, x, in, l, b, o_s, o_g, s, out)                                                \
    do {                                                                                                         \
        REJECT(f, want, op1, n1, n2, what, rudnn_swiglu_experts_forward(q, x, in, l, o_s, out));                \
        REJECT(f, want, op2, n1, n2, what,                                                                       \
               rudnn_swiglu_experts_forward_sigmoid_grouped(q, x, in, l, b, o_g, s, out));                       \
    } while (0)
    BOTH(RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue", NULL, X, IN, L, B, &so, &go, S, O);
    BOTH(RUDNN_STATUS_BAD_PARAM, "experts", NULL, "NULL experts", rt_queue, NULL, IN, L, B, &so, &go, S, O);
    BOTH(RUDNN_STATUS_BAD_PARAM, "input", NULL, "NULL input", rt_queue, X, NULL, L, B, &so, &go, S, O);
    BOTH(RUDNN_STATUS_BAD_PARAM, "logits", NULL, "NULL logits", rt_queue, X, IN, NULL, B, &so, &go, S, O);
    BOTH(RUDNN_STATUS_BAD_PARAM, "options", NULL, "NULL options", rt_queue, X, IN, L, B, NULL, NULL, S, O);
    BOTH(RUDNN_STATUS_BAD_PARAM, "output", NULL, "NULL output", rt_queue, X, IN, L, B, &so, &go, S, NULL);
    BOTH(RUDNN_STATUS_DEVICE_MISMATCH, "experts", NULL, "experts of another context", rt_queue, f->b.ex, IN, L, B,
         &so, &go, S, O);
    BOTH(RUDNN_STATUS_DEVICE_MISMATCH, "input", NULL, "input on another context", rt_queue, X, &f->b.input.t, L, B,
         &so, &go, S, O);
    BOTH(RUDNN_STATUS_DEVICE_MISMATCH, "logits", NULL, "logits on another context", rt_queue, X, IN,
         &f->b.logits.t, B, &so, &go, S, O);
    BOTH(RUDNN_STATUS_DEVICE_MISMATCH, "output", NULL, "output on another context", rt_queue, X, IN, L, B, &so,
         &go, S, &f->b.out.t);
    /* input */
    static const int64_t h13[2] = {T, H + 1}, h11[2] = {T, H - 1}, r1[1] = {T * H};
    rudnn_tensor_t in13 = rt_tensor_desc(&f->a.input, RUDNN_F32, 2, h13, 0);
    rudnn_tensor_t in11 = rt_tensor_desc(&f->a.input, RUDNN_F32, 2, h11, 0);
    rudnn_tensor_t inr1 = rt_tensor_desc(&f->a.input, RUDNN_F32, 1, r1, 0);
    rudnn_tensor_t out13 = rt_tensor_desc(&f->a.out, RUDNN_F32, 2, h13, 0);
    rudnn_tensor_t out11 = rt_tensor_desc(&f->a.out, RUDNN_F32, 2, h11, 0);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "input", "12", "input hidden 13, weights 12", rt_queue, X, &in13, L, B, &so, &go, S,
         &out13);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "input", "12", "input hidden 11, weights 12", rt_queue, X, &in11, L, B, &so, &go, S,
         &out11);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "input", NULL, "input rank 1", rt_queue, X, &inr1, L, B, &so, &go, S, O);
    rudnn_tensor_t in16 = rt_tensor_desc(&f->a.input, RUDNN_F16, 2, dims_input, 0);
    rudnn_tensor_t out16 = rt_tensor_desc(&f->a.out, RUDNN_F16, 2, dims_input, 0);
    BOTH(RUDNN_STATUS_BAD_DTYPE, "input", "f16", "input f16, weights f32", rt_queue, X, &in16, L, B, &so, &go, S,
         &out16);
    BOTH(RUDNN_STATUS_BAD_DTYPE, "input", "f32", "input f32, weights f16", rt_queue, f->ex16, IN, L, B, &so, &go, S,
         O);
    /* logits */
    static const int64_t t3[2] = {T - 1, E}, t5[2] = {T + 1, E}, e6[2] = {T, 6}, e9[2] = {T, E + 1},
                         lr3[3] = {T, 1, E};
    rudnn_tensor_t l3 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, t3, 0);
    rudnn_tensor_t l5 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, t5, 0);
    rudnn_tensor_t l6 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, e6, 0);
    rudnn_tensor_t l9 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, e9, 0);
    rudnn_tensor_t lr = rt_tensor_desc(&f->a.logits, RUDNN_F32, 3, lr3, 0);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits with 3 tokens, input 4", rt_queue, X, IN, &l3, B, &so, &go,
         S, O);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits with 5 tokens, input 4", rt_queue, X, IN, &l5, B, &so, &go,
         S, O);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits over 6 experts, weights 8", rt_queue, X, IN, &l6, B, &so,
         &go, S, O);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits over 9 experts, weights 8", rt_queue, X, IN, &l9, B, &so,
         &go, S, O);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "logits", NULL, "logits rank 3", rt_queue, X, IN, &lr, B, &so, &go, S, O);
    static const rudnn_dtype_t bad[] = {RUDNN_I8, RUDNN_U32};
    for (size_t i = 0; i < 2; i++) {
        rudnn_tensor_t l = rt_tensor_desc(&f->a.logits, bad[i], 2, dims_logits, 0);
        char what[64];
        snprintf(what, sizeof what, "logits %s", rudnn_dtype_name(bad[i]));
        BOTH(RUDNN_STATUS_BAD_DTYPE, "logits", rudnn_dtype_name(bad[i]), what, rt_queue, X, IN, &l, B, &so, &go, S,
             O);
    }
    /* output */
    static const int64_t o5[2] = {T + 1, H}, or3[3] = {T, H, 1};
    rudnn_tensor_t out5 = rt_tensor_desc(&f->a.out, RUDNN_F32, 2, o5, 0);
    rudnn_tensor_t outr3 = rt_tensor_desc(&f->a.out, RUDNN_F32, 3, or3, 0);
    rudnn_tensor_t outbf = rt_tensor_desc(&f->a.out, RUDNN_BF16, 2, dims_input, 0);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "output", NULL, "output [5, 12]", rt_queue, X, IN, L, B, &so, &go, S, &out5);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "output", NULL, "output [4, 13]", rt_queue, X, IN, L, B, &so, &go, S, &out13);
    BOTH(RUDNN_STATUS_BAD_SHAPE, "output", NULL, "output [4, 12, 1]", rt_queue, X, IN, L, B, &so, &go, S, &outr3);
    BOTH(RUDNN_STATUS_BAD_DTYPE, "output", "bf16", "output bf16", rt_queue, X, IN, L, B, &so, &go, S, &outbf);
    rudnn_tensor_t out_shift = rt_tensor_desc(&f->a.input, RUDNN_F32, 2, dims_input, 4 * H);
    BOTH(RUDNN_STATUS_BAD_PARAM, "output", "overlap", "output one row after the input, overlapping", rt_queue, X, IN,
         L, B, &so, &go, S, &out_shift);
    /* partly over the routing inputs (fuzz_moe found both accepted) */
    rudnn_tensor_t out_logits = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, dims_input, 4);
    BOTH(RUDNN_STATUS_BAD_PARAM, "output", "logits", "output 4 bytes into the logits", rt_queue, X, IN, L, B, &so, &go,
         S, &out_logits);
    rudnn_tensor_t out_bias = rt_tensor_desc(&f->a.bias, RUDNN_F32, 2, dims_input, 4);
    REJECT(f, RUDNN_STATUS_BAD_PARAM, op2, "output", "bias", "output 4 bytes into the bias",
           rudnn_swiglu_experts_forward_sigmoid_grouped(rt_queue, X, IN, L, B, &go, S, &out_bias));
#undef BOTH
    /* routing options through the one-call forms: the message names the op called */
    rudnn_routing_options_t sk0 = {0, 1}, sk9 = {E + 1, 1};
    REJECT(f, RUDNN_STATUS_BAD_PARAM, op1, "top_k", NULL, "top_k 0",
           rudnn_swiglu_experts_forward(rt_queue, X, IN, L, &sk0, O));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, op1, "top_k", NULL, "top_k 9 with 8 experts",
           rudnn_swiglu_experts_forward(rt_queue, X, IN, L, &sk9, O));
    rudnn_grouped_routing_options_t g = grouped_ok();
    g.scale = 0.0f;
    REJECT(f, RUDNN_STATUS_BAD_PARAM, op2, "scale", NULL, "scale 0",
           rudnn_swiglu_experts_forward_sigmoid_grouped(rt_queue, X, IN, L, B, &g, S, O));
    g = grouped_ok();
    g.groups = 3;
    REJECT(f, RUDNN_STATUS_BAD_PARAM, op2, "divisible", NULL, "8 experts, 3 groups",
           rudnn_swiglu_experts_forward_sigmoid_grouped(rt_queue, X, IN, L, B, &g, S, O));
    g = grouped_ok();
    g.top_k = 5;
    REJECT(f, RUDNN_STATUS_BAD_PARAM, op2, "top_k", NULL, "top_k 5 > 4 experts of the selected group",
           rudnn_swiglu_experts_forward_sigmoid_grouped(rt_queue, X, IN, L, B, &g, S, O));
    static const int64_t b7[1] = {E - 1};
    rudnn_tensor_t bias7 = rt_tensor_desc(&f->a.bias, RUDNN_F32, 1, b7, 0);
    rudnn_tensor_t bias16 = rt_tensor_desc(&f->a.bias, RUDNN_F16, 1, dims_bias, 0);
    g = grouped_ok();
    REJECT(f, RUDNN_STATUS_BAD_SHAPE, op2, "bias", NULL, "bias [7]",
           rudnn_swiglu_experts_forward_sigmoid_grouped(rt_queue, X, IN, L, &bias7, &g, S, O));
    REJECT(f, RUDNN_STATUS_BAD_DTYPE, op2, "bias", NULL, "bias f16",
           rudnn_swiglu_experts_forward_sigmoid_grouped(rt_queue, X, IN, L, &bias16, &g, S, O));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, op2, "strategy", NULL, "strategy 7",
           rudnn_swiglu_experts_forward_sigmoid_grouped(rt_queue, X, IN, L, B, &g, (rudnn_moe_strategy_t)7, O));
    REJECT(f, RUDNN_STATUS_NOT_SUPPORTED, op2, "TensorCore", NULL, "TensorCore with f32 weights",
           rudnn_swiglu_experts_forward_sigmoid_grouped(rt_queue, X, IN, L, B, &g, RUDNN_MOE_TENSOR_CORE, O));
    fx_finish(f);
}

/* ---- workspace size, resolve, views -------------------------------------------------------------- */

static void test_workspace_and_resolve(void **state)
{
    fx_t *f = *state;
    if (!need(f, f->a.ex, "experts")) {
        fx_finish(f);
        return;
    }
    rudnn_swiglu_experts_t X = f->a.ex;
    size_t bytes = 0;
    const char *ws = "swiglu_experts_workspace_size", *rs = "swiglu_experts_resolve";
    REJECT(f, RUDNN_STATUS_BAD_PARAM, ws, "experts", NULL, "NULL experts",
           rudnn_swiglu_experts_workspace_size(NULL, 8, RUDNN_MOE_SCALAR, &bytes));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, ws, "bytes", NULL, "NULL bytes",
           rudnn_swiglu_experts_workspace_size(X, 8, RUDNN_MOE_SCALAR, NULL));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, ws, "rows", NULL, "rows -1",
           rudnn_swiglu_experts_workspace_size(X, -1, RUDNN_MOE_SCALAR, &bytes));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, ws, "strategy", NULL, "strategy 3",
           rudnn_swiglu_experts_workspace_size(X, 8, (rudnn_moe_strategy_t)3, &bytes));
    REJECT(f, RUDNN_STATUS_NOT_SUPPORTED, ws, "TensorCore", NULL, "TensorCore with f32 weights",
           rudnn_swiglu_experts_workspace_size(X, 8, RUDNN_MOE_TENSOR_CORE, &bytes));
    /* rows x inter x element size past SIZE_MAX: a status, not a wrapped size (fuzz_moe found it) */
    bytes = 7;
    REJECT(f, RUDNN_STATUS_NOT_SUPPORTED, ws, "rows", "address space", "rows 2^62",
           rudnn_swiglu_experts_workspace_size(X, (int64_t)1 << 62, RUDNN_MOE_SCALAR, &bytes));
    REJECT(f, RUDNN_STATUS_NOT_SUPPORTED, ws, "rows", "address space", "rows INT64_MAX (Auto)",
           rudnn_swiglu_experts_workspace_size(X, INT64_MAX, RUDNN_MOE_AUTO, &bytes));
    if (bytes != 7) {
        rt_logf(&f->log, "  %s: a rejected query wrote bytes (%zu)\n", ws, bytes);
        f->log.failures++;
    }
    /* valid: grows with the rows */
    size_t b0 = 1, b8 = 0, b100 = 0;
    int ok = rudnn_swiglu_experts_workspace_size(X, 0, RUDNN_MOE_SCALAR, &b0) == RUDNN_STATUS_SUCCESS &&
             rudnn_swiglu_experts_workspace_size(X, 8, RUDNN_MOE_AUTO, &b8) == RUDNN_STATUS_SUCCESS &&
             rudnn_swiglu_experts_workspace_size(X, 100, RUDNN_MOE_SCALAR, &b100) == RUDNN_STATUS_SUCCESS;
    if (!ok || b8 > b100 || b0 > b8 || strcmp(rudnn_last_error(), "") != 0) {
        rt_logf(&f->log, "  %s: valid queries: ok %d, bytes %zu (0 rows), %zu (8), %zu (100); error \"%s\"\n", ws,
                ok, b0, b8, b100, rudnn_last_error());
        f->log.failures++;
    }

    /* TensorCore (f16 weights), where this backend runs it: 0 rows need nothing, and the size
     * grows with the rows and holds at least the activation [rows, inter] */
    rudnn_moe_strategy_t tcr;
    if (f->ex16 && rudnn_swiglu_experts_resolve(f->ex16, RUDNN_MOE_TENSOR_CORE, &tcr) == RUDNN_STATUS_SUCCESS) {
        size_t t0 = 1, t8 = 0, t100 = 0;
        ok = rudnn_swiglu_experts_workspace_size(f->ex16, 0, RUDNN_MOE_TENSOR_CORE, &t0) == RUDNN_STATUS_SUCCESS &&
             rudnn_swiglu_experts_workspace_size(f->ex16, 8, RUDNN_MOE_TENSOR_CORE, &t8) == RUDNN_STATUS_SUCCESS &&
             rudnn_swiglu_experts_workspace_size(f->ex16, 100, RUDNN_MOE_TENSOR_CORE, &t100) == RUDNN_STATUS_SUCCESS;
        if (!ok || t0 != 0 || t8 > t100 || t8 < (size_t)8 * I * 2 || strcmp(rudnn_last_error(), "") != 0) {
            rt_logf(&f->log, "  %s: TensorCore (f16): ok %d, bytes %zu (0 rows, expected 0), %zu (8, at least %d), "
                    "%zu (100); error \"%s\"\n", ws, ok, t0, t8, 8 * I * 2, t100, rudnn_last_error());
            f->log.failures++;
        }
    }

    rudnn_moe_strategy_t r = (rudnn_moe_strategy_t)-5;
    REJECT(f, RUDNN_STATUS_BAD_PARAM, rs, "experts", NULL, "NULL experts",
           rudnn_swiglu_experts_resolve(NULL, RUDNN_MOE_AUTO, &r));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, rs, "resolved", NULL, "NULL resolved",
           rudnn_swiglu_experts_resolve(X, RUDNN_MOE_AUTO, NULL));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, rs, "strategy", NULL, "strategy 3",
           rudnn_swiglu_experts_resolve(X, (rudnn_moe_strategy_t)3, &r));
    REJECT(f, RUDNN_STATUS_NOT_SUPPORTED, rs, "TensorCore", "f32", "TensorCore with f32 weights",
           rudnn_swiglu_experts_resolve(X, RUDNN_MOE_TENSOR_CORE, &r));
    rudnn_moe_strategy_t a = (rudnn_moe_strategy_t)-5, s = (rudnn_moe_strategy_t)-5;
    if (rudnn_swiglu_experts_resolve(X, RUDNN_MOE_AUTO, &a) != RUDNN_STATUS_SUCCESS || a != RUDNN_MOE_SCALAR ||
        rudnn_swiglu_experts_resolve(X, RUDNN_MOE_SCALAR, &s) != RUDNN_STATUS_SUCCESS || s != RUDNN_MOE_SCALAR) {
        rt_logf(&f->log, "  %s: f32 weights: Auto -> %d, Scalar -> %d, expected Scalar (0) for both: %s\n", rs, (int)a,
                (int)s, rudnn_last_error());
        f->log.failures++;
    }
    fx_finish(f);
}

static void test_views(void **state)
{
    fx_t *f = *state;
    rudnn_tensor_t t;
    REJECT(f, RUDNN_STATUS_BAD_PARAM, "routing_plan_indices", "plan", NULL, "NULL plan",
           rudnn_routing_plan_indices(NULL, &t));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, "routing_plan_weights", "plan", NULL, "NULL plan",
           rudnn_routing_plan_weights(NULL, &t));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, "dispatched_tokens", "dispatched", NULL, "NULL dispatched",
           rudnn_dispatched_tokens(NULL, &t));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, "dispatched_counts", "dispatched", NULL, "NULL dispatched",
           rudnn_dispatched_counts(NULL, &t));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, "dispatched_offsets", "dispatched", NULL, "NULL dispatched",
           rudnn_dispatched_offsets(NULL, &t));
    REJECT(f, RUDNN_STATUS_BAD_PARAM, "dispatched_positions", "dispatched", NULL, "NULL dispatched",
           rudnn_dispatched_positions(NULL, &t));
    if (need(f, f->a.plan, "plan") && need(f, f->a.disp, "dispatched tokens")) {
        REJECT(f, RUDNN_STATUS_BAD_PARAM, "routing_plan_indices", "tensor", NULL, "NULL tensor",
               rudnn_routing_plan_indices(f->a.plan, NULL));
        REJECT(f, RUDNN_STATUS_BAD_PARAM, "dispatched_tokens", "tensor", NULL, "NULL tensor",
               rudnn_dispatched_tokens(f->a.disp, NULL));
    }
    /* destroying NULL objects is a no-op */
    rudnn_routing_plan_destroy(NULL);
    rudnn_dispatched_destroy(NULL);
    rudnn_swiglu_experts_destroy(NULL);
    fx_finish(f);
}

/* A successful call leaves rudnn_last_error() empty, also right after a failed one. */
static void test_success_clears_error(void **state)
{
    fx_t *f = *state;
    if (!need(f, f->a.disp, "dispatched tokens") || !need(f, f->a.ex, "experts")) {
        fx_finish(f);
        return;
    }
    rudnn_routing_options_t so = {K, 1}, bad = {0, 1};
    rudnn_grouped_routing_options_t go = grouped_ok();
    const char *what[8] = {"moe_route", "moe_route_sigmoid_grouped", "moe_dispatch",
                           "swiglu_experts_forward_dispatched (Scalar, workspace)", "moe_combine",
                           "swiglu_experts_forward", "swiglu_experts_forward_sigmoid_grouped (Auto)",
                           "swiglu_experts_create"};
    for (int i = 0; i < 8; i++) {
        rudnn_routing_plan_t p = NULL;
        rudnn_dispatched_t d = NULL;
        rudnn_swiglu_experts_t x = NULL;
        (void)rudnn_moe_route(rt_queue, &f->a.logits.t, &bad, &p); /* fails, sets the error */
        rudnn_status_t st;
        switch (i) {
        case 0: st = rudnn_moe_route(rt_queue, &f->a.logits.t, &so, &p); break;
        case 1: st = rudnn_moe_route_sigmoid_grouped(rt_queue, &f->a.logits.t, NULL, &go, &p); break;
        case 2: st = rudnn_moe_dispatch(rt_queue, f->a.plan, &f->a.input.t, &d); break;
        case 3:
            st = rudnn_swiglu_experts_forward_dispatched(rt_queue, f->a.ex, f->a.disp, RUDNN_MOE_SCALAR, f->a.ws,
                                                         f->a.ws_bytes, &f->a.eo.t);
            break;
        case 4: st = rudnn_moe_combine(rt_queue, f->a.disp, &f->a.eo.t, &f->a.out.t); break;
        case 5:
            st = rudnn_swiglu_experts_forward(rt_queue, f->a.ex, &f->a.input.t, &f->a.logits.t, &so, &f->a.out.t);
            break;
        case 6:
            st = rudnn_swiglu_experts_forward_sigmoid_grouped(rt_queue, f->a.ex, &f->a.input.t, &f->a.logits.t,
                                                              &f->a.bias.t, &go, RUDNN_MOE_AUTO, &f->a.out.t);
            break;
        default: st = rudnn_swiglu_experts_create(rt_ctx, &f->a.gate.t, &f->a.up.t, &f->a.down.t, &x); break;
        }
        if (st != RUDNN_STATUS_SUCCESS || strcmp(rudnn_last_error(), "") != 0) {
            rt_logf(&f->log, "  %s: valid call after a failed one returned %s, last error \"%s\"\n", what[i],
                    rudnn_status_string(st), rudnn_last_error());
            f->log.failures++;
        }
        rudnn_queue_synchronize(rt_queue);
        rudnn_dispatched_destroy(d);
        rudnn_routing_plan_destroy(p);
        rudnn_swiglu_experts_destroy(x);
    }
    fx_finish(f);
}

/* ---- main ---------------------------------------------------------------------------------------- */

#define TC(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TC(test_route_softmax),    TC(test_route_grouped),         TC(test_dispatch),
        TC(test_experts_create),   TC(test_forward_dispatched),    TC(test_combine),
        TC(test_forward_one_call), TC(test_workspace_and_resolve), TC(test_views),
        TC(test_success_clears_error), TC(test_forward_grouped),
    };
    return rt_run_with_second_context("moe-contract", tests, argc, argv);
}
