/* CTC loss on CUDA and HIP (hal/ctc.h; the rules in include/rudnn/ctc.h; the OpenCL kernel
 * backends/opencl/kernels/ctc.cl is the reference this follows step for step): log-space sums in
 * FP32, log_probs and its gradient F32, F16 or BF16, targets I32 or I64.
 *   ctc.loss  a block of CTC_THREADS per sample (a grid-stride loop over the samples). The
 *             alignment states s = 0 .. 2 S_n (even: blank, odd: label (s - 1) / 2) are dealt round
 *             the threads; alpha walks t forward in two shared rows (with the gradient every row
 *             also goes to the scratch), then beta walks t backward in two shared rows and each
 *             step's gradient is written: first exp(lp) g for every class, then, after a barrier,
 *             the blank's and each label class's entries with their posterior (a label's class
 *             summed over its repeats in the target, in target order, by the thread of its first
 *             occurrence). No atomics.
 * Scratch (with the gradient only): alpha [N, T, 2 S + 1] floats, then a per-sample chain of the
 * target's repeats [N, S] int32 (bit 0: first occurrence of its label; bits 1..: the next position
 * with the same label, S_n where none), built once per sample so that a step's posterior sums walk
 * the repeats instead of rescanning the target (the OpenCL kernel rescans; same terms, same order).
 * Shared memory: the two rows, 2 (2 S + 1) floats (64 KiB at S = 4096). */
#include <stdio.h>
#include <string.h>

#include "rdg_internal.h"
#include "elem.cuh"

namespace {

constexpr int CTC_THREADS = 256; /* a sample's block: a multiple of 64 (HIP wavefronts) */
/* blocks an SM for the register budget (CUDA): with no count ptxas caps at 40 registers and spills;
 * a macro, as HIP's launch bounds drop it */
#define CTC_MIN_BLOCKS 4
constexpr size_t CTC_SMEM_DEFAULT_LIMIT = 48 * 1024; /* dynamic shared memory without the opt-in */

/* What a launch reads: pointers with the byte offsets applied, element strides. */
struct CtcArgs {
    const void *lp;       /* log_probs [T, N, C] */
    const void *tg;       /* targets [N, S] */
    const float *gl;      /* grad_loss [N] (read only with has_gl) */
    float *loss;          /* [N] */
    void *grad;           /* grad_log_probs [T, N, C] (written only with has_grad) */
    const int64_t *table; /* input_lengths [N], then target_lengths [N] */
    float *alpha;         /* scratch: [N, T, 2 S + 1] */
    int32_t *chain;       /* scratch: [N, S] */
    int64_t T, N, C, S, blank;
    int64_t lp_t, lp_n, lp_c;
    int64_t gr_t, gr_n, gr_c;
    int64_t tg_n, tg_s;
    int64_t loss_s, gl_s;
    int zero_inf, has_grad, has_gl;
};

/* log(exp(a) + exp(b)), -inf being the empty sum (ctc.cl's lae) */
__device__ __forceinline__ float lae(float a, float b)
{
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    const float m = fmaxf(a, b);
    return m + log1pf(expf(-fabsf(a - b)));
}

/* One sample's view of log_probs and targets. */
template <int DT, typename TG>
struct Sample {
    const void *lp; /* log_probs: sample n's (t, c) at lp[base + t lt + c lc] */
    int64_t base, lt, lc;
    const TG *tg; /* targets' row n: tg[k ts] */
    int64_t ts;
    int64_t blank;

    __device__ __forceinline__ int64_t target(int64_t k) const { return (int64_t)tg[k * ts]; }
    /* state s's class: odd states the label (s - 1) / 2, even ones the blank */
    __device__ __forceinline__ int64_t label(int64_t s) const { return (s & 1) ? target(s >> 1) : blank; }
    __device__ __forceinline__ float lp_at(int64_t t, int64_t c) const { return Elem<DT>::ld(lp, base + t * lt + c * lc); }
};

/* alpha (forward) or beta (backward) at state s (class lab) from the previous row: the state itself,
 * its neighbour, and the one two away when the labels between differ and are not blanks (an odd s's
 * neighbour two away is odd too, so a blank never matches a label there). */
template <bool BACKWARD, int DT, typename TG>
__device__ __forceinline__ float step_from(const float *prev, const Sample<DT, TG> &m, int64_t s, int64_t lab,
                                           int64_t L)
{
    const int64_t s1 = BACKWARD ? s + 1 : s - 1, s2 = BACKWARD ? s + 2 : s - 2;
    float a = prev[s];
    if (s1 >= 0 && s1 < L)
        a = lae(a, prev[s1]);
    if ((s & 1) && s2 >= 0 && s2 < L && lab != m.label(s2))
        a = lae(a, prev[s2]);
    return a;
}

/* Sample n: its loss and, with has_grad, its gradient rows. Every thread of the block calls it
 * (its barriers are the block's); rows: the two shared rows of 2 S + 1 floats. */
template <int DT, typename TG>
__device__ __forceinline__ void ctc_sample(const CtcArgs &a, int64_t n, float *rows)
{
    const int lid = (int)threadIdx.x, nl = (int)blockDim.x;
    const int64_t Tn = a.table[n], Sn = a.table[a.N + n], L = 2 * Sn + 1, Lmax = 2 * a.S + 1;
    Sample<DT, TG> m;
    m.lp = a.lp;
    m.base = n * a.lp_n;
    m.lt = a.lp_t, m.lc = a.lp_c;
    m.tg = (const TG *)a.tg + n * a.tg_n;
    m.ts = a.tg_s;
    m.blank = a.blank;
    float *alpha_n = a.alpha + n * a.T * Lmax;
    int32_t *chain_n = a.chain + n * a.S;

    /* labels outside 0..C-1 or equal to blank: NaN, nothing read past log_probs (a block-wide or
     * instead of ctc.cl's local atomic flag) */
    int mine = 0;
    for (int64_t k = lid; k < Sn; k += nl) {
        const int64_t c = m.target(k);
        if (c < 0 || c >= a.C || c == a.blank)
            mine = 1;
    }
    const bool bad = __syncthreads_or(mine) != 0;
    const float g = a.has_gl ? a.gl[n * a.gl_s] : 1.0f;
    float *prev = rows, *cur = rows + Lmax;
    float nll;
    if (bad) {
        nll = NAN;
    } else if (Tn == 0) {
        nll = Sn == 0 ? 0.0f : INFINITY;
    } else {
        /* alpha */
        for (int64_t s = lid; s < L; s += nl) {
            prev[s] = s < 2 ? m.lp_at(0, m.label(s)) : -INFINITY;
            if (a.has_grad)
                alpha_n[s] = prev[s];
        }
        __syncthreads();
        for (int64_t t = 1; t < Tn; t++) {
            for (int64_t s = lid; s < L; s += nl) {
                const int64_t lab = m.label(s);
                cur[s] = step_from<false>(prev, m, s, lab, L) + m.lp_at(t, lab);
                if (a.has_grad)
                    alpha_n[t * Lmax + s] = cur[s];
            }
            __syncthreads();
            float *x = prev;
            prev = cur, cur = x;
        }
        nll = -(L > 1 ? lae(prev[L - 1], prev[L - 2]) : prev[L - 1]);
        __syncthreads();
    }
    const bool zero = a.zero_inf && isinf(nll);
    if (lid == 0)
        a.loss[n * a.loss_s] = zero ? 0.0f : nll;
    if (!a.has_grad)
        return;
    /* steps past the input, and whole samples without a usable loss */
    for (int64_t t = 0; t < a.T; t++) {
        const bool none = t >= Tn || zero;
        const bool nan = !none && bad;
        if (none || nan)
            for (int64_t c = lid; c < a.C; c += nl)
                Elem<DT>::st(a.grad, t * a.gr_t + n * a.gr_n + c * a.gr_c, nan ? NAN : 0.0f);
    }
    if (bad || zero || Tn == 0)
        return;
    /* the repeats of each target position: whether it is its label's first, and the next one */
    for (int64_t k = lid; k < Sn; k += nl) {
        const int64_t c = m.target(k);
        int first = 1;
        for (int64_t j = 0; j < k && first; j++)
            first = m.target(j) != c;
        int64_t next = Sn;
        for (int64_t j = k + 1; j < Sn; j++)
            if (m.target(j) == c) {
                next = j;
                break;
            }
        chain_n[k] = (int32_t)(next << 1) | first;
    }
    __syncthreads();
    /* beta, and each step's gradient */
    for (int64_t t = Tn - 1; t >= 0; t--) {
        for (int64_t s = lid; s < L; s += nl) {
            const int64_t lab = m.label(s);
            const float b = t == Tn - 1 ? (s >= L - 2 ? 0.0f : -INFINITY) : step_from<true>(prev, m, s, lab, L);
            cur[s] = b + m.lp_at(t, lab);
        }
        __syncthreads();
        float *x = prev;
        prev = cur, cur = x; /* prev: beta at t */
        const int64_t gt = t * a.gr_t + n * a.gr_n;
        for (int64_t c = lid; c < a.C; c += nl) { /* no alignment through c: gamma 0 (NaN where the loss is +inf) */
            const float l = m.lp_at(t, c);
            Elem<DT>::st(a.grad, gt + c * a.gr_c, (expf(l) - expf(-INFINITY + nll - l)) * g);
        }
        __syncthreads(); /* the entries below overwrite some of those */
        const float *at = alpha_n + t * Lmax;
        /* thread 0: the blank (even states); threads over the target positions k: a class's first
         * occurrence sums its repeats */
        for (int64_t k = lid - 1; k < Sn; k += nl) {
            int64_t c;
            float lcab = -INFINITY;
            if (k < 0) {
                c = a.blank;
                for (int64_t s = 0; s < L; s += 2)
                    lcab = lae(lcab, at[s] + prev[s]);
            } else {
                const int32_t link = chain_n[k];
                if (!(link & 1))
                    continue;
                c = m.target(k);
                for (int64_t j = k; j < Sn; j = chain_n[j] >> 1)
                    lcab = lae(lcab, at[2 * j + 1] + prev[2 * j + 1]);
            }
            const float l = m.lp_at(t, c);
            Elem<DT>::st(a.grad, gt + c * a.gr_c, (expf(l) - expf(lcab + nll - l)) * g);
        }
        __syncthreads(); /* this step's writes are done before the next step's; prev is read above */
    }
}

template <int DT, typename TG>
__global__ void RDG_LAUNCH_BOUNDS(CTC_THREADS, CTC_MIN_BLOCKS) ctc_loss_kernel(const CtcArgs a)
{
    extern __shared__ float ctc_rows[];
    for (int64_t n = blockIdx.x; n < a.N; n += gridDim.x) {
        __syncthreads(); /* the previous sample's readers of the rows are done */
        ctc_sample<DT, TG>(a, n, ctc_rows);
    }
}

typedef void (*ctc_kernel_fn)(CtcArgs);

template <int DT>
ctc_kernel_fn kernel_for(rudnn_dtype_t target_dtype)
{
    return target_dtype == RUDNN_I64 ? ctc_loss_kernel<DT, int64_t> : ctc_loss_kernel<DT, int32_t>;
}

size_t smem_bytes(const rudnn_ctc_plan_t *p)
{
    return 2 * (2 * (size_t)p->target_len + 1) * sizeof(float);
}

/* *out: the scratch floats of alpha; false where they overflow. */
bool alpha_floats(const rudnn_ctc_plan_t *p, size_t *out)
{
    const uint64_t lmax = 2 * (uint64_t)p->target_len + 1, n = (uint64_t)p->batch, t = (uint64_t)p->steps;
    if (t != 0 && n > UINT64_MAX / 16 / t)
        return false;
    if (n * t != 0 && lmax > UINT64_MAX / 16 / (n * t))
        return false;
    *out = (size_t)(n * t * lmax);
    return true;
}

rudnn_status_t ctc_workspace(void *device, const rudnn_ctc_plan_t *p, size_t *bytes)
{
    const rdg_devinfo_t *dev = rdg_devinfo_of(device);
    if (smem_bytes(p) > dev->smem_optin)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ctc: %s: targets of S = %lld need %llu bytes of shared memory "
                         "(two rows of 2 S + 1 states), past the device's %llu", RUDNN_GPU_BACKEND_NAME,
                         (long long)p->target_len, (unsigned long long)smem_bytes(p),
                         (unsigned long long)dev->smem_optin);
    *bytes = 0;
    if (!p->has_grad)
        return RUDNN_STATUS_SUCCESS;
    size_t floats;
    if (!alpha_floats(p, &floats))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ctc: %s: the gradient's scratch (N T (2 S + 1) floats) "
                         "overflows size_t", RUDNN_GPU_BACKEND_NAME);
    /* alpha, then the repeats' chain */
    *bytes = floats * sizeof(float) + (size_t)p->batch * (size_t)p->target_len * sizeof(int32_t);
    return RUDNN_STATUS_SUCCESS;
}

/* Lets kernel fn take the device's whole shared memory when the rows pass the default limit (the
 * whole allowance, so that no launch lowers it for another thread's). */
rudnn_status_t allow_smem(const rdg_queue_t *q, ctc_kernel_fn fn, size_t smem)
{
    if (smem <= CTC_SMEM_DEFAULT_LIMIT)
        return RUDNN_STATUS_SUCCESS;
    cudaFuncAttributes fa;
    cudaError_t err = cudaFuncGetAttributes(&fa, (const void *)fn);
    if (err != cudaSuccess)
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncGetAttributes (ctc.loss)");
    err = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)(q->dev.smem_optin - fa.sharedSizeBytes));
    if (err != cudaSuccess)
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncSetAttribute(MaxDynamicSharedMemorySize) (ctc.loss)");
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t ctc_loss(void *queue, const rudnn_ctc_plan_t *p, const rudnn_ctc_operands_t *o)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    size_t need;
    TRY(ctc_workspace(&q->dev, p, &need));
    if (p->batch == 0)
        return RUDNN_STATUS_SUCCESS;
    if (need > 0 && !o->scratch.mem)
        return rdg_error(RUDNN_STATUS_INTERNAL, "ctc: %s: the gradient got no scratch", RUDNN_GPU_BACKEND_NAME);
    CtcArgs a;
    memset(&a, 0, sizeof a);
    a.lp = rdg_at(o->log_probs);
    a.tg = rdg_at(o->targets);
    a.gl = (const float *)rdg_at(o->grad_loss);
    a.loss = (float *)rdg_at(o->loss);
    a.grad = rdg_at(o->grad_log_probs);
    a.table = (const int64_t *)rdg_at(o->table);
    a.alpha = (float *)rdg_at(o->scratch);
    size_t floats = 0;
    if (a.alpha && alpha_floats(p, &floats))
        a.chain = (int32_t *)(a.alpha + floats);
    a.T = p->steps, a.N = p->batch, a.C = p->classes, a.S = p->target_len, a.blank = p->blank;
    a.lp_t = p->lp_stride[0], a.lp_n = p->lp_stride[1], a.lp_c = p->lp_stride[2];
    a.gr_t = p->grad_stride[0], a.gr_n = p->grad_stride[1], a.gr_c = p->grad_stride[2];
    a.tg_n = p->target_stride[0], a.tg_s = p->target_stride[1];
    a.loss_s = p->loss_stride, a.gl_s = p->grad_loss_stride;
    a.zero_inf = p->zero_infinity != 0;
    a.has_grad = p->has_grad != 0 && a.grad != nullptr;
    a.has_gl = p->has_grad_loss != 0 && a.gl != nullptr;
    ctc_kernel_fn fn;
    switch (p->dtype) {
    case RUDNN_F32: fn = kernel_for<RUDNN_F32>(p->target_dtype); break;
    case RUDNN_F16: fn = kernel_for<RUDNN_F16>(p->target_dtype); break;
    default: fn = kernel_for<RUDNN_BF16>(p->target_dtype); break;
    }
    const size_t smem = smem_bytes(p);
    TRY(allow_smem(q, fn, smem));
    const int64_t grid = p->batch < INT32_MAX ? p->batch : INT32_MAX;
    rdg_note_kernel("ctc.loss");
    fn<<<dim3((unsigned)grid), dim3(CTC_THREADS), smem, q->stream>>>(a);
    return rdg_launched("ctc.loss");
}

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
rudnn_ctc_kernels_t make_ctc_table(void)
{
    rudnn_ctc_kernels_t table;
    memset(&table, 0, sizeof table);
    table.workspace = ctc_workspace;
    table.loss = ctc_loss;
    table.struct_size = (uint32_t)sizeof table;
    return table;
}

} // namespace

const rudnn_ctc_kernels_t *rdg_ctc_table(void)
{
    static const rudnn_ctc_kernels_t table = make_ctc_table();
    return &table;
}
