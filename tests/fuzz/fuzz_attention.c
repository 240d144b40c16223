/* libFuzzer target of dense attention (rudnn/attention.h): rudnn_attention, _resolve,
 * _workspace_size and the kernel queries with arbitrary descriptors, options, strategies and
 * workspaces; rudnn_attention_backward and _backward_workspace_size likewise, their values checked.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op, 1 dtype, 2 B (1..2), 3 Hkv (1..2),
 * 4 GQA ratio (1..2), 5 Sq (0..8), 6 Skv (0..9), 7 D, 8 Dv (each one of 1, 8, 16, 33),
 * 9 flags: bit 0 mask, 1 bias, 2 bias in f32 (else q's dtype), 3 lse, 4 mask broadcast over B
 * and H, 5 bias broadcast over H, 6 options NULL, 7 q/k/v/out as [B, S, H, D] views;
 * 10 causal and window (bit 0 causal, bit 1 window_left 2, bit 2 window_right 1). The
 * arguments then take one slot each, in the order of the call's signature (options: scale,
 * softcap, causal, window_left, window_right).
 *
 * The backward ops (header byte 0: 4 backward, 5 backward_workspace_size) take the same header (the
 * lse is required: bit 3 is ignored) and byte 12: bits 0-1 write the first 64 bytes of q, k or dout
 * (1, 2, 3), bits 2-3 those of lse (sin-ish values around 2), mask (a seeded pattern of 0 and 1) or v
 * (1, 2, 3), bits 4-6 the values' seed. Slots: queue, q, k, v, mask, bias, the five options, the
 * strategy (read, unused), then out, lse, dout, dq, dk, dv, args NULL, and the workspace (backward:
 * fz_workspace, intended NULL) or bytes NULL (backward_workspace_size). Beyond fz_check's contract:
 * backward_workspace_size, asked first with the same arguments, fails with the call's status where
 * the call fails for anything but its workspace and succeeds where it succeeds (a rejected query
 * leaves *bytes alone); an accepted call's dq, dk, dv are disjoint from every input and from each
 * other, the bytes between their elements are left alone, and every element matches an FP64
 * reference computed here from what the buffers hold (attention.h's formulas with the given out and
 * lse, whatever values they hold; rows whose lse is -inf give nothing): within the FP32 rounding of
 * the dot products and sums, exp's amplification of the score's absolute error, the cancellation
 * in dout . v - Delta, and the dtype's rounding; NaN exactly where a NaN input reaches a term.
 * Elements a term of which (or a dot product, a score's exponent) reaches FP32's range are left
 * alone. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_values.h"

enum { OP_ATTENTION, OP_RESOLVE, OP_WORKSPACE_SIZE, OP_KERNEL_INFO, OP_BACKWARD, OP_BACKWARD_SIZE, OP_COUNT };

typedef struct shapes {
    fz_spec_t q, k, v, out, mask, bias, lse;
} shapes_t;

static fz_spec_t spec4(rudnn_dtype_t dt, int64_t a, int64_t b, int64_t c, int64_t d)
{
    fz_spec_t s = {dt, 4, {a, b, c, d}};
    return s;
}

static shapes_t intended_shapes(const fz_call_t *c)
{
    static const int64_t head_dims[4] = {1, 8, 16, 33};
    const rudnn_dtype_t dt = fz_float_dtype(fz_header_byte(c, 1));
    const int64_t b = 1 + fz_header_byte(c, 2) % 2, hkv = 1 + fz_header_byte(c, 3) % 2;
    const int64_t hq = hkv * (1 + fz_header_byte(c, 4) % 2), sq = fz_header_byte(c, 5) % 9;
    const int64_t skv = fz_header_byte(c, 6) % 10, d = head_dims[fz_header_byte(c, 7) % 4];
    const int64_t dv = head_dims[fz_header_byte(c, 8) % 4];
    const uint8_t flags = fz_header_byte(c, 9);
    shapes_t s;
    s.q = spec4(dt, b, hq, sq, d);
    s.k = spec4(dt, b, hkv, skv, d);
    s.v = spec4(dt, b, hkv, skv, dv);
    s.out = spec4(dt, b, hq, sq, dv);
    s.mask = flags & 16 ? spec4(RUDNN_BOOL, 1, 1, sq, skv) : spec4(RUDNN_BOOL, b, hq, sq, skv);
    s.bias = spec4(flags & 4 ? RUDNN_F32 : dt, b, flags & 32 ? 1 : hq, sq, skv);
    s.lse.dtype = RUDNN_F32;
    s.lse.rank = 3;
    s.lse.dims[0] = b, s.lse.dims[1] = hq, s.lse.dims[2] = sq;
    return s;
}

/* q/k/v/out described as [B, H, S, D] views of [B, S, H, D] memory (the same bytes). */
static void as_bshd(const rudnn_tensor_t *t)
{
    if (!t || t->rank != 4 || !rudnn_tensor_is_contiguous(t))
        return;
    rudnn_tensor_t *w = (rudnn_tensor_t *)t; /* the harness's own descriptor (fz_call_t.args) */
    const int64_t h = w->dims[1], s = w->dims[2], d = w->dims[3];
    int64_t hd, shd;
    if (__builtin_mul_overflow(h, d, &hd) || __builtin_mul_overflow(s, hd, &shd))
        return; /* dims too large for any stride: leave the contiguous view to be rejected */
    w->strides[3] = 1;
    w->strides[1] = d;
    w->strides[2] = hd;
    w->strides[0] = shd;
}

static const rudnn_attention_options_t *options(fz_call_t *c, rudnn_attention_options_t *o)
{
    const uint8_t window = fz_header_byte(c, 10);
    rudnn_attention_options_init(o);
    o->scale = fz_float(c, 0.0f);
    o->softcap = fz_float(c, 0.0f);
    o->causal = fz_int(c, window & 1);
    o->window_left = fz_i64(c, window & 2 ? 2 : RUDNN_ATTENTION_NO_WINDOW);
    o->window_right = fz_i64(c, window & 4 && !(window & 1) ? 1 : RUDNN_ATTENTION_NO_WINDOW);
    return fz_header_byte(c, 9) & 64 ? NULL : o;
}

/* ---- the backward -------------------------------------------------------------------------------- */

#define BYTES_SENTINEL ((size_t)0x5eed1)
#define BWD_MAX (FZ_BUFFER_BYTES / 2)

typedef struct backward_call {
    const rudnn_tensor_t *q, *k, *v, *mask, *bias, *out, *lse, *dout, *dq, *dk, *dv;
    const rudnn_attention_options_t *options;
} backward_call_t;

/* dq, dk, dv of an accepted backward against the FP64 reference, with each element's error bound. */
static void check_backward(fz_call_t *c, const char *op, const backward_call_t *g)
{
    rudnn_attention_options_t def;
    rudnn_attention_options_init(&def);
    const rudnn_attention_options_t *o = g->options ? g->options : &def;
    const int64_t B = g->q->dims[0], Hq = g->q->dims[1], Sq = g->q->dims[2], D = g->q->dims[3];
    const int64_t Hkv = g->k->dims[1], Skv = g->k->dims[2], Dv = g->v->dims[3];
    if (B * Hq * Sq * D > BWD_MAX || B * Hkv * Skv * D > BWD_MAX || B * Hkv * Skv * Dv > BWD_MAX)
        return;
    static fv_acc_t acc[3][BWD_MAX];
    memset(acc[0], 0, (size_t)(B * Hq * Sq * D) * sizeof(fv_acc_t));
    memset(acc[1], 0, (size_t)(B * Hkv * Skv * D) * sizeof(fv_acc_t));
    memset(acc[2], 0, (size_t)(B * Hkv * Skv * Dv) * sizeof(fv_acc_t));
    const fv_view_t vq = fv_view_of(c, op, g->q), vk = fv_view_of(c, op, g->k), vv = fv_view_of(c, op, g->v);
    const fv_view_t vo = fv_view_of(c, op, g->out), vl = fv_view_of(c, op, g->lse), vd = fv_view_of(c, op, g->dout);
    fv_view_t vm, vb;
    memset(&vm, 0, sizeof vm);
    memset(&vb, 0, sizeof vb);
    if (g->mask)
        vm = fv_view_of(c, op, g->mask);
    if (g->bias)
        vb = fv_view_of(c, op, g->bias);
    const double e32 = 0x1p-23, scale = o->scale != 0.0f ? o->scale : (float)(1.0 / sqrt((double)D));
    const int64_t group = Hq / Hkv, off = Skv - Sq;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t ri[3] = {b, h, i}, hk = h / group;
                const double l = fv_load(&vl, fv_index(&vl, ri, 3));
                if (l == -INFINITY)
                    continue;
                double delta = 0, delta_mag = 0;
                for (int64_t e = 0; e < Dv; e++) {
                    const int64_t at[4] = {b, h, i, e};
                    const double t = (double)fv_load(&vd, fv_index(&vd, at, 4)) * fv_load(&vo, fv_index(&vo, at, 4));
                    delta += t, delta_mag += fabs(t);
                }
                for (int64_t j = 0; j < Skv; j++) {
                    if (o->causal && j > i + off)
                        continue;
                    if (o->window_left >= 0 && j < i + off - o->window_left)
                        continue;
                    if (o->window_right >= 0 && j > i + off + o->window_right)
                        continue;
                    const int64_t mi[4] = {b, h, i, j};
                    if (g->mask && *fv_at(&vm, fv_index(&vm, mi, 4)))
                        continue;
                    double dot = 0, dot_mag = 0, dp = 0, dp_mag = 0;
                    for (int64_t e = 0; e < D; e++) {
                        const int64_t qa[4] = {b, h, i, e}, ka[4] = {b, hk, j, e};
                        const double t =
                            (double)fv_load(&vq, fv_index(&vq, qa, 4)) * fv_load(&vk, fv_index(&vk, ka, 4));
                        dot += t, dot_mag += fabs(t);
                    }
                    for (int64_t e = 0; e < Dv; e++) {
                        const int64_t da[4] = {b, h, i, e}, va[4] = {b, hk, j, e};
                        const double t =
                            (double)fv_load(&vd, fv_index(&vd, da, 4)) * fv_load(&vv, fv_index(&vv, va, 4));
                        dp += t, dp_mag += fabs(t);
                    }
                    double sc = dot * scale, slope = 1, bias = 0;
                    if (o->softcap > 0) {
                        const double t = tanh(sc / o->softcap);
                        sc = o->softcap * t, slope = 1 - t * t;
                    }
                    if (g->bias)
                        bias = fv_load(&vb, fv_index(&vb, mi, 4)), sc += bias;
                    const double p = exp(sc - l);
                    /* a NaN input reaches every term of the pair; any other NaN (inf - inf, 0 inf in
                     * double) or magnitude past FP32's range: the pair's outputs are left alone */
                    const int nan_in = isnan(dot) || isnan(l) || isnan(bias) || isnan(dp) || isnan(delta);
                    const int huge = !(dot_mag * fabs(scale) <= 1e30 && dp_mag + delta_mag <= 1e30 && p <= 1e30 &&
                                       fabs(l) <= 1e30 && fabs(bias) <= 1e30);
                    const double amp = e32 * ((double)(D + 4) * dot_mag * fabs(scale) +
                                              4 * (fabs(sc) + fabs(bias) + fabs(l) + fabs(o->softcap)) + 8);
                    const double p_err = p * (amp + 4 * e32) + 2 * FLT_MIN;
                    const double diff = dp - delta, diff_err = e32 * (double)(Dv + 4) * (dp_mag + delta_mag);
                    const double du = p * diff * slope;
                    const double du_err = (p_err * fabs(diff) + p * diff_err + p * fabs(diff) * 8 * e32) * slope +
                                          fabs(du) * 2 * e32 + (o->softcap > 0 ? p * fabs(diff) * 8 * e32 : 0);
                    for (int64_t e = 0; e < D; e++) {
                        const int64_t qa[4] = {b, h, i, e}, ka[4] = {b, hk, j, e};
                        const double kv = fv_load(&vk, fv_index(&vk, ka, 4)), qv = fv_load(&vq, fv_index(&vq, qa, 4));
                        fv_acc_t *aq = &acc[0][((b * Hq + h) * Sq + i) * D + e];
                        fv_acc_t *ak = &acc[1][((b * Hkv + hk) * Skv + j) * D + e];
                        const double tq = scale * du * kv, tk = scale * du * qv;
                        if (huge || (isnan(tq) && !nan_in))
                            aq->reach = INFINITY;
                        else
                            fv_add_err(aq, tq, fabs(scale * kv) * du_err);
                        if (huge || (isnan(tk) && !nan_in))
                            ak->reach = INFINITY;
                        else
                            fv_add_err(ak, tk, fabs(scale * qv) * du_err);
                    }
                    for (int64_t e = 0; e < Dv; e++) {
                        const int64_t da[4] = {b, h, i, e};
                        const double dv = fv_load(&vd, fv_index(&vd, da, 4)), tv = p * dv;
                        fv_acc_t *av = &acc[2][((b * Hkv + hk) * Skv + j) * Dv + e];
                        if (huge || (isnan(tv) && !(isnan(dv) || isnan(dot) || isnan(l) || isnan(bias))))
                            av->reach = INFINITY;
                        else
                            fv_add_err(av, tv, fabs(dv) * p_err);
                    }
                }
            }
    const rudnn_tensor_t *outs[3] = {g->dq, g->dk, g->dv};
    static const char *const names[3] = {"dq", "dk", "dv"};
    for (int w = 0; w < 3; w++) {
        const fv_view_t vw = fv_view_of(c, op, outs[w]);
        const int64_t d1 = outs[w]->dims[1], d2 = outs[w]->dims[2], d3 = outs[w]->dims[3];
        for (int64_t x = 0; x < outs[w]->dims[0] * d1 * d2 * d3; x++) {
            const int64_t at[4] = {x / (d1 * d2 * d3), x / (d2 * d3) % d1, x / d3 % d2, x % d3};
            const int64_t e = fv_index(&vw, at, 4);
            fv_check_element(op, names[w], vw.dt, e, &acc[w][x], fv_load(&vw, e),
                             "a gradient differs from the formulas of attention.h");
        }
    }
}

/* An intended tensor into buffer k at offset (the harness's own descriptor: fz_call_t.args). */
static void relocate(fz_call_t *c, const rudnn_tensor_t *t, int k, size_t offset)
{
    if (t && offset + rudnn_tensor_bytes(t) <= FZ_BUFFER_BYTES) {
        rudnn_tensor_t *w = (rudnn_tensor_t *)t;
        w->buffer = c->env->buf[k];
        w->offset = offset;
    }
}

static void run_backward(fz_call_t *c, const shapes_t *s, int op, rudnn_queue_t q, const rudnn_tensor_t *tq,
                         const rudnn_tensor_t *tk, const rudnn_tensor_t *tv, const rudnn_tensor_t *mask,
                         const rudnn_tensor_t *bias, const rudnn_attention_options_t *opts)
{
    const char *name = op == OP_BACKWARD ? "attention_backward" : "attention_backward_workspace_size";
    const uint8_t flags = fz_header_byte(c, 9), wb = fz_header_byte(c, 12);
    const int seed = (wb >> 4) & 7;
    backward_call_t g = {tq, tk, tv, mask, bias, NULL, NULL, NULL, NULL, NULL, NULL, opts};
    g.out = fz_tensor(c, &s->out, 0);
    g.lse = fz_tensor(c, &s->lse, 0);
    g.dout = fz_tensor(c, &s->out, 0);
    /* the eleven tensors take the eight buffers round (fz_tensor): intended gradients move off the
     * buffers of q, k and v, to the back half of k's and v's and behind the lse */
    int mutated = c->pos < c->size && c->data[c->pos] >= 0x80;
    g.dq = fz_tensor(c, &s->q, op == OP_BACKWARD);
    if (!mutated)
        relocate(c, g.dq, 6, 2048);
    mutated = c->pos < c->size && c->data[c->pos] >= 0x80;
    g.dk = fz_tensor(c, &s->k, op == OP_BACKWARD);
    if (!mutated)
        relocate(c, g.dk, 1, 8192);
    mutated = c->pos < c->size && c->data[c->pos] >= 0x80;
    g.dv = fz_tensor(c, &s->v, op == OP_BACKWARD);
    if (!mutated)
        relocate(c, g.dv, 2, 8192);
    if (flags & 128) {
        as_bshd(tq), as_bshd(tk), as_bshd(tv), as_bshd(g.out);
        as_bshd(g.dout), as_bshd(g.dq), as_bshd(g.dk), as_bshd(g.dv);
    }
    const int null_args = fz_object_choice(c, 2);
    const rudnn_attention_backward_args_t args = {tq, tk, tv, mask, bias, g.out, g.lse, g.dout, g.dq, g.dk, g.dv};
    const rudnn_attention_backward_args_t *a = null_args ? NULL : &args;
    /* the values: a first write into q, k or dout; a second into lse, mask or v */
    const rudnn_tensor_t *first[4] = {NULL, tq, tk, g.dout};
    if (first[wb & 3])
        fv_write_values(c, first[wb & 3], first[wb & 3]->dtype, seed, 0, 1.5f);
    if ((wb >> 2 & 3) == 1 && g.lse) {
        float v[FZ_WRITE_BYTES / 4];
        for (size_t i = 0; i < FZ_WRITE_BYTES / 4; i++)
            v[i] = i % 9 == 4 ? -INFINITY : 2.0f + 1.5f * (float)sin(0.7 * (seed + 1) + 1.9 * (double)i);
        fz_write_input(c, g.lse, v, sizeof v);
    } else if ((wb >> 2 & 3) == 2 && mask) {
        uint8_t m[FZ_WRITE_BYTES];
        for (size_t i = 0; i < sizeof m; i++)
            m[i] = (uint8_t)(((i * 7 + (size_t)seed * 3) % 5) == 0);
        fz_write_input(c, mask, m, sizeof m);
    } else if ((wb >> 2 & 3) == 3) {
        fv_write_values(c, tv, tv ? tv->dtype : RUDNN_F32, seed, 1, 1.5f);
    }
    if (op == OP_BACKWARD_SIZE) {
        const int null_bytes = fz_object_choice(c, 2);
        size_t bytes = BYTES_SENTINEL;
        const rudnn_status_t st =
            fz_check(c, name, rudnn_attention_backward_workspace_size(q, a, opts, null_bytes ? NULL : &bytes));
        if (st && bytes != BYTES_SENTINEL)
            fz_fail("a rejected workspace_size wrote *bytes", name, st);
        if (!st && bytes == BYTES_SENTINEL)
            fz_fail("an accepted workspace_size gave no size", name, st);
        return;
    }
    size_t need = BYTES_SENTINEL;
    const rudnn_status_t st_size = rudnn_attention_backward_workspace_size(q, a, opts, &need);
    char size_msg[1024];
    snprintf(size_msg, sizeof size_msg, "%s", rudnn_last_error());
    size_t ws_bytes = 0;
    const rudnn_buffer_t ws = fz_workspace(c, st_size ? 0 : need, &ws_bytes);
    const rudnn_status_t st_op = rudnn_attention_backward(q, a, opts, ws, ws_bytes);
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
    const rudnn_tensor_t *outs[3] = {g.dq, g.dk, g.dv}, *ins[8] = {tq, tk, tv, mask, bias, g.out, g.lse, g.dout};
    fv_check_disjoint(name, outs, 3, ins, 8);
    for (int i = 0; i < 3; i++)
        fv_check_gaps(c, name, outs[i]);
    check_backward(c, name, &g);
    fv_reads_reset();
}

/* Every op and dtype once, so that PoCL's first program builds happen before the leak checks. */
void fz_warmup(void)
{
    for (uint8_t op = 0; op < OP_COUNT; op++)
        for (uint8_t dtype = 0; dtype < 3; dtype++)
            for (uint8_t strategy = 0; strategy < 3; strategy++)
                fz_run_header((const uint8_t[FZ_SLOT]){op, dtype, 1, 0, 1, 3, 4, 1, 1, 1 | 2 | 8, 1, strategy, 0x35});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    shapes_t s = intended_shapes(&c);
    const uint8_t flags = fz_header_byte(&c, 9), op = fz_header_byte(&c, 0) % OP_COUNT;
    if (op == OP_KERNEL_INFO) {
        int count = 0;
        const char *name;
        rudnn_attention_strategy_t strategy;
        fz_check(&c, "attention_kernel_count",
                 rudnn_attention_kernel_count(fz_object_choice(&c, 2) ? NULL : c.env->ctx, &count));
        fz_check(&c, "attention_kernel_info", rudnn_attention_kernel_info(c.env->ctx, fz_int(&c, 0), &name, &strategy));
        return 0;
    }
    rudnn_queue_t q = fz_queue(&c);
    const rudnn_tensor_t *tq = fz_tensor(&c, &s.q, 0);
    const rudnn_tensor_t *tk = fz_tensor(&c, &s.k, 0);
    const rudnn_tensor_t *tv = fz_tensor(&c, &s.v, 0);
    const rudnn_tensor_t *mask = fz_optional_tensor(&c, &s.mask, !(flags & 1));
    const rudnn_tensor_t *bias = fz_optional_tensor(&c, &s.bias, !(flags & 2));
    rudnn_attention_options_t o;
    const rudnn_attention_options_t *opts = options(&c, &o);
    rudnn_attention_strategy_t strategy = (rudnn_attention_strategy_t)fz_int(&c, fz_header_byte(&c, 11) % 3);
    if (op == OP_BACKWARD || op == OP_BACKWARD_SIZE) {
        run_backward(&c, &s, op, q, tq, tk, tv, mask, bias, opts);
        return 0;
    }
    switch (op) {
    case OP_ATTENTION: {
        size_t ws_bytes = 0;
        rudnn_buffer_t ws = fz_workspace(&c, 4096, &ws_bytes);
        const rudnn_tensor_t *out = fz_tensor(&c, &s.out, 1);
        const rudnn_tensor_t *lse = fz_optional_output(&c, &s.lse, !(flags & 8));
        if (flags & 128) {
            as_bshd(tq), as_bshd(tk), as_bshd(tv), as_bshd(out);
        }
        fz_check(&c, "attention", rudnn_attention(q, tq, tk, tv, mask, bias, opts, strategy, ws, ws_bytes, out, lse));
        break;
    }
    case OP_RESOLVE: {
        rudnn_attention_choice_t choice;
        fz_check(&c, "attention_resolve", rudnn_attention_resolve(q, tq, tk, tv, mask, bias, opts, strategy, NULL,
                                                                  NULL, fz_object_choice(&c, 2) ? NULL : &choice));
        break;
    }
    default: {
        size_t bytes;
        fz_check(&c, "attention_workspace_size",
                 rudnn_attention_workspace_size(q, tq, tk, tv, mask, bias, opts, strategy, NULL, NULL,
                                                fz_object_choice(&c, 2) ? NULL : &bytes));
        break;
    }
    }
    return 0;
}
