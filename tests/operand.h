/* Shared pieces of the numeric suites (tests/test_<family>.c) and the contract suites
 * (tests/test_<family>_contract.c) of the convolution, pooling, interpolation, grid_sample and ctc
 * families: strided device operands with a poisoned host image to check writes against, the
 * half-ulp tolerance term, values rounded to a dtype, the backend-without-the-family verdict, and a
 * contract suite's per-test log. */
#ifndef RUDNN_TESTS_OPERAND_H
#define RUDNN_TESTS_OPERAND_H

#include "common.h"

/* ---- device operands ------------------------------------------------------------------------ */

/* A tensor of any strides in its own buffer: head elements before it, RT_TAIL_BYTES after its
 * farthest element. image is the buffer's bytes as last written by operand_init / _poison /
 * _upload (the sentinel around the elements and in the stride gaps), so that a snapshot tells which
 * bytes a call changed. */
typedef struct operand {
    rudnn_buffer_t buf;
    rudnn_tensor_t t;
    size_t bytes;   /* the whole buffer */
    uint8_t *image; /* what the buffer holds after operand_init / _poison / _upload */
    uint8_t *mask;  /* 1 on the bytes of the tensor's elements */
    int64_t numel;
} operand_t;

/* Layouts of operand_init_layout (dims [N, C, spatial...] for OPERAND_CLAST). */
typedef enum operand_layout {
    OPERAND_CONTIG, /* row-major */
    OPERAND_CLAST,  /* memory [N, S..., C], described by rudnn_conv_channels_last (ranks 3 to 5) */
    OPERAND_PADDED, /* row-major over dims padded by 1, the innermost by 3 (rank 1: element stride 3):
                       not contiguous */
} operand_layout_t;

/* Allocates, poisons and uploads the buffer of a tensor with these strides (NULL: row-major) at
 * byte offset head * element size. Fails the running test on error. */
void operand_init(operand_t *o, rudnn_dtype_t dt, int rank, const int64_t *dims, const int64_t *strides,
                  size_t head);

/* operand_init with the strides of an operand_layout_t; OPERAND_CLAST's descriptor comes from
 * rudnn_conv_channels_last, whose strides must be the expected ones (a failure otherwise). */
void operand_init_layout(operand_t *o, rudnn_dtype_t dt, int rank, const int64_t *dims, int layout, size_t head);

void operand_free(operand_t *o);

/* Writes the sentinel everywhere (outputs, before each call). */
void operand_poison(operand_t *o);

/* Writes values into the elements, the sentinel around them: floats (F32, F16, BF16; exactly
 * representable in the dtype) or integers (I32, I64). */
void operand_upload(operand_t *o, const double *values);
void operand_upload_ints(operand_t *o, const int64_t *ints);

/* The whole buffer as it is now (the queue synchronized by the read); malloc'ed. */
uint8_t *operand_snapshot(const operand_t *o);

/* 1 when the buffer still holds exactly its image. */
int operand_unchanged(const operand_t *o);

/* Decodes the elements of a snapshot into values (float dtypes) or ints (8-byte dtypes), either
 * NULL for none; *unwritten counts the elements still holding the sentinel, *outside the bytes
 * outside the elements that differ from the image. */
void operand_decode(const operand_t *o, const uint8_t *snap, float *values, int64_t *ints, int64_t *unwritten,
                    int64_t *outside);

/* The write check of an output: operand_decode, then logs "  <what>: [<name>: ]<n> of <numel>
 * element(s) never written (still the sentinel)" and "...: <n> byte(s) of its buffer outside its
 * elements changed" when so (name NULL: left out). Returns the number of problems logged (0 to 2). */
int operand_check_written(rt_log_t *log, const char *what, const char *name, const operand_t *o,
                          const uint8_t *snap, float *values, int64_t *ints);

/* ---- tolerances and values ------------------------------------------------------------------- */

/* Half an ulp of v in dt (F32, F16, BF16), never below that of dt's smallest normal (which is also
 * what 0 and non-finite v get): the final rounding of a result to its dtype. */
double rt_half_ulp(rudnn_dtype_t dt, double v);

/* v rounded to dt through float (what rudnn's conversions take); NaN and infinities kept. */
double rt_round_to(rudnn_dtype_t dt, double v);

/* n values uniform in [-1, 1], each rounded to dt (rt_round_to); malloc'ed, at least one. */
double *rt_random_values(rt_rng_t *rng, rudnn_dtype_t dt, int64_t n);

/* Index of dt among F32, F16, BF16 (the suites' per-dtype summaries). */
static inline int rt_dtype_index(rudnn_dtype_t dt) { return dt == RUDNN_F32 ? 0 : dt == RUDNN_F16 ? 1 : 2; }

/* Case-insensitive strstr: 1 when text (may be NULL) contains needle. */
int rt_mentions(const char *text, const char *needle);

/* ---- a backend without the family ------------------------------------------------------------ */

/* 1 when rt_ctx is on the OpenCL backend, whose plugin has every family of this release. */
int rt_on_opencl(void);

/* The end of a suite whose backend answered NOT_SUPPORTED for the family. On OpenCL, or when the
 * answer was not the documented one (ok 0: a status, a message or a written output), prints
 * "backend <b>: FAILED: the opencl plugin has no <kernels> kernels (NOT_SUPPORTED)" / "wrong answer
 * without <kernels> kernels", then " (<detail>)" (detail NULL: " (see above)" after the wrong
 * answer) and returns 1; else prints "backend <b>: SKIPPED (<family>: NOT_SUPPORTED, checked for
 * <checked>: <why>)" and returns RT_EXIT_SKIP. Closes rt_ctx and rt_queue either way. */
int rt_family_absent_exit(int ok, const char *family, const char *kernels, const char *checked, const char *why,
                          const char *detail);

/* ---- a contract suite's checks --------------------------------------------------------------- */

/* The running test's log: rt_test_log_setup / rt_test_log_teardown are the per-test cmocka fixtures
 * (the teardown fails the test with every line logged); rt_failf adds a line and counts a failure. */
extern rt_log_t *rt_test_log;
int rt_test_log_setup(void **state);
int rt_test_log_teardown(void **state);
void rt_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Gives t a new rank and dims with row-major strides (offset, buffer and dtype kept); a stride that
 * would overflow restarts at 1 (the oversized shapes some checks pass). */
void rt_reshape(rudnn_tensor_t *t, int rank, const int64_t *dims);

/* 1 when msg contains op and every needle up to the first NULL (case-sensitive). */
int rt_message_names(const char *msg, const char *op, const char *n1, const char *n2, const char *n3);

#endif
