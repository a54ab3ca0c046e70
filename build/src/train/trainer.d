build/src/train/trainer.o: src/train/trainer.c \
 src/train/../kernels/kernels.h src/train/../model/model.h include/hpt.h \
 src/train/../model/../base/base.h src/train/optim.h
src/train/../kernels/kernels.h:
src/train/../model/model.h:
include/hpt.h:
src/train/../model/../base/base.h:
src/train/optim.h:
