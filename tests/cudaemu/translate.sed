# translate.sed — a .cu file into C++ for the CPU emulator (make CUDA=emu):
# the two constructs of CUDA's that are not C++. Lines are kept one for one,
# so the compiler's line numbers are the .cu file's (with the #line the
# Makefile puts first).
#   k<<<grid, block[, shm]>>>(args)  ->  hpt_emu_launch(k, hpt_emu_cfg(grid, block[, shm]), args)
s/\([A-Za-z_][A-Za-z0-9_]*\(<[^<>]*>\)\{0,1\}\)<<<\(.*\)>>>()/hpt_emu_launch(\1, hpt_emu_cfg(\3))/g
s/\([A-Za-z_][A-Za-z0-9_]*\(<[^<>]*>\)\{0,1\}\)<<<\(.*\)>>>(/hpt_emu_launch(\1, hpt_emu_cfg(\3), /g
#   extern __shared__ T name[];  ->  T *name = (T *)hpt_emu_dynamic_shared();
#   (an __align__(N) there is dropped: the emulator's shared memory is 1024-byte aligned)
s/extern __shared__ \(__align__([0-9]*) \)\{0,1\}\([A-Za-z_][A-Za-z0-9_ ]*[A-Za-z0-9_]\) \([A-Za-z_][A-Za-z0-9_]*\)\[\];/\2 *\3 = (\2 *)hpt_emu_dynamic_shared();/
#   __shared__ T name[dims];  ->  static T name[dims]; registered once, so that
#   the scheduler can fill it with NaN at every block's start (shared memory
#   starts as garbage on a GPU, and a kernel that reads a value left over
#   from another block, or another launch, has a bug)
s/^\([ \t]*\)__shared__ \([A-Za-z_][A-Za-z0-9_ ]*[A-Za-z0-9_]\) \([A-Za-z_][A-Za-z0-9_]*\)\(\(\[[^];]*\]\)*\);/\1static \2 \3\4; static const int hpt_emu_shared_\3 = hpt_emu_shared_register(\&\3, sizeof \3); (void)hpt_emu_shared_\3;/
s/^\([ \t]*\)__shared__ \([A-Za-z_][A-Za-z0-9_ ]*[A-Za-z0-9_]\) \([A-Za-z_][A-Za-z0-9_]*\)\(\(\[[^];]*\]\)*\), \([A-Za-z_][A-Za-z0-9_]*\)\(\(\[[^];]*\]\)*\);/\1static \2 \3\4, \6\7; static const int hpt_emu_shared_\3 = hpt_emu_shared_register(\&\3, sizeof \3) + hpt_emu_shared_register(\&\6, sizeof \6); (void)hpt_emu_shared_\3;/
