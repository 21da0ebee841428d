/*
 * libFuzzer target for the answers src/target/server.c reads from a server: GET /v1/models,
 * /get_server_info (and /server_info), /props, /info and the tokenize routes, through
 * st_target_parse_answer, the pure entry st_target_open, st_target_tokenize and st_target_pool
 * use. The input, copied into a heap block of its exact size, is read as an answer of every
 * kind. Invariants: a refused answer leaves the facts zeroed; strings are terminated within
 * their fields; a pool has at least one rank, and one not summed is the rank's pool times the
 * ranks (dp_size at most 4096); parsing the same bytes again gives the same facts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "target/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int zeroed(const struct st_target_facts *f)
{
    static const struct st_target_facts zero;
    return memcmp(f, &zero, sizeof(zero)) == 0;
}

static void check(enum st_target_answer kind, const struct st_target_facts *f)
{
    if (!memchr(f->model, '\0', sizeof(f->model)) ||
        !memchr(f->owned_by, '\0', sizeof(f->owned_by))) {
        abort();
    }
    if (kind != ST_TARGET_ANSWER_MODELS && (f->model[0] || f->owned_by[0] || f->max_model_len)) {
        abort();
    }
    if (kind == ST_TARGET_ANSWER_SERVER_INFO) {
        if (f->ranks == 0 ||
            (!f->summed && (f->ranks > 4096 || f->total_tokens != f->rank_tokens * f->ranks))) {
            abort();
        }
    } else if (f->ranks || f->rank_tokens || f->total_tokens || f->summed) {
        abort();
    }
    if (kind != ST_TARGET_ANSWER_PROPS && (f->total_slots || f->slot_n_ctx)) {
        abort();
    }
    if (kind != ST_TARGET_ANSWER_TOKENIZE && f->tokens) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        abort();
    }
    memcpy(copy, data, size);
    for (int k = ST_TARGET_ANSWER_MODELS; k <= ST_TARGET_ANSWER_TOKENIZE; k++) {
        struct st_target_facts f, g;
        int rc = st_target_parse_answer((enum st_target_answer)k, copy, size, &f);
        int rc2 = st_target_parse_answer((enum st_target_answer)k, copy, size, &g);
        if (rc != rc2 || memcmp(&f, &g, sizeof(f)) != 0) {
            abort();
        }
        if (rc == 0) {
            check((enum st_target_answer)k, &f);
        } else if (rc != ST_EPARSE || !zeroed(&f)) {
            abort();
        }
    }
    free(copy);
    return 0;
}
