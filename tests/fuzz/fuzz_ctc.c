/* libFuzzer target of the CTC loss (rudnn/ctc.h): rudnn_ctc_loss and rudnn_ctc_loss_workspace_size
 * with arbitrary descriptors (any dtype, rank, dims, strides, offsets, another context, aliasing),
 * host length arrays (NULL, edge and raw values), labels (valid, repeated, the blank, out of range),
 * options (blank, zero_infinity), NULL args and workspaces.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op (loss, workspace_size); 1 dtype; 2 T (0..6);
 * 3 N (1..2, 0 when the byte's low nibble is 15); 4 C (1..5); 5 S (0..4); 6 flags: bit 0 I64 targets
 * (else I32), bit 1 the gradient, bit 2 grad_loss given, bit 3 zero_infinity, bit 4 writes the labels
 * into targets, bit 5 writes log_softmax rows into log_probs' first 64 bytes, bit 6 log_probs and
 * grad_log_probs as [T, N, C] views of [N, T, C] memory, bit 7 one label of sample 0 out of range
 * (C + the seed: or the blank, when bit 4 of byte 10 is set); 7 blank (mod C); 8 input lengths (a
 * nibble a sample, mod T + 1); 9 target lengths (a nibble a sample, mod S + 1); 10 the labels' seed
 * (label (seed + 7 n + 3 k) mod C, moved off the blank); 11 the log-probabilities' seed; 14, 15 the
 * buffers' fill (fz_begin).
 *
 * Slots after the header, one each: 0 queue, 1 log_probs, 2 targets, 3 grad_loss (optional input), 4
 * loss, 5 grad_log_probs (optional output), 6 args NULL, 7 input_lengths NULL, 8 target_lengths NULL,
 * 9, 10 input_lengths[0..1], 11, 12 target_lengths[0..1] (fz_i64), 13 options present or NULL, 14
 * blank (fz_i64), 15 zero_infinity (fz_int), 16 the workspace (loss: fz_workspace, intended NULL;
 * workspace_size: bytes NULL).
 *
 * Beyond fz_check's contract (rejected: a 1xx/2xx status naming the op, no byte written; accepted:
 * only the outputs written, the queues' work succeeds): the loss call's workspace_size, asked first
 * with the same arguments, fails with the call's status where the call fails for anything but its
 * workspace and succeeds where it succeeds; a rejected query leaves *bytes alone. An accepted call's
 * outputs are disjoint from every input and from each other (ctc.h), the bytes between a strided
 * output's elements are left alone, and every loss and gradient element matches an FP64 reference
 * computed here from what the buffers hold (the alpha-beta recursions in log space, in double):
 * a bad label: loss NaN, gradient NaN for t < input_lengths[n]; no alignment: +inf (0 with
 * zero_infinity, its gradient 0), gradient NaN; otherwise within the FP32 rounding of the log-space
 * sums (which grows with the steps and the magnitudes of the log-probabilities read) and the dtype's
 * rounding; the gradient 0 for t >= input_lengths[n]. A log-probability the recursions read that is
 * NaN makes the sample's loss NaN in the header's formula only where an alignment passes through it;
 * the kernel's recursions run over every state at every step, as PyTorch's CPU and GPU kernels do, so
 * a NaN at a state no alignment reaches (-inf + NaN) makes the loss NaN all the same: such a sample's
 * loss and gradient for t < input_lengths[n] may be NaN. Samples
 * whose log-probabilities reach FP32's range are left alone. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/ctc.h>

#include "fuzz_common.h"
#include "fuzz_values.h"

enum { OP_LOSS, OP_SIZE, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"ctc_loss", "ctc_loss_workspace_size"};

#define BYTES_SENTINEL ((size_t)0x5eed1)
#define MAX_T 6
#define MAX_N 2
#define MAX_C 5
#define MAX_S 4
/* the host arrays hold as many entries as a loss tensor of the harness can: N <= 4096 */
#define LENGTHS (FZ_BUFFER_BYTES / 4)

typedef struct problem {
    rudnn_dtype_t dt;
    int64_t T, N, C, S, blank;
    int i64, grad, grad_loss, zero_inf, write_labels, write_lp, ntc, bad_label;
    int64_t in_len[MAX_N], tg_len[MAX_N];
    uint8_t label_seed, lp_seed;
} problem_t;

static problem_t decode_problem(const fz_call_t *c)
{
    problem_t p;
    memset(&p, 0, sizeof p);
    p.dt = fz_float_dtype(fz_header_byte(c, 1));
    p.T = fz_header_byte(c, 2) % (MAX_T + 1);
    p.N = fz_small_dim(fz_header_byte(c, 3), MAX_N, 1);
    p.C = 1 + fz_header_byte(c, 4) % MAX_C;
    p.S = fz_header_byte(c, 5) % (MAX_S + 1);
    const uint8_t f = fz_header_byte(c, 6);
    p.i64 = f & 1, p.grad = (f >> 1) & 1, p.grad_loss = (f >> 2) & 1, p.zero_inf = (f >> 3) & 1;
    p.write_labels = (f >> 4) & 1, p.write_lp = (f >> 5) & 1, p.ntc = (f >> 6) & 1, p.bad_label = f >> 7;
    p.blank = fz_header_byte(c, 7) % p.C;
    for (int n = 0; n < MAX_N; n++) {
        p.in_len[n] = ((fz_header_byte(c, 8) >> (4 * n)) & 15) % (p.T + 1);
        p.tg_len[n] = ((fz_header_byte(c, 9) >> (4 * n)) & 15) % (p.S + 1);
    }
    p.label_seed = fz_header_byte(c, 10);
    p.lp_seed = fz_header_byte(c, 11);
    return p;
}

/* [N, T, C] memory as a [T, N, C] view (the same bytes), when t is the intended contiguous one. */
static void as_ntc(const rudnn_tensor_t *t)
{
    if (!t || t->rank != 3 || !rudnn_tensor_is_contiguous(t))
        return;
    const int64_t T = t->dims[0], N = t->dims[1], C = t->dims[2];
    int64_t tc;
    if (T < 0 || N < 0 || C < 0 || __builtin_mul_overflow(T, C ? C : 1, &tc) || tc > ((int64_t)1 << 40))
        return;
    rudnn_tensor_t *w = (rudnn_tensor_t *)t;
    w->strides[0] = C, w->strides[1] = tc, w->strides[2] = 1;
}

/* ---- the reference --------------------------------------------------------------------------------- */

static double lae(double a, double b)
{
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    const double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

typedef struct call {
    rudnn_queue_t q;
    const rudnn_tensor_t *lp, *targets, *grad_loss, *loss, *grad;
    rudnn_ctc_args_t args;
    rudnn_ctc_options_t opts;
    int null_args, has_options;
} call_t;

static void expect(const char *op, const char *what, int64_t e, double want, double tol, int nan_ok, float got,
                   double range)
{
    if (isnan(got) && nan_ok)
        return;
    if (isnan(want)) {
        if (isnan(got))
            return;
    } else if (isinf(want)) {
        if (got == want)
            return;
    } else if (!(fabs(want) + tol <= range) || (!isnan(got) && fabs((double)got - want) <= tol)) {
        return;
    }
    fprintf(stderr, "fuzz: %s element %lld: expected %.9g (within %.3g%s), got %.9g\n", what, (long long)e, want, tol,
            nan_ok ? ", or NaN" : "", (double)got);
    fz_fail("a loss or gradient differs from the formula of ctc.h", op, RUDNN_STATUS_SUCCESS);
}

/* Every loss and gradient element of an accepted call (the lengths: the arrays passed). */
static void check_values(fz_call_t *c, const char *op, const call_t *k)
{
    const rudnn_ctc_options_t *o = k->has_options ? &k->opts : NULL;
    const int64_t blank = o ? o->blank : 0;
    const int zero_inf = o ? o->zero_infinity : 0;
    const int64_t T = k->lp->dims[0], N = k->lp->dims[1], C = k->lp->dims[2];
    if (T > MAX_T || N > MAX_N || C > MAX_C || k->targets->dims[1] > MAX_S)
        return; /* not the harness's sizes: left to the contract */
    const fv_view_t vlp = fv_view_of(c, op, k->lp), vtg = fv_view_of(c, op, k->targets);
    const fv_view_t vl = fv_view_of(c, op, k->loss);
    fv_view_t vg, vgl;
    memset(&vg, 0, sizeof vg);
    memset(&vgl, 0, sizeof vgl);
    if (k->grad)
        vg = fv_view_of(c, op, k->grad);
    if (k->grad && k->grad_loss)
        vgl = fv_view_of(c, op, k->grad_loss);
    const double e32 = 0x1p-23, eps = fv_eps(k->lp->dtype), range = fv_range(k->lp->dtype);
    for (int64_t n = 0; n < N; n++) {
        const int64_t Tn = k->args.input_lengths[n], Sn = k->args.target_lengths[n], L = 2 * Sn + 1;
        int64_t lab[2 * MAX_S + 1];
        int bad = 0;
        for (int64_t s = 0; s < L; s++) {
            const int64_t at[2] = {n, (s - 1) / 2};
            lab[s] = s & 1 ? fv_load_int(&vtg, fv_index(&vtg, at, 2)) : blank;
            bad |= lab[s] < 0 || lab[s] >= C || (s & 1 && lab[s] == blank);
        }
        double lp[MAX_T][MAX_C];
        for (int64_t t = 0; t < T; t++)
            for (int64_t ch = 0; ch < C; ch++) {
                const int64_t at[3] = {t, n, ch};
                lp[t][ch] = fv_load(&vlp, fv_index(&vlp, at, 3));
            }
        double g = 1.0;
        if (vgl.raw) {
            const int64_t at[1] = {n};
            g = fv_load(&vgl, fv_index(&vgl, at, 1));
        }
        /* the recursions (bad: not run) */
        double alpha[MAX_T][2 * MAX_S + 1], beta[MAX_T][2 * MAX_S + 1], nll = NAN, A = 0;
        int loose = 0;
        if (!bad) {
            for (int64_t t = 0; t < Tn; t++) {
                double m = 0;
                for (int64_t s = 0; s < L; s++) {
                    loose |= isnan(lp[t][lab[s]]);
                    m = fabs(lp[t][lab[s]]) > m ? fabs(lp[t][lab[s]]) : m;
                }
                A += m;
            }
            for (int64_t t = 0; t < Tn; t++)
                for (int64_t s = 0; s < L; s++)
                    alpha[t][s] = beta[t][s] = -INFINITY;
            if (Tn == 0) {
                nll = Sn == 0 ? 0.0 : INFINITY;
            } else {
                for (int64_t s = 0; s < L && s < 2; s++)
                    alpha[0][s] = lp[0][lab[s]];
                for (int64_t t = 1; t < Tn; t++)
                    for (int64_t s = 0; s < L; s++) {
                        double a = alpha[t - 1][s];
                        if (s >= 1)
                            a = lae(a, alpha[t - 1][s - 1]);
                        if ((s & 1) && s >= 2 && lab[s] != lab[s - 2])
                            a = lae(a, alpha[t - 1][s - 2]);
                        alpha[t][s] = a + lp[t][lab[s]];
                    }
                nll = -(L > 1 ? lae(alpha[Tn - 1][L - 1], alpha[Tn - 1][L - 2]) : alpha[Tn - 1][L - 1]);
                for (int64_t t = Tn - 1; t >= 0; t--)
                    for (int64_t s = 0; s < L; s++) {
                        double b = t == Tn - 1 ? (s >= L - 2 ? 0.0 : -INFINITY) : beta[t + 1][s];
                        if (t < Tn - 1 && s + 1 < L)
                            b = lae(b, beta[t + 1][s + 1]);
                        if (t < Tn - 1 && (s & 1) && s + 2 < L && lab[s] != lab[s + 2])
                            b = lae(b, beta[t + 1][s + 2]);
                        beta[t][s] = b + lp[t][lab[s]];
                    }
            }
        }
        const int checkable = !(A > 1e30);
        const int zero = !bad && zero_inf && isinf(nll);
        const double tol_loss = 8 * e32 * (double)(Tn + 1) * (A + (double)Tn + 1);
        {
            const int64_t at[1] = {n};
            const int64_t e = fv_index(&vl, at, 1);
            const float got = fv_load(&vl, e);
            if (checkable || bad)
                expect(op, "loss", e, zero ? 0.0 : nll, tol_loss, loose, got, 1e37);
        }
        if (!k->grad)
            continue;
        for (int64_t t = 0; t < T; t++)
            for (int64_t ch = 0; ch < C; ch++) {
                const int64_t at[3] = {t, n, ch};
                const int64_t e = fv_index(&vg, at, 3);
                const float got = fv_load(&vg, e);
                if (t >= Tn || zero) {
                    expect(op, "grad_log_probs", e, 0.0, 0.0, 0, got, range);
                    continue;
                }
                if (bad || isinf(nll) || isnan(g)) {
                    expect(op, "grad_log_probs", e, NAN, 0.0, 0, got, range);
                    continue;
                }
                const double l = lp[t][ch];
                double lg = -INFINITY;
                for (int64_t s = 0; s < L; s++)
                    if (lab[s] == ch)
                        lg = lae(lg, alpha[t][s] + beta[t][s]);
                const double ex = exp(l), gam = exp(lg + nll - l), want = g * (ex - gam);
                if (!checkable || !(fabs(g) * (ex + 1) <= range))
                    continue;
                const double err_exp = 3 * tol_loss + 8 * e32 * (fabs(l) + fabs(nll) + 2 * A);
                /* FLT_MIN: a denormal result (tiny grad_loss) rounds, or flushes, in FP32 */
                const double tol = fabs(g) * (8 * e32 * ex + gam * expm1(err_exp) + 2 * e32 * (ex + gam)) + FLT_MIN +
                                   eps * fabs(want) + (k->lp->dtype == RUDNN_F16 ? 0x1p-24 : 0.0);
                expect(op, "grad_log_probs", e, want, tol, loose, got, range);
            }
    }
}

/* ---- the calls ----------------------------------------------------------------------------------------- */

static void build_call(fz_call_t *c, const problem_t *p, call_t *k)
{
    static int64_t in_len[LENGTHS], tg_len[LENGTHS];
    memset(k, 0, sizeof *k);
    fz_spec_t slp, stg, sn, sgrad;
    memset(&slp, 0, sizeof slp);
    slp.dtype = p->dt, slp.rank = 3, slp.dims[0] = p->T, slp.dims[1] = p->N, slp.dims[2] = p->C;
    stg = slp;
    stg.dtype = p->i64 ? RUDNN_I64 : RUDNN_I32, stg.rank = 2, stg.dims[0] = p->N, stg.dims[1] = p->S;
    sn = slp;
    sn.dtype = RUDNN_F32, sn.rank = 1, sn.dims[0] = p->N;
    sgrad = slp;
    k->q = fz_queue(c);
    k->lp = fz_tensor(c, &slp, 0);
    k->targets = fz_tensor(c, &stg, 0);
    k->grad_loss = fz_optional_tensor(c, &sn, !p->grad_loss);
    k->loss = fz_tensor(c, &sn, 1);
    k->grad = fz_optional_output(c, &sgrad, !p->grad);
    if (p->ntc)
        as_ntc(k->lp), as_ntc(k->grad);
    k->null_args = fz_object_choice(c, 2);
    const int null_in = fz_object_choice(c, 2), null_tg = fz_object_choice(c, 2);
    for (int n = 0; n < LENGTHS; n++)
        in_len[n] = tg_len[n] = 0;
    for (int n = 0; n < MAX_N; n++)
        in_len[n] = fz_i64(c, p->in_len[n]);
    for (int n = 0; n < MAX_N; n++)
        tg_len[n] = fz_i64(c, p->tg_len[n]);
    k->has_options = fz_object_choice(c, 2) == 0;
    rudnn_ctc_options_init(&k->opts);
    k->opts.blank = fz_i64(c, p->blank);
    k->opts.zero_infinity = fz_int(c, p->zero_inf);
    k->args.log_probs = k->lp, k->args.targets = k->targets, k->args.grad_loss = k->grad_loss;
    k->args.loss = k->loss, k->args.grad_log_probs = k->grad;
    k->args.input_lengths = null_in ? NULL : in_len;
    k->args.target_lengths = null_tg ? NULL : tg_len;
    /* the values: the labels (valid unless bit 7), then log_softmax rows */
    if (p->write_labels && p->S > 0) {
        int64_t lab[MAX_N * MAX_S];
        for (int64_t n = 0; n < p->N; n++)
            for (int64_t s = 0; s < p->S; s++) {
                int64_t l = (p->label_seed + 7 * n + 3 * s) % p->C;
                if (l == p->blank)
                    l = (l + 1) % p->C;
                lab[n * p->S + s] = l;
            }
        if (p->bad_label)
            lab[(p->label_seed >> 5) % p->S] = p->label_seed & 16 ? p->blank : p->C + (p->label_seed & 7);
        int32_t lab32[MAX_N * MAX_S];
        for (int i = 0; i < MAX_N * MAX_S; i++)
            lab32[i] = (int32_t)lab[i];
        fz_write_input(c, k->targets, p->i64 ? (const void *)lab : lab32, (size_t)(p->N * p->S) * (p->i64 ? 8 : 4));
    }
    if (p->write_lp && k->lp && p->C > 0) {
        float v[FZ_WRITE_BYTES / 2];
        uint8_t raw[FZ_WRITE_BYTES];
        const size_t es = rudnn_dtype_size(p->dt), n = sizeof raw / es;
        for (size_t r = 0; r * (size_t)p->C < n; r++) {
            double a[MAX_C], m = -INFINITY, z = 0;
            for (int64_t ch = 0; ch < p->C; ch++)
                a[ch] = 2.0 * sin(0.9 * (p->lp_seed + 1) + 1.3 * (double)(r * (size_t)p->C + (size_t)ch)),
                m = a[ch] > m ? a[ch] : m;
            for (int64_t ch = 0; ch < p->C; ch++)
                z += exp(a[ch] - m);
            for (int64_t ch = 0; ch < p->C && r * (size_t)p->C + (size_t)ch < n; ch++)
                v[r * (size_t)p->C + (size_t)ch] = (float)(a[ch] - m - log(z));
        }
        rudnn_convert_from_f32(p->dt, v, raw, n);
        fz_write_input(c, k->lp, raw, n * es);
    }
}

static void run_ctc(fz_call_t *c, const problem_t *p, int op)
{
    const char *name = op_names[op];
    call_t k;
    build_call(c, p, &k);
    const rudnn_ctc_args_t *a = k.null_args ? NULL : &k.args;
    const rudnn_ctc_options_t *o = k.has_options ? &k.opts : NULL;
    if (op == OP_SIZE) {
        const int null_bytes = fz_object_choice(c, 2);
        size_t bytes = BYTES_SENTINEL;
        const rudnn_status_t st =
            fz_check(c, name, rudnn_ctc_loss_workspace_size(k.q, a, o, null_bytes ? NULL : &bytes));
        if (st && bytes != BYTES_SENTINEL)
            fz_fail("a rejected workspace_size wrote *bytes", name, st);
        if (!st && bytes == BYTES_SENTINEL)
            fz_fail("an accepted workspace_size gave no size", name, st);
        return;
    }
    size_t need = BYTES_SENTINEL;
    const rudnn_status_t st_size = rudnn_ctc_loss_workspace_size(k.q, a, o, &need);
    char size_msg[1024];
    snprintf(size_msg, sizeof size_msg, "%s", rudnn_last_error());
    size_t ws_bytes = 0;
    const rudnn_buffer_t ws = fz_workspace(c, st_size ? 0 : need, &ws_bytes);
    const rudnn_status_t st_op = rudnn_ctc_loss(k.q, a, o, ws, ws_bytes);
    char op_msg[1024];
    snprintf(op_msg, sizeof op_msg, "%s", rudnn_last_error());
    const rudnn_status_t st = fz_check(c, name, st_op);
    if (st) {
        if (!strstr(op_msg, "workspace") && st_size != st) {
            fprintf(stderr, "fuzz: the op: %s \"%s\"; workspace_size: %s \"%s\"\n", rudnn_status_string(st), op_msg,
                    rudnn_status_string(st_size), size_msg);
            fz_fail("workspace_size does not fail as the call does", name, st);
        }
        return;
    }
    if (st_size) {
        fprintf(stderr, "fuzz: workspace_size: %s \"%s\"\n", rudnn_status_string(st_size), size_msg);
        fz_fail("workspace_size rejected what the call accepted", name, st);
    }
    const rudnn_tensor_t *outs[2] = {k.loss, k.grad}, *ins[3] = {k.lp, k.targets, k.grad_loss};
    fv_check_disjoint(name, outs, 2, ins, 3);
    fv_check_gaps(c, name, k.loss);
    fv_check_gaps(c, name, k.grad);
    if (k.lp->dims[1] > 0)
        check_values(c, name, &k);
    fv_reads_reset();
}

/* Every dtype and target dtype, with and without the gradient, so that the programs are built before
 * the leak checks. */
void fz_warmup(void)
{
    for (uint8_t dt = 0; dt < 3; dt++)
        for (uint8_t f = 0; f < 4; f++)
            fz_run_header((const uint8_t[FZ_SLOT]){0, dt, 4, 1, 2, 2, (uint8_t)(f | 4 | 16 | 32), 0, 0x44, 0x22, 1});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    const problem_t p = decode_problem(&c);
    run_ctc(&c, &p, fz_header_byte(&c, 0) % OP_COUNT);
    return 0;
}
