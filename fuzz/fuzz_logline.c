/*
 * libFuzzer target for src/proto/logline.c. The input is a start-up log. Each of its lines is
 * parsed alone from a heap block of its exact size, then the whole log is scanned; the scan must
 * agree with the lines: its engine is that of the first pool line, it counts exactly the pool
 * lines of that engine, its total is the sum of its ranks, and its quoted line is printable and
 * terminated.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/logline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int engine_of(enum st_logline_kind k)
{
    switch (k) {
    case ST_LOGLINE_VLLM_KV:
        return ST_LOGLINE_ENGINE_VLLM;
    case ST_LOGLINE_SGLANG_ALLOC:
    case ST_LOGLINE_SGLANG_MAX:
        return ST_LOGLINE_ENGINE_SGLANG;
    case ST_LOGLINE_LLAMACPP_KV:
        return ST_LOGLINE_ENGINE_LLAMACPP;
    default:
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *log = (const char *)data;
    int first = 0;
    uint32_t lines_of_first = 0;
    size_t at = 0;
    while (at < size) {
        size_t eol = at;
        while (eol < size && log[eol] != '\n' && log[eol] != '\r') {
            eol++;
        }
        char *line = malloc(eol - at ? eol - at : 1);
        if (!line) {
            abort();
        }
        memcpy(line, log + at, eol - at);
        struct st_logline_hit h;
        if (st_logline_parse(line, eol - at, &h)) {
            int e = engine_of(h.kind);
            if (h.kind == ST_LOGLINE_LLAMACPP_KV && h.streams == 0) {
                abort();
            }
            if (!first) {
                first = e;
            }
            lines_of_first += e == first;
        }
        free(line);
        at = eol < size && log[eol] == '\r' && eol + 1 < size && log[eol + 1] == '\n' ? eol + 2
                                                                                      : eol + 1;
    }
    struct st_logline_pool out;
    int rc = st_logline_scan(log, size, &out);
    if (rc == ST_ENOTFOUND) {
        if (first) {
            abort();
        }
        return 0;
    }
    if (rc == ST_ETOOBIG) {
        if (!first || out.ranks != 0) {
            abort();
        }
        return 0;
    }
    if (rc != 0 || (int)out.engine != first || out.lines != lines_of_first || out.ranks == 0 ||
        out.ranks > ST_LOGLINE_MAX_RANKS || out.line_no == 0) {
        abort();
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < out.ranks; i++) {
        total += out.rank_tokens[i];
    }
    if (total != out.total_tokens || memchr(out.line, '\0', sizeof(out.line)) == NULL) {
        abort();
    }
    for (size_t i = 0; out.line[i]; i++) {
        if (out.line[i] < 0x20 || out.line[i] > 0x7e) {
            abort();
        }
    }
    return 0;
}
