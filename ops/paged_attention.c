/* Paged attention and MLA (rudnn/paged_attention.h): the device plan, the calls' contract, split
 * workspaces and the split choice. The host plan is ops/paged_schedule.c, the append
 * ops/paged_append.c. No GPU API here. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_internal.h"
#include "validate.h"

#define OP_PLAN "rudnn_paged_plan_create"
#define OP_ATT "rudnn_paged_attention"
#define OP_MLA "rudnn_paged_mla"
#define OP_ATT_WS "rudnn_paged_attention_with_workspace"
#define OP_MLA_WS "rudnn_paged_mla_with_workspace"
#define OP_SPLIT_WS "rudnn_paged_split_workspace_create"
#define OP_SPLIT_COUNT "rudnn_paged_split_count"

/* The split choice (decode with few (query block, KV head) items and long histories). Each item
 * streams its keys at a rate of its own, so the call takes as long as the waves of items the
 * device holds at once (PAGED_SPLIT_RESIDENT an SM: the CUDA decode kernel's CTAs an SM): a last
 * wave only part full leaves SMs idle. Splits of at least PAGED_SPLIT_MIN_KEYS keys each (the
 * partials' write and merge small next to the keys read): 128, two 64-key tiles of the decode
 * kernel; at B 1, KV 2k its 16 splits take 0.91 of the time of 64 keys' 32 (H100 and H200,
 * bench/RESULTS.md), while long histories keep their counts. */
#define PAGED_SPLIT_RESIDENT 2
#define PAGED_SPLIT_MIN_KEYS 128
/* Counts whose waves are this close to the fullest count's count as full: the smallest is taken
 * (fewer partials to merge). */
#define PAGED_SPLIT_FILL_SLACK 0.03
/* The query block kind the choice counts items in (runs of 16 queries, hal/paged_attention.h):
 * decode has one block per query, prefill one per 16 queries. */
#define PAGED_SPLIT_COUNT_KIND 4
/* Query heads of one item at most: a block's item count is max(Hkv, ceil(Hq / this)) (MLA's one
 * latent head: H 128 is two CTAs of 64 rows a query on CUDA, two items). */
#define PAGED_SPLIT_ITEM_HEADS 64

struct rudnn_paged_split_workspace {
    rudnn_queue_t queue; /* held */
    rudnn_buffer_t mem;
    int64_t queries, heads, value_dim;
    int splits;   /* the caller's, or 0: chosen per call up to capacity */
    int capacity; /* the most splits its memory holds */
    size_t bytes;
    size_t tickets; /* byte offset of its Q x H uint32 merge counters (0: none) */
};

/* ---- the device plan ------------------------------------------------------------------------- */

rudnn_status_t rudnn_paged_plan_create(rudnn_queue_t queue, rudnn_paged_host_plan_t host, rudnn_paged_plan_t *plan)
{
    rudnn_clear_error();
    TRY(rudnn_check_arg(OP_PLAN, "plan", plan));
    TRY(rudnn_check_queue(OP_PLAN, queue));
    TRY(rudnn_check_arg(OP_PLAN, "host", host));
    rudnn_device_info_t info;
    TRY(rudnn_context_device_info(queue->context, &info));
    rudnn_paged_plan_t p = rudnn_host_calloc(1, sizeof *p);
    if (!p)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory", OP_PLAN);
    rudnn_status_t st = rudnn_buffer_from_pool(queue, (size_t)host->layout.bytes, &p->image);
    if (!st) {
        st = queue->context->backend->mem_write(queue->handle, (rudnn_mem_ref_t){p->image->mem, 0}, host->image,
                                                (size_t)host->layout.bytes);
        if (st)
            rudnn_buffer_release(p->image);
    }
    if (st) {
        rudnn_error_prefix(OP_PLAN);
        free(p);
        return st;
    }
    rudnn_queue_retain(queue);
    p->queue = queue;
    p->layout = host->layout;
    p->no_row_query = host->no_row_query;
    p->dup_query[0] = host->dup_query[0], p->dup_query[1] = host->dup_query[1];
    p->compute_units = info.compute_units > 0 ? info.compute_units : 1;
    rudnn_live_object(+1);
    *plan = p;
    return RUDNN_STATUS_SUCCESS;
}

void rudnn_paged_plan_destroy(rudnn_paged_plan_t p)
{
    if (!p)
        return;
    rudnn_buffer_release(p->image);
    rudnn_queue_release(p->queue);
    free(p);
    rudnn_live_object(-1);
}

size_t rudnn_paged_plan_device_bytes(rudnn_paged_plan_t p) { return p ? p->image->size : 0; }

rudnn_queue_t rudnn_paged_plan_queue(rudnn_paged_plan_t p) { return p ? p->queue : NULL; }

/* ---- the calls' contract ------------------------------------------------------------------------ */

rudnn_status_t rudnn_paged_check_plan(const char *op, rudnn_paged_plan_t p)
{
    TRY(rudnn_check_arg(op, "plan", p));
    return rudnn_check_held_queue(op, "the plan", p->queue);
}

/* t has rank want_rank and dims want (-1: any), in the layout named by layout. */
static rudnn_status_t check_shape(const char *op, const char *arg, const rudnn_tensor_t *t, const int64_t *want,
                                  int rank, const char *layout, const char *why)
{
    int ok = t->rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = want[i] < 0 || t->dims[i] == want[i];
    if (ok)
        return RUDNN_STATUS_SUCCESS;
    char s[160], w[200];
    size_t len = (size_t)snprintf(w, sizeof w, "[");
    for (int i = 0; i < rank && len < sizeof w; i++)
        len += want[i] < 0 ? (size_t)snprintf(w + len, sizeof w - len, "%s%c", i ? ", " : "", layout[i])
                           : (size_t)snprintf(w + len, sizeof w - len, "%s%lld", i ? ", " : "", (long long)want[i]);
    if (len < sizeof w)
        snprintf(w + len, sizeof w - len, "]");
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected %s %s", op, arg,
                           rudnn_shape_str(t, s, sizeof s), w, why);
}

static rudnn_status_t check_dim(const char *op, const char *arg, const char *name, int64_t d, int64_t max)
{
    if (d >= 1 && d <= max)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has %s = %lld, expected 1..%lld", op, arg, name,
                           (long long)d, (long long)max);
}

static rudnn_status_t check_like_q(const char *op, const char *arg, const rudnn_tensor_t *t, const rudnn_tensor_t *q)
{
    if (t->dtype == q->dtype)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s has dtype %s, expected %s (dtype of q)", op, arg,
                           rudnn_dtype_name(t->dtype), rudnn_dtype_name(q->dtype));
}

static rudnn_status_t check_scale(const char *op, float scale)
{
    if (isfinite(scale) && scale > 0.0f)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: scale = %g, expected a finite value > 0", op, (double)scale);
}

/* A cache [pages, page_size, heads, dim] of the plan's pages and page size. */
static rudnn_status_t check_cache(const char *op, const char *arg, const rudnn_tensor_t *t, const rudnn_paged_plan_t p,
                                  int64_t heads, int64_t dim, const char *layout, const char *why)
{
    const int64_t w[4] = {p->layout.cache_pages, p->layout.page_size, heads, dim};
    return check_shape(op, arg, t, w, 4, layout, why);
}

/* The tensors of one call: attention (qp, kp NULL) or MLA (v NULL). */
typedef struct paged_tensors {
    const rudnn_tensor_t *q, *qp, *k, *kp, *v, *out;
} paged_tensors_t;

static rudnn_status_t validate(const char *op, rudnn_paged_plan_t p, const paged_tensors_t *t, int mla, float scale,
                               int causal, rudnn_paged_args_t *a)
{
    TRY(rudnn_paged_check_plan(op, p));
    const char *names[6] = {"q", mla ? "qp" : NULL, mla ? "latent_cache" : "k_cache", mla ? "kp_cache" : NULL,
                            mla ? NULL : "v_cache", "out"};
    const rudnn_tensor_t *all[6] = {t->q, t->qp, t->k, t->kp, t->v, t->out};
    for (int i = 0; i < 6; i++)
        if (names[i]) {
            TRY(rudnn_check_arg(op, names[i], all[i]));
            TRY(rudnn_check_tensor(op, names[i], p->queue, all[i], 0));
            TRY(i == 0 ? rudnn_check_float_dtype(op, names[i], all[i]) : check_like_q(op, names[i], all[i], t->q));
        }
    const int64_t Q = p->layout.queries;
    TRY(check_shape(op, "q", t->q, (int64_t[]){Q, -1, -1}, 3, mla ? "QHR" : "QHD", "(Q: the plan's queries)"));
    const int64_t H = t->q->dims[1], D = t->q->dims[2];
    TRY(check_dim(op, "q", "heads (dim 1)", H, INT32_MAX));
    TRY(check_dim(op, "q", mla ? "R (dim 2)" : "D (dim 2)", D, RUDNN_PAGED_MAX_HEAD_DIM));
    int64_t Hkv = 1, Dv = D, P = 0;
    if (mla) {
        if (t->qp->rank == 3)
            P = t->qp->dims[2];
        TRY(check_shape(op, "qp", t->qp, (int64_t[]){Q, H, -1}, 3, "QHP", "([Q, H] of q)"));
        TRY(check_dim(op, "qp", "P (dim 2)", P, RUDNN_PAGED_MLA_MAX_ROPE_DIM));
        TRY(check_cache(op, "latent_cache", t->k, p, 1, D, "PSHR",
                        "(the plan's pages and page_size, one head, R of q)"));
        TRY(check_cache(op, "kp_cache", t->kp, p, 1, P, "PSHP", "(the plan's pages and page_size, one head, P of qp)"));
    } else {
        if (t->k->rank == 4)
            Hkv = t->k->dims[2];
        TRY(check_cache(op, "k_cache", t->k, p, -1, D, "PSHD", "(the plan's pages and page_size, D of q)"));
        TRY(check_dim(op, "k_cache", "Hkv (dim 2)", Hkv, H));
        if (H % Hkv)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: q has %lld heads, not a multiple of k_cache's "
                                   "%lld heads (dim 2)", op, (long long)H, (long long)Hkv);
        if (t->v->rank == 4)
            Dv = t->v->dims[3];
        TRY(check_cache(op, "v_cache", t->v, p, Hkv, -1, "PSHV", "(the plan's pages and page_size, Hkv of k_cache)"));
        TRY(check_dim(op, "v_cache", "Dv (dim 3)", Dv, RUDNN_PAGED_MAX_HEAD_DIM));
    }
    TRY(check_shape(op, "out", t->out, (int64_t[]){Q, H, Dv}, 3, "QHV",
                    mla ? "([Q, H, R] of q)" : "([Q, Hq] of q, Dv of v_cache)"));
    for (int i = 0; i < 5; i++)
        if (names[i])
            TRY(rudnn_check_disjoint(op, "out", t->out, names[i], all[i]));
    TRY(check_scale(op, scale));

    memset(a, 0, sizeof *a);
    a->dtype = t->q->dtype;
    a->mla = mla;
    a->heads_q = H, a->heads_kv = Hkv, a->head_dim = D, a->value_dim = Dv, a->rope_dim = P;
    a->scale = scale;
    a->causal = causal != 0;
    a->splits = 1;
    a->layout = p->layout;
    return RUDNN_STATUS_SUCCESS;
}

/* ---- splits ---------------------------------------------------------------------------------------- */

/* In double: the product of two int32 counts and a width may pass size_t. */
static double split_bytes(int64_t queries, int64_t heads, int64_t value_dim, int splits)
{
    return (double)splits * (double)queries * (double)heads * ((double)value_dim + 2) * sizeof(float);
}

/* Bytes of the merge counters (one uint32 per output row at most: a row group of one call has at
 * least one row). */
static double ticket_bytes(int64_t queries, int64_t heads)
{
    return (double)queries * (double)heads * sizeof(uint32_t);
}

/* The plan's choice for splits 0 (the file's constants), at most cap. */
/* How full the waves of n items are, over `slots` items at once. */
static double wave_fill(int64_t n, int64_t slots)
{
    const int64_t waves = (n + slots - 1) / slots;
    return (double)n / (double)(waves * slots);
}

static int choose_splits(const rudnn_paged_plan_t p, int64_t heads_q, int64_t heads_kv, int cap)
{
    const int64_t chunks = (heads_q + PAGED_SPLIT_ITEM_HEADS - 1) / PAGED_SPLIT_ITEM_HEADS;
    const int64_t items = p->layout.block_count[PAGED_SPLIT_COUNT_KIND] * (heads_kv > chunks ? heads_kv : chunks);
    const int64_t slots = (int64_t)PAGED_SPLIT_RESIDENT * p->compute_units;
    int64_t most = p->layout.max_len / PAGED_SPLIT_MIN_KEYS;
    most = most < cap ? most : cap;
    if (items < 1 || items >= slots || most < 2)
        return 1; /* enough items already, or too few keys to split */
    double best = 0.0;
    for (int64_t s = 1; s <= most; s++) {
        const double f = wave_fill(items * s, slots);
        best = f > best ? f : best;
    }
    for (int64_t s = 1; s <= most; s++)
        if (wave_fill(items * s, slots) >= best - PAGED_SPLIT_FILL_SLACK)
            return (int)s;
    return 1;
}

static rudnn_status_t check_workspace(const char *op, rudnn_paged_plan_t p, rudnn_paged_split_workspace_t ws,
                                      const rudnn_paged_args_t *a)
{
    TRY(rudnn_check_arg(op, "workspace", ws));
    if (ws->queue != p->queue)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: workspace was made for another queue than the plan's: "
                               "a split workspace is reused on one queue only", op);
    if (ws->queries != p->layout.queries || ws->heads != a->heads_q || ws->value_dim != a->value_dim)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: workspace was made for %lld queries, %lld heads, value "
                               "dim %lld; this call has %lld, %lld, %lld", op, (long long)ws->queries,
                               (long long)ws->heads, (long long)ws->value_dim, (long long)p->layout.queries,
                               (long long)a->heads_q, (long long)a->value_dim);
    return RUDNN_STATUS_SUCCESS;
}

static int splits_of(rudnn_paged_plan_t p, rudnn_paged_split_workspace_t ws, int64_t heads_q, int64_t heads_kv)
{
    return ws->splits ? ws->splits : choose_splits(p, heads_q, heads_kv, ws->capacity);
}

rudnn_status_t rudnn_paged_split_workspace_create(rudnn_queue_t queue, int64_t queries, int64_t heads,
                                                  int64_t value_dim, int splits,
                                                  rudnn_paged_split_workspace_t *workspace)
{
    rudnn_clear_error();
    const char *op = OP_SPLIT_WS;
    TRY(rudnn_check_arg(op, "workspace", workspace));
    TRY(rudnn_check_queue(op, queue));
    if (queries < 1 || queries >= INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: queries = %lld, expected 1..%d", op, (long long)queries,
                               INT32_MAX - 1);
    TRY(check_dim(op, "the call", "heads", heads, INT32_MAX));
    TRY(check_dim(op, "the call", "value_dim", value_dim, RUDNN_PAGED_MAX_HEAD_DIM));
    if (splits != 0 && (splits < 2 || splits > RUDNN_PAGED_MAX_SPLITS))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: splits = %d, expected 2..%d (or 0: chosen per call)", op,
                               splits, RUDNN_PAGED_MAX_SPLITS);
    const double one = split_bytes(queries, heads, value_dim, 1), max = (double)RUDNN_PAGED_SPLIT_WORKSPACE_MAX_BYTES;
    int capacity = splits;
    if (splits == 0) {
        const double fit = floor(max / one);
        capacity = fit < RUDNN_PAGED_MAX_SPLITS ? (int)fit : RUDNN_PAGED_MAX_SPLITS;
        capacity = capacity < 1 ? 1 : capacity;
    } else if (one * splits > max) {
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %d splits of %lld queries x %lld heads x (value_dim %lld "
                               "+ 2) FP32 partials need %.1f MiB, past the %zu MiB a split workspace may hold", op,
                               splits, (long long)queries, (long long)heads, (long long)value_dim,
                               one * splits / (1 << 20), RUDNN_PAGED_SPLIT_WORKSPACE_MAX_BYTES >> 20);
    }
    rudnn_paged_split_workspace_t w = rudnn_host_calloc(1, sizeof *w);
    if (!w)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory", op);
    w->bytes = capacity > 1 ? (size_t)split_bytes(queries, heads, value_dim, capacity) : 16;
    /* The merge counters after the partials, where the whole stays within the limit (the limit's
     * figure and message are the partials' alone, as the header documents; at the limit exactly
     * there are none, and the merge runs as a kernel of its own). Zeroed once here; each call
     * leaves them zero. */
    const double tb = ticket_bytes(queries, heads);
    if (capacity > 1 && (double)w->bytes + tb <= max) {
        w->tickets = w->bytes;
        w->bytes += (size_t)tb;
    }
    rudnn_status_t st = rudnn_buffer_create(queue->context, w->bytes, &w->mem);
    if (!st && w->tickets) {
        st = queue->context->backend->mem_fill(queue->handle, (rudnn_mem_ref_t){w->mem->mem, w->tickets}, 0,
                                               w->bytes - w->tickets);
        if (st)
            rudnn_buffer_destroy(w->mem);
    }
    if (st) {
        rudnn_error_prefix(op);
        free(w);
        return st;
    }
    rudnn_queue_retain(queue);
    w->queue = queue;
    w->queries = queries, w->heads = heads, w->value_dim = value_dim;
    w->splits = splits, w->capacity = capacity;
    rudnn_live_object(+1);
    *workspace = w;
    return RUDNN_STATUS_SUCCESS;
}

void rudnn_paged_split_workspace_destroy(rudnn_paged_split_workspace_t w)
{
    if (!w)
        return;
    rudnn_buffer_destroy(w->mem);
    rudnn_queue_release(w->queue);
    free(w);
    rudnn_live_object(-1);
}

size_t rudnn_paged_split_workspace_bytes(rudnn_paged_split_workspace_t w) { return w ? w->bytes : 0; }

rudnn_status_t rudnn_paged_split_count(rudnn_paged_plan_t p, rudnn_paged_split_workspace_t ws, int64_t heads_q,
                                       int64_t heads_kv, int *splits)
{
    rudnn_clear_error();
    const char *op = OP_SPLIT_COUNT;
    TRY(rudnn_paged_check_plan(op, p));
    TRY(rudnn_check_arg(op, "splits", splits));
    TRY(check_dim(op, "the call", "heads_kv", heads_kv, heads_q));
    if (heads_q % heads_kv)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: heads_q = %lld is not a multiple of heads_kv = %lld", op,
                               (long long)heads_q, (long long)heads_kv);
    rudnn_paged_args_t a = {.heads_q = heads_q, .value_dim = ws ? ws->value_dim : 0};
    TRY(check_workspace(op, p, ws, &a));
    *splits = splits_of(p, ws, heads_q, heads_kv);
    return RUDNN_STATUS_SUCCESS;
}

/* ---- the calls ------------------------------------------------------------------------------------- */

static rudnn_status_t run(const char *op, rudnn_paged_plan_t p, rudnn_paged_split_workspace_t ws,
                          const paged_tensors_t *t, int mla, float scale, int causal)
{
    rudnn_paged_args_t a;
    TRY(validate(op, p, t, mla, scale, causal, &a));
    if (ws) {
        TRY(check_workspace(op, p, ws, &a));
        a.splits = splits_of(p, ws, a.heads_q, a.heads_kv);
    }
    if (a.layout.queries == 0)
        return RUDNN_STATUS_SUCCESS;
    const rudnn_paged_attention_kernels_t *k = RUDNN_FAMILY_TABLE(p->queue->context->backend, paged_attention);
    if (!k || !k->attend)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: the %s backend has no paged-attention kernels", op,
                               p->queue->context->backend->name);
    rudnn_paged_operands_t o;
    memset(&o, 0, sizeof o);
    o.plan = (rudnn_mem_ref_t){p->image->mem, 0};
    o.q = rudnn_mem_of(t->q), o.qp = rudnn_mem_of(t->qp), o.k = rudnn_mem_of(t->k), o.kp = rudnn_mem_of(t->kp);
    o.v = rudnn_mem_of(t->v), o.out = rudnn_mem_of(t->out);
    if (a.splits > 1) {
        o.workspace = (rudnn_mem_ref_t){ws->mem->mem, 0};
        if (ws->tickets)
            o.tickets = (rudnn_mem_ref_t){ws->mem->mem, ws->tickets};
    }
    return rudnn_kernel_status(op, k->attend(p->queue->handle, &a, &o));
}

rudnn_status_t rudnn_paged_attention(rudnn_paged_plan_t plan, const rudnn_tensor_t *q, const rudnn_tensor_t *k_cache,
                                     const rudnn_tensor_t *v_cache, float scale, int causal, const rudnn_tensor_t *out)
{
    rudnn_clear_error();
    const paged_tensors_t t = {q, NULL, k_cache, NULL, v_cache, out};
    return run(OP_ATT, plan, NULL, &t, 0, scale, causal);
}

rudnn_status_t rudnn_paged_mla(rudnn_paged_plan_t plan, const rudnn_tensor_t *q, const rudnn_tensor_t *qp,
                               const rudnn_tensor_t *latent_cache, const rudnn_tensor_t *kp_cache, float scale,
                               int causal, const rudnn_tensor_t *out)
{
    rudnn_clear_error();
    const paged_tensors_t t = {q, qp, latent_cache, kp_cache, NULL, out};
    return run(OP_MLA, plan, NULL, &t, 1, scale, causal);
}

rudnn_status_t rudnn_paged_attention_with_workspace(rudnn_paged_plan_t plan, rudnn_paged_split_workspace_t workspace,
                                                    const rudnn_tensor_t *q, const rudnn_tensor_t *k_cache,
                                                    const rudnn_tensor_t *v_cache, float scale, int causal,
                                                    const rudnn_tensor_t *out)
{
    rudnn_clear_error();
    TRY(rudnn_check_arg(OP_ATT_WS, "workspace", workspace));
    const paged_tensors_t t = {q, NULL, k_cache, NULL, v_cache, out};
    return run(OP_ATT_WS, plan, workspace, &t, 0, scale, causal);
}

rudnn_status_t rudnn_paged_mla_with_workspace(rudnn_paged_plan_t plan, rudnn_paged_split_workspace_t workspace,
                                              const rudnn_tensor_t *q, const rudnn_tensor_t *qp,
                                              const rudnn_tensor_t *latent_cache, const rudnn_tensor_t *kp_cache,
                                              float scale, int causal, const rudnn_tensor_t *out)
{
    rudnn_clear_error();
    TRY(rudnn_check_arg(OP_MLA_WS, "workspace", workspace));
    const paged_tensors_t t = {q, qp, latent_cache, kp_cache, NULL, out};
    return run(OP_MLA_WS, plan, workspace, &t, 1, scale, causal);
}
