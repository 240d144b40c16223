/* CTC loss (the guide's feature list: CTC Verlust; DESIGN.md 8): the per-sample negative
 * log-likelihood of Connectionist Temporal Classification, and its gradient, as PyTorch's
 * F.ctc_loss with reduction 'none' computes them.
 *
 *   log_probs [T, N, C]  log-probabilities over C classes (log_softmax output), F32, F16 or BF16
 *   targets   [N, S]     I32 or I64 labels, sample n's first target_lengths[n] entries (the rest
 *                        is padding, never read)
 *   input_lengths[n] in 0..T, target_lengths[n] in 0..S: host arrays of N int64
 *   loss      [N] F32    loss[n] = -log sum over the alignments of sample n's target to its first
 *                        input_lengths[n] steps (blanks and repeats collapse, as CTC defines) of
 *                        prod_t exp(log_probs[t, n, a_t]); +inf where no alignment exists (an input
 *                        too short for the target and its repeats), unless zero_infinity
 * A label outside 0..C-1 or equal to blank makes that sample's loss (and gradient) NaN, without
 * reading out of bounds. A NaN in log_probs within a sample's steps makes its loss NaN even where no
 * alignment passes through it (the recursion adds every state's entry, as PyTorch's does). Sums run
 * in FP32 in log space.
 *
 * Gradient (grad_log_probs given, [T, N, C] in log_probs' dtype), as PyTorch's ctc_loss backward:
 *   grad[t, n, c] = grad_loss[n] (exp(log_probs[t, n, c]) - gamma[t, n, c])   for t < input_lengths[n]
 *   grad[t, n, c] = 0                                                       for t >= input_lengths[n]
 * gamma being the posterior of class c at step t (the alignments through (t, c) over all of them).
 * This is the gradient of loss with respect to the activations whose log_softmax log_probs is
 * (what autograd then passes through log_softmax unchanged, its entries summing to 0 over c), not
 * the partial derivative with respect to log_probs taken as free inputs (-gamma). grad_loss: F32
 * [N], or NULL for ones. Where the loss is +inf the gradient is NaN for t < input_lengths[n] (as
 * PyTorch's: gamma's formula divides by the zero likelihood);
 * zero_infinity: an infinite loss is written as 0 and its gradient as 0.
 *
 * Layout: log_probs and grad_log_probs any views inside their buffers; targets, loss and grad_loss
 * too. Outputs may not overlap any input or each other. N = 0 writes nothing; T = 0 gives loss 0 for
 * an empty target and +inf (or 0) otherwise.
 * Two-phase: rudnn_ctc_loss_workspace_size, then the call (workspace NULL: the queue's pool). The
 * lengths are copied to the device with each call (a blocking copy).
 * Bad arguments return a status, set rudnn_last_error() (op, argument, rule) and write nothing. */
#ifndef RUDNN_CTC_H
#define RUDNN_CTC_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* S (the targets' padded length) at most: the alignment states 2 S + 1 live in a work-group's
 * local memory. */
#define RUDNN_CTC_MAX_TARGET 4096

typedef struct rudnn_ctc_options {
    int64_t blank;     /* 0..C-1; PyTorch's default 0 */
    int zero_infinity; /* 0 or 1 */
} rudnn_ctc_options_t;

/* blank 0, zero_infinity 0. NULL options mean these. */
RUDNN_API void rudnn_ctc_options_init(rudnn_ctc_options_t *options);

typedef struct rudnn_ctc_args {
    const rudnn_tensor_t *log_probs;      /* [T, N, C] */
    const rudnn_tensor_t *targets;        /* [N, S] I32 or I64 */
    const int64_t *input_lengths;         /* host, N entries */
    const int64_t *target_lengths;        /* host, N entries */
    const rudnn_tensor_t *grad_loss;      /* [N] F32, or NULL (ones); read only with grad_log_probs */
    const rudnn_tensor_t *loss;           /* [N] F32, written */
    const rudnn_tensor_t *grad_log_probs; /* [T, N, C] in log_probs' dtype, written; NULL: loss only */
} rudnn_ctc_args_t;

RUDNN_API rudnn_status_t rudnn_ctc_loss_workspace_size(rudnn_queue_t queue, const rudnn_ctc_args_t *args,
                                                       const rudnn_ctc_options_t *options, size_t *bytes);
RUDNN_API rudnn_status_t rudnn_ctc_loss(rudnn_queue_t queue, const rudnn_ctc_args_t *args,
                                        const rudnn_ctc_options_t *options, rudnn_buffer_t workspace,
                                        size_t workspace_bytes);

#ifdef __cplusplus
}
#endif
#endif
