/* attention_decode.cu on the host: see run.sh. */
/* ldmatrix / mma.sync m16n8k16 / cvt packs, emulated from the PTX fragment layouts. */
#pragma once
static inline uint32_t dec_smem_u32(const void *p) { return (uint32_t)((const unsigned char *)p - emu_smem); }

static inline void emu_ldsm(uint32_t addr, uint32_t (&r)[4], bool trans)
{
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    emu_x[w].v[lane][0] = addr;
    RDG_SYNCWARP();
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; i++) {
        uint16_t e[2];
        for (int k = 0; k < 2; k++) {
            int row, col;
            if (!trans) { row = g; col = 2 * t + k; }
            else { row = 2 * t + k; col = g; }
            const uint32_t a = (uint32_t)emu_x[w].v[8 * i + row][0];
            if (a % 16) abort();
            memcpy(&e[k], emu_smem + a + col * 2, 2);
        }
        r[i] = e[0] | ((uint32_t)e[1] << 16);
    }
    RDG_SYNCWARP();
}
static inline void dec_ldsm_x4(uint32_t addr, uint32_t (&r)[4]) { emu_ldsm(addr, r, false); }
static inline void dec_ldsm_x4_trans(uint32_t addr, uint32_t (&r)[4]) { emu_ldsm(addr, r, true); }

template <int DT>
static inline float emu_h(uint32_t x, int half)
{
    const uint16_t b = (uint16_t)(half ? x >> 16 : x & 0xffff);
    return DT == RUDNN_BF16 ? rdg_bf16_to_f32(b) : rdg_f16_to_f32(b);
}

template <int DT>
static inline void dec_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    uint64_t *slot = emu_x[w].v[lane];
    for (int i = 0; i < 4; i++) slot[i] = a[i];
    slot[4] = b0; slot[5] = b1;
    for (int i = 0; i < 4; i++) { uint32_t u = __float_as_uint(d[i]); slot[6 + i] = u; }
    RDG_SYNCWARP();
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l / 4, t = l % 4;
        const uint64_t *s = emu_x[w].v[l];
        for (int k = 0; k < 2; k++) {
            A[g][2 * t + k] = emu_h<DT>((uint32_t)s[0], k);
            A[g + 8][2 * t + k] = emu_h<DT>((uint32_t)s[1], k);
            A[g][2 * t + 8 + k] = emu_h<DT>((uint32_t)s[2], k);
            A[g + 8][2 * t + 8 + k] = emu_h<DT>((uint32_t)s[3], k);
            B[2 * t + k][g] = emu_h<DT>((uint32_t)s[4], k);
            B[2 * t + 8 + k][g] = emu_h<DT>((uint32_t)s[5], k);
        }
        C[g][2 * t] = __uint_as_float((uint32_t)s[6]);
        C[g][2 * t + 1] = __uint_as_float((uint32_t)s[7]);
        C[g + 8][2 * t] = __uint_as_float((uint32_t)s[8]);
        C[g + 8][2 * t + 1] = __uint_as_float((uint32_t)s[9]);
    }
    RDG_SYNCWARP();
    const int g = lane / 4, t = lane % 4;
    const int rr[4] = {g, g, g + 8, g + 8}, cc[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int i = 0; i < 4; i++) {
        float s = C[rr[i]][cc[i]];
        for (int k = 0; k < 16; k++) s += A[rr[i]][k] * B[k][cc[i]];
        d[i] = s;
    }
}

template <int DT>
static inline uint32_t dec_pack(float x0, float x1, float *rest0, float *rest1)
{
    uint32_t r;
    if (DT == RUDNN_BF16) r = rdg_pack_bf16x2(x0, x1);
    else r = rdg_f32_to_f16(x0) | ((uint32_t)rdg_f32_to_f16(x1) << 16);
    *rest0 = x0 - emu_h<DT>(r, 0);
    *rest1 = x1 - emu_h<DT>(r, 1);
    return r;
}
template <int DT>
static inline uint32_t dec_pack(float x0, float x1)
{
    float u, v;
    return dec_pack<DT>(x0, x1, &u, &v);
}
