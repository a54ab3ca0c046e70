build/src/model/model.o: src/model/model.c src/model/model.h \
 include/hpt.h src/model/../base/base.h
src/model/model.h:
include/hpt.h:
src/model/../base/base.h:
