/* The contract suites' shared fixture and rejection check (contract_fixture.h). */
#include "contract_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "operand.h"

void contract_fixture_setup(contract_fixture_t *f, int count, const char *const *names, const rudnn_dtype_t *dtypes,
                            const int *ranks, const int64_t *const *dims, size_t slack, size_t ws_bytes,
                            void (*fill_inputs)(void))
{
    if (count < 1 || count > CONTRACT_MAX_TENSORS) {
        fprintf(stderr, "contract_fixture_setup: %d tensors (1 to %d)\n", count, CONTRACT_MAX_TENSORS);
        exit(1);
    }
    memset(f, 0, sizeof *f);
    f->count = count;
    f->fill_inputs = fill_inputs;
    for (int i = 0; i < count; i++) {
        rt_tensor_create(&f->t[i], dtypes ? dtypes[i] : RUDNN_F32, ranks ? ranks[i] : 4, dims[i], 0, slack);
        rt_guard_track(&f->guard, rt_queue, &f->t[i], names[i]);
    }
    if (ws_bytes) {
        rt_assert_status(rudnn_buffer_create(rt_ctx, ws_bytes, &f->ws), RUDNN_STATUS_SUCCESS);
        f->ws_bytes = ws_bytes;
        rt_guard_track_buffer(&f->guard, rt_queue, f->ws, ws_bytes, "workspace");
    }
    if (fill_inputs)
        fill_inputs(); /* the outputs keep create's sentinel */
}

int contract_fixture_teardown(contract_fixture_t *f, void **state)
{
    for (int i = 0; i < f->count; i++)
        rt_tensor_destroy(&f->t[i]);
    if (f->ws)
        rudnn_buffer_destroy(f->ws);
    f->ws = NULL;
    rt_guard_free(&f->guard);
    return rt_group_teardown_second(state);
}

void contract_fixture_restore(contract_fixture_t *f)
{
    rudnn_queue_synchronize(rt_queue);
    for (int i = 0; i < f->count; i++)
        rt_tensor_poison(&f->t[i]);
    if (f->fill_inputs)
        f->fill_inputs();
    for (int i = 0; i < f->guard.count; i++)
        rt_guard_snapshot(&f->guard.items[i]);
}

int contract_message_starts(const char *msg, const char *op, const char *n1, const char *n2, const char *n3)
{
    const size_t len = strlen(op);
    if (strncmp(msg, op, len) != 0 || msg[len] != ':')
        return 0;
    const char *need[3] = {n1, n2, n3};
    for (int i = 0; i < 3; i++)
        if (need[i] && !strstr(msg, need[i]))
            return 0;
    return 1;
}

void contract_check_rejection(const char *where, rudnn_status_t st, rudnn_status_t want, const char *msg, int named,
                              const char *op, int op_prefix, const char *n1, const char *n2, const char *n3)
{
    if (st != want)
        rt_failf("%s: returned %s, expected %s (\"%s\")", where, rudnn_status_string(st), rudnn_status_string(want),
                 msg);
    else if (!named && op_prefix)
        rt_failf("%s: message \"%s\" does not start with \"%s:\" or name %s / %s / %s", where, msg, op,
                 n1 ? n1 : "-", n2 ? n2 : "-", n3 ? n3 : "-");
    else if (!named)
        rt_failf("%s: message \"%s\" does not name %s / %s / %s / %s", where, msg, op, n1 ? n1 : "-", n2 ? n2 : "-",
                 n3 ? n3 : "-");
}

int contract_check_untouched(contract_fixture_t *f, const char *where, const char *call)
{
    if (!rt_guard_changed(&f->guard))
        return 0;
    for (int i = 0; i < f->guard.count; i++)
        if (f->guard.items[i].changed)
            rt_failf("%s: %s wrote to %s's buffer", where, call, f->guard.items[i].name);
    contract_fixture_restore(f);
    return 1;
}

void contract_expect_reject(contract_fixture_t *f, const contract_family_t *fam, const void *spec, unsigned calls,
                            rudnn_status_t want, const char *n1, const char *n2, const char *n3, const char *what)
{
    for (int k = 0; k < fam->calls; k++) {
        if (!((calls >> k) & 1))
            continue;
        rt_guard_begin(&f->guard);
        size_t bytes = fam->bytes_sentinel;
        const rudnn_status_t st = fam->call(spec, k, &bytes);
        char msg[1024], where[1024], call[96];
        snprintf(msg, sizeof msg, "%s", rudnn_last_error());
        snprintf(where, sizeof where, "%s [%s]", what, fam->ops[k]);
        const int named = fam->names      ? fam->names(msg, k, n1, n2, n3)
                          : fam->op_prefix ? contract_message_starts(msg, fam->ops[k], n1, n2, n3)
                                           : rt_message_names(msg, fam->ops[k], n1, n2, n3);
        contract_check_rejection(where, st, want, msg, named, fam->ops[k], fam->op_prefix, n1, n2, n3);
        if (fam->bytes_sentinel && bytes != fam->bytes_sentinel)
            rt_failf("%s: a rejected query wrote *bytes (%zu)", where, bytes);
        snprintf(call, sizeof call, "a rejected call (%s)", rudnn_status_string(st));
        contract_check_untouched(f, where, call);
    }
}
