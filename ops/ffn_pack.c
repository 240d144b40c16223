/* FFN (rudnn/ffn.h): the host helper that packs int4 weights into I4 storage. The op's argument
 * checks are in ops/ffn.c; its kernels come next. */
#include <stdint.h>

#include "rudnn/ffn.h"
#include "validate.h"

rudnn_status_t rudnn_ffn_pack_int4(const int8_t *w, int64_t k, int64_t n, uint8_t *out)
{
    const char *op = "ffn_pack_int4";
    rudnn_clear_error();
    if (!w || !out)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, !w ? "w" : "out");
    if (k < 0 || n < 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s = %lld is negative", op, k < 0 ? "k" : "n",
                               (long long)(k < 0 ? k : n));
    if (n % 2 != 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: n = %lld is odd: I4 storage packs two values a byte along N, so N must "
                               "be even",
                               op, (long long)n);
    if (k > 0 && (uint64_t)n > (uint64_t)SIZE_MAX / (uint64_t)k)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: k * n = %lld * %lld elements overflow the address space",
                               op, (long long)k, (long long)n);
    /* every value checked before any byte is written: a rejected call leaves out untouched */
    for (int64_t r = 0; r < k; r++)
        for (int64_t c = 0; c < n; c++) {
            int v = w[r * n + c];
            if (v < -8 || v > 7)
                return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                       "%s: w[%lld][%lld] = %d is outside the int4 range -8..7", op,
                                       (long long)r, (long long)c, v);
        }
    for (int64_t r = 0; r < k; r++)
        for (int64_t c = 0; c < n; c += 2) {
            unsigned lo = (unsigned)w[r * n + c] & 0xfu; /* two's complement nibbles */
            unsigned hi = (unsigned)w[r * n + c + 1] & 0xfu;
            out[r * (n / 2) + c / 2] = (uint8_t)(lo | hi << 4);
        }
    return RUDNN_STATUS_SUCCESS;
}
