/* Shared libFuzzer harness code: the input decoder, argument builders and the
 * per-call contract checks. A family's target (fuzz_<family>.c) picks an op from
 * the input, builds its arguments with the fz_* calls below and hands the status
 * to fz_check, which abort()s (a libFuzzer crash) on any violation.
 *
 * Input format: a sequence of 16-byte slots (bytes past the end read as 0, so a
 * short input is a valid call). Slot 0 is the header (byte 0: the op; bytes
 * 1..15: the intended shape, read by the family with fz_header_byte); every
 * argument (tensor, option, queue, object) then takes the next slot:
 *   [0]      mode: < 0x80 the intended value, >= 0x80 a mutation
 *   [1]      kind: which mutation (the builders' lists; taken modulo their length)
 *   [2]      index: which dim / stride / earlier argument
 *   [3]      pick: bit 7 clear: an entry of an edge-value table; set: the raw value
 *   [4..7]   extra choices (placement offset, a second mutation)
 *   [8..15]  raw: a little-endian 64-bit value (dims, strides, offsets, options;
 *            a float option reads the low 4 bytes as its bits)
 * tests/fuzz/make_corpus.py writes seeds in this format and fuzz.dict holds edge
 * values for the raw field. */
#ifndef RUDNN_FUZZ_COMMON_H
#define RUDNN_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <rudnn/rudnn.h>

#define FZ_SLOT 16
#define FZ_BUFFERS 8               /* buffers of the main context */
#define FZ_FOREIGN_BUFFERS 2       /* buffers of the second context */
#define FZ_BUFFER_BYTES (16 << 10) /* small: keeps each accepted call micro-sized */
#define FZ_MAX_TENSORS 16
#define FZ_MAX_WRITES 2       /* harness-written input ranges per call (fz_write_input) */
#define FZ_WRITE_BYTES 64

/* Created once per process (LLVMFuzzerInitialize or the first input). */
typedef struct fz_env {
    rudnn_context_t ctx, ctx2; /* ctx2: "another context" for DEVICE_MISMATCH */
    rudnn_queue_t q, q2;
    rudnn_buffer_t buf[FZ_BUFFERS];
    rudnn_buffer_t foreign[FZ_FOREIGN_BUFFERS];
} fz_env_t;

typedef struct fz_slot {
    uint8_t mode, kind, index, pick, extra[4];
    uint64_t raw;
} fz_slot_t;

/* One tensor argument as built, for placement, aliasing and the output checks. */
typedef struct fz_tensor_arg {
    rudnn_tensor_t t;
    int is_null;   /* the pointer passed is NULL */
    int is_output; /* the op may write it */
} fz_tensor_arg_t;

/* The intended (valid) form of a tensor argument. */
typedef struct fz_spec {
    rudnn_dtype_t dtype;
    int rank;
    int64_t dims[RUDNN_MAX_RANK];
} fz_spec_t;

/* Bytes the harness wrote into a buffer after the fill (input values an op checks, such as
 * FFN's expert_tokens): the buffer's expected content there instead of the fill byte. */
typedef struct fz_written {
    int buffer; /* index: the main context's buffers, then the other context's */
    size_t offset, bytes;
    uint8_t data[FZ_WRITE_BYTES];
} fz_written_t;

/* One input: the reader and every tensor argument built so far. */
typedef struct fz_call {
    const fz_env_t *env;
    const uint8_t *data;
    size_t size, pos;
    uint8_t header[FZ_SLOT];
    fz_tensor_arg_t args[FZ_MAX_TENSORS];
    int nargs;
    uint8_t fill[FZ_BUFFERS + FZ_FOREIGN_BUFFERS]; /* the byte each buffer was filled with */
    rudnn_buffer_t workspace;                      /* written by an accepted call: [0, bytes) */
    size_t workspace_bytes;
    fz_written_t written[FZ_MAX_WRITES];
    int nwritten;
} fz_call_t;

const fz_env_t *fz_env(void);

/* Defined by each target: runs a valid call of every op and dtype it reaches (through
 * LLVMFuzzerTestOneInput), once, from LLVMFuzzerInitialize. The first build of an OpenCL
 * program (PoCL compiles in process) allocates memory that libFuzzer's per-input leak check
 * would blame on whichever input came first. */
void fz_warmup(void);

/* Runs LLVMFuzzerTestOneInput on an input made of this header and nothing else. */
void fz_run_header(const uint8_t header[FZ_SLOT]);

/* Starts an input: reads the header, fills every buffer with a sentinel byte chosen by the
 * input (which also makes the input values: 0, 1.0-ish, huge, NaN) and waits for the fills. */
void fz_begin(fz_call_t *c, const uint8_t *data, size_t size);

/* Byte i (0..15) of the header; byte 0 is the op. */
uint8_t fz_header_byte(const fz_call_t *c, int i);

/* The next slot (zeros past the end of the input). */
fz_slot_t fz_next_slot(fz_call_t *c);

/* A small valid dim from a header byte: 1..span, or 0 when allow_zero and the byte says so. */
int64_t fz_small_dim(uint8_t byte, int64_t span, int allow_zero);

/* F32, F16 or BF16 from a header byte. */
rudnn_dtype_t fz_float_dtype(uint8_t byte);

/* A tensor argument from the next slot: the spec placed in its own buffer (intended) or a
 * mutation: NULL pointer, no buffer, a buffer of the other context, any dtype value, rank
 * -1..9 and beyond, edge dims (0, huge, negative, products that overflow), strides,
 * misaligned / past-the-end offsets, aliasing an earlier argument exactly or partly. Returns
 * the pointer to pass (NULL for the NULL mutation). */
const rudnn_tensor_t *fz_tensor(fz_call_t *c, const fz_spec_t *spec, int is_output);

/* An optional tensor: like fz_tensor, but the intended value is NULL when the header bit
 * says so (e.g. beta, bias). */
const rudnn_tensor_t *fz_optional_tensor(fz_call_t *c, const fz_spec_t *spec, int absent);

/* The same for an optional output (e.g. attention's lse). */
const rudnn_tensor_t *fz_optional_output(fz_call_t *c, const fz_spec_t *spec, int absent);

/* Records an input the call reads that the harness made (e.g. the weights an experts object
 * refers to): it takes no slot, later arguments may alias it, and fz_check holds the call's
 * outputs to the overlap rule against it. */
void fz_note_input(fz_call_t *c, const rudnn_tensor_t *t);

/* Writes `bytes` of data where t points (values an op reads and checks, e.g. FFN's
 * expert_tokens), when t lies in a buffer of the harness and they fit there; from then on
 * fz_check expects those bytes there instead of the fill. Takes no slot. Returns 1 when
 * written, 0 when t is NULL, has no harness buffer or the bytes do not fit (the call then
 * reads the fill, or rejects the descriptor). */
int fz_write_input(fz_call_t *c, const rudnn_tensor_t *t, const void *data, size_t bytes);

/* Bytes [begin, end) from t's offset in t's buffer (a buffer of the harness) must still hold what
 * the harness put there (the fill, or fz_write_input's bytes): for outputs an accepted call must
 * leave partly alone (e.g. FFN's rows past the expert_tokens). abort()s otherwise. */
void fz_check_untouched(fz_call_t *c, const char *op, const rudnn_tensor_t *t, size_t begin, size_t end);

/* Options from the next slot: intended, or an edge value (0, negative, INT_MIN/MAX, one past
 * a limit, NaN, infinities, denormals) or the raw value. */
int fz_int(fz_call_t *c, int intended);
/* A 64-bit count (rows, sizes): intended, an edge value of the dims table, or the raw value. */
int64_t fz_i64(fz_call_t *c, int64_t intended);
float fz_float(fz_call_t *c, float intended);

/* A workspace buffer from the next slot: NULL (intended), a buffer of this context (its first
 * *bytes bytes count as an output of the call) or of the other one; *bytes is intended or an
 * edge value. */
rudnn_buffer_t fz_workspace(fz_call_t *c, size_t intended_bytes, size_t *bytes);

/* The main queue, or NULL, or the other context's queue. */
rudnn_queue_t fz_queue(fz_call_t *c);

/* Which of n object variants (0 = the valid one) the next slot asks for. */
int fz_object_choice(fz_call_t *c, int n);

/* The contract of one call named op (its messages start "<op>: "): a rejected call returns
 * a 1xx/2xx status and a message naming op, and changed no byte of any buffer; an accepted
 * call had each output either exactly on an input or disjoint from it (the workspace disjoint
 * from every input), leaves rudnn_last_error() empty, its queue work succeeds, and no byte
 * outside its output tensors changed. Any violation prints what happened and abort()s. Returns st. */
rudnn_status_t fz_check(fz_call_t *c, const char *op, rudnn_status_t st);

/* A call the harness needs to succeed (building a plan or dispatched tokens for the call
 * under test): abort()s with the message otherwise. */
void fz_require(const char *what, rudnn_status_t st);

/* Prints "fuzz: <why>" with the status and message, then abort()s. */
void fz_fail(const char *why, const char *op, rudnn_status_t st) __attribute__((noreturn));

#endif
