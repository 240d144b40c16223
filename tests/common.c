/* Shared helpers for the rudnn cmocka suites (see common.h). */
#include "common.h"

#include <stdio.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

rudnn_context_t rt_ctx;
rudnn_queue_t rt_queue;
rudnn_context_t rt_ctx2;
rudnn_queue_t rt_queue2;

/* ---- context and queue ------------------------------------------------- */

const char *rt_requested_backend(void)
{
    const char *b = getenv("RUDNN_BACKEND");
    return b && *b ? b : "auto";
}

/* 1 when RUDNN_TEST_REQUIRE names this backend (or "all"). */
static int backend_required(const char *backend)
{
    const char *req = getenv("RUDNN_TEST_REQUIRE");
    if (!req || !*req)
        return 0;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", req);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (strcmp(tok, "all") == 0 || strcmp(tok, backend) == 0)
            return 1;
    return 0;
}

/* Returns 1 on success, 0 for "skip", exits 1 on a real failure. */
static int open_context(const char *suite)
{
    const char *backend = rt_requested_backend();
    rudnn_status_t st = rudnn_context_create(&rt_ctx, NULL);
    if (st != RUDNN_STATUS_SUCCESS) {
        rt_ctx = NULL;
        if (st == RUDNN_STATUS_BACKEND_UNAVAILABLE && !backend_required(backend)) {
            printf("backend %s: SKIPPED (%s)\n", backend, rudnn_last_error());
            fflush(stdout);
            return 0;
        }
        fprintf(stderr, "%s: backend %s: context_create failed: %s: %s\n", suite, backend,
                rudnn_status_string(st), rudnn_last_error());
        exit(1);
    }
    st = rudnn_queue_create(rt_ctx, &rt_queue);
    if (st != RUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "%s: backend %s: queue_create failed: %s: %s\n", suite, backend,
                rudnn_status_string(st), rudnn_last_error());
        rudnn_context_destroy(rt_ctx);
        exit(1);
    }
    rudnn_device_info_t info;
    st = rudnn_context_device_info(rt_ctx, &info);
    if (st != RUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "%s: device_info failed: %s: %s\n", suite, rudnn_status_string(st),
                rudnn_last_error());
        rt_close();
        exit(1);
    }
    if (strcmp(backend, "auto") != 0 && strcmp(info.backend, backend) != 0) {
        fprintf(stderr, "%s: RUDNN_BACKEND=%s but the context is on backend '%s'\n", suite, backend,
                info.backend);
        rt_close();
        exit(1);
    }
    return 1;
}

void rt_open_or_skip(const char *suite)
{
    if (!open_context(suite))
        exit(RT_EXIT_SKIP);
    rt_print_device(suite);
}

int rt_open_optional(const char *suite)
{
    if (!open_context(suite))
        return 0;
    rt_print_device(suite);
    return 1;
}

static void close_pair(rudnn_context_t *ctx, rudnn_queue_t *queue)
{
    if (*queue)
        rudnn_queue_destroy(*queue);
    if (*ctx)
        rudnn_context_destroy(*ctx);
    *queue = NULL;
    *ctx = NULL;
}

void rt_close(void) { close_pair(&rt_ctx, &rt_queue); }

int rt_group_teardown(void **state)
{
    (void)state;
    rt_close();
    return 0;
}

int rt_group_setup_second(void **state)
{
    (void)state;
    rudnn_status_t st = rudnn_context_create(&rt_ctx2, NULL);
    if (st != RUDNN_STATUS_SUCCESS) {
        print_error("second context_create failed: %s: %s\n", rudnn_status_string(st), rudnn_last_error());
        return -1;
    }
    st = rudnn_queue_create(rt_ctx2, &rt_queue2);
    if (st != RUDNN_STATUS_SUCCESS) {
        print_error("second queue_create failed: %s: %s\n", rudnn_status_string(st), rudnn_last_error());
        return -1;
    }
    return 0;
}

int rt_group_teardown_second(void **state)
{
    close_pair(&rt_ctx2, &rt_queue2);
    return rt_group_teardown(state);
}

int rt_set_filters(int argc, char **argv)
{
    int filtered = 0;
    if (argc > 1) {
        cmocka_set_test_filter(argv[1]);
        filtered = 1;
    }
    const char *skip = getenv("RUDNN_TEST_SKIP");
    if (skip && *skip) {
        cmocka_set_skip_filter(skip);
        filtered = 1;
    }
    return filtered;
}

int rt_kernel_skipped(const char *kernel)
{
    const char *list = getenv("RUDNN_TEST_SKIP_KERNELS");
    while (list && *list) {
        const char *end = strchr(list, ',');
        const size_t len = end ? (size_t)(end - list) : strlen(list);
        char glob[128];
        if (len > 0 && len < sizeof glob) {
            memcpy(glob, list, len);
            glob[len] = '\0';
            if (fnmatch(glob, kernel, 0) == 0)
                return 1;
        }
        list = end ? end + 1 : NULL;
    }
    return 0;
}

int rt_run_with_second_context_impl(const char *suite, const struct CMUnitTest *tests, size_t count, int argc,
                                    char **argv)
{
    rt_set_filters(argc, argv);
    rt_open_or_skip(suite);
    return rt_exit_code(
        _cmocka_run_group_tests(suite, tests, count, rt_group_setup_second, rt_group_teardown_second));
}

rt_binding_t rt_bind(rudnn_context_t ctx, rudnn_queue_t queue)
{
    rt_binding_t saved = {rt_ctx, rt_queue};
    rt_ctx = ctx;
    rt_queue = queue;
    return saved;
}

void rt_unbind(rt_binding_t saved)
{
    rt_ctx = saved.ctx;
    rt_queue = saved.queue;
}

void rt_print_device(const char *suite)
{
    rudnn_device_info_t info;
    if (rt_ctx && rudnn_context_device_info(rt_ctx, &info) == RUDNN_STATUS_SUCCESS)
        printf("%s: backend %s, device %d: %s (%s)\n", suite, info.backend, info.index, info.name,
               info.driver);
    fflush(stdout);
}

/* ---- pseudo-random numbers (splitmix64) ----------------------------------- */

uint64_t rt_hash(const char *text)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return h;
}

void rt_rng_seed(rt_rng_t *rng, uint64_t seed) { rng->state = seed ^ 0x9e3779b97f4a7c15ull; }

void rt_rng_seed_case(rt_rng_t *rng, const char *test_name, int case_index)
{
    rt_rng_seed(rng, rt_hash(test_name) + 0x100000001b3ull * (uint64_t)(case_index + 1));
}

uint64_t rt_rng_next(rt_rng_t *rng)
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double rt_rng_uniform(rt_rng_t *rng, double lo, double hi)
{
    double u = (double)(rt_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
}

uint64_t rt_rng_below(rt_rng_t *rng, uint64_t n) { return n ? rt_rng_next(rng) % n : 0; }

void rt_fill_uniform(rt_rng_t *rng, float *out, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (float)rt_rng_uniform(rng, lo, hi);
}

/* ---- device tensors ----------------------------------------------------- */

int64_t rt_numel(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    return n;
}

const char *rt_dims_str(int rank, const int64_t *dims, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

uint32_t rt_poison_bits(rudnn_dtype_t dtype)
{
    switch (dtype) {
    case RUDNN_F32: return 0x7fa5a5a5u;
    case RUDNN_F16: return 0x7da5u;
    case RUDNN_BF16: return 0x7fa5u;
    default: return 0xa5a5a5a5u;
    }
}

void rt_poison_host(rudnn_dtype_t dtype, void *bytes, size_t n)
{
    uint8_t *p = bytes;
    uint32_t bits = rt_poison_bits(dtype);
    size_t elem = rudnn_dtype_size(dtype);
    if (elem != 2 && elem != 4) {
        memset(p, 0xa5, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        size_t k = i % elem; /* little-endian byte k of the element */
        p[i] = (uint8_t)(bits >> (8 * k));
    }
}

void rt_tensor_create(rt_tensor_t *out, rudnn_dtype_t dtype, int rank, const int64_t *dims,
                      size_t offset_elems, size_t tail_bytes)
{
    memset(out, 0, sizeof *out);
    size_t elem = rudnn_dtype_size(dtype);
    if (elem == 0)
        elem = 1;
    size_t offset = offset_elems * elem;
    int64_t numel = rt_numel(rank, dims);
    size_t bytes = rudnn_dtype_storage_bytes(dtype, numel > 0 ? (size_t)numel : 0);
    out->buffer_bytes = offset + bytes + tail_bytes;
    if (out->buffer_bytes == 0)
        out->buffer_bytes = elem;
    rt_assert_status(rudnn_buffer_create(rt_ctx, out->buffer_bytes, &out->buffer), RUDNN_STATUS_SUCCESS);
    out->owns_buffer = 1;
    rt_assert_status(rudnn_tensor_init(&out->t, out->buffer, offset, dtype, rank, dims),
                     RUDNN_STATUS_SUCCESS);
    rt_tensor_poison(out);
}

void rt_tensor_view(rt_tensor_t *out, const rt_tensor_t *base, rudnn_dtype_t dtype, int rank,
                    const int64_t *dims, size_t byte_offset)
{
    memset(out, 0, sizeof *out);
    out->buffer = base->buffer;
    out->buffer_bytes = base->buffer_bytes;
    out->owns_buffer = 0;
    rt_assert_status(rudnn_tensor_init(&out->t, out->buffer, byte_offset, dtype, rank, dims),
                     RUDNN_STATUS_SUCCESS);
}

void rt_tensor_destroy(rt_tensor_t *tensor)
{
    if (tensor->owns_buffer && tensor->buffer)
        rudnn_buffer_destroy(tensor->buffer);
    memset(tensor, 0, sizeof *tensor);
}

void rt_tensor_poison(const rt_tensor_t *tensor)
{
    uint8_t *host = malloc(tensor->buffer_bytes);
    assert_non_null(host);
    rt_poison_host(tensor->t.dtype, host, tensor->buffer_bytes);
    rudnn_status_t st = rudnn_buffer_write(rt_queue, tensor->buffer, 0, host, tensor->buffer_bytes);
    free(host);
    rt_assert_status(st, RUDNN_STATUS_SUCCESS);
}

void rt_tensor_upload(const rt_tensor_t *tensor, const float *host)
{
    size_t n = (size_t)rudnn_tensor_numel(&tensor->t);
    size_t bytes = rudnn_tensor_bytes(&tensor->t);
    if (n == 0)
        return;
    void *raw = malloc(bytes);
    assert_non_null(raw);
    rudnn_convert_from_f32(tensor->t.dtype, host, raw, n);
    rudnn_status_t st = rudnn_tensor_write(rt_queue, &tensor->t, raw, bytes);
    free(raw);
    rt_assert_status(st, RUDNN_STATUS_SUCCESS);
}

void rt_tensor_download(const rt_tensor_t *tensor, float *host)
{
    size_t n = (size_t)rudnn_tensor_numel(&tensor->t);
    size_t bytes = rudnn_tensor_bytes(&tensor->t);
    if (n == 0)
        return;
    void *raw = malloc(bytes);
    assert_non_null(raw);
    rudnn_status_t st = rudnn_tensor_read(rt_queue, &tensor->t, raw, bytes);
    if (st == RUDNN_STATUS_SUCCESS)
        rudnn_convert_to_f32(tensor->t.dtype, raw, host, n);
    free(raw);
    rt_assert_status(st, RUDNN_STATUS_SUCCESS);
}

uint8_t *rt_buffer_snapshot(rudnn_buffer_t buffer, size_t bytes)
{
    return rt_buffer_snapshot_on(rt_queue, buffer, bytes);
}

uint8_t *rt_buffer_snapshot_on(rudnn_queue_t queue, rudnn_buffer_t buffer, size_t bytes)
{
    uint8_t *host = malloc(bytes ? bytes : 1);
    assert_non_null(host);
    rudnn_status_t st = rudnn_buffer_read(queue, buffer, 0, host, bytes);
    if (st != RUDNN_STATUS_SUCCESS) {
        free(host);
        rt_assert_status(st, RUDNN_STATUS_SUCCESS);
        return NULL;
    }
    return host;
}

uint32_t rt_element_bits(rudnn_dtype_t dtype, const void *base, size_t i)
{
    const uint8_t *p = base;
    if (rudnn_dtype_size(dtype) == 4) {
        uint32_t v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    if (rudnn_dtype_size(dtype) == 2) {
        uint16_t v;
        memcpy(&v, p + 2 * i, 2);
        return v;
    }
    return p[i];
}

float rt_element_value(rudnn_dtype_t dtype, const void *base, size_t i)
{
    uint32_t bits = rt_element_bits(dtype, base, i);
    switch (dtype) {
    case RUDNN_F32: {
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case RUDNN_F16: return rudnn_f16_to_f32((uint16_t)bits);
    case RUDNN_BF16: return rudnn_bf16_to_f32((uint16_t)bits);
    default: return (float)bits;
    }
}

void rt_tensor_fill_uniform(const rt_tensor_t *tensor, rt_rng_t *rng, double lo, double hi)
{
    size_t n = (size_t)rudnn_tensor_numel(&tensor->t);
    float *v = rt_xmalloc(n * sizeof *v);
    rt_fill_uniform(rng, v, n, lo, hi);
    rt_tensor_upload(tensor, v);
    free(v);
}

rudnn_tensor_t rt_tensor_desc(const rt_tensor_t *base, rudnn_dtype_t dtype, int rank, const int64_t *dims,
                              size_t byte_offset)
{
    rudnn_tensor_t t;
    rt_assert_status(rudnn_tensor_init(&t, base->buffer, byte_offset, dtype, rank, dims), RUDNN_STATUS_SUCCESS);
    return t;
}

void rt_decode(rudnn_dtype_t dtype, const void *raw, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = rt_element_value(dtype, raw, i);
}

size_t rt_count_poisoned(const rt_tensor_t *t, const uint8_t *snapshot)
{
    size_t n = (size_t)rudnn_tensor_numel(&t->t);
    const uint8_t *base = snapshot + t->t.offset;
    uint32_t poison = rt_poison_bits(t->t.dtype);
    size_t unwritten = 0;
    for (size_t i = 0; i < n; i++)
        unwritten += rt_element_bits(t->t.dtype, base, i) == poison;
    return unwritten;
}

size_t rt_count_changed(const uint8_t *before, const uint8_t *after, size_t bytes, const size_t *begin,
                        const size_t *end, int nranges, size_t *first)
{
    size_t changed = 0;
    for (size_t b = 0; b < bytes; b++) {
        int inside = 0;
        for (int k = 0; k < nranges; k++)
            inside |= b >= begin[k] && b < end[k];
        if (!inside && before[b] != after[b]) {
            if (!changed)
                *first = b;
            changed++;
        }
    }
    return changed;
}

void *rt_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    return p;
}

void *rt_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    assert_non_null(p);
    return p;
}

/* ---- assertions with messages -------------------------------------------- */

void rt_assert_status_impl(rudnn_status_t got, rudnn_status_t want, const char *expr,
                           const char *file, int line)
{
    if (got == want)
        return;
    print_error("%s returned %s (%d), expected %s (%d); last error: \"%s\"\n", expr,
                rudnn_status_string(got), (int)got, rudnn_status_string(want), (int)want,
                rudnn_last_error());
    _fail(file, line);
}

void rt_assert_error_mentions_impl(const char *file, int line, ...)
{
    const char *msg = rudnn_last_error();
    va_list args;
    va_start(args, line);
    for (const char *needle = va_arg(args, const char *); needle; needle = va_arg(args, const char *)) {
        if (!msg || !strstr(msg, needle)) {
            va_end(args);
            print_error("last error \"%s\" does not mention \"%s\"\n", msg ? msg : "(null)", needle);
            _fail(file, line);
            return;
        }
    }
    va_end(args);
}

/* ---- failure logs ------------------------------------------------------------ */

void rt_logf(rt_log_t *log, const char *fmt, ...)
{
    size_t len = strlen(log->text);
    if (len + 1 >= sizeof log->text)
        return;
    va_list args;
    va_start(args, fmt);
    vsnprintf(log->text + len, sizeof log->text - len, fmt, args);
    va_end(args);
}

rt_log_t *rt_log_new(void) { return rt_xcalloc(1, sizeof(rt_log_t)); }

void rt_print_lines(const char *text)
{
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        print_error("%.*s\n", len, p);
        p += len + (nl ? 1 : 0);
    }
}

void rt_log_finish_impl(rt_log_t *log, const char *unit, int free_log, const char *file, int line)
{
    int failures = log->failures;
    if (failures)
        rt_print_lines(log->text);
    if (free_log)
        free(log);
    if (failures) {
        print_error("ERROR: %d %s failed\n", failures, unit);
        _fail(file, line);
    }
}

/* ---- buffers that must not change ------------------------------------------------- */

rt_guard_item_t *rt_guard_track_buffer(rt_guard_t *guard, rudnn_queue_t queue, rudnn_buffer_t buffer, size_t bytes,
                                       const char *name)
{
    assert_true(guard->count < RT_GUARD_MAX);
    rt_guard_item_t *item = &guard->items[guard->count++];
    memset(item, 0, sizeof *item);
    item->buffer = buffer;
    item->queue = queue;
    item->bytes = bytes;
    item->name = name;
    return item;
}

rt_guard_item_t *rt_guard_track(rt_guard_t *guard, rudnn_queue_t queue, const rt_tensor_t *t, const char *name)
{
    return rt_guard_track_buffer(guard, queue, t->buffer, t->buffer_bytes, name);
}

void rt_guard_snapshot(rt_guard_item_t *item)
{
    free(item->before);
    item->before = rt_buffer_snapshot_on(item->queue, item->buffer, item->bytes);
}

void rt_guard_begin(rt_guard_t *guard)
{
    for (int i = 0; i < guard->count; i++)
        rt_guard_snapshot(&guard->items[i]);
}

int rt_guard_changed(rt_guard_t *guard)
{
    rudnn_queue_synchronize(rt_queue);
    for (int i = 0; i < guard->count; i++) {
        int seen = guard->items[i].queue == rt_queue;
        for (int j = 0; j < i && !seen; j++)
            seen = guard->items[j].queue == guard->items[i].queue;
        if (!seen)
            rudnn_queue_synchronize(guard->items[i].queue);
    }
    int changed = 0;
    for (int i = 0; i < guard->count; i++) {
        rt_guard_item_t *item = &guard->items[i];
        uint8_t *now = rt_buffer_snapshot_on(item->queue, item->buffer, item->bytes);
        item->changed = memcmp(now, item->before, item->bytes) != 0;
        changed += item->changed;
        free(now);
    }
    return changed;
}

void rt_guard_free(rt_guard_t *guard)
{
    for (int i = 0; i < guard->count; i++)
        free(guard->items[i].before);
    guard->count = 0;
}

void rt_out_watch_begin(rt_out_watch_t *w, const rt_tensor_t *t)
{
    w->t = t;
    rt_tensor_poison(t);
    w->before = rt_buffer_snapshot(t->buffer, t->buffer_bytes);
}

int rt_out_watch_end(rt_out_watch_t *w, int written, float *values, rt_log_t *log, const char *label, const char *what)
{
    int ok = 1;
    const rudnn_status_t sync = rudnn_queue_synchronize(rt_queue);
    if (sync != RUDNN_STATUS_SUCCESS) {
        rt_logf(log, "  %s: %s: queue_synchronize returned %s: %s\n", label, what, rudnn_status_string(sync),
                rudnn_last_error());
        ok = 0;
    }
    const rt_tensor_t *t = w->t;
    uint8_t *after = rt_buffer_snapshot(t->buffer, t->buffer_bytes);
    const size_t begin = t->t.offset, end = t->t.offset + rudnn_tensor_bytes(&t->t);
    size_t first = 0;
    const size_t changed =
        rt_count_changed(w->before, after, t->buffer_bytes, &begin, &end, written ? 1 : 0, &first);
    if (changed) {
        rt_logf(log, "  %s: %s: %zu byte(s) of the buffer changed %s (first at byte %zu)\n", label, what, changed,
                written ? "outside the output" : "by a call that must write nothing", first);
        ok = 0;
    }
    const size_t n = (size_t)rudnn_tensor_numel(&t->t);
    if (written) {
        const size_t unwritten = rt_count_poisoned(t, after);
        if (unwritten) {
            rt_logf(log, "  %s: %s: %zu of %zu element(s) never written (still the sentinel)\n", label, what,
                    unwritten, n);
            ok = 0;
        }
    }
    if (values)
        rt_decode(t->t.dtype, after + t->t.offset, values, n);
    free(after);
    free(w->before);
    w->before = NULL;
    return ok;
}
