/* Numeric tests of paged attention and MLA (include/rudnn/paged_attention.h) against the FP64
 * reference of reference/paged_attention_ref.c, through the public API; run once per backend
 * (meson registers paged_attention-opencl, -cuda, -hip with RUDNN_BACKEND set).
 *
 * Data: q, qp and every cache row of a history uniform in [-1, 1]; the inputs are uploaded in the
 * call's dtype and read back, and the reference computes on what the device holds. Rows outside
 * every history (past a sequence's length, pages no table names) hold OOH = 50, which visibly
 * moves any output that reads them (garbage_rows puts NaN there instead).
 *
 * Tolerances. Outputs are convex combinations of value rows in [-1, 1], so the output scale is 1:
 * a case passes when every element is within tol of the reference, with
 *   F32   2e-5: FP32 scores, exponentials and sums (eps 6e-8) over up to ~1000 keys and up to
 *         576 features;
 *   F16   3e-3, BF16 2e-2: the output's own rounding (half an ulp below 1: 2^-11, 2^-8) plus,
 *         for kernels on matrix units, the probabilities rounded to the dtype before P.V (each
 *         weight off by at most one unit roundoff, u = 2^-11 / 2^-8, so the sum by u max|v| and
 *         the normaliser by as much again): about 3u, taken with margin;
 * plus, for every dtype, 1e-6 x the largest |score| of the problem: an FP32 score of magnitude s
 * is off by about s 2^-24 sqrt(D) and moves an output by at most half that (the sharp case's
 * scores pass 88, where exp overflows FP32 without the max subtracted).
 * A row whose query sees no key (an empty history) must be exactly zero.
 *
 * What runs: page sizes 1, 5, 7, 16, 24, 64; decode only, prefill only, mixed batches (decode and
 * prefill sequences, queries at arbitrary positions in any order, at the sequence's length,
 * sequences without queries, empty histories, shuffled physical pages, a page shared by two
 * sequences' histories, table entries past each history holding -1, out-of-range ids or repeats);
 * GQA 1, 2, 3, 4, 8; D 5, 64, 128, 256, Dv != D (7, 32, 64, 48); MLA with R 512 and P 64 (H 8
 * .. 128), R 13 and P 3, and others; causal and not; every case for F32, F16 and BF16. Split
 * workspaces with 2..32 splits and 0 (auto) against the reference and the unsplit result;
 * append (prefill then decode, shuffled positions, k with v, k alone) then attend equals
 * attention over the cache built in one go, byte for byte; copy on write with retained buffers (separate and shared k/v
 * buffers); one plan reused by several layers with different caches and a shared workspace; a
 * step without queries; NaN in q, a key and a value element reaching exactly the outputs it
 * enters (plain and split; MLA at H 128 too, a NaN key that one query's causal mask hides).
 * Tensors sit 16-byte aligned in their buffers (a misaligned case too), so that backends'
 * vectorised and tensor-core paths are reached; the suite prints the kernels it saw run and the
 * largest error per dtype. Every call must report a "paged_attention." kernel, leave every input
 * buffer byte-identical, write every output element, and no byte of the output's buffer outside
 * the tensor.
 *
 * Usage: test_paged_attention [glob] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/paged_attention.h>

#include "common.h"
#include "reference/paged_attention_ref.h"

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};

#define OOH 50.0f

/* The kernels the suite saw run (rudnn_last_kernel after each call), printed at the end: which
 * of a backend's kernels the cases reached. */
static char kernels_seen[16][64];
static int kernels_count;

static void saw_kernel(const char *name)
{
    for (int i = 0; i < kernels_count; i++)
        if (!strcmp(kernels_seen[i], name))
            return;
    if (kernels_count < 16 && name[0])
        snprintf(kernels_seen[kernels_count++], sizeof kernels_seen[0], "%s", name);
}

/* The largest error seen against the reference per dtype (F32, F16, BF16), printed at the end
 * beside its tolerance: how much margin the tolerances leave on this backend. */
static double worst_seen[3];

static int dtype_slot(rudnn_dtype_t dt) { return dt == RUDNN_F32 ? 0 : dt == RUDNN_F16 ? 1 : 2; }

static double tol_of(rudnn_dtype_t dt)
{
    return dt == RUDNN_F32 ? 2e-5 : dt == RUDNN_F16 ? 3e-3 : 2e-2;
}

/* ---- schedules ----------------------------------------------------------------------------------- */

/* How a sequence's queries are placed: DEC one at len - 1 (0 for an empty history); PRE nq at
 * len - nq .. len - 1; ARB nq anywhere in [0, len], shuffled; AT_LEN one at len; NONE none. */
enum { DEC, PRE, ARB, AT_LEN, NONE };

typedef struct seqspec {
    int64_t len;
    int nq;
    int mode;
} seqspec_t;

#define MAX_SEQ 8

typedef struct sched {
    rudnn_paged_schedule_t s;
    int64_t *lengths, *offsets, *sid, *pos;
    int32_t *tables;
} sched_t;

static void sched_free(sched_t *sc)
{
    free(sc->lengths), free(sc->offsets), free(sc->sid), free(sc->pos), free(sc->tables);
    memset(sc, 0, sizeof *sc);
}

/* A schedule of nseq sequences: physical pages shuffled over a pool with `spare` unused pages,
 * each table followed by 0..2 padding entries (garbage), seq 1's first page the same as seq 0's
 * when share (prefix sharing across sequences is allowed; only repeats within one are not). */
static void sched_build(sched_t *sc, uint64_t seed, int64_t ps, int nseq, const seqspec_t *seqs, int spare,
                        int share)
{
    rt_rng_t r;
    rt_rng_seed(&r, seed);
    memset(sc, 0, sizeof *sc);
    int64_t *need = rt_xmalloc(sizeof(int64_t) * (size_t)(nseq > 0 ? nseq : 1)), total = 0, nq = 0;
    for (int i = 0; i < nseq; i++) {
        need[i] = (seqs[i].len + ps - 1) / ps;
        total += need[i];
        nq += seqs[i].mode == NONE ? 0 : seqs[i].mode == DEC || seqs[i].mode == AT_LEN ? 1 : seqs[i].nq;
    }
    const int64_t pages = total + spare > 0 ? total + spare : 1;
    int32_t *perm = rt_xmalloc(sizeof(int32_t) * (size_t)pages);
    for (int64_t p = 0; p < pages; p++)
        perm[p] = (int32_t)p;
    for (int64_t p = pages - 1; p > 0; p--) {
        const int64_t j = (int64_t)rt_rng_below(&r, (uint64_t)p + 1);
        const int32_t t = perm[p];
        perm[p] = perm[j], perm[j] = t;
    }
    sc->lengths = rt_xmalloc(sizeof(int64_t) * (size_t)nseq);
    sc->offsets = rt_xmalloc(sizeof(int64_t) * (size_t)(nseq + 1));
    sc->tables = rt_xmalloc(sizeof(int32_t) * (size_t)(total + 2 * nseq + 1));
    sc->sid = rt_xmalloc(sizeof(int64_t) * (size_t)(nq + 1));
    sc->pos = rt_xmalloc(sizeof(int64_t) * (size_t)(nq + 1));
    int64_t e = 0, next = 0, q = 0;
    sc->offsets[0] = 0;
    for (int i = 0; i < nseq; i++) {
        sc->lengths[i] = seqs[i].len;
        for (int64_t k = 0; k < need[i]; k++)
            sc->tables[e + k] = perm[next++];
        if (share && i == 1 && need[0] && need[1])
            sc->tables[e] = sc->tables[0];
        const int pad = (int)rt_rng_below(&r, 3);
        for (int k = 0; k < pad; k++) {
            const int32_t garbage[4] = {-1, (int32_t)pages + 3, INT32_MAX, need[i] ? sc->tables[e] : 0};
            sc->tables[e + need[i] + k] = garbage[rt_rng_below(&r, 4)];
        }
        e += need[i] + pad;
        sc->offsets[i + 1] = e;
        const int64_t len = seqs[i].len;
        switch (seqs[i].mode) {
        case DEC:
            sc->sid[q] = i, sc->pos[q++] = len > 0 ? len - 1 : 0;
            break;
        case AT_LEN:
            sc->sid[q] = i, sc->pos[q++] = len;
            break;
        case PRE:
            for (int k = 0; k < seqs[i].nq; k++)
                sc->sid[q] = i, sc->pos[q++] = len - seqs[i].nq + k;
            break;
        case ARB:
            for (int k = 0; k < seqs[i].nq; k++)
                sc->sid[q] = i, sc->pos[q++] = (int64_t)rt_rng_below(&r, (uint64_t)len + 1);
            break;
        default:
            break;
        }
    }
    free(perm), free(need);
    sc->s = (rudnn_paged_schedule_t){ps, pages, nseq, sc->lengths, sc->offsets, sc->tables, nq, sc->sid, sc->pos};
}

/* Host plan, device plan on rt_queue, host plan destroyed (the device plan stands alone). */
static rudnn_paged_plan_t make_plan(const sched_t *sc)
{
    rudnn_paged_host_plan_t host = NULL;
    rt_assert_status(rudnn_paged_host_plan_create(&sc->s, &host), RUDNN_STATUS_SUCCESS);
    rudnn_paged_plan_t plan = NULL;
    rt_assert_status(rudnn_paged_plan_create(rt_queue, host, &plan), RUDNN_STATUS_SUCCESS);
    rudnn_paged_host_plan_destroy(host);
    assert_ptr_equal(rudnn_paged_plan_queue(plan), rt_queue);
    assert_true(rudnn_paged_plan_device_bytes(plan) > 0);
    return plan;
}

/* ---- problems: one data set (q, caches, out) over a schedule ------------------------------------- */

typedef struct shape {
    int64_t H, Hkv, D, Dv, P; /* P > 0: MLA (Hkv 1, Dv = D = R) */
} shape_t;

typedef struct data {
    shape_t sh;
    rudnn_dtype_t dt;
    int64_t Q, pages, ps;
    float *q, *qp, *k, *kp, *v; /* host copies of what the device holds */
    rt_tensor_t tq, tqp, tk, tkp, tv, tout;
} data_t;

static int is_mla(const shape_t *sh) { return sh->P > 0; }

/* Host values of a cache [pages][ps][width]: OOH (or ooh) everywhere, uniform in history rows. */
static float *make_cache(rt_rng_t *r, const sched_t *sc, int64_t width, float ooh)
{
    const int64_t rows = sc->s.pages * sc->s.page_size;
    float *c = rt_xmalloc(sizeof(float) * (size_t)(rows * width));
    for (int64_t i = 0; i < rows * width; i++)
        c[i] = ooh;
    for (int64_t s = 0; s < sc->s.sequences; s++)
        for (int64_t t = 0; t < sc->s.lengths[s]; t++) {
            const int64_t row = pa_ref_row(&sc->s, s, t);
            for (int64_t x = 0; x < width; x++)
                c[row * width + x] = (float)rt_rng_uniform(r, -1, 1);
        }
    return c;
}

static float *make_uniform(rt_rng_t *r, int64_t n)
{
    float *x = rt_xmalloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)rt_rng_uniform(r, -1, 1);
    return x;
}

/* Poisoned elements before each tensor in its buffer: 8 keeps 16-byte alignment (which the
 * vectorised and tensor-core kernels need), 3 (set by cases marked misaligned) breaks it so that
 * backends take their other path. */
static size_t head_elems = 8;

/* A device tensor holding host (rewritten with what the device holds). */
static void upload(rt_tensor_t *t, rudnn_dtype_t dt, int rank, const int64_t *dims, float *host)
{
    rt_tensor_create(t, dt, rank, dims, head_elems, RT_TAIL_BYTES);
    if (host && rt_numel(rank, dims) > 0) {
        rt_tensor_upload(t, host);
        rt_tensor_download(t, host);
    }
}

static void data_make(data_t *d, const sched_t *sc, const shape_t *sh, rudnn_dtype_t dt, uint64_t seed, float ooh)
{
    memset(d, 0, sizeof *d);
    rt_rng_t r;
    rt_rng_seed(&r, seed * 31 + (uint64_t)dt);
    d->sh = *sh, d->dt = dt;
    d->Q = sc->s.queries, d->pages = sc->s.pages, d->ps = sc->s.page_size;
    const int64_t Q = d->Q, H = sh->H, Hkv = is_mla(sh) ? 1 : sh->Hkv, D = sh->D, Dv = is_mla(sh) ? sh->D : sh->Dv;
    d->q = make_uniform(&r, Q * H * D);
    d->k = make_cache(&r, sc, Hkv * D, ooh);
    const int64_t dq[3] = {Q, H, D}, dk[4] = {d->pages, d->ps, Hkv, D}, dout[3] = {Q, H, Dv};
    upload(&d->tq, dt, 3, dq, d->q);
    upload(&d->tk, dt, 4, dk, d->k);
    if (is_mla(sh)) {
        d->qp = make_uniform(&r, Q * H * sh->P);
        d->kp = make_cache(&r, sc, sh->P, ooh);
        const int64_t dqp[3] = {Q, H, sh->P}, dkp[4] = {d->pages, d->ps, 1, sh->P};
        upload(&d->tqp, dt, 3, dqp, d->qp);
        upload(&d->tkp, dt, 4, dkp, d->kp);
    } else {
        d->v = make_cache(&r, sc, Hkv * Dv, ooh);
        const int64_t dv[4] = {d->pages, d->ps, Hkv, Dv};
        upload(&d->tv, dt, 4, dv, d->v);
    }
    upload(&d->tout, dt, 3, dout, NULL); /* poisoned by create */
}

static void data_free(data_t *d)
{
    free(d->q), free(d->qp), free(d->k), free(d->kp), free(d->v);
    rt_tensor_destroy(&d->tq), rt_tensor_destroy(&d->tqp), rt_tensor_destroy(&d->tk);
    rt_tensor_destroy(&d->tkp), rt_tensor_destroy(&d->tv), rt_tensor_destroy(&d->tout);
}

static int64_t out_dim(const data_t *d) { return is_mla(&d->sh) ? d->sh.D : d->sh.Dv; }

static double *to_double(const float *x, int64_t n)
{
    double *y = rt_xmalloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        y[i] = x ? x[i] : 0.0;
    return y;
}

/* The reference of d over sc ([Q][H][Dv], caller frees) and its largest |score| (for the FP32
 * score term of the tolerance). */
static double *reference(const sched_t *sc, const data_t *d, float scale, int causal, double *smax)
{
    const shape_t *sh = &d->sh;
    const int mla = is_mla(sh);
    const int64_t Q = d->Q, H = sh->H, Hkv = mla ? 1 : sh->Hkv, D = sh->D, Dv = out_dim(d), P = sh->P;
    const int64_t rows = d->pages * d->ps;
    double *q = to_double(d->q, Q * H * D), *k = to_double(d->k, rows * Hkv * D);
    double *qp = mla ? to_double(d->qp, Q * H * P) : NULL, *kp = mla ? to_double(d->kp, rows * P) : NULL;
    double *v = mla ? NULL : to_double(d->v, rows * Hkv * Dv);
    double *out = rt_xcalloc((size_t)(Q * H * Dv) + 1, sizeof(double));
    const int rc = mla ? pa_ref_mla(&sc->s, H, D, P, q, qp, k, kp, scale, causal, out)
                       : pa_ref_attention(&sc->s, H, Hkv, D, Dv, q, k, v, scale, causal, out);
    assert_int_equal(rc, 0);
    *smax = 0.0;
    for (int64_t i = 0; i < Q; i++) {
        const int64_t n = pa_ref_visible(&sc->s, i, causal);
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < n; j++) {
                const int64_t row = pa_ref_row(&sc->s, sc->s.sequence_ids[i], j), g = h / (H / Hkv);
                double s = 0.0;
                for (int64_t x = 0; x < D; x++)
                    s += q[(i * H + h) * D + x] * k[(row * Hkv + g) * D + x];
                for (int64_t x = 0; x < P; x++)
                    s += qp[(i * H + h) * P + x] * kp[row * P + x];
                *smax = fmax(*smax, fabs(scale * s));
            }
    }
    free(q), free(k), free(qp), free(kp), free(v);
    return out;
}

/* One call: attention or MLA, with a workspace or not; kernel gets rudnn_last_kernel(). */
static rudnn_status_t call(rudnn_paged_plan_t plan, rudnn_paged_split_workspace_t ws, const data_t *d,
                           const rudnn_tensor_t *k, const rudnn_tensor_t *v, const rudnn_tensor_t *kp, float scale,
                           int causal, char kernel[64])
{
    kernel[0] = 0;
    k = k ? k : &d->tk.t, v = v ? v : &d->tv.t, kp = kp ? kp : &d->tkp.t;
    rudnn_status_t st;
    if (is_mla(&d->sh))
        st = ws ? rudnn_paged_mla_with_workspace(plan, ws, &d->tq.t, &d->tqp.t, k, kp, scale, causal, &d->tout.t)
                : rudnn_paged_mla(plan, &d->tq.t, &d->tqp.t, k, kp, scale, causal, &d->tout.t);
    else
        st = ws ? rudnn_paged_attention_with_workspace(plan, ws, &d->tq.t, k, v, scale, causal, &d->tout.t)
                : rudnn_paged_attention(plan, &d->tq.t, k, v, scale, causal, &d->tout.t);
    if (!st) {
        snprintf(kernel, 64, "%s", rudnn_last_kernel());
        if (d->Q)
            saw_kernel(kernel);
    }
    if (st)
        return st; /* its message stays in rudnn_last_error() (a synchronize would clear it) */
    return rudnn_queue_synchronize(rt_queue);
}

/* Reads out as floats, NaN where an element still holds the sentinel (never written). */
static float *read_out(const data_t *d, int *outside_changed, const uint8_t *before)
{
    const rt_tensor_t *t = &d->tout;
    const int64_t n = rt_numel(3, t->t.dims);
    float *o = rt_xmalloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    uint8_t *snap = rt_buffer_snapshot(t->buffer, t->buffer_bytes);
    for (int64_t i = 0; i < n; i++)
        o[i] = rt_element_bits(t->t.dtype, snap + t->t.offset, (size_t)i) == rt_poison_bits(t->t.dtype)
                   ? NAN
                   : rt_element_value(t->t.dtype, snap + t->t.offset, (size_t)i);
    const size_t begin = t->t.offset, end = begin + (size_t)n * rudnn_dtype_size(t->t.dtype);
    size_t first = 0;
    *outside_changed = before && rt_count_changed(before, snap, t->buffer_bytes, &begin, &end, 1, &first) != 0;
    free(snap);
    return o;
}

/* Compares out with ref (tolerance as the top says); returns the problems logged. */
static int compare(rt_log_t *log, const char *what, const sched_t *sc, const data_t *d, const float *out,
                   const double *ref, double tol, int causal)
{
    const int64_t H = d->sh.H, Dv = out_dim(d);
    int64_t bad = 0, first = -1, unwritten = 0, nonzero = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < d->Q; i++) {
        const int empty = pa_ref_visible(&sc->s, i, causal) == 0;
        for (int64_t x = 0; x < H * Dv; x++) {
            const int64_t at = i * H * Dv + x;
            if (isnan(out[at]) && !isnan(ref[at])) {
                unwritten += 1; /* the sentinel, or a NaN the kernel made */
                if (first < 0)
                    first = at;
                continue;
            }
            if (empty && out[at] != 0.0f) {
                nonzero++;
                if (first < 0)
                    first = at;
                continue;
            }
            const double err = fabs((double)out[at] - ref[at]);
            worst_seen[dtype_slot(d->dt)] = fmax(worst_seen[dtype_slot(d->dt)], err);
            if (!(err <= tol)) {
                if (bad++ == 0 && first < 0)
                    first = at;
                worst = fmax(worst, err);
            }
        }
    }
    if (!bad && !unwritten && !nonzero)
        return 0;
    rt_logf(log, "  %s: %lld off (worst %.3g, tol %.3g), %lld NaN or unwritten, %lld non-zero in empty rows; first "
            "[query %lld, head %lld, col %lld] = %.7g, reference %.7g\n", what, (long long)bad, worst, tol,
            (long long)unwritten, (long long)nonzero, (long long)(first / (H * Dv)), (long long)(first / Dv % H),
            (long long)(first % Dv), out[first], ref[first]);
    return 1;
}

static void guard_inputs(rt_guard_t *g, const data_t *d, const rudnn_tensor_t *k, const rudnn_tensor_t *v)
{
    memset(g, 0, sizeof *g);
    rt_guard_track(g, rt_queue, &d->tq, "q");
    rt_guard_track_buffer(g, rt_queue, k ? k->buffer : d->tk.buffer, k ? rudnn_buffer_size(k->buffer)
                                                                      : d->tk.buffer_bytes, "k_cache");
    if (is_mla(&d->sh)) {
        rt_guard_track(g, rt_queue, &d->tqp, "qp");
        rt_guard_track_buffer(g, rt_queue, v ? v->buffer : d->tkp.buffer,
                              v ? rudnn_buffer_size(v->buffer) : d->tkp.buffer_bytes, "kp_cache");
    } else {
        rt_guard_track_buffer(g, rt_queue, v ? v->buffer : d->tv.buffer,
                              v ? rudnn_buffer_size(v->buffer) : d->tv.buffer_bytes, "v_cache");
    }
    rt_guard_begin(g);
}

/* One checked call: the output poisoned first; status, kernel name, inputs unchanged, every
 * output element written, nothing around it, values against the reference. k and v (NULL: d's)
 * replace the caches (append tests). *got (if given) receives the output. Returns problems. */
static int run_checked(rt_log_t *log, const char *what, const sched_t *sc, rudnn_paged_plan_t plan,
                       rudnn_paged_split_workspace_t ws, const data_t *d, const rudnn_tensor_t *k,
                       const rudnn_tensor_t *v, float scale, int causal, float **got)
{
    rt_tensor_poison(&d->tout);
    rt_guard_t g;
    guard_inputs(&g, d, k, v);
    uint8_t *before = rt_buffer_snapshot(d->tout.buffer, d->tout.buffer_bytes);
    char kernel[64];
    int problems = 0;
    const rudnn_status_t st = call(plan, ws, d, k, is_mla(&d->sh) ? NULL : v, is_mla(&d->sh) ? v : NULL, scale,
                                   causal, kernel);
    if (st) {
        rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
        free(before);
        rt_guard_free(&g);
        return 1;
    }
    if (d->Q && strncmp(kernel, "paged_attention.", 16)) {
        rt_logf(log, "  %s: rudnn_last_kernel() = \"%s\", expected a paged_attention. kernel\n", what, kernel);
        problems++;
    }
    if (rt_guard_changed(&g)) {
        rt_logf(log, "  %s: an input buffer changed\n", what);
        problems++;
    }
    int outside = 0;
    float *out = read_out(d, &outside, before);
    if (outside) {
        rt_logf(log, "  %s: bytes of out's buffer outside the tensor changed\n", what);
        problems++;
    }
    double smax = 0.0;
    double *ref = reference(sc, d, scale, causal, &smax);
    problems += compare(log, what, sc, d, out, ref, tol_of(d->dt) + 1e-6 * smax, causal);
    free(ref), free(before);
    rt_guard_free(&g);
    if (got)
        *got = out;
    else
        free(out);
    return problems;
}

/* ---- cases ------------------------------------------------------------------------------------------ */

typedef struct pcase {
    const char *name;
    int64_t ps;
    int nseq;
    seqspec_t seqs[MAX_SEQ];
    shape_t sh;
    double sharp;  /* scale = sharp / sqrt(D + P) */
    int share;     /* seq 1's first page is seq 0's */
    int misalign;  /* tensors 3 elements into their buffers (not 16-byte aligned) */
} pcase_t;

static const pcase_t attention_cases[] = {
    {"ps1_decode_gqa4", 1, 3, {{7, 1, DEC}, {1, 1, DEC}, {20, 1, DEC}}, {4, 1, 64, 64, 0}, 1.5, 0, 0},
    {"ps16_prefill_gqa1", 16, 2, {{37, 37, PRE}, {16, 16, PRE}}, {2, 2, 64, 64, 0}, 1.5, 0, 0},
    /* more queries in one sequence than the plan's largest query block (128) */
    {"ps16_long_prefill_gqa2", 16, 2, {{150, 150, PRE}, {20, 1, DEC}}, {4, 2, 64, 64, 0}, 1.5, 0, 0},
    {"ps64_mixed_gqa8_d128", 64, 4, {{130, 1, DEC}, {70, 20, PRE}, {40, 0, NONE}, {65, 4, ARB}},
     {8, 1, 128, 128, 0}, 1.5, 0, 0},
    {"ps5_mixed_dv32", 5, 6, {{23, 6, ARB}, {0, 1, DEC}, {11, 0, NONE}, {9, 9, PRE}, {1, 1, DEC}, {12, 1, AT_LEN}},
     {4, 2, 64, 32, 0}, 1.5, 0, 0},
    {"ps5_mixed_dv32_misaligned", 5, 3, {{23, 6, ARB}, {0, 1, DEC}, {12, 1, AT_LEN}}, {4, 2, 64, 32, 0}, 1.5, 0, 1},
    /* the benchmark's decode shape: Hq 32, Hkv 8, D 128, page 16 */
    {"ps16_decode_gqa4_d128", 16, 4, {{300, 1, DEC}, {17, 1, DEC}, {0, 1, DEC}, {129, 1, DEC}}, {32, 8, 128, 128, 0},
     1.5, 0, 0},
    {"ps24_d256", 24, 2, {{50, 1, DEC}, {30, 3, PRE}}, {2, 1, 256, 256, 0}, 1.5, 0, 0},
    {"ps16_odd_d5_dv7_gqa3", 16, 3, {{33, 5, ARB}, {17, 1, DEC}, {16, 3, ARB}}, {3, 1, 5, 7, 0}, 1.5, 1, 1},
    {"ps24_d256_prefill", 24, 2, {{40, 40, PRE}, {30, 0, NONE}}, {4, 2, 256, 256, 0}, 1.5, 0, 0},
    {"ps7_d128_dv64_gqa4", 7, 3, {{20, 20, PRE}, {45, 1, DEC}, {8, 3, ARB}}, {8, 2, 128, 64, 0}, 1.5, 1, 0},
    {"empty_histories", 16, 3, {{0, 1, DEC}, {0, 2, ARB}, {0, 0, NONE}}, {2, 1, 64, 64, 0}, 1.5, 0, 0},
    {"sharp_scores", 16, 2, {{40, 4, ARB}, {25, 1, DEC}}, {2, 1, 64, 64, 0}, 100.0, 0, 0},
    /* prefill-heavy plans (CUDA sm_90a: the wgmma prefill): several key tiles of 128, diagonals,
     * a decode sequence among them, Dv != D, a page size not a power of two, shuffled positions */
    {"ps16_prefill_d128_gqa4", 16, 3, {{300, 260, PRE}, {131, 131, PRE}, {90, 1, DEC}}, {8, 2, 128, 128, 0}, 1.5, 0,
     0},
    {"ps7_prefill_d128_dv64_arb", 7, 2, {{200, 150, ARB}, {45, 45, PRE}}, {4, 1, 128, 64, 0}, 1.5, 1, 0},
    {"ps1_prefill_d64", 1, 1, {{70, 70, PRE}}, {2, 1, 64, 64, 0}, 1.5, 0, 0},
};

static const pcase_t mla_cases[] = {
    {"mla_r512_p64", 64, 3, {{200, 1, DEC}, {90, 2, PRE}, {30, 0, NONE}}, {8, 1, 512, 512, 64}, 1.0, 0, 0},
    {"mla_odd_r13_p3", 5, 4, {{21, 4, ARB}, {13, 1, DEC}, {0, 1, DEC}, {6, 6, PRE}}, {3, 1, 13, 13, 3}, 1.0, 1, 1},
    /* more heads than one 16-row tile */
    {"mla_r512_p64_h32", 64, 2, {{150, 1, DEC}, {100, 3, ARB}}, {32, 1, 512, 512, 64}, 1.0, 0, 0},
    {"mla_ps1_h16", 1, 2, {{9, 1, DEC}, {5, 3, ARB}}, {16, 1, 64, 64, 16}, 1.0, 0, 0},
    {"mla_ps16_prefill", 16, 1, {{40, 40, PRE}}, {4, 1, 32, 32, 8}, 1.0, 0, 0},
    /* DeepSeek's decode heads (H 128: the wgmma kernel's 64-head row blocks), one and two tokens,
     * an empty history; H 64 at page 16 (several pages a 64-key tile), a shared page */
    {"mla_r512_p64_h128", 64, 3, {{300, 2, PRE}, {129, 1, DEC}, {0, 1, DEC}}, {128, 1, 512, 512, 64}, 1.0, 0, 0},
    {"mla_r512_p64_h64_ps16", 16, 2, {{77, 2, ARB}, {200, 1, DEC}}, {64, 1, 512, 512, 64}, 1.0, 1, 0},
};

static float scale_of(const pcase_t *c) { return (float)(c->sharp / sqrt((double)(c->sh.D + c->sh.P))); }

/* Each case for each dtype, causal and not, on one plan and one data set per dtype. */
static void run_cases(const pcase_t *cases, size_t n, float ooh)
{
    rt_log_t *log = rt_log_new();
    for (size_t ci = 0; ci < n; ci++) {
        const pcase_t *c = &cases[ci];
        sched_t sc;
        sched_build(&sc, rt_hash(c->name), c->ps, c->nseq, c->seqs, 3, c->share);
        rudnn_paged_plan_t plan = make_plan(&sc);
        for (size_t di = 0; di < 3; di++) {
            data_t d;
            head_elems = c->misalign ? 3 : 8;
            data_make(&d, &sc, &c->sh, dtypes[di], rt_hash(c->name) + di, ooh);
            head_elems = 8;
            for (int causal = 0; causal < 2; causal++) {
                char what[160];
                snprintf(what, sizeof what, "%s %s %s%s", c->name, rudnn_dtype_name(dtypes[di]),
                         causal ? "causal" : "not causal", isnan(ooh) ? " (NaN outside the histories)" : "");
                if (run_checked(log, what, &sc, plan, NULL, &d, NULL, NULL, scale_of(c), causal, NULL))
                    log->failures++;
            }
            data_free(&d);
        }
        rudnn_paged_plan_destroy(plan);
        sched_free(&sc);
    }
    rt_log_finish_free(log, "case(s)");
}

static void attention_all(void **state)
{
    (void)state;
    run_cases(attention_cases, sizeof attention_cases / sizeof attention_cases[0], OOH);
}

static void mla_all(void **state)
{
    (void)state;
    run_cases(mla_cases, sizeof mla_cases / sizeof mla_cases[0], OOH);
}

/* NaN in every cache row outside the histories (rows past a length in its last page, pages no
 * table names): no score or value enters from them, so no output may be NaN (a kernel that loads
 * a whole page and masks the scores must not multiply the masked rows' values by 0). */
static void garbage_rows(void **state)
{
    (void)state;
    static const char *const picked[] = {"ps5_mixed_dv32", "ps16_decode_gqa4_d128", "ps24_d256_prefill",
                                         "ps16_odd_d5_dv7_gqa3", "ps7_prefill_d128_dv64_arb", "mla_r512_p64",
                                         "mla_odd_r13_p3", "mla_r512_p64_h128", "mla_r512_p64_h64_ps16"};
    enum { PICKED = sizeof picked / sizeof *picked };
    pcase_t cases[PICKED];
    size_t n = 0;
    for (size_t i = 0; i < PICKED; i++) {
        for (size_t j = 0; j < sizeof attention_cases / sizeof *attention_cases; j++)
            if (!strcmp(attention_cases[j].name, picked[i]))
                cases[n++] = attention_cases[j];
        for (size_t j = 0; j < sizeof mla_cases / sizeof *mla_cases; j++)
            if (!strcmp(mla_cases[j].name, picked[i]))
                cases[n++] = mla_cases[j];
    }
    assert_int_equal(n, PICKED);
    run_cases(cases, n, NAN);
}

/* ---- split workspaces ------------------------------------------------------------------------------- */

static const pcase_t split_cases[] = {
    /* decode, long histories and a short one (most of its splits empty) */
    {"split_decode", 16, 4, {{1000, 1, DEC}, {300, 1, DEC}, {5, 1, DEC}, {20, 0, NONE}}, {8, 2, 64, 64, 0}, 1.5, 0, 0},
    {"split_mixed", 5, 3, {{60, 8, PRE}, {37, 5, ARB}, {0, 1, DEC}}, {4, 4, 32, 48, 0}, 1.5, 1, 0},
    {"split_mla", 64, 2, {{700, 1, DEC}, {100, 2, PRE}}, {8, 1, 128, 128, 32}, 1.0, 0, 0},
    {"split_mla_r512_p64", 64, 2, {{500, 1, DEC}, {90, 2, PRE}}, {16, 1, 512, 512, 64}, 1.0, 0, 0},
    {"split_mla_r512_p64_h128", 64, 2, {{700, 1, DEC}, {90, 2, ARB}}, {128, 1, 512, 512, 64}, 1.0, 0, 0},
    {"split_decode_gqa4_d128", 16, 3, {{700, 1, DEC}, {64, 1, DEC}, {257, 1, DEC}}, {32, 8, 128, 128, 0}, 1.5, 0, 0},
};

/* Each split count (2..32 fixed, 0 chosen by the plan) against the reference and against the
 * unsplit call's output; one workspace per count serves both causal modes (reuse). */
static void split_workspaces(void **state)
{
    (void)state;
    static const int all_splits[] = {2, 3, 5, 8, 13, 16, 32, 0};
    static const int some_splits[] = {2, 7, 32, 0};
    rt_log_t *log = rt_log_new();
    for (size_t ci = 0; ci < sizeof split_cases / sizeof split_cases[0]; ci++) {
        const pcase_t *c = &split_cases[ci];
        sched_t sc;
        sched_build(&sc, rt_hash(c->name), c->ps, c->nseq, c->seqs, 2, c->share);
        rudnn_paged_plan_t plan = make_plan(&sc);
        for (size_t di = 0; di < 3; di++) {
            data_t d;
            data_make(&d, &sc, &c->sh, dtypes[di], rt_hash(c->name) + di, OOH);
            const int64_t Dv = out_dim(&d), n = d.Q * c->sh.H * Dv;
            float *unsplit[2] = {NULL, NULL};
            for (int causal = 0; causal < 2; causal++) {
                char what[160];
                snprintf(what, sizeof what, "%s %s %s unsplit", c->name, rudnn_dtype_name(dtypes[di]),
                         causal ? "causal" : "not causal");
                if (run_checked(log, what, &sc, plan, NULL, &d, NULL, NULL, scale_of(c), causal, &unsplit[causal]))
                    log->failures++;
            }
            const int *list = di == 0 ? all_splits : some_splits;
            const size_t count = di == 0 ? sizeof all_splits / sizeof *all_splits : sizeof some_splits / sizeof *some_splits;
            for (size_t si = 0; si < count; si++) {
                const int splits = list[si];
                rudnn_paged_split_workspace_t ws = NULL;
                rudnn_status_t st = rudnn_paged_split_workspace_create(rt_queue, d.Q, c->sh.H, Dv, splits, &ws);
                if (st) {
                    rt_logf(log, "  %s splits %d: workspace create returned %s: %s\n", c->name, splits,
                            rudnn_status_string(st), rudnn_last_error());
                    log->failures++;
                    continue;
                }
                const size_t bytes = rudnn_paged_split_workspace_bytes(ws);
                if (splits && bytes < (size_t)splits * (size_t)d.Q * (size_t)c->sh.H * (size_t)(Dv + 2) * 4) {
                    rt_logf(log, "  %s splits %d: workspace of %zu bytes, less than the partials need\n", c->name,
                            splits, bytes);
                    log->failures++;
                }
                int used = -1;
                st = rudnn_paged_split_count(plan, ws, c->sh.H, is_mla(&c->sh) ? 1 : c->sh.Hkv, &used);
                if (st || (splits && used != splits) || (!splits && (used < 1 || used > RUDNN_PAGED_MAX_SPLITS))) {
                    rt_logf(log, "  %s splits %d: rudnn_paged_split_count gave %s, %d\n", c->name, splits,
                            rudnn_status_string(st), used);
                    log->failures++;
                }
                for (int causal = 0; causal < 2; causal++) {
                    char what[160];
                    snprintf(what, sizeof what, "%s %s %s splits %d (used %d)", c->name, rudnn_dtype_name(dtypes[di]),
                             causal ? "causal" : "not causal", splits, used);
                    float *got = NULL;
                    int bad = run_checked(log, what, &sc, plan, ws, &d, NULL, NULL, scale_of(c), causal, &got);
                    if (got && !splits) { /* the plan's splits, merged in split order: the same bits again */
                        float *again = NULL;
                        bad += run_checked(log, what, &sc, plan, ws, &d, NULL, NULL, scale_of(c), causal, &again);
                        if (again && memcmp(again, got, (size_t)n * sizeof *got)) {
                            rt_logf(log, "  %s: a second call gave other bits\n", what);
                            bad++;
                        }
                        free(again);
                    }
                    if (got && unsplit[causal]) {
                        const double tol = tol_of(dtypes[di]);
                        int64_t off = 0, first = -1;
                        for (int64_t i = 0; i < n; i++)
                            if (!(fabs((double)got[i] - (double)unsplit[causal][i]) <= tol) && off++ == 0)
                                first = i;
                        if (off) {
                            rt_logf(log, "  %s: %lld elements off the unsplit result; first [%lld] = %.7g, unsplit "
                                    "%.7g\n", what, (long long)off, (long long)first, got[first],
                                    unsplit[causal][first]);
                            bad++;
                        }
                    }
                    free(got);
                    if (bad)
                        log->failures++;
                }
                rudnn_paged_split_workspace_destroy(ws);
            }
            free(unsplit[0]), free(unsplit[1]);
            data_free(&d);
        }
        rudnn_paged_plan_destroy(plan);
        sched_free(&sc);
    }
    rt_log_finish_free(log, "case(s)");
}

/* Decode over a batch of histories of one length with more work items than a GPU holds CTAs at once
 * (72 sequences x 8 KV heads, and x 16 splits through a workspace: several waves of CTAs, and the
 * split merge's counters reused across them). At length 40 an item is one tile and most splits
 * hold no key. */
static void batch_decode(void **state)
{
    (void)state;
    enum { NSEQ = 72, SPLITS = 16 };
    static const int64_t lens[] = {160, 40};
    const shape_t sh = {32, 8, 128, 128, 0};
    const float scale = (float)(1.5 / sqrt((double)sh.D));
    rt_log_t *log = rt_log_new();
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        seqspec_t seqs[NSEQ];
        for (int i = 0; i < NSEQ; i++)
            seqs[i] = (seqspec_t){lens[li], 1, DEC};
        char name[64];
        snprintf(name, sizeof name, "batch_decode_len%lld", (long long)lens[li]);
        sched_t sc;
        sched_build(&sc, rt_hash(name), 16, NSEQ, seqs, 2, 0);
        rudnn_paged_plan_t plan = make_plan(&sc);
        for (size_t di = 0; di < 3; di++) {
            data_t d;
            data_make(&d, &sc, &sh, dtypes[di], rt_hash(name) + di, OOH);
            rudnn_paged_split_workspace_t ws = NULL;
            rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, d.Q, sh.H, sh.Dv, SPLITS, &ws),
                             RUDNN_STATUS_SUCCESS);
            for (int split = 0; split < 2; split++)
                for (int causal = 0; causal < 2; causal++) {
                    char what[160];
                    snprintf(what, sizeof what, "%s %s %s %s", name, rudnn_dtype_name(dtypes[di]),
                             causal ? "causal" : "not causal", split ? "16 splits" : "unsplit");
                    if (run_checked(log, what, &sc, plan, split ? ws : NULL, &d, NULL, NULL, scale, causal, NULL))
                        log->failures++;
                }
            rudnn_paged_split_workspace_destroy(ws);
            data_free(&d);
        }
        rudnn_paged_plan_destroy(plan);
        sched_free(&sc);
    }
    rt_log_finish_free(log, "case(s)");
}

/* ---- append ---------------------------------------------------------------------------------------- */

/* A schedule over base's pages and tables whose queries are the tokens to append: sequence s
 * has length lens[s] (at most base's) and gets the tokens [from[s], lens[s]) in a shuffled order. */
static void append_sched(sched_t *sc, const sched_t *base, uint64_t seed, const int64_t *lens, const int64_t *from)
{
    const int64_t n = base->s.sequences, entries = base->offsets[n];
    memset(sc, 0, sizeof *sc);
    sc->lengths = rt_xmalloc(sizeof(int64_t) * (size_t)n);
    sc->offsets = rt_xmalloc(sizeof(int64_t) * (size_t)(n + 1));
    sc->tables = rt_xmalloc(sizeof(int32_t) * (size_t)(entries + 1));
    memcpy(sc->offsets, base->offsets, sizeof(int64_t) * (size_t)(n + 1));
    memcpy(sc->tables, base->tables, sizeof(int32_t) * (size_t)entries);
    int64_t nq = 0;
    for (int64_t i = 0; i < n; i++)
        sc->lengths[i] = lens[i], nq += lens[i] - from[i];
    sc->sid = rt_xmalloc(sizeof(int64_t) * (size_t)(nq + 1));
    sc->pos = rt_xmalloc(sizeof(int64_t) * (size_t)(nq + 1));
    rt_rng_t r;
    rt_rng_seed(&r, seed);
    int64_t q = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t q0 = q;
        for (int64_t t = from[i]; t < lens[i]; t++)
            sc->sid[q] = i, sc->pos[q++] = t;
        for (int64_t j = q - 1; j > q0; j--) { /* Fisher-Yates within the sequence */
            const int64_t k = q0 + (int64_t)rt_rng_below(&r, (uint64_t)(j - q0 + 1));
            const int64_t t = sc->pos[j];
            sc->pos[j] = sc->pos[k], sc->pos[k] = t;
        }
    }
    sc->s = base->s;
    sc->s.lengths = sc->lengths, sc->s.table_offsets = sc->offsets, sc->s.tables = sc->tables;
    sc->s.queries = nq, sc->s.sequence_ids = sc->sid, sc->s.positions = sc->pos;
}

/* The tables of an append case: its sequences at their full lengths, no queries. */
static void append_base(sched_t *base, const char *name, int64_t ps, int nseq, const int64_t *lens)
{
    seqspec_t seqs[MAX_SEQ];
    for (int i = 0; i < nseq; i++)
        seqs[i] = (seqspec_t){lens[i], 0, NONE};
    sched_build(base, rt_hash(name), ps, nseq, seqs, 2, 0);
}

/* rows [Q][width] of cache [rows][width] at the schedule's query tokens (host floats). */
static float *gather_rows(const sched_t *sc, const float *cache, int64_t width)
{
    float *rows = rt_xmalloc(sizeof(float) * (size_t)(sc->s.queries * width + 1));
    for (int64_t i = 0; i < sc->s.queries; i++) {
        const int64_t row = pa_ref_row(&sc->s, sc->sid[i], sc->pos[i]);
        memcpy(rows + i * width, cache + row * width, sizeof(float) * (size_t)width);
    }
    return rows;
}

/* A cache tensor like full's, holding full's values except at the rows of `stale` tokens, which
 * hold -7 (what a cache holds before the tokens are appended). */
static void stale_copy(rt_tensor_t *out, const rt_tensor_t *full, const float *host, int64_t width,
                       const sched_t *const *stale, int nstale)
{
    const int64_t n = rt_numel(4, full->t.dims);
    float *h = rt_xmalloc(sizeof(float) * (size_t)n);
    memcpy(h, host, sizeof(float) * (size_t)n);
    for (int k = 0; k < nstale; k++)
        for (int64_t i = 0; i < stale[k]->s.queries; i++) {
            const int64_t row = pa_ref_row(&stale[k]->s, stale[k]->sid[i], stale[k]->pos[i]);
            for (int64_t x = 0; x < width; x++)
                h[row * width + x] = -7.0f;
        }
    upload(out, full->t.dtype, 4, full->t.dims, h);
    free(h);
}

/* One append (rows_v NULL: k alone, v and v_cache NULL); *problems counts what went wrong: the
 * status, the kernel's name, the rows changed. */
static void append_checked(rt_log_t *log, const char *what, rudnn_paged_plan_t plan, const rt_tensor_t *rows_k,
                           const rt_tensor_t *rows_v, const rudnn_tensor_t *k_cache, const rudnn_tensor_t *v_cache,
                           rudnn_tensor_t *k_out, rudnn_tensor_t *v_out, int *problems)
{
    rt_guard_t g;
    memset(&g, 0, sizeof g);
    rt_guard_track(&g, rt_queue, rows_k, "k rows");
    if (rows_v)
        rt_guard_track(&g, rt_queue, rows_v, "v rows");
    rt_guard_begin(&g);
    const rudnn_status_t st = rudnn_paged_append(plan, &rows_k->t, rows_v ? &rows_v->t : NULL, k_cache,
                                                 rows_v ? v_cache : NULL, k_out, rows_v ? v_out : NULL);
    const char *kernel = rudnn_last_kernel();
    saw_kernel(kernel);
    rudnn_queue_synchronize(rt_queue);
    if (st) {
        rt_logf(log, "  %s: append returned %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
        ++*problems;
    } else if (strncmp(kernel, "paged_attention.", 16)) {
        rt_logf(log, "  %s: append: rudnn_last_kernel() = \"%s\"\n", what, kernel);
        ++*problems;
    }
    if (rt_guard_changed(&g)) {
        rt_logf(log, "  %s: append changed its k or v rows\n", what);
        ++*problems;
    }
    rt_guard_free(&g);
}

/* Two buffers byte for byte (whole buffers: the tensors and the poisoned bytes around them). */
static int same_bytes(rt_log_t *log, const char *what, const char *name, rudnn_buffer_t a, rudnn_buffer_t b,
                      size_t bytes)
{
    uint8_t *x = rt_buffer_snapshot(a, bytes), *y = rt_buffer_snapshot(b, bytes);
    size_t first = 0;
    const size_t n = rt_count_changed(x, y, bytes, NULL, NULL, 0, &first);
    free(x), free(y);
    if (n)
        rt_logf(log, "  %s: %s differs from the cache built in one go in %zu bytes (first at byte %zu)\n", what, name,
                n, first);
    return n != 0;
}

/* Outputs of two calls byte for byte (same kernels, same data). */
static int same_output(rt_log_t *log, const char *what, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) {
            rt_logf(log, "  %s: attention over the appended cache differs from the cache built in one go at [%lld]: "
                    "%.7g vs %.7g\n", what, (long long)i, a[i], b[i]);
            return 1;
        }
    return 0;
}

typedef struct acase {
    const char *name;
    int64_t ps;
    int nseq;
    int64_t lens[MAX_SEQ];
    shape_t sh;
} acase_t;

static const acase_t append_cases[] = {
    {"append_ps5_gqa2_dv24", 5, 5, {23, 9, 0, 12, 1}, {4, 2, 16, 24, 0}},
    {"append_ps16_gqa1", 16, 2, {40, 17}, {2, 2, 64, 64, 0}},
    {"append_mla_ps7", 7, 3, {30, 1, 15}, {4, 1, 24, 24, 8}},
};

/* Prefill (every token but each sequence's last, in shuffled order) then decode (the last), each
 * its own plan over the same tables; attention (decode step's plan) over the appended cache equals
 * that over the cache built in one go, which equals it byte for byte. MLA: step 1 appends latent
 * and kp as k and v (D != Dv), step 2 each alone with v NULL (one cache). */
static void append_then_attend(void **state)
{
    (void)state;
    rt_log_t *log = rt_log_new();
    for (size_t ci = 0; ci < sizeof append_cases / sizeof append_cases[0]; ci++) {
        const acase_t *c = &append_cases[ci];
        const int mla = is_mla(&c->sh);
        int64_t from1[MAX_SEQ], end1[MAX_SEQ], from2[MAX_SEQ];
        for (int i = 0; i < c->nseq; i++) {
            end1[i] = c->lens[i] > 0 ? c->lens[i] - 1 : 0;
            from1[i] = 0, from2[i] = end1[i];
        }
        sched_t base, s1, s2;
        append_base(&base, c->name, c->ps, c->nseq, c->lens);
        append_sched(&s1, &base, 1, end1, from1);
        append_sched(&s2, &base, 2, c->lens, from2);
        rudnn_paged_plan_t p1 = make_plan(&s1), p2 = make_plan(&s2);
        for (size_t di = 0; di < 3; di++) {
            const rudnn_dtype_t dt = dtypes[di];
            char what[160];
            snprintf(what, sizeof what, "%s %s", c->name, rudnn_dtype_name(dt));
            data_t full; /* the cache built in one go, queries of step 2 */
            data_make(&full, &s2, &c->sh, dt, rt_hash(c->name) + di, OOH);
            const int64_t wk = (mla ? 1 : c->sh.Hkv) * c->sh.D, wv = mla ? c->sh.P : c->sh.Hkv * c->sh.Dv;
            const rt_tensor_t *fk = &full.tk, *fv = mla ? &full.tkp : &full.tv;
            const float *hk = full.k, *hv = mla ? full.kp : full.v;
            const sched_t *both[2] = {&s1, &s2};
            rt_tensor_t ck, cv; /* the caches appended into */
            stale_copy(&ck, fk, hk, wk, both, 2);
            stale_copy(&cv, fv, hv, wv, both, 2);
            int problems = 0;
            rudnn_tensor_t kc = ck.t, vc = cv.t;
            for (int step = 0; step < 2; step++) {
                const sched_t *s = both[step];
                rudnn_paged_plan_t plan = step ? p2 : p1;
                float *rk = gather_rows(s, hk, wk), *rv = gather_rows(s, hv, wv);
                rt_tensor_t tk, tv;
                const int64_t drk[3] = {s->s.queries, mla ? 1 : c->sh.Hkv, c->sh.D};
                const int64_t drv[3] = {s->s.queries, mla ? 1 : c->sh.Hkv, mla ? c->sh.P : c->sh.Dv};
                upload(&tk, dt, 3, drk, rk);
                upload(&tv, dt, 3, drv, rv);
                rudnn_tensor_t ko, vo;
                memset(&ko, 0, sizeof ko), memset(&vo, 0, sizeof vo);
                if (mla && step == 1) { /* one cache a call */
                    append_checked(log, what, plan, &tk, NULL, &kc, NULL, &ko, NULL, &problems);
                    append_checked(log, what, plan, &tv, NULL, &vc, NULL, &vo, NULL, &problems);
                } else {
                    append_checked(log, what, plan, &tk, &tv, &kc, &vc, &ko, &vo, &problems);
                }
                if (!problems && (ko.buffer != kc.buffer || vo.buffer != vc.buffer)) {
                    rt_logf(log, "  %s: append step %d returned another buffer for a cache that is not shared\n",
                            what, step + 1);
                    problems++;
                }
                rt_tensor_destroy(&tk), rt_tensor_destroy(&tv);
                free(rk), free(rv);
            }
            if (!problems) {
                problems += same_bytes(log, what, mla ? "latent cache" : "k cache", ck.buffer, fk->buffer,
                                       fk->buffer_bytes);
                problems += same_bytes(log, what, mla ? "kp cache" : "v cache", cv.buffer, fv->buffer,
                                       fv->buffer_bytes);
            }
            for (int causal = 0; causal < 2 && !problems; causal++) {
                char w2[200];
                float *a = NULL, *b = NULL;
                const float scale = (float)(1.5 / sqrt((double)(c->sh.D + c->sh.P)));
                snprintf(w2, sizeof w2, "%s %s, built in one go", what, causal ? "causal" : "not causal");
                problems += run_checked(log, w2, &s2, p2, NULL, &full, NULL, NULL, scale, causal, &a);
                snprintf(w2, sizeof w2, "%s %s, appended", what, causal ? "causal" : "not causal");
                problems += run_checked(log, w2, &s2, p2, NULL, &full, &ck.t, &cv.t, scale, causal, &b);
                if (a && b)
                    problems += same_output(log, w2, a, b, full.Q * c->sh.H * out_dim(&full));
                free(a), free(b);
            }
            if (problems)
                log->failures++;
            rt_tensor_destroy(&ck), rt_tensor_destroy(&cv);
            data_free(&full);
        }
        rudnn_paged_plan_destroy(p1), rudnn_paged_plan_destroy(p2);
        sched_free(&s1), sched_free(&s2), sched_free(&base);
    }
    rt_log_finish_free(log, "case(s)");
}

/* Copy on write: (a) k cache retained, v not: k comes back in a new buffer (the caller's), the
 * retained original byte-identical, v written in place; (b) k and v caches in one retained
 * buffer: one new buffer for both; (c) the retain dropped: written in place. Each result equals
 * the cache built in one go, and attention over it the reference. */
static void append_copy_on_write(void **state)
{
    (void)state;
    const acase_t *c = &append_cases[0];
    rt_log_t *log = rt_log_new();
    int64_t from[MAX_SEQ];
    for (int i = 0; i < c->nseq; i++)
        from[i] = c->lens[i] > 3 ? c->lens[i] - 3 : 0; /* a chunk of up to 3 tokens each */
    sched_t base, s;
    append_base(&base, "cow", c->ps, c->nseq, c->lens);
    append_sched(&s, &base, 3, c->lens, from);
    rudnn_paged_plan_t plan = make_plan(&s);
    const sched_t *st1[1] = {&s};
    for (size_t di = 0; di < 3; di++) {
        const rudnn_dtype_t dt = dtypes[di];
        const int64_t Hkv = c->sh.Hkv, D = c->sh.D, Dv = c->sh.Dv;
        data_t full;
        data_make(&full, &s, &c->sh, dt, rt_hash("cow") + di, OOH);
        float *rk = gather_rows(&s, full.k, Hkv * D), *rv = gather_rows(&s, full.v, Hkv * Dv);
        rt_tensor_t tk, tv;
        const int64_t drk[3] = {s.s.queries, Hkv, D}, drv[3] = {s.s.queries, Hkv, Dv};
        upload(&tk, dt, 3, drk, rk);
        upload(&tv, dt, 3, drv, rv);
        const float scale = (float)(1.5 / sqrt((double)D));
        char what[160];
        int problems = 0;

        /* (a) */
        snprintf(what, sizeof what, "copy on write, k retained, %s", rudnn_dtype_name(dt));
        rt_tensor_t ck, cv;
        stale_copy(&ck, &full.tk, full.k, Hkv * D, st1, 1);
        stale_copy(&cv, &full.tv, full.v, Hkv * Dv, st1, 1);
        rudnn_buffer_retain(ck.buffer);
        uint8_t *orig = rt_buffer_snapshot(ck.buffer, ck.buffer_bytes);
        rudnn_tensor_t ko, vo;
        memset(&ko, 0, sizeof ko), memset(&vo, 0, sizeof vo);
        append_checked(log, what, plan, &tk, &tv, &ck.t, &cv.t, &ko, &vo, &problems);
        if (!problems) {
            if (ko.buffer == ck.buffer || !ko.buffer) {
                rt_logf(log, "  %s: the shared k cache was not copied\n", what);
                problems++;
            } else {
                if (rudnn_buffer_size(ko.buffer) < ck.t.offset + rudnn_tensor_bytes(&ck.t) ||
                    ko.offset != ck.t.offset || memcmp(ko.dims, ck.t.dims, sizeof ko.dims) || ko.dtype != dt) {
                    rt_logf(log, "  %s: the copy's tensor does not describe the cache\n", what);
                    problems++;
                }
                uint8_t *now = rt_buffer_snapshot(ck.buffer, ck.buffer_bytes);
                if (memcmp(now, orig, ck.buffer_bytes)) {
                    rt_logf(log, "  %s: the shared original was modified\n", what);
                    problems++;
                }
                free(now);
                /* the copy: the whole cache (tensor bytes) as built in one go */
                float *a = rt_xmalloc(sizeof(float) * (size_t)rt_numel(4, ko.dims));
                float *b = rt_xmalloc(sizeof(float) * (size_t)rt_numel(4, ko.dims));
                rt_tensor_t view = {ko, ko.buffer, rudnn_buffer_size(ko.buffer), 0};
                rt_tensor_download(&view, a);
                rt_tensor_download(&full.tk, b);
                if (memcmp(a, b, sizeof(float) * (size_t)rt_numel(4, ko.dims))) {
                    rt_logf(log, "  %s: the copy does not hold the appended cache\n", what);
                    problems++;
                }
                free(a), free(b);
            }
            if (vo.buffer != cv.buffer) {
                rt_logf(log, "  %s: the v cache (not shared) came back in another buffer\n", what);
                problems++;
            }
            problems += same_bytes(log, what, "v cache", cv.buffer, full.tv.buffer, full.tv.buffer_bytes);
            if (!problems)
                for (int causal = 0; causal < 2; causal++)
                    problems += run_checked(log, what, &s, plan, NULL, &full, &ko, &vo, scale, causal, NULL);
        }
        if (ko.buffer && ko.buffer != ck.buffer)
            rudnn_buffer_destroy(ko.buffer);
        rudnn_buffer_destroy(ck.buffer); /* the retain */
        free(orig);

        /* (c) the same k cache, its retain dropped: no longer shared, so written in place (it
         * still holds the stale rows: the copy took the append) */
        snprintf(what, sizeof what, "append after the retain dropped, %s", rudnn_dtype_name(dt));
        rt_tensor_destroy(&cv);
        stale_copy(&cv, &full.tv, full.v, Hkv * Dv, st1, 1);
        memset(&ko, 0, sizeof ko), memset(&vo, 0, sizeof vo);
        append_checked(log, what, plan, &tk, &tv, &ck.t, &cv.t, &ko, &vo, &problems);
        if (ko.buffer != ck.buffer || vo.buffer != cv.buffer) {
            rt_logf(log, "  %s: a cache that is not shared came back in another buffer\n", what);
            problems++;
            if (ko.buffer && ko.buffer != ck.buffer)
                rudnn_buffer_destroy(ko.buffer);
            if (vo.buffer && vo.buffer != cv.buffer)
                rudnn_buffer_destroy(vo.buffer);
        } else {
            problems += same_bytes(log, what, "k cache", ck.buffer, full.tk.buffer, full.tk.buffer_bytes);
            problems += same_bytes(log, what, "v cache", cv.buffer, full.tv.buffer, full.tv.buffer_bytes);
        }
        rt_tensor_destroy(&ck), rt_tensor_destroy(&cv);

        /* (b) k and v caches in one retained buffer */
        snprintf(what, sizeof what, "copy on write, k and v in one shared buffer, %s", rudnn_dtype_name(dt));
        const size_t es = rudnn_dtype_size(dt);
        const size_t kb = rudnn_tensor_bytes(&full.tk.t), vb = rudnn_tensor_bytes(&full.tv.t);
        const size_t voff = (kb + 64 + 255) / 256 * 256;
        const int64_t all = (int64_t)((voff + vb + 64) / es);
        rt_tensor_t both;
        rt_tensor_create(&both, dt, 1, &all, 0, 0);
        rudnn_tensor_t bk = full.tk.t, bv = full.tv.t;
        bk.buffer = bv.buffer = both.buffer;
        bk.offset = 32, bv.offset = voff;
        {
            /* stale values in place: the tensors' contents as built in one go, then the rows -7 */
            float *h = rt_xmalloc(sizeof(float) * (size_t)rt_numel(4, bk.dims));
            memcpy(h, full.k, sizeof(float) * (size_t)rt_numel(4, bk.dims));
            for (int64_t i = 0; i < s.s.queries; i++)
                for (int64_t x = 0; x < Hkv * D; x++)
                    h[pa_ref_row(&s.s, s.sid[i], s.pos[i]) * Hkv * D + x] = -7.0f;
            rt_tensor_t vk = {bk, both.buffer, both.buffer_bytes, 0};
            rt_tensor_upload(&vk, h);
            free(h);
            h = rt_xmalloc(sizeof(float) * (size_t)rt_numel(4, bv.dims));
            memcpy(h, full.v, sizeof(float) * (size_t)rt_numel(4, bv.dims));
            for (int64_t i = 0; i < s.s.queries; i++)
                for (int64_t x = 0; x < Hkv * Dv; x++)
                    h[pa_ref_row(&s.s, s.sid[i], s.pos[i]) * Hkv * Dv + x] = -7.0f;
            rt_tensor_t vv = {bv, both.buffer, both.buffer_bytes, 0};
            rt_tensor_upload(&vv, h);
            free(h);
        }
        rudnn_buffer_retain(both.buffer);
        orig = rt_buffer_snapshot(both.buffer, both.buffer_bytes);
        memset(&ko, 0, sizeof ko), memset(&vo, 0, sizeof vo);
        append_checked(log, what, plan, &tk, &tv, &bk, &bv, &ko, &vo, &problems);
        if (ko.buffer == both.buffer || ko.buffer != vo.buffer || !ko.buffer) {
            rt_logf(log, "  %s: expected one new buffer for both caches (got k %s, v %s)\n", what,
                    ko.buffer == both.buffer ? "the original" : "a new one",
                    vo.buffer == ko.buffer ? "the same as k" : "another");
            problems++;
        } else {
            uint8_t *now = rt_buffer_snapshot(both.buffer, both.buffer_bytes);
            if (memcmp(now, orig, both.buffer_bytes)) {
                rt_logf(log, "  %s: the shared original was modified\n", what);
                problems++;
            }
            free(now);
            if (ko.offset != bk.offset || vo.offset != bv.offset) {
                rt_logf(log, "  %s: the copy's tensors moved\n", what);
                problems++;
            }
            for (int causal = 0; causal < 2; causal++)
                problems += run_checked(log, what, &s, plan, NULL, &full, &ko, &vo, scale, causal, NULL);
        }
        if (ko.buffer && ko.buffer != both.buffer)
            rudnn_buffer_destroy(ko.buffer);
        if (vo.buffer && vo.buffer != both.buffer && vo.buffer != ko.buffer)
            rudnn_buffer_destroy(vo.buffer);
        rudnn_buffer_destroy(both.buffer); /* the retain */
        rt_tensor_destroy(&both);
        free(orig);

        if (problems)
            log->failures++;
        rt_tensor_destroy(&tk), rt_tensor_destroy(&tv);
        free(rk), free(rv);
        data_free(&full);
    }
    rudnn_paged_plan_destroy(plan);
    sched_free(&s), sched_free(&base);
    rt_log_finish_free(log, "case(s)");
}

/* ---- plans ------------------------------------------------------------------------------------------ */

/* One plan serves a step's layers: three attention layers (different caches and q, one split
 * workspace shared by them) and an MLA layer, all on the same plan, each against the reference. */
static void plan_reused_by_layers(void **state)
{
    (void)state;
    const seqspec_t seqs[4] = {{77, 1, DEC}, {30, 6, PRE}, {0, 1, DEC}, {50, 3, ARB}};
    sched_t sc;
    sched_build(&sc, rt_hash("layers"), 16, 4, seqs, 4, 0);
    rudnn_paged_plan_t plan = make_plan(&sc);
    rt_log_t *log = rt_log_new();
    const shape_t att = {8, 2, 32, 32, 0}, mla = {4, 1, 48, 48, 16};
    for (size_t di = 0; di < 3; di += 2) {
        rudnn_paged_split_workspace_t ws = NULL;
        rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, sc.s.queries, att.H, att.Dv, 4, &ws),
                         RUDNN_STATUS_SUCCESS);
        for (int layer = 0; layer < 4; layer++) {
            data_t d;
            data_make(&d, &sc, layer < 3 ? &att : &mla, dtypes[di], 100 + (uint64_t)layer, OOH);
            char what[128];
            snprintf(what, sizeof what, "layer %d %s%s", layer, rudnn_dtype_name(dtypes[di]),
                     layer < 3 ? " (split workspace)" : " (MLA)");
            const float scale = (float)(1.5 / sqrt((double)(d.sh.D + d.sh.P)));
            if (run_checked(log, what, &sc, plan, layer < 3 && layer ? ws : NULL, &d, NULL, NULL, scale, 1, NULL))
                log->failures++;
            data_free(&d);
        }
        rudnn_paged_split_workspace_destroy(ws);
    }
    rudnn_paged_plan_destroy(plan);
    sched_free(&sc);
    rt_log_finish_free(log, "layer(s)");
}

/* Where a NaN input must reach: output element (query i, head h, column c) of sequence seq, whose
 * query sees `seen` keys. */
typedef int (*nan_want_fn)(const void *ctx, int64_t i, int64_t h, int64_t c, int64_t seq, int64_t seen);

/* One call of a NaN-input test (plain, or with ws) checked element by element: NaN exactly where
 * want says, the reference (ref, Q x H x dv) elsewhere. */
static void nan_check(rt_log_t *log, const char *what, const sched_t *sc, rudnn_paged_plan_t plan,
                      rudnn_paged_split_workspace_t ws, data_t *d, float scale, int causal, const double *ref,
                      int64_t H, int64_t dv, double tol, nan_want_fn want, const void *ctx)
{
    rt_tensor_poison(&d->tout);
    char kernel[64];
    const rudnn_status_t st = call(plan, ws, d, NULL, NULL, NULL, scale, causal, kernel);
    if (st) {
        rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
        log->failures++;
        return;
    }
    int outside = 0;
    float *out = read_out(d, &outside, NULL);
    int64_t missing = 0, extra = 0, off = 0, first = -1;
    for (int64_t i = 0; i < sc->s.queries; i++) {
        const int64_t seq = sc->sid[i], seen = pa_ref_visible(&sc->s, i, causal);
        for (int64_t h = 0; h < H; h++)
            for (int64_t c = 0; c < dv; c++) {
                const int64_t at = (i * H + h) * dv + c;
                if (want(ctx, i, h, c, seq, seen)) {
                    if (!isnan(out[at]))
                        missing++, first = first < 0 ? at : first;
                } else if (isnan(out[at])) {
                    extra++, first = first < 0 ? at : first;
                } else if (!(fabs((double)out[at] - ref[at]) <= tol)) {
                    off++, first = first < 0 ? at : first;
                }
            }
    }
    if (missing || extra || off) {
        rt_logf(log, "  %s (%s): %lld elements not NaN that a NaN enters, %lld NaN that none enters, %lld off the "
                "reference; first [query %lld, head %lld, col %lld] = %g\n", what, kernel, (long long)missing,
                (long long)extra, (long long)off, (long long)(first / (H * dv)), (long long)(first / dv % H),
                (long long)(first % dv), out[first]);
        log->failures++;
    }
    free(out);
}

/* nan_inputs' NaN elements: q[q, q_head, 5]; k of sequence 0, token key_tok, KV head key_head; v of
 * sequence 1, token val_tok, KV head val_head, column val_col (G query heads a KV head). */
typedef struct nan_att {
    int64_t q, q_head, key_tok, key_head, val_tok, val_head, val_col, G;
} nan_att_t;

static int nan_want_attention(const void *ctx, int64_t i, int64_t h, int64_t c, int64_t seq, int64_t seen)
{
    const nan_att_t *n = ctx;
    return (i == n->q && h == n->q_head) || (seq == 0 && h / n->G == n->key_head && seen > n->key_tok) ||
           (seq == 1 && h / n->G == n->val_head && c == n->val_col && seen > n->val_tok);
}

/* nan_inputs_mla's: q[q, q_head, 5]; the latent of sequence 0's key lat_tok (every column of the
 * rows that see it: the score); kp of sequence 1's key rope_tok likewise. */
typedef struct nan_mla {
    int64_t q, q_head, lat_tok, rope_tok;
} nan_mla_t;

static int nan_want_mla(const void *ctx, int64_t i, int64_t h, int64_t c, int64_t seq, int64_t seen)
{
    const nan_mla_t *n = ctx;
    (void)c;
    return (i == n->q && h == n->q_head) || (seq == 0 && seen > n->lat_tok) || (seq == 1 && seen > n->rope_tok);
}

/* NaN inputs (the header: a NaN in q, k or v reaches only the outputs of the rows whose scores or
 * values it enters, NaN there): a NaN in q of one (query, head) makes that row NaN; in a key row,
 * the rows of that KV head's query heads whose queries see the key (causal: position >= the
 * key's); in a value element, that column of the rows that see it. Every other element equals the
 * reference. Plain and with a split workspace of 3 (the NaN key sits in one split's range). */
static void nan_inputs(void **state)
{
    (void)state;
    const seqspec_t seqs[2] = {{40, 40, PRE}, {7, 1, DEC}};
    sched_t sc;
    sched_build(&sc, rt_hash("nan"), 4, 2, seqs, 1, 0);
    rudnn_paged_plan_t plan = make_plan(&sc);
    const shape_t sh = {4, 2, 16, 8, 0};
    const int64_t Q = sc.s.queries, H = 4, Dv = 8;
    const nan_att_t spot = {.q = 2, .q_head = 3, .key_tok = 30, .key_head = 0, .val_tok = 3, .val_head = 1,
                            .val_col = 4, .G = 2};
    rt_log_t *log = rt_log_new();
    for (size_t di = 0; di < 3; di++) {
        data_t d;
        data_make(&d, &sc, &sh, dtypes[di], rt_hash("nan") + di, OOH);
        const int64_t krow = pa_ref_row(&sc.s, 0, spot.key_tok), vrow = pa_ref_row(&sc.s, 1, spot.val_tok);
        /* the reference sees the data as made (the NaN elements are never used for the elements
         * it is compared on); the device gets the NaNs */
        double smax = 0.0;
        double *ref[2];
        for (int causal = 0; causal < 2; causal++) {
            ref[causal] = reference(&sc, &d, 0.5f, causal, &smax);
        }
        d.q[(spot.q * H + spot.q_head) * 16 + 5] = NAN;
        d.k[(krow * 2 + spot.key_head) * 16 + 5] = NAN;
        d.v[(vrow * 2 + spot.val_head) * Dv + spot.val_col] = NAN;
        rt_tensor_upload(&d.tq, d.q), rt_tensor_upload(&d.tk, d.k), rt_tensor_upload(&d.tv, d.v);
        rudnn_paged_split_workspace_t ws = NULL;
        rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, Q, H, Dv, 3, &ws), RUDNN_STATUS_SUCCESS);
        for (int causal = 0; causal < 2; causal++)
            for (int split = 0; split < 2; split++) {
                char what[96];
                snprintf(what, sizeof what, "NaN inputs %s %s%s", rudnn_dtype_name(dtypes[di]),
                         causal ? "causal" : "not causal", split ? " (3 splits)" : "");
                nan_check(log, what, &sc, plan, split ? ws : NULL, &d, 0.5f, causal, ref[causal], H, Dv,
                          tol_of(dtypes[di]), nan_want_attention, &spot);
            }
        rudnn_paged_split_workspace_destroy(ws);
        free(ref[0]), free(ref[1]);
        data_free(&d);
    }
    rudnn_paged_plan_destroy(plan);
    sched_free(&sc);
    rt_log_finish_free(log, "case(s)");
}

/* NaN inputs of MLA at H 128 (R 512, P 64, page 64): a NaN in q of one (query, head) makes that
 * row NaN; in a latent element of a key, the scores (and that value column) of every head of the
 * queries that see the key: their whole rows; in a rope key element likewise. The latent NaN sits
 * on the last key of a two-query sequence, which under causal masking only the second query sees
 * (a kernel that multiplies the masked keys' values by P = 0 would spread it to the first). Plain
 * and with a split workspace of 3. */
static void nan_inputs_mla(void **state)
{
    (void)state;
    const seqspec_t seqs[2] = {{150, 2, PRE}, {70, 1, DEC}};
    sched_t sc;
    sched_build(&sc, rt_hash("nan_mla"), 64, 2, seqs, 1, 0);
    rudnn_paged_plan_t plan = make_plan(&sc);
    const int64_t H = 128, R = 512, P = 64;
    const shape_t sh = {H, 1, R, R, P};
    const int64_t Q = sc.s.queries;
    const nan_mla_t spot = {.q = 0, .q_head = 70, .lat_tok = 149 /* sequence 0's last key */, .rope_tok = 10};
    const int64_t lat_col = 300, rope_col = 3;
    const float scale = (float)(1.0 / sqrt((double)(R + P)));
    rt_log_t *log = rt_log_new();
    for (size_t di = 0; di < 3; di++) {
        data_t d;
        data_make(&d, &sc, &sh, dtypes[di], rt_hash("nan_mla") + di, OOH);
        const int64_t lrow = pa_ref_row(&sc.s, 0, spot.lat_tok), prow = pa_ref_row(&sc.s, 1, spot.rope_tok);
        double smax = 0.0;
        double *ref[2];
        for (int causal = 0; causal < 2; causal++)
            ref[causal] = reference(&sc, &d, scale, causal, &smax);
        d.q[(spot.q * H + spot.q_head) * R + 5] = NAN;
        d.k[lrow * R + lat_col] = NAN;
        d.kp[prow * P + rope_col] = NAN;
        rt_tensor_upload(&d.tq, d.q), rt_tensor_upload(&d.tk, d.k), rt_tensor_upload(&d.tkp, d.kp);
        rudnn_paged_split_workspace_t ws = NULL;
        rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, Q, H, R, 3, &ws), RUDNN_STATUS_SUCCESS);
        for (int causal = 0; causal < 2; causal++)
            for (int split = 0; split < 2; split++) {
                char what[96];
                snprintf(what, sizeof what, "MLA NaN inputs %s %s%s", rudnn_dtype_name(dtypes[di]),
                         causal ? "causal" : "not causal", split ? " (3 splits)" : "");
                nan_check(log, what, &sc, plan, split ? ws : NULL, &d, scale, causal, ref[causal], H, R,
                          tol_of(dtypes[di]), nan_want_mla, &spot);
            }
        rudnn_paged_split_workspace_destroy(ws);
        free(ref[0]), free(ref[1]);
        data_free(&d);
    }
    rudnn_paged_plan_destroy(plan);
    sched_free(&sc);
    rt_log_finish_free(log, "case(s)");
}

/* A step without queries (Q 0): the calls succeed and write nothing; an append returns the caches
 * as they are. */
static void no_queries(void **state)
{
    (void)state;
    const seqspec_t seqs[2] = {{10, 0, NONE}, {3, 0, NONE}};
    sched_t sc;
    sched_build(&sc, rt_hash("noq"), 4, 2, seqs, 1, 0);
    rudnn_paged_plan_t plan = make_plan(&sc);
    const shape_t sh = {2, 1, 16, 16, 0};
    data_t d;
    data_make(&d, &sc, &sh, RUDNN_F32, 7, OOH);
    uint8_t *before = rt_buffer_snapshot(d.tout.buffer, d.tout.buffer_bytes);
    char kernel[64];
    rt_assert_status(call(plan, NULL, &d, NULL, NULL, NULL, 0.25f, 1, kernel), RUDNN_STATUS_SUCCESS);
    uint8_t *after = rt_buffer_snapshot(d.tout.buffer, d.tout.buffer_bytes);
    assert_memory_equal(before, after, d.tout.buffer_bytes);
    free(after);
    rt_tensor_t rk;
    const int64_t dr[3] = {0, 1, 16};
    upload(&rk, RUDNN_F32, 3, dr, NULL);
    rudnn_tensor_t ko;
    uint8_t *kb = rt_buffer_snapshot(d.tk.buffer, d.tk.buffer_bytes);
    rt_assert_status(rudnn_paged_append(plan, &rk.t, NULL, &d.tk.t, NULL, &ko, NULL), RUDNN_STATUS_SUCCESS);
    assert_ptr_equal(ko.buffer, d.tk.buffer);
    after = rt_buffer_snapshot(d.tk.buffer, d.tk.buffer_bytes);
    assert_memory_equal(kb, after, d.tk.buffer_bytes);
    free(after), free(kb), free(before);
    rt_tensor_destroy(&rk);
    data_free(&d);
    rudnn_paged_plan_destroy(plan);
    sched_free(&sc);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attention_all),
        cmocka_unit_test(mla_all),
        cmocka_unit_test(garbage_rows),
        cmocka_unit_test(nan_inputs),
        cmocka_unit_test(nan_inputs_mla),
        cmocka_unit_test(split_workspaces),
        cmocka_unit_test(batch_decode),
        cmocka_unit_test(append_then_attend),
        cmocka_unit_test(append_copy_on_write),
        cmocka_unit_test(plan_reused_by_layers),
        cmocka_unit_test(no_queries),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("paged_attention");
    rt_print_device("paged_attention");
    const int failed = cmocka_run_group_tests_name("paged_attention", tests, NULL, rt_group_teardown);
    printf("paged_attention: largest error against the reference (tolerance): f32 %.3g (%.3g), f16 %.3g (%.3g), "
           "bf16 %.3g (%.3g)\n", worst_seen[0], tol_of(RUDNN_F32), worst_seen[1], tol_of(RUDNN_F16), worst_seen[2],
           tol_of(RUDNN_BF16));
    printf("paged_attention: kernels run:");
    for (int i = 0; i < kernels_count; i++)
        printf(" %s", kernels_seen[i]);
    printf("\n");
    return rt_exit_code(failed);
}
