/* Plain-C FP64 host reference of the CTC loss and its gradient (include/rudnn/ctc.h). Written to be
 * obviously correct: the textbook recursions over the extended target (a blank before, between and
 * after the labels), every sum in double in log space, nothing rounded. Inputs are the values the
 * device tensors hold, already decoded to double; rounding and tolerances are the caller's.
 *
 * One sample, log-probabilities lp [T][C] (row-major: lp[t * C + c]), labels target[0 .. L-1]:
 *   extended labels l'_s, s = 0 .. 2 L: blank at even s, target[(s - 1) / 2] at odd s;
 *   alpha_0(0) = lp[0][blank], alpha_0(1) = lp[0][target[0]] (L > 0), else -inf;
 *   alpha_t(s) = lp[t][l'_s] + lse(alpha_{t-1}(s), alpha_{t-1}(s - 1), alpha_{t-1}(s - 2) where s
 *                is odd and l'_s != l'_{s-2});
 *   loss = -lse(alpha_{T-1}(2 L), alpha_{T-1}(2 L - 1));  T = 0: 0 for L = 0, +inf otherwise;
 *   beta the same recursion run backwards (beta_{T-1}(2 L) = lp[T-1][blank], beta_{T-1}(2 L - 1) =
 *   lp[T-1][target[L-1]]), both including lp at their own step, so that
 *   gamma_t(c) = sum over s with l'_s = c of exp(alpha_t(s) + beta_t(s) - lp[t][c] + loss),
 * the posterior of class c at step t, and grad[t][c] = exp(lp[t][c]) - gamma_t(c): the gradient of
 * the loss w.r.t. the activations whose log_softmax lp is (the header's formula, grad_loss 1).
 * A label outside 0..C-1 or equal to blank: loss NaN, grad NaN. An impossible alignment (loss +inf):
 * grad NaN (the posterior is 0 / 0, as PyTorch computes it); zero_infinity is the batch helper's.
 *
 * ctc_ref_brute computes the same by enumerating all C^T paths (collapse repeats, drop blanks,
 * compare with the target): independent of the recursions, for tiny T and C. */
#ifndef RUDNN_TESTS_CTC_REF_H
#define RUDNN_TESTS_CTC_REF_H

#include <stdint.h>

/* One sample by the alpha-beta recursions. T >= 0, C >= 1, L >= 0. grad: NULL or [T][C]. Returns
 * the loss. Allocates O(T (2 L + 1)) doubles: returns NaN and writes nothing to grad (*oom = 1
 * where oom is given) when out of host memory. */
double ctc_ref_sample(int64_t T, int64_t C, const double *lp, int64_t L, const int64_t *target, int64_t blank,
                      double *grad, int *oom);

/* One sample by enumerating the C^T paths (T <= 12, C^T <= 2^24: returns NaN beyond). grad as
 * ctc_ref_sample: exp(lp) - gamma, gamma the matching paths' probability through (t, c) over all. */
double ctc_ref_brute(int64_t T, int64_t C, const double *lp, int64_t L, const int64_t *target, int64_t blank,
                     double *grad);

/* A whole call as include/rudnn/ctc.h defines it. lp [T][N][C] (contiguous), targets [N][S] (only
 * the first target_lengths[n] of row n read), input_lengths / target_lengths [N], grad_loss [N] or
 * NULL (ones). Writes loss [N] and, when grad is not NULL, grad [T][N][C]:
 *   grad[t][n][c] = grad_loss[n] (exp(lp) - gamma) for t < input_lengths[n], 0 for later t;
 *   zero_infinity: an infinite loss is 0, its gradient 0 (every t). NaN (bad label) stays NaN.
 * Returns 0, or -1 when out of host memory. */
int ctc_ref_batch(int64_t T, int64_t N, int64_t C, int64_t S, const double *lp, const int64_t *targets,
                  const int64_t *input_lengths, const int64_t *target_lengths, int64_t blank, int zero_infinity,
                  const double *grad_loss, double *loss, double *grad);

/* log_softmax of a row of n activations, in double. */
void ctc_ref_log_softmax(int64_t n, const double *a, double *out);

#endif
