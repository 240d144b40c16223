/* FP64 reference of paged attention and MLA: see paged_attention_ref.h. */
#include "paged_attention_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t pa_ref_visible(const rudnn_paged_schedule_t *s, int64_t i, int causal)
{
    const int64_t len = s->lengths[s->sequence_ids[i]], pos = s->positions[i];
    if (!causal)
        return len;
    return pos + 1 < len ? pos + 1 : len;
}

int64_t pa_ref_row(const rudnn_paged_schedule_t *s, int64_t seq, int64_t t)
{
    const int64_t page = s->tables[s->table_offsets[seq] + t / s->page_size];
    return page * s->page_size + t % s->page_size;
}

/* Only what reading needs: sizes, offsets, the history pages in range, queries' sequences and
 * positions in range. (Repeats and order are the plan's rules, not the reference's.) */
int pa_ref_check_schedule(const rudnn_paged_schedule_t *s)
{
    if (!s || s->page_size < 1 || s->pages < 1 || s->sequences < 1 || s->queries < 0 || !s->lengths ||
        !s->table_offsets || (s->queries && (!s->sequence_ids || !s->positions)))
        return -1;
    if (s->table_offsets[0] != 0)
        return -1;
    for (int64_t i = 0; i < s->sequences; i++) {
        const int64_t len = s->lengths[i], need = (len + s->page_size - 1) / s->page_size;
        if (len < 0 || s->table_offsets[i + 1] - s->table_offsets[i] < need)
            return -1;
        if (need && !s->tables)
            return -1;
        for (int64_t e = 0; e < need; e++) {
            const int32_t p = s->tables[s->table_offsets[i] + e];
            if (p < 0 || p >= s->pages)
                return -1;
        }
    }
    for (int64_t q = 0; q < s->queries; q++) {
        const int64_t sid = s->sequence_ids[q];
        if (sid < 0 || sid >= s->sequences || s->positions[q] < 0 || s->positions[q] > s->lengths[sid])
            return -1;
    }
    return 0;
}

static int64_t longest(const rudnn_paged_schedule_t *s)
{
    int64_t m = 0;
    for (int64_t i = 0; i < s->sequences; i++)
        m = s->lengths[i] > m ? s->lengths[i] : m;
    return m;
}

static double dot(const double *a, const double *b, int64_t n)
{
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

/* The one loop both ops share: per (query, head), scores over the visible keys, a max-subtracted
 * softmax and the weighted sum of value rows. key_row(j) gives the cache row of key j; the
 * callbacks are spelled out as two strides and two optional extra operands to stay plain C. */
typedef struct pa_ref_operands {
    int64_t Hq, Hkv, D, Dv, P;
    const double *q, *qp, *k, *kp, *v;
    int64_t k_row, kp_row, v_row; /* elements per cache row (page_size rows a page) */
} pa_ref_operands_t;

static int attend(const rudnn_paged_schedule_t *s, const pa_ref_operands_t *o, double scale, int causal, double *out)
{
    if (pa_ref_check_schedule(s) || o->Hkv < 1 || o->Hq % o->Hkv || o->D < 1 || o->Dv < 1)
        return -1;
    const int64_t n_max = longest(s);
    double *score = malloc(sizeof(double) * (size_t)(n_max > 0 ? n_max : 1));
    if (!score)
        return -2;
    const int64_t group = o->Hq / o->Hkv;
    for (int64_t i = 0; i < s->queries; i++) {
        const int64_t seq = s->sequence_ids[i], n = pa_ref_visible(s, i, causal);
        for (int64_t h = 0; h < o->Hq; h++) {
            const int64_t g = h / group;
            double *o_row = out + (i * o->Hq + h) * o->Dv;
            for (int64_t c = 0; c < o->Dv; c++)
                o_row[c] = 0.0;
            if (n == 0)
                continue; /* an empty history: zeros */
            const double *q_row = o->q + (i * o->Hq + h) * o->D;
            const double *qp_row = o->qp ? o->qp + (i * o->Hq + h) * o->P : NULL;
            double m = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                const int64_t r = pa_ref_row(s, seq, j);
                double d = dot(q_row, o->k + r * o->k_row + g * o->D, o->D);
                if (qp_row)
                    d += dot(qp_row, o->kp + r * o->kp_row, o->P);
                score[j] = scale * d;
                m = score[j] > m ? score[j] : m;
            }
            double l = 0.0;
            for (int64_t j = 0; j < n; j++) {
                const double p = exp(score[j] - m);
                const double *v_row = o->v + pa_ref_row(s, seq, j) * o->v_row + g * o->Dv;
                l += p;
                for (int64_t c = 0; c < o->Dv; c++)
                    o_row[c] += p * v_row[c];
            }
            for (int64_t c = 0; c < o->Dv; c++)
                o_row[c] /= l;
        }
    }
    free(score);
    return 0;
}

int pa_ref_attention(const rudnn_paged_schedule_t *s, int64_t Hq, int64_t Hkv, int64_t D, int64_t Dv,
                     const double *q, const double *k_cache, const double *v_cache, double scale, int causal,
                     double *out)
{
    const pa_ref_operands_t o = {Hq, Hkv, D, Dv, 0, q, NULL, k_cache, NULL, v_cache, Hkv * D, 0, Hkv * Dv};
    return attend(s, &o, scale, causal, out);
}

int pa_ref_mla(const rudnn_paged_schedule_t *s, int64_t H, int64_t R, int64_t P, const double *q, const double *qp,
               const double *latent, const double *kp, double scale, int causal, double *out)
{
    if (P < 1)
        return -1;
    /* one KV head (the latent) for every query head; the value row is the latent row */
    const pa_ref_operands_t o = {H, 1, R, R, P, q, qp, latent, kp, latent, R, P, R};
    return attend(s, &o, scale, causal, out);
}

int pa_ref_append(const rudnn_paged_schedule_t *s, int64_t width, size_t elem, const void *rows, void *cache)
{
    if (pa_ref_check_schedule(s) || width < 1)
        return -1;
    for (int64_t i = 0; i < s->queries; i++)
        if (s->positions[i] >= s->lengths[s->sequence_ids[i]])
            return -1;
    const size_t row_bytes = (size_t)width * elem;
    for (int64_t i = 0; i < s->queries; i++) {
        const int64_t r = pa_ref_row(s, s->sequence_ids[i], s->positions[i]);
        memcpy((uint8_t *)cache + (size_t)r * row_bytes, (const uint8_t *)rows + (size_t)i * row_bytes, row_bytes);
    }
    return 0;
}
