/* Shared helpers for the rudnn cmocka suites: backend selection with skip
 * logic, device tensors built from host float arrays, poisoning, and a
 * deterministic pseudo-random generator. */
#ifndef RUDNN_TESTS_COMMON_H
#define RUDNN_TESTS_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>

#include <cmocka.h>

#include <rudnn/rudnn.h>

/* Exit status that meson reports as SKIP. */
#define RT_EXIT_SKIP 77

/* ---- context and queue ------------------------------------------------- */

/* The process-wide context and queue opened by rt_open_or_skip. */
extern rudnn_context_t rt_ctx;
extern rudnn_queue_t rt_queue;

/* Backend the environment asks for (RUDNN_BACKEND, else "auto"). */
const char *rt_requested_backend(void);

/* Opens rt_ctx/rt_queue with the environment's defaults (options NULL).
 * If the backend cannot be used (RUDNN_STATUS_BACKEND_UNAVAILABLE) it prints
 * "backend <b>: SKIPPED (<rudnn_last_error()>)" and exits 77, unless <b> is
 * listed in RUDNN_TEST_REQUIRE (comma separated, "all" for any), in which case
 * it fails. Any other failure (ABI mismatch, internal error, ...) is a test
 * failure (exit 1), never a skip. When a backend is named (not auto), the
 * context must be on that backend: that is how RUDNN_BACKEND is checked. */
void rt_open_or_skip(const char *suite);

/* Like rt_open_or_skip but returns 0 (after printing why) instead of exiting
 * with 77 when no backend is usable; used by suites that only need a backend
 * for some of their tests. Fails hard on non-skip errors. */
int rt_open_optional(const char *suite);

void rt_close(void);

/* Group teardown that only closes rt_ctx/rt_queue. */
int rt_group_teardown(void **state);

/* A second context and queue on the same backend as rt_ctx (for
 * DEVICE_MISMATCH checks): cmocka group fixtures that open them (printing why
 * when that fails), and close them and then rt_ctx/rt_queue. */
extern rudnn_context_t rt_ctx2;
extern rudnn_queue_t rt_queue2;
int rt_group_setup_second(void **state);
int rt_group_teardown_second(void **state);

/* main() of a suite whose tests need the second context: argv[1] (if any)
 * filters the tests by name, rt_open_or_skip(suite), then the tests run as
 * the group "suite" with the fixtures above; returns the exit status. */
#define rt_run_with_second_context(suite, tests, argc, argv)                                                  \
    rt_run_with_second_context_impl((suite), (tests), sizeof(tests) / sizeof((tests)[0]), (argc), (argv))
int rt_run_with_second_context_impl(const char *suite, const struct CMUnitTest *tests, size_t count, int argc,
                                    char **argv);

/* Makes ctx/queue the rt_ctx/rt_queue that the helpers below use, returning
 * the previous pair for rt_unbind. */
typedef struct rt_binding {
    rudnn_context_t ctx;
    rudnn_queue_t queue;
} rt_binding_t;
rt_binding_t rt_bind(rudnn_context_t ctx, rudnn_queue_t queue);
void rt_unbind(rt_binding_t saved);

/* Prints "<suite>: backend <name>, device <device>" once. */
void rt_print_device(const char *suite);

/* ---- deterministic pseudo-random numbers -------------------------------- */

typedef struct rt_rng {
    uint64_t state;
} rt_rng_t;

/* FNV-1a hash of a string: seeds derived from test and case names, so each
 * test and each case gets its own, reproducible data. */
uint64_t rt_hash(const char *text);
void rt_rng_seed(rt_rng_t *rng, uint64_t seed);
/* Seeds from a test name and a case index. */
void rt_rng_seed_case(rt_rng_t *rng, const char *test_name, int case_index);
uint64_t rt_rng_next(rt_rng_t *rng);
/* Uniform in [lo, hi). */
double rt_rng_uniform(rt_rng_t *rng, double lo, double hi);
/* Uniform integer in [0, n). */
uint64_t rt_rng_below(rt_rng_t *rng, uint64_t n);
void rt_fill_uniform(rt_rng_t *rng, float *out, size_t n, double lo, double hi);

/* ---- device tensors ----------------------------------------------------- */

/* A tensor together with the buffer it lives in. The buffer holds
 * head_bytes before the tensor (its offset) and tail_bytes after it, both
 * poisoned, so that stray writes outside the tensor are seen. */
typedef struct rt_tensor {
    rudnn_tensor_t t;
    rudnn_buffer_t buffer;
    size_t buffer_bytes;
    int owns_buffer;
} rt_tensor_t;

/* Default slack after every tensor in its buffer. */
#define RT_TAIL_BYTES 64

/* Bit pattern written into every poisoned element of dtype: a signalling NaN
 * with a payload no arithmetic produces (F32 0x7fa5a5a5, F16 0x7da5,
 * BF16 0x7fa5); for other dtypes 0xa5 bytes. Kernels that write NaN write a
 * quiet NaN, so "still equals the sentinel" means "never written". */
uint32_t rt_poison_bits(rudnn_dtype_t dtype);

/* Fills bytes [0, n) of host memory with the poison pattern of dtype (the
 * pattern is aligned to element boundaries counted from the start). */
void rt_poison_host(rudnn_dtype_t dtype, void *bytes, size_t n);

/* Allocates a buffer of offset_elems elements + the tensor + tail_bytes,
 * poisons it all, and describes a contiguous tensor at byte offset
 * offset_elems * element size. Fails the current test on error. */
void rt_tensor_create(rt_tensor_t *out, rudnn_dtype_t dtype, int rank, const int64_t *dims,
                      size_t offset_elems, size_t tail_bytes);

/* A descriptor over another tensor's buffer at a byte offset (owns nothing). */
void rt_tensor_view(rt_tensor_t *out, const rt_tensor_t *base, rudnn_dtype_t dtype, int rank,
                    const int64_t *dims, size_t byte_offset);

void rt_tensor_destroy(rt_tensor_t *tensor);

/* Rewrites the whole buffer with the poison pattern of the tensor's dtype. */
void rt_tensor_poison(const rt_tensor_t *tensor);

/* Converts host floats to the tensor's dtype (RNE) and writes them. */
void rt_tensor_upload(const rt_tensor_t *tensor, const float *host);

/* Reads the tensor back as floats. */
void rt_tensor_download(const rt_tensor_t *tensor, float *host);

/* Reads the whole buffer (all buffer_bytes) into a new malloc'ed block. */
uint8_t *rt_buffer_snapshot(rudnn_buffer_t buffer, size_t bytes);

/* Raw element bits (zero-extended) of element i of a dtype array. */
uint32_t rt_element_bits(rudnn_dtype_t dtype, const void *base, size_t i);

/* Decodes element i of a dtype array (F32, F16, BF16) to float. */
float rt_element_value(rudnn_dtype_t dtype, const void *base, size_t i);

int64_t rt_numel(int rank, const int64_t *dims);

/* Formats dims as "[2, 3, 4]". */
const char *rt_dims_str(int rank, const int64_t *dims, char *buf, size_t cap);

/* Reads the whole buffer through queue (bytes long) into a new malloc'ed block. */
uint8_t *rt_buffer_snapshot_on(rudnn_queue_t queue, rudnn_buffer_t buffer, size_t bytes);

/* Uploads numel(t) values drawn with rt_fill_uniform(rng, lo, hi). */
void rt_tensor_fill_uniform(const rt_tensor_t *tensor, rt_rng_t *rng, double lo, double hi);

/* A bare descriptor over base's buffer with any dtype, shape and byte offset
 * (for views of other layouts than base's); fails the test on error. */
rudnn_tensor_t rt_tensor_desc(const rt_tensor_t *base, rudnn_dtype_t dtype, int rank, const int64_t *dims,
                              size_t byte_offset);

/* Decodes n elements of a dtype array to floats (rt_element_value). */
void rt_decode(rudnn_dtype_t dtype, const void *raw, float *out, size_t n);

/* Counts the elements of tensor t that still hold the poison sentinel in
 * snapshot, a copy of t's whole buffer. */
size_t rt_count_poisoned(const rt_tensor_t *t, const uint8_t *snapshot);

/* Counts the bytes in which two snapshots of bytes bytes differ outside the
 * ranges [begin[k], end[k]) (k < nranges; nranges 0: anywhere); *first gets
 * the first of them (untouched when there is none). */
size_t rt_count_changed(const uint8_t *before, const uint8_t *after, size_t bytes, const size_t *begin,
                        const size_t *end, int nranges, size_t *first);

/* malloc / calloc that fail the test when out of memory (0 bytes: 1). */
void *rt_xmalloc(size_t bytes);
void *rt_xcalloc(size_t n, size_t size);

/* Test selection of a suite's main: argv[1] (if any) is a glob of the tests to run, and the
 * environment's RUDNN_TEST_SKIP (if set and not empty) a glob of tests to skip (the GPU
 * sanitizer stage leaves out the suites' largest cases so). Returns 1 when either applies: not
 * every test runs. */
int rt_set_filters(int argc, char **argv);

/* 1 when kernel (a name as rudnn_last_kernel gives it) matches one of the comma-separated globs of
 * the environment's RUDNN_TEST_SKIP_KERNELS: a suite that runs every kernel by name leaves it out
 * (the GPU sanitizer stage so leaves out vendor-library kernels a tool cannot follow). */
int rt_kernel_skipped(const char *kernel);

/* Exit status for a cmocka run: cmocka returns the number of failed tests,
 * and 77 failures would read as SKIP to meson; any failure is 1. */
static inline int rt_exit_code(int failed) { return failed == 0 ? 0 : 1; }

/* ---- assertions with messages -------------------------------------------- */

/* Fails with the status name and rudnn_last_error() when st != want. */
#define rt_assert_status(st, want)                                                                 \
    rt_assert_status_impl((st), (want), #st, __FILE__, __LINE__)
void rt_assert_status_impl(rudnn_status_t got, rudnn_status_t want, const char *expr,
                           const char *file, int line);

/* Fails unless rudnn_last_error() contains every non-NULL needle given. */
#define rt_assert_error_mentions(...) rt_assert_error_mentions_impl(__FILE__, __LINE__, __VA_ARGS__, NULL)
void rt_assert_error_mentions_impl(const char *file, int line, ...);

/* ---- failure logs ------------------------------------------------------------ */

/* Suites check many cases per cmocka test, append a line per problem and
 * count the failed cases (or checks), then fail once at the end with all of
 * it. Text past the capacity is dropped; the count is kept. */
typedef struct rt_log {
    char text[32768];
    int failures;
} rt_log_t;

void rt_logf(rt_log_t *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A zeroed log on the heap (too big for some stacks). */
rt_log_t *rt_log_new(void);

/* cmocka's print_error formats into a fixed buffer (about 1 KB): long text
 * is printed one line at a time. */
void rt_print_lines(const char *text);

/* When log counts failures: prints it and fails with "<n> <unit> failed".
 * rt_log_finish_free frees the log (from rt_log_new) in any case. */
#define rt_log_finish(log, unit) rt_log_finish_impl((log), (unit), 0, __FILE__, __LINE__)
#define rt_log_finish_free(log, unit) rt_log_finish_impl((log), (unit), 1, __FILE__, __LINE__)

void rt_log_finish_impl(rt_log_t *log, const char *unit, int free_log, const char *file, int line);

/* An output watched across calls: rt_out_watch_begin poisons it and snapshots its whole buffer. */
typedef struct rt_out_watch {
    const rt_tensor_t *t;
    uint8_t *before;
} rt_out_watch_t;

void rt_out_watch_begin(rt_out_watch_t *w, const rt_tensor_t *t);

/* After the calls (rt_queue synchronized first): written, every element written and no byte around
 * the tensor changed; not written (a rejected or empty call), no byte of the buffer changed. Logs
 * each failure as "  label: what: ..." and returns 0 then, else 1. Decodes the tensor into values
 * (NULL: not). Frees the snapshot. */
int rt_out_watch_end(rt_out_watch_t *w, int written, float *values, rt_log_t *log, const char *label,
                     const char *what);

/* ---- buffers that must not change ------------------------------------------------- */

/* Whole buffers, each read through its own queue, with a snapshot taken by
 * rt_guard_snapshot (one item) or rt_guard_begin (all), compared by
 * rt_guard_changed. */
#define RT_GUARD_MAX 32

typedef struct rt_guard_item {
    rudnn_buffer_t buffer;
    rudnn_queue_t queue;
    size_t bytes;
    const char *name;
    uint8_t *before;
    int changed; /* set by rt_guard_changed */
} rt_guard_item_t;

typedef struct rt_guard {
    rt_guard_item_t items[RT_GUARD_MAX];
    int count;
} rt_guard_t;

rt_guard_item_t *rt_guard_track_buffer(rt_guard_t *guard, rudnn_queue_t queue, rudnn_buffer_t buffer, size_t bytes,
                                       const char *name);
/* The whole buffer of t. */
rt_guard_item_t *rt_guard_track(rt_guard_t *guard, rudnn_queue_t queue, const rt_tensor_t *t, const char *name);
void rt_guard_snapshot(rt_guard_item_t *item);
void rt_guard_begin(rt_guard_t *guard);
/* Synchronizes rt_queue and every item's queue, then returns how many
 * buffers differ from their snapshot (and marks them changed). */
int rt_guard_changed(rt_guard_t *guard);
void rt_guard_free(rt_guard_t *guard);

#endif
