/* CTC loss (backends/hal/ctc.h; the rules in include/rudnn/ctc.h): log-space sums in FP32,
 * log_probs and its gradient of the program's RUDNN_DTYPE (common.cl's LOAD_A / STORE_A), targets
 * int or long (-DCTC_TARGET_I64).
 *   rudnn_ctc_loss  a work-group per sample. The alignment states s = 0 .. 2 S_n (even: blank,
 *                   odd: label (s - 1) / 2) are dealt round the work-items; alpha walks t forward
 *                   in two local rows (with the gradient, every row also goes to the scratch), then
 *                   beta walks t backward in two local rows and each step's gradient is written: first
 *                   exp(lp) g for every class, then, after a barrier, the blank's and each label
 *                   class's entries with their posterior (a label's class summed over its repeats in
 *                   the target by the work-item of its first occurrence). No atomics. */

#ifdef CTC_TARGET_I64
#define target_t long
#else
#define target_t int
#endif

float lae(float a, float b)
{
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    const float m = fmax(a, b);
    return m + log1p(exp(-fabs(a - b)));
}

typedef struct ctc_sample {
    __global const act_t *lp;  /* sample n's log_probs at t = 0, c = 0 */
    long lt, lc;               /* its strides along t and c */
    __global const target_t *tg;
    long ts;                   /* targets' stride along S */
    long blank;
} ctc_sample_t;

long label_of(const ctc_sample_t *m, long s) { return (s & 1) ? (long)m->tg[((s - 1) / 2) * m->ts] : m->blank; }

float lp_at(const ctc_sample_t *m, long t, long c) { return LOAD_A(m->lp, t * m->lt + c * m->lc); }

/* alpha (forward) or beta (backward) at state s from the previous row: the state itself, its
 * neighbour, and the one two away when the labels between differ and are not blanks. */
float step_from(__local const float *prev, const ctc_sample_t *m, long s, long L, int backward)
{
    const long s1 = backward ? s + 1 : s - 1, s2 = backward ? s + 2 : s - 2;
    float a = prev[s];
    if (s1 >= 0 && s1 < L)
        a = lae(a, prev[s1]);
    if ((s & 1) && s2 >= 0 && s2 < L && label_of(m, s) != label_of(m, s2))
        a = lae(a, prev[s2]);
    return a;
}

__kernel void rudnn_ctc_loss(__global const act_t *lp, ulong lpo, __global const target_t *tg, ulong tgo,
                             __global const float *gl, ulong glo, __global float *loss, ulong lso,
                             __global act_t *grad, ulong gro, __global const long *table, ulong tbo,
                             __global float *scratch, ulong sco, ulong group0, long T, long N, long C, long S,
                             long blank, int zero_inf, int has_grad, int has_gl, long4 lps, long4 grs, long2 tgs,
                             long lss, long gls, __local float *rows, volatile __local int *flag)
{
    lp += lpo, tg += tgo, gl += glo, loss += lso, grad += gro, table += tbo, scratch += sco;
    const long n = (long)(group0 + get_group_id(0));
    const int lid = (int)get_local_id(0), nl = (int)get_local_size(0);
    const long Tn = table[n], Sn = table[N + n], L = 2 * Sn + 1, Lmax = 2 * S + 1;
    ctc_sample_t m;
    m.lp = lp + n * lps.s1;
    m.lt = lps.s0, m.lc = lps.s2;
    m.tg = tg + n * tgs.s0;
    m.ts = tgs.s1;
    m.blank = blank;
    __global float *alpha_n = scratch + n * T * Lmax;
    /* labels outside 0..C-1 or equal to blank: NaN, nothing read past log_probs */
    if (lid == 0)
        *flag = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long k = lid; k < Sn; k += nl) {
        const long c = (long)m.tg[k * m.ts];
        if (c < 0 || c >= C || c == blank)
            atomic_or(flag, 1);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int bad = *flag;
    const float g = has_gl ? gl[n * gls] : 1.0f;
    __local float *prev = rows, *cur = rows + Lmax;
    float nll;
    if (bad) {
        nll = NAN;
    } else if (Tn == 0) {
        nll = Sn == 0 ? 0.0f : INFINITY;
    } else {
        /* alpha */
        for (long s = lid; s < L; s += nl) {
            prev[s] = s < 2 ? lp_at(&m, 0, label_of(&m, s)) : -INFINITY;
            if (has_grad)
                alpha_n[s] = prev[s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (long t = 1; t < Tn; t++) {
            for (long s = lid; s < L; s += nl) {
                cur[s] = step_from(prev, &m, s, L, 0) + lp_at(&m, t, label_of(&m, s));
                if (has_grad)
                    alpha_n[t * Lmax + s] = cur[s];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            __local float *x = prev;
            prev = cur, cur = x;
        }
        nll = -(L > 1 ? lae(prev[L - 1], prev[L - 2]) : prev[L - 1]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int zero = zero_inf && isinf(nll);
    if (lid == 0)
        loss[n * lss] = zero ? 0.0f : nll;
    if (!has_grad)
        return;
    /* steps past the input, and whole samples without a usable loss */
    for (long t = 0; t < T; t++) {
        const int none = t >= Tn || zero;
        const int nan = !none && bad;
        if (none || nan)
            for (long c = lid; c < C; c += nl)
                STORE_A(grad, t * grs.s0 + n * grs.s1 + c * grs.s2, nan ? NAN : 0.0f);
    }
    if (bad || zero || Tn == 0)
        return;
    /* beta, and each step's gradient */
    for (long t = Tn - 1; t >= 0; t--) {
        for (long s = lid; s < L; s += nl) {
            const float b = t == Tn - 1 ? (s >= L - 2 ? 0.0f : -INFINITY) : step_from(prev, &m, s, L, 1);
            cur[s] = b + lp_at(&m, t, label_of(&m, s));
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        __local float *x = prev;
        prev = cur, cur = x; /* prev: beta at t */
        __global act_t *gt = grad + t * grs.s0 + n * grs.s1;
        for (long c = lid; c < C; c += nl) { /* no alignment through c: gamma 0 (NaN where the loss is +inf) */
            const float l = lp_at(&m, t, c);
            STORE_A(gt, c * grs.s2, (exp(l) - exp(-INFINITY + nll - l)) * g);
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
        __global const float *at = alpha_n + t * Lmax;
        /* item 0: the blank (even states); items over the target positions k: a class's first
         * occurrence sums its repeats */
        for (long k = lid - 1; k < Sn; k += nl) {
            long c;
            float lcab = -INFINITY;
            if (k < 0) {
                c = blank;
                for (long s = 0; s < L; s += 2)
                    lcab = lae(lcab, at[s] + prev[s]);
            } else {
                c = label_of(&m, 2 * k + 1);
                int first = 1;
                for (long j = 0; j < k && first; j++)
                    first = label_of(&m, 2 * j + 1) != c;
                if (!first)
                    continue;
                for (long j = k; j < Sn; j++)
                    if (label_of(&m, 2 * j + 1) == c)
                        lcab = lae(lcab, at[2 * j + 1] + prev[2 * j + 1]);
            }
            const float l = lp_at(&m, t, c);
            STORE_A(gt, c * grs.s2, (exp(l) - exp(lcab + nll - l)) * g);
        }
        barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    }
}
