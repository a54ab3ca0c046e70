build/src/train/weights.o: src/train/weights.c src/train/../model/model.h \
 include/hpt.h src/train/../model/../base/base.h
src/train/../model/model.h:
include/hpt.h:
src/train/../model/../base/base.h:
