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
 * For the SwiGLU experts' training (rudnn_swiglu_experts_training_workspace_size,
 * rudnn_swiglu_experts_forward_dispatched_training, rudnn_swiglu_experts_backward) each set also holds F32
 * weights gate, up [8, 2, 6] and down [8, 6, 2] (E = 8, INTER = 2, H = 6) and the experts made of them, a
 * reserve F32 [8, 4], expert_output, grad_expert_output, grad_rows F32 [8, 6], grad_gate, grad_up F32 [8, 2, 6],
 * grad_down F32 [8, 6, 2] and a workspace of 128 bytes (8 rows * INTER * 8), each with XSLACK spare bytes so
 * that any of these shapes fits at any offset inside another; set a's weights read as F16 make f16 experts, and
 * set a's tokens are also dispatched by a routing over 7 experts and with hidden 7. These buffers and the
 * dispatched tokens' are watched by a second guard (RT_GUARD_MAX is 32). test_experts_offsets routes one token
 * among 64 experts, so that outputs fit in the dispatched expert offsets (which both kernels read).
 * For the router training plan (rudnn_routing_plan_into_training, rudnn_router_training_plan_routing,
 * rudnn_router_training_plan_backward, rudnn_router_training_plan_destroy) the training plans are made of set
 * a's plan with its f32 logits or the f16 logits; each one's routing block (the kept indices, then the
 * recomputed weights) is watched by xguard while it lives. A rejected into_training also leaves *training as
 * it was and no object alive (rudnn/debug.h); a valid training plan agrees bit for bit with the selected
 * router ops on the plan's indices (opencl).
 *
 * Usage: test_moe_train_contract [glob] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/debug.h>
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

#define INTER 2                   /* the experts' intermediate size (reserve and workspace fit in the tokens) */
#define R (T * K)                 /* dispatched rows */
#define WS_BYTES (R * INTER * 8)  /* rudnn_swiglu_experts_training_workspace_size for R rows */
#define XSLACK 1024               /* more than any experts-training tensor (384 bytes) */

#define OPXW "swiglu_experts_training_workspace_size"
#define OPXF "swiglu_experts_forward_dispatched_training"
#define OPXB "swiglu_experts_backward"

#define OPT "routing_plan_into_training"
#define OPTR "router_training_plan_routing"
#define OPTB "router_training_plan_backward"

/* ---- fixture -------------------------------------------------------------------- */

typedef struct set {
    rt_tensor_t logits, idx, w, gw, gl;
    /* combine and dispatch backward: the input x, expert_output, grad_output, grad_expert_output, combine's
     * grad_weights, grad_rows, grad_input */
    rt_tensor_t x, eo, go, ge, cgw, gr, gi;
    rudnn_routing_plan_t plan;
    rudnn_dispatched_t disp;
    /* SwiGLU experts training: the weights, the forward's outputs (reserve: the backward's input too), the
     * backward's grad_expert_output input and outputs, a workspace; the experts of gate, up and down */
    rt_tensor_t gate, up, down, rsv, xeo, xge, xgr, ggate, gup, gdown, ws;
    rudnn_swiglu_experts_t ex;
} set_t;

typedef struct fx {
    set_t a, b; /* b: on the second context */
    rt_tensor_t logits16, gl16, idx_u32, idx_i64;
    rudnn_dispatched_t disp16; /* a's plan, x's bytes read as F16 [4, 6] */
    rudnn_swiglu_experts_t ex16;          /* a's gate, up and down read as F16 */
    rudnn_routing_plan_t plan_e7;         /* a's logits [4, 7]: a routing among 7 experts */
    rudnn_dispatched_t disp_e7, disp_h7;  /* x by plan_e7; x read as [4, 7] by a's plan */
    rt_guard_t guard; /* every buffer, read back around each rejected call */
    rt_guard_t xguard; /* the experts-training buffers and the dispatched tokens' whole buffers */
    rt_log_t log;
    int on_opencl;
} fx_t;

static const int64_t dims_logits[2] = {T, E};
static const int64_t dims_k[2] = {T, K};
static const int64_t dims_rows[2] = {T * K, H}; /* expert_output, grad_expert_output, grad_rows */
static const int64_t dims_tok[2] = {T, H};      /* the input, grad_output, grad_input */
static const int64_t dims_gu[3] = {E, INTER, H};  /* gate, up, grad_gate, grad_up */
static const int64_t dims_down[3] = {E, H, INTER}; /* down, grad_down */
static const int64_t dims_rsv[2] = {R, 2 * INTER};
static const int64_t dims_ws[1] = {WS_BYTES / 4};

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
    rt_tensor_create(&s->gate, RUDNN_F32, 3, dims_gu, 0, XSLACK);
    rt_tensor_create(&s->up, RUDNN_F32, 3, dims_gu, 0, XSLACK);
    rt_tensor_create(&s->down, RUDNN_F32, 3, dims_down, 0, XSLACK);
    rt_tensor_create(&s->rsv, RUDNN_F32, 2, dims_rsv, 0, XSLACK);
    rt_tensor_create(&s->xeo, RUDNN_F32, 2, dims_rows, 0, XSLACK);
    rt_tensor_create(&s->xge, RUDNN_F32, 2, dims_rows, 0, XSLACK);
    rt_tensor_create(&s->xgr, RUDNN_F32, 2, dims_rows, 0, XSLACK);
    rt_tensor_create(&s->ggate, RUDNN_F32, 3, dims_gu, 0, XSLACK);
    rt_tensor_create(&s->gup, RUDNN_F32, 3, dims_gu, 0, XSLACK);
    rt_tensor_create(&s->gdown, RUDNN_F32, 3, dims_down, 0, XSLACK);
    rt_tensor_create(&s->ws, RUDNN_F32, 1, dims_ws, 0, XSLACK);
    rt_tensor_fill_uniform(&s->gate, &rng, -0.5, 0.5);
    rt_tensor_fill_uniform(&s->up, &rng, -0.5, 0.5);
    rt_tensor_fill_uniform(&s->down, &rng, -0.5, 0.5);
    rt_tensor_fill_uniform(&s->rsv, &rng, -2.0, 2.0);
    rt_tensor_fill_uniform(&s->xge, &rng, -1.0, 1.0);
    rt_assert_status(rudnn_swiglu_experts_create(rt_ctx, &s->gate.t, &s->up.t, &s->down.t, &s->ex),
                     RUDNN_STATUS_SUCCESS);
}

/* The experts-training tensors of a set, in one order for free_set and track_set. */
#define XSET_TENSORS(s)                                                                                        \
    {&(s)->gate, &(s)->up, &(s)->down, &(s)->rsv, &(s)->xeo, &(s)->xge, &(s)->xgr, &(s)->ggate, &(s)->gup,     \
     &(s)->gdown, &(s)->ws}

static void free_set(set_t *s)
{
    rudnn_swiglu_experts_destroy(s->ex);
    rudnn_dispatched_destroy(s->disp);
    rudnn_routing_plan_destroy(s->plan);
    rt_tensor_t *all[] = {&s->logits, &s->idx, &s->w, &s->gw, &s->gl, &s->x,  &s->eo,
                          &s->go,     &s->ge,  &s->cgw, &s->gr, &s->gi};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_tensor_destroy(all[i]);
    rt_tensor_t *xall[] = XSET_TENSORS(s);
    for (size_t i = 0; i < sizeof xall / sizeof xall[0]; i++)
        rt_tensor_destroy(xall[i]);
}

static void track_set(fx_t *f, const set_t *s, rudnn_queue_t q)
{
    const rt_tensor_t *all[] = {&s->logits, &s->idx, &s->w, &s->gw, &s->gl, &s->x,  &s->eo,
                                &s->go,     &s->ge,  &s->cgw, &s->gr, &s->gi};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_guard_track(&f->guard, q, all[i], NULL);
    const rt_tensor_t *xall[] = XSET_TENSORS(s);
    for (size_t i = 0; i < sizeof xall / sizeof xall[0]; i++)
        rt_guard_track(&f->xguard, q, xall[i], NULL);
}

/* The dispatched tokens' buffer, up to 4 KiB past their offset (outputs are placed over them). */
static void track_tokens(fx_t *f, rudnn_dispatched_t d, rudnn_queue_t q)
{
    rudnn_tensor_t v;
    rt_assert_status(rudnn_dispatched_tokens(d, &v), RUDNN_STATUS_SUCCESS);
    size_t bytes = rudnn_buffer_size(v.buffer);
    if (bytes > v.offset + 4096)
        bytes = v.offset + 4096;
    rt_guard_track_buffer(&f->xguard, q, v.buffer, bytes, NULL);
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
    const rudnn_tensor_t g16 = rt_tensor_desc(&f->a.gate, RUDNN_F16, 3, dims_gu, 0),
                         u16 = rt_tensor_desc(&f->a.up, RUDNN_F16, 3, dims_gu, 0),
                         d16 = rt_tensor_desc(&f->a.down, RUDNN_F16, 3, dims_down, 0);
    rt_assert_status(rudnn_swiglu_experts_create(rt_ctx, &g16, &u16, &d16, &f->ex16), RUDNN_STATUS_SUCCESS);
    static const int64_t dims_l7[2] = {T, E - 1}, dims_x7[2] = {T, H + 1};
    const rudnn_tensor_t l7 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, dims_l7, 0);
    const rudnn_tensor_t x7 = rt_tensor_desc(&f->a.x, RUDNN_F32, 2, dims_x7, 0);
    const rudnn_routing_options_t ro = {K, 1};
    rt_assert_status(rudnn_moe_route(rt_queue, &l7, &ro, &f->plan_e7), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_moe_dispatch(rt_queue, f->plan_e7, &f->a.x.t, &f->disp_e7), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_moe_dispatch(rt_queue, f->a.plan, &x7, &f->disp_h7), RUDNN_STATUS_SUCCESS);
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
    const rudnn_dispatched_t more[4] = {f->a.disp, f->disp16, f->disp_e7, f->disp_h7};
    for (int i = 0; i < 4; i++)
        track_tokens(f, more[i], rt_queue);
    track_tokens(f, f->b.disp, rt_queue2);
    return 0;
}

static int fx_teardown(void **state)
{
    fx_t *f = *state;
    if (!f)
        return 0;
    rt_guard_free(&f->guard);
    rt_guard_free(&f->xguard);
    rudnn_swiglu_experts_destroy(f->ex16);
    rudnn_dispatched_destroy(f->disp_h7);
    rudnn_dispatched_destroy(f->disp_e7);
    rudnn_routing_plan_destroy(f->plan_e7);
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
    const int changed = rt_guard_changed(&f->guard) + rt_guard_changed(&f->xguard);
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
        rt_guard_begin(&(f)->xguard);                                                                          \
        rudnn_status_t st_ = (call);                                                                           \
        check_reject(f, st_, want, op, n1, n2, what);                                                          \
    } while (0)

/* The same, the needles as whole words. */
#define REJECT_WORDS(f, want, op, n1, n2, what, call)                                                          \
    do {                                                                                                       \
        rt_guard_begin(&(f)->guard);                                                                           \
        rt_guard_begin(&(f)->xguard);                                                                          \
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

/* ---- SwiGLU experts: training ------------------------------------------------------------------ */

/* The arguments of forward_dispatched_training and backward, starting from set a (f32 experts, Scalar, no
 * workspace); each test changes one member. rsv is the forward's output and the backward's input. */
typedef struct xargs {
    rudnn_queue_t q;
    rudnn_swiglu_experts_t x;
    rudnn_dispatched_t d;
    rudnn_moe_strategy_t strategy;
    rudnn_buffer_t ws;
    size_t wsb;
    const rudnn_tensor_t *rsv, *eo, *ge, *gr, *gg, *gu, *gd;
} xargs_t;

static xargs_t xargs_ok(fx_t *f)
{
    xargs_t a = {rt_queue,    f->a.ex,     f->a.disp,   RUDNN_MOE_SCALAR, NULL,          0,           &f->a.rsv.t,
                 &f->a.xeo.t, &f->a.xge.t, &f->a.xgr.t, &f->a.ggate.t,    &f->a.gup.t, &f->a.gdown.t};
    return a;
}

/* f16 experts (a's weights read as f16) on the f16 dispatched tokens: expert_output, grad_expert_output and
 * grad_rows in f16 (views of the f32 ones' buffers), reserve and the weight gradients f32. */
typedef struct xviews16 {
    rudnn_tensor_t eo, ge, gr;
} xviews16_t;

static xargs_t xargs_f16(fx_t *f, xviews16_t *v)
{
    v->eo = rt_tensor_desc(&f->a.xeo, RUDNN_F16, 2, dims_rows, 0);
    v->ge = rt_tensor_desc(&f->a.xge, RUDNN_F16, 2, dims_rows, 0);
    v->gr = rt_tensor_desc(&f->a.xgr, RUDNN_F16, 2, dims_rows, 0);
    xargs_t a = xargs_ok(f);
    a.x = f->ex16, a.d = f->disp16, a.eo = &v->eo, a.ge = &v->ge, a.gr = &v->gr;
    return a;
}

static rudnn_status_t call_xf(const xargs_t *a)
{
    return rudnn_swiglu_experts_forward_dispatched_training(a->q, a->x, a->d, a->strategy, a->ws, a->wsb, a->rsv,
                                                            a->eo);
}

static rudnn_status_t call_xb(const xargs_t *a)
{
    return rudnn_swiglu_experts_backward(a->q, a->x, a->d, a->rsv, a->ge, a->strategy, a->ws, a->wsb, a->gr, a->gg,
                                         a->gu, a->gd);
}

static void reject_xf(fx_t *f, xargs_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    REJECT_WORDS(f, want, OPXF, n1, n2, what, call_xf(&a));
}

static void reject_xb(fx_t *f, xargs_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    REJECT_WORDS(f, want, OPXB, n1, n2, what, call_xb(&a));
}

static void reject_xfb(fx_t *f, xargs_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    reject_xf(f, a, want, n1, n2, what);
    reject_xb(f, a, want, n1, n2, what);
}

/* The tensor arguments (reserve: both ops; expert_output: the forward's; the others: the backward's), then
 * the weights (only ever overlapped). */
static const char *const xnames[10] = {"reserve",   "expert_output", "grad_expert_output", "grad_rows", "grad_gate",
                                       "grad_up",   "grad_down",     "gate",               "up",        "down"};

static const rudnn_tensor_t **xarg(xargs_t *a, const char *name)
{
    const rudnn_tensor_t **all[7] = {&a->rsv, &a->eo, &a->ge, &a->gr, &a->gg, &a->gu, &a->gd};
    for (int i = 0; i < 7; i++)
        if (!strcmp(name, xnames[i]))
            return all[i];
    return NULL;
}

static const rt_tensor_t *xset_arg(const set_t *s, const char *name)
{
    const rt_tensor_t *all[10] = {&s->rsv, &s->xeo, &s->xge, &s->xgr, &s->ggate, &s->gup, &s->gdown,
                                  &s->gate, &s->up, &s->down};
    for (int i = 0; i < 10; i++)
        if (!strcmp(name, xnames[i]))
            return all[i];
    return NULL;
}

/* The op that takes arg name: 'f' forward, 'b' backward, '2' both (reserve). */
static char xop_of(const char *name)
{
    return !strcmp(name, "reserve") ? '2' : !strcmp(name, "expert_output") ? 'f' : 'b';
}

/* Rejects with a changed, by the op(s) that take arg name. */
static void reject_xarg(fx_t *f, xargs_t a, const char *name, rudnn_status_t want, const char *n2, const char *what)
{
    const char op = xop_of(name);
    if (op != 'b')
        reject_xf(f, a, want, name, n2, what);
    if (op != 'f')
        reject_xb(f, a, want, name, n2, what);
}

static void test_experts_null(void **state)
{
    fx_t *f = *state;
    xargs_t a = xargs_ok(f);
    a.q = NULL;
    reject_xfb(f, a, RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue");
    a = xargs_ok(f);
    a.x = NULL;
    reject_xfb(f, a, RUDNN_STATUS_BAD_PARAM, "experts", NULL, "NULL experts");
    a = xargs_ok(f);
    a.d = NULL;
    reject_xfb(f, a, RUDNN_STATUS_BAD_PARAM, "dispatched", NULL, "NULL dispatched");
    for (int i = 0; i < 7; i++) {
        char what[64];
        snprintf(what, sizeof what, "NULL %s", xnames[i]);
        a = xargs_ok(f);
        *xarg(&a, xnames[i]) = NULL;
        reject_xarg(f, a, xnames[i], RUDNN_STATUS_BAD_PARAM, NULL, what);
        rudnn_tensor_t nobuf = xset_arg(&f->a, xnames[i])->t;
        nobuf.buffer = NULL;
        snprintf(what, sizeof what, "%s without a buffer", xnames[i]);
        a = xargs_ok(f);
        *xarg(&a, xnames[i]) = &nobuf;
        reject_xarg(f, a, xnames[i], RUDNN_STATUS_BAD_PARAM, NULL, what);
    }
    fx_finish(f);
}

static void test_experts_context(void **state)
{
    fx_t *f = *state;
    xargs_t a = xargs_ok(f);
    a.x = f->b.ex; /* every tensor on the queue's context */
    reject_xfb(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "experts", NULL, "experts on another context");
    a = xargs_ok(f);
    a.d = f->b.disp;
    reject_xfb(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "dispatched", NULL, "dispatched on another context");
    for (int i = 0; i < 7; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s on another context", xnames[i]);
        a = xargs_ok(f);
        *xarg(&a, xnames[i]) = &xset_arg(&f->b, xnames[i])->t;
        reject_xarg(f, a, xnames[i], RUDNN_STATUS_DEVICE_MISMATCH, NULL, what);
    }
    a = xargs_ok(f);
    a.ws = f->b.ws.buffer, a.wsb = WS_BYTES;
    reject_xfb(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "workspace", NULL, "workspace on another context");
    fx_finish(f);
}

/* The dispatched tokens against the experts: the number of experts routed among, hidden, dtype. */
static void test_experts_dispatched(void **state)
{
    fx_t *f = *state;
    xargs_t a = xargs_ok(f);
    a.d = f->disp_e7;
    reject_xfb(f, a, RUDNN_STATUS_BAD_SHAPE, "experts", "7", "dispatched routed among 7 experts, weights of 8");
    /* hidden 7: the rows tensors shaped as the dispatched tokens, so only the weights disagree */
    static const int64_t rows_h7[2] = {R, H + 1};
    const rudnn_tensor_t eo7 = rt_tensor_desc(&f->a.xeo, RUDNN_F32, 2, rows_h7, 0),
                         ge7 = rt_tensor_desc(&f->a.xge, RUDNN_F32, 2, rows_h7, 0),
                         gr7 = rt_tensor_desc(&f->a.xgr, RUDNN_F32, 2, rows_h7, 0);
    a = xargs_ok(f);
    a.d = f->disp_h7, a.eo = &eo7, a.ge = &ge7, a.gr = &gr7;
    reject_xfb(f, a, RUDNN_STATUS_BAD_SHAPE, "hidden", "7", "dispatched hidden 7, weights hidden 6");
    a = xargs_ok(f);
    a.d = f->disp16;
    reject_xfb(f, a, RUDNN_STATUS_BAD_DTYPE, "dispatched", "f16", "f16 dispatched tokens, f32 weights");
    xviews16_t v;
    a = xargs_f16(f, &v);
    a.d = f->a.disp;
    reject_xfb(f, a, RUDNN_STATUS_BAD_DTYPE, "dispatched", "f32", "f32 dispatched tokens, f16 weights");
    fx_finish(f);
}

static void test_experts_dtype(void **state)
{
    fx_t *f = *state;
    static const rudnn_dtype_t bad[] = {RUDNN_F16, RUDNN_BF16, RUDNN_I32};
    for (int i = 0; i < 7; i++) {
        const rt_tensor_t *base = xset_arg(&f->a, xnames[i]);
        for (size_t d = 0; d < sizeof bad / sizeof bad[0]; d++) {
            rudnn_tensor_t v = rt_tensor_desc(base, bad[d], base->t.rank, base->t.dims, 0);
            char what[96];
            snprintf(what, sizeof what, "%s %s with f32 weights", xnames[i], rudnn_dtype_name(bad[d]));
            xargs_t a = xargs_ok(f);
            *xarg(&a, xnames[i]) = &v;
            reject_xarg(f, a, xnames[i], RUDNN_STATUS_BAD_DTYPE, rudnn_dtype_name(bad[d]), what);
        }
    }
    /* f16 weights: reserve and the weight gradients stay f32, the rows tensors follow the weights */
    for (int i = 0; i < 7; i++) {
        xviews16_t v16;
        xargs_t a = xargs_f16(f, &v16);
        const rt_tensor_t *base = xset_arg(&f->a, xnames[i]);
        const int rows = !strcmp(xnames[i], "expert_output") || !strcmp(xnames[i], "grad_expert_output") ||
                         !strcmp(xnames[i], "grad_rows");
        rudnn_tensor_t v = rt_tensor_desc(base, rows ? RUDNN_F32 : RUDNN_F16, base->t.rank, base->t.dims, 0);
        *xarg(&a, xnames[i]) = &v;
        char what[96];
        snprintf(what, sizeof what, "%s %s with f16 weights", xnames[i], rows ? "f32" : "f16");
        reject_xarg(f, a, xnames[i], RUDNN_STATUS_BAD_DTYPE, rows ? "f32" : "f16", what);
    }
    fx_finish(f);
}

static void test_experts_shapes(void **state)
{
    fx_t *f = *state;
    const struct {
        const char *arg;
        int rank;
        int64_t dims[4];
    } shapes[] = {
        {"reserve", 2, {R, 2 * INTER + 1}},       {"reserve", 2, {R, 2 * INTER - 1}},
        {"reserve", 2, {R, INTER}},               {"reserve", 2, {R + 1, 2 * INTER}},
        {"reserve", 2, {R - 1, 2 * INTER}},       {"reserve", 1, {R * 2 * INTER}},
        {"reserve", 3, {R, 2, INTER}},            {"expert_output", 2, {R + 1, H}},
        {"expert_output", 2, {R - 1, H}},         {"expert_output", 2, {R, H + 1}},
        {"expert_output", 2, {R, H - 1}},         {"expert_output", 2, {T, H}},
        {"expert_output", 1, {R * H}},            {"expert_output", 3, {R, H, 1}},
        {"grad_expert_output", 2, {R + 1, H}},    {"grad_expert_output", 2, {R, H - 1}},
        {"grad_expert_output", 2, {T, H}},        {"grad_expert_output", 3, {R, H, 1}},
        {"grad_rows", 2, {R + 1, H}},             {"grad_rows", 2, {R - 1, H}},
        {"grad_rows", 2, {R, H + 1}},             {"grad_rows", 1, {R * H}},
        {"grad_gate", 3, {E, INTER, H + 1}},      {"grad_gate", 3, {E, INTER + 1, H}},
        {"grad_gate", 3, {E - 1, INTER, H}},      {"grad_gate", 3, {E + 1, INTER, H}},
        {"grad_gate", 3, {E, H, INTER}},          {"grad_gate", 2, {E * INTER, H}},
        {"grad_gate", 4, {E, INTER, H, 1}},       {"grad_up", 3, {E, INTER, H - 1}},
        {"grad_up", 3, {E, INTER - 1, H}},        {"grad_up", 3, {E + 1, INTER, H}},
        {"grad_up", 3, {E, H, INTER}},            {"grad_up", 2, {E * INTER, H}},
        {"grad_down", 3, {E, H, INTER + 1}},      {"grad_down", 3, {E, H + 1, INTER}},
        {"grad_down", 3, {E - 1, H, INTER}},      {"grad_down", 3, {E, INTER, H}},
        {"grad_down", 2, {E * H, INTER}},         {"grad_down", 4, {E, H, INTER, 1}},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        rudnn_tensor_t v = rt_tensor_desc(xset_arg(&f->a, shapes[i].arg), RUDNN_F32, shapes[i].rank, shapes[i].dims,
                                          0);
        char what[96], s[64];
        snprintf(what, sizeof what, "%s %s", shapes[i].arg, rt_dims_str(shapes[i].rank, shapes[i].dims, s, sizeof s));
        xargs_t a = xargs_ok(f);
        *xarg(&a, shapes[i].arg) = &v;
        reject_xarg(f, a, shapes[i].arg, RUDNN_STATUS_BAD_SHAPE, NULL, what);
    }
    /* padded outer dim (the last dim contiguous): valid views, but the ops take contiguous tensors */
    for (int i = 0; i < 7; i++) {
        const rt_tensor_t *base = xset_arg(&f->a, xnames[i]);
        rudnn_tensor_t pad = rt_tensor_desc(base, RUDNN_F32, base->t.rank, base->t.dims, 0);
        pad.strides[0] += 1;
        char what[96];
        snprintf(what, sizeof what, "%s with a padded first dim", xnames[i]);
        xargs_t a = xargs_ok(f);
        *xarg(&a, xnames[i]) = &pad;
        reject_xarg(f, a, xnames[i], RUDNN_STATUS_NOT_SUPPORTED, NULL, what);
    }
    fx_finish(f);
}

static void test_experts_strategy(void **state)
{
    fx_t *f = *state;
    static const int bad[] = {3, -1, 7};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        xargs_t a = xargs_ok(f);
        a.strategy = (rudnn_moe_strategy_t)bad[i];
        char what[64];
        snprintf(what, sizeof what, "strategy = %d", bad[i]);
        reject_xfb(f, a, RUDNN_STATUS_BAD_PARAM, "strategy", NULL, what);
    }
    /* no backend has matrix-unit training kernels: TensorCore is NOT_SUPPORTED, with 16-bit weights too */
    xargs_t a = xargs_ok(f);
    a.strategy = RUDNN_MOE_TENSOR_CORE;
    reject_xfb(f, a, RUDNN_STATUS_NOT_SUPPORTED, "TensorCore", NULL, "TensorCore with f32 weights");
    xviews16_t v;
    a = xargs_f16(f, &v);
    a.strategy = RUDNN_MOE_TENSOR_CORE;
    reject_xfb(f, a, RUDNN_STATUS_NOT_SUPPORTED, "TensorCore", NULL, "TensorCore with f16 weights");
    fx_finish(f);
}

static void test_experts_workspace(void **state)
{
    fx_t *f = *state;
    xargs_t a = xargs_ok(f);
    a.ws = f->a.ws.buffer, a.wsb = WS_BYTES - 1;
    reject_xfb(f, a, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", NULL, "workspace one byte too small");
    a.wsb = 0;
    reject_xfb(f, a, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", NULL, "workspace of 0 bytes");
    a.wsb = rudnn_buffer_size(f->a.ws.buffer) + 1;
    reject_xfb(f, a, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", NULL, "workspace_bytes larger than the buffer");
    /* a workspace written while the inputs are read: over the weights and the dispatched tokens (both ops), the
     * backward's reserve and grad_expert_output (the outputs inside it: test_experts_overlap) */
    static const char *const ins[5] = {"gate", "up", "down", "reserve", "grad_expert_output"};
    for (int i = 0; i < 5; i++) {
        char what[96];
        snprintf(what, sizeof what, "workspace over %s", ins[i]);
        a = xargs_ok(f);
        a.ws = xset_arg(&f->a, ins[i])->buffer, a.wsb = WS_BYTES;
        if (i < 3)
            reject_xfb(f, a, RUDNN_STATUS_BAD_PARAM, ins[i], "workspace", what);
        else
            reject_xb(f, a, RUDNN_STATUS_BAD_PARAM, ins[i], "workspace", what);
    }
    rudnn_tensor_t tok;
    rt_assert_status(rudnn_dispatched_tokens(f->a.disp, &tok), RUDNN_STATUS_SUCCESS);
    const size_t tok_wsb = tok.offset + 4 > WS_BYTES ? tok.offset + 4 : WS_BYTES;
    if (tok_wsb <= rudnn_buffer_size(tok.buffer)) {
        a = xargs_ok(f);
        a.ws = tok.buffer, a.wsb = tok_wsb;
        reject_xfb(f, a, RUDNN_STATUS_BAD_PARAM, "dispatched", "workspace", "workspace over the dispatched tokens");
    } else {
        printf("note: the dispatched tokens' buffer is too small for a workspace over them: not checked\n");
    }
    fx_finish(f);
}

/* Each output over each other output, over the inputs and over the weights (at the other's offset, 4 bytes
 * into it, on its last element); in place; over the dispatched tokens; inside the caller's workspace. */
static void test_experts_overlap(void **state)
{
    fx_t *f = *state;
    const struct {
        const char *out, *in;
    } pairs[] = {
        {"reserve", "expert_output"},  {"expert_output", "reserve"},   {"reserve", "gate"},
        {"reserve", "up"},             {"reserve", "down"},            {"expert_output", "gate"},
        {"expert_output", "up"},       {"expert_output", "down"},      {"grad_rows", "reserve"},
        {"grad_rows", "grad_expert_output"}, {"grad_rows", "grad_gate"}, {"grad_rows", "grad_up"},
        {"grad_rows", "grad_down"},    {"grad_gate", "reserve"},       {"grad_gate", "grad_expert_output"},
        {"grad_gate", "grad_rows"},    {"grad_gate", "grad_up"},       {"grad_gate", "grad_down"},
        {"grad_up", "reserve"},        {"grad_up", "grad_expert_output"}, {"grad_up", "grad_rows"},
        {"grad_up", "grad_gate"},      {"grad_up", "grad_down"},       {"grad_down", "reserve"},
        {"grad_down", "grad_expert_output"}, {"grad_down", "grad_rows"}, {"grad_down", "grad_gate"},
        {"grad_down", "grad_up"},      {"grad_rows", "gate"},          {"grad_rows", "up"},
        {"grad_rows", "down"},         {"grad_gate", "gate"},          {"grad_gate", "up"},
        {"grad_gate", "down"},         {"grad_up", "gate"},            {"grad_up", "up"},
        {"grad_up", "down"},           {"grad_down", "gate"},          {"grad_down", "up"},
        {"grad_down", "down"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const rt_tensor_t *out = xset_arg(&f->a, pairs[i].out), *in = xset_arg(&f->a, pairs[i].in);
        const size_t in_bytes = rudnn_tensor_bytes(&in->t);
        const size_t offsets[3] = {0, 4, in_bytes - 4}; /* every tensor here starts at byte 0 */
        for (int v = 0; v < 3; v++) {
            rudnn_tensor_t o = rt_tensor_desc(in, RUDNN_F32, out->t.rank, out->t.dims, offsets[v]);
            char what[128];
            snprintf(what, sizeof what, "%s %s %s", pairs[i].out,
                     v == 0 ? "at the offset of" : v == 1 ? "4 bytes into" : "on the last element of", pairs[i].in);
            xargs_t a = xargs_ok(f);
            *xarg(&a, pairs[i].out) = &o;
            if (xop_of(pairs[i].out) != 'b') /* reserve: the forward writes it */
                reject_xf(f, a, RUDNN_STATUS_BAD_PARAM, pairs[i].out, pairs[i].in, what);
            else
                reject_xb(f, a, RUDNN_STATUS_BAD_PARAM, pairs[i].out, pairs[i].in, what);
        }
    }
    /* in place: grad_rows as grad_expert_output's own descriptor */
    xargs_t a = xargs_ok(f);
    a.gr = &f->a.xge.t;
    reject_xb(f, a, RUDNN_STATUS_BAD_PARAM, "grad_rows", "grad_expert_output", "grad_rows in place");
    /* over the dispatched tokens: the view rudnn_dispatched_tokens gives (expert_output and grad_rows exactly it),
     * reserve at its offset (the tokens' buffer is theirs alone: the weight gradients do not fit in it) */
    rudnn_tensor_t tok;
    rt_assert_status(rudnn_dispatched_tokens(f->a.disp, &tok), RUDNN_STATUS_SUCCESS);
    static const char *const outs[6] = {"reserve", "expert_output", "grad_rows", "grad_gate", "grad_up", "grad_down"};
    for (int i = 0; i < 3; i++) {
        const rt_tensor_t *out = xset_arg(&f->a, outs[i]);
        rudnn_tensor_t o;
        if (tok.offset + rudnn_tensor_bytes(&out->t) > rudnn_buffer_size(tok.buffer)) {
            printf("note: %s does not fit in the dispatched tokens' buffer at their offset: not checked\n", outs[i]);
            continue;
        }
        rt_assert_status(rudnn_tensor_init(&o, tok.buffer, tok.offset, RUDNN_F32, out->t.rank, out->t.dims),
                         RUDNN_STATUS_SUCCESS);
        char what[96];
        snprintf(what, sizeof what, "%s over the dispatched tokens", outs[i]);
        a = xargs_ok(f);
        *xarg(&a, outs[i]) = &o;
        if (xop_of(outs[i]) != 'b')
            reject_xf(f, a, RUDNN_STATUS_BAD_PARAM, outs[i], "dispatched", what);
        else
            reject_xb(f, a, RUDNN_STATUS_BAD_PARAM, outs[i], "dispatched", what);
    }
    /* inside the first workspace_bytes of the caller's workspace: the workspace is the output's buffer */
    for (int i = 0; i < 6; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s inside the workspace", outs[i]);
        a = xargs_ok(f);
        a.ws = xset_arg(&f->a, outs[i])->buffer, a.wsb = WS_BYTES;
        if (xop_of(outs[i]) != 'b')
            reject_xf(f, a, RUDNN_STATUS_BAD_PARAM, outs[i], "workspace", what);
        else
            reject_xb(f, a, RUDNN_STATUS_BAD_PARAM, outs[i], "workspace", what);
    }
    fx_finish(f);
}

static void test_experts_workspace_size(void **state)
{
    fx_t *f = *state;
    rudnn_swiglu_experts_t X = f->a.ex;
    size_t bytes = 7;
    REJECT_WORDS(f, RUDNN_STATUS_BAD_PARAM, OPXW, "experts", NULL, "NULL experts",
                 rudnn_swiglu_experts_training_workspace_size(NULL, R, &bytes));
    REJECT_WORDS(f, RUDNN_STATUS_BAD_PARAM, OPXW, "bytes", NULL, "NULL bytes",
                 rudnn_swiglu_experts_training_workspace_size(X, R, NULL));
    REJECT_WORDS(f, RUDNN_STATUS_BAD_PARAM, OPXW, "rows", NULL, "rows -1",
                 rudnn_swiglu_experts_training_workspace_size(X, -1, &bytes));
    REJECT_WORDS(f, RUDNN_STATUS_BAD_PARAM, OPXW, "rows", NULL, "rows INT64_MIN",
                 rudnn_swiglu_experts_training_workspace_size(X, INT64_MIN, &bytes));
    /* rows * inter * 8 past SIZE_MAX: a status, not a wrapped size (BAD_PARAM here, where
     * rudnn_swiglu_experts_workspace_size says NOT_SUPPORTED) */
    const int64_t first_over = (int64_t)(SIZE_MAX / (INTER * 8)) + 1;
    REJECT_WORDS(f, RUDNN_STATUS_BAD_PARAM, OPXW, "rows", NULL, "rows * inter * 8 = SIZE_MAX + 1",
                 rudnn_swiglu_experts_training_workspace_size(X, first_over, &bytes));
    REJECT_WORDS(f, RUDNN_STATUS_BAD_PARAM, OPXW, "rows", NULL, "rows 2^62",
                 rudnn_swiglu_experts_training_workspace_size(X, (int64_t)1 << 62, &bytes));
    REJECT_WORDS(f, RUDNN_STATUS_BAD_PARAM, OPXW, "rows", NULL, "rows INT64_MAX",
                 rudnn_swiglu_experts_training_workspace_size(X, INT64_MAX, &bytes));
    if (bytes != 7) {
        rt_logf(&f->log, "  %s: a rejected query wrote bytes (%zu)\n", OPXW, bytes);
        f->log.failures++;
    }
    /* valid: rows * inter * 8 whatever the weights' dtype, up to the largest that fits */
    const struct {
        rudnn_swiglu_experts_t x;
        int64_t rows;
    } ok[] = {{X, 0}, {X, 1}, {X, R}, {X, 100}, {f->ex16, R}, {f->ex16, 0}, {X, first_over - 1}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        bytes = 7;
        (void)rudnn_swiglu_experts_training_workspace_size(X, -1, &bytes); /* sets the error */
        const rudnn_status_t st = rudnn_swiglu_experts_training_workspace_size(ok[i].x, ok[i].rows, &bytes);
        const size_t want = (size_t)ok[i].rows * INTER * 8;
        if (st != RUDNN_STATUS_SUCCESS || bytes != want || strcmp(rudnn_last_error(), "") != 0) {
            rt_logf(&f->log, "  %s(%s experts, rows %lld): returned %s, %zu bytes (expected %zu), last error \"%s\"\n",
                    OPXW, ok[i].x == X ? "f32" : "f16", (long long)ok[i].rows, rudnn_status_string(st), bytes, want,
                    rudnn_last_error());
            f->log.failures++;
        }
    }
    fx_finish(f);
}

/* The dispatched object's expert offsets (rudnn_dispatched_offsets), which both kernels read to find each
 * expert's rows, are an input like the tokens: an output or the workspace over them is BAD_PARAM. With 64
 * experts and 2 rows the offsets (65 U32) hold reserve, expert_output and grad_rows; its own tensors otherwise. */
static void test_experts_offsets(void **state)
{
    fx_t *f = *state;
    enum { E64 = 64 };
    static const int64_t dl[2] = {1, E64}, dx[2] = {1, H}, dgu[3] = {E64, INTER, H}, ddown[3] = {E64, H, INTER},
                         drows[2] = {K, H}, drsv[2] = {K, 2 * INTER};
    rt_tensor_t logits, gate, up, down, gg, gu, gd;
    rt_tensor_create(&logits, RUDNN_F32, 2, dl, 0, 0);
    rt_tensor_create(&gate, RUDNN_F32, 3, dgu, 0, 0);
    rt_tensor_create(&up, RUDNN_F32, 3, dgu, 0, 0);
    rt_tensor_create(&down, RUDNN_F32, 3, ddown, 0, 0);
    rt_tensor_create(&gg, RUDNN_F32, 3, dgu, 0, 0);
    rt_tensor_create(&gu, RUDNN_F32, 3, dgu, 0, 0);
    rt_tensor_create(&gd, RUDNN_F32, 3, ddown, 0, 0);
    rt_rng_t rng;
    rt_rng_seed(&rng, 64);
    rt_tensor_fill_uniform(&logits, &rng, -3.0, 3.0);
    rt_tensor_fill_uniform(&gate, &rng, -0.5, 0.5);
    rt_tensor_fill_uniform(&up, &rng, -0.5, 0.5);
    rt_tensor_fill_uniform(&down, &rng, -0.5, 0.5);
    const rudnn_tensor_t x1 = rt_tensor_desc(&f->a.x, RUDNN_F32, 2, dx, 0);
    const rudnn_routing_options_t ro = {K, 1};
    rudnn_routing_plan_t plan = NULL;
    rudnn_dispatched_t disp = NULL;
    rudnn_swiglu_experts_t ex = NULL;
    rt_assert_status(rudnn_moe_route(rt_queue, &logits.t, &ro, &plan), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_moe_dispatch(rt_queue, plan, &x1, &disp), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_swiglu_experts_create(rt_ctx, &gate.t, &up.t, &down.t, &ex), RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t off;
    rt_assert_status(rudnn_dispatched_offsets(disp, &off), RUDNN_STATUS_SUCCESS);
    rt_guard_track_buffer(&f->xguard, rt_queue, off.buffer, rudnn_buffer_size(off.buffer), NULL);
    const rudnn_tensor_t rsv = rt_tensor_desc(&f->a.rsv, RUDNN_F32, 2, drsv, 0),
                         eo = rt_tensor_desc(&f->a.xeo, RUDNN_F32, 2, drows, 0),
                         ge = rt_tensor_desc(&f->a.xge, RUDNN_F32, 2, drows, 0),
                         gr = rt_tensor_desc(&f->a.xgr, RUDNN_F32, 2, drows, 0);
    xargs_t a = {rt_queue, ex, disp, RUDNN_MOE_SCALAR, NULL, 0, &rsv, &eo, &ge, &gr, &gg.t, &gu.t, &gd.t};
    rudnn_tensor_t o_rsv, o_rows;
    rt_assert_status(rudnn_tensor_init(&o_rsv, off.buffer, off.offset, RUDNN_F32, 2, drsv), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_init(&o_rows, off.buffer, off.offset, RUDNN_F32, 2, drows), RUDNN_STATUS_SUCCESS);
    uint32_t offsets[E64 + 1];
    rt_assert_status(rudnn_tensor_read(rt_queue, &off, offsets, sizeof offsets), RUDNN_STATUS_SUCCESS);
    const int failures = f->log.failures;
    for (int c = 0; c < 5; c++) {
        /* the backward only once the forward's cases are rejected: when accepted, its kernels read offsets
         * they have overwritten, out of bounds (a crash in a device thread on PoCL) */
        if (c == 3 && f->log.failures != failures) {
            rt_logf(&f->log, "  %s: the cases over the dispatched offsets not tried: the forward's were accepted\n",
                    OPXB);
            break;
        }
        xargs_t b = a;
        const char *arg = c == 0 ? "reserve" : c == 1 ? "expert_output" : c == 4 ? "grad_rows" : "workspace";
        if (c == 0)
            b.rsv = &o_rsv;
        else if (c == 1)
            b.eo = &o_rows;
        else if (c == 4)
            b.gr = &o_rows;
        else
            b.ws = off.buffer, b.wsb = K * INTER * 8;
        char what[96];
        snprintf(what, sizeof what, "%s over the dispatched offsets", arg);
        if (c < 3)
            reject_xf(f, b, RUDNN_STATUS_BAD_PARAM, arg, NULL, what);
        else
            reject_xb(f, b, RUDNN_STATUS_BAD_PARAM, arg, NULL, what);
        /* an accepted call's damage undone, so that the next case starts from valid offsets */
        rt_assert_status(rudnn_tensor_write(rt_queue, &off, offsets, sizeof offsets), RUDNN_STATUS_SUCCESS);
    }
    rudnn_queue_synchronize(rt_queue);
    rudnn_swiglu_experts_destroy(ex);
    rudnn_dispatched_destroy(disp);
    rudnn_routing_plan_destroy(plan);
    rt_tensor_t *all[] = {&logits, &gate, &up, &down, &gg, &gu, &gd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_tensor_destroy(all[i]);
    fx_finish(f);
}

/* 1 when a valid call's status is acceptable: SUCCESS with an empty error, or on a backend other than opencl
 * NOT_SUPPORTED naming the op; logs otherwise. */
static int valid_ok(fx_t *f, rudnn_status_t st, const char *op, const char *what)
{
    const int unsupported_ok = !f->on_opencl && st == RUDNN_STATUS_NOT_SUPPORTED && strstr(rudnn_last_error(), op);
    if (unsupported_ok || (st == RUDNN_STATUS_SUCCESS && strcmp(rudnn_last_error(), "") == 0))
        return 1;
    rt_logf(&f->log, "  %s, %s: returned %s, last error \"%s\"\n", op, what, rudnn_status_string(st),
            rudnn_last_error());
    f->log.failures++;
    return 0;
}

/* Checks that every element of the F32 weight gradient t was written (no poison left) and that the experts
 * without rows (counts[e] == 0; counts NULL: every expert) hold zeros. */
static void check_grad_written(fx_t *f, const rt_tensor_t *t, const uint32_t *counts, const char *name,
                               const char *what)
{
    const size_t n = (size_t)rudnn_tensor_numel(&t->t), per = n / E;
    uint32_t *bits = rt_xmalloc(n * sizeof *bits);
    rt_assert_status(rudnn_tensor_read(rt_queue, &t->t, bits, n * sizeof *bits), RUDNN_STATUS_SUCCESS);
    const uint32_t poison = rt_poison_bits(RUDNN_F32);
    size_t poisoned = 0, nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, &bits[i], 4);
        poisoned += bits[i] == poison;
        nonzero += bits[i] != poison && (!counts || counts[i / per] == 0) && v != 0.0f;
    }
    if (poisoned || nonzero) {
        rt_logf(&f->log, "  %s, %s: %s has %zu element(s) not written and %zu nonzero for an expert without rows\n",
                OPXB, what, name, poisoned, nonzero);
        f->log.failures++;
    }
    free(bits);
}

/* No rows: checked like any other call; the valid forward writes nothing, the valid backward writes zero
 * weight gradients (every expert received no row) and nothing else. */
static void test_experts_empty(void **state)
{
    fx_t *f = *state;
    static const int64_t t0e[2] = {0, E}, t0h[2] = {0, H}, r0[2] = {0, 2 * INTER}, r0bad[2] = {0, 2 * INTER + 1},
                         h0bad[2] = {0, H + 1}, gbad[3] = {E, INTER, H + 1};
    rudnn_tensor_t l0 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, t0e, 0);
    rudnn_tensor_t x0 = rt_tensor_desc(&f->a.x, RUDNN_F32, 2, t0h, 0);
    rudnn_routing_plan_t plan = NULL;
    rudnn_dispatched_t disp = NULL;
    const rudnn_routing_options_t ro = {K, 1};
    rt_assert_status(rudnn_moe_route(rt_queue, &l0, &ro, &plan), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_moe_dispatch(rt_queue, plan, &x0, &disp), RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t rsv = rt_tensor_desc(&f->a.rsv, RUDNN_F32, 2, r0, 0);
    rudnn_tensor_t eo = rt_tensor_desc(&f->a.xeo, RUDNN_F32, 2, t0h, 0);
    rudnn_tensor_t ge = rt_tensor_desc(&f->a.xge, RUDNN_F32, 2, t0h, 0);
    rudnn_tensor_t gr = rt_tensor_desc(&f->a.xgr, RUDNN_F32, 2, t0h, 0);
    rudnn_tensor_t rsv_bad = rt_tensor_desc(&f->a.rsv, RUDNN_F32, 2, r0bad, 0);
    rudnn_tensor_t eo_bad = rt_tensor_desc(&f->a.xeo, RUDNN_F32, 2, h0bad, 0);
    rudnn_tensor_t gr_bad = rt_tensor_desc(&f->a.xgr, RUDNN_F32, 2, h0bad, 0);
    rudnn_tensor_t gg_bad = rt_tensor_desc(&f->a.ggate, RUDNN_F32, 3, gbad, 0);
    rudnn_tensor_t gd_f16 = rt_tensor_desc(&f->a.gdown, RUDNN_F16, 3, dims_down, 0);
    xargs_t a = xargs_ok(f);
    a.d = disp, a.rsv = &rsv, a.eo = &eo, a.ge = &ge, a.gr = &gr;
    xargs_t b = a;
    b.rsv = &rsv_bad;
    reject_xfb(f, b, RUDNN_STATUS_BAD_SHAPE, "reserve", NULL, "reserve [0, 2 INTER + 1] with no rows");
    b = a;
    b.eo = &eo_bad;
    reject_xf(f, b, RUDNN_STATUS_BAD_SHAPE, "expert_output", NULL, "expert_output [0, 7] with no rows");
    b = a;
    b.gr = &gr_bad;
    reject_xb(f, b, RUDNN_STATUS_BAD_SHAPE, "grad_rows", NULL, "grad_rows [0, 7] with no rows");
    b = a;
    b.gg = &gg_bad;
    reject_xb(f, b, RUDNN_STATUS_BAD_SHAPE, "grad_gate", NULL, "grad_gate [E, INTER, H + 1] with no rows");
    b = a;
    b.gd = &gd_f16;
    reject_xb(f, b, RUDNN_STATUS_BAD_DTYPE, "grad_down", "f16", "grad_down f16 with no rows");
    b = a;
    b.strategy = (rudnn_moe_strategy_t)3;
    reject_xfb(f, b, RUDNN_STATUS_BAD_PARAM, "strategy", NULL, "strategy = 3 with no rows");
    b = a;
    b.strategy = RUDNN_MOE_TENSOR_CORE;
    reject_xfb(f, b, RUDNN_STATUS_NOT_SUPPORTED, "TensorCore", NULL, "TensorCore with no rows");
    b = a;
    b.ws = f->b.ws.buffer, b.wsb = WS_BYTES;
    reject_xfb(f, b, RUDNN_STATUS_DEVICE_MISMATCH, "workspace", NULL, "workspace on another context with no rows");
    b = a;
    b.gg = &f->a.gup.t;
    reject_xb(f, b, RUDNN_STATUS_BAD_PARAM, "grad_gate", "grad_up", "grad_gate on grad_up with no rows");

    /* the valid forward: nothing written */
    rt_guard_begin(&f->guard);
    rt_guard_begin(&f->xguard);
    if (valid_ok(f, call_xf(&a), OPXF, "no rows") &&
        rt_guard_changed(&f->guard) + rt_guard_changed(&f->xguard)) {
        rt_logf(&f->log, "  %s with no rows wrote to a buffer\n", OPXF);
        f->log.failures++;
    }
    /* the valid backward: the weight gradients zero, nothing else written */
    rt_tensor_poison(&f->a.ggate);
    rt_tensor_poison(&f->a.gup);
    rt_tensor_poison(&f->a.gdown);
    rt_guard_begin(&f->guard);
    rt_guard_begin(&f->xguard);
    if (valid_ok(f, call_xb(&a), OPXB, "no rows")) {
        rt_guard_changed(&f->guard);
        rt_guard_changed(&f->xguard);
        const rt_guard_t *guards[2] = {&f->guard, &f->xguard};
        for (int g = 0; g < 2; g++)
            for (int i = 0; i < guards[g]->count; i++) {
                const rt_guard_item_t *it = &guards[g]->items[i];
                if (it->changed && it->buffer != f->a.ggate.buffer && it->buffer != f->a.gup.buffer &&
                    it->buffer != f->a.gdown.buffer) {
                    rt_logf(&f->log, "  %s with no rows wrote to a buffer other than the weight gradients\n", OPXB);
                    f->log.failures++;
                }
            }
        if (f->on_opencl) {
            check_grad_written(f, &f->a.ggate, NULL, "grad_gate", "no rows");
            check_grad_written(f, &f->a.gup, NULL, "grad_up", "no rows");
            check_grad_written(f, &f->a.gdown, NULL, "grad_down", "no rows");
        }
    }
    rudnn_dispatched_destroy(disp);
    rudnn_routing_plan_destroy(plan);
    fx_finish(f);
}

/* A valid call of each op after a rejected one: SUCCESS and an empty error (Scalar without a workspace, Auto
 * with the caller's; f32 and f16 weights); on a backend without the kernels NOT_SUPPORTED naming the op. The
 * f32 backward writes every element of the weight gradients, zeros for an expert that received no row. */
static void test_experts_success_clears_error(void **state)
{
    fx_t *f = *state;
    uint32_t counts[E];
    rudnn_tensor_t cv;
    rt_assert_status(rudnn_dispatched_counts(f->a.disp, &cv), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_read(rt_queue, &cv, counts, sizeof counts), RUDNN_STATUS_SUCCESS);
    for (int f16 = 0; f16 < 2; f16++)
        for (int variant = 0; variant < 2; variant++)
            for (int op = 0; op < 2; op++) {
                xviews16_t v;
                xargs_t a = f16 ? xargs_f16(f, &v) : xargs_ok(f);
                if (variant)
                    a.strategy = RUDNN_MOE_AUTO, a.ws = f->a.ws.buffer, a.wsb = WS_BYTES;
                xargs_t bad = a;
                bad.strategy = (rudnn_moe_strategy_t)-1;
                (void)call_xf(&bad); /* sets the error */
                if (op) {
                    rt_tensor_poison(&f->a.ggate);
                    rt_tensor_poison(&f->a.gup);
                    rt_tensor_poison(&f->a.gdown);
                }
                char what[96];
                snprintf(what, sizeof what, "valid call after a failed one (%s weights, %s)", f16 ? "f16" : "f32",
                         variant ? "Auto, caller's workspace" : "Scalar, pooled workspace");
                const int ok = valid_ok(f, op ? call_xb(&a) : call_xf(&a), op ? OPXB : OPXF, what);
                rudnn_queue_synchronize(rt_queue);
                if (ok && op && !f16 && f->on_opencl) {
                    check_grad_written(f, &f->a.ggate, counts, "grad_gate", what);
                    check_grad_written(f, &f->a.gup, counts, "grad_up", what);
                    check_grad_written(f, &f->a.gdown, counts, "grad_down", what);
                }
            }
    fx_finish(f);
}

/* ---- the router training plan ---------------------------------------------------------------------- */

#define NO_TRAINING ((rudnn_router_training_plan_t)(uintptr_t)0x5e47) /* *training before a call */
#define NO_ROUTING ((rudnn_routing_plan_t)(uintptr_t)0x5e48)          /* *routing before a call */

/* into_training's arguments, starting from set a (its plan and logits); out 0: a NULL training pointer. */
typedef struct targs {
    rudnn_queue_t q;
    rudnn_routing_plan_t plan;
    const rudnn_tensor_t *logits;
    const rudnn_router_weight_options_t *o;
    int out;
} targs_t;

static targs_t targs_ok(fx_t *f, const rudnn_router_weight_options_t *o)
{
    targs_t a = {rt_queue, f->a.plan, &f->a.logits.t, o, 1};
    return a;
}

/* A rejected into_training: REJECT_WORDS's checks, *training untouched and no object left alive. */
static void reject_t(fx_t *f, targs_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    rudnn_router_training_plan_t tr = NO_TRAINING;
    const uint64_t live = rudnn_debug_live_objects();
    REJECT_WORDS(f, want, OPT, n1, n2, what,
                 rudnn_routing_plan_into_training(a.q, a.plan, a.logits, a.o, a.out ? &tr : NULL));
    if (tr != NO_TRAINING) {
        rt_logf(&f->log, "  %s, %s: *training was written by a rejected call\n", OPT, what);
        f->log.failures++;
    }
    const uint64_t after = rudnn_debug_live_objects();
    if (after != live) {
        rt_logf(&f->log, "  %s, %s: %lld object(s) left alive by a rejected call\n", OPT, what,
                (long long)(after - live));
        f->log.failures++;
    }
}

/* backward's arguments: set a's grad_weights and grad_logits by default. */
typedef struct bargs {
    rudnn_queue_t q;
    rudnn_router_training_plan_t tr;
    const rudnn_tensor_t *gw, *gl;
} bargs_t;

static bargs_t bargs_ok(fx_t *f, rudnn_router_training_plan_t tr)
{
    bargs_t a = {rt_queue, tr, &f->a.gw.t, &f->a.gl.t};
    return a;
}

static void reject_tb(fx_t *f, bargs_t a, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    REJECT_WORDS(f, want, OPTB, n1, n2, what, rudnn_router_training_plan_backward(a.q, a.tr, a.gw, a.gl));
}

/* The block of a training plan's routing: the kept indices (U32 [T, k] at 0), then the weights (F32). */
static rudnn_tensor_t training_indices(rudnn_router_training_plan_t tr, size_t *block_bytes)
{
    rudnn_routing_plan_t r = NULL;
    rudnn_tensor_t idx, w;
    rt_assert_status(rudnn_router_training_plan_routing(tr, &r), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_routing_plan_indices(r, &idx), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_routing_plan_weights(r, &w), RUDNN_STATUS_SUCCESS);
    assert_true(w.buffer == idx.buffer);
    if (block_bytes)
        *block_bytes = w.offset + rudnn_tensor_bytes(&w);
    rudnn_routing_plan_destroy(r); /* the training holds the block */
    return idx;
}

/* Makes a training plan (fails the test on error) and watches its routing's block with xguard; NULL where
 * a backend other than opencl lacks the kernels. */
static rudnn_router_training_plan_t make_training(fx_t *f, rudnn_queue_t q, rudnn_routing_plan_t plan,
                                                  const rudnn_tensor_t *logits,
                                                  const rudnn_router_weight_options_t *o)
{
    rudnn_router_training_plan_t tr = NULL;
    const rudnn_status_t st = rudnn_routing_plan_into_training(q, plan, logits, o, &tr);
    if (st == RUDNN_STATUS_NOT_SUPPORTED && !f->on_opencl && strstr(rudnn_last_error(), OPT))
        return NULL;
    rt_assert_status(st, RUDNN_STATUS_SUCCESS);
    size_t bytes = 0;
    const rudnn_tensor_t idx = training_indices(tr, &bytes);
    rt_guard_track_buffer(&f->xguard, q, idx.buffer, bytes, NULL);
    return tr;
}

/* Stops watching the routing block of tr (before it is destroyed). */
static void unwatch_training(fx_t *f, rudnn_router_training_plan_t tr)
{
    const rudnn_tensor_t idx = training_indices(tr, NULL);
    for (int i = 0; i < f->xguard.count; i++)
        if (f->xguard.items[i].buffer == idx.buffer) {
            free(f->xguard.items[i].before);
            f->xguard.items[i] = f->xguard.items[--f->xguard.count];
            return;
        }
}

/* Stops watching the last n buffers of xguard. */
static void xguard_pop(fx_t *f, int n)
{
    for (; n > 0 && f->xguard.count > 0; n--) {
        rt_guard_item_t *it = &f->xguard.items[--f->xguard.count];
        free(it->before);
        it->before = NULL;
    }
}

static void drop_training(fx_t *f, rudnn_router_training_plan_t tr)
{
    if (tr)
        unwatch_training(f, tr);
    rudnn_router_training_plan_destroy(tr);
}

/* Reads t (bytes of it) into a new block. */
static uint8_t *read_bytes(const rudnn_tensor_t *t)
{
    const size_t n = rudnn_tensor_bytes(t);
    uint8_t *p = rt_xmalloc(n + 1);
    if (n)
        rt_assert_status(rudnn_tensor_read(rt_queue, t, p, n), RUDNN_STATUS_SUCCESS);
    return p;
}

static void same_bytes(fx_t *f, const uint8_t *got, const uint8_t *want, size_t n, const char *name,
                       const char *what)
{
    if (memcmp(got, want, n) != 0) {
        rt_logf(&f->log, "  %s: %s differs from the selected router ops' (%zu bytes)\n", what, name, n);
        f->log.failures++;
    }
}

/* The training plan tr of plan, logits and o against the selected router ops (the same kernels: bit for
 * bit): its routing holds plan's indices (U32 [T, k]) and rudnn_moe_selected_router_weights of them (F32
 * [T, k]); its backward gives rudnn_moe_selected_router_backward's grad_logits. w: scratch F32 [T, k]. */
static void check_matches_selected(fx_t *f, rudnn_router_training_plan_t tr, rudnn_routing_plan_t plan,
                                   const rudnn_tensor_t *logits, const rudnn_router_weight_options_t *o,
                                   const rudnn_tensor_t *gw, const rudnn_tensor_t *w, const rudnn_tensor_t *gl,
                                   const char *what)
{
    rudnn_routing_plan_t r = NULL;
    rudnn_tensor_t ri, rw, pi;
    rt_assert_status(rudnn_router_training_plan_routing(tr, &r), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_routing_plan_indices(r, &ri), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_routing_plan_weights(r, &rw), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_routing_plan_indices(plan, &pi), RUDNN_STATUS_SUCCESS);
    if (r == plan || ri.dtype != RUDNN_U32 || rw.dtype != RUDNN_F32 || ri.rank != 2 || rw.rank != 2 ||
        ri.dims[0] != pi.dims[0] || ri.dims[1] != pi.dims[1] || rw.dims[0] != pi.dims[0] ||
        rw.dims[1] != pi.dims[1]) {
        rt_logf(&f->log, "  %s: the routing is not a new plan of U32 indices and F32 weights of the plan's shape\n",
                what);
        f->log.failures++;
        rudnn_routing_plan_destroy(r);
        return;
    }
    uint8_t *got_i = read_bytes(&ri), *want_i = read_bytes(&pi), *got_w = read_bytes(&rw);
    rt_assert_status(rudnn_moe_selected_router_weights(rt_queue, logits, &pi, o, w), RUDNN_STATUS_SUCCESS);
    uint8_t *want_w = read_bytes(w);
    rt_assert_status(rudnn_router_training_plan_backward(rt_queue, tr, gw, gl), RUDNN_STATUS_SUCCESS);
    uint8_t *got_g = read_bytes(gl);
    rt_assert_status(rudnn_moe_selected_router_backward(rt_queue, logits, &pi, gw, o, gl), RUDNN_STATUS_SUCCESS);
    uint8_t *want_g = read_bytes(gl);
    same_bytes(f, got_i, want_i, rudnn_tensor_bytes(&pi), "the routing's indices", what);
    same_bytes(f, got_w, want_w, rudnn_tensor_bytes(&rw), "the routing's weights", what);
    same_bytes(f, got_g, want_g, rudnn_tensor_bytes(gl), "grad_logits", what);
    free(got_i), free(want_i), free(got_w), free(want_w), free(got_g), free(want_g);
    rudnn_routing_plan_destroy(r);
}

static void test_training_null(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    targs_t a = targs_ok(f, &ok);
    a.q = NULL;
    reject_t(f, a, RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue");
    a = targs_ok(f, &ok);
    a.plan = NULL;
    reject_t(f, a, RUDNN_STATUS_BAD_PARAM, "plan", NULL, "NULL plan");
    a = targs_ok(f, &ok);
    a.logits = NULL;
    reject_t(f, a, RUDNN_STATUS_BAD_PARAM, "logits", NULL, "NULL logits");
    a = targs_ok(f, &ok);
    a.o = NULL;
    reject_t(f, a, RUDNN_STATUS_BAD_PARAM, "options", NULL, "NULL options");
    a = targs_ok(f, &ok);
    a.out = 0;
    reject_t(f, a, RUDNN_STATUS_BAD_PARAM, "training", NULL, "NULL training");
    rudnn_tensor_t nobuf = f->a.logits.t;
    nobuf.buffer = NULL;
    a = targs_ok(f, &ok);
    a.logits = &nobuf;
    reject_t(f, a, RUDNN_STATUS_BAD_PARAM, "logits", NULL, "logits without a buffer");

    /* routing() */
    rudnn_routing_plan_t r = NO_ROUTING;
    REJECT_WORDS(f, RUDNN_STATUS_BAD_PARAM, OPTR, "training", NULL, "NULL training",
                 rudnn_router_training_plan_routing(NULL, &r));
    if (r != NO_ROUTING) {
        rt_logf(&f->log, "  %s, NULL training: *routing was written by a rejected call\n", OPTR);
        f->log.failures++;
    }
    rudnn_router_training_plan_destroy(NULL); /* a no-op */

    rudnn_router_training_plan_t tr = make_training(f, rt_queue, f->a.plan, &f->a.logits.t, &ok);
    if (tr) {
        REJECT_WORDS(f, RUDNN_STATUS_BAD_PARAM, OPTR, "routing", NULL, "NULL routing",
                     rudnn_router_training_plan_routing(tr, NULL));
        bargs_t b = bargs_ok(f, tr);
        b.q = NULL;
        reject_tb(f, b, RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue");
        b = bargs_ok(f, NULL);
        reject_tb(f, b, RUDNN_STATUS_BAD_PARAM, "training", NULL, "NULL training");
        b = bargs_ok(f, tr);
        b.gw = NULL;
        reject_tb(f, b, RUDNN_STATUS_BAD_PARAM, "grad_weights", NULL, "NULL grad_weights");
        b = bargs_ok(f, tr);
        b.gl = NULL;
        reject_tb(f, b, RUDNN_STATUS_BAD_PARAM, "grad_logits", NULL, "NULL grad_logits");
        rudnn_tensor_t gw_nobuf = f->a.gw.t, gl_nobuf = f->a.gl.t;
        gw_nobuf.buffer = NULL, gl_nobuf.buffer = NULL;
        b = bargs_ok(f, tr);
        b.gw = &gw_nobuf;
        reject_tb(f, b, RUDNN_STATUS_BAD_PARAM, "grad_weights", NULL, "grad_weights without a buffer");
        b = bargs_ok(f, tr);
        b.gl = &gl_nobuf;
        reject_tb(f, b, RUDNN_STATUS_BAD_PARAM, "grad_logits", NULL, "grad_logits without a buffer");
    }
    drop_training(f, tr);
    fx_finish(f);
}

static void test_training_context(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    targs_t a = targs_ok(f, &ok);
    a.plan = f->b.plan;
    reject_t(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "plan", NULL, "plan on another context");
    a = targs_ok(f, &ok);
    a.logits = &f->b.logits.t;
    reject_t(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "logits", NULL, "logits on another context");
    a = targs_ok(f, &ok);
    a.q = rt_queue2; /* plan and logits on the first context */
    reject_t(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "plan", "queue", "queue of another context");
    a.plan = f->b.plan; /* the plan on the queue's context, the logits not */
    reject_t(f, a, RUDNN_STATUS_DEVICE_MISMATCH, "logits", NULL, "logits on another context than queue and plan");

    rudnn_router_training_plan_t tr = make_training(f, rt_queue, f->a.plan, &f->a.logits.t, &ok);
    if (tr) {
        bargs_t b = bargs_ok(f, tr);
        b.q = rt_queue2;
        reject_tb(f, b, RUDNN_STATUS_DEVICE_MISMATCH, "training", "queue", "queue of another context");
        b.gw = &f->b.gw.t, b.gl = &f->b.gl.t; /* the gradients on the queue's context, the training not */
        reject_tb(f, b, RUDNN_STATUS_DEVICE_MISMATCH, "training", "queue",
                  "queue and gradients on another context than the training");
        b = bargs_ok(f, tr);
        b.gw = &f->b.gw.t;
        reject_tb(f, b, RUDNN_STATUS_DEVICE_MISMATCH, "grad_weights", NULL, "grad_weights on another context");
        b = bargs_ok(f, tr);
        b.gl = &f->b.gl.t;
        reject_tb(f, b, RUDNN_STATUS_DEVICE_MISMATCH, "grad_logits", NULL, "grad_logits on another context");
    }
    drop_training(f, tr);
    fx_finish(f);
}

static void test_training_logits(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();

    /* shape: T or E other than the plan's, rank other than 2 */
    const struct {
        int rank;
        int64_t dims[3];
        const char *what;
    } shapes[] = {{2, {T, E - 1}, "logits [4, 7]"}, {2, {T, E + 1}, "logits [4, 9]"},
                  {2, {T - 1, E}, "logits [3, 8]"}, {2, {T + 1, E}, "logits [5, 8]"},
                  {2, {0, E}, "logits [0, 8]"},     {1, {T * E}, "logits [32]"},
                  {3, {1, T, E}, "logits [1, 4, 8]"}, {3, {T, E, 1}, "logits [4, 8, 1]"}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        rudnn_tensor_t l = rt_tensor_desc(&f->a.logits, RUDNN_F32, shapes[i].rank, shapes[i].dims, 0);
        targs_t a = targs_ok(f, &ok);
        a.logits = &l;
        /* rank 2: the message tells the plan's T and E */
        reject_t(f, a, RUDNN_STATUS_BAD_SHAPE, "logits", shapes[i].rank == 2 ? "plan" : NULL, shapes[i].what);
    }
    /* a plan over 7 experts with logits of 8 */
    targs_t a = targs_ok(f, &ok);
    a.plan = f->plan_e7;
    reject_t(f, a, RUDNN_STATUS_BAD_SHAPE, "logits", "plan", "logits [4, 8] for a plan over 7 experts");

    /* dtype: index and quantized dtypes are not logits */
    static const rudnn_dtype_t bad_dtypes[] = {RUDNN_I32, RUDNN_U32, RUDNN_I64, RUDNN_I8};
    for (size_t i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++) {
        rudnn_tensor_t l = rt_tensor_desc(&f->a.logits, bad_dtypes[i], 2, dims_logits, 0);
        char what[64];
        snprintf(what, sizeof what, "logits %s", rudnn_dtype_name(bad_dtypes[i]));
        a = targs_ok(f, &ok);
        a.logits = &l;
        reject_t(f, a, RUDNN_STATUS_BAD_DTYPE, "logits", rudnn_dtype_name(bad_dtypes[i]), what);
    }

    /* a strided (padded rows) view: the training plan reads its logits as contiguous */
    static const int64_t half[2] = {T / 2, E};
    rudnn_tensor_t pad = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, half, 0);
    pad.dims[0] = T, pad.strides[0] = E + 4;
    a = targs_ok(f, &ok);
    a.logits = &pad;
    reject_t(f, a, RUDNN_STATUS_NOT_SUPPORTED, "logits", NULL, "logits with padded rows");
    fx_finish(f);
}

static void test_training_options(void **state)
{
    fx_t *f = *state;
    static const int scorings[] = {7, -1, 2};
    for (size_t i = 0; i < sizeof scorings / sizeof scorings[0]; i++) {
        rudnn_router_weight_options_t o = opts_ok();
        o.scoring = (rudnn_router_scoring_t)scorings[i];
        char what[64];
        snprintf(what, sizeof what, "scoring = %d", scorings[i]);
        reject_t(f, targs_ok(f, &o), RUDNN_STATUS_BAD_PARAM, "scoring", NULL, what);
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
            reject_t(f, targs_ok(f, &o), RUDNN_STATUS_BAD_PARAM, "scale", NULL, what);
        }
    fx_finish(f);
}

/* A plan of top_k 65 (over 80 experts) is NOT_SUPPORTED, whatever the options; one of top_k 64 (the most)
 * makes a training plan that agrees with the selected router ops. */
static void test_training_top_k(void **state)
{
    fx_t *f = *state;
    static const int64_t l80[2] = {1, 80}, k64[2] = {1, 64};
    rt_tensor_t logits;
    rt_rng_t rng;
    rt_rng_seed(&rng, 7);
    rt_tensor_create(&logits, RUDNN_F32, 2, l80, 0, RT_TAIL_BYTES);
    rt_tensor_fill_uniform(&logits, &rng, -3.0, 3.0);
    rudnn_routing_plan_t p65 = NULL, p64 = NULL;
    const rudnn_routing_options_t r65 = {65, 1}, r64 = {64, 1};
    rt_assert_status(rudnn_moe_route(rt_queue, &logits.t, &r65, &p65), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_moe_route(rt_queue, &logits.t, &r64, &p64), RUDNN_STATUS_SUCCESS);
    rudnn_queue_synchronize(rt_queue);
    rt_guard_track(&f->xguard, rt_queue, &logits, NULL);
    rudnn_tensor_t pi;
    rt_assert_status(rudnn_routing_plan_weights(p65, &pi), RUDNN_STATUS_SUCCESS);
    rt_guard_track_buffer(&f->xguard, rt_queue, pi.buffer, pi.offset + rudnn_tensor_bytes(&pi), NULL);
    for (int sigmoid = 0; sigmoid < 2; sigmoid++) {
        rudnn_router_weight_options_t o = opts_ok();
        o.scoring = sigmoid ? RUDNN_ROUTER_SIGMOID : RUDNN_ROUTER_SOFTMAX;
        targs_t a = {rt_queue, p65, &logits.t, &o, 1};
        reject_t(f, a, RUDNN_STATUS_NOT_SUPPORTED, "65", "64", sigmoid ? "top_k 65 (sigmoid)" : "top_k 65");
        rudnn_tensor_t l16 = rt_tensor_desc(&logits, RUDNN_F16, 2, l80, 0);
        a.logits = &l16;
        reject_t(f, a, RUDNN_STATUS_NOT_SUPPORTED, "65", "64", sigmoid ? "top_k 65, f16 logits (sigmoid)"
                                                                      : "top_k 65, f16 logits");
    }
    const rudnn_router_weight_options_t ok = opts_ok();
    rudnn_router_training_plan_t tr = make_training(f, rt_queue, p64, &logits.t, &ok);
    if (tr) {
        rudnn_tensor_t gw = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, k64, 0);
        rudnn_tensor_t gl = rt_tensor_desc(&f->a.gl, RUDNN_F32, 2, l80, 0);
        rudnn_tensor_t gw65 = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, (const int64_t[2]){1, 65}, 0);
        bargs_t b = {rt_queue, tr, &gw65, &gl};
        reject_tb(f, b, RUDNN_STATUS_BAD_SHAPE, "grad_weights", NULL, "grad_weights [1, 65] for top_k 64");
        (void)rudnn_router_training_plan_backward(rt_queue, tr, &gw65, &gl); /* sets the error */
        if (valid_ok(f, rudnn_router_training_plan_backward(rt_queue, tr, &gw, &gl), OPTB, "top_k 64") &&
            f->on_opencl) {
            rudnn_tensor_t w = rt_tensor_desc(&f->a.w, RUDNN_F32, 2, k64, 0);
            check_matches_selected(f, tr, p64, &logits.t, &ok, &gw, &w, &gl, "top_k 64");
        }
    }
    drop_training(f, tr);
    xguard_pop(f, 2); /* p65's block and the logits */
    rudnn_routing_plan_destroy(p64);
    rudnn_routing_plan_destroy(p65);
    rt_tensor_destroy(&logits);
    fx_finish(f);
}

/* backward's gradients: grad_weights F32 [T, k], grad_logits [T, E] in the logits' dtype (f32, and f16 for a
 * training of f16 logits), disjoint from the kept logits, the kept indices and grad_weights. */
static void test_training_backward(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    rudnn_router_training_plan_t tr = make_training(f, rt_queue, f->a.plan, &f->a.logits.t, &ok);
    rudnn_router_training_plan_t tr16 = make_training(f, rt_queue, f->a.plan, &f->logits16.t, &ok);
    if (!tr || !tr16)
        goto done;

    /* grad_weights: F32 [T, k] whatever the logits' dtype */
    static const rudnn_dtype_t bad_gw[] = {RUDNN_F16, RUDNN_BF16, RUDNN_I32};
    for (size_t i = 0; i < sizeof bad_gw / sizeof bad_gw[0]; i++)
        for (int f16 = 0; f16 < 2; f16++) {
            rudnn_tensor_t g = rt_tensor_desc(&f->a.gw, bad_gw[i], 2, dims_k, 0);
            char what[64];
            snprintf(what, sizeof what, "grad_weights %s with %s logits", rudnn_dtype_name(bad_gw[i]),
                     f16 ? "f16" : "f32");
            bargs_t b = bargs_ok(f, f16 ? tr16 : tr);
            b.gw = &g;
            if (f16)
                b.gl = &f->gl16.t;
            reject_tb(f, b, RUDNN_STATUS_BAD_DTYPE, "grad_weights", rudnn_dtype_name(bad_gw[i]), what);
        }
    const struct {
        int rank;
        int64_t dims[3];
        const char *what;
    } gw_shapes[] = {{1, {T * K}, "grad_weights [8]"},      {2, {T, K + 1}, "grad_weights [4, 3]"},
                     {2, {T, K - 1}, "grad_weights [4, 1]"}, {2, {T + 1, K}, "grad_weights [5, 2]"},
                     {2, {T - 1, K}, "grad_weights [3, 2]"}, {3, {T, K, 1}, "grad_weights [4, 2, 1]"}};
    for (size_t i = 0; i < sizeof gw_shapes / sizeof gw_shapes[0]; i++) {
        rudnn_tensor_t g = rt_tensor_desc(&f->a.gw, RUDNN_F32, gw_shapes[i].rank, gw_shapes[i].dims, 0);
        bargs_t b = bargs_ok(f, tr);
        b.gw = &g;
        reject_tb(f, b, RUDNN_STATUS_BAD_SHAPE, "grad_weights", NULL, gw_shapes[i].what);
    }

    /* grad_logits: the logits' dtype, nothing else */
    static const rudnn_dtype_t bad_gl[] = {RUDNN_F16, RUDNN_BF16, RUDNN_I32};
    for (size_t i = 0; i < sizeof bad_gl / sizeof bad_gl[0]; i++) {
        rudnn_tensor_t g = rt_tensor_desc(&f->a.gl, bad_gl[i], 2, dims_logits, 0);
        char what[64];
        snprintf(what, sizeof what, "grad_logits %s with f32 logits", rudnn_dtype_name(bad_gl[i]));
        bargs_t b = bargs_ok(f, tr);
        b.gl = &g;
        reject_tb(f, b, RUDNN_STATUS_BAD_DTYPE, "grad_logits", rudnn_dtype_name(bad_gl[i]), what);
    }
    bargs_t b = bargs_ok(f, tr16); /* grad_logits stays f32 */
    reject_tb(f, b, RUDNN_STATUS_BAD_DTYPE, "grad_logits", "f32", "grad_logits f32 with f16 logits");
    rudnn_tensor_t gbf = rt_tensor_desc(&f->gl16, RUDNN_BF16, 2, dims_logits, 0);
    b.gl = &gbf;
    reject_tb(f, b, RUDNN_STATUS_BAD_DTYPE, "grad_logits", "bf16", "grad_logits bf16 with f16 logits");
    const struct {
        int rank;
        int64_t dims[3];
        const char *what;
    } gl_shapes[] = {{1, {T * E}, "grad_logits [32]"},     {2, {T, E - 1}, "grad_logits [4, 7]"},
                     {2, {T, E + 1}, "grad_logits [4, 9]"}, {2, {T - 1, E}, "grad_logits [3, 8]"},
                     {2, {T + 1, E}, "grad_logits [5, 8]"}, {3, {T, E, 1}, "grad_logits [4, 8, 1]"}};
    for (size_t i = 0; i < sizeof gl_shapes / sizeof gl_shapes[0]; i++) {
        rudnn_tensor_t g = rt_tensor_desc(&f->a.gl, RUDNN_F32, gl_shapes[i].rank, gl_shapes[i].dims, 0);
        b = bargs_ok(f, tr);
        b.gl = &g;
        reject_tb(f, b, RUDNN_STATUS_BAD_SHAPE, "grad_logits", NULL, gl_shapes[i].what);
    }

    /* strided (padded rows) views */
    static const int64_t half_e[2] = {T / 2, E}, half_k[2] = {T / 2, K};
    rudnn_tensor_t gl_pad = rt_tensor_desc(&f->a.gl, RUDNN_F32, 2, half_e, 0);
    gl_pad.dims[0] = T, gl_pad.strides[0] = E + 2;
    rudnn_tensor_t gw_pad = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, half_k, 0);
    gw_pad.dims[0] = T, gw_pad.strides[0] = K + 1;
    b = bargs_ok(f, tr);
    b.gl = &gl_pad;
    reject_tb(f, b, RUDNN_STATUS_NOT_SUPPORTED, "grad_logits", NULL, "grad_logits with padded rows");
    b = bargs_ok(f, tr);
    b.gw = &gw_pad;
    reject_tb(f, b, RUDNN_STATUS_NOT_SUPPORTED, "grad_weights", NULL, "grad_weights with padded rows");

    /* overlapping what backward reads: the kept logits (exactly, 8 bytes in, from their last element on),
     * the kept indices (the routing's block), grad_weights; f16 over the kept f16 logits */
    rudnn_tensor_t in_logits = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, dims_logits, 8);
    rudnn_tensor_t end_logits = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, dims_logits, (T * E - 1) * 4);
    rudnn_tensor_t on_gw = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, dims_logits, 0);
    rudnn_tensor_t in_gw = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, dims_logits, 4);
    rudnn_tensor_t on16 = rt_tensor_desc(&f->logits16, RUDNN_F16, 2, dims_logits, 2);
    const rudnn_tensor_t kept = training_indices(tr, NULL);
    rudnn_tensor_t on_idx, on_w, plan_w;
    rt_assert_status(rudnn_tensor_init(&on_idx, kept.buffer, 0, RUDNN_F32, 2, dims_logits), RUDNN_STATUS_SUCCESS);
    {
        rudnn_routing_plan_t r = NULL;
        rt_assert_status(rudnn_router_training_plan_routing(tr, &r), RUDNN_STATUS_SUCCESS);
        rt_assert_status(rudnn_routing_plan_weights(r, &plan_w), RUDNN_STATUS_SUCCESS);
        rudnn_routing_plan_destroy(r);
    }
    /* the training plan's own weights (what the caller dispatches with; not an input of backward): a
     * grad_logits that ends where they end, within the block and past the kept indices */
    const size_t gl_bytes = (size_t)T * E * 4, w_end = plan_w.offset + rudnn_tensor_bytes(&plan_w);
    assert_true(w_end >= gl_bytes && w_end - gl_bytes >= rudnn_tensor_bytes(&kept));
    rt_assert_status(rudnn_tensor_init(&on_w, plan_w.buffer, w_end - gl_bytes, RUDNN_F32, 2, dims_logits),
                     RUDNN_STATUS_SUCCESS);
    const struct {
        const rudnn_tensor_t *gl;
        const char *in, *what;
    } overlaps[] = {{&f->a.logits.t, "logits", "grad_logits in place of the kept logits"},
                    {&in_logits, "logits", "grad_logits 8 bytes into the kept logits"},
                    {&end_logits, "logits", "grad_logits over the kept logits' last element"},
                    {&on_idx, "indices", "grad_logits over the kept indices"},
                    {&on_w, "weights", "grad_logits over the training plan's weights"},
                    {&on_gw, "grad_weights", "grad_logits at the offset of grad_weights"},
                    {&in_gw, "grad_weights", "grad_logits 4 bytes into grad_weights"}};
    for (size_t i = 0; i < sizeof overlaps / sizeof overlaps[0]; i++) {
        b = bargs_ok(f, tr);
        b.gl = overlaps[i].gl;
        reject_tb(f, b, RUDNN_STATUS_BAD_PARAM, "grad_logits", overlaps[i].in, overlaps[i].what);
    }
    b = bargs_ok(f, tr16);
    b.gl = &f->logits16.t;
    reject_tb(f, b, RUDNN_STATUS_BAD_PARAM, "grad_logits", "logits", "grad_logits in place of the kept f16 logits");
    b.gl = &on16;
    reject_tb(f, b, RUDNN_STATUS_BAD_PARAM, "grad_logits", "logits", "grad_logits 2 bytes into the kept f16 logits");
done:
    drop_training(f, tr16);
    drop_training(f, tr);
    fx_finish(f);
}

/* No tokens: a plan of T = 0 makes a training plan (logits [0, E]); its calls are checked like any other, and
 * the valid backward succeeds writing nothing. */
static void test_training_empty(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    static const int64_t t0e[2] = {0, E}, t0e1[2] = {0, E + 1}, t0k[2] = {0, K}, t0k1[2] = {0, K + 1};
    rudnn_tensor_t l0 = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, t0e, 0);
    rudnn_routing_plan_t plan = NULL;
    const rudnn_routing_options_t ro = {K, 1};
    rt_assert_status(rudnn_moe_route(rt_queue, &l0, &ro, &plan), RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t l0bad = rt_tensor_desc(&f->a.logits, RUDNN_F32, 2, t0e1, 0);
    rudnn_tensor_t l0i32 = rt_tensor_desc(&f->a.logits, RUDNN_I32, 2, t0e, 0);
    targs_t a = {rt_queue, plan, &l0bad, &ok, 1};
    reject_t(f, a, RUDNN_STATUS_BAD_SHAPE, "logits", "plan", "logits [0, 9] for a plan of no tokens");
    a.logits = &f->a.logits.t;
    reject_t(f, a, RUDNN_STATUS_BAD_SHAPE, "logits", "plan", "logits [4, 8] for a plan of no tokens");
    a.logits = &l0i32;
    reject_t(f, a, RUDNN_STATUS_BAD_DTYPE, "logits", rudnn_dtype_name(RUDNN_I32), "logits i32 with no tokens");
    rudnn_router_weight_options_t bad = opts_ok();
    bad.scale = NAN;
    a.logits = &l0, a.o = &bad;
    reject_t(f, a, RUDNN_STATUS_BAD_PARAM, "scale", NULL, "scale = NaN with no tokens");
    a.o = &ok, a.out = 0;
    reject_t(f, a, RUDNN_STATUS_BAD_PARAM, "training", NULL, "NULL training with no tokens");

    /* the valid calls: nothing written */
    rudnn_router_training_plan_t tr = NO_TRAINING;
    rt_guard_begin(&f->guard);
    rt_guard_begin(&f->xguard);
    const rudnn_status_t st = rudnn_routing_plan_into_training(rt_queue, plan, &l0, &ok, &tr);
    if (!valid_ok(f, st, OPT, "no tokens")) {
        tr = NULL;
        goto done;
    }
    if (st) {
        tr = NULL; /* NOT_SUPPORTED on a backend without the kernels */
        goto done;
    }
    if (tr == NO_TRAINING || tr == NULL) {
        rt_logf(&f->log, "  %s with no tokens: succeeded without writing *training\n", OPT);
        f->log.failures++;
        tr = NULL;
        goto done;
    }
    if (rt_guard_changed(&f->guard) + rt_guard_changed(&f->xguard)) {
        rt_logf(&f->log, "  %s with no tokens wrote to a buffer\n", OPT);
        f->log.failures++;
    }
    rudnn_routing_plan_t r = NULL;
    rt_assert_status(rudnn_router_training_plan_routing(tr, &r), RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t ri, rw;
    rt_assert_status(rudnn_routing_plan_indices(r, &ri), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_routing_plan_weights(r, &rw), RUDNN_STATUS_SUCCESS);
    if (ri.rank != 2 || ri.dims[0] != 0 || ri.dims[1] != K || rw.rank != 2 || rw.dims[0] != 0 || rw.dims[1] != K ||
        rw.dtype != RUDNN_F32) {
        rt_logf(&f->log, "  %s with no tokens: the routing is not [0, %d] (U32 indices, F32 weights)\n", OPT, K);
        f->log.failures++;
    }
    rudnn_routing_plan_destroy(r);

    rudnn_tensor_t gw = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, t0k, 0);
    rudnn_tensor_t gl = rt_tensor_desc(&f->a.gl, RUDNN_F32, 2, t0e, 0);
    rudnn_tensor_t gw_bad = rt_tensor_desc(&f->a.gw, RUDNN_F32, 2, t0k1, 0);
    rudnn_tensor_t gl_bad = rt_tensor_desc(&f->a.gl, RUDNN_F32, 2, t0e1, 0);
    rudnn_tensor_t gl_f16 = rt_tensor_desc(&f->a.gl, RUDNN_F16, 2, t0e, 0);
    rudnn_tensor_t gl_4 = f->a.gl.t;
    bargs_t b = {rt_queue, tr, &gw_bad, &gl};
    reject_tb(f, b, RUDNN_STATUS_BAD_SHAPE, "grad_weights", NULL, "grad_weights [0, 3] with no tokens");
    b.gw = &gw, b.gl = &gl_bad;
    reject_tb(f, b, RUDNN_STATUS_BAD_SHAPE, "grad_logits", NULL, "grad_logits [0, 9] with no tokens");
    b.gl = &gl_4;
    reject_tb(f, b, RUDNN_STATUS_BAD_SHAPE, "grad_logits", NULL, "grad_logits [4, 8] with no tokens");
    b.gl = &gl_f16;
    reject_tb(f, b, RUDNN_STATUS_BAD_DTYPE, "grad_logits", "f16", "grad_logits f16 with no tokens");
    b.gl = &gl, b.q = rt_queue2;
    reject_tb(f, b, RUDNN_STATUS_DEVICE_MISMATCH, "training", "queue", "queue of another context with no tokens");
    (void)rudnn_router_training_plan_backward(rt_queue, tr, &gw, &gl_bad); /* sets the error */
    rt_guard_begin(&f->guard);
    rt_guard_begin(&f->xguard);
    if (valid_ok(f, rudnn_router_training_plan_backward(rt_queue, tr, &gw, &gl), OPTB, "no tokens") &&
        rt_guard_changed(&f->guard) + rt_guard_changed(&f->xguard)) {
        rt_logf(&f->log, "  %s with no tokens wrote to a buffer\n", OPTB);
        f->log.failures++;
    }
done:
    rudnn_router_training_plan_destroy(tr);
    rudnn_routing_plan_destroy(plan);
    fx_finish(f);
}

/* A valid call of each op after a rejected one: SUCCESS and an empty error (both scorings, renormalized or
 * not, f32 and f16 logits; the caller's plan made from the f32 logits); on a backend without the kernels
 * NOT_SUPPORTED naming the op. On opencl the training plan agrees bit for bit with the selected router ops
 * on the plan's indices. Every object it made is gone once the training plan and its routing are destroyed;
 * the routing (a new reference) outlives the training plan. */
static void test_training_success_clears_error(void **state)
{
    fx_t *f = *state;
    for (int variant = 0; variant < 8; variant++) {
        rudnn_router_weight_options_t o = opts_ok(), bad = opts_ok();
        o.scoring = variant & 1 ? RUDNN_ROUTER_SIGMOID : RUDNN_ROUTER_SOFTMAX;
        o.renormalize = (variant >> 1) & 1;
        o.scale = 2.5f;
        bad.scale = -1.0f;
        const int f16 = variant >> 2;
        const rudnn_tensor_t *L = f16 ? &f->logits16.t : &f->a.logits.t, *G = f16 ? &f->gl16.t : &f->a.gl.t;
        char what[96];
        snprintf(what, sizeof what, "valid call after a failed one (%s, renormalize %d, %s logits)",
                 variant & 1 ? "sigmoid" : "softmax", o.renormalize, f16 ? "f16" : "f32");
        const uint64_t live = rudnn_debug_live_objects();
        rudnn_router_training_plan_t tr = NO_TRAINING;
        (void)rudnn_routing_plan_into_training(rt_queue, f->a.plan, L, &bad, &tr); /* sets the error */
        rudnn_status_t st = rudnn_routing_plan_into_training(rt_queue, f->a.plan, L, &o, &tr);
        if (!valid_ok(f, st, OPT, what) || st)
            continue;
        if (tr == NO_TRAINING || tr == NULL) {
            rt_logf(&f->log, "  %s, %s: succeeded without writing *training\n", OPT, what);
            f->log.failures++;
            continue;
        }
        rudnn_routing_plan_t r = NO_ROUTING;
        (void)rudnn_router_training_plan_routing(tr, NULL); /* sets the error */
        st = rudnn_router_training_plan_routing(tr, &r);
        if (!valid_ok(f, st, OPTR, what) || st) {
            r = NULL;
        } else if (r == NO_ROUTING || r == NULL || r == f->a.plan) {
            rt_logf(&f->log, "  %s, %s: *routing is not a new plan\n", OPTR, what);
            f->log.failures++;
            r = NULL;
        }
        (void)rudnn_router_training_plan_backward(rt_queue, tr, NULL, G); /* sets the error */
        valid_ok(f, rudnn_router_training_plan_backward(rt_queue, tr, &f->a.gw.t, G), OPTB, what);
        rudnn_queue_synchronize(rt_queue);
        if (f->on_opencl)
            check_matches_selected(f, tr, f->a.plan, L, &o, &f->a.gw.t, &f->a.w.t, G, what);
        /* the routing outlives the training plan: its indices still read as the plan's */
        rudnn_router_training_plan_destroy(tr);
        if (r && f->on_opencl) {
            rudnn_tensor_t ri, pi;
            rt_assert_status(rudnn_routing_plan_indices(r, &ri), RUDNN_STATUS_SUCCESS);
            rt_assert_status(rudnn_routing_plan_indices(f->a.plan, &pi), RUDNN_STATUS_SUCCESS);
            uint8_t *got = read_bytes(&ri), *want = read_bytes(&pi);
            same_bytes(f, got, want, rudnn_tensor_bytes(&pi), "the routing's indices after the training's destroy",
                       what);
            free(got), free(want);
        }
        rudnn_routing_plan_destroy(r);
        const uint64_t after = rudnn_debug_live_objects();
        if (after != live) {
            rt_logf(&f->log, "  %s, %s: %lld object(s) alive after the training plan and its routing were "
                    "destroyed\n", OPT, what, (long long)(after - live));
            f->log.failures++;
        }
    }
    fx_finish(f);
}

/* The training plan keeps its logits' buffer alive: the caller's buffer destroyed, backward still reads the
 * logits (the same gradient as from a copy of them) and the buffer goes with the training plan. */
static void test_training_holds_logits(void **state)
{
    fx_t *f = *state;
    const rudnn_router_weight_options_t ok = opts_ok();
    rt_tensor_t copy;
    rt_tensor_create(&copy, RUDNN_F32, 2, dims_logits, 0, 0);
    uint8_t *values = read_bytes(&f->a.logits.t);
    rt_assert_status(rudnn_tensor_write(rt_queue, &copy.t, values, rudnn_tensor_bytes(&copy.t)),
                     RUDNN_STATUS_SUCCESS);
    free(values);
    const uint64_t live = rudnn_debug_live_objects(); /* the copy's buffer among them */
    rudnn_router_training_plan_t tr = NULL;
    const rudnn_status_t st = rudnn_routing_plan_into_training(rt_queue, f->a.plan, &copy.t, &ok, &tr);
    rt_tensor_destroy(&copy);
    if (!valid_ok(f, st, OPT, "logits held") || st)
        goto done;
    if (valid_ok(f, rudnn_router_training_plan_backward(rt_queue, tr, &f->a.gw.t, &f->a.gl.t), OPTB,
                 "logits destroyed by the caller") &&
        f->on_opencl) {
        uint8_t *got = read_bytes(&f->a.gl.t);
        rudnn_tensor_t pi;
        rt_assert_status(rudnn_routing_plan_indices(f->a.plan, &pi), RUDNN_STATUS_SUCCESS);
        rt_assert_status(rudnn_moe_selected_router_backward(rt_queue, &f->a.logits.t, &pi, &f->a.gw.t, &ok,
                                                            &f->a.gl.t),
                         RUDNN_STATUS_SUCCESS);
        uint8_t *want = read_bytes(&f->a.gl.t);
        same_bytes(f, got, want, rudnn_tensor_bytes(&f->a.gl.t), "grad_logits (the caller's logits destroyed)",
                   "logits held");
        free(got), free(want);
    }
    rudnn_router_training_plan_destroy(tr);
    const uint64_t after = rudnn_debug_live_objects();
    if (after != live - 1) {
        rt_logf(&f->log, "  %s: %lld object(s) alive after the training plan was destroyed, expected %lld (the "
                "logits' buffer gone with it)\n", OPT, (long long)after, (long long)live - 1);
        f->log.failures++;
    }
done:
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
        TC(test_experts_null),   TC(test_experts_context), TC(test_experts_dispatched), TC(test_experts_dtype),
        TC(test_experts_shapes), TC(test_experts_strategy), TC(test_experts_workspace), TC(test_experts_overlap),
        TC(test_experts_workspace_size), TC(test_experts_empty), TC(test_experts_success_clears_error),
        TC(test_experts_offsets),
        TC(test_training_null),  TC(test_training_context), TC(test_training_logits), TC(test_training_options),
        TC(test_training_top_k), TC(test_training_backward), TC(test_training_empty),
        TC(test_training_success_clears_error), TC(test_training_holds_logits),
    };
    return rt_run_with_second_context("moe_train-contract", tests, argc, argv);
}
