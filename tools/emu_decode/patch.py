"""Makes dec_emu.cpp in the current folder: backends/cuda/attention_decode.cu for the host (run.sh
says why), with its headers copied beside it. Argument: the repository root."""
import shutil
import sys

root = sys.argv[1]
src = root + '/backends/cuda/'
for f in ['attention.cuh', 'elem.cuh', 'attention_tuning.h']:
    shutil.copy(src + f, f)
s = open(src + 'attention_decode.cu').read()


def swap(old, new):
    global s
    if old not in s:
        sys.exit('emu_decode: attention_decode.cu no longer has: ' + old.splitlines()[0])
    s = s.replace(old, new)


# the mma.sync helpers -> emulated ones (emu_mma.h)
begin = '#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n#define DEC_HAS_MMA 1'
end = '#else\n#define DEC_HAS_MMA 0\n#endif'
if begin not in s or end not in s:
    sys.exit('emu_decode: the MMA helper block moved')
a, b = s.index(begin), s.index(end)
s = s[:a] + '#define DEC_HAS_MMA 1\n#include "emu_mma.h"\n' + s[b + len(end):]
swap('extern __shared__ __align__(16) unsigned char dec_smem[];', 'unsigned char *dec_smem = emu_smem;')
swap('__shared__ float part[ATT_DEC_MAX_SPLITS], weight[ATT_DEC_MAX_SPLITS];',
     'float *part = (float *)emu_smem, *weight = part + ATT_DEC_MAX_SPLITS;')
swap('    *(uint4 *)dst = valid ? *(const uint4 *)src : make_uint4(0u, 0u, 0u, 0u);', '    emu_cp16(dst, src, valid);')
swap('#else\n    (void)n;\n#endif', '#else\n    emu_wait(n);\n#endif')
# the launchers (CUDA runtime calls) are the driver's business
cut = '} // namespace\n\nconst char *rdg_att_decode_unfit'
if cut not in s:
    sys.exit('emu_decode: the public launchers moved')
s = s[:s.index(cut)] + '} // namespace\n'
if '__shared__' in s:
    sys.exit('emu_decode: a __shared__ declaration is left')
open('dec_emu.cpp', 'w').write(s + '\n#include "driver.inc"\n')
