/* rudnn_autotune_time (core/autotune.h): times candidates between queue events, for any family. */
#include <stdlib.h>
#include <string.h>

#include "autotune.h"
#include "internal.h"

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Times candidate i reps times; its median in *median. A run failure is the candidate's
 * (returned, *event_error 0); an event failure is the queue's (*event_error 1). */
static rudnn_status_t time_one(rudnn_queue_t queue, rudnn_event_t start, rudnn_event_t stop,
                               rudnn_status_t (*run)(void *arg, int i), void *arg, int i, int reps,
                               float *times, float *median, int *event_error)
{
    *event_error = 1;
    for (int r = 0; r < reps; r++) {
        rudnn_status_t st = rudnn_event_record(start, queue);
        if (st != RUDNN_STATUS_SUCCESS)
            return st;
        st = run(arg, i);
        if (st != RUDNN_STATUS_SUCCESS) {
            *event_error = 0;
            return st;
        }
        if ((st = rudnn_event_record(stop, queue)) != RUDNN_STATUS_SUCCESS ||
            (st = rudnn_event_elapsed_ms(start, stop, &times[r])) != RUDNN_STATUS_SUCCESS)
            return st;
    }
    qsort(times, (size_t)reps, sizeof *times, cmp_float);
    *median = reps % 2 ? times[reps / 2] : 0.5f * (times[reps / 2 - 1] + times[reps / 2]);
    *event_error = 0;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_autotune_time(rudnn_queue_t queue, int count, rudnn_status_t (*run)(void *arg, int i),
                                   void *arg, int reps, int *best, double *best_ms)
{
    if (!queue || !run || !best || !best_ms || count < 1 || reps < 1 || reps > 100000)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "autotune_time: needs a queue, a run callback, best, best_ms, count >= 1 "
                               "and reps in 1..100000 (count %d, reps %d)", count, reps);
    float *times = rudnn_host_malloc((size_t)reps * sizeof *times);
    unsigned char *failed = rudnn_host_calloc((size_t)count, 1);
    rudnn_event_t start = NULL, stop = NULL;
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    if (!times || !failed) {
        st = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "autotune_time: out of host memory");
        goto done;
    }
    rudnn_context_t ctx = rudnn_queue_context(queue);
    if ((st = rudnn_event_create(ctx, &start)) != RUDNN_STATUS_SUCCESS ||
        (st = rudnn_event_create(ctx, &stop)) != RUDNN_STATUS_SUCCESS)
        goto done;

    /* the last failure, kept for the message when no candidate runs */
    rudnn_status_t last = RUDNN_STATUS_SUCCESS;
    int last_i = -1;
    char last_msg[512] = "";
    /* warm-up: first-use costs (program builds, pool growth) stay out of the timings */
    for (int i = 0; i < count; i++) {
        rudnn_status_t rs = run(arg, i);
        if (rs != RUDNN_STATUS_SUCCESS) {
            failed[i] = 1;
            last = rs;
            last_i = i;
            rudnn_copy_str(last_msg, sizeof last_msg, rudnn_last_error());
        }
    }
    if ((st = rudnn_queue_synchronize(queue)) != RUDNN_STATUS_SUCCESS)
        goto done;

    int winner = -1;
    float winner_ms = 0.0f;
    for (int i = 0; i < count; i++) {
        if (failed[i])
            continue;
        float median;
        int event_error;
        rudnn_status_t rs = time_one(queue, start, stop, run, arg, i, reps, times, &median, &event_error);
        if (rs != RUDNN_STATUS_SUCCESS && event_error) {
            st = rs;
            rudnn_error_prefix("autotune_time");
            goto done;
        }
        if (rs != RUDNN_STATUS_SUCCESS) {
            last = rs;
            last_i = i;
            rudnn_copy_str(last_msg, sizeof last_msg, rudnn_last_error());
            continue;
        }
        if (winner < 0 || median < winner_ms) { /* ties go to the earlier, more preferred one */
            winner = i;
            winner_ms = median;
        }
    }
    if (winner < 0) {
        st = rudnn_set_error(last, "autotune_time: none of the %d candidate(s) ran; candidate %d: %s", count,
                             last_i, last_msg);
        goto done;
    }
    rudnn_clear_error();
    *best = winner;
    *best_ms = winner_ms;
done:
    rudnn_event_destroy(start);
    rudnn_event_destroy(stop);
    free(times);
    free(failed);
    return st;
}
