/* rudnn_paged_append (rudnn/paged_attention.h): the contract, copy on write of shared cache
 * buffers, and the call into the backend's append entry. No GPU API here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_internal.h"
#include "validate.h"

#define OP "rudnn_paged_append"

/* rows [Q, Hkv, dim] and its cache [pages, page_size, Hkv, dim], one dtype with k. */
static rudnn_status_t check_pair(rudnn_paged_plan_t p, const char *rows_arg, const rudnn_tensor_t *rows,
                                 const char *cache_arg, const rudnn_tensor_t *cache, const rudnn_tensor_t *k,
                                 int64_t heads, int64_t *dim)
{
    TRY(rudnn_check_tensor(OP, rows_arg, p->queue, rows, 0));
    TRY(rudnn_check_tensor(OP, cache_arg, p->queue, cache, 0));
    TRY(rudnn_check_float_dtype(OP, rows_arg, rows));
    char s[160];
    if (rows->dtype != k->dtype || cache->dtype != k->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s has dtype %s, expected %s (dtype of k)", OP,
                               rows->dtype != k->dtype ? rows_arg : cache_arg,
                               rudnn_dtype_name(rows->dtype != k->dtype ? rows->dtype : cache->dtype),
                               rudnn_dtype_name(k->dtype));
    const int64_t Q = p->layout.queries;
    if (rows->rank != 3 || rows->dims[0] != Q || (heads > 0 && rows->dims[1] != heads) || rows->dims[1] < 1 ||
        rows->dims[2] < 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected [%lld, Hkv, dim] (the plan's "
                               "queries%s)", OP, rows_arg, rudnn_shape_str(rows, s, sizeof s), (long long)Q,
                               heads > 0 ? ", Hkv of k" : "");
    *dim = rows->dims[2];
    if (cache->rank != 4 || cache->dims[0] != p->layout.cache_pages || cache->dims[1] != p->layout.page_size ||
        cache->dims[2] != rows->dims[1] || cache->dims[3] != *dim)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected [%lld, %lld, %lld, %lld] (the "
                               "plan's pages and page_size, heads and dim of %s)", OP, cache_arg,
                               rudnn_shape_str(cache, s, sizeof s), (long long)p->layout.cache_pages,
                               (long long)p->layout.page_size, (long long)rows->dims[1], (long long)*dim, rows_arg);
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t check_schedule(rudnn_paged_plan_t p)
{
    if (p->no_row_query >= 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: query %lld is at its sequence's length, so it has no "
                               "cache row to write (the length must count the tokens appended)", OP,
                               (long long)p->no_row_query);
    if (p->dup_query[0] >= 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: queries %lld and %lld write the same physical cache row",
                               OP, (long long)p->dup_query[0], (long long)p->dup_query[1]);
    return RUDNN_STATUS_SUCCESS;
}

/* The buffer to write: buf itself, or a copy of it when it is shared (copy on write). *fresh is
 * the new buffer (the caller's to destroy) or NULL. */
static rudnn_status_t writable(rudnn_paged_plan_t p, rudnn_buffer_t buf, rudnn_buffer_t *target, rudnn_buffer_t *fresh)
{
    *fresh = NULL;
    *target = buf;
    if (!rudnn_buffer_is_shared(buf))
        return RUDNN_STATUS_SUCCESS;
    rudnn_status_t st = rudnn_buffer_create(p->queue->context, buf->size, fresh);
    if (!st)
        st = rudnn_buffer_copy(p->queue, *fresh, 0, buf, 0, buf->size);
    if (st) {
        rudnn_buffer_destroy(*fresh);
        *fresh = NULL;
        rudnn_error_prefix(OP);
        return st;
    }
    *target = *fresh;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_paged_append(rudnn_paged_plan_t p, const rudnn_tensor_t *k, const rudnn_tensor_t *v,
                                  const rudnn_tensor_t *k_cache, const rudnn_tensor_t *v_cache,
                                  rudnn_tensor_t *k_cache_out, rudnn_tensor_t *v_cache_out)
{
    rudnn_clear_error();
    TRY(rudnn_paged_check_plan(OP, p));
    TRY(rudnn_check_arg(OP, "k", k));
    TRY(rudnn_check_arg(OP, "k_cache", k_cache));
    TRY(rudnn_check_arg(OP, "k_cache_out", k_cache_out));
    if (!v != !v_cache)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL but %s is not: pass both or neither", OP,
                               v ? "v_cache" : "v", v ? "v" : "v_cache");
    if (v)
        TRY(rudnn_check_arg(OP, "v_cache_out", v_cache_out));
    int64_t dk, dv = 0;
    TRY(check_pair(p, "k", k, "k_cache", k_cache, k, -1, &dk));
    if (v) {
        TRY(check_pair(p, "v", v, "v_cache", v_cache, k, k->dims[1], &dv));
        TRY(rudnn_check_disjoint(OP, "v_cache", v_cache, "k_cache", k_cache));
    }
    const rudnn_tensor_t *in[2] = {k, v};
    const char *in_names[2] = {"k", "v"};
    for (int i = 0; i < 2; i++) {
        TRY(rudnn_check_disjoint(OP, "k_cache", k_cache, in_names[i], in[i]));
        if (v)
            TRY(rudnn_check_disjoint(OP, "v_cache", v_cache, in_names[i], in[i]));
    }
    TRY(check_schedule(p));
    const rudnn_paged_attention_kernels_t *kt = RUDNN_FAMILY_TABLE(p->queue->context->backend, paged_attention);
    if (p->layout.queries && (!kt || !kt->append))
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: the %s backend has no paged-attention kernels", OP,
                               p->queue->context->backend->name);

    /* copy on write: one copy per shared buffer (k and v caches may share one) */
    rudnn_buffer_t kbuf = k_cache->buffer, vbuf = v ? v_cache->buffer : NULL, kfresh = NULL, vfresh = NULL;
    if (p->layout.queries) {
        TRY(writable(p, k_cache->buffer, &kbuf, &kfresh));
        if (v && v_cache->buffer == k_cache->buffer)
            vbuf = kbuf;
        else if (v) {
            rudnn_status_t st = writable(p, v_cache->buffer, &vbuf, &vfresh);
            if (st) {
                rudnn_buffer_destroy(kfresh);
                return st;
            }
        }
        rudnn_paged_append_args_t a = {k->dtype, k->dims[1], dk, dv, p->layout};
        rudnn_paged_append_operands_t o;
        memset(&o, 0, sizeof o);
        o.plan = (rudnn_mem_ref_t){p->image->mem, 0};
        o.k = rudnn_mem_of(k), o.v = rudnn_mem_of(v);
        o.k_cache = (rudnn_mem_ref_t){kbuf->mem, k_cache->offset};
        if (v)
            o.v_cache = (rudnn_mem_ref_t){vbuf->mem, v_cache->offset};
        rudnn_status_t st = rudnn_kernel_status(OP, kt->append(p->queue->handle, &a, &o));
        if (st) {
            rudnn_buffer_destroy(kfresh);
            rudnn_buffer_destroy(vfresh);
            return st;
        }
    }
    *k_cache_out = *k_cache;
    k_cache_out->buffer = kbuf;
    if (v) {
        *v_cache_out = *v_cache;
        v_cache_out->buffer = vbuf;
    }
    return RUDNN_STATUS_SUCCESS;
}
