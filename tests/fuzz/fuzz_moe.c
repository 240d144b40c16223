/* libFuzzer target of the MoE family (rudnn/moe.h): routing, dispatch, combine, SwiGLU
 * experts (create, forward_dispatched, the one-call forms) and the queries on plans,
 * dispatched tokens and experts, with arbitrary descriptors, options and objects.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op, 1 logits dtype, 2 tokens (0..8),
 * 3 groups (1..4), 4 experts per group (1..4), 5 selected groups, 6 top_k, 7 hidden (1..8),
 * 8 inter (1..8), 9 flags (bit 0 group_top_two, bit 1 renormalize, bit 2 no bias, bit 3
 * tokens and weights in dtype byte>>4 instead of the logits dtype), 10 strategy, 11 kernel
 * to pin (set_kernel), 12 which query. The arguments then take one slot each, in the order
 * of the op's signature; an object argument (plan, dispatched, experts) is the valid one,
 * NULL, one of the other context, or one of another shape.
 *
 * The objects an op needs are made by the harness before the call (their calls must
 * succeed); every object, made by the harness or by an accepted call, is destroyed at the
 * end of the input, so LeakSanitizer sees any the library loses. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"

enum {
    OP_ROUTE,
    OP_ROUTE_GROUPED,
    OP_DISPATCH,
    OP_COMBINE,
    OP_EXPERTS_CREATE,
    OP_FORWARD_DISPATCHED,
    OP_FORWARD,
    OP_FORWARD_GROUPED,
    OP_QUERY,
    OP_COUNT
};

/* The valid problem the header describes. */
typedef struct problem {
    rudnn_dtype_t ldt, xdt; /* logits; tokens and weights */
    int64_t tokens, experts, hidden, inter;
    rudnn_grouped_routing_options_t grouped;
    rudnn_routing_options_t softmax;
    int no_bias;
    rudnn_moe_strategy_t strategy;
} problem_t;

static problem_t decode_problem(const fz_call_t *c)
{
    problem_t p;
    memset(&p, 0, sizeof p);
    uint8_t flags = fz_header_byte(c, 9);
    p.ldt = fz_float_dtype(fz_header_byte(c, 1));
    p.xdt = (flags & 8) ? fz_float_dtype(flags >> 4) : p.ldt;
    p.tokens = fz_small_dim(fz_header_byte(c, 2), 8, 1);
    int groups = 1 + fz_header_byte(c, 3) % 4, per_group = 1 + fz_header_byte(c, 4) % 4;
    int selected = 1 + fz_header_byte(c, 5) % groups;
    p.experts = groups * per_group;
    p.hidden = 1 + fz_header_byte(c, 7) % 8;
    p.inter = 1 + fz_header_byte(c, 8) % 8;
    int top_k = 1 + fz_header_byte(c, 6) % (per_group * selected);
    p.grouped = (rudnn_grouped_routing_options_t){.top_k = top_k, .groups = groups, .selected_groups = selected,
                                                  .group_top_two = (flags & 1) && per_group >= 2,
                                                  .renormalize = (flags >> 1) & 1, .scale = 2.5f};
    p.softmax = (rudnn_routing_options_t){.top_k = top_k, .renormalize = (flags >> 1) & 1};
    p.no_bias = (flags >> 2) & 1;
    p.strategy = (rudnn_moe_strategy_t)(fz_header_byte(c, 10) % 3);
    return p;
}

static fz_spec_t spec2(rudnn_dtype_t dt, int64_t d0, int64_t d1)
{
    fz_spec_t s = {.dtype = dt, .rank = 2, .dims = {d0, d1}};
    return s;
}

static fz_spec_t spec3(rudnn_dtype_t dt, int64_t d0, int64_t d1, int64_t d2)
{
    fz_spec_t s = {.dtype = dt, .rank = 3, .dims = {d0, d1, d2}};
    return s;
}

/* ---- objects the harness makes ------------------------------------------------------------- */

/* The harness's own tensors (logits, input, gate, up, down of its objects) live in the upper
 * half of buffers 5..7; the arguments under test in the lower half (fuzz_common.c places them
 * below 2 KiB + their size, under 8 KiB here). The other context's buffers hold only the
 * harness's tensors. Sizes: logits, input <= 1 KiB; weights <= 17 x 8 x 8 x 4 bytes. */
enum { OWN_LOGITS, OWN_INPUT, OWN_GATE, OWN_UP, OWN_DOWN, OWN_COUNT };
#define HALF (FZ_BUFFER_BYTES / 2)
static const struct own_place {
    int buffer, foreign_buffer;
    size_t offset, foreign_offset;
} own_places[OWN_COUNT] = {
    [OWN_LOGITS] = {FZ_BUFFERS - 3, 0, HALF, 0},
    [OWN_INPUT] = {FZ_BUFFERS - 2, 1, HALF, 0},
    [OWN_GATE] = {FZ_BUFFERS - 3, 0, HALF + 1024, 1024},
    [OWN_UP] = {FZ_BUFFERS - 2, 1, HALF + 1024, 1024},
    [OWN_DOWN] = {FZ_BUFFERS - 1, 0, HALF, HALF},
};

typedef struct objects {
    rudnn_routing_plan_t plans[8];
    rudnn_dispatched_t dispatched[8];
    rudnn_swiglu_experts_t experts[8];
    int nplans, ndispatched, nexperts;
} objects_t;

static rudnn_tensor_t own_tensor(const fz_call_t *c, int foreign, int role, const fz_spec_t *s)
{
    const struct own_place *at = &own_places[role];
    rudnn_buffer_t b = foreign ? c->env->foreign[at->foreign_buffer] : c->env->buf[at->buffer];
    rudnn_tensor_t t;
    fz_require("tensor_init (harness)", rudnn_tensor_init(&t, b, foreign ? at->foreign_offset : at->offset,
                                                          s->dtype, s->rank, s->dims));
    return t;
}

static rudnn_routing_plan_t make_plan(const fz_call_t *c, objects_t *o, const problem_t *p, int foreign,
                                      int64_t tokens)
{
    fz_spec_t s = spec2(p->ldt, tokens, p->experts);
    rudnn_tensor_t logits = own_tensor(c, foreign, OWN_LOGITS, &s);
    rudnn_routing_plan_t plan = NULL;
    fz_require("moe_route (harness)",
               rudnn_moe_route(foreign ? c->env->q2 : c->env->q, &logits, &p->softmax, &plan));
    o->plans[o->nplans++] = plan;
    return plan;
}

static rudnn_dispatched_t make_dispatched(const fz_call_t *c, objects_t *o, const problem_t *p, int foreign,
                                          rudnn_routing_plan_t plan, rudnn_dtype_t dt, int64_t hidden)
{
    fz_spec_t s = spec2(dt, p->tokens, hidden);
    rudnn_tensor_t input = own_tensor(c, foreign, OWN_INPUT, &s);
    rudnn_dispatched_t d = NULL;
    fz_require("moe_dispatch (harness)", rudnn_moe_dispatch(foreign ? c->env->q2 : c->env->q, plan, &input, &d));
    o->dispatched[o->ndispatched++] = d;
    return d;
}

static rudnn_swiglu_experts_t make_experts(fz_call_t *c, objects_t *o, const problem_t *p, int foreign,
                                           int64_t experts, rudnn_dtype_t dt)
{
    fz_spec_t sg = spec3(dt, experts, p->inter, p->hidden), sd = spec3(dt, experts, p->hidden, p->inter);
    rudnn_tensor_t gate = own_tensor(c, foreign, OWN_GATE, &sg);
    rudnn_tensor_t up = own_tensor(c, foreign, OWN_UP, &sg);
    rudnn_tensor_t down = own_tensor(c, foreign, OWN_DOWN, &sd);
    if (!foreign) { /* the call under test reads them */
        fz_note_input(c, &gate);
        fz_note_input(c, &up);
        fz_note_input(c, &down);
    }
    rudnn_swiglu_experts_t x = NULL;
    fz_require("swiglu_experts_create (harness)",
               rudnn_swiglu_experts_create(foreign ? c->env->ctx2 : c->env->ctx, &gate, &up, &down, &x));
    o->experts[o->nexperts++] = x;
    return x;
}

/* The plan argument: valid, NULL, of the other context, or with other tokens. */
static rudnn_routing_plan_t plan_arg(fz_call_t *c, objects_t *o, const problem_t *p)
{
    switch (fz_object_choice(c, 4)) {
    case 1: return NULL;
    case 2: return make_plan(c, o, p, 1, p->tokens);
    case 3: return make_plan(c, o, p, 0, p->tokens + 1);
    default: return make_plan(c, o, p, 0, p->tokens);
    }
}

/* The dispatched argument: valid, NULL, of the other context, or with other hidden / dtype. */
static rudnn_dispatched_t dispatched_arg(fz_call_t *c, objects_t *o, const problem_t *p)
{
    switch (fz_object_choice(c, 5)) {
    case 1: return NULL;
    case 2: return make_dispatched(c, o, p, 1, make_plan(c, o, p, 1, p->tokens), p->xdt, p->hidden);
    case 3: return make_dispatched(c, o, p, 0, make_plan(c, o, p, 0, p->tokens), p->xdt, p->hidden + 1);
    case 4:
        return make_dispatched(c, o, p, 0, make_plan(c, o, p, 0, p->tokens), fz_float_dtype(p->xdt + 1), p->hidden);
    default: return make_dispatched(c, o, p, 0, make_plan(c, o, p, 0, p->tokens), p->xdt, p->hidden);
    }
}

/* The experts argument: valid, NULL, of the other context, or with other experts / dtype;
 * the valid one may have a kernel pinned (header byte 11). */
static rudnn_swiglu_experts_t experts_arg(fz_call_t *c, objects_t *o, const problem_t *p)
{
    static const char *const pins[] = {NULL, "moe.scalar_dot", "moe.scalar_tiled", "moe.clblast_sgemm", "moe.nope"};
    switch (fz_object_choice(c, 5)) {
    case 1: return NULL;
    case 2: return make_experts(c, o, p, 1, p->experts, p->xdt);
    case 3: return make_experts(c, o, p, 0, p->experts + 1, p->xdt);
    case 4: return make_experts(c, o, p, 0, p->experts, fz_float_dtype(p->xdt + 1));
    default: break;
    }
    rudnn_swiglu_experts_t x = make_experts(c, o, p, 0, p->experts, p->xdt);
    const char *pin = pins[fz_header_byte(c, 11) % (sizeof pins / sizeof pins[0])];
    if (pin)
        fz_check(c, "swiglu_experts_set_kernel", rudnn_swiglu_experts_set_kernel(x, pin));
    return x;
}

static void destroy_objects(objects_t *o)
{
    for (int i = 0; i < o->ndispatched; i++)
        rudnn_dispatched_destroy(o->dispatched[i]);
    for (int i = 0; i < o->nplans; i++)
        rudnn_routing_plan_destroy(o->plans[i]);
    for (int i = 0; i < o->nexperts; i++)
        rudnn_swiglu_experts_destroy(o->experts[i]);
}

/* ---- the calls under test ------------------------------------------------------------------ */

/* Out-pointer values a rejected call must leave as they were. */
#define PLAN_SENTINEL ((rudnn_routing_plan_t)(uintptr_t)0x5eed0)
#define DISPATCHED_SENTINEL ((rudnn_dispatched_t)(uintptr_t)0x5eed1)
#define EXPERTS_SENTINEL ((rudnn_swiglu_experts_t)(uintptr_t)0x5eed2)

/* After a creating call: on success keep the object for destruction, else the out value must
 * be untouched. */
static void created(const char *op, rudnn_status_t st, void *out, void *sentinel)
{
    if (st == RUDNN_STATUS_SUCCESS ? out == sentinel || out == NULL : out != sentinel)
        fz_fail(st ? "a rejected call wrote its out handle" : "an accepted call returned no object", op, st);
}

static void route_options(fz_call_t *c, const problem_t *p, rudnn_routing_options_t *o)
{
    o->top_k = fz_int(c, p->softmax.top_k);
    o->renormalize = fz_int(c, p->softmax.renormalize);
}

static void grouped_options(fz_call_t *c, const problem_t *p, rudnn_grouped_routing_options_t *o)
{
    o->top_k = fz_int(c, p->grouped.top_k);
    o->groups = fz_int(c, p->grouped.groups);
    o->selected_groups = fz_int(c, p->grouped.selected_groups);
    o->group_top_two = fz_int(c, p->grouped.group_top_two);
    o->renormalize = fz_int(c, p->grouped.renormalize);
    o->scale = fz_float(c, p->grouped.scale);
}

static void op_route(fz_call_t *c, objects_t *o, const problem_t *p, int grouped)
{
    rudnn_queue_t q = fz_queue(c);
    fz_spec_t ls = spec2(p->ldt, p->tokens, p->experts), bs = {.dtype = RUDNN_F32, .rank = 1, .dims = {p->experts}};
    const rudnn_tensor_t *logits = fz_tensor(c, &ls, 0);
    const rudnn_tensor_t *bias = grouped ? fz_optional_tensor(c, &bs, p->no_bias) : NULL;
    rudnn_routing_options_t so;
    rudnn_grouped_routing_options_t go;
    int has_options = fz_object_choice(c, 2) == 0;
    if (grouped)
        grouped_options(c, p, &go);
    else
        route_options(c, p, &so);
    rudnn_routing_plan_t plan = PLAN_SENTINEL;
    rudnn_routing_plan_t *out = fz_object_choice(c, 2) == 0 ? &plan : NULL;
    const char *op = grouped ? "moe_route_sigmoid_grouped" : "moe_route";
    rudnn_status_t st = grouped ? rudnn_moe_route_sigmoid_grouped(q, logits, bias, has_options ? &go : NULL, out)
                                : rudnn_moe_route(q, logits, has_options ? &so : NULL, out);
    fz_check(c, op, st);
    if (out) {
        created(op, st, plan, PLAN_SENTINEL);
        if (!st)
            o->plans[o->nplans++] = plan;
    }
}

static void op_dispatch(fz_call_t *c, objects_t *o, const problem_t *p)
{
    rudnn_queue_t q = fz_queue(c);
    rudnn_routing_plan_t plan = plan_arg(c, o, p);
    fz_spec_t is = spec2(p->xdt, p->tokens, p->hidden);
    const rudnn_tensor_t *input = fz_tensor(c, &is, 0);
    rudnn_dispatched_t d = DISPATCHED_SENTINEL;
    rudnn_dispatched_t *out = fz_object_choice(c, 2) == 0 ? &d : NULL;
    rudnn_status_t st = fz_check(c, "moe_dispatch", rudnn_moe_dispatch(q, plan, input, out));
    if (out) {
        created("moe_dispatch", st, d, DISPATCHED_SENTINEL);
        if (!st)
            o->dispatched[o->ndispatched++] = d;
    }
}

static void op_combine(fz_call_t *c, objects_t *o, const problem_t *p)
{
    rudnn_queue_t q = fz_queue(c);
    rudnn_dispatched_t d = dispatched_arg(c, o, p);
    int64_t rows = p->tokens * p->softmax.top_k;
    fz_spec_t es = spec2(p->xdt, rows, p->hidden), os = spec2(p->xdt, p->tokens, p->hidden);
    const rudnn_tensor_t *expert_output = fz_tensor(c, &es, 0);
    const rudnn_tensor_t *output = fz_tensor(c, &os, 1);
    fz_check(c, "moe_combine", rudnn_moe_combine(q, d, expert_output, output));
}

static void op_experts_create(fz_call_t *c, objects_t *o, const problem_t *p)
{
    rudnn_context_t ctx = c->env->ctx;
    int which = fz_object_choice(c, 3);
    if (which)
        ctx = which == 1 ? NULL : c->env->ctx2;
    fz_spec_t sg = spec3(p->xdt, p->experts, p->inter, p->hidden), sd = spec3(p->xdt, p->experts, p->hidden, p->inter);
    const rudnn_tensor_t *gate = fz_tensor(c, &sg, 0);
    const rudnn_tensor_t *up = fz_tensor(c, &sg, 0);
    const rudnn_tensor_t *down = fz_tensor(c, &sd, 0);
    rudnn_swiglu_experts_t x = EXPERTS_SENTINEL;
    rudnn_swiglu_experts_t *out = fz_object_choice(c, 2) == 0 ? &x : NULL;
    rudnn_status_t st = fz_check(c, "swiglu_experts_create", rudnn_swiglu_experts_create(ctx, gate, up, down, out));
    if (out) {
        created("swiglu_experts_create", st, x, EXPERTS_SENTINEL);
        if (!st)
            o->experts[o->nexperts++] = x;
    }
}

static void op_forward_dispatched(fz_call_t *c, objects_t *o, const problem_t *p)
{
    rudnn_queue_t q = fz_queue(c);
    rudnn_swiglu_experts_t x = experts_arg(c, o, p);
    rudnn_dispatched_t d = dispatched_arg(c, o, p);
    rudnn_moe_strategy_t strategy = (rudnn_moe_strategy_t)fz_int(c, (int)p->strategy);
    size_t need = 0;
    if (x && rudnn_swiglu_experts_workspace_size(x, p->tokens * p->softmax.top_k, strategy, &need))
        need = 0; /* the call under test reports why */
    size_t ws_bytes;
    rudnn_buffer_t ws = fz_workspace(c, need, &ws_bytes);
    fz_spec_t es = spec2(p->xdt, p->tokens * p->softmax.top_k, p->hidden);
    const rudnn_tensor_t *expert_output = fz_tensor(c, &es, 1);
    fz_check(c, "swiglu_experts_forward_dispatched",
             rudnn_swiglu_experts_forward_dispatched(q, x, d, strategy, ws, ws_bytes, expert_output));
}

static void op_forward(fz_call_t *c, objects_t *o, const problem_t *p, int grouped)
{
    rudnn_queue_t q = fz_queue(c);
    rudnn_swiglu_experts_t x = experts_arg(c, o, p);
    fz_spec_t xs = spec2(p->xdt, p->tokens, p->hidden), ls = spec2(p->ldt, p->tokens, p->experts);
    fz_spec_t bs = {.dtype = RUDNN_F32, .rank = 1, .dims = {p->experts}};
    const rudnn_tensor_t *input = fz_tensor(c, &xs, 0);
    const rudnn_tensor_t *logits = fz_tensor(c, &ls, 0);
    const rudnn_tensor_t *bias = grouped ? fz_optional_tensor(c, &bs, p->no_bias) : NULL;
    rudnn_routing_options_t so;
    rudnn_grouped_routing_options_t go;
    int has_options = fz_object_choice(c, 2) == 0;
    if (grouped)
        grouped_options(c, p, &go);
    else
        route_options(c, p, &so);
    rudnn_moe_strategy_t strategy = (rudnn_moe_strategy_t)fz_int(c, (int)p->strategy);
    const rudnn_tensor_t *output = fz_tensor(c, &xs, 1);
    if (grouped)
        fz_check(c, "swiglu_experts_forward_sigmoid_grouped",
                 rudnn_swiglu_experts_forward_sigmoid_grouped(q, x, input, logits, bias, has_options ? &go : NULL,
                                                              strategy, output));
    else
        fz_check(c, "swiglu_experts_forward",
                 rudnn_swiglu_experts_forward(q, x, input, logits, has_options ? &so : NULL, output));
}

/* A view a plan or dispatched object hands out must lie inside its buffer. */
static void check_view(const char *op, rudnn_status_t st, const rudnn_tensor_t *t)
{
    if (st)
        return;
    size_t size = rudnn_buffer_size(t->buffer);
    if (!t->buffer || !rudnn_tensor_is_contiguous(t) || t->offset > size ||
        rudnn_tensor_bytes(t) > size - t->offset)
        fz_fail("a view is not a contiguous tensor inside its buffer", op, st);
}

static void op_query(fz_call_t *c, objects_t *o, const problem_t *p)
{
    int null_out = fz_object_choice(c, 2);
    rudnn_moe_strategy_t strategy = (rudnn_moe_strategy_t)fz_int(c, (int)p->strategy);
    rudnn_tensor_t view;
    rudnn_tensor_t *v = null_out ? NULL : &view;
    switch (fz_header_byte(c, 12) % 10) {
    case 0: {
        rudnn_swiglu_experts_t x = experts_arg(c, o, p);
        rudnn_dispatched_t d = dispatched_arg(c, o, p);
        fz_spec_t es = spec2(p->xdt, p->tokens * p->softmax.top_k, p->hidden);
        const rudnn_tensor_t *eo = fz_optional_tensor(c, &es, 0);
        rudnn_moe_choice_t choice;
        fz_check(c, "swiglu_experts_choose",
                 rudnn_swiglu_experts_choose(x, d, eo, strategy, null_out ? NULL : &choice));
        break;
    }
    case 1: {
        rudnn_moe_strategy_t resolved;
        fz_check(c, "swiglu_experts_resolve",
                 rudnn_swiglu_experts_resolve(experts_arg(c, o, p), strategy, null_out ? NULL : &resolved));
        break;
    }
    case 2: {
        rudnn_swiglu_experts_t x = experts_arg(c, o, p);
        int64_t rows = fz_i64(c, p->tokens * p->softmax.top_k);
        size_t bytes;
        rudnn_status_t st = fz_check(c, "swiglu_experts_workspace_size",
                                     rudnn_swiglu_experts_workspace_size(x, rows, strategy, null_out ? NULL : &bytes));
        /* every kernel stages act [rows, inter] in the dtype (2 bytes or more): an accepted size
         * holds it (every experts object of the harness has inter p->inter) */
        unsigned __int128 act = (unsigned __int128)(uint64_t)rows * (uint64_t)p->inter * 2u;
        if (!st && act > bytes)
            fz_fail("workspace_size is smaller than the act staging [rows, inter]", "swiglu_experts_workspace_size", st);
        break;
    }
    case 3: {
        int count;
        fz_check(c, "swiglu_experts_kernel_count",
                 rudnn_swiglu_experts_kernel_count(experts_arg(c, o, p), null_out ? NULL : &count));
        break;
    }
    case 4: {
        rudnn_swiglu_experts_t x = experts_arg(c, o, p);
        int index = fz_int(c, 0);
        const char *name;
        rudnn_moe_strategy_t s;
        fz_check(c, "swiglu_experts_kernel_info",
                 rudnn_swiglu_experts_kernel_info(x, index, null_out ? NULL : &name, &s));
        break;
    }
    case 5: {
        rudnn_routing_plan_t plan = plan_arg(c, o, p);
        check_view("routing_plan_indices",
                   fz_check(c, "routing_plan_indices", rudnn_routing_plan_indices(plan, v)), v);
        check_view("routing_plan_weights",
                   fz_check(c, "routing_plan_weights", rudnn_routing_plan_weights(plan, v)), v);
        break;
    }
    default: {
        rudnn_dispatched_t d = dispatched_arg(c, o, p);
        check_view("dispatched_tokens", fz_check(c, "dispatched_tokens", rudnn_dispatched_tokens(d, v)), v);
        check_view("dispatched_counts", fz_check(c, "dispatched_counts", rudnn_dispatched_counts(d, v)), v);
        check_view("dispatched_offsets", fz_check(c, "dispatched_offsets", rudnn_dispatched_offsets(d, v)), v);
        check_view("dispatched_positions",
                   fz_check(c, "dispatched_positions", rudnn_dispatched_positions(d, v)), v);
        break;
    }
    }
}

/* The one-call forms run every MoE program: routing per logits dtype, experts per token
 * dtype (Scalar, and TensorCore: CLBlast), combine per token x logits dtype. */
void fz_warmup(void)
{
    static const uint8_t ops[] = {OP_FORWARD, OP_FORWARD_GROUPED};
    for (size_t i = 0; i < sizeof ops; i++)
        for (uint8_t ldt = 0; ldt < 3; ldt++)
            for (uint8_t xdt = 0; xdt < 3; xdt++)
                for (uint8_t strategy = 0; strategy < 3; strategy += 2)
                    fz_run_header((const uint8_t[FZ_SLOT]){[0] = ops[i], [1] = ldt, [2] = 1, [9] = 8 | xdt << 4,
                                                           [10] = strategy});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    problem_t p = decode_problem(&c);
    objects_t o;
    memset(&o, 0, sizeof o);
    switch (fz_header_byte(&c, 0) % OP_COUNT) {
    case OP_ROUTE: op_route(&c, &o, &p, 0); break;
    case OP_ROUTE_GROUPED: op_route(&c, &o, &p, 1); break;
    case OP_DISPATCH: op_dispatch(&c, &o, &p); break;
    case OP_COMBINE: op_combine(&c, &o, &p); break;
    case OP_EXPERTS_CREATE: op_experts_create(&c, &o, &p); break;
    case OP_FORWARD_DISPATCHED: op_forward_dispatched(&c, &o, &p); break;
    case OP_FORWARD: op_forward(&c, &o, &p, 0); break;
    case OP_FORWARD_GROUPED: op_forward(&c, &o, &p, 1); break;
    default: op_query(&c, &o, &p); break;
    }
    destroy_objects(&o);
    return 0;
}
