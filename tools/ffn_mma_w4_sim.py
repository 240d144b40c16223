#!/usr/bin/env python3
"""Bit-level emulation of backends/cuda/ffn_mma_w4.cu's data flow on the CPU, against a direct
reference: the weight ring's layout and copies, the lanes' shared-memory reads, prmt / lop3 /
packed fma dequantization (bf16 and f16 rounding), the mma.sync m16n8k16 fragment maps as the PTX
ISA gives them, the k-interleaved warps and the epilogue's sum, the split partials. Not the timing
(cp.async groups, barriers): the copies land at once. Run it after changing the kernel's maps.

    tools/ffn_mma_w4_sim.py [CASE]      (python3-numpy; about 15 s for all cases)

Each case: dtype (True bf16), m, n, k, groups, offset, VB, NT, wk, splits, kc."""
import itertools
import struct
import sys

import numpy as np

M32 = 0xffffffff

def bf16_round(x):  # float64 -> bf16 bits, round to nearest even
    d = float(x)
    if d != d:
        return 0x7fc0
    # round f64 to bf16 directly: bf16 has 8 significant bits
    if d == 0:
        return 0x8000 if str(d).startswith('-') else 0
    m, e = np.frexp(d)  # d = m * 2^e, 0.5<=|m|<1
    scaled = m * 256.0   # 8 significant bits
    r = np.round(scaled)  # numpy rounds half to even
    v = r / 256.0 * 2.0 ** e
    b = struct.unpack('<I', struct.pack('<f', np.float32(v)))[0]
    return b >> 16

def bf16_val(b):
    return struct.unpack('<f', struct.pack('<I', (b & 0xffff) << 16))[0]

def f16_round(x):
    return int(np.array([x], dtype=np.float64).astype(np.float16).view(np.uint16)[0])

def f16_val(b):
    return float(np.array([b & 0xffff], dtype=np.uint16).view(np.float16)[0])

class DT:
    def __init__(self, bf):
        self.bf = bf
    def rnd(self, x):
        return bf16_round(x) if self.bf else f16_round(x)
    def val(self, b):
        return bf16_val(b) if self.bf else f16_val(b)

def prmt(a, b, sel):
    bytes_ = [(a >> (8 * i)) & 0xff for i in range(4)] + [(b >> (8 * i)) & 0xff for i in range(4)]
    r = 0
    for i in range(4):
        r |= bytes_[(sel >> (4 * i)) & 7] << (8 * i)
    return r

def lop3(a, b, c, lut):
    r = 0
    for i in range(32):
        ai, bi, ci = (a >> i) & 1, (b >> i) & 1, (c >> i) & 1
        r |= ((lut >> (4 * ai + 2 * bi + ci)) & 1) << i
    return r

def hfma2(dt, a, b, c):
    r = 0
    for h in range(2):
        x = dt.val(a >> (16 * h)) * dt.val(b >> (16 * h)) + dt.val(c >> (16 * h))
        r |= dt.rnd(x) << (16 * h)
    return r

def nib_lo(dt, v):
    return lop3(v, 0x000f000f, 0x43084308 if dt.bf else 0x64086408, 0x6A)

def raw_code(dt, v, hi):
    # the kernel's raw_code: bf16 128 + (w + 8) from bits 0..3; f16 64 + (w + 8) from bits 4..7
    if dt.bf:
        return nib_lo(dt, (v >> 4) & M32 if hi else v)
    return lop3(v if hi else (v << 4) & M32, 0x00f000f0, 0x54805480, 0x6A)

def deq_lo(dt, t, s2):
    one = 0x3F803F80 if dt.bf else 0x3C003C00
    bias = 0xC308C308 if dt.bf else 0xE408E408
    return hfma2(dt, hfma2(dt, t, one, bias), s2, 0x80008000)

def deq_hi(dt, v, s2):
    if dt.bf:
        return deq_lo(dt, nib_lo(dt, (v >> 4) & M32), s2)
    t = lop3(v, 0x00f000f0, 0x64806480, 0x6A)
    return hfma2(dt, hfma2(dt, t, 0x2C002C00, 0xD480D480), s2, 0x80008000)

def f32(x):
    return float(np.float32(x))

def deq_off(dt, t, o, s):
    if dt.bf:
        lo = bf16_val(t) - 136.0
        hi = bf16_val(t >> 16) - 136.0
    else:
        lo = f16_val(t) - 1032.0
        hi = f16_val(t >> 16) - 1032.0
    lo = f32(f32(lo + o) * s)
    hi = f32(f32(hi + o) * s)
    return dt.rnd(lo) | dt.rnd(hi) << 16

def mma(dt, acc, a, b):
    """acc[lane][4], a[lane][4] regs, b[lane][2] regs: D += A B per the PTX m16n8k16 maps."""
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(8):
            reg, half = i // 2, i & 1
            v = dt.val(a[lane][reg] >> (16 * half))
            row = g if i in (0, 1, 4, 5) else g + 8
            col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
            A[row, col] = v
        for i in range(4):
            v = dt.val(b[lane][i // 2] >> (16 * (i & 1)))
            B[t * 2 + (i & 1) + (8 if i >= 2 else 0), g] = v
    D = A @ B
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(4):
            acc[lane][i] = f32(acc[lane][i] + D[g + (8 if i >= 2 else 0), t * 2 + (i & 1)])

def fmaf(a, b, c):
    return f32(a * b + c)  # the product of two floats is exact in double

def run(dt, m, n, k, groups, off, VB, NT, wk, splits, kc, STAGES=6, seed=0, fold=None):
    # FFN_MMA_W4_FOLD (1), FFN_MMA_W4_FOLD_NT (1): the kernel folds the groups' sums when NT == 1
    fold = NT == 1 if fold is None else fold
    rng = np.random.default_rng(seed)
    W = rng.integers(-8, 8, size=(k, n))
    packed = np.zeros((k, n // 2), dtype=np.uint8)
    for c in range(0, n, 2):
        packed[:, c // 2] = (W[:, c] & 0xf) | ((W[:, c + 1] & 0xf) << 4)
    bmem = packed.tobytes()
    A = np.array([[dt.rnd(x) for x in row] for row in rng.uniform(-1, 1, size=(m, k))])
    S = np.array([[dt.rnd(x) for x in row] for row in rng.uniform(0.01, 0.05, size=(groups, n))])
    O = np.array([[dt.rnd(x) for x in row] for row in rng.uniform(-4, 4, size=(groups, n))]) if off else None
    gr = k // groups
    # reference: w' = round((w + o) s) in fp32
    Wd = np.zeros((k, n))
    for r in range(k):
        for c in range(n):
            o = dt.val(O[r // gr, c]) if off else 0.0
            if fold:  # (w + o) s, unrounded: the fold scales FP32 sums
                Wd[r, c] = (W[r, c] + o) * dt.val(S[r // gr, c])
            else:
                Wd[r, c] = dt.val(dt.rnd(f32(f32(W[r, c] + o) * dt.val(S[r // gr, c]))))
    Av = np.vectorize(dt.val)(A)
    ref = Av @ Wd

    gs = gr // 16
    assert groups == 1 or gs % wk == 0, 'the plan makes wk divide the group steps'
    MT = 8 * NT; WARPS = 4; wcn = WARPS // wk; COLS_W = 16 * VB; cols_cta = wcn * COLS_W
    STAGE = 128 * VB; rowbytes = n // 2; steps = k // 16
    sps = -(-steps // splits); splits = -(-steps // sps)
    tblocks = -(-m // MT)
    partial = np.zeros((splits, m, n))
    for tb, cy, z in itertools.product(range(tblocks), range(n // cols_cta), range(splits)):
        tok0 = tb * MT; mrows = min(MT, m - tok0)
        s0 = z * sps; s1 = min(s0 + sps, steps)
        cs = kc // 16; ast = kc + 16
        abuf = np.zeros((2, MT, ast), dtype=np.int64)
        def stage_a(ch):
            r0 = 16 * (s0 + ch * cs); krows = min(kc, 16 * s1 - r0)
            for tk in range(mrows):
                abuf[ch & 1, tk, :krows] = A[tok0 + tk, r0:r0 + krows]
        nch = -(-(s1 - s0) // cs) if s1 > s0 else 0
        accs = {}
        # warps are independent except for abuf: emulate chunk by chunk
        wstate = []
        for warp in range(WARPS):
            wc, kw = warp % wcn, warp // wcn
            col_w = cy * cols_cta + wc * COLS_W
            nsteps = (s1 - s0 - kw + wk - 1) // wk if s1 - s0 - kw > 0 else 0
            wstate.append(dict(wc=wc, kw=kw, col_w=col_w, nsteps=nsteps, done=0,
                               acc=[[[0.0] * 4 for _ in range(32)] for _ in range(VB * NT)],
                               accg=[[[0.0] * 4 for _ in range(32)] for _ in range(VB * NT)],
                               xg=[[[0.0] * 4 for _ in range(32)] for _ in range(NT)],
                               grp=(s0 + kw) // gs,
                               left=((((s0 + kw) // gs + 1) * gs - (s0 + kw) + wk - 1) // wk) if nsteps else 0))
        bias = 136.0 if dt.bf else 72.0
        def fold_group(ws):
            # acc += s ((bias + w) x sums + (o - bias) x sums), per the kernel's fold()
            grp = ws['grp']
            for tile in range(VB * NT):
                nt, j = tile // VB, tile % VB
                for lane in range(32):
                    gq = lane >> 2
                    for i in range(4):
                        col = ws['col_w'] + 2 * VB * gq + 2 * j + (i >> 1)
                        sv = dt.val(S[grp, col])
                        cb = (dt.val(O[grp, col]) if off else 0.0) - bias
                        t = fmaf(cb, ws['xg'][nt][lane][i & 1], ws['accg'][tile][lane][i])
                        ws['acc'][tile][lane][i] = fmaf(sv, t, ws['acc'][tile][lane][i])
                        ws['accg'][tile][lane][i] = 0.0
            for nt in range(NT):
                ws['xg'][nt] = [[0.0] * 4 for _ in range(32)]
        if nch > 0:
            stage_a(0)
        for ch in range(nch):
            if ch + 1 < nch:
                cur = abuf[ch & 1].copy()
                stage_a(ch + 1)
                ab = cur
            else:
                ab = abuf[ch & 1]
            cs0 = s0 + ch * cs; cs1 = min(cs0 + cs, s1)
            for ws in wstate:
                kw = ws['kw']; col_w = ws['col_w']
                s = s0 + kw + wk * ws['done']
                while s < cs1:
                    # the ring stage as cp.async would lay it
                    stage = bytearray(STAGE)
                    base = 16 * s * rowbytes + col_w // 2
                    for cidx in range(STAGE // 16):
                        slot = cidx // (VB // 2); part = cidx % (VB // 2)
                        r = 4 * (slot & 3) + (slot >> 2)
                        src = base + r * rowbytes + 16 * part
                        stage[cidx * 16:cidx * 16 + 16] = bmem[src:src + 16]
                    # the kernel's group countdown (no division a group)
                    if ws['left'] == 0:
                        if fold:
                            fold_group(ws)
                        ws['grp'] += 1
                        ws['left'] = gs // wk
                    ws['left'] -= 1
                    grp = ws['grp']
                    assert grp == s // gs, 'group countdown off'
                    amat = [[None] * 4 for _ in range(32)]
                    frags = [[None] * 32 for _ in range(VB)]
                    bfr = [[None] * 32 for _ in range(NT)]
                    for lane in range(32):
                        gq, tq = lane >> 2, lane & 3
                        w = []
                        for i in range(4):
                            p = (i * 4 + tq) * (8 * VB) + gq * VB
                            w.append([int.from_bytes(stage[p + 4 * wd:p + 4 * wd + 4], 'little') for wd in range(VB // 4)])
                        for nt in range(NT):
                            kk = (s - cs0) * 16 + 4 * tq
                            tok = 8 * nt + gq
                            e4 = [int(ab[tok, kk + i]) & 0xffff for i in range(4)]
                            bfr[nt][lane] = (e4[0] | e4[1] << 16, e4[2] | e4[3] << 16)
                        col_t = col_w + 2 * VB * gq
                        s16 = [int(S[grp, col_t + c]) for c in range(2 * VB)]
                        pre = [s16[2 * i] | s16[2 * i + 1] << 16 for i in range(VB)]
                        s2 = [prmt(pre[c // 2], 0, 0x3232 if c & 1 else 0x1010) for c in range(2 * VB)]
                        if off:
                            sf = [dt.val(S[grp, col_t + c]) for c in range(2 * VB)]
                            of = [dt.val(O[grp, col_t + c]) for c in range(2 * VB)]
                        for wd in range(VB // 4):
                            for h in range(2):
                                sel = 0x7632 if h else 0x5410
                                p01 = prmt(w[0][wd], w[1][wd], sel); p23 = prmt(w[2][wd], w[3][wd], sel)
                                for e in range(2):
                                    j = 4 * wd + 2 * h + e
                                    v01 = p01 >> (8 * e); v23 = p23 >> (8 * e)
                                    if fold:  # the raw codes
                                        a = [raw_code(dt, v01, 0), raw_code(dt, v01, 1), raw_code(dt, v23, 0), raw_code(dt, v23, 1)]
                                    elif off:
                                        a = [deq_off(dt, nib_lo(dt, v01), of[2 * j], sf[2 * j]),
                                             deq_off(dt, nib_lo(dt, v01 >> 4), of[2 * j + 1], sf[2 * j + 1]),
                                             deq_off(dt, nib_lo(dt, v23), of[2 * j], sf[2 * j]),
                                             deq_off(dt, nib_lo(dt, v23 >> 4), of[2 * j + 1], sf[2 * j + 1])]
                                    else:
                                        a = [deq_lo(dt, nib_lo(dt, v01), s2[2 * j]), deq_hi(dt, v01, s2[2 * j + 1]),
                                             deq_lo(dt, nib_lo(dt, v23), s2[2 * j]), deq_hi(dt, v23, s2[2 * j + 1])]
                                    frags[j][lane] = a
                    for j in range(VB):
                        for nt in range(NT):
                            mma(dt, ws['accg' if fold else 'acc'][nt * VB + j], frags[j], bfr[nt])
                    if fold:  # the tokens' sums: the all-ones product
                        one2 = 0x3F803F80 if dt.bf else 0x3C003C00
                        for nt in range(NT):
                            mma(dt, ws['xg'][nt], [[one2] * 4 for _ in range(32)], bfr[nt])
                    ws['done'] += 1
                    s += wk
        if fold:  # the last group
            for ws in wstate:
                if ws['nsteps'] > 0:
                    fold_group(ws)
        # epilogue
        REGS = 4 * VB * NT
        ep = np.zeros(WARPS * REGS * 33)
        for warp, ws in enumerate(wstate):
            for tile in range(VB * NT):
                nt, j = tile // VB, tile % VB
                for lane in range(32):
                    for i in range(4):
                        ep[(warp * REGS + (nt * VB + j) * 4 + i) * 33 + lane] = ws['acc'][tile][lane][i]
        for e in range(mrows * cols_cta):
            tk, col = e // cols_cta, e % cols_cta
            wcx, r = col // COLS_W, col % COLS_W
            gg, j, hh = r // (2 * VB), (r % (2 * VB)) >> 1, r & 1
            nt, tt, ee = tk >> 3, (tk & 7) >> 1, tk & 1
            at = ((nt * VB + j) * 4 + 2 * hh + ee) * 33 + 4 * gg + tt
            v = ep[(wcx * REGS) * 33 + at]
            for kx in range(1, wk):
                v = f32(v + ep[((kx * wcn + wcx) * REGS) * 33 + at])
            partial[z, tok0 + tk, cy * cols_cta + col] = v
    out = partial.sum(axis=0)
    err = np.max(np.abs(out - ref)) / max(1.0, np.max(np.abs(ref)))
    return err

if __name__ == '__main__':
    cases = [
        (True, 3, 256, 256, 2, False, 8, 1, 2, 1, 256),
        (False, 3, 256, 256, 2, False, 8, 1, 2, 1, 256),
        (True, 11, 256, 512, 4, True, 8, 2, 4, 2, 256),
        (False, 11, 512, 128, 4, True, 8, 2, 1, 2, 32),
        (True, 20, 256, 256, 16, False, 4, 4, 1, 1, 64),
        (False, 40, 256, 256, 1, True, 4, 8, 2, 3, 128),
        (True, 70, 256, 128, 2, False, 4, 8, 4, 1, 128),
        # splits starting inside a group (11 steps a split, 8 a group), the 8-token chunk of 1024 rows
        (True, 5, 256, 512, 4, False, 8, 1, 2, 3, 1024),
        (False, 16, 256, 1024, 8, True, 8, 2, 4, 5, 512),
        # VB 16 (256 columns a warp: the kernel takes it, no plan chooses it now)
        (True, 5, 512, 512, 4, False, 16, 1, 2, 3, 1024),
        (False, 8, 1024, 256, 2, True, 16, 1, 1, 2, 1024),
        # folded sums of 2 and 4 token tiles (FFN_MMA_W4_FOLD_NT 2 and 4)
        (True, 11, 256, 512, 4, True, 8, 2, 4, 2, 256, 6, 0, True),
        (False, 16, 256, 1024, 8, False, 8, 2, 2, 3, 512, 6, 0, True),
        (True, 20, 256, 256, 16, False, 4, 4, 1, 1, 64, 6, 0, True),
        (False, 27, 256, 512, 4, True, 4, 4, 2, 2, 64, 6, 0, True),
    ]
    sel = int(sys.argv[1]) if len(sys.argv) > 1 else None
    bad = 0
    for i, c in enumerate(cases):
        if sel is not None and i != sel:
            continue
        err = run(DT(c[0]), *c[1:])
        bad += err >= 1e-5
        print(i, c, 'rel err %.3g' % err, 'OK' if err < 1e-5 else 'BAD')
    sys.exit(1 if bad else 0)
