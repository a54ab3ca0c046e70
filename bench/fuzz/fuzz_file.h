/*
 * fuzz_file.h — shared by the state-file fuzz targets: writes a fuzz input
 * to PATH as a state file whose header size field (bytes 24..31) and CRC-32
 * trailer are repaired, so that mutations get past the container checks and
 * reach the section parsers. Inputs shorter than a header are written as
 * they are. Returns 0 on success, -1 when the file cannot be written.
 */
#ifndef HPT_FUZZ_FILE_H
#define HPT_FUZZ_FILE_H

#include "hpt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fuzz_write_repaired(const char *path, const unsigned char *data, size_t size) {
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) return -1;
    memcpy(buf, data, size);
    if (size >= 52) {
        uint64_t fs = size;
        memcpy(buf + 24, &fs, 8);
        uint32_t crc = hpt_crc32(0, buf, size - 4);
        memcpy(buf + size - 4, &crc, 4);
    }
    FILE *f = fopen(path, "wb");
    if (!f) { free(buf); return -1; }
    size_t w = fwrite(buf, 1, size, f);
    free(buf);
    return fclose(f) == 0 && w == size ? 0 : -1;
}

#endif /* HPT_FUZZ_FILE_H */
