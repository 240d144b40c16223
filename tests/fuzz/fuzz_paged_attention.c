/* libFuzzer target of paged attention (rudnn/paged_attention.h): every public entry on the default
 * backend. Each input builds a step's schedule (page size, pages, sequences, lengths, page tables
 * with padding and prefix sharing, packed queries), edits it (out-of-range, repeated or padding
 * table entries, unsorted or unknown sequence ids, positions past a length, NULL arrays, counts
 * at and past their limits), makes the host plan and the device plan from it, then runs one op:
 * the plan alone, attention, MLA, their _with_workspace forms, a split workspace with its split
 * count, or the cache append (in place, or copy on write of a retained cache buffer).
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op (host_plan, plan, attention, mla,
 * attention_ws, mla_ws, split, append); 1 dtype; 2 bits 0-2 page_size (1, 2, 3, 4, 5, 8, 16, 7),
 * bits 3-4 spare pages (0..3), bits 5-7 rotate the page ids; 3 bits 0-1 N - 1, bits 2-3 padding
 * entries a table (0..3), bit 4 sequences share sequence 0's first page (prefix sharing), bit 5
 * padding repeats the table's first page (else out of range); 4 lengths (2 bits each: 0..3
 * tokens); 5 bits 0-3 add 4 tokens to sequence i, bits 4-5 sequence 0 gets 0, 128, 256 or 600
 * more (long histories: the split choice); 6 queries per sequence (2 bits each: 0..3, at the
 * last positions of the history); 7 flags: bit 0 causal, 1 positions one further (the last at
 * the length: attention's decode after the history, append's no-row case), 2 append without v,
 * 3 k_cache's buffer shared (retained), 4 v_cache's buffer shared, 5 v_cache in k_cache's buffer;
 * 8 bits 0-1 Hkv - 1, bits 2-3 query heads per KV head (1, 2, 4, 8); 9 D, 10 Dv (1, 2, 3, 4, 8,
 * 16, 32, 64, 128, 256, 1024; MLA: R = D); 11 MLA's P (1, 2, 3, 8, 16, 64, 256); 12 the split
 * count (0, 2, 3, 4, 7, 8, 16, 32); 14, 15 the buffers' fill (fz_begin). Dims are halved (the
 * widest first, then heads) until every intended tensor fits a harness buffer.
 *
 * Slots after the header, one each:
 *   0 page_size, 1 pages, 2 sequences, 3 queries (fz_i64; a count past the harness's arrays that
 *   the op would read up to is left intended: a count past a caller's array is the caller's bug,
 *   not the op's); 4 lengths, 5
 *   table_offsets, 6 tables, 7 sequence_ids, 8 positions (one entry each: an edge value, the
 *   intended one plus a step, or another entry's value); 9 which argument is NULL (none, an
 *   array, the schedule, the host plan's out pointer); 10 the device plan (on the main queue,
 *   NULL queue, the other context's queue, host NULL, out pointer NULL, on a queue destroyed
 *   before the call).
 *   attention: 11 q, 12 k_cache, 13 v_cache, 14 out, 15 scale, 16 causal;
 *   mla: 11 q, 12 qp, 13 latent_cache, 14 kp_cache, 15 out, 16 scale, 17 causal;
 *   the _ws forms: 11..15 the split workspace (below), then the tensors of their plain forms;
 *   split: 11..15 the split workspace, 16 split_count's workspace (or NULL), 17 heads_q,
 *   18 heads_kv, 19 the splits pointer (or NULL);
 *   append: 11 v and v_cache NULL (flips header bit 2), 12 which cache buffers are shared (0:
 *   the header's), 13 k, 14 v, 15 k_cache, 16 v_cache, 17 k_cache_out NULL, 18 v_cache_out NULL.
 *   The split workspace: its queue (the plan's, none, the other context's, a new queue of the
 *   plan's context, out pointer NULL, NULL queue), queries, heads, value_dim (fz_i64) and splits
 *   (fz_int).
 *
 * fz_check (rejected: a 1xx/2xx status naming the op, no byte written; accepted: only outputs
 * written, the queues' work succeeds) holds the call that ends the input and every rejected
 * call; the accepted calls before it (plans, workspace) have their message checked, and their
 * buffers by that last fz_check (step()). Beyond fz_check's contract: a rejected create leaves its
 * out pointer alone; an accepted plan names its queue and holds device memory; the schedule's
 * arrays are overwritten after the host plan is made (it keeps a copy); every call on a plan
 * whose queue was destroyed is refused; an
 * accepted attention or MLA gives zeros for queries of empty histories and, the inputs being
 * uniform, the value rows' value elsewhere (where the scores are finite); an accepted split
 * workspace holds its partials within 64 MiB and split_count gives a count it holds; an accepted
 * append writes exactly the rows its positions name with the new rows and nothing else, leaves a
 * shared cache buffer byte-identical and returns a new buffer holding the copy (one for k and v
 * caches in one buffer), and returns the same buffer for an unshared one. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/paged_attention.h>

#include "fuzz_common.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

enum { OP_HOST_PLAN, OP_PLAN, OP_ATTENTION, OP_MLA, OP_ATTENTION_WS, OP_MLA_WS, OP_SPLIT, OP_APPEND, OP_COUNT };

#define OP_HOST "rudnn_paged_host_plan_create"
#define OP_DEVICE "rudnn_paged_plan_create"
#define OP_SPLIT_WS "rudnn_paged_split_workspace_create"
#define OP_SPLIT_COUNT "rudnn_paged_split_count"
#define OP_APPEND_NAME "rudnn_paged_append"

#define MAX_N 4            /* sequences of the intended schedule */
#define MAX_SEQ 64         /* entries of lengths (table_offsets: MAX_SEQ + 1) passed */
#define MAX_Q 64           /* entries of sequence_ids and positions passed */
#define MAX_TABLE 1024     /* entries of tables passed */

enum {
    F_CAUSAL = 1,
    F_PAST = 2,
    F_NO_V = 4,
    F_SHARE_K = 8,
    F_SHARE_V = 16,
    F_ONE_BUFFER = 32,
};

/* A schedule with room for every count the harness passes. */
typedef struct sched {
    int64_t page_size, pages, n, q;
    int64_t lengths[MAX_SEQ];
    int64_t offsets[MAX_SEQ + 1];
    int32_t tables[MAX_TABLE];
    int64_t sids[MAX_Q];
    int64_t pos[MAX_Q];
} sched_t;

/* The valid problem the header describes. */
typedef struct problem {
    rudnn_dtype_t dt;
    uint8_t flags;
    int64_t Hkv, G, D, Dv, P;
    int splits;
    sched_t s;
} problem_t;

static int64_t es_of(rudnn_dtype_t dt) { return dt == RUDNN_F32 ? 4 : 2; }

/* Every intended tensor of every op fits a harness buffer (v_cache after k_cache in one buffer,
 * 256-aligned, when the header asks for it). */
static int fits(const problem_t *p)
{
    const int64_t cap = FZ_BUFFER_BYTES / es_of(p->dt), rows = p->s.pages * p->s.page_size, Q = p->s.q;
    const int64_t H = p->Hkv * p->G;
    const int64_t k_elems = rows * p->Hkv * p->D, v_elems = rows * p->Hkv * p->Dv;
    const int64_t sizes[] = {Q * H * p->D, Q * H * p->Dv, Q * H * p->P, k_elems, v_elems, rows * p->P,
                             k_elems + v_elems + 256 / es_of(p->dt)};
    for (size_t i = 0; i < COUNT(sizes); i++)
        if (sizes[i] > cap)
            return 0;
    return 1;
}

static void shrink(problem_t *p)
{
    while (!fits(p)) {
        int64_t *w = p->D >= p->Dv && p->D >= p->P ? &p->D : p->Dv >= p->P ? &p->Dv : &p->P;
        if (*w > 1)
            *w /= 2;
        else if (p->G > 1)
            p->G /= 2;
        else if (p->Hkv > 1)
            p->Hkv--;
        else
            return; /* cannot happen with the header's ranges */
    }
}

static problem_t decode_problem(const fz_call_t *c)
{
    static const int64_t page_sizes[8] = {1, 2, 3, 4, 5, 8, 16, 7};
    static const int64_t dims[11] = {1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 1024};
    static const int64_t ropes[7] = {1, 2, 3, 8, 16, 64, 256};
    static const int64_t groups[4] = {1, 2, 4, 8};
    static const int64_t longs[4] = {0, 128, 256, 600};
    static const int split_table[8] = {0, 2, 3, 4, 7, 8, 16, 32};
    problem_t p;
    memset(&p, 0, sizeof p);
    const uint8_t b2 = fz_header_byte(c, 2), b3 = fz_header_byte(c, 3), b5 = fz_header_byte(c, 5);
    const uint8_t lens = fz_header_byte(c, 4), nqs = fz_header_byte(c, 6), heads = fz_header_byte(c, 8);
    p.dt = fz_float_dtype(fz_header_byte(c, 1));
    p.flags = fz_header_byte(c, 7);
    p.Hkv = 1 + (heads & 3);
    p.G = groups[(heads >> 2) & 3];
    p.D = dims[fz_header_byte(c, 9) % 11];
    p.Dv = dims[fz_header_byte(c, 10) % 11];
    p.P = ropes[fz_header_byte(c, 11) % 7];
    p.splits = split_table[fz_header_byte(c, 12) % 8];

    sched_t *s = &p.s;
    const int64_t ps = page_sizes[b2 & 7], pad = (b3 >> 2) & 3;
    s->page_size = ps;
    s->n = 1 + (b3 & 3);
    int64_t used = 0, need[MAX_N];
    for (int64_t i = 0; i < s->n; i++) {
        s->lengths[i] = ((lens >> (2 * i)) & 3) + ((b5 >> i) & 1 ? 4 : 0) + (i ? 0 : longs[(b5 >> 4) & 3]);
        need[i] = (s->lengths[i] + ps - 1) / ps;
        used += need[i];
    }
    s->pages = used + ((b2 >> 3) & 3) + (used == 0); /* at least one page */
    /* page ids: distinct over the whole schedule, rotated; prefix sharing maps each later
     * sequence's first page onto sequence 0's */
    int64_t at = 0, k = 0;
    const int64_t rot = b2 >> 5;
    for (int64_t i = 0; i < s->n; i++) {
        s->offsets[i] = at;
        for (int64_t e = 0; e < need[i]; e++, k++)
            s->tables[at + e] = (int32_t)((k + rot) % s->pages);
        if ((b3 & 16) && i > 0 && need[i] > 0 && need[0] > 0)
            s->tables[at] = s->tables[0];
        for (int64_t e = 0; e < pad; e++) /* padding: never read, so never checked */
            s->tables[at + need[i] + e] =
                (b3 & 32) && need[i] ? s->tables[at] : (int32_t)(e ? s->pages + e : -1);
        at += need[i] + pad;
    }
    for (int64_t i = s->n; i <= MAX_SEQ; i++) /* entries past N: empty sequences */
        s->offsets[i] = at;
    /* queries: the last nq positions of each history (the tokens being appended) */
    for (int64_t i = 0; i < s->n; i++) {
        const int64_t nq = (nqs >> (2 * i)) & 3;
        for (int64_t j = 0; j < nq; j++) {
            int64_t pos = s->lengths[i] - nq + j + (p.flags & F_PAST ? 1 : 0);
            s->sids[s->q] = i;
            s->pos[s->q++] = pos < 0 ? 0 : pos;
        }
    }
    for (int64_t j = s->q; j < MAX_Q; j++)
        s->sids[j] = s->n - 1, s->pos[j] = 0;
    shrink(&p);
    return p;
}

/* ---- schedule edits -------------------------------------------------------------------------- */

/* One entry edit from the next slot: entry index % n set to an edge value (kind 0, or the raw
 * field), the intended value plus a step (kind 1), or another entry's value (kind 2). */
typedef struct edit {
    int on, kind;
    int64_t index, other, value;
} edit_t;

static edit_t next_edit(fz_call_t *c, int64_t n, int64_t step)
{
    static const int64_t edges[] = {-1, 0, 1, 2, 3, INT32_MAX, (int64_t)INT32_MAX + 1, INT64_MAX, INT64_MIN,
                                    64, 1024, INT32_MIN, (int64_t)UINT32_MAX};
    fz_slot_t s = fz_next_slot(c);
    edit_t e = {0, 0, 0, 0, 0};
    if (s.mode < 0x80 || n <= 0)
        return e;
    /* wrapping: step is any positive count (an edited page count up to INT64_MAX) */
    const int64_t steps[7] = {1, -1, 2, -2, step, (int64_t)(0 - (uint64_t)step), (int64_t)((uint64_t)step + 1)};
    e.on = 1;
    e.kind = s.kind % 3;
    e.index = s.index % n;
    e.other = s.extra[1] % n;
    e.value = e.kind == 0 ? ((s.pick & 0x80) ? (int64_t)s.raw : edges[s.pick % COUNT(edges)]) : steps[s.pick % 7];
    return e;
}

static void edit_i64(fz_call_t *c, int64_t *a, int64_t n, int64_t step)
{
    edit_t e = next_edit(c, n, step);
    if (e.on)
        a[e.index] = e.kind == 0 ? e.value : e.kind == 1 ? (int64_t)((uint64_t)a[e.index] + (uint64_t)e.value)
                                                         : a[e.other];
}

static void edit_i32(fz_call_t *c, int32_t *a, int64_t n, int64_t step)
{
    edit_t e = next_edit(c, n, step);
    if (e.on)
        a[e.index] = e.kind == 0 ? (int32_t)(uint32_t)e.value
                     : e.kind == 1 ? (int32_t)((uint32_t)a[e.index] + (uint32_t)e.value)
                                   : a[e.other];
}

/* A count from the next slot; a value the op would read the arrays up to, past the harness's
 * room, stays intended (the caller's bug). Values at or past INT32_MAX are refused first. */
static int64_t bounded_count(fz_call_t *c, int64_t intended, int64_t room)
{
    int64_t v = fz_i64(c, intended);
    return v > room && v < INT32_MAX ? intended : v;
}

enum { NUL_NONE, NUL_LENGTHS, NUL_OFFSETS, NUL_TABLES, NUL_SIDS, NUL_POS, NUL_SCHEDULE, NUL_OUT, NUL_COUNT };

/* The edited schedule (slots 0..9) and which argument goes NULL. */
static void edit_schedule(fz_call_t *c, const problem_t *p, sched_t *s, int *null_choice)
{
    *s = p->s;
    s->page_size = fz_i64(c, s->page_size);
    s->pages = fz_i64(c, s->pages);
    s->n = bounded_count(c, s->n, MAX_SEQ);
    s->q = bounded_count(c, s->q, MAX_Q);
    const int64_t n = s->n >= 1 && s->n <= MAX_SEQ ? s->n : p->s.n;
    const int64_t q = s->q >= 0 && s->q <= MAX_Q ? s->q : p->s.q;
    const int64_t ps = s->page_size > 0 && s->page_size <= INT32_MAX ? s->page_size : 1;
    edit_i64(c, s->lengths, n, ps);
    edit_i64(c, s->offsets, n + 1, 1);
    edit_i32(c, s->tables, p->s.offsets[p->s.n] > 0 ? p->s.offsets[p->s.n] : 1, s->pages > 0 ? s->pages : 1);
    edit_i64(c, s->sids, q, 1);
    edit_i64(c, s->pos, q, 1);
    /* tables[] holds MAX_TABLE entries: offsets past it that the op would read up to are the
     * caller's bug (past INT32_MAX it refuses them first) */
    for (int64_t i = 0; i <= n; i++)
        if (s->offsets[i] > MAX_TABLE && s->offsets[i] <= INT32_MAX) {
            memcpy(s->offsets, p->s.offsets, sizeof s->offsets);
            break;
        }
    *null_choice = fz_object_choice(c, NUL_COUNT);
}

/* ---- objects ------------------------------------------------------------------------------------ */

/* What an input made: destroyed after it, whatever path it took. */
typedef struct made {
    rudnn_paged_host_plan_t host;
    rudnn_paged_plan_t plan;
    rudnn_paged_split_workspace_t ws;
    rudnn_queue_t plan_q, ws_q; /* queues the harness made (the dead-queue and other-queue cases) */
    rudnn_buffer_t retained[2]; /* harness buffers retained for copy on write */
    rudnn_buffer_t fresh[2];    /* buffers an append returned */
} made_t;

static void destroy_made(made_t *m)
{
    rudnn_paged_split_workspace_destroy(m->ws);
    rudnn_paged_plan_destroy(m->plan);
    rudnn_paged_host_plan_destroy(m->host);
    for (int i = 0; i < 2; i++) {
        rudnn_buffer_destroy(m->retained[i]);
        rudnn_buffer_destroy(m->fresh[i]);
    }
    rudnn_queue_destroy(m->plan_q);
    rudnn_queue_destroy(m->ws_q);
    memset(m, 0, sizeof *m);
}

#define SENTINEL(type) ((type)(uintptr_t)0x5eed0)

enum { PLAN_MAIN, PLAN_NULL_QUEUE, PLAN_OTHER_CONTEXT, PLAN_HOST_NULL, PLAN_OUT_NULL, PLAN_DEAD_QUEUE, PLAN_COUNT };

/* The state of one input after its plan was made. */
typedef struct run {
    fz_call_t *c;
    problem_t p;
    sched_t s;          /* the schedule as passed (accepted by the host plan) */
    made_t m;
    rudnn_queue_t q;    /* the plan's queue */
    int dead;           /* the plan's queue is destroyed before the call */
} run_t;

/* A call that makes what a later call of the input uses (the plans, the workspace). A rejected one
 * ends the input or is followed by calls without it, and gets fz_check's whole contract; an
 * accepted one has its message checked here, and its buffers and queue work by the fz_check of
 * the call that ends the input (fz_check reads every buffer back: once an input is enough). */
static rudnn_status_t step(fz_call_t *c, const char *op, rudnn_status_t st, int last)
{
    if (st || last)
        return fz_check(c, op, st);
    if (rudnn_last_error()[0]) {
        fprintf(stderr, "fuzz: message: %s\n", rudnn_last_error());
        fz_fail("an accepted call left a message in rudnn_last_error()", op, st);
    }
    return st;
}

static void require_refused(const run_t *r, const char *op, rudnn_status_t st)
{
    if (r->dead && st == RUDNN_STATUS_SUCCESS)
        fz_fail("a call on a plan whose queue was destroyed was accepted", op, st);
}

/* Host plan and device plan from slots 0..10. Returns 0 when the input ends there. */
static int make_plans(run_t *r, int op)
{
    fz_call_t *c = r->c;
    int nul;
    edit_schedule(c, &r->p, &r->s, &nul);
    const int variant = fz_object_choice(c, PLAN_COUNT);

    /* the arrays passed are a copy, overwritten once the host plan is made (it keeps its own) */
    static sched_t arg;
    arg = r->s;
    rudnn_paged_schedule_t sc = {arg.page_size, arg.pages, arg.n, arg.lengths, arg.offsets, arg.tables,
                                 arg.q, arg.sids, arg.pos};
    if (nul == NUL_LENGTHS)
        sc.lengths = NULL;
    if (nul == NUL_OFFSETS)
        sc.table_offsets = NULL;
    if (nul == NUL_TABLES)
        sc.tables = NULL;
    if (nul == NUL_SIDS)
        sc.sequence_ids = NULL;
    if (nul == NUL_POS)
        sc.positions = NULL;
    rudnn_paged_host_plan_t host = SENTINEL(rudnn_paged_host_plan_t);
    rudnn_status_t st = step(c, OP_HOST, rudnn_paged_host_plan_create(nul == NUL_SCHEDULE ? NULL : &sc,
                                                                      nul == NUL_OUT ? NULL : &host),
                             op == OP_HOST_PLAN);
    if (st) {
        if (host != SENTINEL(rudnn_paged_host_plan_t))
            fz_fail("a rejected call wrote *plan", OP_HOST, st);
        return 0;
    }
    if (!host || host == SENTINEL(rudnn_paged_host_plan_t))
        fz_fail("an accepted call gave no host plan", OP_HOST, st);
    r->m.host = host;
    memset(&arg, 0xa5, sizeof arg);
    if (op == OP_HOST_PLAN)
        return 0;

    /* the device plan */
    r->q = c->env->q;
    if (variant == PLAN_NULL_QUEUE)
        r->q = NULL;
    if (variant == PLAN_OTHER_CONTEXT)
        r->q = c->env->q2;
    if (variant == PLAN_DEAD_QUEUE) {
        fz_require("queue_create", rudnn_queue_create(c->env->ctx, &r->m.plan_q));
        r->q = r->m.plan_q;
    }
    rudnn_paged_plan_t plan = SENTINEL(rudnn_paged_plan_t);
    st = step(c, OP_DEVICE, rudnn_paged_plan_create(r->q, variant == PLAN_HOST_NULL ? NULL : host,
                                                    variant == PLAN_OUT_NULL ? NULL : &plan),
              op == OP_PLAN);
    /* the host plan may go now: the device plan holds what it needs */
    rudnn_paged_host_plan_destroy(host);
    r->m.host = NULL;
    if (st) {
        if (plan != SENTINEL(rudnn_paged_plan_t))
            fz_fail("a rejected call wrote *plan", OP_DEVICE, st);
        return 0;
    }
    if (!plan || plan == SENTINEL(rudnn_paged_plan_t))
        fz_fail("an accepted call gave no plan", OP_DEVICE, st);
    r->m.plan = plan;
    if (rudnn_paged_plan_queue(plan) != r->q || rudnn_paged_plan_device_bytes(plan) == 0)
        fz_fail("an accepted plan does not name its queue or holds no device memory", OP_DEVICE, st);
    if (rudnn_paged_plan_queue(NULL) || rudnn_paged_plan_device_bytes(NULL))
        fz_fail("a NULL plan names a queue or device memory", OP_DEVICE, st);
    r->dead = variant == PLAN_DEAD_QUEUE;
    return op != OP_PLAN;
}

/* The plan's queue goes away before the call (its plan and workspace keep working objects). */
static void kill_plan_queue(run_t *r)
{
    if (r->dead && r->m.plan_q) {
        rudnn_queue_destroy(r->m.plan_q);
        r->m.plan_q = NULL;
    }
}

enum { WS_PLAN_QUEUE, WS_NONE, WS_OTHER_CONTEXT, WS_NEW_QUEUE, WS_OUT_NULL, WS_NULL_QUEUE, WS_COUNT };

static double partial_bytes(int splits, int64_t q, int64_t h, int64_t w)
{
    return (double)splits * (double)q * (double)h * ((double)w + 2) * 4;
}

/* A split workspace from the next five slots (create checked); NULL when none was made. */
typedef struct ws_args {
    int64_t queries, heads, value_dim;
    int splits;
} ws_args_t;

static rudnn_paged_split_workspace_t make_workspace(run_t *r, int64_t heads, int64_t value_dim, ws_args_t *a)
{
    fz_call_t *c = r->c;
    const int variant = fz_object_choice(c, WS_COUNT);
    a->queries = fz_i64(c, r->s.q);
    a->heads = fz_i64(c, heads);
    a->value_dim = fz_i64(c, value_dim);
    a->splits = fz_int(c, r->p.splits);
    if (variant == WS_NONE)
        return NULL;
    rudnn_queue_t q = r->q;
    if (variant == WS_OTHER_CONTEXT)
        q = r->q == c->env->q2 ? c->env->q : c->env->q2;
    if (variant == WS_NEW_QUEUE) {
        fz_require("queue_create", rudnn_queue_create(rudnn_queue_context(r->q), &r->m.ws_q));
        q = r->m.ws_q;
    }
    if (variant == WS_NULL_QUEUE)
        q = NULL;
    rudnn_paged_split_workspace_t ws = SENTINEL(rudnn_paged_split_workspace_t);
    rudnn_status_t st = step(c, OP_SPLIT_WS, rudnn_paged_split_workspace_create(
                                                 q, a->queries, a->heads, a->value_dim, a->splits,
                                                 variant == WS_OUT_NULL ? NULL : &ws), 0);
    if (st) {
        if (ws != SENTINEL(rudnn_paged_split_workspace_t))
            fz_fail("a rejected call wrote *workspace", OP_SPLIT_WS, st);
        return NULL;
    }
    if (!ws || ws == SENTINEL(rudnn_paged_split_workspace_t))
        fz_fail("an accepted call gave no workspace", OP_SPLIT_WS, st);
    r->m.ws = ws;
    const size_t bytes = rudnn_paged_split_workspace_bytes(ws);
    if (bytes == 0 || bytes > RUDNN_PAGED_SPLIT_WORKSPACE_MAX_BYTES ||
        (a->splits > 1 && (double)bytes < partial_bytes(a->splits, a->queries, a->heads, a->value_dim)))
        fz_fail("an accepted workspace is empty, past 64 MiB or smaller than its partials", OP_SPLIT_WS, st);
    if (rudnn_paged_split_workspace_bytes(NULL))
        fz_fail("a NULL workspace has bytes", OP_SPLIT_WS, st);
    return ws;
}

/* ---- values --------------------------------------------------------------------------------------- */

static float f16_to_float(uint16_t h)
{
    const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    const float v = exp == 0    ? ldexpf((float)man, -24)
                    : exp == 31 ? (man ? NAN : INFINITY)
                                : ldexpf((float)(man | 1024), exp - 25);
    return sign ? -v : v;
}

static float decode(rudnn_dtype_t dt, const uint8_t *b)
{
    if (dt == RUDNN_F32) {
        float f;
        memcpy(&f, b, 4);
        return f;
    }
    const uint16_t h = (uint16_t)(b[0] | b[1] << 8);
    if (dt == RUDNN_F16)
        return f16_to_float(h);
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static int buffer_index(const fz_env_t *e, rudnn_buffer_t b)
{
    for (int k = 0; k < FZ_BUFFERS; k++)
        if (e->buf[k] == b)
            return k;
    for (int k = 0; k < FZ_FOREIGN_BUFFERS; k++)
        if (e->foreign[k] == b)
            return FZ_BUFFERS + k;
    return -1;
}

/* The value every element of a harness tensor holds (the buffer's fill). */
static float fill_value(const fz_call_t *c, const rudnn_tensor_t *t)
{
    const int k = buffer_index(c->env, t->buffer);
    const uint8_t b = k >= 0 ? c->fill[k] : 0xff, bytes[4] = {b, b, b, b};
    return decode(t->dtype, bytes);
}

static rudnn_queue_t queue_for(const fz_call_t *c, rudnn_buffer_t b)
{
    return rudnn_buffer_context(b) == c->env->ctx ? c->env->q : c->env->q2;
}

static void read_back(const fz_call_t *c, const char *op, rudnn_buffer_t b, size_t offset, void *host, size_t bytes)
{
    rudnn_status_t st = rudnn_buffer_read(queue_for(c, b), b, offset, host, bytes);
    if (st)
        fz_fail("reading a buffer back failed", op, st);
}

/* |x| small enough that the FP32 work of a call on uniform inputs cannot overflow. */
static int tame(double x) { return isfinite(x) && fabs(x) < 1e30; }

/* After an accepted attention or MLA: a query whose history is empty gives zeros; with uniform
 * inputs and finite scores, every other output element is the value rows' value (weights that
 * sum to one over equal values). */
static void check_out(const run_t *r, const char *op, const rudnn_tensor_t *out, double dot, double scale,
                      float value)
{
    static uint8_t host[FZ_BUFFER_BYTES];
    const size_t bytes = rudnn_tensor_bytes(out), es = rudnn_dtype_size(out->dtype);
    read_back(r->c, op, out->buffer, out->offset, host, bytes);
    const int check_value = tame(dot) && tame(dot * scale) && tame(value);
    const int64_t row = out->dims[1] * out->dims[2];
    for (int64_t i = 0; i < out->dims[0]; i++) {
        const int empty = r->s.lengths[r->s.sids[i]] == 0;
        for (int64_t e = 0; e < row; e++) {
            const float v = decode(out->dtype, host + (size_t)(i * row + e) * es);
            if (empty ? v == 0.0f : !check_value || fabsf(v - value) <= 1e-3f * fabsf(value))
                continue;
            fprintf(stderr, "fuzz: query %lld (length %lld) element %lld is %g, expected %g\n", (long long)i,
                    (long long)r->s.lengths[r->s.sids[i]], (long long)e, (double)v, empty ? 0.0 : (double)value);
            fz_fail(empty ? "a query that sees no key did not give zeros" : "uniform values did not average to "
                                                                            "themselves",
                    op, RUDNN_STATUS_SUCCESS);
        }
    }
}

/* ---- the ops ----------------------------------------------------------------------------------------- */

static fz_spec_t spec(rudnn_dtype_t dt, int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    fz_spec_t s = {dt, rank, {d0, d1, d2, d3}};
    return s;
}

static void attention(run_t *r, int with_ws, int mla)
{
    fz_call_t *c = r->c;
    const problem_t *p = &r->p;
    const int64_t Q = r->s.q, H = p->Hkv * p->G, Hkv = mla ? 1 : p->Hkv, D = p->D, P = p->P;
    const int64_t W = mla ? D : p->Dv, pages = r->s.pages, ps = r->s.page_size;
    ws_args_t wa;
    rudnn_paged_split_workspace_t ws = with_ws ? make_workspace(r, H, W, &wa) : NULL;
    kill_plan_queue(r);
    const fz_spec_t sq = spec(p->dt, 3, Q, H, D, 0), sqp = spec(p->dt, 3, Q, H, P, 0);
    const fz_spec_t sk = spec(p->dt, 4, pages, ps, Hkv, D), skp = spec(p->dt, 4, pages, ps, 1, P);
    const fz_spec_t sv = spec(p->dt, 4, pages, ps, Hkv, W), so = spec(p->dt, 3, Q, H, W, 0);
    const rudnn_tensor_t *q = fz_tensor(c, &sq, 0);
    const rudnn_tensor_t *qp = mla ? fz_tensor(c, &sqp, 0) : NULL;
    const rudnn_tensor_t *k = fz_tensor(c, &sk, 0);
    const rudnn_tensor_t *kv = fz_tensor(c, mla ? &skp : &sv, 0); /* MLA: kp_cache; else v_cache */
    const rudnn_tensor_t *out = fz_tensor(c, &so, 1);
    const float scale = fz_float(c, 1.0f / sqrtf((float)(mla ? D + P : D)));
    const int causal = fz_int(c, p->flags & F_CAUSAL);
    const char *op;
    rudnn_status_t st;
    if (mla) {
        op = with_ws ? "rudnn_paged_mla_with_workspace" : "rudnn_paged_mla";
        st = with_ws ? rudnn_paged_mla_with_workspace(r->m.plan, ws, q, qp, k, kv, scale, causal, out)
                     : rudnn_paged_mla(r->m.plan, q, qp, k, kv, scale, causal, out);
    } else {
        op = with_ws ? "rudnn_paged_attention_with_workspace" : "rudnn_paged_attention";
        st = with_ws ? rudnn_paged_attention_with_workspace(r->m.plan, ws, q, k, kv, scale, causal, out)
                     : rudnn_paged_attention(r->m.plan, q, k, kv, scale, causal, out);
    }
    st = fz_check(c, op, st);
    require_refused(r, op, st);
    if (st || Q == 0)
        return;
    /* uniform inputs: every score is the same dot product (each term and scaled factor within
     * FP32), every value row one value */
    const double qv = fill_value(c, q), kv0 = fill_value(c, k);
    const double qpv = mla ? fill_value(c, qp) : 0, kpv = mla ? fill_value(c, kv) : 0;
    const double dot = (double)D * qv * kv0, dot_p = (double)P * qpv * kpv;
    const int inputs_tame = tame(dot) && tame(dot_p) && tame(qv * scale) && tame(kv0 * scale) &&
                            tame(qpv * scale) && tame(kpv * scale);
    check_out(r, op, out, inputs_tame ? dot + dot_p : NAN, scale, mla ? fill_value(c, k) : fill_value(c, kv));
}

static void split(run_t *r)
{
    fz_call_t *c = r->c;
    const int64_t H = r->p.Hkv * r->p.G;
    ws_args_t wa;
    rudnn_paged_split_workspace_t ws = make_workspace(r, H, r->p.Dv, &wa);
    kill_plan_queue(r);
    const int pass_ws = !fz_object_choice(c, 2);
    const int64_t heads_q = fz_i64(c, H), heads_kv = fz_i64(c, r->p.Hkv);
    int splits = -7;
    const int with_out = !fz_object_choice(c, 2);
    rudnn_status_t st = fz_check(c, OP_SPLIT_COUNT, rudnn_paged_split_count(r->m.plan, pass_ws ? ws : NULL, heads_q,
                                                                            heads_kv, with_out ? &splits : NULL));
    require_refused(r, OP_SPLIT_COUNT, st);
    if (st) {
        if (splits != -7)
            fz_fail("a rejected call wrote *splits", OP_SPLIT_COUNT, st);
        return;
    }
    const size_t bytes = rudnn_paged_split_workspace_bytes(ws);
    if (splits < 1 || splits > RUDNN_PAGED_MAX_SPLITS || (wa.splits > 1 && splits != wa.splits) ||
        (splits > 1 && partial_bytes(splits, wa.queries, wa.heads, wa.value_dim) > (double)bytes)) {
        fprintf(stderr, "fuzz: split count %d, workspace splits %d, %zu bytes\n", splits, wa.splits, bytes);
        fz_fail("an accepted split count is out of range, not the workspace's or past its memory", OP_SPLIT_COUNT,
                st);
    }
}

/* ---- append ---------------------------------------------------------------------------------------------- */

/* The cache rows an accepted append wrote: row index of each query (the plan's schedule). */
static int64_t append_row(const sched_t *s, int64_t i)
{
    const int64_t sid = s->sids[i], pos = s->pos[i];
    return (int64_t)s->tables[s->offsets[sid] + pos / s->page_size] * s->page_size + pos % s->page_size;
}

/* Every byte of buffer b (the append's output buffer: the cache's own or its copy): the caches
 * whose output lies in b hold the new rows at their queries' rows, every other byte what the
 * harness put in `from` (the cache's original buffer). */
static void check_append_buffer(const run_t *r, rudnn_buffer_t b, rudnn_buffer_t from,
                                const rudnn_tensor_t *const rows[2], const rudnn_tensor_t *const caches[2],
                                const rudnn_tensor_t *const outs[2])
{
    static uint8_t host[FZ_BUFFER_BYTES], written[FZ_BUFFER_BYTES];
    const fz_call_t *c = r->c;
    const int from_k = buffer_index(c->env, from);
    if (from_k < 0)
        fz_fail("harness: an append's cache is not in a harness buffer", OP_APPEND_NAME, RUDNN_STATUS_INTERNAL);
    if (rudnn_buffer_size(b) != FZ_BUFFER_BYTES)
        fz_fail("the copy of a shared cache buffer has another size", OP_APPEND_NAME, RUDNN_STATUS_SUCCESS);
    read_back(c, OP_APPEND_NAME, b, 0, host, sizeof host);
    memset(written, 0, sizeof written);
    for (int j = 0; j < 2; j++) {
        if (!outs[j] || outs[j]->buffer != b)
            continue;
        const rudnn_tensor_t *t = caches[j];
        const size_t es = rudnn_dtype_size(t->dtype), row_bytes = (size_t)(t->dims[2] * t->dims[3]) * es;
        const float want = fill_value(c, rows[j]);
        for (int64_t i = 0; i < r->s.q; i++) {
            const size_t at = t->offset + (size_t)append_row(&r->s, i) * row_bytes;
            memset(written + at, 1, row_bytes);
            for (size_t e = 0; e < row_bytes; e += es) {
                const float v = decode(t->dtype, host + at + e);
                if (isnan(want) ? isnan(v) : memcmp(&v, &want, sizeof v) == 0)
                    continue;
                fprintf(stderr, "fuzz: %s row of query %lld byte %zu: %g, expected %g\n", j ? "v_cache" : "k_cache",
                        (long long)i, e, (double)v, (double)want);
                fz_fail("an append row does not hold the new row", OP_APPEND_NAME, RUDNN_STATUS_SUCCESS);
            }
        }
    }
    for (size_t at = 0; at < sizeof host; at++)
        if (!written[at] && host[at] != c->fill[from_k]) {
            fprintf(stderr, "fuzz: byte %zu of the cache's %s buffer is 0x%02x, was 0x%02x\n", at,
                    b == from ? "own" : "copied", host[at], c->fill[from_k]);
            fz_fail("an append changed a byte outside the rows it writes", OP_APPEND_NAME, RUDNN_STATUS_SUCCESS);
        }
}

static void append(run_t *r)
{
    fz_call_t *c = r->c;
    const problem_t *p = &r->p;
    const int64_t Q = r->s.q, Hkv = p->Hkv, pages = r->s.pages, ps = r->s.page_size;
    const int no_v = !(p->flags & F_NO_V) != !fz_object_choice(c, 2);
    const int share_choice = fz_object_choice(c, 4);
    const int share = share_choice ? share_choice : (p->flags >> 3) & 3; /* bit 0: k_cache, bit 1: v_cache */
    kill_plan_queue(r);
    const fz_spec_t sk = spec(p->dt, 3, Q, Hkv, p->D, 0), sv = spec(p->dt, 3, Q, Hkv, p->Dv, 0);
    const fz_spec_t skc = spec(p->dt, 4, pages, ps, Hkv, p->D), svc = spec(p->dt, 4, pages, ps, Hkv, p->Dv);
    const rudnn_tensor_t *k = fz_tensor(c, &sk, 0);
    const rudnn_tensor_t *v = fz_optional_tensor(c, &sv, no_v);
    const rudnn_tensor_t *kc = fz_tensor(c, &skc, 1);
    const int vc_arg = c->nargs;
    const rudnn_tensor_t *vc = fz_optional_output(c, &svc, no_v);
    /* v_cache right after k_cache in its buffer, where it was placed in its own (unmutated) */
    if ((p->flags & F_ONE_BUFFER) && kc && vc && kc->buffer && vc->buffer == c->env->buf[vc_arg % FZ_BUFFERS]) {
        const size_t at = (kc->offset + rudnn_tensor_bytes(kc) + 255) / 256 * 256;
        if (kc->offset <= FZ_BUFFER_BYTES && at <= FZ_BUFFER_BYTES && rudnn_tensor_bytes(vc) <= FZ_BUFFER_BYTES - at) {
            rudnn_tensor_t *w = (rudnn_tensor_t *)vc; /* the harness's own descriptor (fz_call_t.args) */
            w->buffer = kc->buffer;
            w->offset = at;
        }
    }
    const rudnn_tensor_t *caches[2] = {kc, vc}, *rows[2] = {k, v};
    for (int j = 0; j < 2; j++)
        if ((share >> j & 1) && caches[j] && buffer_index(c->env, caches[j]->buffer) >= 0 &&
            (j == 0 || !r->m.retained[0] || caches[j]->buffer != r->m.retained[0])) {
            rudnn_buffer_retain(caches[j]->buffer);
            r->m.retained[j] = caches[j]->buffer;
        }
    rudnn_tensor_t kout, vout, kout0, vout0;
    memset(&kout, 0x5a, sizeof kout);
    memset(&vout, 0x5a, sizeof vout);
    kout0 = kout, vout0 = vout;
    const int kout_null = fz_object_choice(c, 2), vout_null = fz_object_choice(c, 2);
    rudnn_status_t st = fz_check(c, OP_APPEND_NAME, rudnn_paged_append(r->m.plan, k, v, kc, vc,
                                                                      kout_null ? NULL : &kout,
                                                                      vout_null ? NULL : &vout));
    require_refused(r, OP_APPEND_NAME, st);
    if (st) {
        if (memcmp(&kout, &kout0, sizeof kout) || memcmp(&vout, &vout0, sizeof vout))
            fz_fail("a rejected call wrote k_cache_out or v_cache_out", OP_APPEND_NAME, st);
        return;
    }
    const rudnn_tensor_t *outs[2] = {&kout, vc ? &vout : NULL};
    for (int j = 0; j < 2; j++) {
        if (!caches[j])
            continue;
        rudnn_tensor_t same = *outs[j];
        same.buffer = caches[j]->buffer;
        if (memcmp(&same, caches[j], sizeof same))
            fz_fail("an accepted append returned a cache descriptor other than its cache's", OP_APPEND_NAME, st);
        const int shared = r->m.retained[0] == caches[j]->buffer || r->m.retained[1] == caches[j]->buffer;
        rudnn_buffer_t b = outs[j]->buffer;
        if (b != caches[j]->buffer) {
            /* a new buffer: the caller's (ours) to destroy, once for both caches */
            if (!shared || buffer_index(c->env, b) >= 0 || !b)
                fz_fail("an accepted append returned another buffer for an unshared cache, or a harness one",
                        OP_APPEND_NAME, st);
            if (b != r->m.fresh[0])
                r->m.fresh[j] = b;
        } else if (shared && Q > 0) {
            fz_fail("an append that wrote rows returned the shared cache buffer itself", OP_APPEND_NAME, st);
        }
    }
    if (vc && kc->buffer == vc->buffer && kout.buffer != vout.buffer)
        fz_fail("k and v caches of one shared buffer got two copies", OP_APPEND_NAME, st);
    for (int j = 0; j < 2; j++) {
        if (!caches[j] || (j == 1 && outs[1]->buffer == outs[0]->buffer))
            continue;
        if (outs[j]->buffer != caches[j]->buffer) /* the shared original is byte-identical */
            fz_check_untouched(c, OP_APPEND_NAME, caches[j], 0, rudnn_tensor_bytes(caches[j]));
        check_append_buffer(r, outs[j]->buffer, caches[j]->buffer, rows, caches, outs);
    }
}

/* ---- entry ------------------------------------------------------------------------------------------------ */

static void run(fz_call_t *c, int op)
{
    static run_t r; /* large (the schedules): not on the stack */
    memset(&r, 0, sizeof r);
    r.c = c;
    r.p = decode_problem(c);
    if (make_plans(&r, op)) {
        switch (op) {
        case OP_ATTENTION:
        case OP_ATTENTION_WS:
            attention(&r, op == OP_ATTENTION_WS, 0);
            break;
        case OP_MLA:
        case OP_MLA_WS:
            attention(&r, op == OP_MLA_WS, 1);
            break;
        case OP_SPLIT:
            split(&r);
            break;
        case OP_APPEND:
            append(&r);
            break;
        }
    }
    destroy_made(&r.m);
}

/* Every dtype through attention with and without splits, MLA and append (one program per dtype
 * holds every kernel), so that the programs are built before the leak checks. */
void fz_warmup(void)
{
    for (uint8_t dt = 0; dt < 3; dt++)
        for (uint8_t op = OP_ATTENTION; op < OP_COUNT; op++)
            fz_run_header((const uint8_t[FZ_SLOT]){op, dt, 2, 1, 0x0b, 0x01, 0x05, 0, 0x04, 3, 4, 2, 1});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    run(&c, fz_header_byte(&c, 0) % OP_COUNT);
    return 0;
}
