/* The candidate choice and its autotuning, shared by the families with strategies (choose.h). */
#include <stdio.h>
#include <string.h>

#include "choose.h"

#define TUNE_REPS 5

void rudnn_choice_note(rudnn_choice_made_t *d, const char *what, const char *why)
{
    size_t n = strlen(d->reason);
    if (n + 3 < sizeof d->reason)
        snprintf(d->reason + n, sizeof d->reason - n, "%s%s: %s", n ? "; " : "", what, why);
}

static void pick(const rudnn_choose_request_t *r, rudnn_choice_made_t *d, uint32_t i, const char *why)
{
    d->picked = i;
    rudnn_choice_note(d, r->candidates[i].name, why);
}

rudnn_status_t rudnn_choose(const rudnn_choose_request_t *r, rudnn_choice_made_t *d)
{
    memset(d, 0, sizeof *d);
    int offered = 0;
    int64_t first_preferred = -1;
    for (uint32_t i = 0; i < r->count && d->count < RUDNN_CHOOSE_MAX_CANDIDATES; i++) {
        const rudnn_kernel_candidate_t *c = &r->candidates[i];
        if ((c->flags & RUDNN_CANDIDATE_NAMED_ONLY) || (r->applies && !r->applies(r->arg, i)) ||
            (r->requested != r->autotune && c->strategy != r->requested))
            continue;
        offered++;
        rudnn_candidate_verdict_t v;
        memset(&v, 0, sizeof v);
        r->check(r->arg, i, &v);
        if (v.runs) {
            if (v.preferred && first_preferred < 0)
                first_preferred = i;
            d->runs[d->count++] = i;
        }
        if (!v.runs || !v.preferred)
            rudnn_choice_note(d, c->name, v.why[0] ? v.why : v.runs ? "not preferred here" : "does not run here");
    }
    const char *backend = r->context->backend->name;
    if (!offered)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: no %s kernel on backend '%s'", r->op,
                               r->strategy_name(r->requested), backend);
    if (!d->count)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: %s strategy on backend '%s' with %s: no kernel runs "
                               "here (%s)", r->op, r->strategy_name(r->requested), backend, r->what, d->reason);
    const uint32_t fixed = first_preferred >= 0 ? (uint32_t)first_preferred : d->runs[0];
    const char *static_why = first_preferred >= 0 ? "chosen" : "chosen, the first that runs (none is preferred here)";
    if (r->requested != r->autotune || d->count == 1) {
        pick(r, d, fixed, r->requested == r->autotune ? "the only candidate that runs here" : static_why);
        return RUDNN_STATUS_SUCCESS;
    }
    if (!rudnn_autotune_enabled()) {
        pick(r, d, fixed, "static choice (autotuning is off: RUDNN_AUTOTUNE=off)");
        return RUDNN_STATUS_SUCCESS;
    }
    if (!r->key_rest || rudnn_autotune_key(d->key, sizeof d->key, r->family, r->context, r->key_rest)) {
        pick(r, d, fixed, "static choice (no autotune key)");
        rudnn_clear_error();
        return RUDNN_STATUS_SUCCESS;
    }
    char winner[RUDNN_AUTOTUNE_NAME_MAX];
    if (rudnn_autotune_lookup(d->key, winner, sizeof winner)) {
        for (uint32_t i = 0; i < d->count; i++) {
            if (strcmp(r->candidates[d->runs[i]].name, winner) == 0) {
                d->reason[0] = '\0'; /* the others were timed, not passed over */
                pick(r, d, d->runs[i], "autotuned: the cached winner of this shape bucket");
                return RUDNN_STATUS_SUCCESS;
            }
        }
        char why[RUDNN_AUTOTUNE_NAME_MAX + 80];
        snprintf(why, sizeof why, "static choice (the cached winner %s does not run here)", winner);
        pick(r, d, fixed, why);
        return RUDNN_STATUS_SUCCESS;
    }
    d->tune = 1;
    pick(r, d, fixed, "static choice; the first call tunes this shape");
    return RUDNN_STATUS_SUCCESS;
}

typedef struct timing {
    const rudnn_candidate_runner_t *runner;
    const uint32_t *cands;
    const size_t *needs;
    void *mem;
} timing_t;

static rudnn_status_t run_timed(void *arg, int i)
{
    const timing_t *t = arg;
    return t->runner->run(t->runner->arg, t->cands[i], t->needs[i] ? t->mem : NULL);
}

rudnn_status_t rudnn_run_choice(const char *op, rudnn_queue_t queue, const rudnn_kernel_candidate_t *candidates,
                                const rudnn_choice_made_t *d, rudnn_buffer_t workspace, size_t workspace_bytes,
                                const rudnn_candidate_runner_t *runner)
{
    uint32_t cands[RUDNN_CHOOSE_MAX_CANDIDATES];
    size_t needs[RUDNN_CHOOSE_MAX_CANDIDATES];
    int n = 0;
    size_t most = 0;
    if (d->tune) {
        for (uint32_t i = 0; i < d->count; i++) {
            size_t need = 0;
            TRY(rudnn_kernel_status(op, runner->workspace(runner->arg, d->runs[i], &need)));
            if (workspace && need > workspace_bytes)
                continue; /* the caller sized the workspace for the static choice */
            cands[n] = d->runs[i];
            needs[n++] = need;
            most = need > most ? need : most;
        }
    } else {
        cands[0] = d->picked;
        TRY(rudnn_kernel_status(op, runner->workspace(runner->arg, d->picked, &needs[0])));
        most = needs[0];
        n = 1;
    }
    void *mem = NULL;
    const int scratch = workspace || most;
    if (scratch)
        TRY(rudnn_scratch_begin(op, queue, workspace, most, &mem));
    rudnn_status_t st;
    if (d->tune) {
        timing_t t = {runner, cands, needs, mem};
        int best = 0;
        double best_ms = 0;
        st = rudnn_autotune_time(queue, n, run_timed, &t, TUNE_REPS, &best, &best_ms);
        if (!st) {
            if ((uint32_t)n == d->count) /* a winner among only those that fit is not the key's */
                rudnn_autotune_store(d->key, candidates[cands[best]].name, best_ms);
            st = runner->run(runner->arg, cands[best], needs[best] ? mem : NULL);
        }
        if (!st)
            rudnn_clear_error(); /* candidates skipped while timing left their messages */
    } else {
        st = runner->run(runner->arg, cands[0], needs[0] ? mem : NULL);
    }
    if (scratch)
        rudnn_scratch_end(queue, workspace, mem, most);
    return rudnn_kernel_status(op, st);
}
