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

#endif
