build/src/base/io.o: src/base/io.c src/base/base.h include/hpt.h
src/base/base.h:
include/hpt.h:
