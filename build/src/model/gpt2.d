build/src/model/gpt2.o: src/model/gpt2.c src/model/../kernels/kernels.h \
 src/model/model.h include/hpt.h src/model/../base/base.h
src/model/../kernels/kernels.h:
src/model/model.h:
include/hpt.h:
src/model/../base/base.h:
