build/src/train/text.o: src/train/text.c src/train/../base/base.h \
 include/hpt.h
src/train/../base/base.h:
include/hpt.h:
