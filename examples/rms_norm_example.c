/* rms_norm_example: the smallest complete rudnn program.
 *
 * Opens the default backend (RUDNN_BACKEND / RUDNN_DEVICE, else the first that
 * loads: cuda, hip, opencl), runs RMSNorm on a [4, 8] F32 tensor, reads the
 * result back and checks it against a few lines of plain C.
 *
 * Build against the installed library: make (see Makefile and README.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <rudnn/rudnn.h>

#define ROWS 4
#define COLS 8

static int check(rudnn_status_t status, const char *what)
{
    if (status == RUDNN_STATUS_SUCCESS)
        return 0;
    fprintf(stderr, "%s failed: %s: %s\n", what, rudnn_status_string(status), rudnn_last_error());
    return 1;
}

#define TRY(call)                                                                                \
    do {                                                                                         \
        if (check((call), #call))                                                                \
            goto done;                                                                           \
    } while (0)

int main(void)
{
    const float eps = 1e-6f;
    float x[ROWS * COLS], gamma[COLS], y[ROWS * COLS], expect[ROWS * COLS];
    for (int r = 0; r < ROWS; ++r)
        for (int c = 0; c < COLS; ++c)
            x[r * COLS + c] = (float)((r + 1) * (c - 3)) * 0.25f + 0.125f;
    for (int c = 0; c < COLS; ++c)
        gamma[c] = 1.0f + 0.125f * (float)c;

    /* The reference: y = x / sqrt(mean(x^2) + eps) * gamma, in double. */
    for (int r = 0; r < ROWS; ++r) {
        double ss = 0.0;
        for (int c = 0; c < COLS; ++c)
            ss += (double)x[r * COLS + c] * (double)x[r * COLS + c];
        double rstd = 1.0 / sqrt(ss / COLS + (double)eps);
        for (int c = 0; c < COLS; ++c)
            expect[r * COLS + c] = (float)((double)x[r * COLS + c] * rstd * (double)gamma[c]);
    }

    int rc = 1;
    rudnn_context_t ctx = NULL;
    rudnn_queue_t queue = NULL;
    rudnn_buffer_t bx = NULL, bg = NULL, by = NULL;
    rudnn_tensor_t tx, tg, ty;
    const int64_t dims[2] = {ROWS, COLS};
    const int64_t gdims[1] = {COLS};

    TRY(rudnn_context_create(&ctx, NULL)); /* NULL: default backend and device */
    rudnn_device_info_t info;
    TRY(rudnn_context_device_info(ctx, &info));
    printf("rudnn %s: backend %s, device %d: %s\n", rudnn_version(), info.backend, info.index,
           info.name);

    TRY(rudnn_queue_create(ctx, &queue));
    TRY(rudnn_buffer_create(ctx, sizeof x, &bx));
    TRY(rudnn_buffer_create(ctx, sizeof gamma, &bg));
    TRY(rudnn_buffer_create(ctx, sizeof y, &by));
    TRY(rudnn_tensor_init(&tx, bx, 0, RUDNN_F32, 2, dims));
    TRY(rudnn_tensor_init(&tg, bg, 0, RUDNN_F32, 1, gdims));
    TRY(rudnn_tensor_init(&ty, by, 0, RUDNN_F32, 2, dims));
    TRY(rudnn_tensor_write(queue, &tx, x, sizeof x));
    TRY(rudnn_tensor_write(queue, &tg, gamma, sizeof gamma));

    TRY(rudnn_rms_norm(queue, &tx, &tg, eps, &ty));
    TRY(rudnn_queue_synchronize(queue));
    TRY(rudnn_tensor_read(queue, &ty, y, sizeof y));

    double max_err = 0.0;
    for (int r = 0; r < ROWS; ++r) {
        printf("  y[%d] =", r);
        for (int c = 0; c < COLS; ++c) {
            int i = r * COLS + c;
            printf(" %8.5f", y[i]);
            double err = fabs((double)y[i] - (double)expect[i]) / (fabs((double)expect[i]) + 1e-6);
            if (!(err <= max_err)) /* also catches NaN */
                max_err = err;
        }
        printf("\n");
    }
    if (max_err <= 1e-5) {
        printf("ok: matches the C reference (max relative error %.2e)\n", max_err);
        rc = 0;
    } else {
        fprintf(stderr, "mismatch: max relative error %.2e against the C reference\n", max_err);
    }

done:
    if (by)
        rudnn_buffer_destroy(by);
    if (bg)
        rudnn_buffer_destroy(bg);
    if (bx)
        rudnn_buffer_destroy(bx);
    if (queue)
        rudnn_queue_destroy(queue);
    if (ctx)
        rudnn_context_destroy(ctx);
    return rc;
}
