/* Host launchers of paged attention, MLA and the cache append (kernels/paged_attention.cl): the
 * table of backends/hal/paged_attention.h. One program per dtype (-DRUDNN_DTYPE) holds the three
 * kernels; every launch is one-dimensional, split by ocl_enqueue_groups below 2^31 work-items. The
 * plan and its device image come validated from ops/paged_attention.c and ops/paged_append.c; the
 * kernels read the image's arrays, never host data. */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"

extern const char rudnn_ocl_src_paged_attention[];
extern const size_t rudnn_ocl_src_paged_attention_size;

#define PA_OP "paged_attention"

enum { K_ATTEND, K_MERGE, K_APPEND, K_COUNT };
static const char *const k_names[K_COUNT] = {"rudnn_paged_attend", "rudnn_paged_merge", "rudnn_paged_append"};

/* Launch shape of rudnn_paged_attend (its comment in paged_attention.cl has the local arrays):
 *   PA_KEYS       keys a tile: the softmax and V steps run once per tile, and a tile past the last
 *                 key is masked, so 32 keeps decode of short histories from idling
 *   PA_CHUNK      features of a staged K or V slice (a power of two): 64 F16 values are one
 *                 128-byte line per row, and any D or Dv up to 1024 (MLA: R + P) is walked in such
 *                 slices
 *   PA_HEADS_MAX  query heads a work-group serves at most: the K and V rows it stages are shared by
 *                 them (GQA 8 in one group); more only grows q and acc in local memory
 *   PA_GPU_LOCAL  work-items a group on a GPU at most: four warps, two (head, key) pairs each at
 *                 GQA 8; fewer heads take fewer items, one per pair (at least a warp)
 *   PA_CPU_LOCAL  on a CPU (PoCL runs a group as loops over its items): one AVX-512 vector
 *   PA_ROW_LOCAL  the most work-items of a merge or append group (one per output column) */
#define PA_KEYS 32u
#define PA_CHUNK 64u
#define PA_HEADS_MAX 16u
#define PA_GPU_LOCAL 128u
#define PA_CPU_LOCAL 16u
#define PA_ROW_LOCAL 256u

static rudnn_status_t program(ocl_queue_t *q, rudnn_dtype_t dtype, size_t *elem, ocl_kernel_set_t **ks)
{
    int code;
    RUDNN_TRY(ocl_dtype_code(dtype, PA_OP, "q", &code, elem));
    char options[96];
    snprintf(options, sizeof options, "-DRUDNN_DTYPE=%d -DPA_KEYS=%u -DPA_CHUNK=%u", code, PA_KEYS, PA_CHUNK);
    return ocl_program_get(q->dev, "paged_attention.cl", rudnn_ocl_src_paged_attention, options, k_names, K_COUNT,
                           ks);
}

/* The plan image's arrays as int offsets into the plan buffer (the kernels take int pointers). */
typedef struct pa_plan_args {
    cl_mem mem;
    cl_ulong len, table, qseq, qpos, pages;
} pa_plan_args_t;

static pa_plan_args_t plan_args(rudnn_mem_ref_t plan, const rudnn_paged_layout_t *l)
{
    const cl_ulong base = plan.offset;
    return (pa_plan_args_t){(cl_mem)plan.mem,
                            (base + (cl_ulong)l->off_seq_len) / 4,
                            (base + (cl_ulong)l->off_seq_table) / 4,
                            (base + (cl_ulong)l->off_query_seq) / 4,
                            (base + (cl_ulong)l->off_query_pos) / 4,
                            (base + (cl_ulong)l->off_pages) / 4};
}

/* ---- attend ---------------------------------------------------------------------------------------- */

/* How the attend kernel covers the G = Hq / Hkv query heads of a KV head: blocks of gb heads, hb
 * blocks (the last may hold fewer), local work-items a group. */
typedef struct pa_shape {
    cl_uint gb, hb;
    size_t local;
} pa_shape_t;

/* Local memory of an attend group serving gb heads, bytes: paged_attention.cl's six local arrays as
 * pa_attend passes them, each at the drivers' alignment (ocl_local_arg_bytes). */
static uint64_t attend_local_bytes(const rudnn_paged_args_t *a, uint64_t gb)
{
    const uint64_t W = (uint64_t)a->head_dim + (uint64_t)a->rope_dim, f = sizeof(float);
    return ocl_local_arg_bytes(gb * W * f) + ocl_local_arg_bytes((uint64_t)PA_CHUNK * (PA_KEYS + 1) * f) +
           ocl_local_arg_bytes(gb * PA_KEYS * f) + ocl_local_arg_bytes(gb * (uint64_t)a->value_dim * f) +
           ocl_local_arg_bytes(3 * gb * f) + ocl_local_arg_bytes(PA_KEYS * sizeof(cl_long));
}

/* Work-items of an attend group serving gb heads (PA_GPU_LOCAL, PA_CPU_LOCAL above). */
static size_t attend_local(const ocl_device_t *dev, const ocl_kernel_set_t *ks, cl_uint gb)
{
    if (dev->is_cpu)
        return ocl_local_cap(dev, ks, PA_CPU_LOCAL);
    size_t want = PA_KEYS;
    while (want < PA_GPU_LOCAL && want < (size_t)gb * PA_KEYS)
        want *= 2;
    return ocl_local_cap(dev, ks, want);
}

/* The most heads a group holds within the device's local memory, at most PA_HEADS_MAX and G, then
 * spread evenly over the blocks; NOT_SUPPORTED when one head does not fit. */
static rudnn_status_t attend_shape(const ocl_device_t *dev, const ocl_kernel_set_t *ks, const rudnn_paged_args_t *a,
                                   pa_shape_t *sh)
{
    const uint64_t G = (uint64_t)(a->heads_q / a->heads_kv);
    if (attend_local_bytes(a, 1) > dev->local_mem)
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, PA_OP ": opencl: D %lld + P %lld, Dv %lld need %llu bytes of "
                        "local memory a work-group, past %s's %llu", (long long)a->head_dim, (long long)a->rope_dim,
                        (long long)a->value_dim, (unsigned long long)attend_local_bytes(a, 1), dev->name,
                        (unsigned long long)dev->local_mem);
    uint64_t gb = G < PA_HEADS_MAX ? G : PA_HEADS_MAX;
    while (gb > 1 && attend_local_bytes(a, gb) > dev->local_mem)
        gb--;
    const uint64_t hb = (G + gb - 1) / gb;
    sh->hb = (cl_uint)hb;
    sh->gb = (cl_uint)((G + hb - 1) / hb);
    sh->local = attend_local(dev, ks, sh->gb);
    return RUDNN_STATUS_SUCCESS;
}

/* The merge of the splits' partials into out: a group per (query, head). */
static rudnn_status_t merge(ocl_queue_t *q, ocl_kernel_set_t *ks, const rudnn_paged_args_t *a, cl_mem ws,
                            cl_ulong ws_off, cl_mem out, cl_ulong out_off)
{
    const cl_uint Q = (cl_uint)a->layout.queries, Hq = (cl_uint)a->heads_q, S = (cl_uint)a->splits;
    const cl_uint Dv = (cl_uint)a->value_dim;
    const karg_list_t args = KARGS(ARG(ws), ARG(ws_off), ARG(out), ARG(out_off), GROUP0_ARG(), ARG(Q), ARG(Hq),
                                   ARG(S), ARG(Dv));
    ocl_note_kernel("paged_attention.merge");
    return ocl_enqueue_groups(q, ks, K_MERGE, k_names, PA_OP, args, (uint64_t)Q * Hq,
                              ocl_pick_local(q->dev, ks, Dv, PA_ROW_LOCAL));
}

static rudnn_status_t pa_attend(void *queue, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    size_t es;
    RUDNN_TRY(program(q, a->dtype, &es, &ks));
    pa_shape_t sh;
    RUDNN_TRY(attend_shape(q->dev, ks, a, &sh));
    const pa_plan_args_t pl = plan_args(o->plan, &a->layout);
    /* MLA: the value row is the latent row (one head, R wide); attention: qp and kp are never
     * read (P 0), q and k stand in for them */
    const rudnn_mem_ref_t qp = a->mla ? o->qp : o->q, kp = a->mla ? o->kp : o->k, v = a->mla ? o->k : o->v;
    const cl_mem qm = (cl_mem)o->q.mem, qpm = (cl_mem)qp.mem, km = (cl_mem)o->k.mem, kpm = (cl_mem)kp.mem;
    const cl_mem vm = (cl_mem)v.mem, om = (cl_mem)o->out.mem;
    const cl_ulong qo = o->q.offset / es, qpo = qp.offset / es, ko = o->k.offset / es, kpo = kp.offset / es;
    const cl_ulong vo = v.offset / es, oo = o->out.offset / es;
    const int split = a->splits > 1;
    const cl_mem wm = split ? (cl_mem)o->workspace.mem : om; /* splits 1: never written */
    const cl_ulong wo = split ? o->workspace.offset / sizeof(float) : 0;
    const cl_uint Q = (cl_uint)a->layout.queries, Hq = (cl_uint)a->heads_q, Hkv = (cl_uint)a->heads_kv;
    const cl_uint S = (cl_uint)a->splits, D = (cl_uint)a->head_dim, P = (cl_uint)a->rope_dim;
    const cl_uint Dv = (cl_uint)a->value_dim, ps = (cl_uint)a->layout.page_size;
    const cl_float scale = a->scale;
    const cl_int causal = a->causal != 0;
    const uint64_t W = (uint64_t)D + P;
    const karg_list_t args =
        KARGS(ARG(pl.mem), ARG(pl.len), ARG(pl.table), ARG(pl.qseq), ARG(pl.qpos), ARG(pl.pages), ARG(qm), ARG(qo),
              ARG(qpm), ARG(qpo), ARG(km), ARG(ko), ARG(kpm), ARG(kpo), ARG(vm), ARG(vo), ARG(om), ARG(oo), ARG(wm),
              ARG(wo), GROUP0_ARG(), ARG(Q), ARG(Hq), ARG(Hkv), ARG(sh.gb), ARG(sh.hb), ARG(S), ARG(D), ARG(P),
              ARG(Dv), ARG(ps), ARG(scale), ARG(causal), LOCAL_ARG(sh.gb * W * sizeof(float)),
              LOCAL_ARG(PA_CHUNK * (PA_KEYS + 1) * sizeof(float)), LOCAL_ARG(sh.gb * PA_KEYS * sizeof(float)),
              LOCAL_ARG(sh.gb * (size_t)Dv * sizeof(float)), LOCAL_ARG(3 * sh.gb * sizeof(float)),
              LOCAL_ARG(PA_KEYS * sizeof(cl_long)));
    ocl_note_kernel(a->mla ? "paged_attention.mla" : "paged_attention.attend");
    RUDNN_TRY(ocl_enqueue_groups(q, ks, K_ATTEND, k_names, PA_OP, args, (uint64_t)Q * Hkv * sh.hb * S, sh.local));
    return split ? merge(q, ks, a, wm, wo, om, oo) : RUDNN_STATUS_SUCCESS;
}

/* ---- append ---------------------------------------------------------------------------------------- */

static rudnn_status_t pa_append(void *queue, const rudnn_paged_append_args_t *a,
                                const rudnn_paged_append_operands_t *o)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    size_t es;
    RUDNN_TRY(program(q, a->dtype, &es, &ks));
    const pa_plan_args_t pl = plan_args(o->plan, &a->layout);
    const int has_v = a->value_dim > 0;
    const cl_mem km = (cl_mem)o->k.mem, kcm = (cl_mem)o->k_cache.mem;
    const cl_mem vm = has_v ? (cl_mem)o->v.mem : km, vcm = has_v ? (cl_mem)o->v_cache.mem : kcm; /* Dv 0: unused */
    const cl_ulong ko = o->k.offset / es, kco = o->k_cache.offset / es;
    const cl_ulong vo = has_v ? o->v.offset / es : 0, vco = has_v ? o->v_cache.offset / es : 0;
    const cl_uint Hkv = (cl_uint)a->heads_kv, D = (cl_uint)a->key_dim, Dv = (cl_uint)a->value_dim;
    const cl_uint ps = (cl_uint)a->layout.page_size;
    const karg_list_t args =
        KARGS(ARG(pl.mem), ARG(pl.len), ARG(pl.table), ARG(pl.qseq), ARG(pl.qpos), ARG(pl.pages), ARG(km), ARG(ko),
              ARG(kcm), ARG(kco), ARG(vm), ARG(vo), ARG(vcm), ARG(vco), GROUP0_ARG(), ARG(Hkv), ARG(D), ARG(Dv),
              ARG(ps));
    const uint64_t widest = (uint64_t)Hkv * (D > Dv ? D : Dv);
    ocl_note_kernel("paged_attention.append");
    return ocl_enqueue_groups(q, ks, K_APPEND, k_names, PA_OP, args, (uint64_t)a->layout.queries,
                              ocl_pick_local(q->dev, ks, widest, PA_ROW_LOCAL));
}

const rudnn_paged_attention_kernels_t ocl_paged_attention_kernels = {
    .struct_size = sizeof(rudnn_paged_attention_kernels_t),
    .attend = pa_attend,
    .append = pa_append,
};
