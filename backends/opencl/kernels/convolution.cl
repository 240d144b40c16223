/* Convolution (backends/hal/convolution.h): each direction as the product C[m, j] = sum_t A[m, t]
 * B[t, j] of one group g, its operands gathered from the tensors (a_at, b_at), its result stored by
 * out_store. The program is built per dtype (common.cl's LOAD_A / STORE_A) and per direction
 * (-DCONV_DIR: 0 forward, 1 data backward, 2 weight backward). FP32 sums, t in increasing order.
 *   rudnn_conv_direct     a work-item per (g, m, j): the sum walked tap by tap (data backward skips
 *                         the taps that land between output positions of a strided convolution)
 *   rudnn_conv_igemm      a work-group per (g, tile of CONV_TM rows m, tile of CONV_TJ columns j):
 *                         CONV_TT-deep slices of A and B gathered into local memory, each work-item
 *                         accumulating CONV_WM x CONV_WJ outputs
 *   rudnn_conv_bias_grad  a work-item per output channel: dbias[k] = sum over n and p of dy
 * Shapes come as long4 (D, H, W, unused), strides as long8 ([batch or filter, channel, D, H, W]). */

#ifndef CONV_DIR
#define CONV_DIR 0
#endif
#define CONV_TM 32
#define CONV_TJ 32
#define CONV_TT 8
#define CONV_WM 4
#define CONV_WJ 4

typedef struct conv_shape {
    long N, C, K, G, Cg, Kg;
    long4 S, R, P, st, pad, dil;
    long8 xs, ws, ys;
} conv_shape_t;

/* x[n, ch, p st - pad + r dil], or 0 in the padding */
float x_at(__global const act_t *x, const conv_shape_t *c, long n, long ch, long4 p, long4 r)
{
    const long4 i = p * c->st - c->pad + r * c->dil;
    if (i.s0 < 0 || i.s0 >= c->S.s0 || i.s1 < 0 || i.s1 >= c->S.s1 || i.s2 < 0 || i.s2 >= c->S.s2)
        return 0.0f;
    return LOAD_A(x, n * c->xs.s0 + ch * c->xs.s1 + box_offset(i, c->xs));
}

float w_at(__global const act_t *w, const conv_shape_t *c, long k, long ch, long4 r)
{
    return LOAD_A(w, k * c->ws.s0 + ch * c->ws.s1 + box_offset(r, c->ws));
}

float dy_at(__global const act_t *y, const conv_shape_t *c, long n, long k, long4 p)
{
    return LOAD_A(y, n * c->ys.s0 + k * c->ys.s1 + box_offset(p, c->ys));
}

/* The output position p that input position q meets through tap r, when there is one. */
int tap_lands(const conv_shape_t *c, long4 q, long4 r, long4 *p)
{
    const long4 num = q + c->pad - r * c->dil;
    if (num.s0 < 0 || num.s1 < 0 || num.s2 < 0)
        return 0;
    if (num.s0 % c->st.s0 || num.s1 % c->st.s1 || num.s2 % c->st.s2)
        return 0;
    /* component by component: the unused fourth lane of st is 0 */
    p->s0 = num.s0 / c->st.s0, p->s1 = num.s1 / c->st.s1, p->s2 = num.s2 / c->st.s2, p->s3 = 0;
    return p->s0 < c->P.s0 && p->s1 < c->P.s1 && p->s2 < c->P.s2;
}

/* Rows M, columns J and depth T of the product (per group). */
long rows_m(const conv_shape_t *c)
{
#if CONV_DIR == 0
    return c->N * box_size(c->P);
#elif CONV_DIR == 1
    return c->N * box_size(c->S);
#else
    return c->Kg;
#endif
}

long cols_j(const conv_shape_t *c)
{
#if CONV_DIR == 0
    return c->Kg;
#elif CONV_DIR == 1
    return c->Cg;
#else
    return c->Cg * box_size(c->R);
#endif
}

long depth_t(const conv_shape_t *c)
{
#if CONV_DIR == 0
    return c->Cg * box_size(c->R);
#elif CONV_DIR == 1
    return c->Kg * box_size(c->R);
#else
    return c->N * box_size(c->P);
#endif
}

/* A[m, t] of group g (the input-like operand): x (forward), dy (both backward directions). *in is
 * 0 where the data backward's tap reaches no output position: that term is not in the sum at all
 * (not even as 0 times w, which a NaN in w would turn into NaN). */
float a_at(__global const act_t *x, __global const act_t *y, const conv_shape_t *c, long g, long m, long t, int *in)
{
    *in = 1;
#if CONV_DIR == 0
    const long np = box_size(c->P), nr = box_size(c->R);
    return x_at(x, c, m / np, g * c->Cg + t / nr, box_at(m % np, c->P), box_at(t % nr, c->R));
#elif CONV_DIR == 1
    const long ns = box_size(c->S), nr = box_size(c->R);
    long4 p;
    if (!tap_lands(c, box_at(m % ns, c->S), box_at(t % nr, c->R), &p)) {
        *in = 0;
        return 0.0f;
    }
    return dy_at(y, c, m / ns, g * c->Kg + t / nr, p);
#else
    const long np = box_size(c->P);
    return dy_at(y, c, t / np, g * c->Kg + m, box_at(t % np, c->P));
#endif
}

/* B[t, j] of group g: w (forward, data backward), x (weight backward). */
float b_at(__global const act_t *x, __global const act_t *w, const conv_shape_t *c, long g, long t, long j)
{
    const long nr = box_size(c->R);
#if CONV_DIR == 0
    return w_at(w, c, g * c->Kg + j, t / nr, box_at(t % nr, c->R));
#elif CONV_DIR == 1
    return w_at(w, c, g * c->Kg + t / nr, j, box_at(t % nr, c->R));
#else
    const long np = box_size(c->P);
    return x_at(x, c, t / np, g * c->Cg + j / nr, box_at(t % np, c->P), box_at(j % nr, c->R));
#endif
}

/* C[m, j] of group g to its tensor (forward adds the bias). */
void out_store(__global act_t *x, __global act_t *w, __global act_t *y, __global const act_t *bias, long bias_stride,
               int has_bias, const conv_shape_t *c, long g, long m, long j, float acc)
{
#if CONV_DIR == 0
    const long np = box_size(c->P), k = g * c->Kg + j;
    if (has_bias)
        acc += LOAD_A(bias, k * bias_stride);
    STORE_A(y, (m / np) * c->ys.s0 + k * c->ys.s1 + box_offset(box_at(m % np, c->P), c->ys), acc);
#elif CONV_DIR == 1
    const long ns = box_size(c->S);
    STORE_A(x, (m / ns) * c->xs.s0 + (g * c->Cg + j) * c->xs.s1 + box_offset(box_at(m % ns, c->S), c->xs), acc);
#else
    const long nr = box_size(c->R);
    STORE_A(w, (g * c->Kg + m) * c->ws.s0 + (j / nr) * c->ws.s1 + box_offset(box_at(j % nr, c->R), c->ws), acc);
#endif
}

conv_shape_t make_shape(long N, long C, long K, long G, long4 S, long4 R, long4 P, long4 st, long4 pad, long4 dil,
                        long8 xs, long8 ws, long8 ys)
{
    conv_shape_t c;
    c.N = N, c.C = C, c.K = K, c.G = G, c.Cg = C / G, c.Kg = K / G;
    c.S = S, c.R = R, c.P = P, c.st = st, c.pad = pad, c.dil = dil;
    c.xs = xs, c.ws = ws, c.ys = ys;
    return c;
}

#define CONV_PARAMS                                                                                          \
    __global act_t *x, ulong xo, __global act_t *w, ulong wo, __global act_t *y, ulong yo,                 \
        __global act_t *bias, ulong bo, ulong group0, long N, long C, long K, long G, long4 S, long4 R, \
        long4 P, long4 st, long4 pad, long4 dil, long8 xs, long8 ws, long8 ys, int has_bias, long bias_stride
#define CONV_OFFSETS x += xo, w += wo, y += yo, bias += bo

/* Direct: the sum for output (g, m, j) walked tap by tap, in t order. */
__kernel void rudnn_conv_direct(CONV_PARAMS)
{
    CONV_OFFSETS;
    const conv_shape_t c = make_shape(N, C, K, G, S, R, P, st, pad, dil, xs, ws, ys);
    const long M = rows_m(&c), J = cols_j(&c);
    const ulong id = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (id >= (ulong)(G * M * J))
        return;
    const long j = (long)(id % (ulong)J), m = (long)((id / (ulong)J) % (ulong)M), g = (long)(id / (ulong)(J * M));
    const long nr = box_size(c.R);
    float acc = 0.0f;
#if CONV_DIR == 0
    const long np = box_size(c.P), n = m / np, k = g * c.Kg + j;
    const long4 p = box_at(m % np, c.P);
    for (long ch = 0; ch < c.Cg; ch++)
        for (long ri = 0; ri < nr; ri++) {
            const long4 r = box_at(ri, c.R);
            acc += x_at(x, &c, n, g * c.Cg + ch, p, r) * w_at(w, &c, k, ch, r);
        }
#elif CONV_DIR == 1
    const long ns = box_size(c.S), n = m / ns;
    const long4 q = box_at(m % ns, c.S);
    for (long k = 0; k < c.Kg; k++)
        for (long ri = 0; ri < nr; ri++) {
            const long4 r = box_at(ri, c.R);
            long4 p;
            if (tap_lands(&c, q, r, &p))
                acc += dy_at(y, &c, n, g * c.Kg + k, p) * w_at(w, &c, g * c.Kg + k, j, r);
        }
#else
    const long np = box_size(c.P), ch = g * c.Cg + j / nr;
    const long4 r = box_at(j % nr, c.R);
    for (long n = 0; n < c.N; n++)
        for (long pi = 0; pi < np; pi++) {
            const long4 p = box_at(pi, c.P);
            acc += dy_at(y, &c, n, g * c.Kg + m, p) * x_at(x, &c, n, ch, p, r);
        }
#endif
    out_store(x, w, y, bias, bias_stride, has_bias, &c, g, m, j, acc);
}

/* ImplicitGemm: a (CONV_TM / CONV_WM) x (CONV_TJ / CONV_WJ) work-group per output tile. */
__kernel void rudnn_conv_igemm(CONV_PARAMS)
{
    CONV_OFFSETS;
    __local float As[CONV_TT][CONV_TM];
    __local float Bs[CONV_TT][CONV_TJ];
    __local int Ain[CONV_TT][CONV_TM]; /* a_at's *in: the term exists */
    const conv_shape_t c = make_shape(N, C, K, G, S, R, P, st, pad, dil, xs, ws, ys);
    const long M = rows_m(&c), J = cols_j(&c), T = depth_t(&c);
    const long tiles_m = (M + CONV_TM - 1) / CONV_TM, tiles_j = (J + CONV_TJ - 1) / CONV_TJ;
    const ulong tile = group0 + get_group_id(0);
    const long tj = (long)(tile % (ulong)tiles_j), tm = (long)((tile / (ulong)tiles_j) % (ulong)tiles_m);
    const long g = (long)(tile / (ulong)(tiles_j * tiles_m));
    const int lid = (int)get_local_id(0);
    const int threads = (CONV_TM / CONV_WM) * (CONV_TJ / CONV_WJ);
    const int im = lid / (CONV_TJ / CONV_WJ), ij = lid % (CONV_TJ / CONV_WJ);
    const long m0 = tm * CONV_TM, j0 = tj * CONV_TJ;
    float acc[CONV_WM][CONV_WJ];
    for (int a = 0; a < CONV_WM; a++)
        for (int b = 0; b < CONV_WJ; b++)
            acc[a][b] = 0.0f;
    for (long t0 = 0; t0 < T; t0 += CONV_TT) {
        for (int e = lid; e < CONV_TT * CONV_TM; e += threads) {
            const int tt = e / CONV_TM, mm = e % CONV_TM;
            const long m = m0 + mm, t = t0 + tt;
            int in = 0;
            As[tt][mm] = m < M && t < T ? a_at(x, y, &c, g, m, t, &in) : 0.0f;
            Ain[tt][mm] = in;
        }
        for (int e = lid; e < CONV_TT * CONV_TJ; e += threads) {
            const int tt = e / CONV_TJ, jj = e % CONV_TJ;
            const long j = j0 + jj, t = t0 + tt;
            Bs[tt][jj] = j < J && t < T ? b_at(x, w, &c, g, t, j) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int tt = 0; tt < CONV_TT; tt++) {
            float av[CONV_WM], bv[CONV_WJ];
            int ai[CONV_WM];
            for (int a = 0; a < CONV_WM; a++) {
                av[a] = As[tt][im + a * (CONV_TM / CONV_WM)];
                ai[a] = Ain[tt][im + a * (CONV_TM / CONV_WM)];
            }
            for (int b = 0; b < CONV_WJ; b++)
                bv[b] = Bs[tt][ij + b * (CONV_TJ / CONV_WJ)];
            for (int a = 0; a < CONV_WM; a++)
                for (int b = 0; b < CONV_WJ; b++)
                    if (ai[a])
                        acc[a][b] += av[a] * bv[b];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int a = 0; a < CONV_WM; a++) {
        const long m = m0 + im + a * (CONV_TM / CONV_WM);
        for (int b = 0; b < CONV_WJ; b++) {
            const long j = j0 + ij + b * (CONV_TJ / CONV_WJ);
            if (m < M && j < J)
                out_store(x, w, y, bias, bias_stride, has_bias, &c, g, m, j, acc[a][b]);
        }
    }
}

/* Weight backward's dbias[k] = sum over n, then p, of dy[n, k, p] (the bias argument is dbias). */
__kernel void rudnn_conv_bias_grad(CONV_PARAMS)
{
    CONV_OFFSETS;
    const conv_shape_t c = make_shape(N, C, K, G, S, R, P, st, pad, dil, xs, ws, ys);
    const ulong k = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (k >= (ulong)K)
        return;
    const long np = box_size(c.P);
    float acc = 0.0f;
    for (long n = 0; n < c.N; n++)
        for (long pi = 0; pi < np; pi++)
            acc += dy_at(y, &c, n, (long)k, box_at(pi, c.P));
    STORE_A(bias, (long)k * bias_stride, acc);
}
