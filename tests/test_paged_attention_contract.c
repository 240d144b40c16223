/* Contract tests of paged attention and MLA (include/rudnn/paged_attention.h) on the default
 * backend. Every rejected call returns the status of its rule (BAD_PARAM for NULLs, schedules,
 * values out of range, overlaps and workspaces; BAD_SHAPE for ranks and dims; BAD_DTYPE;
 * DEVICE_MISMATCH for another context's tensor; OUT_OF_BOUNDS for a view past its buffer;
 * NOT_SUPPORTED for a valid strided view), a message that starts with the op's name and names the
 * argument (and the rule where one word says it), and writes nothing: every buffer of the fixture
 * (the outputs holding a sentinel) is read back byte for byte after the call, and a plan, workspace
 * or cache handle the call would return keeps the value it had.
 *
 * The fixture (F32): a schedule of page_size 4, 6 pages, sequences of lengths 6 and 3 (tables
 * {4, 1 | pad 2} and {0}), queries (seq, pos) (0, 4), (0, 5), (1, 2); attention q [3, 4, 8],
 * k_cache [6, 4, 2, 8], v_cache [6, 4, 2, 6], out [3, 4, 6] (Hq 4, Hkv 2, D 8, Dv 6); MLA q
 * [3, 4, 8], qp [3, 4, 4], latent [6, 4, 1, 8], kp [6, 4, 1, 4], out [3, 4, 8]; append rows k
 * [3, 2, 8], v [3, 2, 6]. Each tensor has its own buffer with room after it, so views of other
 * shapes (D, Dv, P past their limits) fit. The attention and MLA rules run on the plain call and
 * on its _with_workspace form (a valid workspace of 2 splits).
 *
 * Usage: test_paged_attention_contract [glob] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/debug.h>
#include <rudnn/paged_attention.h>

#include "common.h"

#define OP_HOST "rudnn_paged_host_plan_create"
#define OP_PLAN "rudnn_paged_plan_create"
#define OP_ATT "rudnn_paged_attention"
#define OP_ATT_WS "rudnn_paged_attention_with_workspace"
#define OP_MLA "rudnn_paged_mla"
#define OP_MLA_WS "rudnn_paged_mla_with_workspace"
#define OP_SPLIT "rudnn_paged_split_workspace_create"
#define OP_COUNT "rudnn_paged_split_count"
#define OP_APPEND "rudnn_paged_append"

enum { T_Q, T_K, T_V, T_OUT, T_QP, T_LAT, T_KP, T_MOUT, T_KR, T_VR, T_COUNT };
static const char *const names[T_COUNT] = {"q",        "k_cache", "v_cache", "out", "qp",
                                           "latent_cache", "kp_cache", "out", "k",   "v"};
static const int64_t d_q[3] = {3, 4, 8}, d_k[4] = {6, 4, 2, 8}, d_v[4] = {6, 4, 2, 6}, d_out[3] = {3, 4, 6};
static const int64_t d_qp[3] = {3, 4, 4}, d_lat[4] = {6, 4, 1, 8}, d_kp[4] = {6, 4, 1, 4}, d_mout[3] = {3, 4, 8};
static const int64_t d_kr[3] = {3, 2, 8}, d_vr[3] = {3, 2, 6};
static const int ranks[T_COUNT] = {3, 4, 4, 3, 3, 4, 4, 3, 3, 3};
static const int64_t *const dims_of[T_COUNT] = {d_q, d_k, d_v, d_out, d_qp, d_lat, d_kp, d_mout, d_kr, d_vr};
/* room after each tensor: q, out, v, qp and kp hold views of D, Dv, R 1025 and P 257 */
static const size_t slack[T_COUNT] = {16384, 4096, 262144, 65536, 16384, 4096, 32768, 4096, 4096, 4096};

/* The fixture's schedule. */
static int64_t s_len[2] = {6, 3}, s_off[3] = {0, 3, 4}, s_sid[3] = {0, 0, 1}, s_pos[3] = {4, 5, 2};
static int32_t s_tab[4] = {4, 1, 2, 0};

typedef struct fx {
    rt_tensor_t t[T_COUNT];
    rt_guard_t guard;
    rudnn_paged_plan_t plan;
    rudnn_paged_split_workspace_t ws, ws_mla;
} fx_t;

static fx_t F;

static rudnn_paged_schedule_t schedule(void)
{
    return (rudnn_paged_schedule_t){4, 6, 2, s_len, s_off, s_tab, 3, s_sid, s_pos};
}

/* A plan of schedule s on rt_queue (the test fails if it is rejected). */
static rudnn_paged_plan_t plan_of(const rudnn_paged_schedule_t *s)
{
    rudnn_paged_host_plan_t h = NULL;
    rt_assert_status(rudnn_paged_host_plan_create(s, &h), RUDNN_STATUS_SUCCESS);
    rudnn_paged_plan_t p = NULL;
    rt_assert_status(rudnn_paged_plan_create(rt_queue, h, &p), RUDNN_STATUS_SUCCESS);
    rudnn_paged_host_plan_destroy(h);
    return p;
}

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof F);
    rt_rng_t r;
    rt_rng_seed(&r, 11);
    for (int i = 0; i < T_COUNT; i++) {
        rt_tensor_create(&F.t[i], RUDNN_F32, ranks[i], dims_of[i], 0, slack[i]);
        if (i != T_OUT && i != T_MOUT) /* the outputs keep create's sentinel */
            rt_tensor_fill_uniform(&F.t[i], &r, -1, 1);
        rt_guard_track(&F.guard, rt_queue, &F.t[i], names[i]);
    }
    const rudnn_paged_schedule_t s = schedule();
    F.plan = plan_of(&s);
    rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, 3, 4, 6, 2, &F.ws), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, 3, 4, 8, 2, &F.ws_mla), RUDNN_STATUS_SUCCESS);
    return 0;
}

static int teardown(void **state)
{
    rudnn_paged_split_workspace_destroy(F.ws);
    rudnn_paged_split_workspace_destroy(F.ws_mla);
    rudnn_paged_plan_destroy(F.plan);
    for (int i = 0; i < T_COUNT; i++)
        rt_tensor_destroy(&F.t[i]);
    rt_guard_free(&F.guard);
    return rt_group_teardown_second(state);
}

/* The message starts with "op:" and mentions every needle given. */
static void expect_message(const char *op, const char *n1, const char *n2, const char *n3)
{
    const char *m = rudnn_last_error();
    const size_t l = strlen(op);
    if (strncmp(m, op, l) || m[l] != ':')
        fail_msg("last error \"%s\" does not start with \"%s:\"", m, op);
    rt_assert_error_mentions(n1, n2, n3);
}

static void expect_unchanged(void)
{
    if (rt_guard_changed(&F.guard))
        fail_msg("a rejected call (%s) wrote to a buffer", rudnn_last_error());
}

/* Gives t a new rank and dims with row-major strides. */
static void reshape(rudnn_tensor_t *t, int rank, const int64_t *dims)
{
    t->rank = rank;
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t->dims[i] = dims[i];
        t->strides[i] = s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
}

/* ---- host plans --------------------------------------------------------------------------------- */

/* A copy of the fixture's schedule in arrays a test may edit. */
typedef struct sched_edit {
    rudnn_paged_schedule_t s;
    int64_t len[4], off[5], sid[4], pos[4];
    int32_t tab[8];
} sched_edit_t;

static void edit_init(sched_edit_t *e)
{
    memcpy(e->len, s_len, sizeof s_len), memcpy(e->off, s_off, sizeof s_off);
    memcpy(e->sid, s_sid, sizeof s_sid), memcpy(e->pos, s_pos, sizeof s_pos), memcpy(e->tab, s_tab, sizeof s_tab);
    e->s = (rudnn_paged_schedule_t){4, 6, 2, e->len, e->off, e->tab, 3, e->sid, e->pos};
}

static void expect_host_reject(const rudnn_paged_schedule_t *s, const char *n1, const char *n2, const char *n3)
{
    rudnn_paged_host_plan_t h = (rudnn_paged_host_plan_t)(uintptr_t)0x1234;
    rt_assert_status(rudnn_paged_host_plan_create(s, &h), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_HOST, n1, n2, n3);
    assert_ptr_equal(h, (rudnn_paged_host_plan_t)(uintptr_t)0x1234);
}

static void expect_host_accept(const rudnn_paged_schedule_t *s)
{
    rudnn_paged_host_plan_t h = NULL;
    rt_assert_status(rudnn_paged_host_plan_create(s, &h), RUDNN_STATUS_SUCCESS);
    assert_non_null(h);
    rudnn_paged_host_plan_destroy(h);
}

static void host_plan_rules(void **state)
{
    (void)state;
    sched_edit_t e;
    edit_init(&e), expect_host_accept(&e.s);

    /* NULLs */
    rudnn_paged_host_plan_t h = (rudnn_paged_host_plan_t)(uintptr_t)0x1234;
    rt_assert_status(rudnn_paged_host_plan_create(NULL, &h), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_HOST, "schedule", "NULL", NULL);
    assert_ptr_equal(h, (rudnn_paged_host_plan_t)(uintptr_t)0x1234);
    edit_init(&e);
    rt_assert_status(rudnn_paged_host_plan_create(&e.s, NULL), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_HOST, "plan", "NULL", NULL);
    edit_init(&e), e.s.lengths = NULL, expect_host_reject(&e.s, "lengths", "NULL", NULL);
    edit_init(&e), e.s.table_offsets = NULL, expect_host_reject(&e.s, "table_offsets", "NULL", NULL);
    edit_init(&e), e.s.tables = NULL, expect_host_reject(&e.s, "tables", "NULL", NULL);
    edit_init(&e), e.s.sequence_ids = NULL, expect_host_reject(&e.s, "sequence_ids", "NULL", NULL);
    edit_init(&e), e.s.positions = NULL, expect_host_reject(&e.s, "positions", "NULL", NULL);

    /* sizes */
    edit_init(&e), e.s.page_size = 0, expect_host_reject(&e.s, "page_size", NULL, NULL);
    edit_init(&e), e.s.page_size = -4, expect_host_reject(&e.s, "page_size", NULL, NULL);
    edit_init(&e), e.s.pages = 0, expect_host_reject(&e.s, "pages", NULL, NULL);
    edit_init(&e), e.s.sequences = 0, expect_host_reject(&e.s, "sequences", NULL, NULL);
    edit_init(&e), e.s.queries = -1, expect_host_reject(&e.s, "queries", NULL, NULL);
    edit_init(&e), e.len[1] = -1, expect_host_reject(&e.s, "lengths[1]", NULL, NULL);

    /* tables */
    edit_init(&e), e.off[0] = 1, expect_host_reject(&e.s, "table_offsets[0]", NULL, NULL);
    edit_init(&e), e.off[1] = 5, e.off[2] = 4; /* decreasing */
    expect_host_reject(&e.s, "table_offsets", "decrease", NULL);
    /* a table shorter than ceil(len / page_size): sequence 0 of 9 tokens needs 3 pages, has 3
     * entries only with the padding: give it 2 (offsets 0, 2, 3) */
    edit_init(&e), e.len[0] = 9, e.off[1] = 2, e.off[2] = 3, e.tab[2] = 0;
    expect_host_reject(&e.s, "sequence 0", "shorter", "ceil");
    edit_init(&e), e.len[1] = 5; /* 2 pages, a table of 1 */
    expect_host_reject(&e.s, "sequence 1", "shorter", NULL);
    /* a page out of range within a history: -1, == pages */
    edit_init(&e), e.tab[1] = -1, expect_host_reject(&e.s, "tables[1]", "outside", NULL);
    edit_init(&e), e.tab[3] = 6, expect_host_reject(&e.s, "tables[3]", "outside", NULL);
    /* a page repeated within one history */
    edit_init(&e), e.tab[1] = 4, expect_host_reject(&e.s, "sequence 0, table entry 1", "repeats page 4", "(entry 0)");
    /* padding past the history is never read: out of range or repeated there is fine */
    edit_init(&e), e.tab[2] = -5, expect_host_accept(&e.s);
    edit_init(&e), e.tab[2] = 4, expect_host_accept(&e.s);
    /* one page in two sequences' histories (a shared prefix) is fine */
    edit_init(&e), e.tab[3] = 4, expect_host_accept(&e.s);
    /* the repeat check costs by the history, not by the cache: the largest page count is fine */
    edit_init(&e), e.s.pages = INT32_MAX, expect_host_accept(&e.s);
    /* no history reads a page: tables may be NULL */
    edit_init(&e), e.len[0] = e.len[1] = 0, e.pos[0] = e.pos[1] = e.pos[2] = 0, e.s.tables = NULL;
    expect_host_accept(&e.s);

    /* queries */
    edit_init(&e), e.pos[2] = 4; /* sequence 1 has length 3 */
    expect_host_reject(&e.s, "positions[2]", "past", NULL);
    edit_init(&e), e.pos[0] = -1, expect_host_reject(&e.s, "positions[0]", NULL, NULL);
    edit_init(&e), e.pos[2] = 3, expect_host_accept(&e.s); /* pos == len: sees the whole history */
    edit_init(&e), e.sid[1] = 1, e.pos[1] = 2, e.sid[2] = 0, e.pos[2] = 5; /* sequences 0, 1, 0 */
    expect_host_reject(&e.s, "sequence_ids[2]", "sorted", NULL);
    edit_init(&e), e.sid[2] = 2, expect_host_reject(&e.s, "sequence_ids[2]", "not a sequence", NULL);
    edit_init(&e), e.sid[0] = -1, expect_host_reject(&e.s, "sequence_ids[0]", "not a sequence", NULL);
    /* no queries (the query arrays are then not read); a sequence of length 0 with no table */
    edit_init(&e), e.s.queries = 0, e.s.sequence_ids = NULL, e.s.positions = NULL, expect_host_accept(&e.s);
    edit_init(&e), e.len[1] = 0, e.off[2] = 3, e.pos[2] = 0, expect_host_accept(&e.s);
}

/* The repeat check over long histories (its hash set: collisions, wrap-around, tables of several
 * sizes in one schedule): distinct pages are accepted, and a repeat anywhere is found and named
 * with the entry it repeats, the first such entry of the history. */
static void host_plan_repeats_at_scale(void **state)
{
    (void)state;
    enum { N = 3, MOST = 5000 };
    static const int64_t need[N] = {5000, 1, 777};
    int64_t len[N], off[N + 1] = {0};
    for (int i = 0; i < N; i++)
        len[i] = need[i] * 16 - 3, off[i + 1] = off[i] + need[i];
    const int64_t pages = 4 * MOST;
    int32_t *tab = malloc((size_t)off[N] * sizeof *tab), *pool = malloc((size_t)pages * sizeof *pool);
    assert_non_null(tab), assert_non_null(pool);
    rt_rng_t rng;
    rt_rng_seed(&rng, 24);
    for (int64_t i = 0; i < pages; i++)
        pool[i] = (int32_t)i;
    /* each history a random draw of distinct pages (histories may share pages) */
    for (int i = 0; i < N; i++) {
        for (int64_t k = 0; k < need[i]; k++) {
            const int64_t j = k + (int64_t)rt_rng_below(&rng, (uint64_t)(pages - k));
            const int32_t t = pool[k];
            pool[k] = pool[j], pool[j] = t;
        }
        memcpy(tab + off[i], pool, (size_t)need[i] * sizeof *tab);
    }
    const rudnn_paged_schedule_t s = {16, pages, N, len, off, tab, 0, NULL, NULL};
    expect_host_accept(&s);
    static const int64_t at[][3] = {{0, 0, 4999}, {0, 4998, 4999}, {0, 17, 3000}, {2, 0, 776}, {2, 300, 301}};
    for (size_t c = 0; c < sizeof at / sizeof at[0]; c++) {
        const int64_t seq = at[c][0], e0 = at[c][1], e1 = at[c][2];
        int32_t *t = tab + off[seq];
        const int32_t keep = t[e1];
        t[e1] = t[e0];
        char n1[64], n2[64], n3[32];
        snprintf(n1, sizeof n1, "sequence %lld, table entry %lld", (long long)seq, (long long)e1);
        snprintf(n2, sizeof n2, "repeats page %d", (int)t[e0]);
        snprintf(n3, sizeof n3, "(entry %lld)", (long long)e0);
        expect_host_reject(&s, n1, n2, n3);
        t[e1] = keep;
    }
    /* two repeats: the first entry (in table order) that repeats an earlier one is named */
    tab[off[0] + 4000] = tab[off[0] + 10], tab[off[0] + 2000] = tab[off[0] + 1500];
    expect_host_reject(&s, "table entry 2000", "(entry 1500)", NULL);
    free(pool);
    free(tab);
}

static void plan_rules(void **state)
{
    (void)state;
    const rudnn_paged_schedule_t s = schedule();
    rudnn_paged_host_plan_t h = NULL;
    rt_assert_status(rudnn_paged_host_plan_create(&s, &h), RUDNN_STATUS_SUCCESS);
    rudnn_paged_plan_t p = (rudnn_paged_plan_t)(uintptr_t)0x5678;
    rt_assert_status(rudnn_paged_plan_create(NULL, h, &p), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_PLAN, "queue", NULL, NULL);
    assert_ptr_equal(p, (rudnn_paged_plan_t)(uintptr_t)0x5678);
    rt_assert_status(rudnn_paged_plan_create(rt_queue, NULL, &p), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_PLAN, "host", NULL, NULL);
    assert_ptr_equal(p, (rudnn_paged_plan_t)(uintptr_t)0x5678);
    rt_assert_status(rudnn_paged_plan_create(rt_queue, h, NULL), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_PLAN, "plan", NULL, NULL);
    rudnn_paged_host_plan_destroy(h);
    /* the queries of the plans: NULL plan */
    assert_int_equal(rudnn_paged_plan_device_bytes(NULL), 0);
    assert_null(rudnn_paged_plan_queue(NULL));
    assert_ptr_equal(rudnn_paged_plan_queue(F.plan), rt_queue);
    assert_true(rudnn_paged_plan_device_bytes(F.plan) > 0);
}

/* ---- attention and MLA ---------------------------------------------------------------------------- */

typedef struct cspec {
    int mla;
    rudnn_paged_plan_t plan;
    rudnn_paged_split_workspace_t ws;
    rudnn_tensor_t q, qp, k, kp, v, out;
    int null_tensor; /* -1 none, else the T_ index passed as NULL */
    float scale;
    int causal;
    int forms; /* bit 0: the plain call, bit 1: _with_workspace */
} cspec_t;

static void spec_att(cspec_t *c)
{
    memset(c, 0, sizeof *c);
    c->plan = F.plan, c->ws = F.ws;
    c->q = F.t[T_Q].t, c->k = F.t[T_K].t, c->v = F.t[T_V].t, c->out = F.t[T_OUT].t;
    c->null_tensor = -1, c->scale = 0.35f, c->causal = 1, c->forms = 3;
}

static void spec_mla(cspec_t *c)
{
    memset(c, 0, sizeof *c);
    c->mla = 1, c->plan = F.plan, c->ws = F.ws_mla;
    c->q = F.t[T_Q].t, c->qp = F.t[T_QP].t, c->k = F.t[T_LAT].t, c->kp = F.t[T_KP].t, c->out = F.t[T_MOUT].t;
    c->null_tensor = -1, c->scale = 0.35f, c->causal = 0, c->forms = 3;
}

static const char *spec_op(const cspec_t *c, int form)
{
    return c->mla ? (form ? OP_MLA_WS : OP_MLA) : (form ? OP_ATT_WS : OP_ATT);
}

static rudnn_status_t spec_call(const cspec_t *c, int form)
{
    const rudnn_tensor_t *q = c->null_tensor == T_Q ? NULL : &c->q;
    const rudnn_tensor_t *out = c->null_tensor == T_OUT || c->null_tensor == T_MOUT ? NULL : &c->out;
    if (c->mla) {
        const rudnn_tensor_t *qp = c->null_tensor == T_QP ? NULL : &c->qp;
        const rudnn_tensor_t *lat = c->null_tensor == T_LAT ? NULL : &c->k, *kp = c->null_tensor == T_KP ? NULL : &c->kp;
        return form ? rudnn_paged_mla_with_workspace(c->plan, c->ws, q, qp, lat, kp, c->scale, c->causal, out)
                    : rudnn_paged_mla(c->plan, q, qp, lat, kp, c->scale, c->causal, out);
    }
    const rudnn_tensor_t *k = c->null_tensor == T_K ? NULL : &c->k, *v = c->null_tensor == T_V ? NULL : &c->v;
    return form ? rudnn_paged_attention_with_workspace(c->plan, c->ws, q, k, v, c->scale, c->causal, out)
                : rudnn_paged_attention(c->plan, q, k, v, c->scale, c->causal, out);
}

static void expect3(const cspec_t *c, rudnn_status_t want, const char *n1, const char *n2, const char *n3)
{
    for (int form = 0; form < 2; form++) {
        if (!(c->forms >> form & 1))
            continue;
        rt_guard_begin(&F.guard);
        const rudnn_status_t st = spec_call(c, form);
        if (st != want)
            fail_msg("%s: returned %s, expected %s (%s)", spec_op(c, form), rudnn_status_string(st),
                     rudnn_status_string(want), rudnn_last_error());
        expect_message(spec_op(c, form), n1, n2, n3);
        expect_unchanged();
    }
}

static void expect(const cspec_t *c, rudnn_status_t want, const char *n1, const char *n2)
{
    expect3(c, want, n1, n2, NULL);
}

/* The fixture's calls are valid: every form, then the outputs poisoned again. */
static void valid_calls_pass(void **state)
{
    (void)state;
    cspec_t c;
    for (int mla = 0; mla < 2; mla++)
        for (int form = 0; form < 2; form++) {
            mla ? spec_mla(&c) : spec_att(&c);
            rt_assert_status(spec_call(&c, form), RUDNN_STATUS_SUCCESS);
            assert_string_equal(rudnn_last_error(), "");
        }
    rudnn_tensor_t ko, vo;
    rt_assert_status(rudnn_paged_append(F.plan, &F.t[T_KR].t, &F.t[T_VR].t, &F.t[T_K].t, &F.t[T_V].t, &ko, &vo),
                     RUDNN_STATUS_SUCCESS);
    assert_ptr_equal(ko.buffer, F.t[T_K].buffer);
    assert_ptr_equal(vo.buffer, F.t[T_V].buffer);
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_OUT]), rt_tensor_poison(&F.t[T_MOUT]);
}

static void null_arguments(void **state)
{
    (void)state;
    cspec_t c;
    for (int mla = 0; mla < 2; mla++) {
        mla ? spec_mla(&c) : spec_att(&c);
        c.plan = NULL;
        expect(&c, RUDNN_STATUS_BAD_PARAM, "plan", "NULL");
        const int roles[2][5] = {{T_Q, T_K, T_V, T_OUT, -1}, {T_Q, T_QP, T_LAT, T_KP, T_MOUT}};
        for (int i = 0; i < 5; i++) {
            if (roles[mla][i] < 0)
                continue;
            mla ? spec_mla(&c) : spec_att(&c);
            c.null_tensor = roles[mla][i];
            expect(&c, RUDNN_STATUS_BAD_PARAM, names[roles[mla][i]], "NULL");
        }
        mla ? spec_mla(&c) : spec_att(&c);
        c.ws = NULL, c.forms = 2;
        expect(&c, RUDNN_STATUS_BAD_PARAM, "workspace", "NULL");
        /* a tensor without a buffer */
        mla ? spec_mla(&c) : spec_att(&c);
        c.k.buffer = NULL;
        expect(&c, RUDNN_STATUS_BAD_PARAM, names[mla ? T_LAT : T_K], "buffer");
    }
}

static void shapes(void **state)
{
    (void)state;
    cspec_t c;
    /* ranks */
    {
        const int64_t q2[2] = {3, 32}, k3[3] = {6, 4, 16}, o4[4] = {3, 4, 6, 1};
        spec_att(&c), reshape(&c.q, 2, q2);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "q has", NULL);
        spec_att(&c), reshape(&c.k, 3, k3);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "k_cache has", NULL);
        spec_att(&c), reshape(&c.out, 4, o4);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "out has", NULL);
    }
    /* q's rows are not the plan's queries */
    {
        const int64_t q2[3] = {2, 4, 8}, q4[3] = {4, 4, 8}, o2[3] = {2, 4, 6}, mo4[3] = {4, 4, 8}, qp4[3] = {4, 4, 4};
        spec_att(&c), reshape(&c.q, 3, q2), reshape(&c.out, 3, o2);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "q has", "queries");
        spec_mla(&c), reshape(&c.q, 3, q4), reshape(&c.qp, 3, qp4), reshape(&c.out, 3, mo4);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "q has", "queries");
    }
    /* caches of other pages or page_size than the plan's (views inside the fixture's buffers) */
    {
        const int64_t k5[4] = {5, 4, 2, 8}, k7[4] = {7, 4, 2, 8}, kps[4] = {3, 8, 2, 8}, v5[4] = {5, 4, 2, 6};
        const int64_t vps[4] = {12, 2, 2, 6}, lat5[4] = {5, 4, 1, 8}, kpps[4] = {12, 2, 1, 4};
        spec_att(&c), reshape(&c.k, 4, k5);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "k_cache has", "page");
        spec_att(&c), reshape(&c.k, 4, k7);
        c.k.buffer = F.t[T_V].buffer; /* room for 7 pages */
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "k_cache has", "page");
        spec_att(&c), reshape(&c.k, 4, kps);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "k_cache has", "page_size");
        spec_att(&c), reshape(&c.v, 4, v5);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "v_cache has", "page");
        spec_att(&c), reshape(&c.v, 4, vps);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "v_cache has", "page_size");
        spec_mla(&c), reshape(&c.k, 4, lat5);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "latent_cache has", "page");
        spec_mla(&c), reshape(&c.kp, 4, kpps);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "kp_cache has", "page_size");
    }
    /* dims across tensors */
    {
        const int64_t kd[4] = {6, 4, 2, 4}, vh[4] = {6, 4, 1, 6}, o_h[3] = {3, 2, 6}, o_dv[3] = {3, 4, 5};
        spec_att(&c), reshape(&c.k, 4, kd); /* D 4 != q's 8 */
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "k_cache has", NULL);
        spec_att(&c), reshape(&c.v, 4, vh); /* Hkv 1 != k's 2 */
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "v_cache has", NULL);
        spec_att(&c), reshape(&c.out, 3, o_h);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "out has", NULL);
        spec_att(&c), reshape(&c.out, 3, o_dv);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "out has", NULL);
        const int64_t qp_h[3] = {3, 2, 4}, lat_r[4] = {6, 4, 1, 4}, lat_h[4] = {6, 4, 2, 8}, kp_p[4] = {6, 4, 1, 3};
        const int64_t mo_r[3] = {3, 4, 4}, kp_h[4] = {6, 4, 2, 4};
        spec_mla(&c), reshape(&c.qp, 3, qp_h);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "qp has", NULL);
        spec_mla(&c), reshape(&c.k, 4, lat_r);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "latent_cache has", NULL);
        spec_mla(&c), reshape(&c.k, 4, lat_h); /* the latent is one head */
        c.k.buffer = F.t[T_K].buffer;
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "latent_cache has", NULL);
        spec_mla(&c), reshape(&c.kp, 4, kp_p);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "kp_cache has", NULL);
        spec_mla(&c), reshape(&c.kp, 4, kp_h);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "kp_cache has", NULL);
        spec_mla(&c), reshape(&c.out, 3, mo_r);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "out has", NULL);
    }
    /* Hq not a multiple of Hkv: q [3, 3, 8] and out [3, 3, 6] over Hkv 2 */
    {
        const int64_t q3[3] = {3, 3, 8}, o3[3] = {3, 3, 6};
        spec_att(&c), reshape(&c.q, 3, q3), reshape(&c.out, 3, o3);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "multiple", NULL);
        const int64_t k4[4] = {6, 4, 4, 8}, v4[4] = {6, 4, 4, 6}, q1[3] = {3, 2, 8}, o1[3] = {3, 2, 6};
        spec_att(&c), reshape(&c.q, 3, q1), reshape(&c.out, 3, o1), reshape(&c.k, 4, k4), reshape(&c.v, 4, v4);
        c.k.buffer = F.t[T_V].buffer; /* Hkv 4 > Hq 2 */
        c.v.buffer = F.t[T_OUT].buffer, c.v.offset = 4096; /* clear of out */
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "k_cache has", "Hkv");
    }
    /* a view past the end of its buffer */
    spec_att(&c), c.k.offset = F.t[T_K].buffer_bytes - 16;
    expect(&c, RUDNN_STATUS_OUT_OF_BOUNDS, "k_cache", NULL);
    spec_mla(&c), c.kp.offset = F.t[T_KP].buffer_bytes - 16;
    expect(&c, RUDNN_STATUS_OUT_OF_BOUNDS, "kp_cache", NULL);
}

static void dims_in_range(void **state)
{
    (void)state;
    cspec_t c;
    char lim[32], plim[32];
    snprintf(lim, sizeof lim, "1..%d", RUDNN_PAGED_MAX_HEAD_DIM);
    snprintf(plim, sizeof plim, "1..%d", RUDNN_PAGED_MLA_MAX_ROPE_DIM);
    /* D 0 and D 1025 (q [3, 1, 1025]: room in q's buffer; its rule comes with q) */
    {
        const int64_t q0[3] = {3, 4, 0}, k0[4] = {6, 4, 2, 0}, qb[3] = {3, 1, RUDNN_PAGED_MAX_HEAD_DIM + 1};
        const int64_t kb[4] = {6, 4, 1, RUDNN_PAGED_MAX_HEAD_DIM + 1}, ob[3] = {3, 1, 6}, vb[4] = {6, 4, 1, 6};
        spec_att(&c), reshape(&c.q, 3, q0), reshape(&c.k, 4, k0);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "D", lim);
        spec_att(&c), reshape(&c.q, 3, qb), reshape(&c.k, 4, kb), reshape(&c.out, 3, ob), reshape(&c.v, 4, vb);
        c.k.buffer = F.t[T_V].buffer, c.v.buffer = F.t[T_K].buffer;
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "D", lim);
    }
    /* Dv 0 and 1025 */
    {
        const int64_t v0[4] = {6, 4, 2, 0}, o0[3] = {3, 4, 0};
        const int64_t vb[4] = {6, 4, 2, RUDNN_PAGED_MAX_HEAD_DIM + 1}, ob[3] = {3, 4, RUDNN_PAGED_MAX_HEAD_DIM + 1};
        spec_att(&c), reshape(&c.v, 4, v0), reshape(&c.out, 3, o0);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "Dv", lim);
        spec_att(&c), reshape(&c.v, 4, vb), reshape(&c.out, 3, ob);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "Dv", lim);
    }
    /* MLA: R 0 and 1025, P 0 and 257 */
    {
        const int64_t q0[3] = {3, 4, 0}, l0[4] = {6, 4, 1, 0}, o0[3] = {3, 4, 0};
        spec_mla(&c), reshape(&c.q, 3, q0), reshape(&c.k, 4, l0), reshape(&c.out, 3, o0);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "R", lim);
        const int64_t qb[3] = {3, 1, RUDNN_PAGED_MAX_HEAD_DIM + 1}, qp1[3] = {3, 1, 4}, ob[3] = {3, 1, 1};
        spec_mla(&c), reshape(&c.q, 3, qb), reshape(&c.qp, 3, qp1), reshape(&c.out, 3, ob);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "R", lim);
        const int64_t p0[3] = {3, 4, 0}, kp0[4] = {6, 4, 1, 0};
        spec_mla(&c), reshape(&c.qp, 3, p0), reshape(&c.kp, 4, kp0);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "P", plim);
        const int64_t pb[3] = {3, 4, RUDNN_PAGED_MLA_MAX_ROPE_DIM + 1}, kpb[4] = {6, 4, 1, RUDNN_PAGED_MLA_MAX_ROPE_DIM + 1};
        spec_mla(&c), reshape(&c.qp, 3, pb), reshape(&c.kp, 4, kpb);
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "P", plim);
    }
    /* the limits themselves pass the contract (the backend may still refuse a shape it cannot
     * hold: NOT_SUPPORTED naming the op, never a contract status) */
    {
        const int64_t pm[3] = {3, 4, RUDNN_PAGED_MLA_MAX_ROPE_DIM}, kpm[4] = {6, 4, 1, RUDNN_PAGED_MLA_MAX_ROPE_DIM};
        spec_mla(&c), reshape(&c.qp, 3, pm), reshape(&c.kp, 4, kpm);
        const rudnn_status_t st = spec_call(&c, 0);
        rudnn_queue_synchronize(rt_queue);
        if (st != RUDNN_STATUS_SUCCESS) {
            rt_assert_status(st, RUDNN_STATUS_NOT_SUPPORTED);
            expect_message(OP_MLA, NULL, NULL, NULL);
        }
        rt_tensor_poison(&F.t[T_MOUT]);
    }
}

static void dtypes(void **state)
{
    (void)state;
    cspec_t c;
    spec_att(&c), c.q.dtype = RUDNN_I8;
    expect(&c, RUDNN_STATUS_BAD_DTYPE, "q has", NULL);
    spec_att(&c), c.q.dtype = RUDNN_I32;
    expect(&c, RUDNN_STATUS_BAD_DTYPE, "q has", NULL);
    spec_att(&c), c.k.dtype = RUDNN_F16;
    expect(&c, RUDNN_STATUS_BAD_DTYPE, "k_cache has", "dtype");
    spec_att(&c), c.v.dtype = RUDNN_BF16;
    expect(&c, RUDNN_STATUS_BAD_DTYPE, "v_cache has", "dtype");
    spec_att(&c), c.out.dtype = RUDNN_F16;
    expect(&c, RUDNN_STATUS_BAD_DTYPE, "out has", "dtype");
    /* all F16 but one F32 */
    spec_att(&c), c.q.dtype = c.k.dtype = c.out.dtype = RUDNN_F16;
    expect(&c, RUDNN_STATUS_BAD_DTYPE, "v_cache has", "dtype");
    spec_mla(&c), c.qp.dtype = RUDNN_BF16;
    expect(&c, RUDNN_STATUS_BAD_DTYPE, "qp has", "dtype");
    spec_mla(&c), c.kp.dtype = RUDNN_F16;
    expect(&c, RUDNN_STATUS_BAD_DTYPE, "kp_cache has", "dtype");
    spec_mla(&c), c.k.dtype = RUDNN_BF16;
    expect(&c, RUDNN_STATUS_BAD_DTYPE, "latent_cache has", "dtype");
    /* quantized caches are not taken */
    spec_att(&c), c.q.dtype = c.k.dtype = c.v.dtype = c.out.dtype = RUDNN_I8;
    expect(&c, RUDNN_STATUS_BAD_DTYPE, "q has", NULL);
}

static void layouts(void **state)
{
    (void)state;
    cspec_t c;
    /* strided views inside the buffers: every other element of the last dim */
    spec_att(&c), c.q.strides[2] = 2, c.q.strides[1] = 16, c.q.strides[0] = 64;
    expect(&c, RUDNN_STATUS_NOT_SUPPORTED, "q", "contiguous");
    spec_att(&c), c.k.strides[0] = 128; /* pages 128 elements apart */
    expect(&c, RUDNN_STATUS_NOT_SUPPORTED, "k_cache", "contiguous");
    spec_att(&c), c.v.strides[1] = 24, c.v.strides[0] = 96; /* rows 24 apart */
    expect(&c, RUDNN_STATUS_NOT_SUPPORTED, "v_cache", "contiguous");
    spec_att(&c), c.out.strides[0] = 48;
    expect(&c, RUDNN_STATUS_NOT_SUPPORTED, "out", "contiguous");
    spec_mla(&c), c.qp.strides[0] = 32;
    expect(&c, RUDNN_STATUS_NOT_SUPPORTED, "qp", "contiguous");
    spec_mla(&c), c.kp.strides[0] = 32;
    expect(&c, RUDNN_STATUS_NOT_SUPPORTED, "kp_cache", "contiguous");
    /* an offset that is not a multiple of the element size */
    spec_att(&c), c.v.offset = 2;
    expect(&c, RUDNN_STATUS_BAD_PARAM, "v_cache", "offset");
    /* strides that describe no view */
    spec_att(&c), c.q.strides[1] = 0;
    expect(&c, RUDNN_STATUS_BAD_SHAPE, "q", NULL);
}

static void overlaps(void **state)
{
    (void)state;
    cspec_t c;
    spec_att(&c), c.out.buffer = F.t[T_Q].buffer, c.out.offset = 16;
    expect(&c, RUDNN_STATUS_BAD_PARAM, "out", "q");
    spec_att(&c), c.out.buffer = F.t[T_V].buffer, c.out.offset = 64;
    expect(&c, RUDNN_STATUS_BAD_PARAM, "out", "v_cache");
    spec_mla(&c), c.out.buffer = F.t[T_KP].buffer;
    expect(&c, RUDNN_STATUS_BAD_PARAM, "out", "kp_cache");
    /* inputs may share memory (read only): k and v the same bytes (D = Dv) is valid */
    spec_att(&c);
    const int64_t v8[4] = {6, 4, 2, 8}, o8[3] = {3, 4, 8};
    c.v = c.k, reshape(&c.v, 4, v8);
    reshape(&c.out, 3, o8);
    rt_assert_status(spec_call(&c, 0), RUDNN_STATUS_SUCCESS);
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_OUT]);
}

static void scales(void **state)
{
    (void)state;
    const float bad[6] = {0.0f, -0.0f, -0.5f, NAN, INFINITY, -INFINITY};
    for (int mla = 0; mla < 2; mla++)
        for (int i = 0; i < 6; i++) {
            cspec_t c;
            mla ? spec_mla(&c) : spec_att(&c);
            c.scale = bad[i];
            expect(&c, RUDNN_STATUS_BAD_PARAM, "scale", NULL);
        }
}

static void other_context(void **state)
{
    (void)state;
    if (!rt_ctx2) {
        printf("    no second context: DEVICE_MISMATCH not checked\n");
        return;
    }
    const int roles[2][5] = {{T_Q, T_K, T_V, T_OUT, -1}, {T_Q, T_QP, T_LAT, T_KP, T_MOUT}};
    for (int mla = 0; mla < 2; mla++)
        for (int i = 0; i < 5; i++) {
            const int t = roles[mla][i];
            if (t < 0)
                continue;
            rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
            rt_tensor_t o;
            rt_tensor_create(&o, RUDNN_F32, ranks[t], dims_of[t], 0, 0);
            rt_unbind(saved);
            cspec_t c;
            mla ? spec_mla(&c) : spec_att(&c);
            rudnn_tensor_t *slot[T_COUNT] = {&c.q, &c.k, &c.v, &c.out, &c.qp, &c.k, &c.kp, &c.out, NULL, NULL};
            *slot[t] = o.t;
            expect(&c, RUDNN_STATUS_DEVICE_MISMATCH, names[t], NULL);
            saved = rt_bind(rt_ctx2, rt_queue2);
            rt_tensor_destroy(&o);
            rt_unbind(saved);
        }
}

/* A plan whose queue was destroyed: its calls are refused (the plan keeps its object alive). */
static void dead_queue(void **state)
{
    (void)state;
    rudnn_queue_t q2 = NULL;
    rt_assert_status(rudnn_queue_create(rt_ctx, &q2), RUDNN_STATUS_SUCCESS);
    const rudnn_paged_schedule_t s = schedule();
    rudnn_paged_host_plan_t h = NULL;
    rt_assert_status(rudnn_paged_host_plan_create(&s, &h), RUDNN_STATUS_SUCCESS);
    rudnn_paged_plan_t p = NULL;
    rt_assert_status(rudnn_paged_plan_create(q2, h, &p), RUDNN_STATUS_SUCCESS);
    rudnn_paged_host_plan_destroy(h);
    assert_ptr_equal(rudnn_paged_plan_queue(p), q2);
    rudnn_queue_synchronize(q2);
    rudnn_queue_destroy(q2);
    cspec_t c;
    spec_att(&c), c.plan = p;
    expect(&c, RUDNN_STATUS_BAD_PARAM, "queue", NULL);
    rudnn_tensor_t ko;
    rt_guard_begin(&F.guard);
    rt_assert_status(rudnn_paged_append(p, &F.t[T_KR].t, NULL, &F.t[T_K].t, NULL, &ko, NULL), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_APPEND, "queue", NULL, NULL);
    expect_unchanged();
    rudnn_paged_plan_destroy(p);
}

/* ---- split workspaces ------------------------------------------------------------------------------ */

static void expect_ws_reject(rudnn_queue_t q, int64_t queries, int64_t heads, int64_t vd, int splits,
                             rudnn_status_t want, const char *n1, const char *n2)
{
    rudnn_paged_split_workspace_t w = (rudnn_paged_split_workspace_t)(uintptr_t)0x9abc;
    uint64_t allocs0, bytes0, allocs1, bytes1;
    rudnn_debug_device_memory(&allocs0, &bytes0);
    rt_assert_status(rudnn_paged_split_workspace_create(q, queries, heads, vd, splits, &w), want);
    expect_message(OP_SPLIT, n1, n2, NULL);
    assert_ptr_equal(w, (rudnn_paged_split_workspace_t)(uintptr_t)0x9abc);
    rudnn_debug_device_memory(&allocs1, &bytes1);
    assert_int_equal(allocs1, allocs0); /* nothing allocated, nothing kept */
}

static void split_workspace_rules(void **state)
{
    (void)state;
    expect_ws_reject(rt_queue, 3, 4, 6, 1, RUDNN_STATUS_BAD_PARAM, "splits", "2..32");
    expect_ws_reject(rt_queue, 3, 4, 6, 33, RUDNN_STATUS_BAD_PARAM, "splits", "2..32");
    expect_ws_reject(rt_queue, 3, 4, 6, -2, RUDNN_STATUS_BAD_PARAM, "splits", NULL);
    expect_ws_reject(NULL, 3, 4, 6, 2, RUDNN_STATUS_BAD_PARAM, "queue", NULL);
    expect_ws_reject(rt_queue, 0, 4, 6, 2, RUDNN_STATUS_BAD_PARAM, "queries", NULL);
    expect_ws_reject(rt_queue, 3, 0, 6, 2, RUDNN_STATUS_BAD_SHAPE, "heads", NULL);
    expect_ws_reject(rt_queue, 3, 4, 0, 2, RUDNN_STATUS_BAD_SHAPE, "value_dim", NULL);
    expect_ws_reject(rt_queue, 3, 4, RUDNN_PAGED_MAX_HEAD_DIM + 1, 2, RUDNN_STATUS_BAD_SHAPE, "value_dim", NULL);
    rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, 3, 4, 6, 2, NULL), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_SPLIT, "workspace", NULL, NULL);
    /* 64 MiB: splits x queries x heads x (value_dim + 2) x 4 bytes; 2 x 8192 x 8 x 128 x 4 is the
     * limit exactly (taken), a value_dim one larger is past it (refused, naming the limit) */
    expect_ws_reject(rt_queue, 8192, 8, 127, 2, RUDNN_STATUS_BAD_PARAM, "64 MiB", NULL);
    expect_ws_reject(rt_queue, 4096, 64, 1024, 32, RUDNN_STATUS_BAD_PARAM, "MiB", NULL);
    rudnn_paged_split_workspace_t w = NULL;
    rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, 8192, 8, 126, 2, &w), RUDNN_STATUS_SUCCESS);
    assert_true(rudnn_paged_split_workspace_bytes(w) <= RUDNN_PAGED_SPLIT_WORKSPACE_MAX_BYTES);
    rudnn_paged_split_workspace_destroy(w);
    /* splits 0 on a shape past the limit: capped to fit, not refused */
    w = NULL;
    rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, 4096, 64, 1024, 0, &w), RUDNN_STATUS_SUCCESS);
    assert_true(rudnn_paged_split_workspace_bytes(w) <= RUDNN_PAGED_SPLIT_WORKSPACE_MAX_BYTES);
    rudnn_paged_split_workspace_destroy(w);
    assert_int_equal(rudnn_paged_split_workspace_bytes(NULL), 0);
}

/* A workspace of other shapes than the call, or of another queue, is refused by the call. */
static void split_workspace_use(void **state)
{
    (void)state;
    cspec_t c;
    static const struct {
        int64_t queries, heads, vd;
    } other[] = {{4, 4, 6}, {3, 2, 6}, {3, 4, 7}, {2, 4, 6}};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        rudnn_paged_split_workspace_t w = NULL;
        rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, other[i].queries, other[i].heads, other[i].vd,
                                                            4, &w),
                         RUDNN_STATUS_SUCCESS);
        spec_att(&c), c.ws = w, c.forms = 2;
        expect(&c, RUDNN_STATUS_BAD_SHAPE, "workspace", NULL);
        /* the count query knows queries and heads, not the call's value_dim */
        int n = -7;
        const rudnn_status_t st = rudnn_paged_split_count(F.plan, w, 4, 2, &n);
        if (other[i].queries == 3 && other[i].heads == 4) {
            rt_assert_status(st, RUDNN_STATUS_SUCCESS);
            assert_int_equal(n, 4);
        } else {
            rt_assert_status(st, RUDNN_STATUS_BAD_SHAPE);
            expect_message(OP_COUNT, "workspace", NULL, NULL);
            assert_int_equal(n, -7);
        }
        rudnn_paged_split_workspace_destroy(w);
    }
    /* the MLA workspace (value_dim R 8) for attention (Dv 6), and the other way round */
    spec_att(&c), c.ws = F.ws_mla, c.forms = 2;
    expect(&c, RUDNN_STATUS_BAD_SHAPE, "workspace", NULL);
    spec_mla(&c), c.ws = F.ws, c.forms = 2;
    expect(&c, RUDNN_STATUS_BAD_SHAPE, "workspace", NULL);
    /* another queue of the same context */
    rudnn_queue_t q2 = NULL;
    rt_assert_status(rudnn_queue_create(rt_ctx, &q2), RUDNN_STATUS_SUCCESS);
    rudnn_paged_split_workspace_t w = NULL;
    rt_assert_status(rudnn_paged_split_workspace_create(q2, 3, 4, 6, 2, &w), RUDNN_STATUS_SUCCESS);
    spec_att(&c), c.ws = w, c.forms = 2;
    expect(&c, RUDNN_STATUS_BAD_PARAM, "workspace", "queue");
    int n = -7;
    rt_assert_status(rudnn_paged_split_count(F.plan, w, 4, 2, &n), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_COUNT, "workspace", "queue", NULL);
    assert_int_equal(n, -7);
    rudnn_paged_split_workspace_destroy(w);
    rudnn_queue_destroy(q2);
    /* rudnn_paged_split_count: its own NULLs; the fixed count comes back */
    rt_assert_status(rudnn_paged_split_count(NULL, F.ws, 4, 2, &n), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_COUNT, "plan", NULL, NULL);
    rt_assert_status(rudnn_paged_split_count(F.plan, NULL, 4, 2, &n), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_COUNT, "workspace", NULL, NULL);
    rt_assert_status(rudnn_paged_split_count(F.plan, F.ws, 4, 2, NULL), RUDNN_STATUS_BAD_PARAM);
    expect_message(OP_COUNT, "splits", NULL, NULL);
    assert_int_equal(n, -7);
    /* query heads not a multiple of the KV heads, KV heads above the query heads */
    rt_assert_status(rudnn_paged_split_count(F.plan, F.ws, 4, 3, &n), RUDNN_STATUS_BAD_SHAPE);
    expect_message(OP_COUNT, "heads_q = 4", "multiple of heads_kv = 3", NULL);
    rt_assert_status(rudnn_paged_split_count(F.plan, F.ws, 4, 8, &n), RUDNN_STATUS_BAD_SHAPE);
    expect_message(OP_COUNT, "heads_kv", "1..4", NULL);
    assert_int_equal(n, -7);
    rt_assert_status(rudnn_paged_split_count(F.plan, F.ws, 4, 2, &n), RUDNN_STATUS_SUCCESS);
    assert_int_equal(n, 2);
}

/* ---- append ---------------------------------------------------------------------------------------- */

typedef struct aspec {
    rudnn_paged_plan_t plan;
    rudnn_tensor_t k, v, kc, vc;
    int null_k, null_kc, null_v, null_vc, null_kout, null_vout;
} aspec_t;

static void spec_append(aspec_t *a)
{
    memset(a, 0, sizeof *a);
    a->plan = F.plan;
    a->k = F.t[T_KR].t, a->v = F.t[T_VR].t, a->kc = F.t[T_K].t, a->vc = F.t[T_V].t;
}

/* Refused with want, naming the op and the needles, nothing written, the handles untouched, no
 * device memory taken (a refused append makes no copy, even of a shared cache). */
static void expect_append(const aspec_t *a, rudnn_status_t want, const char *n1, const char *n2, const char *n3)
{
    rudnn_tensor_t ko, vo, ko0, vo0;
    memset(&ko, 0x5a, sizeof ko), memset(&vo, 0x5a, sizeof vo);
    ko0 = ko, vo0 = vo;
    uint64_t allocs0, bytes0, allocs1, bytes1;
    rt_guard_begin(&F.guard);
    rudnn_debug_device_memory(&allocs0, &bytes0);
    const rudnn_status_t st =
        rudnn_paged_append(a->plan, a->null_k ? NULL : &a->k, a->null_v ? NULL : &a->v, a->null_kc ? NULL : &a->kc,
                           a->null_vc ? NULL : &a->vc, a->null_kout ? NULL : &ko, a->null_vout ? NULL : &vo);
    rudnn_debug_device_memory(&allocs1, &bytes1);
    if (st != want)
        fail_msg("%s: returned %s, expected %s (%s)", OP_APPEND, rudnn_status_string(st), rudnn_status_string(want),
                 rudnn_last_error());
    expect_message(OP_APPEND, n1, n2, n3);
    expect_unchanged();
    assert_memory_equal(&ko, &ko0, sizeof ko);
    assert_memory_equal(&vo, &vo0, sizeof vo);
    assert_int_equal(allocs1, allocs0);
}

static void append_rules(void **state)
{
    (void)state;
    aspec_t a;
    /* NULLs */
    spec_append(&a), a.plan = NULL, expect_append(&a, RUDNN_STATUS_BAD_PARAM, "plan", NULL, NULL);
    spec_append(&a), a.null_k = 1, expect_append(&a, RUDNN_STATUS_BAD_PARAM, "k is NULL", NULL, NULL);
    spec_append(&a), a.null_kc = 1, expect_append(&a, RUDNN_STATUS_BAD_PARAM, "k_cache is NULL", NULL, NULL);
    spec_append(&a), a.null_kout = 1, expect_append(&a, RUDNN_STATUS_BAD_PARAM, "k_cache_out", NULL, NULL);
    spec_append(&a), a.null_vout = 1, expect_append(&a, RUDNN_STATUS_BAD_PARAM, "v_cache_out", NULL, NULL);
    /* v and v_cache: both or neither */
    spec_append(&a), a.null_v = 1, expect_append(&a, RUDNN_STATUS_BAD_PARAM, "v", "v_cache", NULL);
    spec_append(&a), a.null_vc = 1, expect_append(&a, RUDNN_STATUS_BAD_PARAM, "v", "v_cache", NULL);
    /* shapes */
    {
        const int64_t k2[3] = {2, 2, 8}, k_h[3] = {3, 1, 8}, v_h[3] = {3, 1, 6}, k_d[3] = {3, 2, 4};
        const int64_t kc5[4] = {5, 4, 2, 8}, kc_ps[4] = {3, 8, 2, 8}, vc_d[4] = {6, 4, 2, 5}, k4[4] = {3, 2, 8, 1};
        spec_append(&a), reshape(&a.k, 3, k2), expect_append(&a, RUDNN_STATUS_BAD_SHAPE, "k has", "queries", NULL);
        spec_append(&a), reshape(&a.k, 4, k4), expect_append(&a, RUDNN_STATUS_BAD_SHAPE, "k has", NULL, NULL);
        spec_append(&a), reshape(&a.k, 3, k_h), expect_append(&a, RUDNN_STATUS_BAD_SHAPE, "k_cache has", NULL, NULL);
        spec_append(&a), reshape(&a.v, 3, v_h), expect_append(&a, RUDNN_STATUS_BAD_SHAPE, "v has", NULL, NULL);
        spec_append(&a), reshape(&a.k, 3, k_d), expect_append(&a, RUDNN_STATUS_BAD_SHAPE, "k_cache has", NULL, NULL);
        spec_append(&a), reshape(&a.kc, 4, kc5);
        expect_append(&a, RUDNN_STATUS_BAD_SHAPE, "k_cache has", "page", NULL);
        spec_append(&a), reshape(&a.kc, 4, kc_ps);
        expect_append(&a, RUDNN_STATUS_BAD_SHAPE, "k_cache has", "page_size", NULL);
        spec_append(&a), reshape(&a.vc, 4, vc_d), expect_append(&a, RUDNN_STATUS_BAD_SHAPE, "v_cache has", NULL, NULL);
    }
    /* dtypes */
    spec_append(&a), a.k.dtype = RUDNN_I8, expect_append(&a, RUDNN_STATUS_BAD_DTYPE, "k has", NULL, NULL);
    spec_append(&a), a.kc.dtype = RUDNN_F16, expect_append(&a, RUDNN_STATUS_BAD_DTYPE, "k_cache has", "dtype", NULL);
    spec_append(&a), a.v.dtype = RUDNN_BF16, expect_append(&a, RUDNN_STATUS_BAD_DTYPE, "v has", "dtype", NULL);
    spec_append(&a), a.vc.dtype = RUDNN_F16, expect_append(&a, RUDNN_STATUS_BAD_DTYPE, "v_cache has", "dtype", NULL);
    /* layouts and overlaps */
    spec_append(&a), a.kc.strides[0] = 128;
    expect_append(&a, RUDNN_STATUS_NOT_SUPPORTED, "k_cache", "contiguous", NULL);
    spec_append(&a), a.v.strides[0] = 24;
    expect_append(&a, RUDNN_STATUS_NOT_SUPPORTED, "v", "contiguous", NULL);
    spec_append(&a), a.vc = a.kc, a.v = a.k; /* one cache twice */
    expect_append(&a, RUDNN_STATUS_BAD_PARAM, "v_cache", "k_cache", NULL);
    spec_append(&a), a.k.buffer = F.t[T_K].buffer, a.k.offset = 64; /* the rows inside the cache */
    expect_append(&a, RUDNN_STATUS_BAD_PARAM, "k_cache", "k", NULL);
    spec_append(&a), a.kc.offset = F.t[T_K].buffer_bytes - 64;
    expect_append(&a, RUDNN_STATUS_OUT_OF_BOUNDS, "k_cache", NULL, NULL);
    /* another context's cache */
    if (rt_ctx2) {
        rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_t o;
        rt_tensor_create(&o, RUDNN_F32, 4, d_k, 0, 0);
        rt_unbind(saved);
        spec_append(&a), a.kc = o.t;
        expect_append(&a, RUDNN_STATUS_DEVICE_MISMATCH, "k_cache", NULL, NULL);
        saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_destroy(&o);
        rt_unbind(saved);
    }
}

/* The schedule's own append rules: a query at its sequence's length has no row to write; two
 * queries of one physical row (in one sequence, or in two sharing a page) are refused, naming
 * both. The same plans serve attention (each query is a valid attention query). A refused append
 * of a shared (retained) cache makes no copy. */
static void append_schedule_rules(void **state)
{
    (void)state;
    sched_edit_t e;
    aspec_t a;
    /* position == length: query 1 at 6 */
    edit_init(&e), e.pos[1] = 6;
    rudnn_paged_plan_t p = plan_of(&e.s);
    spec_append(&a), a.plan = p;
    expect_append(&a, RUDNN_STATUS_BAD_PARAM, "query 1", "length", NULL);
    a.null_v = a.null_vc = 1; /* one cache alone: the same rule */
    expect_append(&a, RUDNN_STATUS_BAD_PARAM, "query 1", "length", NULL);
    cspec_t c;
    spec_att(&c), c.plan = p, c.forms = 1;
    rt_assert_status(spec_call(&c, 0), RUDNN_STATUS_SUCCESS);
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_OUT]);
    rudnn_paged_plan_destroy(p);
    /* one row twice within a sequence: queries 0 and 1 at position 4 */
    edit_init(&e), e.pos[1] = 4;
    p = plan_of(&e.s);
    spec_append(&a), a.plan = p;
    expect_append(&a, RUDNN_STATUS_BAD_PARAM, "queries 0 and 1", "same", NULL);
    /* ... the same with a retained cache: no copy made */
    rudnn_buffer_retain(F.t[T_K].buffer);
    expect_append(&a, RUDNN_STATUS_BAD_PARAM, "queries 0 and 1", "same", NULL);
    rudnn_buffer_destroy(F.t[T_K].buffer);
    rudnn_paged_plan_destroy(p);
    /* one row twice across sequences sharing a page: sequence 1's page 0 is sequence 0's page 4,
     * queries 0 (seq 0, pos 1) and 2 (seq 1, pos 1) */
    edit_init(&e), e.tab[3] = 4, e.pos[0] = 1, e.pos[2] = 1;
    p = plan_of(&e.s);
    spec_append(&a), a.plan = p;
    expect_append(&a, RUDNN_STATUS_BAD_PARAM, "queries 0 and 2", "same", NULL);
    rudnn_paged_plan_destroy(p);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_calls_pass),  cmocka_unit_test(host_plan_rules),
        cmocka_unit_test(host_plan_repeats_at_scale),
        cmocka_unit_test(plan_rules),        cmocka_unit_test(null_arguments),
        cmocka_unit_test(shapes),            cmocka_unit_test(dims_in_range),
        cmocka_unit_test(dtypes),            cmocka_unit_test(layouts),
        cmocka_unit_test(overlaps),          cmocka_unit_test(scales),
        cmocka_unit_test(other_context),     cmocka_unit_test(dead_queue),
        cmocka_unit_test(split_workspace_rules), cmocka_unit_test(split_workspace_use),
        cmocka_unit_test(append_rules),      cmocka_unit_test(append_schedule_rules),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("paged_attention-contract");
    if (rt_group_setup_second(NULL))
        return 1;
    setup(NULL);
    const int failed = cmocka_run_group_tests_name("paged_attention-contract", tests, NULL, teardown);
    return rt_exit_code(failed);
}
