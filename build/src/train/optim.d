build/src/train/optim.o: src/train/optim.c src/train/optim.h \
 src/train/../model/model.h include/hpt.h \
 src/train/../model/../base/base.h src/train/../kernels/kernels.h
src/train/optim.h:
src/train/../model/model.h:
include/hpt.h:
src/train/../model/../base/base.h:
src/train/../kernels/kernels.h:
