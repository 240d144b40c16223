/* Which of a family's kernel candidates runs (hal/table.h, docs/ARCHITECTURE.md "Candidates"),
 * for any family with strategies and an Autotune strategy: the one place that surveys what the
 * backend says of each candidate, takes the static choice, consults the autotune cache, and on a
 * cold key times the candidates and stores the winner. The family supplies its candidates, its
 * check, its key and its runs through the callbacks. */
#ifndef RUDNN_OPS_CHOOSE_H
#define RUDNN_OPS_CHOOSE_H

#include "core/autotune.h"
#include "validate.h"

#define RUDNN_CHOOSE_MAX_CANDIDATES 32

typedef struct rudnn_choose_request {
    const char *op;                             /* error prefix */
    rudnn_context_t context;
    const rudnn_kernel_candidate_t *candidates; /* the backend's table */
    uint32_t count;
    int requested;                              /* the strategy asked for */
    int autotune;                               /* the family's Autotune value: any strategy, tuned */
    const char *(*strategy_name)(int strategy);
    /* Candidate i belongs to this request at all (NULL: every candidate does), e.g. its direction. */
    int (*applies)(void *arg, uint32_t i);
    /* The backend's verdict on candidate i for this request's plan. */
    void (*check)(void *arg, uint32_t i, rudnn_candidate_verdict_t *verdict);
    void *arg;
    /* The autotune key's parts after the device's ("<dtype>|<shape bucket>|..."); NULL: no key
     * (the static choice always). family names the key's op. */
    const char *family;
    const char *key_rest;
    /* The request, for the message when nothing runs ("F32 [N 2, C 4, ...]"). */
    const char *what;
} rudnn_choose_request_t;

typedef struct rudnn_choice_made {
    uint32_t picked;          /* index into the candidates */
    int tune;                 /* 1: Autotune with a cold key: the call times runs[], then stores */
    uint32_t runs[RUDNN_CHOOSE_MAX_CANDIDATES], count; /* candidates that run, in table order */
    char key[RUDNN_AUTOTUNE_KEY_MAX];
    char reason[512];         /* the candidates passed over and why, then why the pick */
} rudnn_choice_made_t;

/* An explicit strategy takes its first candidate that runs and is preferred, else its first that
 * runs; Autotune takes the cached winner, else (cold cache) that static choice over every strategy,
 * marking the choice to be tuned (RUDNN_AUTOTUNE=off or no key: the static choice). NOT_SUPPORTED,
 * naming every candidate's reason, when none of the strategy exists or runs. */
rudnn_status_t rudnn_choose(const rudnn_choose_request_t *r, rudnn_choice_made_t *d);

/* Appends "; <what>: <why>" to the choice's reason. */
void rudnn_choice_note(rudnn_choice_made_t *d, const char *what, const char *why);

/* How a family runs one candidate. */
typedef struct rudnn_candidate_runner {
    /* Workspace bytes candidate c needs. */
    rudnn_status_t (*workspace)(void *arg, uint32_t c, size_t *bytes);
    /* Enqueues candidate c with workspace mem (NULL when it needs none). */
    rudnn_status_t (*run)(void *arg, uint32_t c, void *workspace_mem);
    void *arg;
} rudnn_candidate_runner_t;

/* Runs d->picked, or with d->tune times every candidate of d->runs whose workspace fits the
 * caller's (all of them with the pool), stores the winner (when all were timed) and runs it once
 * more so the outputs hold its result. workspace NULL: blocks of the queue's pool. The caller
 * checked its workspace against the picked candidate's need. Errors carry the op prefix. */
rudnn_status_t rudnn_run_choice(const char *op, rudnn_queue_t queue, const rudnn_kernel_candidate_t *candidates,
                                const rudnn_choice_made_t *d, rudnn_buffer_t workspace, size_t workspace_bytes,
                                const rudnn_candidate_runner_t *runner);

#endif
