/* Plain-C FP64 host reference of the MoE training family (include/rudnn/moe_train.h): the router's
 * weights for a fixed selection and their gradient with respect to the logits, and the backward of
 * combine and dispatch. Simple loops, every value in double, nothing rounded; rounding to a dtype and
 * the tolerance of a comparison are the caller's. Indices are int64 values as the device reads them
 * (a U32 index is its unsigned value, an I32 one its signed value).
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

#endif
