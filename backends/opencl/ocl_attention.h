/* What the OpenCL attention sources share: attention.c (the family's table, the arguments both
 * candidates take), attention_flash.c and attention_fallback.c (the launchers of
 * kernels/attention.cl). Not installed. */
#ifndef RUDNN_OCL_ATTENTION_H
#define RUDNN_OCL_ATTENTION_H

#include "backends/hal/attention.h"
#include "ocl_internal.h"

#define ATT_OP "attention"
#define ATT_FLASH_UNIT_NAME "attention.flash_unit"
#define ATT_FALLBACK_NAME "attention.fallback"
#define ATT_NO_BIAS 3u /* kernels/attention.cl's bias_code for "no bias" */

/* kernels/attention.cl's three programs (-DATT_PART) */
enum { ATT_PART_FLASH = 1, ATT_PART_FALLBACK = 2, ATT_PART_BACKWARD = 3 };

/* What the kernels of both candidates take, from the plan and the buffers. */
typedef struct att_args {
    ocl_queue_t *q;
    int code;    /* RUDNN_DTYPE */
    size_t elem; /* bytes per q/k/v/out element */
    cl_mem qm, km, vm, mm, bm, om, lm;
    cl_ulong qo, ko, vo, mo, bo, oo, lo;
    cl_long4 qs, ks, vs, ms, bs, os;
    cl_uint has_mask, bias_code, has_lse;
    cl_uint heads_q, group_size, d, dv;
    cl_long seq_q, seq_kv, window_left, window_right;
    float scale, softcap;
} att_args_t;

/* The plan and buffers as the kernels take them (absent buffers stand in as present ones). */
rudnn_status_t ocl_att_args(void *queue, const rudnn_attention_plan_t *plan, rudnn_mem_ref_t q, rudnn_mem_ref_t k,
                            rudnn_mem_ref_t v, rudnn_mem_ref_t mask, rudnn_mem_ref_t bias, rudnn_mem_ref_t out,
                            rudnn_mem_ref_t lse, att_args_t *a);

/* The backward (attention_backward.c): the table's backward_workspace and backward entries. */
rudnn_status_t ocl_attention_backward_workspace(void *device, const rudnn_attention_plan_t *plan, size_t *bytes);
rudnn_status_t ocl_attention_backward(void *queue, const rudnn_attention_plan_t *plan,
                                      const rudnn_attention_backward_operands_t *ops);

/* flash_unit (attention_flash.c): whether its tiles fit the device, and the launch. */
int ocl_att_flash_fits(const ocl_device_t *dev, const rudnn_attention_plan_t *plan);
rudnn_status_t ocl_att_run_flash(const att_args_t *a, const rudnn_attention_plan_t *plan);

/* fallback (attention_fallback.c): its scores' bytes (B * Hq * Sq * Skv * 4; 0 on overflow), why
 * they do not fit the device (NULL when they do), and the launches. */
uint64_t ocl_att_scores_bytes(const rudnn_attention_plan_t *plan);
const char *ocl_att_scores_unfit(const ocl_device_t *dev, const rudnn_attention_plan_t *plan,
                                 char *why, size_t cap);
rudnn_status_t ocl_att_run_fallback(const att_args_t *a, const rudnn_attention_plan_t *plan,
                                    rudnn_mem_ref_t workspace);

#endif
