/* Paged attention's host plan (rudnn/paged_attention.h): the schedule's checks and the device
 * image of hal/paged_attention.h built from it, once per step. No GPU API here. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "paged_internal.h"
#include "validate.h"

#define OP "rudnn_paged_host_plan_create"

static rudnn_status_t check_sizes(const rudnn_paged_schedule_t *s)
{
    if (s->page_size < 1 || s->page_size > INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: schedule.page_size = %lld, expected 1..%d", OP,
                               (long long)s->page_size, INT32_MAX);
    if (s->pages < 1 || s->pages > INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: schedule.pages = %lld, expected 1..%d", OP,
                               (long long)s->pages, INT32_MAX);
    if (s->sequences < 1 || s->sequences >= INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: schedule.sequences = %lld, expected 1..%d", OP,
                               (long long)s->sequences, INT32_MAX - 1);
    if (s->queries < 0 || s->queries >= INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: schedule.queries = %lld, expected 0..%d", OP,
                               (long long)s->queries, INT32_MAX - 1);
    TRY(rudnn_check_arg(OP, "schedule.lengths", s->lengths));
    TRY(rudnn_check_arg(OP, "schedule.table_offsets", s->table_offsets));
    if (s->queries) {
        TRY(rudnn_check_arg(OP, "schedule.sequence_ids", s->sequence_ids));
        TRY(rudnn_check_arg(OP, "schedule.positions", s->positions));
    }
    return RUDNN_STATUS_SUCCESS;
}

/* A set of int64 keys, each with the index that put it there, by open addressing (at most half
 * full): the schedule's repeat checks in time linear in the entries, with scratch by the entries
 * checked at once (a history, a step's queries), never by the cache's page count. A sort of the
 * entries was 24 ms for a step of 128 histories of 2,048 pages. */
typedef struct seen_slot {
    int64_t key, at; /* at < 0: empty */
} seen_slot_t;

typedef struct seen_set {
    seen_slot_t *slot;
    int bits; /* 2^bits slots in use */
} seen_set_t;

/* Slots for n keys at most half full. */
static int seen_bits(int64_t n)
{
    int bits = 4;
    while (((int64_t)1 << bits) < 2 * n)
        bits++;
    return bits;
}

/* Empties the first 2^seen_bits(n) slots of set (allocated for at least n keys) for n keys. */
static void seen_reset(seen_set_t *set, int64_t n)
{
    set->bits = seen_bits(n);
    memset(set->slot, 0xff, sizeof *set->slot << set->bits);
}

/* The index key was put with, or -1 after putting it with index at. */
static int64_t seen_put(seen_set_t *set, int64_t key, int64_t at)
{
    const uint64_t mask = ((uint64_t)1 << set->bits) - 1;
    uint64_t i = ((uint64_t)key * 0x9E3779B97F4A7C15ull) >> (64 - set->bits);
    for (;; i = (i + 1) & mask) {
        seen_slot_t *e = &set->slot[i];
        if (e->at < 0) {
            e->key = key, e->at = at;
            return -1;
        }
        if (e->key == key)
            return e->at;
    }
}

static rudnn_status_t seen_alloc(seen_set_t *set, int64_t n, const char *what)
{
    set->slot = rudnn_host_malloc(sizeof *set->slot << seen_bits(n));
    if (!set->slot)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory for the %s", OP, what);
    return RUDNN_STATUS_SUCCESS;
}

/* Lengths, table offsets and each history's pages: in range and distinct. Counts the history
 * entries (those the device image keeps) into *used. */
static rudnn_status_t check_tables(const rudnn_paged_schedule_t *s, int64_t *used)
{
    const int64_t n = s->sequences, ps = s->page_size;
    if (s->table_offsets[0] != 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: schedule.table_offsets[0] = %lld, expected 0", OP,
                               (long long)s->table_offsets[0]);
    *used = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t len = s->lengths[i], lo = s->table_offsets[i], hi = s->table_offsets[i + 1];
        if (len < 0 || len > INT32_MAX)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: schedule.lengths[%lld] = %lld, expected 0..%d", OP,
                                   (long long)i, (long long)len, INT32_MAX);
        if (hi < lo)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: schedule.table_offsets[%lld] = %lld is below "
                                   "table_offsets[%lld] = %lld: offsets must not decrease", OP, (long long)(i + 1),
                                   (long long)hi, (long long)i, (long long)lo);
        const int64_t need = (len + ps - 1) / ps;
        if (hi - lo < need)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: sequence %lld has a page table of %lld entries, "
                                   "shorter than ceil(length %lld / page_size %lld) = %lld", OP, (long long)i,
                                   (long long)(hi - lo), (long long)len, (long long)ps, (long long)need);
        *used += need;
    }
    if (s->table_offsets[n] > INT32_MAX || *used > INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: %lld page-table entries: more than %d are not "
                               "supported", OP, (long long)s->table_offsets[n], INT32_MAX);
    if (*used)
        TRY(rudnn_check_arg(OP, "schedule.tables", s->tables));

    /* Pages in range, and none repeated within one history (the first entry that repeats an
     * earlier one is named). */
    int64_t longest = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t need = (s->lengths[i] + ps - 1) / ps;
        longest = need > longest ? need : longest;
    }
    if (!longest)
        return RUDNN_STATUS_SUCCESS;
    seen_set_t seen;
    TRY(seen_alloc(&seen, longest, "page check"));
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    for (int64_t i = 0; i < n && !st; i++) {
        const int64_t need = (s->lengths[i] + ps - 1) / ps;
        const int32_t *table = s->tables + s->table_offsets[i];
        seen_reset(&seen, need);
        for (int64_t e = 0; e < need && !st; e++) {
            const int32_t page = table[e];
            if (page < 0 || page >= s->pages) {
                st = rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: sequence %lld, table entry %lld (tables[%lld]) "
                                     "= %d is outside the cache's pages [0, %lld)", OP, (long long)i, (long long)e,
                                     (long long)(s->table_offsets[i] + e), (int)page, (long long)s->pages);
                break;
            }
            const int64_t first = seen_put(&seen, page, e);
            if (first >= 0)
                st = rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: sequence %lld, table entry %lld (tables[%lld]) "
                                     "repeats page %d (entry %lld) within one history", OP, (long long)i,
                                     (long long)e, (long long)(s->table_offsets[i] + e), (int)page,
                                     (long long)first);
        }
    }
    free(seen.slot);
    return st;
}

static rudnn_status_t check_queries(const rudnn_paged_schedule_t *s)
{
    for (int64_t q = 0; q < s->queries; q++) {
        const int64_t sid = s->sequence_ids[q], pos = s->positions[q];
        if (sid < 0 || sid >= s->sequences)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: schedule.sequence_ids[%lld] = %lld is not a "
                                   "sequence (0..%lld)", OP, (long long)q, (long long)sid,
                                   (long long)(s->sequences - 1));
        if (q && sid < s->sequence_ids[q - 1])
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: schedule.sequence_ids[%lld] = %lld follows %lld: "
                                   "queries must be sorted by sequence", OP, (long long)q, (long long)sid,
                                   (long long)s->sequence_ids[q - 1]);
        if (pos < 0 || pos > s->lengths[sid])
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: schedule.positions[%lld] = %lld is %s sequence "
                                   "%lld of length %lld", OP, (long long)q, (long long)pos,
                                   pos < 0 ? "negative, in" : "past the length of", (long long)sid,
                                   (long long)s->lengths[sid]);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* What an append of this schedule would do wrong, if anything: a query with no cache row
 * (pos == len), or two queries writing one physical row. */
static rudnn_status_t append_faults(const rudnn_paged_schedule_t *s, rudnn_paged_host_plan_t h)
{
    h->no_row_query = -1, h->dup_query[0] = h->dup_query[1] = -1;
    for (int64_t q = 0; q < s->queries; q++)
        if (s->positions[q] == s->lengths[s->sequence_ids[q]]) {
            h->no_row_query = q;
            return RUDNN_STATUS_SUCCESS;
        }
    if (s->queries < 2)
        return RUDNN_STATUS_SUCCESS;
    seen_set_t seen;
    TRY(seen_alloc(&seen, s->queries, "append check"));
    seen_reset(&seen, s->queries);
    for (int64_t q = 0; q < s->queries; q++) {
        const int64_t sid = s->sequence_ids[q], pos = s->positions[q];
        const int64_t page = s->tables[s->table_offsets[sid] + pos / s->page_size];
        const int64_t first = seen_put(&seen, page * s->page_size + pos % s->page_size, q);
        if (first >= 0) {
            h->dup_query[0] = first, h->dup_query[1] = q;
            break;
        }
    }
    free(seen.slot);
    return RUDNN_STATUS_SUCCESS;
}

static size_t align16(size_t x) { return (x + 15) / 16 * 16; }

/* Byte offsets of the image's arrays (hal/paged_attention.h). */
static void lay_out(rudnn_paged_layout_t *l, int64_t used)
{
    const int64_t n = l->sequences, q = l->queries;
    size_t at = 0;
    l->off_seq_len = (int64_t)at, at = align16(at + (size_t)n * 4);
    l->off_seq_table = (int64_t)at, at = align16(at + (size_t)(n + 1) * 4);
    l->off_seq_query = (int64_t)at, at = align16(at + (size_t)(n + 1) * 4);
    l->off_query_seq = (int64_t)at, at = align16(at + (size_t)q * 4);
    l->off_query_pos = (int64_t)at, at = align16(at + (size_t)q * 4);
    l->off_pages = (int64_t)at, at = align16(at + (size_t)used * 4);
    for (int b = 0; b < RUDNN_PAGED_BLOCK_KINDS; b++) {
        l->off_blocks[b] = (int64_t)at;
        at = align16(at + (size_t)l->block_count[b] * sizeof(rudnn_paged_block_t));
    }
    l->bytes = (int64_t)at;
}

/* Blocks of kind b: each sequence's queries in runs of at most 2^b. */
static void fill_blocks(const rudnn_paged_schedule_t *s, const int32_t *seq_query, int b, rudnn_paged_block_t *out)
{
    const int64_t cap = (int64_t)1 << b;
    int64_t k = 0;
    for (int64_t i = 0; i < s->sequences; i++)
        for (int64_t q0 = seq_query[i]; q0 < seq_query[i + 1]; q0 += cap) {
            const int64_t q1 = q0 + cap < seq_query[i + 1] ? q0 + cap : seq_query[i + 1];
            int64_t hi = 0;
            for (int64_t q = q0; q < q1; q++) {
                const int64_t see = s->positions[q] + 1 < s->lengths[i] ? s->positions[q] + 1 : s->lengths[i];
                hi = see > hi ? see : hi;
            }
            out[k++] = (rudnn_paged_block_t){(int32_t)i, (int32_t)q0, (int32_t)(q1 - q0), (int32_t)hi};
        }
}

static void build_image(const rudnn_paged_schedule_t *s, rudnn_paged_host_plan_t h)
{
    const rudnn_paged_layout_t *l = &h->layout;
    uint8_t *img = h->image;
    int32_t *seq_len = (int32_t *)(img + l->off_seq_len), *seq_table = (int32_t *)(img + l->off_seq_table);
    int32_t *seq_query = (int32_t *)(img + l->off_seq_query), *query_seq = (int32_t *)(img + l->off_query_seq);
    int32_t *query_pos = (int32_t *)(img + l->off_query_pos), *pages = (int32_t *)(img + l->off_pages);
    int64_t e = 0, q = 0;
    for (int64_t i = 0; i < s->sequences; i++) {
        const int64_t need = (s->lengths[i] + s->page_size - 1) / s->page_size;
        seq_len[i] = (int32_t)s->lengths[i];
        seq_table[i] = (int32_t)e;
        if (need)
            memcpy(pages + e, s->tables + s->table_offsets[i], (size_t)need * sizeof *pages);
        e += need;
        seq_query[i] = (int32_t)q;
        while (q < s->queries && s->sequence_ids[q] == i)
            q++;
    }
    seq_table[s->sequences] = (int32_t)e;
    seq_query[s->sequences] = (int32_t)q;
    for (int64_t j = 0; j < s->queries; j++)
        query_seq[j] = (int32_t)s->sequence_ids[j], query_pos[j] = (int32_t)s->positions[j];
    for (int b = 0; b < RUDNN_PAGED_BLOCK_KINDS; b++)
        fill_blocks(s, seq_query, b, (rudnn_paged_block_t *)(img + l->off_blocks[b]));
}

rudnn_status_t rudnn_paged_host_plan_create(const rudnn_paged_schedule_t *s, rudnn_paged_host_plan_t *plan)
{
    rudnn_clear_error();
    TRY(rudnn_check_arg(OP, "plan", plan));
    TRY(rudnn_check_arg(OP, "schedule", s));
    TRY(check_sizes(s));
    int64_t used = 0;
    TRY(check_tables(s, &used));
    TRY(check_queries(s));

    rudnn_paged_host_plan_t h = rudnn_host_calloc(1, sizeof *h);
    if (!h)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory", OP);
    rudnn_status_t st = append_faults(s, h);
    rudnn_paged_layout_t *l = &h->layout;
    l->page_size = s->page_size, l->cache_pages = s->pages, l->sequences = s->sequences, l->queries = s->queries;
    for (int64_t i = 0, q = 0; i < s->sequences; i++) {
        const int64_t q0 = q;
        while (q < s->queries && s->sequence_ids[q] == i)
            q++;
        l->max_len = s->lengths[i] > l->max_len ? s->lengths[i] : l->max_len;
        if (q > q0) {
            l->total_kv += s->lengths[i];
            for (int b = 0; b < RUDNN_PAGED_BLOCK_KINDS; b++)
                l->block_count[b] += (q - q0 + ((int64_t)1 << b) - 1) >> b;
        }
    }
    lay_out(l, used);
    if (!st) {
        h->image = rudnn_host_calloc((size_t)l->bytes, 1);
        if (!h->image)
            st = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory for the plan's %lld bytes", OP,
                                 (long long)l->bytes);
    }
    if (st) {
        free(h);
        return st;
    }
    build_image(s, h);
    rudnn_live_object(+1);
    *plan = h;
    return RUDNN_STATUS_SUCCESS;
}

void rudnn_paged_host_plan_destroy(rudnn_paged_host_plan_t h)
{
    if (!h)
        return;
    free(h->image);
    free(h);
    rudnn_live_object(-1);
}
