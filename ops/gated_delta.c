/* The gated delta rule (rudnn/gated_delta.h): the contract, the plan, the varlen sequence table and
 * the call into the backend's table. No GPU API here. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "gated_delta_internal.h"
#include "validate.h"

#define OP_CHUNK "rudnn_chunk_gated_delta_rule"
#define OP_RECURRENT "rudnn_gated_delta_rule"

/* Context parallelism of the chunked state pass (plan.segments): a segment beyond the first costs a
 * pass from a zero state plus a K x K transition over its chunks, so a sequence is cut only where its
 * chunks outnumber the chunks each compute unit would get (all chunks of all heads over the units:
 * the state pass's critical path when the work spreads evenly), and never below
 * GDR_SEGMENT_MIN_CHUNKS chunks a segment. Every sequence of the call gets the same count (and the
 * scratch for its carried states), so the chains, sequences x heads x segments, stay within
 * GDR_SEGMENT_CHAINS_PER_UNIT a compute unit: many short sequences beside one long one are not cut. */
#define GDR_SEGMENT_MIN_CHUNKS 8
#define GDR_SEGMENT_MAX 64
#define GDR_SEGMENT_CHAINS_PER_UNIT 2

enum { N_INPUTS = 6 };
static const char *const input_names[N_INPUTS + 2] = {"query", "key", "value", "beta", "log_decay",
                                                      "initial_state", "output", "final_state"};

static void tensors_of(const rudnn_gated_delta_input_t *in, const rudnn_gated_delta_output_t *out,
                       const rudnn_tensor_t *t[N_INPUTS + 2])
{
    t[0] = in->query, t[1] = in->key, t[2] = in->value, t[3] = in->beta, t[4] = in->log_decay;
    t[5] = in->initial_state, t[6] = out ? out->output : NULL, t[7] = out ? out->final_state : NULL;
}

static rudnn_status_t shape_error(const char *op, const char *arg, const rudnn_tensor_t *t, const char *want)
{
    char s[160];
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected %s", op, arg,
                           rudnn_shape_str(t, s, sizeof s), want);
}

static rudnn_status_t check_rank(const char *op, const char *arg, const rudnn_tensor_t *t, int rank,
                                 const char *layout)
{
    if (t->rank == rank)
        return RUDNN_STATUS_SUCCESS;
    char s[160];
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s (rank %d), expected rank %d %s", op, arg,
                           rudnn_shape_str(t, s, sizeof s), t->rank, rank, layout);
}

static rudnn_status_t check_dims(const char *op, const char *arg, const rudnn_tensor_t *t, const int64_t *want,
                                 int rank, const char *layout)
{
    TRY(check_rank(op, arg, t, rank, layout));
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != want[i]) {
            char w[200];
            size_t len = (size_t)snprintf(w, sizeof w, "[");
            for (int j = 0; j < rank && len < sizeof w; j++)
                len += (size_t)snprintf(w + len, sizeof w - len, "%s%lld", j ? ", " : "", (long long)want[j]);
            if (len < sizeof w)
                snprintf(w + len, sizeof w - len, "] %s", layout);
            return shape_error(op, arg, t, w);
        }
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t check_dim(const char *op, const char *arg, const char *name, int64_t d)
{
    if (d >= 1 && d <= RUDNN_GATED_DELTA_MAX_DIM)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has %s = %lld, expected 1..%d", op, arg, name,
                           (long long)d, RUDNN_GATED_DELTA_MAX_DIM);
}

static rudnn_status_t check_same_dtype(const char *op, const char *arg, const rudnn_tensor_t *t,
                                       const rudnn_tensor_t *q)
{
    if (t->dtype == q->dtype)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s has dtype %s, expected %s (dtype of query)", op, arg,
                           rudnn_dtype_name(t->dtype), rudnn_dtype_name(q->dtype));
}

static void strides3(const rudnn_tensor_t *t, int64_t s[3])
{
    /* a dim of size 1 never uses its stride: 0 keeps the kernels' offsets small */
    for (int i = 0; i < 3; i++)
        s[i] = t->dims[i] == 1 ? 0 : t->strides[i];
}

/* Segments of the state pass: the longest sequence cut into pieces of the even share's length. */
static int64_t choose_segments(int64_t head_chunks, int64_t longest_chunks, int64_t chains, int64_t units)
{
    if (units < 1)
        units = 1;
    int64_t share = (head_chunks + units - 1) / units;
    if (share < GDR_SEGMENT_MIN_CHUNKS)
        share = GDR_SEGMENT_MIN_CHUNKS;
    int64_t s = longest_chunks / share;
    const int64_t by_chains = chains > 0 ? GDR_SEGMENT_CHAINS_PER_UNIT * units / chains : 1;
    s = s > by_chains ? by_chains : s;
    return s < 1 ? 1 : s > GDR_SEGMENT_MAX ? GDR_SEGMENT_MAX : s;
}

typedef struct gdr_call {
    rudnn_gated_delta_plan_t plan;
    int empty;           /* nothing to compute: no heads, no sequences */
    int copy_state_only; /* fixed length with T = 0 */
    size_t table_bytes;  /* varlen sequence table */
    size_t scratch_bytes;
} gdr_call_t;

/* Every check before a kernel runs; fills c. chunk 0: the recurrent form. */
static rudnn_status_t validate(const char *op, rudnn_queue_t queue, const rudnn_gated_delta_input_t *in,
                               const rudnn_gated_delta_varlen_t *vl, int64_t chunk,
                               const rudnn_gated_delta_output_t *out, gdr_call_t *c)
{
    memset(c, 0, sizeof *c);
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "input", in));
    TRY(rudnn_check_arg(op, "output", out));
    const rudnn_tensor_t *t[N_INPUTS + 2];
    tensors_of(in, out, t);
    for (int i = 0; i < N_INPUTS + 2; i++)
        TRY(rudnn_check_arg(op, input_names[i], t[i]));
    TRY(rudnn_check_tensor_rows(op, "query", queue, in->query, 0));
    TRY(check_rank(op, "query", in->query, 4, "[B, H, T, K]"));
    TRY(rudnn_check_tensor_rows(op, "key", queue, in->key, 0));
    TRY(rudnn_check_tensor_rows(op, "value", queue, in->value, 0));
    TRY(rudnn_check_tensor_view(op, "beta", queue, in->beta, 0));
    TRY(rudnn_check_tensor_view(op, "log_decay", queue, in->log_decay, 0));
    TRY(rudnn_check_tensor(op, "initial_state", queue, in->initial_state, 0));
    TRY(rudnn_check_tensor_rows(op, "output", queue, out->output, 0));
    TRY(rudnn_check_tensor(op, "final_state", queue, out->final_state, 0));

    /* dtypes */
    const rudnn_tensor_t *q = in->query;
    TRY(rudnn_check_float_dtype(op, "query", q));
    TRY(check_same_dtype(op, "key", in->key, q));
    TRY(check_same_dtype(op, "value", in->value, q));
    TRY(check_same_dtype(op, "beta", in->beta, q));
    TRY(rudnn_check_dtype(op, "log_decay", in->log_decay, RUDNN_F32, "the log of the gate is f32"));
    TRY(rudnn_check_dtype(op, "initial_state", in->initial_state, RUDNN_F32, "the state is f32"));
    TRY(check_same_dtype(op, "output", out->output, q));
    TRY(rudnn_check_dtype(op, "final_state", out->final_state, RUDNN_F32, "the state is f32"));

    /* dims */
    const int64_t B = q->dims[0], H = q->dims[1], T = q->dims[2], K = q->dims[3];
    TRY(check_dim(op, "query", "K (dim 3)", K));
    {
        const int64_t w[4] = {B, H, T, K};
        TRY(check_dims(op, "key", in->key, w, 4, "(query's [B, H, T, K])"));
    }
    TRY(check_rank(op, "value", in->value, 4, "[B, H, T, V]"));
    const int64_t V = in->value->dims[3];
    {
        const int64_t w[4] = {B, H, T, V};
        TRY(check_dims(op, "value", in->value, w, 4, "([B, H, T] of query)"));
    }
    TRY(check_dim(op, "value", "V (dim 3)", V));
    {
        const int64_t w[3] = {B, H, T};
        TRY(check_dims(op, "beta", in->beta, w, 3, "([B, H, T] of query)"));
        TRY(check_dims(op, "log_decay", in->log_decay, w, 3, "([B, H, T] of query)"));
        const int64_t o[4] = {B, H, T, V};
        TRY(check_dims(op, "output", out->output, o, 4, "([B, H, T] of query, V of value)"));
    }
    TRY(check_rank(op, "initial_state", in->initial_state, 4, vl ? "[P_in, H, K, V]" : "[B, H, K, V]"));
    TRY(check_rank(op, "final_state", out->final_state, 4, vl ? "[P_out, H, K, V]" : "[B, H, K, V]"));
    const int64_t rows_in = in->initial_state->dims[0], rows_out = out->final_state->dims[0];
    {
        const int64_t s_in[4] = {vl ? rows_in : B, H, K, V}, s_out[4] = {vl ? rows_out : B, H, K, V};
        TRY(check_dims(op, "initial_state", in->initial_state, s_in, 4,
                       vl ? "(a pool of rows: [P_in, H, K, V])" : "([B, H] of query, K, V)"));
        TRY(check_dims(op, "final_state", out->final_state, s_out, 4,
                       vl ? "(a pool of rows: [P_out, H, K, V])" : "([B, H] of query, K, V)"));
    }
    if (vl && B != 1)
        return shape_error(op, "query", q, "[1, H, T, K]: varlen packs the sequences along T of one batch row");

    /* outputs: disjoint from every input and from each other */
    for (int i = 0; i < N_INPUTS; i++) {
        TRY(rudnn_check_disjoint(op, "final_state", out->final_state, input_names[i], t[i]));
        TRY(rudnn_check_disjoint(op, "output", out->output, input_names[i], t[i]));
    }
    TRY(rudnn_check_disjoint(op, "output", out->output, "final_state", out->final_state));

    if (!isfinite(in->query_scale))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: input.query_scale = %g, expected a finite value", op,
                               (double)in->query_scale);
    if (chunk)
        TRY(rudnn_gdr_check_chunk_size(op, queue, chunk));
    const rudnn_gated_delta_varlen_plan_t vp = vl ? vl->plan : NULL;
    if (vp) {
        TRY(rudnn_gdr_check_plan(op, queue, vl, chunk, T, rows_in, rows_out));
    } else if (vl) {
        int64_t rows_needed;
        TRY(rudnn_gdr_check_offsets(op, vl, T));
        TRY(rudnn_gdr_check_indices(op, vl, rows_in, rows_out, &rows_needed));
    }

    rudnn_gated_delta_plan_t *p = &c->plan;
    p->dtype = q->dtype;
    p->heads = H, p->seq_len = T, p->key_dim = K, p->value_dim = V;
    p->sequences = vp ? vp->sequences : vl ? vl->sequences : B;
    p->varlen = vl != NULL;
    p->chunk_size = chunk;
    p->query_scale = in->query_scale;
    strides3(q, p->q_stride), strides3(in->key, p->k_stride), strides3(in->value, p->v_stride);
    strides3(out->output, p->o_stride), strides3(in->beta, p->beta_stride);
    strides3(in->log_decay, p->decay_stride);
    p->state_in_rows = rows_in, p->state_out_rows = rows_out;
    p->segments = 1;
    if (chunk) {
        int64_t longest = 0;
        if (vp)
            p->chunks = vp->chunks, longest = vp->longest;
        else if (vl)
            rudnn_gdr_count_chunks(vl, chunk, &p->chunks, &longest);
        else
            p->chunks = B * ((T + chunk - 1) / chunk), longest = (T + chunk - 1) / chunk;
        p->seq_chunks = vl ? 0 : (T + chunk - 1) / chunk;
        if (p->chunks > INT32_MAX)
            return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: %lld chunks of %lld tokens: more than %d chunks a "
                                   "call are not supported (split the call)", op, (long long)p->chunks,
                                   (long long)chunk, INT32_MAX);
        rudnn_device_info_t info;
        TRY(rudnn_context_device_info(queue->context, &info));
        /* chunks x heads and sequences x heads: below 2^62, as every tensor's elements are */
        p->segments = rudnn_env()->gdr_segments ? rudnn_env()->gdr_segments
                                                : choose_segments(p->chunks * H, longest, p->sequences * H,
                                                                  info.compute_units);
    }
    c->empty = H == 0 || p->sequences == 0;
    c->copy_state_only = !vl && T == 0;
    c->table_bytes = vl && !vp ? rudnn_gated_delta_table_bytes(vl->sequences) : 0; /* a plan's is its own */
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t table_of(const char *op, rudnn_queue_t queue, const rudnn_gated_delta_kernels_t **k)
{
    *k = RUDNN_FAMILY_TABLE(queue->context->backend, gated_delta);
    if (*k)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: the %s backend has no gated-delta kernels", op,
                           queue->context->backend->name);
}

/* Workspace bytes: the varlen table, then the kernels' scratch (256-byte aligned). */
static rudnn_status_t workspace_of(const char *op, rudnn_queue_t queue, gdr_call_t *c, size_t *total)
{
    *total = 0;
    if (c->empty || c->copy_state_only)
        return RUDNN_STATUS_SUCCESS;
    const rudnn_gated_delta_kernels_t *k;
    TRY(table_of(op, queue, &k));
    if (c->plan.chunk_size && c->plan.chunks)
        TRY(rudnn_kernel_status(op, k->chunk_workspace(queue->context->device, &c->plan, &c->scratch_bytes)));
    c->scratch_bytes = (c->scratch_bytes + 255) / 256 * 256;
    *total = c->table_bytes + c->scratch_bytes;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t workspace_size(const char *op, rudnn_queue_t queue, const rudnn_gated_delta_input_t *in,
                                     const rudnn_gated_delta_varlen_t *vl, int64_t chunk,
                                     const rudnn_gated_delta_output_t *out, size_t *bytes)
{
    TRY(rudnn_check_arg(op, "bytes", bytes));
    gdr_call_t c;
    TRY(validate(op, queue, in, vl, chunk, out, &c));
    size_t total;
    TRY(workspace_of(op, queue, &c, &total));
    *bytes = total;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t run(const char *op, rudnn_queue_t queue, const rudnn_gated_delta_input_t *in,
                          const rudnn_gated_delta_varlen_t *vl, int64_t chunk, rudnn_buffer_t workspace,
                          size_t workspace_bytes, const rudnn_gated_delta_output_t *out)
{
    gdr_call_t c;
    TRY(validate(op, queue, in, vl, chunk, out, &c));
    size_t total;
    TRY(workspace_of(op, queue, &c, &total));
    const rudnn_tensor_t *t[N_INPUTS + 2];
    tensors_of(in, out, t);
    TRY(rudnn_check_workspace(op, queue, workspace, workspace_bytes, total,
                              chunk ? "rudnn_chunk_gated_delta_rule_workspace_size"
                                    : "rudnn_gated_delta_rule_workspace_size",
                              t, input_names, N_INPUTS + 2));
    if (c.empty)
        return RUDNN_STATUS_SUCCESS;
    if (c.copy_state_only)
        return rudnn_kernel_status(op, rudnn_buffer_copy(queue, out->final_state->buffer, out->final_state->offset,
                                                         in->initial_state->buffer, in->initial_state->offset,
                                                         rudnn_tensor_bytes(in->initial_state)));
    const rudnn_gated_delta_kernels_t *k;
    TRY(table_of(op, queue, &k));

    void *ws = workspace ? workspace->mem : NULL;
    const int pooled = !workspace && total > 0;
    if (pooled)
        TRY(rudnn_kernel_status(op, rudnn_pool_acquire(queue, total, &ws)));
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    if (vl && !vl->plan)
        st = rudnn_kernel_status(op, rudnn_gdr_write_table(queue, vl, chunk, ws));
    rudnn_gated_delta_operands_t o;
    memset(&o, 0, sizeof o);
    o.query = rudnn_mem_of(in->query), o.key = rudnn_mem_of(in->key), o.value = rudnn_mem_of(in->value);
    o.beta = rudnn_mem_of(in->beta), o.log_decay = rudnn_mem_of(in->log_decay);
    o.initial_state = rudnn_mem_of(in->initial_state);
    o.output = rudnn_mem_of(out->output), o.final_state = rudnn_mem_of(out->final_state);
    if (vl)
        o.table.mem = vl->plan ? vl->plan->table->mem : ws, o.table.offset = 0;
    if (c.scratch_bytes)
        o.scratch.mem = ws, o.scratch.offset = c.table_bytes;
    /* a chunked call whose sequences are all empty has no chunks: the recurrent entry copies states */
    if (!st)
        st = rudnn_kernel_status(op, c.plan.chunks ? k->chunked(queue->handle, &c.plan, &o)
                                                   : k->recurrent(queue->handle, &c.plan, &o));
    if (pooled)
        rudnn_pool_release(queue, ws, total);
    return st;
}

/* ---- public entries ------------------------------------------------------------------------- */

rudnn_status_t rudnn_chunk_gated_delta_rule_workspace_size(rudnn_queue_t queue, const rudnn_gated_delta_input_t *input,
                                                           const rudnn_gated_delta_varlen_t *varlen, int64_t chunk_size,
                                                           const rudnn_gated_delta_output_t *output, size_t *bytes)
{
    if (chunk_size < 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: chunk_size = %lld, expected >= 1", OP_CHUNK,
                               (long long)chunk_size);
    return workspace_size(OP_CHUNK, queue, input, varlen, chunk_size, output, bytes);
}

rudnn_status_t rudnn_chunk_gated_delta_rule(rudnn_queue_t queue, const rudnn_gated_delta_input_t *input,
                                            const rudnn_gated_delta_varlen_t *varlen, int64_t chunk_size,
                                            rudnn_buffer_t workspace, size_t workspace_bytes,
                                            const rudnn_gated_delta_output_t *output)
{
    if (chunk_size < 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: chunk_size = %lld, expected >= 1", OP_CHUNK,
                               (long long)chunk_size);
    return run(OP_CHUNK, queue, input, varlen, chunk_size, workspace, workspace_bytes, output);
}

rudnn_status_t rudnn_gated_delta_rule_workspace_size(rudnn_queue_t queue, const rudnn_gated_delta_input_t *input,
                                                     const rudnn_gated_delta_varlen_t *varlen,
                                                     const rudnn_gated_delta_output_t *output, size_t *bytes)
{
    return workspace_size(OP_RECURRENT, queue, input, varlen, 0, output, bytes);
}

rudnn_status_t rudnn_gated_delta_rule(rudnn_queue_t queue, const rudnn_gated_delta_input_t *input,
                                      const rudnn_gated_delta_varlen_t *varlen, rudnn_buffer_t workspace,
                                      size_t workspace_bytes, const rudnn_gated_delta_output_t *output)
{
    return run(OP_RECURRENT, queue, input, varlen, 0, workspace, workspace_bytes, output);
}
