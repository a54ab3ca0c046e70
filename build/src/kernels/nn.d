build/src/kernels/nn.o: src/kernels/nn.c src/kernels/kernels.h \
 src/kernels/vmath.h
src/kernels/kernels.h:
src/kernels/vmath.h:
