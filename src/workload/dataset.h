/*
 * ShareGPT-style datasets (internal to src/workload; exported for the fuzz target): one JSON
 * array of {"conversations": [{"from": "human", "value": text}, {"from": "gpt", "value": text},
 * ...]} (other members are ignored). A conversation gives a request when it has a non-empty
 * human turn ("human" or "user") followed by a model turn ("gpt", "assistant", "chatgpt" or
 * "model"); others are skipped, not errors. The array is read element by element, so a bad
 * element is named by its line and a large file never needs one token array for all of it.
 * Pure: the caller reads the file.
 */
#ifndef ST_WORKLOAD_DATASET_H
#define ST_WORKLOAD_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

#define ST_DATASET_MAX_ELEMS (1u << 24)

struct st_convo {
    uint64_t index;  /* element index in the array (skipped elements count) */
    uint64_t line;   /* 1-based line where the element starts */
    uint64_t prompt; /* first human turn: pool bytes [prompt, prompt + prompt_len) */
    uint64_t prompt_len;
    uint64_t answer; /* the model turn after it */
    uint64_t answer_len;
};

struct st_dataset {
    struct st_convo *convos; /* owned: usable conversations, in file order */
    uint64_t n;
    uint64_t elems;     /* elements in the array */
    struct st_buf pool; /* decoded texts */
};

/*
 * Parses data[0..len) into d (caller-embedded, uninitialised). Returns 0; ST_EPARSE with
 * "NAME:LINE: what was expected" (d is then empty); ST_ETOOBIG over ST_DATASET_MAX_ELEMS.
 * A valid file with no usable conversation is not an error here (n == 0).
 */
int st_dataset_parse(struct st_dataset *d, const char *name, const char *data, size_t len,
                     char *err, size_t errlen) ST_WUR;
void st_dataset_release(struct st_dataset *d);

#endif
