/* libFuzzer target of dense attention (rudnn/attention.h): rudnn_attention, _resolve,
 * _workspace_size and the kernel queries with arbitrary descriptors, options, strategies and
 * workspaces.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op, 1 dtype, 2 B (1..2), 3 Hkv (1..2),
 * 4 GQA ratio (1..2), 5 Sq (0..8), 6 Skv (0..9), 7 D, 8 Dv (each one of 1, 8, 16, 33),
 * 9 flags: bit 0 mask, 1 bias, 2 bias in f32 (else q's dtype), 3 lse, 4 mask broadcast over B
 * and H, 5 bias broadcast over H, 6 options NULL, 7 q/k/v/out as [B, S, H, D] views;
 * 10 causal and window (bit 0 causal, bit 1 window_left 2, bit 2 window_right 1). The
 * arguments then take one slot each, in the order of the call's signature (options: scale,
 * softcap, causal, window_left, window_right). */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_common.h"

enum { OP_ATTENTION, OP_RESOLVE, OP_WORKSPACE_SIZE, OP_KERNEL_INFO, OP_COUNT };

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

/* Every op and dtype once, so that PoCL's first program builds happen before the leak checks. */
void fz_warmup(void)
{
    for (uint8_t op = 0; op < OP_COUNT; op++)
        for (uint8_t dtype = 0; dtype < 3; dtype++)
            for (uint8_t strategy = 0; strategy < 3; strategy++)
                fz_run_header((const uint8_t[FZ_SLOT]){op, dtype, 1, 0, 1, 3, 4, 1, 1, 1 | 2 | 8, 1, strategy});
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
