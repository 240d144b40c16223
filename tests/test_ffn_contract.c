/* Contract tests of FFN / MoeFFN (include/rudnn/ffn.h, ops/ffn.c), on the default backend. Every
 * rejected call returns the status of its rule (BAD_PARAM, BAD_SHAPE, BAD_DTYPE, DEVICE_MISMATCH),
 * a message that names the op ("ffn" or "ffn_workspace_size"), the argument and the rule, and writes
 * nothing: every buffer (y's poisoned with the sentinel, both contexts) is read back byte for byte,
 * and a rejected rudnn_ffn_workspace_size leaves *bytes as it was. A call that passes every check
 * gets SUCCESS from rudnn_ffn_workspace_size with rudnn_last_error() "", and from rudnn_ffn with a
 * workspace below that size BAD_PARAM for the workspace alone (its last check before the kernels;
 * nothing written); one with nothing to compute (0 bytes) succeeds and writes nothing. The numeric
 * suite (test_ffn.c) runs the valid calls.
 *
 * The fixture: one buffer a slot (x, weight1, ..., antiquant_offset2, y, a workspace) of 4 KiB,
 * poisoned, and one on a second context; each call describes its tensors over them. Shapes:
 * x [2, 3, 8] (M 6, K1 8), K2 = N2 = 8, N1 = 8 (16 gated), E = 2, expert_tokens {2, 3}.
 *
 * Usage: test_ffn_contract [glob] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/ffn.h>

#include "common.h"

#define SLOT_BYTES 4096
#define NE 2 /* experts */

enum { S_X, S_W1, S_W2, S_TOK, S_B1, S_B2, S_SC, S_OF, S_D1, S_D2, S_AS1, S_AO1, S_AS2, S_AO2, S_Y, S_WS, S_COUNT };

typedef struct fx {
    rt_tensor_t slot[S_COUNT];
    rt_tensor_t other; /* on the second context */
    rt_guard_t guard;
    rt_log_t log;
    int checks;
} fx_t;

/* A call: descriptors by slot (S_X .. S_AO2, S_Y) and the args pointing at them. */
typedef struct call {
    rudnn_tensor_t t[S_Y + 1];
    rudnn_ffn_args_t a;
} call_t;

typedef struct spec {
    const char *name;
    rudnn_dtype_t xd, wd;
    int experts, gated;
    int per_channel;      /* quantized: per-channel scale and deq scales */
    rudnn_dtype_t deq;    /* quantized */
    int64_t g1, g2;       /* weight-only: groups (0: per channel) */
    int biases, offsets;  /* biases given; antiquant offsets given */
} spec_t;

#define DIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

static rudnn_tensor_t mk(fx_t *f, int slot, rudnn_dtype_t dt, int rank, const int64_t *dims)
{
    return rt_tensor_desc(&f->slot[slot], dt, rank, dims, 0);
}

static void set_tokens(fx_t *f, int64_t v0, int64_t v1)
{
    int64_t v[NE] = {v0, v1};
    rt_assert_status(rudnn_buffer_write(rt_queue, f->slot[S_TOK].buffer, 0, v, sizeof v), RUDNN_STATUS_SUCCESS);
}

static int fx_setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    *state = f;
    static const int64_t n[1] = {SLOT_BYTES / 4};
    for (int i = 0; i < S_COUNT; i++) {
        rt_tensor_create(&f->slot[i], RUDNN_F32, 1, n, 0, RT_TAIL_BYTES);
        rt_guard_track(&f->guard, rt_queue, &f->slot[i], NULL);
    }
    rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
    rt_tensor_create(&f->other, RUDNN_F32, 1, n, 0, RT_TAIL_BYTES);
    rt_unbind(saved);
    rt_guard_track(&f->guard, rt_queue2, &f->other, NULL);
    set_tokens(f, 2, 3);
    return 0;
}

static int fx_teardown(void **state)
{
    fx_t *f = *state;
    rt_guard_free(&f->guard);
    for (int i = 0; i < S_COUNT; i++)
        rt_tensor_destroy(&f->slot[i]);
    rt_tensor_destroy(&f->other);
    free(f);
    return 0;
}

static void fx_finish(fx_t *f, const char *test)
{
    printf("ffn-contract: %s: %d calls checked\n", test, f->checks);
    rt_log_finish(&f->log, "check(s)");
}

/* Points args at the present descriptors (present[i] for slot i). */
static void link_args(call_t *c, const int *present)
{
    const rudnn_tensor_t **p[S_Y] = {&c->a.x, &c->a.weight1, &c->a.weight2, &c->a.expert_tokens, &c->a.bias1,
                                     &c->a.bias2, &c->a.scale, &c->a.offset, &c->a.deq_scale1, &c->a.deq_scale2,
                                     &c->a.antiquant_scale1, &c->a.antiquant_offset1, &c->a.antiquant_scale2,
                                     &c->a.antiquant_offset2};
    for (int i = 0; i < S_Y; i++)
        *p[i] = present[i] ? &c->t[i] : NULL;
}

/* A valid call of the spec's scenario. */
static void build(fx_t *f, const spec_t *s, call_t *c)
{
    memset(c, 0, sizeof *c);
    int present[S_Y] = {1, 1, 1};
    const int e = s->experts;
    const int64_t K1 = 8, K2 = 8, N1 = s->gated ? 16 : 8, N2 = 8;
    const int quant = s->xd == RUDNN_I8, wo = !quant && s->wd != s->xd;
    c->t[S_X] = mk(f, S_X, s->xd, DIMS(2, 3, K1));
    c->t[S_W1] = e ? mk(f, S_W1, s->wd, DIMS(NE, K1, N1)) : mk(f, S_W1, s->wd, DIMS(K1, N1));
    c->t[S_W2] = e ? mk(f, S_W2, s->wd, DIMS(NE, K2, N2)) : mk(f, S_W2, s->wd, DIMS(K2, N2));
    if (e) {
        c->t[S_TOK] = mk(f, S_TOK, RUDNN_I64, DIMS(NE));
        present[S_TOK] = 1;
    }
    rudnn_dtype_t bd = quant ? RUDNN_I32 : s->xd == RUDNN_F16 ? RUDNN_F16 : RUDNN_F32;
    if (s->biases) {
        c->t[S_B1] = e ? mk(f, S_B1, bd, DIMS(NE, N1)) : mk(f, S_B1, bd, DIMS(N1));
        c->t[S_B2] = e ? mk(f, S_B2, bd, DIMS(NE, N2)) : mk(f, S_B2, bd, DIMS(N2));
        present[S_B1] = present[S_B2] = 1;
    }
    rudnn_dtype_t yd = s->xd;
    if (quant) {
        const int64_t one = e ? NE : 1;
        c->t[S_SC] = !s->per_channel ? mk(f, S_SC, RUDNN_F32, DIMS(one))
                     : e             ? mk(f, S_SC, RUDNN_F32, DIMS(NE, K2))
                                     : mk(f, S_SC, RUDNN_F32, DIMS(K2));
        c->t[S_OF] = mk(f, S_OF, RUDNN_F32, DIMS(one));
        c->t[S_D1] = !s->per_channel ? mk(f, S_D1, s->deq, DIMS(one))
                     : e             ? mk(f, S_D1, s->deq, DIMS(NE, N1))
                                     : mk(f, S_D1, s->deq, DIMS(N1));
        c->t[S_D2] = !s->per_channel ? mk(f, S_D2, s->deq, DIMS(one))
                     : e             ? mk(f, S_D2, s->deq, DIMS(NE, N2))
                                     : mk(f, S_D2, s->deq, DIMS(N2));
        present[S_SC] = present[S_OF] = present[S_D1] = present[S_D2] = 1;
        yd = s->deq == RUDNN_BF16 ? RUDNN_BF16 : RUDNN_F16;
    }
    if (wo) {
        for (int m = 0; m < 2; m++) {
            int sl = m ? S_AS2 : S_AS1;
            int64_t g = m ? s->g2 : s->g1, n = m ? N2 : N1;
            for (int o = 0; o < 1 + (s->offsets != 0); o++, sl++) {
                c->t[sl] = g ? (e ? mk(f, sl, s->xd, DIMS(NE, g, n)) : mk(f, sl, s->xd, DIMS(g, n)))
                             : (e ? mk(f, sl, s->xd, DIMS(NE, n)) : mk(f, sl, s->xd, DIMS(n)));
                present[sl] = 1;
            }
        }
    }
    c->t[S_Y] = mk(f, S_Y, yd, DIMS(2, 3, N2));
    c->a.activation = s->gated ? RUDNN_FFN_SWIGLU : RUDNN_FFN_GELU;
    link_args(c, present);
}

/* Scenarios (the first of each kind is the base of that kind's rejection cases). */
static const spec_t sp_f16 = {"f16", RUDNN_F16, RUDNN_F16, 0, 0, 0, 0, 0, 0, 1, 0};
static const spec_t sp_bf16_gated = {"bf16 swiglu", RUDNN_BF16, RUDNN_BF16, 0, 1, 0, 0, 0, 0, 1, 0};
static const spec_t sp_f32 = {"f32, no biases", RUDNN_F32, RUDNN_F32, 0, 0, 0, 0, 0, 0, 0, 0};
static const spec_t sp_f16_e = {"f16 experts", RUDNN_F16, RUDNN_F16, 1, 0, 0, 0, 0, 0, 1, 0};
static const spec_t sp_bf16_e = {"bf16 experts swiglu", RUDNN_BF16, RUDNN_BF16, 1, 1, 0, 0, 0, 0, 1, 0};
static const spec_t sp_f32_e = {"f32 experts", RUDNN_F32, RUDNN_F32, 1, 0, 0, 0, 0, 0, 1, 0};
static const spec_t sp_q_t = {"w8a8 per tensor, f32 deq", RUDNN_I8, RUDNN_I8, 0, 0, 0, RUDNN_F32, 0, 0, 1, 0};
static const spec_t sp_q_c = {"w8a8 per channel, experts, bf16 deq", RUDNN_I8, RUDNN_I8, 1, 0, 1, RUDNN_BF16, 0, 0, 1, 0};
static const spec_t sp_q_i64 = {"w8a8 per channel, i64 deq", RUDNN_I8, RUDNN_I8, 0, 0, 1, RUDNN_I64, 0, 0, 1, 0};
static const spec_t sp_q_t_e = {"w8a8 per tensor, experts", RUDNN_I8, RUDNN_I8, 1, 0, 0, RUDNN_F32, 0, 0, 0, 0};
static const spec_t sp_wo8 = {"weight-only i8 per channel, f16", RUDNN_F16, RUDNN_I8, 0, 0, 0, 0, 0, 0, 1, 1};
static const spec_t sp_wo4 = {"weight-only i4 per group, bf16, experts", RUDNN_BF16, RUDNN_I4, 1, 0, 0, 0, 2, 4, 1, 0};
static const spec_t sp_wo4_c = {"weight-only i4 per channel, f16 swiglu", RUDNN_F16, RUDNN_I4, 0, 1, 0, 0, 0, 0, 0, 1};
static const spec_t sp_wo8_e = {"weight-only i8 per channel, bf16, experts", RUDNN_BF16, RUDNN_I8, 1, 0, 0, 0, 0, 0, 1, 1};

/* ---- checking one call ------------------------------------------------------------------------ */

/* Status, the message's needles (op with its ": ", n1, n2) and that no buffer changed. */
static void check(fx_t *f, rudnn_status_t st, rudnn_status_t want, const char *op, const char *n1, const char *n2,
                  const char *what)
{
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", rudnn_last_error() ? rudnn_last_error() : "(null)");
    int bad = 0;
    f->checks++;
    if (st != want) {
        rt_logf(&f->log, "  %s %s: returned %s, expected %s; message \"%s\"\n", op, what, rudnn_status_string(st),
                rudnn_status_string(want), msg);
        bad = 1;
    }
    const char *needles[3] = {op, n1, n2};
    for (int i = 0; i < 3; i++)
        if (needles[i] && !strstr(msg, needles[i])) {
            rt_logf(&f->log, "  %s %s: message \"%s\" does not mention \"%s\"\n", op, what, msg, needles[i]);
            bad = 1;
        }
    int changed = rt_guard_changed(&f->guard);
    if (changed) {
        rt_logf(&f->log, "  %s %s: %d buffer(s) written\n", op, what, changed);
        bad = 1;
    }
    f->log.failures += bad;
}

#define CHECK(f, want, op, n1, n2, what, call)                                                                 \
    do {                                                                                                       \
        rt_guard_begin(&(f)->guard);                                                                           \
        rudnn_status_t st_ = (call);                                                                           \
        check(f, st_, want, op, n1, n2, what);                                                                 \
    } while (0)

static rudnn_status_t run_ffn(const call_t *c) { return rudnn_ffn(rt_queue, &c->a, NULL, 0, &c->t[S_Y]); }

/* A rule both entries check: rudnn_ffn and rudnn_ffn_workspace_size (which keeps *bytes). */
static void both(fx_t *f, const call_t *c, rudnn_status_t want, const char *n1, const char *n2, const char *what)
{
    CHECK(f, want, "ffn:", n1, n2, what, run_ffn(c));
    size_t bytes = 12345;
    CHECK(f, want, "ffn_workspace_size:", n1, n2, what, rudnn_ffn_workspace_size(rt_queue, &c->a, &c->t[S_Y], &bytes));
    if (bytes != 12345) {
        rt_logf(&f->log, "  ffn_workspace_size %s: a rejected call wrote bytes (%zu)\n", what, bytes);
        f->log.failures++;
    }
}

/* A valid call passes every argument check: the workspace size is given with the error cleared, and
 * rudnn_ffn with one byte less (or past the 4 KiB workspace buffer) is refused for the workspace. */
static void valid(fx_t *f, const call_t *c, const char *what)
{
    size_t bytes = 12345;
    rudnn_status_t st = rudnn_ffn_workspace_size(rt_queue, &c->a, &c->t[S_Y], &bytes);
    f->checks++;
    if (st != RUDNN_STATUS_SUCCESS || bytes == 12345 || strcmp(rudnn_last_error(), "") != 0) {
        rt_logf(&f->log, "  ffn_workspace_size %s: returned %s, bytes %zu, error \"%s\"\n", what,
                rudnn_status_string(st), bytes, rudnn_last_error());
        f->log.failures++;
        return;
    }
    if (bytes == 0) {
        CHECK(f, RUDNN_STATUS_SUCCESS, "", NULL, NULL, what, run_ffn(c));
        return;
    }
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", "workspace_bytes", NULL, what,
          rudnn_ffn(rt_queue, &c->a, f->slot[S_WS].buffer, bytes - 1, &c->t[S_Y]));
}

/* A valid call whose y has no element: a workspace of 0 bytes, and rudnn_ffn succeeds without
 * one, writing nothing. */
static void empty_y(fx_t *f, const call_t *c, const char *what)
{
    size_t bytes = 12345;
    rudnn_status_t st = rudnn_ffn_workspace_size(rt_queue, &c->a, &c->t[S_Y], &bytes);
    f->checks++;
    if (st != RUDNN_STATUS_SUCCESS || bytes != 0) {
        rt_logf(&f->log, "  ffn_workspace_size %s: returned %s, bytes %zu (expected 0), error \"%s\"\n", what,
                rudnn_status_string(st), bytes, rudnn_last_error());
        f->log.failures++;
    }
    CHECK(f, RUDNN_STATUS_SUCCESS, "", NULL, NULL, what, run_ffn(c));
}

/* ---- valid calls ------------------------------------------------------------------------------ */

static void test_valid_calls(void **state)
{
    fx_t *f = *state;
    const spec_t *all[] = {&sp_f16, &sp_bf16_gated, &sp_f32, &sp_f16_e, &sp_bf16_e, &sp_f32_e, &sp_q_t, &sp_q_c,
                           &sp_q_i64, &sp_q_t_e, &sp_wo8, &sp_wo4, &sp_wo4_c, &sp_wo8_e};
    call_t c;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        build(f, all[i], &c);
        valid(f, &c, all[i]->name);
    }
    /* every activation and precision, deterministic; gated ones with N1 = 2 K2 */
    for (int act = 0; act <= RUDNN_FFN_REGLU; act++) {
        build(f, act >= RUDNN_FFN_GEGLU ? &sp_bf16_gated : &sp_f16, &c);
        c.a.activation = (rudnn_ffn_activation_t)act;
        c.a.precision = (rudnn_ffn_precision_t)(act % 2);
        c.a.deterministic = 1;
        valid(f, &c, "activation / precision");
    }
    build(f, &sp_f16, &c);
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(1, 1, 1, 1, 1, 2, 3, 8));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(1, 1, 1, 1, 1, 2, 3, 8));
    valid(f, &c, "x of rank 8");
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(6, 8));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(6, 8));
    valid(f, &c, "x of rank 2");
    /* K2 = 65535 (with K1 = 0: every tensor empty), M at its limit */
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(6, 0));
    c.t[S_W1] = mk(f, S_W1, RUDNN_F16, DIMS(0, 65535));
    c.t[S_W2] = mk(f, S_W2, RUDNN_F16, DIMS(65535, 0));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(6, 0));
    c.a.bias1 = c.a.bias2 = NULL;
    valid(f, &c, "K2 = 65535");
    c.t[S_W1] = mk(f, S_W1, RUDNN_F16, DIMS(0, 0));
    c.t[S_W2] = mk(f, S_W2, RUDNN_F16, DIMS(0, 0));
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(2147483632, 0));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(2147483632, 0));
    valid(f, &c, "M = 2^31 - 16 (f16)");
    /* y empty (K1 = N2 = 0) with K2 > 0 and M large: nothing to compute, no workspace. rudnn_ffn once
     * sized and computed h [M, N1] and the activation for it (here 2^30 x 8 x 4 bytes: ALLOC_FAILED
     * from a valid call; found while writing tests/fuzz/fuzz_ffn.c, whose seed ffn-empty-y-large-m
     * replays it) */
    c.t[S_W1] = mk(f, S_W1, RUDNN_F16, DIMS(0, 8));
    c.t[S_W2] = mk(f, S_W2, RUDNN_F16, DIMS(8, 0));
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(1 << 30, 0));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(1 << 30, 0));
    empty_y(f, &c, "y empty, K2 = 8, M = 2^30");
    build(f, &sp_q_c, &c); /* the expert form, quantized: expert_tokens {2, 3} still read and checked */
    c.t[S_W1] = mk(f, S_W1, RUDNN_I8, DIMS(NE, 0, 8));
    c.t[S_W2] = mk(f, S_W2, RUDNN_I8, DIMS(NE, 8, 0));
    c.t[S_B2] = mk(f, S_B2, RUDNN_I32, DIMS(NE, 0));
    c.t[S_D2] = mk(f, S_D2, RUDNN_BF16, DIMS(NE, 0));
    c.t[S_X] = mk(f, S_X, RUDNN_I8, DIMS(1 << 15, 1 << 15, 0));
    c.t[S_Y] = mk(f, S_Y, RUDNN_BF16, DIMS(1 << 15, 1 << 15, 0));
    empty_y(f, &c, "y empty, experts, M = 2^30");
    set_tokens(f, -1, 0);
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", "expert_tokens[0] = -1", NULL, "y empty, a negative count", run_ffn(&c));
    set_tokens(f, 2, 3);
    /* expert_tokens: counts of sum < M and = M, running totals */
    build(f, &sp_f16_e, &c);
    int64_t ok[5][3] = {{0, 0, 0}, {6, 0, 0}, {2, 3, 0}, {2, 6, 1}, {3, 3, 1}};
    for (int i = 0; i < 5; i++) {
        set_tokens(f, ok[i][0], ok[i][1]);
        c.a.expert_tokens_totals = (int)ok[i][2];
        valid(f, &c, ok[i][2] ? "expert_tokens totals" : "expert_tokens counts");
    }
    /* y beside x in x's buffer (disjoint) */
    build(f, &sp_f16, &c);
    c.t[S_Y] = rt_tensor_desc(&f->slot[S_X], RUDNN_F16, DIMS(2, 3, 8), 96);
    valid(f, &c, "y right after x in one buffer");
    fx_finish(f, "valid_calls");
}

/* ---- pointers, enums, descriptors ------------------------------------------------------------- */

static void test_pointers_and_enums(void **state)
{
    fx_t *f = *state;
    call_t c;
    build(f, &sp_f16, &c);
    size_t bytes = 7;
    const rudnn_tensor_t *y = &c.t[S_Y];
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", "queue", "NULL", "NULL queue", rudnn_ffn(NULL, &c.a, NULL, 0, y));
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", "args", "NULL", "NULL args", rudnn_ffn(rt_queue, NULL, NULL, 0, y));
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", "y", "NULL", "NULL y", rudnn_ffn(rt_queue, &c.a, NULL, 0, NULL));
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn_workspace_size:", "queue", "NULL", "NULL queue",
          rudnn_ffn_workspace_size(NULL, &c.a, y, &bytes));
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn_workspace_size:", "args", "NULL", "NULL args",
          rudnn_ffn_workspace_size(rt_queue, NULL, y, &bytes));
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn_workspace_size:", "y", "NULL", "NULL y",
          rudnn_ffn_workspace_size(rt_queue, &c.a, NULL, &bytes));
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn_workspace_size:", "bytes", "NULL", "NULL bytes",
          rudnn_ffn_workspace_size(rt_queue, &c.a, y, NULL));
    if (bytes != 7) {
        rt_logf(&f->log, "  ffn_workspace_size: a rejected call wrote bytes\n");
        f->log.failures++;
    }
    const char *req[3] = {"x", "weight1", "weight2"};
    for (int i = 0; i < 3; i++) {
        build(f, &sp_f16, &c);
        const rudnn_tensor_t **p = i == 0 ? &c.a.x : i == 1 ? &c.a.weight1 : &c.a.weight2;
        *p = NULL;
        both(f, &c, RUDNN_STATUS_BAD_PARAM, req[i], "NULL", "NULL required tensor");
    }
    build(f, &sp_f16, &c);
    c.a.activation = (rudnn_ffn_activation_t)7;
    both(f, &c, RUDNN_STATUS_BAD_PARAM, "activation", "0..6", "activation 7");
    c.a.activation = (rudnn_ffn_activation_t)-1;
    both(f, &c, RUDNN_STATUS_BAD_PARAM, "activation", "0..6", "activation -1");
    c.a.activation = RUDNN_FFN_GELU;
    c.a.precision = (rudnn_ffn_precision_t)2;
    both(f, &c, RUDNN_STATUS_BAD_PARAM, "precision", "HIGH_PERFORMANCE", "precision 2");
    c.a.precision = (rudnn_ffn_precision_t)-1;
    both(f, &c, RUDNN_STATUS_BAD_PARAM, "precision", NULL, "precision -1");
    fx_finish(f, "pointers_and_enums");
}

static void test_descriptors(void **state)
{
    fx_t *f = *state;
    call_t c;
    build(f, &sp_f16, &c);
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "x", "rank 1, expected 2..8", "x of rank 1");
    build(f, &sp_f16, &c);
    c.t[S_X].rank = 9;
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "x", "rank 9, expected 2..8", "x of rank 9");
    build(f, &sp_f16, &c);
    c.t[S_W1].dtype = (rudnn_dtype_t)99;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "weight1", "not a rudnn dtype", "weight1 dtype 99");
    build(f, &sp_f16, &c);
    c.t[S_B2] = mk(f, S_B2, RUDNN_F16, DIMS(SLOT_BYTES));
    both(f, &c, RUDNN_STATUS_OUT_OF_BOUNDS, "bias2", "buffer", "bias2 past its buffer");
    /* DEVICE_MISMATCH: each kind of tensor on the second context */
    const struct { const spec_t *s; int slot; const char *name; } dm[] = {
        {&sp_f16, S_X, "x"}, {&sp_f16, S_W2, "weight2"}, {&sp_f16_e, S_TOK, "expert_tokens"},
        {&sp_f16, S_B1, "bias1"}, {&sp_q_t, S_D2, "deq_scale2"}, {&sp_q_t, S_OF, "offset"},
        {&sp_wo8, S_AS1, "antiquant_scale1"}, {&sp_wo8, S_AO2, "antiquant_offset2"}, {&sp_f16, S_Y, "y"}};
    for (size_t i = 0; i < sizeof dm / sizeof dm[0]; i++) {
        build(f, dm[i].s, &c);
        c.t[dm[i].slot] = rt_tensor_desc(&f->other, c.t[dm[i].slot].dtype, c.t[dm[i].slot].rank,
                                         c.t[dm[i].slot].dims, 0);
        both(f, &c, RUDNN_STATUS_DEVICE_MISMATCH, dm[i].name, "another context", "tensor on the second context");
    }
    fx_finish(f, "descriptors");
}

/* ---- the scenario ---------------------------------------------------------------------------- */

static void test_scenario(void **state)
{
    fx_t *f = *state;
    call_t c;
    const struct { const spec_t *s; rudnn_dtype_t x, w1, w2; const char *arg, *rule; } dt[] = {
        {&sp_f16, RUDNN_I32, RUDNN_I32, RUDNN_I32, "x", "f16, bf16, f32 or i8"},
        {&sp_f16, RUDNN_BOOL, RUDNN_F16, RUDNN_F16, "x", "i8"},
        {&sp_f16, RUDNN_F16, RUDNN_F32, RUDNN_F32, "weight1", "x's dtype"},
        {&sp_f16, RUDNN_F16, RUDNN_BF16, RUDNN_BF16, "weight1", "i4"},
        {&sp_f32, RUDNN_F32, RUDNN_I8, RUDNN_I8, "weight1", "f16 or bf16 x"},
        {&sp_f32, RUDNN_F32, RUDNN_I4, RUDNN_I4, "weight1", "f16 or bf16 x"},
        {&sp_q_t, RUDNN_I8, RUDNN_F16, RUDNN_F16, "weight1", "expected i8"},
        {&sp_q_t, RUDNN_I8, RUDNN_I4, RUDNN_I4, "weight1", "expected i8"},
        {&sp_f16, RUDNN_F16, RUDNN_F16, RUDNN_F32, "weight2", "weight1's dtype"},
        {&sp_wo8, RUDNN_F16, RUDNN_I8, RUDNN_I4, "weight2", "weight1's dtype"},
        {&sp_q_t, RUDNN_I8, RUDNN_I8, RUDNN_F16, "weight2", "weight1's dtype"},
    };
    for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++) {
        build(f, dt[i].s, &c);
        c.t[S_X].dtype = dt[i].x;
        c.t[S_W1].dtype = dt[i].w1;
        c.t[S_W2].dtype = dt[i].w2;
        both(f, &c, RUDNN_STATUS_BAD_DTYPE, dt[i].arg, dt[i].rule, "x / weights dtypes");
    }
    /* arguments the scenario does not take */
    call_t q;
    build(f, &sp_q_t, &q);
    call_t w;
    build(f, &sp_wo8, &w);
    const char *qn[4] = {"scale", "offset", "deq_scale1", "deq_scale2"};
    const char *an[4] = {"antiquant_scale1", "antiquant_offset1", "antiquant_scale2", "antiquant_offset2"};
    /* c is rebuilt in place: these stay valid */
    const rudnn_tensor_t **qp[4] = {&c.a.scale, &c.a.offset, &c.a.deq_scale1, &c.a.deq_scale2};
    const rudnn_tensor_t **ap[4] = {&c.a.antiquant_scale1, &c.a.antiquant_offset1, &c.a.antiquant_scale2,
                                    &c.a.antiquant_offset2};
    for (int i = 0; i < 4; i++) {
        char given[64];
        build(f, &sp_f16, &c);
        c.t[S_SC + i] = q.t[S_SC + i];
        *qp[i] = &c.t[S_SC + i];
        snprintf(given, sizeof given, "%s is given", qn[i]);
        both(f, &c, RUDNN_STATUS_BAD_PARAM, given, "non-quantized", "non-quantized with a quantization argument");
        /* weight-only: a quantization argument */
        build(f, &sp_wo8, &c);
        c.t[S_SC + i] = q.t[S_SC + i];
        *qp[i] = &c.t[S_SC + i];
        both(f, &c, RUDNN_STATUS_BAD_PARAM, given, "weight-only", "weight-only with a quantization argument");
        /* quantized: a missing quantization argument */
        build(f, &sp_q_t, &c);
        *qp[i] = NULL;
        snprintf(given, sizeof given, "%s is NULL", qn[i]);
        both(f, &c, RUDNN_STATUS_BAD_PARAM, given, "needs all of", "quantized without a quantization argument");
        /* an antiquant argument: non-quantized, quantized */
        snprintf(given, sizeof given, "%s is given", an[i]);
        build(f, &sp_f16, &c);
        c.t[S_AS1 + i] = w.t[S_AS1 + i];
        *ap[i] = &c.t[S_AS1 + i];
        both(f, &c, RUDNN_STATUS_BAD_PARAM, given, "non-quantized", "non-quantized with an antiquant argument");
        build(f, &sp_q_t, &c);
        c.t[S_AS1 + i] = w.t[S_AS1 + i];
        *ap[i] = &c.t[S_AS1 + i];
        both(f, &c, RUDNN_STATUS_BAD_PARAM, given, "antiquant", "quantized with an antiquant argument");
    }
    build(f, &sp_wo8, &c);
    c.a.antiquant_scale1 = NULL;
    both(f, &c, RUDNN_STATUS_BAD_PARAM, "antiquant_scale1 is NULL", "weight-only", "weight-only without scale1");
    build(f, &sp_wo4, &c);
    c.a.antiquant_scale2 = NULL;
    both(f, &c, RUDNN_STATUS_BAD_PARAM, "antiquant_scale2 is NULL", "weight-only", "weight-only without scale2");
    fx_finish(f, "scenario");
}

/* ---- weights, expert_tokens, M ---------------------------------------------------------------- */

static void test_weights(void **state)
{
    fx_t *f = *state;
    call_t c;
    build(f, &sp_f16, &c);
    c.t[S_W1] = mk(f, S_W1, RUDNN_F16, DIMS(1, 8, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight1", "no expert_tokens", "3-D weight1 without expert_tokens");
    build(f, &sp_f16, &c);
    c.t[S_W2] = mk(f, S_W2, RUDNN_F16, DIMS(1, 8, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight2", "no expert_tokens", "3-D weight2 without expert_tokens");
    build(f, &sp_f16_e, &c);
    c.t[S_W1] = mk(f, S_W1, RUDNN_F16, DIMS(8, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight1", "expert_tokens is given", "2-D weight1 with expert_tokens");
    build(f, &sp_f16_e, &c);
    c.t[S_W2] = mk(f, S_W2, RUDNN_F16, DIMS(NE + 1, 8, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight2", "experts", "weight2 with 3 experts, weight1 2");
    build(f, &sp_f16, &c);
    c.t[S_W1] = mk(f, S_W1, RUDNN_F16, DIMS(7, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight1", "K1 = 7", "K1 != x's last dim");
    build(f, &sp_f16, &c);
    c.t[S_W2] = mk(f, S_W2, RUDNN_F16, DIMS(8, 4));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight2", "N2 = 4", "N2 != K1");
    build(f, &sp_f16, &c);
    c.t[S_W2] = mk(f, S_W2, RUDNN_F16, DIMS(4, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight2", "N1 = K2", "N1 != K2 (gelu)");
    build(f, &sp_bf16_gated, &c);
    c.t[S_W2] = mk(f, S_W2, RUDNN_BF16, DIMS(16, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight1", "N1 = 2 K2", "N1 = K2 (swiglu)");
    build(f, &sp_f16, &c);
    c.a.activation = RUDNN_FFN_GEGLU;
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight2", "geglu", "geglu with N1 = K2");
    build(f, &sp_bf16_gated, &c);
    c.a.activation = RUDNN_FFN_SILU;
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight2", "silu", "silu with N1 = 2 K2");
    /* K limits, with empty tensors */
    build(f, &sp_f16, &c);
    c.a.bias1 = c.a.bias2 = NULL;
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(0, 65536));
    c.t[S_W1] = mk(f, S_W1, RUDNN_F16, DIMS(65536, 0));
    c.t[S_W2] = mk(f, S_W2, RUDNN_F16, DIMS(0, 65536));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(0, 65536));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight1", "65535", "K1 = 65536");
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(6, 0));
    c.t[S_W1] = mk(f, S_W1, RUDNN_F16, DIMS(0, 65536));
    c.t[S_W2] = mk(f, S_W2, RUDNN_F16, DIMS(65536, 0));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(6, 0));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight2", "K2 = 65536", "K2 = 65536");
    /* I4: N even (dims count int4 values) */
    build(f, &sp_wo4_c, &c); /* swiglu: N1 = 2 K2 is even; relu with K2 = N1 = 9 */
    c.a.activation = RUDNN_FFN_RELU;
    c.t[S_W1] = mk(f, S_W1, RUDNN_I4, DIMS(8, 9));
    c.t[S_W2] = mk(f, S_W2, RUDNN_I4, DIMS(9, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight1", "even", "i4 weight1 with N1 = 9");
    build(f, &sp_wo4_c, &c);
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(2, 3, 7));
    c.t[S_W1] = mk(f, S_W1, RUDNN_I4, DIMS(7, 16));
    c.t[S_W2] = mk(f, S_W2, RUDNN_I4, DIMS(8, 7));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(2, 3, 7));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "weight2", "even", "i4 weight2 with N2 = 7");
    /* expert_tokens */
    build(f, &sp_f16_e, &c);
    c.t[S_TOK].dtype = RUDNN_I32;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "expert_tokens", "i64", "expert_tokens i32");
    c.t[S_TOK].dtype = RUDNN_F32;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "expert_tokens", "i64", "expert_tokens f32");
    c.t[S_TOK] = mk(f, S_TOK, RUDNN_I64, DIMS(NE + 1));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "expert_tokens", "one per expert", "expert_tokens [3], E = 2");
    c.t[S_TOK] = mk(f, S_TOK, RUDNN_I64, DIMS(1, NE));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "expert_tokens", "one per expert", "expert_tokens [1, 2]");
    /* M: rounded up to 32 bytes of x's elements, below INT32_MAX */
    build(f, &sp_f16, &c);
    c.a.bias1 = c.a.bias2 = NULL;
    c.t[S_W1] = mk(f, S_W1, RUDNN_F16, DIMS(0, 0));
    c.t[S_W2] = mk(f, S_W2, RUDNN_F16, DIMS(0, 0));
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(2147483633, 0));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(2147483633, 0));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "x", "INT32_MAX", "M = 2^31 - 15 (f16)");
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(65536, 65536, 0));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(65536, 65536, 0));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "x", "M (the product", "M = 2^32");
    build(f, &sp_f16, &c); /* a leading 0 makes M = 0 whatever the other dims (set by hand past int64:
                            * tensor_init refuses them; an empty tensor's strides are not used) */
    c.t[S_X] = mk(f, S_X, RUDNN_F16, DIMS(0, 1, 1, 8));
    c.t[S_Y] = mk(f, S_Y, RUDNN_F16, DIMS(0, 1, 1, 8));
    c.t[S_X].dims[1] = c.t[S_X].dims[2] = c.t[S_Y].dims[1] = c.t[S_Y].dims[2] = (int64_t)1 << 40;
    valid(f, &c, "leading dims 0 x 2^40 x 2^40: M = 0");
    fx_finish(f, "weights");
}

/* ---- biases, quantization and antiquant scales ------------------------------------------------ */

static void test_biases(void **state)
{
    fx_t *f = *state;
    call_t c;
    const struct { const spec_t *s; int slot; rudnn_dtype_t dt; const char *arg, *rule; } dt[] = {
        {&sp_f16, S_B1, RUDNN_F32, "bias1", "f16 biases"},     {&sp_bf16_gated, S_B2, RUDNN_BF16, "bias2", "f32"},
        {&sp_f32_e, S_B1, RUDNN_F16, "bias1", "f32 biases"},   {&sp_q_t, S_B1, RUDNN_F32, "bias1", "int32"},
        {&sp_q_c, S_B2, RUDNN_I8, "bias2", "int32"},           {&sp_wo8, S_B1, RUDNN_F32, "bias1", "f16"},
        {&sp_wo4, S_B2, RUDNN_BF16, "bias2", "f32 biases"},
    };
    for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++) {
        build(f, dt[i].s, &c);
        c.t[dt[i].slot].dtype = dt[i].dt;
        both(f, &c, RUDNN_STATUS_BAD_DTYPE, dt[i].arg, dt[i].rule, "bias dtype");
    }
    build(f, &sp_f16, &c);
    c.t[S_B1] = mk(f, S_B1, RUDNN_F16, DIMS(9));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "bias1", "[N1]", "bias1 [9]");
    build(f, &sp_bf16_gated, &c);
    c.t[S_B2] = mk(f, S_B2, RUDNN_F32, DIMS(16));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "bias2", "[N2]", "bias2 [N1]");
    build(f, &sp_bf16_gated, &c);
    c.t[S_B1] = mk(f, S_B1, RUDNN_F32, DIMS(1, 16));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "bias1", "[N1]", "bias1 [1, N1] without experts");
    build(f, &sp_f16_e, &c);
    c.t[S_B1] = mk(f, S_B1, RUDNN_F16, DIMS(8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "bias1", "[E, N1]", "bias1 [N1] with experts");
    build(f, &sp_q_c, &c);
    c.t[S_B2] = mk(f, S_B2, RUDNN_I32, DIMS(NE + 1, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "bias2", "[E, N2]", "bias2 [3, N2], E = 2");
    fx_finish(f, "biases");
}

static void test_quant(void **state)
{
    fx_t *f = *state;
    call_t c;
    const struct { const spec_t *s; int slot; rudnn_dtype_t dt; const char *arg, *rule; } dt[] = {
        {&sp_q_t, S_SC, RUDNN_F16, "scale", "f32"},           {&sp_q_t, S_OF, RUDNN_I32, "offset", "f32"},
        {&sp_q_t, S_D1, RUDNN_F16, "deq_scale1", "bf16 (bf16 y)"}, {&sp_q_t, S_D1, RUDNN_I32, "deq_scale1", "i64"},
        {&sp_q_t, S_D2, RUDNN_I64, "deq_scale2", "deq_scale1's dtype"},
        {&sp_q_c, S_D2, RUDNN_F32, "deq_scale2", "deq_scale1's dtype"},
    };
    for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++) {
        build(f, dt[i].s, &c);
        c.t[dt[i].slot].dtype = dt[i].dt;
        both(f, &c, RUDNN_STATUS_BAD_DTYPE, dt[i].arg, dt[i].rule, "quantization dtype");
    }
    const struct { const spec_t *s; int slot; rudnn_dtype_t dt; int rank; int64_t d0, d1; const char *arg, *rule; }
    sh[] = {
        {&sp_q_t, S_SC, RUDNN_F32, 1, 2, 0, "scale", "per tensor"},
        {&sp_q_t, S_SC, RUDNN_F32, 2, 1, 8, "scale", "per channel"},
        {&sp_q_c, S_SC, RUDNN_F32, 1, 8, 0, "scale", "[E, K2]"},
        {&sp_q_c, S_SC, RUDNN_F32, 2, NE + 1, 8, "scale", "E = 2"},
        {&sp_q_t, S_OF, RUDNN_F32, 1, 8, 0, "offset", "[1] (per tensor)"},
        {&sp_q_c, S_OF, RUDNN_F32, 2, NE, 8, "offset", "[E] (per tensor)"},
        {&sp_q_t, S_D1, RUDNN_F32, 1, 9, 0, "deq_scale1", "[N1]"},
        {&sp_q_c, S_D1, RUDNN_BF16, 1, 1, 0, "deq_scale1", "[E]"},
        {&sp_q_c, S_D2, RUDNN_BF16, 2, NE, 16, "deq_scale2", "[E, N2]"},
        {&sp_q_i64, S_D2, RUDNN_I64, 1, 2, 0, "deq_scale2", "[N2]"},
    };
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        build(f, sh[i].s, &c);
        c.t[sh[i].slot] = sh[i].rank == 1 ? mk(f, sh[i].slot, sh[i].dt, DIMS(sh[i].d0))
                                          : mk(f, sh[i].slot, sh[i].dt, DIMS(sh[i].d0, sh[i].d1));
        both(f, &c, RUDNN_STATUS_BAD_SHAPE, sh[i].arg, sh[i].rule, "quantization shape");
    }
    /* y's dtype follows the deq scales */
    build(f, &sp_q_t, &c);
    c.t[S_Y].dtype = RUDNN_BF16;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "y", "f16 y", "bf16 y with f32 deq scales");
    c.t[S_Y].dtype = RUDNN_I8;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "y", "f16 y", "i8 y (x's dtype) with f32 deq scales");
    build(f, &sp_q_c, &c);
    c.t[S_Y].dtype = RUDNN_F16;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "y", "bf16 y", "f16 y with bf16 deq scales");
    build(f, &sp_q_i64, &c);
    c.t[S_Y].dtype = RUDNN_F32;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "y", "f16 y", "f32 y with i64 deq scales");
    fx_finish(f, "quant");
}

static void test_antiquant(void **state)
{
    fx_t *f = *state;
    call_t c;
    build(f, &sp_wo8, &c);
    c.t[S_AS1].dtype = RUDNN_BF16;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "antiquant_scale1", "x's dtype", "bf16 scale for f16 x");
    build(f, &sp_wo4, &c);
    c.t[S_AS2].dtype = RUDNN_F32;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "antiquant_scale2", "x's dtype", "f32 scale for bf16 x");
    build(f, &sp_wo8, &c);
    c.t[S_AO1].dtype = RUDNN_F32;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "antiquant_offset1", "antiquant_scale1", "f32 offset, f16 scale");
    build(f, &sp_wo8, &c);
    c.t[S_AO2] = mk(f, S_AO2, RUDNN_F16, DIMS(1, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "antiquant_offset2", "antiquant_scale2", "offset [1, 8], scale [8]");
    build(f, &sp_wo4, &c);
    c.t[S_AO1] = mk(f, S_AO1, RUDNN_BF16, DIMS(NE, 4, 8));
    c.a.antiquant_offset1 = &c.t[S_AO1];
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "antiquant_offset1", "antiquant_scale1", "offset G 4, scale G 2");
    build(f, &sp_wo8, &c);
    c.t[S_AS1] = mk(f, S_AS1, RUDNN_F16, DIMS(2, 8));
    c.t[S_AO1] = mk(f, S_AO1, RUDNN_F16, DIMS(2, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "antiquant_scale1", "i4 weights only", "per group with i8 weights");
    build(f, &sp_wo4, &c);
    c.t[S_AS1] = mk(f, S_AS1, RUDNN_BF16, DIMS(NE, 3, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "antiquant_scale1", "divide K1", "G = 3, K1 = 8");
    build(f, &sp_wo4, &c);
    c.t[S_AS2] = mk(f, S_AS2, RUDNN_BF16, DIMS(NE, 0, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "antiquant_scale2", "divide K2", "G = 0");
    build(f, &sp_wo4, &c);
    c.t[S_AS2] = mk(f, S_AS2, RUDNN_BF16, DIMS(NE, 16, 8));
    both(f, &c, RUDNN_STATUS_BAD_SHAPE, "antiquant_scale2", "divide K2", "G = 16, K2 = 8");
    const struct { const spec_t *s; int slot; int rank; int64_t d0, d1, d2; const char *arg; } sh[] = {
        {&sp_wo8, S_AS1, 1, 9, 0, 0, "antiquant_scale1"},     {&sp_wo8, S_AS2, 1, 16, 0, 0, "antiquant_scale2"},
        {&sp_wo8, S_AS1, 3, 1, 1, 8, "antiquant_scale1"},     {&sp_wo8_e, S_AS1, 1, 8, 0, 0, "antiquant_scale1"},
        {&sp_wo8_e, S_AS2, 2, NE + 1, 8, 0, "antiquant_scale2"}, {&sp_wo4, S_AS1, 3, NE + 1, 2, 8, "antiquant_scale1"},
        {&sp_wo4, S_AS2, 3, NE, 4, 9, "antiquant_scale2"},    {&sp_wo4_c, S_AS1, 1, 8, 0, 0, "antiquant_scale1"},
    };
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        build(f, sh[i].s, &c);
        rudnn_dtype_t d = c.t[S_X].dtype;
        c.t[sh[i].slot] = sh[i].rank == 1   ? mk(f, sh[i].slot, d, DIMS(sh[i].d0))
                          : sh[i].rank == 2 ? mk(f, sh[i].slot, d, DIMS(sh[i].d0, sh[i].d1))
                                            : mk(f, sh[i].slot, d, DIMS(sh[i].d0, sh[i].d1, sh[i].d2));
        both(f, &c, RUDNN_STATUS_BAD_SHAPE, sh[i].arg, "per channel", "antiquant scale shape");
    }
    /* y: x's dtype, not the weights' */
    build(f, &sp_wo8, &c);
    c.t[S_Y].dtype = RUDNN_I8;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "y", "x's dtype", "i8 y, weight-only");
    fx_finish(f, "antiquant");
}

/* ---- y and the workspace ------------------------------------------------------------------------- */

static void test_output(void **state)
{
    fx_t *f = *state;
    call_t c;
    const int64_t bad[4][3] = {{2, 3, 9}, {3, 2, 8}, {6, 8, 0}, {2, 3, 16}};
    for (int i = 0; i < 4; i++) {
        build(f, i == 3 ? &sp_bf16_gated : &sp_f16, &c);
        c.t[S_Y] = i == 2 ? mk(f, S_Y, c.t[S_X].dtype, DIMS(6, 8))
                          : mk(f, S_Y, c.t[S_X].dtype, DIMS(bad[i][0], bad[i][1], bad[i][2]));
        both(f, &c, RUDNN_STATUS_BAD_SHAPE, "y", "x's shape", "y not of x's shape");
    }
    build(f, &sp_f16, &c);
    c.t[S_Y].dtype = RUDNN_F32;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "y", "x's dtype", "f32 y, f16 x");
    build(f, &sp_bf16_e, &c);
    c.t[S_Y].dtype = RUDNN_F16;
    both(f, &c, RUDNN_STATUS_BAD_DTYPE, "y", "x's dtype", "f16 y, bf16 x");
    /* y disjoint from every input, even exactly in place */
    const struct { const spec_t *s; int slot; size_t off; const char *name; } ov[] = {
        {&sp_f16, S_X, 0, "x"},       {&sp_f16, S_X, 64, "x"},   {&sp_f16, S_W1, 32, "weight1"},
        {&sp_f16, S_W2, 100, "weight2"}, {&sp_f16_e, S_TOK, 0, "expert_tokens"}, {&sp_f16, S_B2, 8, "bias2"},
        {&sp_q_c, S_SC, 0, "scale"}, {&sp_q_c, S_D2, 0, "deq_scale2"}, {&sp_wo8, S_AO1, 0, "antiquant_offset1"},
        {&sp_wo4, S_AS2, 16, "antiquant_scale2"},
    };
    for (size_t i = 0; i < sizeof ov / sizeof ov[0]; i++) {
        build(f, ov[i].s, &c);
        c.t[S_Y] = rt_tensor_desc(&f->slot[ov[i].slot], c.t[S_Y].dtype, c.t[S_Y].rank, c.t[S_Y].dims, ov[i].off);
        char n[64];
        snprintf(n, sizeof n, "y overlaps %s", ov[i].name);
        both(f, &c, RUDNN_STATUS_BAD_PARAM, n, "disjoint", "y overlapping an input");
    }
    fx_finish(f, "output");
}

static void test_workspace(void **state)
{
    fx_t *f = *state;
    call_t c;
    build(f, &sp_f16_e, &c);
    const rudnn_tensor_t *y = &c.t[S_Y];
    rudnn_buffer_t ws = f->slot[S_WS].buffer;
    size_t cap = f->slot[S_WS].buffer_bytes;
    size_t need = 0;
    CHECK(f, RUDNN_STATUS_SUCCESS, "", NULL, NULL, "workspace size", rudnn_ffn_workspace_size(rt_queue, &c.a, y, &need));
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", "too small", "rudnn_ffn_workspace_size", "workspace of 16 bytes",
          rudnn_ffn(rt_queue, &c.a, ws, 16, y));
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", "too small", "rudnn_ffn_workspace_size", "workspace one byte short",
          rudnn_ffn(rt_queue, &c.a, ws, need - 1, y));
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", "too small", NULL, "x's buffer, 0 bytes",
          rudnn_ffn(rt_queue, &c.a, f->slot[S_X].buffer, 0, y));
    CHECK(f, RUDNN_STATUS_DEVICE_MISMATCH, "ffn:", "workspace", "another context", "workspace on context 2",
          rudnn_ffn(rt_queue, &c.a, f->other.buffer, 64, y));
    CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", "workspace_bytes", "exceeds", "workspace_bytes past the buffer",
          rudnn_ffn(rt_queue, &c.a, ws, cap + 1, y));
    const struct { int slot; const char *name; } ov[] = {
        {S_X, "x overlaps"}, {S_W2, "weight2 overlaps"}, {S_TOK, "expert_tokens overlaps"}, {S_B1, "bias1 overlaps"},
        {S_Y, "y overlaps"}};
    for (size_t i = 0; i < sizeof ov / sizeof ov[0]; i++)
        CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", ov[i].name, "workspace", "workspace over a tensor",
              rudnn_ffn(rt_queue, &c.a, f->slot[ov[i].slot].buffer, need, y));
    fx_finish(f, "workspace");
}

/* ---- expert_tokens' values (rudnn_ffn only: rudnn_ffn_workspace_size does not read them) -------- */

static void test_token_values(void **state)
{
    fx_t *f = *state;
    call_t c;
    build(f, &sp_f16_e, &c);
    const struct { int64_t v0, v1; int totals; const char *n1, *n2; } bad[] = {
        {-1, 2, 0, "expert_tokens[0] = -1", "count >= 0"},       {2, -3, 0, "expert_tokens[1] = -3", "count >= 0"},
        {4, 3, 0, "expert_tokens", "sum <= M"},                   {7, 0, 0, "expert_tokens", "M = 6"},
        {INT64_MAX, INT64_MAX, 0, "expert_tokens", "sum <= M"},   {-1, 2, 1, "expert_tokens[0]", "running total >= 0"},
        {3, 2, 1, "expert_tokens[1] = 2", "must not decrease"},   {2, 7, 1, "expert_tokens", "sum <= M"},
        {7, 7, 1, "expert_tokens", "M = 6"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        set_tokens(f, bad[i].v0, bad[i].v1);
        c.a.expert_tokens_totals = bad[i].totals;
        CHECK(f, RUDNN_STATUS_BAD_PARAM, "ffn:", bad[i].n1, bad[i].n2, "expert_tokens values", run_ffn(&c));
        size_t bytes = 9;
        rudnn_status_t st = rudnn_ffn_workspace_size(rt_queue, &c.a, &c.t[S_Y], &bytes);
        f->checks++;
        if (st != RUDNN_STATUS_SUCCESS || bytes == 9) {
            rt_logf(&f->log, "  ffn_workspace_size: expert_tokens {%lld, %lld}: %s (it does not read them)\n",
                    (long long)bad[i].v0, (long long)bad[i].v1, rudnn_status_string(st));
            f->log.failures++;
        }
    }
    set_tokens(f, 2, 3);
    fx_finish(f, "token_values");
}

#define TC(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TC(test_valid_calls), TC(test_pointers_and_enums), TC(test_descriptors), TC(test_scenario),
        TC(test_weights),     TC(test_biases),             TC(test_quant),       TC(test_antiquant),
        TC(test_output),      TC(test_workspace),          TC(test_token_values),
    };
    return rt_run_with_second_context("ffn-contract", tests, argc, argv);
}
