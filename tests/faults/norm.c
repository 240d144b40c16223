/* Fault cases of the normalization family: the four ops on a small F32 tensor. Once a
 * context has built their programs they allocate nothing (the warm walk counts 0). */
#include <stdio.h>

#include "fault_case.h"

#define ROWS 4
#define COLS 64

typedef struct norm_state {
    fault_env_t env;
    rudnn_tensor_t x, residual, gamma, beta;
    rudnn_tensor_t y, rstd, x_out; /* outputs */
} norm_state_t;

static rudnn_status_t setup(void *s, const fault_env_t *env)
{
    norm_state_t *n = s;
    n->env = *env;
    const int64_t dims[2] = {ROWS, COLS}, affine[1] = {COLS}, rows[1] = {ROWS};
    rudnn_status_t st = fault_f32_tensor(env, 2, dims, 1, &n->x);
    if (!st)
        st = fault_f32_tensor(env, 2, dims, 2, &n->residual);
    if (!st)
        st = fault_f32_tensor(env, 1, affine, 3, &n->gamma);
    if (!st)
        st = fault_f32_tensor(env, 1, affine, 4, &n->beta);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 2, dims, &n->y);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 1, rows, &n->rstd);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 2, dims, &n->x_out);
    return st;
}

static rudnn_status_t prepare(void *s)
{
    norm_state_t *n = s;
    rudnn_status_t st = fault_fill_sentinel(&n->env, &n->y);
    if (!st)
        st = fault_fill_sentinel(&n->env, &n->rstd);
    if (!st)
        st = fault_fill_sentinel(&n->env, &n->x_out);
    return st;
}

static int unchanged(void *s, char *why, size_t cap)
{
    norm_state_t *n = s;
    return fault_is_sentinel(&n->env, &n->y, "y", why, cap) && fault_is_sentinel(&n->env, &n->rstd, "rstd", why, cap) &&
           fault_is_sentinel(&n->env, &n->x_out, "x", why, cap);
}

static rudnn_status_t result(void *s, uint8_t **bytes, size_t *size)
{
    norm_state_t *n = s;
    *bytes = NULL;
    *size = 0;
    rudnn_status_t st = fault_append_tensor(&n->env, &n->y, bytes, size);
    if (!st)
        st = fault_append_tensor(&n->env, &n->rstd, bytes, size);
    if (!st)
        st = fault_append_tensor(&n->env, &n->x_out, bytes, size);
    return st;
}

static void undo(void *s) { (void)s; }

static void teardown(void *s)
{
    norm_state_t *n = s;
    rudnn_tensor_t *all[] = {&n->x, &n->residual, &n->gamma, &n->beta, &n->y, &n->rstd, &n->x_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

static rudnn_status_t layer_norm(void *s)
{
    norm_state_t *n = s;
    return rudnn_layer_norm(n->env.queue, &n->x, &n->gamma, &n->beta, 1e-5f, &n->y);
}

static rudnn_status_t rms_norm(void *s)
{
    norm_state_t *n = s;
    return rudnn_rms_norm(n->env.queue, &n->x, &n->gamma, 1e-6f, &n->y);
}

static rudnn_status_t softmax_last_axis(void *s)
{
    norm_state_t *n = s;
    return rudnn_softmax_last_axis(n->env.queue, &n->x, &n->y);
}

static rudnn_status_t add_rms_norm(void *s)
{
    norm_state_t *n = s;
    return rudnn_add_rms_norm(n->env.queue, &n->x, &n->residual, &n->gamma, 1e-6f, &n->y, &n->rstd, &n->x_out);
}

#define NORM_CASE(op)                                                                                         \
    {#op, sizeof(norm_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, op,       \
     unchanged, result, undo, teardown, NULL, 0}

static const fault_case_t cases[] = {
    NORM_CASE(layer_norm),
    NORM_CASE(rms_norm),
    NORM_CASE(softmax_last_axis),
    NORM_CASE(add_rms_norm),
};

const fault_family_t fault_family_norm = {"norm", cases, sizeof cases / sizeof cases[0]};
