/*
 * libFuzzer target for src/proto/chunk.c. The input is one event payload. It is decoded with and
 * without a text buffer; both must agree, the text must be as long as content_bytes and valid
 * UTF-8, and every fixed-size string field must be terminated.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "proto/chunk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_terminated(const char *s, size_t cap)
{
    if (memchr(s, '\0', cap) == NULL) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct st_json scratch;
    struct st_chunk a, b;
    struct st_buf text;
    st_json_init(&scratch, 4096);
    st_buf_init(&text);
    int ra = st_chunk_decode(&scratch, (const char *)data, size, &a, &text);
    int rb = st_chunk_decode(&scratch, (const char *)data, size, &b, NULL);
    if (ra != rb) {
        abort();
    }
    if (ra == 0) {
        if (a.kind != b.kind || a.content_bytes != b.content_bytes || a.content_bytes != text.len ||
            a.has_content != (text.len > 0) || a.finished != b.finished ||
            a.prompt_tokens != b.prompt_tokens || a.completion_tokens != b.completion_tokens ||
            a.cached_tokens != b.cached_tokens || a.chunk_tokens != b.chunk_tokens ||
            a.error_code != b.error_code) {
            abort();
        }
        if (!st_utf8_valid(st_buf_str(&text), text.len)) {
            abort();
        }
        check_terminated(a.finish_reason, sizeof(a.finish_reason));
        check_terminated(a.error_message, sizeof(a.error_message));
        check_terminated(a.error_type, sizeof(a.error_type));
        if (!st_utf8_valid(a.error_message, strlen(a.error_message)) ||
            !st_utf8_valid(a.finish_reason, strlen(a.finish_reason))) {
            abort();
        }
        if (strcmp(a.error_message, b.error_message) != 0 ||
            strcmp(a.finish_reason, b.finish_reason) != 0) {
            abort();
        }
    }
    st_buf_release(&text);
    st_json_release(&scratch);
    return 0;
}
