/* Tuning values of the gated-delta kernels (gated_delta.cu, gated_delta_tc.cu). */
#ifndef RUDNN_GATED_DELTA_TUNING_H
#define RUDNN_GATED_DELTA_TUNING_H

/* Value columns a tc_state block owns: the serial kernel's blocks a head (V / cols). Every block
 * streams the chunk's whole W and K whatever its columns, so narrower blocks cost bytes but split
 * the serial chain's work over more SMs. H200 (bf16, K = V = 128, chunk 64): B 1, H 8, T 32768
 * 1.94 ms with 32 columns, 1.35 with 16; B 8, H 16, T 4096 0.65 ms with 32, 0.89 with 16. So 16
 * (FEW) where the 32-column blocks would not fill the SMs, else 32. */
#ifndef GDR_TC_STATE_COLS
#define GDR_TC_STATE_COLS 32
#endif
#ifndef GDR_TC_STATE_COLS_FEW
#define GDR_TC_STATE_COLS_FEW 16
#endif

#endif
