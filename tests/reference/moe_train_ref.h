/* Plain-C FP64 host reference of the MoE training family (include/rudnn/moe_train.h): the router's
 * weights for a fixed selection and their gradient with respect to the logits, the backward of
 * combine and dispatch, and the SwiGLU experts' forward and backward (at the end). Simple loops,
 * every value in double, nothing rounded but the experts' activation (the contract rounds it);
 * rounding the outputs to a dtype and the tolerance of a comparison are the caller's. Indices are
 * int64 values as the device reads them (a U32 index is its unsigned value, an I32 one its signed
 * value).
 *
 * One row of E logits x and k indices i_0 .. i_{k-1}, options (scoring, renormalize, scale c):
 *   p_e = softmax(x)_e (over all E), or sigmoid(x_e);   s_j = p[i_j];   S = sum_j s_j (renormalize) or 1;
 *   w_j = c s_j / S.
 * A repeated index is gathered again: its own s_j, counted again in S. An index outside [0, E)
 * makes the whole row NaN (its k weights, its E gradients).
 *
 * Backward, derived by hand (the numeric suite checks it against a central finite difference of
 * mt_ref_weights_row): with g the incoming grad_weights of the row,
 *   G_e = sum of g_j over the j with i_j = e,   m_e = how many j have i_j = e,   q_j = s_j / S,
 *   D = sum_j g_j q_j (the row's g . w / c),   d_e = p_e (1 - p_e) (sigmoid's derivative),
 *   softmax, not renormalized: dp_a/dx_e = p_a (delta_ae - p_e), so
 *       grad_e = c p_e (G_e - D);
 *   softmax, renormalized: s_j / S = exp(x_{i_j}) / sum_j' exp(x_{i_j'}) (the full softmax's
 *       normalizer cancels), d log(s_j / S)/dx_e = delta_{i_j e} - m_e p_e / S, so
 *       grad_e = c (p_e / S) (G_e - m_e D), exactly 0 where m_e = 0;
 *   sigmoid, not renormalized: grad_e = c d_e G_e, exactly 0 where m_e = 0;
 *   sigmoid, renormalized: dw_j/dx_e = c (d_e / S) (delta_{i_j e} - m_e q_j), so
 *       grad_e = c (d_e / S) (G_e - m_e D), exactly 0 where m_e = 0.
 * Each value also comes with a magnitude: the same expression with every term taken absolute
 * (|g| for g, and the sums of absolute terms), the scale of the rounding error an FP32 evaluation
 * of it makes, cancellation included; tolerances multiply it. */
#ifndef RUDNN_TESTS_MOE_TRAIN_REF_H
#define RUDNN_TESTS_MOE_TRAIN_REF_H

#include <stddef.h>
#include <stdint.h>

#include <rudnn/rudnn.h> /* rudnn_dtype_t */

typedef struct mt_ref_options {
    int sigmoid;     /* 0: softmax over the row, 1: sigmoid of each logit */
    int renormalize; /* divide by the sum of the selected scores */
    double scale;
} mt_ref_options_t;

/* The scores p [E] of one row (softmax max-subtracted, sigmoid in the stable form). */
void mt_ref_scores(const double *x, int64_t experts, int sigmoid, double *p);

/* One row: x [E], idx [k] -> w [k] and (mag non-NULL) mag [k] = |w|. Returns 1 when an index is
 * outside [0, E) (w and mag all NaN), else 0. */
int mt_ref_weights_row(const double *x, int64_t experts, const int64_t *idx, int top_k, const mt_ref_options_t *o,
                       double *w, double *mag);

/* One row of the backward: x [E], idx [k], g [k] -> grad [E] and (mag non-NULL) mag [E]. Returns 1
 * when an index is outside [0, E) (grad and mag all NaN), else 0. */
int mt_ref_backward_row(const double *x, int64_t experts, const int64_t *idx, int top_k, const double *g,
                        const mt_ref_options_t *o, double *grad, double *mag);

/* Whole problems on row-major float arrays (the values the device tensors hold): logits [T, E],
 * idx [T, k], grad_weights [T, k] -> w [T, k] or grad [T, E] (mag: NULL or the same shape).
 * nan_rows (NULL or [T]) gets 1 for the rows with an out-of-range index. Returns 0, or -1 when out of
 * host memory (nothing written then). */
int mt_ref_weights(const float *logits, int64_t tokens, int64_t experts, const int64_t *idx, int top_k,
                   const mt_ref_options_t *o, double *w, double *mag, uint8_t *nan_rows);
int mt_ref_backward(const float *logits, int64_t tokens, int64_t experts, const int64_t *idx, int top_k,
                    const float *grad_weights, const mt_ref_options_t *o, double *grad, double *mag,
                    uint8_t *nan_rows);

/* The backward of combine and dispatch (rudnn/moe.h), on the values the device tensors hold:
 * pos [T, k] the dispatched row of each (token, slot), w [T, k] the routing weights, expert_output and
 * grad_rows [T*k, H], grad_output [T, H].
 *   combine:  ge[pos[t, j], :] = w[t, j] go[t, :];   gw[t, j] = sum_h go[t, h] eo[pos[t, j], h]
 *   dispatch: gi[t, :] = sum_j gr[pos[t, j], :]
 * ge gets no magnitude (a single product: |ge| is its scale); gw_mag [T, k] = sum_h |go eo| and gi_mag
 * [T, H] = sum_j |gr| (NULL: not wanted). A row of ge that no position names is left as it is. Returns
 * 0, or -1 when a position is outside [0, T*k) (nothing written then). */
int mt_ref_combine_backward(const uint32_t *pos, const float *w, const float *expert_output, const float *grad_output,
                            int64_t tokens, int top_k, int64_t hidden, double *ge, double *gw, double *gw_mag);
int mt_ref_dispatch_backward(const uint32_t *pos, const float *grad_rows, int64_t tokens, int top_k, int64_t hidden,
                             double *gi, double *gi_mag);

/* ---- SwiGLU experts: training ------------------------------------------------------------------
 * rudnn_swiglu_experts_forward_dispatched_training and rudnn_swiglu_experts_backward, on the values
 * the device tensors hold: x [R, H] the dispatched rows, offsets [E + 1] (expert e owns rows
 * offsets[e] .. offsets[e + 1]), gate and up [E, I, H], down [E, H, I], dy [R, H] the
 * grad_expert_output. For row r of expert e, in double (s = sigmoid(g)):
 *   g[r, i] = sum_h x[r, h] gate[e, i, h],   u[r, i] = sum_h x[r, h] up[e, i, h],   silu = g s,
 *   a[r, i] = round_dtype(silu u) (an interval, below),   y[r, h] = sum_i a[r, i] down[e, h, i];
 *   da[r, i] = sum_h dy[r, h] down[e, h, i],   dg = da u silu'(g),   du = da silu   (a passed straight),
 *     with silu'(g) = s + g s (1 - s) = s (1 + g (1 - s));
 *   grad_rows[r, h] = sum_i dg[r, i] gate[e, i, h] + du[r, i] up[e, i, h];
 *   grad_gate[e, i, h] = sum over e's rows of dg[r, i] x[r, h], grad_up the same with du;
 *   grad_down[e, h, i] = sum over e's rows of dy[r, h] a[r, i];   an expert without rows: exact zeros.
 *
 * Magnitudes (_mag): an FP32 evaluation of the formula, to first order, is within eps _mag of the
 * value, eps = gamma_N (N the longest chain of roundings that reaches it: the sums' lengths plus a
 * few ulp of each elementwise step); they are the expressions with every term absolute, and where a
 * function of g enters, its largest slope times g_mag (the error g brings along):
 *   g_mag = sum_h |x gate|, u_mag = sum_h |x up|;   silu_mag = 1.1 g_mag + |silu|   (|silu'| <= 1.1);
 *   a_mag = |silu| u_mag + silu_mag |u|;   da_mag = sum_h |dy down|;
 *   phi_abs = s (1 + |g| (1 - s)) (silu' with its terms absolute: it cancels near g = -1.28),
 *   phi_mag = phi_abs + 0.5 g_mag   (|silu''| <= 1/2);
 *   dg_mag = da_mag |u| phi_abs + |da| u_mag phi_abs + |da u| phi_mag;   du_mag = da_mag |silu| + |da| silu_mag;
 *   grad_rows_mag = sum_i dg_mag |gate| + du_mag |up|;   grad_gate_mag = sum_r dg_mag |x| (grad_up: du_mag);
 *   y_mag = sum_i |a down|;   grad_down_mag = sum_r |dy a|.
 * The rounded activation: the FP32 value of silu u lies within a +- eps_a a_mag (a = the exact silu u),
 * and round_dtype is monotone, so the device's a lies in [lo, hi] = [round(a - eps_a a_mag),
 * round(a + eps_a a_mag)], almost always one value. The reference takes a_mid = (lo + hi) / 2 for a and
 * carries a_rad = (hi - lo) / 2 as an absolute allowance: y_rad = sum_i a_rad |down|, grad_down_rad =
 * sum_r |dy| a_rad. F32 rounds to FP32 (lo and hi the FP32 neighbours of a +- eps_a a_mag). */
typedef struct mt_ref_experts {
    int64_t rows, experts, hidden, inter; /* R, E, H, I */
    const float *x;                       /* [R, H] */
    const uint32_t *offsets;              /* [E + 1] */
    const float *gate, *up, *down;        /* [E, I, H], [E, I, H], [E, H, I] */
} mt_ref_experts_t;

/* The forward's values, every array required. */
typedef struct mt_ref_experts_fwd {
    double *g, *g_mag, *u, *u_mag;  /* [R, I] */
    double *a, *a_rad, *a_mag;      /* [R, I]: a = a_mid, and the FP32 silu u's magnitude */
    double *y, *y_mag, *y_rad;      /* [R, H] */
} mt_ref_experts_fwd_t;

/* The backward's values, every array required. */
typedef struct mt_ref_experts_bwd {
    double *da, *da_mag, *dg, *dg_mag, *du, *du_mag;            /* [R, I] */
    double *grad_rows, *grad_rows_mag;                          /* [R, H] */
    double *grad_gate, *grad_gate_mag, *grad_up, *grad_up_mag;  /* [E, I, H] */
    double *grad_down, *grad_down_mag, *grad_down_rad;          /* [E, H, I] */
} mt_ref_experts_bwd_t;

/* Allocates every array of f and b for p's shapes (b NULL: none); frees them (NULL-safe). */
void mt_ref_experts_alloc(const mt_ref_experts_t *p, mt_ref_experts_fwd_t *f, mt_ref_experts_bwd_t *b);
void mt_ref_experts_free(mt_ref_experts_fwd_t *f, mt_ref_experts_bwd_t *b);

/* The forward, a rounded to dtype with the bracket eps_a (above). Returns 0, or -1 when the offsets
 * are not a partition of the R rows (offsets[0] = 0, non-decreasing, offsets[E] = R; nothing written). */
int mt_ref_experts_forward(rudnn_dtype_t dtype, const mt_ref_experts_t *p, double eps_a, mt_ref_experts_fwd_t *f);

/* The backward for dy [R, H], from the forward's g, u, a and magnitudes (f as mt_ref_experts_forward
 * left it). Returns 0, or -1 for bad offsets (nothing written). */
int mt_ref_experts_backward(const mt_ref_experts_t *p, const mt_ref_experts_fwd_t *f, const float *dy,
                            mt_ref_experts_bwd_t *b);

#endif
