/* rudnn status codes and error reporting. */
#ifndef RUDNN_STATUS_H
#define RUDNN_STATUS_H

#include "rudnn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Codes are grouped in ranges, as in ArrayFire: 1xx arguments, 2xx unsupported,
 * 3xx resources, 4xx loading, 5xx device runtime, 9xx internal.
 *
 * Strides, one rule for every op and for rudnn_tensor_read/write, checked in this order (strides
 * are in elements; those of a dim of size 1, and all of an empty tensor, are never used):
 *   - strides that describe no view are BAD_SHAPE: a dim of size > 1 with a stride of 0 or less,
 *     or elements that can share an address (taken by increasing stride, each stride must be
 *     at least the span of the dims with smaller strides; interleaved layouts fail this too);
 *   - a view with an element past the end of its buffer is OUT_OF_BOUNDS;
 *   - a valid view that is not row-major contiguous (padded rows, a transpose, a slice) is
 *     NOT_SUPPORTED: the ops and tensor I/O take contiguous tensors only, except attention, whose
 *     q, k, v, out, mask and attn_bias may be any valid view whose last dim is contiguous (stride
 *     1; e.g. [B, S, H, D] memory viewed as [B, H, S, D]): there only a last dim of another
 *     stride is NOT_SUPPORTED. */
typedef enum rudnn_status {
    RUDNN_STATUS_SUCCESS = 0,

    RUDNN_STATUS_BAD_PARAM = 100,       /* null pointer or value out of range */
    RUDNN_STATUS_BAD_SHAPE = 101,       /* rank or dims violate the op's contract; strides
                                         * that describe no view (above) */
    RUDNN_STATUS_BAD_DTYPE = 102,       /* dtype not accepted by the op */
    RUDNN_STATUS_DEVICE_MISMATCH = 103, /* tensors from different contexts/devices */
    RUDNN_STATUS_OUT_OF_BOUNDS = 104,   /* a tensor does not fit inside its buffer */

    RUDNN_STATUS_NOT_SUPPORTED = 200,   /* valid request this build/backend cannot run (a strided
                                         * view among them, above) */

    RUDNN_STATUS_ALLOC_FAILED = 300,    /* host or device allocation failed */

    RUDNN_STATUS_BACKEND_UNAVAILABLE = 400, /* plugin missing, runtime missing or no device */
    RUDNN_STATUS_ABI_MISMATCH = 401,        /* plugin built against another HAL version */
    RUDNN_STATUS_UNKNOWN_BACKEND = 402,     /* backend name not one of auto/cuda/hip/opencl */

    RUDNN_STATUS_DEVICE_ERROR = 500,    /* kernel compile, launch or runtime failure */

    RUDNN_STATUS_INTERNAL = 900
} rudnn_status_t;

/* Fixed name of a status code ("RUDNN_STATUS_BAD_SHAPE"); never NULL. */
RUDNN_API const char *rudnn_status_string(rudnn_status_t status);

/* Detail of the most recent failure on the calling thread, naming the op, the
 * argument and the rule; "" when the last call succeeded. Valid until the next
 * rudnn call on this thread. */
RUDNN_API const char *rudnn_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
