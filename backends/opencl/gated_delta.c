/* Host launchers of the gated delta rule (kernels/gated_delta.cl): the table of
 * backends/hal/gated_delta.h. One program per input dtype (-DRUDNN_DTYPE); every launch is
 * one-dimensional, split by ocl_enqueue_groups below 2^31 work-items. The plan comes validated
 * from ops/gated_delta.c. */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"

extern const char rudnn_ocl_src_gated_delta[];
extern const size_t rudnn_ocl_src_gated_delta_size;

enum { K_RECURRENT, K_PREP, K_STATE, K_COUNT };
static const char *const k_names[K_COUNT] = {"rudnn_gdr_recurrent", "rudnn_gdr_chunk_prep",
                                              "rudnn_gdr_chunk_state"};

/* Launch shapes (a work-group of cols x R work-items: cols value columns, R items per column):
 *   GDR_COLS_MAX      columns a group owns: 32 floats, a 128-byte row of S per load on a GPU, two
 *                     AVX-512 vectors per work-item loop on PoCL; fewer where V or local memory is short
 *   GDR_REC_ROWS_MAX  recurrent, GPU: items per column splitting K (their partial dots reduced in
 *                     local memory): sqrt(K / 2) of them balances K / R steps against 3 R sums
 *   GDR_STATE_ROWS    chunk_state, GPU: items per column sharing a chunk's output rows and the
 *                     state's rows (no reduction), 256 items a group
 *   CPU devices (PoCL) take R = 1: a work-group runs as a loop over its items there, and splitting
 *   rows only adds barriers and sums
 *   GDR_PREP_LOCAL    chunk_prep's work-items (its loops stride by it) */
#define GDR_COLS_MAX 32u
#define GDR_REC_ROWS_MAX 8u
#define GDR_STATE_ROWS 8u
#define GDR_PREP_LOCAL 64u
/* Work-items of a recurrent or chunk_state group at most. */
#define GDR_ITEMS_MAX 256u

/* Floats of the scratch record of one (chunk, head): W, U, Pm, gamma (gated_delta.cl's rec_*). */
static uint64_t rec_floats(const rudnn_gated_delta_plan_t *p)
{
    const uint64_t C = (uint64_t)p->chunk_size, K = (uint64_t)p->key_dim, V = (uint64_t)p->value_dim;
    return (C * (K + V) + C * C + C + 3) / 4 * 4;
}

static rudnn_status_t program(ocl_queue_t *q, rudnn_dtype_t dtype, ocl_kernel_set_t **ks)
{
    int code;
    size_t elem;
    RUDNN_TRY(ocl_dtype_code(dtype, "gated_delta", "query", &code, &elem));
    char options[64];
    snprintf(options, sizeof options, "-DRUDNN_DTYPE=%d", code);
    return ocl_program_get(q->dev, "gated_delta.cl", rudnn_ocl_src_gated_delta, options, k_names, K_COUNT, ks);
}

/* A launch shape: cols (a power of two <= GDR_COLS_MAX, no more than V needs) times rows items,
 * within the kernel's work-group limit, with floats_per_col floats of local memory per column plus
 * floats_per_item per work-item fitting the device (fewer columns, then fewer rows, where not). */
typedef struct gdr_shape {
    size_t cols, rows;
} gdr_shape_t;

static rudnn_status_t pick_shape(ocl_queue_t *q, ocl_kernel_set_t *ks, const rudnn_gated_delta_plan_t *p,
                                 size_t rows, uint64_t floats_per_col, uint64_t floats_per_item, gdr_shape_t *sh)
{
    const size_t cap = ocl_local_cap(q->dev, ks, GDR_ITEMS_MAX);
    size_t c = GDR_COLS_MAX < cap ? GDR_COLS_MAX : cap;
    while (c > 1 && c / 2 >= (size_t)p->value_dim)
        c /= 2;
    while (rows > 1 && c * rows > cap)
        rows /= 2;
/* each launch passes two local arrays: room for the drivers' alignment of both (ocl_local_arg_bytes) */
#define GDR_BYTES(c, r)                                                                                  \
    (((uint64_t)(c) * floats_per_col + (uint64_t)(c) * (r) * floats_per_item) * 4 + 2 * OCL_LOCAL_ARG_ALIGN)
    while (c > 1 && GDR_BYTES(c, rows) > q->dev->local_mem)
        c /= 2;
    while (rows > 1 && GDR_BYTES(c, rows) > q->dev->local_mem)
        rows /= 2;
    if (GDR_BYTES(c, rows) > q->dev->local_mem)
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "gated_delta: opencl: K %lld with chunk %lld needs %llu bytes of "
                        "local memory, past the device's %llu", (long long)p->key_dim, (long long)p->chunk_size,
                        (unsigned long long)GDR_BYTES(c, rows), (unsigned long long)q->dev->local_mem);
#undef GDR_BYTES
    sh->cols = c, sh->rows = rows;
    return RUDNN_STATUS_SUCCESS;
}

/* Items per column of the recurrent kernel: on a GPU the power of two at or below sqrt(K / 2), at
 * most GDR_REC_ROWS_MAX; 1 on a CPU. */
static size_t rec_rows(const ocl_device_t *dev, int64_t K)
{
    size_t r = 1;
    while (r < GDR_REC_ROWS_MAX && (int64_t)(4 * r * r) * 2 <= K)
        r *= 2;
    return dev->is_cpu ? 1 : r;
}

/* Element offsets of the operands (the kernels index in elements), and the placeholder table. */
typedef struct gdr_args {
    cl_mem q, k, v, beta, decay, s_in, table, out, s_out, scratch;
    cl_ulong qo, ko, vo, bo, dco, sio, tbo, oo, soo, sco;
    cl_long4 qs, ks, vs, bs, ds, os;
    cl_long H, T, K, V, n, C;
    cl_int varlen;
    cl_float scale;
} gdr_args_t;

static void gdr_args(const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o, gdr_args_t *a)
{
    const size_t es = p->dtype == RUDNN_F32 ? 4 : 2;
    a->q = (cl_mem)o->query.mem, a->qo = o->query.offset / es;
    a->k = (cl_mem)o->key.mem, a->ko = o->key.offset / es;
    a->v = (cl_mem)o->value.mem, a->vo = o->value.offset / es;
    a->beta = (cl_mem)o->beta.mem, a->bo = o->beta.offset / es;
    a->decay = (cl_mem)o->log_decay.mem, a->dco = o->log_decay.offset / 4;
    a->s_in = (cl_mem)o->initial_state.mem, a->sio = o->initial_state.offset / 4;
    a->out = (cl_mem)o->output.mem, a->oo = o->output.offset / es;
    a->s_out = (cl_mem)o->final_state.mem, a->soo = o->final_state.offset / 4;
    a->table = o->table.mem ? (cl_mem)o->table.mem : a->s_in; /* never read without varlen */
    a->tbo = o->table.mem ? o->table.offset / 8 : 0;
    a->scratch = o->scratch.mem ? (cl_mem)o->scratch.mem : a->s_out;
    a->sco = o->scratch.mem ? o->scratch.offset / 4 : 0;
    a->qs = ocl_long4_of(p->q_stride), a->ks = ocl_long4_of(p->k_stride), a->vs = ocl_long4_of(p->v_stride);
    a->bs = ocl_long4_of(p->beta_stride), a->ds = ocl_long4_of(p->decay_stride), a->os = ocl_long4_of(p->o_stride);
    a->H = p->heads, a->T = p->seq_len, a->K = p->key_dim, a->V = p->value_dim, a->n = p->sequences;
    a->C = p->chunk_size;
    a->varlen = p->varlen != 0;
    a->scale = p->query_scale;
}

static rudnn_status_t gdr_recurrent(void *queue, const rudnn_gated_delta_plan_t *p,
                                    const rudnn_gated_delta_operands_t *o)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    RUDNN_TRY(program(q, p->dtype, &ks));
    gdr_shape_t sh;
    /* S [K][cols], and with rows > 1 the partial sums [2][3][rows][cols] */
    const size_t rows = rec_rows(q->dev, p->key_dim);
    RUDNN_TRY(pick_shape(q, ks, p, rows, (uint64_t)p->key_dim, rows > 1 ? 6 : 0, &sh));
    gdr_args_t a;
    gdr_args(p, o, &a);
    const cl_long col_blocks = (p->value_dim + (int64_t)sh.cols - 1) / (int64_t)sh.cols;
    const cl_uint cols = (cl_uint)sh.cols;
    const size_t red_bytes = sh.rows > 1 ? 6 * sh.rows * sh.cols * 4 : 4;
    const karg_list_t args =
        KARGS(ARG(a.q), ARG(a.qo), ARG(a.k), ARG(a.ko), ARG(a.v), ARG(a.vo), ARG(a.beta), ARG(a.bo), ARG(a.decay),
              ARG(a.dco), ARG(a.s_in), ARG(a.sio), ARG(a.table), ARG(a.tbo), ARG(a.out), ARG(a.oo), ARG(a.s_out),
              ARG(a.soo), GROUP0_ARG(), ARG(a.qs), ARG(a.ks), ARG(a.vs), ARG(a.bs), ARG(a.ds), ARG(a.os), ARG(a.H),
              ARG(a.T), ARG(a.K), ARG(a.V), ARG(a.n), ARG(a.varlen), ARG(a.scale), ARG(col_blocks), ARG(cols),
              LOCAL_ARG(sh.cols * (size_t)p->key_dim * 4), LOCAL_ARG(red_bytes));
    ocl_note_kernel("gated_delta.recurrent");
    return ocl_enqueue_groups(q, ks, K_RECURRENT, k_names, "gated_delta", args,
                              (uint64_t)col_blocks * (uint64_t)p->heads * (uint64_t)p->sequences, sh.cols * sh.rows);
}

static rudnn_status_t gdr_chunk_workspace(void *device, const rudnn_gated_delta_plan_t *p, size_t *bytes)
{
    const ocl_device_t *dev = (const ocl_device_t *)device;
    const uint64_t C = (uint64_t)p->chunk_size;
    if (4 * (C * C + C) > dev->local_mem)
        return ocl_fail(RUDNN_STATUS_BAD_PARAM, "gated_delta: chunk_size %lld needs 4 (C^2 + C) = %llu bytes of local "
                        "memory, past the device's %llu (CL_DEVICE_LOCAL_MEM_SIZE)", (long long)p->chunk_size,
                        (unsigned long long)(4 * (C * C + C)), (unsigned long long)dev->local_mem);
    *bytes = (size_t)((uint64_t)p->chunks * (uint64_t)p->heads * rec_floats(p) * 4);
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t gdr_chunked(void *queue, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    RUDNN_TRY(program(q, p->dtype, &ks));
    gdr_args_t a;
    gdr_args(p, o, &a);
    const size_t C = (size_t)p->chunk_size;
    if (4 * ((uint64_t)C * C + C) > q->dev->local_mem) /* as chunk_workspace said */
        return gdr_chunk_workspace(q->dev, p, &(size_t){0});
    /* state kernel's shape first: nothing runs when it cannot */
    gdr_shape_t sh;
    RUDNN_TRY(pick_shape(q, ks, p, q->dev->is_cpu ? 1 : GDR_STATE_ROWS,
                         (uint64_t)p->key_dim + C, 0, &sh));
    const size_t prep_local = ocl_local_cap(q->dev, ks, GDR_PREP_LOCAL);
    const karg_list_t prep =
        KARGS(ARG(a.q), ARG(a.qo), ARG(a.k), ARG(a.ko), ARG(a.v), ARG(a.vo), ARG(a.beta), ARG(a.bo), ARG(a.decay),
              ARG(a.dco), ARG(a.table), ARG(a.tbo), ARG(a.scratch), ARG(a.sco), GROUP0_ARG(), ARG(a.qs), ARG(a.ks),
              ARG(a.vs), ARG(a.bs), ARG(a.ds), ARG(a.H), ARG(a.T), ARG(a.K), ARG(a.V), ARG(a.n), ARG(a.varlen),
              ARG(a.C), LOCAL_ARG(C * C * 4), LOCAL_ARG(C * 4));
    ocl_note_kernel("gated_delta.chunk_prep");
    RUDNN_TRY(ocl_enqueue_groups(q, ks, K_PREP, k_names, "gated_delta", prep,
                                 (uint64_t)p->chunks * (uint64_t)p->heads, prep_local));
    const cl_long col_blocks = (p->value_dim + (int64_t)sh.cols - 1) / (int64_t)sh.cols;
    const cl_uint cols = (cl_uint)sh.cols;
    const karg_list_t state =
        KARGS(ARG(a.q), ARG(a.qo), ARG(a.k), ARG(a.ko), ARG(a.s_in), ARG(a.sio), ARG(a.table), ARG(a.tbo),
              ARG(a.scratch), ARG(a.sco), ARG(a.out), ARG(a.oo), ARG(a.s_out), ARG(a.soo), GROUP0_ARG(), ARG(a.qs),
              ARG(a.ks), ARG(a.os), ARG(a.H), ARG(a.T), ARG(a.K), ARG(a.V), ARG(a.n), ARG(a.varlen), ARG(a.C),
              ARG(a.scale), ARG(col_blocks), ARG(cols), LOCAL_ARG(sh.cols * (size_t)p->key_dim * 4),
              LOCAL_ARG(sh.cols * C * 4));
    ocl_note_kernel("gated_delta.chunk_state");
    return ocl_enqueue_groups(q, ks, K_STATE, k_names, "gated_delta", state,
                              (uint64_t)col_blocks * (uint64_t)p->heads * (uint64_t)p->sequences, sh.cols * sh.rows);
}

const rudnn_gated_delta_kernels_t ocl_gated_delta_kernels = {
    .struct_size = sizeof(rudnn_gated_delta_kernels_t),
    .recurrent = gdr_recurrent,
    .chunk_workspace = gdr_chunk_workspace,
    .chunked = gdr_chunked,
};
