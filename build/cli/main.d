build/cli/main.o: cli/main.c include/hpt.h
include/hpt.h:
