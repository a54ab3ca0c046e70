build/src/kernels/attention.o: src/kernels/attention.c \
 src/kernels/kernels.h src/kernels/vmath.h
src/kernels/kernels.h:
src/kernels/vmath.h:
